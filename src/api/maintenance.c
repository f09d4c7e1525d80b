/*
 * maintenance.c - the etcdserverpb.Maintenance service on gRPC: Status,
 * MoveLeader, Alarm, Hash and HashKV, served by svc/maintenance.c, and
 * Defragment (svc/defrag.c); Snapshot is a stream, registered by
 * snapshot.c.
 */
#include "api/api_int.h"
#include "svc/svc.h"
#include "util/err.h"

static void status(struct rpc_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    struct api *api = ctx;
    (void)req;
    (void)len;
    /* StatusRequest has no fields: nothing to decode (as before svc). */
    Etcdserverpb__StatusRequest r = ETCDSERVERPB__STATUS_REQUEST__INIT;
    svc_maint_status(api->server, &r, api__done(call));
}

/* The call waits for the new leader until the client's deadline at most. */
static void move_leader(struct rpc_call *call, const uint8_t *req, size_t len,
                        void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MoveLeaderRequest *r =
        etcdserverpb__move_leader_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_maint_move_leader(api->server, r, rpc_call_deadline_ns(call),
                          api__done(call));
    etcdserverpb__move_leader_request__free_unpacked(r, NULL);
}

static void alarm(struct rpc_call *call, const uint8_t *req, size_t len,
                  void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__AlarmRequest *r =
        etcdserverpb__alarm_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_maint_alarm(api->server, r, api__done(call));
    etcdserverpb__alarm_request__free_unpacked(r, NULL);
}

static void hash_kv(struct rpc_call *call, const uint8_t *req, size_t len,
                    void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__HashKVRequest *r =
        etcdserverpb__hash_kvrequest__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_maint_hash_kv(api->server, r, api__done(call));
    etcdserverpb__hash_kvrequest__free_unpacked(r, NULL);
}

static void hash(struct rpc_call *call, const uint8_t *req, size_t len,
                 void *ctx)
{
    struct api *api = ctx;
    (void)req;
    (void)len;
    /* HashRequest has no fields: nothing to decode. */
    Etcdserverpb__HashRequest r = ETCDSERVERPB__HASH_REQUEST__INIT;
    svc_maint_hash(api->server, &r, api__done(call));
}

/* DefragmentRequest has no fields: nothing to decode.  The answer comes
 * from the defrag thread once the store is defragmented. */
static void defragment(struct rpc_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    struct api *api = ctx;
    (void)req;
    (void)len;
    Etcdserverpb__DefragmentRequest r = ETCDSERVERPB__DEFRAGMENT_REQUEST__INIT;
    svc_maint_defragment(api->server, &r, api__done(call));
}

int api__maintenance_register(struct api *api)
{
    int rc = rpc_server_register_unary(
        api->rpc, "/etcdserverpb.Maintenance/Status", status, api);
    if (rc == 0)
        rc = rpc_server_register_unary(
            api->rpc, "/etcdserverpb.Maintenance/MoveLeader", move_leader,
            api);
    if (rc == 0)
        rc = rpc_server_register_unary(
            api->rpc, "/etcdserverpb.Maintenance/Alarm", alarm, api);
    if (rc == 0)
        rc = rpc_server_register_unary(
            api->rpc, "/etcdserverpb.Maintenance/HashKV", hash_kv, api);
    if (rc == 0)
        rc = rpc_server_register_unary(
            api->rpc, "/etcdserverpb.Maintenance/Hash", hash, api);
    if (rc == 0)
        rc = rpc_server_register_unary(
            api->rpc, "/etcdserverpb.Maintenance/Defragment", defragment,
            api);
    return rc;
}

/* --- the peer listener: a member's corruption check asks its peers ------ */

static void peer_hash_kv(struct rpc_call *call, const uint8_t *req,
                         size_t len, void *ctx)
{
    struct server *s = ctx;
    Cetcdpb__PeerHashRequest *r =
        cetcdpb__peer_hash_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_peer_hash_kv(s, r, (struct svc_done){api__on_peer_done, call});
    cetcdpb__peer_hash_request__free_unpacked(r, NULL);
}

int api__maintenance_peer_register(struct rpc_server *peer, struct server *s)
{
    /* The path server/peer_hash.c calls. */
    return rpc_server_register_unary(peer, "/cetcdpb.Maintenance/HashKV",
                                     peer_hash_kv, s);
}
