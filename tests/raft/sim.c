/*
 * sim.c - deterministic simulator for src/raft.
 *
 * GOAL: find safety bugs by running many seeded clusters under faults, and
 * check liveness once the faults heal.
 *
 * METHOD: N nodes (plus one spare that membership changes may add) talk
 * through a simulated network that drops, duplicates, reorders (random
 * delivery from a bag) and partitions messages; every message goes through
 * the binary codec.  Nodes crash, losing everything not persisted (also in
 * the middle of a Ready, persisting only a prefix of its entries), and
 * restart from their simulated disk.  The workload proposes entries, reads
 * (ReadIndex), membership changes (v1, joint v2 auto/explicit) and takes
 * snapshots with log compaction.  After every step we check:
 *   - Election Safety: at most one leader per term;
 *   - Log Matching: an (index, term) pair always has the same data and the
 *     same previous term, wherever it appears;
 *   - Leader Completeness: a new leader holds every entry committed in an
 *     earlier term;
 *   - committed entries never change (every node's commit agrees);
 *   - State Machine Safety: the hash chain of applied entries agrees at
 *     every index on every node (snapshots included);
 *   - ReadIndex: an answer is >= the commit index when the read was asked.
 * Then all faults heal and a leader must commit a new proposal on all
 * members within a bound.  Everything derives from the seed; a failure
 * prints the command that replays it.
 *
 * PROFILES: half the seeds run the classic timing (election timeout 10
 * ticks of 10 steps, latency <= 1 tick, rare late messages).  The other
 * half run a churn profile built to open the Figure 8 window (Raft paper
 * §5.4.2): election timeouts of 8-140 steps against latencies up to a whole
 * timeout plus late deliveries of up to 3 timeouts, a nemesis that crashes
 * (or isolates) a new leader within a few steps of winning, so a lone entry
 * of its term stays behind, and a leader right after its commit index
 * moved, before its own-term entry spreads; crashed nodes come back fast,
 * and most members send one entry per APP, so an old-term entry is
 * replicated before the new leader's own.
 *
 * MUTATION TESTS: raft_sim_mutant is this program linked against a test
 * build of the library where raft_config.test_mutations disables one rule
 * (--mutation commit-prior-term | vote-any-log | no-truncate | vote-twice |
 * heartbeat-commit, see raft.h RAFT_MUTATE_*), or where this harness breaks
 * the Ready contract itself (--mutation send-before-persist).  With
 * --expect-violation the run succeeds at the first safety failure and fails
 * if the mutant survives every seed; --count reports how many seeds fail.
 *
 * Usage: raft_sim [--nodes N] [--seeds A:B | --seed S] [--steps K] [-v]
 *                 [--profile classic|churn] [--mutation NAME]
 *                 [--expect-violation | --count]
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/raft.h"
#include "util/err.h"

#define MAXN 7
#define BAG_MAX 2048

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static bool chance(unsigned per_mille) { return rnd() % 1000 < per_mille; }
static uint64_t hmix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}
static uint64_t hbytes(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

struct disk {
    struct raft_hard_state hs;
    struct raft_snapshot snap;     /* data owned */
    struct raft_entry *ents;       /* after snap.meta.index, data owned */
    size_t n, cap;
};

struct node {
    raft_id id;
    struct raft *r;
    bool up;
    int group;                     /* partition group */
    struct disk d;
    raft_index applied;
    uint64_t sm;                   /* hash chain of applied entries */
    struct raft_conf_state conf;   /* membership as applied */
    raft_index checked_commit;     /* committed entries already recorded */
};

struct netmsg {
    long at;                       /* delivery time (step) */
    raft_id from, to;
    uint8_t *buf;
    size_t len;
};

/* Global knowledge for the checks, indexed by log index. */
struct gidx {
    uint64_t chain;        /* state-machine hash after applying index */
    bool has_chain;
    raft_term cterm;       /* term of the committed entry */
    raft_term cterm_at;    /* a term at which it was known committed */
    bool committed;
};

struct lm { raft_index index; raft_term term, prev; uint64_t h; bool used; };

