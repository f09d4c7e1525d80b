/*
 * stream.c - streaming calls: the engine that the generic stream
 * (cetcd_stream_*, at the end of this file) and the Watch stream (watch.c)
 * share, see client__stream_* in client_int.h.
 *
 * A stream is one gRPC call and its four kinds of operation, each with its
 * own completion tag (gRPC core allows one batch of each kind in flight):
 *   START   send initial metadata (once, at open)
 *   STATUS  receive the final status (once, at open; completes at the end)
 *   RECV    receive initial metadata + the first message, then one
 *           message per batch, re-armed after each unless the poll buffer
 *           is full (that is the back-pressure: HTTP/2 flow control stops
 *           the server while nobody reads)
 *   SEND    one request, or the half-close once every request is written;
 *           the next request waits in a bounded ring
 *   WAKE    a batch of no operations, which gRPC completes at once: how a
 *           thread that resumes a paused stream (or closes one whose
 *           on_close is still due) gets the queue's thread to deliver
 * The tags complete on the stream's own completion queue (poll mode,
 * drained inside client__stream_poll) or on an async queue (callback mode,
 * drained by cetcd_async_queue_run).  A mutex guards the state, since
 * sends may come from any thread; callbacks run without it.  The stream
 * is freed once it is closing and no operation is outstanding.
 *
 * Pause (callback mode, raw streams): no RECV is armed while paused.  The
 * RECV armed before the pause may still bring a message, which is held
 * ("parked") and delivered after the resume by a WAKE, before the next
 * RECV is armed, so the order stays the server's.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/alloc.h>

#include "client/client_int.h"
#include "util/mem.h"

enum { TAG_START, TAG_STATUS, TAG_RECV, TAG_SEND, TAG_WAKE, TAG_N };

/* One operation kind's completion tag. */
struct stream_tag {
    struct client__tag base; /* first: what the run loop calls */
    struct cetcd_stream *s;  /* the stream */
    int kind;                /* TAG_* */
};

/* The stream.  Fields below mu are guarded by it; those above are set at
 * open and read-only after. */
struct cetcd_stream {
    struct client__stream_cfg cfg;    /* hooks, contexts, bounds (method
                                         and what not kept) */
    grpc_call *call;                  /* the call */
    grpc_completion_queue *own_cq;    /* poll mode: ours; else NULL */
    bool held;                        /* we hold cfg.queue (pending + 1) */
    struct stream_tag tags[TAG_N];    /* one per operation kind */
    grpc_metadata md[CLIENT_MD_MAX];  /* outgoing metadata (token, extra;
                                         or cfg.md's copy) */
    size_t md_len;                    /* used entries of md */
    pthread_mutex_t mu;               /* guards what follows */
    int outstanding;                  /* batches started, not completed */
    bool recv_armed;                  /* a RECV batch is in flight */
    bool sending;                     /* a SEND batch is in flight */
    bool half_close;                  /* close_send was asked */
    bool close_sent;                  /* its batch was started */
    bool ended;                       /* no more responses will come */
    bool closing;                     /* close was called */
    bool silent;                      /* the open failed: no on_close */
    bool dispatching;                 /* a handler runs callbacks */
    bool final_set;                   /* final holds the outcome */
    bool paused;                      /* no RECV armed (pause) */
    void *parked;                     /* callback mode: an object received
                                         while paused, not yet delivered */
    bool waking;                      /* a WAKE batch is in flight */
    bool close_reported;              /* on_close was run (or is due in the
                                         running handler) */
    grpc_byte_buffer *send_buf;       /* the request being sent */
    grpc_byte_buffer **sendq;         /* ring of cfg.send_max waiting */
    size_t send_head, send_len;       /* ring position and fill */
    void **buf;                       /* poll ring of cfg.buffer_max */
    size_t buf_head, buf_len;         /* ring position and fill */
    grpc_metadata_array init_md;      /* received initial metadata */
    bool init_md_asked;               /* the first RECV asked for it */
    grpc_byte_buffer *recv_msg;       /* the message RECV received */
    grpc_metadata_array trail_md;     /* received trailing metadata */
    grpc_status_code status;          /* the call's status (STATUS) */
    grpc_slice details;               /* its message */
    const char *error_string;         /* the core's debug string */
    struct cetcd_status final;        /* the outcome poll reports */
};

