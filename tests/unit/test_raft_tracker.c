/*
 * test_raft_tracker.c - goal: the pure bookkeeping under the raft state
 * machine is right on its own: quorum arithmetic (quorum.c), the joint
 * tracker and membership changes (confchange.c), and per-follower flow
 * control (progress.c).
 *
 * Method: table-driven checks against hand-computed answers (the same
 * cases etcd's quorum and confchange datadriven tests cover), plus an
 * exhaustive cross-check of the majority commit index against a brute
 * force definition for every ack vector of up to 5 voters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "raft/raft_int.h"

/* ---- quorum.c ---- */

static struct raft_idset set_of(const raft_id *ids, uint32_t n)
{
    struct raft_idset s = {0};
    for (uint32_t k = 0; k < n; k++)
        assert_true(raft__set_add(&s, ids[k]));
    return s;
}

struct acks {
    raft_id id[8];
    raft_index idx[8];
    int n;
};

static bool look(void *arg, raft_id id, raft_index *index)
{
    struct acks *a = arg;
    for (int k = 0; k < a->n; k++)
        if (a->id[k] == id) {
            *index = a->idx[k];
            return true;
        }
    return false;
}

static void test_idset(void **state)
{
    (void)state;
    struct raft_idset s = set_of((raft_id[]){5, 1, 3, 1}, 4);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.ids[0], 1);
    assert_int_equal(s.ids[1], 3);
    assert_int_equal(s.ids[2], 5);
    raft__set_del(&s, 3);
    raft__set_del(&s, 42);
    assert_int_equal(s.n, 2);
    assert_false(raft__set_has(&s, 3));
    assert_true(raft__set_has(&s, 5));
    struct raft_idset full = {0};
    for (raft_id i = 1; i <= RAFT_MAX_MEMBERS; i++)
        assert_true(raft__set_add(&full, i));
    assert_false(raft__set_add(&full, 99));
    assert_true(raft__set_add(&full, 7)); /* present: no-op */
}

static void test_majority_committed_cases(void **state)
{
    (void)state;
    struct raft_idset empty = {0};
    struct acks a = {0};
    assert_int_equal(raft__majority_committed(&empty, look, &a), UINT64_MAX);
    struct raft_idset one = set_of((raft_id[]){1}, 1);
    assert_int_equal(raft__majority_committed(&one, look, &a), 0);
    a = (struct acks){{1}, {12}, 1};
    assert_int_equal(raft__majority_committed(&one, look, &a), 12);
    struct raft_idset three = set_of((raft_id[]){1, 2, 3}, 3);
    a = (struct acks){{1, 2, 3}, {10, 5, 7}, 3};
    assert_int_equal(raft__majority_committed(&three, look, &a), 7);
    a.n = 2; /* 3 never acked: counts as 0 */
    assert_int_equal(raft__majority_committed(&three, look, &a), 5);
    struct raft_idset four = set_of((raft_id[]){1, 2, 3, 4}, 4);
    a = (struct acks){{1, 2, 3, 4}, {9, 9, 1, 1}, 4};
    assert_int_equal(raft__majority_committed(&four, look, &a), 1);
    a.idx[2] = 8;
    assert_int_equal(raft__majority_committed(&four, look, &a), 8);
}

/* Brute force: the largest i such that more than half the voters acked
 * >= i. */
static raft_index brute(const raft_index *v, int n)
{
    raft_index best = 0;
    for (int c = 0; c < n; c++) {
        int ge = 0;
        for (int k = 0; k < n; k++)
            ge += v[k] >= v[c];
        if (2 * ge > n && v[c] > best)
            best = v[c];
    }
    return best;
}

