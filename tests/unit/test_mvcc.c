/*
 * test_mvcc.c - goal: the store follows etcd 3.4's revision, version,
 * range, txn, compaction and event semantics, keeps everything across
 * reopen, and survives allocation failures.  Method: targeted cases per
 * function, plus a randomized run (seeded, printed, CETCD_TEST_SEED
 * replays it) that applies thousands of random requests to the store and
 * to a naive in-test model (a full copy of the key space per revision),
 * interleaved with compactions at random past revisions - stepped across
 * batches or run to completion inside one - and reopens, and compares
 * ranges at random revisions after every batch, every range at every
 * revision at the end, and the buckets' contents after each compaction.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "util/mem.h"

struct fixture {
    char dir[64];          /* temporary data directory */
    struct backend *be;    /* its env */
    struct mvcc_store *s;  /* the store */
};

static void fx_open(struct fixture *f)
{
    assert_int_equal(backend_open(f->dir, NULL, &f->be), 0);
    assert_int_equal(mvcc_store_open(f->be, NULL, &f->s), 0);
}

static void fx_close(struct fixture *f)
{
    mvcc_store_close(f->s);
    backend_close(f->be);
}

/* The overlay's bound (mvcc_int.h MVCC_OVL_MAX): entries of the key
 * index kept in memory before a batch folds them into LMDB; 0 files every
 * entry in LMDB at once (the layout before the overlay). */
extern size_t mvcc__ovl_max;
extern size_t mvcc__ovl_slice; /* entries a batch files per round slice */
extern size_t mvcc__ovl_max_bytes; /* ... or this many bytes of it */
static size_t ovl_max_default, ovl_slice_default, ovl_bytes_default;

static int setup(void **state)
{
    if (ovl_max_default == 0) {
        ovl_max_default = mvcc__ovl_max;
        ovl_slice_default = mvcc__ovl_slice;
        ovl_bytes_default = mvcc__ovl_max_bytes;
    }
    mvcc__ovl_max = ovl_max_default;
    mvcc__ovl_slice = ovl_slice_default;
    mvcc__ovl_max_bytes = ovl_bytes_default;
    struct fixture *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/cetcd-test-mvcc-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    fx_open(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];
    fx_close(f);
    snprintf(cmd, sizeof cmd, "%s/small", f->dir);
    (void)umount2(cmd, MNT_DETACH); /* test_compact_on_full_disk's */
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* --- helpers --------------------------------------------------------- */

static uint64_t next_ci = 1;

static mvcc_rev put(struct mvcc_store *s, const char *k, const char *v,
                    int64_t lease)
{
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(
        mvcc_txn_put(t, k, strlen(k), v, strlen(v), lease, 0, NULL), 0);
    mvcc_rev rev = mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    return rev;
}

static int64_t del(struct mvcc_store *s, const char *k, const char *end,
                   size_t end_len)
{
    struct mvcc_batch *b;
    int64_t n;
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(
        mvcc_txn_delete_range(t, k, strlen(k), end, end_len, &n, NULL), 0);
    mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    return n;
}

/* get reads key k at rev into *kv (mod_rev 0 if absent); returns rc. */
static int get(struct mvcc_store *s, const char *k, mvcc_rev rev,
               struct mvcc_kv *kv, char *val, size_t cap)
{
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    int rc = mvcc_range(r, k, strlen(k), NULL, 0, rev, 0, 0, &res);
    memset(kv, 0, sizeof *kv);
    if (rc == 0 && res.n_kvs == 1) {
        *kv = res.kvs[0];
        assert_true(kv->value_len < cap);
        memcpy(val, kv->value, kv->value_len);
        val[kv->value_len] = 0;
        kv->value = (const uint8_t *)val;
        kv->key = NULL;
    }
    mvcc_read_end(r);
    mvcc_range_result_close(&res);
    return rc;
}

/* count_range returns res.count of [k, end) and checks n_kvs/more. */
static int64_t count_range(struct mvcc_store *s, const char *k, size_t kl,
                           const char *end, size_t el, int64_t limit,
                           unsigned flags, bool *more)
{
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    assert_int_equal(mvcc_range(r, k, kl, end, el, 0, limit, flags, &res), 0);
    int64_t c = res.count;
    if (flags & MVCC_RANGE_COUNT_ONLY)
        assert_int_equal(res.n_kvs, 0);
    else
        assert_int_equal(res.n_kvs, limit > 0 && c > limit ? limit : c);
    for (size_t i = 1; i < res.n_kvs; i++) /* strictly ascending keys */
        assert_true(memcmp(res.kvs[i - 1].key, res.kvs[i].key,
                           res.kvs[i].key_len < res.kvs[i - 1].key_len
                               ? res.kvs[i].key_len
                               : res.kvs[i - 1].key_len) <= 0);
    if (more != NULL)
        *more = res.more;
    mvcc_read_end(r);
    mvcc_range_result_close(&res);
    return c;
}

/* --- targeted cases -------------------------------------------------- */

static void test_put_version_rules(void **state)
{
    struct fixture *f = *state;
    struct mvcc_kv kv;
    char v[64];
    assert_int_equal(mvcc_current_rev(f->s), 1); /* etcd: empty store = 1 */
    assert_int_equal(put(f->s, "a", "1", 0), 2);
    assert_int_equal(put(f->s, "a", "1", 0), 3); /* same bytes: new rev */
    assert_int_equal(get(f->s, "a", 0, &kv, v, sizeof v), 0);
    assert_int_equal(kv.create_rev, 2);
    assert_int_equal(kv.mod_rev, 3);
    assert_int_equal(kv.version, 2);
    assert_int_equal(del(f->s, "a", NULL, 0), 1);
    assert_int_equal(mvcc_current_rev(f->s), 4);
    assert_int_equal(get(f->s, "a", 0, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 0);
    assert_int_equal(put(f->s, "a", "xyz", 7), 5);
    assert_int_equal(get(f->s, "a", 0, &kv, v, sizeof v), 0);
    assert_int_equal(kv.create_rev, 5);
    assert_int_equal(kv.version, 1);
    assert_int_equal(kv.lease, 7);
    assert_string_equal(v, "xyz");
    /* history */
    assert_int_equal(get(f->s, "a", 2, &kv, v, sizeof v), 0);
    assert_int_equal(kv.version, 1);
    assert_int_equal(get(f->s, "a", 4, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 0);
    assert_int_equal(get(f->s, "a", 6, &kv, v, sizeof v), ERR_FUTURE_REV);
    assert_int_equal(get(f->s, "", 0, &kv, v, sizeof v), ERR_INVAL);
}

static void test_range_semantics(void **state)
{
    struct fixture *f = *state;
    bool more;
    const char *keys[] = {"a", "ab", "abc", "b", "c", "\xff"};
    for (int i = 0; i < 6; i++)
        put(f->s, keys[i], "v", 0);
    assert_int_equal(count_range(f->s, "ab", 2, NULL, 0, 0, 0, NULL), 1);
    assert_int_equal(count_range(f->s, "abx", 3, NULL, 0, 0, 0, NULL), 0);
    assert_int_equal(count_range(f->s, "a", 1, "b", 1, 0, 0, NULL), 3);
    assert_int_equal(count_range(f->s, "ab", 2, "ac", 2, 0, 0, NULL), 2);
    assert_int_equal(count_range(f->s, "b", 1, "\0", 1, 0, 0, NULL), 3);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 6);
    assert_int_equal(count_range(f->s, "c", 1, "a", 1, 0, 0, NULL), 0);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 2, 0, &more), 6);
    assert_true(more);
    assert_int_equal(count_range(f->s, "a", 1, "b", 1, 3, 0, &more), 3);
    assert_false(more);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0,
                                 MVCC_RANGE_COUNT_ONLY, NULL),
                     6);
    assert_int_equal(count_range(f->s, "a", 1, "\0", 1, 1,
                                 MVCC_RANGE_KEYS_ONLY, &more),
                     6);
    del(f->s, "ab", "b", 1); /* deletes ab, abc */
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 4);
}

static void test_txn_subrevs_read_your_writes(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    struct mvcc_range_result res = {0};
    struct mvcc_kv prev;
    int64_t n;
    put(f->s, "x", "old", 0);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_rev(t), 3);
    assert_int_equal(mvcc_txn_put(t, "x", 1, "new", 3, 0, 0, &prev), 0);
    assert_int_equal(prev.mod_rev, 2);
    assert_memory_equal(prev.value, "old", 3);
    assert_int_equal(mvcc_txn_put(t, "y", 1, "y1", 2, 0, 0, &prev), 0);
    assert_int_equal(prev.mod_rev, 0);
    assert_int_equal(mvcc_txn_range(t, "x", 1, NULL, 0, 0, 0, 0, &res), 0);
    assert_int_equal(res.n_kvs, 1);
    assert_memory_equal(res.kvs[0].value, "new", 3);
    assert_int_equal(res.kvs[0].mod_rev, 3);
    assert_int_equal(res.kvs[0].version, 2);
    assert_int_equal(mvcc_txn_range(t, "x", 1, NULL, 0, 2, 0, 0, &res), 0);
    assert_memory_equal(res.kvs[0].value, "old", 3);
    assert_int_equal(mvcc_txn_delete_range(t, "x", 1, NULL, 0, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(mvcc_txn_range(t, "x", 1, NULL, 0, 0, 0, 0, &res), 0);
    assert_int_equal(res.count, 0);
    assert_int_equal(mvcc_txn_end(t), 3); /* one rev for the whole txn */
    /* the next request in the same batch gets rev 4 */
    t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_rev(t), 4);
    assert_int_equal(mvcc_txn_end(t), 3); /* read-only: no bump */
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(mvcc_current_rev(f->s), 3);
    mvcc_range_result_close(&res);
}

static void test_noop_delete_no_bump(void **state)
{
    struct fixture *f = *state;
    put(f->s, "a", "1", 0);
    assert_int_equal(del(f->s, "zz", NULL, 0), 0);
    assert_int_equal(del(f->s, "b", "\0", 1), 0);
    assert_int_equal(mvcc_current_rev(f->s), 2);
    assert_int_equal(del(f->s, "a", NULL, 0), 1);
    assert_int_equal(del(f->s, "a", NULL, 0), 0); /* already deleted */
    assert_int_equal(mvcc_current_rev(f->s), 3);
}

static void test_ignore_flags(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    struct mvcc_kv kv;
    char v[16];
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "k", 1, NULL, 0, 0,
                                  MVCC_PUT_IGNORE_VALUE, NULL),
                     ERR_KEY_NOT_FOUND);
    assert_int_equal(mvcc_txn_end(t), 1);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    put(f->s, "k", "val", 9);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "k", 1, NULL, 0, 0,
                                  MVCC_PUT_IGNORE_VALUE |
                                      MVCC_PUT_IGNORE_LEASE,
                                  NULL),
                     0);
    mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(get(f->s, "k", 0, &kv, v, sizeof v), 0);
    assert_string_equal(v, "val");
    assert_int_equal(kv.lease, 9);
    assert_int_equal(kv.version, 2);
}

static void test_compaction_semantics(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    struct mvcc_kv kv;
    char v[16];
    bool more;
    put(f->s, "a", "1", 0);  /* 2 */
    put(f->s, "a", "2", 0);  /* 3 */
    put(f->s, "b", "1", 0);  /* 4 */
    del(f->s, "b", NULL, 0); /* 5 */
    put(f->s, "a", "3", 0);  /* 6 */
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, 7), ERR_FUTURE_REV);
    assert_int_equal(mvcc_compact(b, 5), 0);
    assert_int_equal(mvcc_compact(b, 5), ERR_COMPACTED);
    do
        assert_int_equal(mvcc_compact_step(b, 1, &more), 0);
    while (more);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(mvcc_compact_rev(f->s), 5);
    assert_int_equal(mvcc_compact_finished_rev(f->s), 5);
    assert_int_equal(get(f->s, "a", 4, &kv, v, sizeof v), ERR_COMPACTED);
    assert_int_equal(get(f->s, "a", 5, &kv, v, sizeof v), 0); /* == ok */
    assert_string_equal(v, "2");
    assert_int_equal(kv.version, 2);
    assert_int_equal(get(f->s, "a", 6, &kv, v, sizeof v), 0);
    assert_string_equal(v, "3");
    assert_int_equal(get(f->s, "b", 5, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 0);
    /* physically: a@3, a@6 and b's tombstone at 5 (kept for a watch from
     * 5, etcd #18089) remain; a@2 and b@4 are gone. */
    struct mvcc_read *r;
    uint32_t h;
    mvcc_rev cr;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_hash_kv(r, 4, &h, &cr), ERR_COMPACTED);
    assert_int_equal(mvcc_hash_kv(r, 0, &h, &cr), 0);
    assert_int_equal(cr, 5);
    mvcc_read_end(r);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, 5), ERR_COMPACTED);
    mvcc_batch_abort(b);
}

/* The same history (a value v at revision 3) compacted at 5. */
static void compacted_history(struct mvcc_store *s, const char *v,
                              bool finish)
{
    struct mvcc_batch *b;
    bool more;
    put(s, "a", "1", 0);  /* 2 */
    put(s, "a", v, 0);    /* 3 */
    put(s, "b", "1", 0);  /* 4 */
    del(s, "b", NULL, 0); /* 5 */
    put(s, "c", "1", 0);  /* 6 */
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    assert_int_equal(mvcc_compact(b, 5), 0);
    assert_int_equal(mvcc_compact_step(b, 1, &more), 0);
    while (finish && more)
        assert_int_equal(mvcc_compact_step(b, 1, &more), 0);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(mvcc_compact_pending(s), !finish);
}

static uint32_t hash_compacted(struct mvcc_store *s)
{
    struct mvcc_read *r;
    uint32_t h = 0;
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    assert_int_equal(mvcc_hash_kv_compacted(r, &h), 0);
    mvcc_read_end(r);
    return h;
}

/* mvcc_hash_kv_compacted (the compaction-time hash check): a function of
 * the history up to the compact revision only: equal whether the
 * compaction's deletions have run or not and whatever came after it,
 * different for another value at or below it; none before a compaction. */
