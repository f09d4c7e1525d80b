/*
 * test_grpcproxy_ns.c - goal: the gRPC proxy's --namespace rewriting
 * (grpcproxy/ns.c, ns_msgs.c) does what etcd 3.4's clientv3/namespace
 * does behind `etcd grpc-proxy start --namespace`, for every method that
 * carries keys: requests get the prefix (range ends by its rules: empty
 * stays, "\0" becomes the namespace's end with etcd's carry, others get
 * the prefix), replies and events lose it, TimeToLive drops the keys of
 * other namespaces; the requests clientv3/namespace refuses are refused
 * with the code and text a client of etcd's proxy gets; Lock and Election
 * names and keys are namespaced too; other methods pass untouched;
 * re-encoding keeps unknown fields; undecodable bytes and too deep txns
 * are refused.  Method: messages built with protobuf-c, rewritten as
 * bytes, decoded back and compared field by field; a round trip of a
 * request and a reply built from the rewritten request's keys; injected
 * allocation failures (util/mem.h).
 */
#include <grpc/status.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

#define NS "ns/"

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){s ? strlen(s) : 0, (uint8_t *)s};
}

static ProtobufCBinaryData binn(const char *s, size_t n)
{
    return (ProtobufCBinaryData){n, (uint8_t *)s};
}

static void assert_bin(ProtobufCBinaryData b, const char *want, size_t n)
{
    assert_int_equal(b.len, n);
    if (n > 0)
        assert_memory_equal(b.data, want, n);
}

#define assert_bytes(b, lit) assert_bin((b), (lit), sizeof(lit) - 1)

/* One rewrite's outcome. */
struct res {
    enum gp_ns_result r;
    uint8_t *out;
    size_t len;
    int code;
    const char *msg;
};

/* run packs m and rewrites it as the request (reply false) or reply of
 * method under prefix ns[0..ns_len). */
static struct res run_ns(const char *ns, size_t ns_len, const char *method,
                         bool reply, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *in = malloc(n ? n : 1);
    protobuf_c_message_pack(m, in);
    struct res s = {.code = -1};
    if (reply)
        s.r = gp_ns_reply((const uint8_t *)ns, ns_len, method, in, n, &s.out,
                          &s.len, &s.code, &s.msg);
    else
        s.r = gp_ns_request((const uint8_t *)ns, ns_len, method, in, n, &s.out,
                            &s.len, &s.code, &s.msg);
    free(in);
    return s;
}

static struct res run(const char *method, bool reply, const ProtobufCMessage *m)
{
    return run_ns(NS, strlen(NS), method, reply, m);
}

/* decoded: the NEW bytes of s as desc's message (free_unpacked). */
static void *decoded(struct res *s, const ProtobufCMessageDescriptor *desc)
{
    assert_int_equal(s->r, GP_NS_NEW);
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, s->len, s->out);
    assert_non_null(m);
    free(s->out);
    s->out = NULL;
    return m;
}

static void done(void *m)
{
    protobuf_c_message_free_unpacked(m, NULL);
}

/* --- KV requests ------------------------------------------------------------
 */

static Etcdserverpb__RangeRequest *range_rw(const char *ns, size_t ns_len,
                                            ProtobufCBinaryData key,
                                            ProtobufCBinaryData end)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = key;
    r.range_end = end;
    r.limit = 3;
    r.revision = 9;
    r.serializable = 1;
    r.keys_only = 1;
    r.max_create_revision = 77;
    struct res s = run_ns(ns, ns_len, "/etcdserverpb.KV/Range", false, &r.base);
    Etcdserverpb__RangeRequest *o =
        decoded(&s, &etcdserverpb__range_request__descriptor);
    assert_int_equal(o->limit, 3);
    assert_int_equal(o->revision, 9);
    assert_true(o->serializable && o->keys_only);
    assert_int_equal(o->max_create_revision, 77);
    return o;
}

static void test_range_ends(void **state)
{
    (void)state;
    Etcdserverpb__RangeRequest *o;
    o = range_rw(NS, 3, bin("a"), bin(NULL));
    assert_bytes(o->key, "ns/a");
    assert_int_equal(o->range_end.len, 0); /* empty stays empty */
    done(o);
    o = range_rw(NS, 3, bin("a"), bin("b"));
    assert_bytes(o->range_end, "ns/b");
    done(o);
    o = range_rw(NS, 3, bin("a"), binn("\0", 1)); /* from key */
    assert_bytes(o->range_end, "ns0");
    done(o);
    o = range_rw(NS, 3, binn("\0", 1), binn("\0", 1)); /* get "" --prefix */
    assert_bytes(o->key, "ns/\0");
    assert_bytes(o->range_end, "ns0");
    done(o);
    o = range_rw(NS, 3, bin("a"), binn("\0\0", 2)); /* not "\0": prefixed */
    assert_bytes(o->range_end, "ns/\0\0");
    done(o);
    /* clientv3/namespace's carry keeps the length: "a\xff" ends at
     * "b\0"; all 0xff gives "\0". */
    o = range_rw("a\xff", 2, bin("k"), binn("\0", 1));
    assert_bytes(o->key, "a\xffk");
    assert_bytes(o->range_end, "b\0");
    done(o);
    o = range_rw("\xff\xff", 2, bin("k"), binn("\0", 1));
    assert_bytes(o->range_end, "\0");
    done(o);
}

