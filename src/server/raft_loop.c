/*
 * raft_loop.c - the raft thread: the only owner of struct raft and of the
 * WAL.  It ticks the raft clock every heartbeat interval, steps messages
 * from peers, proposes queued client requests, starts ReadIndex rounds for
 * waiting linearizable reads, and runs the Ready contract of raft.h:
 *   persist entries + HardState to the WAL with ONE fdatasync (group
 *   commit) -> send messages -> hand committed entries to the applier ->
 *   answer read states -> raft_advance.
 * On a restart the LMDB store is the snapshot: raft starts from a snapshot
 * marker at the consistent index and the WAL's entries after it.  Store
 * snapshots (copies, sends, installs, log truncation) are in snapshot.c.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mvcc/mvcc.h"
#include "raft/raft.h"
#include "server/boot_guard.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"
#include "wal/wal.h"

#define RAFT_PROPOSE_MAX 4096        /* proposals taken per loop pass */
#define READ_RETRY_TICKS 20          /* re-ask an unanswered ReadIndex */

/* A peer message waiting for the raft thread (encoded copy). */
struct server_inbox_msg {
    struct server_inbox_msg *next; /* FIFO link */
    size_t len;                    /* bytes of data */
    uint8_t data[];                /* raft_msg_encode output */
};

static void raft_logger(void *arg, int level, const char *line)
{
    (void)arg;
    static const enum log_level map[] = {LOG_DEBUG, LOG_INFO, LOG_WARN,
                                         LOG_ERROR};
    log_msg(map[level < 0 ? 0 : level > 3 ? 3 : level], "raft", "%s", line);
}

void server__kick(struct server *s)
{
    pthread_mutex_lock(&s->node.ev_mu);
    s->node.ev = true;
    pthread_cond_signal(&s->node.ev_cv);
    pthread_mutex_unlock(&s->node.ev_mu);
}

int server__raft_receive(struct server *s, const struct raft_msg *m)
{
    size_t len = raft_msg_encoded_size(m);
    struct server_inbox_msg *x = mem_malloc(sizeof *x + len);
    if (x == NULL)
        return ERR_NOMEM;
    int rc = raft_msg_encode(m, x->data, len, &x->len);
    if (rc != 0) {
        mem_free(x);
        return rc;
    }
    x->next = NULL;
    pthread_mutex_lock(&s->node.ev_mu);
    if (s->node.inbox_n >= SERVER_INBOX_MAX) {
        uint64_t dropped = ++s->node.inbox_dropped;
        pthread_mutex_unlock(&s->node.ev_mu);
        mem_free(x);
        /* etcd's line; logged for the 1st, 2nd, 4th, ... drop only (etcd
         * merges repeats), so a flood of drops cannot flood the log. */
        if ((dropped & (dropped - 1)) == 0)
            log_warn("rafthttp", "dropped internal raft message from %llx "
                     "since receiving buffer is full (overloaded network)",
                     (unsigned long long)m->from);
        return ERR_FULL;
    }
    s->node.inbox_n++;
    if (s->node.inbox_tail)
        s->node.inbox_tail->next = x;
    else
        s->node.inbox_head = x;
    s->node.inbox_tail = x;
    s->node.ev = true;
    pthread_cond_signal(&s->node.ev_cv);
    pthread_mutex_unlock(&s->node.ev_mu);
    return 0;
}

/* --- start-up ---------------------------------------------------------- */

static int handle_ready(struct server *s, struct server_wal_buf *wb);
static void lone_voter_update(struct server *s);
static void wal_buf_free(struct server_wal_buf *wb);
static int catch_up(struct server *s);

struct restore {
    struct raft_hard_state hs;  /* last HardState in the WAL */
    struct raft_entry *ents;    /* entries above the applied index */
    size_t n, cap;
    uint64_t applied;           /* the store's consistent index */
    uint64_t applied_term;      /* term of the entry at applied */
    uint64_t meta_id;           /* member id in the WAL */
};

static int r_meta(void *arg, uint64_t node_id, uint64_t cluster_id)
{
    (void)cluster_id;
    ((struct restore *)arg)->meta_id = node_id;
    return 0;
}

/* The WAL's snapshot marker at the applied index gives its term when the
 * entry itself is not in the WAL (a snapshot installed from the leader). */
