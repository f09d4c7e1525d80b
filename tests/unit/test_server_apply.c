/*
 * test_server_apply.c - goal: the apply chain (server/applier.h) answers
 * each kind of request with the applier its alarms call for: auth -> quota
 * -> store normally, the capped applier in front while a NOSPACE alarm is
 * active, the corrupt one while a CORRUPT alarm is, both when both are;
 * a disarm restores the chain, and a restart rebuilds it from the stored
 * alarms.  Method: a real single member on a temporary data dir; alarms
 * are raised and disarmed by AlarmRequests proposed through raft and the
 * apply path (server_propose), as `etcdctl alarm disarm` does, and the
 * chain is checked both by its names and by what requests get back.
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

#include "server/applier.h"
#include "server/server.h"
#include "server_harness.h"
#include "util/err.h"

static char dir[256];

/* What a proposal's answer said (copied: the response is arena memory
 * that lives only for the callback). */
struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int err;
    size_t n_alarms;   /* AlarmResponse */
    int succeeded;     /* TxnResponse */
    int64_t deleted;   /* DeleteRangeResponse */
};

static void on_done(void *arg, const struct server_response *r)
{
    struct answer *a = arg;
    pthread_mutex_lock(&a->mu);
    a->err = r->err;
    if (r->err == 0 && r->msg != NULL) {
        const ProtobufCMessageDescriptor *d = r->msg->descriptor;
        if (d == &etcdserverpb__alarm_response__descriptor)
            a->n_alarms = ((Etcdserverpb__AlarmResponse *)r->msg)->n_alarms;
        else if (d == &etcdserverpb__txn_response__descriptor)
            a->succeeded = ((Etcdserverpb__TxnResponse *)r->msg)->succeeded;
        else if (d == &etcdserverpb__delete_range_response__descriptor)
            a->deleted =
                ((Etcdserverpb__DeleteRangeResponse *)r->msg)->deleted;
    }
    a->done = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Proposes ir and waits for its answer. */
static struct answer propose(struct server *s, Cetcdpb__InternalRequest *ir)
{
    struct answer a = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                       0, 0, 0, 0, 0};
    server_propose(s, ir, on_done, &a);
    pthread_mutex_lock(&a.mu);
    while (!a.done)
        pthread_cond_wait(&a.cv, &a.mu);
    pthread_mutex_unlock(&a.mu);
    return a;
}

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static int put(struct server *s, const char *key)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin(key);
    p.value = bin("v");
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    return propose(s, &ir).err;
}

static struct answer del(struct server *s, const char *key)
{
    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = bin(key);
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_DELETE_RANGE;
    ir.delete_range = &d;
    return propose(s, &ir);
}

/* A txn whose success branch is one op on key: a put or a range. */
static struct answer txn(struct server *s, const char *key, bool with_put)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = bin(key);
    p.value = bin("t");
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = bin(key);
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    if (with_put) {
        op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        op.request_put = &p;
    } else {
        op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
        op.request_range = &r;
    }
    Etcdserverpb__RequestOp *ops[] = {&op};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.success = ops;
    t.n_success = 1;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_TXN;
    ir.txn = &t;
    return propose(s, &ir);
}

static int compact(struct server *s, int64_t rev)
{
    Etcdserverpb__CompactionRequest c = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    c.revision = rev;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION;
    ir.compaction = &c;
    return propose(s, &ir).err;
}

static int lease_grant(struct server *s)
{
    return harness_lease_grant(s, 5, 10);
}

/* An AlarmRequest for this member through the apply path. */
static struct answer alarm(struct server *s,
                           Etcdserverpb__AlarmRequest__AlarmAction action,
                           Etcdserverpb__AlarmType type)
{
    Etcdserverpb__AlarmRequest ar = ETCDSERVERPB__ALARM_REQUEST__INIT;
    ar.action = action;
    ar.memberid = server_member_id(s);
    ar.alarm = type;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_ALARM;
    ir.alarm = &ar;
    return propose(s, &ir);
}

static void raise_alarm(struct server *s, Etcdserverpb__AlarmType type)
{
    struct answer a =
        alarm(s, ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE, type);
    assert_int_equal(a.err, 0);
    assert_int_equal(a.n_alarms, 1);
}