static void test_empty_key(void **state)
{
    (void)state;
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    r.range_end = bin("z");
    p.value = bin("v");
    const struct {
        const char *m;
        const ProtobufCMessage *msg;
    } cases[] = {{"/etcdserverpb.KV/Range", &r.base},
                 {"/etcdserverpb.KV/Put", &p.base},
                 {"/etcdserverpb.KV/DeleteRange", &d.base}};
    for (size_t i = 0; i < 3; i++) {
        struct res s = run(cases[i].m, false, cases[i].msg);
        assert_int_equal(s.r, GP_NS_ERROR);
        assert_int_equal(s.code, GRPC_STATUS_UNKNOWN);
        assert_string_equal(s.msg, "etcdserver: key is not provided");
        assert_null(s.out);
    }
}

static void test_put_delete_req(void **state)
{
    (void)state;
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin("k");
    p.value = bin("val");
    p.lease = 5;
    p.prev_kv = 1;
    struct res s = run("/etcdserverpb.KV/Put", false, &p.base);
    Etcdserverpb__PutRequest *po =
        decoded(&s, &etcdserverpb__put_request__descriptor);
    assert_bytes(po->key, "ns/k");
    assert_bytes(po->value, "val");
    assert_int_equal(po->lease, 5);
    assert_true(po->prev_kv);
    done(po);

    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = bin("k");
    d.range_end = binn("\0", 1);
    d.prev_kv = 1;
    s = run("/etcdserverpb.KV/DeleteRange", false, &d.base);
    Etcdserverpb__DeleteRangeRequest *dout =
        decoded(&s, &etcdserverpb__delete_range_request__descriptor);
    assert_bytes(dout->key, "ns/k");
    assert_bytes(dout->range_end, "ns0");
    assert_true(dout->prev_kv);
    done(dout);
}

static void test_txn_req(void **state)
{
    (void)state;
    Etcdserverpb__Compare c1 = ETCDSERVERPB__COMPARE__INIT;
    c1.key = bin("c");
    c1.range_end = binn("\0", 1);
    c1.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
    c1.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
    c1.value = bin("x");
    Etcdserverpb__Compare c2 = ETCDSERVERPB__COMPARE__INIT;
    c2.key = bin("d");
    c2.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
    c2.version = 0; /* a set oneof of 0 must survive */
    Etcdserverpb__Compare *cmps[] = {&c1, &c2};
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT; /* "" */
    Etcdserverpb__RequestOp o1 = ETCDSERVERPB__REQUEST_OP__INIT;
    o1.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    o1.request_put = &p;
    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = bin("a");
    d.range_end = bin("b");
    Etcdserverpb__RequestOp o2 = ETCDSERVERPB__REQUEST_OP__INIT;
    o2.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    o2.request_delete_range = &d;
    Etcdserverpb__RequestOp *inner_ops[] = {&o2};
    Etcdserverpb__TxnRequest inner = ETCDSERVERPB__TXN_REQUEST__INIT;
    inner.n_failure = 1;
    inner.failure = inner_ops;
    Etcdserverpb__RequestOp o3 = ETCDSERVERPB__REQUEST_OP__INIT;
    o3.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
    o3.request_txn = &inner;
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = bin("r");
    Etcdserverpb__RequestOp o4 = ETCDSERVERPB__REQUEST_OP__INIT;
    o4.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    o4.request_range = &r;
    Etcdserverpb__RequestOp *then[] = {&o1, &o3}, *els[] = {&o4};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_compare = 2;
    t.compare = cmps;
    t.n_success = 2;
    t.success = then;
    t.n_failure = 1;
    t.failure = els;

    struct res s = run("/etcdserverpb.KV/Txn", false, &t.base);
    Etcdserverpb__TxnRequest *o =
        decoded(&s, &etcdserverpb__txn_request__descriptor);
    assert_bytes(o->compare[0]->key, "ns/c");
    assert_bytes(o->compare[0]->range_end, "ns0");
    assert_bytes(o->compare[0]->value, "x");
    assert_bytes(o->compare[1]->key, "ns/d");
    assert_int_equal(o->compare[1]->range_end.len, 0);
    assert_int_equal(o->compare[1]->target_union_case,
                     ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION);
    /* A nested op's empty key is prefixed, not refused (etcd's too). */
    assert_bytes(o->success[0]->request_put->key, "ns/");
    Etcdserverpb__DeleteRangeRequest *od =
        o->success[1]->request_txn->failure[0]->request_delete_range;
    assert_bytes(od->key, "ns/a");
    assert_bytes(od->range_end, "ns/b");
    assert_bytes(o->failure[0]->request_range->key, "ns/r");
    done(o);

    /* An empty txn has nothing to change. */
    Etcdserverpb__TxnRequest e = ETCDSERVERPB__TXN_REQUEST__INIT;
    s = run("/etcdserverpb.KV/Txn", false, &e.base);
    assert_int_equal(s.r, GP_NS_SAME);
}

