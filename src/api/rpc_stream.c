/*
 * rpc_stream.c - streaming calls (Watch, LeaseKeepAlive, Snapshot,
 * Observe): one RECV_MESSAGE at a time, a bounded send queue with one send
 * batch in flight, and a reference count that frees the stream when the
 * core and the owner are both done with it.
 *
 * References: the owner's (taken at on_open, dropped by
 * api_stream_release), the RECV_CLOSE_ON_SERVER batch's (until on_close),
 * the outstanding RECV_MESSAGE's, and the outstanding send batch's.
 * Receive-side state is touched only by the worker thread; send-side state
 * and refs are under the stream mutex because any thread may send.
 */
#include <assert.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>

#include "api/rpc_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

struct api_stream {
    struct api__tag new_tag;          /* STREAM_NEW; immutable */
    struct api__tag recv_tag;         /* STREAM_RECV; immutable */
    struct api__tag send_tag;         /* STREAM_SEND; immutable */
    struct api__tag close_tag;        /* STREAM_CLOSE; immutable */
    struct api__worker *worker;       /* immutable */
    const struct api__method *method; /* immutable */
    grpc_call *call;                  /* set by the core before on_open */
    gpr_timespec deadline;            /* set by the core; unused yet */
    grpc_metadata_array md;           /* request metadata; read-only */
    grpc_byte_buffer *recv_bb;        /* worker: message being received */
    int cancelled;                    /* worker: RECV_CLOSE output */
    bool closed;                      /* mu: on_close ran or is running */
    bool md_sent;                     /* mu: initial metadata sent */
    bool sending;                     /* mu: a send batch is in flight */
    bool finishing;                   /* mu: api_stream_finish called */
    bool finish_sent;                 /* mu: status batch started */
    int refs;                         /* mu: see the file comment */
    grpc_byte_buffer *in_flight;      /* mu: message of the send batch */
    grpc_byte_buffer **queue;         /* mu: ring of queued messages */
    size_t q_head, q_n, q_cap;        /* mu: ring position, count, size */
    grpc_status_code fin_code;        /* mu: status to finish with */
    grpc_slice fin_msg;               /* mu: its message */
    void *data;                       /* owner's pointer */
    pthread_mutex_t mu;               /* guards the fields marked mu */
};

static void stream_free(struct api_stream *s)
{
    assert(s->refs == 0 && !s->sending);
    while (s->q_n > 0) {
        grpc_byte_buffer_destroy(s->queue[s->q_head]);
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_n--;
    }
    mem_free(s->queue);
    grpc_slice_unref(s->fin_msg);
    grpc_metadata_array_destroy(&s->md);
    if (s->call != NULL)
        grpc_call_unref(s->call);
    pthread_mutex_destroy(&s->mu);
    atomic_fetch_sub(&s->worker->srv->streams_n, 1);
    mem_free(s);
}

/* unref drops one reference; the last one frees the stream. */
static void unref(struct api_stream *s)
{
    pthread_mutex_lock(&s->mu);
    assert(s->refs > 0);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last)
        stream_free(s);
}

void api__stream_post(struct api__worker *w, const struct api__method *m)
{
    assert(m->kind == API__METHOD_STREAM);
    struct api_stream *s = mem_calloc(1, sizeof(*s));
    if (s == NULL) {
        log_warn("api", "out of memory: one stream slot fewer for %s",
                 m->path);
        return;
    }
    s->new_tag.kind = API__TAG_STREAM_NEW;
    s->recv_tag.kind = API__TAG_STREAM_RECV;
    s->send_tag.kind = API__TAG_STREAM_SEND;
    s->close_tag.kind = API__TAG_STREAM_CLOSE;
    s->worker = w;
    s->method = m;
    s->fin_msg = grpc_empty_slice();
    grpc_metadata_array_init(&s->md);
    pthread_mutex_init(&s->mu, NULL);
    atomic_fetch_add(&w->srv->streams_n, 1);
    grpc_call_error e = grpc_server_request_registered_call(
        w->srv->server, m->handle, &s->call, &s->deadline, &s->md, NULL,
        w->cq, w->cq, &s->new_tag);
    if (e != GRPC_CALL_OK) {
        log_warn("api", "request_registered_call (stream): %d", (int)e);
        stream_free(s);
    }
}