static struct {
    uint64_t st_applied, st_leaders, st_crashes, st_snaps, st_ccs, st_reads;
    int n, nall;                   /* voters at start, nodes incl. spare */
    uint64_t seed;
    long steps, step;
    bool verbose, pre_vote, check_quorum;
    int read_only;
    struct node nodes[MAXN + 1];
    struct netmsg bag[BAG_MAX];
    size_t nbag;
    unsigned drop, dup;            /* per mille */
    unsigned faults;               /* per mille of steps with a fault */
    struct gidx *g;
    size_t gcap;
    raft_id *leader_of;            /* by term */
    size_t lcap;
    struct lm *lm;                 /* (index, term) -> data, prev term */
    size_t lmcap;
    raft_index gcommit;            /* highest commit seen anywhere */
    uint64_t prop_seq;
    uint64_t final_tag;            /* liveness proposal */
    struct { uint64_t tag; raft_index hw; } reads[64];
    int nreads;
    bool cc_enabled;
    bool healed;                   /* liveness phase: no faults */
    /* Timing and nemesis profile, drawn per seed (see run_seed). */
    int tick_every;                /* steps per tick */
    int election_tick;             /* raft config */
    long delay_max;                /* usual message latency, steps */
    unsigned late_pm;              /* per mille of messages delivered late */
    long late_max;                 /* how late, steps */
    unsigned kill_new_leader_pm;   /* new leader dies soon after winning */
    long kill_delay_max;           /* ... within this many steps */
    unsigned kill_commit_pm;       /* leader dies right after committing */
    unsigned restart_pm;           /* per step, a down node restarts */
    unsigned small_msgs_pm;        /* max_size_per_msg = 1 entry */
    bool isolate_not_crash;        /* the nemesis partitions instead */
    long kill_at[MAXN + 1];        /* step at which a node's kill is due */
    uint32_t mutations;            /* RAFT_MUTATE_* (mutant builds only) */
    bool send_early;               /* caller mutation: send, then persist */
    bool expect_violation;         /* mutation test: a failure is success */
    bool count;                    /* --count: go on after a failure */
    int profile;                   /* --profile: 0 drawn, 1 classic, 2 churn */
    uint64_t n_failed;             /* seeds that failed (--count) */
    jmp_buf next_seed;             /* --count: where fail() returns */
    struct raft_conf_state init_conf;
} S;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL seed %" PRIu64 " step %ld: ", S.seed, S.step);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nreplay: tests/raft/raft_sim%s --nodes %d --seed %"
                    PRIu64 " --steps %ld -v\n",
            S.mutations ? "_mutant --mutation ..." : "", S.n, S.seed,
            S.steps);
    if (S.count) {
        S.n_failed++;
        longjmp(S.next_seed, 1);
    }
    if (S.expect_violation) {
        printf("caught: mutation 0x%x violates safety at seed %" PRIu64
               " step %ld\n", S.mutations, S.seed, S.step);
        exit(0);
    }
    exit(1);
}

static struct gidx *gi(raft_index i)
{
    if (i >= S.gcap) {
        size_t c = S.gcap ? S.gcap : 1024;
        while (c <= i)
            c *= 2;
        S.g = realloc(S.g, c * sizeof(*S.g));
        memset(S.g + S.gcap, 0, (c - S.gcap) * sizeof(*S.g));
        S.gcap = c;
    }
    return &S.g[i];
}

static void logger(void *arg, int level, const char *line)
{
    (void)level;
    if (S.verbose)
        fprintf(stderr, "[%ld] %s\n", S.step, line);
    (void)arg;
}

/* ---- checks ---- */

static void check_election(struct node *nd, raft_term term)
{
    if (term >= S.lcap) {
        size_t c = S.lcap ? S.lcap * 2 : 256;
        while (c <= term)
            c *= 2;
        S.leader_of = realloc(S.leader_of, c * sizeof(raft_id));
        memset(S.leader_of + S.lcap, 0, (c - S.lcap) * sizeof(raft_id));
        S.lcap = c;
    }
    if (S.leader_of[term] != 0 && S.leader_of[term] != nd->id)
        fail("election safety: %" PRIu64 " and %" PRIu64 " lead term %" PRIu64,
             S.leader_of[term], nd->id, term);
    S.leader_of[term] = nd->id;
}

static void check_leader_complete(struct node *nd, raft_term term)
{
    struct raft_status st;
    raft_status(nd->r, &st);
    for (raft_index i = st.first_index; i <= S.gcommit; i++) {
        struct gidx *g = gi(i);
        if (!g->committed || g->cterm_at >= term)
            continue;
        raft_term t = 0;
        if (raft_term_at(nd->r, i, &t) != 0 || t != g->cterm)
            fail("leader completeness: leader %" PRIu64 " term %" PRIu64
                 " lacks committed %" PRIu64 "/%" PRIu64, nd->id, term,
                 g->cterm, i);
    }
}

static void check_log_matching(struct node *nd, const struct raft_entry *e)
{
    raft_term prev = 0;
    if (raft_term_at(nd->r, e->index - 1, &prev) != 0)
        prev = UINT64_MAX; /* unknown: compacted */
    uint64_t h = hbytes(e->data, e->len) ^ e->type;
    if (S.lmcap == 0) {
        S.lmcap = 1 << 16;
        S.lm = calloc(S.lmcap, sizeof(*S.lm));
    }
    size_t k = (size_t)hmix(e->index, e->term) & (S.lmcap - 1);
    for (;; k = (k + 1) & (S.lmcap - 1)) {
        struct lm *x = &S.lm[k];
        if (!x->used) {
            *x = (struct lm){e->index, e->term, prev, h, true};
            return;
        }
        if (x->index != e->index || x->term != e->term)
            continue;
        if (x->h != h)
            fail("log matching: entry %" PRIu64 "/%" PRIu64 " differs on %"
                 PRIu64, e->term, e->index, nd->id);
        if (prev != UINT64_MAX && x->prev != UINT64_MAX && x->prev != prev)
            fail("log matching: prev of %" PRIu64 "/%" PRIu64 " differs on %"
                 PRIu64, e->term, e->index, nd->id);
        return;
    }
}