/* --- KV replies --------------------------------------------------------------
 */

static void test_kv_replies(void **state)
{
    (void)state;
    Mvccpb__KeyValue k1 = MVCCPB__KEY_VALUE__INIT, k2 = MVCCPB__KEY_VALUE__INIT;
    Mvccpb__KeyValue k3 = MVCCPB__KEY_VALUE__INIT;
    k1.key = bin("ns/a");
    k1.value = bin("1");
    k1.mod_revision = 4;
    k2.key = bin("ns/");
    k3.key = bin("other"); /* not from the namespace: left as it is */
    Mvccpb__KeyValue *kvs[] = {&k1, &k2, &k3};
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    h.revision = 12;
    Etcdserverpb__RangeResponse rr = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    rr.header = &h;
    rr.n_kvs = 3;
    rr.kvs = kvs;
    rr.count = 3;
    rr.more = 1;
    struct res s = run("/etcdserverpb.KV/Range", true, &rr.base);
    Etcdserverpb__RangeResponse *ro =
        decoded(&s, &etcdserverpb__range_response__descriptor);
    assert_bytes(ro->kvs[0]->key, "a");
    assert_bytes(ro->kvs[0]->value, "1");
    assert_int_equal(ro->kvs[0]->mod_revision, 4);
    assert_int_equal(ro->kvs[1]->key.len, 0);
    assert_bytes(ro->kvs[2]->key, "other");
    assert_int_equal(ro->header->revision, 12);
    assert_int_equal(ro->count, 3);
    assert_true(ro->more);
    done(ro);
    /* Nothing with the prefix: the bytes go as they are. */
    rr.n_kvs = 0;
    s = run("/etcdserverpb.KV/Range", true, &rr.base);
    assert_int_equal(s.r, GP_NS_SAME);

    Etcdserverpb__PutResponse pr = ETCDSERVERPB__PUT_RESPONSE__INIT;
    s = run("/etcdserverpb.KV/Put", true, &pr.base);
    assert_int_equal(s.r, GP_NS_SAME);
    k1.key = bin("ns/a");
    pr.prev_kv = &k1;
    s = run("/etcdserverpb.KV/Put", true, &pr.base);
    Etcdserverpb__PutResponse *po =
        decoded(&s, &etcdserverpb__put_response__descriptor);
    assert_bytes(po->prev_kv->key, "a");
    done(po);

    Etcdserverpb__DeleteRangeResponse dr =
        ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
    dr.deleted = 2;
    dr.n_prev_kvs = 2;
    dr.prev_kvs = kvs;
    s = run("/etcdserverpb.KV/DeleteRange", true, &dr.base);
    Etcdserverpb__DeleteRangeResponse *dout =
        decoded(&s, &etcdserverpb__delete_range_response__descriptor);
    assert_int_equal(dout->deleted, 2);
    assert_bytes(dout->prev_kvs[0]->key, "a");
    assert_int_equal(dout->prev_kvs[1]->key.len, 0);
    done(dout);

    /* Txn: each response kind, nested txns too. */
    rr.n_kvs = 1;
    Etcdserverpb__ResponseOp a = ETCDSERVERPB__RESPONSE_OP__INIT;
    a.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
    a.response_range = &rr;
    Etcdserverpb__ResponseOp b = ETCDSERVERPB__RESPONSE_OP__INIT;
    b.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
    b.response_put = &pr;
    Etcdserverpb__ResponseOp c = ETCDSERVERPB__RESPONSE_OP__INIT;
    c.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE;
    c.response_delete_range = &dr;
    Etcdserverpb__ResponseOp *inner_ops[] = {&c};
    Etcdserverpb__TxnResponse inner = ETCDSERVERPB__TXN_RESPONSE__INIT;
    inner.n_responses = 1;
    inner.responses = inner_ops;
    Etcdserverpb__ResponseOp d = ETCDSERVERPB__RESPONSE_OP__INIT;
    d.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
    d.response_txn = &inner;
    Etcdserverpb__ResponseOp *ops[] = {&a, &b, &d};
    Etcdserverpb__TxnResponse t = ETCDSERVERPB__TXN_RESPONSE__INIT;
    t.succeeded = 1;
    t.n_responses = 3;
    t.responses = ops;
    s = run("/etcdserverpb.KV/Txn", true, &t.base);
    Etcdserverpb__TxnResponse *to =
        decoded(&s, &etcdserverpb__txn_response__descriptor);
    assert_true(to->succeeded);
    assert_bytes(to->responses[0]->response_range->kvs[0]->key, "a");
    assert_bytes(to->responses[1]->response_put->prev_kv->key, "a");
    Etcdserverpb__DeleteRangeResponse *nd =
        to->responses[2]->response_txn->responses[0]->response_delete_range;
    assert_bytes(nd->prev_kvs[0]->key, "a");
    done(to);

    /* Compact has no keys. */
    Etcdserverpb__CompactionRequest cr = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    cr.revision = 3;
    s = run("/etcdserverpb.KV/Compact", false, &cr.base);
    assert_int_equal(s.r, GP_NS_SAME);
}

