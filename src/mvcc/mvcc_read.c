/*
 * mvcc_read.c - reading the store: ranges at a revision, history replay
 * (events), HashKV and the lease -> keys index.
 *
 * A range walks the `kv` bucket, whose entries sort by user key then by
 * revision descending (mvcc_int.h).  For each user key the walk needs the
 * newest version <= rev: a seek to (key, ~rev) lands on it directly.  From
 * there the next user key is reached by stepping over the key's older
 * versions with a few cursor nexts (cheap, same page), or, for keys with a
 * long history, by one seek past the key.  Tombstones are recognised from
 * the key alone, so counting never reads value pages.
 */
#include "mvcc/mvcc_int.h"

#include "util/crc32c.h"
#include "util/err.h"
#include "util/mem.h"

/* Versions stepped over with cursor nexts before seeking past a key. */
#define SKIP_NEXTS 4

/* seek_at moves c to the newest version <= rev of user key u (after =
 * false) or of the smallest key > u (after = true), or past that to the
 * next user key's entries when there is none. */
static int seek_at(struct backend_cursor *c, const uint8_t *u, size_t ul,
                   bool after, mvcc_rev rev, struct backend_val *k,
                   struct backend_val *v)
{
    uint8_t buf[MVCC_CKEY_MAX + 1];
    assert(ul + MVCC_SUFFIX + 1 <= sizeof buf && rev >= 0);
    memcpy(buf, u, ul);
    if (after)
        buf[ul++] = 0; /* u + "\0" is the smallest key greater than u */
    mvcc__put_be64(buf + ul, ~(uint64_t)rev);
    mvcc__put_be64(buf + ul + 8, ~(uint64_t)INT64_MAX);
    buf[ul + 16] = 0;
    return backend_cursor_seek(c, buf, ul + MVCC_SUFFIX, k, v);
}

static bool same_user_key(const struct backend_val *k, const uint8_t *u,
                          size_t ul)
{
    return k->len == ul + MVCC_SUFFIX && memcmp(k->data, u, ul) == 0;
}

/* next_key moves c from a version of u to the first entry of the next
 * user key.  u must stay valid (it points into the txn's pages). */
static int next_key(struct backend_cursor *c, const uint8_t *u, size_t ul,
                    mvcc_rev rev, struct backend_val *k,
                    struct backend_val *v)
{
    for (int i = 0; i < SKIP_NEXTS; i++) {
        int rc = backend_cursor_next(c, k, v);
        if (rc != 0 || !same_user_key(k, u, ul))
            return rc;
    }
    return seek_at(c, u, ul, true, rev, k, v);
}

int mvcc__result_grow(struct mvcc_range_result *res)
{
    struct mvcc_kv *kvs =
        mem_grow(res->kvs, &res->cap, res->n_kvs, sizeof *kvs, 16);
    if (kvs == NULL)
        return ERR_NOMEM;
    res->kvs = kvs;
    return 0;
}

/* emit appends the live version under the cursor to res. */
static int emit(struct mvcc_range_result *res, const struct backend_val *k,
                const struct backend_val *v, unsigned flags)
{
    int rc = mvcc__result_grow(res);
    if (rc != 0)
        return rc;
    bool tomb;
    struct mvcc_kv *kv = &res->kvs[res->n_kvs];
    rc = mvcc__entry_decode(k, v, flags & MVCC_RANGE_KEYS_ONLY, kv, &tomb);
    if (rc != 0)
        return rc;
    assert(!tomb);
    res->n_kvs++;
    return 0;
}

int mvcc__scan(struct backend_cursor *kv, const struct mvcc_span *sp,
               mvcc_rev rev, int64_t limit, unsigned flags,
               struct mvcc_range_result *res)
{
    assert(kv != NULL && sp != NULL && res != NULL && rev >= 1);
    bool want = !(flags & MVCC_RANGE_COUNT_ONLY);
    struct backend_val k, v;
    int64_t count = 0;
    res->n_kvs = 0;
    int rc = seek_at(kv, sp->key, sp->key_len, false, rev, &k, &v);
    while (rc == 0) {
        size_t ul;
        mvcc_rev main;
        int64_t sub;
        int kind;
        rc = mvcc__ckey_parse(&k, &ul, &main, &sub, &kind);
        if (rc != 0 || !mvcc__span_has(sp, k.data, ul))
            break;
        if (main > rev) { /* a version newer than rev: jump below it */
            rc = seek_at(kv, k.data, ul, false, rev, &k, &v);
            continue;
        }
        if (kind == MVCC_KIND_PUT) {
            count++;
            if (want && (limit <= 0 || count <= limit))
                rc = emit(res, &k, &v, flags);
            if (rc != 0)
                break;
        }
        if (sp->single)
            break;
        rc = next_key(kv, k.data, ul, rev, &k, &v);
    }
    if (rc != 0 && rc != ERR_NOTFOUND) {
        res->n_kvs = 0;
        return rc;
    }
    assert(limit <= 0 || (int64_t)res->n_kvs <= limit);
    res->count = count;
    res->more = limit > 0 && count > limit;
    res->rev = rev;
    return 0;
}

