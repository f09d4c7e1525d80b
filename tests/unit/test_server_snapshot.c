/*
 * test_server_snapshot.c - goal: a snapshot of the store carries the
 * metadata of the state it holds: its index, that index's term and the
 * membership (raft ConfState) as of that index, never a membership that
 * changed after it; and a member that installs a snapshot takes the
 * membership its store holds, whatever the leader's message said.
 *
 * Method: real single-member servers on temporary data dirs, with a small
 * --snapshot-count so that the snapshot worker copies the store.
 * (1) A snapshot (a pin of the store) is taken at index I; a learner is
 *     then added (a conf change at an index > I); the metadata of raft's
 *     snapshot (server__snap_newest) must still be I's, without the
 *     learner; the next snapshot (after the change) has the learner; a
 *     copy made for a follower (server__snap_export) before the change
 *     has no learner and one made after has it, in the copy's own
 *     members table too.  (A restart with the learner needs a peer
 *     listener: tests/cluster/test_snapshot.py restarts such members.)
 * (2) A copy made by member A is handed to another member B as if A's
 *     transport had sent it, with a MsgSnap whose ConfState is wrong (it
 *     makes B a voter and adds an unknown learner).  B must install A's
 *     store with the store's membership: B is then not a voter, which raft
 *     shows by never campaigning (the term stays the message's), and the
 *     recorded metadata says A alone.  B restarts cleanly on that store.
 * (3) A power loss after a pin: the store is pinned at P, then 60 of its
 *     300 keys are overwritten and 60 added; every page of data.mdb that
 *     differs from its content at the pin (the meta pages included) is
 *     then torn (0x5a) or reverted to its pinned content, alternately, as
 *     a power loss may leave unsynced pages.  Started as after a reboot,
 *     the member must restore P in place and replay the WAL after it:
 *     every key has its last value.  (Releasing the pin's read txn right
 *     after taking it, so LMDB may reuse P's pages, makes this test crash
 *     or fail: checked by hand.)
 * (4) 30 snapshots (every 50 entries, 1.5 MB of values) leave no copy of
 *     the store in member/snap: the pin file alone, < 64 KB (cetcd kept
 *     --max-snapshots full copies before).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "raft/raft.h"
#include "server/boot_guard.h"
#include "server/server.h"
#include "server/server_int.h"
#include "util/err.h"

#define WAIT_MS 20000

static char dir_a[256], dir_b[256];
static uint64_t pin_interval_ms; /* the next start's (0: the default) */

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static struct server *start(const char *dir, const char *name,
                            const char *url, uint64_t snapshot_count)
{
    static char initial[2][256];
    char *ic = initial[strcmp(dir, dir_a) == 0 ? 0 : 1];
    snprintf(ic, sizeof initial[0], "%s=%s", name, url);
    struct server_config c = {
        .name = name,
        .data_dir = dir,
        .peer_urls = url,
        .client_urls = "http://localhost:2379",
        .cluster_token = "etcd-cluster",
        .initial_cluster = ic,
        .heartbeat_ms = 100,
        .election_ms = 1000,
        .snapshot_count = snapshot_count,
        .pin_interval_ms = pin_interval_ms,
        .max_request_bytes = 1572864,
        .max_txn_ops = 128,
    };
    struct server *s;
    assert_int_equal(server_start(&c, &s), 0);
    return s;
}

static struct server *start_a(void)
{
    return start(dir_a, "a", "http://127.0.0.1:12380", 50);
}

static struct server *start_b(void)
{
    return start(dir_b, "b", "http://127.0.0.1:22380", 100000);
}

/* --- synchronous calls ---------------------------------------------------- */

struct box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int err;
    uint64_t id;
};

#define BOX_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0}

