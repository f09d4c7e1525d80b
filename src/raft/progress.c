/*
 * progress.c - the leader's view of one follower: how far it matches, what
 * to send next, and the flow-control state machine
 *   PROBE     - we do not know where the follower's log matches: send one
 *               APP, then wait for its answer (or a heartbeat answer);
 *   REPLICATE - steady state: send optimistically, up to max_inflight APPs;
 *   SNAPSHOT  - a snapshot is in flight; send nothing until it is reported.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/mem.h"

void raft__pr_init(struct raft_progress *p, raft_id id, raft_index next,
                   uint32_t max_inflight, bool learner)
{
    RAFT_ASSERT(max_inflight > 0);
    RAFT_ASSERT(next > 0);
    memset(p, 0, sizeof(*p));
    p->id = id;
    p->next = next;
    p->state = RAFT_PROGRESS_PROBE;
    p->recent_active = true; /* a new member gets one election timeout */
    p->is_learner = learner;
    p->infl.cap = max_inflight;
    p->infl.ring = raft__xmalloc(max_inflight * sizeof(raft_index));
}

void raft__pr_free(struct raft_progress *p)
{
    mem_free(p->infl.ring);
    p->infl.ring = NULL;
}

static void reset_state(struct raft_progress *p, int state)
{
    p->probe_sent = false;
    p->pending_snapshot = 0;
    p->state = state;
    p->infl.start = 0;
    p->infl.count = 0;
}

void raft__pr_become_probe(struct raft_progress *p)
{
    /* After a snapshot the follower holds at least the snapshot index. */
    if (p->state == RAFT_PROGRESS_SNAPSHOT) {
        raft_index pending = p->pending_snapshot;
        reset_state(p, RAFT_PROGRESS_PROBE);
        p->next = (p->match + 1 > pending + 1) ? p->match + 1 : pending + 1;
    } else {
        reset_state(p, RAFT_PROGRESS_PROBE);
        p->next = p->match + 1;
    }
    RAFT_ASSERT(p->next > p->match);
}

void raft__pr_become_replicate(struct raft_progress *p)
{
    reset_state(p, RAFT_PROGRESS_REPLICATE);
    p->next = p->match + 1;
}

void raft__pr_become_snapshot(struct raft_progress *p, raft_index snapi)
{
    reset_state(p, RAFT_PROGRESS_SNAPSHOT);
    p->pending_snapshot = snapi;
}

/* An ack for n: returns whether match moved. */
bool raft__pr_maybe_update(struct raft_progress *p, raft_index n)
{
    bool updated = false;
    if (p->match < n) {
        p->match = n;
        updated = true;
        p->probe_sent = false;
    }
    if (p->next < n + 1)
        p->next = n + 1;
    RAFT_ASSERT(p->next > p->match);
    return updated;
}

/* A reject of the APP whose prev index was rejected; match_hint is the
 * leader's guess of where the follower's log may match.  Returns false for
 * a stale reject. */
bool raft__pr_maybe_decr_to(struct raft_progress *p, raft_index rejected,
                            raft_index match_hint)
{
    if (p->state == RAFT_PROGRESS_REPLICATE) {
        if (rejected <= p->match)
            return false;
        p->next = p->match + 1;
        return true;
    }
    if (p->next - 1 != rejected)
        return false;
    raft_index n = rejected < match_hint + 1 ? rejected : match_hint + 1;
    p->next = n > p->match + 1 ? n : p->match + 1;
    if (p->next < 1)
        p->next = 1;
    p->probe_sent = false;
    return true;
}

bool raft__infl_full(const struct raft_inflights *f)
{
    return f->count == f->cap;
}

static void infl_add(struct raft_inflights *f, raft_index i)
{
    RAFT_ASSERT(!raft__infl_full(f));
    f->ring[(f->start + f->count) % f->cap] = i;
    f->count++;
}

/* Frees all in-flight messages whose last index is <= i. */
void raft__infl_free_le(struct raft_inflights *f, raft_index i)
{
    while (f->count > 0 && f->ring[f->start] <= i) {
        f->start = (f->start + 1) % f->cap;
        f->count--;
    }
    if (f->count == 0)
        f->start = 0;
}

void raft__infl_free_first(struct raft_inflights *f)
{
    if (f->count > 0)
        raft__infl_free_le(f, f->ring[f->start]);
}

bool raft__pr_is_paused(const struct raft_progress *p)
{
    switch (p->state) {
    case RAFT_PROGRESS_PROBE:
        return p->probe_sent;
    case RAFT_PROGRESS_REPLICATE:
        return raft__infl_full(&p->infl);
    default:
        return true;
    }
}

/* Records that an APP carrying n_ents entries ending at last was sent. */
void raft__pr_sent(struct raft_progress *p, size_t n_ents, raft_index last)
{
    if (p->state == RAFT_PROGRESS_REPLICATE) {
        if (n_ents > 0) {
            p->next = last + 1;
            infl_add(&p->infl, last);
        }
    } else if (p->state == RAFT_PROGRESS_PROBE) {
        p->probe_sent = true;
    }
}
