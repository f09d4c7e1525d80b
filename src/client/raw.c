/*
 * raw.c - raw (byte-level) unary calls and callback-mode streams, for a
 * gRPC proxy (see "Raw calls and streams" in cetcd.h).
 *
 * A raw unary call is one heap object on an async queue, like async.c's
 * calls, but with the request as bytes, its own metadata list and an
 * absolute deadline, and with endpoint failover: an attempt that fails
 * UNAVAILABLE without the server having said so moves the client's
 * current endpoint on, and the call is started again on the next
 * endpoint from the completion handler (the queue's thread) when that is
 * safe (read-only method, or a request that never left).
 *
 * Telling the cases apart relies on the status messages.  Every
 * UNAVAILABLE an etcd (or cetcd) server sends is one of its own errors,
 * whose text starts with "etcdserver" ("etcdserver: no leader", ...); the
 * gRPC C core words its own failures otherwise, and marks even a broken
 * connection as "received from peer" ("Socket closed"), so the core's
 * error string cannot tell.  A call that never got a connection fails
 * with the load balancer's "failed to connect to all addresses": nothing
 * was sent.  Any other UNAVAILABLE (the connection broke, GOAWAY, ...) may
 * have reached the server.
 *
 * A raw stream is the streaming engine of stream.c in callback mode with
 * hooks that copy each message's bytes; the public handle adds the
 * owner's callbacks and a closed flag that stops on_msg after close.
 */
#include <assert.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>

#include "client/client_int.h"
#include "util/mem.h"

/* How the status message of an error an etcd server sent starts, and the
 * one of a call that found no connection. */
#define FROM_SERVER "etcdserver"
#define NO_CONNECTION "failed to connect to all addresses"

/* ------------------------------------------------------------------------
 * Shared helpers (declared in client_int.h)
 * ---------------------------------------------------------------------- */

bool client__md_check(const struct cetcd_md *md, size_t n)
{
    if (n > CETCD_RAW_MD_MAX || (md == NULL && n > 0))
        return false;
    for (size_t i = 0; i < n; i++) {
        grpc_slice k, v;
        bool ok;

        if (md[i].key == NULL || md[i].value == NULL ||
            md[i].key[0] == '\0' || strncmp(md[i].key, "grpc-", 5) == 0)
            return false;
        k = grpc_slice_from_static_string(md[i].key);
        v = grpc_slice_from_static_string(md[i].value);
        ok = grpc_header_key_is_legal(k) &&
             (grpc_is_binary_header(k) || grpc_header_nonbin_value_is_legal(v));
        if (!ok)
            return false;
    }
    return true;
}

size_t client__md_set(grpc_metadata *out, const struct cetcd_md *md,
                      size_t n)
{
    assert(n <= CLIENT_MD_MAX);
    assert(md != NULL || n == 0);
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].key = grpc_slice_from_copied_string(md[i].key);
        out[i].value = grpc_slice_from_copied_string(md[i].value);
    }
    return n;
}

gpr_timespec client__deadline_mono(int64_t ns)
{
    struct timespec now;
    int64_t left;

    if (ns <= 0 || ns == INT64_MAX)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    clock_gettime(CLOCK_MONOTONIC, &now);
    left = ns - ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
    if (left < 0)
        left = 0;
    /* gpr's monotonic clock need not share CLOCK_MONOTONIC's origin:
     * carry the time left over. */
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_nanos(left, GPR_TIMESPAN));
}

/* ------------------------------------------------------------------------
 * Raw unary calls
 * ---------------------------------------------------------------------- */

/* One raw unary call in flight, all its attempts; freed after done ran.
 * Touched by the starter until the first batch started, then only by the
 * queue's thread. */
