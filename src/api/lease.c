/*
 * lease.c - the etcdserverpb.Lease service on gRPC: LeaseGrant,
 * LeaseRevoke, LeaseTimeToLive and LeaseLeases (unary, svc/lease.c) and
 * LeaseKeepAlive (a bidirectional stream, svc/lease_keepalive.c, through
 * the stream adapter); and on the peer listener cetcd's Lease/Renew and
 * Lease/TimeToLive, which a follower calls on the leader
 * (server/lease_forward.c).
 */
#include "api/api_int.h"

#define UNARY(name, type, fn)                                                \
    static void name(struct rpc_call *call, const uint8_t *req, size_t len,  \
                     void *ctx)                                              \
    {                                                                        \
        struct api *api = ctx;                                               \
        Etcdserverpb__##type *r =                                            \
            (Etcdserverpb__##type *)protobuf_c_message_unpack(               \
                &etcdserverpb__##fn##__descriptor, NULL, len, req);          \
        if (r == NULL)                                                       \
            return api__bad_request(call);                                   \
        svc_lease_##name(api->server, r, api__done(call));                   \
        protobuf_c_message_free_unpacked(&r->base, NULL);                    \
    }

UNARY(grant, LeaseGrantRequest, lease_grant_request)
UNARY(revoke, LeaseRevokeRequest, lease_revoke_request)
UNARY(time_to_live, LeaseTimeToLiveRequest, lease_time_to_live_request)
UNARY(leases, LeaseLeasesRequest, lease_leases_request)

/* A keep-alive stream's send queue, and so its queue of requests waiting
 * for their renewal (svc/lease_keepalive.c): clientv3 sends the renewals
 * of all its leases due together in one burst, so this is larger than
 * Watch's 128; an answer is about 40 bytes. */
#define KEEPALIVE_QUEUE 1024

int api__lease_register(struct api *api)
{
    static const struct {
        const char *path;
        rpc_unary_fn fn;
    } unary[] = {
        {"/etcdserverpb.Lease/LeaseGrant", grant},
        {"/etcdserverpb.Lease/LeaseRevoke", revoke},
        {"/etcdserverpb.Lease/LeaseTimeToLive", time_to_live},
        {"/etcdserverpb.Lease/LeaseLeases", leases},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof unary / sizeof unary[0]; i++)
        rc = rpc_server_register_unary(api->rpc, unary[i].path, unary[i].fn,
                                       api);
    api->keepalive = (struct api_stream_method){
        .handler = &svc_lease_keepalive_handler,
        .server = api->server,
        .queue_max = KEEPALIVE_QUEUE,
    };
    if (rc == 0)
        rc = api__stream_register(api->rpc,
                                  "/etcdserverpb.Lease/LeaseKeepAlive",
                                  &api->keepalive);
    return rc;
}

/* --- the peer listener ------------------------------------------------ */

static void on_peer_answer(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct rpc_call *call = ctx;
    if (err != 0)
        api__reply_err(call, err);
    else
        rpc_call_reply(call, reply);
}

static void peer_renew(struct rpc_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    struct server *s = ctx;
    Etcdserverpb__LeaseKeepAliveRequest *r =
        etcdserverpb__lease_keep_alive_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_peer_lease_renew(s, r, (struct svc_done){on_peer_answer, call});
    etcdserverpb__lease_keep_alive_request__free_unpacked(r, NULL);
}

static void peer_ttl(struct rpc_call *call, const uint8_t *req, size_t len,
                     void *ctx)
{
    struct server *s = ctx;
    Etcdserverpb__LeaseTimeToLiveRequest *r =
        etcdserverpb__lease_time_to_live_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_peer_lease_ttl(s, r, (struct svc_done){on_peer_answer, call});
    etcdserverpb__lease_time_to_live_request__free_unpacked(r, NULL);
}

int api__lease_peer_register(struct rpc_server *peer, struct server *s)
{
    int rc = rpc_server_register_unary(peer, "/cetcdpb.Lease/Renew",
                                       peer_renew, s);
    if (rc == 0)
        rc = rpc_server_register_unary(peer, "/cetcdpb.Lease/TimeToLive",
                                       peer_ttl, s);
    return rc;
}