static int r_snap(void *arg, const struct wal_snapshot *snap)
{
    struct restore *r = arg;
    if (snap->index == r->applied)
        r->applied_term = snap->term;
    return 0;
}

static int r_hs(void *arg, const struct wal_hardstate *hs)
{
    struct restore *r = arg;
    r->hs = (struct raft_hard_state){hs->term, hs->vote, hs->commit};
    return 0;
}

static int r_entry(void *arg, const struct wal_entry *e)
{
    struct restore *r = arg;
    if (e->index == r->applied)
        r->applied_term = e->term;
    if (e->index <= r->applied)
        return 0;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        void *p = mem_realloc(r->ents, cap * sizeof *r->ents);
        if (p == NULL)
            return ERR_NOMEM;
        r->ents = p;
        r->cap = cap;
    }
    uint8_t *d = e->len ? mem_dup(e->data, e->len) : NULL;
    if (e->len && d == NULL)
        return ERR_NOMEM;
    r->ents[r->n++] = (struct raft_entry){.term = e->term, .index = e->index,
                                          .type = (uint8_t)e->type,
                                          .len = (uint32_t)e->len, .data = d};
    return 0;
}

static void restore_free(struct restore *r)
{
    for (size_t i = 0; i < r->n; i++)
        mem_free(r->ents[i].data);
    mem_free(r->ents);
}

static void fill_conf(struct server *s, struct raft_config *c)
{
    server__members_conf(s, &c->conf); /* members.c: voters, learners */
}

static int raft_start(struct server *s, struct restore *r)
{
    struct raft_config c;
    memset(&c, 0, sizeof c);
    c.id = s->member_id;
    c.heartbeat_tick = 1;
    c.election_tick = (int)(s->cfg.election_ms / s->cfg.heartbeat_ms);
    c.pre_vote = s->cfg.pre_vote;
    c.check_quorum = true;
    c.max_size_per_msg = 1u << 20;
    c.max_inflight_msgs = 512;
    c.read_only = RAFT_READ_ONLY_SAFE;
    c.seed = s->member_id ^ server__now_ms();
    c.logger = raft_logger;
    fill_conf(s, &c);
    c.hard_state = r->hs;
    if (r->applied > 0) {
        c.snapshot.meta.index = r->applied;
        c.snapshot.meta.term = r->applied_term;
        c.snapshot.meta.conf = c.conf;
    }
    c.entries = r->ents;
    c.n_entries = r->n;
    c.applied = r->applied;
    s->node.raft = mem_malloc(raft_sizeof());
    if (s->node.raft == NULL)
        return ERR_NOMEM;
    int rc = raft_init(s->node.raft, &c);
    if (rc != 0) {
        mem_free(s->node.raft);
        s->node.raft = NULL;
        return rc;
    }
    s->node.applied_raft = r->applied;
    s->node.snap_index = r->applied;
    atomic_store(&s->applied_index, r->applied); /* the store holds it */
    return 0;
}

int server__raft_open(struct server *s)
{
    struct restore r;
    memset(&r, 0, sizeof r);
    r.applied = mvcc_consistent_index(s->mvcc);
    struct wal_replay_cb cb = {.on_metadata = r_meta,
                               .on_hardstate = r_hs,
                               .on_entry = r_entry};
    /* The applied index's term: a snapshot marker there is authoritative
     * (after an install the WAL may even hold a stale entry at that index
     * from an older term); else the entry itself, read from one below. */
    struct wal_snapshot from = {r.applied, 0};
    cb.on_snapshot = r_snap;
    int rc = wal_replay(s->wal, &from, &cb, &r);
    if (rc == 0 && r.applied > 0 && r.applied_term == 0) {
        restore_free(&r);
        uint64_t applied = r.applied;
        memset(&r, 0, sizeof r);
        r.applied = applied;
        from.index = applied - 1;
        cb.on_snapshot = NULL;
        rc = wal_replay(s->wal, &from, &cb, &r);
    }
    if (rc == 0 && r.applied > 0 && r.applied_term == 0) {
        log_error("etcdserver", "the WAL does not hold the store's applied "
                  "index %llu", (unsigned long long)r.applied);
        rc = ERR_CORRUPT;
    }
    if (rc == 0 && r.hs.commit < r.applied)
        r.hs.commit = r.applied;
    if (rc == 0)
        rc = raft_start(s, &r);
    if (rc == 0 && r.n > 0)
        log_info("etcdserver", "restarting member %016llx: %zu WAL entries "
                 "above applied index %llu (commit %llu, term %llu)",
                 (unsigned long long)s->member_id, r.n,
                 (unsigned long long)r.applied,
                 (unsigned long long)r.hs.commit,
                 (unsigned long long)r.hs.term);
    restore_free(&r);
    if (rc == 0)
        lone_voter_update(s);
    /* A lone voter need not wait an election timeout (etcd fast-forwards
     * its ticks the same way). */
    if (rc == 0 && atomic_load(&s->lone_voter))
        rc = raft_campaign(s->node.raft);
    if (rc == 0)
        rc = catch_up(s);
    return rc;
}