static void test_majority_committed_exhaustive(void **state)
{
    (void)state;
    for (int n = 1; n <= 5; n++) {
        int total = 1;
        for (int k = 0; k < n; k++)
            total *= 4;
        for (int code = 0; code < total; code++) {
            struct acks a = {.n = n};
            raft_index v[5];
            for (int k = 0, c = code; k < n; k++, c /= 4) {
                a.id[k] = (raft_id)k + 1;
                a.idx[k] = v[k] = (raft_index)(c % 4);
            }
            struct raft_idset s = set_of(a.id, (uint32_t)n);
            assert_int_equal(raft__majority_committed(&s, look, &a),
                             brute(v, n));
        }
    }
}

struct votes {
    raft_id id[8];
    int v[8];
    int n;
};

static int vote_fn(void *arg, raft_id id)
{
    struct votes *vs = arg;
    for (int k = 0; k < vs->n; k++)
        if (vs->id[k] == id)
            return vs->v[k];
    return -1;
}

static void test_majority_vote(void **state)
{
    (void)state;
    struct raft_idset empty = {0};
    struct votes vs = {0};
    assert_int_equal(raft__majority_vote(&empty, vote_fn, &vs),
                     RAFT_VOTE_WON);
    struct raft_idset three = set_of((raft_id[]){1, 2, 3}, 3);
    assert_int_equal(raft__majority_vote(&three, vote_fn, &vs),
                     RAFT_VOTE_PENDING);
    vs = (struct votes){{1, 2}, {1, 0}, 2};
    assert_int_equal(raft__majority_vote(&three, vote_fn, &vs),
                     RAFT_VOTE_PENDING);
    vs = (struct votes){{1, 2}, {1, 1}, 2};
    assert_int_equal(raft__majority_vote(&three, vote_fn, &vs),
                     RAFT_VOTE_WON);
    vs = (struct votes){{2, 3}, {0, 0}, 2};
    assert_int_equal(raft__majority_vote(&three, vote_fn, &vs),
                     RAFT_VOTE_LOST);
    struct raft_idset four = set_of((raft_id[]){1, 2, 3, 4}, 4);
    vs = (struct votes){{1, 2, 3, 4}, {1, 1, 0, 0}, 4};
    assert_int_equal(raft__majority_vote(&four, vote_fn, &vs),
                     RAFT_VOTE_LOST);
    vs = (struct votes){{1, 2, 3}, {1, 1, 0}, 3};
    assert_int_equal(raft__majority_vote(&four, vote_fn, &vs),
                     RAFT_VOTE_PENDING);
}

/* ---- tracker: joint quorums ---- */

static struct raft_conf_state cs_of(const raft_id *v, uint32_t nv,
                                    const raft_id *out, uint32_t no)
{
    struct raft_conf_state cs = {0};
    cs.n_voters = nv;
    memcpy(cs.voters, v, nv * sizeof(raft_id));
    cs.n_voters_outgoing = no;
    if (no)
        memcpy(cs.voters_outgoing, out, no * sizeof(raft_id));
    return cs;
}

static void set_match(struct raft_tracker *t, raft_id id, raft_index m)
{
    struct raft_progress *p = raft__trk_get(t, id);
    assert_non_null(p);
    p->match = m;
}