struct raw_call {
    struct client__tag tag;          /* first: the completion tag */
    struct cetcd_client *c;          /* the client */
    struct cetcd_async_queue *q;     /* the queue it runs on */
    cetcd_raw_done_fn done;          /* the callback */
    void *arg;                       /* its argument */
    grpc_slice method;               /* copied method path */
    grpc_slice req;                  /* copied request bytes */
    grpc_metadata md[CLIENT_MD_MAX]; /* outgoing metadata, copied */
    size_t md_len;                   /* used entries of md */
    gpr_timespec deadline;           /* absolute, kept across attempts */
    bool readonly;                   /* the method may be sent again */
    size_t first;                    /* the current endpoint at start */
    size_t attempt;                  /* 0-based attempt number */
    size_t ep;                       /* this attempt's endpoint */
    grpc_call *call;                 /* this attempt's call, or NULL */
    bool expired;                    /* the deadline had passed at the
                                        start: call carries no batch but
                                        an empty one, nothing is sent */
    grpc_byte_buffer *send_buf;      /* this attempt's request */
    struct dial_reply reply;         /* this attempt's reply */
};

static void raw_complete(struct client__tag *tag, int ok);

/* attempt_clear releases what one attempt held. */
static void attempt_clear(struct raw_call *rc)
{
    assert(rc != NULL);
    if (rc->call != NULL) {
        dial_reply_release(&rc->reply);
        grpc_call_unref(rc->call);
    }
    if (rc->send_buf != NULL)
        grpc_byte_buffer_destroy(rc->send_buf);
    rc->call = NULL;
    rc->send_buf = NULL;
}

/* attempt_start starts the whole unary batch on rc->ep; or, when the
 * deadline has passed already, an empty batch that only brings the
 * completion (gRPC would race its deadline timer against a fast server).
 * On error nothing of the attempt is left.  Returns 0,
 * CETCD_RESOURCE_EXHAUSTED, CETCD_INVALID_ARGUMENT (gRPC refused the
 * metadata) or CETCD_INTERNAL. */
static int attempt_start(struct raw_call *rc)
{
    grpc_op ops[DIAL_UNARY_OPS];
    grpc_call_error err;
    size_t n = DIAL_UNARY_OPS;

    assert(rc->call == NULL && rc->send_buf == NULL);
    assert(rc->ep < rc->c->n_eps);
    rc->send_buf = grpc_raw_byte_buffer_create(&rc->req, 1);
    if (rc->send_buf == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    rc->call = grpc_channel_create_call(
        rc->c->eps[rc->ep].channel, NULL, GRPC_PROPAGATE_DEFAULTS,
        client__queue_cq(rc->q), rc->method, NULL, rc->deadline, NULL);
    if (rc->call == NULL) {
        attempt_clear(rc);
        return CETCD_INTERNAL;
    }
    dial_reply_init(&rc->reply);
    dial_unary_ops(ops, rc->md, rc->md_len, rc->send_buf, &rc->reply);
    rc->expired =
        gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), rc->deadline) >= 0;
    if (rc->expired)
        n = 0;
    err = grpc_call_start_batch(rc->call, ops, n, &rc->tag, NULL);
    if (err != GRPC_CALL_OK) {
        attempt_clear(rc);
        return err == GRPC_CALL_ERROR_INVALID_METADATA
                   ? CETCD_INVALID_ARGUMENT
                   : CETCD_INTERNAL;
    }
    return 0;
}

/* raw_call_free releases the call object (no attempt running). */
static void raw_call_free(struct raw_call *rc)
{
    assert(rc->call == NULL);
    for (size_t i = 0; i < rc->md_len; i++) {
        grpc_slice_unref(rc->md[i].key);
        grpc_slice_unref(rc->md[i].value);
    }
    grpc_slice_unref(rc->method);
    grpc_slice_unref(rc->req);
    mem_free(rc);
}

/* attempt_status fills st from the finished attempt: the server's
 * message, else the core's, else the code's name.  Returns the code. */
static int attempt_status(const struct raw_call *rc, int ok,
                          struct cetcd_status *st)
{
    const struct dial_reply *r = &rc->reply;
    size_t len = GRPC_SLICE_LENGTH(r->details);
    int code = (int)r->status;

