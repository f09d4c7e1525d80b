/*
 * test_server_timeout.c - goal: a request that timed out gets the error
 * etcd 3.4 gives for its likely cause (EtcdServer.parseProposeCtxErr): the
 * previous leader's failure when it started within 2 election timeouts
 * before this member was elected, a lost connection when this member (as
 * leader) has not been linked to a quorum, or (as follower) to its leader,
 * since before it started, else plain "request timed out"; and the wait
 * registry hands each expired waiter the error chosen for its own start
 * time.  Method: server__timeout_err on hand-made views, one group per
 * rule, boundaries included; server_wait_expire with a recording chooser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "server/timeout.h"
#include "server/wait.h"
#include "util/err.h"

#define ET 1000 /* election timeout, ms */

/* A 3-member view: self 1, peers 2 and 3, each linked since `since2` and
 * `since3` (0: down), leader `lead`, never elected. */
static struct server_timeout_view view3(uint64_t lead, uint64_t since2,
                                        uint64_t since3)
{
    struct server_timeout_view v;
    memset(&v, 0, sizeof v);
    v.self = 1;
    v.lead = lead;
    v.election_ms = ET;
    v.n = 3;
    v.id[0] = 1;
    v.id[1] = 2;
    v.id[2] = 3;
    v.active_since_ms[1] = since2;
    v.active_since_ms[2] = since3;
    return v;
}

/* EXPECT3 checks the error chosen for a request started at start_ms in
 * view3(lead, since2, since3); a macro, so that a failure names the line
 * of the case. */
#define EXPECT3(lead, since2, since3, start_ms, want)                        \
    do {                                                                     \
        struct server_timeout_view v_ = view3(lead, since2, since3);         \
        assert_int_equal(server__timeout_err(&v_, start_ms), want);          \
    } while (0)

/* --- rule 1: started shortly before this member was elected ------------ */

static void test_leader_fail_window(void **state)
{
    (void)state;
    struct server_timeout_view v = view3(1, 100, 100);
    v.lead_elected_ms = 10000;
    /* Inside (10000 - 2 ET, 10000), both ends excluded as in etcd. */
    assert_int_equal(server__timeout_err(&v, 8001), ERR_TIMEOUT_LEADER_FAIL);
    assert_int_equal(server__timeout_err(&v, 9999), ERR_TIMEOUT_LEADER_FAIL);
    assert_int_equal(server__timeout_err(&v, 8000), ERR_TIMEOUT);
    assert_int_equal(server__timeout_err(&v, 10000), ERR_TIMEOUT);
    assert_int_equal(server__timeout_err(&v, 12000), ERR_TIMEOUT);
    assert_int_equal(server__timeout_err(&v, 200), ERR_TIMEOUT);
    /* Never elected: no window, even for a start near 0 (no leader now,
     * so only the window could say more than "timed out"). */
    v.lead = 0;
    v.lead_elected_ms = 0;
    assert_int_equal(server__timeout_err(&v, 1), ERR_TIMEOUT);
    /* An election early on the clock does not wrap around. */
    v.lead_elected_ms = 1500;
    assert_int_equal(server__timeout_err(&v, 1), ERR_TIMEOUT_LEADER_FAIL);
}

static void test_leader_fail_first(void **state)
{
    (void)state;
    /* The window wins over the other rules: this member was elected, then
     * lost its leadership and every link (etcd keeps leadElectedTime). */
    struct server_timeout_view v = view3(2, 0, 0);
    v.lead_elected_ms = 5000;
    assert_int_equal(server__timeout_err(&v, 4000), ERR_TIMEOUT_LEADER_FAIL);
    v.lead = 0;
    assert_int_equal(server__timeout_err(&v, 4000), ERR_TIMEOUT_LEADER_FAIL);
    /* Outside it, the other rules apply. */
    v.lead = 2;
    assert_int_equal(server__timeout_err(&v, 6000), ERR_TIMEOUT_CONN_LOST);
}

/* --- rule 2: no leader --------------------------------------------------- */

static void test_no_leader(void **state)
{
    (void)state;
    /* Links down or up, no leader to blame: plain timeout. */
    EXPECT3(0, 0, 0, 1000, ERR_TIMEOUT);
    EXPECT3(0, 100, 100, 1000, ERR_TIMEOUT);
}

/* --- rule 3: the leader and its quorum ----------------------------------- */

static void test_leader_quorum(void **state)
{
    (void)state;
    EXPECT3(1, 500, 500, 1000, ERR_TIMEOUT);
    /* Self and one peer are a quorum of 3. */
    EXPECT3(1, 500, 0, 1000, ERR_TIMEOUT);
    EXPECT3(1, 0, 0, 1000, ERR_TIMEOUT_CONN_LOST);
    /* A link that came back after the start does not count... */
    EXPECT3(1, 1500, 0, 1000, ERR_TIMEOUT_CONN_LOST);
    /* ... nor one up since exactly then (etcd: Before, strictly). */
    EXPECT3(1, 1000, 0, 1000, ERR_TIMEOUT_CONN_LOST);
    EXPECT3(1, 999, 1200, 1000, ERR_TIMEOUT);
}