void server__raft_close(struct server *s)
{
    if (s->node.raft != NULL) {
        raft_close(s->node.raft);
        mem_free(s->node.raft);
        s->node.raft = NULL;
    }
}

/* --- the loop ---------------------------------------------------------- */

static void wal_buf_free(struct server_wal_buf *wb)
{
    mem_free(wb->v);
    wb->v = NULL;
    wb->cap = 0;
}

/* Before serving, apply what the WAL says is committed (the threads are
 * not running yet, so the batches are applied here, in order). */
static int catch_up(struct server *s)
{
    struct server_wal_buf wb = {NULL, 0};
    int rc = handle_ready(s, &wb);
    wal_buf_free(&wb);
    return rc;
}

/* Writes rd's entries and HardState to the WAL (not yet synced). */
static int persist_append(struct server *s, const struct raft_ready *rd,
                          struct server_wal_buf *wb)
{
    if (rd->n_entries > wb->cap) {
        size_t cap = rd->n_entries * 2;
        void *p = mem_realloc(wb->v, cap * sizeof *wb->v);
        if (p == NULL)
            return ERR_NOMEM;
        wb->v = p;
        wb->cap = cap;
    }
    for (size_t i = 0; i < rd->n_entries; i++) {
        const struct raft_entry *e = &rd->entries[i];
        wb->v[i] = (struct wal_entry){.index = e->index, .term = e->term,
                                      .type = e->type, .data = e->data,
                                      .len = e->len};
    }
    struct wal_hardstate hs = {rd->hard_state.term, rd->hard_state.vote,
                               rd->hard_state.commit};
    return wal_append(s->wal, rd->has_hard_state ? &hs : NULL, wb->v,
                      rd->n_entries);
}

static int persist_sync(struct server *s, const struct raft_ready *rd)
{
    if (!rd->must_sync)
        return 0;
    atomic_fetch_add(&s->stat_wal_syncs, 1);
    return wal_sync(s->wal);
}

/* A server entry (for the applier) holding len bytes of src. */
static struct server_entry *entry_new(uint64_t index, const uint8_t *src,
                                      size_t len)
{
    struct server_entry *x = mem_malloc(sizeof *x + len);
    if (x == NULL)
        return NULL;
    x->next = NULL;
    x->index = index;
    x->id = 0;
    x->len = len;
    x->tentative = false;
    if (len)
        memcpy(x->data, src, len);
    return x;
}

/* s->lone_voter := raft's configuration has this member as its only voter
 * (not joint).  Called whenever the configuration may have changed: at
 * start, after a conf change is applied, after a snapshot is installed. */
static void lone_voter_update(struct server *s)
{
    struct raft_status st;
    raft_status(s->node.raft, &st);
    atomic_store(&s->lone_voter, st.conf.n_voters == 1 &&
                                     st.conf.voters[0] == s->member_id &&
                                     st.conf.n_voters_outgoing == 0);
}

/* May rd's new entries be applied while their fsync runs (apply.c,
 * "Speculative apply")?  Only when this member is the only voter (its own
 * fsync commits them and no other leader can replace them), no conf change
 * is among them or committed with them (the voters could change before
 * they commit), and no tentative batch is out. */
static bool may_speculate(struct server *s, const struct raft_ready *rd)
{
    if (!s->spec_ok || !s->node.is_leader || rd->n_entries == 0 ||
        rd->n_committed != 0 || rd->snapshot != NULL || !rd->must_sync)
        return false;
    for (size_t i = 0; i < rd->n_entries; i++)
        if (rd->entries[i].type != RAFT_ENTRY_NORMAL)
            return false;
    return atomic_load(&s->lone_voter) && server__spec_last(s) == 0;
}

