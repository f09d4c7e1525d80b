/*
 * test_bbolt.c - the bbolt writer and reader (src/bbolt/bbolt.h).
 *
 * Goal: what the writer produces is a database the reader (and so bbolt,
 * tests/integration/test_snapshot_etcd.py checks that with the real etcdctl)
 * accepts with exactly the entries given; the reader refuses damaged
 * files with an error naming the offset, never crashing.
 * Method: write in two passes into memory, read back, compare; damage
 * the bytes (truncation at every page, bit flips) and reopen.
 *
 * Also a tool for the integration test (not run by ctest):
 *   test_bbolt sample FILE   writes a small database with etcd's buckets
 *   test_bbolt dump FILE     prints every entry as hex, one per line
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bbolt/bbolt.h"
#include "util/err.h"

/* --- an in-memory sink and a two-pass helper ---------------------------- */

struct membuf {
    uint8_t *p;
    size_t len, cap;
};

static int mem_write(void *ctx, const void *buf, size_t len)
{
    struct membuf *m = ctx;
    if (m->len + len > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->len + len)
            cap *= 2;
        m->p = realloc(m->p, cap);
        assert_non_null(m->p);
        m->cap = cap;
    }
    memcpy(m->p + m->len, buf, len);
    m->len += len;
    return 0;
}

/* The input of a database: fn feeds the writer. */
typedef int (*feed_fn)(struct bbolt_writer *w, void *arg);

static int build(feed_fn feed, void *arg, struct membuf *out,
                 struct bbolt_plan *plan_out)
{
    struct bbolt_writer *w;
    struct bbolt_plan plan;
    int rc = bbolt_writer_create(NULL, (struct bbolt_sink){0}, &w);
    if (rc == 0)
        rc = feed(w, arg);
    if (rc == 0)
        rc = bbolt_writer_finish(w, &plan);
    bbolt_writer_free(w);
    if (rc != 0)
        return rc;
    memset(out, 0, sizeof *out);
    rc = bbolt_writer_create(&plan, (struct bbolt_sink){mem_write, out}, &w);
    if (rc == 0)
        rc = feed(w, arg);
    if (rc == 0)
        rc = bbolt_writer_finish(w, plan_out);
    bbolt_writer_free(w);
    if (rc == 0)
        assert_int_equal(out->len, plan.pages * BBOLT_PAGE_SIZE);
    return rc;
}

/* --- collecting a walk --------------------------------------------------- */

struct seen {
    size_t n;          /* entries (not buckets) */
    size_t buckets;    /* bucket entries */
    uint64_t sum;      /* of key and value bytes, to compare contents */
    int max_depth;
};

static int collect(void *arg, const struct bbolt_entry *e)
{
    struct seen *s = arg;
    if (e->depth > s->max_depth)
        s->max_depth = e->depth;
    if (e->is_bucket) {
        s->buckets++;
        return 0;
    }
    s->n++;
    for (size_t i = 0; i < e->key_len; i++)
        s->sum = s->sum * 31 + e->key[i];
    for (size_t i = 0; i < e->value_len; i++)
        s->sum = s->sum * 31 + e->value[i];
    return 0;
}

static int read_back(const struct membuf *m, struct seen *s)
{
    struct bbolt_reader *r;
    memset(s, 0, sizeof *s);
    int rc = bbolt_reader_open_mem(m->p, m->len, &r);
    if (rc == 0)
        rc = bbolt_reader_walk(r, collect, s);
    bbolt_reader_free(r);
    return rc;
}

/* --- feeds --------------------------------------------------------------- */

struct many {
    size_t n;         /* keys */
    size_t vlen;      /* value bytes */
    uint64_t sum;     /* expected, as collect computes it */
};

static void mk_key(char *k, size_t i)
{
    snprintf(k, 32, "key-%010zu", i);
}

static int feed_many(struct bbolt_writer *w, void *arg)
{
    struct many *m = arg;
    static uint8_t val[3 * BBOLT_PAGE_SIZE];
    int rc = bbolt_writer_bucket_begin(w, "a-empty", 7);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(w);
    if (rc == 0)
        rc = bbolt_writer_bucket_begin(w, "key", 3);
    m->sum = 0;
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        char k[32];
        mk_key(k, i);
        for (size_t j = 0; j < m->vlen; j++)
            val[j] = (uint8_t)(i + j);
        rc = bbolt_writer_put(w, k, strlen(k), val, m->vlen);
        for (size_t j = 0; j < strlen(k); j++)
            m->sum = m->sum * 31 + (uint8_t)k[j];
        for (size_t j = 0; j < m->vlen; j++)
            m->sum = m->sum * 31 + val[j];
    }
    if (rc == 0)
        rc = bbolt_writer_bucket_end(w);
    if (rc == 0)
        rc = bbolt_writer_bucket_begin(w, "z-empty", 7);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(w);
    return rc;
}

