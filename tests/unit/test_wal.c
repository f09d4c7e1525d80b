/*
 * test_wal.c - goal: the WAL keeps every synced record, hands back exactly
 * the final raft log on replay, repairs a torn tail and refuses any other
 * damage.  Method: real files in a fresh temporary dir per test; damage is
 * made by editing segment files between close and open (zeroed tails at
 * every byte offset, single bit flips), crashes are simulated by leaving the
 * files as a crash would; allocation failures come from mem_fault_set, write
 * failures from RLIMIT_FSIZE.  One case times append+sync and prints p50/p99.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

#define SMALL_SEG 4096

/* ---- fixture: a fresh dir per test ---- */

struct fx {
    char root[64]; /* mkdtemp dir */
    char dir[96];  /* root/wal */
};

static int rm_cb(const char *p, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    strcpy(f->root, "/tmp/test_wal.XXXXXX");
    if (mkdtemp(f->root) == NULL)
        return -1;
    snprintf(f->dir, sizeof f->dir, "%s/wal", f->root);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    nftw(f->root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* ---- helpers ---- */

static const struct wal_options fast = {SMALL_SEG, true};
static const struct wal_options small_synced = {SMALL_SEG, false};

/* ent fills e (data from buf) for index/term with a recognisable payload. */
static struct wal_entry ent(uint64_t index, uint64_t term, char *buf,
                            size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)('a' + (index * 7 + term + i) % 26);
    return (struct wal_entry){index, term, (uint32_t)(index % 3), buf, len};
}

static void append_range(struct wal *w, uint64_t from, uint64_t to,
                         uint64_t term, size_t len)
{
    char buf[2048];
    assert_true(len <= sizeof buf);
    for (uint64_t i = from; i <= to; i++) {
        struct wal_entry e = ent(i, term, buf, len);
        assert_int_equal(wal_append(w, NULL, &e, 1), 0);
    }
}

/* What a replay delivered. */
struct got {
    int meta_calls;
    uint64_t node_id, cluster_id;
    int snap_calls;
    struct wal_snapshot snap;
    int hs_calls;
    struct wal_hardstate hs;
    size_t n;
    uint64_t index[4096];
    uint64_t term[4096];
    int data_ok; /* every entry's data matched ent() */
};

static int on_meta(void *arg, uint64_t node, uint64_t cluster)
{
    struct got *g = arg;
    g->meta_calls++;
    g->node_id = node;
    g->cluster_id = cluster;
    return 0;
}

static int on_snap(void *arg, const struct wal_snapshot *s)
{
    struct got *g = arg;
    g->snap_calls++;
    g->snap = *s;
    return 0;
}

static int on_hs(void *arg, const struct wal_hardstate *hs)
{
    struct got *g = arg;
    g->hs_calls++;
    g->hs = *hs;
    return 0;
}

static int on_ent(void *arg, const struct wal_entry *e)
{
    struct got *g = arg;
    static char buf[4096];
    if (g->n >= 4096 || e->len > sizeof buf)
        return -999;
    struct wal_entry want = ent(e->index, e->term, buf, e->len);
    if (e->type != want.type || (e->len && memcmp(e->data, buf, e->len)))
        g->data_ok = 0;
    g->index[g->n] = e->index;
    g->term[g->n] = e->term;
    g->n++;
    return 0;
}

static const struct wal_replay_cb cbs = {on_meta, on_snap, on_hs, on_ent};

static int replay(struct wal *w, uint64_t from_index, uint64_t from_term,
                  struct got *g)
{
    memset(g, 0, sizeof *g);
    g->data_ok = 1;
    struct wal_snapshot from = {from_index, from_term};
    return wal_replay(w, &from, &cbs, g);
}

/* The log g holds must be lo..hi, contiguous, data intact. */
static void assert_log(const struct got *g, uint64_t lo, uint64_t hi)
{
    assert_int_equal(g->n, hi >= lo ? hi - lo + 1 : 0);
    for (size_t i = 0; i < g->n; i++)
        assert_int_equal(g->index[i], lo + i);
    assert_true(g->data_ok);
}

/* Segment file names, sorted; returns how many. */
static int seg_names(const char *dir, char names[][64], int max)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strlen(de->d_name) == 37 && n < max)
            memcpy(names[n++], de->d_name, 38); /* 37 chars + NUL */
    closedir(d);
    qsort(names, (size_t)n, 64, (int (*)(const void *, const void *))strcmp);
    return n;
}

static void seg_path(const char *dir, int which, char *out, size_t len)
{
    char names[256][64];
    int n = seg_names(dir, names, 256);
    assert_true(n > 0);
    snprintf(out, len, "%s/%s", dir, names[which < 0 ? n + which : which]);
}

static unsigned char *file_load(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*len ? *len : 1);
    assert_int_equal(fread(b, 1, *len, fp), *len);
    fclose(fp);
    return b;
}

static void file_store(const char *path, const unsigned char *b, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, len, fp), len);
    fclose(fp);
}

/* store_set stores at path a copy of orig (len bytes) with n bytes from
 * off set to c. */
