/*
 * test_grpcproxy_cache.c - goal: the gRPC proxy's KV cache (grpcproxy/
 * cache.c, cache_ivl.c) answers as etcd 3.4's proxy cache does (store.go,
 * kv.go): only serializable Ranges are looked up; replies are keyed by the
 * request with serializable set; writes through the proxy drop exactly the
 * cached requests whose [key, range_end) they touch (single keys, prefix
 * ranges, "\0" ends, deletes, txns in branch order, nested txns), fixed-
 * revision reads are never dropped by writes; compaction answers
 * COMPACTED below the compacted revision; the LRU and byte bounds hold;
 * the counters count as etcd's metrics do.  Method: requests and replies
 * built with protobuf-c and fed as bytes, as the proxy does; the interval
 * index is also checked against a brute-force model on random intervals
 * over a small alphabet; allocation failures are injected (util/mem.h).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "util/err.h"
#include "util/mem.h"

/* A packed message (free with free()). */
struct buf {
    uint8_t *p;
    size_t len;
};

static struct buf pack(const ProtobufCMessage *m)
{
    struct buf b;
    b.len = protobuf_c_message_get_packed_size(m);
    b.p = malloc(b.len ? b.len : 1);
    assert_non_null(b.p);
    protobuf_c_message_pack(m, b.p);
    return b;
}

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){s ? strlen(s) : 0, (uint8_t *)s};
}

/* A "\0" range end (strlen cannot give it). */
static const ProtobufCBinaryData from_key = {1, (uint8_t *)"\0"};

static Etcdserverpb__RangeRequest range_msg(const char *key, const char *end,
                                            int64_t rev, bool ser)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = bin(key);
    r.range_end = bin(end);
    r.revision = rev;
    r.serializable = ser;
    return r;
}

static struct buf range_req(const char *key, const char *end, int64_t rev,
                            bool ser)
{
    Etcdserverpb__RangeRequest r = range_msg(key, end, rev, ser);
    return pack(&r.base);
}

static struct buf range_req_from(const char *key, int64_t rev)
{
    Etcdserverpb__RangeRequest r = range_msg(key, NULL, rev, true);
    r.range_end = from_key;
    return pack(&r.base);
}

/* A RangeResponse whose count names it (tells replies apart). */
static Etcdserverpb__RangeResponse range_resp_msg(int64_t count)
{
    Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    r.count = count;
    return r;
}

static struct buf range_resp(int64_t count)
{
    Etcdserverpb__RangeResponse r = range_resp_msg(count);
    return pack(&r.base);
}

/* done feeds request b and a reply naming count to the cache. */
static void done(struct gp_cache *c, struct buf b, int64_t count)
{
    struct buf r = range_resp(count);
    gp_cache_range_done(c, "", b.p, b.len, r.p, r.len);
    free(r.p);
}

/* look returns what a lookup of b finds; for a hit, the reply's count in
 * *count (else -1). */
static enum gp_cache_hit look(struct gp_cache *c, struct buf b, int64_t *count)
{
    uint8_t *resp = NULL;
    size_t len = 0;
    enum gp_cache_hit h = gp_cache_range_lookup(c, "", b.p, b.len, &resp, &len);
    *count = -1;
    if (h == GP_CACHE_HIT) {
        Etcdserverpb__RangeResponse *r =
            etcdserverpb__range_response__unpack(NULL, len, resp);
        assert_non_null(r);
        *count = r->count;
        etcdserverpb__range_response__free_unpacked(r, NULL);
        free(resp);
    } else {
        assert_null(resp);
    }
    return h;
}

/* cached: key's single-key serializable read (revision 0) hits. */
static bool cached_req(struct gp_cache *c, struct buf b)
{
    int64_t n;
    enum gp_cache_hit h = look(c, b, &n);
    free(b.p);
    return h == GP_CACHE_HIT;
}

static void put(struct gp_cache *c, const char *key)
{
    Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
    r.key = bin(key);
    struct buf b = pack(&r.base);
    gp_cache_put(c, b.p, b.len);
    free(b.p);
}

static void del(struct gp_cache *c, const char *key,
                const ProtobufCBinaryData *end)
{
    Etcdserverpb__DeleteRangeRequest r =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    r.key = bin(key);
    if (end != NULL)
        r.range_end = *end;
    struct buf b = pack(&r.base);
    gp_cache_delete(c, b.p, b.len);
    free(b.p);
}

