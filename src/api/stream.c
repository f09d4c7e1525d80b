/*
 * stream.c - struct svc_stream (svc.h) on a gRPC server stream (rpc.h,
 * rpc/stream.c): the adapter a streaming service (Watch, LeaseKeepAlive,
 * Snapshot, Observe) is registered through; Watch uses it (watch.c).
 *
 * Per stream one struct adapter, shared by two holders: the service (from
 * a successful open until its release) and the runtime (until on_close,
 * which always comes, also after a release: rpc.h).  Each drops its
 * reference; the last one frees.  The adapter keeps the runtime's stream
 * reference and gives it back with rpc_stream_release when the service
 * releases (or at once when the service refused to open).
 */
#include <stdatomic.h>
#include <string.h>

#include "api/api_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* One open stream.  Fields but refs are written on the stream's loop
 * before the service sees the stream and only read afterwards. */
struct adapter {
    struct svc_stream st;                 /* what the service is given */
    struct rpc_stream *rs;                /* the runtime's stream */
    const struct api_stream_method *m;    /* the registration */
    void *state;                          /* the service's */
    bool opened;                          /* the service's open succeeded */
    bool broken;                          /* a message did not decode */
    atomic_int refs;                      /* holders left (see above) */
};

static void unref(struct adapter *a)
{
    int left = atomic_fetch_sub(&a->refs, 1) - 1;
    CHECK(left >= 0);
    if (left == 0)
        mem_free(a);
}

static int st_send(void *ctx, const ProtobufCMessage *m)
{
    struct adapter *a = ctx;
    return rpc_stream_send(a->rs, m);
}

static int st_send_ctrl(void *ctx, const ProtobufCMessage *m)
{
    struct adapter *a = ctx;
    return rpc_stream_send_ctrl(a->rs, m);
}

static const char *st_metadata(void *ctx, const char *key, size_t *len_out)
{
    struct adapter *a = ctx;
    if (strcmp(key, SVC_META_PEER_CN) != 0)
        return rpc_stream_metadata(a->rs, key, len_out);
    const char *cn = rpc_stream_peer_cn(a->rs); /* as call_metadata */
    if (cn != NULL && len_out != NULL)
        *len_out = strlen(cn);
    return cn;
}

static int st_close(void *ctx, int err)
{
    struct adapter *a = ctx;
    const char *msg = "";
    grpc_status_code code = err == 0 ? GRPC_STATUS_OK : api_error(err, &msg);
    if (err != 0 && a->m->errors_unknown)
        code = GRPC_STATUS_UNKNOWN; /* see api_stream_method */
    return rpc_stream_finish(a->rs, code, msg);
}

static void st_release(void *ctx)
{
    struct adapter *a = ctx;
    rpc_stream_release(a->rs);
    unref(a);
}

/* The runtime's callbacks, on the stream's loop. */

static void on_open(struct rpc_stream *rs, void *ctx)
{
    const struct api_stream_method *m = ctx;
    struct adapter *a = mem_calloc(1, sizeof *a);
    if (a == NULL) {
        rpc_stream_finish(rs, GRPC_STATUS_RESOURCE_EXHAUSTED,
                          "out of memory");
        rpc_stream_release(rs);
        return;
    }
    a->st = (struct svc_stream){
        .send = st_send,
        .send_ctrl = st_send_ctrl,
        .close = st_close,
        .release = st_release,
        .metadata = st_metadata,
        .ctx = a,
        .queue_max = m->queue_max,
    };
    a->rs = rs;
    a->m = m;
    if (m->background)
        rpc_stream_background(rs);
    atomic_init(&a->refs, 1); /* the runtime's, until on_close */
    rpc_stream_data_set(rs, a);
    int rc = m->handler->open(m->server, &a->st, &a->state);
    if (rc != 0) {
        st_close(a, rc);
        rpc_stream_release(rs);
        return;
    }
    a->opened = true;
    atomic_fetch_add(&a->refs, 1); /* the service's, until release */
}

static void on_message(struct rpc_stream *rs, const uint8_t *msg, size_t len,
                       void *ctx)
{
    (void)ctx;
    struct adapter *a = rpc_stream_data_get(rs);
    if (a == NULL || !a->opened || a->broken)
        return;
    if (msg == NULL) {
        a->m->handler->recv(a->state, NULL);
        return;
    }
    ProtobufCMessage *m =
        protobuf_c_message_unpack(a->m->handler->request, NULL, len, msg);
    if (m == NULL) {
        a->broken = true; /* the service hears no more of this stream */
        rpc_stream_finish(rs, GRPC_STATUS_INTERNAL,
                          "grpc: error unmarshalling request");
        return;
    }
    a->m->handler->recv(a->state, m);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void on_close(struct rpc_stream *rs, bool cancelled, void *ctx)
{
    (void)ctx;
    struct adapter *a = rpc_stream_data_get(rs);
    if (a == NULL)
        return; /* out of memory at open */
    if (a->opened)
        a->m->handler->end(a->state, cancelled);
    unref(a);
}

/* One callback table per wire kind, only for the metrics' label. */
static const struct rpc_stream_ops ops_by_type[] = {
    [RPC_TYPE_BIDI_STREAM] = {on_open, on_message, on_close,
                              RPC_TYPE_BIDI_STREAM},
    [RPC_TYPE_UNARY] = {on_open, on_message, on_close, RPC_TYPE_UNARY},
    [RPC_TYPE_CLIENT_STREAM] = {on_open, on_message, on_close,
                                RPC_TYPE_CLIENT_STREAM},
    [RPC_TYPE_SERVER_STREAM] = {on_open, on_message, on_close,
                                RPC_TYPE_SERVER_STREAM},
};

int api__stream_register(struct rpc_server *rpc, const char *path,
                         const struct api_stream_method *m)
{
    CHECK(rpc != NULL && path != NULL && m != NULL);
    CHECK(m->handler != NULL && m->handler->request != NULL &&
          m->queue_max > 0);
    CHECK((size_t)m->wire_type <
          sizeof ops_by_type / sizeof ops_by_type[0]);
    return rpc_server_register_stream(rpc, path, &ops_by_type[m->wire_type],
                                      (void *)m);
}
