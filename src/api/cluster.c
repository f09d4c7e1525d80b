/*
 * cluster.c - the etcdserverpb.Cluster service (MemberList, MemberAdd,
 * MemberRemove, MemberUpdate, MemberPromote) on the client listener and
 * cetcd's Join and Promote services on the peer listener, on gRPC: decode,
 * call svc/cluster.c, answer.  Decoding here includes one check the
 * decoded message cannot show: a peer URL holding a NUL byte.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "api/api_int.h"
#include "svc/svc.h"
#include "util/err.h"

/* varint reads a protobuf varint at *p (below end); false when it is cut
 * or longer than 10 bytes. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0)
            return true;
    }
    return false;
}

/* field_has_nul is true if a length-delimited field number `field` of the
 * top-level message (req, len) holds a NUL byte.  protobuf-c hands strings
 * over NUL-terminated, so a URL with a NUL would reach the server cut
 * there and look valid ("http://a:1\0evil" as "http://a:1"); etcd's
 * url.Parse refuses the control character.  The request was unpacked
 * already, so its framing is sound; an odd one is simply not looked into
 * further. */
static bool field_has_nul(const uint8_t *req, size_t len, uint32_t field)
{
    const uint8_t *p = req, *end = req + len;
    uint64_t tag, n;
    while (p < end && varint(&p, end, &tag)) {
        switch (tag & 7) {
        case 0:
            if (!varint(&p, end, &n))
                return false;
            break;
        case 1:
        case 5:
            n = (tag & 7) == 1 ? 8 : 4;
            if ((uint64_t)(end - p) < n)
                return false;
            p += n;
            break;
        case 2:
            if (!varint(&p, end, &n) || (uint64_t)(end - p) < n)
                return false;
            if (tag >> 3 == field && memchr(p, 0, (size_t)n) != NULL)
                return true;
            p += n;
            break;
        default:
            return false;
        }
    }
    return false;
}

static void member_list(struct rpc_call *call, const uint8_t *req, size_t len,
                        void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MemberListRequest *r =
        etcdserverpb__member_list_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_cluster_member_list(api->server, r, api__done(call));
    etcdserverpb__member_list_request__free_unpacked(r, NULL);
}

static void member_add(struct rpc_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MemberAddRequest *r =
        etcdserverpb__member_add_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    if (field_has_nul(req, len, 1)) /* peerURLs */
        api__reply_err(call, ERR_MEMBER_BAD_URLS);
    else
        svc_cluster_member_add(api->server, r, api__done(call));
    etcdserverpb__member_add_request__free_unpacked(r, NULL);
}

static void member_remove(struct rpc_call *call, const uint8_t *req,
                          size_t len, void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MemberRemoveRequest *r =
        etcdserverpb__member_remove_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_cluster_member_remove(api->server, r, api__done(call));
    etcdserverpb__member_remove_request__free_unpacked(r, NULL);
}

static void member_update(struct rpc_call *call, const uint8_t *req,
                          size_t len, void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MemberUpdateRequest *r =
        etcdserverpb__member_update_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    if (field_has_nul(req, len, 2)) /* peerURLs */
        api__reply_err(call, ERR_MEMBER_BAD_URLS);
    else
        svc_cluster_member_update(api->server, r, api__done(call));
    etcdserverpb__member_update_request__free_unpacked(r, NULL);
}

static void member_promote(struct rpc_call *call, const uint8_t *req,
                           size_t len, void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MemberPromoteRequest *r =
        etcdserverpb__member_promote_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_cluster_member_promote(api->server, r, api__done(call));
    etcdserverpb__member_promote_request__free_unpacked(r, NULL);
}

int api__cluster_register(struct api *api)
{
    static const struct {
        const char *path;
        rpc_unary_fn fn;
    } m[] = {
        {"/etcdserverpb.Cluster/MemberList", member_list},
        {"/etcdserverpb.Cluster/MemberAdd", member_add},
        {"/etcdserverpb.Cluster/MemberRemove", member_remove},
        {"/etcdserverpb.Cluster/MemberUpdate", member_update},
        {"/etcdserverpb.Cluster/MemberPromote", member_promote},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof m / sizeof m[0]; i++)
        rc = rpc_server_register_unary(api->rpc, m[i].path, m[i].fn, api);
    return rc;
}

/* --- the peer listener --------------------------------------------------- */

/* The peer services' answers (cetcd's wire, read by cmd/join.c and
 * server/member_forward.c). */
static void on_join(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct rpc_call *call = ctx;
    if (err != 0)
        api__reply_err(call, err);
    else
        rpc_call_reply(call, reply);
}

static void join_members(struct rpc_call *call, const uint8_t *req,
                         size_t len, void *ctx)
{
    struct server *s = ctx;
    Cetcdpb__JoinRequest *r = cetcdpb__join_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_peer_join(s, r, (struct svc_done){on_join, call});
    cetcdpb__join_request__free_unpacked(r, NULL);
}

static void peer_promote(struct rpc_call *call, const uint8_t *req,
                         size_t len, void *ctx)
{
    struct server *s = ctx;
    Cetcdpb__PromoteRequest *r =
        cetcdpb__promote_request__unpack(NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    svc_peer_promote(s, r, (struct svc_done){api__on_peer_done, call});
    cetcdpb__promote_request__free_unpacked(r, NULL);
}

int api_peer_register(struct rpc_server *peer, struct server *s)
{
    int rc = rpc_server_register_unary(peer, "/cetcdpb.Join/Members",
                                       join_members, s);
    if (rc == 0)
        rc = rpc_server_register_unary(peer, "/cetcdpb.Cluster/Promote",
                                       peer_promote, s);
    if (rc == 0)
        rc = api__lease_peer_register(peer, s); /* lease.c */
    if (rc == 0)
        rc = api__maintenance_peer_register(peer, s);
    return rc;
}