static void test_joint_committed_and_votes(void **state)
{
    (void)state;
    struct raft_tracker t = {0};
    struct raft_conf_state cs =
        cs_of((raft_id[]){1, 2, 3}, 3, (raft_id[]){3, 4, 5}, 3);
    assert_int_equal(raft__trk_restore(&t, &cs, 10, 4), 0);
    assert_true(raft__cfg_joint(&t.cfg));
    assert_int_equal(t.n_prs, 5);
    /* incoming (1 2 3) says 8, outgoing (3 4 5) says 4: min. */
    set_match(&t, 1, 9);
    set_match(&t, 2, 8);
    set_match(&t, 3, 4);
    set_match(&t, 4, 2);
    set_match(&t, 5, 6);
    assert_int_equal(raft__trk_committed(&t), 4);
    set_match(&t, 4, 5);
    assert_int_equal(raft__trk_committed(&t), 5);
    /* Votes: winning one half is not enough. */
    raft__trk_record_vote(&t, 1, true);
    raft__trk_record_vote(&t, 2, true);
    assert_int_equal(raft__trk_vote_result(&t), RAFT_VOTE_PENDING);
    raft__trk_record_vote(&t, 4, false);
    raft__trk_record_vote(&t, 5, false);
    assert_int_equal(raft__trk_vote_result(&t), RAFT_VOTE_LOST);
    raft__trk_record_vote(&t, 5, true); /* first answer wins */
    assert_int_equal(raft__trk_vote_result(&t), RAFT_VOTE_LOST);
    raft__trk_reset_votes(&t);
    raft__trk_record_vote(&t, 1, true);
    raft__trk_record_vote(&t, 3, true);
    raft__trk_record_vote(&t, 5, true);
    assert_int_equal(raft__trk_vote_result(&t), RAFT_VOTE_WON);
    /* CheckQuorum: self + recently active members of both halves. */
    for (uint32_t k = 0; k < t.n_prs; k++)
        t.prs[k].recent_active = false;
    assert_false(raft__trk_quorum_active(&t, 3));
    raft__trk_get(&t, 1)->recent_active = true;
    assert_false(raft__trk_quorum_active(&t, 3));
    raft__trk_get(&t, 4)->recent_active = true;
    assert_true(raft__trk_quorum_active(&t, 3));
    raft__trk_free(&t);
}

/* ---- confchange.c: membership changes ---- */

static struct raft_conf_change cc1(uint8_t type, raft_id id)
{
    struct raft_conf_change cc = {.n_changes = 1};
    cc.changes[0] = (struct raft_cc_single){type, id};
    return cc;
}

static void cs_now(struct raft_tracker *t, struct raft_conf_state *cs)
{
    raft__trk_conf_state(t, cs);
}

static void test_confchange_simple(void **state)
{
    (void)state;
    struct raft_tracker t = {0};
    struct raft_conf_state cs = cs_of((raft_id[]){1}, 1, NULL, 0);
    assert_int_equal(raft__trk_restore(&t, &cs, 5, 4), 0);
    struct raft_conf_change cc = cc1(RAFT_CC_ADD_NODE, 2);
    assert_int_equal(raft__trk_apply(&t, &cc, 7, 4), 0);
    cs_now(&t, &cs);
    assert_int_equal(cs.n_voters, 2);
    /* A new member probes from the last index. */
    assert_int_equal(raft__trk_get(&t, 2)->next, 7);
    assert_int_equal(raft__trk_get(&t, 2)->state, RAFT_PROGRESS_PROBE);
    cc = cc1(RAFT_CC_ADD_LEARNER, 3);
    assert_int_equal(raft__trk_apply(&t, &cc, 7, 4), 0);
    assert_true(raft__trk_get(&t, 3)->is_learner);
    assert_false(raft__trk_is_voter(&t, 3));
    /* Promote the learner, then demote voter 2. */
    cc = cc1(RAFT_CC_ADD_NODE, 3);
    assert_int_equal(raft__trk_apply(&t, &cc, 7, 4), 0);
    assert_true(raft__trk_is_voter(&t, 3));
    assert_false(raft__trk_get(&t, 3)->is_learner);
    cc = cc1(RAFT_CC_ADD_LEARNER, 2);
    assert_int_equal(raft__trk_apply(&t, &cc, 7, 4), 0);
    cs_now(&t, &cs);
    assert_int_equal(cs.n_voters, 2);
    assert_int_equal(cs.n_learners, 1);
    assert_int_equal(cs.learners[0], 2);
    /* Update and id 0 change nothing; remove drops the progress. */
    cc = cc1(RAFT_CC_UPDATE_NODE, 1);
    assert_int_equal(raft__trk_apply(&t, &cc, 7, 4), 0);
    cc = cc1(RAFT_CC_ADD_NODE, 0);
    assert_int_equal(raft__trk_apply(&t, &cc, 7, 4), 0);
    cc = cc1(RAFT_CC_REMOVE_NODE, 2);
    assert_int_equal(raft__trk_apply(&t, &cc, 7, 4), 0);
    assert_null(raft__trk_get(&t, 2));
    assert_int_equal(t.n_prs, 2);
    raft__trk_free(&t);
}

