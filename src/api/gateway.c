/*
 * gateway.c - etcd's /v3 JSON gateway (grpc-gateway in etcd 3.4,
 * embed/serve.go) on the HTTP side of the client listener: a POST of a
 * request in proto3 JSON to /v3/<service>/<method> (or /v3beta/..., which
 * etcd rewrites to /v3/) is decoded with json/ into the request message,
 * given to the transport-neutral service (svc.h), and its reply written
 * back as JSON (json/, jsonpb's rules), with etcd's headers.
 *
 * Errors are written as grpc-gateway's DefaultHTTPError writes them: the
 * HTTP status of the gRPC code (HTTPStatusFromCode), body
 * {"error":msg,"message":msg,"code":N} with msg and N as the gRPC server
 * answers them (api_error); a body that does not decode gets code 3 (400)
 * with the decoder's reason.  A path under /v3/ that no route has is
 * grpc-gateway's "Not Found" (404, text); a route asked with another
 * method than POST is "Method Not Allowed" (405, text).
 *
 * What a second transport must do itself (ARCHITECTURE.md): the learner
 * gate (a learner serves Status and serializable Ranges only) and the
 * refusal of a member URL holding a NUL.
 *
 * Streams (/v3/watch, /v3/lease/keepalive, /v3/election/observe,
 * /v3/maintenance/snapshot) and the waits (/v3/lock/lock,
 * /v3/election/campaign) are gw_stream.c's: an HTTP answer that stays
 * open (chunked over HTTP/1.1, until close over HTTP/1.0, DATA frames
 * over HTTP/2).
 */
#include <stdio.h>
#include <string.h>

#include "api/api_int.h"
#include "json/json.h"
#include "server/server.h"
#include "svc/svc.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define JSON_CT "application/json"

/* A route: its path after the version prefix, the request type, and the
 * service call (the request is freed after it returns, unless owns). */
struct route {
    const char *path;                          /* "/kv/range" */
    const char *grpc;  /* the gRPC method it is counted as in grpc_server_*
                          ("/etcdserverpb.KV/Range"): etcd's gateway is a
                          gRPC client of its own server */
    const ProtobufCMessageDescriptor *req;     /* the request's type */
    void (*call)(struct server *s, ProtobufCMessage *req,
                 struct svc_done done);        /* the service */
    bool owns;        /* the service takes the request (svc_kv_range) */
    bool learner_ok;  /* a learner serves it (Status; Range: see gate) */
    bool streams;     /* a streamed answer: gw_stream.c */
};

#define WRAP(name, type, fn)                                               \
    static void name(struct server *s, ProtobufCMessage *r,                \
                     struct svc_done d)                                    \
    {                                                                      \
        fn(s, (type *)r, d);                                               \
    }
WRAP(kv_range, Etcdserverpb__RangeRequest, svc_kv_range)
WRAP(kv_put, Etcdserverpb__PutRequest, svc_kv_put)
WRAP(kv_delete, Etcdserverpb__DeleteRangeRequest, svc_kv_delete_range)
WRAP(kv_txn, Etcdserverpb__TxnRequest, svc_kv_txn)
WRAP(kv_compact, Etcdserverpb__CompactionRequest, svc_kv_compact)
WRAP(lease_grant, Etcdserverpb__LeaseGrantRequest, svc_lease_grant)
WRAP(lease_revoke, Etcdserverpb__LeaseRevokeRequest, svc_lease_revoke)
WRAP(lease_ttl, Etcdserverpb__LeaseTimeToLiveRequest, svc_lease_time_to_live)
WRAP(lease_leases, Etcdserverpb__LeaseLeasesRequest, svc_lease_leases)
WRAP(member_list, Etcdserverpb__MemberListRequest, svc_cluster_member_list)
WRAP(member_add, Etcdserverpb__MemberAddRequest, svc_cluster_member_add)
WRAP(member_remove, Etcdserverpb__MemberRemoveRequest,
     svc_cluster_member_remove)
WRAP(member_update, Etcdserverpb__MemberUpdateRequest,
     svc_cluster_member_update)
WRAP(member_promote, Etcdserverpb__MemberPromoteRequest,
     svc_cluster_member_promote)
