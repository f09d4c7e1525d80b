/*
 * watch.c - a Watch stream: one bidirectional gRPC call and its four kinds
 * of operation, each with its own completion tag (gRPC core allows one
 * batch of each kind in flight):
 *   START   send initial metadata (once, at open)
 *   STATUS  receive the final status (once, at open; completes at the end)
 *   RECV    receive initial metadata + the first message, then one
 *           message per batch, re-armed after each unless the poll buffer
 *           is full (that is the back-pressure: HTTP/2 flow control stops
 *           the server while nobody reads)
 *   SEND    one WatchRequest; the next waits in a bounded ring
 * The tags complete on the stream's own completion queue (poll mode,
 * drained inside cetcd_watch_poll) or on an async queue (callback mode,
 * drained by cetcd_async_queue_run).  A mutex guards the state, since
 * create/cancel may come from any thread; callbacks run without it.  The
 * stream is freed once it is closing and no operation is outstanding.
 */
#include <assert.h>
#include <pthread.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/alloc.h>

#include "client/client_int.h"
#include "util/mem.h"

#define WATCH_METHOD "/etcdserverpb.Watch/Watch"

enum { TAG_START, TAG_STATUS, TAG_RECV, TAG_SEND, TAG_N };

struct cetcd_watch_stream;

/* One operation kind's completion tag. */
struct watch_tag {
    struct client__tag base;   /* first: what the run loop calls */
    struct cetcd_watch_stream *s; /* the stream */
    int kind;                  /* TAG_* */
};

/* The stream.  Fields below mu are guarded by it. */
struct cetcd_watch_stream {
    grpc_call *call;                  /* the Watch call */
    grpc_completion_queue *own_cq;    /* poll mode: ours; else NULL */
    struct cetcd_async_queue *queue;  /* callback mode: the caller's */
    bool held;                        /* we hold queue (pending + 1) */
    struct cetcd_watch_stream_opts o; /* callbacks, arg, bounds */
    struct watch_tag tags[TAG_N];     /* one per operation kind */
    grpc_metadata md[1];              /* outgoing metadata (token) */
    size_t md_len;                    /* used entries of md */
    pthread_mutex_t mu;               /* guards what follows */
    int outstanding;                  /* batches started, not completed */
    bool recv_armed;                  /* a RECV batch is in flight */
    bool sending;                     /* a SEND batch is in flight */
    bool ended;                       /* no more responses will come */
    bool closing;                     /* close was called */
    bool dispatching;                 /* a handler runs callbacks */
    bool final_set;                   /* final holds the outcome */
    grpc_byte_buffer *send_buf;       /* the request being sent */
    grpc_byte_buffer **sendq;         /* ring of o.send_max waiting ones */
    size_t send_head, send_len;       /* ring position and fill */
    struct cetcd_watch_response **buf; /* poll ring of o.buffer_max */
    size_t buf_head, buf_len;         /* ring position and fill */
    grpc_metadata_array init_md;      /* received initial metadata */
    bool init_md_asked;               /* the first RECV asked for it */
    grpc_byte_buffer *recv_msg;       /* the message RECV received */
    grpc_metadata_array trail_md;     /* received trailing metadata */
    grpc_status_code status;          /* the call's status (STATUS) */
    grpc_slice details;               /* its message */
    const char *error_string;         /* the core's debug string */
    struct cetcd_status final;        /* what poll returns at the end */
};

static void on_complete(struct client__tag *tag, int ok);

