/*
 * kv.c - the etcdserverpb.KV service: decode, validate as etcd does, then
 * Range on the read path and Put/DeleteRange/Txn/Compact through the
 * proposal funnel.  Replies to proposals come from the apply thread.
 */
#include <stdlib.h>

#include "api/api_int.h"
#include "api/kv_check.h"
#include "server/server.h"
#include "util/err.h"

static void reply_err(struct rpc_call *call, int err)
{
    const char *msg;
    grpc_status_code code = api_error(err, &msg);
    rpc_call_reply_error(call, code, msg);
}

/* Runs on the apply thread (or inline when the proposal is refused). */
static void on_done(void *arg, const struct server_response *r)
{
    struct rpc_call *call = arg;
    if (r->err != 0)
        reply_err(call, r->err);
    else
        rpc_call_reply(call, r->msg);
}

static void bad_request(struct rpc_call *call)
{
    rpc_call_reply_error(call, GRPC_STATUS_INTERNAL,
                         "grpc: error unmarshalling request");
}

/* Runs on an event loop (served at once) or a read worker. */
static void on_range(void *arg, int err, const Etcdserverpb__RangeResponse *r)
{
    struct rpc_call *call = arg;
    if (err != 0)
        reply_err(call, err);
    else
        rpc_call_reply(call, &r->base);
}

static void kv_range(struct rpc_call *call, const uint8_t *req, size_t len,
                     void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__RangeRequest *r =
        etcdserverpb__range_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    int rc = kv_check_range(r);
    if (rc != 0) {
        reply_err(call, rc);
        etcdserverpb__range_request__free_unpacked(r, NULL);
        return;
    }
    /* A linearizable read waits for raft without holding this thread. */
    server_range_async(api->server, r, on_range, call);
}

/* A write method: its request type, etcd's checks, and which kind of
 * internal request carries it through raft. */
struct write_method {
    const ProtobufCMessageDescriptor *desc;  /* request message type */
    Cetcdpb__InternalRequest__RequestCase kind; /* InternalRequest case */
    int (*check)(const struct api *api, const ProtobufCMessage *m);
    /* its cost against the backend quota (NULL: none), checked first */
    uint64_t (*cost)(const ProtobufCMessage *m);
};

static uint64_t put_cost(const ProtobufCMessage *m)
{
    return server_put_cost((const Etcdserverpb__PutRequest *)m);
}

static uint64_t txn_cost(const ProtobufCMessage *m)
{
    return server_txn_cost((const Etcdserverpb__TxnRequest *)m);
}

static int check_put(const struct api *api, const ProtobufCMessage *m)
{
    (void)api;
    return kv_check_put((const Etcdserverpb__PutRequest *)m);
}

static int check_delete(const struct api *api, const ProtobufCMessage *m)
{
    (void)api;
    return kv_check_delete((const Etcdserverpb__DeleteRangeRequest *)m);
}

/* Read-only txns also go through raft for now: linearizable and correct,
 * one log entry more than etcd's read path. */
static int check_txn(const struct api *api, const ProtobufCMessage *m)
{
    return kv_check_txn((const Etcdserverpb__TxnRequest *)m,
                        server_max_txn_ops(api->server));
}

static const struct write_method put_method = {
    &etcdserverpb__put_request__descriptor,
    CETCDPB__INTERNAL_REQUEST__REQUEST_PUT, check_put, put_cost};
static const struct write_method delete_method = {
    &etcdserverpb__delete_range_request__descriptor,
    CETCDPB__INTERNAL_REQUEST__REQUEST_DELETE_RANGE, check_delete, NULL};
static const struct write_method txn_method = {
    &etcdserverpb__txn_request__descriptor,
    CETCDPB__INTERNAL_REQUEST__REQUEST_TXN, check_txn, txn_cost};
static const struct write_method compact_method = {
    &etcdserverpb__compaction_request__descriptor,
    CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION, NULL, NULL};

/* Decode, check (the quota, then the request), propose; the answer comes
 * from the apply thread.  The request is packed into the proposal before
 * server_propose returns, so it is freed here. */
static void propose_write(struct rpc_call *call, const uint8_t *req,
                          size_t len, const struct write_method *wm,
                          struct api *api)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(wm->desc, NULL, len, req);
    if (m == NULL)
        return bad_request(call);
    /* etcd's quota wrapper runs before the KV server's own checks */
    int rc = 0;
    if (wm->cost && !server_quota_allows(api->server, wm->cost(m)))
        rc = ERR_NO_SPACE;
    if (rc == 0 && wm->check)
        rc = wm->check(api, m);
    if (rc != 0) {
        reply_err(call, rc);
    } else {
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = wm->kind;
        /* Every member of the request oneof is a message pointer: storing
         * through one of them sets the one the case names. */
        ir.put = (Etcdserverpb__PutRequest *)m;
        server_propose(api->server, &ir, on_done, call);
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void kv_put(struct rpc_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    propose_write(call, req, len, &put_method, ctx);
}

static void kv_delete(struct rpc_call *call, const uint8_t *req, size_t len,
                      void *ctx)
{
    propose_write(call, req, len, &delete_method, ctx);
}

static void kv_txn(struct rpc_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    propose_write(call, req, len, &txn_method, ctx);
}

static void kv_compact(struct rpc_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    propose_write(call, req, len, &compact_method, ctx);
}

int api__kv_register(struct api *api)
{
    static const struct {
        const char *path;
        rpc_unary_fn fn;
    } methods[] = {
        {"/etcdserverpb.KV/Range", kv_range},
        {"/etcdserverpb.KV/Put", kv_put},
        {"/etcdserverpb.KV/DeleteRange", kv_delete},
        {"/etcdserverpb.KV/Txn", kv_txn},
        {"/etcdserverpb.KV/Compact", kv_compact},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        int rc = rpc_server_register_unary(api->rpc, methods[i].path,
                                           methods[i].fn, api);
        if (rc != 0)
            return rc;
    }
    return 0;
}
