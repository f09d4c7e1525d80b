/*
 * corrupt.c - etcd 3.4's initial and periodic corruption checks (see
 * corrupt.h), with its capnslog lines.
 */
#include "cmd/corrupt.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

/* What one peer answered to HashKV at a revision. */
struct peer_hash {
    uint64_t id;          /* member id */
    char urls[1024];      /* its peer URLs (for messages) */
    struct server_peer_hash a; /* its answer (a.err: 0, or none) */
};

/* etcd's request timeout: 5 s + 2 election timeouts. */
static int req_timeout_ms(uint32_t election_ms)
{
    return 5000 + 2 * (int)election_ms;
}

/* peer_hashes asks every other member's peer listener; returns how many
 * entries of out it filled (etcd: getPeerHashKVs).  A peer that cannot
 * hash at rev (compacted, future revision) answers why; one that does not
 * answer is logged. */
static size_t peer_hashes(struct server *s, uint32_t election_ms, int64_t rev,
                          bool compacted, struct peer_hash *out)
{
    struct server_member_info *ms =
        mem_calloc(CORRUPT_PEERS_MAX + 1, sizeof *ms);
    if (ms == NULL)
        return 0;
    size_t n = server_members_list(s, ms, CORRUPT_PEERS_MAX + 1);
    if (n > CORRUPT_PEERS_MAX + 1)
        n = CORRUPT_PEERS_MAX + 1;
    size_t k = 0;
    for (size_t i = 0; i < n && k < CORRUPT_PEERS_MAX; i++) {
        if (ms[i].id == server_member_id(s))
            continue;
        struct peer_hash *p = &out[k++];
        memset(p, 0, sizeof *p);
        p->id = ms[i].id;
        snprintf(p->urls, sizeof p->urls, "%s", ms[i].peer_urls);
        server_peer_hash_kv(s, p->id, rev, compacted,
                            (uint32_t)req_timeout_ms(election_ms), &p->a);
        if (p->a.err != 0 && p->a.err != ERR_COMPACTED &&
            p->a.err != ERR_FUTURE_REV)
            log_warn("etcdserver", "failed hash kv request from %s: %s",
                     p->urls, err_str(p->a.err));
    }
    mem_free(ms);
    return k;
}

/* has_peers: whether the cluster has another member (one member has
 * nobody to compare with: no hash is computed). */
static bool has_peers(struct server *s)
{
    struct server_member_info ms[2];
    size_t n = server_members_list(s, ms, 2);
    return n > 1;
}

#define FUTURE_REV "etcdserver: mvcc: required revision is a future revision"
#define COMPACTED "etcdserver: mvcc: required revision has been compacted"

/* initial_compare: etcd's CheckInitialHashKV verdict on one peer; true for
 * a mismatch. */
static bool initial_compare(uint64_t self, const struct server_hash *h,
                            const struct peer_hash *p)
{
    const struct server_peer_hash *a = &p->a;
    if (a->err == 0 && h->hash == a->hash)
        return false;
    if (a->err == 0 && h->compact_rev == a->compact_rev) {
        log_error("etcdserver", "%016" PRIx64 "'s hash %u != %016" PRIx64
                  "'s hash %u (revision %" PRId64 ", peer revision %" PRId64
                  ", compact revision %" PRId64 ")", self, h->hash, p->id,
                  a->hash, h->rev, a->rev, h->compact_rev);
        return true;
    }
    if (a->err == 0)
        log_warn("etcdserver", "%016" PRIx64 " cannot check hash of peer(%016"
                 PRIx64 "): peer has a different compact revision %" PRId64
                 " (revision:%" PRId64 ")", self, p->id, a->compact_rev,
                 h->rev);
    else if (a->err == ERR_FUTURE_REV)
        log_warn("etcdserver", "%016" PRIx64 " cannot check the hash of "
                 "peer(\"%s\") at revision %" PRId64 ": peer is lagging "
                 "behind(\"%s\")", self, p->urls, h->rev, FUTURE_REV);
    else if (a->err == ERR_COMPACTED)
        log_warn("etcdserver", "%016" PRIx64 " cannot check the hash of "
                 "peer(\"%s\") at revision %" PRId64 ": local node is "
                 "lagging behind(\"%s\")", self, p->urls, h->rev, COMPACTED);
    return false;
}

