/*
 * test_backend_pages.c - goal: backend_pin_pages names every page a pin
 * needs beyond the previous durable pin, so that syncing only those
 * (backend_pin_sync) leaves a file that opens as the pin's state after a
 * power loss.  Method: a store written as the member writes it (no fsync,
 * pwrite), with a free list before the first pin (deletes), values on
 * overflow pages, plain and REVKEY buckets.  Pin Q, sync everything, keep
 * the file's bytes (what the disk holds).  Many more commits, pin P.  Then
 * build the file a power loss could leave: Q's pages from the kept bytes,
 * the pages backend_pin_pages(Q, P) names from the live file, every other
 * page zeros (written since Q but not synced: anything), P's meta pages at
 * the head.  It must open as P's state, key for key.  Without the pages
 * named (or without just the main tree's root) it must not.  Also: every
 * page P reaches is Q's or named; backend_pin_sync writes the pages named
 * and says so on this file system.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "util/err.h"
#include "util/mem.h"

#define NBUCKETS 3
static const char *const names[NBUCKETS] = {"a", "b", "r"};

struct fixture {
    char dir[64];
    struct backend *be;
    backend_bucket b[NBUCKETS];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/cetcd-test-pages-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    struct backend_options o = {.no_fsync = true}; /* as the member */
    assert_int_equal(backend_open(f->dir, &o, &f->be), 0);
    for (int i = 0; i < NBUCKETS; i++)
        assert_int_equal(backend_bucket_open(f->be, names[i],
                                             i == 2 ? BACKEND_BUCKET_REVKEY
                                                    : 0,
                                             &f->b[i]),
                         0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];
    backend_close(f->be);
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* key i of bucket b: REVKEY keys carry their 17-byte suffix */
static size_t key_of(int b, unsigned i, char *k)
{
    int n = snprintf(k, 64, "key-%05u", i);
    if (b == 2) {
        memset(k + n, 0, BACKEND_REVKEY_SUFFIX);
        k[n + 16] = (char)(i & 0xff);
        n += BACKEND_REVKEY_SUFFIX;
    }
    return (size_t)n;
}

/* One commit of ops random puts (values 10 B to 9 KB: some on overflow
 * pages) and deletes over keys [0, keys). */
static void commit_random(struct fixture *f, int ops, unsigned keys,
                          int del_pct)
{
    static char val[9000];
    struct backend_txn *t;
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    for (int i = 0; i < ops; i++) {
        int b = (int)(rnd() % NBUCKETS);
        char k[64];
        size_t kl = key_of(b, (unsigned)(rnd() % keys), k);
        if ((int)(rnd() % 100) < del_pct) {
            int rc = backend_del(t, f->b[b], k, kl);
            assert_true(rc == 0 || rc == ERR_NOTFOUND);
            continue;
        }
        size_t vl = rnd() % 8 == 0 ? 4000 + rnd() % 5000 : 10 + rnd() % 300;
        memset(val, 'a' + (int)(rnd() % 26), vl);
        assert_int_equal(backend_put(t, f->b[b], k, kl, val, vl), 0);
    }
    assert_int_equal(backend_write_commit(t), 0);
}

/* The whole content of every bucket as one text (a digest would do; a
 * text shows what differs). */
struct dump {
    char *buf;
    size_t len, cap;
};

static void dump_add(struct dump *d, const void *p, size_t n)
{
    if (d->len + n + 1 > d->cap) {
        d->cap = (d->len + n + 1) * 2;
        d->buf = realloc(d->buf, d->cap);
        assert_non_null(d->buf);
    }
    memcpy(d->buf + d->len, p, n);
    d->len += n;
}

/* Dumps the buckets through read txn t; returns 0 or the first error. */
static int dump_txn(struct backend_txn *t, const backend_bucket *b,
                    struct dump *d)
{
    for (int i = 0; i < NBUCKETS; i++) {
        struct backend_cursor *c;
        int rc = backend_cursor_open(t, b[i], &c);
        if (rc != 0)
            return rc;
        struct backend_val k, v;
        for (rc = backend_cursor_first(c, &k, &v); rc == 0;
             rc = backend_cursor_next(c, &k, &v)) {
            uint64_t kl = k.len, vl = v.len;
            dump_add(d, &kl, sizeof kl);
            dump_add(d, k.data, k.len);
            dump_add(d, &vl, sizeof vl);
            dump_add(d, v.data, v.len);
        }
        backend_cursor_close(c);
        if (rc != ERR_NOTFOUND)
            return rc;
        dump_add(d, "|", 1);
    }
    return 0;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got,
                          (off_t)got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    close(fd);
    *len = got;
    return buf;
}