static void test_hash_kv_compacted(void **state)
{
    struct fixture *f = *state;
    struct mvcc_read *r;
    uint32_t h;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_hash_kv_compacted(r, &h), ERR_NOTFOUND);
    mvcc_read_end(r);
    compacted_history(f->s, "2", false); /* deletions pending */
    struct fixture g, d;
    strcpy(g.dir, "/tmp/cetcd-test-mvcc-XXXXXX");
    strcpy(d.dir, "/tmp/cetcd-test-mvcc-XXXXXX");
    assert_non_null(mkdtemp(g.dir));
    assert_non_null(mkdtemp(d.dir));
    fx_open(&g);
    fx_open(&d);
    compacted_history(g.s, "2", true);
    compacted_history(d.s, "X", true);
    uint32_t hf = hash_compacted(f->s);
    assert_int_equal(hf, hash_compacted(g.s));
    assert_int_not_equal(hf, hash_compacted(d.s));
    put(g.s, "a", "later", 0); /* 7: above the compact revision */
    del(g.s, "c", NULL, 0);    /* 8 */
    assert_int_equal(hf, hash_compacted(g.s));
    fx_close(&g);
    fx_close(&d);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", g.dir, d.dir);
    assert_int_equal(system(cmd), 0);
}

/* assert_read_revs checks that a read begun now sees revision rev and
 * compacted revision compact_rev. */
static void assert_read_revs(struct mvcc_store *s, mvcc_rev rev,
                             mvcc_rev compact_rev)
{
    struct mvcc_read *r;
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    assert_int_equal(mvcc_read_rev(r), rev);
    assert_int_equal(mvcc_read_compact_rev(r), compact_rev);
    mvcc_read_end(r);
}

/* A held store (a tentative batch committed, not yet durable): reads
 * started during the hold see the state before it, revision, values,
 * counts, future-rev errors and compact revision alike; after the release
 * they see everything. */
static void test_visible_hold(void **state)
{
    struct fixture *f = *state;
    struct mvcc_kv kv;
    char v[16];
    put(f->s, "a", "1", 0); /* 2 */
    put(f->s, "b", "1", 0); /* 3 */
    mvcc_visible_hold(f->s);
    put(f->s, "a", "2", 0); /* 4: tentative */
    put(f->s, "c", "1", 0); /* 5: tentative */
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, 4), 0); /* tentative, logical only */
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(mvcc_current_rev(f->s), 5);

    assert_read_revs(f->s, 3, 0);
    assert_int_equal(get(f->s, "a", 0, &kv, v, sizeof v), 0);
    assert_string_equal(v, "1");
    assert_int_equal(kv.mod_rev, 2);
    assert_int_equal(get(f->s, "c", 0, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 0); /* absent */
    assert_int_equal(get(f->s, "a", 2, &kv, v, sizeof v), 0); /* not compacted */
    assert_int_equal(get(f->s, "a", 4, &kv, v, sizeof v), ERR_FUTURE_REV);
    assert_int_equal(count_range(f->s, "a", 1, "z", 1, 0, 0, NULL), 2);

    mvcc_visible_release(f->s);
    assert_read_revs(f->s, 5, 4);
    assert_int_equal(get(f->s, "a", 0, &kv, v, sizeof v), 0);
    assert_string_equal(v, "2");
    assert_int_equal(get(f->s, "a", 2, &kv, v, sizeof v), ERR_COMPACTED);
    assert_int_equal(count_range(f->s, "a", 1, "z", 1, 0, 0, NULL), 3);
}

static int count_event(void *arg, const struct mvcc_event *ev)
{
    (void)ev;
    (*(int *)arg)++;
    return 0;
}

static void test_compaction_resume_after_reopen(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    struct mvcc_kv kv;
    char v[16], key[8];
    bool more;
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "k%d", i % 7);
        put(f->s, key, i % 5 ? "v" : "w", 0);
        if (i % 11 == 0)
            del(f->s, key, NULL, 0);
    }
    mvcc_rev cur = mvcc_current_rev(f->s), c = cur - 10;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, c), 0);
    assert_int_equal(mvcc_compact_step(b, 3, &more), 0);
    assert_true(more);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    fx_close(f);
    fx_open(f);
    assert_true(mvcc_compact_pending(f->s));
    assert_int_equal(mvcc_compact_rev(f->s), c);
    assert_int_equal(get(f->s, "k1", c - 1, &kv, v, sizeof v), ERR_COMPACTED);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    do
        assert_int_equal(mvcc_compact_step(b, 2, &more), 0);
    while (more);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_false(mvcc_compact_pending(f->s));
    /* only versions > c plus at most one per key (<= c) remain */
    struct mvcc_read *r;
    int n = 0;
    mvcc_rev next;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_events_read(r, c - 1, NULL, 0, NULL, 0, 0, false,
                                      count_event, &n, &next),
                     ERR_COMPACTED);
    assert_int_equal(mvcc_events_read(r, c + 1, NULL, 0, "\0", 1, 0, false,
                                      count_event, &n, &next),
                     0);
    assert_int_equal(next, cur + 1);
    assert_int_equal(n, cur - c);
    mvcc_read_end(r);
}

/* compact_all compacts at c: in steps of max_revs inside one batch
 * (what a physical Compact does), or one step per batch (what the server
 * does after each apply batch while a compaction is pending). */
static void compact_all(struct mvcc_store *s, mvcc_rev c, size_t max_revs,
                        bool one_batch)
{
    struct mvcc_batch *b;
    bool more;
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    assert_int_equal(mvcc_compact(b, c), 0);
    for (;;) {
        assert_int_equal(mvcc_compact_step(b, max_revs, &more), 0);
        if (!more)
            break;
        if (!one_batch) {
            assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
            assert_int_equal(mvcc_batch_begin(s, &b), 0);
        }
    }
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(mvcc_compact_finished_rev(s), c);
}

/* Regression (differential seed 24, op 2321): a compaction that drops the
 * last entries of the `kv` bucket empties it, LMDB then unpositions the
 * cursor that deleted them, and reading "the entry that followed" failed
 * with EINVAL: the batch was poisoned with ERR_INVAL and the server
 * stopped.  What matters is that every version is dead at the compact
 * rev (a from-key delete of every key, then a compaction at its rev); the
 * keys are like the failing run's: prefixes of others, 0xff bytes. */
static void test_compaction_empties_store(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    struct mvcc_range_result res = {0};
    struct mvcc_kv kv;
    char v[16];
    static const char *keys[] = {"a", "b", "b\0", "ba", "\xfe\xff", "\xff"};
    static const size_t lens[] = {1, 1, 2, 2, 2, 1};
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 6; i++) {
            assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
            struct mvcc_txn *t = mvcc_txn_begin(b);
            assert_int_equal(mvcc_txn_put(t, keys[i], lens[i], "v", 1, 0, 0,
                                          NULL),
                             0);
            mvcc_txn_end(t);
            assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
        }
    /* an earlier compaction, a step per batch, leaves one version each */
    compact_all(f->s, mvcc_current_rev(f->s) - 3, 1, false);
    /* delete everything (a from-key delete), then compact at that rev */
    int64_t n;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_delete_range(t, "\0", 1, "\0", 1, &n, NULL), 0);
    assert_int_equal(n, 6);
    mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    mvcc_rev c = mvcc_current_rev(f->s);
    compact_all(f->s, c, 10000, true);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 0);
    /* the emptied store takes writes and compacts again, this time inside
     * the batch that also writes, and with a reopen in between */
    put(f->s, "\xff", "1", 0);
    put(f->s, "b\0", "2", 0);
    del(f->s, "b", "\0", 1);
    fx_close(f);
    fx_open(f);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    bool more;
    assert_int_equal(mvcc_compact(b, mvcc_current_rev(f->s)), 0);
    do
        assert_int_equal(mvcc_compact_step(b, 1, &more), 0);
    while (more);
    t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "b", 1, "3", 1, 0, 0, NULL), 0);
    assert_int_equal(mvcc_txn_range(t, "\0", 1, "\0", 1, 0, 0, 0, &res), 0);
    assert_int_equal(res.count, 1);
    mvcc_rev rev = mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(get(f->s, "b", 0, &kv, v, sizeof v), 0);
    assert_string_equal(v, "3");
    assert_int_equal(kv.mod_rev, rev);
    assert_int_equal(kv.version, 1);
    mvcc_range_result_close(&res);
}

static void test_consistent_index_persisted(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    struct mvcc_kv kv;
    char v[16];
    assert_int_equal(mvcc_consistent_index(f->s), 0);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "a", 1, "1", 1, 0, 0, NULL), 0);
    mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, 42), 0);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0); /* never committed */
    t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "b", 1, "1", 1, 0, 0, NULL), 0);
    mvcc_txn_end(t);
    mvcc_batch_abort(b);
    fx_close(f);
    fx_open(f);
    assert_int_equal(mvcc_consistent_index(f->s), 42);
    assert_int_equal(mvcc_current_rev(f->s), 2);
    assert_int_equal(get(f->s, "a", 0, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 2);
    assert_int_equal(get(f->s, "b", 0, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 0);
    next_ci = 43;
}

/* --- events ---------------------------------------------------------- */

struct seen {
    int n;             /* events seen */
    int types[8];      /* their types */
    mvcc_rev mods[8];  /* kv.mod_rev */
    mvcc_rev prevs[8]; /* prev_kv.mod_rev */
    int64_t subs[8];   /* sub revs */
    char vals[8][8];   /* kv values */
};

static void observe(void *arg, const struct mvcc_event *ev, size_t n,
                    mvcc_rev rev)
{
    struct seen *s = arg;
    for (size_t i = 0; i < n && s->n < 8; i++, s->n++) {
        s->types[s->n] = ev[i].type;
        s->mods[s->n] = ev[i].kv.mod_rev;
        s->prevs[s->n] = ev[i].prev_kv.mod_rev;
        s->subs[s->n] = ev[i].sub_rev;
        memcpy(s->vals[s->n], ev[i].kv.value ? (const char *)ev[i].kv.value
                                              : "",
               ev[i].kv.value_len);
        s->vals[s->n][ev[i].kv.value_len] = 0;
    }
    assert_true(rev >= ev[n - 1].kv.mod_rev);
}

static int replay(void *arg, const struct mvcc_event *ev)
{
    struct seen *s = arg;
    assert_true(s->n < 8);
    assert_int_equal(ev->type, s->types[s->n]);
    assert_int_equal(ev->kv.mod_rev, s->mods[s->n]);
    assert_int_equal(ev->prev_kv.mod_rev, s->prevs[s->n]);
    assert_int_equal(ev->sub_rev, s->subs[s->n]);
    s->n++;
    return 0;
}

static void test_events(void **state)
{
    struct fixture *f = *state;
    struct seen seen = {0};
    struct mvcc_batch *b;
    int64_t n;
    mvcc_store_set_observer(f->s, observe, &seen);
    put(f->s, "a", "1", 0); /* rev 2 */
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b); /* rev 3: two changes */
    assert_int_equal(mvcc_txn_put(t, "a", 1, "2", 1, 0, 0, NULL), 0);
    assert_int_equal(mvcc_txn_put(t, "b", 1, "3", 1, 0, 0, NULL), 0);
    mvcc_txn_end(t);
    t = mvcc_txn_begin(b); /* rev 4 */
    assert_int_equal(mvcc_txn_delete_range(t, "a", 1, "\0", 1, &n, NULL), 0);
    assert_int_equal(n, 2);
    mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(seen.n, 5);
    int types[] = {0, 0, 0, 1, 1};
    mvcc_rev mods[] = {2, 3, 3, 4, 4}, prevs[] = {0, 2, 0, 3, 3};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(seen.types[i], types[i]);
        assert_int_equal(seen.mods[i], mods[i]);
        assert_int_equal(seen.prevs[i], prevs[i]);
    }
    assert_string_equal(seen.vals[1], "2");
    assert_int_equal(seen.subs[2], 1);
    mvcc_store_set_observer(f->s, NULL, NULL);
    /* replay from history gives the same events (after a reopen) */
    fx_close(f);
    fx_open(f);
    struct mvcc_read *r;
    mvcc_rev next;
    seen.n = 0;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_events_read(r, 1, "\0", 1, "\0", 1, 0, true,
                                      replay, &seen, &next),
                     0);
    assert_int_equal(seen.n, 5);
    assert_int_equal(next, 5);
    seen.n = 1; /* max 1 stops after rev 3 as a whole: events 2 and 3 */
    assert_int_equal(mvcc_events_read(r, 3, "a", 1, "c", 1, 1, true, replay,
                                      &seen, &next),
                     0);
    assert_int_equal(seen.n, 3);
    assert_int_equal(next, 4);
    mvcc_read_end(r);
}

static int count_key(void *arg, const uint8_t *key, size_t key_len)
{
    assert_true(key_len == 1 && key[0] == 'a');
    (*(int *)arg)++;
    return 0;
}

static void test_lease_keys(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    int64_t n;
    put(f->s, "a", "1", 5);
    put(f->s, "b", "1", 5);
    put(f->s, "c", "1", 6);
    put(f->s, "b", "2", 0); /* detaches b */
    struct mvcc_read *r;
    int cnt = 0;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(
        mvcc_lease_keys(r, 5, count_key, &cnt), 0);
    mvcc_read_end(r);
    assert_int_equal(cnt, 1);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_delete_lease(t, 5, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(mvcc_txn_end(t), 6);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 2);
}

/* Collects the keys mvcc_batch_lease_keys lists (one byte each here);
 * stops with ERR_AUTH_PERMISSION_DENIED at 'x', as the auth check does. */
struct seen_keys {
    char keys[8];
    int n;
};

static int seen_key(void *arg, const uint8_t *key, size_t key_len)
{
    struct seen_keys *sk = arg;
    assert_int_equal(key_len, 1);
    assert_true(sk->n < (int)sizeof sk->keys);
    sk->keys[sk->n++] = (char)key[0];
    return key[0] == 'x' ? ERR_AUTH_PERMISSION_DENIED : 0;
}