static void store_set(const char *path, const unsigned char *orig,
                      size_t len, size_t off, unsigned char c, size_t n)
{
    unsigned char *b = malloc(len);
    memcpy(b, orig, len);
    memset(b + off, c, n);
    file_store(path, b, len);
    free(b);
}

/* store_flip stores at path a copy of orig with the byte at off xor-ed
 * with mask. */
static void store_flip(const char *path, const unsigned char *orig,
                       size_t len, size_t off, unsigned char mask)
{
    store_set(path, orig, len, off, orig[off] ^ mask, 1);
}

/* sync_reopen syncs and closes w, then opens the WAL in dir with o again. */
static struct wal *sync_reopen(struct wal *w, const char *dir,
                               const struct wal_options *o)
{
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    assert_int_equal(wal_open(dir, o, &w), 0);
    return w;
}

/* open_log opens the WAL in dir with o, replays it from the start into g
 * and checks that the log is 1..hi; the WAL stays open. */
static struct wal *open_log(const char *dir, const struct wal_options *o,
                            struct got *g, uint64_t hi)
{
    struct wal *w;
    assert_int_equal(wal_open(dir, o, &w), 0);
    assert_int_equal(replay(w, 0, 0, g), 0);
    assert_log(g, 1, hi);
    return w;
}

/* reopen_3_or_4 opens the WAL in dir and checks that it holds 1..3, or
 * 1..4 where entry 4 fit before a write limit (unacknowledged data may
 * survive). */
static void reopen_3_or_4(const char *dir)
{
    struct wal *w;
    struct got g;
    assert_int_equal(wal_open(dir, &fast, &w), 0);
    assert_int_equal(replay(w, 0, 0, &g), 0);
    assert_true(g.n == 3 || g.n == 4);
    assert_int_equal(g.index[g.n - 1], g.n);
    wal_close(w);
}

/* ---- create / open / replay ---- */

static void test_create_append_reopen(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_false(wal_exists(f->dir));
    assert_int_equal(wal_create(f->dir, NULL, 7, 99, &w), 0);
    assert_true(wal_exists(f->dir));
    char bufs[10][64];
    struct wal_entry e[10];
    for (int i = 0; i < 10; i++)
        e[i] = ent((uint64_t)i + 1, 1, bufs[i], (size_t)i * 5);
    struct wal_hardstate hs = {1, 7, 4};
    assert_int_equal(wal_append(w, &hs, e, 10), 0);
    assert_int_equal(wal_sync(w), 0);
    assert_int_equal(wal_sync(w), 0); /* nothing new: no fdatasync */
    struct wal_stats st;
    wal_stats(w, &st);
    assert_int_equal(st.syncs, 1);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.last_index, 10);
    assert_true(st.bytes_written > 10 * 40);
    wal_close(w);

    struct wal *w2;
    assert_int_equal(wal_create(f->dir, NULL, 7, 99, &w2), ERR_EXIST);
    assert_int_equal(wal_open(f->dir, NULL, &w), 0);
    assert_int_equal(wal_last_index(w), 10);
    struct got g;
    assert_int_equal(replay(w, 0, 0, &g), 0);
    assert_int_equal(g.meta_calls, 1);
    assert_int_equal(g.node_id, 7);
    assert_int_equal(g.cluster_id, 99);
    assert_int_equal(g.snap_calls, 0);
    assert_int_equal(g.hs_calls, 1);
    assert_int_equal(g.hs.vote, 7);
    assert_int_equal(g.hs.commit, 4);
    assert_log(&g, 1, 10);
    wal_close(w);
}

static void test_empty_wal(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(mkdir(f->dir, 0700), 0);
    assert_int_equal(wal_open(f->dir, NULL, &w), ERR_NOTFOUND);
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    assert_int_equal(wal_append(w, NULL, NULL, 0), 0);
    wal_close(w);
    assert_int_equal(wal_open(f->dir, &fast, &w), 0);
    struct got g;
    assert_int_equal(replay(w, 0, 0, &g), 0);
    assert_int_equal(g.meta_calls, 1);
    assert_int_equal(g.hs_calls, 0);
    assert_int_equal(g.n, 0);
    assert_int_equal(wal_last_index(w), 0);
    append_range(w, 1, 3, 1, 10);
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    assert_int_equal(wal_open(f->dir, &fast, &w), 0);
    assert_int_equal(replay(w, 0, 0, &g), 0);
    assert_int_equal(g.n, 3); /* exactly what was synced */
    assert_int_equal(g.index[2], 3);
    wal_close(w);
}

static void test_bad_args(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    struct wal_options tiny = {100, true};
    assert_int_equal(wal_create(f->dir, &tiny, 1, 1, &w), ERR_INVAL);
    assert_int_equal(wal_create(f->dir, &fast, 1, 1, &w), 0);
    char buf[8];
    struct wal_entry e = ent(5, 1, buf, 8); /* last is 0: 5 leaves a gap */
    assert_int_equal(wal_append(w, NULL, &e, 1), ERR_INVAL);
    struct wal_entry two[2] = {ent(1, 1, buf, 8), ent(3, 1, buf, 8)};
    assert_int_equal(wal_append(w, NULL, two, 2), ERR_INVAL);
    e = ent(1, 1, buf, 8);
    e.len = WAL_ENTRY_BYTES_MAX + 1;
    assert_int_equal(wal_append(w, NULL, &e, 1), ERR_TOO_LARGE);
    append_range(w, 1, 2, 1, 8); /* rejected appends did not break it */
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
}

