/*
 * test_svc.c - goal: the services answer in-process, without any gRPC: a
 * put is applied and its revision returned, a range sees it, a txn runs
 * its branch, a compaction refuses a second compaction at the same
 * revision, the member list and status describe this lone member, etcd's
 * request checks answer ERR_* codes (an empty key: ERR_EMPTY_KEY), and the
 * in-process stream keeps what a service sends, in order and bounded.
 * Method: a real server on a temporary data dir (as test_server.c starts
 * one), driven through the svc_* functions with a completion that copies
 * the reply (packed) and signals the test thread.
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

/* What one completion delivered; the reply is kept packed. */
struct box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;    /* completions (must end at 1) */
    int err;      /* their err */
    uint8_t *buf; /* the reply, packed (malloc) */
    size_t len;
    const ProtobufCMessageDescriptor *type; /* the reply's type */
};

static void on_done(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct box *b = ctx;
    pthread_mutex_lock(&b->mu);
    b->calls++;
    b->err = err;
    if (reply != NULL) {
        b->type = reply->descriptor;
        b->len = protobuf_c_message_get_packed_size(reply);
        b->buf = malloc(b->len + 1);
        protobuf_c_message_pack(reply, b->buf);
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void box_init(struct box *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
}

static struct svc_done done_of(struct box *b)
{
    return (struct svc_done){on_done, b};
}

/* box_wait waits for the completion and returns the reply unpacked as
 * type d (NULL on error); free with protobuf_c_message_free_unpacked. */
static ProtobufCMessage *box_wait(struct box *b,
                                  const ProtobufCMessageDescriptor *d)
{
    pthread_mutex_lock(&b->mu);
    while (b->calls == 0)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    assert_int_equal(b->calls, 1);
    ProtobufCMessage *m = NULL;
    if (b->err == 0) {
        assert_ptr_equal(b->type, d);
        m = protobuf_c_message_unpack(d, NULL, b->len, b->buf);
        assert_non_null(m);
    } else {
        assert_null(b->buf);
    }
    free(b->buf);
    b->buf = NULL;
    return m;
}

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static char dir[256];
static struct server *srv;

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-test-svc-XXXXXX");
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

/* put answers err (and the revision in *rev_out on success). */
static int put(const char *key, const char *val, int64_t *rev_out)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin(key);
    p.value = bin(val);
    struct box b;
    box_init(&b);
    svc_kv_put(srv, &p, done_of(&b)); /* p is borrowed until return */
    Etcdserverpb__PutResponse *r = (Etcdserverpb__PutResponse *)box_wait(
        &b, &etcdserverpb__put_response__descriptor);
    if (r != NULL) {
        assert_non_null(r->header);
        if (rev_out != NULL)
            *rev_out = r->header->revision;
        etcdserverpb__put_response__free_unpacked(r, NULL);
    }
    return b.err;
}

/* range reads key (svc takes an unpacked request: pack + unpack one). */
static Etcdserverpb__RangeResponse *range(const char *key, bool serializable,
                                          int *err_out)
{
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    q.key = bin(key);
    q.serializable = serializable;
    uint8_t buf[256];
    size_t n = etcdserverpb__range_request__pack(&q, buf);
    Etcdserverpb__RangeRequest *r =
        etcdserverpb__range_request__unpack(NULL, n, buf);
    assert_non_null(r);
    struct box b;
    box_init(&b);
    svc_kv_range(srv, r, done_of(&b)); /* takes r */
    ProtobufCMessage *m =
        box_wait(&b, &etcdserverpb__range_response__descriptor);
    *err_out = b.err;
    return (Etcdserverpb__RangeResponse *)m;
}

static void test_put_range(void **state)
{
    (void)state;
    int64_t rev1 = 0, rev2 = 0;
    assert_int_equal(put("a", "1", &rev1), 0);
    assert_int_equal(put("a", "2", &rev2), 0);
    assert_int_equal(rev2, rev1 + 1);
    for (int serializable = 0; serializable < 2; serializable++) {
        int err;
        Etcdserverpb__RangeResponse *r = range("a", serializable, &err);
        assert_int_equal(err, 0);
        assert_int_equal(r->count, 1);
        assert_int_equal(r->n_kvs, 1);
        assert_memory_equal(r->kvs[0]->value.data, "2", 1);
        assert_int_equal(r->kvs[0]->mod_revision, rev2);
        assert_int_equal(r->header->revision, rev2);
        etcdserverpb__range_response__free_unpacked(r, NULL);
    }
}

/* etcd's checks: ERR_* codes, nothing proposed. */
static void test_checks(void **state)
{
    (void)state;
    assert_int_equal(put("", "v", NULL), ERR_EMPTY_KEY);
    int err;
    assert_null(range("", true, &err));
    assert_int_equal(err, ERR_EMPTY_KEY);
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin("k");
    p.value = bin("v");
    p.ignore_value = 1;
    struct box b;
    box_init(&b);
    svc_kv_put(srv, &p, done_of(&b));
    assert_null(box_wait(&b, &etcdserverpb__put_response__descriptor));
    assert_int_equal(b.err, ERR_VALUE_PROVIDED);
    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    box_init(&b);
    svc_kv_delete_range(srv, &d, done_of(&b));
    assert_null(
        box_wait(&b, &etcdserverpb__delete_range_response__descriptor));
    assert_int_equal(b.err, ERR_EMPTY_KEY);
}

/* A txn comparing a's value runs its success branch: a put of b. */
static void test_txn(void **state)
{
    (void)state;
    assert_int_equal(put("a", "1", NULL), 0);
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.key = bin("a");
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
    cmp.value = bin("1");
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin("b");
    p.value = bin("x");
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = &p;
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__RequestOp *ops[] = {&op, &op};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.compare = cmps;
    t.n_compare = 1;
    t.success = ops;
    t.n_success = 1;
    struct box b;
    box_init(&b);
    svc_kv_txn(srv, &t, done_of(&b));
    Etcdserverpb__TxnResponse *r = (Etcdserverpb__TxnResponse *)box_wait(
        &b, &etcdserverpb__txn_response__descriptor);
    assert_int_equal(b.err, 0);
    assert_true(r->succeeded);
    assert_int_equal(r->n_responses, 1);
    etcdserverpb__txn_response__free_unpacked(r, NULL);
    int err;
    Etcdserverpb__RangeResponse *g = range("b", true, &err);
    assert_int_equal(err, 0);
    assert_int_equal(g->n_kvs, 1);
    etcdserverpb__range_response__free_unpacked(g, NULL);
    /* The same key put twice in one branch: etcd's duplicate-key check. */
    t.n_success = 2;
    box_init(&b);
    svc_kv_txn(srv, &t, done_of(&b));
    assert_null(box_wait(&b, &etcdserverpb__txn_response__descriptor));
    assert_int_equal(b.err, ERR_DUPLICATE_KEY);
}

/* compact compacts at rev and returns the completion's err. */
static int compact(int64_t rev)
{
    Etcdserverpb__CompactionRequest c = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    c.revision = rev;
    struct box b;
    box_init(&b);
    svc_kv_compact(srv, &c, done_of(&b));
    ProtobufCMessage *m =
        box_wait(&b, &etcdserverpb__compaction_response__descriptor);
    if (m != NULL)
        protobuf_c_message_free_unpacked(m, NULL);
    return b.err;
}

static void test_compact(void **state)
{
    (void)state;
    int64_t rev;
    assert_int_equal(put("c", "1", NULL), 0);
    assert_int_equal(put("c", "2", &rev), 0);
    assert_int_equal(compact(rev), 0);
    assert_int_equal(compact(rev), ERR_COMPACTED);
    assert_int_equal(compact(rev + 100), ERR_FUTURE_REV);
}

static void test_member_list_status(void **state)
{
    (void)state;
    assert_int_equal(put("m", "1", NULL), 0); /* it leads and applies */
    Etcdserverpb__MemberListRequest lq =
        ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
    struct box b;
    box_init(&b);
    svc_cluster_member_list(srv, &lq, done_of(&b));
    Etcdserverpb__MemberListResponse *l =
        (Etcdserverpb__MemberListResponse *)box_wait(
            &b, &etcdserverpb__member_list_response__descriptor);
    assert_int_equal(l->n_members, 1);
    assert_int_equal(l->members[0]->id, server_member_id(srv));
    assert_int_equal(l->members[0]->n_peerurls, 1);
    assert_string_equal(l->members[0]->peerurls[0], "http://localhost:2380");
    assert_int_equal(l->header->member_id, server_member_id(srv));
    etcdserverpb__member_list_response__free_unpacked(l, NULL);
    Etcdserverpb__StatusRequest sq = ETCDSERVERPB__STATUS_REQUEST__INIT;
    box_init(&b);
    svc_maint_status(srv, &sq, done_of(&b));
    Etcdserverpb__StatusResponse *st =
        (Etcdserverpb__StatusResponse *)box_wait(
            &b, &etcdserverpb__status_response__descriptor);
    assert_string_equal(st->version, SERVER_REPORTED_VERSION_DEFAULT);
    assert_int_equal(st->leader, server_member_id(srv));
    assert_false(st->islearner);
    assert_true(st->raftappliedindex > 0 && st->dbsize > 0);
    etcdserverpb__status_response__free_unpacked(st, NULL);
    /* A member that is not there. */
    Etcdserverpb__MemberRemoveRequest rq =
        ETCDSERVERPB__MEMBER_REMOVE_REQUEST__INIT;
    rq.id = server_member_id(srv) + 1;
    box_init(&b);
    svc_cluster_member_remove(srv, &rq, done_of(&b));
    assert_null(
        box_wait(&b, &etcdserverpb__member_remove_response__descriptor));
    assert_int_equal(b.err, ERR_MEMBER_NOT_FOUND);
    /* The peer services: another token is answered too, as etcd (the
     * joining member takes this cluster's ids). */
    Cetcdpb__JoinRequest jq = CETCDPB__JOIN_REQUEST__INIT;
    jq.cluster_token = "not-ours";
    box_init(&b);
    svc_peer_join(srv, &jq, done_of(&b));
    Cetcdpb__JoinResponse *other = (Cetcdpb__JoinResponse *)box_wait(
        &b, &cetcdpb__join_response__descriptor);
    assert_non_null(other);
    assert_int_equal(other->cluster_id, server_cluster_id(srv));
    protobuf_c_message_free_unpacked(&other->base, NULL);
    jq.cluster_token = "etcd-cluster";
    box_init(&b);
    svc_peer_join(srv, &jq, done_of(&b));
    Cetcdpb__JoinResponse *j = (Cetcdpb__JoinResponse *)box_wait(
        &b, &cetcdpb__join_response__descriptor);
    assert_int_equal(j->cluster_id, server_cluster_id(srv));
    assert_int_equal(j->n_members, 1);
    cetcdpb__join_response__free_unpacked(j, NULL);
    Cetcdpb__PromoteRequest pq = CETCDPB__PROMOTE_REQUEST__INIT;
    pq.cluster_id = server_cluster_id(srv) + 1;
    box_init(&b);
    svc_peer_promote(srv, &pq, done_of(&b));
    assert_null(box_wait(&b, &cetcdpb__promote_response__descriptor));
    assert_int_equal(b.err, ERR_INVAL);
}

/* --- the in-process stream ----------------------------------------------- */

/* A streaming service for the test: it answers every inbound PutRequest
 * with a PutResponse whose header revision is the value's length, and
 * closes the stream when the client half-closes. */
struct echo {
    struct svc_stream *st; /* the transport's end */
    int ended;             /* end calls */
};

static int echo_open(struct server *s, struct svc_stream *st, void **out)
{
    (void)s;
    struct echo *e = calloc(1, sizeof *e);
    e->st = st;
    *out = e;
    return 0;
}

static void echo_recv(void *state, const ProtobufCMessage *m)
{
    struct echo *e = state;
    if (m == NULL) {
        assert_int_equal(e->st->close(e->st->ctx, 0), 0);
        return;
    }
    const Etcdserverpb__PutRequest *p = (const Etcdserverpb__PutRequest *)m;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    h.revision = (int64_t)p->value.len;
    Etcdserverpb__PutResponse r = ETCDSERVERPB__PUT_RESPONSE__INIT;
    r.header = &h;
    int rc = e->st->send(e->st->ctx, &r.base);
    assert_true(rc == 0 || rc == ERR_FULL);
}

static void echo_end(void *state, bool cancelled)
{
    struct echo *e = state;
    (void)cancelled;
    e->ended++;
    e->st->release(e->st->ctx);
}

static const struct svc_stream_handler echo = {
    &etcdserverpb__put_request__descriptor, echo_open, echo_recv, echo_end};

static void test_stream(void **state)
{
    (void)state;
    struct svc_mem_stream *ms;
    assert_int_equal(svc_mem_stream_create(0, &ms), ERR_INVAL);
    assert_int_equal(svc_mem_stream_create(3, &ms), 0);
    struct svc_stream *st = svc_mem_stream_get(ms);
    assert_int_equal(st->queue_max, 3);
    void *es;
    assert_int_equal(echo.open(srv, st, &es), 0);
    /* The transport's part: one inbound message at a time. */
    const char *vals[] = {"", "a", "bb", "ccc"};
    for (int i = 0; i < 4; i++) {
        Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
        p.key = bin("k");
        p.value = bin(vals[i]);
        echo.recv(es, &p.base);
    }
    /* Bounded: the fourth answer did not fit. */
    Etcdserverpb__PutResponse x = ETCDSERVERPB__PUT_RESPONSE__INIT;
    assert_int_equal(st->send(st->ctx, &x.base), ERR_FULL);
    for (int i = 0; i < 3; i++) {
        ProtobufCMessage *m;
        assert_int_equal(svc_mem_stream_take(
                             ms, &etcdserverpb__put_response__descriptor,
                             1000, &m),
                         0);
        Etcdserverpb__PutResponse *r = (Etcdserverpb__PutResponse *)m;
        assert_int_equal(r->header->revision, i); /* in order */
        protobuf_c_message_free_unpacked(m, NULL);
    }
    ProtobufCMessage *none;
    assert_int_equal(svc_mem_stream_take(
                         ms, &etcdserverpb__put_response__descriptor, 10,
                         &none),
                     ERR_TIMEOUT);
    int err = 1;
    assert_false(svc_mem_stream_closed(ms, &err));
    echo.recv(es, NULL); /* half-close: the service closes */
    assert_true(svc_mem_stream_closed(ms, &err));
    assert_int_equal(err, 0);
    assert_int_equal(st->send(st->ctx, &x.base), ERR_CLOSED);
    assert_int_equal(st->close(st->ctx, ERR_STOPPED), ERR_CLOSED);
    assert_false(svc_mem_stream_released(ms));
    echo.end(es, false);
    assert_true(svc_mem_stream_released(ms));
    assert_int_equal(((struct echo *)es)->ended, 1);
    free(es);
    svc_mem_stream_destroy(ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_list_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
