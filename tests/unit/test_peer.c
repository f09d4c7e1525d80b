/*
 * test_peer.c - goal: the pure parts of the peer transport are right: the
 * bounded queue, the back-off schedule, PeerBatch framing (our hand packer
 * against protobuf-c), the identity checks, SnapshotChunk decoding, URL
 * parsing, and the argument errors of the public API.  Method: one group
 * per function, table-like cases, fault injection for ERR_NOMEM.  The
 * network paths are covered by tests/peer/peer_pair.c.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "peer/peer_int.h"
#include "util/err.h"
#include "util/mem.h"

static struct peer__buf buf_new(size_t len, uint8_t fill)
{
    struct peer__buf b = {mem_malloc(len > 0 ? len : 1), len};
    memset(b.data, fill, len);
    return b;
}

/* ---- queue ---- */

static void test_queue_bounds(void **state)
{
    (void)state;
    struct peer__queue q;
    assert_int_equal(peer__queue_init(&q, 4, 100), 0);
    for (int i = 0; i < 4; i++) {
        struct peer__buf b = buf_new(10, (uint8_t)i);
        assert_int_equal(peer__queue_push(&q, &b), 0);
    }
    struct peer__buf extra = buf_new(1, 9);
    assert_int_equal(peer__queue_push(&q, &extra), ERR_FULL); /* count */
    assert_int_equal(q.n, 4);
    assert_int_equal(peer__queue_clear(&q), 4);
    assert_int_equal(q.bytes, 0);
    struct peer__buf big = buf_new(95, 1);
    assert_int_equal(peer__queue_push(&q, &big), 0);
    struct peer__buf six = buf_new(6, 2);
    assert_int_equal(peer__queue_push(&q, &six), ERR_FULL); /* bytes */
    assert_int_equal(peer__queue_push(&q, &extra), 0);
    assert_int_equal(q.bytes, 96);
    mem_free(six.data);
    peer__queue_close(&q);
}

static void test_queue_take_order(void **state)
{
    (void)state;
    struct peer__queue q;
    struct peer__buf out[8];
    assert_int_equal(peer__queue_init(&q, 5, 1000), 0);
    uint8_t next = 0, want = 0;
    /* Several laps around the ring, taking in uneven slices. */
    for (int round = 0; round < 20; round++) {
        while (q.n < 5) {
            struct peer__buf b = buf_new(10, next++);
            assert_int_equal(peer__queue_push(&q, &b), 0);
        }
        size_t n = peer__queue_take(&q, out, 1 + round % 3, 1000);
        assert_int_equal(n, 1 + round % 3);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(out[i].data[0], want++);
            mem_free(out[i].data);
        }
    }
    peer__queue_close(&q);
}

static void test_queue_take_bytes(void **state)
{
    (void)state;
    struct peer__queue q;
    struct peer__buf out[8];
    assert_int_equal(peer__queue_init(&q, 8, 10000), 0);
    size_t lens[] = {300, 300, 300, 2000, 10};
    for (size_t i = 0; i < 5; i++) {
        struct peer__buf b = buf_new(lens[i], (uint8_t)i);
        assert_int_equal(peer__queue_push(&q, &b), 0);
    }
    /* 1000 bytes: three of 300 fit, the fourth does not. */
    assert_int_equal(peer__queue_take(&q, out, 8, 1000), 3);
    for (int i = 0; i < 3; i++)
        mem_free(out[i].data);
    /* A message larger than the limit goes alone rather than wedging. */
    assert_int_equal(peer__queue_take(&q, out, 8, 1000), 1);
    assert_int_equal(out[0].len, 2000);
    mem_free(out[0].data);
    assert_int_equal(peer__queue_take(&q, out, 8, 1000), 1);
    mem_free(out[0].data);
    assert_int_equal(peer__queue_take(&q, out, 8, 1000), 0);
    assert_int_equal(q.bytes, 0);
    peer__queue_close(&q);
}

static void test_queue_nomem(void **state)
{
    (void)state;
    struct peer__queue q;
    mem_fault_set(1);
    assert_int_equal(peer__queue_init(&q, 4, 100), ERR_NOMEM);
    peer__queue_close(&q); /* Safe on a failed init. */
}

/* ---- back-off ---- */

