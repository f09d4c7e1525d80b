/*
 * test_svc_kvcheck.c - goal: the KV service (svc/kv_check.c) refuses
 * exactly what etcd 3.4 refuses before proposing (empty keys, ignore_*
 * misuse, too many txn ops with the nested budget, empty ops, duplicate
 * keys in a branch) and lets everything else through.  Method: requests
 * built in memory, one group per check function; the duplicate-key cases
 * follow etcd's checkIntervals rules, including its quirks (then/else of a
 * nested txn may repeat a key; a ">= key" delete covers nothing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "svc/kv_check.h"
#include "util/err.h"

#define MAXOPS 64

/* A pool of messages for one test (no allocation to free). */
static Etcdserverpb__RequestOp ops[MAXOPS * 4];
static Etcdserverpb__PutRequest put_pool[MAXOPS * 4];
static Etcdserverpb__DeleteRangeRequest dels[MAXOPS * 4];
static Etcdserverpb__TxnRequest txns[16];
static Etcdserverpb__RequestOp *lists[32][MAXOPS * 2];
static int nops, nputs, ndels, ntxns, nlists;

static void reset(void)
{
    nops = nputs = ndels = ntxns = nlists = 0;
}

static ProtobufCBinaryData bin(const char *s)
{
    ProtobufCBinaryData b = {strlen(s), (uint8_t *)s};
    return b;
}

static Etcdserverpb__RequestOp *op_put(const char *key)
{
    Etcdserverpb__PutRequest *p = &put_pool[nputs++];
    etcdserverpb__put_request__init(p);
    p->key = bin(key);
    Etcdserverpb__RequestOp *o = &ops[nops++];
    etcdserverpb__request_op__init(o);
    o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    o->request_put = p;
    return o;
}

static Etcdserverpb__RequestOp *op_del(const char *key, const char *end,
                                       size_t end_len)
{
    Etcdserverpb__DeleteRangeRequest *d = &dels[ndels++];
    etcdserverpb__delete_range_request__init(d);
    d->key = bin(key);
    d->range_end.data = (uint8_t *)end;
    d->range_end.len = end_len;
    Etcdserverpb__RequestOp *o = &ops[nops++];
    etcdserverpb__request_op__init(o);
    o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    o->request_delete_range = d;
    return o;
}

static Etcdserverpb__RequestOp **list(int n, Etcdserverpb__RequestOp **src)
{
    Etcdserverpb__RequestOp **l = lists[nlists++];
    for (int i = 0; i < n; i++)
        l[i] = src[i];
    return l;
}

static Etcdserverpb__TxnRequest *txn(int ns, Etcdserverpb__RequestOp **s,
                                     int nf, Etcdserverpb__RequestOp **f)
{
    Etcdserverpb__TxnRequest *t = &txns[ntxns++];
    etcdserverpb__txn_request__init(t);
    t->n_success = (size_t)ns;
    t->success = ns ? list(ns, s) : NULL;
    t->n_failure = (size_t)nf;
    t->failure = nf ? list(nf, f) : NULL;
    return t;
}

static Etcdserverpb__RequestOp *op_txn(Etcdserverpb__TxnRequest *t)
{
    Etcdserverpb__RequestOp *o = &ops[nops++];
    etcdserverpb__request_op__init(o);
    o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
    o->request_txn = t;
    return o;
}

static void test_put_checks(void **state)
{
    (void)state;
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    assert_int_equal(kv_check_put(&p), ERR_EMPTY_KEY);
    p.key = bin("k");
    assert_int_equal(kv_check_put(&p), 0);
    p.ignore_value = 1;
    p.value = bin("v");
    assert_int_equal(kv_check_put(&p), ERR_VALUE_PROVIDED);
    p.value = bin("");
    assert_int_equal(kv_check_put(&p), 0);
    p.ignore_lease = 1;
    p.lease = 7;
    assert_int_equal(kv_check_put(&p), ERR_LEASE_PROVIDED);
}

static void test_range_delete_checks(void **state)
{
    (void)state;
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    assert_int_equal(kv_check_range(&r), ERR_EMPTY_KEY);
    r.range_end = bin("z");
    assert_int_equal(kv_check_range(&r), ERR_EMPTY_KEY);
    r.key = bin("a");
    assert_int_equal(kv_check_range(&r), 0);
    Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    assert_int_equal(kv_check_delete(&d), ERR_EMPTY_KEY);
    d.key = bin("a");
    assert_int_equal(kv_check_delete(&d), 0);
}

static void test_txn_too_many_ops(void **state)
{
    (void)state;
    reset();
    Etcdserverpb__RequestOp *s[MAXOPS];
    static char keys[MAXOPS][8];
    for (int i = 0; i < MAXOPS; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        s[i] = op_put(keys[i]);
    }
    Etcdserverpb__TxnRequest *t = txn(10, s, 0, NULL);
    assert_int_equal(kv_check_txn(t, 10), 0);
    assert_int_equal(kv_check_txn(t, 9), ERR_TOO_MANY_OPS);
    /* The nested budget is max - (ops of the outer level). */
    Etcdserverpb__TxnRequest *inner = txn(3, s + 20, 0, NULL);
    Etcdserverpb__RequestOp *outer[6] = {s[0], s[1], s[2], s[3], s[4],
                                         op_txn(inner)};
    Etcdserverpb__TxnRequest *t2 = txn(6, outer, 0, NULL);
    assert_int_equal(kv_check_txn(t2, 9), 0);
    assert_int_equal(kv_check_txn(t2, 8), ERR_TOO_MANY_OPS);
}