WRAP(m_status, Etcdserverpb__StatusRequest, svc_maint_status)
WRAP(m_alarm, Etcdserverpb__AlarmRequest, svc_maint_alarm)
WRAP(m_hash, Etcdserverpb__HashRequest, svc_maint_hash)
WRAP(m_defrag, Etcdserverpb__DefragmentRequest, svc_maint_defragment)
WRAP(lock_unlock, V3lockpb__UnlockRequest, svc_lock_unlock)
WRAP(el_proclaim, V3electionpb__ProclaimRequest, svc_election_proclaim)
WRAP(el_leader, V3electionpb__LeaderRequest, svc_election_leader)
WRAP(el_resign, V3electionpb__ResignRequest, svc_election_resign)
#undef WRAP

/* Every Auth method: svc_auth_call tells them apart by the request's
 * descriptor. */
static void auth_any(struct server *s, ProtobufCMessage *r, struct svc_done d)
{
    svc_auth_call(s, r, d);
}

static void move_leader(struct server *s, ProtobufCMessage *r,
                        struct svc_done d)
{
    /* an HTTP request carries no deadline: the service's own bound */
    svc_maint_move_leader(s, (Etcdserverpb__MoveLeaderRequest *)r, INT64_MAX,
                          d);
}

#define D(x) &x##__descriptor
/* etcd 3.4's patterns (etcdserverpb/gw, v3lockpb/gw, v3electionpb/gw).
 * /v3/maintenance/hash is registered for both Hash and HashKV there and
 * serves Hash (the first pattern matched); HashKV has no path of its own.
 * The Auth paths take the token as etcd's gateway does: the
 * Authorization header (gw_metadata). */
