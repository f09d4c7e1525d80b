/*
 * test_server_clock.c - goal: the server's timers read the clock its
 * config gives (struct server_clock), so a test can make time pass without
 * sleeping: a request still pending when the test moves the clock past its
 * deadline is failed with etcd's "request timed out" (timeout.c, run by the
 * house thread) at once, and not before the clock moves, however long the
 * test waits in real time.  Method: a real single member on a temporary
 * data dir with a fake clock (an atomic counter the test advances, started
 * at the real CLOCK_MONOTONIC time); the test holds raft_mu, which every
 * raft pass needs, so that its proposal stays queued and pending.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"
#include "server_harness.h"
#include "server/server_int.h"
#include "util/err.h"

#define ELECTION_MS 1000
#define HOUSE_SLOW_MS 500 /* house.c: expiry passes, once published */

static char dir[256];
static _Atomic uint64_t fake_ms; /* the fake clock's time */

static uint64_t fake_now(void *ctx)
{
    return atomic_load((_Atomic uint64_t *)ctx);
}

static uint64_t real_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
    const struct timespec t = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&t, NULL);
}

static struct server *start(void)
{
    struct server_config c = harness_config(dir);
    c.election_ms = ELECTION_MS;
    c.clock = (struct server_clock){.now_ms = fake_now, .ctx = &fake_ms};
    struct server *s = harness_start(&c);
    return s;
}

/* What the proposal's callback got (-1: not called yet). */
static _Atomic int got = -1;
static _Atomic int calls;

static void on_done(void *arg, const struct server_response *r)
{
    (void)arg;
    atomic_store(&got, r->err);
    atomic_fetch_add(&calls, 1);
}

static void propose_put(struct server *s)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)"k";
    p.key.len = 1;
    p.value.data = (uint8_t *)"v";
    p.value.len = 1;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    assert_int_equal(server_propose(s, &ir, on_done, NULL), 0);
}

/* The clock the config gave is the one the server reads. */
static void test_clock_is_the_config_one(void **state)
{
    (void)state;
    atomic_store(&fake_ms, real_ms());
    struct server *s = start();
    assert_int_equal(server__clock_ms(s), atomic_load(&fake_ms));
    atomic_fetch_add(&fake_ms, 12345);
    assert_int_equal(server__clock_ms(s), atomic_load(&fake_ms));
    server_stop(s);
}

static void test_pending_request_times_out_on_the_fake_clock(void **state)
{
    (void)state;
    atomic_store(&fake_ms, real_ms());
    atomic_store(&got, -1);
    atomic_store(&calls, 0);
    struct server *s = start();
    /* A lone voter campaigns at start; it publishes itself on the house
     * thread (which needs a raft pass, so before the test holds raft_mu). */
    for (int i = 0; i < 500 && !server_published(s); i++)
        sleep_ms(10);
    assert_true(server_published(s));
    uint64_t timeout_ms = server__request_timeout_ms(s);
    assert_int_equal(timeout_ms, 5000 + 2 * ELECTION_MS);

    pthread_mutex_lock(&s->node.raft_mu);
    uint64_t t0 = real_ms();
    propose_put(s);
    /* Real time passes (the house thread expires requests at least twice
     * a second), the fake clock does not: nothing times out. */
    sleep_ms(700);
    assert_int_equal(atomic_load(&calls), 0);
    /* The fake clock reaches the deadline exactly: not past it yet. */
    atomic_fetch_add(&fake_ms, timeout_ms);
    sleep_ms(700);
    assert_int_equal(atomic_load(&calls), 0);
    /* Past the deadline, and past the house thread's next expiry pass,
     * due HOUSE_SLOW_MS (house.c) after the one that ran at the deadline:
     * that pass fails it. */
    atomic_fetch_add(&fake_ms, HOUSE_SLOW_MS);
    for (int i = 0; i < 300 && atomic_load(&calls) == 0; i++)
        sleep_ms(10);
    assert_int_equal(atomic_load(&calls), 1);
    assert_int_equal(atomic_load(&got), ERR_TIMEOUT);
    /* Well before the real request timeout. */
    assert_true(real_ms() - t0 < timeout_ms);
    /* The applied index before raft runs again (read while raft_mu is
     * held: once it is released the pass may apply the entry at once). */
    struct server_stats st;
    server_stats_get(s, &st);
    uint64_t before = st.applied_index;
    pthread_mutex_unlock(&s->node.raft_mu);

    /* The entry is still proposed and applied once raft runs again; its
     * waiter is gone, so the callback is not called a second time. */
    server__kick(s);
    for (int i = 0; i < 300 && st.applied_index == before; i++) {
        sleep_ms(10);
        server_stats_get(s, &st);
    }
    assert_true(st.applied_index > before);
    assert_int_equal(atomic_load(&calls), 1);
    server_stop(s);
}

static int setup(void **state)
{
    (void)state;
    return harness_dir_make(dir, sizeof dir, "test-clock");
}

static int teardown(void **state)
{
    (void)state;
    return harness_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clock_is_the_config_one, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_pending_request_times_out_on_the_fake_clock, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
