/*
 * confchange.c - the progress tracker: who votes, who learns, and the
 * replication progress of each; and the membership changes on it.
 *
 * A configuration is joint while voters[1] (outgoing) is non-empty: then an
 * election or a commit needs a majority of BOTH voters[0] and voters[1].
 * Changes are computed on a copy of the configuration and validated before
 * anything is touched, so a refused change leaves the tracker as it was.
 * Progress entries exist exactly for the union of voters and learners.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/err.h"

struct raft_progress *raft__trk_get(struct raft_tracker *t, raft_id id)
{
    for (uint32_t k = 0; k < t->n_prs; k++)
        if (t->prs[k].id == id)
            return &t->prs[k];
    return NULL;
}

bool raft__trk_is_voter(const struct raft_tracker *t, raft_id id)
{
    return raft__set_has(&t->cfg.voters[0], id) ||
           raft__set_has(&t->cfg.voters[1], id);
}

bool raft__cfg_joint(const struct raft_tracker_config *c)
{
    return c->voters[1].n > 0;
}

static bool ack_of(void *arg, raft_id id, raft_index *index)
{
    struct raft_progress *p = raft__trk_get(arg, id);
    if (p == NULL)
        return false;
    *index = p->match;
    return true;
}

raft_index raft__trk_committed(struct raft_tracker *t)
{
    raft_index a = raft__majority_committed(&t->cfg.voters[0], ack_of, t);
    raft_index b = raft__majority_committed(&t->cfg.voters[1], ack_of, t);
    return a < b ? a : b;
}

static int combine(int a, int b)
{
    if (a == b)
        return a;
    if (a == RAFT_VOTE_LOST || b == RAFT_VOTE_LOST)
        return RAFT_VOTE_LOST;
    return RAFT_VOTE_PENDING;
}

static int vote_of(void *arg, raft_id id)
{
    struct raft_tracker *t = arg;
    for (uint32_t k = 0; k < t->n_votes; k++)
        if (t->vote_ids[k] == id)
            return t->vote_granted[k] ? 1 : 0;
    return -1;
}

int raft__trk_vote_result(struct raft_tracker *t)
{
    return combine(raft__majority_vote(&t->cfg.voters[0], vote_of, t),
                   raft__majority_vote(&t->cfg.voters[1], vote_of, t));
}

void raft__trk_record_vote(struct raft_tracker *t, raft_id id, bool granted)
{
    if (vote_of(t, id) >= 0 || t->n_votes == RAFT_MAX_MEMBERS)
        return; /* first answer wins */
    t->vote_ids[t->n_votes] = id;
    t->vote_granted[t->n_votes] = granted;
    t->n_votes++;
}

void raft__trk_reset_votes(struct raft_tracker *t)
{
    t->n_votes = 0;
}

struct active_arg {
    struct raft_tracker *t; /* tracker */
    raft_id self;           /* always active */
};

static int active_of(void *arg, raft_id id)
{
    struct active_arg *a = arg;
    struct raft_progress *p = raft__trk_get(a->t, id);
    if (id == a->self)
        return 1;
    return p != NULL && p->recent_active ? 1 : 0;
}

/* Whether a quorum heard from us recently (CheckQuorum). */
bool raft__trk_quorum_active(struct raft_tracker *t, raft_id self)
{
    struct active_arg a = {t, self};
    int r = combine(raft__majority_vote(&t->cfg.voters[0], active_of, &a),
                    raft__majority_vote(&t->cfg.voters[1], active_of, &a));
    return r == RAFT_VOTE_WON;
}

void raft__trk_free(struct raft_tracker *t)
{
    for (uint32_t k = 0; k < t->n_prs; k++)
        raft__pr_free(&t->prs[k]);
    t->n_prs = 0;
}

static void set_to_list(const struct raft_idset *s, raft_id *out,
                        uint32_t *n)
{
    memcpy(out, s->ids, s->n * sizeof(raft_id));
    *n = s->n;
}

void raft__trk_conf_state(const struct raft_tracker *t,
                          struct raft_conf_state *cs)
{
    memset(cs, 0, sizeof(*cs));
    set_to_list(&t->cfg.voters[0], cs->voters, &cs->n_voters);
    set_to_list(&t->cfg.voters[1], cs->voters_outgoing, &cs->n_voters_outgoing);
    set_to_list(&t->cfg.learners, cs->learners, &cs->n_learners);
    set_to_list(&t->cfg.learners_next, cs->learners_next, &cs->n_learners_next);
    cs->auto_leave = t->cfg.auto_leave;
}

static uint32_t union_size(const struct raft_tracker_config *c)
{
    struct raft_idset u = c->voters[0];
    const struct raft_idset *others[3] = {&c->voters[1], &c->learners,
                                          &c->learners_next};
    uint32_t extra = 0;
    for (int s = 0; s < 3; s++)
        for (uint32_t k = 0; k < others[s]->n; k++)
            if (!raft__set_add(&u, others[s]->ids[k]))
                extra++;
    return u.n + extra;
}

/* The invariants every configuration keeps (etcd confchange checkInvariants).
 */