static void box_set(struct box *b, int err, uint64_t id)
{
    pthread_mutex_lock(&b->mu);
    b->err = err;
    b->id = id;
    b->done = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void box_wait(struct box *b)
{
    pthread_mutex_lock(&b->mu);
    while (!b->done)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

static void on_put(void *arg, const struct server_response *r)
{
    box_set(arg, r->err, 0);
}

static void on_member(void *arg, const struct server_member_result *r)
{
    box_set(arg, r->err, r->id);
}

static void put_keys(struct server *s, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s/%04d", prefix, i);
        Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
        p.key.data = (uint8_t *)key;
        p.key.len = strlen(key);
        p.value.data = (uint8_t *)"v";
        p.value.len = 1;
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
        ir.put = &p;
        struct box b = BOX_INIT;
        server_propose(s, &ir, on_put, &b);
        box_wait(&b);
        assert_int_equal(b.err, 0);
    }
}

static uint64_t add_learner(struct server *s)
{
    const char *urls[] = {"http://127.0.0.1:32380"};
    struct server_member_change c = {.op = SERVER_MEMBER_ADD,
                                     .peer_urls = urls,
                                     .n_peer_urls = 1,
                                     .is_learner = true};
    struct box b = BOX_INIT;
    server_member_change(s, &c, on_member, &b);
    box_wait(&b);
    assert_int_equal(b.err, 0);
    assert_true(b.id != 0);
    return b.id;
}

/* The metadata of the newest snapshot, once its index exceeds `after`. */
static struct raft_snapshot_meta newest_after(struct server *s, uint64_t after)
{
    struct raft_snapshot_meta m;
    uint64_t deadline = now_ms() + WAIT_MS;
    while (server__snap_newest(s, &m) != 0 || m.index <= after) {
        assert_true(now_ms() < deadline);
        usleep(20 * 1000);
    }
    return m;
}

/* --- membership checks ---------------------------------------------------- */

static bool has(const raft_id *ids, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* cs is exactly: voter `voter`, and learner `learner` unless it is 0. */
static void assert_conf(const struct raft_conf_state *cs, uint64_t voter,
                        uint64_t learner)
{
    assert_int_equal(cs->n_voters, 1);
    assert_true(cs->voters[0] == voter);
    assert_int_equal(cs->n_learners, learner ? 1 : 0);
    if (learner)
        assert_true(has(cs->learners, cs->n_learners, learner));
    assert_int_equal(cs->n_voters_outgoing, 0);
    assert_int_equal(cs->n_learners_next, 0);
}

/* The members table of an LMDB file at path, read from a scratch copy
 * (opening an LMDB file may write to it). */
static struct raft_conf_state file_conf(const char *dir, const char *path)
{
    char scratch[512], cmd[2200];
    snprintf(scratch, sizeof scratch, "%s/scratch", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s' && cp '%s' "
             "'%s/data.mdb'", scratch, scratch, path, scratch);
    assert_int_equal(system(cmd), 0);
    struct backend *be;
    struct backend_options bo = {.no_fsync = true};
    assert_int_equal(backend_open(scratch, &bo, &be), 0);
    struct raft_conf_state cs;
    assert_int_equal(server__members_conf_read(be, &cs), 0);
    backend_close(be);
    return cs;
}

/* A copy of s's store as a leader sends it, at `path`; returns its index
 * and checks that its own members table is what the worker read. */
static uint64_t export_to(struct server *s, const char *dir, const char *path,
                          struct raft_conf_state *conf_out)
{
    struct server_stats st;
    server_stats_get(s, &st);
    uint64_t index = 0;
    assert_int_equal(server__snap_export(s, st.applied_index, path, &index,
                                         conf_out), 0);
    assert_true(index >= st.applied_index);
    struct raft_conf_state f = file_conf(dir, path);
    assert_int_equal(f.n_voters, conf_out->n_voters);
    assert_int_equal(f.n_learners, conf_out->n_learners);
    return index;
}

/* --- (1) a copy's metadata is its own index's ---------------------------- */

static void test_copy_meta_is_as_of_its_index(void **state)
{
    (void)state;
    struct server *s = start_a();
    uint64_t self = server_member_id(s);
    put_keys(s, "one", 60);
    struct raft_snapshot_meta m1 = newest_after(s, 0);
    assert_true(m1.term > 0);
    assert_conf(&m1.conf, self, 0);

    /* A copy sent before the change has no learner. */
    char path[512];
    snprintf(path, sizeof path, "%s/export-test.db", dir_a);
    struct raft_conf_state f1;
    assert_true(export_to(s, dir_a, path, &f1) >= m1.index);
    assert_conf(&f1, self, 0);

    /* A conf change after the snapshot: it is still described as of
     * its index (raft's snapshot, what the WAL marker and a restart
     * rely on). */
    uint64_t learner = add_learner(s);
    struct server_stats st;
    server_stats_get(s, &st);
    assert_true(st.applied_index > m1.index);
    struct raft_snapshot_meta now;
    assert_int_equal(server__snap_newest(s, &now), 0);
    assert_int_equal(now.index, m1.index); /* no copy since: 50 entries */
    assert_int_equal(now.term, m1.term);
    assert_conf(&now.conf, self, 0);

    /* The next snapshot is after the change: it has the learner. */
    put_keys(s, "two", 60);
    struct raft_snapshot_meta m2 = newest_after(s, st.applied_index);
    assert_conf(&m2.conf, self, learner);

    /* A copy sent now (made from the live store) has it too, in its own
     * members table. */
    struct raft_conf_state f2;
    assert_true(export_to(s, dir_a, path, &f2) >= m2.index);
    assert_conf(&f2, self, learner);
    server_stop(s);
}

/* --- (2) an installed snapshot takes its store's membership -------------- */

static void wait_applied(struct server *s, uint64_t index)
{
    uint64_t deadline = now_ms() + WAIT_MS;
    struct server_stats st;
    for (server_stats_get(s, &st); st.applied_index != index;
         server_stats_get(s, &st)) {
        assert_true(now_ms() < deadline);
        usleep(20 * 1000);
    }
}

static void test_received_snapshot_installs_store_conf(void **state)
{
    (void)state;
    /* A: a copy of a store holding 60 keys, whose only member is A. */
    struct server *a = start_a();
    uint64_t id_a = server_member_id(a);
    put_keys(a, "k", 60);
    struct raft_snapshot_meta ma = newest_after(a, 0);
    assert_conf(&ma.conf, id_a, 0);
    char src[512], dst[512], cmd[1200];
    snprintf(src, sizeof src, "%s/export-test.db", dir_a);
    struct raft_conf_state ca;
    ma.index = export_to(a, dir_a, src, &ca);
    assert_conf(&ca, id_a, 0);
    server_stop(a);

    struct server *b = start_b();
    uint64_t id_b = server_member_id(b);
    assert_true(id_b != id_a);
    struct server_stats st;
    server_stats_get(b, &st);
    assert_true(st.applied_index < ma.index);

    /* As B's transport would: the file under its name in B's snap dir,
     * then the MsgSnap.  Its ConfState is wrong on purpose. */
    snprintf(dst, sizeof dst, "%s/member/snap/%016" PRIx64 ".snap.db", dir_b,
             ma.index);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    assert_int_equal(system(cmd), 0);
    struct raft_snapshot snap = {.meta = ma};
    snap.meta.conf.voters[snap.meta.conf.n_voters++] = id_b;
    snap.meta.conf.learners[snap.meta.conf.n_learners++] = 0x1234;
    const uint64_t term = 50;
    struct raft_msg m = {.type = RAFT_MSG_SNAP, .from = id_a, .to = id_b,
                         .term = term, .snapshot = &snap};
    assert_int_equal(server__snap_received(b, &m, dst), 0);
    wait_applied(b, ma.index);

    struct raft_snapshot_meta mb;
    assert_int_equal(server__snap_newest(b, &mb), 0);
    assert_int_equal(mb.index, ma.index);
    assert_int_equal(mb.term, ma.term);
    assert_conf(&mb.conf, id_a, 0);
    /* Raft took A alone as the membership: B, not a voter there, never
     * campaigns (with the message's ConfState it would, within 2 s). */
    usleep(3500 * 1000);
    struct server_status ss;
    assert_int_equal(server_status_get(b, &ss), 0);
    assert_int_equal(ss.raft_term, term);
    struct server_member_info info[4];
    assert_int_equal(server_members_list(b, info, 4), 1);
    assert_true(info[0].id == id_a);
    server_stop(b);

    /* B restarts on the installed store. */
    b = start_b();
    server_stats_get(b, &st);
    assert_int_equal(st.applied_index, ma.index);
    assert_int_equal(server_members_list(b, info, 4), 1);
    server_stop(b);
}

/* --- (3) a power loss after a pin ------------------------------------------ */

#define PAGE 4096

static void put_kv(struct server *s, const char *key, const char *val)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.value.data = (uint8_t *)val;
    p.value.len = strlen(val);
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_PUT;
    ir.put = &p;
    struct box b = BOX_INIT;
    server_propose(s, &ir, on_put, &b);
    box_wait(&b);
    assert_int_equal(b.err, 0);
}

/* The value of key (linearizable read) in buf; -1 if absent. */
static int get_value(struct server *s, const char *key, char *buf,
                     size_t cap)
{
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key.data = (uint8_t *)key;
    r.key.len = strlen(key);
    Etcdserverpb__RangeResponse *resp;
    struct server_read *rd;
    assert_int_equal(server_range(s, &r, &resp, &rd), 0);
    int n = -1;
    if (resp->n_kvs == 1) {
        n = (int)resp->kvs[0]->value.len;
        assert_true((size_t)n < cap);
        memcpy(buf, resp->kvs[0]->value.data, (size_t)n);
        buf[n] = '\0';
    }
    server_read_end(rd);
    return n;
}

/* len bytes of the file at path from offset 0 (mem: the caller frees). */
static uint8_t *read_head(const char *path, size_t len)
{
    uint8_t *buf = calloc(1, len);
    assert_non_null(buf);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, len, f), len);
    fclose(f);
    return buf;
}

