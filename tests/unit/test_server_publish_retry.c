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

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

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

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static size_t count_in(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    size_t k = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++)
        k++;
    return k;
}

static void test_lost_publish_is_retried(void **state)
{
    (void)state;
    char log_path[300];
    snprintf(log_path, sizeof log_path, "%s.log", dir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);

    struct server_config c = {
        .name = "default",
        .data_dir = dir,
        .peer_urls = "http://localhost:2380",
        .client_urls = "http://localhost:2379",
        .cluster_token = "etcd-cluster",
        .initial_cluster = "default=http://localhost:2380",
        .heartbeat_ms = 100,
        .election_ms = 1000, /* request timeout 7 s */
        .snapshot_count = 100000,
        .max_request_bytes = 1572864,
        .max_txn_ops = 128,
    };
    struct server *s;
    uint64_t t0 = now_ms();
    assert_int_equal(server_start(&c, &s), 0);
    while (!server_published(s) && now_ms() - t0 < 10000) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    uint64_t took = now_ms() - t0;
    bool ok = server_published(s);
    server_stop(s);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_true(ok);
    assert_true(atomic_load(&attr_proposals) >= 2); /* proposed again */
    /* Far from the 7 s request timeout a lost proposal waits for. */
    assert_true(took < 4000);
    assert_int_equal(count_in(log_path, "published {Name:default "
                                        "ClientURLs:[http://localhost:2379]}"),
                     1);
    assert_int_equal(count_in(log_path, "failed to publish"), 0);
    unlink(log_path);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-publish-retry-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
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
        cmocka_unit_test_setup_teardown(test_lost_publish_is_retried, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
