/*
 * lease_primary.c - the leader's lessor (lease.h): promotion at each new
 * leadership, the tick that revokes expired leases and checkpoints
 * remaining TTLs, and the answers only the leader gives (renewals, time to
 * live); the lease list.  A follower forwards renewals and time-to-live
 * questions (lease_forward.c).
 */
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "mvcc/mvcc.h"
#include "server/lease.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

/* lease_forward.c */
void server__lease_renew_forward(struct server *s, int64_t id,
                                 server_renew_fn fn, void *arg);
void server__lease_ttl_forward(struct server *s, int64_t id, bool want_keys,
                               server_ttl_fn fn, void *arg);

static uint64_t checkpoint_ms(const struct server *s)
{
    return s->cfg.lease_checkpoint_ms ? s->cfg.lease_checkpoint_ms
                                      : SERVER_LEASE_CHECKPOINT_MS;
}

/* The next lessor event of l on the leader: its expiry, or when it falls
 * due for a checkpoint (0: at once). */
static uint64_t next_event(const struct server_lease *l, uint64_t iv)
{
    uint64_t t = l->expiry_ms != 0 ? l->expiry_ms : UINT64_MAX;
    if (l->cp_ms == 0)
        return 0;
    uint64_t due = l->cp_ms + server__lease_cp_period_ms(l->ttl, iv);
    return due < t ? due : t;
}

void server__lease_wake(struct server *s, const struct server_lease *l)
{
    uint64_t t = next_event(l, checkpoint_ms(s));
    if (t < s->leases.wake_ms)
        s->leases.wake_ms = t;
}

static bool leading(struct server *s)
{
    return atomic_load(&s->lead) == s->member_id;
}

uint64_t server__lease_cp_period_ms(int64_t ttl_s, uint64_t interval_ms)
{
    CHECK(ttl_s >= 1 && interval_ms > 0);
    uint64_t half = (uint64_t)ttl_s * 1000u / 2u;
    uint64_t p = half < SERVER_LEASE_CHECKPOINT_MIN_MS
                     ? SERVER_LEASE_CHECKPOINT_MIN_MS : half;
    p = p < interval_ms ? p : interval_ms;
    CHECK(p > 0 && p <= interval_ms);
    return p;
}

/* Has this member applied everything committed before its leadership
 * (the term's first entry, s->lead_index)?  A renewal acknowledged by the
 * last leader may be among it: its cleared record must be applied before
 * an older record's anchor can expire the lease here. */
static bool caught_up(struct server *s)
{
    return atomic_load(&s->applied_index) >= atomic_load(&s->lead_index);
}

/* mu held: a new leader's start for l.  A record (remaining > 0) is
 * anchored where this member applied it, or read it (rec_ms): it ends
 * rec_ms + remaining, which a record's age does not move, so a chain of
 * leader changes does not add up (lease.h, "The bound").  A record
 * applied here is what any member that applied it starts from too:
 * inherited, no new one is taken.  One only read here (a restart, a
 * snapshot) may be late: the cadence takes a new one from now.  No record
 * (kept alive until lately, or granted by the last leader): the full TTL
 * from now, due for a record at once (cp_ms 0), so that a next failure
 * finds an anchor instead of the full TTL again. */
static void promote(struct server_lease *l, uint64_t now)
{
    l->retry_ms = 0;
    l->inherited = l->remaining > 0 && l->rec_live;
    if (l->remaining > 0) {
        CHECK(l->rec_ms != 0); /* may be a little after now: an apply
                                * reads the clock after this tick did */
        l->expiry_ms = l->rec_ms + (uint64_t)l->remaining * 1000u;
        l->cp_ms = now;
    } else {
        l->expiry_ms = now + (uint64_t)l->ttl * 1000u;
        l->cp_ms = 0;
    }
    CHECK(l->expiry_ms != 0);
}

/* mu held: true when this member is the primary lessor now, promoting it
 * first at a new leadership once it has caught up (caught_up). */