int corrupt_check_initial(struct server *s, uint32_t election_ms)
{
    CHECK(s != NULL);
    uint64_t self = server_member_id(s);
    log_info("etcdserver", "%016" PRIx64 " starting initial corruption "
             "check with timeout %ds...", self,
             req_timeout_ms(election_ms) / 1000);
    if (!has_peers(s)) { /* nobody to compare with: no hash */
        log_info("etcdserver", "%016" PRIx64 " succeeded on initial "
                 "corruption checking: no corruption", self);
        return 0;
    }
    struct server_hash h;
    int rc = server_hash_kv(s, 0, &h);
    if (rc != 0) {
        log_error("etcdserver", "%016" PRIx64 " failed to fetch hash (%s)",
                  self, err_str(rc));
        return rc;
    }
    struct peer_hash *peers = mem_calloc(CORRUPT_PEERS_MAX, sizeof *peers);
    if (peers == NULL)
        return ERR_NOMEM;
    /* Peers restarting with this member serve their peer listener before
     * their own check (cmd/cetcd.c), so they answer; a peer that is down
     * refuses the connection at once and is only logged, as etcd's
     * check only warns about peers it cannot reach. */
    size_t n = peer_hashes(s, election_ms, h.rev, false, peers);
    size_t mismatch = 0;
    for (size_t i = 0; i < n; i++)
        mismatch += initial_compare(self, &h, &peers[i]);
    mem_free(peers);
    if (mismatch > 0)
        return ERR_HASH_MISMATCH; /* the caller logs etcd's fatal line */
    log_info("etcdserver", "%016" PRIx64 " succeeded on initial corruption "
             "checking: no corruption", self);
    return 0;
}

/* --- the periodic check ------------------------------------------------ */

struct corrupt_monitor {
    struct server *s;           /* the member */
    uint32_t election_ms;       /* for the request timeout */
    uint64_t interval_ms;       /* between passes */
    bool budget;                /* stretch the wait to the CPU budget */
    bool compact;               /* the compaction-time check, not the
                                   periodic one */
    int64_t checked_rev;        /* compact: the last compaction revision
                                   checked on every peer (loop thread) */
    pthread_t thread;           /* runs loop() */
    pthread_mutex_t mu;         /* guards stop and the barrier fields */
    pthread_cond_t cv;          /* stop, or the barrier's answer */
    bool stop;                  /* corrupt_monitor_stop was called */
    bool barrier_done;          /* the barrier answered */
    int barrier_err;            /* its error */
    uint64_t barrier_gen;       /* which pass the barrier belongs to */
};

/* A barrier's answer; arg points at a heap cell holding the monitor and
 * the pass, so a late answer after a timed-out wait changes nothing. */
struct barrier_arg {
    struct corrupt_monitor *m; /* the monitor (alive: stop waits for us) */
    uint64_t gen;              /* the pass it was asked for */
};

static void on_barrier(void *arg, int err)
{
    struct barrier_arg *a = arg;
    struct corrupt_monitor *m = a->m;
    pthread_mutex_lock(&m->mu);
    if (a->gen == m->barrier_gen) {
        m->barrier_done = true;
        m->barrier_err = err;
        pthread_cond_broadcast(&m->cv);
    }
    pthread_mutex_unlock(&m->mu);
    mem_free(a);
}

/* barrier: a linearizable barrier (etcd: linearizableReadNotify), waited
 * for up to the request timeout.  server_barrier_async answers exactly
 * once, and within its own timeout, so stop never frees m under it: stop
 * waits for barrier_done as well (see corrupt_monitor_stop). */
static int barrier(struct corrupt_monitor *m)
{
    struct barrier_arg *a = mem_malloc(sizeof *a);
    if (a == NULL)
        return ERR_NOMEM;
    pthread_mutex_lock(&m->mu);
    a->m = m;
    a->gen = ++m->barrier_gen;
    m->barrier_done = false;
    pthread_mutex_unlock(&m->mu);
    server_barrier_async(m->s, on_barrier, a);
    pthread_mutex_lock(&m->mu);
    while (!m->barrier_done)
        pthread_cond_wait(&m->cv, &m->mu);
    int err = m->barrier_err;
    pthread_mutex_unlock(&m->mu);
    return err;
}

static void on_alarm(void *arg, const struct server_response *r)
{
    (void)arg;
    if (r->err != 0)
        log_warn("etcdserver", "failed to raise the CORRUPT alarm: %s",
                 err_str(r->err));
}