static void start_recv(struct api_stream *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_bb;
    grpc_call_error e = grpc_call_start_batch(s->call, &op, 1, &s->recv_tag,
                                              NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

static void arrived(struct api__worker *w, struct api_stream *s)
{
    grpc_op op;
    if (!atomic_load(&w->srv->shutting_down))
        api__stream_post(w, s->method);
    s->q_cap = (size_t)w->srv->stream_queue;
    s->queue = mem_calloc(s->q_cap, sizeof(*s->queue));
    if (s->queue == NULL) {
        /* Refuse the stream; the core cancels it and frees the call. */
        grpc_call_cancel_with_status(s->call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                     "out of memory", NULL);
        stream_free(s);
        return;
    }
    s->refs = 3; /* owner, close batch, receive */
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &s->cancelled;
    grpc_call_error e =
        grpc_call_start_batch(s->call, &op, 1, &s->close_tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
    s->method->ops->on_open(s, s->method->ctx);
    start_recv(s);
}

static void received(struct api_stream *s, bool ok)
{
    grpc_byte_buffer *bb = s->recv_bb;
    s->recv_bb = NULL;
    if (!ok || bb == NULL) {
        if (ok && !s->closed) /* Clean half-close by the client. */
            s->method->ops->on_message(s, NULL, 0, s->method->ctx);
        unref(s);
        return;
    }
    grpc_byte_buffer_reader r;
    grpc_slice flat = grpc_empty_slice();
    if (grpc_byte_buffer_reader_init(&r, bb)) {
        flat = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
    }
    grpc_byte_buffer_destroy(bb);
    if (!s->closed)
        s->method->ops->on_message(s, GRPC_SLICE_START_PTR(flat),
                                   GRPC_SLICE_LENGTH(flat), s->method->ctx);
    grpc_slice_unref(flat);
    start_recv(s);
}

/* send_next_locked starts the next send batch, if any; false when there is
 * nothing left to send (the caller then drops the send reference). */
static bool send_next_locked(struct api_stream *s)
{
    grpc_op ops[2];
    size_t n = 0;
    bool have_msg = s->q_n > 0 && !s->closed;
    bool have_fin = s->finishing && !s->finish_sent && !s->closed;
    if (!have_msg && !have_fin) {
        s->sending = false;
        return false;
    }
    memset(ops, 0, sizeof(ops));
    if (!s->md_sent) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        s->md_sent = true;
    }
    if (have_msg) {
        s->in_flight = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_n--;
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = s->in_flight;
    } else {
        s->finish_sent = true;
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = s->fin_code;
        ops[n++].data.send_status_from_server.status_details = &s->fin_msg;
    }
    s->sending = true;
    grpc_call_error e = grpc_call_start_batch(s->call, ops, n, &s->send_tag,
                                              NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
    return true;
}

/* kick_locked starts sending what was just queued or finished unless a
 * send is in flight already, whose completion will move on to it; the new
 * send batch holds a reference (s->mu held). */
static void kick_locked(struct api_stream *s)
{
    if (s->sending)
        return;
    s->refs++;
    bool started = send_next_locked(s);
    assert(started);
    (void)started;
}

static void sent(struct api_stream *s)
{
    pthread_mutex_lock(&s->mu);
    if (s->in_flight != NULL) {
        grpc_byte_buffer_destroy(s->in_flight);
        s->in_flight = NULL;
    }
    bool more = send_next_locked(s);
    pthread_mutex_unlock(&s->mu);
    if (!more)
        unref(s);
}

static void closed(struct api_stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    pthread_mutex_unlock(&s->mu);
    s->method->ops->on_close(s, s->cancelled != 0 || !s->finish_sent,
                             s->method->ctx);
    unref(s);
}

void api__stream_complete(struct api__worker *w, struct api__tag *tag,
                          bool ok)
{
    struct api_stream *s;
    switch (tag->kind) {
    case API__TAG_STREAM_NEW:
        s = api__container_of(tag, struct api_stream, new_tag);
        if (!ok)
            stream_free(s); /* Shutdown: the slot was never used. */
        else
            arrived(w, s);
        break;
    case API__TAG_STREAM_RECV:
        received(api__container_of(tag, struct api_stream, recv_tag), ok);
        break;
    case API__TAG_STREAM_SEND:
        sent(api__container_of(tag, struct api_stream, send_tag));
        break;
    case API__TAG_STREAM_CLOSE:
        closed(api__container_of(tag, struct api_stream, close_tag));
        break;
    default:
        assert(!"unknown completion tag");
    }
}

int api_stream_send(struct api_stream *s, const ProtobufCMessage *msg)
{
    assert(s != NULL && msg != NULL);
    size_t n = protobuf_c_message_get_packed_size(msg);
    grpc_slice slice = grpc_slice_malloc(n);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(slice));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    int rv = 0;
    pthread_mutex_lock(&s->mu);
    if (s->closed || s->finishing) {
        rv = ERR_CLOSED;
    } else if (s->q_n == s->q_cap) {
        rv = ERR_FULL;
    } else {
        s->queue[(s->q_head + s->q_n) % s->q_cap] = bb;
        s->q_n++;
        bb = NULL;
        kick_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    if (bb != NULL)
        grpc_byte_buffer_destroy(bb);
    return rv;
}

int api_stream_finish(struct api_stream *s, grpc_status_code code,
                      const char *msg)
{
    assert(s != NULL);
    int rv = 0;
    pthread_mutex_lock(&s->mu);
    if (s->closed || s->finishing) {
        rv = ERR_CLOSED;
    } else {
        s->finishing = true;
        s->fin_code = code;
        s->fin_msg = grpc_slice_from_copied_string(msg != NULL ? msg : "");
        kick_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    return rv;
}

const char *api_stream_metadata(const struct api_stream *s, const char *key,
                                size_t *len_out)
{
    assert(s != NULL);
    return api__md_find(&s->md, key, len_out);
}

const char *api_stream_method(const struct api_stream *s)
{
    assert(s != NULL);
    return s->method->path;
}

void api_stream_data_set(struct api_stream *s, void *data)
{
    assert(s != NULL);
    s->data = data;
}

void *api_stream_data_get(const struct api_stream *s)
{
    assert(s != NULL);
    return s->data;
}

void api_stream_release(struct api_stream *s)
{
    assert(s != NULL);
    unref(s);
}
