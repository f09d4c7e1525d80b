/*
 * step_leader.c - what a leader does: accept proposals, replicate with flow
 * control (probe / replicate / snapshot), advance commit on a quorum of the
 * current term, answer ReadIndex after a heartbeat round, and hand over
 * leadership on request.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/err.h"
#include "util/mem.h"

/* Sends a snapshot instead of entries the log no longer holds. */
static bool send_snapshot(struct raft *r, struct raft_progress *p)
{
    if (!p->recent_active) {
        raft__logf(r, 0, "ignore sending snapshot to %llx since it is not "
                   "recently active", (unsigned long long)p->id);
        return false;
    }
    const struct raft_snapshot *s = &r->log.snap;
    if (s->meta.index == 0 || s->meta.index < r->log.offset)
        return false; /* no usable snapshot yet */
    raft__pr_become_snapshot(p, s->meta.index);
    struct raft_msg m = {.type = RAFT_MSG_SNAP, .to = p->id, .snapshot = s};
    raft__logf(r, 1, "%llx sent snapshot [index: %llu, term: %llu] to %llx",
               (unsigned long long)r->id, (unsigned long long)s->meta.index,
               (unsigned long long)s->meta.term, (unsigned long long)p->id);
    raft__send(r, &m);
    return true;
}

/* Sends the next APP (or a snapshot) to a follower if flow control allows;
 * with send_empty an APP without entries still goes out (to probe or to
 * carry the commit index). */
bool raft__maybe_send_append(struct raft *r, raft_id to, bool send_empty)
{
    struct raft_progress *p = raft__trk_get(&r->trk, to);
    RAFT_ASSERT(p != NULL && to != r->id);
    if (raft__pr_is_paused(p))
        return false;
    raft_index prev = p->next - 1;
    raft_term prev_term = 0;
    int rc = raft__log_term(&r->log, prev, &prev_term);
    const struct raft_entry *ents = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = raft__log_slice(&r->log, p->next, raft__log_last(&r->log),
                             r->max_msg_size, &ents, &n);
    if (rc != 0) {
        RAFT_ASSERT(rc == ERR_RAFT_COMPACTED);
        return send_snapshot(r, p);
    }
    if (n == 0 && !send_empty)
        return false;
    struct raft_msg m = {.type = RAFT_MSG_APP, .to = to, .index = prev,
                         .log_term = prev_term, .commit = r->log.committed,
                         .n_entries = n, .entries = (struct raft_entry *)ents};
    raft__send(r, &m);
    raft__pr_sent(p, n, n ? ents[n - 1].index : 0);
    return true;
}

void raft__bcast_append(struct raft *r)
{
    for (uint32_t k = 0; k < r->trk.n_prs; k++)
        if (r->trk.prs[k].id != r->id)
            raft__maybe_send_append(r, r->trk.prs[k].id, true);
}

static void send_heartbeat(struct raft *r, struct raft_progress *p,
                           const uint8_t *ctx, size_t len)
{
    /* Never tell a follower to commit beyond what it is known to hold. */
    raft_index c = p->match < r->log.committed ? p->match : r->log.committed;
    if (RAFT_MUTANT(r, RAFT_MUTATE_HEARTBEAT_COMMIT))
        c = r->log.committed;
    struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .to = p->id, .commit = c,
                         .ctx = ctx, .ctx_len = len};
    raft__send(r, &m);
}

static void bcast_heartbeat_ctx(struct raft *r, const uint8_t *ctx,
                                size_t len)
{
    for (uint32_t k = 0; k < r->trk.n_prs; k++)
        if (r->trk.prs[k].id != r->id)
            send_heartbeat(r, &r->trk.prs[k], ctx, len);
}

void raft__bcast_heartbeat(struct raft *r)
{
    const struct raft_read_req *q = raft__ro_last(&r->ro);
    if (q != NULL)
        bcast_heartbeat_ctx(r, q->ctx, q->ctx_len);
    else
        bcast_heartbeat_ctx(r, NULL, 0);
}