static void record_commit(struct node *nd, raft_index commit, raft_term term)
{
    if (commit > S.gcommit)
        S.gcommit = commit;
    for (raft_index i = nd->checked_commit + 1; i <= commit; i++) {
        raft_term t;
        if (raft_term_at(nd->r, i, &t) != 0)
            continue; /* compacted: covered by a snapshot */
        struct gidx *g = gi(i);
        if (g->committed && g->cterm != t)
            fail("committed entry %" PRIu64 " changed: term %" PRIu64
                 " vs %" PRIu64 " on %" PRIu64, i, g->cterm, t, nd->id);
        if (!g->committed) {
            g->committed = true;
            g->cterm = t;
            g->cterm_at = term;
        }
    }
    if (commit > nd->checked_commit)
        nd->checked_commit = commit;
}

static void check_chain(struct node *nd, raft_index i)
{
    struct gidx *g = gi(i);
    if (g->has_chain && g->chain != nd->sm)
        fail("state machine safety: node %" PRIu64 " applied a different "
             "entry at %" PRIu64, nd->id, i);
    g->has_chain = true;
    g->chain = nd->sm;
}

/* ---- disk ---- */

static void disk_free(struct disk *d)
{
    for (size_t k = 0; k < d->n; k++)
        free(d->ents[k].data);
    free(d->ents);
    free(d->snap.data);
    memset(d, 0, sizeof(*d));
}

static void disk_append(struct disk *d, const struct raft_entry *e, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        raft_index first = d->snap.meta.index + 1;
        if (e[k].index < first)
            fail("disk append below snapshot");
        size_t pos = (size_t)(e[k].index - first);
        if (pos > d->n)
            fail("disk append gap at %" PRIu64, e[k].index);
        for (size_t j = pos; j < d->n; j++)
            free(d->ents[j].data);
        d->n = pos;
        if (d->n == d->cap) {
            d->cap = d->cap ? d->cap * 2 : 64;
            d->ents = realloc(d->ents, d->cap * sizeof(*d->ents));
        }
        struct raft_entry *x = &d->ents[d->n++];
        *x = e[k];
        x->data = malloc(e[k].len + 1);
        if (e[k].len)
            memcpy(x->data, e[k].data, e[k].len);
    }
}

static void disk_set_snap(struct disk *d, const struct raft_snapshot *s)
{
    free(d->snap.data);
    d->snap = *s;
    d->snap.data = malloc(s->len + 1);
    if (s->len)
        memcpy(d->snap.data, s->data, s->len);
}

/* Drops persisted entries <= i (i <= snapshot index). */
static void disk_compact(struct disk *d, raft_index i, const struct raft_snapshot *s)
{
    raft_index first = d->snap.meta.index + 1;
    size_t k = i >= first ? (size_t)(i - first + 1) : 0;
    if (k > d->n)
        k = d->n;
    for (size_t j = 0; j < k; j++)
        free(d->ents[j].data);
    memmove(d->ents, d->ents + k, (d->n - k) * sizeof(*d->ents));
    d->n -= k;
    (void)s;
}

/* ---- nodes ---- */

static void node_start(struct node *nd)
{
    struct raft_config c = {0};
    c.id = nd->id;
    c.election_tick = S.election_tick;
    c.heartbeat_tick = 1;
    c.pre_vote = S.pre_vote;
    c.check_quorum = S.check_quorum;
    c.test_mutations = S.mutations;
    /* One entry per APP lets a leader replicate an old-term entry before
     * its own-term one (the Figure 8 window). */
    c.max_size_per_msg = chance(S.small_msgs_pm) ? 1 : 64 + rnd() % 512;
    c.max_inflight_msgs = 1 + (uint32_t)(rnd() % 8);
    c.read_only = S.read_only;
    c.seed = rnd();
    c.logger = logger;
    struct disk *d = &nd->d;
    c.hard_state = d->hs;
    /* Skip the persisted entries the snapshot already covers. */
    c.snapshot = d->snap;
    c.conf = d->snap.meta.index ? d->snap.meta.conf : nd->conf;
    c.entries = d->ents;
    c.n_entries = d->n;
    c.applied = d->snap.meta.index;
    nd->r = malloc(raft_sizeof());
    int rc = raft_init(nd->r, &c);
    if (rc != 0)
        fail("raft_init on %" PRIu64 ": %s", nd->id, err_name(rc));
    nd->up = true;
    nd->applied = d->snap.meta.index;
    nd->sm = 0;
    if (d->snap.meta.index) {
        memcpy(&nd->sm, d->snap.data + 8, 8);
        nd->conf = d->snap.meta.conf;
    }
    nd->checked_commit = d->snap.meta.index;
    S.kill_at[nd->id] = -1;
}

