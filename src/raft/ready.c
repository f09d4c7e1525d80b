/*
 * ready.c - handing work to the caller (raft_ready) and taking back the
 * acknowledgement (raft_advance).  See THE READY CONTRACT in raft.h.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/err.h"
#include "util/mem.h"

static struct raft_hard_state hard_state(const struct raft *r)
{
    return (struct raft_hard_state){r->term, r->vote, r->log.committed};
}

static bool hs_equal(struct raft_hard_state a, struct raft_hard_state b)
{
    return a.term == b.term && a.vote == b.vote && a.commit == b.commit;
}

/* Committed entries not yet handed out for applying.  Only persisted
 * entries are applied: the caller persists rd.entries before applying, so
 * the bound is the end of what this Ready persists. */
static void committed_range(const struct raft *r, raft_index *lo,
                            raft_index *hi)
{
    *lo = r->log.applied + 1;
    if (*lo <= r->log.offset)
        *lo = r->log.offset + 1;
    *hi = r->log.committed;
}

bool raft_has_ready(const struct raft *r)
{
    if (r->in_ready)
        return false;
    if (r->lead != r->prev_ss.lead || r->role != r->prev_ss.role)
        return true;
    if (!hs_equal(hard_state(r), r->prev_hs))
        return true;
    if (r->log.snap_unstable || r->n_msgs > 0 || r->n_rs > 0)
        return true;
    if (raft__log_last(&r->log) > r->log.stabled)
        return true;
    raft_index lo, hi;
    committed_range(r, &lo, &hi);
    return lo <= hi;
}

int raft_ready(struct raft *r, struct raft_ready *rd)
{
    if (r->in_ready)
        return ERR_BUSY;
    memset(rd, 0, sizeof(*rd));
    struct raft_soft_state ss = {r->lead, r->role};
    if (ss.lead != r->prev_ss.lead || ss.role != r->prev_ss.role) {
        rd->has_soft_state = true;
        rd->soft_state = ss;
    }
    struct raft_hard_state hs = hard_state(r);
    if (!hs_equal(hs, r->prev_hs)) {
        rd->has_hard_state = true;
        rd->hard_state = hs;
    }
    if (r->log.snap_unstable)
        rd->snapshot = &r->log.snap;
    raft_index from = r->log.stabled + 1;
    if (from <= r->log.offset)
        from = r->log.offset + 1;
    raft__log_slice(&r->log, from, raft__log_last(&r->log), UINT64_MAX,
                    &rd->entries, &rd->n_entries);
    raft_index lo, hi;
    committed_range(r, &lo, &hi);
    if (lo <= hi)
        raft__log_slice(&r->log, lo, hi, UINT64_MAX, &rd->committed,
                        &rd->n_committed);
    rd->msgs = r->msgs;
    rd->n_msgs = r->n_msgs;
    r->msgs = NULL;
    r->n_msgs = r->cap_msgs = 0;
    rd->read_states = r->rs;
    rd->n_read_states = r->n_rs;
    r->rs = NULL;
    r->n_rs = r->cap_rs = 0;
    rd->must_sync = rd->n_entries > 0 || rd->snapshot != NULL ||
                    hs.term != r->prev_hs.term || hs.vote != r->prev_hs.vote;
    r->prev_ss = ss;
    r->prev_hs = hs;
    r->ready_last = rd->n_entries ? rd->entries[rd->n_entries - 1].index : 0;
    r->ready_applied = rd->n_committed ? rd->committed[rd->n_committed - 1].index
                                       : 0;
    r->ready_snap = rd->snapshot != NULL;
    r->in_ready = true;
    RAFT_ASSERT(rd->n_committed == 0 || rd->committed[0].index == lo);
    return 0;
}

/* A leader acks its own entries only once persisted; that may commit. */
static void self_ack(struct raft *r)
{
    struct raft_progress *self = raft__trk_get(&r->trk, r->id);
    if (r->role != RAFT_LEADER || self == NULL)
        return;
    if (raft__pr_maybe_update(self, r->log.stabled) && raft__maybe_commit(r)) {
        raft__release_pending_reads(r);
        raft__bcast_append(r);
    }
}

/* Joint configurations with auto_leave are left by the leader as soon as
 * the change that entered them is applied. */
static void maybe_auto_leave(struct raft *r)
{
    if (r->role != RAFT_LEADER || !r->trk.cfg.auto_leave ||
        r->log.applied < r->pending_conf_index)
        return;
    struct raft_conf_change cc = {0};
    uint8_t buf[64];
    size_t n = 0;
    int rc = raft_conf_change_encode(&cc, buf, sizeof(buf), &n);
    RAFT_ASSERT(rc == 0);
    raft__logf(r, 1, "initiating automatic transition out of joint "
               "configuration");
    raft__append_proposal(r, RAFT_ENTRY_CONF_CHANGE_V2, buf, (uint32_t)n);
    raft__bcast_append(r);
}

int raft_advance(struct raft *r, struct raft_ready *rd)
{
    if (!r->in_ready)
        return ERR_INVAL;
    r->in_ready = false;
    for (size_t k = 0; k < rd->n_msgs; k++)
        mem_free(rd->msgs[k].owned_);
    mem_free(rd->msgs);
    for (size_t k = 0; k < rd->n_read_states; k++)
        mem_free(rd->read_states[k].ctx);
    mem_free(rd->read_states);
    if (r->ready_snap)
        r->log.snap_unstable = false;
    if (r->ready_last > r->log.stabled) {
        RAFT_ASSERT(r->ready_last <= raft__log_last(&r->log));
        r->log.stabled = r->ready_last;
    }
    if (r->ready_applied > r->log.applied)
        r->log.applied = r->ready_applied;
    self_ack(r);
    maybe_auto_leave(r);
    memset(rd, 0, sizeof(*rd));
    return 0;
}