static const struct route routes[] = {
    {"/auth/enable", "/etcdserverpb.Auth/AuthEnable",
     D(etcdserverpb__auth_enable_request), auth_any, false, false, false},
    {"/auth/disable", "/etcdserverpb.Auth/AuthDisable",
     D(etcdserverpb__auth_disable_request), auth_any, false, false, false},
    {"/auth/authenticate", "/etcdserverpb.Auth/Authenticate",
     D(etcdserverpb__authenticate_request), auth_any, false, false, false},
    {"/auth/user/add", "/etcdserverpb.Auth/UserAdd",
     D(etcdserverpb__auth_user_add_request), auth_any, false, false, false},
    {"/auth/user/get", "/etcdserverpb.Auth/UserGet",
     D(etcdserverpb__auth_user_get_request), auth_any, false, false, false},
    {"/auth/user/list", "/etcdserverpb.Auth/UserList",
     D(etcdserverpb__auth_user_list_request), auth_any, false, false, false},
    {"/auth/user/delete", "/etcdserverpb.Auth/UserDelete",
     D(etcdserverpb__auth_user_delete_request), auth_any, false, false, false},
    {"/auth/user/changepw", "/etcdserverpb.Auth/UserChangePassword",
     D(etcdserverpb__auth_user_change_password_request), auth_any,
     false, false, false},
    {"/auth/user/grant", "/etcdserverpb.Auth/UserGrantRole",
     D(etcdserverpb__auth_user_grant_role_request), auth_any,
     false, false, false},
    {"/auth/user/revoke", "/etcdserverpb.Auth/UserRevokeRole",
     D(etcdserverpb__auth_user_revoke_role_request), auth_any,
     false, false, false},
    {"/auth/role/add", "/etcdserverpb.Auth/RoleAdd",
     D(etcdserverpb__auth_role_add_request), auth_any, false, false, false},
    {"/auth/role/get", "/etcdserverpb.Auth/RoleGet",
     D(etcdserverpb__auth_role_get_request), auth_any, false, false, false},
    {"/auth/role/list", "/etcdserverpb.Auth/RoleList",
     D(etcdserverpb__auth_role_list_request), auth_any, false, false, false},
    {"/auth/role/delete", "/etcdserverpb.Auth/RoleDelete",
     D(etcdserverpb__auth_role_delete_request), auth_any, false, false, false},
    {"/auth/role/grant", "/etcdserverpb.Auth/RoleGrantPermission",
     D(etcdserverpb__auth_role_grant_permission_request), auth_any,
     false, false, false},
    {"/auth/role/revoke", "/etcdserverpb.Auth/RoleRevokePermission",
     D(etcdserverpb__auth_role_revoke_permission_request), auth_any,
     false, false, false},
    {"/kv/range", "/etcdserverpb.KV/Range",
     D(etcdserverpb__range_request), kv_range, true, true, false},
    {"/kv/put", "/etcdserverpb.KV/Put",
     D(etcdserverpb__put_request), kv_put, false, false, false},
    {"/kv/deleterange", "/etcdserverpb.KV/DeleteRange",
     D(etcdserverpb__delete_range_request), kv_delete, false, false, false},
    {"/kv/txn", "/etcdserverpb.KV/Txn",
     D(etcdserverpb__txn_request), kv_txn, false, false, false},
    {"/kv/compaction", "/etcdserverpb.KV/Compact",
     D(etcdserverpb__compaction_request), kv_compact, false, false, false},
    {"/watch", "/etcdserverpb.Watch/Watch",
     D(etcdserverpb__watch_request), NULL, false, false, true},
    {"/lease/grant", "/etcdserverpb.Lease/LeaseGrant",
     D(etcdserverpb__lease_grant_request), lease_grant, false, false, false},
    {"/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke",
     D(etcdserverpb__lease_revoke_request), lease_revoke, false, false, false},
    {"/kv/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke",
     D(etcdserverpb__lease_revoke_request), lease_revoke, false, false, false},
    {"/lease/keepalive", "/etcdserverpb.Lease/LeaseKeepAlive",
     D(etcdserverpb__lease_keep_alive_request), NULL, false, false, true},
    {"/lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive",
     D(etcdserverpb__lease_time_to_live_request), lease_ttl,
     false, false, false},
    {"/kv/lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive",
     D(etcdserverpb__lease_time_to_live_request), lease_ttl,
     false, false, false},
    {"/lease/leases", "/etcdserverpb.Lease/LeaseLeases",
     D(etcdserverpb__lease_leases_request), lease_leases, false, false, false},
    {"/kv/lease/leases", "/etcdserverpb.Lease/LeaseLeases",
     D(etcdserverpb__lease_leases_request), lease_leases, false, false, false},
    {"/cluster/member/add", "/etcdserverpb.Cluster/MemberAdd",
     D(etcdserverpb__member_add_request), member_add, false, false, false},
    {"/cluster/member/remove", "/etcdserverpb.Cluster/MemberRemove",
     D(etcdserverpb__member_remove_request), member_remove,
     false, false, false},
    {"/cluster/member/update", "/etcdserverpb.Cluster/MemberUpdate",
     D(etcdserverpb__member_update_request), member_update,
     false, false, false},
    {"/cluster/member/list", "/etcdserverpb.Cluster/MemberList",
     D(etcdserverpb__member_list_request), member_list, false, false, false},
    {"/cluster/member/promote", "/etcdserverpb.Cluster/MemberPromote",
     D(etcdserverpb__member_promote_request), member_promote,
     false, false, false},
    {"/maintenance/alarm", "/etcdserverpb.Maintenance/Alarm",
     D(etcdserverpb__alarm_request), m_alarm, false, false, false},
    {"/maintenance/status", "/etcdserverpb.Maintenance/Status",
     D(etcdserverpb__status_request), m_status, false, true, false},
    {"/maintenance/hash", "/etcdserverpb.Maintenance/Hash",
     D(etcdserverpb__hash_request), m_hash, false, false, false},
    {"/maintenance/defragment", "/etcdserverpb.Maintenance/Defragment",
     D(etcdserverpb__defragment_request), m_defrag, false, false, false},
    {"/maintenance/snapshot", "/etcdserverpb.Maintenance/Snapshot",
     D(etcdserverpb__snapshot_request), NULL, false, false, true},
    {"/maintenance/transfer-leadership",
     "/etcdserverpb.Maintenance/MoveLeader",
     D(etcdserverpb__move_leader_request), move_leader, false, false, false},
    {"/lock/lock", "/v3lockpb.Lock/Lock",
     D(v3lockpb__lock_request), NULL, false, false, true},
    {"/lock/unlock", "/v3lockpb.Lock/Unlock",
     D(v3lockpb__unlock_request), lock_unlock, false, false, false},
    {"/election/campaign", "/v3electionpb.Election/Campaign",
     D(v3electionpb__campaign_request), NULL, false, false, true},
    {"/election/proclaim", "/v3electionpb.Election/Proclaim",
     D(v3electionpb__proclaim_request), el_proclaim, false, false, false},
    {"/election/leader", "/v3electionpb.Election/Leader",
     D(v3electionpb__leader_request), el_leader, false, false, false},
    {"/election/observe", "/v3electionpb.Election/Observe",
     D(v3electionpb__leader_request), NULL, false, false, true},
    {"/election/resign", "/v3electionpb.Election/Resign",
     D(v3electionpb__resign_request), el_resign, false, false, false},
};
#undef D