static void on_complete(struct client__tag *tag, int ok);

/* start_batch starts ops with tag kind; mu held.  Returns 0 or INTERNAL. */
static int start_batch(struct cetcd_stream *s, grpc_op *ops, size_t n,
                       int kind)
{
    grpc_call_error err;

    assert(kind >= 0 && kind < TAG_N);
    err = grpc_call_start_batch(s->call, ops, n, &s->tags[kind], NULL);
    if (err != GRPC_CALL_OK)
        return CETCD_INTERNAL;
    s->outstanding++;
    return 0;
}

/* recv_arm starts the next RECV when one may run; mu held. */
static void recv_arm(struct cetcd_stream *s)
{
    grpc_op ops[2];
    size_t n = 0;

    if (s->recv_armed || s->ended || s->closing || s->paused ||
        s->parked != NULL)
        return;
    if (s->own_cq != NULL && s->buf_len >= s->cfg.buffer_max)
        return; /* full: resumed by poll */
    memset(ops, 0, sizeof(ops));
    if (!s->init_md_asked) {
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n++].data.recv_initial_metadata.recv_initial_metadata =
            &s->init_md;
        s->init_md_asked = true;
    }
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &s->recv_msg;
    s->recv_msg = NULL;
    if (start_batch(s, ops, n, TAG_RECV) == 0)
        s->recv_armed = true;
}

/* send_start sends buf now; mu held, no SEND in flight.  On failure buf
 * is destroyed. */
static int send_start(struct cetcd_stream *s, grpc_byte_buffer *buf)
{
    grpc_op op;

    assert(!s->sending && s->send_buf == NULL);
    assert(!s->close_sent);
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = buf;
    s->send_buf = buf;
    if (start_batch(s, &op, 1, TAG_SEND) != 0) {
        s->send_buf = NULL;
        grpc_byte_buffer_destroy(buf);
        return CETCD_INTERNAL;
    }
    s->sending = true;
    return 0;
}

/* close_start half-closes now; mu held, no SEND in flight, none waiting.
 * A half-close after a failed send is never retried. */
static int close_start(struct cetcd_stream *s)
{
    grpc_op op;

    assert(!s->sending && s->send_len == 0);
    assert(s->half_close && !s->close_sent);
    s->close_sent = true;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (start_batch(s, &op, 1, TAG_SEND) != 0)
        return CETCD_INTERNAL;
    s->sending = true;
    return 0;
}

/* final_set_once records the stream's outcome (the first one wins). */
static void final_set_once(struct cetcd_stream *s, int code,
                           const char *msg, size_t len)
{
    if (s->final_set)
        return;
    s->final_set = true;
    client__status_set(&s->final, code, "%.*s", (int)len, msg);
}

/* status_take records the call's status: the server's message (etcd's
 * error text), else the core's, else the code's name; "" for OK. */
static void status_take(struct cetcd_stream *s)
{
    size_t len = GRPC_SLICE_LENGTH(s->details);
    const char *m = (const char *)GRPC_SLICE_START_PTR(s->details);
    int code = (int)s->status;

    if (code == 0 && !s->cfg.ok_is_cancelled) {
        final_set_once(s, 0, "", 0);
        return;
    }
    if (code == 0)
        code = CETCD_CANCELLED;
    if (len == 0) {
        m = s->error_string ? s->error_string : cetcd_code_name(code);
        len = strlen(m);
    }
    final_set_once(s, code, m, len);
}

/* recv_take decodes the received message; mu held.  Returns the object,
 * or NULL at the end of the stream or on a bad message (which ends it). */
static void *recv_take(struct cetcd_stream *s)
{
    void *obj = NULL;
    grpc_byte_buffer_reader rd;
    grpc_slice sl;
    int rc = CETCD_INTERNAL;
    char msg[128];

    if (s->recv_msg == NULL)
        return NULL; /* the server closed: STATUS follows */
    if (grpc_byte_buffer_reader_init(&rd, s->recv_msg)) {
        sl = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        rc = s->cfg.hooks->decode(s->cfg.decode_ctx, GRPC_SLICE_START_PTR(sl),
                                  GRPC_SLICE_LENGTH(sl), &obj);
        grpc_slice_unref(sl);
    }
    grpc_byte_buffer_destroy(s->recv_msg);
    s->recv_msg = NULL;
    if (rc != 0) {
        assert(obj == NULL);
        snprintf(msg, sizeof(msg), "cannot decode %s", s->cfg.what);
        final_set_once(s, rc, msg, strlen(msg));
        s->ended = true;
        grpc_call_cancel(s->call, NULL);
    }
    return obj;
}

