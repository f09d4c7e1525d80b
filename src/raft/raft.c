/*
 * raft.c - the core of the state machine: roles and terms, elections
 * (PreVote, CheckQuorum lease), the term rules every message goes through,
 * the outbox, and initialisation.  Role-specific handling lives in
 * step_leader.c and step_follower.c, the public entry points in api.c.
 */
#include <stdarg.h>
#include <string.h>

#include "raft/raft_int.h"
#include "util/err.h"
#include "util/mem.h"

void raft__logf(struct raft *r, int level, const char *fmt, ...)
{
    if (r->logger == NULL)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    r->logger(r->logger_arg, level, line);
}

const char *raft_role_name(int role)
{
    static const char *names[] = {"StateFollower", "StatePreCandidate",
                                  "StateCandidate", "StateLeader"};
    return role >= 0 && role <= RAFT_LEADER ? names[role] : "StateUnknown";
}

const char *raft_msg_type_name(int type)
{
    static const char *names[] = {
        "MsgUnknown",     "MsgProp",       "MsgApp",
        "MsgAppResp",     "MsgVote",       "MsgVoteResp",
        "MsgPreVote",     "MsgPreVoteResp", "MsgSnap",
        "MsgHeartbeat",   "MsgHeartbeatResp", "MsgTransferLeader",
        "MsgTimeoutNow",  "MsgReadIndex",  "MsgReadIndexResp"};
    return type >= 1 && type <= RAFT_MSG_TYPE_MAX ? names[type] : names[0];
}

