/*
 * lock.c - the v3lockpb.Lock and v3electionpb.Election services on gRPC.
 * Unlock, Proclaim, Leader and Resign are unary (decode, svc, encode);
 * Lock and Campaign wait, and are served as streams (unary on the wire)
 * so that a client that goes away ends the wait (svc.h "Lock and
 * Election"); Observe is a server stream.  All through api/stream.c.
 * Every error is answered with code UNKNOWN and etcd's message: etcd's
 * servers for these call the KV through clientv3, which hands them plain
 * errors.
 */
#include "api/api_int.h"

#define UNARY(name, type, desc, call)                                        \
    static void name(struct rpc_call *c, const uint8_t *req, size_t len,     \
                     void *ctx)                                              \
    {                                                                        \
        struct api *api = ctx;                                               \
        type *r = (type *)protobuf_c_message_unpack(&desc, NULL, len, req);  \
        if (r == NULL)                                                       \
            return api__bad_request(c);                                      \
        call(api->server, r, api__done_unknown(c));                                  \
        protobuf_c_message_free_unpacked(&r->base, NULL);                    \
    }

UNARY(unlock, V3lockpb__UnlockRequest, v3lockpb__unlock_request__descriptor,
      svc_lock_unlock)
UNARY(proclaim, V3electionpb__ProclaimRequest,
      v3electionpb__proclaim_request__descriptor, svc_election_proclaim)
UNARY(leader, V3electionpb__LeaderRequest,
      v3electionpb__leader_request__descriptor, svc_election_leader)
UNARY(resign, V3electionpb__ResignRequest,
      v3electionpb__resign_request__descriptor, svc_election_resign)

int api__lock_register(struct api *api)
{
    static const struct {
        const char *path;
        rpc_unary_fn fn;
    } unary[] = {
        {"/v3lockpb.Lock/Unlock", unlock},
        {"/v3electionpb.Election/Proclaim", proclaim},
        {"/v3electionpb.Election/Leader", leader},
        {"/v3electionpb.Election/Resign", resign},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof unary / sizeof unary[0]; i++)
        rc = rpc_server_register_unary(api->rpc, unary[i].path, unary[i].fn,
                                       api);
    struct {
        const char *path;
        struct api_stream_method *m;
        const struct svc_stream_handler *h;
        enum rpc_method_type wire_type; /* Lock and Campaign are unary */
    } streams[] = {
        {"/v3lockpb.Lock/Lock", &api->lock, &svc_lock_handler,
         RPC_TYPE_UNARY},
        {"/v3electionpb.Election/Campaign", &api->campaign,
         &svc_campaign_handler, RPC_TYPE_UNARY},
        {"/v3electionpb.Election/Observe", &api->observe,
         &svc_observe_handler, RPC_TYPE_SERVER_STREAM},
    };
    for (size_t i = 0; rc == 0 && i < sizeof streams / sizeof streams[0];
         i++) {
        *streams[i].m = (struct api_stream_method){
            .handler = streams[i].h,
            .server = api->server,
            .queue_max = RPC_DEFAULT_STREAM_QUEUE,
            .errors_unknown = true,
            .wire_type = streams[i].wire_type,
        };
        rc = api__stream_register(api->rpc, streams[i].path, streams[i].m);
    }
    return rc;
}
