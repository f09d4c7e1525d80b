/*
 * test_svc_watch.c - goal: the Watch service answers in-process as etcd
 * 3.4 does: a create is confirmed (created, watch id 0, header at the
 * current revision), a put reaches it as a PUT event with the header at
 * its revision, a duplicate id is refused (created + canceled, watch id
 * -1, etcd's reason), a cancel is answered canceled, a progress request
 * gets watch id -1 at the current revision; a stream whose queue is tiny
 * and not read while many puts happen still gets every event once, in
 * order, once it is read; control answers on a full stream are kept (in
 * order, created before canceled) up to a reserve, past which the stream
 * ends with ERR_WATCH_CTRL_UNREAD; end releases the stream; watchers that
 * get the same events share one encoding of them (svc/watch_encode.c),
 * and those whose events differ (prev_kv asked or not) each get their
 * own, right.
 * Method: a real server on a temporary data dir, svc_watch_handler on an
 * in-process stream (svc_mem_stream), puts through svc_kv_put.
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

#include "server/server.h"
#include "svc/svc.h"
#include "util/err.h"

static char dir[256];
static struct server *srv;

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-test-svcw-XXXXXX");
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

struct box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int err;
    int64_t rev;
};

static void on_put(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct box *b = ctx;
    pthread_mutex_lock(&b->mu);
    b->err = err;
    if (err == 0)
        b->rev = ((const Etcdserverpb__PutResponse *)reply)->header->revision;
    b->done = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static int64_t put(const char *key, const char *val)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin(key);
    p.value = bin(val);
    struct box b = {.done = false};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    svc_kv_put(srv, &p, (struct svc_done){on_put, &b});
    pthread_mutex_lock(&b.mu);
    while (!b.done)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    assert_int_equal(b.err, 0);
    return b.rev;
}

static Etcdserverpb__WatchResponse *take(struct svc_mem_stream *ms)
{
    ProtobufCMessage *m = NULL;
    assert_int_equal(svc_mem_stream_take(
                         ms, &etcdserverpb__watch_response__descriptor, 5000,
                         &m),
                     0);
    return (Etcdserverpb__WatchResponse *)m;
}

static void create(const struct svc_stream_handler *h, void *st,
                   const char *key, const char *end, int64_t id)
{
    Etcdserverpb__WatchCreateRequest c = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    c.key = bin(key);
    if (end != NULL)
        c.range_end = bin(end);
    c.watch_id = id;
    Etcdserverpb__WatchRequest r = ETCDSERVERPB__WATCH_REQUEST__INIT;
    r.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    r.create_request = &c;
    h->recv(st, &r.base);
}

static void test_watch_basics(void **state)
{
    (void)state;
    const struct svc_stream_handler *h = &svc_watch_handler;
    struct svc_mem_stream *ms;
    assert_int_equal(svc_mem_stream_create(16, &ms), 0);
    void *st;
    assert_int_equal(h->open(srv, svc_mem_stream_get(ms), &st), 0);
    int64_t rev0 = put("other", "x");
    create(h, st, "k", NULL, 0);
    Etcdserverpb__WatchResponse *r = take(ms);
    assert_true(r->created);
    assert_false(r->canceled);
    assert_int_equal(r->watch_id, 0);
    assert_int_equal(r->header->revision, rev0);
    assert_true(r->header->cluster_id != 0 && r->header->member_id != 0);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    int64_t rev = put("k", "v1");
    r = take(ms);
    assert_int_equal(r->watch_id, 0);
    assert_int_equal(r->header->revision, rev);
    assert_int_equal(r->n_events, 1);
    assert_int_equal(r->events[0]->type, MVCCPB__EVENT__EVENT_TYPE__PUT);
    assert_memory_equal(r->events[0]->kv->key.data, "k", 1);
    assert_memory_equal(r->events[0]->kv->value.data, "v1", 2);
    assert_int_equal(r->events[0]->kv->mod_revision, rev);
    assert_null(r->events[0]->prev_kv);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    create(h, st, "a", NULL, 0); /* a duplicate of an automatic id */
    r = take(ms);
    assert_true(r->created);
    assert_int_equal(r->watch_id, 1);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    create(h, st, "a", NULL, 1);
    r = take(ms);
    assert_true(r->created && r->canceled);
    assert_int_equal(r->watch_id, -1);
    assert_string_equal(r->cancel_reason,
                        "mvcc: duplicate watch ID provided on the WatchStream");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    create(h, st, "b", "a", 0);
    r = take(ms);
    assert_true(r->created && r->canceled);
    assert_string_equal(r->cancel_reason, "mvcc: watcher range is empty");
    protobuf_c_message_free_unpacked(&r->base, NULL);

    Etcdserverpb__WatchCancelRequest c = ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
    c.watch_id = 1;
    Etcdserverpb__WatchRequest q = ETCDSERVERPB__WATCH_REQUEST__INIT;
    q.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
    q.cancel_request = &c;
    h->recv(st, &q.base);
    r = take(ms);
    assert_true(r->canceled);
    assert_false(r->created);
    assert_int_equal(r->watch_id, 1);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    Etcdserverpb__WatchProgressRequest pr =
        ETCDSERVERPB__WATCH_PROGRESS_REQUEST__INIT;
    q.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
    q.progress_request = &pr;
    h->recv(st, &q.base);
    r = take(ms);
    assert_int_equal(r->watch_id, -1);
    assert_int_equal(r->header->revision, rev);
    assert_int_equal(r->n_events, 0);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    h->recv(st, NULL); /* half-close: the stream stays */
    assert_false(svc_mem_stream_closed(ms, NULL));
    h->end(st, true);
    assert_true(svc_mem_stream_released(ms));
    svc_mem_stream_destroy(ms);
}

