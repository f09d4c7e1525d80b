/*
 * lease_forward.c - a renewal or a time-to-live question asked of a
 * follower goes to the leader, which alone keeps lease time (lease.h).
 *
 * etcd 3.4 sends them to the leader's peer URL (/leases,
 * /leases/internal) over kept HTTP connections; cetcd calls the leader's
 * peer listener (/cetcdpb.Lease/Renew with a LeaseKeepAliveRequest,
 * answered by a LeaseKeepAliveResponse, TTL 0 for an unknown lease;
 * /cetcdpb.Lease/TimeToLive with a LeaseTimeToLiveRequest, answered by a
 * LeaseTimeToLiveResponse, TTL -1 for an unknown lease; any other
 * outcome of the leader is a gRPC error: api/lease.c) through peer_ask:
 * one kept channel to the leader, a round trip per renewal, no thread per
 * call (about 80 renewals a second per stream with a call thread and a
 * connection each; peer.h).
 *
 * Waiting, as etcd's LeaseRenew/waitLeader: until the request timeout a
 * forward waits for a leader to be known, and an attempt that fails (the
 * leader changed, is unreachable, peer_ask is busy) is made again,
 * FORWARD_RETRY_MS later (etcd throttles by 50 ms), of the leader of the
 * moment; a member that has become the leader meanwhile answers itself.
 * The deadline gives ERR_TIMEOUT, or ERR_NO_LEADER when no leader was
 * known by any attempt (etcd's waitLeader gives ErrNoLeader then).
 *
 * Threads.  The first attempt runs on the caller's thread, an answer on
 * peer_ask's thread.  Nobody sleeps: a forward that must wait goes on the
 * wait list (leases.fwd_*, bounded by FORWARD_WAIT_MAX, its own leaf
 * mutex), which the house thread looks at every pass
 * (server__lease_forward_house: 5 to 100 ms); at stop the list is failed
 * with ERR_STOPPED (server__lease_forward_stop, after the transport is
 * closed, so no answer comes any more).
 */
#include <string.h>
#include <time.h>

#include "peer/peer.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

#define RENEW_PATH "/cetcdpb.Lease/Renew"
#define TTL_PATH "/cetcdpb.Lease/TimeToLive"
#define FORWARD_RETRY_MS 50
#define FORWARD_WAIT_MAX 65536 /* forwards waiting to try again */

struct server_lease_fwd {
    struct server *s;
    int64_t id;
    bool ttl;             /* a time-to-live question (else a renewal) */
    bool want_keys;       /* ttl: with the keys */
    server_renew_fn rfn;  /* !ttl */
    server_ttl_fn tfn;    /* ttl */
    void *arg;
    uint64_t deadline_ms; /* server clock */
    bool saw_leader;      /* some attempt knew a leader */
    uint64_t retry_ms;    /* waiting: not again before (server clock) */
    struct server_lease_fwd *next; /* the wait list */
};

static void fail(struct server_lease_fwd *f, int err)
{
    if (f->ttl)
        f->tfn(f->arg, err, NULL);
    else
        f->rfn(f->arg, err, 0);
    mem_free(f);
}

static bool attempt(struct server_lease_fwd *f);

/* A forward that must wait (no leader, a failed attempt): on the wait
 * list, tried again by the house thread after ms.  Refused (answered at
 * once) when the list is full or closed. */
static void wait_retry(struct server_lease_fwd *f, uint64_t ms)
{
    struct server_leases *ls = &f->s->leases;
    int err = 0;
    f->retry_ms = server__clock_ms(f->s) + ms;
    f->next = NULL;
    pthread_mutex_lock(&ls->fwd_mu);
    if (ls->fwd_closed)
        err = ERR_STOPPED;
    else if (ls->fwd_n >= FORWARD_WAIT_MAX)
        err = ERR_TOO_MANY_REQUESTS;
    else {
        if (ls->fwd_tail != NULL)
            ls->fwd_tail->next = f;
        else
            ls->fwd_head = f;
        ls->fwd_tail = f;
        ls->fwd_n++;
        atomic_store(&ls->fwd_waiting, true);
    }
    pthread_mutex_unlock(&ls->fwd_mu);
    if (err != 0)
        fail(f, err);
}