static void test_backoff_schedule(void **state)
{
    (void)state;
    uint32_t want[] = {0, 100, 200, 400, 800, 1600, 2000, 2000};
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(peer__backoff_ms(i, 100, 2000), want[i]);
    assert_int_equal(peer__backoff_ms(1000000, 100, 2000), 2000);
    assert_int_equal(peer__backoff_ms(UINT32_MAX, 1, UINT32_MAX),
                     UINT32_MAX);
    assert_int_equal(peer__backoff_ms(5, 300, 300), 300);
}

/* ---- PeerBatch framing ---- */

/* enc encodes m into a peer__buf. */
static struct peer__buf enc(const struct raft_msg *m)
{
    struct peer__buf b;
    b.len = raft_msg_encoded_size(m);
    b.data = mem_malloc(b.len);
    size_t w = 0;
    assert_int_equal(raft_msg_encode(m, b.data, b.len, &w), 0);
    assert_int_equal(w, b.len);
    return b;
}

static void sample_msgs(struct raft_msg *m, struct raft_entry *e, size_t n,
                        raft_id from, raft_id to)
{
    static uint8_t data[2000]; /* up to n = 20 */
    for (size_t i = 0; i < n; i++) {
        e[i] = (struct raft_entry){.term = 2, .index = 10 + i,
                                   .len = (uint32_t)(i * 100), .data = data};
        m[i] = (struct raft_msg){.type = RAFT_MSG_APP, .from = from, .to = to,
                                 .term = 2, .index = 100 + i, .n_entries = 1,
                                 .entries = &e[i]};
    }
}

static void test_batch_roundtrip(void **state)
{
    (void)state;
    struct raft_msg m[3];
    struct raft_entry e[3];
    struct peer__buf b[3];
    sample_msgs(m, e, 3, 7, 9);
    for (int i = 0; i < 3; i++)
        b[i] = enc(&m[i]);
    struct peer__hdr h = {0x1234567890abcdefull, 7, 9};
    size_t len = peer__batch_size(&h, b, 3);
    uint8_t *out = mem_malloc(len);
    assert_int_equal(peer__batch_pack(&h, b, 3, out), len);
    /* protobuf-c agrees with the hand packer. */
    Cetcdpb__PeerBatch *pb = cetcdpb__peer_batch__unpack(NULL, len, out);
    assert_non_null(pb);
    assert_true(pb->cluster_id == h.cluster_id);
    assert_int_equal(pb->from, 7);
    assert_int_equal(pb->to, 9);
    assert_int_equal(pb->n_msgs, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pb->msgs[i].len, b[i].len);
        assert_memory_equal(pb->msgs[i].data, b[i].data, b[i].len);
    }
    assert_int_equal(cetcdpb__peer_batch__get_packed_size(pb), len);
    cetcdpb__peer_batch__free_unpacked(pb, NULL);
    struct peer__batch d;
    assert_int_equal(peer__batch_decode(out, len, &d), 0);
    assert_int_equal(d.n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(d.msgs[i].index, 100 + i);
        assert_int_equal(d.msgs[i].entries[0].len, i * 100);
    }
    peer__batch_free(&d);
    for (int i = 0; i < 3; i++)
        mem_free(b[i].data);
    mem_free(out);
}

static void test_batch_hello(void **state)
{
    (void)state;
    struct peer__hdr h = {1, 2, 3};
    uint8_t out[32];
    size_t len = peer__batch_pack(&h, NULL, 0, out);
    assert_int_equal(len, 6); /* three one-byte tags, three 1-byte varints */
    struct peer__batch d;
    assert_int_equal(peer__batch_decode(out, len, &d), 0);
    assert_int_equal(d.n, 0);
    assert_int_equal(d.pb->cluster_id, 1);
    peer__batch_free(&d);
    /* Zero ids are omitted, as proto3 does. */
    struct peer__hdr z = {0, 0, 0};
    assert_int_equal(peer__batch_size(&z, NULL, 0), 0);
}

static void test_batch_decode_bad(void **state)
{
    (void)state;
    struct peer__batch d;
    uint8_t junk[] = {0x22, 0x7f, 0x01}; /* bytes field longer than input */
    assert_int_equal(peer__batch_decode(junk, sizeof(junk), &d), ERR_CORRUPT);
    assert_null(d.pb);
    /* A well-framed batch whose message is not a raft message. */
    struct peer__buf bad = {(uint8_t *)"\x09garbage", 8};
    struct peer__hdr h = {1, 2, 3};
    uint8_t out[64];
    size_t len = peer__batch_pack(&h, &bad, 1, out);
    assert_int_equal(peer__batch_decode(out, len, &d), ERR_CORRUPT);
    /* More messages than PEER_BATCH_MSGS_MAX. */
    size_t n = PEER_BATCH_MSGS_MAX + 1;
    struct peer__buf *many = mem_calloc(n, sizeof(*many));
    size_t big_len = peer__batch_size(&h, many, n);
    uint8_t *big = mem_malloc(big_len);
    peer__batch_pack(&h, many, n, big);
    assert_int_equal(peer__batch_decode(big, big_len, &d), ERR_TOO_LARGE);
    mem_free(big);
    mem_free(many);
}

