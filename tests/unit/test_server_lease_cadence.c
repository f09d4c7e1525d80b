/*
 * test_server_lease_cadence.c - goal: the checkpoint cadence of the
 * leader's lessor (lease.h, issue 17).  A lease's period is half its TTL,
 * at least SERVER_LEASE_CHECKPOINT_MIN_MS, at most the checkpoint
 * interval; a lease left alone gets a record once its period has passed
 * since its grant, renewal, last record or the promotion; a lease renewed
 * more often than that gets none (it costs nothing); due leases go at
 * most SERVER_LEASE_CHECKPOINT_RATE a second (half of it a tick); a
 * renewal of a lease with a record or a checkpoint on its way clears the
 * record before it answers; across a chain of leader changes (here:
 * restarts of a single member, each a new leadership, whose records are
 * anchored when the table is read at start-up) a 10 s lease not kept
 * alive expires within the bound of docs/ARCHITECTURE.md "Leases", where
 * it lived from each new leader's start for its full TTL before; and
 * across a chain of four leader changes with no restart (a new lead
 * epoch on a table whose records were applied here, as on a member that
 * was up when they committed) its expiry does not move with the number of
 * changes: each new leader starts it from the record's anchor (its apply
 * time), or, with no record, from its full TTL and records it at once; a
 * renewal clears the anchor; a new leader is promoted only once it has
 * applied its term's first entry.
 *
 * Method: a real single member (unit/harness) on a fake clock (an atomic
 * the test sets; server.h "struct server_clock").  tick_at() sets the
 * clock and waits for the events, not for time: the lessor tick at that
 * time (tick_next_ms moves past it), the end of the house pass that ran
 * it (house_mu free: its proposals are in), then a put applied after
 * them (entries apply in order).  Nothing else moves the fake clock, so
 * every lease time below is exact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "server/lease.h"
#include "server/server.h"
#include "server/server_int.h"
#include "server_harness.h"
#include "util/err.h"

static char dir[256];
static _Atomic uint64_t fake_ms;
static uint64_t t0; /* the fake time the test starts at */

static uint64_t fake_now(void *ctx)
{
    return atomic_load((_Atomic uint64_t *)ctx);
}

static struct server *start(void)
{
    struct server_config c = harness_config(dir);
    c.clock = (struct server_clock){.now_ms = fake_now, .ctx = &fake_ms};
    struct server *s = harness_start(&c);
    harness_wait_published(s);
    return s;
}

static uint64_t tick_next(struct server *s)
{
    pthread_mutex_lock(&s->leases.mu);
    uint64_t t = s->leases.tick_next_ms;
    pthread_mutex_unlock(&s->leases.mu);
    return t;
}

/* The lessor tick at t0 + ms (at least a tick after the last one), its
 * proposals applied. */
static void tick_at(struct server *s, uint64_t ms)
{
    uint64_t t = t0 + ms;
    atomic_store(&fake_ms, t);
    for (int i = 0; i < 1000 && tick_next(s) != t + SERVER_LEASE_TICK_MS;
         i++)
        harness_sleep_ms(5);
    assert_int_equal(tick_next(s), t + SERVER_LEASE_TICK_MS);
    pthread_mutex_lock(&s->house_mu); /* the pass that ticked is over */
    pthread_mutex_unlock(&s->house_mu);
    assert_int_equal(harness_put(s, "sync", "x"), 0);
}

static void grant(struct server *s, int64_t id, int64_t ttl)
{
    assert_int_equal(harness_lease_grant(s, id, ttl), 0);
}

/* The lease's record (-1: not held). */
static int64_t record_of(struct server *s, int64_t id)
{
    pthread_mutex_lock(&s->leases.mu);
    struct server_lease *l = server__lease_find(&s->leases, id);
    int64_t r = l != NULL ? l->remaining : -1;
    pthread_mutex_unlock(&s->leases.mu);
    return r;
}

static uint64_t checkpoints(struct server *s)
{
    return atomic_load(&s->leases.cp_total);
}

static int renew(struct server *s, int64_t id)
{
    return harness_lease_renew(s, id, NULL);
}

