/*
 * lease.c - the Lease service's unary calls (etcd 3.4's v3rpc/lease.go and
 * etcdserver's LeaseGrant/LeaseRevoke/LeaseTimeToLive/LeaseLeases), and
 * the peer listener's forwarded renewals and time-to-live questions.  The
 * keep-alive stream is lease_keepalive.c; the lessor is server/lease*.c.
 */
#include "svc/svc.h"

#include <string.h>

#include "auth/auth.h"
#include "server/server.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* Runs on the apply thread, or inline when the proposal was refused. */
static void on_applied(void *arg, const struct server_response *r)
{
    svc__done_take(arg, r->err, r->err == 0 ? r->msg : NULL);
}

static void propose(struct server *s, Cetcdpb__InternalRequest *ir,
                    struct svc_done done)
{
    struct svc_done *held = svc__done_dup(done);
    if (held == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    server_propose(s, ir, on_applied, held);
}

void svc_lease_grant(struct server *s, const Etcdserverpb__LeaseGrantRequest *req,
                     struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    if (!server_quota_allows(s, server_lease_grant_cost(req))) {
        done.fn(done.ctx, ERR_NO_SPACE, NULL);
        return;
    }
    Etcdserverpb__LeaseGrantRequest g = *req;
    if (g.id == 0) /* etcd: the server chooses, positive */
        g.id = server_lease_id_next(s);
    CHECK(g.id != 0);
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_GRANT;
    ir.lease_grant = &g;
    /* as every etcd proposal: a bad token is refused; anyone may grant */
    char user[AUTH_NAME_MAX + 1];
    int rc = svc__auth_stamp(s, done, &ir, user, sizeof user);
    if (rc != 0) {
        done.fn(done.ctx, rc, NULL);
        return;
    }
    propose(s, &ir, done);
}

void svc_lease_revoke(struct server *s,
                      const Etcdserverpb__LeaseRevokeRequest *req,
                      struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_REVOKE;
    ir.lease_revoke = (Etcdserverpb__LeaseRevokeRequest *)req;
    /* the auth applier checks the lease's keys as this user */
    char user[AUTH_NAME_MAX + 1];
    int rc = svc__auth_stamp(s, done, &ir, user, sizeof user);
    if (rc != 0) {
        done.fn(done.ctx, rc, NULL);
        return;
    }
    propose(s, &ir, done);
}

/* A time-to-live question waiting for the leader. */
struct ttl_wait {
    struct server *s;
    struct svc_done done;
    int64_t id;
    bool peer;      /* the peer listener's: no header, errors pass */
    bool keys;      /* the caller asked for the keys */
    bool check;     /* auth was on: the keys must be readable by user */
    uint64_t rev;   /* the auth revision seen with the token */
    char user[];    /* the caller (check), NUL-terminated */
};

/* The caller may read every key of the lease (etcd 3.5's
 * checkLeaseTimeToLive; 3.4.23 has no check and lists the keys of any
 * lease to anyone: docs/ARCHITECTURE.md "Auth"). */
static int ttl_keys_readable(const struct ttl_wait *w,
                             const struct server_lease_ttl *t)
{
    struct auth_store *as = server_auth_store(w->s);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < t->n_keys; i++)
        rc = auth_check_range(as, w->user, w->rev, t->keys[i].data,
                              t->keys[i].len, NULL, 0, AUTH_READ);
    return rc;
}

static void on_ttl(void *arg, int err, const struct server_lease_ttl *t)
{
    struct ttl_wait *w = arg;
    struct svc_done done = w->done;
    Etcdserverpb__LeaseTimeToLiveResponse r =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_RESPONSE__INIT;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    r.header = &h;
    r.id = w->id;
    if (err == ERR_LEASE_NOT_FOUND) {
        r.ttl = -1; /* etcd 3.4's LeaseServer answers, not fails */
    } else if (err == 0 && w->check) {
        err = ttl_keys_readable(w, t);
    }
    if (err != 0 && err != ERR_LEASE_NOT_FOUND) {
        mem_free(w);
        done.fn(done.ctx, err, NULL);
        return;
    }
    if (err == 0) {
        r.ttl = t->ttl;
        r.grantedttl = t->granted_ttl;
        r.keys = w->keys ? t->keys : NULL;
        r.n_keys = w->keys ? t->n_keys : 0;
    }
    if (!w->peer)
        server_header_fill(w->s, &h);
    mem_free(w);
    done.fn(done.ctx, 0, &r.base);
}

