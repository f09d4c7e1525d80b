/*
 * lease_forward.c - a renewal or a time-to-live question asked of a
 * follower goes to the leader, which alone keeps lease time (lease.h).
 *
 * etcd 3.4 sends them to the leader's peer URL (/leases,
 * /leases/internal); cetcd calls the leader's peer listener
 * (/cetcdpb.Lease/Renew with a LeaseKeepAliveRequest, answered by a
 * LeaseKeepAliveResponse, TTL 0 for an unknown lease;
 * /cetcdpb.Lease/TimeToLive with a LeaseTimeToLiveRequest, answered by a
 * LeaseTimeToLiveResponse, TTL -1 for an unknown lease; any other
 * outcome of the leader is a gRPC error: api/lease.c) through peer_call.
 * Until the request timeout, an attempt that fails (the leader changed,
 * is unreachable, or all PEER_CALLS_MAX call slots are busy) is made
 * again, FORWARD_RETRY_MS later, of the leader of the moment; when this
 * member has become the leader meanwhile it answers itself.  The deadline
 * gives ERR_TIMEOUT, or ERR_NO_LEADER when no leader was known.  A first
 * attempt with no leader known fails at once with ERR_NO_LEADER (etcd
 * waits for one; we have no timer on the caller's thread to wait on).
 *
 * Threads: the first attempt runs on the caller's thread, the others on
 * the peer-call thread of the failed one (which sleeps FORWARD_RETRY_MS
 * before asking again: it is a thread of its own).
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
#define FORWARD_RETRY_MS 100

struct fwd {
    struct server *s;
    int64_t id;
    bool ttl;             /* a time-to-live question (else a renewal) */
    bool want_keys;       /* ttl: with the keys */
    server_renew_fn rfn;  /* !ttl */
    server_ttl_fn tfn;    /* ttl */
    void *arg;
    uint64_t deadline_ms; /* server clock */
    bool saw_leader;      /* some attempt knew a leader */
};

static void fail(struct fwd *f, int err)
{
    if (f->ttl)
        f->tfn(f->arg, err, NULL);
    else
        f->rfn(f->arg, err, 0);
    mem_free(f);
}

static bool attempt(struct fwd *f);

static void nap_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A failed attempt, on a peer-call thread: again after a nap. */
static void again(struct fwd *f)
{
    nap_ms(FORWARD_RETRY_MS);
    if (!attempt(f))
        fail(f, f->saw_leader ? ERR_TIMEOUT : ERR_NO_LEADER);
}

static void renew_answered(struct fwd *f, const uint8_t *reply, size_t len)
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

static void ttl_answered(struct fwd *f, const uint8_t *reply, size_t len)
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
    struct fwd *f = arg;
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
    struct fwd *f = arg;
    f->rfn(f->arg, err, ttl);
    mem_free(f);
}

static void local_ttl(void *arg, int err, const struct server_lease_ttl *t)
{
    struct fwd *f = arg;
    f->tfn(f->arg, err, t);
    mem_free(f);
}

static size_t pack(const struct fwd *f, uint8_t *buf, size_t cap)
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

/* One attempt; false when the deadline passed (f is still the caller's). */
static bool attempt(struct fwd *f)
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
    if (lead == 0 || s->transport == NULL)
        return false;
    f->saw_leader = true;
    uint8_t buf[32];
    size_t len = pack(f, buf, sizeof buf);
    uint64_t left = f->deadline_ms - now;
    return peer_call(s->transport, lead, f->ttl ? TTL_PATH : RENEW_PATH, buf,
                     len, (uint32_t)left, answered, f) == 0;
}

static void forward(struct fwd *f)
{
    if (atomic_load(&f->s->lead) == 0) {
        fail(f, ERR_NO_LEADER);
        return;
    }
    if (attempt(f))
        return;
    /* Busy call slots: the caller's thread must not nap; answer as etcd
     * does when the leader cannot be reached in time. */
    fail(f, f->saw_leader ? ERR_TIMEOUT : ERR_NO_LEADER);
}

static struct fwd *fwd_new(struct server *s, int64_t id, void *arg)
{
    struct fwd *f = mem_calloc(1, sizeof *f);
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
    struct fwd *f = fwd_new(s, id, arg);
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
    struct fwd *f = fwd_new(s, id, arg);
    if (f == NULL) {
        fn(arg, ERR_NOMEM, NULL);
        return;
    }
    f->ttl = true;
    f->want_keys = want_keys;
    f->tfn = fn;
    forward(f);
}