/* What a power loss may leave of every page written after the pin image
 * `pinned` was on disk: garbage (torn) or its old content (not written),
 * alternately.  Returns how many pages it spoiled. */
static size_t tear_after_pin(const char *path, const uint8_t *pinned,
                             size_t pinned_len, size_t len)
{
    uint8_t *now = read_head(path, len);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    uint8_t junk[PAGE];
    memset(junk, 0x5a, sizeof junk);
    size_t spoiled = 0;
    for (size_t off = 0; off < len; off += PAGE) {
        bool old = off + PAGE <= pinned_len;
        if (old && memcmp(now + off, pinned + off, PAGE) == 0)
            continue; /* not written since the pin */
        const uint8_t *put = old && spoiled % 2 == 1 ? pinned + off : junk;
        assert_int_equal(fseek(f, (long)off, SEEK_SET), 0);
        assert_int_equal(fwrite(put, 1, PAGE, f), PAGE);
        spoiled++;
    }
    fclose(f);
    free(now);
    return spoiled;
}

static void put_many(struct server *s, int from, int to, const char *tag)
{
    for (int i = from; i < to; i++) {
        char key[32], val[128];
        snprintf(key, sizeof key, "p/%04d", i);
        snprintf(val, sizeof val, "%s-%04d-%0100d", tag, i, i);
        put_kv(s, key, val);
    }
}