/* The keys a revoke applied now would delete, the batch's own writes
 * included: a key attached earlier in the batch counts, one detached or
 * deleted earlier in it does not; fn's error stops the walk and leaves
 * the batch healthy. */
static void test_batch_lease_keys(void **state)
{
    struct fixture *f = *state;
    put(f->s, "a", "1", 5);
    put(f->s, "b", "1", 5);
    struct mvcc_batch *b;
    struct mvcc_kv prev;
    int64_t n;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "c", 1, "1", 1, 5, 0, &prev), 0);
    assert_int_equal(mvcc_txn_put(t, "b", 1, "2", 1, 0, 0, &prev), 0);
    mvcc_txn_end(t);
    t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_delete_range(t, "a", 1, NULL, 0, &n, NULL), 0);
    mvcc_txn_end(t);
    struct seen_keys sk = {0};
    assert_int_equal(mvcc_batch_lease_keys(b, 5, seen_key, &sk), 0);
    assert_int_equal(sk.n, 1);
    assert_int_equal(sk.keys[0], 'c');
    t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "x", 1, "1", 1, 5, 0, &prev), 0);
    mvcc_txn_end(t);
    sk.n = 0;
    assert_int_equal(mvcc_batch_lease_keys(b, 5, seen_key, &sk),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(sk.n, 2); /* c, then x stopped it */
    sk.n = 0;
    assert_int_equal(mvcc_batch_lease_keys(b, 6, seen_key, &sk), 0);
    assert_int_equal(sk.n, 0);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0); /* not poisoned */
}

/* --- long keys (longer than LMDB's key limit) -------------------------- */

static char lk1[150001], lk2[1024], lk3[1024], ls1[1024];

/* lk_make builds, with L the store's longest `kv` key: lk1 = 150000 'k's,
 * lk2 = L + 1 'k's, lk3 = L - 8 'k's + 20 'a's (same index prefix as lk2,
 * sorts first), ls1 = L 'k's (short, between lk3 and lk2). */
static void lk_make(struct fixture *f)
{
    size_t l = backend_key_max(f->be) - 17;
    assert_true(l + 40 < sizeof lk2);
    memset(lk1, 'k', 150000);
    memset(lk2, 'k', l + 1);
    memset(lk3, 'k', l - 8);
    memset(lk3 + l - 8, 'a', 20);
    memset(ls1, 'k', l);
}

/* lk_of is the key of length len (their lengths differ). */
static const char *lk_of(size_t len)
{
    const char *all[] = {lk1, lk2, lk3, ls1};
    for (int i = 0; i < 4; i++)
        if (strlen(all[i]) == len)
            return all[i];
    fail_msg("no key of length %zu", len);
    return NULL;
}

/* range_lens checks that [k, end) at the current rev with limit gives
 * keys of the lengths want (n of them) and count. */
static void range_lens(struct mvcc_store *s, const char *k, const char *end,
                       size_t el, int64_t limit, const size_t *want,
                       size_t n, int64_t count)
{
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    assert_int_equal(mvcc_range(r, k, strlen(k), end, el, 0, limit, 0, &res),
                     0);
    assert_int_equal(res.n_kvs, n);
    assert_int_equal(res.count, count);
    assert_int_equal(res.more, limit > 0 && count > limit);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(res.kvs[i].key_len, want[i]);
        assert_memory_equal(res.kvs[i].key, lk_of(want[i]), want[i]);
    }
    mvcc_read_end(r);
    mvcc_range_result_close(&res);
}

static void test_long_keys_ranges(void **state)
{
    struct fixture *f = *state;
    struct mvcc_kv kv;
    char val[16];
    lk_make(f);
    size_t n1 = strlen(lk1), n2 = strlen(lk2), n3 = strlen(lk3);
    size_t ns = strlen(ls1);
    assert_int_equal(put(f->s, lk2, "v1", 0), 2);
    put(f->s, lk1, "big", 0);
    put(f->s, ls1, "s", 0);
    put(f->s, lk3, "x", 0);
    assert_int_equal(put(f->s, lk2, "v2", 0), 6);
    assert_int_equal(get(f->s, lk2, 0, &kv, val, sizeof val), 0);
    assert_string_equal(val, "v2");
    assert_int_equal(kv.version, 2);
    assert_int_equal(kv.create_rev, 2);
    assert_int_equal(kv.mod_rev, 6);
    assert_int_equal(get(f->s, lk2, 5, &kv, val, sizeof val), 0);
    assert_string_equal(val, "v1");
    assert_int_equal(get(f->s, lk1, 2, &kv, val, sizeof val), 0);
    assert_int_equal(kv.mod_rev, 0); /* not yet written at 2 */
    lk2[n2] = 'k'; /* a long key never written, sharing lk2's prefix */
    assert_int_equal(get(f->s, lk2, 0, &kv, val, sizeof val), 0);
    assert_int_equal(kv.mod_rev, 0);
    lk2[n2] = 0;
    /* byte order of full keys: lk3 < ls1 < lk2 < lk1 */
    size_t all[] = {n3, ns, n2, n1};
    range_lens(f->s, "k", "l", 1, 0, all, 4, 4);
    range_lens(f->s, "k", "l", 1, 3, all, 3, 4);
    range_lens(f->s, lk3, "\0", 1, 1, all, 1, 4);
    range_lens(f->s, lk2, "\0", 1, 0, all + 2, 2, 2); /* from a long key */
    range_lens(f->s, ls1, lk1, n1, 0, all + 1, 2, 2); /* to a long key */
    range_lens(f->s, lk3, lk2, n2, 0, all, 2, 2);
    range_lens(f->s, lk1, "\0", 1, 0, all + 3, 1, 1);
    bool more;
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 2,
                                 MVCC_RANGE_COUNT_ONLY, &more),
                     4);
    assert_true(more);
    assert_int_equal(count_range(f->s, "k", 1, "l", 1, 0,
                                 MVCC_RANGE_KEYS_ONLY, NULL),
                     4);
    /* deletes: a single long key, then a range from a long key */
    assert_int_equal(del(f->s, lk2, NULL, 0), 1);
    assert_int_equal(get(f->s, lk2, 0, &kv, val, sizeof val), 0);
    assert_int_equal(kv.mod_rev, 0);
    assert_int_equal(del(f->s, lk3, ls1, ns), 1);
    size_t left[] = {ns, n1};
    range_lens(f->s, "k", "l", 1, 0, left, 2, 2);
    assert_int_equal(put(f->s, lk2, "v3", 0), 9); /* created again */
    assert_int_equal(get(f->s, lk2, 0, &kv, val, sizeof val), 0);
    assert_int_equal(kv.version, 1);
    assert_int_equal(kv.create_rev, 9);
}

struct lk_seen {
    int n;            /* events or keys seen */
    size_t lens[8];   /* their key lengths */
    mvcc_rev prev[8]; /* prev_kv mod_rev of events */
};

static int lk_event(void *arg, const struct mvcc_event *ev)
{
    struct lk_seen *s = arg;
    assert_true(s->n < 8);
    s->prev[s->n] = ev->prev_kv.mod_rev;
    s->lens[s->n++] = ev->kv.key_len;
    return 0;
}

static int lk_key(void *arg, const uint8_t *key, size_t len)
{
    struct lk_seen *s = arg;
    assert_true(s->n < 8 && key[0] == 'k');
    s->lens[s->n++] = len;
    return 0;
}

/* kvl_entries counts the entries of the `kvl` bucket. */
static size_t kvl_entries(struct fixture *f)
{
    backend_bucket b;
    struct backend_txn *t;
    struct backend_cursor *c;
    struct backend_val k, v;
    size_t n = 0;
    int rc;
    assert_int_equal(backend_bucket_open(f->be, "kvl", BACKEND_BUCKET_REVKEY,
                                         &b),
                     0);
    assert_int_equal(backend_read_begin(f->be, &t), 0);
    assert_int_equal(backend_cursor_open(t, b, &c), 0);
    for (rc = backend_cursor_first(c, &k, &v); rc == 0;
         rc = backend_cursor_next(c, &k, &v))
        n++;
    assert_int_equal(rc, ERR_NOTFOUND);
    backend_cursor_close(c);
    backend_read_end(t);
    return n;
}

static void test_long_keys_history(void **state)
{
    struct fixture *f = *state;
    struct mvcc_read *r;
    struct mvcc_batch *b;
    struct lk_seen seen = {0};
    mvcc_rev next;
    int64_t n;
    lk_make(f);
    size_t n1 = strlen(lk1), n2 = strlen(lk2), n3 = strlen(lk3);
    put(f->s, lk2, "v1", 0);           /* 2 */
    put(f->s, lk2, "v2", 9);           /* 3 */
    put(f->s, lk3, "x", 9);            /* 4 */
    put(f->s, lk1, "big", 0);          /* 5 */
    assert_int_equal(del(f->s, lk1, NULL, 0), 1); /* 6 */
    fx_close(f); /* everything is on disk */
    fx_open(f);
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_events_read(r, 1, "k", 1, "l", 1, 0, true,
                                      lk_event, &seen, &next),
                     0);
    assert_int_equal(seen.n, 5);
    size_t lens[] = {n2, n2, n3, n1, n1};
    mvcc_rev prevs[] = {0, 2, 0, 0, 5};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(seen.lens[i], lens[i]);
        assert_int_equal(seen.prev[i], prevs[i]);
    }
    seen.n = 0;
    assert_int_equal(mvcc_lease_keys(r, 9, lk_key, &seen), 0);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.lens[0] + seen.lens[1], n2 + n3);
    mvcc_read_end(r);
    assert_int_equal(kvl_entries(f), 5);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    /* the batch's walk (the auth applier's) sees the same long keys */
    struct lk_seen bseen = {0};
    assert_int_equal(mvcc_batch_lease_keys(b, 9, lk_key, &bseen), 0);
    assert_int_equal(bseen.n, 2);
    assert_int_equal(bseen.lens[0] + bseen.lens[1], n2 + n3);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_delete_lease(t, 9, &n), 0); /* 7 */
    assert_int_equal(n, 2);
    mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    put(f->s, lk2, "v3", 0); /* 8 */
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 1);
    compact_all(f->s, 8, 1, true);
    assert_int_equal(kvl_entries(f), 1); /* lk2 at 8 only */
    struct mvcc_kv kv;
    char val[16];
    assert_int_equal(get(f->s, lk2, 0, &kv, val, sizeof val), 0);
    assert_string_equal(val, "v3");
    assert_int_equal(kv.create_rev, 8);
}

/* --- allocation failures --------------------------------------------- */

static int batch_with_fault(struct mvcc_store *s, long fault)
{
    struct mvcc_batch *b;
    struct mvcc_kv prev, *prevs;
    struct mvcc_range_result res = {0};
    int64_t n;
    char big[100000];
    memset(big, 'z', sizeof big);
    mem_fault_set(fault);
    int rc = mvcc_batch_begin(s, &b);
    if (rc != 0)
        goto out;
    struct mvcc_txn *t = mvcc_txn_begin(b);
    rc = mvcc_txn_put(t, "a", 1, big, sizeof big, 0, 0, &prev);
    if (rc == 0)
        rc = mvcc_txn_put(t, "a", 1, "2", 1, 0, 0, &prev);
    if (rc == 0)
        rc = mvcc_txn_range(t, "\0", 1, "\0", 1, 0, 0, 0, &res);
    if (rc == 0)
        rc = mvcc_txn_delete_range(t, "a", 1, "\0", 1, &n, &prevs);
    mvcc_txn_end(t);
    if (rc != 0) {
        mvcc_batch_abort(b);
        goto out;
    }
    rc = mvcc_batch_commit(b, next_ci);
    next_ci += rc == 0;
out:
    mem_fault_set(0);
    mvcc_range_result_close(&res);
    return rc;
}

static void noop_observer(void *arg, const struct mvcc_event *e, size_t n,
                          mvcc_rev rev)
{
    (void)arg, (void)e, (void)n, (void)rev;
}

/* stored_entries counts the entries of `kv` and `kvl` (*tombs_out: the
 * tombstones among them) and of `rev` (*revs_out). */
static size_t stored_entries(struct fixture *f, size_t *tombs_out,
                             size_t *revs_out)
{
    static const char *names[] = {"kv", "kvl", "rev"};
    struct backend_txn *t;
    struct backend_cursor *c;
    struct backend_val k, v;
    size_t n[3] = {0, 0, 0};
    int rc;
    *tombs_out = 0;
    assert_int_equal(backend_read_begin(f->be, &t), 0);
    for (int i = 0; i < 3; i++) {
        backend_bucket b;
        assert_int_equal(backend_bucket_open(f->be, names[i],
                                             i < 2 ? BACKEND_BUCKET_REVKEY
                                                   : 0,
                                             &b),
                         0);
        assert_int_equal(backend_cursor_open(t, b, &c), 0);
        for (rc = backend_cursor_first(c, &k, &v); rc == 0;
             rc = backend_cursor_next(c, &k, &v), n[i]++) {
            struct mvcc_kv kv;
            bool tomb = false;
            if (i < 2)
                assert_int_equal(mvcc_kv_decode(k.data, k.len, v.data, v.len,
                                                &kv, &tomb),
                                 0);
            *tombs_out += tomb;
        }
        assert_int_equal(rc, ERR_NOTFOUND);
        backend_cursor_close(c);
    }
    backend_read_end(t);
    *revs_out = n[2];
    return n[0] + n[1];
}

/* An event log of a replay (keys by length: 1 = "k"/"x"/"y", else lk2). */
struct evlog {
    int n;              /* events */
    int types[16];      /* MVCC_EVENT_* */
    mvcc_rev mods[16];  /* kv.mod_rev */
    size_t lens[16];    /* kv.key_len */
};

static int log_event(void *arg, const struct mvcc_event *ev)
{
    struct evlog *l = arg;
    assert_true(l->n < 16);
    l->types[l->n] = ev->type;
    l->mods[l->n] = ev->kv.mod_rev;
    l->lens[l->n++] = ev->kv.key_len;
    return 0;
}