/* --- Watch, Lease
 * -------------------------------------------------------------- */

static void test_watch(void **state)
{
    (void)state;
    Etcdserverpb__WatchCreateRequest cr =
        ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    cr.key = bin("w");
    cr.range_end = binn("\0", 1);
    cr.start_revision = 5;
    cr.prev_kv = 1;
    cr.watch_id = 7;
    Etcdserverpb__WatchCreateRequest__FilterType f[] = {
        ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NODELETE};
    cr.n_filters = 1;
    cr.filters = f;
    Etcdserverpb__WatchRequest wr = ETCDSERVERPB__WATCH_REQUEST__INIT;
    wr.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    wr.create_request = &cr;
    struct res s = run("/etcdserverpb.Watch/Watch", false, &wr.base);
    Etcdserverpb__WatchRequest *wo =
        decoded(&s, &etcdserverpb__watch_request__descriptor);
    assert_bytes(wo->create_request->key, "ns/w");
    assert_bytes(wo->create_request->range_end, "ns0");
    assert_int_equal(wo->create_request->start_revision, 5);
    assert_int_equal(wo->create_request->watch_id, 7);
    assert_int_equal(wo->create_request->n_filters, 1);
    assert_true(wo->create_request->prev_kv);
    done(wo);
    /* An empty key is watched as the prefix itself (no check). */
    cr.key = bin(NULL);
    cr.range_end = bin(NULL);
    s = run("/etcdserverpb.Watch/Watch", false, &wr.base);
    wo = decoded(&s, &etcdserverpb__watch_request__descriptor);
    assert_bytes(wo->create_request->key, "ns/");
    assert_int_equal(wo->create_request->range_end.len, 0);
    done(wo);

    Etcdserverpb__WatchCancelRequest cancel =
        ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
    cancel.watch_id = 7;
    wr.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
    wr.cancel_request = &cancel;
    s = run("/etcdserverpb.Watch/Watch", false, &wr.base);
    assert_int_equal(s.r, GP_NS_SAME);

    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT,
                     prev = MVCCPB__KEY_VALUE__INIT;
    kv.key = bin("ns/w1");
    prev.key = bin("ns/w1");
    prev.value = bin("old");
    Mvccpb__Event e1 = MVCCPB__EVENT__INIT, e2 = MVCCPB__EVENT__INIT;
    e1.kv = &kv;
    e1.prev_kv = &prev;
    e2.type = MVCCPB__EVENT__EVENT_TYPE__DELETE;
    e2.kv = &kv;
    Mvccpb__Event *evs[] = {&e1, &e2};
    Etcdserverpb__WatchResponse resp = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    resp.watch_id = 7;
    resp.cancel_reason = "why";
    resp.n_events = 0;
    s = run("/etcdserverpb.Watch/Watch", true, &resp.base);
    assert_int_equal(s.r, GP_NS_SAME);
    resp.n_events = 2;
    resp.events = evs;
    s = run("/etcdserverpb.Watch/Watch", true, &resp.base);
    Etcdserverpb__WatchResponse *ro =
        decoded(&s, &etcdserverpb__watch_response__descriptor);
    assert_int_equal(ro->watch_id, 7);
    assert_string_equal(ro->cancel_reason, "why");
    assert_bytes(ro->events[0]->kv->key, "w1");
    assert_bytes(ro->events[0]->prev_kv->key, "w1");
    assert_bytes(ro->events[0]->prev_kv->value, "old");
    assert_int_equal(ro->events[1]->type, MVCCPB__EVENT__EVENT_TYPE__DELETE);
    assert_bytes(ro->events[1]->kv->key, "w1");
    assert_null(ro->events[1]->prev_kv);
    done(ro);
}