/* ---- segments ---- */

static void test_segment_cuts(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &small_synced, 1, 2, &w), 0);
    for (uint64_t i = 1; i <= 400; i += 10) {
        append_range(w, i, i + 9, 1 + i / 100, 100);
        assert_int_equal(wal_sync(w), 0);
    }
    struct wal_stats st;
    wal_stats(w, &st);
    assert_true(st.segments >= 8);
    assert_int_equal(st.segments, st.segments_cut + 1);
    char names[256][64];
    assert_int_equal(seg_names(f->dir, names, 256), (int)st.segments);
    wal_close(w);

    struct got g;
    w = open_log(f->dir, &small_synced, &g, 400);
    append_range(w, 401, 500, 9, 100);
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    w = open_log(f->dir, &small_synced, &g, 500);
    assert_int_equal(g.term[499], 9);
    wal_close(w);
}

static void test_batch_larger_than_segment(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    static char big[3][3000];
    struct wal_entry e[3];
    for (int i = 0; i < 3; i++)
        e[i] = ent((uint64_t)i + 1, 1, big[i], 300);
    append_range(w, 1, 1, 1, 300);
    for (int i = 0; i < 3; i++) /* 3 x 3000 bytes > one 4096 segment */
        e[i] = (struct wal_entry){(uint64_t)i + 2, 1, 0, big[i], 3000};
    assert_int_equal(wal_append(w, NULL, e, 3), 0);
    w = sync_reopen(w, f->dir, &fast);
    assert_int_equal(wal_last_index(w), 4);
    wal_close(w);
}

/* ---- HardState, snapshots, truncation, release ---- */

static void test_hardstate_latest_wins(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    for (uint64_t t = 1; t <= 60; t++) {
        struct wal_hardstate hs = {t, t % 3, t * 2};
        char buf[200];
        struct wal_entry e = ent(t, t, buf, 150);
        assert_int_equal(wal_append(w, &hs, &e, 1), 0);
    }
    struct wal_hardstate hs = {61, 1, 59};
    assert_int_equal(wal_append(w, &hs, NULL, 0), 0);
    w = sync_reopen(w, f->dir, &fast);
    struct got g;
    assert_int_equal(replay(w, 0, 0, &g), 0);
    assert_int_equal(g.hs_calls, 1);
    assert_int_equal(g.hs.term, 61);
    assert_int_equal(g.hs.vote, 1);
    assert_int_equal(g.hs.commit, 59);
    assert_log(&g, 1, 60);
    wal_close(w);
}

static void test_snapshot_marker_replay(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &small_synced, 1, 2, &w), 0);
    append_range(w, 1, 50, 2, 30);
    struct wal_snapshot s = {30, 2};
    assert_int_equal(wal_save_snapshot(w, &s), 0);
    append_range(w, 51, 60, 3, 30);
    w = sync_reopen(w, f->dir, &small_synced);
    struct got g;
    assert_int_equal(replay(w, 30, 2, &g), 0);
    assert_int_equal(g.snap_calls, 1);
    assert_int_equal(g.snap.index, 30);
    assert_int_equal(g.snap.term, 2);
    assert_log(&g, 31, 60);
    assert_int_equal(replay(w, 0, 0, &g), 0); /* marker 30 is above 0 */
    assert_int_equal(g.snap_calls, 0);
    assert_log(&g, 1, 60);
    assert_int_equal(replay(w, 40, 2, &g), 0); /* marker at or below */
    assert_int_equal(g.snap.index, 30);
    assert_log(&g, 41, 60);
    assert_int_equal(replay(w, 60, 3, &g), 0);
    assert_log(&g, 61, 60);
    wal_close(w);
}

static void test_snapshot_jump(void **state)
{
    /* A follower installs a snapshot far ahead of its log. */
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    append_range(w, 1, 5, 1, 10);
    struct wal_snapshot s = {100, 4};
    assert_int_equal(wal_save_snapshot(w, &s), 0);
    assert_int_equal(wal_last_index(w), 100);
    append_range(w, 101, 103, 4, 10);
    w = sync_reopen(w, f->dir, &fast);
    assert_int_equal(wal_last_index(w), 103);
    struct got g;
    assert_int_equal(replay(w, 100, 4, &g), 0);
    assert_int_equal(g.snap.index, 100);
    assert_log(&g, 101, 103);
    assert_int_equal(replay(w, 0, 0, &g), ERR_WAL_GAP);
    wal_close(w);
}

