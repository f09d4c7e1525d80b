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

/* seek_key builds in buf (MVCC_CKEY_MAX + 1 bytes) the composite key
 * that mvcc__seek_at seeks to; returns its length. */
static size_t seek_key(uint8_t *buf, const uint8_t *u, size_t ul, bool after,
                       mvcc_rev rev)
{
    CHECK(ul + MVCC_SUFFIX + 1 <= MVCC_CKEY_MAX + 1 && rev >= 0);
    memcpy(buf, u, ul);
    if (after)
        buf[ul++] = 0; /* u + "\0" is the smallest key greater than u */
    mvcc__put_be64(buf + ul, ~(uint64_t)rev);
    mvcc__put_be64(buf + ul + 8, ~(uint64_t)INT64_MAX);
    buf[ul + 16] = 0;
    return ul + MVCC_SUFFIX;
}

int mvcc__seek_at(struct backend_cursor *c, const uint8_t *u, size_t ul,
                  bool after, mvcc_rev rev, struct backend_val *k,
                  struct backend_val *v)
{
    uint8_t buf[MVCC_CKEY_MAX + 1];
    size_t n = seek_key(buf, u, ul, after, rev);
    return backend_cursor_seek(c, buf, n, k, v);
}

int mvcc__iseek_at(struct mvcc_icur *ic, const uint8_t *u, size_t ul,
                   bool after, mvcc_rev rev, struct backend_val *k,
                   struct backend_val *v)
{
    uint8_t buf[MVCC_CKEY_MAX + 1];
    size_t n = seek_key(buf, u, ul, after, rev);
    return mvcc__ic_seek(ic, buf, n, k, v);
}

/* next_key moves c from a version of u to the first entry of the next
 * user key.  u must stay valid (it points into the txn's pages or the
 * read's overlay). */
