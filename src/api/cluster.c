/*
 * cluster.c - the etcdserverpb.Cluster service (MemberList, MemberAdd,
 * MemberRemove, MemberUpdate, MemberPromote) and, on the peer listener,
 * cetcd's Join service that a member started with
 * --initial-cluster-state=existing asks for the cluster id and members,
 * and the Promote call a follower forwards a promotion with.
 *
 * MemberList is served from the local members store (etcd 3.4 does the
 * same).  Changes go to server_member_change, which proposes a raft conf
 * change; the reply is built on the apply thread once the change is
 * applied here, from the members store as it then is.  A promotion asked
 * of a follower is answered with the leader's list of the members (the
 * leader decided and applied it first), as etcd does.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "server/server.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/str.h"

#define URLS_MAX 16 /* URLs of one member in a response */
#define SERVER_MEMBERS_MAX_API 16 /* members listed (server: 16 at most) */

static void reply_err(struct rpc_call *call, int err)
{
    const char *msg;
    grpc_status_code code = api_error(err, &msg);
    rpc_call_reply_error(call, code, msg);
}

static void bad_request(struct rpc_call *call)
{
    rpc_call_reply_error(call, GRPC_STATUS_INTERNAL,
                         "grpc: error unmarshalling request");
}

/* The members as protobuf, pointing into a snapshot of the table. */
struct members_pb {
    struct server_member_info info[SERVER_MEMBERS_MAX_API];
    Etcdserverpb__Member m[SERVER_MEMBERS_MAX_API];
    Etcdserverpb__Member *ptrs[SERVER_MEMBERS_MAX_API];
    char *purls[SERVER_MEMBERS_MAX_API][URLS_MAX];
    char *curls[SERVER_MEMBERS_MAX_API][URLS_MAX];
    size_t n;
};

static size_t split(char *buf, char **out)
{
    size_t n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t && n < URLS_MAX;
         t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    return n;
}

static void members_fill(struct server *s, struct members_pb *p)
{
    size_t n = server_members_list(s, p->info, SERVER_MEMBERS_MAX_API);
    p->n = n < SERVER_MEMBERS_MAX_API ? n : SERVER_MEMBERS_MAX_API;
    for (size_t i = 0; i < p->n; i++) {
        Etcdserverpb__Member *m = &p->m[i];
        etcdserverpb__member__init(m);
        m->id = p->info[i].id;
        m->name = p->info[i].name;
        m->n_peerurls = split(p->info[i].peer_urls, p->purls[i]);
        m->peerurls = p->purls[i];
        m->n_clienturls = split(p->info[i].client_urls, p->curls[i]);
        m->clienturls = p->curls[i];
        m->islearner = p->info[i].is_learner;
        p->ptrs[i] = m;
    }
}

static Etcdserverpb__Member *members_find(struct members_pb *p, uint64_t id)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->m[i].id == id)
            return &p->m[i];
    return NULL;
}

static void member_list(struct rpc_call *call, const uint8_t *req, size_t len,
                        void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MemberListRequest *r =
        etcdserverpb__member_list_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    etcdserverpb__member_list_request__free_unpacked(r, NULL);
    struct members_pb *p = mem_malloc(sizeof *p);
    if (p == NULL)
        return reply_err(call, ERR_NOMEM);
    members_fill(api->server, p);
    Etcdserverpb__MemberListResponse resp =
        ETCDSERVERPB__MEMBER_LIST_RESPONSE__INIT;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(api->server, &h);
    resp.header = &h;
    resp.n_members = p->n;
    resp.members = p->ptrs;
    rpc_call_reply(call, &resp.base);
    mem_free(p);
}

/* A change waiting for its outcome. */
struct pending {
    struct rpc_call *call;
    struct api *api;
    int op; /* enum server_member_op */
};

