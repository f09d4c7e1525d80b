/*
 * test_server_inbox.c - goal: the raft thread's inbox of peer messages is
 * bounded (SERVER_INBOX_MAX, as etcd's raft receive buffer): while the raft
 * thread cannot take it, the message past the bound is dropped with
 * ERR_FULL and counted, nothing grows, and once the thread runs again the
 * inbox drains and takes messages again.  Method: a real single member on a
 * temporary data dir; the test holds raft_mu, which every raft pass needs,
 * so that nothing drains the inbox, and feeds messages through
 * server__raft_receive as the peer transport does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"
#include "server_harness.h"
#include "server/server_int.h"
#include "util/err.h"

static char dir[256];

static struct server *start(void)
{
    struct server_config c = harness_config(dir);
    struct server *s = harness_start(&c);
    return s;
}

static size_t inbox_n(struct server *s)
{
    pthread_mutex_lock(&s->node.ev_mu);
    size_t n = s->node.inbox_n;
    pthread_mutex_unlock(&s->node.ev_mu);
    return n;
}

static void test_inbox_bounded(void **state)
{
    (void)state;
    struct server *s = start();
    /* A heartbeat from a member nobody knows, at an old term: raft
     * ignores it once it gets it. */
    struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = 99,
                         .to = s->member_id, .term = 0};
    pthread_mutex_lock(&s->node.raft_mu);
    for (size_t i = 0; i < SERVER_INBOX_MAX; i++)
        assert_int_equal(server__raft_receive(s, &m), 0);
    assert_int_equal(inbox_n(s), SERVER_INBOX_MAX);
    assert_int_equal(server__raft_receive(s, &m), ERR_FULL);
    assert_int_equal(server__raft_receive(s, &m), ERR_FULL);
    assert_int_equal(inbox_n(s), SERVER_INBOX_MAX);
    pthread_mutex_lock(&s->node.ev_mu);
    assert_int_equal(s->node.inbox_dropped, 2);
    pthread_mutex_unlock(&s->node.ev_mu);
    pthread_mutex_unlock(&s->node.raft_mu);
    server__kick(s);
    /* The raft thread drains it within a few passes. */
    for (int i = 0; i < 500 && inbox_n(s) != 0; i++) {
        const struct timespec ms = {0, 10 * 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(inbox_n(s), 0);
    assert_int_equal(server__raft_receive(s, &m), 0);
    server_stop(s);
}

static int setup(void **state)
{
    (void)state;
    return harness_dir_make(dir, sizeof dir, "test-inbox");
}

static int teardown(void **state)
{
    (void)state;
    return harness_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inbox_bounded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