static int next_key(struct mvcc_icur *c, const uint8_t *u, size_t ul,
                    mvcc_rev rev, struct backend_val *k,
                    struct backend_val *v)
{
    for (int i = 0; i < SKIP_NEXTS; i++) {
        int rc = mvcc__ic_next(c, k, v);
        if (rc != 0 || !mvcc__same_ukey(k, u, ul))
            return rc;
    }
    return mvcc__iseek_at(c, u, ul, true, rev, k, v);
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

/* emit appends the live version under the cursor to res, its value read
 * through revc (NULL: keys only). */
static int emit(struct mvcc_range_result *res, const struct backend_val *k,
                const struct backend_val *v, struct backend_cursor *revc)
{
    int rc = mvcc__result_grow(res);
    if (rc != 0)
        return rc;
    bool tomb;
    struct mvcc_kv *kv = &res->kvs[res->n_kvs];
    rc = mvcc__entry_decode(k, v, revc, false, kv, &tomb);
    if (rc != 0)
        return rc;
    CHECK(!tomb);
    res->n_kvs++;
    return 0;
}

/* The short keys of a range, from `kv`, one live version at a time. */
struct sstream {
    struct mvcc_icur *c;        /* on the key index */
    const struct mvcc_span *sp; /* the range */
    mvcc_rev rev;               /* the revision read */
    struct backend_val k, v;    /* the current live version (if has) */
    size_t ul;                  /* its user key's length */
    bool has;                   /* k/v hold one */
};

/* short_settle finds, from the entry the last move (result rc) left in
 * st->k, the first live version in the span. */
static int short_settle(struct sstream *st, int rc)
{
    const struct mvcc_span *sp = st->sp;
    st->has = false;
    while (rc == 0) {
        mvcc_rev main;
        int64_t sub;
        int kind;
        rc = mvcc__ckey_parse(&st->k, &st->ul, &main, &sub, &kind);
        if (rc != 0 || !mvcc__span_has(sp, st->k.data, st->ul))
            break;
        if (main > st->rev) { /* a version newer than rev: jump below it */
            rc = mvcc__iseek_at(st->c, st->k.data, st->ul, false, st->rev,
                                &st->k, &st->v);
            continue;
        }
        if (kind == MVCC_KIND_PUT) {
            st->has = true;
            return 0;
        }
        if (sp->single)
            break;
        rc = next_key(st->c, st->k.data, st->ul, st->rev, &st->k, &st->v);
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}

static int short_start(struct sstream *st)
{
    const struct mvcc_span *sp = st->sp;
    uint8_t past[MVCC_CKEY_MAX];
    if (sp->key_len <= sp->short_max)
        return short_settle(st, mvcc__iseek_at(st->c, sp->key, sp->key_len,
                                               false, st->rev, &st->k,
                                               &st->v));
    if (sp->single)
        return 0; /* a long key is never in `kv` */
    /* A short key S >= a long key K iff S > K's first L bytes: seek past
     * every version of that L-byte key (the largest suffix). */
    memcpy(past, sp->key, sp->short_max);
    memset(past + sp->short_max, 0xff, MVCC_SUFFIX);
    return short_settle(st, mvcc__ic_seek(st->c, past,
                                          sp->short_max + MVCC_SUFFIX,
                                          &st->k, &st->v));
}

static int short_advance(struct sstream *st)
{
    CHECK(st->has);
    st->has = false;
    if (st->sp->single)
        return 0;
    return short_settle(st, next_key(st->c, st->k.data, st->ul, st->rev,
                                     &st->k, &st->v));
}

/* The long keys of a range, from `kvl`, a group at a time (mvcc_long.c). */
struct lstream {
    struct backend_cursor *c;   /* on `kvl` (NULL: no long key wanted) */
    const struct mvcc_span *sp; /* the range */
    mvcc_rev rev;               /* the revision read */
    struct backend_cursor *revc; /* values from `rev` (NULL: keys only) */
    struct mvcc_lbuf buf;       /* the live keys of the current group */
    size_t i;                   /* next entry of buf */
    struct backend_val k;       /* first entry of the next group */
    bool end;                   /* no group left */
};

/* long_filter keeps the live versions of buf inside the span, sorted. */
static void long_filter(struct lstream *ls)
{
    const struct mvcc_span *sp = ls->sp;
    size_t n = 0;
    for (size_t i = 0; i < ls->buf.n; i++) {
        const struct mvcc_kv *kv = &ls->buf.v[i].kv;
        if (!ls->buf.v[i].tomb &&
            mvcc__bytes_cmp(kv->key, kv->key_len, sp->key, sp->key_len) >= 0 &&
            mvcc__span_has(sp, kv->key, kv->key_len))
            ls->buf.v[n++] = ls->buf.v[i];
    }
    ls->buf.n = n;
    mvcc__lbuf_sort(&ls->buf);
}

/* long_fill makes ls->buf[ls->i] the next long key in the span, gathering
 * groups until one has some, or none is left. */
static int long_fill(struct lstream *ls)
{
    const struct mvcc_span *sp = ls->sp;
    size_t p = sp->short_max - MVCC_HASH_LEN;
    while (ls->i == ls->buf.n && !ls->end) {
        /* every key of the group is > its P-byte prefix */
        if (!sp->unbounded && !sp->single &&
            mvcc__bytes_cmp(ls->k.data, ls->k.len < p ? ls->k.len : p,
                            sp->end, sp->end_len) >= 0)
            ls->end = true;
        if (ls->end)
            break;
        ls->buf.n = ls->i = 0;
        int rc = mvcc__group_gather(sp->short_max, ls->c, &ls->k, ls->rev,
                                    ls->revc, &ls->buf, &ls->end);
        if (rc != 0)
            return rc;
        long_filter(ls);
    }
    return 0;
}

static int long_start(struct lstream *ls)
{
    const struct mvcc_span *sp = ls->sp;
    size_t p = sp->short_max - MVCC_HASH_LEN;
    ls->end = true;
    if (ls->c == NULL || (sp->single && sp->key_len <= sp->short_max))
        return 0;
    if (sp->single) { /* one long key: one index, not its whole group */
        struct mvcc_kv kv;
        bool tomb;
        int rc = mvcc__visible_long(sp->short_max, ls->c, sp->key,
                                    sp->key_len, ls->rev, ls->revc, &kv,
                                    &tomb);
        if (rc == 0 && !tomb)
            rc = mvcc__lbuf_push(&ls->buf, &kv, false);
        return rc == ERR_NOTFOUND ? 0 : rc;
    }
    int rc = mvcc__seek_at(ls->c, sp->key, sp->key_len < p ? sp->key_len : p,
                           false, ls->rev, &ls->k, NULL);
    ls->end = rc == ERR_NOTFOUND;
    if (rc != 0)
        return ls->end ? 0 : rc;
    return long_fill(ls);
}

/* take_long tells whether the long stream's key comes first. */
static bool take_long(const struct sstream *ss, const struct lstream *ls)
{
    if (ls->i == ls->buf.n)
        return false;
    if (!ss->has)
        return true;
    const struct mvcc_kv *kv = &ls->buf.v[ls->i].kv;
    return mvcc__bytes_cmp(kv->key, kv->key_len, ss->k.data, ss->ul) < 0;
}

/* scan_merge walks both streams in key order; *count_out = live keys. */
static int scan_merge(struct sstream *ss,
                      struct lstream *ls, int64_t limit, unsigned flags,
                      struct backend_cursor *revc,
                      struct mvcc_range_result *res, int64_t *count_out)
{
    bool want = !(flags & MVCC_RANGE_COUNT_ONLY);
    int64_t count = 0;
    int rc = short_start(ss);
    if (rc == 0)
        rc = long_start(ls);
    bool stop = (flags & MVCC__RANGE_NO_COUNT) && limit > 0;
    while (rc == 0 && (ss->has || ls->i < ls->buf.n)) {
        if (stop && count == limit) {
            count++; /* one more is there: res->more */
            break;
        }
        bool out = want && (limit <= 0 || count < limit);
        count++;
        if (take_long(ss, ls)) {
            if (out && (rc = mvcc__result_grow(res)) == 0)
                res->kvs[res->n_kvs++] = ls->buf.v[ls->i].kv;
            ls->i++;
            if (rc == 0)
                rc = long_fill(ls);
            continue;
        }
        if (out)
            rc = emit(res, &ss->k, &ss->v, revc);
        if (rc == 0)
            rc = short_advance(ss);
    }
    *count_out = count;
    return rc;
}

int mvcc__scan(struct mvcc_icur *kv, struct backend_cursor *kvl,
               struct backend_cursor *revc, const struct mvcc_span *sp,
               mvcc_rev rev, int64_t limit, unsigned flags,
               struct mvcc_range_result *res)
{
    CHECK(kv != NULL && sp != NULL && res != NULL && rev >= 1);
    CHECK(kvl != NULL || (sp->single && sp->key_len <= sp->short_max));
    if (flags & (MVCC_RANGE_KEYS_ONLY | MVCC_RANGE_COUNT_ONLY))
        revc = NULL;
    else
        CHECK(revc != NULL);
    struct sstream ss = {.c = kv, .sp = sp, .rev = rev};
    struct lstream ls = {.c = kvl, .sp = sp, .rev = rev, .revc = revc};
    int64_t count = 0;
    res->n_kvs = 0;
    int rc = scan_merge(&ss, &ls, limit, flags, revc, res, &count);
    mem_free(ls.buf.v);
    if (rc != 0) {
        res->n_kvs = 0;
        return rc;
    }
    CHECK(limit <= 0 || (int64_t)res->n_kvs <= limit);
    res->count = count;
    res->more = limit > 0 && count > limit;
    res->rev = rev;
    return 0;
}

int mvcc__visible(struct mvcc_icur *kv, const void *key, size_t key_len,
                  mvcc_rev rev, struct backend_cursor *revc,
                  struct mvcc_kv *out, bool *tomb_out)
{
    CHECK(kv != NULL && key_len > 0);
    struct backend_val k, v;
    int rc = mvcc__iseek_at(kv, key, key_len, false, rev, &k, &v);
    if (rc != 0)
        return rc;
    if (!mvcc__same_ukey(&k, key, key_len))
        return ERR_NOTFOUND;
    return mvcc__entry_decode(&k, &v, revc, false, out, tomb_out);
}

static int lazy_cursor(struct mvcc_read *r, backend_bucket b,
                       struct backend_cursor **c)
{
    if (*c != NULL)
        return 0;
    return backend_cursor_open(r->txn, b, c);
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

int mvcc__range(struct mvcc_read *r, const void *key, size_t key_len,
                const void *end, size_t end_len, mvcc_rev rev, int64_t limit,
                unsigned flags, struct mvcc_range_result *res)
{
    CHECK(r != NULL && res != NULL);
    struct mvcc_span sp;
    res->n_kvs = 0;
    int rc = mvcc__span_init(&sp, r->s, key, key_len, end, end_len);
    if (rc == 0)
        rc = rev_resolve(r, &rev);
    /* a single short key is never in `kvl`: no cursor (nor seek) there */
    if (rc == 0 && !(sp.single && key_len <= sp.short_max))
        rc = lazy_cursor(r, r->s->kvl, &r->kvl);
    bool values = !(flags & (MVCC_RANGE_KEYS_ONLY | MVCC_RANGE_COUNT_ONLY));
    if (rc == 0 && values)
        rc = lazy_cursor(r, r->s->rev, &r->revv);
    if (rc != 0)
        return rc;
    return mvcc__scan(&r->kv, r->kvl, values ? r->revv : NULL, &sp, rev,
                      limit, flags, res);
}

int mvcc_range(struct mvcc_read *r, const void *key, size_t key_len,
               const void *end, size_t end_len, mvcc_rev rev, int64_t limit,
               unsigned flags, struct mvcc_range_result *res)
{
    metrics_inc(&mvcc_metrics.range);
    return mvcc__range(r, key, key_len, end, end_len, rev, limit, flags, res);
}

void mvcc_range_result_close(struct mvcc_range_result *res)
{
    if (res == NULL)
        return;
    mem_free(res->kvs);
    memset(res, 0, sizeof *res);
}

/* --- events ---------------------------------------------------------- */

/* long_prev finds, after the version of long key u under the cursor,
 * the key's previous version (*found false if none is left, or if it is a
 * deletion), its value read through revv. */
static int long_prev(struct backend_cursor *kvl, struct backend_cursor *revv,
                     const uint8_t *idx, size_t l, const uint8_t *u,
                     size_t ul, struct mvcc_kv *prev, bool *found)
{
    struct backend_val k, v;
    bool tomb;
    int rc;
    *found = false;
    while ((rc = backend_cursor_next(kvl, &k, &v)) == 0 &&
           mvcc__same_ukey(&k, idx, l)) {
        rc = mvcc__entry_decode(&k, &v, NULL, true, prev, &tomb);
        if (rc != 0)
            return rc;
        if (prev->key_len == ul && memcmp(prev->key, u, ul) == 0) {
            *found = !tomb;
            return tomb ? 0
                        : mvcc__entry_decode(&k, &v, revv, true, prev, &tomb);
        }
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* prev_fill fills ev->prev_kv (decoded from the log) with the version of
 * its key before it, if that is a put still stored: found through the
 * index (c: the merged index, or the `kvl` cursor alone for a long key;
 * l the store's L), its value read through revv. */
static int prev_fill(struct mvcc_icur *c, struct backend_cursor *revv,
                     size_t l, struct mvcc_event *ev)
{
    uint8_t buf[MVCC_CKEY_MAX];
    const uint8_t *u = ev->kv.key;
    size_t ul = ev->kv.key_len;
    bool tomb = false, lg = ul > l, found = true;
    int kind = ev->type == MVCC_EVENT_DELETE ? MVCC_KIND_TOMB : MVCC_KIND_PUT;
    size_t n = lg ? (mvcc__lindex(l, buf, u, ul), l) : ul;
    n = mvcc__ckey(buf, lg ? buf : u, n, ev->kv.mod_rev, ev->sub_rev, kind);
    struct backend_val k, v;
    int rc = mvcc__ic_seek(c, buf, n, &k, &v);
    if (rc == ERR_NOTFOUND || (rc == 0 && (k.len != n ||
                                           memcmp(k.data, buf, n) != 0)))
        return ERR_CORRUPT; /* the log names a version the index lacks */
    if (rc == 0 && lg) {
        CHECK(c->ovl == NULL); /* long keys: `kvl` alone */
        rc = long_prev(c->db, revv, buf, l, u, ul, &ev->prev_kv, &found);
    } else if (rc == 0) {
        rc = mvcc__ic_next(c, &k, &v);
        found = rc == 0 && mvcc__same_ukey(&k, u, ul);
        if (found)
            rc = mvcc__entry_decode(&k, &v, revv, false, &ev->prev_kv, &tomb);
        else if (rc == ERR_NOTFOUND)
            rc = 0;
    }
    if (rc == 0 && (!found || tomb))
        memset(&ev->prev_kv, 0, sizeof ev->prev_kv);
    return rc;
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
    struct mvcc_scan sc = {.start_rev = start_rev,
                           .key = key,
                           .key_len = key_len,
                           .end = end,
                           .end_len = end_len,
                           .max_events = max_events,
                           .want_prev = want_prev};
    return mvcc_events_scan(r, &sc, fn, arg, next_rev_out);
}

int mvcc_events_scan(struct mvcc_read *r, struct mvcc_scan *sc,
                     mvcc_event_fn fn, void *arg, mvcc_rev *next_rev_out)
{
    CHECK(r != NULL && sc != NULL && fn != NULL && next_rev_out != NULL);
    static const uint8_t zero = 0;
    struct mvcc_span sp;
    sc->walked = 0;
    mvcc_rev start_rev = sc->start_rev < 1 ? 1 : sc->start_rev;
    if (start_rev < r->compact)
        return ERR_COMPACTED;
    int rc = mvcc__span_init(&sp, r->s, sc->key_len ? sc->key : &zero,
                             sc->key_len ? sc->key_len : 1, sc->end,
                             sc->end_len);
    if (rc == 0)
        rc = lazy_cursor(r, r->s->rev, &r->revc);
    if (rc == 0 && sc->want_prev)
        rc = lazy_cursor(r, r->s->rev, &r->revv);
    if (rc != 0)
        return rc;
    uint8_t rk[MVCC_REVKEY_LEN];
    mvcc__put_be64(rk, (uint64_t)start_rev);
    mvcc__put_be64(rk + 8, 0);
    struct backend_val k, v;
    size_t n = 0, walked = 0;
    mvcc_rev main = 0, last = 0;
    rc = backend_cursor_seek(r->revc, rk, sizeof rk, &k, &v);
    for (; rc == 0; rc = backend_cursor_next(r->revc, &k, &v)) {
        struct mvcc_event ev;
        if ((rc = mvcc__log_decode(&k, &v, &ev)) != 0)
            return rc;
        main = ev.kv.mod_rev;
        if (main > r->rev)
            break;
        /* Stop only between revisions: a revision is never split. */
        if (main != last &&
            ((sc->max_events > 0 && n >= sc->max_events) ||
             (sc->max_walk > 0 && walked >= sc->max_walk)))
            break;
        last = main;
        sc->walked = ++walked;
        if (!span_contains(&sp, ev.kv.key, ev.kv.key_len))
            continue;
        if (sc->want_prev) {
            bool lg = ev.kv.key_len > sp.short_max;
            if (lg && (rc = lazy_cursor(r, r->s->kvl, &r->kvl)) != 0)
                return rc;
            struct mvcc_icur lc = {.db = r->kvl};
            rc = prev_fill(lg ? &lc : &r->kv, r->revv, sp.short_max, &ev);
        }
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

/* hash_bucket extends *crc with every entry of c's bucket at or below
 * rev but the tombstones at the compact rev: compaction keeps those for a
 * watcher starting there (mvcc_compact.c), and they are not part of the
 * state a hash compares. */
static int hash_bucket(struct mvcc_icur *c, mvcc_rev rev,
                       mvcc_rev compact, uint32_t *crc)
{
    struct backend_val k, v;
    int rc;
    for (rc = mvcc__ic_first(c, &k, &v); rc == 0;
         rc = mvcc__ic_next(c, &k, &v)) {
        size_t ul;
        mvcc_rev main;
        int64_t sub;
        int kind;
        if ((rc = mvcc__ckey_parse(&k, &ul, &main, &sub, &kind)) != 0)
            return rc;
        if (main > rev || (main == compact && kind == MVCC_KIND_TOMB))
            continue;
        *crc = crc32c_extend(*crc, k.data, k.len);
        *crc = crc32c_extend(*crc, v.data, v.len);
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* hash_log extends *crc with the log's entries by the same rule: they
 * hold the values (the index entries hold the rest). */
static int hash_log(struct backend_cursor *c, mvcc_rev rev, mvcc_rev compact,
                    uint32_t *crc)
{
    struct backend_val k, v;
    int rc;
    for (rc = backend_cursor_first(c, &k, &v); rc == 0;
         rc = backend_cursor_next(c, &k, &v)) {
        struct mvcc_event ev;
        if ((rc = mvcc__log_decode(&k, &v, &ev)) != 0)
            return rc;
        if (ev.kv.mod_rev > rev)
            break;
        if (ev.kv.mod_rev == compact && ev.type == MVCC_EVENT_DELETE)
            continue;
        *crc = crc32c_extend(*crc, k.data, k.len);
        *crc = crc32c_extend(*crc, v.data, v.len);
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}

int mvcc_hash_kv(struct mvcc_read *r, mvcc_rev rev, uint32_t *hash_out,
                 mvcc_rev *compact_rev_out)
{
    CHECK(r != NULL && hash_out != NULL);
    uint32_t crc = 0;
    int rc = rev_resolve(r, &rev);
    if (rc == 0)
        rc = lazy_cursor(r, r->s->kvl, &r->kvl);
    struct mvcc_icur lc = {.db = r->kvl};
    if (rc == 0)
        rc = hash_bucket(&r->kv, rev, r->compact, &crc);
    if (rc == 0) /* long keys after short ones, in `kvl` order */
        rc = hash_bucket(&lc, rev, r->compact, &crc);
    if (rc == 0)
        rc = lazy_cursor(r, r->s->rev, &r->revc);
    if (rc == 0) /* then the records, values included, in revision order */
        rc = hash_log(r->revc, rev, r->compact, &crc);
    if (rc != 0)
        return rc;
    *hash_out = crc;
    if (compact_rev_out != NULL)
        *compact_rev_out = r->compact;
    return 0;
}

/* long_lease_keys calls fn for each live long key under index idx (of an
 * `lkey` long entry) that holds lease. */
static int long_lease_keys(struct mvcc_read *r, const uint8_t *idx,
                           int64_t lease, mvcc_key_fn fn, void *arg)
{
    struct mvcc_lbuf buf = {0};
    struct backend_val k;
    int rc = lazy_cursor(r, r->s->kvl, &r->kvl);
    if (rc == 0)
        rc = mvcc__idx_gather(r->s->short_max, r->kvl, idx, INT64_MAX, NULL,
                              &buf, &k);
    rc = rc == ERR_NOTFOUND ? 0 : rc;
    for (size_t i = 0; rc == 0 && i < buf.n; i++)
        if (!buf.v[i].tomb && buf.v[i].kv.lease == lease)
            rc = fn(arg, buf.v[i].kv.key, buf.v[i].kv.key_len);
    mem_free(buf.v);
    return rc;
}

int mvcc_lease_keys(struct mvcc_read *r, int64_t lease, mvcc_key_fn fn,
                    void *arg)
{
    CHECK(r != NULL && fn != NULL);
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
        const uint8_t *u = (const uint8_t *)k.data + sizeof pfx;
        size_t ul = k.len - sizeof pfx, l = r->s->short_max;
        if (ul > l + 1 || (ul == l + 1 && u[l] != 0))
            return ERR_CORRUPT;
        rc = ul <= l ? fn(arg, u, ul) : long_lease_keys(r, u, lease, fn, arg);
        if (rc != 0)
            return rc;
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* --- the whole revision log (mvcc_hash.c) ------------------------------ */

int mvcc__rev_walk(struct mvcc_read *r, mvcc_rev to, mvcc_event_fn fn,
                   void *arg)
{
    int rc = lazy_cursor(r, r->s->rev, &r->revc);
    if (rc != 0)
        return rc;
    struct backend_val k, v;
    for (rc = backend_cursor_first(r->revc, &k, &v); rc == 0;
         rc = backend_cursor_next(r->revc, &k, &v)) {
        struct mvcc_event ev;
        if ((rc = mvcc__log_decode(&k, &v, &ev)) != 0)
            return rc;
        if (ev.kv.mod_rev > to)
            return 0;
        if ((rc = fn(arg, &ev)) != 0)
            return rc;
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}
