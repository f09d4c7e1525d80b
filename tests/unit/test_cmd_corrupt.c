/*
 * test_cmd_corrupt.c - goal: the corruption checks' CPU budget
 * (corrupt_next_wait_ms, cmd/corrupt.h): a default interval is stretched
 * to CORRUPT_CPU_BUDGET times the last pass's CPU, never shortened; an
 * interval given explicitly is kept as given.  Method: the pure function
 * on passes below, at and above the budget's break-even.  (What the checks
 * cost at the defaults: bench/corrupt_threads.py, docs/BENCHMARKS.md.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cmd/corrupt.h"

#define MS 1000000ull /* ns */

static void test_budget_stretches_default_interval(void **state)
{
    (void)state;
    /* 5 min interval: a pass of 200 ms of CPU fits (200 s < 300 s) */
    assert_int_equal(corrupt_next_wait_ms(300000, 200 * MS, true), 300000);
    /* 300 ms is the break-even; 2 s waits 2000 s */
    assert_int_equal(corrupt_next_wait_ms(300000, 300 * MS, true), 300000);
    assert_int_equal(corrupt_next_wait_ms(300000, 2000 * MS, true),
                     2000000);
    /* a 1 min compaction check after a 700 ms hash: 700 s */
    assert_int_equal(corrupt_next_wait_ms(60000, 700 * MS, true), 700000);
    /* no pass (a follower, an alarm): the interval */
    assert_int_equal(corrupt_next_wait_ms(60000, 0, true), 60000);
}

static void test_explicit_interval_kept(void **state)
{
    (void)state;
    assert_int_equal(corrupt_next_wait_ms(1000, 2000 * MS, false), 1000);
    assert_int_equal(corrupt_next_wait_ms(60000, 700 * MS, false), 60000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_stretches_default_interval),
        cmocka_unit_test(test_explicit_interval_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