static void test_period(void **state)
{
    (void)state;
    const uint64_t iv = SERVER_LEASE_CHECKPOINT_MS;
    assert_int_equal(server__lease_cp_period_ms(10, iv), 5000);
    assert_int_equal(server__lease_cp_period_ms(1, iv), 1000); /* floor */
    assert_int_equal(server__lease_cp_period_ms(3, iv), 1500);
    assert_int_equal(server__lease_cp_period_ms(3600, iv), iv); /* cap */
    /* --experimental-lease-checkpoint-interval bounds it, even below the
     * floor (the flag's smallest value is 1 ms). */
    assert_int_equal(server__lease_cp_period_ms(10, 2000), 2000);
    assert_int_equal(server__lease_cp_period_ms(10, 1), 1);
}

static void test_left_alone_then_renewed(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0); /* promoted */
    grant(s, 1, 10);
    tick_at(s, 4500);
    assert_int_equal(record_of(s, 1), 0);
    assert_int_equal(checkpoints(s), 0);
    tick_at(s, 5000); /* half the TTL since the grant */
    assert_int_equal(record_of(s, 1), 5);
    assert_int_equal(checkpoints(s), 1);
    tick_at(s, 9500); /* the next is due at 10 s: expired then */
    assert_int_equal(record_of(s, 1), 5);
    assert_int_equal(checkpoints(s), 1);
    /* A renewal clears the record before it answers, and starts a new
     * period. */
    assert_int_equal(renew(s, 1), 0);
    assert_int_equal(record_of(s, 1), 0);
    tick_at(s, 14000);
    assert_int_equal(record_of(s, 1), 0);
    tick_at(s, 14500);
    assert_int_equal(record_of(s, 1), 5);
    /* A renewal of a lease whose checkpoint is on its way (the window
     * between proposal and apply, set here by hand) clears it too. */
    assert_int_equal(renew(s, 1), 0);
    pthread_mutex_lock(&s->leases.mu);
    server__lease_find(&s->leases, 1)->cp_sent = true;
    pthread_mutex_unlock(&s->leases.mu);
    uint64_t applied = atomic_load(&s->applied_index);
    assert_int_equal(renew(s, 1), 0);
    assert_true(atomic_load(&s->applied_index) > applied); /* an entry */
    pthread_mutex_lock(&s->leases.mu);
    assert_false(server__lease_find(&s->leases, 1)->cp_sent);
    pthread_mutex_unlock(&s->leases.mu);
    server_stop(s);
}

static void test_kept_alive_costs_nothing(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    grant(s, 2, 10);
    /* Renewed every 4 s (< 5 s, half the TTL) for a minute: no record,
     * and each renewal is answered without an entry. */
    for (uint64_t ms = 500; ms <= 60000; ms += 500) {
        tick_at(s, ms);
        if (ms % 4000 == 0) {
            uint64_t applied = atomic_load(&s->applied_index);
            assert_int_equal(renew(s, 2), 0);
            assert_int_equal(atomic_load(&s->applied_index), applied);
        }
    }
    assert_int_equal(checkpoints(s), 0);
    assert_int_equal(record_of(s, 2), 0);
    server_stop(s);
}

static void test_rate(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    for (int64_t id = 1; id <= 1200; id++)
        grant(s, id, 4); /* period 2 s */
    tick_at(s, 1500);
    assert_int_equal(checkpoints(s), 0);
    /* Half a second of the rate a tick, the rest at the next ticks. */
    tick_at(s, 2000);
    assert_int_equal(checkpoints(s), SERVER_LEASE_CHECKPOINT_RATE / 2);
    tick_at(s, 2500);
    assert_int_equal(checkpoints(s), SERVER_LEASE_CHECKPOINT_RATE);
    tick_at(s, 3000);
    assert_int_equal(checkpoints(s), 1200);
    tick_at(s, 3500);
    assert_int_equal(checkpoints(s), 1200);
    size_t with = 0;
    for (int64_t id = 1; id <= 1200; id++)
        with += record_of(s, id) >= 1 && record_of(s, id) <= 2;
    assert_int_equal(with, 1200);
    server_stop(s);
}

/* Restart the member at t0 + ms: a new leadership on the same table. */
static struct server *restart(struct server *s, uint64_t ms)
{
    server_stop(s);
    atomic_store(&fake_ms, t0 + ms);
    s = start();
    tick_at(s, ms); /* promoted */
    return s;
}

