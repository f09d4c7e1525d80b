/*
 * kv.c - the etcdserverpb.KV service on gRPC: decode the request, call the
 * service (svc/kv.c: etcd's checks, the read path, the proposal funnel),
 * answer with its reply or its error mapped by api_error (api__done).
 */
#include "api/api_int.h"
#include "svc/svc.h"
#include "util/err.h"
#include "util/pbwalk.h"

/* The deepest message nesting of a TxnRequest decoded: a txn inside a txn
 * is two levels (TxnRequest, RequestOp), so about 1000 txn levels, far
 * beyond what --max-txn-ops lets pass (etcd's check takes one op of the
 * budget per level: 129 levels at its default 128).  Deeper requests are
 * refused before protobuf-c, whose decoder recurses without a limit (8000
 * levels, 58 KiB, overflowed the loop's stack: a crash, where etcd
 * answers "too many operations"). */
#define KV_TXN_DEPTH_MAX 2048

static void kv_range(struct rpc_call *call, const uint8_t *req, size_t len,
                     void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__RangeRequest *r =
        etcdserverpb__range_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_kv_range(api->server, r, api__done(call)); /* takes r */
}

/* The writes: the service borrows the request until it returns. */

static void kv_put(struct rpc_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__PutRequest *r =
        etcdserverpb__put_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_kv_put(api->server, r, api__done(call));
    etcdserverpb__put_request__free_unpacked(r, NULL);
}

static void kv_delete(struct rpc_call *call, const uint8_t *req, size_t len,
                      void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__DeleteRangeRequest *r =
        etcdserverpb__delete_range_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_kv_delete_range(api->server, r, api__done(call));
    etcdserverpb__delete_range_request__free_unpacked(r, NULL);
}

static void kv_txn(struct rpc_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__TxnRequest *r;
    int rc = pb_walk_check(&etcdserverpb__txn_request__descriptor, req, len,
                           KV_TXN_DEPTH_MAX);

    if (rc == ERR_TOO_LARGE)
        return api__reply_err(call, ERR_TOO_MANY_OPS);
    r = rc == 0 ? etcdserverpb__txn_request__unpack(NULL, len, req) : NULL;
    if (r == NULL)
        return api__bad_request(call);
    svc_kv_txn(api->server, r, api__done(call));
    etcdserverpb__txn_request__free_unpacked(r, NULL);
}

static void kv_compact(struct rpc_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__CompactionRequest *r =
        etcdserverpb__compaction_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_kv_compact(api->server, r, api__done(call));
    etcdserverpb__compaction_request__free_unpacked(r, NULL);
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