/* send_done frees the sent request and starts the next one, or the
 * half-close once none waits; mu held. */
static void send_done(struct cetcd_stream *s, int ok)
{
    grpc_byte_buffer *next;

    if (s->send_buf != NULL)
        grpc_byte_buffer_destroy(s->send_buf);
    s->send_buf = NULL;
    s->sending = false;
    while (s->send_len > 0) {
        next = s->sendq[s->send_head];
        s->send_head = (s->send_head + 1) % s->cfg.send_max;
        s->send_len--;
        if (ok && !s->ended && send_start(s, next) == 0)
            return;
        if (!ok || s->ended)
            grpc_byte_buffer_destroy(next);
    }
    if (ok && !s->ended && s->half_close && !s->close_sent)
        close_start(s);
}

static void stream_free(struct cetcd_stream *s);

/* handle runs one completion; mu held on entry and exit.  *obj_out gets
 * an object for the callback (callback mode). */
static void handle(struct cetcd_stream *s, int kind, int ok, void **obj_out)
{
    void *obj;

    assert(s->outstanding > 0);
    s->outstanding--;
    switch (kind) {
    case TAG_START:
        break;
    case TAG_STATUS:
        status_take(s);
        s->ended = true;
        break;
    case TAG_SEND:
        send_done(s, ok);
        break;
    case TAG_WAKE:
        s->waking = false;
        if (s->parked == NULL || s->paused || s->closing)
            break; /* paused again: the next resume wakes; closed: dropped */
        *obj_out = s->parked;
        s->parked = NULL;
        recv_arm(s);
        break;
    default:
        s->recv_armed = false;
        obj = ok ? recv_take(s) : NULL;
        if (obj == NULL)
            break;
        if (s->own_cq != NULL) {
            assert(s->buf_len < s->cfg.buffer_max);
            s->buf[(s->buf_head + s->buf_len) % s->cfg.buffer_max] = obj;
            s->buf_len++;
        } else if (s->paused) {
            assert(s->parked == NULL);
            s->parked = obj; /* delivered after the resume */
        } else {
            *obj_out = obj;
        }
        recv_arm(s);
    }
}

/* wake_start starts a WAKE batch (no operations: gRPC completes it at
 * once on the stream's queue); mu held.  Returns 0 or INTERNAL. */
static int wake_start(struct cetcd_stream *s)
{
    grpc_op none;

    assert(s->call != NULL && !s->waking);
    memset(&none, 0, sizeof(none));
    if (start_batch(s, &none, 0, TAG_WAKE) != 0)
        return CETCD_INTERNAL;
    s->waking = true;
    return 0;
}

/* end_due says whether the end is to be reported now, and marks it
 * reported; mu held.  It is once, when nothing is outstanding and no
 * parked object waits for a resume (a close drops it); never for a
 * stream whose open failed. */
static bool end_due(struct cetcd_stream *s)
{
    if (s->close_reported || s->outstanding != 0 ||
        (s->parked != NULL && !s->closing))
        return false;
    s->close_reported = true;
    return !s->silent;
}

/* on_complete is the tags' handler: handle, then run the callbacks
 * without the lock, then free the stream if it is closed and idle (a
 * close that came while the callbacks ran may make the end due only
 * then). */
static void on_complete(struct client__tag *tag, int ok)
{
    struct stream_tag *t = (struct stream_tag *)tag;
    struct cetcd_stream *s = t->s;
    const struct client__stream_hooks *h = s->cfg.hooks;
    void *obj = NULL;
    bool done, report;

    pthread_mutex_lock(&s->mu);
    handle(s, t->kind, ok, &obj);
    report = end_due(s);
    s->dispatching = s->own_cq == NULL;
    pthread_mutex_unlock(&s->mu);
    if (s->own_cq != NULL)
        return; /* poll mode: the poller or closer looks at the state */
    if (obj != NULL)
        h->on_msg(s->cfg.ctx, obj);
    if (report && h->on_close != NULL)
        h->on_close(s->cfg.ctx, &s->final);
    pthread_mutex_lock(&s->mu);
    s->dispatching = false;
    done = s->closing && s->outstanding == 0;
    report = done && end_due(s);
    pthread_mutex_unlock(&s->mu);
    if (report && h->on_close != NULL)
        h->on_close(s->cfg.ctx, &s->final);
    if (done)
        stream_free(s);
}