bool raft__maybe_commit(struct raft *r)
{
    raft_index c = raft__trk_committed(&r->trk);
    /* Raft §5.4.2: only an entry of the leader's own term is committed by
     * counting replicas; earlier ones commit with it (Figure 8). */
    raft_term t = r->term;
    if (RAFT_MUTANT(r, RAFT_MUTATE_COMMIT_PRIOR_TERM))
        t = raft__log_term_or0(&r->log, c);
    return raft__log_maybe_commit(&r->log, c, t);
}

void raft__abort_transfer(struct raft *r)
{
    r->lead_transferee = 0;
}

static void send_timeout_now(struct raft *r, raft_id to)
{
    struct raft_msg m = {.type = RAFT_MSG_TIMEOUT_NOW, .to = to};
    raft__send(r, &m);
}

static void read_respond(struct raft *r, raft_id from, raft_index index,
                         const uint8_t *ctx, size_t len)
{
    if (from == 0 || from == r->id) {
        raft__read_state_add(r, index, ctx, len);
        return;
    }
    struct raft_entry e = {.len = (uint32_t)len, .data = (uint8_t *)ctx};
    struct raft_msg m = {.type = RAFT_MSG_READ_INDEX_RESP, .to = from,
                         .index = index, .n_entries = 1, .entries = &e};
    raft__send(r, &m);
}

static bool single_voter(struct raft *r)
{
    const struct raft_tracker_config *c = &r->trk.cfg;
    return c->voters[1].n == 0 && c->voters[0].n == 1 &&
           c->voters[0].ids[0] == r->id;
}

static void handle_read_index(struct raft *r, raft_id from,
                              const uint8_t *ctx, size_t len)
{
    if (single_voter(r) || r->read_only == RAFT_READ_ONLY_LEASE_BASED) {
        read_respond(r, from, r->log.committed, ctx, len);
        return;
    }
    if (!raft__ro_add(&r->ro, r->log.committed, from, ctx, len))
        return; /* duplicate context or full: the requester retries */
    struct raft_read_req *q = raft__ro_find(&r->ro, ctx, len);
    raft__set_add(&q->acks, r->id);
    bcast_heartbeat_ctx(r, ctx, len);
}

static bool committed_in_term(struct raft *r)
{
    return raft__log_term_or0(&r->log, r->log.committed) == r->term;
}

/* Reads that arrived before the leader committed in its term wait here:
 * until then its commit index may lag what the previous leader
 * acknowledged. */
static void queue_pending_read(struct raft *r, raft_id from,
                               const uint8_t *ctx, size_t len)
{
    if (r->n_pend_reads >= RAFT_MAX_PENDING_READS)
        return;
    if (r->n_pend_reads == r->cap_pend_reads) {
        r->cap_pend_reads = r->cap_pend_reads ? r->cap_pend_reads * 2 : 8;
        r->pend_reads = raft__xrealloc(
            r->pend_reads, r->cap_pend_reads * sizeof(*r->pend_reads));
    }
    struct raft_pending_read *p = &r->pend_reads[r->n_pend_reads++];
    p->from = from;
    p->ctx_len = len;
    p->ctx = raft__xmalloc(len);
    if (len)
        memcpy(p->ctx, ctx, len);
}

void raft__release_pending_reads(struct raft *r)
{
    if (r->n_pend_reads == 0 || !committed_in_term(r))
        return;
    size_t n = r->n_pend_reads;
    struct raft_pending_read *v = r->pend_reads;
    r->pend_reads = NULL;
    r->n_pend_reads = r->cap_pend_reads = 0;
    for (size_t k = 0; k < n; k++) {
        handle_read_index(r, v[k].from, v[k].ctx, v[k].ctx_len);
        mem_free(v[k].ctx);
    }
    mem_free(v);
}

