/*
 * step_follower.c - followers and (pre-)candidates: accept the leader's
 * appends, heartbeats and snapshots, forward proposals and reads to the
 * leader, count votes.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/err.h"

static void send_app_resp(struct raft *r, raft_id to, raft_index index)
{
    struct raft_msg m = {.type = RAFT_MSG_APP_RESP, .to = to, .index = index};
    raft__send(r, &m);
}

void raft__handle_append(struct raft *r, const struct raft_msg *m)
{
    struct raft_log *l = &r->log;
    if (m->index < l->committed) {
        send_app_resp(r, m->from, l->committed);
        return;
    }
    if (raft__log_match(l, m->index, m->log_term)) {
        raft_index conflict = raft__log_find_conflict(l, m->entries,
                                                      m->n_entries);
        if (conflict != 0 && conflict <= l->committed) {
            /* Only a broken leader rewrites committed entries. */
            raft__logf(r, 3, "%llx ignoring APP from %llx: entry %llu "
                       "conflicts with committed entry",
                       (unsigned long long)r->id, (unsigned long long)m->from,
                       (unsigned long long)conflict);
            return;
        }
        if (conflict != 0 && RAFT_MUTANT(r, RAFT_MUTATE_NO_TRUNCATE) &&
            conflict <= raft__log_last(l))
            conflict = raft__log_last(l) + 1 <= m->index + m->n_entries
                           ? raft__log_last(l) + 1
                           : 0; /* keep ours, append only what is new */
        if (conflict != 0) {
            size_t skip = (size_t)(conflict - (m->index + 1));
            raft__log_append(l, m->entries + skip, m->n_entries - skip);
        }
        raft_index lastnew = m->index + m->n_entries;
        raft__log_commit_to(l, m->commit < lastnew ? m->commit : lastnew);
        send_app_resp(r, m->from, lastnew);
        return;
    }
    /* Reject with a hint: the largest index <= m->index whose term is
     * <= m->log_term, so the leader can skip a whole term at once. */
    raft_index last = raft__log_last(l);
    raft_index hint = m->index < last ? m->index : last;
    raft_term hint_term = 0;
    hint = raft__log_find_conflict_by_term(l, hint, m->log_term, &hint_term);
    raft__logf(r, 0, "%llx [logterm: %llu, index: %llu] rejected MsgApp "
               "[logterm: %llu, index: %llu] from %llx",
               (unsigned long long)r->id,
               (unsigned long long)raft__log_term_or0(l, m->index),
               (unsigned long long)m->index, (unsigned long long)m->log_term,
               (unsigned long long)m->index, (unsigned long long)m->from);
    struct raft_msg resp = {.type = RAFT_MSG_APP_RESP, .to = m->from,
                            .index = m->index, .reject = true,
                            .reject_hint = hint, .log_term = hint_term};
    raft__send(r, &resp);
}

void raft__handle_heartbeat(struct raft *r, const struct raft_msg *m)
{
    if (m->commit <= raft__log_last(&r->log))
        raft__log_commit_to(&r->log, m->commit);
    struct raft_msg resp = {.type = RAFT_MSG_HEARTBEAT_RESP, .to = m->from,
                            .ctx = m->ctx, .ctx_len = m->ctx_len};
    raft__send(r, &resp);
}

static bool in_conf(const struct raft_conf_state *cs, raft_id id)
{
    for (uint32_t k = 0; k < cs->n_voters; k++)
        if (cs->voters[k] == id)
            return true;
    for (uint32_t k = 0; k < cs->n_voters_outgoing; k++)
        if (cs->voters_outgoing[k] == id)
            return true;
    for (uint32_t k = 0; k < cs->n_learners; k++)
        if (cs->learners[k] == id)
            return true;
    return false;
}

static bool restore(struct raft *r, const struct raft_snapshot *s)
{
    RAFT_ASSERT(r->role == RAFT_FOLLOWER);
    if (s->meta.index <= r->log.committed)
        return false;
    if (!in_conf(&s->meta.conf, r->id)) {
        /* etcd refuses such a snapshot; but a member added after the
         * leader's latest snapshot would then wait for a newer snapshot
         * forever.  Accepting is safe: we are not promotable until the
         * conf change that adds us is applied from the entries that
         * follow the snapshot. */
        raft__logf(r, 1, "%llx restoring snapshot that does not contain it",
                   (unsigned long long)r->id);
    }
    if (raft__log_match(&r->log, s->meta.index, s->meta.term)) {
        /* We already hold the entries: just fast-forward the commit. */
        raft__log_commit_to(&r->log, s->meta.index);
        return false;
    }
    raft__log_restore(&r->log, s);
    int rc = raft__trk_restore(&r->trk, &s->meta.conf, s->meta.index,
                               r->max_inflight);
    RAFT_ASSERT(rc == 0); /* validated on entry to raft_step */
    struct raft_progress *self = raft__trk_get(&r->trk, r->id);
    r->is_learner = self != NULL && self->is_learner;
    raft__logf(r, 1, "%llx restored snapshot [index: %llu, term: %llu]",
               (unsigned long long)r->id, (unsigned long long)s->meta.index,
               (unsigned long long)s->meta.term);
    return true;
}