/* Hands rd's (unsynced) entries to the applier as a tentative batch;
 * false if it did not take them. */
static bool speculate(struct server *s, const struct raft_ready *rd)
{
    struct server_entry *head = NULL, *tail = NULL;
    for (size_t i = 0; i < rd->n_entries; i++) {
        const struct raft_entry *e = &rd->entries[i];
        struct server_entry *x = entry_new(e->index, e->data, e->len);
        if (x == NULL)
            goto err_free;
        if (tail)
            tail->next = x;
        else
            head = x;
        tail = x;
    }
    if (server__spec_begin(s, head, tail, rd->n_entries))
        return true;
err_free:
    while (head != NULL) {
        struct server_entry *n = head->next;
        mem_free(head);
        head = n;
    }
    return false;
}

/* Committed entries become server entries for the applier.  Conf changes
 * take effect in raft here (the applier only records the index). */
static int hand_committed(struct server *s, const struct raft_ready *rd)
{
    struct server_entry *head = NULL, *tail = NULL;
    size_t n = 0;
    uint64_t spec_last = server__spec_last(s);
    for (size_t i = 0; i < rd->n_committed; i++) {
        const struct raft_entry *e = &rd->committed[i];
        if (e->index <= spec_last) {
            /* Applied already as a tentative batch. */
            if (e->index == spec_last)
                server__spec_durable(s);
            s->node.applied_raft = e->index;
            atomic_store(&s->committed_index, e->index);
            continue;
        }
        bool normal = e->type == RAFT_ENTRY_NORMAL;
        const uint8_t *src = e->data;
        size_t len = e->len;
        /* A conf change takes effect in raft here; the applier gets its
         * context (the members store change), see members.c. */
        if (!normal) {
            server__conf_change_committed(s, e, &src, &len);
            lone_voter_update(s);
        }
        struct server_entry *x = entry_new(e->index, src, len);
        if (x == NULL)
            return ERR_NOMEM;
        n++;
        if (tail)
            tail->next = x;
        else
            head = x;
        tail = x;
    }
    if (head != NULL) {
        s->node.applied_raft = tail->index;
        atomic_store(&s->committed_index, tail->index);
        server__apply_handoff(s, head, tail, n);
    }
    return 0;
}

/* Hands every read of batch b to the read workers with index or err. */
static void read_batch_finish(struct server *s, struct server_read_batch *b,
                              uint64_t index, int err)
{
    for (struct server_read_waiter *w = b->waiters; w != NULL; w = w->next) {
        w->index = index;
        w->err = err;
    }
    if (b->waiters != NULL)
        server__reads_ready(s, b->waiters);
    mem_free(b);
}

static void answer_reads(struct server *s, const struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_read_states; i++) {
        const struct raft_read_state *rs = &rd->read_states[i];
        uint64_t ctx[2];
        if (rs->ctx_len != sizeof ctx)
            continue;
        memcpy(ctx, rs->ctx, sizeof ctx);
        if (ctx[0] != s->member_id)
            continue;
        struct server_read_batch *found = NULL;
        for (struct server_read_batch **p = &s->reads.read_inflight; *p;
             p = &(*p)->next) {
            if ((*p)->ctx == ctx[1]) {
                found = *p;
                *p = found->next;
                break;
            }
        }
        if (found != NULL)
            read_batch_finish(s, found, rs->index, 0);
    }
}

/* Messages to peers, through the transport.  A snapshot goes out later,
 * with a copy of the store, through snapshot.c. */
static void send_msgs(struct server *s, const struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_msgs; i++) {
        const struct raft_msg *m = &rd->msgs[i];
        if (m->type == RAFT_MSG_SNAP) {
            server__snap_want_send(s, m); /* a store copy: snapshot.c */
        } else if (s->node.send_fn != NULL) {
            s->node.send_fn(s->node.send_arg, m);
        }
    }
}

