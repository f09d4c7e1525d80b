/*
 * test_server_lease.c - goal: the lessor (server/lease*.c) on the server's
 * clock: a lease expires its TTL after its grant or last renewal and not
 * before (its keys go with it); expired leases are revoked at most
 * SERVER_LEASE_REVOKE_RATE a second (half of it per lessor tick); the
 * leader checkpoints remaining TTLs every interval, a renewal clears the
 * record before it is acknowledged, and a member that leads again
 * continues each lease from its checkpoint (here: after a restart); the
 * bucket codec refuses what it did not write.
 *
 * Method: a real single member on a temporary data dir with a fake clock
 * (an atomic counter the test advances; server.h "struct server_clock").
 * The house thread runs the lessor tick when the fake clock passes its
 * next slow pass (house.c), so each advance of the clock gives one tick,
 * and nothing expires while the clock stands still however long the test
 * waits in real time.
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

#include "server/lease.h"
#include "server/server.h"
#include "server_harness.h"
#include "server/server_int.h"
#include "util/err.h"

static char dir[256];
static _Atomic uint64_t fake_ms;

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

static struct server *start(uint64_t checkpoint_ms)
{
    struct server_config c = {
        .name = "default",
        .data_dir = dir,
        .peer_urls = "http://localhost:2380",
        .client_urls = "http://localhost:2379",
        .cluster_token = "etcd-cluster",
        .initial_cluster = "default=http://localhost:2380",
        .heartbeat_ms = 100,
        .election_ms = 1000,
        .snapshot_count = 100000,
        .max_request_bytes = 1572864,
        .max_txn_ops = 128,
        .lease_checkpoint_ms = checkpoint_ms,
        .clock = {.now_ms = fake_now, .ctx = &fake_ms},
    };
    struct server *s;
    assert_int_equal(server_start(&c, &s), 0);
    for (int i = 0; i < 500 && !server_published(s); i++)
        sleep_ms(10);
    assert_true(server_published(s));
    return s;
}

static _Atomic int answered;

static void on_done(void *arg, const struct server_response *r)
{
    (void)arg;
    assert_int_equal(r->err, 0);
    atomic_fetch_add(&answered, 1);
}

static void propose(struct server *s, Cetcdpb__InternalRequest *ir)
{
    int before = atomic_load(&answered);
    assert_int_equal(server_propose(s, ir, on_done, NULL), 0);
    for (int i = 0; i < 500 && atomic_load(&answered) == before; i++)
        sleep_ms(5);
    assert_int_equal(atomic_load(&answered), before + 1);
}

static void grant(struct server *s, int64_t id, int64_t ttl)
{
    assert_int_equal(harness_lease_grant(s, id, ttl), 0);
}

static void put(struct server *s, const char *key, int64_t lease)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.lease = lease;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    propose(s, &ir);
}

static size_t leases_held(struct server *s)
{
    pthread_mutex_lock(&s->leases.mu);
    size_t n = s->leases.n;
    pthread_mutex_unlock(&s->leases.mu);
    return n;
}

/* Moves the fake clock and waits for the house pass it allows and the
 * revokes that pass proposed (until the count holds still for 200 ms). */
static size_t advance(struct server *s, uint64_t ms)
{
    atomic_fetch_add(&fake_ms, ms);
    sleep_ms(250);
    size_t n = leases_held(s);
    for (int i = 0; i < 100; i++) {
        sleep_ms(200);
        size_t m = leases_held(s);
        if (m == n)
            break;
        n = m;
    }
    return n;
}

static int64_t key_count(struct server *s, const char *key)
{
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    q.key.data = (uint8_t *)key;
    q.key.len = strlen(key);
    Etcdserverpb__RangeResponse *resp;
    struct server_read *rd;
    assert_int_equal(server_range(s, &q, &resp, &rd), 0);
    int64_t n = resp->count;
    server_read_end(rd);
    return n;
}

static int64_t renew_ttl; /* the last renewal's TTL */

static int renew(struct server *s, int64_t id)
{
    return harness_lease_renew(s, id, &renew_ttl);
}

static void test_expiry_and_renewal(void **state)
{
    (void)state;
    atomic_store(&fake_ms, real_ms());
    struct server *s = start(0);
    grant(s, 7, 5);
    put(s, "k", 7);
    assert_int_equal(key_count(s, "k"), 1);
    /* Real time passes, the fake clock stands: nothing expires. */
    sleep_ms(800);
    assert_int_equal(advance(s, 4900), 1);
    /* A renewal at 4.9 s moves the expiry to 5 s from now. */
    assert_int_equal(renew(s, 7), 0);
    assert_int_equal(renew_ttl, 5);
    assert_int_equal(advance(s, 4900), 1);
    assert_true(server__lease_exists(s, 7));
    /* The next tick (ticks are SERVER_LEASE_TICK_MS apart) finds it
     * expired. */
    assert_int_equal(advance(s, SERVER_LEASE_TICK_MS), 0);
    assert_false(server__lease_exists(s, 7));
    assert_int_equal(renew(s, 7), ERR_LEASE_NOT_FOUND);
    assert_int_equal(key_count(s, "k"), 0); /* its key went with it */
    server_stop(s);
}