static struct evlog replay_from(struct fixture *f, mvcc_rev start)
{
    struct evlog l = {0};
    struct mvcc_read *r;
    mvcc_rev next;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_events_read(r, start, "\0", 1, "\0", 1, 0, false,
                                      log_event, &l, &next),
                     0);
    assert_int_equal(next, mvcc_read_rev(r) + 1);
    mvcc_read_end(r);
    return l;
}

static uint32_t hash_now(struct fixture *f)
{
    struct mvcc_read *r;
    uint32_t h;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_hash_kv(r, 0, &h, NULL), 0);
    mvcc_read_end(r);
    return h;
}

/* drop_tomb deletes, behind the store's back, the short key k's tombstone
 * at main rev (sub 0) and its `rev` entry: the store as an etcd 3.4 which
 * drops it at compaction would hold it. */
static void drop_tomb(struct fixture *f, const char *k, mvcc_rev rev)
{
    backend_bucket kvb, revb;
    struct backend_txn *t;
    uint8_t ck[64], rk[16];
    size_t kl = strlen(k);
    assert_true(kl + 17 <= sizeof ck);
    memcpy(ck, k, kl);
    for (int i = 0; i < 8; i++) { /* the `kv` key: ~main, ~sub, kind */
        ck[kl + i] = (uint8_t)(~(uint64_t)rev >> (56 - 8 * i));
        ck[kl + 8 + i] = 0xff;
        rk[i] = (uint8_t)((uint64_t)rev >> (56 - 8 * i));
        rk[8 + i] = 0;
    }
    ck[kl + 16] = 1; /* a tombstone */
    assert_int_equal(backend_bucket_open(f->be, "kv", BACKEND_BUCKET_REVKEY,
                                         &kvb),
                     0);
    assert_int_equal(backend_bucket_open(f->be, "rev", 0, &revb), 0);
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    assert_int_equal(backend_del(t, kvb, ck, kl + 17), 0);
    assert_int_equal(backend_del(t, revb, rk, sizeof rk), 0);
    assert_int_equal(backend_write_commit(t), 0);
}

/* etcd #18089, #19179: a compaction at a revision that deleted keys keeps
 * those tombstones (short and long keys), so that a replay from the
 * compact rev - the oldest a watcher may start at - has the deletes, also
 * after a reopen; reads, counts and the hash are as if they were gone; the
 * next compaction drops them, also when it extends a running compaction
 * that had already walked past them. */
static void test_compaction_keeps_delete_at_rev(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    struct mvcc_kv kv;
    char v[16];
    size_t tombs, revs;
    bool more;
    lk_make(f);
    put(f->s, "k", "2", 0);                        /* 2 */
    put(f->s, "k", "3", 0);                        /* 3 */
    put(f->s, "k", "4", 0);                        /* 4 */
    put(f->s, lk2, "5", 0);                        /* 5 */
    assert_int_equal(del(f->s, "k", "l", 1), 2);   /* 6: k and lk2 */
    put(f->s, "k", "7", 0);                        /* 7 */
    compact_all(f->s, 6, 1, false);
    struct evlog l = replay_from(f, 6);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.types[0], MVCC_EVENT_DELETE);
    assert_int_equal(l.mods[0], 6);
    assert_int_equal(l.lens[0], 1);
    assert_int_equal(l.types[1], MVCC_EVENT_DELETE);
    assert_int_equal(l.mods[1], 6);
    assert_int_equal(l.lens[1], strlen(lk2));
    assert_int_equal(l.types[2], MVCC_EVENT_PUT);
    assert_int_equal(l.mods[2], 7);
    /* Not live: ranges and counts at 6 and after do not see them. */
    assert_int_equal(get(f->s, "k", 6, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 0);
    assert_int_equal(get(f->s, lk2, 6, &kv, v, sizeof v), 0);
    assert_int_equal(kv.mod_rev, 0);
    assert_int_equal(get(f->s, "k", 7, &kv, v, sizeof v), 0);
    assert_string_equal(v, "7");
    assert_int_equal(kv.version, 1);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 1);
    assert_int_equal(stored_entries(f, &tombs, &revs), 3);
    assert_int_equal(tombs, 2);
    assert_int_equal(revs, 3);
    /* A restart keeps them (etcd #19179: lost on restore). */
    fx_close(f);
    fx_open(f);
    l = replay_from(f, 6);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.types[1], MVCC_EVENT_DELETE);
    /* The next compaction drops them. */
    put(f->s, "x", "8", 0); /* 8 */
    compact_all(f->s, 8, 1, true);
    assert_int_equal(stored_entries(f, &tombs, &revs), 2); /* k@7, x@8 */
    assert_int_equal(tombs, 0);
    assert_int_equal(revs, 2);
    /* Extending a compaction whose walk has passed its tombstones. */
    assert_int_equal(del(f->s, "x", NULL, 0), 1); /* 9 */
    put(f->s, "y", "10", 0);                       /* 10 */
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, 9), 0);
    assert_int_equal(mvcc_compact_step(b, 1, &more), 0); /* x@8 */
    assert_int_equal(mvcc_compact_step(b, 1, &more), 0); /* x@9, kept */
    assert_true(more);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    compact_all(f->s, 10, 1, false);
    assert_int_equal(stored_entries(f, &tombs, &revs), 2); /* k@7, y@10 */
    assert_int_equal(tombs, 0);
    /* The hash skips a kept tombstone. */
    assert_int_equal(del(f->s, "y", NULL, 0), 1); /* 11 */
    compact_all(f->s, 11, 1, true);
    assert_int_equal(stored_entries(f, &tombs, &revs), 2); /* k@7, y@11 */
    assert_int_equal(tombs, 1);
    uint32_t kept = hash_now(f);
    drop_tomb(f, "y", 11);
    assert_int_equal(stored_entries(f, &tombs, &revs), 1);
    assert_int_equal(tombs, 0);
    assert_int_equal(hash_now(f), kept);
}

static void test_nomem(void **state)
{
    struct fixture *f = *state;
    mvcc_store_set_observer(f->s, noop_observer, NULL);
    put(f->s, "a", "1", 0);
    put(f->s, "b", "1", 0);
    for (long i = 1; i < 40; i++) {
        mvcc_rev before = mvcc_current_rev(f->s);
        int rc = batch_with_fault(f->s, i);
        if (rc == 0) {
            assert_int_equal(mvcc_current_rev(f->s), before + 1);
            break; /* the fault landed past every allocation */
        }
        assert_int_equal(rc, ERR_NOMEM);
        assert_int_equal(mvcc_current_rev(f->s), before);
        assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 2);
    }
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 0);
    mvcc_store_set_observer(f->s, NULL, NULL);
}

/* --- randomized model check ------------------------------------------ */

#define NKEYS 20
#define MAXREV 1500

/* The model: for each revision, each key's state. */
struct mkv {
    int live;       /* key exists */
    int val;        /* value: decimal digits */
    mvcc_rev create; /* create rev */
    mvcc_rev mod;   /* mod rev */
    int64_t ver;    /* version */
};
static struct mkv model[MAXREV + 2][NKEYS];
/* In key order (sorted by model_keys).  Keys that are prefixes of others
 * ("a" < "a\0" < "ab", "b" < "b\0" < "ba") and 0xff bytes put a key's
 * versions right next to another key's, and "\xff" last in the bucket,
 * where compaction's cursor deletions end.  Then keys around the store's
 * L (the longest key kept in `kv`, LMDB's key size - 17): of length P = L
 * - 8 (a long key's index prefix), P + 1, L, L + 1 and far beyond, all
 * sharing one P-byte prefix (one group of `kvl`) and interleaving with
 * the short ones, plus a second group, and a long key in the 0xff tail. */
static char *mkeys[NKEYS];
static size_t mklen[NKEYS];
static char mkbuf[NKEYS][2048];
extern uint64_t mvcc__hash_mask;

static int mk_cmp(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    size_t n = mklen[i] < mklen[j] ? mklen[i] : mklen[j];
    int c = memcmp(mkbuf[i], mkbuf[j], n);
    return c ? c : (mklen[i] < mklen[j] ? -1 : mklen[i] > mklen[j]);
}

/* mk sets key i to head (hl bytes) + fill repeated to n bytes + tail. */
static void mk(int i, const char *head, size_t hl, char fill, size_t n,
               const char *tail)
{
    memcpy(mkbuf[i], head, hl);
    memset(mkbuf[i] + hl, fill, n - hl);
    strcpy(mkbuf[i] + n, tail);
    mklen[i] = n + strlen(tail);
}

static void model_keys(size_t l)
{
    size_t p = l - 8;
    int ord[NKEYS];
    mk(0, "a", 1, 0, 1, ""), mk(1, "a", 2, 0, 2, ""), mk(2, "ab", 2, 0, 2, "");
    mk(3, "b", 1, 0, 1, ""), mk(4, "b", 2, 0, 2, ""), mk(5, "ba", 2, 0, 2, "");
    mk(6, "\xfe\xff", 2, 0, 2, ""), mk(7, "\xff", 1, 0, 1, "");
    mk(8, "k", 1, 'k', p, ""), mk(9, "k", 1, 'k', p, "a");
    mk(10, "k", 1, 'k', l, ""), mk(11, "k", 1, 'k', l, "a");
    mk(12, "k", 1, 'k', p, "b");
    mk(13, "k", 1, 'k', p + 20, "");
    mk(14, "k", 1, 'k', l + 300, "");
    mk(15, "k", 1, 'k', l - 1, "\x01\x02");
    mk(16, "k", 1, 'k', p, "a\xff");
    mk(17, "k", 1, 'k', p, "z");
    mk(18, "j", 1, 'j', l + 5, "");
    mk(19, "\xff", 1, '\xff', l + 1, "");
    for (int i = 0; i < NKEYS; i++)
        ord[i] = i;
    qsort(ord, NKEYS, sizeof ord[0], mk_cmp);
    static char sorted[NKEYS][2048];
    static size_t slen[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        memcpy(sorted[i], mkbuf[ord[i]], mklen[ord[i]]);
        slen[i] = mklen[ord[i]];
    }
    for (int i = 0; i < NKEYS; i++) {
        memcpy(mkbuf[i], sorted[i], slen[i]);
        mklen[i] = slen[i];
        mkeys[i] = mkbuf[i];
        if (i > 0) /* distinct */
            assert_true(mklen[i] != mklen[i - 1] ||
                        memcmp(mkeys[i], mkeys[i - 1], mklen[i]) != 0);
    }
}

static void check_range(struct mvcc_read *r, mvcc_rev rev, int lo, int hi)
{
    struct mvcc_range_result res = {0};
    /* [mkeys[lo], mkeys[hi]) or, hi == NKEYS, [mkeys[lo], "\0") */
    const char *end = hi < NKEYS ? mkeys[hi] : "\0";
    size_t el = hi < NKEYS ? mklen[hi] : 1;
    int64_t lim = (rev + lo) % 3;
    assert_int_equal(mvcc_range(r, mkeys[lo], mklen[lo], end, el, rev, lim,
                                0, &res),
                     0);
    int64_t want = 0;
    for (int i = lo; i < hi; i++) {
        const struct mkv *m = &model[rev][i];
        if (!m->live)
            continue;
        want++;
        if (lim > 0 && want > lim)
            continue;
        const struct mvcc_kv *kv = &res.kvs[want - 1];
        char buf[16];
        int n = snprintf(buf, sizeof buf, "%d", m->val);
        assert_int_equal(kv->key_len, mklen[i]);
        assert_memory_equal(kv->key, mkeys[i], mklen[i]);
        assert_int_equal(kv->value_len, (size_t)n);
        assert_memory_equal(kv->value, buf, (size_t)n);
        assert_int_equal(kv->create_rev, m->create);
        assert_int_equal(kv->mod_rev, m->mod);
        assert_int_equal(kv->version, m->ver);
    }
    assert_int_equal(res.count, want);
    assert_int_equal(res.more, lim > 0 && want > lim);
    mvcc_range_result_close(&res);
}

/* check_rev compares every range at rev with the model. */
static void check_rev(struct mvcc_read *r, mvcc_rev rev)
{
    for (int lo = 0; lo < NKEYS; lo++)
        for (int hi = lo; hi <= NKEYS; hi++)
            check_range(r, rev, lo, hi);
}

static void check_all(struct mvcc_store *s, mvcc_rev from)
{
    struct mvcc_read *r;
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    mvcc_rev cur = mvcc_read_rev(r);
    for (mvcc_rev rev = from; rev <= cur; rev++)
        check_rev(r, rev);
    mvcc_read_end(r);
}

/* check_some compares two random revisions >= the compact rev, and checks
 * that the one below it is refused. */
static void check_some(struct mvcc_store *s, mvcc_rev compacted)
{
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    mvcc_rev cur = mvcc_read_rev(r), lo = compacted > 1 ? compacted : 1;
    assert_int_equal(mvcc_read_compact_rev(r), compacted);
    check_rev(r, cur);
    check_rev(r, lo + rand() % (cur - lo + 1));
    if (compacted > 1)
        assert_int_equal(mvcc_range(r, "a", 1, "\0", 1, compacted - 1, 0, 0,
                                    &res),
                         ERR_COMPACTED);
    mvcc_read_end(r);
    mvcc_range_result_close(&res);
}

static int model_key(const uint8_t *u, size_t ul)
{
    for (int i = 0; i < NKEYS; i++)
        if (ul == mklen[i] && memcmp(u, mkeys[i], ul) == 0)
            return i;
    fail_msg("a key the model never wrote");
    return -1;
}

/* check_physical checks the buckets after a finished compaction at c:
 * each key keeps exactly its version visible at c when that one is live,
 * its tombstone when it was deleted at c, nothing <= c otherwise, and the `rev` log lists exactly the
 * versions `kv` holds. */
