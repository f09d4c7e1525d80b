/*
 * test_etcdwal.c - the etcd WAL reader (src/etcdwal/etcdwal.h).
 *
 * Goal: records framed and chained as etcd writes them are read back in
 * order with their payloads; a cut or damaged log is refused with an
 * offset, except a torn record at the very end of the last file, which
 * is reported as torn (etcd repairs it); nothing crashes.
 * Method: logs built in memory by a small encoder of etcd's format (the
 * real etcd's files are read by the tool mode in
 * tests/integration/test_snapshot_etcd.py); every truncation point, bit flips.
 * Tool mode (not run by ctest): test_etcdwal dump DIR prints each record;
 * test_etcdwal snap FILE decodes an etcd snap file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcdwal/etcdwal.h"
#include "util/crc32c.h"
#include "util/err.h"

struct wbuf {
    uint8_t p[1 << 16];
    size_t len;
    uint32_t crc;
};

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Appends a frame holding Record{type, crc, data}. */
static void frame(struct wbuf *w, int64_t type, const void *data, size_t len)
{
    uint8_t rec[4096];
    uint32_t crc = type == ETCDWAL_CRC ? w->crc
                                       : crc32c_extend(w->crc, data, len);
    if (type != ETCDWAL_CRC)
        w->crc = crc;
    size_t n = 0;
    rec[n++] = 1 << 3;
    n += put_varint(rec + n, (uint64_t)type);
    rec[n++] = 2 << 3;
    n += put_varint(rec + n, crc);
    if (data != NULL) {
        rec[n++] = 3 << 3 | 2;
        n += put_varint(rec + n, len);
        memcpy(rec + n, data, len);
        n += len;
    }
    size_t pad = (8 - n % 8) % 8;
    uint64_t l = n | (pad ? (uint64_t)(0x80 | pad) << 56 : 0);
    for (int i = 0; i < 8; i++)
        w->p[w->len++] = (uint8_t)(l >> (8 * i));
    memcpy(w->p + w->len, rec, n);
    w->len += n;
    memset(w->p + w->len, 0, pad);
    w->len += pad;
}

static void entry(struct wbuf *w, uint64_t term, uint64_t index,
                  const char *data)
{
    uint8_t e[512];
    size_t n = 0;
    e[n++] = 2 << 3;
    n += put_varint(e + n, term);
    e[n++] = 3 << 3;
    n += put_varint(e + n, index);
    e[n++] = 4 << 3 | 2;
    n += put_varint(e + n, strlen(data));
    memcpy(e + n, data, strlen(data));
    frame(w, ETCDWAL_ENTRY, e, n + strlen(data));
}

static void sample(struct wbuf *w)
{
    memset(w, 0, sizeof *w);
    frame(w, ETCDWAL_CRC, NULL, 0);
    const uint8_t md[] = {8, 7, 16, 9};
    frame(w, ETCDWAL_METADATA, md, sizeof md);
    frame(w, ETCDWAL_SNAPSHOT, NULL, 0);
    for (uint64_t i = 1; i <= 20; i++)
        entry(w, 1 + i / 10, i, "put something");
    const uint8_t hs[] = {8, 2, 16, 7, 24, 20};
    frame(w, ETCDWAL_STATE, hs, sizeof hs);
}

struct got {
    int n, entries;
    uint64_t last_index;
    struct etcdwal_state st;
    struct etcdwal_metadata md;
};

static int on_rec(void *arg, const struct etcdwal_record *r)
{
    struct got *g = arg;
    g->n++;
    if (r->type == ETCDWAL_ENTRY) {
        struct etcdwal_entry e;
        if (etcdwal_entry_decode(r->data, r->len, &e) != 0)
            return ERR_CORRUPT;
        g->entries++;
        g->last_index = e.index;
    } else if (r->type == ETCDWAL_STATE) {
        return etcdwal_state_decode(r->data, r->len, &g->st);
    } else if (r->type == ETCDWAL_METADATA) {
        return etcdwal_metadata_decode(r->data, r->len, &g->md);
    }
    return 0;
}