static int check_config(const struct raft_tracker_config *c)
{
    const struct raft_idset *l = &c->learners, *ln = &c->learners_next;
    for (uint32_t k = 0; k < l->n; k++)
        if (raft__set_has(&c->voters[0], l->ids[k]) ||
            raft__set_has(&c->voters[1], l->ids[k]))
            return ERR_INVAL;
    for (uint32_t k = 0; k < ln->n; k++)
        if (!raft__set_has(&c->voters[1], ln->ids[k]) ||
            raft__set_has(&c->voters[0], ln->ids[k]))
            return ERR_INVAL;
    if (!raft__cfg_joint(c) && (ln->n > 0 || c->auto_leave))
        return ERR_INVAL;
    if (union_size(c) > RAFT_MAX_MEMBERS)
        return ERR_INVAL;
    return 0;
}

/* Makes the progress entries match the union of c, keeping existing ones;
 * new members start probing at last. */
static void sync_progress(struct raft_tracker *t,
                          const struct raft_tracker_config *c,
                          raft_index last, uint32_t max_inflight)
{
    uint32_t w = 0;
    for (uint32_t k = 0; k < t->n_prs; k++) {
        raft_id id = t->prs[k].id;
        if (raft__set_has(&c->voters[0], id) ||
            raft__set_has(&c->voters[1], id) ||
            raft__set_has(&c->learners, id))
            t->prs[w++] = t->prs[k];
        else
            raft__pr_free(&t->prs[k]);
    }
    t->n_prs = w;
    const struct raft_idset *all[3] = {&c->voters[0], &c->voters[1],
                                       &c->learners};
    for (int s = 0; s < 3; s++) {
        for (uint32_t k = 0; k < all[s]->n; k++) {
            raft_id id = all[s]->ids[k];
            if (raft__trk_get(t, id) != NULL)
                continue;
            RAFT_ASSERT(t->n_prs < RAFT_MAX_MEMBERS);
            uint32_t j = t->n_prs++;
            while (j > 0 && t->prs[j - 1].id > id) {
                t->prs[j] = t->prs[j - 1];
                j--;
            }
            raft__pr_init(&t->prs[j], id, last > 0 ? last : 1, max_inflight,
                          false);
        }
    }
    for (uint32_t k = 0; k < t->n_prs; k++)
        t->prs[k].is_learner = raft__set_has(&c->learners, t->prs[k].id);
    t->cfg = *c;
}

static int list_to_set(const raft_id *ids, uint32_t n, struct raft_idset *s)
{
    memset(s, 0, sizeof(*s));
    if (n > RAFT_MAX_MEMBERS)
        return ERR_INVAL;
    for (uint32_t k = 0; k < n; k++) {
        if (ids[k] == 0 || raft__set_has(s, ids[k]))
            return ERR_INVAL;
        raft__set_add(s, ids[k]);
    }
    return 0;
}

static int cs_to_config(const struct raft_conf_state *cs,
                        struct raft_tracker_config *c)
{
    memset(c, 0, sizeof(*c));
    if (list_to_set(cs->voters, cs->n_voters, &c->voters[0]) != 0 ||
        list_to_set(cs->voters_outgoing, cs->n_voters_outgoing,
                    &c->voters[1]) != 0 ||
        list_to_set(cs->learners, cs->n_learners, &c->learners) != 0 ||
        list_to_set(cs->learners_next, cs->n_learners_next,
                    &c->learners_next) != 0)
        return ERR_INVAL;
    c->auto_leave = cs->auto_leave;
    return check_config(c);
}

int raft__conf_state_check(const struct raft_conf_state *cs)
{
    struct raft_tracker_config c;
    return cs_to_config(cs, &c);
}

int raft__trk_restore(struct raft_tracker *t, const struct raft_conf_state *cs,
                      raft_index last, uint32_t max_inflight)
{
    struct raft_tracker_config c;
    int rc = cs_to_config(cs, &c);
    if (rc != 0)
        return rc;
    raft__trk_free(t);
    sync_progress(t, &c, last + 1, max_inflight);
    for (uint32_t k = 0; k < t->n_prs; k++)
        t->prs[k].next = last + 1;
    RAFT_ASSERT(check_config(&t->cfg) == 0);
    return 0;
}

static void make_voter(struct raft_tracker_config *c, raft_id id)
{
    raft__set_del(&c->learners, id);
    raft__set_del(&c->learners_next, id);
    raft__set_add(&c->voters[0], id);
}

/* A voter of the outgoing config cannot be a learner while joint: it
 * becomes one on leave (learners_next). */
static void make_learner(struct raft_tracker_config *c, raft_id id)
{
    if (raft__set_has(&c->learners, id))
        return;
    raft__set_del(&c->voters[0], id);
    raft__set_del(&c->learners_next, id);
    if (raft__set_has(&c->voters[1], id))
        raft__set_add(&c->learners_next, id);
    else
        raft__set_add(&c->learners, id);
}

static void remove_node(struct raft_tracker_config *c, raft_id id)
{
    raft__set_del(&c->voters[0], id);
    raft__set_del(&c->learners, id);
    raft__set_del(&c->learners_next, id);
}