/* grpc-gateway's HTTPStatusFromCode. */
int api__gw_status(grpc_status_code c)
{
    static const int map[] = {
        [GRPC_STATUS_OK] = 200,
        [GRPC_STATUS_CANCELLED] = 408,
        [GRPC_STATUS_UNKNOWN] = 500,
        [GRPC_STATUS_INVALID_ARGUMENT] = 400,
        [GRPC_STATUS_DEADLINE_EXCEEDED] = 504,
        [GRPC_STATUS_NOT_FOUND] = 404,
        [GRPC_STATUS_ALREADY_EXISTS] = 409,
        [GRPC_STATUS_PERMISSION_DENIED] = 403,
        [GRPC_STATUS_RESOURCE_EXHAUSTED] = 429,
        [GRPC_STATUS_FAILED_PRECONDITION] = 412,
        [GRPC_STATUS_ABORTED] = 409,
        [GRPC_STATUS_OUT_OF_RANGE] = 400,
        [GRPC_STATUS_UNIMPLEMENTED] = 501,
        [GRPC_STATUS_INTERNAL] = 500,
        [GRPC_STATUS_UNAVAILABLE] = 503,
        [GRPC_STATUS_DATA_LOSS] = 500,
        [GRPC_STATUS_UNAUTHENTICATED] = 401,
    };
    if ((unsigned)c < sizeof map / sizeof map[0] && map[c] != 0)
        return map[c];
    return 500;
}

void api__gw_reply_error(struct rpc_call *call, grpc_status_code code,
                         const char *msg)
{
    rpc_call_count_code(call, code);
    struct json_buf b = {0};
    json_buf_str(&b, "{\"error\":");
    json_pb_string(&b, msg, strlen(msg));
    json_buf_str(&b, ",\"message\":");
    json_pb_string(&b, msg, strlen(msg));
    char c[32];
    snprintf(c, sizeof c, ",\"code\":%d}", (int)code);
    json_buf_str(&b, c);
    if (b.nomem)
        rpc_call_reply_http(call, 500, JSON_CT, 0, NULL, 0);
    else
        rpc_call_reply_http(call, api__gw_status(code), JSON_CT, 0, b.p, b.n);
    mem_free(b.p);
}

static void reply_err(struct rpc_call *call, int err)
{
    const char *msg;
    grpc_status_code code = api_error(err, &msg);
    api__gw_reply_error(call, code, msg);
}

void api__gw_reply_msg(struct rpc_call *call, const ProtobufCMessage *m)
{
    struct json_buf b = {0};
    int rc = json_pb_encode(m, &b);
    if (rc != 0)
        reply_err(call, rc);
    else
        rpc_call_reply_http(call, 200, JSON_CT, RPC_HTTP_GRPC_META, b.p,
                            b.n);
    mem_free(b.p);
}

/* The completion of a gateway call: runs on whichever thread the service
 * completes on (svc.h); the call may be answered from any thread. */
static void on_done(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct rpc_call *call = ctx;
    if (err != 0)
        reply_err(call, err);
    else
        api__gw_reply_msg(call, reply);
}

static void text(struct rpc_call *call, int status, const char *body)
{
    rpc_call_reply_http(call, status, "text/plain; charset=utf-8",
                        RPC_HTTP_NOSNIFF, body, strlen(body));
}

/* gate: etcd's learner interceptor, behind the gateway as in front of
 * gRPC: a learner serves Status and serializable Ranges only. */