static void test_lease(void **state)
{
    (void)state;
    ProtobufCBinaryData ks[] = {bin("ns/a"), bin("n"), bin("x/y"), bin("ns/"),
                                bin("ns/b")};
    Etcdserverpb__LeaseTimeToLiveResponse r =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_RESPONSE__INIT;
    r.id = 1;
    r.ttl = 10;
    r.grantedttl = 20;
    r.n_keys = 5;
    r.keys = ks;
    struct res s = run("/etcdserverpb.Lease/LeaseTimeToLive", true, &r.base);
    Etcdserverpb__LeaseTimeToLiveResponse *o =
        decoded(&s, &etcdserverpb__lease_time_to_live_response__descriptor);
    assert_int_equal(o->n_keys, 3);
    assert_bytes(o->keys[0], "a");
    assert_int_equal(o->keys[1].len, 0);
    assert_bytes(o->keys[2], "b");
    assert_int_equal(o->ttl, 10);
    assert_int_equal(o->grantedttl, 20);
    done(o);
    /* Only foreign keys: all dropped. */
    r.n_keys = 2;
    r.keys = &ks[1];
    s = run("/etcdserverpb.Lease/LeaseTimeToLive", true, &r.base);
    o = decoded(&s, &etcdserverpb__lease_time_to_live_response__descriptor);
    assert_int_equal(o->n_keys, 0);
    done(o);
    r.n_keys = 0;
    s = run("/etcdserverpb.Lease/LeaseTimeToLive", true, &r.base);
    assert_int_equal(s.r, GP_NS_SAME);
    Etcdserverpb__LeaseTimeToLiveRequest q =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    q.keys = 1;
    s = run("/etcdserverpb.Lease/LeaseTimeToLive", false, &q.base);
    assert_int_equal(s.r, GP_NS_SAME);
}

/* Methods without keys are not even decoded. */
static void test_same(void **state)
{
    (void)state;
    static const char *methods[] = {"/etcdserverpb.KV/Compact",
                                    "/etcdserverpb.Lease/LeaseLeases",
                                    "/etcdserverpb.Lease/LeaseGrant",
                                    "/etcdserverpb.Lease/LeaseRevoke",
                                    "/etcdserverpb.Lease/LeaseKeepAlive",
                                    "/etcdserverpb.Cluster/MemberList",
                                    "/etcdserverpb.Maintenance/Status",
                                    "/etcdserverpb.Maintenance/Snapshot",
                                    "/etcdserverpb.Auth/UserAdd",
                                    "/etcdserverpb.Auth/RoleGrantPermission",
                                    "/nope/Nope"};
    uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};
    uint8_t *out = NULL;
    size_t len = 0;
    int code = -1;
    const char *msg = NULL;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        assert_int_equal(gp_ns_request((const uint8_t *)NS, 3, methods[i], junk,
                                       sizeof junk, &out, &len, &code, &msg),
                         GP_NS_SAME);
        assert_int_equal(gp_ns_reply((const uint8_t *)NS, 3, methods[i], junk,
                                     sizeof junk, &out, &len, &code, &msg),
                         GP_NS_SAME);
    }
    assert_null(out);
    /* Unlock, Proclaim and Resign replies carry no key. */
    assert_int_equal(gp_ns_reply((const uint8_t *)NS, 3,
                                 "/v3lockpb.Lock/Unlock", junk, sizeof junk,
                                 &out, &len, &code, &msg),
                     GP_NS_SAME);
}

/* --- Lock, Election
 * ------------------------------------------------------------ */

static void test_lock(void **state)
{
    (void)state;
    V3lockpb__LockRequest l = V3LOCKPB__LOCK_REQUEST__INIT;
    l.name = bin("mylock");
    l.lease = 99;
    struct res s = run("/v3lockpb.Lock/Lock", false, &l.base);
    V3lockpb__LockRequest *lo =
        decoded(&s, &v3lockpb__lock_request__descriptor);
    assert_bytes(lo->name, "ns/mylock");
    assert_int_equal(lo->lease, 99);
    done(lo);

    V3lockpb__LockResponse lr = V3LOCKPB__LOCK_RESPONSE__INIT;
    lr.key = bin("ns/mylock/694d");
    s = run("/v3lockpb.Lock/Lock", true, &lr.base);
    V3lockpb__LockResponse *lro =
        decoded(&s, &v3lockpb__lock_response__descriptor);
    assert_bytes(lro->key, "mylock/694d");
    done(lro);

    V3lockpb__UnlockRequest u = V3LOCKPB__UNLOCK_REQUEST__INIT;
    u.key = bin("mylock/694d");
    s = run("/v3lockpb.Lock/Unlock", false, &u.base);
    V3lockpb__UnlockRequest *uo =
        decoded(&s, &v3lockpb__unlock_request__descriptor);
    assert_bytes(uo->key, "ns/mylock/694d");
    done(uo);
    /* An empty key stays empty: the upstream refuses it as without. */
    u.key = bin(NULL);
    s = run("/v3lockpb.Lock/Unlock", false, &u.base);
    assert_int_equal(s.r, GP_NS_SAME);
}