static void test_chain_of_leader_changes(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    grant(s, 3, 10); /* granted (as renewed) at 0: expires at 10 s */
    tick_at(s, 5000);
    assert_int_equal(record_of(s, 3), 5);
    /* Two leader changes less than a TTL apart, none within the lease's
     * life of a keep-alive.  Each new leader starts it from the record:
     * 7 + 5 = 12 s, then (its next period would end at 12 s, expired)
     * 11 + 5 = 16 s.  Before, each started it from its full TTL: 7 + 10,
     * then 11 + 10 = 21 s. */
    s = restart(s, 7000);
    tick_at(s, 10000);
    assert_int_equal(record_of(s, 3), 5);
    s = restart(s, 11000);
    tick_at(s, 15500);
    assert_int_equal(record_of(s, 3), 5);
    tick_at(s, 16000);
    /* Revoked at 16 s: each restart anchored the record when it read the
     * table (7 s, then 11 s), later than it was taken (5 s): the lease
     * lives longer, never shorter (here a single member has nothing
     * better).  Within TTL + m (P + 2 s) for m = 2, no earlier than the
     * TTL. */
    assert_int_equal(record_of(s, 3), -1);
    server_stop(s);
}

/* The lease's expiry on the primary (0: none or not held). */
static uint64_t expiry_of(struct server *s, int64_t id)
{
    pthread_mutex_lock(&s->leases.mu);
    struct server_lease *l = server__lease_find(&s->leases, id);
    uint64_t e = l != NULL ? l->expiry_ms : 0;
    pthread_mutex_unlock(&s->leases.mu);
    return e;
}

/* A leader change at t0 + ms without a restart: a new lead epoch, as the
 * raft thread makes when this member becomes leader, on a table whose
 * records were applied here (a member that was up and caught up when they
 * committed), then the promoting tick. */
static void new_leader(struct server *s, uint64_t ms)
{
    atomic_fetch_add(&s->lead_epoch, 1);
    tick_at(s, ms);
}

static void test_chain_from_an_anchored_record(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    grant(s, 4, 10); /* expires at 10 s */
    tick_at(s, 5000);
    assert_int_equal(record_of(s, 4), 5); /* applied at 5 s: ends 10 s */
    assert_int_equal(checkpoints(s), 1);
    /* Four leader changes a second apart: each new leader starts it from
     * the record's anchor, 5 + 5 = 10 s, whatever the number of changes
     * (it was 6 + 5, 7 + 5, ... 9 + 5 = 14 s, from each promotion), and
     * takes no record of its own (inherited). */
    for (uint64_t ms = 6000; ms <= 9000; ms += 1000) {
        new_leader(s, ms);
        assert_int_equal(expiry_of(s, 4), t0 + 10000);
    }
    assert_int_equal(checkpoints(s), 1);
    tick_at(s, 9500);
    assert_int_equal(record_of(s, 4), 5);
    tick_at(s, 10000); /* revoked at its TTL, no later */
    assert_int_equal(record_of(s, 4), -1);
    server_stop(s);
}

/* The tick looks at the lease table only when a lease may expire or fall
 * due by then (leases.wake_ms): none between, the record and the revoke
 * on time. */
static void test_no_look_while_nothing_can_happen(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    grant(s, 6, 100); /* period 50 s, expires at 100 s */
    uint64_t looks = atomic_load(&s->leases.looks);
    for (uint64_t ms = 500; ms < 50000; ms += 500)
        tick_at(s, ms);
    assert_int_equal(atomic_load(&s->leases.looks), looks);
    assert_int_equal(checkpoints(s), 0);
    tick_at(s, 50000); /* due: one look, one record */
    assert_int_equal(atomic_load(&s->leases.looks), looks + 1);
    assert_int_equal(checkpoints(s), 1);
    for (uint64_t ms = 50500; ms < 100000; ms += 500)
        tick_at(s, ms);
    assert_int_equal(atomic_load(&s->leases.looks), looks + 1);
    assert_int_equal(record_of(s, 6), 50);
    tick_at(s, 100000); /* expired: revoked at its TTL, no later */
    assert_int_equal(record_of(s, 6), -1);
    server_stop(s);
}

