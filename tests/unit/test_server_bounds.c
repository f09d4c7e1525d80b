/*
 * test_server_bounds.c - goal: every internal queue of the member that
 * takes network input has a bound, and a full one refuses with
 * ERR_TOO_MANY_REQUESTS (etcd's "etcdserver: too many requests") instead
 * of growing, and takes work again once it drains: the wait registry
 * (SERVER_WAIT_MAX), the commit-apply gap that bounds the committed queue
 * (SERVER_APPLY_GAP_MAX), linearizable reads waiting for their ReadIndex
 * round (SERVER_READS_MAX) and membership jobs (SERVER_MS_JOBS_MAX); the
 * store map's pages are dropped past their budget even while a writer
 * holds apply_mu (house.c).
 * Method: the wait registry alone; the rest on a real single member on a
 * temporary data dir, where the test holds raft_mu (which every raft pass
 * needs) so that nothing drains what it queues, or sets the committed
 * index ahead of the applied one.
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

#include "server/members.h"
#include "server/server.h"
#include "server_harness.h"
#include "server/server_int.h"
#include "server/wait.h"
#include "util/err.h"
#include "util/mem.h"

static char dir[256];

static void sleep_ms(long ms)
{
    const struct timespec t = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&t, NULL);
}

static struct server *start(void)
{
    struct server_config c = harness_config(dir);
    struct server *s = harness_start(&c);
    harness_wait_published(s);
    return s;
}

/* --- the wait registry ------------------------------------------------- */

static _Atomic int wait_calls;

static void count_done(void *arg, const struct server_response *r)
{
    (void)arg;
    (void)r;
    atomic_fetch_add(&wait_calls, 1);
}

static int why_timeout(void *ctx, uint64_t start_ms)
{
    (void)ctx;
    (void)start_ms;
    return ERR_TIMEOUT;
}

static void test_wait_registry_bounded(void **state)
{
    (void)state;
    struct server_wait *w = mem_malloc(sizeof *w);
    assert_non_null(w);
    server_wait_init(w);
    atomic_store(&wait_calls, 0);
    /* Consecutive ids fill every shard to its share. */
    for (uint64_t id = 1; id <= SERVER_WAIT_MAX; id++)
        assert_int_equal(server_wait_register(w, id, count_done, NULL, 0,
                                              id <= 10 ? 5 : 1000), 0);
    assert_int_equal(server_wait_register(w, SERVER_WAIT_MAX + 1, count_done,
                                          NULL, 0, 1000), ERR_FULL);
    /* A taken waiter makes room in its shard, and only there. */
    server_done_fn d;
    void *a;
    assert_true(server_wait_take(w, 1, &d, &a));
    assert_int_equal(server_wait_register(w, 2 + SERVER_WAIT_MAX, count_done,
                                          NULL, 0, 1000), ERR_FULL);
    assert_int_equal(server_wait_register(w, 1 + SERVER_WAIT_MAX, count_done,
                                          NULL, 0, 1000), 0);
    assert_int_equal(server_wait_register(w, 1 + 2 * SERVER_WAIT_MAX,
                                          count_done, NULL, 0, 1000),
                     ERR_FULL);
    /* Expired waiters (ids 2..10, deadline 5) make room too. */
    server_wait_expire(w, 6, why_timeout, NULL);
    assert_int_equal(atomic_load(&wait_calls), 9);
    assert_int_equal(server_wait_register(w, 2 + SERVER_WAIT_MAX, count_done,
                                          NULL, 0, 1000), 0);
    /* And failing all of them (MAX, less the taken one and the 9 expired,
     * plus the 2 registered since) empties every shard. */
    server_wait_fail_all(w, ERR_STOPPED);
    assert_int_equal(atomic_load(&wait_calls), 9 + SERVER_WAIT_MAX - 8);
    for (int i = 0; i < SERVER_WAIT_SHARDS; i++)
        assert_int_equal(w->shards[i].n, 0);
    assert_int_equal(server_wait_register(w, 7, count_done, NULL, 0, 1000),
                     0);
    assert_true(server_wait_take(w, 7, &d, &a));
    server_wait_destroy(w);
    mem_free(w);
}

/* --- proposals: the commit-apply gap ----------------------------------- */

struct box {
    _Atomic int calls;
    _Atomic int err;
};

static void box_done(void *arg, const struct server_response *r)
{
    struct box *b = arg;
    atomic_store(&b->err, r->err);
    atomic_fetch_add(&b->calls, 1);
}

static int propose_put(struct server *s, struct box *b)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)"k";
    p.key.len = 1;
    p.value.data = (uint8_t *)"v";
    p.value.len = 1;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    return server_propose(s, &ir, box_done, b);
}

