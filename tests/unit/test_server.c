/*
 * test_server.c - goal: the member core keeps its promises: a proposal is
 * answered only once applied, concurrent proposals share fdatasyncs (group
 * commit), reads see every answered write, and a restart replays the WAL
 * into the same state.  Method: a real server on a temporary data dir,
 * driven through server_propose/server_range from several threads.
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
#include <unistd.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "server/alarm.h"
#include "server/boot_guard.h"
#include "server/server.h"
#include "server_harness.h"
#include "util/err.h"
#include "util/mem.h"

#define THREADS 8
#define PER_THREAD 200

struct done_box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int err;
    int64_t rev;
};

static void on_done(void *arg, const struct server_response *r)
{
    struct done_box *b = arg;
    pthread_mutex_lock(&b->mu);
    b->err = r->err;
    if (r->err == 0)
        b->rev = ((const Etcdserverpb__PutResponse *)r->msg)->header->revision;
    b->done = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* box_wait waits for b's answer and returns its error. */
static int box_wait(struct done_box *b)
{
    pthread_mutex_lock(&b->mu);
    while (!b->done)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    return b->err;
}

static int put_sync(struct server *s, const char *key, const char *val,
                    int64_t *rev_out)
{
    struct done_box b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                         0, 0, 0};
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.value.data = (uint8_t *)val;
    p.value.len = strlen(val);
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    server_propose(s, &ir, on_done, &b);
    int err = box_wait(&b);
    if (rev_out)
        *rev_out = b.rev;
    return err;
}

/* A LeaseGrant proposed directly (past the API's quota check). */
static int lease_grant_sync(struct server *s, int64_t id)
{
    return harness_lease_grant(s, id, 60);
}

static int64_t count_prefix(struct server *s, const char *prefix,
                            int serializable)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    char end[64];
    snprintf(end, sizeof end, "%s", prefix);
    end[strlen(end) - 1]++;
    r.key.data = (uint8_t *)prefix;
    r.key.len = strlen(prefix);
    r.range_end.data = (uint8_t *)end;
    r.range_end.len = strlen(end);
    r.count_only = 1;
    r.serializable = serializable;
    Etcdserverpb__RangeResponse *resp;
    struct server_read *rd;
    assert_int_equal(server_range(s, &r, &resp, &rd), 0);
    int64_t n = resp->count;
    server_read_end(rd);
    return n;
}

static char dir[256];
static int64_t quota; /* --quota-backend-bytes of the next start() */
static uint32_t batch_limit; /* --experimental-compaction-batch-limit */

/* start_flags starts the member on dir with these --initial-* flags. */
static struct server *start_flags(const char *token, const char *cluster,
                                  const char *peer_urls)
{
    struct server_config c = {
        .quota_backend_bytes = quota,
        .compaction_batch_limit = batch_limit,
        .name = "default",
        .data_dir = dir,
        .peer_urls = peer_urls,
        .client_urls = "http://localhost:2379",
        .cluster_token = token,
        .initial_cluster = cluster,
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

static struct server *start(void)
{
    return start_flags("etcd-cluster", "default=http://localhost:2380",
                       "http://localhost:2380");
}

struct worker {
    struct server *s;
    int id;
    atomic_int *errors;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    char key[32];
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(key, sizeof key, "w/%d/%04d", w->id, i);
        if (put_sync(w->s, key, "v", NULL) != 0)
            atomic_fetch_add(w->errors, 1);
    }
    return NULL;
}

static void test_ids_match_etcd(void **state)
{
    (void)state;
    struct server *s = start();
    /* The ids etcd 3.4 derives for --name default on its defaults. */
    assert_int_equal(server_member_id(s), 0x8e9e05c52164694dULL);
    assert_int_equal(server_cluster_id(s), 0xcdf818194e3a8c32ULL);
    server_stop(s);
}

static void test_group_commit_and_restart(void **state)
{
    (void)state;
    struct server *s = start();
    struct server_stats before, after;
    server_stats_get(s, &before);
    pthread_t t[THREADS];
    struct worker w[THREADS];
    atomic_int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){s, i, &errors};
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(errors, 0);
    server_stats_get(s, &after);
    uint64_t syncs = after.wal_syncs - before.wal_syncs;
    /* 8 writers each waiting for its answer: batches must form. */
    assert_true(syncs < THREADS * PER_THREAD);
    assert_int_equal(count_prefix(s, "w/", 0), THREADS * PER_THREAD);
    int64_t rev;
    assert_int_equal(put_sync(s, "last", "x", &rev), 0);
    assert_int_equal(rev, THREADS * PER_THREAD + 2);
    server_stop(s);

    s = start();
    assert_int_equal(count_prefix(s, "w/", 1), THREADS * PER_THREAD);
    assert_int_equal(put_sync(s, "after", "y", &rev), 0);
    assert_int_equal(rev, THREADS * PER_THREAD + 3);
    server_stop(s);
}