static void test_read_back(void **state)
{
    (void)state;
    struct wbuf w;
    sample(&w);
    w.len += 64; /* the preallocated zeroes */
    struct etcdwal_reader r = {0};
    struct got g = {0};
    assert_int_equal(etcdwal_read_mem(&r, "x.wal", w.p, w.len, true, on_rec,
                                      &g), 0);
    assert_false(r.torn);
    assert_int_equal(g.n, 24);
    assert_int_equal(g.entries, 20);
    assert_int_equal(g.last_index, 20);
    assert_int_equal(g.st.term, 2);
    assert_int_equal(g.st.vote, 7);
    assert_int_equal(g.st.commit, 20);
    assert_int_equal(g.md.node_id, 7);
    assert_int_equal(g.md.cluster_id, 9);
}

static void test_truncations(void **state)
{
    (void)state;
    struct wbuf w;
    sample(&w);
    for (size_t cut = 0; cut < w.len; cut++) {
        struct etcdwal_reader r = {0};
        struct got g = {0};
        int rc = etcdwal_read_mem(&r, "x.wal", w.p, cut, true, on_rec, &g);
        assert_int_equal(rc, 0); /* a torn tail, or a frame boundary */
        assert_true(g.n <= 24);
        /* Not the last file: a cut inside a frame is corruption. */
        struct etcdwal_reader r2 = {0};
        struct got g2 = {0};
        rc = etcdwal_read_mem(&r2, "x.wal", w.p, cut, false, on_rec, &g2);
        assert_true(rc == 0 || rc == ERR_CORRUPT);
        if (r.torn)
            assert_int_equal(rc, ERR_CORRUPT);
        if (rc != 0)
            assert_non_null(strstr(r2.err, "offset"));
    }
}

static void test_bitflips(void **state)
{
    (void)state;
    struct wbuf w;
    sample(&w);
    size_t refused = 0;
    for (size_t at = 0; at < w.len; at++) {
        for (int bit = 0; bit < 8; bit += 3) {
            w.p[at] ^= (uint8_t)(1u << bit);
            struct etcdwal_reader r = {0};
            struct got g = {0};
            int rc = etcdwal_read_mem(&r, "x.wal", w.p, w.len, false, on_rec,
                                      &g);
            assert_true(rc == 0 || rc == ERR_CORRUPT);
            refused += rc != 0;
            w.p[at] ^= (uint8_t)(1u << bit);
        }
    }
    assert_true(refused > w.len); /* most flips: the CRC or the framing */
}

/* The last record of the last file: a bit flip in it is corruption
 * (etcd's ErrCRCMismatch), not a torn write; the same record with a whole
 * 512-byte sector of it zero is a torn write (etcd's isTornEntry), and so
 * is one cut short by the end of the file. */
static void test_last_record_flip_vs_tear(void **state)
{
    (void)state;
    struct wbuf w;
    sample(&w);
    size_t head = w.len;
    char big[480];
    memset(big, 'x', sizeof big);
    big[sizeof big - 1] = '\0';
    entry(&w, 3, 21, big); /* 480 bytes: crosses a sector boundary */
    size_t rec = head + 8 + 20; /* inside the big entry's data */
    struct etcdwal_reader r = {0};
    struct got g = {0};
    assert_int_equal(etcdwal_read_mem(&r, "x.wal", w.p, w.len, true, on_rec,
                                      &g), 0);
    assert_int_equal(g.last_index, 21);
    w.p[rec] ^= 4;
    memset(&r, 0, sizeof r);
    memset(&g, 0, sizeof g);
    assert_int_equal(etcdwal_read_mem(&r, "x.wal", w.p, w.len, true, on_rec,
                                      &g), ERR_CORRUPT);
    assert_non_null(strstr(r.err, "x.wal"));
    assert_non_null(strstr(r.err, "offset"));
    w.p[rec] ^= 4;
    size_t sector = (head / 512 + 1) * 512;
    assert_true(sector > rec && sector < w.len);
    size_t end = sector + 512 < w.len ? sector + 512 : w.len;
    memset(w.p + sector, 0, end - sector);
    memset(&r, 0, sizeof r);
    memset(&g, 0, sizeof g);
    assert_int_equal(etcdwal_read_mem(&r, "x.wal", w.p, w.len, true, on_rec,
                                      &g), 0);
    assert_true(r.torn);
    assert_int_equal(r.torn_off, head);
    assert_int_equal(g.last_index, 20);
    memset(&r, 0, sizeof r);
    assert_int_equal(etcdwal_read_mem(&r, "x.wal", w.p, w.len, false, on_rec,
                                      &g), ERR_CORRUPT);
}