/* Whether a conf change proposal can be accepted now; etcd's rules. */
static bool conf_change_ok(struct raft *r, const struct raft_entry *e)
{
    struct raft_conf_change cc;
    if (raft_conf_change_decode(e->data, e->len, &cc) != 0)
        return false;
    if (e->type == RAFT_ENTRY_CONF_CHANGE && cc.n_changes != 1)
        return false;
    bool joint = raft__cfg_joint(&r->trk.cfg);
    bool leave = e->type == RAFT_ENTRY_CONF_CHANGE_V2 &&
                 raft__cc_is_leave_joint(&cc);
    if (r->pending_conf_index > r->log.applied) {
        raft__logf(r, 1, "%llx ignoring conf change: possible unapplied conf "
                   "change at index %llu (applied to %llu)",
                   (unsigned long long)r->id,
                   (unsigned long long)r->pending_conf_index,
                   (unsigned long long)r->log.applied);
        return false;
    }
    if (joint && !leave) {
        raft__logf(r, 1, "%llx ignoring conf change: must transition out of "
                   "joint configuration first", (unsigned long long)r->id);
        return false;
    }
    if (!joint && leave) {
        raft__logf(r, 1, "%llx ignoring conf change: not in joint state",
                   (unsigned long long)r->id);
        return false;
    }
    return true;
}

/* Appends one proposed entry (data copied) at the leader. */
void raft__append_proposal(struct raft *r, uint8_t type, const uint8_t *data,
                           uint32_t len)
{
    RAFT_ASSERT(r->role == RAFT_LEADER);
    struct raft_entry e = {.type = type, .len = len, .data = (uint8_t *)data};
    if (type != RAFT_ENTRY_NORMAL) {
        if (conf_change_ok(r, &e)) {
            r->pending_conf_index = raft__log_last(&r->log) + 1;
        } else {
            type = RAFT_ENTRY_NORMAL; /* keep the slot, drop the change */
            len = 0;
        }
    }
    uint8_t *copy = NULL;
    if (len > 0) {
        copy = raft__xmalloc(len);
        memcpy(copy, data, len);
    }
    raft__log_append_owned(&r->log, r->term, type, copy, len);
}

static int leader_prop(struct raft *r, const struct raft_msg *m)
{
    if (raft__trk_get(&r->trk, r->id) == NULL) {
        return ERR_PROPOSAL_DROPPED; /* we were removed; stepping down */
    }
    if (r->lead_transferee != 0) {
        raft__logf(r, 0, "%llx [term %llu] transfer leadership to %llx is in "
                   "progress; dropping proposal", (unsigned long long)r->id,
                   (unsigned long long)r->term,
                   (unsigned long long)r->lead_transferee);
        return ERR_PROPOSAL_DROPPED;
    }
    for (size_t k = 0; k < m->n_entries; k++)
        raft__append_proposal(r, m->entries[k].type, m->entries[k].data,
                              m->entries[k].len);
    raft__bcast_append(r);
    return 0;
}

static int leader_read_index(struct raft *r, const struct raft_msg *m)
{
    const struct raft_entry *e = &m->entries[0];
    if (!single_voter(r) && !committed_in_term(r)) {
        queue_pending_read(r, m->from, e->data, e->len);
        return 0;
    }
    handle_read_index(r, m->from, e->data, e->len);
    return 0;
}

static void app_resp_reject(struct raft *r, struct raft_progress *p,
                            const struct raft_msg *m)
{
    raft_index hint = m->reject_hint;
    if (m->log_term > 0) {
        raft_term t;
        hint = raft__log_find_conflict_by_term(&r->log, m->reject_hint,
                                               m->log_term, &t);
    }
    if (raft__pr_maybe_decr_to(p, m->index, hint)) {
        if (p->state == RAFT_PROGRESS_REPLICATE)
            raft__pr_become_probe(p);
        raft__maybe_send_append(r, p->id, true);
    }
}

static void app_resp_ack(struct raft *r, struct raft_progress *p,
                         const struct raft_msg *m)
{
    bool was_paused = raft__pr_is_paused(p);
    if (!raft__pr_maybe_update(p, m->index))
        return;
    if (p->state == RAFT_PROGRESS_PROBE) {
        raft__pr_become_replicate(p);
    } else if (p->state == RAFT_PROGRESS_SNAPSHOT &&
               p->match >= p->pending_snapshot) {
        raft__pr_become_probe(p);
        raft__pr_become_replicate(p);
    } else if (p->state == RAFT_PROGRESS_REPLICATE) {
        raft__infl_free_le(&p->infl, m->index);
    }
    if (raft__maybe_commit(r)) {
        raft__release_pending_reads(r);
        raft__bcast_append(r);
    } else if (was_paused) {
        raft__maybe_send_append(r, p->id, true);
    }
    /* Pipelining: fill the inflight window. */
    while (raft__trk_get(&r->trk, m->from) != NULL &&
           raft__maybe_send_append(r, m->from, false)) {
    }
    p = raft__trk_get(&r->trk, m->from);
    if (p != NULL && m->from == r->lead_transferee &&
        p->match == raft__log_last(&r->log)) {
        raft__logf(r, 1, "%llx sent MsgTimeoutNow to %llx after received "
                   "MsgAppResp", (unsigned long long)r->id,
                   (unsigned long long)m->from);
        send_timeout_now(r, m->from);
    }
}