static void test_confchange_refusals(void **state)
{
    (void)state;
    struct raft_tracker t = {0};
    struct raft_conf_state cs = cs_of((raft_id[]){1}, 1, NULL, 0), before;
    assert_int_equal(raft__trk_restore(&t, &cs, 5, 4), 0);
    cs_now(&t, &before);
    /* Removing the last voter. */
    struct raft_conf_change cc = cc1(RAFT_CC_REMOVE_NODE, 1);
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), ERR_INVAL);
    /* Demoting the last voter. */
    cc = cc1(RAFT_CC_ADD_LEARNER, 1);
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), ERR_INVAL);
    /* Leaving a joint config that is not joint. */
    struct raft_conf_change leave = {0};
    assert_true(raft__cc_is_leave_joint(&leave));
    assert_int_equal(raft__trk_apply(&t, &leave, 5, 4), ERR_INVAL);
    /* A simple change may alter only one voter. */
    cc = (struct raft_conf_change){.n_changes = 1};
    cc.changes[0] = (struct raft_cc_single){RAFT_CC_ADD_NODE, 2};
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), 0);
    cc = (struct raft_conf_change){.transition = RAFT_CC_TRANSITION_AUTO,
                                   .n_changes = 1};
    cc.changes[0] = (struct raft_cc_single){RAFT_CC_ADD_NODE, 3};
    struct raft_conf_change two = {.n_changes = 2};
    two.changes[0] = (struct raft_cc_single){RAFT_CC_ADD_NODE, 3};
    two.changes[1] = (struct raft_cc_single){RAFT_CC_ADD_NODE, 4};
    /* n_changes > 1 with AUTO goes joint instead of being refused. */
    assert_int_equal(raft__trk_apply(&t, &two, 5, 4), 0);
    assert_true(raft__cfg_joint(&t.cfg));
    assert_true(t.cfg.auto_leave);
    /* No new change while joint. */
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), ERR_INVAL);
    /* Bad transition, bad change type, too many changes. */
    cc.transition = 3;
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), ERR_INVAL);
    cc = cc1(9, 3);
    cc.transition = RAFT_CC_TRANSITION_EXPLICIT;
    cs_now(&t, &before);
    assert_int_equal(raft__trk_apply(&t, &leave, 5, 4), 0);
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), ERR_INVAL);
    cc.n_changes = RAFT_MAX_MEMBERS + 1;
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), ERR_INVAL);
    /* A refused change leaves the tracker as it was. */
    cs_now(&t, &cs);
    assert_int_equal(cs.n_voters, 4);
    assert_int_equal(cs.n_voters_outgoing, 0);
    raft__trk_free(&t);
}