/* A failed attempt (any thread): again after the throttle. */
static void again(struct server_lease_fwd *f)
{
    wait_retry(f, FORWARD_RETRY_MS);
}

static void renew_answered(struct server_lease_fwd *f, const uint8_t *reply,
                           size_t len)
{
    Etcdserverpb__LeaseKeepAliveResponse *r =
        etcdserverpb__lease_keep_alive_response__unpack(NULL, len, reply);
    if (r == NULL) {
        again(f);
        return;
    }
    int64_t ttl = r->ttl;
    etcdserverpb__lease_keep_alive_response__free_unpacked(r, NULL);
    f->rfn(f->arg, ttl > 0 ? 0 : ERR_LEASE_NOT_FOUND, ttl > 0 ? ttl : 0);
    mem_free(f);
}

static void ttl_answered(struct server_lease_fwd *f, const uint8_t *reply,
                         size_t len)
{
    Etcdserverpb__LeaseTimeToLiveResponse *r =
        etcdserverpb__lease_time_to_live_response__unpack(NULL, len, reply);
    if (r == NULL) {
        again(f);
        return;
    }
    struct server_lease_ttl t = {.id = f->id, .ttl = r->ttl,
                                 .granted_ttl = r->grantedttl,
                                 .keys = r->keys, .n_keys = r->n_keys};
    if (r->ttl < 0)
        f->tfn(f->arg, ERR_LEASE_NOT_FOUND, NULL);
    else
        f->tfn(f->arg, 0, &t);
    etcdserverpb__lease_time_to_live_response__free_unpacked(r, NULL);
    mem_free(f);
}

static void answered(void *arg, int err, const uint8_t *reply, size_t len)
{
    struct server_lease_fwd *f = arg;
    if (err == ERR_STOPPED || err == ERR_MEMBER_REMOVED)
        fail(f, err);
    else if (err != 0)
        again(f);
    else if (f->ttl)
        ttl_answered(f, reply, len);
    else
        renew_answered(f, reply, len);
}

/* The local answers of a member that has become the leader. */
static void local_renewed(void *arg, int err, int64_t ttl)
{
    struct server_lease_fwd *f = arg;
    f->rfn(f->arg, err, ttl);
    mem_free(f);
}

static void local_ttl(void *arg, int err, const struct server_lease_ttl *t)
{
    struct server_lease_fwd *f = arg;
    f->tfn(f->arg, err, t);
    mem_free(f);
}

static size_t pack(const struct server_lease_fwd *f, uint8_t *buf, size_t cap)
{
    if (f->ttl) {
        Etcdserverpb__LeaseTimeToLiveRequest q =
            ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
        q.id = f->id;
        q.keys = f->want_keys;
        CHECK(etcdserverpb__lease_time_to_live_request__get_packed_size(&q) <=
              cap);
        return etcdserverpb__lease_time_to_live_request__pack(&q, buf);
    }
    Etcdserverpb__LeaseKeepAliveRequest q =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    q.id = f->id;
    CHECK(etcdserverpb__lease_keep_alive_request__get_packed_size(&q) <= cap);
    return etcdserverpb__lease_keep_alive_request__pack(&q, buf);
}

/* One attempt; false when the deadline passed (f is still the caller's),
 * else f went on (to the leader, to the wait list, or answered). */