static void wait_calls_of(struct box *b, int n)
{
    for (int i = 0; i < 500 && atomic_load(&b->calls) < n; i++)
        sleep_ms(10);
    assert_int_equal(atomic_load(&b->calls), n);
}

/* --- the store map's pages (house.c) ------------------------------------ */

/* The house thread drops the store map's pages once they pass its budget
 * even while the writer holds apply_mu without pause (before: it waited
 * for apply_mu, up to 227 ms behind back-to-back batches, while the map
 * grew).  The test is the writer that never lets go: it holds apply_mu
 * while HashKV reads every page of a ~72 MB store through the map, and
 * the mapped pages must be under 56 MiB more than before within 3 s. */
static void test_map_trim_beside_writer(void **state)
{
    (void)state;
    struct server *s = start();
    size_t n = (size_t)1 << 20;
    char *v = malloc(n);
    assert_non_null(v);
    memset(v, 'v', n - 1);
    v[n - 1] = 0;
    for (int i = 0; i < 72; i++) {
        char k[16];
        snprintf(k, sizeof k, "big%02d", i);
        v[0] = (char)('a' + i % 26);
        assert_int_equal(harness_put(s, k, v), 0);
    }
    free(v);
    sleep_ms(300); /* the puts' own pages: let a trim pass first */
    pthread_mutex_lock(&s->apply_mu);
    size_t before = mem_rss_shared();
    struct server_hash h;
    assert_int_equal(server_hash_kv(s, 0, &h), 0); /* maps ~72 MB */
    /* Without a trim meanwhile the map now holds >= 72 MB more than
     * before; the budget is 48 MiB over what the last trim left. */
    bool dropped = false;
    for (int i = 0; i < 300 && !dropped; i++) {
        dropped = mem_rss_shared() < before + ((size_t)56 << 20);
        sleep_ms(10);
    }
    pthread_mutex_unlock(&s->apply_mu);
    server_stop(s);
    assert_true(dropped);
}

static void test_apply_gap_bounded(void **state)
{
    (void)state;
    struct server *s = start();
    /* The raft thread writes committed_index only when it hands entries
     * over: held off while the test holds raft_mu. */
    pthread_mutex_lock(&s->node.raft_mu);
    uint64_t committed = atomic_load(&s->committed_index);
    uint64_t applied = atomic_load(&s->applied_index);
    atomic_store(&s->committed_index, applied + SERVER_APPLY_GAP_MAX + 1);
    struct box b = {0, 1};
    assert_int_equal(propose_put(s, &b), ERR_TOO_MANY_REQUESTS);
    assert_int_equal(atomic_load(&b.calls), 1); /* answered inline */
    assert_int_equal(atomic_load(&b.err), ERR_TOO_MANY_REQUESTS);
    /* At the bound exactly it is taken. */
    atomic_store(&s->committed_index, applied + SERVER_APPLY_GAP_MAX);
    struct box ok = {0, 1};
    assert_int_equal(propose_put(s, &ok), 0);
    assert_int_equal(atomic_load(&ok.calls), 0);
    atomic_store(&s->committed_index, committed);
    pthread_mutex_unlock(&s->node.raft_mu);
    server__kick(s);
    wait_calls_of(&ok, 1);
    assert_int_equal(atomic_load(&ok.err), 0);
    server_stop(s);
}

/* --- linearizable reads -------------------------------------------------- */

static _Atomic int reads_done;
static _Atomic int reads_failed;

static void read_done(void *arg, int err,
                      const Etcdserverpb__RangeResponse *resp)
{
    (void)arg;
    (void)resp;
    if (err != 0)
        atomic_fetch_add(&reads_failed, 1);
    atomic_fetch_add(&reads_done, 1);
}

static struct server_read_waiter *read_waiter(void)
{
    Etcdserverpb__RangeRequest *req = mem_calloc(1, sizeof *req);
    assert_non_null(req);
    etcdserverpb__range_request__init(req);
    req->key.data = mem_dup("k", 1);
    req->key.len = 1;
    struct server_read_waiter *w = mem_calloc(1, sizeof *w);
    assert_non_null(w);
    *w = (struct server_read_waiter){.req = req, .fn = read_done};
    return w;
}

static void free_waiter(struct server_read_waiter *w)
{
    etcdserverpb__range_request__free_unpacked(w->req, NULL);
    mem_free(w);
}

