/*
 * test_server_task.c - goal: the task runner (server/task.c, server.h
 * "Tasks"): a task posted twice before it runs runs once; tasks run in
 * post order; a task still queued when the server stops runs at the drain
 * with stopping = true.  Method: a real server on a temporary data dir; a
 * first task holds the runner (it waits on a flag the test sets) while the
 * others are posted.
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

static char dir[256];

static struct server *start(void)
{
    snprintf(dir, sizeof dir, "/tmp/cetcd-test-task-XXXXXX");
    assert_non_null(mkdtemp(dir));
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
    };
    struct server *s;
    assert_int_equal(server_start(&c, &s), 0);
    return s;
}

static void rm_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static atomic_bool release_gate;
static atomic_int order_n;
static int order[8];
static atomic_int runs_b, runs_c, stopping_d;

static void gate_fn(struct server_task *t, bool stopping)
{
    (void)t;
    (void)stopping;
    while (!atomic_load(&release_gate))
        nap_ms(1);
}

static void record(int id)
{
    int i = atomic_fetch_add(&order_n, 1);
    if (i < 8)
        order[i] = id;
}

static void b_fn(struct server_task *t, bool stopping)
{
    (void)t;
    assert_false(stopping);
    atomic_fetch_add(&runs_b, 1);
    record(2);
}

static void c_fn(struct server_task *t, bool stopping)
{
    (void)t;
    assert_false(stopping);
    atomic_fetch_add(&runs_c, 1);
    record(3);
}

static void d_fn(struct server_task *t, bool stopping)
{
    (void)t;
    atomic_store(&stopping_d, stopping ? 1 : 2);
}

static void test_post_twice_runs_once_in_order(void **state)
{
    (void)state;
    struct server *s = start();
    struct server_task a = {.fn = gate_fn}, b = {.fn = b_fn},
                       c = {.fn = c_fn};
    atomic_store(&release_gate, false);
    server_task_post(s, &a);
    nap_ms(50); /* a runs and holds the runner */
    server_task_post(s, &b);
    server_task_post(s, &c);
    server_task_post(s, &b); /* queued already: nothing */
    atomic_store(&release_gate, true);
    for (int i = 0; i < 200 && atomic_load(&runs_c) == 0; i++)
        nap_ms(5);
    nap_ms(50);
    assert_int_equal(atomic_load(&runs_b), 1);
    assert_int_equal(atomic_load(&runs_c), 1);
    assert_int_equal(atomic_load(&order_n), 2);
    assert_int_equal(order[0], 2);
    assert_int_equal(order[1], 3);
    server_stop(s);
    rm_dir();
}

static void *stopper(void *arg)
{
    server_stop(arg);
    return NULL;
}

static void test_queued_at_stop_runs_stopping(void **state)
{
    (void)state;
    struct server *s = start();
    struct server_task a = {.fn = gate_fn}, d = {.fn = d_fn};
    atomic_store(&release_gate, false);
    atomic_store(&stopping_d, 0);
    server_task_post(s, &a);
    nap_ms(50);
    server_task_post(s, &d);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stopper, s), 0);
    nap_ms(300); /* server_stop has asked the runner to stop */
    atomic_store(&release_gate, true);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&stopping_d), 1);
    rm_dir();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_post_twice_runs_once_in_order),
        cmocka_unit_test(test_queued_at_stop_runs_stopping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