static void test_truncation_overwrites_tail(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    append_range(w, 1, 10, 1, 100);
    append_range(w, 6, 8, 2, 100); /* conflict at 6: 6..10 replaced */
    assert_int_equal(wal_last_index(w), 8);
    /* more entries and cuts, then truncate back into an older segment */
    append_range(w, 9, 80, 2, 100);
    append_range(w, 20, 25, 3, 100);
    w = sync_reopen(w, f->dir, &fast);
    assert_int_equal(wal_last_index(w), 25);
    struct got g;
    assert_int_equal(replay(w, 0, 0, &g), 0);
    assert_log(&g, 1, 25);
    assert_int_equal(g.term[4], 1);
    assert_int_equal(g.term[5], 2);
    assert_int_equal(g.term[18], 2);
    assert_int_equal(g.term[19], 3);
    assert_int_equal(replay(w, 22, 3, &g), 0);
    assert_log(&g, 23, 25);
    wal_close(w);
}

static void test_release_before(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    struct wal_hardstate hs = {5, 1, 200};
    assert_int_equal(wal_append(w, &hs, NULL, 0), 0);
    append_range(w, 1, 300, 5, 100);
    struct wal_snapshot s = {250, 5};
    assert_int_equal(wal_save_snapshot(w, &s), 0);
    struct wal_stats st0, st1;
    wal_stats(w, &st0);
    assert_int_equal(wal_release_before(w, 250), 0);
    wal_stats(w, &st1);
    assert_true(st1.segments < st0.segments);
    assert_true(st1.segments >= 1);
    char names[256][64];
    assert_int_equal(seg_names(f->dir, names, 256), (int)st1.segments);
    append_range(w, 301, 310, 5, 100);
    w = sync_reopen(w, f->dir, &fast);
    struct got g;
    assert_int_equal(replay(w, 250, 5, &g), 0);
    assert_int_equal(g.snap_calls, 1);
    assert_int_equal(g.snap.index, 250);
    assert_int_equal(g.hs_calls, 1);
    assert_int_equal(g.hs.commit, 200);
    assert_log(&g, 251, 310);
    assert_int_equal(replay(w, 0, 0, &g), ERR_WAL_GAP);
    /* releasing everything keeps the segment in use */
    assert_int_equal(wal_release_before(w, 1000), 0);
    wal_stats(w, &st1);
    assert_int_equal(st1.segments, 1);
    wal_close(w);
    assert_int_equal(wal_open(f->dir, &fast, &w), 0);
    assert_int_equal(wal_last_index(w), 310);
    wal_close(w);
}

/* needed_segs counts the segments of dir that a replay from index still
 * needs: each one holding an entry >= index (the next segment starts above
 * index), and the last one. */
static int needed_segs(const char *dir, uint64_t index)
{
    char names[256][64];
    int n = seg_names(dir, names, 256), need = 0;
    for (int i = 0; i < n; i++)
        if (i + 1 == n || strtoull(names[i + 1] + 17, NULL, 16) - 1 >= index)
            need++;
    return need;
}

/* keep_run writes 1..300 into a fresh WAL at dir with segments_keep = keep,
 * releases below 250 and checks the dir then holds max(keep, needed)
 * segments (all of them for WAL_SEGMENTS_KEEP_ALL); then appends 301..400
 * (more cuts) and checks the bound again; then checks that a reopened WAL
 * replays 251..400.  Returns the segments written before the release. */
static uint64_t keep_run(const char *dir, uint64_t keep)
{
    const struct wal_options o = {SMALL_SEG, true, keep};
    struct wal *w;
    assert_int_equal(wal_create(dir, &o, 1, 2, &w), 0);
    struct wal_hardstate hs = {5, 1, 200};
    assert_int_equal(wal_append(w, &hs, NULL, 0), 0);
    append_range(w, 1, 300, 5, 100);
    struct wal_snapshot s = {250, 5};
    assert_int_equal(wal_save_snapshot(w, &s), 0);
    struct wal_stats st0, st1;
    wal_stats(w, &st0);
    assert_true(st0.segments > 4);
    assert_int_equal(wal_release_before(w, 250), 0);
    wal_stats(w, &st1);
    char names[256][64];
    int files = seg_names(dir, names, 256);
    assert_int_equal(files, (int)st1.segments);
    uint64_t need = (uint64_t)needed_segs(dir, 250);
    uint64_t bound = keep > need ? keep : need;
    if (keep == WAL_SEGMENTS_KEEP_ALL || keep >= st0.segments)
        assert_int_equal(st1.segments, st0.segments);
    else
        assert_int_equal(st1.segments, bound);
    for (uint64_t i = 301; i <= 400; i++) {
        append_range(w, i, i, 5, 100);
        files = seg_names(dir, names, 256);
        need = (uint64_t)needed_segs(dir, 250);
        if (keep != WAL_SEGMENTS_KEEP_ALL)
            assert_true((uint64_t)files <= (keep > need ? keep : need));
    }
    wal_stats(w, &st1);
    assert_true(st1.segments_cut > st0.segments_cut);
    w = sync_reopen(w, dir, &o);
    struct got g;
    assert_int_equal(replay(w, 250, 5, &g), 0);
    assert_int_equal(g.snap.index, 250);
    assert_log(&g, 251, 400);
    wal_close(w);
    return st0.segments;
}