static void node_crash(struct node *nd)
{
    S.st_crashes++;
    raft_close(nd->r);
    free(nd->r);
    nd->r = NULL;
    nd->up = false;
    /* The state machine is volatile; it restarts from the snapshot. */
    memset(&nd->conf, 0, sizeof(nd->conf));
}

static void net_send(const struct raft_msg *m)
{
    /* Snapshots are never silently lost: the transport reports them. */
    if (m->type != RAFT_MSG_SNAP && chance(S.drop))
        return;
    int copies = chance(S.dup) ? 2 : 1;
    for (int c = 0; c < copies; c++) {
        size_t len = raft_msg_encoded_size(m);
        uint8_t *buf = malloc(len);
        if (raft_msg_encode(m, buf, len, &len) != 0)
            fail("encode");
        if (S.nbag == BAG_MAX) { /* network overload: lose the oldest */
            free(S.bag[0].buf);
            memmove(S.bag, S.bag + 1, (BAG_MAX - 1) * sizeof(S.bag[0]));
            S.nbag--;
        }
        /* Usual latency, and sometimes much later (reorder): an old
         * leader's APP may land after newer terms have come and gone. */
        long dmax = S.healed ? 10 : S.delay_max;
        long delay = 1 + (long)(rnd() % (uint64_t)dmax);
        if (!S.healed && chance(S.late_pm))
            delay += (long)(rnd() % (uint64_t)S.late_max);
        S.bag[S.nbag++] = (struct netmsg){S.step + delay, m->from, m->to,
                                          buf, len};
    }
}

static void apply_entry(struct node *nd, const struct raft_entry *e)
{
    if (e->index != nd->applied + 1)
        fail("node %" PRIu64 " applies %" PRIu64 " after %" PRIu64, nd->id,
             e->index, nd->applied);
    nd->applied = e->index;
    S.st_applied++;
    nd->sm = hmix(hmix(nd->sm, e->term), hbytes(e->data, e->len) ^ e->type);
    check_chain(nd, e->index);
    if (e->type != RAFT_ENTRY_NORMAL) {
        struct raft_conf_change cc;
        if (raft_conf_change_decode(e->data, e->len, &cc) != 0)
            fail("bad conf change entry at %" PRIu64, e->index);
        if (raft_apply_conf_change(nd->r, &cc, &nd->conf) == 0)
            S.st_ccs++;
    }
}

static void check_read_state(const struct raft_read_state *rs)
{
    uint64_t tag;
    if (rs->ctx_len != 8)
        fail("read state ctx");
    memcpy(&tag, rs->ctx, 8);
    S.st_reads++;
    for (int k = 0; k < S.nreads; k++)
        if (S.reads[k].tag == tag && S.read_only == RAFT_READ_ONLY_SAFE &&
            rs->index < S.reads[k].hw)
            fail("read index %" PRIu64 " below commit %" PRIu64
                 " at request time", rs->index, S.reads[k].hw);
}

static void maybe_snapshot(struct node *nd)
{
    if (nd->applied < nd->d.snap.meta.index + 20 || !chance(300))
        return;
    uint8_t data[16];
    memcpy(data, &nd->applied, 8);
    memcpy(data + 8, &nd->sm, 8);
    int rc = raft_snapshot_create(nd->r, nd->applied, &nd->conf, data, 16);
    if (rc != 0)
        fail("snapshot_create: %s", err_name(rc));
    struct raft_snapshot s = {.data = data, .len = 16};
    s.meta.index = nd->applied;
    raft_term_at(nd->r, nd->applied, &s.meta.term);
    s.meta.conf = nd->conf;
    raft_index keep = rnd() % 8;
    raft_index ci = nd->applied > keep ? nd->applied - keep : nd->applied;
    struct raft_status st;
    raft_status(nd->r, &st);
    /* Persist the snapshot first, then drop the entries it covers. */
    disk_compact(&nd->d, nd->applied, &s);
    disk_set_snap(&nd->d, &s);
    if (ci >= st.first_index)
        raft_log_compact(nd->r, ci);
}

static void persist(struct node *nd, const struct raft_ready *rd, bool torn)
{
    struct disk *d = &nd->d;
    if (torn) {
        /* Crash during the write: a prefix of the entries made it. */
        if (rd->snapshot == NULL && rd->n_entries > 0)
            disk_append(d, rd->entries, rnd() % (rd->n_entries + 1));
        return;
    }
    if (rd->snapshot) {
        for (size_t k = 0; k < d->n; k++)
            free(d->ents[k].data);
        d->n = 0;
        disk_set_snap(d, rd->snapshot);
    }
    disk_append(d, rd->entries, rd->n_entries);
    if (rd->has_hard_state)
        d->hs = rd->hard_state;
}