int mvcc__visible(struct backend_cursor *kv, const void *key, size_t key_len,
                  mvcc_rev rev, bool keys_only, struct mvcc_kv *out,
                  bool *tomb_out)
{
    assert(kv != NULL && key_len > 0);
    struct backend_val k, v;
    int rc = seek_at(kv, key, key_len, false, rev, &k, &v);
    if (rc != 0)
        return rc;
    if (!same_user_key(&k, key, key_len))
        return ERR_NOTFOUND;
    return mvcc__entry_decode(&k, &v, keys_only, out, tomb_out);
}

/* rev_resolve turns *rev into the revision a read of r serves (<= 0: r's
 * own) and checks that r can see it: ERR_FUTURE_REV, ERR_COMPACTED. */
static int rev_resolve(const struct mvcc_read *r, mvcc_rev *rev)
{
    if (*rev <= 0)
        *rev = r->rev;
    if (*rev > r->rev)
        return ERR_FUTURE_REV;
    if (*rev < r->compact)
        return ERR_COMPACTED;
    return 0;
}

int mvcc_range(struct mvcc_read *r, const void *key, size_t key_len,
               const void *end, size_t end_len, mvcc_rev rev, int64_t limit,
               unsigned flags, struct mvcc_range_result *res)
{
    assert(r != NULL && res != NULL);
    struct mvcc_span sp;
    res->n_kvs = 0;
    int rc = mvcc__span_init(&sp, r->s, key, key_len, end, end_len);
    if (rc == 0)
        rc = rev_resolve(r, &rev);
    if (rc != 0)
        return rc;
    return mvcc__scan(r->kv, &sp, rev, limit, flags, res);
}

void mvcc_range_result_close(struct mvcc_range_result *res)
{
    if (res == NULL)
        return;
    mem_free(res->kvs);
    memset(res, 0, sizeof *res);
}

/* --- events ---------------------------------------------------------- */

static int lazy_cursor(struct mvcc_read *r, backend_bucket b,
                       struct backend_cursor **c)
{
    if (*c != NULL)
        return 0;
    return backend_cursor_open(r->txn, b, c);
}

/* event_fill loads the kv entry of revision (main, sub) of user key u and,
 * with want_prev, the version before it. */
static int event_fill(struct backend_cursor *kvc, const uint8_t *u, size_t ul,
                      mvcc_rev main, int64_t sub, int kind, bool want_prev,
                      struct mvcc_event *ev)
{
    uint8_t buf[MVCC_CKEY_MAX];
    size_t n = mvcc__ckey(buf, u, ul, main, sub, kind);
    struct backend_val k, v;
    bool tomb;
    int rc = backend_cursor_seek(kvc, buf, n, &k, &v);
    if (rc != 0 || k.len != n || memcmp(k.data, buf, n) != 0)
        return ERR_CORRUPT; /* the rev log names a version kv lacks */
    memset(ev, 0, sizeof *ev);
    rc = mvcc__entry_decode(&k, &v, false, &ev->kv, &tomb);
    if (rc != 0)
        return rc;
    ev->type = tomb ? MVCC_EVENT_DELETE : MVCC_EVENT_PUT;
    ev->sub_rev = sub;
    if (!want_prev)
        return 0;
    rc = backend_cursor_next(kvc, &k, &v);
    if (rc == ERR_NOTFOUND || (rc == 0 && !same_user_key(&k, u, ul)))
        return 0;
    if (rc == 0)
        rc = mvcc__entry_decode(&k, &v, false, &ev->prev_kv, &tomb);
    if (rc == 0 && tomb)
        memset(&ev->prev_kv, 0, sizeof ev->prev_kv);
    return rc;
}

/* rev_entry_parse splits a `rev` bucket entry. */
static int rev_entry_parse(const struct backend_val *k,
                           const struct backend_val *v, mvcc_rev *main,
                           int64_t *sub, int *kind)
{
    if (k->len != MVCC_REVKEY_LEN || v->len < 2)
        return ERR_CORRUPT;
    uint64_t m = mvcc__get_be64(k->data);
    uint64_t sb = mvcc__get_be64((const uint8_t *)k->data + 8);
    int kd = ((const uint8_t *)v->data)[0];
    if (m == 0 || m > INT64_MAX || sb > INT64_MAX || kd > MVCC_KIND_TOMB)
        return ERR_CORRUPT;
    *main = (mvcc_rev)m;
    *sub = (int64_t)sb;
    *kind = kd;
    return 0;
}