static bool primary(struct server *s, uint64_t now)
{
    struct server_leases *ls = &s->leases;
    if (!leading(s)) {
        ls->epoch = 0;
        return false;
    }
    uint64_t ep = atomic_load(&s->lead_epoch);
    if (ls->epoch == ep)
        return true;
    if (!caught_up(s)) {
        ls->epoch = 0; /* not yet: the next tick or renewal looks again */
        return false;
    }
    for (size_t i = 0; i < ls->cap; i++)
        for (struct server_lease *l = ls->tab[i]; l != NULL; l = l->next)
            promote(l, now);
    ls->epoch = ep;
    ls->wake_ms = 0; /* the next tick looks at every lease */
    CHECK(ep != 0);
    return true;
}

int64_t server_lease_min_ttl(const struct server *s)
{
    return server__lease_min_ttl(s);
}

int64_t server_lease_id_next(struct server *s)
{
    uint64_t v = atomic_load(&s->lease_id_next);
    if (v == 0) { /* etcd's idutil: the suffix starts at the time */
        uint64_t seed = (server__now_ms() & ((1ull << 40) - 1)) << 8;
        atomic_compare_exchange_strong(&s->lease_id_next, &v, seed);
    }
    uint64_t suffix = atomic_fetch_add(&s->lease_id_next, 1) + 1;
    uint64_t id = ((s->member_id & 0xffffu) << 48) |
                  (suffix & ((1ull << 48) - 1));
    id &= (1ull << 63) - 1;
    return id != 0 ? (int64_t)id : 1;
}

/* --- the tick ------------------------------------------------------------ */

static void revoked(void *arg, const struct server_response *r)
{
    (void)arg;
    if (r->err != 0 && r->err != ERR_LEASE_NOT_FOUND)
        log_warn("lessor", "failed to revoke an expired lease: %s",
                 err_str(r->err));
}

/* A failed entry leaves its leases without the record their cp_ms says
 * they have: the next tick makes every lease due again. */
static void checkpointed(void *arg, const struct server_response *r)
{
    struct server *s = arg;
    if (r->err != 0) {
        atomic_store(&s->leases.cp_failed, true);
        log_warn("lessor", "failed to checkpoint leases: %s",
                 err_str(r->err));
    }
}

/* mu held: wake_ms lowered to t. */
static void wake_at(struct server_leases *ls, uint64_t t)
{
    if (t < ls->wake_ms)
        ls->wake_ms = t;
}

/* mu held: up to max expired leases into ids (not proposed again for
 * SERVER_LEASE_RETRY_MS); wake_ms lowered to the next expiry or retry
 * (to 0 when max stopped the look). */
static size_t take_expired(struct server_leases *ls, uint64_t now,
                           int64_t *ids, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < ls->cap; i++)
        for (struct server_lease *l = ls->tab[i]; l; l = l->next) {
            if (l->expiry_ms == 0)
                continue;
            if (l->expiry_ms > now) {
                wake_at(ls, l->expiry_ms);
                continue;
            }
            if (l->retry_ms <= now && n == max) {
                wake_at(ls, 0);
                return n;
            }
            if (l->retry_ms <= now) {
                l->retry_ms = now + SERVER_LEASE_RETRY_MS;
                ids[n++] = l->id;
            }
            wake_at(ls, l->retry_ms);
        }
    return n;
}

/* mu held: is l due a checkpoint now?  Its expiry is this leader's own
 * (not inherited: that record holds as it is), its period has passed
 * since what a next leader would start it from was last true (cp_ms; 0:
 * at once), it has time left (an expired lease is left to its revoke),
 * and no renewal of it waits for a cleared record (a record taken now
 * would be applied after the clearing, with the time left before the
 * renewal). */
static bool due(const struct server_lease *l, uint64_t now, uint64_t iv)
{
    return !l->inherited && l->expiry_ms > now && l->clears == 0 &&
           (l->cp_ms == 0 ||
            now - l->cp_ms >= server__lease_cp_period_ms(l->ttl, iv));
}