/* --max-wals: released segments are deleted only beyond segments_keep;
 * needed ones never; KEEP_ALL (--max-wals=0) deletes none. */
static void test_segments_keep(void **state)
{
    struct fx *f = *state;
    char dir[128];
    const uint64_t keeps[] = {0, 1, 2, 3, 1000, WAL_SEGMENTS_KEEP_ALL};
    for (size_t i = 0; i < sizeof keeps / sizeof keeps[0]; i++) {
        snprintf(dir, sizeof dir, "%s/keep%zu", f->root, i);
        keep_run(dir, keeps[i]);
    }
    /* A smaller keep on reopen deletes only after the next release. */
    snprintf(dir, sizeof dir, "%s/keep%zu", f->root, (size_t)5);
    const struct wal_options two = {SMALL_SEG, true, 2};
    struct wal *w;
    struct wal_stats st;
    assert_int_equal(wal_open(dir, &two, &w), 0);
    wal_stats(w, &st);
    uint64_t before = st.segments;
    assert_true(before > 2);
    assert_int_equal(wal_release_before(w, 250), 0);
    wal_stats(w, &st);
    uint64_t need = (uint64_t)needed_segs(dir, 250);
    assert_int_equal(st.segments, need > 2 ? need : 2);
    assert_true(st.segments < before);
    wal_close(w);
}

/* The released segments kept stay within released_keep_bytes (counted in
 * allocated blocks), whatever segments_keep allows; the needed ones stay
 * whatever their size; a reopened WAL replays what was kept. */
static void test_released_keep_bytes(void **state)
{
    struct fx *f = *state;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/bytes", f->root);
    /* up to 1000 released segments, but only 3 segments' worth of bytes */
    const struct wal_options o = {.segment_bytes = SMALL_SEG,
                                  .no_fsync = true, .segments_keep = 1000,
                                  .released_keep_bytes = 3 * SMALL_SEG};
    struct wal *w;
    assert_int_equal(wal_create(dir, &o, 1, 2, &w), 0);
    append_range(w, 1, 300, 5, 100);
    struct wal_stats st0, st1;
    wal_stats(w, &st0);
    assert_true(st0.segments > 6);
    assert_int_equal(wal_release_before(w, 250), 0);
    wal_stats(w, &st1);
    int need = needed_segs(dir, 250);
    assert_int_equal((int)st1.segments, need + 3);
    /* a smaller budget applies at the next release; 0 = no byte limit */
    wal_set_sizes(w, 0, 1);
    assert_int_equal(wal_release_before(w, 250), 0);
    wal_stats(w, &st1);
    assert_int_equal((int)st1.segments, need);
    wal_close(w);
    assert_int_equal(wal_open(dir, &o, &w), 0);
    struct got g;
    assert_int_equal(replay(w, 249, 5, &g), 0);
    assert_log(&g, 250, 300);
    wal_close(w);
}

/* wal_set_sizes: segments pre-created after it have the new size; the one
 * in use (and one already pre-created) is cut at its own size, also after
 * a reopen with other options. */
static void test_segment_resize(void **state)
{
    struct fx *f = *state;
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/resize", f->root);
    const struct wal_options o = {.segment_bytes = 4 * SMALL_SEG,
                                  .no_fsync = true};
    struct wal *w;
    assert_int_equal(wal_create(dir, &o, 1, 2, &w), 0);
    wal_set_sizes(w, 2 * SMALL_SEG, 0);
    append_range(w, 1, 400, 5, 100); /* ~60 KiB of records */
    char names[256][64];
    int n = seg_names(dir, names, 256);
    assert_true(n >= 4);
    struct stat st;
    seg_path(dir, 0, path, sizeof path);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 4 * SMALL_SEG); /* made before the change */
    seg_path(dir, -1, path, sizeof path);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 2 * SMALL_SEG);
    /* reopened with smaller options: the last segment is still cut at
     * its own size (it is not written past it) */
    const struct wal_options one = {.segment_bytes = SMALL_SEG,
                                    .no_fsync = true};
    char last[256];
    snprintf(last, sizeof last, "%s", path);
    w = sync_reopen(w, dir, &one);
    wal_set_sizes(w, 3 * SMALL_SEG, 0);
    append_range(w, 401, 500, 5, 100);
    assert_true(seg_names(dir, names, 256) > n);
    assert_int_equal(stat(last, &st), 0);
    assert_int_equal(st.st_size, 2 * SMALL_SEG);
    seg_path(dir, -1, path, sizeof path);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 3 * SMALL_SEG);
    w = sync_reopen(w, dir, &one);
    struct got g;
    assert_int_equal(replay(w, 0, 0, &g), 0);
    assert_log(&g, 1, 500);
    wal_close(w);
}

/* ---- damage ---- */

/* make5 writes 5 entries (the last, of last_len data bytes, alone in its
 * own append) into a fresh WAL and returns the offsets of the last record:
 * [*lo, *hi). */
