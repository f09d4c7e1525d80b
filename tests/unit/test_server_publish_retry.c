/*
 * test_server_publish_retry.c - goal: a member whose publish proposal is
 * lost (forwarded while the stream to the leader was still coming up: no
 * answer until the 7 s request timeout) proposes its attributes again and
 * is published well before that timeout; it logs "published" once, when
 * its attributes are applied, and logs no failure for the lost attempt.
 * Method: a real single member on a temporary data dir; server_propose is
 * wrapped (--wrap) to swallow the first MemberAttr proposal (never
 * answered, as a message dropped on the wire); stderr (the log) goes to a
 * file the test reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"
#include "server_harness.h"

static char dir[256];
static atomic_int attr_proposals; /* MemberAttr proposals seen */

int __real_server_propose(struct server *s, Cetcdpb__InternalRequest *req,
                          server_done_fn done, void *arg);

int __wrap_server_propose(struct server *s, Cetcdpb__InternalRequest *req,
                          server_done_fn done, void *arg)
{
    if (req->request_case ==
            CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_ATTR &&
        atomic_fetch_add(&attr_proposals, 1) == 0)
        return 0; /* lost: accepted, never answered */
    return __real_server_propose(s, req, done, arg);
}

static void test_lost_publish_is_retried(void **state)
{
    (void)state;
    char log_path[300];
    snprintf(log_path, sizeof log_path, "%s.log", dir);
    harness_log_begin(log_path);
    struct server_config c = harness_config(dir); /* request timeout 7 s */
    uint64_t t0 = harness_now_ms();
    struct server *s = harness_start(&c);
    while (!server_published(s) && harness_now_ms() - t0 < 10000)
        harness_sleep_ms(10);
    uint64_t took = harness_now_ms() - t0;
    bool ok = server_published(s);
    server_stop(s);

    harness_log_end();
    assert_true(ok);
    assert_true(atomic_load(&attr_proposals) >= 2); /* proposed again */
    /* Far from the 7 s request timeout a lost proposal waits for. */
    assert_true(took < 4000);
    assert_int_equal(harness_log_count(log_path,
                                       "published {Name:default "
                                       "ClientURLs:[http://localhost:2379]}"),
                     1);
    assert_int_equal(harness_log_count(log_path, "failed to publish"), 0);
    unlink(log_path);
}

static int setup(void **state)
{
    (void)state;
    return harness_dir_make(dir, sizeof dir, "publish-retry");
}

static int teardown(void **state)
{
    (void)state;
    return harness_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lost_publish_is_retried, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