static void test_confchange_joint_learners_next(void **state)
{
    (void)state;
    struct raft_tracker t = {0};
    struct raft_conf_state cs = cs_of((raft_id[]){1, 2, 3}, 3, NULL, 0);
    assert_int_equal(raft__trk_restore(&t, &cs, 5, 4), 0);
    /* Explicit joint: demote 3, add 4. */
    struct raft_conf_change cc = {.transition = RAFT_CC_TRANSITION_EXPLICIT,
                                  .n_changes = 2};
    cc.changes[0] = (struct raft_cc_single){RAFT_CC_ADD_LEARNER, 3};
    cc.changes[1] = (struct raft_cc_single){RAFT_CC_ADD_NODE, 4};
    assert_int_equal(raft__trk_apply(&t, &cc, 5, 4), 0);
    cs_now(&t, &cs);
    assert_int_equal(cs.n_voters, 3);          /* 1 2 4 */
    assert_int_equal(cs.n_voters_outgoing, 3); /* 1 2 3 */
    assert_int_equal(cs.n_learners, 0);        /* 3 still votes (outgoing) */
    assert_int_equal(cs.n_learners_next, 1);
    assert_int_equal(cs.learners_next[0], 3);
    assert_false(cs.auto_leave);
    assert_true(raft__trk_is_voter(&t, 3));
    assert_int_equal(raft__conf_state_check(&cs), 0);
    struct raft_conf_change leave = {0};
    assert_int_equal(raft__trk_apply(&t, &leave, 5, 4), 0);
    cs_now(&t, &cs);
    assert_int_equal(cs.n_voters_outgoing, 0);
    assert_int_equal(cs.n_learners, 1);
    assert_int_equal(cs.learners[0], 3);
    assert_int_equal(cs.n_learners_next, 0);
    assert_true(raft__trk_get(&t, 3)->is_learner);
    raft__trk_free(&t);
}

static void test_conf_state_check(void **state)
{
    (void)state;
    struct raft_conf_state cs = cs_of((raft_id[]){1, 2}, 2, NULL, 0);
    assert_int_equal(raft__conf_state_check(&cs), 0);
    cs.voters[1] = 1; /* duplicate */
    assert_int_equal(raft__conf_state_check(&cs), ERR_INVAL);
    cs.voters[1] = 0; /* id 0 */
    assert_int_equal(raft__conf_state_check(&cs), ERR_INVAL);
    cs = cs_of((raft_id[]){1, 2}, 2, NULL, 0);
    cs.n_learners = 1;
    cs.learners[0] = 2; /* voter and learner */
    assert_int_equal(raft__conf_state_check(&cs), ERR_INVAL);
    cs.n_learners = 0;
    cs.auto_leave = true; /* auto_leave without joint */
    assert_int_equal(raft__conf_state_check(&cs), ERR_INVAL);
    cs.auto_leave = false;
    cs.n_learners_next = 1; /* learners_next not in outgoing */
    cs.learners_next[0] = 3;
    assert_int_equal(raft__conf_state_check(&cs), ERR_INVAL);
    cs.n_learners_next = 0;
    cs.n_voters = RAFT_MAX_MEMBERS + 1;
    assert_int_equal(raft__conf_state_check(&cs), ERR_INVAL);
}

/* ---- progress.c: flow control ---- */

static void test_inflights(void **state)
{
    (void)state;
    struct raft_progress p;
    raft__pr_init(&p, 2, 1, 3, false);
    struct raft_inflights *f = &p.infl;
    raft__pr_become_replicate(&p);
    for (raft_index i = 1; i <= 3; i++) {
        assert_false(raft__infl_full(f));
        raft__pr_sent(&p, 1, i * 10);
    }
    assert_true(raft__infl_full(f));
    assert_true(raft__pr_is_paused(&p));
    assert_int_equal(p.next, 31);
    raft__infl_free_le(f, 15); /* frees 10 only */
    assert_int_equal(f->count, 2);
    raft__pr_sent(&p, 2, 40); /* wraps around the ring */
    assert_int_equal(f->count, 3);
    raft__infl_free_le(f, 5); /* stale ack: nothing */
    assert_int_equal(f->count, 3);
    raft__infl_free_first(f);
    assert_int_equal(f->count, 2);
    raft__infl_free_le(f, 100);
    assert_int_equal(f->count, 0);
    assert_int_equal(f->start, 0);
    raft__infl_free_first(f); /* empty: no-op */
    /* An empty APP in replicate does not take a slot. */
    raft__pr_sent(&p, 0, 0);
    assert_int_equal(f->count, 0);
    raft__pr_free(&p);
}