/* Writes n keys "<prefix>NN" and stops the member; *db_out is its store. */
static void fill_and_stop(const char *prefix, int n, char *db_out,
                          size_t cap)
{
    struct server *s = start();
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "%s%02d", prefix, i);
        assert_int_equal(put_sync(s, key, "v", NULL), 0);
    }
    server_stop(s);
    snprintf(db_out, cap, "%s/member/db", dir);
}

/* Overwrites the head of the store file: it is torn for real. */
static void wreck_store(const char *db)
{
    char path[400];
    snprintf(path, sizeof path, "%s/data.mdb", db);
    FILE *f = fopen(path, "r+");
    assert_non_null(f);
    char junk[8192];
    memset(junk, 0x5a, sizeof junk);
    assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    fclose(f);
}

/* After a rebuild all n keys are back and the next put gets rev n + 2. */
static void check_rebuilt(struct server *s, const char *prefix, int n)
{
    assert_int_equal(count_prefix(s, prefix, 1), n);
    int64_t rev;
    assert_int_equal(put_sync(s, "zz/new", "v", &rev), 0);
    assert_int_equal(rev, n + 2);
    server_stop(s);
}

/* A store left dirty by an earlier boot is rebuilt from the WAL; one left
 * dirty in this boot (kill -9) is trusted as it is. */
static void test_untrusted_store_rebuilt(void **state)
{
    (void)state;
    char db[300];
    fill_and_stop("r/", 50, db, sizeof db);
    /* Pretend the member died without a clean stop, then the machine
     * rebooted: the store may be torn, so wreck it for real. */
    assert_int_equal(boot_guard_mark(db, false), 0);
    wreck_store(db);
    boot_guard_set_boot_id("another-boot");
    struct server *s = start();
    boot_guard_set_boot_id(NULL);
    check_rebuilt(s, "r/", 50);
}

/* A store distrusted in this very boot (a WAL fsync failed while a
 * tentative batch was in it) is rebuilt at the next start too. */
static void test_distrusted_store_rebuilt(void **state)
{
    (void)state;
    char db[300];
    fill_and_stop("d/", 20, db, sizeof db);
    bool trusted;
    assert_int_equal(boot_guard_check(db, &trusted), 0);
    assert_true(trusted);
    assert_int_equal(boot_guard_distrust(db), 0);
    assert_int_equal(boot_guard_check(db, &trusted), 0);
    assert_false(trusted);
    wreck_store(db);
    check_rebuilt(start(), "d/", 20); /* same boot id */
}

/* A member with data ignores the --initial-* flags, also when its store is
 * rebuilt from the WAL: its id, its cluster and its one voter are the
 * stored ones, so it leads again and keeps its keys (with the flags' ids it
 * waited for a leader that never came).  The flags need not even name it. */
static void test_rebuilt_store_ignores_flags(void **state)
{
    (void)state;
    struct server *s = start();
    uint64_t id = server_member_id(s), cid = server_cluster_id(s);
    server_stop(s);
    char db[300];
    fill_and_stop("f/", 10, db, sizeof db);
    assert_int_equal(boot_guard_mark(db, false), 0);
    wreck_store(db);
    boot_guard_set_boot_id("another-boot");
    s = start_flags("another-token", "x=http://localhost:9999",
                    "http://localhost:9998");
    boot_guard_set_boot_id(NULL);
    assert_int_equal(server_member_id(s), id);
    assert_int_equal(server_cluster_id(s), cid);
    struct server_member_info m[4];
    assert_int_equal(server_members_list(s, m, 4), 1);
    assert_int_equal(m[0].id, id);
    assert_string_equal(m[0].peer_urls, "http://localhost:2380");
    check_rebuilt(s, "f/", 10); /* a put commits: it leads */
}