static int dump_rec(void *arg, const struct etcdwal_record *r)
{
    (void)arg;
    printf("%llu type %lld len %zu", (unsigned long long)r->off,
           (long long)r->type, r->len);
    if (r->type == ETCDWAL_ENTRY) {
        struct etcdwal_entry e;
        if (etcdwal_entry_decode(r->data, r->len, &e) != 0)
            return ERR_CORRUPT;
        printf(" entry term %llu index %llu type %llu data %zu",
               (unsigned long long)e.term, (unsigned long long)e.index,
               (unsigned long long)e.type, e.len);
    } else if (r->type == ETCDWAL_STATE) {
        struct etcdwal_state s;
        if (etcdwal_state_decode(r->data, r->len, &s) != 0)
            return ERR_CORRUPT;
        printf(" state term %llu vote %llx commit %llu",
               (unsigned long long)s.term, (unsigned long long)s.vote,
               (unsigned long long)s.commit);
    } else if (r->type == ETCDWAL_METADATA) {
        struct etcdwal_metadata m;
        if (etcdwal_metadata_decode(r->data, r->len, &m) != 0)
            return ERR_CORRUPT;
        printf(" metadata node %llx cluster %llx",
               (unsigned long long)m.node_id,
               (unsigned long long)m.cluster_id);
    } else if (r->type == ETCDWAL_SNAPSHOT) {
        struct etcdwal_snapshot s;
        if (etcdwal_snapshot_decode(r->data, r->len, &s) != 0)
            return ERR_CORRUPT;
        printf(" snapshot index %llu term %llu", (unsigned long long)s.index,
               (unsigned long long)s.term);
    }
    printf("\n");
    return 0;
}

/* A snap file: snappb{crc, raftpb.Snapshot{store, metadata{conf_state cs,
 * index 42, term 3}}}. */
static size_t snap_build(uint8_t *out, const uint8_t *cs, size_t cs_len)
{
    static const char store[] = "{\"Root\":{}}";
    uint8_t raft[256], md[64];
    size_t m = 0, n = 0;
    md[m++] = 1 << 3 | 2;
    md[m++] = (uint8_t)cs_len;
    memcpy(md + m, cs, cs_len);
    m += cs_len;
    md[m++] = 2 << 3;
    md[m++] = 42;
    md[m++] = 3 << 3;
    md[m++] = 3;
    raft[n++] = 1 << 3 | 2;
    raft[n++] = (uint8_t)(sizeof store - 1);
    memcpy(raft + n, store, sizeof store - 1);
    n += sizeof store - 1;
    raft[n++] = 2 << 3 | 2;
    raft[n++] = (uint8_t)m;
    memcpy(raft + n, md, m);
    n += m;
    size_t k = 0;
    out[k++] = 1 << 3;
    k += put_varint(out + k, crc32c_extend(0, raft, n));
    out[k++] = 2 << 3 | 2;
    k += put_varint(out + k, n);
    memcpy(out + k, raft, n);
    return k + n;
}

/* conf_state {voters 5, 6} */
static size_t snap_sample(uint8_t *out)
{
    static const uint8_t cs[] = {1 << 3, 5, 1 << 3, 6};
    return snap_build(out, cs, sizeof cs);
}