static void test_revoke_rate(void **state)
{
    (void)state;
    atomic_store(&fake_ms, real_ms());
    struct server *s = start(0);
    for (int64_t id = 1; id <= 1200; id++)
        grant(s, id, 2);
    assert_int_equal(leases_held(s), 1200);
    /* One tick revokes half a second's worth: 500. */
    assert_int_equal(advance(s, 3000), 700);
    assert_int_equal(advance(s, 500), 200);
    assert_int_equal(advance(s, 500), 0);
    server_stop(s);
}

static int64_t remaining_of(struct server *s, int64_t id)
{
    pthread_mutex_lock(&s->leases.mu);
    struct server_lease *l = server__lease_find(&s->leases, id);
    int64_t r = l != NULL ? l->remaining : -1;
    pthread_mutex_unlock(&s->leases.mu);
    return r;
}

static _Atomic int64_t ttl_left = -2;

static void on_ttl(void *arg, int err, const struct server_lease_ttl *t)
{
    (void)arg;
    atomic_store(&ttl_left, err == 0 ? t->ttl : err);
}

static void test_checkpoint_renew_and_restart(void **state)
{
    (void)state;
    atomic_store(&fake_ms, real_ms());
    struct server *s = start(1000);
    grant(s, 9, 100);
    assert_int_equal(remaining_of(s, 9), 0);
    /* The sweep a second after the promotion records what is left. */
    advance(s, 1500);
    advance(s, 500);
    int64_t rem = remaining_of(s, 9);
    assert_true(rem >= 98 && rem <= 100);
    /* A renewal clears the record before it answers. */
    assert_int_equal(renew(s, 9), 0);
    assert_int_equal(renew_ttl, 100);
    assert_int_equal(remaining_of(s, 9), 0);
    /* The next sweep records it again; a restart (a new leadership)
     * continues from the record, not from the full TTL. */
    advance(s, 30000);
    advance(s, 500);
    rem = remaining_of(s, 9);
    assert_true(rem >= 69 && rem <= 71);
    server_stop(s);
    s = start(1000);
    assert_int_equal(remaining_of(s, 9), rem);
    atomic_store(&ttl_left, -2);
    server_lease_time_to_live(s, 9, false, true, on_ttl, NULL);
    for (int i = 0; i < 500 && atomic_load(&ttl_left) == -2; i++)
        sleep_ms(5);
    assert_true(atomic_load(&ttl_left) <= rem &&
                atomic_load(&ttl_left) >= rem - 2);
    /* With less than an interval left a lease with a record still gets
     * checkpointed, so the record is never more than an interval old. */
    advance(s, (uint64_t)(rem - 1) * 1000u);
    advance(s, 500);
    assert_true(remaining_of(s, 9) >= 1 && remaining_of(s, 9) <= 2);
    server_stop(s);
}

static void test_codec(void **state)
{
    (void)state;
    struct server_lease l = {.id = 0x1234, .ttl = 60, .remaining = 17};
    uint8_t k[SERVER_LEASE_KEY_BYTES], v[SERVER_LEASE_VAL_BYTES];
    server__lease_encode(&l, k, v);
    struct server_lease out;
    assert_int_equal(server__lease_decode(k, sizeof k, v, sizeof v, &out), 0);
    assert_true(out.id == 0x1234 && out.ttl == 60 && out.remaining == 17);
    assert_int_equal(server__lease_decode(k, 7, v, sizeof v, &out),
                     ERR_CORRUPT);
    assert_int_equal(server__lease_decode(k, sizeof k, v, 15, &out),
                     ERR_CORRUPT);
    uint8_t zero[SERVER_LEASE_KEY_BYTES] = {0};
    assert_int_equal(server__lease_decode(zero, sizeof zero, v, sizeof v,
                                          &out), ERR_CORRUPT);
    uint8_t bad[SERVER_LEASE_VAL_BYTES] = {0}; /* ttl 0 */
    assert_int_equal(server__lease_decode(k, sizeof k, bad, sizeof bad, &out),
                     ERR_CORRUPT);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-test-lease-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec),
        cmocka_unit_test_setup_teardown(test_expiry_and_renewal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_revoke_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_renew_and_restart,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