static void roundtrip(size_t n, size_t vlen)
{
    struct many m = {.n = n, .vlen = vlen};
    struct membuf buf;
    struct bbolt_plan plan;
    assert_int_equal(build(feed_many, &m, &buf, &plan), 0);
    struct seen s;
    assert_int_equal(read_back(&buf, &s), 0);
    assert_int_equal(s.n, n);
    assert_int_equal(s.buckets, 3);
    assert_true(s.sum == m.sum);
    free(buf.p);
}

/* --- tests --------------------------------------------------------------- */

static void test_empty_db(void **state)
{
    (void)state;
    struct many m = {.n = 0};
    struct membuf buf;
    struct bbolt_plan plan;
    assert_int_equal(build(feed_many, &m, &buf, &plan), 0);
    /* meta 0, meta 1, freelist, root leaf: empty buckets are inline. */
    assert_int_equal(plan.pages, 4);
    assert_int_equal(plan.root, 3);
    struct seen s;
    assert_int_equal(read_back(&buf, &s), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(s.buckets, 3);
    free(buf.p);
}

static void test_few_keys_inline(void **state)
{
    (void)state;
    roundtrip(5, 10); /* "key" stays inline */
}

static void test_many_keys(void **state)
{
    (void)state;
    roundtrip(100000, 20); /* three tree levels */
}

static void test_large_values(void **state)
{
    (void)state;
    roundtrip(50, 2 * BBOLT_PAGE_SIZE + 100); /* overflow pages */
    roundtrip(7, BBOLT_PAGE_SIZE - 40);       /* one per page */
}

static int feed_nested(struct bbolt_writer *w, void *arg)
{
    (void)arg;
    int rc = bbolt_writer_bucket_begin(w, "outer", 5);
    if (rc == 0)
        rc = bbolt_writer_put(w, "a", 1, "1", 1);
    if (rc == 0)
        rc = bbolt_writer_bucket_begin(w, "b-inner", 7);
    if (rc == 0)
        rc = bbolt_writer_put(w, "a", 1, "2", 1);
    if (rc == 0)
        rc = bbolt_writer_bucket_begin(w, "deeper", 6);
    for (int i = 0; rc == 0 && i < 500; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%05d", i);
        rc = bbolt_writer_put(w, k, strlen(k), "v", 1);
    }
    if (rc == 0)
        rc = bbolt_writer_bucket_end(w);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(w);
    if (rc == 0)
        rc = bbolt_writer_put(w, "c", 1, "3", 1);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(w);
    return rc;
}

static void test_nested_buckets(void **state)
{
    (void)state;
    struct membuf buf;
    struct bbolt_plan plan;
    assert_int_equal(build(feed_nested, NULL, &buf, &plan), 0);
    struct seen s;
    assert_int_equal(read_back(&buf, &s), 0);
    assert_int_equal(s.n, 3 + 500);
    assert_int_equal(s.buckets, 3);
    assert_int_equal(s.max_depth, 3);
    free(buf.p);
}

static void test_order_refused(void **state)
{
    (void)state;
    struct bbolt_writer *w;
    assert_int_equal(bbolt_writer_create(NULL, (struct bbolt_sink){0}, &w), 0);
    assert_int_equal(bbolt_writer_put(w, "a", 1, "", 0), ERR_INVAL);
    assert_int_equal(bbolt_writer_bucket_begin(w, "b", 1), 0);
    assert_int_equal(bbolt_writer_put(w, "k2", 2, "", 0), 0);
    assert_int_equal(bbolt_writer_put(w, "k1", 2, "", 0), ERR_BBOLT_ORDER);
    assert_int_equal(bbolt_writer_put(w, "k2", 2, "", 0), ERR_BBOLT_ORDER);
    assert_int_equal(bbolt_writer_bucket_end(w), 0);
    assert_int_equal(bbolt_writer_bucket_begin(w, "a", 1), ERR_BBOLT_ORDER);
    assert_int_equal(bbolt_writer_finish(w, NULL), 0);
    bbolt_writer_free(w);
}

static void test_plan_mismatch(void **state)
{
    (void)state;
    struct bbolt_plan plan = {.root = 3, .pages = 4};
    struct membuf buf = {0};
    struct bbolt_writer *w;
    assert_int_equal(
        bbolt_writer_create(&plan, (struct bbolt_sink){mem_write, &buf}, &w),
        0);
    assert_int_equal(bbolt_writer_bucket_begin(w, "b", 1), 0);
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%05d", i);
        int rc = bbolt_writer_put(w, k, strlen(k), "v", 1);
        if (rc != 0) {
            assert_int_equal(rc, ERR_BBOLT_PLAN);
            break;
        }
    }
    bbolt_writer_bucket_end(w);
    assert_int_equal(bbolt_writer_finish(w, NULL), ERR_BBOLT_PLAN);
    bbolt_writer_free(w);
    free(buf.p);
}