/* mu held: up to max due leases, looking round robin from where the last
 * tick stopped, with their time left rounded up (so never 0: a 0 would
 * renew).  Each is then fresh again (cp_ms) and on its way (cp_sent).
 * wake_ms is lowered to when the others fall due (to 0 when max stopped
 * the look). */
static size_t take_checkpoints(struct server *s, uint64_t now,
                               Etcdserverpb__LeaseCheckpoint *cps, size_t max)
{
    struct server_leases *ls = &s->leases;
    uint64_t iv = checkpoint_ms(s);
    bool all = atomic_exchange(&ls->cp_failed, false);
    size_t n = 0;
    for (size_t k = 0; k < ls->cap && (n < max || all); k++) {
        size_t i = (ls->cp_slot + k) & (ls->cap - 1);
        bool room = n < max;
        for (struct server_lease *l = ls->tab[i]; l; l = l->next) {
            if (all)
                l->cp_ms = 0;
            if (!due(l, now, iv)) {
                if (!l->inherited && l->clears == 0 && l->expiry_ms > now)
                    wake_at(ls, next_event(l, iv));
                continue;
            }
            if (n == max) {
                wake_at(ls, 0);
                continue;
            }
            etcdserverpb__lease_checkpoint__init(&cps[n]);
            cps[n].id = l->id;
            cps[n].remaining_ttl =
                (int64_t)((l->expiry_ms - now + 999) / 1000);
            l->cp_ms = now;
            l->cp_sent = true;
            wake_at(ls, next_event(l, iv));
            n++;
        }
        if (room && n == max) /* the next tick starts at this slot */
            ls->cp_slot = i;
    }
    if (n == max) /* the slots not looked at may hold due leases */
        wake_at(ls, 0);
    CHECK(n <= max);
    return n;
}

/* The lessor revokes as root (etcd's WithRoot): the auth applier checks
 * a revoke's keys against the user it names (auth_apply.c), and an
 * expired lease must go whoever's keys it holds.  The revision is the
 * store's now: an auth change before the apply makes it "old", and the
 * revoke is proposed again after SERVER_LEASE_RETRY_MS, as etcd. */
static void propose_revokes(struct server *s, const int64_t *ids, size_t n)
{
    uint64_t auth_rev = auth_store_revision(s->auth.store);
    for (size_t i = 0; i < n; i++) {
        Etcdserverpb__LeaseRevokeRequest rr =
            ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
        rr.id = ids[i];
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_REVOKE;
        ir.lease_revoke = &rr;
        ir.auth_user = (char *)AUTH_ROOT_USER;
        ir.auth_revision = auth_rev;
        server_propose(s, &ir, revoked, NULL);
    }
}

static void propose_checkpoints(struct server *s,
                                Etcdserverpb__LeaseCheckpoint *cps, size_t n)
{
    Etcdserverpb__LeaseCheckpoint *ptrs[SERVER_LEASE_CHECKPOINT_BATCH];
    for (size_t off = 0; off < n; off += SERVER_LEASE_CHECKPOINT_BATCH) {
        size_t k = n - off < SERVER_LEASE_CHECKPOINT_BATCH
                       ? n - off : SERVER_LEASE_CHECKPOINT_BATCH;
        for (size_t i = 0; i < k; i++)
            ptrs[i] = &cps[off + i];
        Etcdserverpb__LeaseCheckpointRequest cr =
            ETCDSERVERPB__LEASE_CHECKPOINT_REQUEST__INIT;
        cr.checkpoints = ptrs;
        cr.n_checkpoints = k;
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_CHECKPOINT;
        ir.lease_checkpoint = &cr;
        atomic_fetch_add(&s->leases.cp_total, k);
        server_propose(s, &ir, checkpointed, s); /* done: even refused */
    }
}