static void make5(const char *dir, size_t last_len, size_t *lo, size_t *hi)
{
    struct wal *w;
    struct wal_stats st;
    assert_int_equal(wal_create(dir, &fast, 1, 2, &w), 0);
    append_range(w, 1, 4, 1, 37);
    wal_stats(w, &st);
    *lo = st.bytes_written;
    append_range(w, 5, 5, 1, last_len);
    assert_int_equal(wal_sync(w), 0);
    wal_stats(w, &st);
    *hi = st.bytes_written;
    wal_close(w);
}

/* A WAL written by make5 and the bytes of its last segment, to damage. */
struct damaged {
    size_t lo, hi;       /* the last record's offsets, [lo, hi) */
    char path[256];      /* the segment file */
    unsigned char *orig; /* its bytes as make5 left them (malloc'd) */
    size_t len;          /* their count */
};

static void damaged_make(const char *dir, size_t last_len, struct damaged *d)
{
    make5(dir, last_len, &d->lo, &d->hi);
    seg_path(dir, -1, d->path, sizeof d->path);
    d->orig = file_load(d->path, &d->len);
}

/* reopen_expect: open must work; the log is 1..n; then 5 can be written. */
static void reopen_expect(const char *dir, uint64_t n)
{
    struct got g;
    struct wal *w = open_log(dir, &fast, &g, n);
    if (n == 4) {
        append_range(w, 5, 5, 2, 37);
        assert_int_equal(wal_sync(w), 0);
    }
    wal_close(w);
    wal_close(open_log(dir, &fast, &g, 5));
}

/* refused_untouched: open must refuse the damaged segment at path as
 * corruption and leave its bytes (want, len) as they were: nothing of a
 * corrupt record is zeroed away. */
static void refused_untouched(const char *dir, const char *path,
                              const unsigned char *want, size_t len)
{
    struct wal *w;
    assert_int_equal(wal_open(dir, &fast, &w), ERR_CORRUPT);
    size_t got_len;
    unsigned char *got = file_load(path, &got_len);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, want, len);
    free(got);
}

/* A short record (the file ends inside it) is torn at every byte offset. */
static void test_torn_short_record_every_offset(void **state)
{
    struct fx *f = *state;
    struct damaged d;
    damaged_make(f->dir, 37, &d);
    log_set_level(LOG_ERROR); /* one repair warning per offset is noise */
    for (size_t cut = d.lo; cut <= d.hi; cut++) {
        file_store(d.path, d.orig, cut); /* bytes past cut never hit disk */
        reopen_expect(f->dir, cut == d.hi ? 5 : 4);
    }
    log_set_level(LOG_INFO);
    free(d.orig);
}

/* A zero-filled tail is torn when a whole sector piece of the record is
 * still zero (the disk writes whole sectors); a record whose every sector
 * holds data but fails its crc is refused, and so is one whose crc, len or
 * type is cut inside its sector (its shape is gone).  The last record here spans four 512-byte sectors;
 * the tail is zeroed from every byte offset. */
static void test_torn_tail_every_offset(void **state)
{
    struct fx *f = *state;
    struct damaged d;
    damaged_make(f->dir, 1500, &d);
    size_t last_sector = d.hi / 512 * 512;
    assert_true(last_sector > d.lo + 1024 && d.hi - last_sector > 16);
    unsigned char *b = malloc(d.len);
    log_set_level(LOG_FATAL); /* each repair or refusal logs */
    for (size_t cut = d.lo; cut <= d.hi; cut++) {
        memcpy(b, d.orig, d.len);
        memset(b + cut, 0, d.hi - cut);
        file_store(d.path, b, d.len);
        size_t nz = 0;
        for (size_t i = cut; i < d.hi; i++)
            nz += d.orig[i] != 0;
        if (nz == 0) /* only the zero padding went: the record is intact */
            reopen_expect(f->dir, 5);
        else if (cut == d.lo || (cut > d.lo + 8 && cut <= last_sector))
            reopen_expect(f->dir, 4); /* its last sector never got written */
        else /* its crc, len or type is cut, or its last sector is part */
            refused_untouched(f->dir, d.path, b, d.len);
    }
    /* a torn write can also leave the record's tail but not its head */
    store_set(d.path, d.orig, d.len, d.lo, 0, 16);
    reopen_expect(f->dir, 4);
    /* or a middle sector unwritten */
    store_set(d.path, d.orig, d.len, last_sector - 512, 0, 512);
    reopen_expect(f->dir, 4);
    log_set_level(LOG_INFO);
    free(b);
    free(d.orig);
}

/* flip_each flips one bit of every byte of the last record but its len
 * field and expects each to be refused, the file left as it was. */
static void flip_each(const char *dir, const struct damaged *d)
{
    unsigned char *b = malloc(d->len);
    for (size_t off = d->lo; off < d->hi; off++) {
        if (off >= d->lo + 4 && off < d->lo + 8)
            continue; /* len: see test_bitflip_tail_record_is_corrupt */
        memcpy(b, d->orig, d->len);
        b[off] ^= (unsigned char)(1u << (off % 8));
        file_store(d->path, b, d->len);
        refused_untouched(dir, d->path, b, d->len);
    }
    free(b);
}

/* A bit flip in the final, complete record of a clean, synced shutdown is
 * corruption, not a torn write: it is refused and the record is kept. */
