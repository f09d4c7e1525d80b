/*
 * api.c - the public entry points other than step: ticks, proposals,
 * membership, reads, transfers, reports, snapshots, status.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/err.h"
#include "util/mem.h"

static void tick_election(struct raft *r)
{
    r->election_elapsed++;
    if (raft__promotable(r) && r->election_elapsed >= r->randomized_timeout) {
        r->election_elapsed = 0;
        raft__hup(r, false);
    }
}

/* CheckQuorum: a leader that did not hear from a quorum within an election
 * timeout steps down, so a partitioned leader stops serving (lease). */
static void check_quorum(struct raft *r)
{
    if (!raft__trk_quorum_active(&r->trk, r->id)) {
        raft__logf(r, 2, "%llx stepped down to follower since quorum is not "
                   "active", (unsigned long long)r->id);
        raft__become_follower(r, r->term, 0);
        return;
    }
    for (uint32_t k = 0; k < r->trk.n_prs; k++)
        if (r->trk.prs[k].id != r->id)
            r->trk.prs[k].recent_active = false;
}

static void tick_heartbeat(struct raft *r)
{
    r->heartbeat_elapsed++;
    r->election_elapsed++;
    if (r->election_elapsed >= r->election_tick) {
        r->election_elapsed = 0;
        if (r->check_quorum)
            check_quorum(r);
        if (r->role != RAFT_LEADER)
            return;
        if (r->lead_transferee != 0) {
            raft__logf(r, 1, "%llx abort leader transfer to %llx: timeout",
                       (unsigned long long)r->id,
                       (unsigned long long)r->lead_transferee);
            raft__abort_transfer(r);
        }
    }
    if (r->heartbeat_elapsed >= r->heartbeat_tick) {
        r->heartbeat_elapsed = 0;
        raft__bcast_heartbeat(r);
    }
}

int raft_tick(struct raft *r)
{
    if (r->in_ready)
        return ERR_BUSY;
    if (r->role == RAFT_LEADER)
        tick_heartbeat(r);
    else
        tick_election(r);
    return 0;
}

int raft_campaign(struct raft *r)
{
    if (r->in_ready)
        return ERR_BUSY;
    raft__hup(r, false);
    return 0;
}

static int propose_entry(struct raft *r, uint8_t type, const void *data,
                         size_t len)
{
    if (r->in_ready)
        return ERR_BUSY;
    if (len > UINT32_MAX / 2)
        return ERR_TOO_LARGE;
    struct raft_entry e = {.type = type, .len = (uint32_t)len,
                           .data = (uint8_t *)data};
    struct raft_msg m = {.type = RAFT_MSG_PROP, .from = r->id, .to = r->id,
                         .n_entries = 1, .entries = &e};
    if (r->role == RAFT_LEADER)
        return raft__step_leader(r, &m);
    if (r->role == RAFT_FOLLOWER)
        return raft__step_follower(r, &m);
    return ERR_PROPOSAL_DROPPED;
}

int raft_propose(struct raft *r, const void *data, size_t len)
{
    return propose_entry(r, RAFT_ENTRY_NORMAL, data, len);
}

int raft_propose_conf_change(struct raft *r, const struct raft_conf_change *cc,
                             bool v2)
{
    if (!v2 && (cc->n_changes != 1 ||
                cc->transition != RAFT_CC_TRANSITION_AUTO))
        return ERR_INVAL;
    size_t n = raft_conf_change_encoded_size(cc);
    uint8_t *buf = mem_malloc(n);
    if (buf == NULL)
        return ERR_NOMEM;
    int rc = raft_conf_change_encode(cc, buf, n, &n);
    if (rc == 0)
        rc = propose_entry(r, v2 ? RAFT_ENTRY_CONF_CHANGE_V2
                                 : RAFT_ENTRY_CONF_CHANGE, buf, n);
    mem_free(buf);
    return rc;
}

int raft_apply_conf_change(struct raft *r, const struct raft_conf_change *cc,
                           struct raft_conf_state *cs_out)
{
    int rc = raft__trk_apply(&r->trk, cc, raft__log_last(&r->log),
                             r->max_inflight);
    raft__trk_conf_state(&r->trk, cs_out);
    if (rc != 0)
        return rc;
    char buf[256];
    raft__conf_state_fmt(cs_out, buf, sizeof(buf));
    raft__logf(r, 1, "%llx switched to configuration%s",
               (unsigned long long)r->id, buf);
    struct raft_progress *self = raft__trk_get(&r->trk, r->id);
    r->is_learner = self != NULL && self->is_learner;
    if (r->role != RAFT_LEADER)
        return 0;
    if (self == NULL || r->is_learner) {
        /* Removed or demoted: a leader that is not a voter must not keep
         * leading; the rest elect a new leader. */
        raft__become_follower(r, r->term, 0);
        return 0;
    }
    if (r->lead_transferee != 0 &&
        !raft__trk_is_voter(&r->trk, r->lead_transferee))
        raft__abort_transfer(r);
    /* The quorum may have changed: commit, or at least probe newcomers. */
    if (raft__maybe_commit(r)) {
        raft__release_pending_reads(r);
        raft__bcast_append(r);
    } else {
        for (uint32_t k = 0; k < r->trk.n_prs; k++)
            if (r->trk.prs[k].id != r->id)
                raft__maybe_send_append(r, r->trk.prs[k].id, false);
    }
    return 0;
}