/* Per tick (every SERVER_LEASE_TICK_MS): half a second of each rate. */
#define REVOKES_PER_TICK (SERVER_LEASE_REVOKE_RATE / 2)
#define CHECKPOINTS_PER_TICK (SERVER_LEASE_CHECKPOINT_RATE / 2)

void server__leases_tick(struct server *s, uint64_t now_ms)
{
    static _Thread_local int64_t ids[REVOKES_PER_TICK];
    static _Thread_local Etcdserverpb__LeaseCheckpoint
        cps[CHECKPOINTS_PER_TICK];
    struct server_leases *ls = &s->leases;
    if (!ls->inited)
        return;
    size_t n_ids = 0, n_cps = 0;
    pthread_mutex_lock(&ls->mu);
    if (now_ms >= ls->tick_next_ms && primary(s, now_ms)) {
        ls->tick_next_ms = now_ms + SERVER_LEASE_TICK_MS;
        /* Both look at every lease: only when one may expire, be retried
         * or fall due by now (wake_ms, a lower bound every change of a
         * lease keeps: server__lease_wake).  An idle member with 100k
         * leases spent 3 % of a core on these looks before. */
        if (now_ms >= ls->wake_ms || atomic_load(&ls->cp_failed)) {
            ls->wake_ms = UINT64_MAX;
            atomic_fetch_add(&ls->looks, 1);
            n_ids = take_expired(ls, now_ms, ids, REVOKES_PER_TICK);
            n_cps = take_checkpoints(s, now_ms, cps, CHECKPOINTS_PER_TICK);
        }
    }
    pthread_mutex_unlock(&ls->mu);
    CHECK(n_ids <= REVOKES_PER_TICK && n_cps <= CHECKPOINTS_PER_TICK);
    propose_revokes(s, ids, n_ids);
    propose_checkpoints(s, cps, n_cps);
}

/* --- renewals -------------------------------------------------------- */

/* A renewal waiting for the applier to catch up or for its checkpoint. */
struct renew {
    struct server *s;
    int64_t id;
    server_renew_fn fn;
    void *arg;
};

/* The cleared checkpoint is applied (or refused): on the leader that
 * renewed it. */
static void renew_cleared(void *arg, const struct server_response *r)
{
    struct renew *w = arg;
    int err = r->err;
    int64_t ttl = 0;
    pthread_mutex_lock(&w->s->leases.mu);
    struct server_lease *l = server__lease_find(&w->s->leases, w->id);
    if (l != NULL && l->clears > 0) /* 0: the table was read again */
        l->clears--;
    if (l != NULL)
        server__lease_wake(w->s, l); /* may be due again */
    if (err == 0 && l == NULL)
        err = ERR_LEASE_NOT_FOUND;
    else if (err == 0)
        ttl = l->ttl;
    pthread_mutex_unlock(&w->s->leases.mu);
    w->fn(w->arg, err, ttl);
    mem_free(w);
}

/* Renew on the primary.  A lease with a record, or with a checkpoint on
 * its way, is renewed by a cleared record (renew_cleared answers); else
 * here.  w is freed here (or by renew_cleared). */