/* The transport's reports, given to raft outside a Ready. */
static void take_reports(struct server *s)
{
    struct server_report r[SERVER_MEMBERS_MAX * 3];
    pthread_mutex_lock(&s->node.ev_mu);
    size_t n = s->node.n_reports;
    memcpy(r, s->node.reports, n * sizeof r[0]);
    s->node.n_reports = 0;
    pthread_mutex_unlock(&s->node.ev_mu);
    for (size_t i = 0; i < n; i++) {
        if (r[i].kind == SERVER_REPORT_UNREACHABLE)
            raft_report_unreachable(s->node.raft, r[i].id);
        else
            raft_report_snapshot(s->node.raft, r[i].id,
                                 r[i].kind == SERVER_REPORT_SNAP_OK);
    }
}

/* This member saw a new leader (after this Ready's read states were
 * answered): the ReadIndex rounds still pending were asked of a leader
 * that is gone, and fail with etcd's retryable "leader changed" (reads
 * not yet asked join the next round).  When the new leader is this
 * member, the time is kept for server__timeout_err. */
static void leader_changed(struct server *s)
{
    if (s->node.is_leader)
        atomic_store(&s->lead_elected_ms, server__now_ms());
    while (s->reads.read_inflight != NULL) {
        struct server_read_batch *b = s->reads.read_inflight;
        s->reads.read_inflight = b->next;
        read_batch_finish(s, b, 0, ERR_LEADER_CHANGED);
    }
}