static void heartbeat_resp(struct raft *r, struct raft_progress *p,
                           const struct raft_msg *m)
{
    p->probe_sent = false;
    if (p->state == RAFT_PROGRESS_REPLICATE && raft__infl_full(&p->infl))
        raft__infl_free_first(&p->infl);
    if (p->match < raft__log_last(&r->log))
        raft__maybe_send_append(r, p->id, true);
    if (r->read_only != RAFT_READ_ONLY_SAFE || m->ctx_len == 0)
        return;
    struct raft_read_req *q = raft__ro_find(&r->ro, m->ctx, m->ctx_len);
    if (q == NULL)
        return;
    if (raft__trk_is_voter(&r->trk, m->from))
        raft__set_add(&q->acks, m->from);
    struct raft_tracker_config *c = &r->trk.cfg;
    struct raft_idset *acks = &q->acks;
    /* A quorum (of both halves when joint) confirmed our leadership. */
    uint32_t in0 = 0, in1 = 0;
    for (uint32_t k = 0; k < acks->n; k++) {
        in0 += raft__set_has(&c->voters[0], acks->ids[k]);
        in1 += raft__set_has(&c->voters[1], acks->ids[k]);
    }
    if (in0 < c->voters[0].n / 2 + 1 ||
        (c->voters[1].n > 0 && in1 < c->voters[1].n / 2 + 1))
        return;
    struct raft_read_req *done = NULL;
    size_t n = raft__ro_pop_through(&r->ro, q, &done);
    for (size_t k = 0; k < n; k++) {
        read_respond(r, done[k].from, done[k].index, done[k].ctx,
                     done[k].ctx_len);
        mem_free(done[k].ctx);
    }
    mem_free(done);
}

static void transfer_leader(struct raft *r, struct raft_progress *p)
{
    raft_id to = p->id;
    if (to == r->id)
        return; /* already leader */
    if (p->is_learner) {
        raft__logf(r, 1, "%llx is learner. Ignored transferring leadership",
                   (unsigned long long)to);
        return;
    }
    if (r->lead_transferee == to)
        return; /* already in progress */
    raft__abort_transfer(r);
    raft__logf(r, 1, "%llx [term %llu] starts to transfer leadership to %llx",
               (unsigned long long)r->id, (unsigned long long)r->term,
               (unsigned long long)to);
    /* The transfer must finish within one election timeout. */
    r->election_elapsed = 0;
    r->lead_transferee = to;
    if (p->match == raft__log_last(&r->log))
        send_timeout_now(r, to);
    else
        raft__maybe_send_append(r, to, true);
}

int raft__step_leader(struct raft *r, const struct raft_msg *m)
{
    RAFT_ASSERT(r->role == RAFT_LEADER);
    if (m->type == RAFT_MSG_PROP)
        return leader_prop(r, m);
    if (m->type == RAFT_MSG_READ_INDEX)
        return leader_read_index(r, m);
    struct raft_progress *p = raft__trk_get(&r->trk, m->from);
    if (p == NULL)
        return 0; /* not a member (any more) */
    switch (m->type) {
    case RAFT_MSG_APP_RESP:
        if (m->index > raft__log_last(&r->log))
            return 0; /* impossible ack: ignore bad input */
        p->recent_active = true;
        if (m->reject)
            app_resp_reject(r, p, m);
        else
            app_resp_ack(r, p, m);
        return 0;
    case RAFT_MSG_HEARTBEAT_RESP:
        p->recent_active = true;
        heartbeat_resp(r, p, m);
        return 0;
    case RAFT_MSG_TRANSFER_LEADER:
        transfer_leader(r, p);
        return 0;
    default:
        return 0;
    }
}
