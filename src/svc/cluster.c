/*
 * cluster.c - the Cluster service (MemberList, MemberAdd, MemberRemove,
 * MemberUpdate, MemberPromote) and the peer listener's Join (a member
 * started with --initial-cluster-state=existing asks for the cluster id
 * and members) and Promote (a promotion a follower forwards to the
 * leader).
 *
 * MemberList is linearizable (etcd 3.5's MemberListRequest.linearizable,
 * and cetcd's choice for a 3.4 client that sends nothing while the member
 * knows a leader): a ReadIndex barrier, then the local members store.
 * etcd 3.4 serves the local store at once, so a list asked of one member
 * right after another published itself could lack that member's client
 * URLs (etcd #6192, #11198).  A 3.4 client's list falls back to the local
 * store when there is no leader or the barrier fails (3.4's availability);
 * an explicit linearizable one fails instead (etcd 3.5).  Changes go to server_member_change, which proposes a raft conf
 * change; the reply is built on the apply thread once the change is
 * applied here, from the members store as it then is.  A promotion asked
 * of a follower is answered with the leader's list of the members (the
 * leader decided and applied it first), as etcd does.
 */
#include "svc/svc.h"

#include <string.h>

#include "server/server.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/str.h"

#define URLS_MAX 16    /* URLs of one member in a response */
#define MEMBERS_MAX 16 /* members listed (server: 16 at most) */

/* The members as protobuf, pointing into a snapshot of the table. */
struct members_pb {
    struct server_member_info info[MEMBERS_MAX]; /* the snapshot */
    Etcdserverpb__Member m[MEMBERS_MAX];         /* pointing into info */
    Etcdserverpb__Member *ptrs[MEMBERS_MAX];     /* &m[i], for repeated */
    char *purls[MEMBERS_MAX][URLS_MAX];          /* peer URLs, into info */
    char *curls[MEMBERS_MAX][URLS_MAX];          /* client URLs, into info */
    size_t n;                                    /* members in m */
};

/* split cuts the comma list buf in place into at most URLS_MAX strings. */
static size_t split(char *buf, char **out)
{
    size_t n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t && n < URLS_MAX;
         t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    return n;
}

