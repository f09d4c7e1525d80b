/*
 * test_server_members_retry.c - goal: a membership change whose apply
 * batch cannot be committed (the store's disk is full: the batch is
 * aborted and retried, apply.c "stall") takes effect once, when a commit
 * succeeds: until then the members table does not list it and nothing is
 * logged; after it, the table lists it once, its "added member" line is
 * logged once (not once per retry) and the change is answered.  Method: a
 * real single member on a temporary data dir; mvcc_batch_commit is
 * wrapped (--wrap) to abort the batch and answer ERR_NOSPC while the test
 * says so; stderr (the log) goes to a file the test reads.
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
#include <unistd.h>

#include "mvcc/mvcc.h"
#include "server/server.h"
#include "server_harness.h"
#include "util/err.h"

static char dir[256];

/* --- the full disk, played at the commit ------------------------------ */

static atomic_bool disk_full;
static atomic_int refused; /* commits refused */

int __real_mvcc_batch_commit(struct mvcc_batch *b, uint64_t consistent_index);

int __wrap_mvcc_batch_commit(struct mvcc_batch *b, uint64_t consistent_index)
{
    if (!atomic_load(&disk_full))
        return __real_mvcc_batch_commit(b, consistent_index);
    mvcc_batch_abort(b); /* as a commit that found no room */
    atomic_fetch_add(&refused, 1);
    return ERR_NOSPC;
}

/* --- helpers ----------------------------------------------------------- */

struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int err;
    uint64_t id;
};

static void on_change(void *arg, const struct server_member_result *r)
{
    struct answer *a = arg;
    pthread_mutex_lock(&a->mu);
    a->err = r->err;
    a->id = r->id;
    a->done = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static int answered(struct answer *a)
{
    pthread_mutex_lock(&a->mu);
    int d = a->done;
    pthread_mutex_unlock(&a->mu);
    return d;
}

static void wait_answer(struct answer *a)
{
    pthread_mutex_lock(&a->mu);
    while (!a->done)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

/* --- the test ---------------------------------------------------------- */

static void test_change_takes_effect_once(void **state)
{
    (void)state;
    char log_path[300];
    snprintf(log_path, sizeof log_path, "%s.log", dir);
    harness_log_begin(log_path);
    struct server_config cfg = harness_config(dir);
    struct server *s = harness_start(&cfg);
    assert_int_equal(harness_put(s, "a", "v"), 0); /* it leads, applies */
    struct server_member_info ms[4];
    assert_int_equal(server_members_list(s, ms, 4), 1);

    atomic_store(&disk_full, true);
    const char *urls[] = {"http://127.0.0.1:1"};
    struct server_member_change c = {
        .op = SERVER_MEMBER_ADD, .peer_urls = urls, .n_peer_urls = 1,
        .is_learner = true,
    };
    struct answer a = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                       0, 0, 0};
    server_member_change(s, &c, on_change, &a);
    for (int i = 0; i < 200 && atomic_load(&refused) < 3; i++)
        harness_sleep_ms(10);
    assert_true(atomic_load(&refused) >= 3); /* tried and refused, 3 times */
    assert_false(answered(&a));
    /* Not committed: not listed (the table is the store's). */
    assert_int_equal(server_members_list(s, ms, 4), 1);

    atomic_store(&disk_full, false); /* space freed: the retry commits */
    wait_answer(&a);
    assert_int_equal(a.err, 0);
    assert_true(a.id != 0);
    size_t n = server_members_list(s, ms, 4);
    assert_int_equal(n, 2);
    size_t learners = 0;
    for (size_t i = 0; i < n; i++)
        learners += ms[i].id == a.id && ms[i].is_learner;
    assert_int_equal(learners, 1);
    server_stop(s);

    harness_log_end();
    assert_int_equal(harness_log_count(log_path, "the store's disk is full"),
                     1);
    /* The new member is added once, however many times it was tried (the
     * first member's own "added member" line is the bootstrap's). */
    char added[64];
    snprintf(added, sizeof added, "added member %016llx",
             (unsigned long long)a.id);
    assert_int_equal(harness_log_count(log_path, added), 1);
    unlink(log_path);
}

static int setup(void **state)
{
    (void)state;
    return harness_dir_make(dir, sizeof dir, "members-retry");
}

static int teardown(void **state)
{
    (void)state;
    return harness_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_change_takes_effect_once, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