/* start_batch starts ops with tag kind; mu held.  Returns 0 or INTERNAL. */
static int start_batch(struct cetcd_watch_stream *s, grpc_op *ops, size_t n,
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
static void recv_arm(struct cetcd_watch_stream *s)
{
    grpc_op ops[2];
    size_t n = 0;

    if (s->recv_armed || s->ended || s->closing)
        return;
    if (s->own_cq != NULL && s->buf_len >= s->o.buffer_max)
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

/* send_next sends buf now; mu held, no SEND in flight.  On failure buf is
 * destroyed. */
static int send_start(struct cetcd_watch_stream *s, grpc_byte_buffer *buf)
{
    grpc_op op;

    assert(!s->sending && s->send_buf == NULL);
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

/* final_set_once records the stream's outcome (the first one wins). */
static void final_set_once(struct cetcd_watch_stream *s, int code,
                           const char *msg, size_t len)
{
    if (s->final_set)
        return;
    s->final_set = true;
    client__status_set(&s->final, code, "%.*s", (int)len, msg);
}

static void status_take(struct cetcd_watch_stream *s)
{
    size_t len = GRPC_SLICE_LENGTH(s->details);
    const char *m = (const char *)GRPC_SLICE_START_PTR(s->details);
    int code = (int)s->status;

    if (code == 0)
        code = CETCD_CANCELLED; /* a stream never ends well for a client */
    if (len == 0) {
        m = s->error_string ? s->error_string : cetcd_code_name(code);
        len = strlen(m);
    }
    final_set_once(s, code, m, len);
}

/* recv_take decodes the received message; mu held.  Returns the
 * response, or NULL at the end of the stream or on a bad message (which
 * ends it). */
static struct cetcd_watch_response *recv_take(struct cetcd_watch_stream *s)
{
    struct cetcd_watch_response *r = NULL;
    grpc_byte_buffer_reader rd;
    grpc_slice sl;
    int rc = CETCD_INTERNAL;

    if (s->recv_msg == NULL)
        return NULL; /* the server closed: STATUS follows */
    if (grpc_byte_buffer_reader_init(&rd, s->recv_msg)) {
        sl = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        rc = client__watch_response_decode(GRPC_SLICE_START_PTR(sl),
                                           GRPC_SLICE_LENGTH(sl), &r);
        grpc_slice_unref(sl);
    }
    grpc_byte_buffer_destroy(s->recv_msg);
    s->recv_msg = NULL;
    if (rc != 0) {
        final_set_once(s, rc, "cannot decode WatchResponse", 27);
        s->ended = true;
        grpc_call_cancel(s->call, NULL);
    }
    return r;
}

/* send_done frees the sent request and starts the next; mu held. */
static void send_done(struct cetcd_watch_stream *s, int ok)
{
    grpc_byte_buffer *next;

    grpc_byte_buffer_destroy(s->send_buf);
    s->send_buf = NULL;
    s->sending = false;
    while (s->send_len > 0) {
        next = s->sendq[s->send_head];
        s->send_head = (s->send_head + 1) % s->o.send_max;
        s->send_len--;
        if (ok && !s->ended && send_start(s, next) == 0)
            return;
        if (!ok || s->ended)
            grpc_byte_buffer_destroy(next);
    }
}

static void stream_free(struct cetcd_watch_stream *s);

/* handle runs one completion; mu held on entry and exit.  *resp_out gets
 * a response for the callback (callback mode). */
static void handle(struct cetcd_watch_stream *s, int kind, int ok,
                   struct cetcd_watch_response **resp_out)
{
    struct cetcd_watch_response *r;

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
    default:
        s->recv_armed = false;
        r = ok ? recv_take(s) : NULL;
        if (r == NULL)
            break;
        if (s->own_cq == NULL) {
            *resp_out = r;
        } else {
            assert(s->buf_len < s->o.buffer_max);
            s->buf[(s->buf_head + s->buf_len) % s->o.buffer_max] = r;
            s->buf_len++;
        }
        recv_arm(s);
    }
}

/* on_complete is the tags' handler: handle, then run the callbacks
 * without the lock, then free the stream if it is closed and idle. */
static void on_complete(struct client__tag *tag, int ok)
{
    struct watch_tag *t = (struct watch_tag *)tag;
    struct cetcd_watch_stream *s = t->s;
    struct cetcd_watch_response *r = NULL;
    bool done;

    pthread_mutex_lock(&s->mu);
    handle(s, t->kind, ok, &r);
    done = s->outstanding == 0;
    s->dispatching = s->own_cq == NULL;
    pthread_mutex_unlock(&s->mu);
    if (s->own_cq != NULL)
        return; /* poll mode: the poller or closer looks at the state */
    if (r != NULL)
        s->o.on_response(s->o.arg, r);
    if (done && s->o.on_close != NULL)
        s->o.on_close(s->o.arg, &s->final);
    pthread_mutex_lock(&s->mu);
    s->dispatching = false;
    done = s->closing && s->outstanding == 0;
    pthread_mutex_unlock(&s->mu);
    if (done)
        stream_free(s);
}

static int opts_check(const struct cetcd_watch_stream_opts *o)
{
    if (o == NULL)
        return 0;
    if ((o->queue == NULL) != (o->on_response == NULL))
        return CETCD_INVALID_ARGUMENT;
    if (o->queue == NULL && o->on_close != NULL)
        return CETCD_INVALID_ARGUMENT;
    return 0;
}

/* stream_alloc makes a stream with its rings and queue, no call yet. */
static struct cetcd_watch_stream *
stream_alloc(const struct cetcd_watch_stream_opts *o)
{
    struct cetcd_watch_stream *s = mem_calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    if (o != NULL)
        s->o = *o;
    if (s->o.buffer_max == 0)
        s->o.buffer_max = CETCD_WATCH_BUFFER_DEFAULT;
    if (s->o.send_max == 0)
        s->o.send_max = CETCD_WATCH_SEND_DEFAULT;
    s->queue = s->o.queue;
    s->sendq = mem_calloc(s->o.send_max, sizeof(*s->sendq));
    if (s->queue == NULL) {
        s->buf = mem_calloc(s->o.buffer_max, sizeof(*s->buf));
        s->own_cq = grpc_completion_queue_create_for_next(NULL);
    }
    for (int k = 0; k < TAG_N; k++)
        s->tags[k] = (struct watch_tag){{on_complete}, s, k};
    pthread_mutex_init(&s->mu, NULL);
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->details = grpc_empty_slice();
    if (s->sendq == NULL || (s->queue == NULL &&
                             (s->buf == NULL || s->own_cq == NULL))) {
        stream_free(s);
        return NULL;
    }
    if (s->queue != NULL)
        client__queue_hold(s->queue);
    s->held = s->queue != NULL;
    return s;
}

static void stream_free(struct cetcd_watch_stream *s)
{
    assert(s->outstanding == 0);
    if (s->call != NULL)
        grpc_call_unref(s->call);
    for (size_t i = 0; i < s->send_len; i++)
        grpc_byte_buffer_destroy(
            s->sendq[(s->send_head + i) % s->o.send_max]);
    for (size_t i = 0; i < s->buf_len; i++)
        cetcd_watch_response_free(s->buf[(s->buf_head + i) %
                                         s->o.buffer_max]);
    if (s->md_len > 0)
        grpc_slice_unref(s->md[0].value);
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
        client__queue_release(s->queue);
    pthread_mutex_destroy(&s->mu);
    mem_free(s->sendq);
    mem_free(s->buf);
    mem_free(s);
}

/* call_start creates the call and starts START, STATUS and RECV; mu held. */
static int call_start(struct cetcd_client *c, struct cetcd_watch_stream *s)
{
    size_t ep = atomic_load(&c->cur);
    grpc_slice method = grpc_slice_from_static_string(WATCH_METHOD);
    grpc_op op[1];

    assert(ep < c->n_eps);
    if (c->token != NULL) {
        s->md[0].key = grpc_slice_from_static_string("token");
        s->md[0].value = grpc_slice_from_copied_string(c->token);
        s->md_len = 1;
    }
    s->call = grpc_channel_create_call(
        c->eps[ep].channel, NULL, GRPC_PROPAGATE_DEFAULTS,
        s->own_cq != NULL ? s->own_cq : client__queue_cq(s->queue), method,
        NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
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

int cetcd_watch_stream_open(struct cetcd_client *c,
                            const struct cetcd_watch_stream_opts *opts,
                            struct cetcd_watch_stream **stream_out,
                            struct cetcd_status *st)
{
    struct cetcd_watch_stream *s;
    int rc;

    if (c == NULL || stream_out == NULL || opts_check(opts) != 0)
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "bad watch stream arguments");
    *stream_out = NULL;
    s = stream_alloc(opts);
    if (s == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    pthread_mutex_lock(&s->mu);
    rc = call_start(c, s);
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) {
        s->o.on_close = NULL; /* a failed open reports nothing */
        cetcd_watch_stream_close(s);
        return client__status_set(st, rc, "cannot start the Watch call");
    }
    *stream_out = s;
    return client__status_set(st, 0, "%s", "");
}

/* drain runs own_cq's completions until deadline; returns false on
 * timeout. */
static bool drain_one(struct cetcd_watch_stream *s, gpr_timespec deadline)
{
    grpc_event ev = grpc_completion_queue_next(s->own_cq, deadline, NULL);

    if (ev.type != GRPC_OP_COMPLETE)
        return false;
    ((struct client__tag *)ev.tag)->complete(ev.tag, ev.success);
    return true;
}

void cetcd_watch_stream_close(struct cetcd_watch_stream *s)
{
    bool now, poll_mode;

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
    pthread_mutex_unlock(&s->mu);
    if (!poll_mode) {
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

/* request_send packs and sends (or queues) req. */
static int request_send(struct cetcd_watch_stream *s,
                        const Etcdserverpb__WatchRequest *req,
                        struct cetcd_status *st)
{
    grpc_byte_buffer *buf;
    int rc = 0;

    if (s == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no stream");
    buf = client__pack(&req->base);
    if (buf == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    pthread_mutex_lock(&s->mu);
    if (s->ended || s->closing)
        rc = CETCD_FAILED_PRECONDITION;
    else if (!s->sending)
        rc = send_start(s, buf), buf = NULL;
    else if (s->send_len >= s->o.send_max)
        rc = CETCD_RESOURCE_EXHAUSTED;
    else {
        s->sendq[(s->send_head + s->send_len) % s->o.send_max] = buf;
        s->send_len++;
        buf = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (buf != NULL)
        grpc_byte_buffer_destroy(buf);
    if (rc == CETCD_FAILED_PRECONDITION)
        return client__status_set(st, rc, "watch stream has ended");
    if (rc == CETCD_RESOURCE_EXHAUSTED)
        return client__status_set(st, rc, "%zu watch requests waiting",
                                  s->o.send_max);
    if (rc != 0)
        return client__status_set(st, rc, "cannot send WatchRequest");
    return client__status_set(st, 0, "%s", "");
}

int cetcd_watch_create(struct cetcd_watch_stream *s, const void *key,
                       size_t key_len, const struct cetcd_watch_opts *o,
                       struct cetcd_status *st)
{
    Etcdserverpb__WatchRequest req;
    Etcdserverpb__WatchCreateRequest cr;
    Etcdserverpb__WatchCreateRequest__FilterType filters[2];

    etcdserverpb__watch_request__init(&req);
    etcdserverpb__watch_create_request__init(&cr);
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    cr.key = (ProtobufCBinaryData){key_len, (uint8_t *)key};
    if (o != NULL) {
        cr.range_end = (ProtobufCBinaryData){o->range_end_len,
                                             (uint8_t *)o->range_end};
        cr.start_revision = o->start_revision;
        cr.prev_kv = o->prev_kv;
        cr.progress_notify = o->progress_notify;
        cr.fragment = o->fragment;
        cr.watch_id = o->watch_id;
        if (o->no_put)
            filters[cr.n_filters++] =
                ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT;
        if (o->no_delete)
            filters[cr.n_filters++] =
                ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NODELETE;
        cr.filters = filters;
    }
    return request_send(s, &req, st);
}

int cetcd_watch_cancel(struct cetcd_watch_stream *s, int64_t watch_id,
                       struct cetcd_status *st)
{
    Etcdserverpb__WatchRequest req;
    Etcdserverpb__WatchCancelRequest cr;

    etcdserverpb__watch_request__init(&req);
    etcdserverpb__watch_cancel_request__init(&cr);
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
    req.cancel_request = &cr;
    cr.watch_id = watch_id;
    return request_send(s, &req, st);
}

int cetcd_watch_progress(struct cetcd_watch_stream *s,
                         struct cetcd_status *st)
{
    Etcdserverpb__WatchRequest req;
    Etcdserverpb__WatchProgressRequest pr;

    etcdserverpb__watch_request__init(&req);
    etcdserverpb__watch_progress_request__init(&pr);
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
    req.progress_request = &pr;
    return request_send(s, &req, st);
}

/* poll_take pops a buffered response or reports the end; mu held.
 * Returns 1 (taken), 0 (nothing yet) or -1 (ended: *rc is the outcome). */
static int poll_take(struct cetcd_watch_stream *s,
                     struct cetcd_watch_response **resp_out, int *rc)
{
    if (s->buf_len > 0) {
        *resp_out = s->buf[s->buf_head];
        s->buf_head = (s->buf_head + 1) % s->o.buffer_max;
        s->buf_len--;
        recv_arm(s);
        return 1;
    }
    if (s->ended && !s->recv_armed && s->final_set) {
        *rc = s->final.code;
        return -1;
    }
    return 0;
}

int cetcd_watch_poll(struct cetcd_watch_stream *s, int timeout_ms,
                     struct cetcd_watch_response **resp_out,
                     struct cetcd_status *st)
{
    gpr_timespec deadline = timeout_ms < 0
                                ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                                : client__deadline(timeout_ms);
    int got, rc = 0;

    if (s == NULL || resp_out == NULL || s->own_cq == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "not a poll-mode watch stream");
    *resp_out = NULL;
    if (timeout_ms == 0)
        deadline = gpr_now(GPR_CLOCK_MONOTONIC);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        got = poll_take(s, resp_out, &rc);
        pthread_mutex_unlock(&s->mu);
        if (got > 0)
            return client__status_set(st, 0, "%s", "");
        if (got < 0)
            return client__status_set(st, rc, "%s", s->final.message);
        if (!drain_one(s, deadline))
            return client__status_set(st, CETCD_DEADLINE_EXCEEDED,
                                      "no watch response within %d ms",
                                      timeout_ms);
    }
}

size_t cetcd_watch_stream_buffered(const struct cetcd_watch_stream *s)
{
    struct cetcd_watch_stream *m = (struct cetcd_watch_stream *)s;
    size_t n;

    assert(s != NULL);
    pthread_mutex_lock(&m->mu);
    n = m->buf_len;
    pthread_mutex_unlock(&m->mu);
    return n;
}