/* Pinned at index P, then writes that overwrite 60 keys and add 60: a
 * power loss tears or loses every page written after P, the
 * meta pages included.  The member, started as after a reboot, restores
 * the pinned state in place and replays the WAL after P: every write is
 * there, with its last value. */
static void test_power_loss_after_pin(void **state)
{
    (void)state;
    pin_interval_ms = UINT64_MAX / 2; /* no pin a second: this one held */
    struct server *s = start(dir_a, "a", "http://127.0.0.1:12380", 100000);
    pin_interval_ms = 0;
    put_many(s, 0, 300, "one");
    assert_int_equal(server__snap_pin_now(s), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/member/db/data.mdb", dir_a);
    size_t pinned_len = backend_file_bytes(s->be);
    uint8_t *pinned = read_head(path, pinned_len);
    uint64_t pin_index = s->snap.pin_index;
    assert_true(pin_index >= 300);
    /* Few enough writes that the file grows by less than the 4 MB after
     * which the member pins again (the tear is relative to this pin). */
    put_many(s, 240, 360, "two");
    size_t len = backend_file_bytes(s->be);
    assert_int_equal(s->snap.pin_index, pin_index);
    server_stop(s);

    char db[512];
    snprintf(db, sizeof db, "%s/member/db", dir_a);
    size_t spoiled = tear_after_pin(path, pinned, pinned_len, len);
    free(pinned);
    assert_true(spoiled >= 10); /* the test tears something real */
    assert_int_equal(boot_guard_mark(db, false), 0);
    boot_guard_set_boot_id("another-boot");
    s = start(dir_a, "a", "http://127.0.0.1:12380", 100000);
    boot_guard_set_boot_id(NULL);
    for (int i = 0; i < 360; i++) {
        char key[32], want[128], got[256];
        snprintf(key, sizeof key, "p/%04d", i);
        snprintf(want, sizeof want, "%s-%04d-%0100d", i < 240 ? "one" : "two",
                 i, i);
        assert_int_equal(get_value(s, key, got, sizeof got),
                         (int)strlen(want));
        assert_string_equal(got, want);
    }
    server_stop(s);
}

/* --- (4) no copies of the store are kept ----------------------------------- */

/* Bytes of the regular files under dir (du's apparent sizes). */
static uint64_t dir_bytes(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "du -sb --apparent-size '%s'", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    unsigned long long n = 0;
    assert_int_equal(fscanf(p, "%llu", &n), 1);
    pclose(p);
    return n;
}

/* The highest index of the pin files in the snap dir (0: none). */
static uint64_t newest_pin(const char *snap)
{
    DIR *d = opendir(snap);
    assert_non_null(d);
    uint64_t best = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t index;
        char tail[8];
        if (sscanf(e->d_name, "%16" SCNx64 "%7s", &index, tail) == 2 &&
            strcmp(tail, ".pin") == 0 && index > best)
            best = index;
    }
    closedir(d);
    return best;
}