static int reopen(const uint8_t *p, size_t len, char *err, size_t err_len)
{
    struct bbolt_reader *r = NULL;
    struct seen s;
    int rc = bbolt_reader_open_mem(p, len, &r);
    if (rc == 0)
        rc = bbolt_reader_walk(r, collect, &s);
    if (r != NULL)
        snprintf(err, err_len, "%s", bbolt_reader_error(r));
    bbolt_reader_free(r);
    return rc;
}

static void test_truncated_refused(void **state)
{
    (void)state;
    struct many m = {.n = 3000, .vlen = 30};
    struct membuf buf;
    struct bbolt_plan plan;
    assert_int_equal(build(feed_many, &m, &buf, &plan), 0);
    char err[256];
    for (size_t cut = 0; cut < buf.len; cut += BBOLT_PAGE_SIZE / 2) {
        uint8_t *copy = malloc(cut + 1);
        memcpy(copy, buf.p, cut);
        assert_int_equal(reopen(copy, cut, err, sizeof err),
                         ERR_BBOLT_CORRUPT);
        assert_non_null(strstr(err, "offset"));
        free(copy);
    }
    free(buf.p);
}

static void test_bitflips_never_crash(void **state)
{
    (void)state;
    struct many m = {.n = 2000, .vlen = 5000 * 0 + 30};
    struct membuf buf;
    struct bbolt_plan plan;
    assert_int_equal(build(feed_many, &m, &buf, &plan), 0);
    char err[256];
    int refused = 0;
    srand(7);
    for (int i = 0; i < 3000; i++) {
        size_t at = (size_t)rand() % buf.len;
        uint8_t bit = (uint8_t)(1u << (rand() % 8));
        buf.p[at] ^= bit;
        int rc = reopen(buf.p, buf.len, err, sizeof err);
        assert_true(rc == 0 || rc == ERR_BBOLT_CORRUPT);
        refused += rc != 0;
        buf.p[at] ^= bit;
    }
    /* A flip in a value or in padding is not detectable; one in a
     * structure mostly is. */
    assert_true(refused > 0);
    /* Meta checksums: one flip in each meta page refuses the file. */
    buf.p[BBOLT_PAGE_HDR + 20] ^= 1;
    buf.p[BBOLT_PAGE_SIZE + BBOLT_PAGE_HDR + 20] ^= 1;
    assert_int_equal(reopen(buf.p, buf.len, err, sizeof err),
                     ERR_BBOLT_CORRUPT);
    assert_non_null(strstr(err, "meta"));
    free(buf.p);
}

/* --- the tool mode ------------------------------------------------------- */

static int put_s(struct bbolt_writer *w, const char *k, const void *v,
                 size_t vl)
{
    return bbolt_writer_put(w, k, strlen(k), v, vl);
}

/* Key k<rev> at revision rev, version 1, value of 10 or 10000 bytes. */
static int sample_key(struct bbolt_writer *w, size_t rev)
{
    static uint8_t v[10100];
    uint8_t k[17] = {0};
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(rev >> (56 - 8 * i));
    k[8] = '_';
    char name[24];
    int nl = snprintf(name, sizeof name, "k%zu", rev);
    size_t vl = rev % 100 == 0 ? 10000 : 10, n = 0;
    v[n++] = 10;
    v[n++] = (uint8_t)nl;
    memcpy(v + n, name, (size_t)nl);
    n += (size_t)nl;
    for (int f = 2; f <= 3; f++) { /* create and mod revision */
        v[n++] = (uint8_t)(f << 3);
        for (size_t r = rev; ; r >>= 7) {
            v[n++] = (uint8_t)(r >= 0x80 ? (r & 0x7f) | 0x80 : r);
            if (r < 0x80)
                break;
        }
    }
    v[n++] = 32;
    v[n++] = 1;
    v[n++] = 42;
    v[n++] = (uint8_t)(vl >= 0x80 ? (vl & 0x7f) | 0x80 : vl);
    if (vl >= 0x80)
        v[n++] = (uint8_t)(vl >> 7);
    memset(v + n, 'v', vl);
    return bbolt_writer_put(w, k, 17, v, n + vl);
}