/* members_fill builds p from the members store of s. */
static void members_fill(struct server *s, struct members_pb *p)
{
    size_t n = server_members_list(s, p->info, MEMBERS_MAX);
    p->n = n < MEMBERS_MAX ? n : MEMBERS_MAX;
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

static void member_list_answer(struct server *s, struct svc_done done)
{
    struct members_pb *p = mem_malloc(sizeof *p);
    if (p == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    members_fill(s, p);
    Etcdserverpb__MemberListResponse resp =
        ETCDSERVERPB__MEMBER_LIST_RESPONSE__INIT;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(s, &h);
    h.revision = 0; /* etcd's cluster server: ids and term only */
    resp.header = &h;
    resp.n_members = p->n;
    resp.members = p->ptrs;
    done.fn(done.ctx, 0, &resp.base);
    mem_free(p);
}

/* A list waiting for its barrier. */
struct list_wait {
    struct server *s;
    struct svc_done done;
    bool strict; /* the client asked linearizable: a failed barrier fails */
};

static void list_barrier_done(void *arg, int err)
{
    struct list_wait w = *(struct list_wait *)arg;
    mem_free(arg);
    if (err != 0 && w.strict) {
        w.done.fn(w.done.ctx, err, NULL);
        return;
    }
    member_list_answer(w.s, w.done); /* else local, as etcd 3.4 */
}

void svc_cluster_member_list(struct server *s,
                             const Etcdserverpb__MemberListRequest *req,
                             struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    bool strict = req->linearizable;
    if (!strict && !server_has_leader(s)) {
        member_list_answer(s, done); /* no leader: etcd 3.4's local list */
        return;
    }
    struct list_wait *w = mem_malloc(sizeof *w);
    if (w == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    *w = (struct list_wait){s, done, strict};
    server_barrier_async(s, list_barrier_done, w);
}

/* A change waiting for its outcome. */
struct pending {
    struct svc_done done; /* the caller's completion */
    struct server *s;     /* the member (borrowed) */
    int op;               /* enum server_member_op */
};

/* reply_changed answers a change that succeeded: {header, members}, plus
 * the member for Add, each in its own response type (Remove, Update and
 * Promote share {header = 1, members = 2}; Add has member = 2 and
 * members = 3). */
static void reply_changed(const struct pending *pd,
                          const struct server_member_result *res,
                          struct members_pb *p)
{
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(pd->s, &h);
    h.revision = 0; /* etcd's cluster server: ids and term only */
    size_t n = p->n;
    Etcdserverpb__Member **members = p->ptrs;
    if (res->members != NULL) { /* the leader's list */
        n = res->n_members;
        members = (Etcdserverpb__Member **)res->members;
    }
    Etcdserverpb__MemberAddResponse add =
        ETCDSERVERPB__MEMBER_ADD_RESPONSE__INIT;
    Etcdserverpb__MemberRemoveResponse rm =
        ETCDSERVERPB__MEMBER_REMOVE_RESPONSE__INIT;
    Etcdserverpb__MemberUpdateResponse up =
        ETCDSERVERPB__MEMBER_UPDATE_RESPONSE__INIT;
    Etcdserverpb__MemberPromoteResponse pr =
        ETCDSERVERPB__MEMBER_PROMOTE_RESPONSE__INIT;
    const ProtobufCMessage *reply = NULL;
    switch (pd->op) {
    case SERVER_MEMBER_ADD:
        add.header = &h;
        add.member = members_find(p, res->id);
        add.n_members = p->n;
        add.members = p->ptrs;
        reply = &add.base;
        break;
    case SERVER_MEMBER_REMOVE:
        rm.header = &h;
        rm.n_members = n;
        rm.members = members;
        reply = &rm.base;
        break;
    case SERVER_MEMBER_UPDATE:
        up.header = &h;
        up.n_members = n;
        up.members = members;
        reply = &up.base;
        break;
    default:
        CHECK(pd->op == SERVER_MEMBER_PROMOTE);
        pr.header = &h;
        pr.n_members = n;
        pr.members = members;
        reply = &pr.base;
        break;
    }
    pd->done.fn(pd->done.ctx, 0, reply);
}

/* Runs where server_member_fn does (server.h). */
static void on_changed(void *arg, const struct server_member_result *res)
{
    struct pending *pd = arg;
    int err = res->err;
    struct members_pb *p = err == 0 ? mem_malloc(sizeof *p) : NULL;
    if (err == 0 && p == NULL)
        err = ERR_NOMEM;
    if (err != 0) {
        pd->done.fn(pd->done.ctx, err, NULL);
    } else {
        members_fill(pd->s, p);
        reply_changed(pd, res, p);
    }
    mem_free(p);
    mem_free(pd);
}

static void change(struct server *s, const struct server_member_change *c,
                   struct svc_done done)
{
    CHECK(s != NULL && c != NULL && done.fn != NULL);
    struct pending *pd = mem_malloc(sizeof *pd);
    if (pd == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    *pd = (struct pending){done, s, c->op};
    server_member_change(s, c, on_changed, pd);
}

/* etcd trims the space around each peer URL before checking it, and
 * keeps the trimmed URL (types.NewURLs). */
static void trim_urls(char **urls, size_t n)
{
    for (size_t i = 0; i < n; i++)
        str_trim_inplace(urls[i]);
}

void svc_cluster_member_add(struct server *s,
                            Etcdserverpb__MemberAddRequest *req,
                            struct svc_done done)
{
    CHECK(req != NULL);
    int arc = svc_auth_check_admin(s, done); /* etcd's membership check */
    if (arc != 0)
        return done.fn(done.ctx, arc, NULL);
    trim_urls(req->peerurls, req->n_peerurls);
    struct server_member_change c = {
        .op = SERVER_MEMBER_ADD,
        .peer_urls = (const char *const *)req->peerurls,
        .n_peer_urls = req->n_peerurls,
        .is_learner = req->islearner};
    change(s, &c, done);
}

void svc_cluster_member_remove(struct server *s,
                               const Etcdserverpb__MemberRemoveRequest *req,
                               struct svc_done done)
{
    CHECK(req != NULL);
    int arc = svc_auth_check_admin(s, done); /* etcd's membership check */
    if (arc != 0)
        return done.fn(done.ctx, arc, NULL);
    struct server_member_change c = {.op = SERVER_MEMBER_REMOVE,
                                     .id = req->id};
    change(s, &c, done);
}

void svc_cluster_member_update(struct server *s,
                               Etcdserverpb__MemberUpdateRequest *req,
                               struct svc_done done)
{
    CHECK(req != NULL);
    int arc = svc_auth_check_admin(s, done); /* etcd's membership check */
    if (arc != 0)
        return done.fn(done.ctx, arc, NULL);
    trim_urls(req->peerurls, req->n_peerurls);
    struct server_member_change c = {
        .op = SERVER_MEMBER_UPDATE,
        .id = req->id,
        .peer_urls = (const char *const *)req->peerurls,
        .n_peer_urls = req->n_peerurls};
    change(s, &c, done);
}

void svc_cluster_member_promote(struct server *s,
                                const Etcdserverpb__MemberPromoteRequest *req,
                                struct svc_done done)
{
    CHECK(req != NULL);
    int arc = svc_auth_check_admin(s, done); /* etcd's membership check */
    if (arc != 0)
        return done.fn(done.ctx, arc, NULL);
    struct server_member_change c = {.op = SERVER_MEMBER_PROMOTE,
                                     .id = req->id};
    change(s, &c, done);
}

/* --- the peer listener's Join ------------------------------------------- */

void svc_peer_join(struct server *s, const Cetcdpb__JoinRequest *req,
                   struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    struct members_pb *p = mem_malloc(sizeof *p);
    if (p == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    uint64_t cid;
    size_t n;
    int rc = server_join_info(s, req->cluster_token, &cid, p->info,
                              MEMBERS_MAX, &n);
    if (rc != 0) {
        mem_free(p);
        done.fn(done.ctx, rc, NULL);
        return;
    }
    members_fill(s, p);
    Cetcdpb__JoinResponse resp = CETCDPB__JOIN_RESPONSE__INIT;
    resp.cluster_id = cid;
    resp.n_members = p->n;
    resp.members = p->ptrs;
    done.fn(done.ctx, 0, &resp.base);
    mem_free(p);
}

/* --- the peer listener's Promote: a promotion a follower forwards ------ */

/* A forwarded promotion waiting for its outcome here. */
struct peer_pending {
    struct svc_done done; /* the caller's completion */
    struct server *s;     /* the member (borrowed) */
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
    pd->done.fn(pd->done.ctx, 0, &resp.base);
    mem_free(p);
    mem_free(pd);
}

void svc_peer_promote(struct server *s, const Cetcdpb__PromoteRequest *req,
                      struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    if (req->cluster_id != server_cluster_id(s)) {
        done.fn(done.ctx, ERR_INVAL, NULL);
        return;
    }
    struct peer_pending *pd = mem_malloc(sizeof *pd);
    if (pd == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    *pd = (struct peer_pending){done, s};
    struct server_member_change c = {
        .op = SERVER_MEMBER_PROMOTE, .id = req->member_id, .from_peer = true};
    server_member_change(s, &c, on_peer_promoted, pd);
}