static void test_request_too_large(void **state)
{
    (void)state;
    struct server *s = start();
    size_t n = 2 * 1024 * 1024;
    char *big = malloc(n + 1);
    memset(big, 'x', n);
    big[n] = '\0';
    assert_int_equal(put_sync(s, "big", big, NULL), ERR_REQUEST_TOO_LARGE);
    free(big);
    server_stop(s);
}

/* etcd's applier checks the quota again: a put proposed past the API's
 * check (here: proposed directly) that finds the store over the quota is
 * applied, and answered ErrNoSpace. */
static void test_quota_at_apply(void **state)
{
    (void)state;
    quota = 1; /* any store is over it */
    struct server *s = start();
    quota = 0;
    assert_int_equal(put_sync(s, "q/a", "v", NULL), ERR_NO_SPACE);
    assert_int_equal(count_prefix(s, "q/", 1), 1);
    /* So is a LeaseGrant (etcd's quotaApplierV3.LeaseGrant): the lease is
     * granted, and the grant answered ErrNoSpace. */
    assert_int_equal(lease_grant_sync(s, 7), ERR_NO_SPACE);
    int64_t *ids;
    size_t n_ids;
    assert_int_equal(server_lease_list(s, &ids, &n_ids), 0);
    assert_int_equal(n_ids, 1);
    assert_int_equal(ids[0], 7);
    mem_free(ids);
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    assert_int_equal(server_lease_grant_cost(&g), 64);
    assert_false(server_quota_allows(s, server_lease_grant_cost(&g)));
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)"abc";
    p.key.len = 3;
    p.value.data = (uint8_t *)"v";
    p.value.len = 1;
    assert_int_equal(server_put_cost(&p), 256 + 3 + 1);
    assert_false(server_quota_allows(s, server_put_cost(&p)));
    assert_true(server_quota_allows(s, 0)); /* writes nothing counted */
    /* The refusal raised the NOSPACE alarm (through raft: wait for it). */
    for (int i = 0; i < 500 && !server__alarm_nospace(s); i++)
        usleep(10000);
    assert_true(server__alarm_nospace(s));
    /* A txn costs its dearer branch, puts at the top level only. */
    Etcdserverpb__RequestOp put = ETCDSERVERPB__REQUEST_OP__INIT, rng = put;
    put.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    put.request_put = &p;
    rng.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    Etcdserverpb__RequestOp *ok[] = {&put, &rng, &put}, *fail[] = {&put};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.success = ok;
    t.n_success = 3;
    t.failure = fail;
    t.n_failure = 1;
    assert_int_equal(server_txn_cost(&t), 2 * (256 + 4));
    t.n_success = 0;
    assert_int_equal(server_txn_cost(&t), 256 + 4);
    server_stop(s);
    quota = -1; /* none */
    s = start();
    quota = 0;
    /* No quota, but the alarm is kept in the store: writes stay capped
     * (refused by the API, answered NOSPACE by the applier). */
    assert_false(server_quota_allows(s, UINT64_MAX / 2));
    assert_int_equal(put_sync(s, "q/b", "v", NULL), ERR_NO_SPACE);
    assert_int_equal(count_prefix(s, "q/", 1), 1);
    server_stop(s);
}

/* The quota counts the store's pages in use, not its extent: a fresh
 * store fits etcd's smallest working quota (13 pages: TestCtlV3Alarm;
 * the extent alone was 14 pages), and freed pages a read txn keeps from
 * reuse (as a pin's does) are not counted, however far they push the
 * extent. */