static void test_bitflip_tail_record_is_corrupt(void **state)
{
    struct fx *f = *state;
    struct damaged d;
    damaged_make(f->dir, 37, &d); /* one sector */
    assert_int_equal(d.lo / 512, (d.hi - 1) / 512);
    log_set_level(LOG_FATAL);
    flip_each(f->dir, &d);
    free(d.orig);
    teardown(state);
    setup(state);
    f = *state;
    damaged_make(f->dir, 1500, &d); /* four sectors */
    flip_each(f->dir, &d);
    /* a len made 4 KiB longer runs past the end of the file: torn */
    store_flip(d.path, d.orig, d.len, d.lo + 5, 0x10);
    log_set_level(LOG_ERROR);
    reopen_expect(f->dir, 4);
    log_set_level(LOG_INFO);
    free(d.orig);
}

static void test_bitflip_middle_is_corrupt(void **state)
{
    struct fx *f = *state;
    struct damaged d;
    damaged_make(f->dir, 37, &d);
    size_t rec = d.hi - d.lo; /* all five records have the same size */
    log_set_level(LOG_FATAL); /* each refusal logs an error line */
    for (size_t off = d.lo - 3 * rec; off < d.lo; off++) {
        store_flip(d.path, d.orig, d.len, off,
                   (unsigned char)(1u << (off % 8)));
        struct wal *w;
        assert_int_equal(wal_open(f->dir, &fast, &w), ERR_CORRUPT);
    }
    /* garbage after the valid records that does not verify is torn */
    store_set(d.path, d.orig, d.len, d.hi + 64, 0x5a, 100);
    log_set_level(LOG_INFO);
    reopen_expect(f->dir, 5);
    free(d.orig);
}

static void test_bitflip_earlier_segment_is_corrupt(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    append_range(w, 1, 100, 1, 100);
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    char path[256];
    seg_path(f->dir, 0, path, sizeof path);
    size_t len;
    unsigned char *orig = file_load(path, &len);
    /* find the end of the records: the last non-zero byte */
    size_t end = len;
    while (end > 0 && orig[end - 1] == 0)
        end--;
    size_t spots[] = {3, 40, end / 2, end - 1};
    log_set_level(LOG_FATAL);
    for (size_t i = 0; i < 4; i++) {
        store_flip(path, orig, len, spots[i], 0x10);
        assert_int_equal(wal_open(f->dir, &fast, &w), ERR_CORRUPT);
    }
    file_store(path, orig, len);
    /* a missing middle segment is refused too */
    char mid[256];
    seg_path(f->dir, 1, mid, sizeof mid);
    assert_int_equal(unlink(mid), 0);
    assert_int_equal(wal_open(f->dir, &fast, &w), ERR_CORRUPT);
    log_set_level(LOG_INFO);
    free(orig);
}

/* A segment is preallocated: past its records the file is an unwritten
 * tail that the reader skips (SEEK_DATA/SEEK_HOLE) instead of reading.
 * Whatever lies past a hole must still be seen: garbage far past the
 * records is a torn tail to repair (and is zeroed), and a hole punched
 * into the middle of the records, with records after it, is corruption,
 * not a shorter log. */
static void test_holes_read_as_zeros(void **state)
{
    struct fx *f = *state;
    const struct wal_options big = {1 << 20, true};
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &big, 1, 2, &w), 0);
    append_range(w, 1, 300, 1, 100); /* ~40 KB of records */
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    struct got g;
    wal_close(open_log(f->dir, &big, &g, 300));
    char path[256];
    seg_path(f->dir, -1, path, sizeof path);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    const off_t far = 600000;
    assert_int_equal(pwrite(fd, "\x5a", 1, far), 1);
    close(fd);
    log_set_level(LOG_ERROR); /* the repair warns */
    wal_close(open_log(f->dir, &big, &g, 300));
    unsigned char c = 1;
    fd = open(path, O_RDONLY);
    assert_int_equal(pread(fd, &c, 1, far), 1);
    close(fd);
    assert_int_equal(c, 0); /* the repair saw it past the hole */
    fd = open(path, O_RDWR);
    assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                               8192, 4096),
                     0);
    close(fd);
    log_set_level(LOG_FATAL);
    assert_int_equal(wal_open(f->dir, &big, &w), ERR_CORRUPT);
    log_set_level(LOG_INFO);
}

static void test_crash_between_cut_and_rename(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    append_range(w, 1, 30, 1, 100);
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    /* the pre-created segment, its head half written, was never renamed */
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s/next.wal.tmp", f->dir);
    unsigned char junk[SMALL_SEG];
    memset(junk, 0, sizeof junk);
    memset(junk, 0x33, 40);
    file_store(tmp, junk, sizeof junk);
    struct got g;
    w = open_log(f->dir, &fast, &g, 30);
    assert_int_equal(access(tmp, F_OK), -1); /* removed */
    append_range(w, 31, 90, 1, 100); /* cuts again */
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    wal_close(open_log(f->dir, &fast, &g, 90));
}

/* ---- failures ---- */