static void check_physical(struct fixture *f, mvcc_rev c)
{
    backend_bucket kvb, kvlb, revb;
    struct backend_txn *t;
    struct backend_cursor *cur;
    struct backend_val k, v;
    int old[NKEYS] = {0}, tombs[NKEYS] = {0};
    size_t n_kv = 0, n_rev = 0;
    int rc;
    assert_int_equal(backend_bucket_open(f->be, "kv", BACKEND_BUCKET_REVKEY,
                                         &kvb),
                     0);
    assert_int_equal(backend_bucket_open(f->be, "kvl", BACKEND_BUCKET_REVKEY,
                                         &kvlb),
                     0);
    assert_int_equal(backend_bucket_open(f->be, "rev", 0, &revb), 0);
    assert_int_equal(backend_read_begin(f->be, &t), 0);
    for (int b = 0; b < 2; b++) {
    assert_int_equal(backend_cursor_open(t, b ? kvlb : kvb, &cur), 0);
    for (rc = backend_cursor_first(cur, &k, &v); rc == 0;
         rc = backend_cursor_next(cur, &k, &v), n_kv++) {
        struct mvcc_kv kv;
        bool tomb;
        assert_int_equal(mvcc_kv_decode(k.data, k.len, v.data, v.len, &kv,
                                        &tomb),
                         0);
        if (kv.mod_rev > c)
            continue;
        int i = model_key(kv.key, kv.key_len);
        if (tomb) { /* kept only when deleted at c itself (#18089) */
            assert_int_equal(kv.mod_rev, c);
            assert_false(model[c][i].live);
            assert_int_equal(tombs[i]++, 0);
            continue;
        }
        assert_int_equal(kv.mod_rev, model[c][i].mod);
        old[i]++;
        assert_int_equal(b, mklen[i] > backend_key_max(f->be) - 17);
    }
    assert_int_equal(rc, ERR_NOTFOUND);
    backend_cursor_close(cur);
    }
    for (int i = 0; i < NKEYS; i++) {
        assert_int_equal(old[i], model[c][i].live);
        /* live before c, deleted at c: its tombstone is there (a key put
         * and deleted inside c's txn has one too) */
        if (c > 1 && model[c - 1][i].live && !model[c][i].live)
            assert_int_equal(tombs[i], 1);
    }
    assert_int_equal(backend_cursor_open(t, revb, &cur), 0);
    for (rc = backend_cursor_first(cur, &k, &v); rc == 0;
         rc = backend_cursor_next(cur, &k, &v))
        n_rev++;
    assert_int_equal(rc, ERR_NOTFOUND);
    /* the newest versions' index entries may be in memory still */
    assert_int_equal(n_rev, n_kv + mvcc_overlay_entries(f->s));
    backend_cursor_close(cur);
    backend_read_end(t);
}

/* random_delete deletes a random range (or, with all, every key with a
 * from-key delete starting at "\0") from store and model. */
static void random_delete(struct mvcc_txn *t, struct mkv *next, bool all)
{
    int k = rand() % NKEYS, hi = k + rand() % (NKEYS - k + 1);
    int64_t n, want = 0;
    if (all)
        k = 0, hi = NKEYS;
    const char *end = hi < NKEYS ? mkeys[hi] : "\0";
    size_t el = hi > k ? (hi < NKEYS ? mklen[hi] : 1) : 0;
    for (int i = k; i < (hi > k ? hi : k + 1); i++) {
        want += next[i].live;
        memset(&next[i], 0, sizeof next[i]);
    }
    assert_int_equal(mvcc_txn_delete_range(t, all ? "\0" : mkeys[k],
                                           all ? 1 : mklen[k],
                                           hi > k ? end : NULL, el, &n, NULL),
                     0);
    assert_int_equal(n, want);
}

/* random_request applies one random request to store and model; a wipe
 * deletes every key, so that a compaction at its revision empties the
 * `kv` bucket. */
static void random_request(struct mvcc_batch *b, mvcc_rev *rev, bool wipe)
{
    struct mvcc_txn *t = mvcc_txn_begin(b);
    struct mkv *next = model[*rev + 1];
    memcpy(next, model[*rev], sizeof model[0]);
    int ops = wipe ? 1 : 1 + rand() % 3;
    for (int o = 0; o < ops; o++) {
        int k = rand() % NKEYS;
        if (wipe || rand() % 3 == 0) {
            random_delete(t, next, wipe || rand() % 8 == 0);
            continue;
        }
        char buf[16];
        int v = rand() % 1000, n = snprintf(buf, sizeof buf, "%d", v);
        assert_int_equal(mvcc_txn_put(t, mkeys[k], mklen[k], buf, (size_t)n,
                                      0, 0, NULL),
                         0);
        struct mkv *m = &next[k];
        m->create = m->live ? m->create : *rev + 1;
        m->ver = m->live ? m->ver + 1 : 1;
        m->live = 1, m->val = v, m->mod = *rev + 1;
    }
    mvcc_rev after = mvcc_txn_end(t);
    assert_true(after == *rev || after == *rev + 1);
    *rev = after;
}

/* The compaction schedule of the randomized run. */
struct mcompact {
    mvcc_rev scheduled; /* the compact rev (store's compact_rev) */
    bool pending;       /* steps remain (as compact_step last said) */
    bool finished;      /* a compaction finished in this batch */
};

/* random_compact schedules a compaction at a random past revision (often
 * the current one, right after deletions) and, for a "physical" one, runs
 * it to completion inside the batch in small or large steps, as the server
 * does; otherwise it is left to compact_more_steps. */
static void random_compact(struct mvcc_batch *b, mvcc_rev rev,
                           struct mcompact *mc)
{
    if (rev <= mc->scheduled)
        return;
    mvcc_rev c = rand() % 2 ? rev
                                 : mc->scheduled + 1 +
                                       rand() % (rev - mc->scheduled);
    assert_int_equal(mvcc_compact(b, mc->scheduled), ERR_COMPACTED);
    assert_int_equal(mvcc_compact(b, c), 0);
    mc->scheduled = c;
    mc->pending = true;
    mc->finished = false; /* an earlier one may have finished this batch */
    if (rand() % 2)
        return;
    size_t step = rand() % 2 ? 10000 : 1 + rand() % 4;
    while (mc->pending)
        assert_int_equal(mvcc_compact_step(b, step, &mc->pending), 0);
    mc->finished = true;
}

/* compact_more_steps is the server's per-batch step of a pending
 * compaction: a few revisions of the log, then the batch goes on. */
static void compact_more_steps(struct mvcc_batch *b, struct mcompact *mc)
{
    if (!mc->pending)
        return;
    assert_int_equal(mvcc_compact_step(b, 1 + rand() % 3, &mc->pending), 0);
    mc->finished = !mc->pending;
}

extern size_t mvcc__keep_page;

/* check_hash_pages: the hash (etcd's keep(R) below the compact revision,
 * read from the key index in pages) is the same with pages of 1-3 keys
 * as with the default's single page. */
static uint32_t hash_etcd_now(struct fixture *f)
{
    struct mvcc_read *r;
    uint32_t h;
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_hash_kv_etcd(r, 0, &h, NULL), 0);
    mvcc_read_end(r);
    return h;
}

static void check_hash_pages(struct fixture *f)
{
    uint32_t whole = hash_etcd_now(f);
    size_t saved = mvcc__keep_page;
    mvcc__keep_page = 1 + (size_t)(rand() % 3);
    uint32_t paged = hash_etcd_now(f);
    mvcc__keep_page = saved;
    assert_int_equal(paged, whole);
}

/* model_live: the model's live keys at rev (mvcc_keys's count). */
static int64_t model_live(mvcc_rev rev)
{
    int64_t n = 0;
    for (int i = 0; i < NKEYS; i++)
        n += model[rev][i].live != 0;
    return n;
}

static unsigned model_seed(void)
{
    const char *env = getenv("CETCD_TEST_SEED");
    return env != NULL ? (unsigned)strtoul(env, NULL, 10)
                       : (unsigned)time(NULL);
}

/* random_batch runs one apply batch: requests, compaction steps of a
 * pending compaction before or after them, maybe a new compaction. */
static void random_batch(struct fixture *f, mvcc_rev *rev,
                         struct mcompact *mc)
{
    struct mvcc_batch *b;
    bool steps_first = rand() % 2;
    mc->finished = false;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    if (steps_first)
        compact_more_steps(b, mc);
    for (int i = 1 + rand() % 5; i > 0; i--)
        random_request(b, rev, i == 1 && rand() % 10 == 0);
    if (!steps_first)
        compact_more_steps(b, mc);
    if (rand() % 6 == 0)
        random_compact(b, *rev, mc);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(mvcc_compact_pending(f->s), mc->pending);
    assert_int_equal(mvcc_compact_rev(f->s), mc->scheduled);
}

static void test_random_model(void **state)
{
    struct fixture *f = *state;
    unsigned seed = model_seed();
    srand(seed);
    /* index collisions: none, or every group's long keys under 2 or 1
     * index (reopened: the store is written with one mask only) */
    static const uint64_t masks[3] = {UINT64_MAX, 1, 0};
    uint64_t mask = masks[rand() % 3];
    /* the overlay folded at every put, every few puts, or at its bound */
    static const size_t folds[4] = {0, 1, 5, 60};
    static const size_t slices[3] = {1, 3, 40};
    int fi = rand() % 5, si = rand() % 4;
    mvcc__ovl_max = fi < 4 ? folds[fi] : ovl_max_default;
    mvcc__ovl_slice = si < 3 ? slices[si] : ovl_slice_default;
    printf("test_random_model seed %u (CETCD_TEST_SEED replays it), hash "
           "mask %llx, overlay bound %zu, slice %zu\n", seed,
           (unsigned long long)mask, mvcc__ovl_max, mvcc__ovl_slice);
    fx_close(f);
    mvcc__hash_mask = mask;
    fx_open(f);
    model_keys(backend_key_max(f->be) - 17);
    memset(model, 0, sizeof model);
    mvcc_rev rev = 1;
    struct mcompact mc = {0};
    while (rev < MAXREV - 10) {
        random_batch(f, &rev, &mc);
        assert_int_equal(mvcc_keys(f->s), model_live(rev));
        if (mc.finished) {
            assert_int_equal(mvcc_compact_finished_rev(f->s), mc.scheduled);
            check_physical(f, mc.scheduled);
        }
        check_some(f->s, mc.scheduled);
        if (rand() % 10 == 0)
            check_hash_pages(f);
        if (rand() % 50 == 0) { /* a restart, maybe mid-compaction */
            fx_close(f);
            fx_open(f); /* the count read back from the state, not made */
            assert_int_equal(mvcc_keys(f->s), model_live(rev));
        }
    }
    assert_int_equal(mvcc_current_rev(f->s), rev);
    check_all(f->s, mc.scheduled > 1 ? mc.scheduled : 1);
    /* a last compaction half-way to the end, in small steps inside one
     * batch; everything >= c unchanged, across a reopen */
    mvcc_rev c = mc.scheduled + (rev - mc.scheduled + 1) / 2;
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    while (mc.pending) /* finish the running one first */
        assert_int_equal(mvcc_compact_step(b, 7, &mc.pending), 0);
    /* (the run may have ended on a compaction at the current rev) */
    assert_int_equal(mvcc_compact(b, c), c > mc.scheduled ? 0 : ERR_COMPACTED);
    do
        assert_int_equal(mvcc_compact_step(b, 7, &mc.pending), 0);
    while (mc.pending);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    fx_close(f);
    fx_open(f);
    check_all(f->s, c);
    check_physical(f, c);
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_range(r, "a", 1, "\0", 1, c - 1, 0, 0, &res),
                     ERR_COMPACTED);
    mvcc_read_end(r);
    mvcc_range_result_close(&res);
    mvcc__hash_mask = UINT64_MAX;
}

static int count_any(void *arg, const uint8_t *key, size_t key_len)
{
    (void)key;
    (void)key_len;
    (*(int *)arg)++;
    return 0;
}

/* mvcc_batch_import: versions kept as given (create revision and version
 * not recounted: a compaction removed their predecessors), tombstones,
 * sub revisions, the lease index following each key's newest version,
 * out-of-order input refused, a compaction at a past revision keeping what
 * the source kept, and the state after a reopen. */
static void test_import_versions(void **state)
{
    struct fixture *f = *state;
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_kv a7 = {(const uint8_t *)"a", 1, (const uint8_t *)"x", 1,
                         3, 7, 4, 9};
    struct mvcc_kv b7 = {(const uint8_t *)"b", 1, (const uint8_t *)"y", 1,
                         7, 7, 1, 0};
    struct mvcc_kv a9 = {(const uint8_t *)"a", 1, NULL, 0, 0, 9, 0, 0};
    struct mvcc_kv c10 = {(const uint8_t *)"c", 1, (const uint8_t *)"z", 1,
                          10, 10, 1, 9};
    assert_int_equal(mvcc_batch_import(b, &a7, 0, false), 0);
    assert_int_equal(mvcc_batch_import(b, &b7, 1, false), 0);
    /* (7, 0) again, and a revision below: refused, nothing written */
    assert_int_equal(mvcc_batch_import(b, &b7, 0, false), ERR_INVAL);
    struct mvcc_kv old = a7;
    old.mod_rev = 6;
    assert_int_equal(mvcc_batch_import(b, &old, 0, false), ERR_INVAL);
    assert_int_equal(mvcc_batch_import(b, &a9, 0, true), 0);
    assert_int_equal(mvcc_batch_import(b, &c10, 0, false), 0);
    mvcc_batch_import_rev(b, 12);
    assert_int_equal(mvcc_compact(b, 8), 0);
    bool more = true;
    while (more)
        assert_int_equal(mvcc_compact_step(b, 100, &more), 0);
    assert_int_equal(mvcc_batch_commit(b, 42), 0);
    fx_close(f);
    fx_open(f);
    assert_int_equal(mvcc_current_rev(f->s), 12);
    assert_int_equal(mvcc_compact_rev(f->s), 8);
    assert_int_equal(mvcc_consistent_index(f->s), 42);
    assert_int_equal(mvcc_keys(f->s), 2); /* b and c; a deleted */
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_read_begin(f->s, &r), 0);
    assert_int_equal(mvcc_range(r, "a", 1, "\xff", 1, 8, 0, 0, &res), 0);
    assert_int_equal(res.n_kvs, 2); /* a and b as the source had them */
    assert_int_equal(res.kvs[0].create_rev, 3);
    assert_int_equal(res.kvs[0].mod_rev, 7);
    assert_int_equal(res.kvs[0].version, 4);
    assert_int_equal(res.kvs[0].lease, 9);
    assert_int_equal(res.kvs[1].create_rev, 7);
    assert_int_equal(mvcc_range(r, "a", 1, "\xff", 1, 0, 0, 0, &res), 0);
    assert_int_equal(res.n_kvs, 2); /* a deleted at 9: b and c */
    assert_memory_equal(res.kvs[1].key, "c", 1);
    assert_int_equal(mvcc_range(r, "a", 1, NULL, 0, 7, 0, 0, &res),
                     ERR_COMPACTED);
    int n = 0; /* lease 9: only c (a's newest version is a deletion) */
    assert_int_equal(mvcc_lease_keys(r, 9, count_any, &n), 0);
    assert_int_equal(n, 1);
    mvcc_range_result_close(&res);
    mvcc_read_end(r);
}

