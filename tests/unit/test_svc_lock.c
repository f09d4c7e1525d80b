/*
 * test_svc_lock.c - goal: the Lock and Election services in-process: a
 * Lock with lease 0 is held at once (key name/<lease hex>, the stream
 * closed OK after its one answer); a second Lock on the name waits (no
 * answer), and when its stream is cancelled it releases the stream and
 * deletes the key it waited with; Leader of an empty election is
 * ERR_ELECTION_NO_LEADER, Proclaim without a leader ERR_LEADER_KEY_MISSING;
 * Observe sends the current leader, then its proclaimed value; at most
 * SVC_LOCK_WAITERS_MAX Lock/Observe streams are open (the next one is
 * refused ERR_TOO_MANY_REQUESTS), and ended ones give their slots back.
 * Method: a real server on a temporary data dir, the handlers on
 * in-process streams (svc_mem_stream), the unary calls with a completion
 * box.
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
#include "svc/svc.h"
#include "util/err.h"

static char dir[256];
static struct server *srv;

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

/* A completion box: the error and a packed copy of the reply. */
struct box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int err;
    uint8_t buf[4096];
    size_t len;
};

static void on_done(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct box *b = ctx;
    pthread_mutex_lock(&b->mu);
    b->err = err;
    if (err == 0 && protobuf_c_message_get_packed_size(reply) <= sizeof b->buf)
        b->len = protobuf_c_message_pack(reply, b->buf);
    b->done = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void box_wait(struct box *b)
{
    pthread_mutex_lock(&b->mu);
    while (!b->done)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

static struct box *box_new(void)
{
    struct box *b = calloc(1, sizeof *b);
    assert_non_null(b);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    return b;
}

/* count_prefix: keys under name/ (a linearizable Range). */
static size_t count_prefix(const char *name)
{
    char k[64], e[64];
    size_t n = (size_t)snprintf(k, sizeof k, "%s/", name);
    snprintf(e, sizeof e, "%s0", name);
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = (ProtobufCBinaryData){n, (uint8_t *)k};
    r.range_end = (ProtobufCBinaryData){n, (uint8_t *)e};
    r.count_only = true;
    uint8_t buf[256];
    size_t len = etcdserverpb__range_request__pack(&r, buf);
    struct box *b = box_new();
    svc_kv_range(srv, etcdserverpb__range_request__unpack(NULL, len, buf),
                 (struct svc_done){on_done, b});
    box_wait(b);
    assert_int_equal(b->err, 0);
    Etcdserverpb__RangeResponse *g =
        etcdserverpb__range_response__unpack(NULL, b->len, b->buf);
    size_t count = (size_t)g->count;
    etcdserverpb__range_response__free_unpacked(g, NULL);
    free(b);
    return count;
}

/* open_lock opens a Lock stream on name with lease 0. */
static void *open_lock(struct svc_mem_stream **ms, const char *name)
{
    assert_int_equal(svc_mem_stream_create(4, ms), 0);
    void *st;
    assert_int_equal(svc_lock_handler.open(srv, svc_mem_stream_get(*ms), &st),
                     0);
    V3lockpb__LockRequest r = V3LOCKPB__LOCK_REQUEST__INIT;
    r.name = (ProtobufCBinaryData){strlen(name), (uint8_t *)name};
    svc_lock_handler.recv(st, &r.base);
    svc_lock_handler.recv(st, NULL);
    return st;
}

static bool wait_released(struct svc_mem_stream *ms)
{
    for (int i = 0; i < 300 && !svc_mem_stream_released(ms); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return svc_mem_stream_released(ms);
}

/* wait_closed: the service closes right after its answer (another
 * thread): wait for it. */
static bool wait_closed(struct svc_mem_stream *ms, int *err)
{
    for (int i = 0; i < 300 && !svc_mem_stream_closed(ms, err); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return svc_mem_stream_closed(ms, err);
}

static void test_lock_wait_and_cancel(void **state)
{
    (void)state;
    struct svc_mem_stream *a, *b;
    void *sa = open_lock(&a, "lk");
    ProtobufCMessage *m;
    assert_int_equal(svc_mem_stream_take(a, &v3lockpb__lock_response__descriptor,
                                         5000, &m), 0);
    V3lockpb__LockResponse *ra = (V3lockpb__LockResponse *)m;
    assert_true(ra->key.len > 3 && memcmp(ra->key.data, "lk/", 3) == 0);
    assert_true(ra->header != NULL && ra->header->revision > 0);
    protobuf_c_message_free_unpacked(m, NULL);
    int err = -1;
    assert_true(wait_closed(a, &err));
    assert_int_equal(err, 0);
    assert_int_equal(count_prefix("lk"), 1);

    void *sb = open_lock(&b, "lk");
    assert_int_equal(svc_mem_stream_take(b, &v3lockpb__lock_response__descriptor,
                                         300, &m), ERR_TIMEOUT);
    assert_int_equal(count_prefix("lk"), 2); /* waiting with its key */
    svc_lock_handler.end(sb, true);            /* the client went away */
    assert_true(wait_released(b));
    assert_int_equal(count_prefix("lk"), 1); /* its key was deleted */
    svc_lock_handler.end(sa, false);
    assert_true(wait_released(a));
    svc_mem_stream_destroy(a);
    svc_mem_stream_destroy(b);
}

static void test_election_errors(void **state)
{
    (void)state;
    struct box *b = box_new();
    V3electionpb__LeaderRequest l = V3ELECTIONPB__LEADER_REQUEST__INIT;
    l.name = (ProtobufCBinaryData){6, (uint8_t *)"nobody"};
    svc_election_leader(srv, &l, (struct svc_done){on_done, b});
    box_wait(b);
    assert_int_equal(b->err, ERR_ELECTION_NO_LEADER);
    free(b);
    b = box_new();
    V3electionpb__ProclaimRequest p = V3ELECTIONPB__PROCLAIM_REQUEST__INIT;
    svc_election_proclaim(srv, &p, (struct svc_done){on_done, b});
    box_wait(b);
    assert_int_equal(b->err, ERR_LEADER_KEY_MISSING);
    free(b);
}

static void test_campaign_then_observe(void **state)
{
    (void)state;
    struct svc_mem_stream *c, *o;
    assert_int_equal(svc_mem_stream_create(4, &c), 0);
    void *sc;
    assert_int_equal(
        svc_campaign_handler.open(srv, svc_mem_stream_get(c), &sc), 0);
    V3electionpb__CampaignRequest cr = V3ELECTIONPB__CAMPAIGN_REQUEST__INIT;
    cr.name = (ProtobufCBinaryData){2, (uint8_t *)"el"};
    cr.value = (ProtobufCBinaryData){1, (uint8_t *)"a"};
    svc_campaign_handler.recv(sc, &cr.base);
    ProtobufCMessage *m;
    assert_int_equal(svc_mem_stream_take(
                         c, &v3electionpb__campaign_response__descriptor, 5000,
                         &m), 0);
    V3electionpb__CampaignResponse *r = (V3electionpb__CampaignResponse *)m;
    assert_non_null(r->leader);
    assert_int_equal(r->leader->rev, r->header->revision);

    assert_int_equal(svc_mem_stream_create(4, &o), 0);
    void *so;
    assert_int_equal(svc_observe_handler.open(srv, svc_mem_stream_get(o), &so),
                     0);
    V3electionpb__LeaderRequest lr = V3ELECTIONPB__LEADER_REQUEST__INIT;
    lr.name = cr.name;
    svc_observe_handler.recv(so, &lr.base);
    ProtobufCMessage *x;
    assert_int_equal(svc_mem_stream_take(
                         o, &v3electionpb__leader_response__descriptor, 5000,
                         &x), 0);
    V3electionpb__LeaderResponse *lx = (V3electionpb__LeaderResponse *)x;
    assert_int_equal(lx->kv->value.len, 1);
    assert_memory_equal(lx->kv->value.data, "a", 1);
    protobuf_c_message_free_unpacked(x, NULL);

    struct box *b = box_new();
    V3electionpb__ProclaimRequest p = V3ELECTIONPB__PROCLAIM_REQUEST__INIT;
    p.leader = r->leader;
    p.value = (ProtobufCBinaryData){1, (uint8_t *)"b"};
    svc_election_proclaim(srv, &p, (struct svc_done){on_done, b});
    box_wait(b);
    assert_int_equal(b->err, 0);
    free(b);
    assert_int_equal(svc_mem_stream_take(
                         o, &v3electionpb__leader_response__descriptor, 5000,
                         &x), 0);
    lx = (V3electionpb__LeaderResponse *)x;
    assert_memory_equal(lx->kv->value.data, "b", 1);
    protobuf_c_message_free_unpacked(x, NULL);
    protobuf_c_message_free_unpacked(m, NULL);

    svc_observe_handler.end(so, true);
    svc_campaign_handler.end(sc, false);
    assert_true(wait_released(o));
    assert_true(wait_released(c));
    svc_mem_stream_destroy(o);
    svc_mem_stream_destroy(c);
}

/* SVC_LOCK_WAITERS_MAX streams are open: the next is refused; ended,
 * they give their slots back. */
static void test_waiter_bound(void **state)
{
    (void)state;
    size_t n = SVC_LOCK_WAITERS_MAX;
    struct svc_mem_stream **ms = calloc(n + 1, sizeof *ms);
    void **st = calloc(n + 1, sizeof *st);
    assert_non_null(ms);
    assert_non_null(st);
    for (size_t i = 0; i <= n; i++) {
        assert_int_equal(svc_mem_stream_create(1, &ms[i]), 0);
        const struct svc_stream_handler *h =
            i % 2 ? &svc_lock_handler : &svc_observe_handler;
        int rc = h->open(srv, svc_mem_stream_get(ms[i]), &st[i]);
        assert_int_equal(rc, i < n ? 0 : ERR_TOO_MANY_REQUESTS);
    }
    for (size_t i = 0; i < n; i++)
        (i % 2 ? &svc_lock_handler : &svc_observe_handler)->end(st[i], true);
    for (size_t i = 0; i < n; i++)
        assert_true(wait_released(ms[i]));
    /* the slots are back: one more opens */
    assert_int_equal(svc_lock_handler.open(srv, svc_mem_stream_get(ms[n]),
                                           &st[n]), 0);
    svc_lock_handler.end(st[n], true);
    assert_true(wait_released(ms[n]));
    for (size_t i = 0; i <= n; i++)
        svc_mem_stream_destroy(ms[i]);
    free(ms);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_wait_and_cancel, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_election_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_campaign_then_observe, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_waiter_bound, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