/* one run of the whole life cycle with the n-th allocation failing; every
 * step must either work or fail cleanly with ERR_NOMEM. */
static int nomem_run(const char *dir, long n)
{
    struct wal *w = NULL;
    struct got g;
    int failed = 0, rv;
    mem_fault_set(n);
    rv = wal_create(dir, &fast, 1, 2, &w);
    if (rv != 0) {
        mem_fault_set(0);
        assert_int_equal(rv, ERR_NOMEM);
        if (wal_exists(dir))
            assert_int_equal(wal_open(dir, &fast, &w), 0);
        else
            assert_int_equal(wal_create(dir, &fast, 1, 2, &w), 0);
        failed = 1;
    }
    for (uint64_t i = wal_last_index(w) + 1; i <= 80; i++) {
        char buf[100];
        struct wal_entry e = ent(i, 1, buf, 100);
        rv = wal_append(w, NULL, &e, 1);
        if (rv != 0) {
            assert_int_equal(rv, ERR_NOMEM);
            failed = 1;
            i--;
            mem_fault_set(0);
        }
    }
    assert_int_equal(wal_sync(w), 0);
    wal_close(w);
    rv = wal_open(dir, &fast, &w);
    if (rv == 0) {
        rv = replay(w, 0, 0, &g);
        if (rv == 0)
            assert_log(&g, 1, 80);
        wal_close(w);
    }
    mem_fault_set(0);
    assert_true(rv == 0 || rv == ERR_NOMEM);
    return failed || rv != 0;
}

static void test_allocation_failure(void **state)
{
    struct fx *f = *state;
    long n;
    for (n = 1; n < 200; n++) {
        nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        if (!nomem_run(f->dir, n))
            break; /* the n-th allocation is past the whole run */
    }
    assert_true(n > 3 && n < 200);
    struct got g;
    wal_close(open_log(f->dir, &fast, &g, 80));
}

static void test_write_failure_refuses(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    assert_int_equal(wal_create(f->dir, &fast, 1, 2, &w), 0);
    append_range(w, 1, 3, 1, 100);
    assert_int_equal(wal_sync(w), 0);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    /* A write inside the preallocated segment, past the file size limit:
     * the pwrite itself fails.  (A batch past the segment's size gets its
     * blocks first, and a refusal there writes nothing and breaks nothing:
     * test_wal_room.) */
    lim.rlim_cur = 128;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static char big[3][30];
    struct wal_entry e[3];
    for (int i = 0; i < 3; i++)
        e[i] = (struct wal_entry){(uint64_t)i + 4, 1, 0, big[i], 30};
    int rv = wal_append(w, NULL, e, 3);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_true(rv < 0 && rv != ERR_NOMEM);
    char buf[10];
    struct wal_entry one = ent(4, 1, buf, 10);
    assert_int_equal(wal_append(w, NULL, &one, 1), rv);
    assert_int_equal(wal_sync(w), rv);
    struct wal_snapshot s = {1, 1};
    assert_int_equal(wal_save_snapshot(w, &s), rv);
    wal_close(w);
    reopen_3_or_4(f->dir);
}

/* ---- timing ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_sync_timing(void **state)
{
    struct fx *f = *state;
    struct wal *w;
    enum { N = 1000 };
    static uint64_t ns[N];
    assert_int_equal(wal_create(f->dir, NULL, 1, 2, &w), 0);
    char buf[100];
    for (uint64_t i = 1; i <= N; i++) {
        struct wal_entry e = ent(i, 1, buf, sizeof buf);
        struct wal_hardstate hs = {1, 1, i};
        uint64_t t0 = now_ns();
        assert_int_equal(wal_append(w, &hs, &e, 1), 0);
        assert_int_equal(wal_sync(w), 0);
        ns[i - 1] = now_ns() - t0;
    }
    struct wal_stats st;
    wal_stats(w, &st);
    assert_int_equal(st.syncs, N);
    wal_close(w);
    qsort(ns, N, sizeof ns[0], cmp_u64);
    print_message("wal: %d x (append 100 B entry + HardState, sync): "
                  "p50 %.1f us, p99 %.1f us, max %.1f us\n", N,
                  ns[N / 2] / 1e3, ns[N * 99 / 100] / 1e3, ns[N - 1] / 1e3);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_create_append_reopen),
        T(test_empty_wal),
        T(test_bad_args),
        T(test_segment_cuts),
        T(test_batch_larger_than_segment),
        T(test_hardstate_latest_wins),
        T(test_snapshot_marker_replay),
        T(test_snapshot_jump),
        T(test_truncation_overwrites_tail),
        T(test_release_before),
        T(test_segments_keep),
        T(test_released_keep_bytes),
        T(test_segment_resize),
        T(test_torn_short_record_every_offset),
        T(test_torn_tail_every_offset),
        T(test_bitflip_tail_record_is_corrupt),
        T(test_bitflip_middle_is_corrupt),
        T(test_bitflip_earlier_segment_is_corrupt),
        T(test_holes_read_as_zeros),
        T(test_crash_between_cut_and_rename),
        T(test_allocation_failure),
        T(test_write_failure_refuses),
        T(test_sync_timing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