static void test_quota_counts_pages_in_use(void **state)
{
    (void)state;
    char small[65];
    memset(small, 'a', 64);
    small[64] = '\0';
    quota = 13 * 4096;
    struct server *s = start();
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.len = strlen("q/small");
    p.value.len = 64;
    assert_true(server_quota_allows(s, server_put_cost(&p)));
    assert_int_equal(put_sync(s, "q/small", small, NULL), 0);
    server_stop(s);

    quota = 64 * 4096;
    s = start();
    quota = 0;
    /* A read left open: LMDB reuses no page freed after it. */
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key.data = (uint8_t *)"q/";
    r.key.len = 2;
    Etcdserverpb__RangeResponse *resp;
    struct server_read *held;
    assert_int_equal(server_range(s, &r, &resp, &held), 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(put_sync(s, "q/k", "sixteen-bytes-vv", NULL), 0);
    struct server_status st;
    assert_int_equal(server_status_get(s, &st), 0);
    print_message("extent %llu B, in use %llu B, quota %lld B\n",
                  (unsigned long long)st.db_size,
                  (unsigned long long)st.db_in_use, (long long)(64 * 4096));
    assert_true(st.db_size > 64 * 4096);    /* the held pages: past it */
    assert_true(st.db_in_use < 32 * 4096);  /* 100 small versions */
    assert_true(server_quota_allows(s, server_put_cost(&p)));
    assert_false(server__alarm_nospace(s));
    server_read_end(held);
    server_stop(s);
}

/* compact_sync proposes a (not physical) compaction at rev and waits for
 * its answer. */
static int compact_sync(struct server *s, int64_t rev)
{
    Etcdserverpb__CompactionRequest c = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    c.revision = rev;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION;
    ir.compaction = &c;
    return harness_propose(s, &ir);
}

/* compaction_pending_after: a fresh member, `puts` puts over 50 keys, a
 * compaction at rev answered, one more put, a stop; the store opened again
 * has compact revision rev.  Returns whether its compaction is still
 * pending; *finished: its finished compact revision. */
static bool compaction_pending_after(int puts, int64_t rev,
                                     mvcc_rev *finished)
{
    struct server *s = start();
    char key[16];
    for (int i = 0; i < puts; i++) {
        snprintf(key, sizeof key, "c/%03d", i % 50);
        assert_int_equal(put_sync(s, key, "v", NULL), 0);
    }
    assert_int_equal(compact_sync(s, rev), 0);
    assert_int_equal(put_sync(s, "d/0", "v", NULL), 0);
    server_stop(s);
    char db[300];
    struct backend *be;
    struct mvcc_store *st;
    snprintf(db, sizeof db, "%s/member/db", dir);
    assert_int_equal(backend_open(db, NULL, &be), 0);
    assert_int_equal(mvcc_store_open(be, NULL, &st), 0);
    assert_int_equal(mvcc_compact_rev(st), rev);
    bool pending = mvcc_compact_pending(st);
    *finished = mvcc_compact_finished_rev(st);
    mvcc_store_close(st);
    backend_close(be);
    return pending;
}

/* A lone voter applies speculatively: with one client writing in
 * sequence, most apply batches are tentative (each entry is handed over
 * before its fsync).  A compaction scheduled in an earlier batch must be
 * carried out physically by the next batch, tentative or not, not wait for
 * a non-tentative one (which only comes when a commit happens to be
 * reported with new entries): after the compaction's answer and one more
 * put, the store (opened again after the stop) has no compaction
 * pending. */
static void test_compaction_progresses_under_writes(void **state)
{
    (void)state;
    mvcc_rev finished;
    assert_false(compaction_pending_after(300, 250, &finished));
    assert_int_equal(finished, 250);
}

/* --experimental-compaction-batch-limit: each apply batch (and each idle
 * step, every 10 ms) deletes at most that many revisions.  A compaction of
 * ~500 dead revisions is done by the batch of the next put at the default
 * limit (1000; test_compaction_progresses_under_writes), but at limit 1 it
 * is still pending when the member stops right after that put, and the
 * store opened again has it pending, with the compact revision kept. */
static void test_compaction_batch_limit(void **state)
{
    (void)state;
    mvcc_rev finished;
    batch_limit = 1; /* the start in compaction_pending_after */
    bool pending = compaction_pending_after(600, 550, &finished);
    batch_limit = 0;
    assert_true(pending);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-test-server-XXXXXX");
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
        cmocka_unit_test_setup_teardown(test_ids_match_etcd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit_and_restart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_untrusted_store_rebuilt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_distrusted_store_rebuilt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rebuilt_store_ignores_flags,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_too_large, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_quota_at_apply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_counts_pages_in_use, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_compaction_batch_limit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_compaction_progresses_under_writes,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