static void test_leader_quorum_sizes(void **state)
{
    (void)state;
    struct server_timeout_view v;
    memset(&v, 0, sizeof v);
    v.self = 1;
    v.lead = 1;
    v.election_ms = ET;
    /* A lone member is its own quorum. */
    v.n = 1;
    v.id[0] = 1;
    assert_int_equal(server__timeout_err(&v, 1000), ERR_TIMEOUT);
    /* 4 members need 3; 5 need 3 (self + 2 linked peers). */
    for (uint64_t i = 0; i < 5; i++)
        v.id[i] = i + 1;
    v.n = 4;
    v.active_since_ms[1] = 10;
    assert_int_equal(server__timeout_err(&v, 1000), ERR_TIMEOUT_CONN_LOST);
    v.active_since_ms[2] = 10;
    assert_int_equal(server__timeout_err(&v, 1000), ERR_TIMEOUT);
    v.n = 5;
    assert_int_equal(server__timeout_err(&v, 1000), ERR_TIMEOUT);
    v.active_since_ms[2] = 0;
    v.active_since_ms[4] = 10;
    assert_int_equal(server__timeout_err(&v, 1000), ERR_TIMEOUT);
    v.active_since_ms[4] = 0;
    assert_int_equal(server__timeout_err(&v, 1000), ERR_TIMEOUT_CONN_LOST);
}

/* --- rule 4: a follower and its leader ----------------------------------- */

static void test_follower_link(void **state)
{
    (void)state;
    /* Only the link to the leader matters. */
    EXPECT3(2, 500, 0, 1000, ERR_TIMEOUT);
    EXPECT3(2, 0, 500, 1000, ERR_TIMEOUT_CONN_LOST);
    /* Broken and back after the start (the request was lost with it). */
    EXPECT3(2, 1200, 500, 1000, ERR_TIMEOUT_CONN_LOST);
    /* A leader that is not among the known members: no link to it. */
    EXPECT3(7, 500, 500, 1000, ERR_TIMEOUT_CONN_LOST);
}

/* --- the registry passes each waiter's start time ------------------------ */

struct seen {
    int n;        /* done calls */
    int err[4];   /* their errors, in call order */
    int ids[4];   /* which waiter (its argument) */
};

static struct seen g_seen;

static void on_done(void *arg, const struct server_response *r)
{
    g_seen.err[g_seen.n] = r->err;
    g_seen.ids[g_seen.n] = (int)(intptr_t)arg;
    g_seen.n++;
}

/* A chooser that tells the start times apart: the start 1000 gets
 * LEADER_FAIL, any other CONN_LOST; it counts its calls. */
static int why(void *ctx, uint64_t start_ms)
{
    (*(int *)ctx)++;
    return start_ms == 1000 ? ERR_TIMEOUT_LEADER_FAIL : ERR_TIMEOUT_CONN_LOST;
}

static void test_wait_expire_reasons(void **state)
{
    (void)state;
    static struct server_wait w;
    server_wait_init(&w);
    memset(&g_seen, 0, sizeof g_seen);
    assert_int_equal(server_wait_register(&w, 11, on_done, (void *)1, 1000,
                                          8000), 0);
    assert_int_equal(server_wait_register(&w, 12, on_done, (void *)2, 2000,
                                          9000), 0);
    assert_int_equal(server_wait_register(&w, 13, on_done, (void *)3, 5000,
                                          12000), 0);
    int calls = 0;
    /* Nothing is past its deadline: the chooser is not even asked. */
    server_wait_expire(&w, 8000, why, &calls);
    assert_int_equal(g_seen.n, 0);
    assert_int_equal(calls, 0);
    server_wait_expire(&w, 9500, why, &calls);
    assert_int_equal(g_seen.n, 2);
    assert_int_equal(calls, 2);
    for (int i = 0; i < 2; i++)
        assert_int_equal(g_seen.err[i], g_seen.ids[i] == 1
                                            ? ERR_TIMEOUT_LEADER_FAIL
                                            : ERR_TIMEOUT_CONN_LOST);
    assert_true(g_seen.ids[0] + g_seen.ids[1] == 3);
    /* The third still waits and is answered by its owner. */
    server_done_fn done;
    void *arg;
    assert_false(server_wait_take(&w, 11, &done, &arg));
    assert_true(server_wait_take(&w, 13, &done, &arg));
    assert_ptr_equal(arg, (void *)3);
    server_wait_destroy(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leader_fail_window),
        cmocka_unit_test(test_leader_fail_first),
        cmocka_unit_test(test_no_leader),
        cmocka_unit_test(test_leader_quorum),
        cmocka_unit_test(test_leader_quorum_sizes),
        cmocka_unit_test(test_follower_link),
        cmocka_unit_test(test_wait_expire_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
