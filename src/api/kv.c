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

static void reply_err(struct api_call *call, int err)
{
    const char *msg;
    grpc_status_code code = api_error(err, &msg);
    api_call_reply_error(call, code, msg);
}

/* Runs on the apply thread (or inline when the proposal is refused). */
static void on_done(void *arg, const struct server_response *r)
{
    struct api_call *call = arg;
    if (r->err != 0)
        reply_err(call, r->err);
    else
        api_call_reply(call, r->msg);
}

static void bad_request(struct api_call *call)
{
    api_call_reply_error(call, GRPC_STATUS_INTERNAL,
                         "grpc: error unmarshalling request");
}

/* Runs on a CQ thread (served at once) or a read worker. */
static void on_range(void *arg, int err, const Etcdserverpb__RangeResponse *r)
{
    struct api_call *call = arg;
    if (err != 0)
        reply_err(call, err);
    else
        api_call_reply(call, &r->base);
}

static void kv_range(struct api_call *call, const uint8_t *req, size_t len,
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

static void propose(struct api *api, struct api_call *call,
                    Cetcdpb__InternalRequest *ir)
{
    server_propose(api->server, ir, on_done, call);
}

static void kv_put(struct api_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    Etcdserverpb__PutRequest *r =
        etcdserverpb__put_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    int rc = kv_check_put(r);
    if (rc != 0) {
        reply_err(call, rc);
    } else {
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
        ir.put = r;
        propose(ctx, call, &ir);
    }
    etcdserverpb__put_request__free_unpacked(r, NULL);
}

static void kv_delete(struct api_call *call, const uint8_t *req, size_t len,
                      void *ctx)
{
    Etcdserverpb__DeleteRangeRequest *r =
        etcdserverpb__delete_range_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    int rc = kv_check_delete(r);
    if (rc != 0) {
        reply_err(call, rc);
    } else {
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_DELETE_RANGE;
        ir.delete_range = r;
        propose(ctx, call, &ir);
    }
    etcdserverpb__delete_range_request__free_unpacked(r, NULL);
}

static void kv_txn(struct api_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__TxnRequest *r =
        etcdserverpb__txn_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    int rc = kv_check_txn(r, server_max_txn_ops(api->server));
    if (rc != 0) {
        reply_err(call, rc);
    } else {
        /* Read-only txns also go through the log for now: linearizable
         * and correct, one WAL record more than etcd's read path. */
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_TXN;
        ir.txn = r;
        propose(api, call, &ir);
    }
    etcdserverpb__txn_request__free_unpacked(r, NULL);
}

static void kv_compact(struct api_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    Etcdserverpb__CompactionRequest *r =
        etcdserverpb__compaction_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION;
    ir.compaction = r;
    propose(ctx, call, &ir);
    etcdserverpb__compaction_request__free_unpacked(r, NULL);
}

int api__kv_register(struct api *api)
{
    static const struct {
        const char *path;
        api_unary_fn fn;
    } methods[] = {
        {"/etcdserverpb.KV/Range", kv_range},
        {"/etcdserverpb.KV/Put", kv_put},
        {"/etcdserverpb.KV/DeleteRange", kv_delete},
        {"/etcdserverpb.KV/Txn", kv_txn},
        {"/etcdserverpb.KV/Compact", kv_compact},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        int rc = api_server_register_unary(api->rpc, methods[i].path,
                                           methods[i].fn, api);
        if (rc != 0)
            return rc;
    }
    return 0;
}
