/* done.c - the answer of a unary call from a service's completion: the
 * reply packed as the call's response, an ERR_* code mapped to etcd's gRPC
 * status (errors.c). */
#include <string.h>

#include "api/api_int.h"
#include "util/err.h"

void api__bad_request(struct rpc_call *call)
{
    rpc_call_reply_error(call, GRPC_STATUS_INTERNAL,
                         "grpc: error unmarshalling request");
}

void api__reply_err(struct rpc_call *call, int err)
{
    const char *msg;
    grpc_status_code code = api_error(err, &msg);
    rpc_call_reply_error(call, code, msg);
}

/* Runs on whichever thread the service completes on (svc.h); the call may
 * be answered from any thread (rpc.h). */
static void on_done(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct rpc_call *call = ctx;
    if (err != 0)
        api__reply_err(call, err);
    else
        rpc_call_reply(call, reply);
}

/* The call's metadata (the auth token), until it is answered. */
static const char *call_metadata(void *ctx, const char *key, size_t *len)
{
    if (strcmp(key, SVC_META_PEER_CN) != 0)
        return rpc_call_metadata(ctx, key, len);
    const char *cn = rpc_call_peer_cn(ctx);
    if (cn != NULL && len != NULL)
        *len = strlen(cn);
    return cn;
}

struct svc_done api__done(struct rpc_call *call)
{
    return (struct svc_done){on_done, call, call_metadata};
}

static void on_done_unknown(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct rpc_call *call = ctx;
    if (err == 0)
        return rpc_call_reply(call, reply);
    const char *msg;
    (void)api_error(err, &msg);
    rpc_call_reply_error(call, GRPC_STATUS_UNKNOWN, msg);
}

struct svc_done api__done_unknown(struct rpc_call *call)
{
    return (struct svc_done){on_done_unknown, call, call_metadata};
}

void api__on_peer_done(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct rpc_call *call = ctx;
    if (err == ERR_INVAL)
        rpc_call_reply_error(call, GRPC_STATUS_FAILED_PRECONDITION,
                             "cetcd: cluster ID mismatch");
    else if (err != 0)
        api__reply_err(call, err);
    else
        rpc_call_reply(call, reply);
}