static void test_election(void **state)
{
    (void)state;
    V3electionpb__CampaignRequest c = V3ELECTIONPB__CAMPAIGN_REQUEST__INIT;
    c.name = bin("e");
    c.lease = 5;
    c.value = bin("me");
    struct res s = run("/v3electionpb.Election/Campaign", false, &c.base);
    V3electionpb__CampaignRequest *co =
        decoded(&s, &v3electionpb__campaign_request__descriptor);
    assert_bytes(co->name, "ns/e");
    assert_bytes(co->value, "me");
    assert_int_equal(co->lease, 5);
    done(co);

    V3electionpb__LeaderKey lk = V3ELECTIONPB__LEADER_KEY__INIT;
    lk.name = bin("ns/e");
    lk.key = bin("ns/e/5");
    lk.rev = 8;
    lk.lease = 5;
    V3electionpb__CampaignResponse cr = V3ELECTIONPB__CAMPAIGN_RESPONSE__INIT;
    cr.leader = &lk;
    s = run("/v3electionpb.Election/Campaign", true, &cr.base);
    V3electionpb__CampaignResponse *cro =
        decoded(&s, &v3electionpb__campaign_response__descriptor);
    assert_bytes(cro->leader->name, "e");
    assert_bytes(cro->leader->key, "e/5");
    assert_int_equal(cro->leader->rev, 8);
    done(cro);
    cr.leader = NULL;
    s = run("/v3electionpb.Election/Campaign", true, &cr.base);
    assert_int_equal(s.r, GP_NS_SAME);

    /* Proclaim and Resign send the LeaderKey back: prefixed again. */
    lk.name = bin("e");
    lk.key = bin("e/5");
    V3electionpb__ProclaimRequest p = V3ELECTIONPB__PROCLAIM_REQUEST__INIT;
    p.leader = &lk;
    p.value = bin("v2");
    s = run("/v3electionpb.Election/Proclaim", false, &p.base);
    V3electionpb__ProclaimRequest *po =
        decoded(&s, &v3electionpb__proclaim_request__descriptor);
    assert_bytes(po->leader->name, "ns/e");
    assert_bytes(po->leader->key, "ns/e/5");
    assert_int_equal(po->leader->rev, 8);
    assert_bytes(po->value, "v2");
    done(po);
    V3electionpb__ResignRequest r = V3ELECTIONPB__RESIGN_REQUEST__INIT;
    r.leader = &lk;
    s = run("/v3electionpb.Election/Resign", false, &r.base);
    V3electionpb__ResignRequest *ro =
        decoded(&s, &v3electionpb__resign_request__descriptor);
    assert_bytes(ro->leader->key, "ns/e/5");
    done(ro);
    r.leader = NULL; /* the upstream's error: "leader" must be given */
    s = run("/v3electionpb.Election/Resign", false, &r.base);
    assert_int_equal(s.r, GP_NS_SAME);

    static const char *leader_methods[] = {"/v3electionpb.Election/Leader",
                                           "/v3electionpb.Election/Observe"};
    for (int i = 0; i < 2; i++) {
        V3electionpb__LeaderRequest q = V3ELECTIONPB__LEADER_REQUEST__INIT;
        q.name = bin("e");
        s = run(leader_methods[i], false, &q.base);
        V3electionpb__LeaderRequest *qo =
            decoded(&s, &v3electionpb__leader_request__descriptor);
        assert_bytes(qo->name, "ns/e");
        done(qo);
        Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT;
        kv.key = bin("ns/e/5");
        kv.value = bin("me");
        V3electionpb__LeaderResponse lr = V3ELECTIONPB__LEADER_RESPONSE__INIT;
        lr.kv = &kv;
        s = run(leader_methods[i], true, &lr.base);
        V3electionpb__LeaderResponse *lro =
            decoded(&s, &v3electionpb__leader_response__descriptor);
        assert_bytes(lro->kv->key, "e/5");
        assert_bytes(lro->kv->value, "me");
        done(lro);
    }
}

/* --- round trip, fields, errors
 * ------------------------------------------------ */

/* A request rewritten, a reply made of the keys the upstream has in the
 * rewritten range, rewritten back: the client's keys. */