    if (!ok)
        return client__status_set(st, CETCD_INTERNAL, "batch failed");
    if (rc->expired)
        return client__status_set(st, CETCD_DEADLINE_EXCEEDED,
                                  "Deadline Exceeded");
    if (code == 0 && r->msg == NULL)
        return client__status_set(st, CETCD_INTERNAL, "no reply message");
    if (code == 0)
        return client__status_set(st, 0, "%s", "");
    if (len > 0)
        return client__status_set(
            st, code, "%.*s", (int)len,
            (const char *)GRPC_SLICE_START_PTR(r->details));
    return client__status_set(st, code, "%s",
                              r->error_string ? r->error_string
                                              : cetcd_code_name(code));
}

/* starts_with says whether the len bytes at d start with the string p. */
static bool starts_with(const char *d, size_t len, const char *p)
{
    size_t n = strlen(p);

    return len >= n && memcmp(d, p, n) == 0;
}

/* transport_failed says whether the attempt's UNAVAILABLE is the
 * transport's (not a status the server sent, see the file comment);
 * *unsent_out whether the request certainly never left (no connection
 * was made). */
static bool transport_failed(const struct raw_call *rc, int code,
                             bool *unsent_out)
{
    const struct dial_reply *r = &rc->reply;
    const char *d = (const char *)GRPC_SLICE_START_PTR(r->details);
    size_t len = GRPC_SLICE_LENGTH(r->details);

    *unsent_out = false;
    if (code != CETCD_UNAVAILABLE || rc->call == NULL)
        return false;
    if (starts_with(d, len, FROM_SERVER))
        return false;
    *unsent_out = starts_with(d, len, NO_CONNECTION);
    return true;
}

/* retry_next moves the client's current endpoint off rc->ep after a
 * transport failure (unless another call already did) and starts the
 * next attempt when it is safe and an endpoint is left.  Returns whether
 * an attempt runs again. */
static bool retry_next(struct raw_call *rc, bool unsent)
{
    size_t n = rc->c->n_eps;
    size_t expect = rc->ep;

    atomic_compare_exchange_strong(&rc->c->cur, &expect,
                                   client__failover_order(rc->ep, n, 1));
    if (!rc->readonly && !unsent)
        return false; /* a mutation that may have been applied */
    if (gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), rc->deadline) >= 0)
        return false;
    while (rc->attempt + 1 < n) {
        rc->attempt++;
        rc->ep = client__failover_order(rc->first, n, rc->attempt);
        attempt_clear(rc);
        if (attempt_start(rc) == 0)
            return true;
    }
    return false;
}

/* raw_complete is the tag's handler: the attempt's outcome, a retry, or
 * the callback and the end. */
static void raw_complete(struct client__tag *tag, int ok)
{
    struct raw_call *rc = (struct raw_call *)tag;
    struct cetcd_status st;
    grpc_byte_buffer_reader rd;
    grpc_slice body = grpc_empty_slice();
    static const uint8_t empty[1];
    const uint8_t *resp = NULL;
    bool unsent;
    int code = attempt_status(rc, ok, &st);

    if (ok && transport_failed(rc, code, &unsent)) {
        if (retry_next(rc, unsent))
            return;
    } else if (rc->attempt > 0) {
        atomic_store(&rc->c->cur, rc->ep); /* it answered */
    }
    if (code == 0 && rc->call != NULL &&
        grpc_byte_buffer_reader_init(&rd, rc->reply.msg)) {
        body = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        resp = GRPC_SLICE_LENGTH(body) > 0 ? GRPC_SLICE_START_PTR(body)
                                           : empty;
    } else if (code == 0) {
        code = client__status_set(&st, CETCD_INTERNAL, "bad reply buffer");
    }
    attempt_clear(rc);
    client__queue_release(rc->q);
    rc->done(rc->arg, &st, resp, resp != NULL ? GRPC_SLICE_LENGTH(body) : 0);
    grpc_slice_unref(body);
    raw_call_free(rc);
}