static void test_snap_file(void **state)
{
    (void)state;
    uint8_t buf[512];
    size_t len = snap_sample(buf);
    struct etcdwal_snap s;
    char err[128];
    assert_int_equal(etcdwal_snap_decode(buf, len, &s, err, sizeof err), 0);
    assert_int_equal(s.index, 42);
    assert_int_equal(s.term, 3);
    assert_int_equal(s.n_voters, 2);
    assert_int_equal(s.voters[1], 6);
    assert_int_equal(s.store_len, 11);
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(etcdwal_snap_decode(buf, cut, &s, err, sizeof err),
                         ERR_CORRUPT);
    for (size_t at = 0; at < len; at++) {
        buf[at] ^= 0x10;
        int rc = etcdwal_snap_decode(buf, len, &s, err, sizeof err);
        assert_true(rc == 0 || rc == ERR_CORRUPT);
        buf[at] ^= 0x10;
    }
}

static int snap_tool(const char *path)
{
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 24];
    size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f != NULL)
        fclose(f);
    struct etcdwal_snap s;
    char err[256] = "";
    if (f == NULL || etcdwal_snap_decode(buf, len, &s, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 1;
    }
    printf("snap index %llu term %llu voters %zu learners %zu store %zu\n",
           (unsigned long long)s.index, (unsigned long long)s.term,
           s.n_voters, s.n_learners, s.store_len);
    return 0;
}

/* etcd 3.5's shapes: walpb.Snapshot gains conf_state (field 3, a
 * raftpb.ConfState), and ConfState its joint-consensus fields
 * (voters_outgoing 3, learners_next 4, auto_leave 5); both are read as
 * 3.4's, the new fields passed over. */
static void test_35_shapes(void **state)
{
    (void)state;
    /* walpb.Snapshot {1 index 42, 2 term 3, 3 conf_state {1 voters 5,
     * 1 voters 6, 2 learners 7, 3 voters_outgoing 5, 5 auto_leave}} */
    static const uint8_t rec[] = {1 << 3,     42, 2 << 3,     3,
                                  3 << 3 | 2, 10, 1 << 3,     5,
                                  1 << 3,     6,  2 << 3,     7,
                                  3 << 3,     5,  5 << 3,     1};
    struct etcdwal_snapshot sn;
    assert_int_equal(etcdwal_snapshot_decode(rec, sizeof rec, &sn), 0);
    assert_int_equal(sn.index, 42);
    assert_int_equal(sn.term, 3);
    /* the same record in a log, framed and chained */
    struct wbuf *w = calloc(1, sizeof *w);
    assert_non_null(w);
    frame(w, ETCDWAL_CRC, NULL, 0);
    frame(w, ETCDWAL_SNAPSHOT, rec, sizeof rec);
    struct etcdwal_reader r = {0};
    struct got g = {0};
    assert_int_equal(etcdwal_read_mem(&r, "x.wal", w->p, w->len, true,
                                      on_rec, &g), 0);
    assert_int_equal(g.n, 2);
    assert_false(r.torn);
    free(w);
    /* a snap file whose ConfState has the joint-consensus fields */
    static const uint8_t cs[] = {1 << 3, 5, 1 << 3, 6, 3 << 3, 5,
                                 4 << 3, 8, 5 << 3, 1};
    uint8_t out[512];
    size_t o = snap_build(out, cs, sizeof cs);
    struct etcdwal_snap s;
    char err[128];
    assert_int_equal(etcdwal_snap_decode(out, o, &s, err, sizeof err), 0);
    assert_int_equal(s.index, 42);
    assert_int_equal(s.n_voters, 2);
    assert_int_equal(s.voters[0], 5);
    assert_int_equal(s.voters[1], 6);
    assert_int_equal(s.n_learners, 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "snap") == 0)
        return snap_tool(argv[2]);
    if (argc == 3 && strcmp(argv[1], "dump") == 0) {
        struct etcdwal_reader r = {0};
        int rc = etcdwal_read_dir(&r, argv[2], dump_rec, NULL);
        if (r.torn)
            printf("torn at %llu\n", (unsigned long long)r.torn_off);
        if (rc != 0)
            fprintf(stderr, "%s: %s\n", err_str(rc), r.err);
        return rc == 0 ? 0 : 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_back),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_bitflips),
        cmocka_unit_test(test_last_record_flip_vs_tear),
        cmocka_unit_test(test_snap_file),
        cmocka_unit_test(test_35_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