static void handle_ready(struct node *nd)
{
    while (nd->up && raft_has_ready(nd->r)) {
        struct raft_ready rd;
        if (raft_ready(nd->r, &rd) != 0)
            fail("raft_ready");
        struct raft_status st;
        raft_status(nd->r, &st);
        if (st.role == RAFT_LEADER)
            check_election(nd, st.term);
        if (rd.has_soft_state && rd.soft_state.role == RAFT_LEADER) {
            S.st_leaders++;
            check_leader_complete(nd, st.term);
            /* Nemesis: a leader that dies before its first entry spreads
             * leaves a lone entry of its term behind (Figure 8 (b)). */
            if (!S.healed && chance(S.kill_new_leader_pm))
                S.kill_at[nd->id] =
                    S.step + (long)(rnd() % (uint64_t)S.kill_delay_max);
        }
        /* Nemesis: a leader that dies right after advancing its commit
         * may not have replicated its own-term entry yet (Figure 8 (c)). */
        bool kill_now = !S.healed && st.role == RAFT_LEADER &&
                        rd.has_hard_state &&
                        rd.hard_state.commit > nd->checked_commit &&
                        chance(S.kill_commit_pm);
        for (size_t k = 0; k < rd.n_entries; k++)
            check_log_matching(nd, &rd.entries[k]);
        if (!S.healed && chance(2)) {
            /* A caller breaking THE READY CONTRACT sends before its
             * write is durable (mutation "send-before-persist"). */
            for (size_t k = 0; S.send_early && k < rd.n_msgs; k++)
                net_send(&rd.msgs[k]);
            persist(nd, &rd, true);
            raft_advance(nd->r, &rd);
            node_crash(nd);
            return;
        }
        persist(nd, &rd, false);
        if (rd.has_hard_state)
            record_commit(nd, rd.hard_state.commit, rd.hard_state.term);
        for (size_t k = 0; k < rd.n_msgs; k++)
            net_send(&rd.msgs[k]);
        if (rd.snapshot) {
            S.st_snaps++;
            nd->applied = rd.snapshot->meta.index;
            memcpy(&nd->sm, rd.snapshot->data + 8, 8);
            nd->conf = rd.snapshot->meta.conf;
            check_chain(nd, nd->applied);
        }
        for (size_t k = 0; k < rd.n_committed; k++)
            apply_entry(nd, &rd.committed[k]);
        for (size_t k = 0; k < rd.n_read_states; k++)
            check_read_state(&rd.read_states[k]);
        raft_advance(nd->r, &rd);
        maybe_snapshot(nd);
        if (kill_now)
            S.kill_at[nd->id] = S.step;
    }
}

static struct node *leader(void)
{
    struct node *best = NULL;
    raft_term bt = 0;
    for (int k = 0; k < S.nall; k++) {
        struct node *nd = &S.nodes[k];
        struct raft_status st;
        if (!nd->up)
            continue;
        raft_status(nd->r, &st);
        if (st.role == RAFT_LEADER && st.term >= bt) {
            best = nd;
            bt = st.term;
        }
    }
    return best;
}

static void propose(struct node *nd, uint64_t tag)
{
    uint8_t buf[24];
    size_t len = 8 + rnd() % 16;
    memset(buf, 0xab, sizeof(buf));
    memcpy(buf, &tag, 8);
    raft_propose(nd->r, buf, len);
}

static bool has_id(const raft_id *ids, uint32_t n, raft_id id)
{
    for (uint32_t k = 0; k < n; k++)
        if (ids[k] == id)
            return true;
    return false;
}

/* A random membership change, proposed on the leader. */
static void propose_conf_change(struct node *ld)
{
    struct raft_status st;
    raft_status(ld->r, &st);
    struct raft_conf_state *cs = &st.conf;
    struct raft_conf_change cc = {0};
    raft_id x = 1 + rnd() % S.nall;
    bool voter = has_id(cs->voters, cs->n_voters, x);
    bool learner = has_id(cs->learners, cs->n_learners, x);
    if (cs->n_voters_outgoing > 0) {
        raft_propose_conf_change(ld->r, &cc, true); /* leave joint */
        return;
    }
    int kind = (int)(rnd() % 4);
    cc.n_changes = 1;
    cc.changes[0].node_id = x;
    if (kind == 0 && !voter && !learner) {
        cc.changes[0].type = RAFT_CC_ADD_LEARNER;
    } else if (kind == 1 && !voter) {
        cc.changes[0].type = RAFT_CC_ADD_NODE;
    } else if (kind == 2 && voter && cs->n_voters > 3) {
        cc.changes[0].type = RAFT_CC_REMOVE_NODE;
    } else if (kind == 3 && !voter) {
        /* joint: swap a voter for x */
        raft_id y = cs->voters[rnd() % cs->n_voters];
        cc.n_changes = 2;
        cc.changes[0].type = RAFT_CC_ADD_NODE;
        cc.changes[1].type = RAFT_CC_REMOVE_NODE;
        cc.changes[1].node_id = y;
        cc.transition = chance(500) ? RAFT_CC_TRANSITION_AUTO
                                    : RAFT_CC_TRANSITION_EXPLICIT;
        raft_propose_conf_change(ld->r, &cc, true);
        return;
    } else {
        return;
    }
    raft_propose_conf_change(ld->r, &cc, chance(500));
}