static void disarm(struct server *s, Etcdserverpb__AlarmType type)
{
    struct answer a =
        alarm(s, ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__DEACTIVATE, type);
    assert_int_equal(a.err, 0);
    assert_int_equal(a.n_alarms, 1);
}

static int64_t count(struct server *s, const char *key)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = bin(key);
    r.count_only = 1;
    Etcdserverpb__RangeResponse *resp;
    struct server_read *rd;
    assert_int_equal(server_range(s, &r, &resp, &rd), 0);
    int64_t n = resp->count;
    server_read_end(rd);
    return n;
}

/* The chain's names, front to back, joined by ">". */
static const char *chain(struct server *s)
{
    static char buf[128];
    const char *names[8];
    size_t n = server__applier_chain(s, names, 8);
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(buf, ">");
        strcat(buf, names[i]);
    }
    return buf;
}

static struct server *start(void)
{
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
    struct server *s;
    assert_int_equal(server_start(&c, &s), 0);
    return s;
}

/* The normal chain, and which link answers each kind. */
static void check_normal(struct server *s)
{
    assert_string_equal(chain(s), "auth>quota>store");
    /* auth checks the KV writes first (then passes them on) and applies
     * the auth requests itself */
    assert_string_equal(server__applier_answering(s, APPLIER_PUT), "auth");
    assert_string_equal(server__applier_answering(s, APPLIER_TXN), "auth");
    assert_string_equal(server__applier_answering(s, APPLIER_DELETE_RANGE),
                        "auth");
    assert_string_equal(server__applier_answering(s, APPLIER_ALARM), "store");
    assert_string_equal(server__applier_answering(s, APPLIER_LEASE_GRANT),
                        "quota");
    assert_string_equal(server__applier_answering(s, APPLIER_AUTH_ENABLE),
                        "auth");
    assert_string_equal(server__applier_answering(s, APPLIER_COMPACTION),
                        "store");
}

static void test_normal_chain(void **state)
{
    (void)state;
    struct server *s = start();
    check_normal(s);
    assert_int_equal(put(s, "a"), 0);
    assert_int_equal(txn(s, "a", true).err, 0);
    assert_int_equal(del(s, "a").deleted, 1);
    /* The store grants leases (lease.c); a second grant of the id is
     * refused as etcd's lessor does. */
    assert_int_equal(lease_grant(s), 0);
    assert_int_equal(lease_grant(s), ERR_LEASE_EXIST);
    struct answer a = alarm(s, ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET,
                            ETCDSERVERPB__ALARM_TYPE__NONE);
    assert_int_equal(a.err, 0);
    assert_int_equal(a.n_alarms, 0);
    server_stop(s);
}

static void test_nospace_caps(void **state)
{
    (void)state;
    struct server *s = start();
    assert_int_equal(put(s, "a"), 0);
    raise_alarm(s, ETCDSERVERPB__ALARM_TYPE__NOSPACE);
    assert_string_equal(chain(s), "capped>auth>quota>store");
    assert_string_equal(server__applier_answering(s, APPLIER_PUT), "capped");
    assert_string_equal(server__applier_answering(s, APPLIER_DELETE_RANGE),
                        "auth");
    /* Writes with a cost are refused and change nothing... */
    assert_int_equal(put(s, "b"), ERR_NO_SPACE);
    assert_int_equal(count(s, "b"), 0);
    assert_int_equal(txn(s, "b", true).err, ERR_NO_SPACE);
    assert_int_equal(count(s, "b"), 0);
    assert_int_equal(lease_grant(s), ERR_NO_SPACE);
    /* ...the rest is served. */
    struct answer t = txn(s, "a", false);
    assert_int_equal(t.err, 0);
    assert_true(t.succeeded);
    assert_int_equal(del(s, "a").deleted, 1);
    assert_int_equal(compact(s, 1), 0);
    disarm(s, ETCDSERVERPB__ALARM_TYPE__NOSPACE);
    check_normal(s);
    assert_int_equal(put(s, "b"), 0);
    assert_int_equal(count(s, "b"), 1);
    server_stop(s);
}