static void test_round_trip(void **state)
{
    (void)state;
    Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
    q.key = bin("a");
    q.range_end = binn("\0", 1);
    struct res s = run("/etcdserverpb.KV/Range", false, &q.base);
    Etcdserverpb__RangeRequest *up =
        decoded(&s, &etcdserverpb__range_request__descriptor);
    /* The upstream's keys, sorted; those in [key, range_end) answer. */
    static const char *store[] = {"a",      "ns",      "ns/", "ns/0", "ns/a",
                                  "ns/b/c", "ns/\xff", "ns0", "nt"};
    Mvccpb__KeyValue kvs[9], *kp[9];
    size_t n = 0;
    for (size_t i = 0; i < 9; i++) {
        ProtobufCBinaryData k = bin(store[i]);
        size_t kl = k.len, bl = up->key.len, el = up->range_end.len;
        bool ge =
            memcmp(k.data, up->key.data, kl < bl ? kl : bl) > 0 ||
            (memcmp(k.data, up->key.data, kl < bl ? kl : bl) == 0 && kl >= bl);
        bool lt = memcmp(k.data, up->range_end.data, kl < el ? kl : el) < 0 ||
                  (memcmp(k.data, up->range_end.data, kl < el ? kl : el) == 0 &&
                   kl < el);
        if (ge && lt) {
            kvs[n] = (Mvccpb__KeyValue)MVCCPB__KEY_VALUE__INIT;
            kvs[n].key = k;
            kp[n] = &kvs[n];
            n++;
        }
    }
    done(up);
    assert_int_equal(n, 3);
    Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    r.n_kvs = n;
    r.kvs = kp;
    s = run("/etcdserverpb.KV/Range", true, &r.base);
    Etcdserverpb__RangeResponse *o =
        decoded(&s, &etcdserverpb__range_response__descriptor);
    assert_bytes(o->kvs[0]->key, "a");
    assert_bytes(o->kvs[1]->key, "b/c");
    assert_bytes(o->kvs[2]->key, "\xff");
    done(o);
}

/* protobuf-c keeps unknown fields and writes them back. */
static void test_unknown_fields(void **state)
{
    (void)state;
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin("k");
    size_t n = protobuf_c_message_get_packed_size(&p.base);
    uint8_t in[64];
    protobuf_c_message_pack(&p.base, in);
    static const uint8_t extra[] = {0xa2, 0x06, 0x02, 'h', 'i'}; /* 100 */
    memcpy(in + n, extra, sizeof extra);
    uint8_t *out = NULL;
    size_t len = 0;
    int code;
    const char *msg;
    assert_int_equal(gp_ns_request((const uint8_t *)NS, 3,
                                   "/etcdserverpb.KV/Put", in, n + sizeof extra,
                                   &out, &len, &code, &msg),
                     GP_NS_NEW);
    assert_true(len >= sizeof extra);
    assert_memory_equal(out + len - sizeof extra, extra, sizeof extra);
    Etcdserverpb__PutRequest *o =
        etcdserverpb__put_request__unpack(NULL, len, out);
    assert_bytes(o->key, "ns/k");
    assert_int_equal(o->base.n_unknown_fields, 1);
    done(o);
    free(out);
}

/* Field 0, which protobuf-c takes when its tag is written in two bytes
 * ("\x82\x00") and writes back as bytes it refuses itself; a field
 * number above 2^29 - 1; a group. */
static void test_bad_fields(void **state)
{
    (void)state;
    static const struct {
        uint8_t b[8];
        size_t n;
    } bad[] = {{{0x0a, 0x01, 'e', 0x82, 0x00, 0x00}, 6},
               {{0xf8, 0xff, 0xff, 0xff, 0x7f, 0x01}, 6},
               {{0x0b, 0x0c}, 2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *out = NULL;
        size_t len = 0;
        int code = -1;
        const char *msg = NULL;
        assert_int_equal(gp_ns_request((const uint8_t *)NS, 3,
                                       "/v3electionpb.Election/Leader",
                                       bad[i].b, bad[i].n, &out, &len, &code,
                                       &msg),
                         GP_NS_ERROR);
        assert_int_equal(code, GRPC_STATUS_INTERNAL);
        assert_null(out);
    }
    /* A nested message is checked too. */
    static const uint8_t nested[] = {0x12, 0x03, 0x82, 0x00, 0x00}; /* kv */
    uint8_t *out = NULL;
    size_t len = 0;
    int code = -1;
    const char *msg = NULL;
    assert_int_equal(gp_ns_reply((const uint8_t *)NS, 3,
                                 "/v3electionpb.Election/Leader", nested,
                                 sizeof nested, &out, &len, &code, &msg),
                     GP_NS_ERROR);
}

static void test_garbage(void **state)
{
    (void)state;
    static const char *methods[] = {
        "/etcdserverpb.KV/Range",          "/etcdserverpb.KV/Put",
        "/etcdserverpb.KV/DeleteRange",    "/etcdserverpb.KV/Txn",
        "/etcdserverpb.Watch/Watch",       "/v3lockpb.Lock/Lock",
        "/v3electionpb.Election/Campaign", "/v3electionpb.Election/Observe"};
    uint8_t junk[] = {0x0a, 0x10, 'x'}; /* a field cut short */
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        uint8_t *out = NULL;
        size_t len = 0;
        int code = -1;
        const char *msg = NULL;
        assert_int_equal(gp_ns_request((const uint8_t *)NS, 3, methods[i], junk,
                                       sizeof junk, &out, &len, &code, &msg),
                         GP_NS_ERROR);
        assert_int_equal(code, GRPC_STATUS_INTERNAL);
        assert_string_equal(msg, "grpc: error unmarshalling request");
        assert_int_equal(gp_ns_reply((const uint8_t *)NS, 3, methods[i], junk,
                                     sizeof junk, &out, &len, &code, &msg),
                         GP_NS_ERROR);
        assert_int_equal(code, GRPC_STATUS_INTERNAL);
        assert_string_equal(msg,
                            "grpc: failed to unmarshal the received message");
        assert_null(out);
    }
}