static void renew_now(struct renew *w)
{
    struct server *s = w->s;
    struct server_leases *ls = &s->leases;
    uint64_t now = server__clock_ms(s);
    int err = 0;
    int64_t ttl = 0;
    bool clear_cp = false;
    pthread_mutex_lock(&ls->mu);
    struct server_lease *l = NULL;
    if (!primary(s, now))
        err = ERR_NOT_LEADER;
    else if ((l = server__lease_find(ls, w->id)) == NULL ||
             (l->expiry_ms != 0 && l->expiry_ms <= now))
        err = ERR_LEASE_NOT_FOUND; /* expired: its revoke is on its way */
    else if (l->remaining > 0 || l->cp_sent) {
        clear_cp = true;
        l->clears++;
    } else {
        l->expiry_ms = now + (uint64_t)l->ttl * 1000u;
        l->cp_ms = now;
        CHECK(!l->inherited); /* inherited: a record, cleared above */
        server__lease_wake(s, l);
        ttl = l->ttl;
    }
    pthread_mutex_unlock(&ls->mu);
    if (!clear_cp) {
        w->fn(w->arg, err, ttl);
        mem_free(w);
        return;
    }
    Etcdserverpb__LeaseCheckpoint cp = ETCDSERVERPB__LEASE_CHECKPOINT__INIT;
    cp.id = w->id;
    cp.remaining_ttl = 0; /* applied on the leader: renews (lease.c) */
    Etcdserverpb__LeaseCheckpoint *ptr = &cp;
    Etcdserverpb__LeaseCheckpointRequest cr =
        ETCDSERVERPB__LEASE_CHECKPOINT_REQUEST__INIT;
    cr.checkpoints = &ptr;
    cr.n_checkpoints = 1;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_CHECKPOINT;
    ir.lease_checkpoint = &cr;
    server_propose(s, &ir, renew_cleared, w);
}

static void renew_barrier(void *arg, int err)
{
    struct renew *w = arg;
    if (err != 0) {
        w->fn(w->arg, err, 0);
        mem_free(w);
        return;
    }
    renew_now(w);
}

void server_lease_renew(struct server *s, int64_t id, bool local_only,
                        server_renew_fn fn, void *arg)
{
    CHECK(s != NULL && fn != NULL);
    if (!leading(s)) {
        if (local_only)
            fn(arg, ERR_NOT_LEADER, 0);
        else
            server__lease_renew_forward(s, id, fn, arg);
        return;
    }
    struct renew *w = mem_malloc(sizeof *w);
    if (w == NULL) {
        fn(arg, ERR_NOMEM, 0);
        return;
    }
    *w = (struct renew){s, id, fn, arg};
    /* etcd's waitAppliedIndex: a new leader may not have applied the
     * grant yet (nor, caught_up, a cleared record). */
    if (atomic_load(&s->applied_index) < atomic_load(&s->committed_index) ||
        !caught_up(s))
        server_barrier_async(s, renew_barrier, w);
    else
        renew_now(w);
}

/* --- time to live -------------------------------------------------------- */

struct ttl_req {
    struct server *s;
    int64_t id;
    bool want_keys;
    server_ttl_fn fn;
    void *arg;
};

/* The keys of a lease (mvcc_lease_keys' callback). */
struct key_list {
    ProtobufCBinaryData *v;
    size_t n, cap;
};

static int add_key(void *arg, const uint8_t *key, size_t key_len)
{
    struct key_list *kl = arg;
    if (kl->n == kl->cap) {
        size_t cap = kl->cap ? kl->cap * 2 : 16;
        ProtobufCBinaryData *v = mem_realloc(kl->v, cap * sizeof *v);
        if (v == NULL)
            return ERR_NOMEM;
        kl->v = v;
        kl->cap = cap;
    }
    uint8_t *copy = mem_malloc(key_len ? key_len : 1);
    if (copy == NULL)
        return ERR_NOMEM;
    memcpy(copy, key, key_len);
    kl->v[kl->n++] = (ProtobufCBinaryData){key_len, copy};
    return 0;
}

/* The keys of lease id.  A caller outside the store gate enters it here;
 * one answering after a barrier (ttl_barrier) is inside it already: read.c
 * runs a barrier's callback between its probe's gate enter and
 * server_read_end, and a nested enter there could wait for ever on a
 * snapshot install that closed the gate meanwhile (the gate waits for its
 * users to leave; this one would be waiting for the gate), so it reads
 * without entering. */
static int read_keys(struct server *s, int64_t id, bool in_gate,
                     struct key_list *kl)
{
    if (!in_gate)
        server__store_enter(s);
    struct mvcc_read *r;
    int rc = mvcc_read_begin(s->mvcc, &r);
    if (rc == 0) {
        rc = mvcc_lease_keys(r, id, add_key, kl);
        mvcc_read_end(r);
    }
    if (!in_gate)
        server__store_leave(s);
    return rc;
}