static void test_corrupt_refuses(void **state)
{
    (void)state;
    struct server *s = start();
    assert_int_equal(put(s, "a"), 0);
    raise_alarm(s, ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    assert_string_equal(chain(s), "corrupt>auth>quota>store");
    assert_string_equal(server__applier_answering(s, APPLIER_PUT), "corrupt");
    assert_string_equal(server__applier_answering(s, APPLIER_ALARM), "store");
    assert_string_equal(server__applier_answering(s, APPLIER_MEMBERS),
                        "store");
    /* Every KV and lease request is refused and changes nothing... */
    assert_int_equal(put(s, "b"), ERR_CLUSTER_CORRUPT);
    assert_int_equal(count(s, "b"), 0);
    assert_int_equal(del(s, "a").err, ERR_CLUSTER_CORRUPT);
    assert_int_equal(count(s, "a"), 1);
    assert_int_equal(txn(s, "b", true).err, ERR_CLUSTER_CORRUPT);
    assert_int_equal(compact(s, 1), ERR_CLUSTER_CORRUPT);
    assert_int_equal(lease_grant(s), ERR_CLUSTER_CORRUPT);
    /* ...but reads, read-only txns (etcd serves them beside the log) and
     * alarms are served. */
    struct answer t = txn(s, "a", false);
    assert_int_equal(t.err, 0);
    assert_true(t.succeeded);
    struct answer a = alarm(s, ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET,
                            ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    assert_int_equal(a.err, 0);
    assert_int_equal(a.n_alarms, 1);
    disarm(s, ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    check_normal(s);
    assert_int_equal(put(s, "b"), 0);
    assert_int_equal(del(s, "a").deleted, 1);
    server_stop(s);
}

/* Both alarms: corrupt in front of capped; disarming one keeps the other
 * (the chain follows the list), and a restart rebuilds it from the store. */
static void test_both_and_restart(void **state)
{
    (void)state;
    struct server *s = start();
    raise_alarm(s, ETCDSERVERPB__ALARM_TYPE__NOSPACE);
    raise_alarm(s, ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    assert_string_equal(chain(s), "corrupt>capped>auth>quota>store");
    assert_int_equal(put(s, "a"), ERR_CLUSTER_CORRUPT);
    server_stop(s);

    s = start();
    assert_string_equal(chain(s), "corrupt>capped>auth>quota>store");
    assert_int_equal(put(s, "a"), ERR_CLUSTER_CORRUPT);
    disarm(s, ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    assert_string_equal(chain(s), "capped>auth>quota>store");
    assert_int_equal(put(s, "a"), ERR_NO_SPACE);
    server_stop(s);

    s = start();
    assert_string_equal(chain(s), "capped>auth>quota>store");
    raise_alarm(s, ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    disarm(s, ETCDSERVERPB__ALARM_TYPE__NOSPACE);
    assert_string_equal(chain(s), "corrupt>auth>quota>store");
    assert_int_equal(put(s, "a"), ERR_CLUSTER_CORRUPT);
    disarm(s, ETCDSERVERPB__ALARM_TYPE__CORRUPT);
    check_normal(s);
    assert_int_equal(put(s, "a"), 0);
    server_stop(s);

    s = start();
    check_normal(s);
    server_stop(s);
}

/* The slot of each request kind (the dispatch table's index). */
static void test_slots(void **state)
{
    (void)state;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    assert_int_equal(server__applier_slot(&ir), APPLIER_NONE);
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    assert_int_equal(server__applier_slot(&ir), APPLIER_PUT);
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE;
    assert_int_equal(server__applier_slot(&ir), APPLIER_MEMBERS);
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_ATTR;
    assert_int_equal(server__applier_slot(&ir), APPLIER_MEMBERS);
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_REVOKE;
    assert_int_equal(server__applier_slot(&ir), APPLIER_LEASE_REVOKE);
    ir.request_case = (Cetcdpb__InternalRequest__RequestCase)99;
    assert_int_equal(server__applier_slot(&ir), APPLIER_NONE);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-test-apply-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots),
        cmocka_unit_test_setup_teardown(test_normal_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nospace_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_refuses, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_both_and_restart, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