/* A database with etcd's buckets: keys foo=bar at revision 2 and
 * foo2=x at 3 (mvccpb.KeyValue), then *arg more keys k<i> at revisions
 * 4.. (every 100th with a 10000-byte value), consistent index 5. */
static int feed_sample(struct bbolt_writer *w, void *arg)
{
    size_t extra = *(size_t *)arg;
    static const char *names[] = {"alarm", "auth", "authRoles", "authUsers",
                                  "cluster", "key", "lease", "members",
                                  "members_removed", "meta"};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof names / sizeof *names; i++) {
        const char *n = names[i];
        rc = bbolt_writer_bucket_begin(w, n, strlen(n));
        if (rc == 0 && strcmp(n, "auth") == 0) {
            rc = put_s(w, "authEnabled", "\0", 1);
            if (rc == 0)
                rc = put_s(w, "authRevision", "\0\0\0\0\0\0\0\1", 8);
        }
        if (rc == 0 && strcmp(n, "cluster") == 0)
            rc = put_s(w, "clusterVersion", "3.4.0", 5);
        if (rc == 0 && strcmp(n, "key") == 0) {
            /* rev 2: foo=bar; rev 3: foo2=x (create, mod, version 1) */
            static const uint8_t k2[17] = {0, 0, 0, 0, 0, 0, 0, 2, '_'};
            static const uint8_t k3[17] = {0, 0, 0, 0, 0, 0, 0, 3, '_'};
            static const uint8_t v2[] = {10, 3, 'f', 'o', 'o', 16, 2, 24,
                                         2, 32, 1, 42, 3, 'b', 'a', 'r'};
            static const uint8_t v3[] = {10, 4, 'f', 'o', 'o', '2', 16, 3,
                                         24, 3, 32, 1, 42, 1, 'x'};
            rc = bbolt_writer_put(w, k2, 17, v2, sizeof v2);
            if (rc == 0)
                rc = bbolt_writer_put(w, k3, 17, v3, sizeof v3);
            for (size_t i = 0; rc == 0 && i < extra; i++)
                rc = sample_key(w, 4 + i);
        }
        if (rc == 0 && strcmp(n, "meta") == 0)
            rc = put_s(w, "consistent_index", "\0\0\0\0\0\0\0\5", 8);
        if (rc == 0)
            rc = bbolt_writer_bucket_end(w);
    }
    return rc;
}

static int dump_entry(void *arg, const struct bbolt_entry *e)
{
    (void)arg;
    for (int i = 0; i < e->depth; i++)
        printf("%.*s/", (int)e->path_len[i], (const char *)e->path[i]);
    printf("%s ", e->is_bucket ? "bucket" : "key");
    for (size_t i = 0; i < e->key_len; i++)
        printf("%02x", e->key[i]);
    printf(" ");
    for (size_t i = 0; i < e->value_len; i++)
        printf("%02x", e->value[i]);
    printf("\n");
    return 0;
}

static int tool(int argc, char **argv)
{
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "sample") == 0) {
        struct membuf buf;
        struct bbolt_plan plan;
        size_t extra = argc == 4 ? strtoul(argv[3], NULL, 10) : 0;
        int rc = build(feed_sample, &extra, &buf, &plan);
        FILE *f = rc == 0 ? fopen(argv[2], "wb") : NULL;
        if (f == NULL || fwrite(buf.p, 1, buf.len, f) != buf.len)
            return 1;
        fclose(f);
        free(buf.p);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "dump") == 0) {
        struct bbolt_reader *r = NULL;
        int rc = bbolt_reader_open_file(argv[2], &r);
        if (rc == 0)
            rc = bbolt_reader_walk(r, dump_entry, NULL);
        if (rc != 0)
            fprintf(stderr, "%s: %s\n", err_str(rc),
                    r ? bbolt_reader_error(r) : "");
        bbolt_reader_free(r);
        return rc == 0 ? 0 : 1;
    }
    fprintf(stderr, "usage: test_bbolt [sample FILE [N] | dump FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return tool(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_db),
        cmocka_unit_test(test_few_keys_inline),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_large_values),
        cmocka_unit_test(test_nested_buckets),
        cmocka_unit_test(test_order_refused),
        cmocka_unit_test(test_plan_mismatch),
        cmocka_unit_test(test_truncated_refused),
        cmocka_unit_test(test_bitflips_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