static void test_watch_slow_reader(void **state)
{
    (void)state;
    const struct svc_stream_handler *h = &svc_watch_handler;
    struct svc_mem_stream *ms;
    assert_int_equal(svc_mem_stream_create(2, &ms), 0);
    void *st;
    assert_int_equal(h->open(srv, svc_mem_stream_get(ms), &st), 0);
    create(h, st, "s/", "s0", 0);
    Etcdserverpb__WatchResponse *r = take(ms);
    assert_true(r->created);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    enum { N = 200 };
    int64_t revs[N];
    for (int i = 0; i < N; i++) {
        char k[32];
        snprintf(k, sizeof k, "s/%d", i % 7);
        revs[i] = put(k, "v");
    }
    int got = 0;
    while (got < N) {
        r = take(ms);
        for (size_t i = 0; i < r->n_events; i++) {
            assert_true(got < N);
            assert_int_equal(r->events[i]->kv->mod_revision, revs[got]);
            got++;
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    ProtobufCMessage *none;
    assert_int_equal(svc_mem_stream_take(
                         ms, &etcdserverpb__watch_response__descriptor, 100,
                         &none),
                     ERR_TIMEOUT);
    h->end(st, true);
    svc_mem_stream_destroy(ms);
}

static void create_prev(const struct svc_stream_handler *h, void *st,
                        int64_t id, bool prev_kv)
{
    Etcdserverpb__WatchCreateRequest c = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    c.key = bin("e/");
    c.range_end = bin("e0");
    c.watch_id = id;
    c.prev_kv = prev_kv;
    Etcdserverpb__WatchRequest r = ETCDSERVERPB__WATCH_REQUEST__INIT;
    r.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    r.create_request = &c;
    h->recv(st, &r.base);
}

/* Watchers 1 and 3 ask for prev_kv, 2 does not: the fan-out reaches them
 * in that order, so a shared encoding that ignored prev_kv would hand 2
 * the pair of 1 (or 3 none). */
static void test_watch_shared_encoding(void **state)
{
    (void)state;
    const struct svc_stream_handler *h = &svc_watch_handler;
    struct svc_mem_stream *ms;
    assert_int_equal(svc_mem_stream_create(64, &ms), 0);
    void *st;
    assert_int_equal(h->open(srv, svc_mem_stream_get(ms), &st), 0);
    for (int64_t id = 1; id <= 3; id++) {
        create_prev(h, st, id, id != 2);
        Etcdserverpb__WatchResponse *r = take(ms);
        assert_true(r->created && r->watch_id == id);
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    const char *keys[3] = {"e/a", "e/a", "e/b"}, *vals[3] = {"1", "2", "3"};
    for (int p = 0; p < 3; p++) {
        int64_t rev = put(keys[p], vals[p]);
        bool seen[4] = {false};
        for (int i = 0; i < 3; i++) {
            Etcdserverpb__WatchResponse *r = take(ms);
            assert_true(r->watch_id >= 1 && r->watch_id <= 3);
            assert_false(seen[r->watch_id]);
            seen[r->watch_id] = true;
            assert_int_equal(r->header->revision, rev);
            assert_int_equal(r->n_events, 1);
            Mvccpb__Event *e = r->events[0];
            assert_int_equal(e->kv->key.len, 3);
            assert_memory_equal(e->kv->key.data, keys[p], 3);
            assert_memory_equal(e->kv->value.data, vals[p], 1);
            assert_int_equal(e->kv->mod_revision, rev);
            bool want_prev = p == 1 && r->watch_id != 2;
            assert_int_equal(e->prev_kv != NULL, want_prev);
            if (want_prev)
                assert_memory_equal(e->prev_kv->value.data, "1", 1);
            protobuf_c_message_free_unpacked(&r->base, NULL);
        }
    }
    h->end(st, true);
    svc_mem_stream_destroy(ms);
}

static void cancel(const struct svc_stream_handler *h, void *st, int64_t id)
{
    Etcdserverpb__WatchCancelRequest c = ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
    c.watch_id = id;
    Etcdserverpb__WatchRequest q = ETCDSERVERPB__WATCH_REQUEST__INIT;
    q.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
    q.cancel_request = &c;
    h->recv(st, &q.base);
}

/* Control answers on a full stream: kept (in order, created before
 * canceled) up to the reserve; past it the stream ends with
 * ERR_WATCH_CTRL_UNREAD, and no more than queue_max + the reserve
 * messages were ever kept. */
static void test_watch_ctrl_reserve(void **state)
{
    (void)state;
    const struct svc_stream_handler *h = &svc_watch_handler;
    struct svc_mem_stream *ms;
    assert_int_equal(svc_mem_stream_create(2, &ms), 0);
    void *st;
    assert_int_equal(h->open(srv, svc_mem_stream_get(ms), &st), 0);
    create(h, st, "s/", "s0", 0);
    Etcdserverpb__WatchResponse *r = take(ms);
    assert_true(r->created);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    for (int i = 0; i < 10; i++)
        put("s/x", "v"); /* the queue (2) is full of watcher 0's events */
    create(h, st, "c", NULL, 100);
    cancel(h, st, 100);
    for (int id = 101; id <= 110; id++)
        create(h, st, "c", NULL, id);
    assert_false(svc_mem_stream_closed(ms, NULL));
    /* Read: the 12 control answers, in order, between watcher 0's. */
    int64_t want = 100;
    bool canceled_100 = false;
    while (want <= 110) {
        r = take(ms);
        if (r->watch_id != 0) {
            assert_int_equal(r->watch_id, want);
            if (want == 100 && !canceled_100) {
                assert_true(r->created && !r->canceled);
                canceled_100 = true; /* the cancel answer comes next */
            } else if (want == 100) {
                assert_true(r->canceled && !r->created);
                want++;
            } else {
                assert_true(r->created && !r->canceled);
                want++;
            }
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    /* Unread past the reserve: the stream ends, bounded. */
    for (int i = 0; i < 10; i++)
        put("s/x", "v");
    for (int id = 200; id < 240; id++)
        create(h, st, "c", NULL, id);
    int err = 0;
    assert_true(svc_mem_stream_closed(ms, &err));
    assert_int_equal(err, ERR_WATCH_CTRL_UNREAD);
    int kept = 0;
    ProtobufCMessage *m;
    while (svc_mem_stream_take(ms, &etcdserverpb__watch_response__descriptor,
                               100, &m) == 0) {
        kept++;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    assert_true(kept <= 2 + SVC_STREAM_CTRL_RESERVE);
    h->end(st, false);
    svc_mem_stream_destroy(ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_watch_basics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_slow_reader, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_watch_ctrl_reserve, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_watch_shared_encoding, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