static void deliver(size_t k)
{
    struct netmsg nm = S.bag[k];
    S.bag[k] = S.bag[--S.nbag];
    struct node *to = &S.nodes[nm.to - 1];
    struct node *from = &S.nodes[nm.from - 1];
    bool ok = to->up && to->group == from->group && !chance(S.drop);
    if (nm.buf[1] == RAFT_MSG_SNAP && from->up) {
        /* The transport tells the leader how the snapshot went. */
        raft_report_snapshot(from->r, to->id, ok);
        handle_ready(from);
    }
    if (ok) {
        struct raft_msg m;
        if (raft_msg_decode(nm.buf, nm.len, &m) != 0)
            fail("decode");
        if (S.verbose)
            fprintf(stderr, "[%ld] deliver %" PRIu64 "->%" PRIu64 " %s t%"
                    PRIu64 " lt%" PRIu64 " i%" PRIu64 " c%" PRIu64 " rej%d "
                    "hint%" PRIu64 " n%zu\n", S.step, m.from, m.to,
                    raft_msg_type_name(m.type), m.term, m.log_term, m.index,
                    m.commit, m.reject, m.reject_hint, m.n_entries);
        int rc = raft_step(to->r, &m);
        if (rc == ERR_INVAL || rc == ERR_BUSY)
            fail("step %s -> %" PRIu64 ": %s", raft_msg_type_name(m.type),
                 to->id, err_name(rc));
        raft_msg_release(&m);
        handle_ready(to);
    }
    free(nm.buf);
}

/* Delivers every message due now, in random order. */
static void deliver_due(void)
{
    for (;;) {
        size_t due[BAG_MAX], n = 0;
        for (size_t k = 0; k < S.nbag; k++)
            if (S.bag[k].at <= S.step)
                due[n++] = k;
        if (n == 0)
            return;
        deliver(due[rnd() % n]);
    }
}

/* Each node ticks every tick_every steps, with its own phase and some
 * drift. */
static void tick_nodes(void)
{
    for (int k = 0; k < S.nall; k++) {
        struct node *nd = &S.nodes[k];
        int every = S.healed ? 20 : S.tick_every;
        if (!nd->up || (S.step + k * 3) % every != 0)
            continue;
        int n = S.healed ? 1 : (chance(20) ? 0 : chance(20) ? 2 : 1);
        for (int i = 0; i < n; i++)
            raft_tick(nd->r);
        handle_ready(nd);
    }
}

static void fault_step(void)
{
    struct node *nd = &S.nodes[rnd() % S.nall];
    int what = (int)(rnd() % 7);
    if (what == 6) { /* leaders are the interesting ones to crash */
        nd = leader();
        if (nd == NULL)
            return;
        what = 0;
    }
    if (what == 0 && nd->up) {
        if (S.verbose)
            fprintf(stderr, "[%ld] crash %" PRIu64 "\n", S.step, nd->id);
        node_crash(nd);
    } else if (what == 1 && !nd->up) {
        if (S.verbose)
            fprintf(stderr, "[%ld] restart %" PRIu64 "\n", S.step, nd->id);
        node_start(nd);
        handle_ready(nd);
    } else if (what == 2) {
        for (int k = 0; k < S.nall; k++)
            S.nodes[k].group = (int)(rnd() % 2);
    } else if (what == 3) {
        for (int k = 0; k < S.nall; k++)
            S.nodes[k].group = 0;
    } else if (what == 4 && nd->up) {
        raft_transfer_leader(nd->r, 1 + rnd() % S.nall);
        handle_ready(nd);
    } else if (what == 5 && nd->up) {
        raft_report_unreachable(nd->r, 1 + rnd() % S.nall);
    }
}

/* Carries out due kills (crash, or isolation of the victim) and brings
 * crashed nodes back. */
static void nemesis(void)
{
    for (int k = 0; k < S.nall; k++) {
        struct node *nd = &S.nodes[k];
        if (nd->up && S.kill_at[nd->id] >= 0 &&
            S.kill_at[nd->id] <= S.step) {
            S.kill_at[nd->id] = -1;
            if (S.verbose)
                fprintf(stderr, "[%ld] nemesis %s %" PRIu64 "\n", S.step,
                        S.isolate_not_crash ? "isolates" : "crashes",
                        nd->id);
            if (S.isolate_not_crash) {
                for (int j = 0; j < S.nall; j++)
                    S.nodes[j].group = 0;
                nd->group = 1;
            } else {
                node_crash(nd);
            }
        } else if (!nd->up && chance(S.restart_pm)) {
            if (S.verbose)
                fprintf(stderr, "[%ld] restart %" PRIu64 "\n", S.step,
                        nd->id);
            node_start(nd);
            handle_ready(nd);
        }
    }
}