static void test_reads_bounded(void **state)
{
    (void)state;
    struct server *s = start();
    atomic_store(&reads_done, 0);
    atomic_store(&reads_failed, 0);
    pthread_mutex_lock(&s->node.raft_mu); /* no ReadIndex round starts */
    for (int i = 0; i < SERVER_READS_MAX; i++)
        assert_int_equal(server__read_enqueue(s, read_waiter()), 0);
    assert_int_equal(atomic_load(&s->reads.pending), SERVER_READS_MAX);
    struct server_read_waiter *w = read_waiter();
    assert_int_equal(server__read_enqueue(s, w), ERR_TOO_MANY_REQUESTS);
    assert_int_equal(atomic_load(&s->reads.pending), SERVER_READS_MAX);
    free_waiter(w);
    pthread_mutex_unlock(&s->node.raft_mu);
    server__kick(s);
    /* One round answers them all; the workers serve them. */
    for (int i = 0; i < 1000 && atomic_load(&reads_done) < SERVER_READS_MAX;
         i++)
        sleep_ms(10);
    assert_int_equal(atomic_load(&reads_done), SERVER_READS_MAX);
    assert_int_equal(atomic_load(&reads_failed), 0);
    for (int i = 0; i < 100 && atomic_load(&s->reads.pending) != 0; i++)
        sleep_ms(10);
    assert_int_equal(atomic_load(&s->reads.pending), 0);
    assert_int_equal(server__read_enqueue(s, read_waiter()), 0);
    for (int i = 0; i < 500 && atomic_load(&reads_done) <= SERVER_READS_MAX;
         i++)
        sleep_ms(10);
    assert_int_equal(atomic_load(&reads_done), SERVER_READS_MAX + 1);
    server_stop(s);
}

/* --- membership jobs ------------------------------------------------------ */

static _Atomic int moves_done;
static _Atomic int moves_refused;

static void moved(void *arg, int err)
{
    (void)arg;
    if (err == ERR_TOO_MANY_REQUESTS)
        atomic_fetch_add(&moves_refused, 1);
    atomic_fetch_add(&moves_done, 1);
}

static _Atomic int change_err = 1;

static void changed(void *arg, const struct server_member_result *r)
{
    (void)arg;
    atomic_store(&change_err, r->err);
}

static void test_member_jobs_bounded(void **state)
{
    (void)state;
    struct server *s = start();
    atomic_store(&moves_done, 0);
    atomic_store(&moves_refused, 0);
    pthread_mutex_lock(&s->node.raft_mu); /* no pass takes the jobs */
    for (int i = 0; i < SERVER_MS_JOBS_MAX; i++)
        server_move_leader(s, 12345, UINT64_MAX, moved, NULL);
    assert_int_equal(atomic_load(&moves_done), 0);
    assert_int_equal(atomic_load(&s->ms->n_jobs), SERVER_MS_JOBS_MAX);
    server_move_leader(s, 12345, UINT64_MAX, moved, NULL);
    assert_int_equal(atomic_load(&moves_done), 1); /* refused inline */
    assert_int_equal(atomic_load(&moves_refused), 1);
    const char *urls[] = {"http://127.0.0.1:2480"};
    struct server_member_change c = {.op = SERVER_MEMBER_ADD,
                                     .peer_urls = urls,
                                     .n_peer_urls = 1,
                                     .is_learner = true};
    server_member_change(s, &c, changed, NULL);
    assert_int_equal(atomic_load(&change_err), ERR_TOO_MANY_REQUESTS);
    assert_int_equal(atomic_load(&s->ms->n_jobs), SERVER_MS_JOBS_MAX);
    pthread_mutex_unlock(&s->node.raft_mu);
    server__kick(s);
    /* The raft thread answers every queued transfer (12345 is no voter)
     * and frees its job. */
    for (int i = 0; i < 500 && atomic_load(&moves_done) <= SERVER_MS_JOBS_MAX;
         i++)
        sleep_ms(10);
    assert_int_equal(atomic_load(&moves_done), SERVER_MS_JOBS_MAX + 1);
    assert_int_equal(atomic_load(&moves_refused), 1);
    assert_int_equal(atomic_load(&s->ms->n_jobs), 0);
    server_move_leader(s, 12345, UINT64_MAX, moved, NULL);
    for (int i = 0;
         i < 500 && atomic_load(&moves_done) <= SERVER_MS_JOBS_MAX + 1; i++)
        sleep_ms(10);
    assert_int_equal(atomic_load(&moves_done), SERVER_MS_JOBS_MAX + 2);
    assert_int_equal(atomic_load(&moves_refused), 1);
    server_stop(s);
}

static int setup(void **state)
{
    (void)state;
    return harness_dir_make(dir, sizeof dir, "test-bounds");
}

static int teardown(void **state)
{
    (void)state;
    return harness_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_registry_bounded),
        cmocka_unit_test_setup_teardown(test_map_trim_beside_writer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_apply_gap_bounded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reads_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_jobs_bounded, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