static bool in_runs(const struct backend_run *r, size_t n, uint64_t pg)
{
    for (size_t i = 0; i < n; i++)
        if (pg >= r[i].first && pg < r[i].first + r[i].pages)
            return true;
    return false;
}

static uint64_t run_pages(const struct backend_run *r, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += r[i].pages;
    return s;
}

/* What the test keeps of Q and P. */
struct states {
    struct backend_pin q, p;
    uint8_t *q_bytes;       /* data.mdb as Q's full sync left it */
    size_t q_len;
    uint8_t *now;           /* data.mdb now (page cache) */
    size_t now_len;
    struct backend_run *q_all, *news;
    size_t n_q_all, n_news;
    struct dump expect;     /* P's content */
};

static void make_states(struct fixture *f, struct states *s)
{
    memset(s, 0, sizeof *s);
    /* Before Q: a free list (deletes, no reader holding pages). */
    for (int i = 0; i < 40; i++)
        commit_random(f, 60, 1500, i % 3 == 2 ? 60 : 10);
    assert_int_equal(backend_pin_begin(f->be, &s->q), 0);
    assert_int_equal(backend_sync(f->be), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/data.mdb", f->dir);
    s->q_bytes = read_file(path, &s->q_len);
    assert_int_equal(backend_pin_pages(f->be, NULL, &s->q, &s->q_all,
                                       &s->n_q_all), 0);
    /* After Q: small and large commits, deletes, new keys. */
    for (int i = 0; i < 60; i++)
        commit_random(f, i % 10 == 0 ? 300 : 5, 2500, 25);
    assert_int_equal(backend_pin_begin(f->be, &s->p), 0);
    assert_int_equal(dump_txn(s->p.txn, f->b, &s->expect), 0);
    s->now = read_file(path, &s->now_len);
    assert_int_equal(backend_pin_pages(f->be, &s->q, &s->p, &s->news,
                                       &s->n_news), 0);
}

static void free_states(struct states *s)
{
    backend_pin_end(&s->p);
    backend_pin_end(&s->q);
    free(s->q_bytes);
    free(s->now);
    mem_free(s->q_all);
    mem_free(s->news);
    free(s->expect.buf);
}

/* Writes the file a power loss could leave (see the top) into dir/sub and
 * opens it; 0 if it opens as P's state, else an error or ERR_CORRUPT when
 * the content differs.  skip: a page left out of the named ones. */
static int image_check(struct fixture *f, struct states *s,
                       const struct backend_run *named, size_t n_named,
                       uint64_t skip)
{
    uint64_t ps = backend_page_bytes(f->be);
    char sub[128], path[160];
    snprintf(sub, sizeof sub, "%s/img", f->dir);
    mkdir(sub, 0700);
    snprintf(path, sizeof path, "%s/data.mdb", sub);
    unlink(path);
    snprintf(path, sizeof path, "%s/lock.mdb", sub);
    unlink(path);
    snprintf(path, sizeof path, "%s/data.mdb", sub);
    size_t pages = s->now_len / ps;
    uint8_t *img = calloc(pages, ps);
    assert_non_null(img);
    for (uint64_t pg = 2; pg < pages; pg++) {
        if (pg != skip && in_runs(named, n_named, pg))
            memcpy(img + pg * ps, s->now + pg * ps, ps);
        else if (in_runs(s->q_all, s->n_q_all, pg) &&
                 (pg + 1) * ps <= s->q_len)
            memcpy(img + pg * ps, s->q_bytes + pg * ps, ps);
    }
    memcpy(img, s->p.meta, s->p.meta_len);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, img, pages * ps), (ssize_t)(pages * ps));
    close(fd);
    free(img);
    struct backend_options o = {.no_ahead = true};
    struct backend *be;
    int rc = backend_open(sub, &o, &be);
    if (rc != 0)
        return rc;
    backend_bucket b[NBUCKETS];
    struct dump got = {0};
    for (int i = 0; i < NBUCKETS && rc == 0; i++)
        rc = backend_bucket_open(be, names[i],
                                 i == 2 ? BACKEND_BUCKET_REVKEY : 0, &b[i]);
    if (rc == 0 && backend_txnid(be) != s->p.txnid)
        rc = ERR_CORRUPT;
    struct backend_txn *t;
    if (rc == 0 && (rc = backend_read_begin(be, &t)) == 0) {
        rc = dump_txn(t, b, &got);
        backend_read_end(t);
    }
    if (rc == 0 && (got.len != s->expect.len ||
                    memcmp(got.buf, s->expect.buf, got.len) != 0))
        rc = ERR_CORRUPT;
    free(got.buf);
    backend_close(be);
    return rc;
}