static void test_batch_decode_nomem(void **state)
{
    (void)state;
    struct raft_msg m[2];
    struct raft_entry e[2];
    sample_msgs(m, e, 2, 2, 3);
    struct peer__buf b[2] = {enc(&m[0]), enc(&m[1])};
    struct peer__hdr h = {1, 2, 3};
    uint8_t out[1024];
    size_t len = peer__batch_pack(&h, b, 2, out);
    struct peer__batch d;
    mem_fault_set(1); /* the msgs array (protobuf-c uses malloc itself) */
    assert_int_equal(peer__batch_decode(out, len, &d), ERR_NOMEM);
    mem_fault_set(0);
    assert_int_equal(peer__batch_decode(out, len, &d), 0);
    peer__batch_free(&d);
    mem_free(b[0].data);
    mem_free(b[1].data);
}

/* ---- identity checks ---- */

static void test_hdr_check(void **state)
{
    (void)state;
    const char *why;
    const enum peer__sender peer = PEER__SENDER_PEER;
    const enum peer__sender unknown = PEER__SENDER_UNKNOWN;
    const enum peer__sender removed = PEER__SENDER_REMOVED;
    struct peer__hdr ok = {5, 2, 1};
    assert_int_equal(peer__hdr_check(&ok, 5, 1, peer, &why), GRPC_STATUS_OK);
    assert_null(why);
    struct peer__hdr other = {6, 2, 1};
    assert_int_equal(peer__hdr_check(&other, 5, 1, peer, &why),
                     GRPC_STATUS_FAILED_PRECONDITION);
    assert_string_equal(why, "cluster ID mismatch");
    /* Another cluster's member is refused as such, even if an id of ours
     * was removed: only our own removed members are told to stop. */
    assert_int_equal(peer__hdr_check(&other, 5, 1, removed, &why),
                     GRPC_STATUS_FAILED_PRECONDITION);
    struct peer__hdr wrong_to = {5, 2, 3};
    assert_int_equal(peer__hdr_check(&wrong_to, 5, 1, peer, &why),
                     GRPC_STATUS_FAILED_PRECONDITION);
    struct peer__hdr no_from = {5, 0, 1};
    assert_int_equal(peer__hdr_check(&no_from, 5, 1, unknown, &why),
                     GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(peer__hdr_check(&ok, 5, 1, unknown, &why),
                     GRPC_STATUS_FAILED_PRECONDITION);
    assert_non_null(strstr(why, "member unknown"));
    assert_int_equal(peer__hdr_check(&ok, 5, 1, removed, &why),
                     GRPC_STATUS_PERMISSION_DENIED);
    assert_string_equal(why, PEER_REMOVED_MSG);
    assert_true(peer__status_removed(GRPC_STATUS_PERMISSION_DENIED, why,
                                     strlen(why)));
}

/* Only the exact pair (code, message) means "you were removed". */
static void test_status_removed(void **state)
{
    (void)state;
    const char *msg = PEER_REMOVED_MSG;
    size_t n = strlen(msg);
    assert_string_equal(msg, "the member has been permanently removed "
                             "from the cluster");
    assert_true(peer__status_removed(GRPC_STATUS_PERMISSION_DENIED, msg, n));
    assert_false(peer__status_removed(GRPC_STATUS_FAILED_PRECONDITION, msg,
                                      n));
    assert_false(peer__status_removed(GRPC_STATUS_PERMISSION_DENIED, msg,
                                      n - 1));
    assert_false(peer__status_removed(GRPC_STATUS_PERMISSION_DENIED,
                                      "permission denied", 17));
    assert_false(peer__status_removed(GRPC_STATUS_PERMISSION_DENIED, NULL,
                                      0));
    assert_false(peer__status_removed(GRPC_STATUS_OK, msg, n));
}

static void test_call_err(void **state)
{
    (void)state;
    const char *rm = PEER_REMOVED_MSG;
    assert_int_equal(peer__call_err(GRPC_STATUS_OK, NULL, 0, false), 0);
    assert_int_equal(peer__call_err(GRPC_STATUS_DEADLINE_EXCEEDED, NULL, 0,
                                    false),
                     ERR_TIMEOUT);
    assert_int_equal(peer__call_err(GRPC_STATUS_UNIMPLEMENTED, "x", 1,
                                    false),
                     ERR_UNSUPPORTED);
    assert_int_equal(peer__call_err(GRPC_STATUS_PERMISSION_DENIED, rm,
                                    strlen(rm), false),
                     ERR_MEMBER_REMOVED);
    assert_int_equal(peer__call_err(GRPC_STATUS_PERMISSION_DENIED, "x", 1,
                                    false),
                     ERR_IO);
    assert_int_equal(peer__call_err(GRPC_STATUS_UNAVAILABLE, NULL, 0, false),
                     ERR_IO);
    assert_int_equal(peer__call_err(GRPC_STATUS_FAILED_PRECONDITION, NULL, 0,
                                    false),
                     ERR_IO);
    /* Cancelled by our own close: whatever status that produced. */
    assert_int_equal(peer__call_err(GRPC_STATUS_CANCELLED, NULL, 0, true),
                     ERR_STOPPED);
    assert_int_equal(peer__call_err(GRPC_STATUS_OK, NULL, 0, true), 0);
}

static void test_msgs_check(void **state)
{
    (void)state;
    const char *why;
    struct raft_msg m[2];
    struct raft_entry e[2];
    sample_msgs(m, e, 2, 2, 1);
    assert_int_equal(peer__msgs_check(m, 2, 2, 1, &why), GRPC_STATUS_OK);
    m[1].from = 3; /* a sender speaking for another member */
    assert_int_equal(peer__msgs_check(m, 2, 2, 1, &why),
                     GRPC_STATUS_INVALID_ARGUMENT);
    m[1].from = 2;
    m[1].type = RAFT_MSG_SNAP;
    assert_int_equal(peer__msgs_check(m, 2, 2, 1, &why),
                     GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(peer__msgs_check(NULL, 0, 2, 1, &why), GRPC_STATUS_OK);
}

/* ---- SnapshotChunk ---- */

static size_t chunk_pack(Cetcdpb__SnapshotChunk *c, uint8_t *out)
{
    return cetcdpb__snapshot_chunk__pack(c, out);
}

static void test_chunk_decode(void **state)
{
    (void)state;
    struct raft_snapshot snap = {.meta = {.index = 5, .term = 2}};
    struct raft_msg sm = {.type = RAFT_MSG_SNAP, .from = 2, .to = 1,
                          .term = 2, .snapshot = &snap};
    struct peer__buf mb = enc(&sm);
    uint8_t sha[PEER__SHA256_LEN] = {0};
    uint8_t out[512];
    Cetcdpb__SnapshotChunk c = CETCDPB__SNAPSHOT_CHUNK__INIT;
    c.cluster_id = 1;
    c.from = 2;
    c.to = 1;
    c.msg.data = mb.data;
    c.msg.len = mb.len;
    c.size = 3;
    c.data.data = (uint8_t *)"abc";
    c.data.len = 3;
    c.last = true;
    c.sha256.data = sha;
    c.sha256.len = sizeof(sha);
    Cetcdpb__SnapshotChunk *d;
    struct raft_msg m;
    bool has;
    size_t len = chunk_pack(&c, out);
    assert_int_equal(peer__chunk_decode(out, len, &d, &m, &has), 0);
    assert_true(has);
    assert_int_equal(m.snapshot->meta.index, 5);
    assert_int_equal(d->data.len, 3);
    raft_msg_release(&m);
    cetcdpb__snapshot_chunk__free_unpacked(d, NULL);
    c.sha256.len = 31; /* a last chunk needs a whole SHA-256 */
    len = chunk_pack(&c, out);
    assert_int_equal(peer__chunk_decode(out, len, &d, &m, &has), ERR_CORRUPT);
    assert_null(d);
    mem_free(mb.data);
    sm.type = RAFT_MSG_APP; /* the message must be a MsgSnap */
    sm.snapshot = NULL;
    mb = enc(&sm);
    c.msg.data = mb.data;
    c.msg.len = mb.len;
    c.sha256.len = sizeof(sha);
    len = chunk_pack(&c, out);
    assert_int_equal(peer__chunk_decode(out, len, &d, &m, &has), ERR_CORRUPT);
    assert_false(has);
    mem_free(mb.data);
    assert_int_equal(peer__chunk_decode((const uint8_t *)"\xff", 1, &d, &m,
                                        &has),
                     ERR_CORRUPT);
}

/* ---- URLs ---- */

static void test_url_target(void **state)
{
    (void)state;
    char out[300];
    assert_int_equal(peer__url_target("http://127.0.0.1:2380", out, 300), 0);
    assert_string_equal(out, "127.0.0.1:2380");
    assert_int_equal(peer__url_target("http://[::1]:2380/", out, 300), 0);
    assert_string_equal(out, "[::1]:2380");
    assert_int_equal(peer__url_target("unix:///tmp/p.sock", out, 300), 0);
    assert_string_equal(out, "unix:/tmp/p.sock");
    assert_int_equal(peer__url_target("https://h:1", out, 300),
                     ERR_UNSUPPORTED);
    assert_int_equal(peer__url_target("http://host", out, 300), ERR_INVAL);
    assert_int_equal(peer__url_target("http://host:", out, 300), ERR_INVAL);
    assert_int_equal(peer__url_target("http://h:1/path", out, 300),
                     ERR_INVAL);
    assert_int_equal(peer__url_target("ftp://h:1", out, 300), ERR_INVAL);
    assert_int_equal(peer__url_target("http://h:1", out, 3), ERR_INVAL);
    assert_int_equal(peer__url_target(NULL, out, 300), ERR_INVAL);
}

/* ---- public API: argument errors and drops (no server needed) ---- */

/* Drops are reported on the thread that called peer_send; the peer's
 * sender thread also reports a broken stream (here: the refused connect)
 * whenever it gets there.  Count only the caller's reports. */
static int unreachable_calls;
static pthread_t test_thread;
static void count_unreachable(void *arg, raft_id id)
{
    (void)arg;
    (void)id;
    if (pthread_equal(pthread_self(), test_thread))
        unreachable_calls++;
}

static struct peer_transport *transport(size_t queue_msgs)
{
    struct peer_config cfg = {.self = 1, .cluster_id = 7};
    cfg.cb.on_unreachable = count_unreachable;
    test_thread = pthread_self();
    cfg.limits.queue_msgs_max = queue_msgs;
    struct peer_transport *t;
    assert_int_equal(peer_transport_create(&cfg, &t), 0);
    return t;
}

static void test_transport_create(void **state)
{
    (void)state;
    struct peer_transport *t;
    struct peer_config cfg = {.self = 0, .cluster_id = 7};
    assert_int_equal(peer_transport_create(&cfg, &t), ERR_INVAL);
    cfg.self = 1;
    cfg.cluster_id = 0;
    assert_int_equal(peer_transport_create(&cfg, &t), ERR_INVAL);
    cfg.cluster_id = 7;
    mem_fault_set(1);
    assert_int_equal(peer_transport_create(&cfg, &t), ERR_NOMEM);
    assert_int_equal(peer_transport_create(&cfg, &t), 0);
    assert_int_equal(t->lim.queue_msgs_max, PEER_DEFAULT_QUEUE_MSGS);
    assert_int_equal(t->lim.backoff_max_ms, PEER_DEFAULT_BACKOFF_MAX_MS);
    peer_transport_close(t);
    peer_transport_close(NULL);
}

static void test_peer_add_errors(void **state)
{
    (void)state;
    struct peer_transport *t = transport(0);
    const char *ok[] = {"http://127.0.0.1:1"};
    const char *tls[] = {"https://127.0.0.1:1"};
    const char *bad[] = {"127.0.0.1:1"};
    assert_int_equal(peer_add(t, 1, ok, 1), ERR_INVAL);   /* self */
    assert_int_equal(peer_add(t, 0, ok, 1), ERR_INVAL);   /* no id */
    assert_int_equal(peer_add(t, 2, ok, 0), ERR_INVAL);   /* no URL */
    assert_int_equal(peer_add(t, 2, bad, 1), ERR_INVAL);
    assert_int_equal(peer_add(t, 2, tls, 1), ERR_UNSUPPORTED);
    assert_int_equal(peer_add(t, 2, ok, 1), 0);
    assert_int_equal(peer_add(t, 2, ok, 1), ERR_EXIST);
    for (raft_id id = 3; id < 2 + PEER_PEERS_MAX; id++)
        assert_int_equal(peer_add(t, id, ok, 1), 0);
    assert_int_equal(peer_add(t, 100, ok, 1), ERR_FULL);
    assert_int_equal(peer_update(t, 100, ok, 1), ERR_NOTFOUND);
    assert_int_equal(peer_update(t, 2, bad, 1), ERR_INVAL);
    assert_int_equal(peer_update(t, 2, ok, 1), 0);
    assert_int_equal(peer_remove(t, 100), ERR_NOTFOUND);
    assert_int_equal(peer_remove(t, 3), 0);
    struct peer_stats st;
    assert_int_equal(peer_stats(t, 3, &st), ERR_NOTFOUND);
    assert_int_equal(peer_stats(t, 2, &st), 0);
    peer_transport_close(t); /* stops the rest */
}

static void test_send_drops(void **state)
{
    (void)state;
    struct peer_transport *t = transport(4);
    /* Port 1 on loopback refuses connections: a dead peer. */
    const char *dead[] = {"http://127.0.0.1:1"};
    assert_int_equal(peer_add(t, 2, dead, 1), 0);
    struct raft_msg m[10];
    struct raft_entry e[10];
    sample_msgs(m, e, 10, 1, 2);
    unreachable_calls = 0;
    assert_int_equal(peer_send(t, m, 10), 0);
    struct peer_stats st;
    assert_int_equal(peer_stats(t, 2, &st), 0);
    /* At most 4 queued (and perhaps 4 more taken into a write). */
    assert_true(st.dropped_msgs >= 2);
    assert_int_equal(unreachable_calls, 1); /* once per call and peer */
    /* Messages to self and to strangers are skipped silently. */
    m[0].to = 1;
    m[1].to = 99;
    assert_int_equal(peer_send(t, m, 2), 0);
    /* Once the peer is known down, everything is dropped at once. */
    for (int i = 0; i < 200 && !st.failures; i++) {
        usleep(10 * 1000);
        assert_int_equal(peer_stats(t, 2, &st), 0);
    }
    assert_true(st.failures > 0 && !st.active);
    uint64_t before = st.dropped_msgs;
    sample_msgs(m, e, 3, 1, 2);
    assert_int_equal(peer_send(t, m, 3), 0);
    assert_int_equal(peer_stats(t, 2, &st), 0);
    assert_int_equal(st.dropped_msgs, before + 3);
    assert_int_equal(st.queued_msgs, 0);
    peer_transport_close(t);
}

static void test_send_snapshot_errors(void **state)
{
    (void)state;
    struct peer_transport *t = transport(0);
    const char *dead[] = {"http://127.0.0.1:1"};
    assert_int_equal(peer_add(t, 2, dead, 1), 0);
    struct raft_snapshot snap = {.meta = {.index = 5, .term = 2}};
    struct raft_msg sm = {.type = RAFT_MSG_SNAP, .from = 1, .to = 2,
                          .term = 2, .snapshot = &snap};
    assert_int_equal(peer_send_snapshot(t, 3, &sm, 0, 0), ERR_INVAL);
    assert_int_equal(peer_send_snapshot(t, 2, &sm, -1, 0), ERR_INVAL);
    sm.to = 3;
    assert_int_equal(peer_send_snapshot(t, 3, &sm, 0, 0), ERR_NOTFOUND);
    sm.type = RAFT_MSG_APP;
    sm.to = 2;
    assert_int_equal(peer_send_snapshot(t, 2, &sm, 0, 0), ERR_INVAL);
    peer_transport_close(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_bounds),
        cmocka_unit_test(test_queue_take_order),
        cmocka_unit_test(test_queue_take_bytes),
        cmocka_unit_test(test_queue_nomem),
        cmocka_unit_test(test_backoff_schedule),
        cmocka_unit_test(test_batch_roundtrip),
        cmocka_unit_test(test_batch_hello),
        cmocka_unit_test(test_batch_decode_bad),
        cmocka_unit_test(test_batch_decode_nomem),
        cmocka_unit_test(test_hdr_check),
        cmocka_unit_test(test_status_removed),
        cmocka_unit_test(test_call_err),
        cmocka_unit_test(test_msgs_check),
        cmocka_unit_test(test_chunk_decode),
        cmocka_unit_test(test_url_target),
        cmocka_unit_test(test_transport_create),
        cmocka_unit_test(test_peer_add_errors),
        cmocka_unit_test(test_send_drops),
        cmocka_unit_test(test_send_snapshot_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