static void test_progress_transitions(void **state)
{
    (void)state;
    struct raft_progress p;
    raft__pr_init(&p, 2, 11, 4, false);
    assert_int_equal(p.state, RAFT_PROGRESS_PROBE);
    assert_true(p.recent_active);
    /* Probe: one APP, then paused until an answer. */
    assert_false(raft__pr_is_paused(&p));
    raft__pr_sent(&p, 3, 13);
    assert_true(raft__pr_is_paused(&p));
    assert_int_equal(p.next, 11); /* probing does not move next */
    /* A reject of prev 10 with hint 6: next = min(10, 6 + 1). */
    assert_true(raft__pr_maybe_decr_to(&p, 10, 6));
    assert_int_equal(p.next, 7);
    assert_false(raft__pr_is_paused(&p));
    assert_false(raft__pr_maybe_decr_to(&p, 10, 3)); /* stale reject */
    /* Ack: match moves, next follows, replicate. */
    assert_true(raft__pr_maybe_update(&p, 8));
    assert_false(raft__pr_maybe_update(&p, 8));
    assert_int_equal(p.match, 8);
    assert_int_equal(p.next, 9);
    raft__pr_become_replicate(&p);
    raft__pr_sent(&p, 2, 10);
    assert_int_equal(p.next, 11);
    /* Replicate: a reject above match goes back to match + 1. */
    assert_false(raft__pr_maybe_decr_to(&p, 8, 0)); /* <= match: stale */
    assert_true(raft__pr_maybe_decr_to(&p, 10, 0));
    assert_int_equal(p.next, 9);
    /* Snapshot: paused; back to probe after the snapshot index. */
    raft__pr_become_snapshot(&p, 20);
    assert_int_equal(p.state, RAFT_PROGRESS_SNAPSHOT);
    assert_true(raft__pr_is_paused(&p));
    raft__pr_become_probe(&p);
    assert_int_equal(p.next, 21);
    assert_int_equal(p.pending_snapshot, 0);
    /* A failed snapshot (pending forgotten) probes from match + 1. */
    raft__pr_become_snapshot(&p, 20);
    p.pending_snapshot = 0;
    raft__pr_become_probe(&p);
    assert_int_equal(p.next, 9);
    /* Leaving replicate resets the window. */
    raft__pr_become_replicate(&p);
    raft__pr_sent(&p, 1, 9);
    raft__pr_become_probe(&p);
    assert_int_equal(p.infl.count, 0);
    assert_int_equal(p.next, p.match + 1);
    raft__pr_free(&p);
}

/* The product library refuses the test-only mutations (raft.h). */
static void test_mutations_refused(void **state)
{
    (void)state;
    struct raft_config c = {.id = 1, .election_tick = 10,
                            .heartbeat_tick = 1, .max_inflight_msgs = 1};
    c.conf.n_voters = 1;
    c.conf.voters[0] = 1;
    struct raft *r = malloc(raft_sizeof());
    assert_non_null(r);
    c.test_mutations = RAFT_MUTATE_COMMIT_PRIOR_TERM;
    assert_int_equal(raft_init(r, &c), ERR_INVAL);
    c.test_mutations = 0;
    assert_int_equal(raft_init(r, &c), 0);
    raft_close(r);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idset),
        cmocka_unit_test(test_majority_committed_cases),
        cmocka_unit_test(test_majority_committed_exhaustive),
        cmocka_unit_test(test_majority_vote),
        cmocka_unit_test(test_joint_committed_and_votes),
        cmocka_unit_test(test_confchange_simple),
        cmocka_unit_test(test_confchange_refusals),
        cmocka_unit_test(test_confchange_joint_learners_next),
        cmocka_unit_test(test_conf_state_check),
        cmocka_unit_test(test_inflights),
        cmocka_unit_test(test_progress_transitions),
        cmocka_unit_test(test_mutations_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