static void raise_corrupt(struct server *s)
{
    Etcdserverpb__AlarmRequest a = ETCDSERVERPB__ALARM_REQUEST__INIT;
    a.action = ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE;
    a.memberid = 0; /* as etcd 3.4's checkHashKV */
    a.alarm = ETCDSERVERPB__ALARM_TYPE__CORRUPT;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_ALARM;
    ir.alarm = &a;
    server_propose(s, &ir, on_alarm, NULL);
}

/* peer_verdict: etcd's checkHashKV rules for one answering peer. */
static bool peer_verdict(const struct peer_hash *p, const struct server_hash *h,
                         const struct server_hash *h2)
{
    bool bad = false;
    const struct server_peer_hash *a = &p->a;
    if (a->rev > h2->rev) {
        log_warn("etcdserver", "revision %" PRId64 " from member %016" PRIx64
                 ", expected at most %" PRId64, a->rev, p->id, h2->rev);
        bad = true;
    }
    if (a->compact_rev > h2->compact_rev) {
        log_warn("etcdserver", "compact revision %" PRId64 " from member "
                 "%016" PRIx64 ", expected at most %" PRId64, a->compact_rev,
                 p->id, h2->compact_rev);
        bad = true;
    }
    if (a->compact_rev == h->compact_rev && a->hash != h->hash) {
        log_warn("etcdserver", "hash %u at revision %" PRId64 " from member "
                 "%016" PRIx64 ", expected hash %u", a->hash, h->rev, p->id,
                 h->hash);
        bad = true;
    }
    return bad;
}

/* check_pass: etcd's checkHashKV, run by the leader. */
static void check_pass(struct corrupt_monitor *m, struct peer_hash *peers)
{
    struct server_hash h, h2;
    if (!has_peers(m->s) || server_hash_kv(m->s, 0, &h) != 0)
        return;
    size_t n = peer_hashes(m->s, m->election_ms, h.rev, false, peers);
    if (barrier(m) != 0 || server_hash_kv(m->s, 0, &h2) != 0)
        return;
    bool bad = false;
    if (h2.hash != h.hash && h2.rev == h.rev &&
        h2.compact_rev == h.compact_rev) {
        log_warn("etcdserver", "mismatched hashes %u and %u for revision %"
                 PRId64, h.hash, h2.hash, h.rev);
        bad = true;
    }
    for (size_t i = 0; i < n; i++)
        if (peers[i].a.err == 0 && peer_verdict(&peers[i], &h, &h2))
            bad = true;
    if (bad)
        raise_corrupt(m->s);
    log_info("etcdserver", "finished peer corruption check");
}

/* compact_verdict: one peer's answer at compaction revision c; returns 1
 * if it matches (checked), 0 if it cannot be compared, -1 on a mismatch. */
static int compact_verdict(const struct peer_hash *p, int64_t c,
                           uint32_t hash)
{
    const struct server_peer_hash *a = &p->a;
    if (a->err != 0 || a->compact_rev != c)
        return 0;
    if (a->hash != hash) {
        log_error("etcdserver", "failed compaction hash check: revision %"
                  PRId64 ", leader hash %u, follower %016" PRIx64
                  " hash %u (compact revision %" PRId64 ")", c, hash, p->id,
                  a->hash, a->compact_rev);
        return -1;
    }
    log_info("etcdserver", "successfully checked hash on follower %016"
             PRIx64 " at revision %" PRId64, p->id, c);
    return 1;
}

/* compact_pass: etcd 3.5's CompactHashCheck, run by the leader: its hash
 * at its compact revision C (what it holds at or below C) against each
 * peer's at C.  Peers that have not compacted at C yet, or compacted past
 * it, cannot be compared; C counts as checked once every peer was, and is
 * not asked again.  A mismatch raises CORRUPT for member 0 (etcd 3.5: it
 * is not clear which side is wrong).  Differences from 3.5: only the
 * newest compaction revision is tried (3.5 keeps the hashes of the last
 * 10 compactions and tries them newest first), and each member hashes
 * when asked rather than during its compaction. */