static bool gate(struct server *s, const struct route *r,
                 const ProtobufCMessage *req)
{
    if (!server_is_learner(s))
        return true;
    if (!r->learner_ok)
        return false;
    return r->call != kv_range ||
           ((const Etcdserverpb__RangeRequest *)req)->serializable;
}

/* serve decodes body as r's request and hands it to the service. */
/* The request's metadata as grpc-gateway forwards it: the Authorization
 * header as "authorization" (where etcd reads a gateway client's token),
 * and a Grpc-Metadata-<Key> header as "<key>" (so "token" too). */
static const char *gw_metadata(void *ctx, const char *key, size_t *len)
{
    if (strcmp(key, "authorization") == 0)
        return rpc_call_metadata(ctx, key, len);
    char name[64];
    int n = snprintf(name, sizeof name, "grpc-metadata-%s", key);
    if (n < 0 || (size_t)n >= sizeof name)
        return NULL;
    return rpc_call_metadata(ctx, name, len);
}

static void serve(struct server *s, const struct route *r,
                  struct rpc_call *call, const uint8_t *body, size_t n)
{
    ProtobufCMessage *req = NULL;
    struct json_pb_info info;
    char why[JSON_PB_ERR_MAX];
    int rc = json_pb_decode(r->req, (const char *)body, n, &req, &info, why,
                            sizeof why);
    /* a chunked body that broke off: etcd's gateway decodes what came
     * before the bad framing, and fails with the read's error if that is
     * not a whole request */
    const char *berr = rpc_call_http_body_error(call);
    size_t lead = 0;
    while (lead < n && (body[lead] == ' ' || body[lead] == '\t' ||
                        body[lead] == '\r' || body[lead] == '\n'))
        lead++;
    if (berr != NULL && rc == 0 && lead == n) { /* nothing before it */
        protobuf_c_message_free_unpacked(req, NULL);
        rc = ERR_INVAL;
    }
    if (rc == ERR_INVAL)
        return api__gw_reply_error(call, GRPC_STATUS_INVALID_ARGUMENT,
                                   berr != NULL ? berr : why);
    if (rc != 0)
        return reply_err(call, rc);
    if (!gate(s, r, req)) {
        protobuf_c_message_free_unpacked(req, NULL);
        return api__gw_reply_error(call, GRPC_STATUS_UNAVAILABLE,
                                   "etcdserver: rpc not supported for "
                                   "learner");
    }
    if (info.nul_in_string && (r->call == member_add ||
                               r->call == member_update)) {
        protobuf_c_message_free_unpacked(req, NULL);
        return reply_err(call, ERR_MEMBER_BAD_URLS);
    }
    /* counted from here, as etcd's server counts its gateway's call once
     * past the gateway's decoding and the learner interceptor */
    rpc_call_count_as(call, r->grpc);
    r->call(s, req, (struct svc_done){on_done, call, gw_metadata});
    if (!r->owns)
        protobuf_c_message_free_unpacked(req, NULL);
}

bool api__gw_serve(struct server *s, struct rpc_call *call, const char *t,
                   size_t pn, const char *m, const uint8_t *body, size_t n)
{
    size_t skip = pn >= 4 && memcmp(t, "/v3/", 4) == 0           ? 3
                  : pn >= 8 && memcmp(t, "/v3beta/", 8) == 0     ? 7
                                                                 : 0;
    if (skip == 0)
        return false;
    if (strcmp(m, "OPTIONS") == 0) {
        /* etcd's access controller answers CORS preflights itself */
        rpc_call_reply_http(call, 200, NULL, 0, NULL, 0);
        return true;
    }
    const char *p = t + skip;
    size_t len = pn - skip;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct route *r = &routes[i];
        if (strlen(r->path) != len || memcmp(r->path, p, len) != 0)
            continue;
        if (strcmp(m, "POST") != 0)
            text(call, 405, "Method Not Allowed\n");
        else if (r->streams && server_is_learner(s))
            api__gw_reply_error(call, GRPC_STATUS_UNAVAILABLE,
                                "etcdserver: rpc not supported for "
                                "learner");
        else if (r->streams)
            api__gw_stream(s, r->path, r->grpc, r->req, call, body, n);
        else
            serve(s, r, call, body, n);
        return true;
    }
    text(call, 404, "Not Found\n");
    return true;
}
