/*
 * mvcc_long.c - long keys: those longer than the store's L (LMDB's key
 * limit minus the version suffix), filed in the `kvl` bucket under an
 * index made of their first L - 8 bytes and a hash, with the full key in
 * the index entry's value and the value bytes in the log (layout in
 * mvcc_int.h).
 *
 * Two long keys may share an index (a hash collision); their versions then
 * interleave under it, newest first.  So nothing here trusts the index:
 * every walk decodes the full key of each version it meets, and the first
 * version it meets of a key (at or below the revision read) is that key's
 * visible one.  A walk over an index costs the versions stored under it
 * (until compaction drops the dead ones); ranges gather every index of a
 * group (the keys sharing the first L - 8 bytes) and sort the group by
 * full key, since the hash does not keep the keys' order.
 */
#include <stdlib.h>

#include "mvcc/mvcc_int.h"

#include "util/err.h"
#include "util/mem.h"

void mvcc__lindex(size_t l, uint8_t *idx, const void *key,
                  size_t key_len)
{
    size_t p = l - MVCC_HASH_LEN;
    CHECK(key_len > l && key_len <= MVCC_KEY_MAX);
    memcpy(idx, key, p);
    mvcc__put_be64(idx + p, mvcc__key_hash(key, key_len));
}

int mvcc__lbuf_push(struct mvcc_lbuf *b, const struct mvcc_kv *kv, bool tomb)
{
    struct mvcc_lent *v = mem_grow(b->v, &b->cap, b->n, sizeof *v, 8);
    if (v == NULL)
        return ERR_NOMEM;
    b->v = v;
    b->v[b->n].kv = *kv;
    b->v[b->n].tomb = tomb;
    b->n++;
    return 0;
}

static bool same_key(const struct mvcc_kv *kv, const void *key, size_t len)
{
    return kv->key_len == len && memcmp(kv->key, key, len) == 0;
}

int mvcc__visible_long(size_t l, struct backend_cursor *kvl,
                       const void *key, size_t key_len, mvcc_rev rev,
                       struct backend_cursor *revc, struct mvcc_kv *out,
                       bool *tomb_out)
{
    uint8_t idx[MVCC_CKEY_MAX];
    struct backend_val k, v;
    CHECK(kvl != NULL && key_len > l);
    mvcc__lindex(l, idx, key, key_len);
    int rc = mvcc__seek_at(kvl, idx, l, false, rev, &k, &v);
    for (; rc == 0; rc = backend_cursor_next(kvl, &k, &v)) {
        if (!mvcc__same_ukey(&k, idx, l))
            return ERR_NOTFOUND;
        rc = mvcc__entry_decode(&k, &v, NULL, true, out, tomb_out);
        if (rc != 0)
            return rc;
        if (same_key(out, key, key_len))
            return revc == NULL ? 0
                                : mvcc__entry_decode(&k, &v, revc, true, out,
                                                     tomb_out);
    }
    return rc;
}

/* seen tells whether key already has an entry in b->v[from, n). */
static bool seen(const struct mvcc_lbuf *b, size_t from,
                 const struct mvcc_kv *kv)
{
    for (size_t i = from; i < b->n; i++)
        if (same_key(&b->v[i].kv, kv->key, kv->key_len))
            return true;
    return false;
}

int mvcc__idx_gather(size_t l, struct backend_cursor *kvl,
                     const uint8_t *idx, mvcc_rev rev,
                     struct backend_cursor *revc, struct mvcc_lbuf *buf,
                     struct backend_val *k)
{
    struct backend_val v;
    size_t from = buf->n;
    CHECK(kvl != NULL && rev >= 0);
    int rc = mvcc__seek_at(kvl, idx, l, false, rev, k, &v);
    for (; rc == 0; rc = backend_cursor_next(kvl, k, &v)) {
        struct mvcc_kv kv;
        bool tomb;
        if (!mvcc__same_ukey(k, idx, l))
            return 0;
        rc = mvcc__entry_decode(k, &v, NULL, true, &kv, &tomb);
        /* versions of one key follow each other, newest first: only a
         * collision makes the seen() search look at more than one */
        if (rc == 0 && from < buf->n &&
            same_key(&buf->v[buf->n - 1].kv, kv.key, kv.key_len))
            continue;
        if (rc == 0 && seen(buf, from, &kv))
            continue;
        if (rc == 0 && revc != NULL && !tomb) /* the value, from the log */
            rc = mvcc__entry_decode(k, &v, revc, true, &kv, &tomb);
        if (rc == 0)
            rc = mvcc__lbuf_push(buf, &kv, tomb);
        if (rc != 0)
            return rc;
    }
    return rc;
}

int mvcc__group_gather(size_t l, struct backend_cursor *kvl,
                       struct backend_val *k, mvcc_rev rev,
                       struct backend_cursor *revc, struct mvcc_lbuf *buf,
                       bool *end)
{
    uint8_t q[MVCC_CKEY_MAX], idx[MVCC_CKEY_MAX];
    size_t p = l - MVCC_HASH_LEN;
    int rc = 0;
    CHECK(kvl != NULL && end != NULL);
    if (k->len != l + MVCC_SUFFIX)
        return ERR_CORRUPT;
    memcpy(q, k->data, p);
    while (rc == 0 && memcmp(k->data, q, p) == 0) {
        memcpy(idx, k->data, l);
        rc = mvcc__idx_gather(l, kvl, idx, rev, revc, buf, k);
        if (rc == 0 && k->len != l + MVCC_SUFFIX)
            return ERR_CORRUPT;
    }
    *end = rc == ERR_NOTFOUND;
    return *end ? 0 : rc;
}

static int lent_cmp(const void *a, const void *b)
{
    const struct mvcc_kv *x = &((const struct mvcc_lent *)a)->kv;
    const struct mvcc_kv *y = &((const struct mvcc_lent *)b)->kv;
    return mvcc__bytes_cmp(x->key, x->key_len, y->key, y->key_len);
}

void mvcc__lbuf_sort(struct mvcc_lbuf *buf)
{
    if (buf->n > 1)
        qsort(buf->v, buf->n, sizeof *buf->v, lent_cmp);
}