static int apply_changes(struct raft_tracker_config *c,
                         const struct raft_conf_change *cc)
{
    for (uint32_t k = 0; k < cc->n_changes; k++) {
        const struct raft_cc_single *s = &cc->changes[k];
        if (s->node_id == 0)
            continue; /* etcd ignores id 0 */
        switch (s->type) {
        case RAFT_CC_ADD_NODE: make_voter(c, s->node_id); break;
        case RAFT_CC_ADD_LEARNER: make_learner(c, s->node_id); break;
        case RAFT_CC_REMOVE_NODE: remove_node(c, s->node_id); break;
        case RAFT_CC_UPDATE_NODE: break;
        default: return ERR_INVAL;
        }
    }
    if (c->voters[0].n == 0)
        return ERR_INVAL; /* removed all voters */
    return 0;
}

static uint32_t symdiff(const struct raft_idset *a, const struct raft_idset *b)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < a->n; k++)
        n += !raft__set_has(b, a->ids[k]);
    for (uint32_t k = 0; k < b->n; k++)
        n += !raft__set_has(a, b->ids[k]);
    return n;
}

bool raft__cc_is_leave_joint(const struct raft_conf_change *cc)
{
    return cc->n_changes == 0 && cc->transition == RAFT_CC_TRANSITION_AUTO;
}

static int next_config(const struct raft_tracker_config *cur,
                       const struct raft_conf_change *cc,
                       struct raft_tracker_config *c)
{
    *c = *cur;
    if (raft__cc_is_leave_joint(cc)) {
        if (!raft__cfg_joint(c))
            return ERR_INVAL;
        for (uint32_t k = 0; k < c->learners_next.n; k++)
            raft__set_add(&c->learners, c->learners_next.ids[k]);
        memset(&c->learners_next, 0, sizeof(c->learners_next));
        memset(&c->voters[1], 0, sizeof(c->voters[1]));
        c->auto_leave = false;
        return 0;
    }
    if (raft__cfg_joint(c))
        return ERR_INVAL; /* no new change while joint */
    if (cc->transition != RAFT_CC_TRANSITION_AUTO || cc->n_changes > 1) {
        if (c->voters[0].n == 0)
            return ERR_INVAL;
        c->voters[1] = c->voters[0];
        c->auto_leave = cc->transition != RAFT_CC_TRANSITION_EXPLICIT;
        return apply_changes(c, cc);
    }
    int rc = apply_changes(c, cc);
    if (rc == 0 && symdiff(&cur->voters[0], &c->voters[0]) > 1)
        rc = ERR_INVAL;
    return rc;
}

int raft__trk_apply(struct raft_tracker *t, const struct raft_conf_change *cc,
                    raft_index last, uint32_t max_inflight)
{
    struct raft_tracker_config c;
    if (cc->transition > RAFT_CC_TRANSITION_EXPLICIT ||
        cc->n_changes > RAFT_MAX_MEMBERS)
        return ERR_INVAL;
    int rc = next_config(&t->cfg, cc, &c);
    if (rc == 0)
        rc = check_config(&c);
    if (rc != 0)
        return rc;
    sync_progress(t, &c, last, max_inflight);
    RAFT_ASSERT(check_config(&t->cfg) == 0);
    return 0;
}

static size_t fmt_set(char *buf, size_t cap, const char *name,
                      const raft_id *ids, uint32_t n)
{
    size_t w = 0;
    if (n == 0)
        return 0;
    w += (size_t)snprintf(buf + w, cap > w ? cap - w : 0, " %s=(", name);
    for (uint32_t k = 0; k < n; k++)
        w += (size_t)snprintf(buf + w, cap > w ? cap - w : 0, "%s%llu",
                              k ? " " : "", (unsigned long long)ids[k]);
    w += (size_t)snprintf(buf + w, cap > w ? cap - w : 0, ")");
    return w;
}

/* "voters=(1 2 3)&&(1 2) learners=(4) learners_next=(5) autoleave" */
void raft__conf_state_fmt(const struct raft_conf_state *cs, char *buf,
                          size_t cap)
{
    size_t w = 0;
    buf[0] = 0;
    w += fmt_set(buf + w, cap > w ? cap - w : 0, "voters", cs->voters,
                 cs->n_voters);
    if (cs->n_voters == 0)
        w += (size_t)snprintf(buf + w, cap > w ? cap - w : 0, " voters=()");
    if (cs->n_voters_outgoing > 0) {
        w += fmt_set(buf + w, cap > w ? cap - w : 0, "&&", cs->voters_outgoing,
                     cs->n_voters_outgoing);
    }
    w += fmt_set(buf + w, cap > w ? cap - w : 0, "learners", cs->learners,
                 cs->n_learners);
    w += fmt_set(buf + w, cap > w ? cap - w : 0, "learners_next",
                 cs->learners_next, cs->n_learners_next);
    if (cs->auto_leave && w < cap)
        snprintf(buf + w, cap - w, " autoleave");
}