/* The live key count is kept in the state record by every commit and read
 * back at open, not recounted; a state record without it (52 bytes, the
 * layout before the count) is counted at open when count_keys asks, else
 * reads as -1, and the next commit stores the count. */
/* all_keys counts the live keys of a read at its own revision. */
static int64_t all_keys(struct mvcc_read *r)
{
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_range(r, "\0", 1, "\0", 1, 0, 0,
                                MVCC_RANGE_COUNT_ONLY, &res),
                     0);
    int64_t n = res.count;
    mvcc_range_result_close(&res);
    return n;
}

/* The key index's newest entries live in memory until fold rounds file
 * them into LMDB, a slice per batch (mvcc_ovl.c): reads begun before and
 * during a round keep their generation and see the entries a slice filed
 * once, an aborted batch leaves none of its entries nor moves the round,
 * a reopen mid-round resumes it, a compaction files everything first. */
static void test_overlay_generations(void **state)
{
    struct fixture *f = *state;
    struct mvcc_kv kv;
    char val[16];
    struct mvcc_range_result res = {0};
    mvcc__ovl_max = 3;
    mvcc__ovl_slice = 1;
    put(f->s, "k1", "1", 0); /* rev 2 */
    put(f->s, "k2", "2", 0); /* rev 3 */
    assert_int_equal(mvcc_overlay_entries(f->s), 2);
    struct mvcc_read *old, *mid;
    assert_int_equal(mvcc_read_begin(f->s, &old), 0); /* rev 3 */
    put(f->s, "k3", "3", 0); /* rev 4; a round to rev 3 starts: k1 filed */
    assert_int_equal(mvcc_overlay_entries(f->s), 2);
    assert_int_equal(mvcc_read_begin(f->s, &mid), 0); /* rev 4 */
    assert_int_equal(all_keys(mid), 3); /* k1 in both: once */
    /* an aborted batch: its entry goes, the round does not move */
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "k9", 2, "x", 1, 0, 0, NULL), 0);
    mvcc_txn_end(t);
    mvcc_batch_abort(b);
    assert_int_equal(mvcc_overlay_entries(f->s), 2);
    /* a reopen mid-round: k1 is not read back, the round resumes */
    mvcc_read_end(mid);
    mvcc_read_end(old);
    fx_close(f);
    fx_open(f);
    assert_int_equal(mvcc_overlay_entries(f->s), 2);
    assert_int_equal(count_range(f->s, "k", 1, "l", 1, 0, 0, NULL), 3);
    assert_int_equal(mvcc_read_begin(f->s, &old), 0); /* rev 4 */
    put(f->s, "k4", "4", 0); /* rev 5: k2 filed */
    assert_int_equal(mvcc_overlay_entries(f->s), 2);
    assert_int_equal(mvcc_read_begin(f->s, &mid), 0); /* rev 5 */
    put(f->s, "k1", "5", 0); /* rev 6: the rest is newer: round done */
    assert_int_equal(mvcc_overlay_entries(f->s), 3); /* k3, k4, k1@6 */
    put(f->s, "k5", "6", 0); /* rev 7: the next round (to 6) files k1@6,
                                  k3, k4... one slice: k1@6 */
    /* the reads keep their generation and snapshot */
    assert_int_equal(all_keys(old), 3);
    assert_int_equal(mvcc_range(old, "k1", 2, NULL, 0, 0, 0, 0, &res), 0);
    assert_int_equal(res.n_kvs, 1);
    assert_int_equal(res.kvs[0].mod_rev, 2);
    mvcc_range_result_close(&res);
    assert_int_equal(all_keys(mid), 4);
    mvcc_read_end(old); /* the old generations go with them */
    mvcc_read_end(mid);
    assert_int_equal(count_range(f->s, "k", 1, "l", 1, 0, 0, NULL), 5);
    assert_int_equal(get(f->s, "k1", 0, &kv, val, sizeof val), 0);
    assert_int_equal(kv.mod_rev, 6);
    assert_int_equal(kv.version, 2);
    assert_int_equal(kv.create_rev, 2); /* from the filed entry */
    assert_int_equal(get(f->s, "k1", 5, &kv, val, sizeof val), 0);
    assert_int_equal(kv.mod_rev, 2);
    /* the rest of the round, across another reopen */
    fx_close(f);
    fx_open(f);
    for (int i = 0; i < 6; i++)
        put(f->s, "k2", "7", 0); /* revs 8-13 */
    assert_int_equal(get(f->s, "k2", 0, &kv, val, sizeof val), 0);
    assert_int_equal(kv.version, 7);
    assert_int_equal(get(f->s, "k3", 0, &kv, val, sizeof val), 0);
    assert_int_equal(kv.mod_rev, 4);
    /* a compaction files everything first */
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, 12), 0);
    bool more;
    assert_int_equal(mvcc_compact_step(b, 100, &more), 0);
    assert_false(more);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(mvcc_overlay_entries(f->s), 0);
    assert_int_equal(get(f->s, "k2", 11, &kv, val, sizeof val),
                     ERR_COMPACTED);
    assert_int_equal(get(f->s, "k2", 12, &kv, val, sizeof val), 0);
    assert_int_equal(kv.version, 6);
    assert_int_equal(count_range(f->s, "k", 1, "l", 1, 0, 0, NULL), 5);
    fx_close(f);
    fx_open(f);
    assert_int_equal(mvcc_overlay_entries(f->s), 0);
    assert_int_equal(count_range(f->s, "k", 1, "l", 1, 0, 0, NULL), 5);
}

/* A store written before the overlay (layout 2: a 60-byte state, every
 * entry in LMDB) opens, reads, and is marked layout 3 by its first
 * commit. */
static void test_overlay_from_layout2(void **state)
{
    struct fixture *f = *state;
    mvcc__ovl_max = 0;
    put(f->s, "a", "1", 0);
    put(f->s, "b", "1", 0);
    put(f->s, "a", "2", 0);
    fx_close(f);
    assert_int_equal(backend_open(f->dir, NULL, &f->be), 0);
    backend_bucket meta;
    struct backend_txn *t;
    struct backend_val v;
    uint8_t rec[60], two = 2;
    assert_int_equal(backend_bucket_open(f->be, "meta", 0, &meta), 0);
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    assert_int_equal(backend_get(t, meta, "mvcc_state", 10, &v), 0);
    assert_int_equal(v.len, 68);
    memcpy(rec, v.data, 56);
    uint32_t crc = crc32c_extend(0, rec, 56);
    for (int i = 0; i < 4; i++)
        rec[56 + i] = (uint8_t)(crc >> (8 * i));
    assert_int_equal(backend_put(t, meta, "mvcc_state", 10, rec, 60), 0);
    assert_int_equal(backend_put(t, meta, "mvcc_format", 11, &two, 1), 0);
    assert_int_equal(backend_write_commit(t), 0);
    mvcc__ovl_max = ovl_max_default;
    assert_int_equal(mvcc_store_open(f->be, NULL, &f->s), 0);
    assert_int_equal(mvcc_overlay_entries(f->s), 0);
    assert_int_equal(mvcc_keys(f->s), 2);
    struct mvcc_kv kv;
    char val[8];
    assert_int_equal(get(f->s, "a", 0, &kv, val, sizeof val), 0);
    assert_int_equal(kv.version, 2);
    put(f->s, "c", "1", 0);
    assert_int_equal(mvcc_overlay_entries(f->s), 1);
    fx_close(f);
    fx_open(f);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 3);
    assert_int_equal(mvcc_overlay_entries(f->s), 1);
    struct backend_txn *rt;
    assert_int_equal(backend_bucket_open(f->be, "meta", 0, &meta), 0);
    assert_int_equal(backend_read_begin(f->be, &rt), 0);
    assert_int_equal(backend_get(rt, meta, "mvcc_format", 11, &v), 0);
    assert_int_equal(((const uint8_t *)v.data)[0], 3);
    backend_read_end(rt);
}

/* A defragmentation's switch-over opens the copy with overlay_from = the
 * store it replaces: the entries in memory are shared when the copy is at
 * the same revision and fold_rev, and read back from the log when not. */
static void test_overlay_shared_by_a_copy(void **state)
{
    struct fixture *f = *state;
    struct mvcc_kv kv;
    char val[8];
    put(f->s, "a", "1", 0);
    put(f->s, "b", "2", 0);
    struct mvcc_store *copy;
    struct mvcc_options o = {.overlay_from = f->s};
    assert_int_equal(mvcc_store_open(f->be, &o, &copy), 0);
    assert_int_equal(mvcc_overlay_entries(copy), 2);
    put(copy, "c", "3", 0); /* the shared entries, written by the copy */
    assert_int_equal(mvcc_overlay_entries(copy), 3);
    assert_int_equal(mvcc_overlay_entries(f->s), 3); /* the same list */
    mvcc_store_close(f->s); /* the replaced store goes; they stay */
    f->s = copy;
    assert_int_equal(get(f->s, "a", 0, &kv, val, sizeof val), 0);
    assert_string_equal(val, "1");
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 3);
    /* another revision: rebuilt from the log instead (the same entries) */
    struct mvcc_store *stale;
    assert_int_equal(mvcc_store_open(f->be, NULL, &stale), 0);
    put(f->s, "d", "4", 0);
    o.overlay_from = stale; /* one revision behind the store */
    assert_int_equal(mvcc_store_open(f->be, &o, &copy), 0);
    assert_int_equal(mvcc_overlay_entries(copy), 4);
    mvcc_store_close(f->s);
    f->s = copy;
    put(f->s, "e", "5", 0);
    assert_int_equal(mvcc_overlay_entries(f->s), 5);
    assert_int_equal(mvcc_overlay_entries(stale), 3); /* its own list */
    mvcc_store_close(stale);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 5);
}

/* Readers on other threads while the writer runs a fold round every few
 * puts, two entries a batch: each
 * read sees exactly the keys its revision holds (one new key per
 * revision), whichever generation and snapshot it was given. */
struct race {
    struct mvcc_store *s;
    atomic_bool stop;
    long reads, bad;
};

static void *race_reader(void *arg)
{
    struct race *rc = arg;
    while (!atomic_load(&rc->stop)) {
        struct mvcc_read *r;
        if (mvcc_read_begin(rc->s, &r) != 0) {
            rc->bad++;
            break;
        }
        if (all_keys(r) != mvcc_read_rev(r) - 1)
            rc->bad++;
        rc->reads++;
        mvcc_read_end(r);
    }
    return NULL;
}

static void test_overlay_concurrent_reads(void **state)
{
    struct fixture *f = *state;
    mvcc__ovl_max = 7;
    mvcc__ovl_slice = 2;
    struct race rc[2] = {{.s = f->s}, {.s = f->s}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_reader, &rc[i]),
                         0);
    char key[16];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "k%05d", (i * 7919) % 3000);
        put(f->s, key, "v", 0);
    }
    for (int i = 0; i < 2; i++) {
        atomic_store(&rc[i].stop, true);
        pthread_join(th[i], NULL);
        assert_int_equal(rc[i].bad, 0);
        assert_true(rc[i].reads > 0);
    }
    assert_true(mvcc_overlay_entries(f->s) < 7 + 4);
    assert_int_equal(count_range(f->s, "\0", 1, "\0", 1, 0, 0, NULL), 3000);
}

static void test_keys_count_kept(void **state)
{
    struct fixture *f = *state;
    /* (every entry in LMDB, as a store written before the overlay) */
    mvcc__ovl_max = 0;
    assert_int_equal(mvcc_keys(f->s), 0); /* an empty store: 0, known */
    put(f->s, "a", "1", 0);
    put(f->s, "b", "1", 0);
    put(f->s, "b", "2", 0); /* not a new key */
    put(f->s, "c", "1", 0);
    assert_int_equal(del(f->s, "c", NULL, 0), 1);
    assert_int_equal(del(f->s, "c", NULL, 0), 0); /* deleted already */
    assert_int_equal(mvcc_keys(f->s), 2);
    fx_close(f);
    fx_open(f); /* without count_keys: read from the state */
    assert_int_equal(mvcc_keys(f->s), 2);
    /* The state record as a store before the count wrote it: the first
     * 48 bytes, then their CRC32C. */
    fx_close(f);
    assert_int_equal(backend_open(f->dir, NULL, &f->be), 0);
    backend_bucket meta;
    struct backend_txn *t;
    struct backend_val v;
    uint8_t rec[52];
    assert_int_equal(backend_bucket_open(f->be, "meta", 0, &meta), 0);
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    assert_int_equal(backend_get(t, meta, "mvcc_state", 10, &v), 0);
    assert_int_equal(v.len, 68);
    memcpy(rec, v.data, 48);
    uint32_t crc = crc32c_extend(0, rec, 48);
    for (int i = 0; i < 4; i++)
        rec[48 + i] = (uint8_t)(crc >> (8 * i));
    assert_int_equal(backend_put(t, meta, "mvcc_state", 10, rec, 52), 0);
    assert_int_equal(backend_write_commit(t), 0);
    assert_int_equal(mvcc_store_open(f->be, NULL, &f->s), 0);
    assert_int_equal(mvcc_keys(f->s), -1); /* not counted, not known */
    assert_int_equal(mvcc_current_rev(f->s), 6); /* the rest as written */
    mvcc_store_close(f->s);
    assert_int_equal(mvcc_store_open(f->be,
                                     &(struct mvcc_options){.count_keys = true},
                                     &f->s),
                     0);
    assert_int_equal(mvcc_keys(f->s), 2); /* counted */
    put(f->s, "d", "1", 0);               /* ...and stored by a commit */
    assert_int_equal(mvcc_keys(f->s), 3);
    fx_close(f);
    fx_open(f);
    assert_int_equal(mvcc_keys(f->s), 3);
}