/* Every change response is {header, members} (+ member for Add). */
static void on_changed(void *arg, const struct server_member_result *res)
{
    struct pending *pd = arg;
    int err = res->err;
    struct members_pb *p = err == 0 ? mem_malloc(sizeof *p) : NULL;
    if (err == 0 && p == NULL)
        err = ERR_NOMEM;
    if (err != 0) {
        reply_err(pd->call, err);
        mem_free(pd);
        return;
    }
    members_fill(pd->api->server, p);
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(pd->api->server, &h);
    /* Member*Response share {header = 1, members = 2} except Add, whose
     * members are field 3 after member = 2. */
    if (pd->op == SERVER_MEMBER_ADD) {
        Etcdserverpb__MemberAddResponse r =
            ETCDSERVERPB__MEMBER_ADD_RESPONSE__INIT;
        r.header = &h;
        r.member = members_find(p, res->id);
        r.n_members = p->n;
        r.members = p->ptrs;
        rpc_call_reply(pd->call, &r.base);
    } else {
        Etcdserverpb__MemberListResponse r =
            ETCDSERVERPB__MEMBER_LIST_RESPONSE__INIT;
        r.header = &h;
        r.n_members = p->n;
        r.members = p->ptrs;
        if (res->members != NULL) { /* the leader's list */
            r.n_members = res->n_members;
            r.members = (Etcdserverpb__Member **)res->members;
        }
        rpc_call_reply(pd->call, &r.base);
    }
    mem_free(p);
    mem_free(pd);
}

static void change(struct rpc_call *call, struct api *api,
                   struct server_member_change *c)
{
    struct pending *pd = mem_malloc(sizeof *pd);
    if (pd == NULL)
        return reply_err(call, ERR_NOMEM);
    *pd = (struct pending){call, api, c->op};
    server_member_change(api->server, c, on_changed, pd);
}

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

/* etcd trims the space around each peer URL before checking it, and
 * keeps the trimmed URL (types.NewURLs). */
static void trim_urls(char **urls, size_t n)
{
    for (size_t i = 0; i < n; i++)
        str_trim_inplace(urls[i]);
}

static void member_add(struct rpc_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    Etcdserverpb__MemberAddRequest *r =
        etcdserverpb__member_add_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    if (field_has_nul(req, len, 1)) { /* peerURLs */
        etcdserverpb__member_add_request__free_unpacked(r, NULL);
        return reply_err(call, ERR_MEMBER_BAD_URLS);
    }
    trim_urls(r->peerurls, r->n_peerurls);
    struct server_member_change c = {
        .op = SERVER_MEMBER_ADD,
        .peer_urls = (const char *const *)r->peerurls,
        .n_peer_urls = r->n_peerurls,
        .is_learner = r->islearner};
    change(call, ctx, &c);
    etcdserverpb__member_add_request__free_unpacked(r, NULL);
}

static void member_remove(struct rpc_call *call, const uint8_t *req,
                          size_t len, void *ctx)
{
    Etcdserverpb__MemberRemoveRequest *r =
        etcdserverpb__member_remove_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    struct server_member_change c = {.op = SERVER_MEMBER_REMOVE, .id = r->id};
    etcdserverpb__member_remove_request__free_unpacked(r, NULL);
    change(call, ctx, &c);
}

static void member_update(struct rpc_call *call, const uint8_t *req,
                          size_t len, void *ctx)
{
    Etcdserverpb__MemberUpdateRequest *r =
        etcdserverpb__member_update_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    if (field_has_nul(req, len, 2)) { /* peerURLs */
        etcdserverpb__member_update_request__free_unpacked(r, NULL);
        return reply_err(call, ERR_MEMBER_BAD_URLS);
    }
    trim_urls(r->peerurls, r->n_peerurls);
    struct server_member_change c = {
        .op = SERVER_MEMBER_UPDATE,
        .id = r->id,
        .peer_urls = (const char *const *)r->peerurls,
        .n_peer_urls = r->n_peerurls};
    change(call, ctx, &c);
    etcdserverpb__member_update_request__free_unpacked(r, NULL);
}