/* Txns nested deeper than GP_TXN_DEPTH_MAX are refused before decoding. */
static void test_too_deep(void **state)
{
    (void)state;
    enum { D = GP_TXN_DEPTH_MAX + 1 };
    Etcdserverpb__TxnRequest t[D];
    Etcdserverpb__RequestOp o[D], *op[D];
    Etcdserverpb__TxnResponse r[D];
    Etcdserverpb__ResponseOp ro[D], *rop[D];
    for (int i = D - 1; i >= 0; i--) {
        t[i] = (Etcdserverpb__TxnRequest)ETCDSERVERPB__TXN_REQUEST__INIT;
        r[i] = (Etcdserverpb__TxnResponse)ETCDSERVERPB__TXN_RESPONSE__INIT;
        if (i == D - 1)
            continue;
        o[i] = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
        o[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
        o[i].request_txn = &t[i + 1];
        op[i] = &o[i];
        t[i].n_failure = 1;
        t[i].failure = &op[i];
        ro[i] = (Etcdserverpb__ResponseOp)ETCDSERVERPB__RESPONSE_OP__INIT;
        ro[i].response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
        ro[i].response_txn = &r[i + 1];
        rop[i] = &ro[i];
        r[i].n_responses = 1;
        r[i].responses = &rop[i];
    }
    struct res s = run("/etcdserverpb.KV/Txn", false, &t[0].base);
    assert_int_equal(s.r, GP_NS_ERROR);
    assert_int_equal(s.code, GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(s.msg, "etcdserver: too many operations in txn request");
    s = run("/etcdserverpb.KV/Txn", true, &r[0].base);
    assert_int_equal(s.r, GP_NS_ERROR);
    assert_int_equal(s.code, GRPC_STATUS_INTERNAL);
    /* One level less is fine (an empty nested txn has no key: SAME). */
    s = run("/etcdserverpb.KV/Txn", false, &t[1].base);
    assert_int_equal(s.r, GP_NS_SAME);
}

/* Allocation failures: a clean refusal or a right answer, no leak. */
static void test_faults(void **state)
{
    (void)state;
    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT;
    kv.key = bin("ns/k");
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin("k");
    Etcdserverpb__RequestOp o = ETCDSERVERPB__REQUEST_OP__INIT;
    o.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    o.request_put = &p;
    Etcdserverpb__RequestOp *ops[] = {&o, &o, &o};
    Etcdserverpb__Compare c = ETCDSERVERPB__COMPARE__INIT;
    c.key = bin("c");
    c.range_end = binn("\0", 1);
    Etcdserverpb__Compare *cs[] = {&c};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_compare = 1;
    t.compare = cs;
    t.n_success = 3;
    t.success = ops;
    for (long f = 1; f <= 8; f++) {
        mem_fault_set(f);
        struct res s = run("/etcdserverpb.KV/Txn", false, &t.base);
        mem_fault_set(0);
        if (s.r == GP_NS_ERROR) {
            assert_int_equal(s.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
            continue;
        }
        Etcdserverpb__TxnRequest *to =
            decoded(&s, &etcdserverpb__txn_request__descriptor);
        assert_bytes(to->success[2]->request_put->key, "ns/k");
        assert_bytes(to->compare[0]->range_end, "ns0");
        done(to);
    }
    Etcdserverpb__PutResponse pr = ETCDSERVERPB__PUT_RESPONSE__INIT;
    pr.prev_kv = &kv;
    mem_fault_set(1);
    struct res s = run("/etcdserverpb.KV/Put", true, &pr.base);
    mem_fault_set(0);
    assert_int_equal(s.r, GP_NS_ERROR);
    assert_int_equal(s.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_ends),
        cmocka_unit_test(test_empty_key),
        cmocka_unit_test(test_put_delete_req),
        cmocka_unit_test(test_txn_req),
        cmocka_unit_test(test_kv_replies),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_lease),
        cmocka_unit_test(test_same),
        cmocka_unit_test(test_lock),
        cmocka_unit_test(test_election),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_unknown_fields),
        cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_too_deep),
        cmocka_unit_test(test_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
