/*
 * test_svc_snapshot.c - goal: Maintenance.Snapshot (svc/snapshot.c) on an
 * in-process stream sends the store as a bbolt database the project's
 * reader accepts, in 32 KiB chunks whose remaining_bytes counts down to 0,
 * then the SHA-256 of those bytes, and ends OK; a client that does not
 * read holds at most the stream's queue while the member keeps applying
 * writes, and its cancel ends the export thread, which releases the
 * stream; more than SVC_SNAPSHOTS_MAX exports at once are refused.
 * Method: a real single member on a temporary data dir; svc_mem_stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbolt/bbolt.h"
#include "server/server.h"
#include "server_harness.h"
#include "svc/svc.h"
#include "util/err.h"

#define KEYS 300

static char dir[256];
static struct server *srv;

static int setup(void **state)
{
    (void)state;
    if (harness_dir_make(dir, sizeof dir, "svcsnap") != 0)
        return -1;
    struct server_config c = harness_config(dir);
    srv = harness_start(&c);
    harness_wait_published(srv);
    char key[32], val[1100];
    memset(val, 'v', sizeof val - 1);
    val[sizeof val - 1] = '\0';
    for (int i = 0; i < KEYS; i++) {
        snprintf(key, sizeof key, "key%04d", i);
        if (harness_put(srv, key, val) != 0)
            return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    server_stop(srv);
    return harness_dir_remove(dir);
}

static void *open_started(struct svc_mem_stream **ms, size_t queue)
{
    assert_int_equal(svc_mem_stream_create(queue, ms), 0);
    void *st;
    assert_int_equal(
        svc_snapshot_handler.open(srv, svc_mem_stream_get(*ms), &st), 0);
    Etcdserverpb__SnapshotRequest req = ETCDSERVERPB__SNAPSHOT_REQUEST__INIT;
    svc_snapshot_handler.recv(st, &req.base);
    return st;
}

static void wait_released(struct svc_mem_stream *ms)
{
    for (int i = 0; i < 1000 && !svc_mem_stream_released(ms); i++)
        harness_sleep_ms(5);
    assert_true(svc_mem_stream_released(ms));
}

static Etcdserverpb__SnapshotResponse *take(struct svc_mem_stream *ms)
{
    ProtobufCMessage *m;
    assert_int_equal(svc_mem_stream_take(
                         ms, &etcdserverpb__snapshot_response__descriptor,
                         5000, &m),
                     0);
    return (Etcdserverpb__SnapshotResponse *)m;
}

static int count_keys(void *arg, const struct bbolt_entry *e)
{
    if (!e->is_bucket && e->depth == 1 && e->path_len[0] == 3 &&
        memcmp(e->path[0], "key", 3) == 0)
        (*(size_t *)arg)++;
    return 0;
}

static void test_whole_stream(void **state)
{
    (void)state;
    struct svc_mem_stream *ms;
    void *st = open_started(&ms, 4);
    uint8_t *db = NULL;
    size_t len = 0, total = 0;
    for (;;) {
        Etcdserverpb__SnapshotResponse *r = take(ms);
        if (total == 0)
            total = r->remaining_bytes + r->blob.len;
        if (len == total) { /* the digest */
            assert_int_equal(r->remaining_bytes, 0);
            assert_int_equal(r->blob.len, 32);
            uint8_t sha[32];
            unsigned n = 0;
            EVP_Digest(db, len, sha, &n, EVP_sha256(), NULL);
            assert_memory_equal(sha, r->blob.data, 32);
            protobuf_c_message_free_unpacked(&r->base, NULL);
            break;
        }
        assert_true(r->blob.len == SVC_SNAPSHOT_CHUNK ||
                    r->remaining_bytes == 0);
        db = realloc(db, len + r->blob.len);
        memcpy(db + len, r->blob.data, r->blob.len);
        len += r->blob.len;
        assert_int_equal(r->remaining_bytes, total - len);
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    assert_true(total > KEYS * 1000);
    assert_int_equal(total % BBOLT_PAGE_SIZE, 0);
    int err = -1;
    wait_released(ms);
    assert_true(svc_mem_stream_closed(ms, &err));
    assert_int_equal(err, 0);
    svc_snapshot_handler.end(st, false);
    svc_mem_stream_destroy(ms);

    struct bbolt_reader *rd;
    assert_int_equal(bbolt_reader_open_mem(db, len, &rd), 0);
    size_t keys = 0;
    assert_int_equal(bbolt_reader_walk(rd, count_keys, &keys), 0);
    assert_true(keys >= KEYS);
    bbolt_reader_free(rd);
    free(db);
}

static void test_slow_client_then_cancel(void **state)
{
    (void)state;
    struct svc_mem_stream *ms;
    void *st = open_started(&ms, 2);
    harness_sleep_ms(200); /* nobody reads: the queue fills, then naps */
    assert_false(svc_mem_stream_released(ms));
    /* The member applies writes meanwhile (one read txn, no lock held). */
    assert_int_equal(harness_put(srv, "during", "x"), 0);
    Etcdserverpb__SnapshotResponse *r = take(ms);
    assert_int_equal(r->blob.len, SVC_SNAPSHOT_CHUNK);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    svc_snapshot_handler.end(st, true); /* the client goes away */
    wait_released(ms);
    svc_mem_stream_destroy(ms);
}

static void test_too_many_refused(void **state)
{
    (void)state;
    struct svc_mem_stream *ms[SVC_SNAPSHOTS_MAX + 1];
    void *st[SVC_SNAPSHOTS_MAX + 1];
    for (int i = 0; i <= SVC_SNAPSHOTS_MAX; i++)
        st[i] = open_started(&ms[i], 1);
    int err = 0;
    assert_true(svc_mem_stream_closed(ms[SVC_SNAPSHOTS_MAX], &err));
    assert_int_equal(err, ERR_TOO_MANY_REQUESTS);
    assert_true(svc_mem_stream_released(ms[SVC_SNAPSHOTS_MAX]));
    for (int i = 0; i <= SVC_SNAPSHOTS_MAX; i++) {
        svc_snapshot_handler.end(st[i], true);
        wait_released(ms[i]);
        svc_mem_stream_destroy(ms[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_stream),
        cmocka_unit_test(test_slow_client_then_cancel),
        cmocka_unit_test(test_too_many_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