/* --- the layout: index entries, records in the log (mvcc_int.h) ------ */

/* log_edit rewrites the `rev` entry of (main, sub) through the backend:
 * at byte off (counted from the end when negative) to byte c, or deletes
 * it when off is 0. */
static void log_edit(struct fixture *f, mvcc_rev main, int64_t sub, long off,
                     uint8_t c)
{
    backend_bucket rb;
    struct backend_txn *t;
    struct backend_val v;
    uint8_t rk[16], buf[256];
    for (int i = 0; i < 8; i++) {
        rk[i] = (uint8_t)((uint64_t)main >> (56 - 8 * i));
        rk[8 + i] = (uint8_t)((uint64_t)sub >> (56 - 8 * i));
    }
    assert_int_equal(backend_bucket_open(f->be, "rev", 0, &rb), 0);
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    assert_int_equal(backend_get(t, rb, rk, sizeof rk, &v), 0);
    assert_true(v.len <= sizeof buf);
    size_t n = v.len;
    memcpy(buf, v.data, n);
    if (off == 0) {
        assert_int_equal(backend_del(t, rb, rk, sizeof rk), 0);
    } else {
        buf[off > 0 ? (size_t)off : n - (size_t)-off] = c;
        assert_int_equal(backend_put(t, rb, rk, sizeof rk, buf, n), 0);
    }
    assert_int_equal(backend_write_commit(t), 0);
}

static uint32_t kv_hash_now(struct mvcc_store *s)
{
    struct mvcc_read *r;
    uint32_t h;
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    assert_int_equal(mvcc_hash_kv(r, 0, &h, NULL), 0);
    mvcc_read_end(r);
    return h;
}

static int count_keys(struct mvcc_store *s, const char *k, unsigned flags)
{
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    assert_int_equal(mvcc_read_begin(s, &r), 0);
    int rc = mvcc_range(r, k, strlen(k), NULL, 0, 0, 0, flags, &res);
    int n = rc == 0 ? (int)res.count : rc;
    mvcc_read_end(r);
    mvcc_range_result_close(&res);
    return n;
}

/* A value is read from the log, checked against the index entry that led
 * there; the log is part of the hash. */
static void test_values_in_the_log(void **state)
{
    struct fixture *f = *state;
    struct mvcc_kv kv;
    char val[32];
    put(f->s, "k", "hello", 0); /* rev 2 */
    put(f->s, "k", "world", 0); /* rev 3 */
    uint32_t h = kv_hash_now(f->s);
    log_edit(f, 3, 0, -1, 'D');
    assert_int_equal(get(f->s, "k", 0, &kv, val, sizeof val), 0);
    assert_string_equal(val, "worlD");
    assert_int_not_equal(kv_hash_now(f->s), h);
    log_edit(f, 3, 0, -1, 'd');
    assert_int_equal(kv_hash_now(f->s), h);
    /* the log's record must be the index entry's: its key ... */
    log_edit(f, 3, 0, 29, 'x');
    assert_int_equal(get(f->s, "k", 0, &kv, val, sizeof val), ERR_CORRUPT);
    assert_int_equal(count_keys(f->s, "k", MVCC_RANGE_KEYS_ONLY), 1);
    log_edit(f, 3, 0, 29, 'k');
    /* ... its header (version, at [9, 17)) ... */
    log_edit(f, 3, 0, 9, 7);
    assert_int_equal(get(f->s, "k", 0, &kv, val, sizeof val), ERR_CORRUPT);
    log_edit(f, 3, 0, 9, 2);
    assert_int_equal(get(f->s, "k", 0, &kv, val, sizeof val), 0);
    assert_string_equal(val, "world");
    /* ... and it must be there */
    log_edit(f, 2, 0, 0, 0);
    assert_int_equal(get(f->s, "k", 2, &kv, val, sizeof val), ERR_CORRUPT);
    assert_int_equal(count_keys(f->s, "k", MVCC_RANGE_COUNT_ONLY), 1);
}

#define MVCC_LAYOUT_FOR_TEST 3 /* mvcc_int.h MVCC_LAYOUT */

/* A store with state but without this layout's mark (cetcd before the
 * log held the values, or another layout) is refused, not misread. */
static void test_layout_refused(void **state)
{
    struct fixture *f = *state;
    backend_bucket mb;
    struct backend_txn *t;
    struct backend_val v;
    static const char key[] = "mvcc_format";
    put(f->s, "a", "1", 0);
    assert_int_equal(backend_bucket_open(f->be, "meta", 0, &mb), 0);
    assert_int_equal(backend_read_begin(f->be, &t), 0);
    assert_int_equal(backend_get(t, mb, key, sizeof key - 1, &v), 0);
    assert_int_equal(v.len, 1);
    uint8_t layout = ((const uint8_t *)v.data)[0];
    assert_int_equal(layout, MVCC_LAYOUT_FOR_TEST);
    backend_read_end(t);
    mvcc_store_close(f->s);
    uint8_t marks[3] = {1, MVCC_LAYOUT_FOR_TEST, 0}; /* 1; 3 as 2 bytes */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(backend_write_begin(f->be, &t), 0);
        if (i < 2) /* another layout; this one's byte, but two bytes */
            assert_int_equal(backend_put(t, mb, key, sizeof key - 1,
                                         &marks[i], 1 + (size_t)i), 0);
        else
            assert_int_equal(backend_del(t, mb, key, sizeof key - 1), 0);
        assert_int_equal(backend_write_commit(t), 0);
        assert_int_equal(mvcc_store_open(f->be, NULL, &f->s),
                         ERR_UNSUPPORTED);
    }
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    assert_int_equal(backend_put(t, mb, key, sizeof key - 1, &layout, 1), 0);
    assert_int_equal(backend_write_commit(t), 0);
    assert_int_equal(mvcc_store_open(f->be, NULL, &f->s), 0);
    assert_int_equal(count_keys(f->s, "a", 0), 1);
}

struct prevs {
    int n;
    mvcc_rev mod[8];     /* prev_kv.mod_rev */
    bool no_value[8];    /* prev_no_value */
    char val[8][8];      /* prev_kv's value ("-" when NULL) */
};

static void observe_prev(void *arg, const struct mvcc_event *ev, size_t n,
                         mvcc_rev rev)
{
    struct prevs *p = arg;
    (void)rev;
    for (size_t i = 0; i < n && p->n < 8; i++, p->n++) {
        p->mod[p->n] = ev[i].prev_kv.mod_rev;
        p->no_value[p->n] = ev[i].prev_no_value;
        const struct mvcc_kv *kv = &ev[i].prev_kv;
        snprintf(p->val[p->n], sizeof p->val[p->n], "%.*s",
                 kv->value ? (int)kv->value_len : 1,
                 kv->value ? (const char *)kv->value : "-");
    }
}

/* Events carry the previous value only while asked to (a read of the log
 * per write); a put's prev_out always has it. */
static void test_prev_values(void **state)
{
    struct fixture *f = *state;
    struct prevs p = {0};
    struct mvcc_kv prev;
    struct mvcc_batch *b;
    put(f->s, "a", "1", 0); /* rev 2 */
    mvcc_store_set_observer(f->s, observe_prev, &p);
    put(f->s, "a", "2", 0); /* rev 3: no value */
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b); /* rev 4 */
    assert_int_equal(mvcc_txn_put(t, "a", 1, "3", 1, 0, 0, &prev), 0);
    assert_int_equal(prev.mod_rev, 3);
    assert_memory_equal(prev.value, "2", 1);
    mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    mvcc_store_set_prev_values(f->s, true);
    put(f->s, "a", "4", 0); /* rev 5: with its value */
    del(f->s, "a", NULL, 0); /* rev 6 */
    put(f->s, "b", "5", 0); /* rev 7: no previous version */
    put(f->s, "b", "6", 0); /* rev 8 */
    mvcc_store_set_prev_values(f->s, false);
    del(f->s, "b", NULL, 0); /* rev 9 */
    mvcc_store_set_observer(f->s, NULL, NULL);
    assert_int_equal(p.n, 7);
    mvcc_rev mods[] = {2, 3, 4, 5, 0, 7, 8};
    bool nv[] = {true, true, false, false, false, false, true};
    const char *vals[] = {"-", "-", "3", "4", "-", "5", "-"};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(p.mod[i], mods[i]);
        assert_int_equal(p.no_value[i], nv[i]);
        assert_string_equal(p.val[i], vals[i]);
    }
}

/* Mounts a 64 MiB tmpfs at <f->dir>/small (into mnt; teardown unmounts
 * it) and opens a store in it; skips the test where mount is not
 * permitted. */
static void open_on_tmpfs(struct fixture *f, char *mnt, size_t cap,
                          struct backend **be, struct mvcc_store **s)
{
    char db[160];
    snprintf(mnt, cap, "%s/small", f->dir);
    assert_int_equal(mkdir(mnt, 0700), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64m") != 0) {
        fprintf(stderr, "mount tmpfs: %s: skipped\n", strerror(errno));
        skip();
    }
    snprintf(db, sizeof db, "%s/db", mnt);
    struct backend_options o = {.no_fsync = true};
    assert_int_equal(backend_open(db, &o, be), 0);
    assert_int_equal(mvcc_store_open(*be, NULL, s), 0);
}

/* Puts n random keys (rnd: the generator's state) with values of vlen
 * bytes, `per` to a batch, until n or the disk is low; returns how many
 * went in and leaves the last key's revision in *last. */
static size_t put_random(struct mvcc_store *s, struct backend *be,
                         uint64_t *rnd, size_t n, size_t vlen, size_t per,
                         mvcc_rev *last)
{
    static char val[4096];
    memset(val, 'v', sizeof val);
    assert_true(vlen <= sizeof val);
    size_t done = 0;
    while (done < n && !backend_space_low(be)) {
        struct mvcc_batch *b;
        assert_int_equal(mvcc_batch_begin(s, &b), 0);
        for (size_t i = 0; i < per && done < n; i++, done++) {
            *rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
            char k[24];
            snprintf(k, sizeof k, "k%016llx", (unsigned long long)*rnd);
            struct mvcc_txn *t = mvcc_txn_begin(b);
            assert_int_equal(
                mvcc_txn_put(t, k, strlen(k), val, vlen, 0, 0, NULL), 0);
            *last = mvcc_txn_end(t);
        }
        assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    }
    return done;
}

/* A compaction on a nearly full disk (a 64 MiB tmpfs, mounted here;
 * skipped where mount is not permitted): the versions it drops must be
 * in `kv` first, and filing the whole overlay in the compaction's batch
 * (before) copied up to a leaf per entry in one txn, more pages than the
 * low disk had: the batch was refused, and the member's apply stalled
 * until space was freed.  Now the fold goes a small slice per compaction
 * step, each step's copies freeing the last step's.  Method: 200 000
 * random keys (folded as usual), then, with the overlay's bound lifted,
 * 2 KiB puts of random keys until the backend says the disk is low
 * (thousands of entries over thousands of leaves), then compact at the
 * last revision: every step commits, the compaction finishes, every key
 * reads back after a reopen. */
static void test_compact_on_full_disk(void **state)
{
    struct fixture *f = *state;
    char mnt[128];
    struct backend *be;
    struct mvcc_store *s;
    open_on_tmpfs(f, mnt, sizeof mnt, &be, &s);
    uint64_t rnd = 42;
    mvcc_rev last = 0;
    size_t first = put_random(s, be, &rnd, 200000, 1, 500, &last);
    assert_int_equal(first, 200000);
    mvcc__ovl_max = (size_t)1 << 30;
    mvcc__ovl_max_bytes = (size_t)1 << 30;
    size_t second = put_random(s, be, &rnd, 1000000, 2048, 50, &last);
    assert_true(backend_space_low(be));
    assert_true(second > 2000);
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    assert_int_equal(mvcc_compact(b, last), 0);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    bool more = true;
    size_t steps = 0;
    while (more) {
        assert_int_equal(mvcc_batch_begin(s, &b), 0);
        assert_int_equal(mvcc_compact_step(b, 1000, &more), 0);
        assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
        assert_true(++steps < 100000);
    }
    assert_false(mvcc_compact_pending(s));
    assert_true(steps > 10); /* in slices, not at once */
    mvcc_store_close(s);
    assert_int_equal(mvcc_store_open(be, NULL, &s), 0);
    assert_int_equal(count_range(s, "k", 1, "l", 1, 0, 0, NULL),
                     (int64_t)(first + second));
    mvcc_store_close(s);
    backend_close(be);
    assert_int_equal(umount(mnt), 0);
}

/* Checks n keys of the model (want[i]: the mod revision of "k%05d" % i,
 * 0 if deleted) picked from rnd (every key if n == 0). */
static void check_model(struct mvcc_store *s, const mvcc_rev *want,
                        size_t keys, size_t n, uint64_t *rnd)
{
    for (size_t j = 0; j < (n ? n : keys); j++) {
        size_t i = j;
        if (n) {
            *rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
            i = (size_t)(*rnd >> 33) % keys;
        }
        char k[32], v[1024];
        struct mvcc_kv kv;
        snprintf(k, sizeof k, "k%05zu", i);
        assert_int_equal(get(s, k, 0, &kv, v, sizeof v), 0);
        assert_int_equal(kv.mod_rev, want[i]);
    }
}