static void compact_pass(struct corrupt_monitor *m, struct peer_hash *peers)
{
    int64_t c = server_compact_rev(m->s);
    if (c <= 0 || c <= m->checked_rev || !has_peers(m->s))
        return;
    log_info("etcdserver", "starting compact hash check at revision %" PRId64,
             c);
    struct server_hash h;
    if (server_hash_kv_compacted(m->s, c, &h) != 0)
        return; /* compacted again meanwhile: the next pass */
    size_t n = peer_hashes(m->s, m->election_ms, c, true, peers);
    size_t checked = 0;
    for (size_t i = 0; i < n; i++) {
        int v = compact_verdict(&peers[i], c, h.hash);
        if (v < 0) {
            raise_corrupt(m->s);
            return;
        }
        checked += (size_t)v;
    }
    if (n > 0 && checked == n) {
        m->checked_rev = c;
        log_info("etcdserver", "successfully checked hash on whole cluster "
                 "(%zu peers) at revision %" PRId64, checked, c);
    } else if (n > 0) {
        log_warn("etcdserver", "skipped revision %" PRId64 " in compaction "
                 "hash check; was not able to check all peers (%zu of %zu)",
                 c, checked, n);
    }
    log_info("etcdserver", "finished compaction hash check");
}

static bool is_leader(struct server *s)
{
    struct server_metrics mt;
    server_metrics_get(s, &mt);
    return mt.is_leader;
}

uint64_t corrupt_next_wait_ms(uint64_t interval_ms, uint64_t pass_cpu_ns,
                              bool budget)
{
    uint64_t least = pass_cpu_ns / 1000000u * CORRUPT_CPU_BUDGET;
    return budget && least > interval_ms ? least : interval_ms;
}

/* This thread's CPU time in ns (its hashes run on it). */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *loop(void *arg)
{
    struct corrupt_monitor *m = arg;
    uint64_t wait_ms = m->interval_ms;
    struct peer_hash *peers = mem_calloc(CORRUPT_PEERS_MAX, sizeof *peers);
    if (m->compact)
        log_info("etcdserver", "enabled compact hash check with %" PRIu64
                 "ms interval", m->interval_ms);
    else
        log_info("etcdserver", "enabled corruption checking with %" PRIu64
                 "ms interval", m->interval_ms);
    for (;;) {
        struct timespec dl = thread_deadline_ms(CLOCK_MONOTONIC, wait_ms);
        pthread_mutex_lock(&m->mu);
        while (!m->stop &&
               pthread_cond_timedwait(&m->cv, &m->mu, &dl) == 0)
            ;
        bool stop = m->stop;
        pthread_mutex_unlock(&m->mu);
        if (stop)
            break;
        bool nospace, corrupt;
        server_alarms_active(m->s, &nospace, &corrupt);
        uint64_t c0 = thread_cpu_ns();
        if (peers != NULL && !corrupt && is_leader(m->s) && m->compact)
            compact_pass(m, peers);
        else if (peers != NULL && !corrupt && is_leader(m->s))
            check_pass(m, peers);
        uint64_t cpu = thread_cpu_ns() - c0;
        wait_ms = corrupt_next_wait_ms(m->interval_ms, cpu, m->budget);
        if (wait_ms > m->interval_ms)
            log_info("etcdserver", "%s took %" PRIu64 " ms of CPU; the "
                     "next in %" PRIu64 " s (the default interval, "
                     "stretched to the checks' CPU budget)",
                     m->compact ? "compaction hash check"
                                : "corruption check",
                     cpu / 1000000u, wait_ms / 1000u);
    }
    mem_free(peers);
    return NULL;
}

int corrupt_monitor_start(struct server *s, uint32_t election_ms,
                          uint64_t interval_ms, bool compact, bool budget,
                          struct corrupt_monitor **out)
{
    CHECK(s != NULL && out != NULL && interval_ms > 0);
    struct corrupt_monitor *m = mem_calloc(1, sizeof *m);
    if (m == NULL)
        return ERR_NOMEM;
    *m = (struct corrupt_monitor){.s = s,
                                  .election_ms = election_ms,
                                  .interval_ms = interval_ms,
                                  .budget = budget,
                                  .compact = compact};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&m->mu, NULL);
    if (pthread_create(&m->thread, NULL, loop, m) != 0) {
        pthread_cond_destroy(&m->cv);
        pthread_mutex_destroy(&m->mu);
        mem_free(m);
        return ERR_IO;
    }
    thread_name_set(m->thread, "cetcd-corrupt");
    *out = m;
    return 0;
}

void corrupt_monitor_stop(struct corrupt_monitor *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL); /* a pass in progress ends first */
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    mem_free(m);
}