static int handle_ready(struct server *s, struct server_wal_buf *wb)
{
    while (raft_has_ready(s->node.raft)) {
        struct raft_ready rd;
        int rc = raft_ready(s->node.raft, &rd);
        if (rc == 0)
            rc = rd.snapshot ? server__snap_install(s, rd.snapshot) : 0;
        if (rc == 0 && rd.snapshot)
            lone_voter_update(s);
        /* A new leader (not "none"), as etcd's newLeader. */
        bool new_lead = rd.has_soft_state && rd.soft_state.lead != 0 &&
                        rd.soft_state.lead != atomic_load(&s->lead);
        if (rd.has_soft_state) {
            atomic_store(&s->lead, rd.soft_state.lead);
            s->node.is_leader = rd.soft_state.role == RAFT_LEADER;
        }
        /* A leader replicates while it writes its own disk (Raft thesis
         * 10.2.1, as etcd does): its entries count toward commit only after
         * raft_advance.  Other members' messages (votes, append acks)
         * promise persisted state, so they leave after the fsync. */
        bool early = s->node.is_leader;
        if (rc == 0 && early)
            send_msgs(s, &rd);
        /* Committed entries are durable already; when all this Ready has
         * to write is an unsynced HardState (a commit index), answer them
         * first: the write does not delay their replies. */
        bool apply_first = rc == 0 && rd.n_entries == 0 && !rd.must_sync;
        if (apply_first)
            rc = hand_committed(s, &rd);
        if (rc == 0)
            rc = persist_append(s, &rd, wb);
        bool spec = rc == 0 && may_speculate(s, &rd) && speculate(s, &rd);
        if (rc == 0)
            rc = persist_sync(s, &rd);
        if (rc != 0) {
            /* A tentative batch may be in the store but not in the WAL. */
            if (spec) {
                char dir[4200];
                snprintf(dir, sizeof dir, "%s/db", s->member_dir);
                (void)boot_guard_distrust(dir);
            }
            return rc;
        }
        if (!early)
            send_msgs(s, &rd);
        rc = apply_first ? 0 : hand_committed(s, &rd);
        if (rc != 0)
            return rc;
        answer_reads(s, &rd);
        if (new_lead)
            leader_changed(s);
        if (rd.has_hard_state)
            atomic_store(&s->term, rd.hard_state.term);
        rc = raft_advance(s->node.raft, &rd);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void fail_waiter(struct server *s, uint64_t id, int err)
{
    server_done_fn done;
    void *arg;
    if (id != 0 && server_wait_take(&s->wait, id, &done, &arg)) {
        struct server_response r = {.err = err, .msg = NULL};
        done(arg, &r);
    }
}

static void take_proposals(struct server *s)
{
    size_t n;
    struct server_entry *e = server_queue_try_pop_all(&s->proposals, &n);
    while (e != NULL) {
        struct server_entry *next = e->next;
        int rc = raft_propose(s->node.raft, e->data, e->len);
        if (rc != 0)
            fail_waiter(s, e->id, rc == ERR_PROPOSAL_DROPPED ? ERR_NO_LEADER
                                                             : rc);
        mem_free(e);
        e = next;
    }
}

static void step_inbox(struct server *s, struct server_inbox_msg *x)
{
    while (x != NULL) {
        struct server_inbox_msg *next = x->next;
        struct raft_msg m;
        if (raft_msg_decode(x->data, x->len, &m) == 0) {
            raft_step(s->node.raft, &m);
            raft_msg_release(&m);
        }
        mem_free(x);
        x = next;
    }
}

/* Start ReadIndex rounds: the open batch, and in-flight ones unanswered
 * for a while (lost on a leader change); fail rounds past the request
 * timeout.  The in-flight list belongs to the raft thread. */
static void take_reads(struct server *s)
{
    pthread_mutex_lock(&s->node.ev_mu);
    struct server_read_batch *b = s->reads.read_open;
    s->reads.read_open = NULL;
    pthread_mutex_unlock(&s->node.ev_mu);
    if (b != NULL) {
        b->next = s->reads.read_inflight;
        s->reads.read_inflight = b;
    }
    uint64_t now = server__now_ms();
    for (struct server_read_batch **p = &s->reads.read_inflight; *p;) {
        b = *p;
        if (now > b->created_ms + server__request_timeout_ms(s)) {
            *p = b->next;
            read_batch_finish(s, b, 0, ERR_TIMEOUT);
            continue;
        }
        if (!b->requested || s->node.ticks >= b->asked_tick + READ_RETRY_TICKS) {
            /* The leader keys pending reads by context: it must be unique
             * across members, not just here. */
            uint64_t ctx[2] = {s->member_id, b->ctx};
            b->requested = raft_read_index(s->node.raft, ctx, sizeof ctx) == 0;
            b->asked_tick = s->node.ticks;
        }
        p = &b->next;
    }
}

/* Waits for an event or the next tick.  The event stays set until the
 * raft thread holds raft_mu (take_event), right before its pass. */
static void wait_event(struct server *s, uint64_t next_tick)
{
    pthread_mutex_lock(&s->node.ev_mu);
    while (!s->node.ev && !atomic_load(&s->stopping) &&
           server__now_ms() < next_tick) {
        uint64_t now = server__now_ms(); /* may have passed next_tick */
        struct timespec ts = thread_deadline_ms(
            CLOCK_MONOTONIC, next_tick > now ? next_tick - now : 0);
        atomic_store(&s->node.raft_asleep, true);
        pthread_cond_timedwait(&s->node.ev_cv, &s->node.ev_mu, &ts);
        atomic_store(&s->node.raft_asleep, false);
    }
    pthread_mutex_unlock(&s->node.ev_mu);
}

/* Clears the event flag (raft_mu held): the pass that follows takes
 * everything queued until now. */
static void take_event(struct server *s)
{
    pthread_mutex_lock(&s->node.ev_mu);
    s->node.ev = false;
    pthread_mutex_unlock(&s->node.ev_mu);
}

static void fail_reads(struct server *s, int err)
{
    while (s->reads.read_inflight != NULL) {
        struct server_read_batch *b = s->reads.read_inflight;
        s->reads.read_inflight = b->next;
        read_batch_finish(s, b, 0, err);
    }
    pthread_mutex_lock(&s->node.ev_mu);
    struct server_read_batch *b = s->reads.read_open;
    s->reads.read_open = NULL;
    pthread_mutex_unlock(&s->node.ev_mu);
    if (b != NULL)
        read_batch_finish(s, b, 0, err);
}

/* One pass over whatever has arrived: peer messages, transport reports,
 * proposals, membership work, reads, snapshots, then the Ready (raft_mu
 * held).  The inbox is taken here, under raft_mu, so that passes on
 * different threads step a peer's messages in the order they came. */
static void raft_pass(struct server *s)
{
    pthread_mutex_lock(&s->node.ev_mu);
    struct server_inbox_msg *in = s->node.inbox_head;
    s->node.inbox_head = s->node.inbox_tail = NULL;
    s->node.inbox_n = 0;
    pthread_mutex_unlock(&s->node.ev_mu);
    step_inbox(s, in);
    take_reports(s);
    take_proposals(s);
    server__members_raft_pass(s);
    take_reads(s);
    server__snap_tick(s); /* copies, sends, received snapshots */
    int rc = handle_ready(s, &s->node.raft_wb);
    if (rc != 0) {
        log_error("etcdserver", "raft loop failed: %s; stopping",
                  err_str(rc));
        abort();
    }
}

/*
 * A proposal that finds the raft thread asleep would wait for it to wake:
 * on these machines an idle thread (an idle vCPU) takes tens of
 * microseconds to run again, a large part of a lone client's round trip.
 * So on a lone voter the thread that queued the proposal runs the pass
 * itself (WAL write and fsync included) when the raft thread sleeps and
 * no pass runs; under load the raft thread is awake and takes the work as
 * before, and the API threads keep serving their calls.
 *
 * Only on a lone voter: in a cluster the same shortcut (for proposals or
 * for peer messages) made single-client puts slower, p99 most (3-member
 * runs of 3000 puts: p50 1.13-1.29 ms and p99 2.6-4.5 ms against 1.06-1.26
 * and 1.9-2.2 ms with the raft thread doing every pass).
 *
 * No work is lost: whoever does not run the pass kicks the raft thread
 * (ev set, signalled), and ev is taken under raft_mu right before a pass.
 */
void server__raft_poke(struct server *s)
{
    if (!s->cfg.no_inline_raft && atomic_load(&s->lone_voter) &&
        atomic_load(&s->node.raft_asleep) &&
        pthread_mutex_trylock(&s->node.raft_mu) == 0) {
        bool run = s->node.raft_live && !atomic_load(&s->stopping);
        if (run)
            raft_pass(s);
        pthread_mutex_unlock(&s->node.raft_mu);
        if (run)
            return;
    }
    server__kick(s);
}

void *server__raft_main(void *arg)
{
    struct server *s = arg;
    uint64_t hb = s->cfg.heartbeat_ms;
    uint64_t next_tick = server__now_ms() + hb;
    pthread_mutex_lock(&s->node.raft_mu);
    s->node.raft_live = true;
    pthread_mutex_unlock(&s->node.raft_mu);
    while (!atomic_load(&s->stopping)) {
        wait_event(s, next_tick);
        pthread_mutex_lock(&s->node.raft_mu);
        for (int n = 0; server__now_ms() >= next_tick && n < 10; n++) {
            raft_tick(s->node.raft);
            s->node.ticks++;
            next_tick += hb;
        }
        if (server__now_ms() >= next_tick) /* stalled: no burst of ticks */
            next_tick = server__now_ms() + hb;
        take_event(s);
        raft_pass(s);
        pthread_mutex_unlock(&s->node.raft_mu);
    }
    pthread_mutex_lock(&s->node.raft_mu);
    s->node.raft_live = false;
    wal_buf_free(&s->node.raft_wb);
    /* Peer messages that came after the last pass are dropped. */
    pthread_mutex_lock(&s->node.ev_mu);
    struct server_inbox_msg *in = s->node.inbox_head;
    s->node.inbox_head = s->node.inbox_tail = NULL;
    s->node.inbox_n = 0;
    pthread_mutex_unlock(&s->node.ev_mu);
    while (in != NULL) {
        struct server_inbox_msg *next = in->next;
        mem_free(in);
        in = next;
    }
    fail_reads(s, ERR_STOPPED);
    server_queue_close(&s->committed);
    pthread_mutex_unlock(&s->node.raft_mu);
    return NULL;
}

int server__read_enqueue(struct server *s, struct server_read_waiter *w)
{
    pthread_mutex_lock(&s->node.ev_mu);
    if (atomic_load(&s->stopping)) {
        pthread_mutex_unlock(&s->node.ev_mu);
        return ERR_STOPPED;
    }
    struct server_read_batch *b = s->reads.read_open;
    if (b == NULL) {
        b = mem_calloc(1, sizeof *b);
        if (b == NULL) {
            pthread_mutex_unlock(&s->node.ev_mu);
            return ERR_NOMEM;
        }
        b->ctx = ++s->reads.read_ctx;
        b->created_ms = server__now_ms();
        s->reads.read_open = b;
    }
    w->next = b->waiters;
    b->waiters = w;
    s->node.ev = true;
    pthread_cond_signal(&s->node.ev_cv);
    pthread_mutex_unlock(&s->node.ev_mu);
    return 0;
}