static void add(struct gp_cache *c, struct buf b, int64_t count)
{
    done(c, b, count);
    free(b.p);
}

static uint64_t keys(struct gp_cache *c)
{
    struct gp_cache_stats st;
    gp_cache_stats(c, &st);
    return st.keys;
}

static struct gp_cache *open_cache(size_t entries, size_t bytes)
{
    struct gp_cache *c = NULL;
    assert_int_equal(gp_cache_open(entries, bytes, &c), 0);
    assert_non_null(c);
    return c;
}

/* --- lookup ----------------------------------------------------------- */

static void test_lookup_none_miss_hit(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    struct buf lin = range_req("a", NULL, 0, false);
    struct buf ser = range_req("a", NULL, 0, true);
    int64_t n;
    struct gp_cache_stats st;

    /* Linearizable reads are never looked up (and not counted). */
    assert_int_equal(look(c, lin, &n), GP_CACHE_NONE);
    uint8_t junk[] = {0xff, 0xff, 0xff};
    uint8_t *resp = NULL;
    size_t len = 0;
    assert_int_equal(gp_cache_range_lookup(c, "", junk, sizeof junk, &resp, &len),
                     GP_CACHE_NONE);
    assert_int_equal(look(c, ser, &n), GP_CACHE_MISS);
    /* A linearizable reply is cached as the serializable request. */
    done(c, lin, 7);
    assert_int_equal(look(c, ser, &n), GP_CACHE_HIT);
    assert_int_equal(n, 7);
    assert_int_equal(look(c, lin, &n), GP_CACHE_NONE);
    /* The same request again replaces the reply. */
    done(c, ser, 8);
    assert_int_equal(look(c, ser, &n), GP_CACHE_HIT);
    assert_int_equal(n, 8);
    gp_cache_stats(c, &st);
    assert_int_equal(st.keys, 1);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 1);
    /* Another request (a limit) is another entry. */
    Etcdserverpb__RangeRequest r = range_msg("a", NULL, 0, true);
    r.limit = 1;
    struct buf lim = pack(&r.base);
    assert_int_equal(look(c, lim, &n), GP_CACHE_MISS);
    free(lim.p);
    free(lin.p);
    free(ser.p);
    gp_cache_close(c);
    gp_cache_close(NULL);
}

/* The key leaves unknown fields out, as etcd's Marshal of the decoded
 * request does; the reply bytes come back exactly. */
static void test_lookup_key_and_bytes(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    struct buf b = range_req("k", NULL, 0, true);
    uint8_t *ext = malloc(b.len + 3);
    memcpy(ext, b.p, b.len);
    ext[b.len] = 0x98; /* field 99 varint (tag 0x318), value 5 */
    ext[b.len + 1] = 0x06;
    ext[b.len + 2] = 5;
    uint8_t reply[] = {0x20, 0x05, 0xf8, 0x06, 0x01}; /* count 5, field 111 */
    gp_cache_range_done(c, "", ext, b.len + 3, reply, sizeof reply);
    uint8_t *resp = NULL;
    size_t len = 0;
    assert_int_equal(gp_cache_range_lookup(c, "", b.p, b.len, &resp, &len),
                     GP_CACHE_HIT);
    assert_int_equal(len, sizeof reply);
    assert_memory_equal(resp, reply, sizeof reply);
    free(resp);
    free(ext);
    free(b.p);
    gp_cache_close(c);
}

/* --- invalidation ------------------------------------------------------- */

static void test_invalidate_put(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    add(c, range_req("a", NULL, 0, true), 1);
    add(c, range_req("b", NULL, 0, true), 1);
    add(c, range_req("a", "c", 0, true), 1);     /* [a, c) */
    add(c, range_req("foo", "fop", 0, true), 1); /* prefix foo */
    add(c, range_req("b", NULL, 5, true), 1);    /* fixed revision */
    assert_int_equal(keys(c), 5);

    put(c, "c"); /* outside all: [a, c) ends before c */
    assert_int_equal(keys(c), 5);
    put(c, "a\x01"); /* inside [a, c) only, not the point a */
    assert_false(cached_req(c, range_req("a", "c", 0, true)));
    assert_true(cached_req(c, range_req("a", NULL, 0, true)));
    put(c, "b"); /* the point b; the fixed-revision b stays */
    assert_false(cached_req(c, range_req("b", NULL, 0, true)));
    assert_true(cached_req(c, range_req("b", NULL, 5, true)));
    put(c, "fop");
    assert_true(cached_req(c, range_req("foo", "fop", 0, true)));
    put(c, "foo/x");
    assert_false(cached_req(c, range_req("foo", "fop", 0, true)));
    put(c, "a");
    assert_false(cached_req(c, range_req("a", NULL, 0, true)));
    assert_int_equal(keys(c), 1); /* b at revision 5 */
    gp_cache_close(c);
}