/* raw_call_new makes the call object with its copies (no attempt yet);
 * NULL: no memory. */
static struct raw_call *raw_call_new(struct cetcd_client *c,
                                     const char *method, const uint8_t *req,
                                     size_t len, const struct cetcd_raw_opts *o)
{
    struct raw_call *rc = mem_calloc(1, sizeof(*rc));

    if (rc == NULL)
        return NULL;
    rc->tag.complete = raw_complete;
    rc->c = c;
    rc->method = grpc_slice_from_copied_string(method);
    rc->req = grpc_slice_from_copied_buffer((const char *)req, len);
    if (o != NULL && o->md != NULL) {
        rc->md_len = client__md_set(rc->md, o->md, o->md_n);
    } else {
        struct cetcd_md own[2];
        size_t n = 0;

        if (c->token != NULL)
            own[n++] = (struct cetcd_md){"token", c->token};
        if (c->md_key != NULL)
            own[n++] = (struct cetcd_md){c->md_key, c->md_value};
        rc->md_len = client__md_set(rc->md, own, n);
    }
    if (o != NULL && o->deadline_mono_ns > 0 &&
        o->deadline_mono_ns < INT64_MAX)
        rc->deadline = client__deadline_mono(o->deadline_mono_ns);
    else
        rc->deadline = client__deadline(c->call_timeout_ms);
    rc->readonly = client__method_is_readonly(method);
    rc->first = atomic_load(&c->cur);
    rc->ep = rc->first;
    assert(rc->ep < c->n_eps);
    return rc;
}