/* With a snapshot every 50 entries, 1500 puts of 1 KB make 30 snapshots
 * (and the WAL is released behind them as before): the snap dir holds no
 * copy of the store, only a pin of a few KB (cetcd before kept
 * --max-snapshots copies, each as large as the store). */
static void test_snapshots_keep_no_store_copy(void **state)
{
    (void)state;
    struct server *s = start(dir_a, "a", "http://127.0.0.1:12380", 50);
    char val[1025];
    memset(val, 'x', 1024);
    val[1024] = '\0';
    for (int i = 0; i < 1500; i++) {
        char key[32];
        snprintf(key, sizeof key, "big/%04d", i);
        put_kv(s, key, val);
    }
    struct server_stats st;
    server_stats_get(s, &st);
    struct raft_snapshot_meta m = newest_after(s, st.applied_index - 50);
    uint64_t in_use = 0;
    assert_int_equal(backend_size(s->be, NULL, &in_use), 0);
    char snap[512];
    snprintf(snap, sizeof snap, "%s/member/snap", dir_a);
    uint64_t snap_bytes = dir_bytes(snap);
    server_stop(s);
    assert_true(in_use > (1500u << 10));  /* the store holds 1.5 MB */
    assert_true(snap_bytes < (64u << 10)); /* its snapshots: a pin */
    /* The pin is the newest snapshot's or a later one's: a pin also
     * follows the store file's growth, so another may have replaced it. */
    assert_true(newest_pin(snap) >= m.index);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir_a, sizeof dir_a, "/tmp/cetcd-test-snap-a-XXXXXX");
    snprintf(dir_b, sizeof dir_b, "/tmp/cetcd-test-snap-b-XXXXXX");
    assert_non_null(mkdtemp(dir_a));
    assert_non_null(mkdtemp(dir_b));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir_a, dir_b);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_copy_meta_is_as_of_its_index,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_received_snapshot_installs_store_conf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_power_loss_after_pin, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_snapshots_keep_no_store_copy,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
