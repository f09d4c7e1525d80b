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
#include <string.h>

#include "mvcc/mvcc_int.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "util/varint.h"

struct hash_walk {
    struct mvcc_read *r;
    mvcc_rev compact; /* C, 0 = never compacted */
    mvcc_rev at;      /* the keep revision: R, or C when keep(R) is empty */
    uint32_t crc;
    struct mvcc_range_result res;
};

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

/* Is ev its key's newest version at w->at, and a put? */
static int kept(struct hash_walk *w, const struct mvcc_event *ev, bool *out)
{
    *out = false;
    if (ev->type == MVCC_EVENT_DELETE)
        return 0;
    int rc = mvcc__range(w->r, ev->kv.key, ev->kv.key_len, NULL, 0, w->at, 1,
                        MVCC_RANGE_KEYS_ONLY, &w->res);
    if (rc == 0)
        *out = w->res.n_kvs == 1 && w->res.kvs[0].mod_rev == ev->kv.mod_rev;
    return rc;
}

static int on_version(void *arg, const struct mvcc_event *ev)
{
    struct hash_walk *w = arg;
    if (w->compact > 0 && ev->kv.mod_rev <= w->compact) {
        bool keep;
        int rc = kept(w, ev, &keep);
        if (rc != 0 || !keep)
            return rc;
    }
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
    if (rc == 0)
        rc = mvcc__rev_walk(r, rev, on_version, &w);
    mvcc_range_result_close(&w.res);
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