/* in_gate: called inside the store gate (read_keys). */
static void ttl_now(struct ttl_req *q, bool in_gate)
{
    struct server *s = q->s;
    uint64_t now = server__clock_ms(s);
    struct server_lease_ttl t = {.id = q->id};
    int err = 0;
    pthread_mutex_lock(&s->leases.mu);
    struct server_lease *l = NULL;
    if (!primary(s, now))
        err = ERR_NOT_LEADER;
    else if ((l = server__lease_find(&s->leases, q->id)) == NULL ||
             (l->expiry_ms != 0 && l->expiry_ms <= now))
        err = ERR_LEASE_NOT_FOUND;
    else {
        t.granted_ttl = l->ttl;
        t.ttl = (int64_t)((l->expiry_ms - now) / 1000u);
    }
    pthread_mutex_unlock(&s->leases.mu);
    struct key_list kl = {0};
    if (err == 0 && q->want_keys)
        err = read_keys(s, q->id, in_gate, &kl);
    t.keys = kl.v;
    t.n_keys = kl.n;
    q->fn(q->arg, err, err == 0 ? &t : NULL);
    for (size_t i = 0; i < kl.n; i++)
        mem_free(kl.v[i].data);
    mem_free(kl.v);
    mem_free(q);
}

static void ttl_barrier(void *arg, int err)
{
    struct ttl_req *q = arg;
    if (err != 0) {
        q->fn(q->arg, err, NULL);
        mem_free(q);
        return;
    }
    ttl_now(q, true); /* err 0: inside the probe's gate (read_keys) */
}

void server_lease_time_to_live(struct server *s, int64_t id, bool want_keys,
                               bool local_only, server_ttl_fn fn, void *arg)
{
    CHECK(s != NULL && fn != NULL);
    if (!leading(s)) {
        if (local_only)
            fn(arg, ERR_NOT_LEADER, NULL);
        else
            server__lease_ttl_forward(s, id, want_keys, fn, arg);
        return;
    }
    struct ttl_req *q = mem_malloc(sizeof *q);
    if (q == NULL) {
        fn(arg, ERR_NOMEM, NULL);
        return;
    }
    *q = (struct ttl_req){s, id, want_keys, fn, arg};
    if (atomic_load(&s->applied_index) < atomic_load(&s->committed_index) ||
        !caught_up(s))
        server_barrier_async(s, ttl_barrier, q);
    else
        ttl_now(q, false);
}

/* --- the list ------------------------------------------------------------ */

struct by {
    int64_t id;
    uint64_t key;
};

static int by_cmp(const void *a, const void *b)
{
    const struct by *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int server_lease_list(struct server *s, int64_t **ids_out, size_t *n_out)
{
    CHECK(s != NULL && ids_out != NULL && n_out != NULL);
    struct server_leases *ls = &s->leases;
    pthread_mutex_lock(&ls->mu);
    size_t n = ls->n;
    struct by *v = mem_malloc((n ? n : 1) * sizeof *v);
    int64_t *ids = mem_malloc((n ? n : 1) * sizeof *ids);
    size_t k = 0;
    bool prim = ls->epoch != 0;
    for (size_t i = 0; v && ids && i < ls->cap; i++)
        for (struct server_lease *l = ls->tab[i]; l != NULL; l = l->next)
            v[k++] = (struct by){l->id, prim ? l->expiry_ms : 0};
    pthread_mutex_unlock(&ls->mu);
    if (v == NULL || ids == NULL) {
        mem_free(v);
        mem_free(ids);
        return ERR_NOMEM;
    }
    CHECK(k == n);
    qsort(v, n, sizeof *v, by_cmp);
    for (size_t i = 0; i < n; i++)
        ids[i] = v[i].id;
    mem_free(v);
    *ids_out = ids;
    *n_out = n;
    return 0;
}