/* Puts (or, one in 8, deletes) n random keys of "k%05d" % [0, keys),
 * 50 to a batch, until n or the disk is low, keeping want (the mod
 * revision of each key, 0 if deleted) up to date; returns how many. */
static size_t churn(struct mvcc_store *s, struct backend *be, uint64_t *rnd,
                    mvcc_rev *want, size_t keys, size_t n)
{
    static char val[500];
    memset(val, 'v', sizeof val);
    size_t ops = 0;
    while (ops < n && !backend_space_low(be)) {
        struct mvcc_batch *b;
        assert_int_equal(mvcc_batch_begin(s, &b), 0);
        for (int j = 0; j < 50 && ops < n; j++, ops++) {
            *rnd = *rnd * 6364136223846793005ull + 1442695040888963407ull;
            size_t i = (size_t)(*rnd >> 33) % keys;
            bool d = (*rnd >> 20) % 8 == 0;
            char k[32];
            snprintf(k, sizeof k, "k%05zu", i);
            struct mvcc_txn *t = mvcc_txn_begin(b);
            int64_t gone = 0;
            if (d)
                assert_int_equal(mvcc_txn_delete_range(t, k, strlen(k), NULL,
                                                       0, &gone, NULL), 0);
            else
                assert_int_equal(mvcc_txn_put(t, k, strlen(k), val,
                                              sizeof val, 0, 0, NULL), 0);
            mvcc_rev rev = mvcc_txn_end(t);
            if (!d)
                want[i] = rev;
            else if (gone == 1)
                want[i] = 0;
        }
        assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    }
    return ops;
}

/* A compaction on a full disk of overwritten and deleted keys, with a
 * reader held as a pin holds one (so the pages its steps free are not
 * reusable until that reader ends).  Before: the steps took the blocks
 * allocated past the store's last page down to the write margin, and
 * from then on every write was refused although LMDB's free list had
 * the pages (a physical compaction stalled the member's apply).  Now a
 * step does what its txn has room for, counting the reusable free pages
 * (backend_write_room), stops before a write could be refused, and
 * answers ERR_FULL with nothing done when it has no room at all; a
 * tombstone goes after the older versions, so a step stopped within a
 * key never lets an old version show again.  Method: a 64 MiB tmpfs;
 * 500-byte puts and 1 in 8 deletes over 20 000 keys until the disk is
 * low; then the compaction's steps with a reader held, replaced by a new
 * one whenever a step answers ERR_FULL; after every step 200 keys read
 * as the model says, and every key at the end and after a reopen. */
static void test_compact_full_disk_held_reader(void **state)
{
    struct fixture *f = *state;
    char mnt[128];
    struct backend *be;
    struct mvcc_store *s;
    open_on_tmpfs(f, mnt, sizeof mnt, &be, &s);
    enum { KEYS = 20000 };
    static mvcc_rev want[KEYS];
    memset(want, 0, sizeof want);
    uint64_t rnd = 7;
    size_t ops = churn(s, be, &rnd, want, KEYS, 2000000);
    assert_true(backend_space_low(be));
    assert_true(ops > 50000); /* most of them overwrites */
    mvcc_rev last = mvcc_current_rev(s);
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    assert_int_equal(mvcc_compact(b, last), 0);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    struct mvcc_read *held;
    assert_int_equal(mvcc_read_begin(s, &held), 0);
    bool more = true;
    size_t steps = 0, fulls = 0;
    while (more) {
        assert_int_equal(mvcc_batch_begin(s, &b), 0);
        int rc = mvcc_compact_step(b, 1000, &more);
        if (rc == ERR_FULL) {
            assert_true(more);
            mvcc_batch_abort(b);
            /* the next "pin": the pages freed so far become reusable */
            mvcc_read_end(held);
            assert_int_equal(mvcc_read_begin(s, &held), 0);
            fulls++;
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
            check_model(s, want, KEYS, 200, &rnd);
        }
        assert_true(++steps < 200000);
    }
    mvcc_read_end(held);
    assert_true(fulls > 0); /* the held reader did run the room out */
    assert_false(mvcc_compact_pending(s));
    assert_int_equal(mvcc_compact_finished_rev(s), last);
    check_model(s, want, KEYS, 0, &rnd);
    int64_t live = 0;
    for (size_t i = 0; i < KEYS; i++)
        live += want[i] != 0;
    mvcc_store_close(s);
    assert_int_equal(mvcc_store_open(be, NULL, &s), 0);
    assert_int_equal(count_range(s, "k", 1, "l", 1, 0, 0, NULL), live);
    check_model(s, want, KEYS, 0, &rnd);
    mvcc_store_close(s);
    backend_close(be);
    assert_int_equal(umount(mnt), 0);
}

/* Compacts s at its revision: the steps of a physical Compact in the
 * batch that schedules it, each after the one before, until the txn has
 * no room (apply_kv.c do_compact), then one step per batch (apply.c);
 * every step answers 0 or, with nothing done, ERR_FULL.  The Compact's
 * batch then puts AFTER keys "<prefix>%03d" (requests after it in the
 * same batch; as many as a batch of many, which files the in-memory
 * index at once), their revisions into want_after. */
enum { AFTER = 300 };

/* A compaction step answered 0 or ERR_FULL (with nothing done); anything
 * else is named before the test fails. */
static void step_ok(int rc)
{
    if (rc != 0 && rc != ERR_FULL)
        fprintf(stderr, "compaction step: %s\n", err_str(rc));
    assert_true(rc == 0 || rc == ERR_FULL);
}

static void compact_now(struct mvcc_store *s, char prefix,
                        mvcc_rev *want_after)
{
    struct mvcc_batch *b;
    bool more = true;
    mvcc_rev at = mvcc_current_rev(s);
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    assert_int_equal(mvcc_compact(b, at), 0);
    int rc = 0;
    for (size_t n = 0; rc == 0 && more; n++) {
        rc = mvcc_compact_step(b, 10000, &more);
        assert_true(n < 100000);
    }
    step_ok(rc);
    for (int i = 0; i < AFTER; i++) {
        char k[16];
        snprintf(k, sizeof k, "%c%03d", prefix, i);
        struct mvcc_txn *t = mvcc_txn_begin(b);
        assert_int_equal(mvcc_txn_put(t, k, strlen(k), "a", 1, 0, 0, NULL),
                         0);
        want_after[i] = mvcc_txn_end(t);
    }
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    for (size_t n = 0; more; n++) {
        assert_int_equal(mvcc_batch_begin(s, &b), 0);
        step_ok(mvcc_compact_step(b, 1000, &more));
        assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
        assert_true(n < 100000);
    }
    assert_int_equal(mvcc_compact_finished_rev(s), at);
}

/* The keys compact_now put read as it put them. */
static void check_after(struct mvcc_store *s, char prefix,
                        const mvcc_rev *want_after)
{
    for (int i = 0; i < AFTER; i++) {
        char k[16], v[16];
        struct mvcc_kv kv;
        snprintf(k, sizeof k, "%c%03d", prefix, i);
        assert_int_equal(get(s, k, 0, &kv, v, sizeof v), 0);
        assert_int_equal(kv.mod_rev, want_after[i]);
    }
}

/* Puts key k%05d % i and deletes it again, for i in [from, to), in one
 * batch; want[i] = 0. */
static void put_del(struct mvcc_store *s, mvcc_rev *want, size_t from,
                    size_t to)
{
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    for (size_t i = from; i < to; i++) {
        char k[32];
        int64_t gone;
        snprintf(k, sizeof k, "k%05zu", i);
        struct mvcc_txn *t = mvcc_txn_begin(b);
        assert_int_equal(mvcc_txn_put(t, k, strlen(k), "p", 1, 0, 0, NULL),
                         0);
        mvcc_txn_end(t);
        t = mvcc_txn_begin(b);
        assert_int_equal(mvcc_txn_delete_range(t, k, strlen(k), NULL, 0,
                                               &gone, NULL), 0);
        assert_int_equal(gone, 1);
        mvcc_txn_end(t);
        want[i] = 0;
    }
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
}

/* A physical compaction on a disk nearly full but not low (its blocks
 * ahead short of what the store wants: a compaction steps by its room,
 * while each commit folds the in-memory index as usual).  Before, the
 * Compact's batch, whose first steps finished a fold round
 * (mvcc__fold_slice_low) and whose next ones deleted versions the round
 * had filed, started a new round at its commit, on the generation the
 * finished round had walked (replaced only by that commit): it filed
 * the versions just deleted into `kv` again, without their `rev`
 * entries, and every later step that met one failed with ERR_CORRUPT (a
 * clean-clone CI run of test_full_disk.py's physical compaction:
 * "compaction step failed: data corruption detected" every 10 ms, never
 * finished).  A batch of many writes after the round in the same batch
 * filed that old generation too, and a write after it went only into
 * the old generation: not read back after the commit.  Method: a 64 MiB
 * tmpfs with 8 MiB of files; puts and deletes over 5 000 keys until the
 * disk is low; the files removed a MiB at a time until it is not (the
 * blocks ahead still short); a first compaction; then 100 keys put and
 * deleted in one batch (the overlay's only entries, two slices of a
 * fold round), the overlay's bound below that, and a compaction: the
 * round its batch runs walks those entries, its next steps delete them,
 * and 300 puts follow in the batch.  Then every key overwritten and
 * compacted again (meeting any version left behind).  Each compaction
 * finishes, and every key reads as the model says and every put after a
 * Compact as it was put, also after a reopen. */
static void test_compact_near_full_one_batch(void **state)
{
    struct fixture *f = *state;
    char mnt[128], filler[192];
    struct backend *be;
    struct mvcc_store *s;
    open_on_tmpfs(f, mnt, sizeof mnt, &be, &s);
    for (int i = 0; i < 8; i++) {
        snprintf(filler, sizeof filler, "%s/filler%d", mnt, i);
        int fd = open(filler, O_CREAT | O_WRONLY, 0600);
        assert_true(fd >= 0);
        assert_int_equal(posix_fallocate(fd, 0, 1 << 20), 0);
        close(fd);
    }
    mvcc__ovl_max = 2048;
    enum { KEYS = 5000 };
    static mvcc_rev want[KEYS];
    memset(want, 0, sizeof want);
    uint64_t rnd = 11;
    assert_true(churn(s, be, &rnd, want, KEYS, 2000000) > 20000);
    assert_true(backend_space_low(be));
    /* a MiB at a time until the store has room again */
    for (int i = 0; i < 8 && backend_space_low(be); i++) {
        snprintf(filler, sizeof filler, "%s/filler%d", mnt, i);
        assert_int_equal(unlink(filler), 0);
        backend_space_recheck(be);
    }
    assert_false(backend_space_low(be));
    struct mvcc_batch *b; /* ... but short of room ahead */
    assert_int_equal(mvcc_batch_begin(s, &b), 0);
    assert_true(backend_write_room(mvcc_batch_backend_txn(b)) != UINT64_MAX);
    mvcc_batch_abort(b);
    mvcc__ovl_max = (size_t)1 << 30; /* no round but a compaction's */
    static mvcc_rev after[3][AFTER];
    compact_now(s, 'a', after[0]);
    check_model(s, want, KEYS, 0, &rnd);
    put_del(s, want, 0, 100);
    mvcc__ovl_max = 64;
    compact_now(s, 'b', after[1]);
    check_model(s, want, KEYS, 0, &rnd);
    /* the writes after the round in its batch: in the index it left */
    check_after(s, 'b', after[1]);
    /* every key once more: the next compaction meets each key's older
     * versions */
    for (size_t i = 0; i < KEYS; i += 50) {
        assert_int_equal(mvcc_batch_begin(s, &b), 0);
        for (size_t j = i; j < i + 50; j++) {
            char k[32];
            snprintf(k, sizeof k, "k%05zu", j);
            struct mvcc_txn *t = mvcc_txn_begin(b);
            assert_int_equal(mvcc_txn_put(t, k, strlen(k), "w", 1, 0, 0,
                                          NULL), 0);
            want[j] = mvcc_txn_end(t);
        }
        assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    }
    compact_now(s, 'c', after[2]);
    check_model(s, want, KEYS, 0, &rnd);
    for (int i = 0; i < 3; i++)
        check_after(s, (char)('a' + i), after[i]);
    mvcc_store_close(s);
    assert_int_equal(mvcc_store_open(be, NULL, &s), 0);
    check_model(s, want, KEYS, 0, &rnd);
    assert_int_equal(count_range(s, "k", 1, "l", 1, 0, 0, NULL), KEYS);
    for (int i = 0; i < 3; i++)
        check_after(s, (char)('a' + i), after[i]);
    mvcc_store_close(s);
    backend_close(be);
    assert_int_equal(umount(mnt), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_put_version_rules),
        T(test_import_versions),
        T(test_range_semantics),
        T(test_txn_subrevs_read_your_writes),
        T(test_noop_delete_no_bump),
        T(test_ignore_flags),
        T(test_compaction_semantics),
        T(test_hash_kv_compacted),
        T(test_visible_hold),
        T(test_compaction_resume_after_reopen),
        T(test_compaction_empties_store),
        T(test_consistent_index_persisted),
        T(test_events),
        T(test_lease_keys),
        T(test_batch_lease_keys),
        T(test_long_keys_ranges),
        T(test_long_keys_history),
        T(test_compaction_keeps_delete_at_rev),
        T(test_nomem),
        T(test_values_in_the_log),
        T(test_layout_refused),
        T(test_prev_values),
        T(test_random_model),
        T(test_keys_count_kept),
        T(test_overlay_generations),
        T(test_overlay_from_layout2),
        T(test_overlay_concurrent_reads),
        T(test_overlay_shared_by_a_copy),
        T(test_compact_on_full_disk),
        T(test_compact_full_disk_held_reader),
        T(test_compact_near_full_one_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