static void member_promote(struct rpc_call *call, const uint8_t *req,
                           size_t len, void *ctx)
{
    Etcdserverpb__MemberPromoteRequest *r =
        etcdserverpb__member_promote_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    struct server_member_change c = {.op = SERVER_MEMBER_PROMOTE,
                                     .id = r->id};
    etcdserverpb__member_promote_request__free_unpacked(r, NULL);
    change(call, ctx, &c);
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

/* --- the peer listener's Join service ------------------------------------ */

static void join_members(struct rpc_call *call, const uint8_t *req,
                         size_t len, void *ctx)
{
    struct server *s = ctx;
    Cetcdpb__JoinRequest *r = cetcdpb__join_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    struct members_pb *p = mem_malloc(sizeof *p);
    if (p == NULL) {
        cetcdpb__join_request__free_unpacked(r, NULL);
        return reply_err(call, ERR_NOMEM);
    }
    uint64_t cid;
    size_t n;
    int rc = server_join_info(s, r->cluster_token, &cid, p->info,
                              SERVER_MEMBERS_MAX_API, &n);
    cetcdpb__join_request__free_unpacked(r, NULL);
    if (rc != 0) {
        mem_free(p);
        rpc_call_reply_error(call, GRPC_STATUS_FAILED_PRECONDITION,
                             "cetcd: the cluster token does not match");
        return;
    }
    members_fill(s, p);
    Cetcdpb__JoinResponse resp = CETCDPB__JOIN_RESPONSE__INIT;
    resp.cluster_id = cid;
    resp.n_members = p->n;
    resp.members = p->ptrs;
    rpc_call_reply(call, &resp.base);
    mem_free(p);
}

/* --- the peer listener's Promote: a promotion a follower forwards ------ */

/* A forwarded promotion waiting for its outcome here. */
struct peer_pending {
    struct rpc_call *call;
    struct server *s;
};

/* The outcome travels as PromoteResponse.error (a stable ERR_* code): the
 * follower gives it to its client as if it were its own. */
static void on_peer_promoted(void *arg, const struct server_member_result *res)
{
    struct peer_pending *pd = arg;
    Cetcdpb__PromoteResponse resp = CETCDPB__PROMOTE_RESPONSE__INIT;
    struct members_pb *p = res->err == 0 ? mem_malloc(sizeof *p) : NULL;
    resp.error = res->err != 0 || p != NULL ? res->err : ERR_NOMEM;
    if (p != NULL) {
        members_fill(pd->s, p);
        resp.n_members = p->n;
        resp.members = p->ptrs;
    }
    rpc_call_reply(pd->call, &resp.base);
    mem_free(p);
    mem_free(pd);
}

static void peer_promote(struct rpc_call *call, const uint8_t *req,
                         size_t len, void *ctx)
{
    struct server *s = ctx;
    Cetcdpb__PromoteRequest *r =
        cetcdpb__promote_request__unpack(NULL, len, req);
    if (r == NULL)
        return bad_request(call);
    uint64_t cluster_id = r->cluster_id, id = r->member_id;
    cetcdpb__promote_request__free_unpacked(r, NULL);
    if (cluster_id != server_cluster_id(s)) {
        rpc_call_reply_error(call, GRPC_STATUS_FAILED_PRECONDITION,
                             "cetcd: cluster ID mismatch");
        return;
    }
    struct peer_pending *pd = mem_malloc(sizeof *pd);
    if (pd == NULL)
        return reply_err(call, ERR_NOMEM);
    *pd = (struct peer_pending){call, s};
    struct server_member_change c = {
        .op = SERVER_MEMBER_PROMOTE, .id = id, .from_peer = true};
    server_member_change(s, &c, on_peer_promoted, pd);
}

int api_peer_register(struct rpc_server *peer, struct server *s)
{
    int rc = rpc_server_register_unary(peer, "/cetcdpb.Join/Members",
                                       join_members, s);
    if (rc == 0)
        rc = rpc_server_register_unary(peer, "/cetcdpb.Cluster/Promote",
                                       peer_promote, s);
    return rc;
}