int cetcd_async_call_raw(struct cetcd_client *c, struct cetcd_async_queue *q,
                         const char *method_path, const uint8_t *req,
                         size_t len, const struct cetcd_raw_opts *o,
                         cetcd_raw_done_fn done, void *arg)
{
    struct raw_call *rc;
    int rc_start;

    if (c == NULL || q == NULL || method_path == NULL ||
        method_path[0] != '/' || done == NULL || (req == NULL && len > 0))
        return CETCD_INVALID_ARGUMENT;
    if (o != NULL && o->md != NULL && !client__md_check(o->md, o->md_n))
        return CETCD_INVALID_ARGUMENT;
    rc = raw_call_new(c, method_path, req, len, o);
    if (rc == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    rc->q = q;
    rc->done = done;
    rc->arg = arg;
    client__queue_hold(q);
    rc_start = attempt_start(rc);
    if (rc_start != 0) {
        client__queue_release(q);
        raw_call_free(rc);
    }
    return rc_start;
}

/* ------------------------------------------------------------------------
 * Raw streams
 * ---------------------------------------------------------------------- */

/* The public handle: the engine and the owner's callbacks.  Allocated by
 * open, freed by the engine's release hook after the last callback. */
struct cetcd_raw_stream {
    struct cetcd_stream *s;    /* the engine */
    void (*on_msg)(void *arg, const uint8_t *msg, size_t len); /* owner's */
    void (*on_close)(void *arg, const struct cetcd_status *st); /* or NULL */
    void *arg;                 /* passed to both */
    atomic_bool closed;        /* close was called: on_msg no more */
};

/* One received message, as the engine holds it. */
struct raw_msg {
    size_t len;      /* bytes in data */
    uint8_t data[];  /* the message */
};

static int raw_decode(const void *ctx, const uint8_t *data, size_t len,
                      void **obj_out)
{
    struct raw_msg *m = mem_malloc(sizeof(*m) + len);

    (void)ctx;
    *obj_out = m;
    if (m == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    m->len = len;
    if (len > 0)
        memcpy(m->data, data, len);
    return 0;
}

static void raw_obj_free(void *obj)
{
    mem_free(obj);
}

static void raw_on_msg(void *ctx, void *obj)
{
    struct cetcd_raw_stream *rs = ctx;
    struct raw_msg *m = obj;

    if (!atomic_load(&rs->closed))
        rs->on_msg(rs->arg, m->data, m->len);
    mem_free(m);
}

static void raw_on_close(void *ctx, const struct cetcd_status *st)
{
    struct cetcd_raw_stream *rs = ctx;

    if (rs->on_close != NULL)
        rs->on_close(rs->arg, st);
}

static void raw_release(void *ctx)
{
    mem_free(ctx);
}

static const struct client__stream_hooks raw_hooks = {
    .decode = raw_decode,
    .obj_free = raw_obj_free,
    .on_msg = raw_on_msg,
    .on_close = raw_on_close,
    .release = raw_release,
};

int cetcd_raw_stream_open(struct cetcd_client *c, const char *method_path,
                          const struct cetcd_raw_stream_opts *o,
                          struct cetcd_raw_stream **out,
                          struct cetcd_status *st)
{
    struct client__stream_cfg cfg = {
        .method = method_path, .what = "message (no memory)",
        .hooks = &raw_hooks, .md_extra = true};
    struct cetcd_raw_stream *rs;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (c == NULL || method_path == NULL || method_path[0] != '/' ||
        o == NULL || out == NULL || o->queue == NULL || o->on_msg == NULL ||
        (o->md != NULL && !client__md_check(o->md, o->md_n)))
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "bad raw stream arguments");
    rs = mem_calloc(1, sizeof(*rs));
    if (rs == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    rs->on_msg = o->on_msg;
    rs->on_close = o->on_close;
    rs->arg = o->arg;
    atomic_init(&rs->closed, false);
    cfg.ctx = rs;
    cfg.queue = o->queue;
    cfg.send_max = o->send_max > 0 ? o->send_max : CETCD_RAW_SEND_DEFAULT;
    cfg.md = o->md;
    cfg.md_n = o->md != NULL ? o->md_n : 0;
    cfg.deadline_mono_ns = o->deadline_mono_ns;
    /* From here on the engine owns rs (release frees it). */
    rc = client__stream_open(c, &cfg, &rs->s);
    if (rc == CETCD_RESOURCE_EXHAUSTED)
        return client__status_set(st, rc, "no memory");
    if (rc != 0)
        return client__status_set(st, rc, "cannot start the call %s",
                                  method_path);
    *out = rs;
    return client__status_set(st, 0, "%s", "");
}

int cetcd_raw_stream_send(struct cetcd_raw_stream *rs, const uint8_t *msg,
                          size_t len, struct cetcd_status *st)
{
    grpc_slice sl;
    grpc_byte_buffer *buf;
    int rc;

    if (rs == NULL || (msg == NULL && len > 0))
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "missing argument");
    sl = grpc_slice_from_copied_buffer((const char *)msg, len);
    buf = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    if (buf == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    rc = client__stream_send(rs->s, buf);
    if (rc == CETCD_FAILED_PRECONDITION)
        return client__status_set(st, rc, "stream has ended or was "
                                          "closed for sending");
    if (rc == CETCD_RESOURCE_EXHAUSTED)
        return client__status_set(st, rc, "too many requests waiting");
    if (rc != 0)
        return client__status_set(st, rc, "cannot send the message");
    return client__status_set(st, 0, "%s", "");
}

int cetcd_raw_stream_close_send(struct cetcd_raw_stream *rs,
                                struct cetcd_status *st)
{
    int rc;

    if (rs == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no stream");
    rc = client__stream_close_send(rs->s);
    if (rc != 0)
        return client__status_set(st, rc, "cannot half-close the stream");
    return client__status_set(st, 0, "%s", "");
}

void cetcd_raw_stream_pause(struct cetcd_raw_stream *rs, bool paused)
{
    assert(rs != NULL && !atomic_load(&rs->closed));
    client__stream_pause(rs->s, paused);
}

void cetcd_raw_stream_close(struct cetcd_raw_stream *rs)
{
    if (rs == NULL)
        return;
    assert(rs->s != NULL);
    atomic_store(&rs->closed, true);
    client__stream_close(rs->s); /* frees rs too, now or later */
}
