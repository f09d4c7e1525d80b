/*
 * mvcc_hash.c - HashKV as etcd 3.4 computes it (mvcc.h
 * mvcc_hash_kv_etcd), so that a cetcd member and an etcd member that
 * applied the same history answer the same hash.
 *
 * etcd hashes its bbolt `key` bucket: CRC32C (Castagnoli) of the bucket
 * name "key", then of each entry's key and value in key order, which is
 * revision order.  An entry's key is the revision (main u64 BE, '_', sub
 * u64 BE; a tombstone adds 't'); its value is the mvccpb.KeyValue of the
 * version marshaled (fields 1..6 in order, zero values left out; a
 * tombstone holds only the key).  An entry is hashed when its main rev is
 * <= the hash revision R and, below etcd's compact revision C, when it is
 * in keep(R): each key's newest version at R, unless that is a deletion.
 * When keep(R) is empty (no live key at R) etcd skips that filter and
 * hashes what its bucket still holds below C, which once a compaction has
 * run is keep(C); that is what is hashed here then.  cetcd's own physical
 * state (the tombstone kept at C, versions a running compaction has not
 * reached yet) never enters: the rule above is applied to every stored
 * version.  A negative revision hashes no entry (etcd's upper bound is
 * then below every revision).
 */
#include <stdlib.h>
#include <string.h>

#include "mvcc/mvcc_int.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/varint.h"

/* One version below C that etcd's keep(R) holds: its revision and its
 * key's hash.  Within one revision a key is written at most once (etcd
 * refuses a txn that writes a key twice), so the pair names the version;
 * only two keys of one txn with the same 64-bit hash could be mistaken. */
struct keep_ent {
    mvcc_rev main;
    uint64_t kh;
};

struct hash_walk {
    struct mvcc_read *r;
    mvcc_rev compact; /* C, 0 = never compacted */
    mvcc_rev at;      /* the keep revision: R, or C when keep(R) is empty */
    uint32_t crc;
    struct mvcc_range_result res;
    struct keep_ent *keep; /* keep(at) below C, by revision */
    size_t n_keep, cap_keep;
    size_t pos;            /* first entry of keep not below the walk */
};

/* Keys read per page of keep_build's pass over the key index (a variable
 * only for tests, which make pages tiny). */
size_t mvcc__keep_page = 4096;

static int keep_cmp(const void *a, const void *b)
{
    const struct keep_ent *x = a, *y = b;
    if (x->main != y->main)
        return x->main < y->main ? -1 : 1;
    return (x->kh > y->kh) - (x->kh < y->kh);
}

static int keep_push(struct hash_walk *w, mvcc_rev main, uint64_t kh)
{
    if (w->n_keep == w->cap_keep) {
        size_t cap = w->cap_keep ? 2 * w->cap_keep : 1024;
        struct keep_ent *p = mem_realloc(w->keep, cap * sizeof *p);
        if (p == NULL)
            return ERR_NOMEM;
        w->keep = p;
        w->cap_keep = cap;
    }
    w->keep[w->n_keep++] = (struct keep_ent){main, kh};
    return 0;
}

/* keep_build: every key's newest version at w->at that is a put at or
 * below C, read in one pass over the key index (pages of mvcc__keep_page
 * keys), sorted by revision: the versions below C that the walk hashes.
 * One lookup per version (what this replaced) cost ~8x more: a random
 * descent of the index for each (docs/BENCHMARKS.md, session 23). */
static int keep_build(struct hash_walk *w)
{
    static const uint8_t all = 0;
    uint8_t *from = NULL;
    size_t from_len = 0, from_cap = 0;
    int rc = 0;
    for (;;) {
        rc = mvcc__range(w->r, from ? from : &all, from ? from_len : 1,
                         &all, 1, w->at, (int64_t)mvcc__keep_page,
                         MVCC_RANGE_KEYS_ONLY | MVCC__RANGE_NO_COUNT,
                         &w->res);
        for (size_t i = 0; rc == 0 && i < w->res.n_kvs; i++) {
            const struct mvcc_kv *kv = &w->res.kvs[i];
            if (kv->mod_rev <= w->compact)
                rc = keep_push(w, kv->mod_rev,
                               mvcc__key_hash64(kv->key, kv->key_len));
        }
        if (rc != 0 || !w->res.more || w->res.n_kvs == 0)
            break;
        /* the next page starts just after the last key: key + "\0" */
        const struct mvcc_kv *last = &w->res.kvs[w->res.n_kvs - 1];
        if (last->key_len + 1 > from_cap) {
            size_t cap = 2 * (last->key_len + 1);
            uint8_t *p = mem_realloc(from, cap);
            if (p == NULL) {
                rc = ERR_NOMEM;
                break;
            }
            from = p;
            from_cap = cap;
        }
        memcpy(from, last->key, last->key_len);
        from[last->key_len] = 0;
        from_len = last->key_len + 1;
    }
    mem_free(from);
    if (rc == 0 && w->n_keep > 1)
        qsort(w->keep, w->n_keep, sizeof *w->keep, keep_cmp);
    return rc;
}

