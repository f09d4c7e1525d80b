/*
 * raft_node.c - the raft node's loop: its inbox (peer messages, transport
 * reports), the raft thread (ticks every heartbeat interval, then a pass),
 * and the pass itself: step the inbox, give raft the reports, propose the
 * queued client requests, membership jobs, ReadIndex rounds, snapshot
 * chores, then the Ready (raft_ready.c).
 *
 * Raft and the WAL belong to whoever holds raft_mu, not to one thread: the
 * raft thread runs most passes, but on a lone voter a thread that queued
 * work while the raft thread slept runs the pass itself, WAL write and
 * fdatasync included (server__raft_poke, below).  server.h, "Execution
 * contexts and lock order", says who may run what.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raft/raft.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

/* A peer message waiting for the raft thread (encoded copy). */
struct server_inbox_msg {
    struct server_inbox_msg *next; /* FIFO link */
    size_t len;                    /* bytes of data */
    uint8_t data[];                /* raft_msg_encode output */
};

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

static void fail_waiter(struct server *s, uint64_t id, int err)
{
    server_done_fn done;
    void *arg;
    if (id != 0 && server_wait_take(&s->wait, id, &done, &arg)) {
        struct server_response r = {.err = err, .msg = NULL};
        done(arg, &r);
    }
}

/* Proposes everything queued: at most SERVER_PROPOSALS_MAX entries, the
 * proposals queue's bound (the old per-pass cap RAFT_PROPOSE_MAX, 4096,
 * was never used and is gone). */
static void take_proposals(struct server *s)
{
    size_t n;
    struct server_entry *e = server_queue_try_pop_all(&s->proposals, &n);
    while (e != NULL) {
        struct server_entry *next = e->next;
        /* Held for room in the WAL: refused as on a full store. */
        int rc = server__raft_held(s)
                     ? ERR_NO_SPACE
                     : raft_propose(s->node.raft, e->data, e->len);
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

/* Waits for an event or the next tick.  The event stays set until the
 * raft thread holds raft_mu (take_event), right before its pass. */
static void wait_event(struct server *s, uint64_t next_tick)
{
    pthread_mutex_lock(&s->node.ev_mu);
    while (!s->node.ev && !atomic_load(&s->stopping) &&
           server__clock_ms(s) < next_tick) {
        uint64_t now = server__clock_ms(s); /* may have passed next_tick */
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
    step_inbox(s, in); /* dropped by raft while a Ready is held */
    take_reports(s);
    take_proposals(s);
    if (!server__raft_held(s)) { /* else they wait (or time out) */
        server__members_raft_pass(s);
        server__reads_take(s);
        server__snap_tick(s); /* copies, sends, received snapshots */
    }
    int rc = server__raft_ready(s, &s->node.raft_wb);
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

static void raft_poke_deferred(void *arg)
{
    server__raft_poke(arg);
}

void server__raft_poke_turn(struct server *s)
{
    if (!thread_turn_defer(raft_poke_deferred, s))
        server__raft_poke(s);
}

void *server__raft_main(void *arg)
{
    struct server *s = arg;
    uint64_t hb = s->cfg.heartbeat_ms;
    uint64_t next_tick = server__clock_ms(s) + hb;
    uint64_t advance = UINT64_MAX; /* server__tick_advance: undecided */
    pthread_mutex_lock(&s->node.raft_mu);
    s->node.raft_live = true;
    pthread_mutex_unlock(&s->node.raft_mu);
    while (!atomic_load(&s->stopping)) {
        wait_event(s, next_tick);
        pthread_mutex_lock(&s->node.raft_mu);
        bool held = server__raft_held(s); /* raft takes no tick */
        for (int n = 0; server__clock_ms(s) >= next_tick && n < 10; n++) {
            if (!held)
                raft_tick(s->node.raft);
            s->node.ticks++;
            next_tick += hb;
        }
        if (server__clock_ms(s) >= next_tick) /* stalled: no burst of ticks */
            next_tick = server__clock_ms(s) + hb;
        if (advance != 0 && !held)
            advance = server__tick_advance(s, advance);
        take_event(s);
        raft_pass(s);
        pthread_mutex_unlock(&s->node.raft_mu);
    }
    pthread_mutex_lock(&s->node.raft_mu);
    s->node.raft_live = false;
    server__wal_buf_free(&s->node.raft_wb);
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
    server__reads_fail_all(s, ERR_STOPPED);
    server_queue_close(&s->committed);
    pthread_mutex_unlock(&s->node.raft_mu);
    return NULL;
}