/* stream_alloc makes a stream with its rings and queue, no call yet. */
static struct cetcd_stream *stream_alloc(const struct client__stream_cfg *cfg)
{
    struct cetcd_stream *s = mem_calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->cfg = *cfg;
    s->cfg.method = NULL; /* borrowed for the open only */
    s->sendq = mem_calloc(cfg->send_max, sizeof(*s->sendq));
    if (cfg->queue == NULL) {
        s->buf = mem_calloc(cfg->buffer_max, sizeof(*s->buf));
        s->own_cq = grpc_completion_queue_create_for_next(NULL);
    }
    for (int k = 0; k < TAG_N; k++)
        s->tags[k] = (struct stream_tag){{on_complete}, s, k};
    pthread_mutex_init(&s->mu, NULL);
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->details = grpc_empty_slice();
    if (s->sendq == NULL || (cfg->queue == NULL &&
                             (s->buf == NULL || s->own_cq == NULL))) {
        stream_free(s);
        return NULL;
    }
    if (cfg->queue != NULL)
        client__queue_hold(cfg->queue);
    s->held = cfg->queue != NULL;
    return s;
}

static void stream_free(struct cetcd_stream *s)
{
    void (*release)(void *) = s->cfg.hooks->release;
    void *ctx = s->cfg.ctx;

    assert(s->outstanding == 0);
    if (s->call != NULL)
        grpc_call_unref(s->call);
    for (size_t i = 0; i < s->send_len; i++)
        grpc_byte_buffer_destroy(
            s->sendq[(s->send_head + i) % s->cfg.send_max]);
    for (size_t i = 0; i < s->buf_len; i++)
        s->cfg.hooks->obj_free(
            s->buf[(s->buf_head + i) % s->cfg.buffer_max]);
    if (s->parked != NULL)
        s->cfg.hooks->obj_free(s->parked);
    for (size_t i = 0; i < s->md_len; i++) {
        grpc_slice_unref(s->md[i].key);
        grpc_slice_unref(s->md[i].value);
    }
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    grpc_slice_unref(s->details);
    gpr_free((void *)s->error_string);
    if (s->own_cq != NULL) {
        grpc_completion_queue_shutdown(s->own_cq);
        while (grpc_completion_queue_next(
                   s->own_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                   .type != GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(s->own_cq);
    }
    if (s->held)
        client__queue_release(s->cfg.queue);
    pthread_mutex_destroy(&s->mu);
    mem_free(s->sendq);
    mem_free(s->buf);
    mem_free(s);
    if (release != NULL)
        release(ctx);
}

/* md_fill sets the outgoing metadata: cfg.md's copy if given (then
 * forgotten: it was borrowed for the open), else as unary calls send it
 * (call.c): the token, and with md_extra the client's extra pair. */
static void md_fill(struct cetcd_client *c, struct cetcd_stream *s)
{
    assert(s->md_len == 0);
    if (s->cfg.md != NULL) {
        assert(s->cfg.md_n <= CLIENT_MD_MAX);
        s->md_len = client__md_set(s->md, s->cfg.md, s->cfg.md_n);
        s->cfg.md = NULL;
        return;
    }
    if (c->token != NULL) {
        s->md[0].key = grpc_slice_from_static_string("token");
        s->md[0].value = grpc_slice_from_copied_string(c->token);
        s->md_len = 1;
    }
    if (s->cfg.md_extra && c->md_key != NULL) {
        s->md[s->md_len].key = grpc_slice_from_static_string(c->md_key);
        s->md[s->md_len].value = grpc_slice_from_copied_string(c->md_value);
        s->md_len++;
    }
}

/* call_start creates the call and starts START, STATUS and RECV; mu held. */
static int call_start(struct cetcd_client *c, struct cetcd_stream *s,
                      const char *method_path)
{
    size_t ep = atomic_load(&c->cur);
    grpc_slice method = grpc_slice_from_copied_string(method_path);
    int64_t dl = s->cfg.deadline_mono_ns;
    grpc_op op[1];

    assert(ep < c->n_eps);
    md_fill(c, s);
    s->call = grpc_channel_create_call(
        c->eps[ep].channel, NULL, GRPC_PROPAGATE_DEFAULTS,
        s->own_cq != NULL ? s->own_cq : client__queue_cq(s->cfg.queue),
        method, NULL,
        dl > 0 && dl < INT64_MAX ? client__deadline_mono(dl)
                                 : client__deadline(s->cfg.timeout_ms),
        NULL);
    grpc_slice_unref(method);
    if (s->call == NULL)
        return CETCD_INTERNAL;
    memset(op, 0, sizeof(op));
    op[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    op[0].data.send_initial_metadata.count = s->md_len;
    op[0].data.send_initial_metadata.metadata = s->md;
    if (start_batch(s, op, 1, TAG_START) != 0)
        return CETCD_INTERNAL;
    memset(op, 0, sizeof(op));
    op[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op[0].data.recv_status_on_client.trailing_metadata = &s->trail_md;
    op[0].data.recv_status_on_client.status = &s->status;
    op[0].data.recv_status_on_client.status_details = &s->details;
    op[0].data.recv_status_on_client.error_string = &s->error_string;
    if (start_batch(s, op, 1, TAG_STATUS) != 0)
        return CETCD_INTERNAL;
    recv_arm(s);
    return s->recv_armed ? 0 : CETCD_INTERNAL;
}

int client__stream_open(struct cetcd_client *c,
                        const struct client__stream_cfg *cfg,
                        struct cetcd_stream **stream_out)
{
    struct cetcd_stream *s;
    int rc;

    assert(c != NULL && cfg != NULL && stream_out != NULL);
    assert(cfg->method != NULL && cfg->hooks != NULL && cfg->send_max > 0);
    assert(cfg->queue != NULL || cfg->buffer_max > 0);
    assert(cfg->queue == NULL || cfg->hooks->on_msg != NULL);
    *stream_out = NULL;
    s = stream_alloc(cfg);
    if (s == NULL) {
        if (cfg->hooks->release != NULL)
            cfg->hooks->release(cfg->ctx);
        return CETCD_RESOURCE_EXHAUSTED;
    }
    pthread_mutex_lock(&s->mu);
    rc = call_start(c, s, cfg->method);
    if (rc != 0)
        s->silent = true; /* a failed open reports nothing; set under the
                             lock: a started batch may complete already */
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) {
        client__stream_close(s);
        return rc;
    }
    *stream_out = s;
    return 0;
}

/* drain_one runs one completion of own_cq, waiting until deadline;
 * returns false on timeout. */
static bool drain_one(struct cetcd_stream *s, gpr_timespec deadline)
{
    grpc_event ev = grpc_completion_queue_next(s->own_cq, deadline, NULL);

    if (ev.type != GRPC_OP_COMPLETE)
        return false;
    ((struct client__tag *)ev.tag)->complete(ev.tag, ev.success);
    return true;
}

/* close_wake, in callback mode, when close finds nothing outstanding but
 * the end not yet reported (a paused stream held a message when its call
 * ended), has the queue's thread report it with a WAKE; mu held.  Returns
 * whether the stream may be freed now (no WAKE could start: the report is
 * then the closer's, *report_out set). */
static bool close_wake(struct cetcd_stream *s, bool *report_out)
{
    assert(s->closing && s->outstanding == 0 && !s->dispatching);
    *report_out = false;
    if (s->close_reported || s->silent || s->call == NULL ||
        s->cfg.hooks->on_close == NULL)
        return true;
    if (wake_start(s) == 0)
        return false; /* its completion reports and frees */
    s->close_reported = true;
    *report_out = true;
    return true;
}

void client__stream_close(struct cetcd_stream *s)
{
    bool now, poll_mode, report = false;

    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    assert(!s->closing);
    s->closing = true;
    if (s->call != NULL && s->outstanding > 0)
        grpc_call_cancel(s->call, NULL);
    now = s->outstanding == 0 && !s->dispatching;
    /* Read before unlocking: in callback mode the queue's thread may free
     * the stream as soon as the lock is released. */
    poll_mode = s->own_cq != NULL;
    if (now && !poll_mode)
        now = close_wake(s, &report);
    pthread_mutex_unlock(&s->mu);
    if (!poll_mode) {
        if (report) /* only if gRPC refused a no-op batch */
            s->cfg.hooks->on_close(s->cfg.ctx, &s->final);
        if (now)
            stream_free(s); /* else the last completion frees it */
        return;
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        now = s->outstanding == 0;
        pthread_mutex_unlock(&s->mu);
        if (now)
            break;
        drain_one(s, gpr_inf_future(GPR_CLOCK_REALTIME));
    }
    stream_free(s);
}

void client__stream_pause(struct cetcd_stream *s, bool paused)
{
    assert(s != NULL && s->own_cq == NULL);
    pthread_mutex_lock(&s->mu);
    assert(!s->closing);
    s->paused = paused;
    if (!paused && s->parked != NULL && !s->waking)
        wake_start(s); /* its handler delivers, then arms */
    else if (!paused)
        recv_arm(s);
    assert(s->parked == NULL || !s->recv_armed);
    pthread_mutex_unlock(&s->mu);
}

int client__stream_send(struct cetcd_stream *s, grpc_byte_buffer *buf)
{
    int rc = 0;

    assert(s != NULL && buf != NULL);
    pthread_mutex_lock(&s->mu);
    if (s->ended || s->closing || s->half_close)
        rc = CETCD_FAILED_PRECONDITION;
    else if (!s->sending)
        rc = send_start(s, buf), buf = NULL;
    else if (s->send_len >= s->cfg.send_max)
        rc = CETCD_RESOURCE_EXHAUSTED;
    else {
        s->sendq[(s->send_head + s->send_len) % s->cfg.send_max] = buf;
        s->send_len++;
        buf = NULL;
    }
    assert(s->send_len <= s->cfg.send_max);
    pthread_mutex_unlock(&s->mu);
    if (buf != NULL)
        grpc_byte_buffer_destroy(buf);
    return rc;
}

int client__stream_close_send(struct cetcd_stream *s)
{
    int rc = 0;

    assert(s != NULL);
    pthread_mutex_lock(&s->mu);
    if (!s->half_close && !s->ended && !s->closing) {
        s->half_close = true;
        if (!s->sending)
            rc = close_start(s); /* else send_done starts it */
    }
    assert(s->half_close || s->ended || s->closing);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* poll_take pops a held object or reports the end; mu held.  Returns
 * MSG, END (*final_out set) or TIMEOUT (nothing yet). */
static enum client__stream_got poll_take(struct cetcd_stream *s,
                                         void **obj_out,
                                         struct cetcd_status *final_out)
{
    if (s->buf_len > 0) {
        *obj_out = s->buf[s->buf_head];
        s->buf_head = (s->buf_head + 1) % s->cfg.buffer_max;
        s->buf_len--;
        recv_arm(s);
        return CLIENT_STREAM_MSG;
    }
    if (s->ended && !s->recv_armed && s->final_set) {
        *final_out = s->final;
        return CLIENT_STREAM_END;
    }
    return CLIENT_STREAM_TIMEOUT;
}

enum client__stream_got client__stream_poll(struct cetcd_stream *s,
                                            int timeout_ms, void **obj_out,
                                            struct cetcd_status *final_out)
{
    gpr_timespec deadline = timeout_ms < 0
                                ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                                : client__deadline(timeout_ms);
    enum client__stream_got got;

    assert(s != NULL && s->own_cq != NULL);
    assert(obj_out != NULL && final_out != NULL);
    *obj_out = NULL;
    if (timeout_ms == 0)
        deadline = gpr_now(GPR_CLOCK_MONOTONIC);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        got = poll_take(s, obj_out, final_out);
        pthread_mutex_unlock(&s->mu);
        if (got != CLIENT_STREAM_TIMEOUT)
            return got;
        if (!drain_one(s, deadline))
            return CLIENT_STREAM_TIMEOUT;
    }
}

size_t client__stream_buffered(const struct cetcd_stream *s)
{
    struct cetcd_stream *m = (struct cetcd_stream *)s;
    size_t n;

    assert(s != NULL);
    pthread_mutex_lock(&m->mu);
    n = m->buf_len;
    pthread_mutex_unlock(&m->mu);
    assert(s->own_cq == NULL || n <= s->cfg.buffer_max);
    return n;
}

/* ------------------------------------------------------------------------
 * The generic stream: requests and responses as protobuf-c messages, poll
 * mode only.
 * ---------------------------------------------------------------------- */

static int pb_decode(const void *desc, const uint8_t *data, size_t len,
                     void **obj_out)
{
    *obj_out = protobuf_c_message_unpack(desc, NULL, len, data);
    return *obj_out != NULL ? 0 : CETCD_INTERNAL;
}

static void pb_free(void *obj)
{
    protobuf_c_message_free_unpacked(obj, NULL);
}

static const struct client__stream_hooks pb_hooks = {
    .decode = pb_decode,
    .obj_free = pb_free,
};

int cetcd_stream_open(struct cetcd_client *c, const char *method_path,
                      const ProtobufCMessageDescriptor *resp_desc,
                      const struct cetcd_stream_opts *opts,
                      struct cetcd_stream **stream_out,
                      struct cetcd_status *st)
{
    struct client__stream_cfg cfg = {
        .method = method_path, .hooks = &pb_hooks, .decode_ctx = resp_desc,
        .buffer_max = CETCD_STREAM_BUFFER_DEFAULT,
        .send_max = CETCD_STREAM_SEND_DEFAULT, .md_extra = true};
    int rc;

    if (stream_out != NULL)
        *stream_out = NULL;
    if (c == NULL || method_path == NULL || method_path[0] != '/' ||
        resp_desc == NULL || stream_out == NULL ||
        resp_desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC ||
        (opts != NULL && opts->timeout_ms < 0))
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "bad stream arguments");
    cfg.what = resp_desc->name;
    if (opts != NULL && opts->buffer_max > 0)
        cfg.buffer_max = opts->buffer_max;
    if (opts != NULL && opts->send_max > 0)
        cfg.send_max = opts->send_max;
    if (opts != NULL)
        cfg.timeout_ms = opts->timeout_ms;
    rc = client__stream_open(c, &cfg, stream_out);
    if (rc == CETCD_RESOURCE_EXHAUSTED)
        return client__status_set(st, rc, "no memory");
    if (rc != 0)
        return client__status_set(st, rc, "cannot start the call %s",
                                  method_path);
    assert(*stream_out != NULL);
    return client__status_set(st, 0, "%s", "");
}

int cetcd_stream_send(struct cetcd_stream *s, const ProtobufCMessage *req,
                      struct cetcd_status *st)
{
    grpc_byte_buffer *buf;
    int rc;

    if (s == NULL || req == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "missing argument");
    buf = client__pack(req);
    if (buf == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    rc = client__stream_send(s, buf);
    if (rc == CETCD_FAILED_PRECONDITION)
        return client__status_set(st, rc, "stream has ended or was "
                                          "closed for sending");
    if (rc == CETCD_RESOURCE_EXHAUSTED)
        return client__status_set(st, rc, "%zu requests waiting",
                                  s->cfg.send_max);
    if (rc != 0)
        return client__status_set(st, rc, "cannot send %s",
                                  req->descriptor->name);
    return client__status_set(st, 0, "%s", "");
}

int cetcd_stream_close_send(struct cetcd_stream *s, struct cetcd_status *st)
{
    int rc;

    if (s == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no stream");
    rc = client__stream_close_send(s);
    if (rc != 0)
        return client__status_set(st, rc, "cannot half-close the stream");
    return client__status_set(st, 0, "%s", "");
}

int cetcd_stream_recv(struct cetcd_stream *s, int timeout_ms,
                      ProtobufCMessage **msg_out, struct cetcd_status *st)
{
    struct cetcd_status final;
    void *obj = NULL;

    if (msg_out != NULL)
        *msg_out = NULL;
    if (s == NULL || msg_out == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "missing argument");
    switch (client__stream_poll(s, timeout_ms, &obj, &final)) {
    case CLIENT_STREAM_MSG:
        assert(obj != NULL);
        *msg_out = obj;
        return client__status_set(st, 0, "%s", "");
    case CLIENT_STREAM_END:
        return client__status_set(st, final.code, "%s", final.message);
    default:
        return client__status_set(st, CETCD_STREAM_WAIT_TIMEOUT,
                                  "no response within %d ms", timeout_ms);
    }
}

size_t cetcd_stream_buffered(const struct cetcd_stream *s)
{
    return client__stream_buffered(s);
}

void cetcd_stream_close(struct cetcd_stream *s)
{
    client__stream_close(s);
}