static void extend_bytes(uint32_t *crc, unsigned tag, const uint8_t *b,
                         size_t len)
{
    uint8_t head[11];
    head[0] = (uint8_t)(tag << 3 | 2);
    size_t n = 1 + varint_put(head + 1, len);
    *crc = crc32c_extend(*crc, head, n);
    *crc = crc32c_extend(*crc, b, len);
}

/* etcd's key bucket entry for ev: its revision key, then its KeyValue. */
static void hash_entry(uint32_t *crc, const struct mvcc_event *ev)
{
    const struct mvcc_kv *kv = &ev->kv;
    bool tomb = ev->type == MVCC_EVENT_DELETE;
    uint8_t k[18];
    uint64_t main = (uint64_t)kv->mod_rev, sub = (uint64_t)ev->sub_rev;
    for (int i = 0; i < 8; i++) {
        k[i] = (uint8_t)(main >> (56 - 8 * i));
        k[9 + i] = (uint8_t)(sub >> (56 - 8 * i));
    }
    k[8] = '_';
    k[17] = 't';
    *crc = crc32c_extend(*crc, k, tomb ? 18 : 17);
    extend_bytes(crc, 1, kv->key, kv->key_len);
    if (tomb)
        return;
    uint8_t p[33];
    size_t n = varint_field_put(p, 2, kv->create_rev);
    n += varint_field_put(p + n, 3, kv->mod_rev);
    n += varint_field_put(p + n, 4, kv->version);
    *crc = crc32c_extend(*crc, p, n);
    if (kv->value_len > 0)
        extend_bytes(crc, 5, kv->value, kv->value_len);
    n = varint_field_put(p, 6, kv->lease);
    *crc = crc32c_extend(*crc, p, n);
}

/* Is ev (at or below C) in keep(at): its key's newest version then, and
 * a put?  The walk goes up the revisions, so w->pos only moves on. */
static bool kept(struct hash_walk *w, const struct mvcc_event *ev)
{
    if (ev->type == MVCC_EVENT_DELETE)
        return false;
    while (w->pos < w->n_keep && w->keep[w->pos].main < ev->kv.mod_rev)
        w->pos++;
    if (w->pos == w->n_keep || w->keep[w->pos].main != ev->kv.mod_rev)
        return false; /* nothing kept at this revision: no key to hash */
    uint64_t kh = mvcc__key_hash64(ev->kv.key, ev->kv.key_len);
    for (size_t i = w->pos;
         i < w->n_keep && w->keep[i].main == ev->kv.mod_rev; i++)
        if (w->keep[i].kh == kh)
            return true;
    return false;
}

static int on_version(void *arg, const struct mvcc_event *ev)
{
    struct hash_walk *w = arg;
    if (w->compact > 0 && ev->kv.mod_rev <= w->compact && !kept(w, ev))
        return 0;
    hash_entry(&w->crc, ev);
    return 0;
}

/* The walk at rev (checked by the callers). */
static int hash_at(struct mvcc_read *r, mvcc_rev rev, uint32_t *hash_out,
                   mvcc_rev *hash_rev_out)
{
    struct hash_walk w = {.r = r, .compact = r->compact, .at = rev,
                          .crc = crc32c_extend(0, "key", 3)};
    static const uint8_t all = 0;
    int rc = 0;
    if (w.compact > 0 && rev > 0) { /* keep(R) empty: what C kept */
        rc = mvcc__range(r, &all, 1, &all, 1, rev, 0, MVCC_RANGE_COUNT_ONLY,
                        &w.res);
        if (rc == 0 && w.res.count == 0)
            w.at = w.compact;
    }
    if (rc == 0 && w.compact > 0 && rev > 0)
        rc = keep_build(&w);
    if (rc == 0)
        rc = mvcc__rev_walk(r, rev, on_version, &w);
    mvcc_range_result_close(&w.res);
    mem_free(w.keep);
    if (rc != 0)
        return rc;
    *hash_out = w.crc;
    if (hash_rev_out != NULL)
        *hash_rev_out = rev;
    return 0;
}

int mvcc_hash_kv_etcd(struct mvcc_read *r, mvcc_rev rev, uint32_t *hash_out,
                      mvcc_rev *hash_rev_out)
{
    CHECK(r != NULL && hash_out != NULL);
    if (rev > 0 && r->compact > 0 && rev <= r->compact)
        return ERR_COMPACTED;
    if (rev > r->rev)
        return ERR_FUTURE_REV;
    if (rev == 0)
        rev = r->rev; /* a negative rev hashes no entry at all, as etcd */
    return hash_at(r, rev, hash_out, hash_rev_out);
}

int mvcc_hash_kv_compacted(struct mvcc_read *r, uint32_t *hash_out)
{
    CHECK(r != NULL && hash_out != NULL);
    if (r->compact <= 0)
        return ERR_NOTFOUND;
    int rc = hash_at(r, r->compact, hash_out, NULL);
    CHECK(rc != ERR_COMPACTED);
    return rc;
}
