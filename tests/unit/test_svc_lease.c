/*
 * test_svc_lease.c - goal: the LeaseKeepAlive service (svc/lease_keepalive.c)
 * on an in-process stream answers each renewal once (the lease's TTL, 0
 * for an unknown lease), ends the stream OK on the client's half-close,
 * ends it with "too many requests" when its answers would overflow the
 * transport's queue (the stream's bound, never a wait), and releases the
 * stream exactly once at its end.  Method: a real single member on a
 * temporary data dir (a lone leader renews inline); svc_mem_stream with a
 * queue of 2 that the test reads or not.
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
#include "svc/svc.h"
#include "util/err.h"

static char dir[256];
static struct server *srv;

static void sleep_ms(long ms)
{
    const struct timespec t = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&t, NULL);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-test-svcl-XXXXXX");
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
    assert_int_equal(server_start(&c, &srv), 0);
    for (int i = 0; i < 500 && !server_published(srv); i++)
        sleep_ms(10);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    server_stop(srv);
    srv = NULL;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static _Atomic int granted;

static void on_grant(void *ctx, int err, const ProtobufCMessage *reply)
{
    (void)ctx;
    assert_int_equal(err, 0);
    assert_ptr_equal(reply->descriptor,
                     &etcdserverpb__lease_grant_response__descriptor);
    atomic_fetch_add(&granted, 1);
}

static void grant(int64_t id, int64_t ttl)
{
    int before = atomic_load(&granted);
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.id = id;
    g.ttl = ttl;
    svc_lease_grant(srv, &g, (struct svc_done){on_grant, NULL});
    for (int i = 0; i < 500 && atomic_load(&granted) == before; i++)
        sleep_ms(5);
    assert_int_equal(atomic_load(&granted), before + 1);
}

static void send_ka(void *st, int64_t id)
{
    Etcdserverpb__LeaseKeepAliveRequest r =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    r.id = id;
    svc_lease_keepalive_handler.recv(st, &r.base);
}

static void take_ka(struct svc_mem_stream *ms, int64_t id, int64_t ttl)
{
    ProtobufCMessage *m;
    assert_int_equal(
        svc_mem_stream_take(
            ms, &etcdserverpb__lease_keep_alive_response__descriptor, 2000,
            &m),
        0);
    Etcdserverpb__LeaseKeepAliveResponse *r =
        (Etcdserverpb__LeaseKeepAliveResponse *)m;
    assert_int_equal(r->id, id);
    assert_int_equal(r->ttl, ttl);
    assert_non_null(r->header);
    assert_true(r->header->member_id != 0);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void *open_stream(struct svc_mem_stream **ms)
{
    assert_int_equal(svc_mem_stream_create(2, ms), 0);
    void *st;
    assert_int_equal(svc_lease_keepalive_handler.open(
                         srv, svc_mem_stream_get(*ms), &st),
                     0);
    return st;
}

static void end_stream(struct svc_mem_stream *ms, void *st)
{
    svc_lease_keepalive_handler.end(st, true);
    for (int i = 0; i < 200 && !svc_mem_stream_released(ms); i++)
        sleep_ms(5);
    assert_true(svc_mem_stream_released(ms));
    svc_mem_stream_destroy(ms);
}

static void test_answers_and_half_close(void **state)
{
    (void)state;
    grant(11, 30);
    struct svc_mem_stream *ms;
    void *st = open_stream(&ms);
    send_ka(st, 11);
    take_ka(ms, 11, 30);
    send_ka(st, 999); /* unknown: TTL 0, the stream goes on */
    take_ka(ms, 999, 0);
    int err = 1;
    assert_false(svc_mem_stream_closed(ms, &err));
    svc_lease_keepalive_handler.recv(st, NULL);
    assert_true(svc_mem_stream_closed(ms, &err));
    assert_int_equal(err, 0);
    end_stream(ms, st);
}

static void test_full_queue_ends_the_stream(void **state)
{
    (void)state;
    grant(12, 30);
    struct svc_mem_stream *ms;
    void *st = open_stream(&ms);
    /* Nobody reads: two answers fill the queue, the third cannot go. */
    for (int i = 0; i < 3; i++)
        send_ka(st, 12);
    int err = 0;
    for (int i = 0; i < 200 && !svc_mem_stream_closed(ms, &err); i++)
        sleep_ms(5);
    assert_true(svc_mem_stream_closed(ms, &err));
    assert_int_equal(err, ERR_TOO_MANY_REQUESTS);
    take_ka(ms, 12, 30);
    take_ka(ms, 12, 30);
    end_stream(ms, st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_answers_and_half_close, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_full_queue_ends_the_stream,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