/* splitmix64: tiny, seedable, good enough for timeouts. */
static uint64_t prng_next(struct raft *r)
{
    uint64_t z = (r->prng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void raft__reset_timeout(struct raft *r)
{
    r->randomized_timeout =
        r->election_tick + (int)(prng_next(r) % (uint64_t)r->election_tick);
    RAFT_ASSERT(r->randomized_timeout >= r->election_tick);
    RAFT_ASSERT(r->randomized_timeout < 2 * r->election_tick);
}

/* Queues a copy of m (entries, ctx and snapshot deep-copied into one
 * block owned by the message) for the next Ready. */
void raft__send(struct raft *r, struct raft_msg *m)
{
    RAFT_ASSERT(m->to != 0 && m->to != r->id);
    if (m->from == 0)
        m->from = r->id;
    bool vote = m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE ||
                m->type == RAFT_MSG_VOTE_RESP ||
                m->type == RAFT_MSG_PRE_VOTE_RESP;
    if (vote)
        RAFT_ASSERT(m->term != 0);
    else if (m->type != RAFT_MSG_PROP && m->type != RAFT_MSG_READ_INDEX)
        m->term = r->term;
    size_t sz = m->n_entries * sizeof(struct raft_entry) + m->ctx_len;
    for (size_t k = 0; k < m->n_entries; k++)
        sz += m->entries[k].len;
    if (m->snapshot != NULL)
        sz += sizeof(struct raft_snapshot) + m->snapshot->len;
    uint8_t *blob = raft__xmalloc(sz);
    struct raft_msg c = *m;
    uint8_t *p = blob;
    c.entries = (struct raft_entry *)(void *)p;
    p += m->n_entries * sizeof(struct raft_entry);
    if (m->snapshot != NULL) {
        struct raft_snapshot *s = (struct raft_snapshot *)(void *)p;
        p += sizeof(*s);
        *s = *m->snapshot;
        s->data = p;
        if (s->len)
            memcpy(p, m->snapshot->data, s->len);
        p += s->len;
        c.snapshot = s;
    }
    for (size_t k = 0; k < m->n_entries; k++) {
        c.entries[k] = m->entries[k];
        c.entries[k].data = p;
        if (m->entries[k].len)
            memcpy(p, m->entries[k].data, m->entries[k].len);
        p += m->entries[k].len;
    }
    c.ctx = m->ctx_len ? p : NULL;
    if (m->ctx_len)
        memcpy(p, m->ctx, m->ctx_len);
    if (m->n_entries == 0)
        c.entries = NULL;
    c.owned_ = blob;
    if (r->n_msgs == r->cap_msgs) {
        r->cap_msgs = r->cap_msgs ? r->cap_msgs * 2 : 16;
        r->msgs = raft__xrealloc(r->msgs, r->cap_msgs * sizeof(*r->msgs));
    }
    r->msgs[r->n_msgs++] = c;
}

void raft__read_state_add(struct raft *r, raft_index index,
                          const uint8_t *ctx, size_t len)
{
    if (r->n_rs == r->cap_rs) {
        r->cap_rs = r->cap_rs ? r->cap_rs * 2 : 8;
        r->rs = raft__xrealloc(r->rs, r->cap_rs * sizeof(*r->rs));
    }
    struct raft_read_state *s = &r->rs[r->n_rs++];
    s->index = index;
    s->ctx_len = len;
    s->ctx = raft__xmalloc(len);
    if (len)
        memcpy(s->ctx, ctx, len);
}

static void free_pending_reads(struct raft *r)
{
    for (size_t k = 0; k < r->n_pend_reads; k++)
        mem_free(r->pend_reads[k].ctx);
    r->n_pend_reads = 0;
}

static void reset(struct raft *r, raft_term term)
{
    if (term != r->term) {
        r->term = term;
        r->vote = 0;
    }
    r->lead = 0;
    r->election_elapsed = 0;
    r->heartbeat_elapsed = 0;
    raft__reset_timeout(r);
    r->lead_transferee = 0;
    raft__trk_reset_votes(&r->trk);
    for (uint32_t k = 0; k < r->trk.n_prs; k++) {
        struct raft_progress *p = &r->trk.prs[k];
        raft__pr_become_probe(p);
        p->match = 0;
        p->next = raft__log_last(&r->log) + 1;
        p->recent_active = false;
        if (p->id == r->id)
            p->match = r->log.stabled;
    }
    r->pending_conf_index = 0;
    raft__ro_reset(&r->ro);
    free_pending_reads(r);
}

void raft__become_follower(struct raft *r, raft_term term, raft_id lead)
{
    reset(r, term);
    r->lead = lead;
    r->role = RAFT_FOLLOWER;
    raft__logf(r, 1, "%llx became follower at term %llu",
               (unsigned long long)r->id, (unsigned long long)r->term);
}

static void become_pre_candidate(struct raft *r)
{
    RAFT_ASSERT(r->role != RAFT_LEADER);
    raft__trk_reset_votes(&r->trk);
    r->lead = 0;
    r->role = RAFT_PRE_CANDIDATE;
    raft__logf(r, 1, "%llx became pre-candidate at term %llu",
               (unsigned long long)r->id, (unsigned long long)r->term);
}

static void become_candidate(struct raft *r)
{
    RAFT_ASSERT(r->role != RAFT_LEADER);
    reset(r, r->term + 1);
    r->vote = r->id;
    r->role = RAFT_CANDIDATE;
    raft__logf(r, 1, "%llx became candidate at term %llu",
               (unsigned long long)r->id, (unsigned long long)r->term);
}

void raft__become_leader(struct raft *r)
{
    RAFT_ASSERT(r->role != RAFT_FOLLOWER);
    reset(r, r->term);
    r->lead = r->id;
    r->role = RAFT_LEADER;
    struct raft_progress *self = raft__trk_get(&r->trk, r->id);
    RAFT_ASSERT(self != NULL);
    raft__pr_become_replicate(self);
    self->recent_active = true;
    /* Conservatively treat any unapplied entry as a possible conf change. */
    r->pending_conf_index = raft__log_last(&r->log);
    /* The empty entry lets the leader commit (and so serve reads) in its
     * own term (Raft §5.4.2, §8). */
    raft__log_append_owned(&r->log, r->term, RAFT_ENTRY_NORMAL, NULL, 0);
    raft__logf(r, 1, "%llx became leader at term %llu",
               (unsigned long long)r->id, (unsigned long long)r->term);
}

bool raft__promotable(struct raft *r)
{
    struct raft_progress *p = raft__trk_get(&r->trk, r->id);
    return p != NULL && !p->is_learner && !r->log.snap_unstable;
}

static bool unapplied_conf_change(struct raft *r)
{
    for (raft_index i = r->log.applied + 1; i <= r->log.committed; i++) {
        const struct raft_entry *e = raft__log_at(&r->log, i);
        if (e != NULL && e->type != RAFT_ENTRY_NORMAL)
            return true;
    }
    return false;
}

void raft__hup(struct raft *r, bool transfer)
{
    if (r->role == RAFT_LEADER)
        return;
    if (!raft__promotable(r)) {
        raft__logf(r, 2, "%llx is unpromotable and can not campaign",
                   (unsigned long long)r->id);
        return;
    }
    if (unapplied_conf_change(r)) {
        raft__logf(r, 2, "%llx cannot campaign at term %llu since there are "
                   "still pending configuration changes to apply",
                   (unsigned long long)r->id, (unsigned long long)r->term);
        return;
    }
    raft__logf(r, 1, "%llx is starting a new election at term %llu",
               (unsigned long long)r->id, (unsigned long long)r->term);
    raft__campaign(r, r->pre_vote && !transfer, transfer);
}

void raft__campaign(struct raft *r, bool pre, bool transfer)
{
    raft_term term;
    uint8_t type;
    if (pre) {
        become_pre_candidate(r);
        term = r->term + 1; /* PreVote does not bump our term */
        type = RAFT_MSG_PRE_VOTE;
    } else {
        become_candidate(r);
        term = r->term;
        type = RAFT_MSG_VOTE;
    }
    raft__trk_record_vote(&r->trk, r->id, true);
    int res = raft__trk_vote_result(&r->trk);
    if (res == RAFT_VOTE_WON) {
        if (pre)
            raft__campaign(r, false, transfer);
        else
            raft__become_leader(r);
        return;
    }
    struct raft_idset all = r->trk.cfg.voters[0];
    for (uint32_t k = 0; k < r->trk.cfg.voters[1].n; k++)
        raft__set_add(&all, r->trk.cfg.voters[1].ids[k]);
    for (uint32_t k = 0; k < all.n; k++) {
        if (all.ids[k] == r->id)
            continue;
        struct raft_msg m = {.type = type, .to = all.ids[k], .term = term,
                             .index = raft__log_last(&r->log),
                             .log_term = raft__log_last_term(&r->log),
                             .campaign_transfer = transfer};
        raft__logf(r, 1, "%llx [logterm: %llu, index: %llu] sent %s request "
                   "to %llx at term %llu", (unsigned long long)r->id,
                   (unsigned long long)m.log_term, (unsigned long long)m.index,
                   raft_msg_type_name(type), (unsigned long long)m.to,
                   (unsigned long long)r->term);
        raft__send(r, &m);
    }
}

/* Input validation: malformed messages are refused before any state
 * changes (never asserted on). */
static int validate(const struct raft *r, const struct raft_msg *m)
{
    if (m->type < 1 || m->type > RAFT_MSG_TYPE_MAX || m->from == 0 ||
        m->from == r->id || m->term > RAFT_TERM_MAX ||
        m->index > RAFT_INDEX_MAX || m->commit > RAFT_INDEX_MAX ||
        m->reject_hint > RAFT_INDEX_MAX ||
        m->n_entries > RAFT_INDEX_MAX - m->index ||
        (m->snapshot != NULL && m->snapshot->meta.index > RAFT_INDEX_MAX))
        return ERR_INVAL;
    for (size_t k = 0; k < m->n_entries; k++) {
        const struct raft_entry *e = &m->entries[k];
        if (e->type > RAFT_ENTRY_CONF_CHANGE_V2 || (e->len && !e->data) ||
            e->index > RAFT_INDEX_MAX || e->term > RAFT_TERM_MAX)
            return ERR_INVAL;
        if (m->type != RAFT_MSG_APP)
            continue;
        if (e->index != m->index + 1 + k || e->term > m->term ||
            e->term < (k ? m->entries[k - 1].term : m->log_term) ||
            e->index == 0)
            return ERR_INVAL;
    }
    switch (m->type) {
    case RAFT_MSG_PROP:
        return m->n_entries > 0 ? 0 : ERR_INVAL;
    case RAFT_MSG_READ_INDEX:
    case RAFT_MSG_READ_INDEX_RESP:
        return m->n_entries == 1 ? 0 : ERR_INVAL;
    case RAFT_MSG_SNAP:
        if (m->snapshot == NULL || m->snapshot->meta.index == 0 ||
            m->snapshot->meta.term > m->term ||
            raft__conf_state_check(&m->snapshot->meta.conf) != 0)
            return ERR_INVAL;
        break;
    case RAFT_MSG_APP:
        if (m->log_term > m->term || m->index + m->n_entries < m->index)
            return ERR_INVAL;
        break;
    default:
        break;
    }
    if (m->term == 0)
        return ERR_INVAL;
    return 0;
}

static void send_simple(struct raft *r, raft_id to, uint8_t type,
                        raft_term term, bool reject)
{
    struct raft_msg m = {.type = type, .to = to, .term = term,
                         .reject = reject};
    raft__send(r, &m);
}

static void handle_vote(struct raft *r, const struct raft_msg *m)
{
    bool pre = m->type == RAFT_MSG_PRE_VOTE;
    uint8_t resp = pre ? RAFT_MSG_PRE_VOTE_RESP : RAFT_MSG_VOTE_RESP;
    /* We can vote for whom we already voted for, for anybody if we have
     * neither voted nor heard of a leader in this term, and PreVote for
     * anybody who would be in a later term. */
    bool can = r->vote == m->from || (r->vote == 0 && r->lead == 0) ||
               (pre && m->term > r->term) ||
               RAFT_MUTANT(r, RAFT_MUTATE_VOTE_TWICE);
    bool up = raft__log_up_to_date(&r->log, m->index, m->log_term) ||
              RAFT_MUTANT(r, RAFT_MUTATE_VOTE_ANY_LOG);
    if (can && up) {
        raft__logf(r, 1, "%llx cast %s for %llx at term %llu",
                   (unsigned long long)r->id, raft_msg_type_name(m->type),
                   (unsigned long long)m->from, (unsigned long long)r->term);
        /* Answer with the message's term so a pre-candidate can count it. */
        send_simple(r, m->from, resp, m->term, false);
        if (!pre) {
            r->election_elapsed = 0;
            r->vote = m->from;
        }
    } else {
        raft__logf(r, 1, "%llx rejected %s from %llx at term %llu",
                   (unsigned long long)r->id, raft_msg_type_name(m->type),
                   (unsigned long long)m->from, (unsigned long long)r->term);
        send_simple(r, m->from, resp, r->term, true);
    }
}

/* Returns true if the message must be processed further. */
static bool higher_term(struct raft *r, const struct raft_msg *m)
{
    bool vote = m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE;
    if (vote && !m->campaign_transfer && r->check_quorum && r->lead != 0 &&
        r->election_elapsed < r->election_tick) {
        /* Leader lease: we heard from a leader within the election
         * timeout, so a disruptive candidate is ignored. */
        raft__logf(r, 1, "%llx [term: %llu] ignored %s from %llx at term "
                   "%llu: lease is not expired", (unsigned long long)r->id,
                   (unsigned long long)r->term, raft_msg_type_name(m->type),
                   (unsigned long long)m->from, (unsigned long long)m->term);
        return false;
    }
    if (m->type == RAFT_MSG_PRE_VOTE)
        return true; /* never change term for a PreVote */
    if (m->type == RAFT_MSG_PRE_VOTE_RESP && !m->reject)
        return true; /* the term bumps when we win */
    raft__logf(r, 1, "%llx [term: %llu] received a %s message with higher "
               "term from %llx [term: %llu]", (unsigned long long)r->id,
               (unsigned long long)r->term, raft_msg_type_name(m->type),
               (unsigned long long)m->from, (unsigned long long)m->term);
    bool from_leader = m->type == RAFT_MSG_APP ||
                       m->type == RAFT_MSG_HEARTBEAT ||
                       m->type == RAFT_MSG_SNAP;
    raft__become_follower(r, m->term, from_leader ? m->from : 0);
    return true;
}

static void lower_term(struct raft *r, const struct raft_msg *m)
{
    if ((r->check_quorum || r->pre_vote) &&
        (m->type == RAFT_MSG_HEARTBEAT || m->type == RAFT_MSG_APP)) {
        /* A stale leader (e.g. after a partition) learns our term from
         * this and steps down; without it, it could keep followers that
         * ignore votes (lease) and never elect anybody. */
        send_simple(r, m->from, RAFT_MSG_APP_RESP, r->term, false);
    } else if (m->type == RAFT_MSG_PRE_VOTE) {
        send_simple(r, m->from, RAFT_MSG_PRE_VOTE_RESP, r->term, true);
    }
}

int raft__step(struct raft *r, const struct raft_msg *m)
{
    bool local = m->type == RAFT_MSG_PROP || m->type == RAFT_MSG_READ_INDEX;
    if (!local && m->term > r->term) {
        if (!higher_term(r, m))
            return 0;
    } else if (!local && m->term < r->term) {
        lower_term(r, m);
        return 0;
    }
    if (m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE) {
        handle_vote(r, m);
        return 0;
    }
    switch (r->role) {
    case RAFT_LEADER:
        return raft__step_leader(r, m);
    case RAFT_FOLLOWER:
        return raft__step_follower(r, m);
    default:
        return raft__step_candidate(r, m);
    }
}

int raft_step(struct raft *r, const struct raft_msg *m)
{
    if (r->in_ready)
        return ERR_BUSY;
    int rc = validate(r, m);
    if (rc != 0)
        return rc;
    if (m->to != r->id)
        return ERR_INVAL;
    return raft__step(r, m);
}

size_t raft_sizeof(void)
{
    return sizeof(struct raft);
}

static int check_config(const struct raft_config *c)
{
    if (c->id == 0 || c->heartbeat_tick <= 0 ||
        c->election_tick <= c->heartbeat_tick || c->max_inflight_msgs == 0 ||
        c->read_only < 0 || c->read_only > RAFT_READ_ONLY_LEASE_BASED)
        return ERR_INVAL;
    if (c->read_only == RAFT_READ_ONLY_LEASE_BASED && !c->check_quorum)
        return ERR_INVAL; /* the lease needs CheckQuorum */
    if (raft__conf_state_check(&c->conf) != 0 ||
        c->hard_state.term > RAFT_TERM_MAX)
        return ERR_INVAL;
    if ((c->test_mutations & ~RAFT_MUTATE_ALL) != 0 ||
        (c->test_mutations != 0 && !RAFT_MUTANT_BUILD))
        return ERR_INVAL;
    raft_index next = c->snapshot.meta.index + 1;
    for (size_t k = 0; k < c->n_entries; k++, next++)
        if (c->entries[k].index != next || c->entries[k].term == 0 ||
            c->entries[k].term < (k ? c->entries[k - 1].term
                                    : c->snapshot.meta.term))
            return ERR_INVAL;
    raft_index last = next - 1;
    if (c->hard_state.commit > last ||
        c->hard_state.commit < c->snapshot.meta.index ||
        c->applied > c->hard_state.commit ||
        c->applied < c->snapshot.meta.index)
        return ERR_INVAL;
    return 0;
}

int raft_init(struct raft *r, const struct raft_config *c)
{
    int rc = check_config(c);
    if (rc != 0)
        return rc;
    memset(r, 0, sizeof(*r));
    r->id = c->id;
    r->election_tick = c->election_tick;
    r->heartbeat_tick = c->heartbeat_tick;
    r->pre_vote = c->pre_vote;
    r->check_quorum = c->check_quorum;
    r->read_only = c->read_only;
    r->no_forward = c->disable_proposal_forwarding;
    r->max_msg_size = c->max_size_per_msg ? c->max_size_per_msg : UINT64_MAX;
    r->max_inflight = c->max_inflight_msgs;
    r->prng = c->seed ^ (c->id * 0x2545f4914f6cdd1dULL);
    r->logger = c->logger;
    r->logger_arg = c->logger_arg;
    r->mutations = c->test_mutations;
    raft__log_init(&r->log);
    const struct raft_snapshot *s = &c->snapshot;
    r->log.offset = s->meta.index;
    r->log.offset_term = s->meta.term;
    if (s->meta.index > 0)
        raft__log_set_snapshot(&r->log, &s->meta, s->data, s->len);
    raft__log_append(&r->log, c->entries, c->n_entries);
    r->log.stabled = raft__log_last(&r->log);
    r->log.committed = c->hard_state.commit;
    r->log.applied = c->applied;
    rc = raft__trk_restore(&r->trk, &c->conf, raft__log_last(&r->log),
                           r->max_inflight);
    RAFT_ASSERT(rc == 0); /* checked above */
    struct raft_progress *self = raft__trk_get(&r->trk, r->id);
    r->is_learner = self != NULL && self->is_learner;
    raft__become_follower(r, c->hard_state.term, 0);
    r->vote = c->hard_state.vote;
    r->prev_hs = (struct raft_hard_state){r->term, r->vote, r->log.committed};
    r->prev_ss = (struct raft_soft_state){0, RAFT_FOLLOWER};
    char cs[256];
    raft__conf_state_fmt(&c->conf, cs, sizeof(cs));
    raft__logf(r, 1, "newRaft %llx [%s] term: %llu, commit: %llu, applied: "
               "%llu, lastindex: %llu, lastterm: %llu",
               (unsigned long long)r->id, cs + (cs[0] == ' '),
               (unsigned long long)r->term,
               (unsigned long long)r->log.committed,
               (unsigned long long)r->log.applied,
               (unsigned long long)raft__log_last(&r->log),
               (unsigned long long)raft__log_last_term(&r->log));
    return 0;
}

static void free_outbox(struct raft *r)
{
    for (size_t k = 0; k < r->n_msgs; k++)
        mem_free(r->msgs[k].owned_);
    mem_free(r->msgs);
    r->msgs = NULL;
    r->n_msgs = r->cap_msgs = 0;
    for (size_t k = 0; k < r->n_rs; k++)
        mem_free(r->rs[k].ctx);
    mem_free(r->rs);
    r->rs = NULL;
    r->n_rs = r->cap_rs = 0;
}

void raft_close(struct raft *r)
{
    free_outbox(r);
    free_pending_reads(r);
    mem_free(r->pend_reads);
    raft__ro_reset(&r->ro);
    raft__trk_free(&r->trk);
    raft__log_free(&r->log);
}