void raft__handle_snapshot(struct raft *r, const struct raft_msg *m)
{
    if (restore(r, m->snapshot))
        send_app_resp(r, m->from, raft__log_last(&r->log));
    else
        send_app_resp(r, m->from, r->log.committed);
}

static int forward(struct raft *r, const struct raft_msg *m)
{
    if (r->lead == 0) {
        raft__logf(r, 1, "%llx no leader at term %llu; dropping %s",
                   (unsigned long long)r->id, (unsigned long long)r->term,
                   raft_msg_type_name(m->type));
        return ERR_PROPOSAL_DROPPED;
    }
    struct raft_msg f = *m;
    f.to = r->lead;
    f.owned_ = NULL;
    /* A proposal or read may be forwarded twice (our view of the leader
     * was stale); the sender is whoever forwards it.  A transfer names
     * its transferee in from. */
    if (m->type != RAFT_MSG_TRANSFER_LEADER)
        f.from = r->id;
    else if (f.from == r->lead)
        return 0;
    raft__send(r, &f);
    return 0;
}

int raft__step_follower(struct raft *r, const struct raft_msg *m)
{
    switch (m->type) {
    case RAFT_MSG_PROP:
        if (r->no_forward && r->lead != 0)
            return ERR_PROPOSAL_DROPPED;
        return forward(r, m);
    case RAFT_MSG_APP:
    case RAFT_MSG_HEARTBEAT:
    case RAFT_MSG_SNAP:
        r->election_elapsed = 0;
        r->lead = m->from;
        if (m->type == RAFT_MSG_APP)
            raft__handle_append(r, m);
        else if (m->type == RAFT_MSG_HEARTBEAT)
            raft__handle_heartbeat(r, m);
        else
            raft__handle_snapshot(r, m);
        return 0;
    case RAFT_MSG_TRANSFER_LEADER:
    case RAFT_MSG_READ_INDEX:
        return forward(r, m);
    case RAFT_MSG_TIMEOUT_NOW:
        raft__logf(r, 1, "%llx [term %llu] received MsgTimeoutNow from %llx "
                   "and starts an election to get leadership",
                   (unsigned long long)r->id, (unsigned long long)r->term,
                   (unsigned long long)m->from);
        raft__hup(r, true);
        return 0;
    case RAFT_MSG_READ_INDEX_RESP:
        raft__read_state_add(r, m->index, m->entries[0].data,
                             m->entries[0].len);
        return 0;
    default:
        return 0;
    }
}

int raft__step_candidate(struct raft *r, const struct raft_msg *m)
{
    uint8_t want = r->role == RAFT_PRE_CANDIDATE ? RAFT_MSG_PRE_VOTE_RESP
                                                 : RAFT_MSG_VOTE_RESP;
    switch (m->type) {
    case RAFT_MSG_PROP:
    case RAFT_MSG_READ_INDEX:
        return ERR_PROPOSAL_DROPPED;
    case RAFT_MSG_APP:
    case RAFT_MSG_HEARTBEAT:
    case RAFT_MSG_SNAP:
        /* A leader exists in our term (or a later one): follow it. */
        raft__become_follower(r, m->term, m->from);
        return raft__step_follower(r, m);
    default:
        break;
    }
    if (m->type != want)
        return 0;
    raft__trk_record_vote(&r->trk, m->from, !m->reject);
    int res = raft__trk_vote_result(&r->trk);
    if (res == RAFT_VOTE_WON) {
        if (r->role == RAFT_PRE_CANDIDATE) {
            raft__campaign(r, false, false);
        } else {
            raft__become_leader(r);
            raft__bcast_append(r);
        }
    } else if (res == RAFT_VOTE_LOST) {
        raft__become_follower(r, r->term, 0);
    }
    return 0;
}