static bool span_contains(const struct mvcc_span *sp, const uint8_t *u,
                          size_t ul)
{
    if (mvcc__bytes_cmp(u, ul, sp->key, sp->key_len) < 0)
        return false;
    return mvcc__span_has(sp, u, ul);
}

int mvcc_events_read(struct mvcc_read *r, mvcc_rev start_rev,
                     const void *key, size_t key_len, const void *end,
                     size_t end_len, size_t max_events, bool want_prev,
                     mvcc_event_fn fn, void *arg, mvcc_rev *next_rev_out)
{
    assert(r != NULL && fn != NULL && next_rev_out != NULL);
    static const uint8_t zero = 0;
    struct mvcc_span sp;
    if (start_rev < 1)
        start_rev = 1;
    if (start_rev < r->compact)
        return ERR_COMPACTED;
    int rc = mvcc__span_init(&sp, r->s, key_len ? key : &zero,
                             key_len ? key_len : 1, end, end_len);
    if (rc == 0)
        rc = lazy_cursor(r, r->s->rev, &r->revc);
    if (rc != 0)
        return rc;
    uint8_t rk[MVCC_REVKEY_LEN];
    mvcc__put_be64(rk, (uint64_t)start_rev);
    mvcc__put_be64(rk + 8, 0);
    struct backend_val k, v;
    size_t n = 0;
    mvcc_rev main = 0, last = 0;
    rc = backend_cursor_seek(r->revc, rk, sizeof rk, &k, &v);
    for (; rc == 0; rc = backend_cursor_next(r->revc, &k, &v)) {
        int64_t sub;
        int kind;
        if ((rc = rev_entry_parse(&k, &v, &main, &sub, &kind)) != 0)
            return rc;
        if (main > r->rev || (max_events > 0 && n >= max_events &&
                              main != last))
            break;
        last = main;
        const uint8_t *u = (const uint8_t *)v.data + 1;
        if (!span_contains(&sp, u, v.len - 1))
            continue;
        struct mvcc_event ev;
        rc = event_fill(r->kv, u, v.len - 1, main, sub, kind, want_prev, &ev);
        if (rc == 0)
            rc = fn(arg, &ev);
        if (rc != 0)
            return rc;
        n++;
    }
    if (rc != 0 && rc != ERR_NOTFOUND)
        return rc;
    *next_rev_out = rc == 0 && main <= r->rev ? main : r->rev + 1;
    return 0;
}

/* --- hash, lease keys ------------------------------------------------ */

int mvcc_hash_kv(struct mvcc_read *r, mvcc_rev rev, uint32_t *hash_out,
                 mvcc_rev *compact_rev_out)
{
    assert(r != NULL && hash_out != NULL);
    int rc = rev_resolve(r, &rev);
    if (rc != 0)
        return rc;
    uint32_t crc = 0;
    struct backend_val k, v;
    for (rc = backend_cursor_first(r->kv, &k, &v); rc == 0;
         rc = backend_cursor_next(r->kv, &k, &v)) {
        size_t ul;
        mvcc_rev main;
        int64_t sub;
        int kind;
        if ((rc = mvcc__ckey_parse(&k, &ul, &main, &sub, &kind)) != 0)
            return rc;
        if (main > rev)
            continue;
        crc = crc32c_extend(crc, k.data, k.len);
        crc = crc32c_extend(crc, v.data, v.len);
    }
    if (rc != ERR_NOTFOUND)
        return rc;
    *hash_out = crc;
    if (compact_rev_out != NULL)
        *compact_rev_out = r->compact;
    return 0;
}

int mvcc_lease_keys(struct mvcc_read *r, int64_t lease, mvcc_key_fn fn,
                    void *arg)
{
    assert(r != NULL && fn != NULL);
    int rc = lazy_cursor(r, r->s->lkey, &r->lk);
    if (rc != 0)
        return rc;
    uint8_t pfx[MVCC_LEASE_PREFIX];
    mvcc__put_be64(pfx, (uint64_t)lease);
    struct backend_val k;
    for (rc = backend_cursor_seek(r->lk, pfx, sizeof pfx, &k, NULL); rc == 0;
         rc = backend_cursor_next(r->lk, &k, NULL)) {
        if (k.len <= sizeof pfx || memcmp(k.data, pfx, sizeof pfx) != 0)
            return 0;
        rc = fn(arg, (const uint8_t *)k.data + sizeof pfx, k.len - sizeof pfx);
        if (rc != 0)
            return rc;
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}