static void test_chain_from_no_record(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    grant(s, 5, 10);
    /* A leader change before the lease's first record (its period is
     * 5 s): the full TTL from the promotion, 2 + 10 = 12 s, and a record
     * at once (10 s left, exact), applied at 2 s. */
    new_leader(s, 2000);
    assert_int_equal(expiry_of(s, 5), t0 + 12000);
    assert_int_equal(record_of(s, 5), 10);
    assert_int_equal(checkpoints(s), 1);
    /* Then more leader changes, each less than a period after the last:
     * 12 s every time (before, each restarted it from the full TTL, with
     * no record ever taken: 3 + 10, 4 + 10, 6 + 10 and 8 + 10 = 18 s). */
    for (uint64_t ms = 3000; ms <= 8000; ms += ms < 4000 ? 1000 : 2000) {
        new_leader(s, ms);
        assert_int_equal(expiry_of(s, 5), t0 + 12000);
    }
    assert_int_equal(checkpoints(s), 1);
    tick_at(s, 11500);
    assert_int_equal(record_of(s, 5), 10);
    tick_at(s, 12000);
    assert_int_equal(record_of(s, 5), -1);
    server_stop(s);
}

static void test_renewal_clears_the_anchor(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    grant(s, 6, 10);
    tick_at(s, 5000); /* a record applied at 5 s: ends 10 s */
    new_leader(s, 6000);
    assert_int_equal(expiry_of(s, 6), t0 + 10000);
    /* A renewal at 6 s, acknowledged once the cleared record is applied:
     * no anchor is left, the lease ends 16 s on this leader... */
    assert_int_equal(renew(s, 6), 0);
    assert_int_equal(record_of(s, 6), 0);
    assert_int_equal(expiry_of(s, 6), t0 + 16000);
    /* ... and a next leader starts it from the full TTL (7 + 10 s), not
     * from the old anchor (10 s, before the renewal's 16 s), with a new
     * record at once, which the leader after it starts from. */
    new_leader(s, 7000);
    assert_int_equal(expiry_of(s, 6), t0 + 17000);
    assert_int_equal(record_of(s, 6), 10);
    new_leader(s, 8000);
    assert_int_equal(expiry_of(s, 6), t0 + 17000);
    tick_at(s, 16500);
    assert_int_equal(record_of(s, 6), 10);
    tick_at(s, 17000);
    assert_int_equal(record_of(s, 6), -1);
    server_stop(s);
}

/* A new leader is promoted only once it has applied its term's first
 * entry (s->lead_index): a renewal's cleared record committed under the
 * last leader may not be applied here yet, and an older anchor must not
 * expire the lease meanwhile.  The tick is called here directly at a time
 * the house thread does not reach (the fake clock stays behind). */
static void test_promotion_waits_for_the_log(void **state)
{
    (void)state;
    struct server *s = start();
    tick_at(s, 0);
    grant(s, 7, 10);
    tick_at(s, 5000); /* ends 10 s */
    uint64_t applied = atomic_load(&s->applied_index);
    uint64_t lead_index = atomic_load(&s->lead_index);
    atomic_store(&s->lead_index, applied + 1000);
    atomic_fetch_add(&s->lead_epoch, 1);
    server__leases_tick(s, t0 + 11000); /* past the anchor */
    pthread_mutex_lock(&s->leases.mu);
    assert_int_equal(s->leases.epoch, 0); /* not promoted */
    assert_int_equal(s->leases.tick_next_ms, t0 + 5500);
    pthread_mutex_unlock(&s->leases.mu);
    assert_int_equal(record_of(s, 7), 5); /* no revoke */
    atomic_store(&s->lead_index, lead_index);
    tick_at(s, 6000); /* caught up: promoted, from the anchor */
    assert_int_equal(expiry_of(s, 7), t0 + 10000);
    server_stop(s);
}

static int setup(void **state)
{
    (void)state;
    t0 = harness_now_ms();
    atomic_store(&fake_ms, t0);
    return harness_dir_make(dir, sizeof dir, "lease-cadence");
}

static int teardown(void **state)
{
    (void)state;
    return harness_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_period),
        cmocka_unit_test_setup_teardown(test_left_alone_then_renewed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kept_alive_costs_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_of_leader_changes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_chain_from_an_anchored_record,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_look_while_nothing_can_happen,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_chain_from_no_record, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_renewal_clears_the_anchor, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_promotion_waits_for_the_log,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