/* range_end "\0": every key from key on (etcd compares it as the string
 * "\0" and never drops such an entry; we drop it). */
static void test_invalidate_from_key(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    add(c, range_req_from("m", 0), 1);
    add(c, range_req_from("\0", 0), 1); /* etcdctl get "" --prefix */
    put(c, "a");
    assert_true(cached_req(c, range_req_from("m", 0)));
    assert_false(cached_req(c, range_req_from("\0", 0)));
    put(c, "\xff\xff\xff");
    assert_false(cached_req(c, range_req_from("m", 0)));
    /* A delete from a key on reaches every entry after it. */
    add(c, range_req("x", NULL, 0, true), 1);
    add(c, range_req("b", "c", 0, true), 1);
    del(c, "bz", &from_key);
    assert_false(cached_req(c, range_req("x", NULL, 0, true)));
    assert_false(cached_req(c, range_req("b", "c", 0, true)));
    gp_cache_close(c);
}

static void test_invalidate_delete(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    static const char *pts[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        add(c, range_req(pts[i], NULL, 0, true), 1);
    add(c, range_req("c", "e", 0, true), 1);
    ProtobufCBinaryData end = bin("d");
    del(c, "b", &end); /* [b, d) */
    assert_true(cached_req(c, range_req("a", NULL, 0, true)));
    assert_false(cached_req(c, range_req("b", NULL, 0, true)));
    assert_false(cached_req(c, range_req("c", NULL, 0, true)));
    assert_true(cached_req(c, range_req("d", NULL, 0, true)));
    assert_false(cached_req(c, range_req("c", "e", 0, true)));
    del(c, "d", NULL); /* a single key */
    assert_false(cached_req(c, range_req("d", NULL, 0, true)));
    assert_true(cached_req(c, range_req("a", NULL, 0, true)));
    /* Undecodable writes empty the cache. */
    uint8_t junk[] = {0x0a, 0x05};
    gp_cache_put(c, junk, sizeof junk);
    assert_int_equal(keys(c), 0);
    add(c, range_req("a", NULL, 0, true), 1);
    gp_cache_delete(c, junk, sizeof junk);
    assert_int_equal(keys(c), 0);
    gp_cache_close(c);
}

/* --- txn ------------------------------------------------------------------ */

static Etcdserverpb__RequestOp op_put(Etcdserverpb__PutRequest *p,
                                      const char *key)
{
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    *p = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
    p->key = bin(key);
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = p;
    return op;
}

static Etcdserverpb__RequestOp op_range(Etcdserverpb__RangeRequest *r,
                                        const char *key)
{
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    *r = range_msg(key, NULL, 0, false);
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op.request_range = r;
    return op;
}

static void txn_done(struct gp_cache *c, Etcdserverpb__TxnRequest *t,
                     Etcdserverpb__TxnResponse *r)
{
    struct buf a = pack(&t->base), b = pack(&r->base);
    gp_cache_txn_done(c, "", a.p, a.len, b.p, b.len);
    free(a.p);
    free(b.p);
}

/* Compares are dropped whichever branch ran; the taken branch's writes
 * drop, the other's do not; its ranges are cached. */
static void test_txn_branches(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    static const char *pts[] = {"cmp", "then", "else", "r"};
    for (int i = 0; i < 4; i++)
        add(c, range_req(pts[i], NULL, 0, true), 1);

    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.key = bin("cmp");
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__PutRequest p1, p2;
    Etcdserverpb__RangeRequest rr;
    Etcdserverpb__RequestOp then_put = op_put(&p1, "then");
    Etcdserverpb__RequestOp then_range = op_range(&rr, "r2");
    Etcdserverpb__RequestOp else_put = op_put(&p2, "else");
    Etcdserverpb__RequestOp *then_ops[] = {&then_put, &then_range};
    Etcdserverpb__RequestOp *else_ops[] = {&else_put};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_compare = 1;
    t.compare = cmps;
    t.n_success = 2;
    t.success = then_ops;
    t.n_failure = 1;
    t.failure = else_ops;

    Etcdserverpb__PutResponse pr = ETCDSERVERPB__PUT_RESPONSE__INIT;
    Etcdserverpb__RangeResponse rng = range_resp_msg(42);
    Etcdserverpb__ResponseOp ro1 = ETCDSERVERPB__RESPONSE_OP__INIT;
    Etcdserverpb__ResponseOp ro2 = ETCDSERVERPB__RESPONSE_OP__INIT;
    ro1.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
    ro1.response_put = &pr;
    ro2.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
    ro2.response_range = &rng;
    Etcdserverpb__ResponseOp *ros[] = {&ro1, &ro2};
    Etcdserverpb__TxnResponse resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    resp.succeeded = 1;
    resp.n_responses = 2;
    resp.responses = ros;
    txn_done(c, &t, &resp);

    assert_false(cached_req(c, range_req("cmp", NULL, 0, true)));
    assert_false(cached_req(c, range_req("then", NULL, 0, true)));
    assert_true(cached_req(c, range_req("else", NULL, 0, true)));
    assert_true(cached_req(c, range_req("r", NULL, 0, true)));
    int64_t n;
    struct buf r2 = range_req("r2", NULL, 0, true);
    assert_int_equal(look(c, r2, &n), GP_CACHE_HIT);
    assert_int_equal(n, 42);
    free(r2.p);

    /* The failure branch: its put drops, the success branch's range is
     * not cached from the failure's responses. */
    add(c, range_req("then", NULL, 0, true), 1);
    Etcdserverpb__ResponseOp *ros_else[] = {&ro1};
    resp.succeeded = 0;
    resp.n_responses = 1;
    resp.responses = ros_else;
    txn_done(c, &t, &resp);
    assert_false(cached_req(c, range_req("else", NULL, 0, true)));
    assert_true(cached_req(c, range_req("then", NULL, 0, true)));
    gp_cache_close(c);
}

/* Ops apply in order: a range before a put of its key is dropped by it,
 * one after it is cached (it saw the put). */
static void test_txn_order(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    Etcdserverpb__PutRequest p;
    Etcdserverpb__RangeRequest r;
    Etcdserverpb__RequestOp o_put = op_put(&p, "k");
    Etcdserverpb__RequestOp o_range = op_range(&r, "k");
    Etcdserverpb__PutResponse pr = ETCDSERVERPB__PUT_RESPONSE__INIT;
    Etcdserverpb__RangeResponse rng = range_resp_msg(9);
    Etcdserverpb__ResponseOp ro_put = ETCDSERVERPB__RESPONSE_OP__INIT;
    Etcdserverpb__ResponseOp ro_range = ETCDSERVERPB__RESPONSE_OP__INIT;
    ro_put.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
    ro_put.response_put = &pr;
    ro_range.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
    ro_range.response_range = &rng;
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    Etcdserverpb__TxnResponse resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    resp.succeeded = 1;

    Etcdserverpb__RequestOp *before[] = {&o_range, &o_put};
    Etcdserverpb__ResponseOp *before_r[] = {&ro_range, &ro_put};
    t.n_success = resp.n_responses = 2;
    t.success = before;
    resp.responses = before_r;
    txn_done(c, &t, &resp);
    assert_false(cached_req(c, range_req("k", NULL, 0, true)));

    Etcdserverpb__RequestOp *after[] = {&o_put, &o_range};
    Etcdserverpb__ResponseOp *after_r[] = {&ro_put, &ro_range};
    t.success = after;
    resp.responses = after_r;
    txn_done(c, &t, &resp);
    assert_true(cached_req(c, range_req("k", NULL, 0, true)));

    /* Responses that do not pair with the ops: writes still drop, no
     * range is cached from a wrong response. */
    Etcdserverpb__ResponseOp *wrong[] = {&ro_range, &ro_put};
    t.success = after;
    resp.responses = wrong;
    txn_done(c, &t, &resp);
    assert_false(cached_req(c, range_req("k", NULL, 0, true)));
    assert_int_equal(keys(c), 0);
    resp.n_responses = 0; /* fewer responses than ops */
    add(c, range_req("k", NULL, 0, true), 1);
    txn_done(c, &t, &resp);
    assert_int_equal(keys(c), 0);
    gp_cache_close(c);
}

/* A nested txn's writes, in either of its branches, drop too (etcd does
 * not look into nested txns); undecodable or too deep txns empty the
 * cache. */
static void test_txn_nested_and_bad(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    add(c, range_req("n1", NULL, 0, true), 1);
    add(c, range_req("n2", NULL, 0, true), 1);
    add(c, range_req("other", NULL, 0, true), 1);
    Etcdserverpb__PutRequest p1, p2;
    Etcdserverpb__RequestOp i1 = op_put(&p1, "n1"), i2 = op_put(&p2, "n2");
    Etcdserverpb__RequestOp *in_then[] = {&i1}, *in_else[] = {&i2};
    Etcdserverpb__TxnRequest inner = ETCDSERVERPB__TXN_REQUEST__INIT;
    inner.n_success = 1;
    inner.success = in_then;
    inner.n_failure = 1;
    inner.failure = in_else;
    Etcdserverpb__RequestOp o = ETCDSERVERPB__REQUEST_OP__INIT;
    o.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
    o.request_txn = &inner;
    Etcdserverpb__RequestOp *ops[] = {&o};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_success = 1;
    t.success = ops;
    Etcdserverpb__TxnResponse in_resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    Etcdserverpb__ResponseOp ro = ETCDSERVERPB__RESPONSE_OP__INIT;
    ro.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
    ro.response_txn = &in_resp;
    Etcdserverpb__ResponseOp *ros[] = {&ro};
    Etcdserverpb__TxnResponse resp = ETCDSERVERPB__TXN_RESPONSE__INIT;
    resp.succeeded = 1;
    resp.n_responses = 1;
    resp.responses = ros;
    txn_done(c, &t, &resp);
    assert_int_equal(keys(c), 1);
    assert_true(cached_req(c, range_req("other", NULL, 0, true)));

    struct buf good = pack(&t.base);
    uint8_t junk[] = {0x12, 0x7f};
    gp_cache_txn_done(c, "", junk, sizeof junk, junk, sizeof junk);
    assert_int_equal(keys(c), 0);
    add(c, range_req("other", NULL, 0, true), 1);
    gp_cache_txn_done(c, "", good.p, good.len, junk, sizeof junk);
    assert_int_equal(keys(c), 0);
    free(good.p);

    /* 65 nested txns: refused before protobuf-c sees them. */
    add(c, range_req("other", NULL, 0, true), 1);
    Etcdserverpb__TxnRequest lv[GP_TXN_DEPTH_MAX + 1];
    Etcdserverpb__RequestOp lo[GP_TXN_DEPTH_MAX + 1];
    Etcdserverpb__RequestOp *lp[GP_TXN_DEPTH_MAX + 1];
    for (int i = GP_TXN_DEPTH_MAX; i >= 0; i--) {
        lv[i] = (Etcdserverpb__TxnRequest)ETCDSERVERPB__TXN_REQUEST__INIT;
        if (i < GP_TXN_DEPTH_MAX) {
            lo[i] = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
            lo[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
            lo[i].request_txn = &lv[i + 1];
            lp[i] = &lo[i];
            lv[i].n_success = 1;
            lv[i].success = &lp[i];
        }
    }
    struct buf deep = pack(&lv[0].base);
    assert_int_equal(
        gp__pb_check(&etcdserverpb__txn_request__descriptor, deep.p, deep.len),
        ERR_TOO_LARGE);
    struct buf ok = pack(&lv[1].base); /* 64 levels */
    assert_int_equal(
        gp__pb_check(&etcdserverpb__txn_request__descriptor, ok.p, ok.len), 0);
    gp_cache_txn_done(c, "", deep.p, deep.len, junk, 0);
    assert_int_equal(keys(c), 0);
    free(deep.p);
    free(ok.p);
    gp_cache_close(c);
}

/* --- compaction ----------------------------------------------------------- */

static void compact(struct gp_cache *c, int64_t rev)
{
    Etcdserverpb__CompactionRequest r = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    r.revision = rev;
    struct buf b = pack(&r.base);
    gp_cache_compact_done(c, b.p, b.len);
    free(b.p);
}

static void test_compaction(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    int64_t n;
    add(c, range_req("a", NULL, 0, true), 1);
    add(c, range_req("a", NULL, 5, true), 1);
    add(c, range_req("a", NULL, 10, true), 1);
    add(c, range_req("a", NULL, 11, true), 1);
    add(c, range_req("a", NULL, -3, true), 1); /* never above -1 */
    assert_int_equal(keys(c), 4);
    compact(c, 10);
    /* The revision-5 entry can never answer again: gone now. */
    assert_int_equal(keys(c), 3);
    struct buf r5 = range_req("a", NULL, 5, true);
    struct buf r9 = range_req("b", NULL, 9, true); /* never cached */
    struct buf r10 = range_req("a", NULL, 10, true);
    struct buf r0 = range_req("a", NULL, 0, true);
    struct buf b0 = range_req("b", NULL, 0, true);
    assert_int_equal(look(c, r5, &n), GP_CACHE_COMPACTED);
    assert_int_equal(look(c, r9, &n), GP_CACHE_COMPACTED);
    assert_int_equal(look(c, r10, &n), GP_CACHE_HIT); /* 10 is not < 10 */
    assert_int_equal(look(c, r0, &n), GP_CACHE_HIT);  /* 0 never is */
    /* After a compaction, revision 0 (and 10) is not above it: not
     * cached any more (store.go's Add). */
    done(c, b0, 1);
    assert_int_equal(look(c, b0, &n), GP_CACHE_MISS);
    done(c, r10, 2);
    assert_int_equal(look(c, r10, &n), GP_CACHE_HIT);
    assert_int_equal(n, 1); /* the older reply stays */
    /* A lower compaction changes nothing. */
    compact(c, 3);
    assert_int_equal(look(c, r5, &n), GP_CACHE_COMPACTED);
    struct gp_cache_stats st;
    gp_cache_stats(c, &st);
    assert_int_equal(st.hits, 6); /* COMPACTED answers count as hits */
    assert_int_equal(st.misses, 1);
    uint8_t junk[] = {0x08};
    gp_cache_compact_done(c, junk, sizeof junk);
    free(r5.p);
    free(r9.p);
    free(r10.p);
    free(r0.p);
    free(b0.p);
    gp_cache_close(c);
}

/* --- bounds --------------------------------------------------------------- */

static void test_lru_entries(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(3, 0);
    add(c, range_req("a", NULL, 0, true), 1);
    add(c, range_req("b", NULL, 0, true), 1);
    add(c, range_req("c", NULL, 0, true), 1);
    assert_true(cached_req(c, range_req("a", NULL, 0, true))); /* used */
    add(c, range_req("d", NULL, 0, true), 1); /* evicts b, the oldest */
    assert_int_equal(keys(c), 3);
    assert_false(cached_req(c, range_req("b", NULL, 0, true)));
    assert_true(cached_req(c, range_req("a", NULL, 0, true)));
    assert_true(cached_req(c, range_req("c", NULL, 0, true)));
    assert_true(cached_req(c, range_req("d", NULL, 0, true)));
    /* Evicted entries left the index too: a put of b is harmless. */
    put(c, "b");
    assert_int_equal(keys(c), 3);
    gp_cache_close(c);
}

static void test_lru_bytes(void **state)
{
    (void)state;
    /* Replies of about 1000 bytes against a bound of 2600. */
    struct gp_cache *c = open_cache(100, 2600);
    Etcdserverpb__RangeResponse r = range_resp_msg(1);
    char big[1000];
    memset(big, 'v', sizeof big);
    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT;
    kv.value = (ProtobufCBinaryData){sizeof big, (uint8_t *)big};
    Mvccpb__KeyValue *kvs[] = {&kv};
    r.n_kvs = 1;
    r.kvs = kvs;
    struct buf reply = pack(&r.base);
    static const char *ks[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) {
        struct buf q = range_req(ks[i], NULL, 0, true);
        gp_cache_range_done(c, "", q.p, q.len, reply.p, reply.len);
        free(q.p);
    }
    assert_int_equal(keys(c), 2);
    assert_true(cached_req(c, range_req("c", NULL, 0, true)));
    assert_true(cached_req(c, range_req("d", NULL, 0, true)));
    free(reply.p);
    /* A reply alone above the bound is not kept (nor its older one). */
    char huge[3000];
    memset(huge, 'h', sizeof huge);
    kv.value = (ProtobufCBinaryData){sizeof huge, (uint8_t *)huge};
    reply = pack(&r.base);
    struct buf q = range_req("c", NULL, 0, true);
    gp_cache_range_done(c, "", q.p, q.len, reply.p, reply.len);
    assert_int_equal(keys(c), 1);
    assert_false(cached_req(c, q));
    free(reply.p);
    gp_cache_close(c);
}

/* --- the interval index --------------------------------------------------- */

static void test_bound_cmp(void **state)
{
    (void)state;
    struct gp__bound a = {(const uint8_t *)"ab", 2, GP__BOUND_KEY};
    struct gp__bound a0 = {(const uint8_t *)"ab\0", 3, GP__BOUND_KEY};
    struct gp__bound as = {(const uint8_t *)"ab", 2, GP__BOUND_SUCC};
    struct gp__bound a00 = {(const uint8_t *)"ab\0\0", 4, GP__BOUND_KEY};
    struct gp__bound a1 = {(const uint8_t *)"ab\1", 3, GP__BOUND_KEY};
    struct gp__bound b = {(const uint8_t *)"b", 1, GP__BOUND_KEY};
    struct gp__bound e = {NULL, 0, GP__BOUND_KEY};
    struct gp__bound es = {NULL, 0, GP__BOUND_SUCC};
    struct gp__bound inf = {NULL, 0, GP__BOUND_INF};
    assert_int_equal(gp__bound_cmp(&a, &as), -1);
    assert_int_equal(gp__bound_cmp(&as, &a0), 0);
    assert_int_equal(gp__bound_cmp(&a0, &as), 0);
    assert_int_equal(gp__bound_cmp(&as, &a00), -1);
    assert_int_equal(gp__bound_cmp(&as, &a1), -1);
    assert_int_equal(gp__bound_cmp(&a1, &as), 1);
    assert_int_equal(gp__bound_cmp(&as, &b), -1);
    assert_int_equal(gp__bound_cmp(&e, &es), -1);
    assert_int_equal(gp__bound_cmp(&e, &a), -1);
    assert_int_equal(gp__bound_cmp(&inf, &b), 1);
    assert_int_equal(gp__bound_cmp(&inf, &inf), 0);
    assert_int_equal(gp__bound_cmp(&es, &inf), -1);
    assert_true(gp__bound_overlap(&a, &as, &a, &b));
    assert_false(gp__bound_overlap(&a, &as, &as, &b));
    assert_true(gp__bound_overlap(&e, &inf, &b, &inf));
}

/* A node plus its bytes, for the model test. */
struct tnode {
    struct gp__ivl_node n;
    uint8_t b[2], e[2];
    bool in, hit;
};

static void mark(struct gp__ivl_node *n, void *arg)
{
    (void)arg;
    struct tnode *t = (struct tnode *)n;
    assert_false(t->hit); /* each node once */
    t->hit = true;
}

/* rand_bound: a key of 0-2 bytes over {a, b, c}, sometimes SUCC/INF. */
static void rand_bound(struct gp__bound *x, uint8_t *mem, unsigned *seed,
                       bool end)
{
    size_t len = (size_t)(rand_r(seed) % 3);
    for (size_t i = 0; i < len; i++)
        mem[i] = (uint8_t)('a' + rand_r(seed) % 3);
    int k = rand_r(seed) % 6;
    x->p = mem;
    x->len = len;
    x->kind = end && k == 0 ? GP__BOUND_INF
              : k == 1      ? GP__BOUND_SUCC
                            : GP__BOUND_KEY;
}

static int check_tree(const struct gp__ivl_node *t)
{
    if (t == NULL)
        return 0;
    int hl = check_tree(t->left), hr = check_tree(t->right);
    assert_true(hl - hr <= 1 && hr - hl <= 1);
    assert_int_equal(t->height, 1 + (hl > hr ? hl : hr));
    assert_true(gp__bound_cmp(&t->max, &t->end) >= 0);
    return t->height;
}

static void test_ivl_model(void **state)
{
    (void)state;
    enum { N = 300 };
    static struct tnode ns[N];
    struct gp__ivl_node *root = NULL;
    unsigned seed = 12345;
    memset(ns, 0, sizeof ns);
    for (int round = 0; round < 4000; round++) {
        struct tnode *t = &ns[rand_r(&seed) % N];
        if (t->in) {
            gp__ivl_remove(&root, &t->n);
            t->in = false;
        } else {
            rand_bound(&t->n.begin, t->b, &seed, false);
            rand_bound(&t->n.end, t->e, &seed, true);
            t->n.seq = (uint64_t)round + 1;
            gp__ivl_insert(&root, &t->n);
            t->in = true;
        }
        if (round % 7 != 0)
            continue;
        check_tree(root);
        uint8_t qbm[2], qem[2];
        struct gp__bound qb, qe;
        rand_bound(&qb, qbm, &seed, false);
        rand_bound(&qe, qem, &seed, true);
        for (int i = 0; i < N; i++)
            ns[i].hit = false;
        gp__ivl_stab(root, &qb, &qe, mark, NULL);
        for (int i = 0; i < N; i++) {
            bool want = ns[i].in && gp__bound_overlap(&ns[i].n.begin,
                                                      &ns[i].n.end, &qb, &qe);
            assert_int_equal(ns[i].hit, want);
        }
    }
}

/* --- many entries, threads, faults --------------------------------------- */

/* 2048 point entries and a put each: every put drops exactly one. */
static void test_many(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(0, 0);
    char k[16];
    for (int i = 0; i < 2100; i++) {
        snprintf(k, sizeof k, "key%05d", i);
        add(c, range_req(k, NULL, 0, true), i);
    }
    assert_int_equal(keys(c), GP_CACHE_MAX_ENTRIES);
    for (int i = 52; i < 2100; i += 2) {
        snprintf(k, sizeof k, "key%05d", i);
        put(c, k);
    }
    assert_int_equal(keys(c), GP_CACHE_MAX_ENTRIES / 2);
    ProtobufCBinaryData end = bin("key01000");
    del(c, "key00000", &end);
    assert_int_equal(keys(c), GP_CACHE_MAX_ENTRIES / 2 - 474);
    gp_cache_close(c);
}

static void *hammer(void *arg)
{
    struct gp_cache *c = arg;
    char k[16];
    unsigned seed = (unsigned)(uintptr_t)&k;
    for (int i = 0; i < 3000; i++) {
        snprintf(k, sizeof k, "k%d", rand_r(&seed) % 64);
        switch (rand_r(&seed) % 4) {
        case 0:
            put(c, k);
            break;
        case 1:
            add(c, range_req(k, NULL, 0, true), 1);
            break;
        default:
            cached_req(c, range_req(k, "k5", 0, true));
            break;
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    struct gp_cache *c = open_cache(16, 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, c), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_true(keys(c) <= 16);
    gp_cache_close(c);
}

/* Every allocation of open, add, lookup and txn failing in turn: no
 * crash, no leak (ASan), and nothing stale: a put still drops. */
static void test_faults(void **state)
{
    (void)state;
    for (long f = 1; f <= 12; f++) {
        struct gp_cache *c = NULL;
        mem_fault_set(f);
        if (gp_cache_open(0, 0, &c) != 0) {
            mem_fault_set(0);
            continue;
        }
        struct buf q = range_req("a", NULL, 0, true);
        done(c, q, 1);
        int64_t n;
        look(c, q, &n);
        mem_fault_set(0);
        put(c, "a");
        assert_int_equal(look(c, q, &n), GP_CACHE_MISS);
        free(q.p);
        gp_cache_close(c);
    }
    mem_fault_set(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_none_miss_hit),
        cmocka_unit_test(test_lookup_key_and_bytes),
        cmocka_unit_test(test_invalidate_put),
        cmocka_unit_test(test_invalidate_from_key),
        cmocka_unit_test(test_invalidate_delete),
        cmocka_unit_test(test_txn_branches),
        cmocka_unit_test(test_txn_order),
        cmocka_unit_test(test_txn_nested_and_bad),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_lru_entries),
        cmocka_unit_test(test_lru_bytes),
        cmocka_unit_test(test_bound_cmp),
        cmocka_unit_test(test_ivl_model),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