static void test_txn_empty_op_and_key(void **state)
{
    (void)state;
    reset();
    Etcdserverpb__RequestOp *empty = &ops[nops++];
    etcdserverpb__request_op__init(empty);
    Etcdserverpb__TxnRequest *t = txn(0, NULL, 1, &empty);
    assert_int_equal(kv_check_txn(t, 128), ERR_KEY_NOT_FOUND);
    Etcdserverpb__RequestOp *p = op_put("");
    t = txn(1, &p, 0, NULL);
    assert_int_equal(kv_check_txn(t, 128), ERR_EMPTY_KEY);
}

static void test_txn_duplicates(void **state)
{
    (void)state;
    reset();
    Etcdserverpb__RequestOp *two[2] = {op_put("a"), op_put("a")};
    assert_int_equal(kv_check_txn(txn(2, two, 0, NULL), 128),
                     ERR_DUPLICATE_KEY);
    /* the same key in success and failure is fine */
    Etcdserverpb__RequestOp *a1 = op_put("a"), *a2 = op_put("a");
    assert_int_equal(kv_check_txn(txn(1, &a1, 1, &a2), 128), 0);
    /* put inside a deleted range */
    Etcdserverpb__RequestOp *pd[2] = {op_put("b"), op_del("a", "c", 1)};
    assert_int_equal(kv_check_txn(txn(2, pd, 0, NULL), 128),
                     ERR_DUPLICATE_KEY);
    /* put outside the range, and a point delete of another key */
    Etcdserverpb__RequestOp *ok[3] = {op_put("c"), op_del("a", "c", 1),
                                      op_del("d", NULL, 0)};
    assert_int_equal(kv_check_txn(txn(3, ok, 0, NULL), 128), 0);
    /* point delete of the put key */
    Etcdserverpb__RequestOp *pt[2] = {op_del("d", NULL, 0), op_put("d")};
    assert_int_equal(kv_check_txn(txn(2, pt, 0, NULL), 128),
                     ERR_DUPLICATE_KEY);
    /* etcd 3.4 quirk: a ">= key" delete (range_end "\0") covers nothing */
    Etcdserverpb__RequestOp *gte[2] = {op_del("a", "\0", 1), op_put("b")};
    assert_int_equal(kv_check_txn(txn(2, gte, 0, NULL), 128), 0);
}

static void test_txn_nested_duplicates(void **state)
{
    (void)state;
    reset();
    /* then/else of a nested txn may put the same key */
    Etcdserverpb__RequestOp *x1 = op_put("x"), *x2 = op_put("x");
    Etcdserverpb__RequestOp *n1 = op_txn(txn(1, &x1, 1, &x2));
    assert_int_equal(kv_check_txn(txn(1, &n1, 0, NULL), 128), 0);
    /* but not together with a put of the outer level */
    Etcdserverpb__RequestOp *y1 = op_put("y");
    Etcdserverpb__RequestOp *lvl[2] = {op_txn(txn(1, &y1, 0, NULL)),
                                       op_put("y")};
    assert_int_equal(kv_check_txn(txn(2, lvl, 0, NULL), 128),
                     ERR_DUPLICATE_KEY);
    /* a nested delete covers an outer put */
    Etcdserverpb__RequestOp *dz = op_del("z", NULL, 0);
    Etcdserverpb__RequestOp *lvl2[2] = {op_put("z"),
                                        op_txn(txn(0, NULL, 1, &dz))};
    assert_int_equal(kv_check_txn(txn(2, lvl2, 0, NULL), 128),
                     ERR_DUPLICATE_KEY);
}

/* A key put in both branches of a nested txn is one put for the levels
 * above: an else-branch sibling putting it again in both branches is fine. */
static void test_txn_nested_then_else_set(void **state)
{
    (void)state;
    reset();
    Etcdserverpb__RequestOp *p1 = op_put("\xff"), *p2 = op_put("\xff");
    Etcdserverpb__RequestOp *inner = op_txn(txn(1, &p1, 1, &p2));
    Etcdserverpb__RequestOp *q = op_put("\x01");
    Etcdserverpb__RequestOp *then = op_txn(txn(0, NULL, 1, &q));
    Etcdserverpb__RequestOp *t1 = op_txn(txn(1, &then, 1, &inner));
    assert_int_equal(kv_check_txn(txn(1, &t1, 0, NULL), 128), 0);
}

static void test_readonly(void **state)
{
    (void)state;
    reset();
    Etcdserverpb__RequestOp *p = op_put("a");
    assert_false(kv_txn_is_readonly(txn(0, NULL, 1, &p)));
    assert_true(kv_txn_is_readonly(txn(0, NULL, 0, NULL)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_checks),
        cmocka_unit_test(test_range_delete_checks),
        cmocka_unit_test(test_txn_too_many_ops),
        cmocka_unit_test(test_txn_empty_op_and_key),
        cmocka_unit_test(test_txn_duplicates),
        cmocka_unit_test(test_txn_nested_duplicates),
        cmocka_unit_test(test_txn_nested_then_else_set),
        cmocka_unit_test(test_readonly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