/* user: the caller to check the keys against, or NULL (no check). */
static void time_to_live(struct server *s, int64_t id, bool keys, bool peer,
                         const char *user, uint64_t rev,
                         struct svc_done done)
{
    size_t ul = user != NULL ? strlen(user) : 0;
    struct ttl_wait *w = mem_malloc(sizeof *w + ul + 1);
    if (w == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    *w = (struct ttl_wait){s, done, id, peer, keys, user != NULL, rev};
    memcpy(w->user, user != NULL ? user : "", ul + 1);
    server_lease_time_to_live(s, id, keys || w->check, peer, on_ttl, w);
}

void svc_lease_time_to_live(struct server *s,
                            const Etcdserverpb__LeaseTimeToLiveRequest *req,
                            struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    if (!auth_store_enabled(server_auth_store(s))) {
        time_to_live(s, req->id, req->keys, false, NULL, 0, done);
        return;
    }
    /* etcd 3.5: a bad token, then no user, then the keys (on_ttl) */
    char user[AUTH_NAME_MAX + 1];
    uint64_t rev;
    int rc = svc_auth_who(s, done, user, sizeof user, &rev);
    if (rc == 0 && rev == 0) /* no identity (an empty CN is one) */
        rc = ERR_AUTH_USER_EMPTY;
    if (rc != 0) {
        done.fn(done.ctx, rc, NULL);
        return;
    }
    time_to_live(s, req->id, req->keys, false, user, rev, done);
}

void svc_peer_lease_ttl(struct server *s,
                        const Etcdserverpb__LeaseTimeToLiveRequest *req,
                        struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    /* the member that was asked checks the keys itself */
    time_to_live(s, req->id, req->keys, true, NULL, 0, done);
}

void svc_lease_leases(struct server *s,
                      const Etcdserverpb__LeaseLeasesRequest *req,
                      struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    int64_t *ids;
    size_t n;
    int rc = server_lease_list(s, &ids, &n);
    if (rc != 0) {
        done.fn(done.ctx, rc, NULL);
        return;
    }
    Etcdserverpb__LeaseStatus *st = mem_malloc((n ? n : 1) * sizeof *st);
    Etcdserverpb__LeaseStatus **ptrs = mem_malloc((n ? n : 1) * sizeof *ptrs);
    if (st == NULL || ptrs == NULL) {
        mem_free(st);
        mem_free(ptrs);
        mem_free(ids);
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        etcdserverpb__lease_status__init(&st[i]);
        st[i].id = ids[i];
        ptrs[i] = &st[i];
    }
    Etcdserverpb__LeaseLeasesResponse r =
        ETCDSERVERPB__LEASE_LEASES_RESPONSE__INIT;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(s, &h);
    r.header = &h;
    r.leases = ptrs;
    r.n_leases = n;
    done.fn(done.ctx, 0, &r.base);
    mem_free(st);
    mem_free(ptrs);
    mem_free(ids);
}

/* A forwarded renewal, on the leader. */
struct renew_wait {
    struct svc_done done;
    int64_t id;
};

static void on_peer_renewed(void *arg, int err, int64_t ttl)
{
    struct renew_wait *w = arg;
    struct svc_done done = w->done;
    Etcdserverpb__LeaseKeepAliveResponse r =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
    r.id = w->id;
    mem_free(w);
    if (err != 0 && err != ERR_LEASE_NOT_FOUND) {
        done.fn(done.ctx, err, NULL);
        return;
    }
    r.ttl = err == 0 ? ttl : 0;
    done.fn(done.ctx, 0, &r.base);
}

void svc_peer_lease_renew(struct server *s,
                          const Etcdserverpb__LeaseKeepAliveRequest *req,
                          struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    struct renew_wait *w = mem_malloc(sizeof *w);
    if (w == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    *w = (struct renew_wait){done, req->id};
    server_lease_renew(s, req->id, true, on_peer_renewed, w);
}