static void one_step(void)
{
    deliver_due();
    tick_nodes();
    nemesis();
    unsigned x = (unsigned)(rnd() % 1000);
    struct node *nd = &S.nodes[rnd() % S.nall];
    if (x < 60) {
        if (nd->up) {
            propose(nd, ++S.prop_seq);
            handle_ready(nd);
        }
    } else if (x < 70) {
        if (nd->up && S.nreads < 64) {
            uint64_t tag = 1000000 + (uint64_t)S.nreads;
            S.reads[S.nreads].tag = tag;
            S.reads[S.nreads].hw = S.gcommit;
            S.nreads++;
            raft_read_index(nd->r, &tag, 8);
            handle_ready(nd);
        }
    } else if (x < 75) {
        struct node *ld = leader();
        if (ld != NULL && S.cc_enabled) {
            propose_conf_change(ld);
            handle_ready(ld);
        }
    } else if (x < 75 + S.faults) {
        fault_step();
    }
}

/* Liveness: with every fault healed, a proposal commits everywhere. */
static void liveness(void)
{
    S.healed = true;
    for (int k = 0; k < S.nall; k++) {
        S.nodes[k].group = 0;
        if (!S.nodes[k].up) {
            node_start(&S.nodes[k]);
            handle_ready(&S.nodes[k]);
        }
    }
    S.drop = 0;
    S.dup = 0;
    S.healed = true;
    raft_index target = 0;
    long bound = 10000; /* 1000 ticks = 100 election timeouts */
    for (long i = 0; i < bound; i++, S.step++) {
        deliver_due();
        tick_nodes();
        struct node *ld = leader();
        if (ld == NULL)
            continue;
        struct raft_status st;
        raft_status(ld->r, &st);
        if (target == 0 || (i % 1000) == 0) {
            propose(ld, ++S.prop_seq);
            handle_ready(ld);
            raft_status(ld->r, &st);
            target = st.last_index;
        }
        if (ld->applied < target)
            continue;
        bool all = true;
        for (int k = 0; k < S.nall && all; k++) {
            struct node *m = &S.nodes[k];
            bool member = has_id(st.conf.voters, st.conf.n_voters, m->id) ||
                          has_id(st.conf.learners, st.conf.n_learners, m->id);
            if (member && m->applied < target)
                all = false;
        }
        if (all)
            return;
    }
    for (int k = 0; k < S.nall; k++) {
        struct raft_status st;
        if (!S.nodes[k].up) continue;
        raft_status(S.nodes[k].r, &st);
        fprintf(stderr, "node %d role %d term %" PRIu64 " lead %" PRIu64 " commit %" PRIu64 " applied %" PRIu64 " last %" PRIu64 " first %" PRIu64 "\n", k + 1, st.role, st.term, st.lead, st.commit, st.applied, st.last_index, st.first_index);
        for (uint32_t j = 0; j < st.n_progress; j++)
            fprintf(stderr, "  pr %" PRIu64 " match %" PRIu64 " next %" PRIu64 " state %d paused %d infl %u psnap %" PRIu64 " active %d\n", st.progress[j].id, st.progress[j].match, st.progress[j].next, st.progress[j].state, st.progress[j].paused, st.progress[j].inflight, st.progress[j].pending_snapshot, st.progress[j].recent_active);
    }
    fail("liveness: no proposal committed on all members within %ld steps "
         "after healing", bound);
}

static void free_seed(void)
{
    for (int k = 0; k < S.nall; k++) {
        if (S.nodes[k].up)
            node_crash(&S.nodes[k]);
        disk_free(&S.nodes[k].d);
    }
    for (size_t k = 0; k < S.nbag; k++)
        free(S.bag[k].buf);
    S.nbag = 0;
}

static uint32_t mutation_of(const char *name)
{
    static const struct { const char *name; uint32_t bit; } m[] = {
        {"commit-prior-term", RAFT_MUTATE_COMMIT_PRIOR_TERM},
        {"vote-any-log", RAFT_MUTATE_VOTE_ANY_LOG},
        {"no-truncate", RAFT_MUTATE_NO_TRUNCATE},
        {"vote-twice", RAFT_MUTATE_VOTE_TWICE},
        {"heartbeat-commit", RAFT_MUTATE_HEARTBEAT_COMMIT},
    };
    for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++)
        if (!strcmp(name, m[k].name))
            return m[k].bit;
    if (!strcmp(name, "send-before-persist")) {
        S.send_early = true; /* the caller's bug, not the library's */
        return 0;
    }
    fprintf(stderr, "unknown mutation %s\n", name);
    exit(2);
}