int raft_read_index(struct raft *r, const void *ctx, size_t ctx_len)
{
    if (r->in_ready)
        return ERR_BUSY;
    if (ctx_len > UINT32_MAX / 2)
        return ERR_TOO_LARGE;
    struct raft_entry e = {.len = (uint32_t)ctx_len, .data = (uint8_t *)ctx};
    struct raft_msg m = {.type = RAFT_MSG_READ_INDEX, .from = r->id,
                         .to = r->id, .n_entries = 1, .entries = &e};
    if (r->role == RAFT_LEADER)
        return raft__step_leader(r, &m);
    if (r->role == RAFT_FOLLOWER)
        return raft__step_follower(r, &m);
    return ERR_PROPOSAL_DROPPED;
}

int raft_transfer_leader(struct raft *r, raft_id transferee)
{
    if (r->in_ready)
        return ERR_BUSY;
    if (transferee == 0)
        return ERR_INVAL;
    struct raft_msg m = {.type = RAFT_MSG_TRANSFER_LEADER, .from = transferee,
                         .to = r->id, .term = r->term};
    if (r->role == RAFT_LEADER)
        return raft__step_leader(r, &m);
    if (r->role == RAFT_FOLLOWER)
        return r->lead == transferee ? 0 : raft__step_follower(r, &m);
    return ERR_PROPOSAL_DROPPED;
}

int raft_report_unreachable(struct raft *r, raft_id id)
{
    if (r->in_ready)
        return ERR_BUSY;
    struct raft_progress *p = raft__trk_get(&r->trk, id);
    if (r->role != RAFT_LEADER || p == NULL || id == r->id)
        return 0;
    /* Optimistic replication may have lost messages: probe again. */
    if (p->state == RAFT_PROGRESS_REPLICATE)
        raft__pr_become_probe(p);
    return 0;
}

int raft_report_snapshot(struct raft *r, raft_id id, bool ok)
{
    if (r->in_ready)
        return ERR_BUSY;
    struct raft_progress *p = raft__trk_get(&r->trk, id);
    if (r->role != RAFT_LEADER || p == NULL || id == r->id ||
        p->state != RAFT_PROGRESS_SNAPSHOT)
        return 0;
    if (!ok)
        p->pending_snapshot = 0;
    raft__pr_become_probe(p);
    /* Wait for the follower's answer (or a heartbeat) before sending. */
    p->probe_sent = true;
    return 0;
}

int raft_snapshot_create(struct raft *r, raft_index index,
                         const struct raft_conf_state *cs, const void *data,
                         size_t len)
{
    if (r->in_ready)
        return ERR_BUSY;
    if (index > r->log.applied)
        return ERR_INVAL;
    if (index <= r->log.snap.meta.index || index < r->log.offset)
        return ERR_RAFT_COMPACTED;
    struct raft_snapshot_meta m = {.index = index};
    if (raft__log_term(&r->log, index, &m.term) != 0)
        return ERR_RAFT_COMPACTED;
    if (cs != NULL) {
        if (raft__conf_state_check(cs) != 0)
            return ERR_INVAL;
        m.conf = *cs;
    } else {
        raft__trk_conf_state(&r->trk, &m.conf);
    }
    raft__log_set_snapshot(&r->log, &m, data, len);
    RAFT_ASSERT(r->log.snap.meta.index == index);
    return 0;
}

int raft_log_compact(struct raft *r, raft_index index)
{
    if (r->in_ready)
        return ERR_BUSY;
    if (index <= r->log.offset)
        return ERR_RAFT_COMPACTED;
    if (index > r->log.snap.meta.index || index > r->log.applied ||
        index > r->log.stabled)
        return ERR_INVAL;
    raft__log_compact(&r->log, index);
    RAFT_ASSERT(raft__log_first(&r->log) == index + 1);
    return 0;
}

int raft_term_at(const struct raft *r, raft_index index, raft_term *term_out)
{
    return raft__log_term(&r->log, index, term_out);
}

void raft_status(const struct raft *r, struct raft_status *st)
{
    memset(st, 0, sizeof(*st));
    st->id = r->id;
    st->role = r->role;
    st->is_learner = r->is_learner;
    st->term = r->term;
    st->vote = r->vote;
    st->lead = r->lead;
    st->commit = r->log.committed;
    st->applied = r->log.applied;
    st->last_index = raft__log_last(&r->log);
    st->first_index = raft__log_first(&r->log);
    st->lead_transferee = r->lead_transferee;
    raft__trk_conf_state(&r->trk, &st->conf);
    if (r->role != RAFT_LEADER)
        return;
    for (uint32_t k = 0; k < r->trk.n_prs; k++) {
        const struct raft_progress *p = &r->trk.prs[k];
        struct raft_progress_status *o = &st->progress[st->n_progress++];
        o->id = p->id;
        o->match = p->match;
        o->next = p->next;
        o->state = p->state;
        o->is_learner = p->is_learner;
        o->recent_active = p->recent_active;
        o->paused = raft__pr_is_paused(p);
        o->inflight = p->infl.count;
        o->pending_snapshot = p->pending_snapshot;
    }
}