static void test_pages_rebuild_state(void **state)
{
    struct fixture *f = *state;
    struct states s;
    make_states(f, &s);
    assert_true(s.n_news > 0);
    /* The named pages and Q's pages are all P needs. */
    assert_int_equal(image_check(f, &s, s.news, s.n_news, UINT64_MAX), 0);
    /* Not without them, nor without the main tree's root. */
    assert_int_not_equal(image_check(f, &s, NULL, 0, UINT64_MAX), 0);
    const uint8_t *m = s.p.meta;
    uint64_t t0, t1, root;
    memcpy(&t0, m + 144, 8);
    memcpy(&t1, m + s.p.meta_len / 2 + 144, 8);
    memcpy(&root, (t1 > t0 ? m + s.p.meta_len / 2 : m) + 88 + 40, 8);
    assert_true(in_runs(s.news, s.n_news, root));
    assert_int_not_equal(image_check(f, &s, s.news, s.n_news, root), 0);
    free_states(&s);
}

static void test_pages_cover_reach(void **state)
{
    struct fixture *f = *state;
    struct states s;
    make_states(f, &s);
    struct backend_run *all;
    size_t n_all;
    assert_int_equal(backend_pin_pages(f->be, NULL, &s.p, &all, &n_all), 0);
    uint64_t reach = run_pages(all, n_all), named = run_pages(s.news,
                                                              s.n_news);
    /* Every page P reaches is Q's or named, and every named one P's. */
    for (size_t i = 0; i < n_all; i++)
        for (uint64_t pg = all[i].first; pg < all[i].first + all[i].pages;
             pg++)
            assert_true(in_runs(s.news, s.n_news, pg) ||
                        in_runs(s.q_all, s.n_q_all, pg));
    for (size_t i = 0; i < s.n_news; i++)
        for (uint64_t pg = s.news[i].first;
             pg < s.news[i].first + s.news[i].pages; pg++) {
            assert_true(in_runs(all, n_all, pg));
            assert_false(in_runs(s.q_all, s.n_q_all, pg));
        }
    /* Runs are sorted and merged. */
    for (size_t i = 1; i < s.n_news; i++)
        assert_true(s.news[i - 1].first + s.news[i - 1].pages <
                    s.news[i].first);
    assert_true(named > 0 && named < reach);
    /* backend_pin_sync writes exactly those here (ext4 or tmpfs). */
    struct statfs st;
    assert_int_equal(statfs(f->dir, &st), 0);
    uint64_t wrote = 0;
    assert_int_equal(backend_pin_sync(f->be, &s.q, &s.p, &wrote), 0);
    if (st.f_type == 0xEF53 || st.f_type == 0x01021994 ||
        st.f_type == 0x58465342)
        assert_int_equal(wrote, named);
    /* Without a durable pin to build on: the whole file. */
    assert_int_equal(backend_pin_sync(f->be, NULL, &s.p, &wrote), 0);
    assert_true(wrote == UINT64_MAX);
    mem_free(all);
    free_states(&s);
}

/* A pin with nothing committed since the durable one names no page and
 * writes none (the empty list of runs went to qsort as NULL: UBSan
 * stopped the member at the pin after a compaction on a full disk). */
static void test_pages_nothing_new(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++)
        commit_random(f, 60, 1500, 10);
    struct backend_pin q, p;
    assert_int_equal(backend_pin_begin(f->be, &q), 0);
    assert_int_equal(backend_sync(f->be), 0);
    assert_int_equal(backend_pin_begin(f->be, &p), 0);
    struct backend_run *news;
    size_t n = 1;
    assert_int_equal(backend_pin_pages(f->be, &q, &p, &news, &n), 0);
    assert_int_equal(n, 0);
    mem_free(news);
    struct statfs st;
    assert_int_equal(statfs(f->dir, &st), 0);
    uint64_t wrote = 1;
    assert_int_equal(backend_pin_sync(f->be, &q, &p, &wrote), 0);
    if (st.f_type == 0xEF53 || st.f_type == 0x01021994 ||
        st.f_type == 0x58465342)
        assert_int_equal(wrote, 0);
    backend_pin_end(&p);
    backend_pin_end(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pages_rebuild_state, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pages_nothing_new, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pages_cover_reach, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