static void run_seed(uint64_t seed)
{
    memset(S.nodes, 0, sizeof(S.nodes));
    S.seed = seed;
    rng_state = seed * 0x9e3779b97f4a7c15ULL + 1;
    S.step = 0;
    S.nbag = 0;
    S.gcommit = 0;
    S.nreads = 0;
    S.healed = false;
    free(S.g); S.g = NULL; S.gcap = 0;
    free(S.leader_of); S.leader_of = NULL; S.lcap = 0;
    free(S.lm); S.lm = NULL; S.lmcap = 0;
    S.pre_vote = chance(800);
    S.check_quorum = chance(800);
    S.read_only = S.check_quorum && chance(200) ? RAFT_READ_ONLY_LEASE_BASED
                                                : RAFT_READ_ONLY_SAFE;
    S.drop = (unsigned)(rnd() % 150);
    S.dup = (unsigned)(rnd() % 50);
    S.faults = (unsigned)(rnd() % 40);
    S.cc_enabled = chance(600);
    /* Timing: the classic profile (election timeout 10 ticks of 10 steps,
     * latency <= 1 tick) or a churn profile hunting Figure 8: short
     * election timeouts against long, reordering latency, leaders killed
     * right after winning or committing, crashed nodes back quickly. */
    bool churn = chance(500);
    if (S.profile != 0)
        churn = S.profile == 2;
    S.tick_every = churn ? 4 + (int)(rnd() % 7) : 10;
    S.election_tick = churn ? 2 + (int)(rnd() % 6) : 10;
    long timeout_steps = (long)S.tick_every * S.election_tick;
    S.delay_max = churn ? 1 + (long)(rnd() % (uint64_t)timeout_steps) : 10;
    S.late_pm = churn ? (unsigned)(rnd() % 300) : 50;
    S.late_max = churn ? 1 + 3 * timeout_steps : 100;
    S.kill_new_leader_pm = churn ? (unsigned)(rnd() % 800) : 0;
    S.kill_delay_max = 1 + (long)(rnd() % 20);
    S.kill_commit_pm = churn ? (unsigned)(rnd() % 800) : 0;
    S.restart_pm = churn ? 5 + (unsigned)(rnd() % 60) : 0;
    S.small_msgs_pm = churn ? 800 : 500;
    S.isolate_not_crash = churn && chance(300);
    S.nall = S.n + (S.cc_enabled ? 1 : 0);
    memset(&S.init_conf, 0, sizeof(S.init_conf));
    for (int k = 0; k < S.n; k++)
        S.init_conf.voters[S.init_conf.n_voters++] = (raft_id)k + 1;
    for (int k = 0; k < S.nall; k++) {
        struct node *nd = &S.nodes[k];
        nd->id = (raft_id)k + 1;
        if (k < S.n) {
            /* Bootstrap: the initial members start from a snapshot at
             * index 1 holding the initial membership, so a member added
             * later (starting empty) catches up through that snapshot. */
            uint8_t data[16] = {1};
            struct raft_snapshot s0 = {.data = data, .len = 16};
            s0.meta.index = 1;
            s0.meta.term = 1;
            s0.meta.conf = S.init_conf;
            disk_set_snap(&nd->d, &s0);
            nd->d.hs = (struct raft_hard_state){1, 0, 1};
            nd->conf = S.init_conf;
        }
        node_start(nd);
    }
    gi(1)->has_chain = true;
    gi(1)->chain = 0;
    for (S.step = 0; S.step < S.steps; S.step++)
        one_step();
    liveness();
    free_seed();
}

int main(int argc, char **argv)
{
    uint64_t a = 1, b = 100;
    S.n = 3;
    S.steps = 3000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
            S.n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            a = b = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            sscanf(argv[++i], "%" SCNu64 ":%" SCNu64, &a, &b);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            S.steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "-v"))
            S.verbose = true;
        else if (!strcmp(argv[i], "--mutation") && i + 1 < argc)
            S.mutations |= mutation_of(argv[++i]);
        else if (!strcmp(argv[i], "--count"))
            S.count = true;
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc)
            S.profile = !strcmp(argv[++i], "classic") ? 1 : 2;
        else if (!strcmp(argv[i], "--expect-violation"))
            S.expect_violation = true;
        else {
            fprintf(stderr, "usage: raft_sim [--nodes N] [--seeds A:B | "
                            "--seed S] [--steps K] [-v] [--mutation NAME "
                            "[--expect-violation]]\n");
            return 2;
        }
    }
    if (S.n < 1 || S.n > MAXN - 1)
        return 2;
    for (uint64_t s = a; s <= b; s++) {
        if (S.count && setjmp(S.next_seed) != 0) {
            free_seed(); /* failed: drop what the seed left behind */
            continue;
        }
        run_seed(s);
    }
    if (S.count) {
        printf("%" PRIu64 " of %" PRIu64 " seeds failed\n", S.n_failed,
               b - a + 1);
        return 0;
    }
    if (S.expect_violation) {
        printf("SURVIVED: mutation 0x%x passed %" PRIu64 " seeds x %ld "
               "steps undetected\n", S.mutations, b - a + 1, S.steps);
        return 1;
    }
    printf("ok: %" PRIu64 " seeds x %ld steps, %d nodes: applied %" PRIu64
           " entries, %" PRIu64 " leaders, %" PRIu64 " crashes, %" PRIu64
           " snapshots installed, %" PRIu64 " conf changes applied, %" PRIu64
           " reads\n", b - a + 1, S.steps, S.n, S.st_applied, S.st_leaders,
           S.st_crashes, S.st_snaps, S.st_ccs, S.st_reads);
    return 0;
}