static bool attempt(struct server_lease_fwd *f)
{
    struct server *s = f->s;
    uint64_t now = server__clock_ms(s);
    if (now >= f->deadline_ms || atomic_load(&s->stopping))
        return false;
    uint64_t lead = atomic_load(&s->lead);
    if (lead == s->member_id) {
        if (f->ttl)
            server_lease_time_to_live(s, f->id, f->want_keys, true,
                                      local_ttl, f);
        else
            server_lease_renew(s, f->id, true, local_renewed, f);
        return true;
    }
    if (lead == 0 || s->transport == NULL) {
        wait_retry(f, FORWARD_RETRY_MS);
        return true;
    }
    f->saw_leader = true;
    uint8_t buf[32];
    size_t len = pack(f, buf, sizeof buf);
    uint64_t left = f->deadline_ms - now;
    int rc = peer_ask(s->transport, lead, f->ttl ? TTL_PATH : RENEW_PATH,
                      buf, len, (uint32_t)left, answered, f);
    if (rc == ERR_STOPPED || rc == ERR_NOMEM)
        fail(f, rc);
    else if (rc != 0)
        wait_retry(f, FORWARD_RETRY_MS); /* busy, not a peer yet, ... */
    return true;
}

static void forward(struct server_lease_fwd *f)
{
    if (!attempt(f))
        fail(f, f->saw_leader ? ERR_TIMEOUT : ERR_NO_LEADER);
}

static struct server_lease_fwd *fwd_new(struct server *s, int64_t id,
                                        void *arg)
{
    struct server_lease_fwd *f = mem_calloc(1, sizeof *f);
    if (f != NULL) {
        f->s = s;
        f->id = id;
        f->arg = arg;
        f->deadline_ms = server__clock_ms(s) + server__request_timeout_ms(s);
    }
    return f;
}

void server__lease_renew_forward(struct server *s, int64_t id,
                                 server_renew_fn fn, void *arg)
{
    struct server_lease_fwd *f = fwd_new(s, id, arg);
    if (f == NULL) {
        fn(arg, ERR_NOMEM, 0);
        return;
    }
    f->rfn = fn;
    forward(f);
}

void server__lease_ttl_forward(struct server *s, int64_t id, bool want_keys,
                               server_ttl_fn fn, void *arg)
{
    struct server_lease_fwd *f = fwd_new(s, id, arg);
    if (f == NULL) {
        fn(arg, ERR_NOMEM, NULL);
        return;
    }
    f->ttl = true;
    f->want_keys = want_keys;
    f->tfn = fn;
    forward(f);
}

void server__lease_forward_house(struct server *s, uint64_t now_ms)
{
    struct server_leases *ls = &s->leases;
    if (!ls->inited || !atomic_load(&ls->fwd_waiting))
        return;
    /* Take the due ones off the list, then try them unlocked (an attempt
     * may put one back). */
    struct server_lease_fwd *due = NULL, **tail = &due;
    pthread_mutex_lock(&ls->fwd_mu);
    struct server_lease_fwd **pp = &ls->fwd_head, *last = NULL;
    while (*pp != NULL) {
        struct server_lease_fwd *f = *pp;
        if (f->retry_ms <= now_ms) {
            *pp = f->next;
            f->next = NULL;
            *tail = f;
            tail = &f->next;
            ls->fwd_n--;
        } else {
            last = f;
            pp = &f->next;
        }
    }
    ls->fwd_tail = last;
    atomic_store(&ls->fwd_waiting, ls->fwd_n > 0);
    pthread_mutex_unlock(&ls->fwd_mu);
    while (due != NULL) {
        struct server_lease_fwd *f = due;
        due = f->next;
        f->next = NULL;
        forward(f);
    }
}

void server__lease_forward_stop(struct server *s)
{
    struct server_leases *ls = &s->leases;
    if (!ls->inited)
        return;
    pthread_mutex_lock(&ls->fwd_mu);
    ls->fwd_closed = true;
    struct server_lease_fwd *f = ls->fwd_head;
    ls->fwd_head = ls->fwd_tail = NULL;
    ls->fwd_n = 0;
    atomic_store(&ls->fwd_waiting, false);
    pthread_mutex_unlock(&ls->fwd_mu);
    while (f != NULL) {
        struct server_lease_fwd *next = f->next;
        fail(f, ERR_STOPPED);
        f = next;
    }
}
