/*
 * mvcc_write.c - the write side: apply batches, request txns, put, delete,
 * ranges inside a write txn, lease deletion, and event collection.
 *
 * One batch = one LMDB write txn; the apply thread opens it, runs many
 * requests through it and commits it together with the consistent index.
 * Everything handed back to the caller (prev kvs, ranges, events) is
 * copied into the batch arena, because pointers into a write txn's pages
 * move with the next write.
 */
#include "mvcc/mvcc_int.h"

#include "util/err.h"
#include "util/mem.h"

#define CHUNK_MIN (64u << 10)

static const char state_key[] = "mvcc_state";

/* --- arena ----------------------------------------------------------- */

void *mvcc__arena_alloc(struct mvcc_arena *a, size_t len)
{
    len = (len + 7) & ~(size_t)7;
    struct mvcc_chunk *c = a->head;
    if (c == NULL || c->cap - c->used < len) {
        size_t cap = a->total > CHUNK_MIN ? a->total : CHUNK_MIN;
        if (cap < len)
            cap = len;
        c = mem_malloc(sizeof *c + cap);
        if (c == NULL)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
        a->total += cap;
    }
    void *p = (char *)(c + 1) + c->used;
    c->used += len;
    CHECK(c->used <= c->cap);
    return p;
}

void mvcc__arena_free(struct mvcc_arena *a)
{
    while (a->head != NULL) {
        struct mvcc_chunk *c = a->head;
        a->head = c->next;
        mem_free(c);
    }
    a->total = 0;
}

/* Reset keeps the newest (largest) chunk unless it exceeds the limit. */
void mvcc__arena_reset(struct mvcc_arena *a)
{
    struct mvcc_chunk *keep = a->head;
    if (keep == NULL)
        return;
    a->head = keep->next;
    mvcc__arena_free(a);
    if (keep->cap > a->keep) {
        mem_free(keep);
        return;
    }
    keep->used = 0;
    keep->next = NULL;
    a->head = keep;
    a->total = keep->cap;
}

/* copy_kv duplicates kv's bytes into the arena (dst may alias src). */
static int copy_kv(struct mvcc_arena *a, const struct mvcc_kv *src,
                   struct mvcc_kv *dst)
{
    uint8_t *p = mvcc__arena_alloc(a, src->key_len + src->value_len);
    if (p == NULL)
        return ERR_NOMEM;
    struct mvcc_kv kv = *src;
    memcpy(p, src->key, src->key_len);
    kv.key = p;
    if (src->value != NULL) {
        if (src->value_len > 0)
            memcpy(p + src->key_len, src->value, src->value_len);
        kv.value = p + src->key_len;
    }
    *dst = kv;
    return 0;
}

/* --- batch ----------------------------------------------------------- */

int mvcc__batch_fail(struct mvcc_batch *b, int err)
{
    CHECK(err < 0);
    if (b->err == 0)
        b->err = err;
    return b->err;
}

int mvcc_batch_begin(struct mvcc_store *s, struct mvcc_batch **out)
{
    CHECK(s != NULL && out != NULL);
    struct mvcc_batch *b = &s->batch;
    CHECK(!b->open);
    mvcc__arena_reset(&b->arena);
    b->s = s;
    b->n_events = 0;
    b->err = 0;
    b->keys_delta = 0;
    b->lk = NULL;
    b->kvl = NULL;
    b->revv = NULL;
    b->prev_values = atomic_load(&s->prev_values);
    b->n_added = 0;
    b->folded = false;
    b->compact_low = false; /* set by a compaction step (mvcc_compact.c) */
    b->next_ovl = NULL;
    b->round = s->round;
    int rc = backend_write_begin(s->be, &b->txn);
    if (rc != 0)
        return rc;
    b->kv = (struct mvcc_icur){.ovl = s->ovl};
    rc = backend_cursor_open(b->txn, s->kv, &b->kv.db);
    if (rc == 0)
        rc = backend_cursor_open(b->txn, s->rev, &b->revc);
    if (rc != 0) {
        backend_write_abort(b->txn);
        return rc;
    }
    b->st = s->st;
    b->t.open = false;
    b->open = true;
    *out = b;
    return 0;
}

/* batch_close ends the batch; unless it committed, the overlay entries
 * it linked are taken out again. */
static void batch_close(struct mvcc_batch *b, bool committed)
{
    struct mvcc_store *s = b->s;
    for (size_t i = b->n_added; !committed && i > 0; i--)
        mvcc__ovl_unlink(s->ovl, b->added[i - 1]);
    b->n_added = 0;
    if (!committed) {
        mvcc__ovl_unref(b->next_ovl);
    } else {
        s->round = b->round;
    }
    if (committed && b->next_ovl != NULL) {
        /* the fold is durable: readers of the new snapshot take the new
         * generation; the old one goes with its last reader */
        struct mvcc_ovl *old = s->ovl;
        b->next_ovl->base = s->st.fold_rev;
        pthread_mutex_lock(&s->pool_mu);
        s->ovl = b->next_ovl;
        pthread_mutex_unlock(&s->pool_mu);
        mvcc__ovl_unref(old);
    }
    b->next_ovl = NULL;
    b->folded = false;
    b->open = false;
    b->t.open = false;
    b->txn = NULL;
    b->kv = (struct mvcc_icur){0};
    b->revc = b->revv = b->lk = b->kvl = NULL; /* with the txn */
}

void mvcc_batch_abort(struct mvcc_batch *b)
{
    CHECK(b != NULL && b->open);
    backend_write_abort(b->txn);
    batch_close(b, false);
}

int mvcc_batch_commit(struct mvcc_batch *b, uint64_t consistent_index)
{
    CHECK(b != NULL && b->open && !b->t.open);
    CHECK(consistent_index >= b->st.ci);
    struct mvcc_store *s = b->s;
    uint8_t st[MVCC_STATE_LEN];
    int rc = b->err;
    if (rc == 0) /* a slice of a fold round (mvcc_ovl.c) */
        rc = mvcc__fold_slice(b);
    if (rc == 0) {
        b->st.ci = consistent_index;
        if (b->folded)
            b->st.fold_rev = b->st.rev;
        /* (a count gone negative could only be a bug: "not counted",
         * so the next open counts again, rather than a stop) */
        if (b->st.keys >= 0 && b->st.keys + b->keys_delta >= 0)
            b->st.keys += b->keys_delta;
        else
            b->st.keys = -1;
        mvcc__state_encode(st, &b->st);
        rc = backend_put(b->txn, s->meta, state_key, sizeof state_key - 1, st,
                         sizeof st);
    }
    static const uint8_t layout = MVCC_LAYOUT;
    if (rc == 0 && !s->formatted)
        rc = backend_put(b->txn, s->meta, mvcc__format_key,
                         strlen(mvcc__format_key), &layout, 1);
    if (rc != 0) {
        mvcc_batch_abort(b);
        return rc;
    }
    rc = backend_write_commit(b->txn);
    if (rc == 0)
        s->st = b->st;
    batch_close(b, rc == 0);
    if (rc != 0)
        return rc;
    s->formatted = true;
    atomic_store(&s->cur_rev, s->st.rev);
    atomic_store(&s->compact_rev, s->st.compact);
    atomic_store(&s->compact_fin, s->st.compact_fin);
    atomic_store(&s->ci, s->st.ci);
    atomic_store(&s->keys, s->st.keys);
    if (s->observer != NULL && b->n_events > 0)
        s->observer(s->observer_arg, b->events, b->n_events, s->st.rev);
    return 0;
}

struct backend_txn *mvcc_batch_backend_txn(struct mvcc_batch *b)
{
    CHECK(b != NULL && b->open);
    return b->txn;
}

/* mvcc__batch_kvl opens b's `kvl` cursor on first use (long keys are
 * rare: a batch of short keys never opens it). */
int mvcc__batch_kvl(struct mvcc_batch *b)
{
    CHECK(b->open);
    if (b->kvl != NULL)
        return 0;
    return backend_cursor_open(b->txn, b->s->kvl, &b->kvl);
}

int mvcc__batch_revv(struct mvcc_batch *b)
{
    CHECK(b->open);
    if (b->revv != NULL)
        return 0;
    return backend_cursor_open(b->txn, b->s->rev, &b->revv);
}

/* --- request txns ---------------------------------------------------- */

struct mvcc_metrics mvcc_metrics;

void mvcc_txn_note_range(struct mvcc_txn *t)
{
    CHECK(t != NULL && t->open);
    t->ranges++;
}

struct mvcc_txn *mvcc_txn_begin(struct mvcc_batch *b)
{
    CHECK(b != NULL && b->open && !b->t.open);
    struct mvcc_txn *t = &b->t;
    t->b = b;
    t->rev = b->st.rev + 1;
    t->sub = 0;
    t->open = true;
    t->ranges = t->puts = t->deletes = 0;
    return t;
}

mvcc_rev mvcc_txn_end(struct mvcc_txn *t)
{
    CHECK(t != NULL && t->open);
    struct mvcc_batch *b = t->b;
    CHECK(t->rev == b->st.rev + 1);
    if (t->sub > 0 && b->err == 0)
        b->st.rev = t->rev;
    t->open = false;
    metrics_add(&mvcc_metrics.range, t->ranges);
    metrics_add(&mvcc_metrics.put, t->puts);
    metrics_add(&mvcc_metrics.del, t->deletes);
    if ((uint64_t)t->ranges + t->puts + t->deletes > 1)
        metrics_inc(&mvcc_metrics.txn);
    return b->st.rev;
}

mvcc_rev mvcc_txn_rev(const struct mvcc_txn *t)
{
    return t->rev;
}

/* event_push records an event; prev (NULL: none) without its value
 * when the batch does not read prev values (prev_no_value). */
static int event_push(struct mvcc_batch *b, enum mvcc_event_type type,
                      const struct mvcc_kv *kv, int64_t sub,
                      const struct mvcc_kv *prev)
{
    struct mvcc_event *e =
        mem_grow(b->events, &b->cap_events, b->n_events, sizeof *e, 256);
    if (e == NULL)
        return ERR_NOMEM;
    b->events = e;
    struct mvcc_event *ev = &b->events[b->n_events++];
    memset(ev, 0, sizeof *ev);
    ev->type = type;
    ev->sub_rev = sub;
    ev->kv = *kv;
    if (prev != NULL) {
        ev->prev_kv = *prev;
        ev->prev_no_value = !b->prev_values;
        if (!b->prev_values) {
            ev->prev_kv.value = NULL;
            ev->prev_kv.value_len = 0;
        }
    }
    return 0;
}

/* lease_count adds delta to the `lkey` count of the long keys under
 * index idx that hold lease (the entry goes when it reaches 0). */
static int lease_count(struct mvcc_batch *b, const uint8_t *idx,
                       int64_t lease, int delta)
{
    size_t l = b->s->short_max, n = MVCC_LEASE_PREFIX + l + 1;
    uint8_t buf[MVCC_LEASE_PREFIX + MVCC_CKEY_MAX], cnt[8];
    struct backend_val v;
    mvcc__put_be64(buf, (uint64_t)lease);
    memcpy(buf + MVCC_LEASE_PREFIX, idx, l);
    buf[n - 1] = 0;
    int rc = backend_get(b->txn, b->s->lkey, buf, n, &v);
    if (rc != 0 && rc != ERR_NOTFOUND)
        return rc;
    if (rc == 0 && v.len != sizeof cnt)
        return ERR_CORRUPT;
    uint64_t c = rc == 0 ? mvcc__get_le64(v.data) : 0;
    if (delta < 0 && c <= 1) { /* also a missing one, as for short keys */
        rc = rc == 0 ? backend_del(b->txn, b->s->lkey, buf, n) : 0;
        return rc == ERR_NOTFOUND ? 0 : rc;
    }
    mvcc__put_le64(cnt, c + (uint64_t)(int64_t)delta);
    return backend_put(b->txn, b->s->lkey, buf, n, cnt, sizeof cnt);
}

/* lease_move keeps the `lkey` index in step with a key's lease. */
static int lease_move(struct mvcc_batch *b, const struct mvcc_kv *kv,
                      int64_t from, int64_t to)
{
    uint8_t buf[MVCC_LEASE_PREFIX + MVCC_CKEY_MAX];
    if (from == to)
        return 0;
    int rc = 0;
    if (kv->key_len > b->s->short_max) {
        mvcc__lindex(b->s->short_max, buf, kv->key, kv->key_len);
        if (from != 0)
            rc = lease_count(b, buf, from, -1);
        if (rc == 0 && to != 0)
            rc = lease_count(b, buf, to, 1);
        return rc;
    }
    memcpy(buf + MVCC_LEASE_PREFIX, kv->key, kv->key_len);
    size_t n = MVCC_LEASE_PREFIX + kv->key_len;
    if (from != 0) {
        mvcc__put_be64(buf, (uint64_t)from);
        rc = backend_del(b->txn, b->s->lkey, buf, n);
        rc = rc == ERR_NOTFOUND ? 0 : rc;
    }
    if (rc == 0 && to != 0) {
        mvcc__put_be64(buf, (uint64_t)to);
        rc = backend_put(b->txn, b->s->lkey, buf, n, "", 0);
    }
    return rc;
}

/* put_version writes the `kv` (or, for a long key, `kvl`) entry of kv at
 * (t->rev, t->sub). */
static int put_version(struct mvcc_txn *t, const struct mvcc_kv *kv,
                       bool tomb)
{
    struct mvcc_batch *b = t->b;
    uint8_t ck[MVCC_CKEY_MAX];
    int kind = tomb ? MVCC_KIND_TOMB : MVCC_KIND_PUT;
    size_t l = b->s->short_max, n;
    void *dst;
    bool lg = kv->key_len > l;
    if (lg) {
        int rc = mvcc__batch_kvl(b);
        if (rc != 0)
            return rc;
        mvcc__lindex(l, ck, kv->key, kv->key_len);
        n = mvcc__ckey(ck, ck, l, t->rev, t->sub, kind);
    } else {
        n = mvcc__ckey(ck, kv->key, kv->key_len, t->rev, t->sub, kind);
    }
    size_t vlen = lg ? MVCC_HDR_LONG + kv->key_len : MVCC_HDR;
    struct mvcc_ovl *o = b->s->ovl;
    if (!lg && !b->folded &&
        (o->n - b->round.folded >= 4 * mvcc__ovl_max ||
         o->bytes >= 4 * mvcc__ovl_max_bytes)) { /* a batch of many */
        int rc = mvcc__fold(b);
        if (rc != 0)
            return rc;
    }
    if (!lg && !b->folded) { /* the overlay (mvcc_ovl.c) */
        uint8_t val[MVCC_HDR];
        struct mvcc_onode **a = mem_grow(b->added, &b->cap_added,
                                         b->n_added, sizeof *a, 64);
        if (a == NULL)
            return ERR_NOMEM;
        b->added = a;
        mvcc__value_encode(val, kv, tomb, false);
        int rc = mvcc__ovl_insert(o, ck, n, val, sizeof val,
                                  &b->added[b->n_added++]);
        /* a round ended in b (a compaction's step before this write):
         * the generation it made, which b's commit installs, holds the
         * entries newer than its target, this one too */
        if (rc == 0 && b->next_ovl != NULL)
            rc = mvcc__ovl_insert(b->next_ovl, ck, n, val, sizeof val, NULL);
        return rc;
    }
    /* the cursor is at or near the key's latest version (mvcc__visible,
     * by every caller), on the page the new version goes to */
    int rc = backend_cursor_put_reserve(lg ? b->kvl : b->kv.db, ck, n, vlen,
                                        &dst);
    if (rc == 0)
        mvcc__value_encode(dst, kv, tomb, lg);
    return rc;
}

/* write_version stores kv (a put, or a tombstone of kv->key) at (t->rev,
 * t->sub) in `kv` or `kvl` and `rev`, moves its lease index entry, bumps
 * sub. */
int mvcc__write_version(struct mvcc_txn *t, const struct mvcc_kv *kv,
                        bool tomb, int64_t old_lease)
{
    struct mvcc_batch *b = t->b;
    uint8_t rk[MVCC_REVKEY_LEN];
    void *dst;
    int rc = put_version(t, kv, tomb);
    if (rc != 0)
        return rc;
    mvcc__put_be64(rk, (uint64_t)t->rev);
    mvcc__put_be64(rk + 8, (uint64_t)t->sub);
    rc = backend_append_reserve(b->txn, b->s->rev, rk, sizeof rk,
                                MVCC_LOG_HDR + kv->key_len + kv->value_len,
                                &dst);
    if (rc != 0)
        return rc;
    mvcc__log_encode(dst, kv, tomb);
    rc = lease_move(b, kv, old_lease, tomb ? 0 : kv->lease);
    if (rc == 0)
        t->sub++;
    return rc;
}

/* latest finds the live version of key (including this batch's writes):
 * *found false if the key does not exist or is deleted. */
int mvcc__latest(struct mvcc_batch *b, const void *key, size_t key_len,
                 bool value, struct mvcc_kv *kv, bool *found)
{
    bool tomb;
    size_t l = b->s->short_max;
    int rc = key_len <= l ? 0 : mvcc__batch_kvl(b);
    if (rc == 0 && value)
        rc = mvcc__batch_revv(b);
    struct backend_cursor *revc = value ? b->revv : NULL;
    if (rc == 0 && key_len <= l)
        rc = mvcc__visible(&b->kv, key, key_len, INT64_MAX, revc, kv, &tomb);
    else if (rc == 0)
        rc = mvcc__visible_long(l, b->kvl, key, key_len, INT64_MAX, revc, kv,
                                &tomb);
    *found = rc == 0 && !tomb;
    return rc == ERR_NOTFOUND ? 0 : rc;
}

static int check_key(const struct mvcc_store *s, const void *key,
                     size_t key_len)
{
    if (key == NULL || key_len == 0)
        return ERR_INVAL;
    return key_len > MVCC_KEY_MAX ? ERR_TOO_LARGE : 0;
}

int mvcc_txn_put(struct mvcc_txn *t, const void *key, size_t key_len,
                 const void *value, size_t value_len, int64_t lease,
                 unsigned flags, struct mvcc_kv *prev_out)
{
    CHECK(t != NULL && t->open && (value != NULL || value_len == 0));
    struct mvcc_batch *b = t->b;
    t->puts++;
    struct mvcc_kv prev, kv;
    bool has_prev, observed = b->s->observer != NULL;
    int rc = b->err ? b->err : check_key(b->s, key, key_len);
    if (rc != 0)
        return rc;
    /* the previous value costs a read of the log: only when it is asked
     * for, or when events carry it (mvcc_store_set_prev_values) */
    bool pval = prev_out != NULL || (flags & MVCC_PUT_IGNORE_VALUE) ||
                (observed && b->prev_values);
    if ((rc = mvcc__latest(b, key, key_len, pval, &prev, &has_prev)) != 0)
        return mvcc__batch_fail(b, rc);
    if (flags && !has_prev)
        return ERR_KEY_NOT_FOUND;
    /* prev points into pages the write below may move: copy it first. */
    if (has_prev && (prev_out || observed || (flags & MVCC_PUT_IGNORE_VALUE))
        && copy_kv(&b->arena, &prev, &prev) != 0)
        return mvcc__batch_fail(b, ERR_NOMEM);
    kv = (struct mvcc_kv){key, key_len, value, value_len,
                          has_prev ? prev.create_rev : t->rev, t->rev,
                          has_prev ? prev.version + 1 : 1, lease};
    if (flags & MVCC_PUT_IGNORE_VALUE) {
        kv.value = prev.value;
        kv.value_len = prev.value_len;
    }
    if (flags & MVCC_PUT_IGNORE_LEASE)
        kv.lease = prev.lease;
    int64_t sub = t->sub;
    rc = mvcc__write_version(t, &kv, false, has_prev ? prev.lease : 0);
    if (rc != 0)
        return mvcc__batch_fail(b, rc);
    if (!has_prev)
        b->keys_delta++; /* a new key, or one deleted before */
    if (observed && (copy_kv(&b->arena, &kv, &kv) != 0 ||
                     event_push(b, MVCC_EVENT_PUT, &kv, sub,
                                has_prev ? &prev : NULL) != 0))
        return mvcc__batch_fail(b, ERR_NOMEM);
    if (prev_out != NULL && has_prev)
        *prev_out = prev;
    else if (prev_out != NULL)
        memset(prev_out, 0, sizeof *prev_out);
    return 0;
}

/* delete_one writes the tombstone of live version prev (arena copy). */
static int delete_one(struct mvcc_txn *t, const struct mvcc_kv *prev)
{
    struct mvcc_batch *b = t->b;
    struct mvcc_kv kv = {.key = prev->key, .key_len = prev->key_len,
                         .mod_rev = t->rev};
    int64_t sub = t->sub;
    int rc = mvcc__write_version(t, &kv, true, prev->lease);
    if (rc == 0)
        b->keys_delta--;
    if (rc == 0 && b->s->observer != NULL)
        rc = event_push(b, MVCC_EVENT_DELETE, &kv, sub, prev);
    return rc;
}

/* copy_result moves a scan's kvs into the arena (array and bytes). */
static int copy_result(struct mvcc_arena *a, const struct mvcc_kv *kvs,
                       size_t n, struct mvcc_kv **out)
{
    struct mvcc_kv *arr = mvcc__arena_alloc(a, (n ? n : 1) * sizeof *arr);
    if (arr == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        if (copy_kv(a, &kvs[i], &arr[i]) != 0)
            return ERR_NOMEM;
    *out = arr;
    return 0;
}

int mvcc_txn_delete_range(struct mvcc_txn *t, const void *key,
                          size_t key_len, const void *end, size_t end_len,
                          int64_t *deleted_out,
                          struct mvcc_kv **prev_kvs_out)
{
    CHECK(t != NULL && t->open && deleted_out != NULL);
    struct mvcc_batch *b = t->b;
    t->deletes++;
    struct mvcc_span sp;
    struct mvcc_kv *dead;
    int rc = b->err ? b->err
                    : mvcc__span_init(&sp, b->s, key, key_len, end, end_len);
    if (rc != 0)
        return rc;
    bool values = prev_kvs_out != NULL ||
                  (b->s->observer != NULL && b->prev_values);
    if ((rc = mvcc__batch_kvl(b)) != 0 ||
        (values && (rc = mvcc__batch_revv(b)) != 0))
        return mvcc__batch_fail(b, rc);
    rc = mvcc__scan(&b->kv, b->kvl, b->revv, &sp, INT64_MAX, 0,
                    values ? 0 : MVCC_RANGE_KEYS_ONLY, &b->scratch);
    if (rc == 0)
        rc = copy_result(&b->arena, b->scratch.kvs, b->scratch.n_kvs, &dead);
    for (size_t i = 0; rc == 0 && i < b->scratch.n_kvs; i++)
        rc = delete_one(t, &dead[i]);
    if (rc != 0)
        return mvcc__batch_fail(b, rc);
    *deleted_out = (int64_t)b->scratch.n_kvs;
    if (prev_kvs_out != NULL)
        *prev_kvs_out = dead;
    return 0;
}

int mvcc_txn_range(struct mvcc_txn *t, const void *key, size_t key_len,
                   const void *end, size_t end_len, mvcc_rev rev,
                   int64_t limit, unsigned flags,
                   struct mvcc_range_result *res)
{
    CHECK(t != NULL && t->open && res != NULL);
    struct mvcc_batch *b = t->b;
    t->ranges++;
    struct mvcc_span sp;
    res->n_kvs = 0;
    int rc = b->err ? b->err
                    : mvcc__span_init(&sp, b->s, key, key_len, end, end_len);
    if (rc != 0)
        return rc;
    mvcc_rev cur = t->sub > 0 ? t->rev : b->st.rev;
    if (rev <= 0)
        rev = cur;
    if (rev > cur)
        return ERR_FUTURE_REV;
    if (rev < b->st.compact)
        return ERR_COMPACTED;
    if (!(sp.single && key_len <= sp.short_max) &&
        (rc = mvcc__batch_kvl(b)) != 0)
        return mvcc__batch_fail(b, rc);
    if (!(flags & (MVCC_RANGE_KEYS_ONLY | MVCC_RANGE_COUNT_ONLY)) &&
        (rc = mvcc__batch_revv(b)) != 0)
        return mvcc__batch_fail(b, rc);
    rc = mvcc__scan(&b->kv, b->kvl, b->revv, &sp, rev, limit, flags, res);
    for (size_t i = 0; rc == 0 && i < res->n_kvs; i++)
        rc = copy_kv(&b->arena, &res->kvs[i], &res->kvs[i]);
    if (rc != 0) {
        res->n_kvs = 0;
        return mvcc__batch_fail(b, rc);
    }
    return 0;
}

/* collect_push copies key into the scratch result (arena bytes). */
static int collect_push(struct mvcc_batch *b, const uint8_t *key, size_t len)
{
    struct mvcc_range_result *res = &b->scratch;
    if (mvcc__result_grow(res) != 0)
        return ERR_NOMEM;
    struct mvcc_kv kv = {.key = key, .key_len = len};
    return copy_kv(&b->arena, &kv, &res->kvs[res->n_kvs++]);
}

/* collect_long adds the live long keys under index idx that hold lease. */
static int collect_long(struct mvcc_batch *b, const uint8_t *idx,
                        int64_t lease)
{
    struct mvcc_lbuf buf = {0};
    struct backend_val k;
    int rc = mvcc__batch_kvl(b);
    if (rc == 0)
        rc = mvcc__idx_gather(b->s->short_max, b->kvl, idx, INT64_MAX, NULL,
                              &buf, &k);
    rc = rc == ERR_NOTFOUND ? 0 : rc;
    for (size_t i = 0; rc == 0 && i < buf.n; i++)
        if (!buf.v[i].tomb && buf.v[i].kv.lease == lease)
            rc = collect_push(b, buf.v[i].kv.key, buf.v[i].kv.key_len);
    mem_free(buf.v);
    return rc;
}

/* lease_collect copies the keys attached to lease into the scratch
 * result (arena bytes), before any of them is deleted. */
static int lease_collect(struct mvcc_batch *b, int64_t lease)
{
    uint8_t pfx[MVCC_LEASE_PREFIX];
    struct backend_val k;
    size_t l = b->s->short_max;
    int rc = b->lk ? 0 : backend_cursor_open(b->txn, b->s->lkey, &b->lk);
    mvcc__put_be64(pfx, (uint64_t)lease);
    b->scratch.n_kvs = 0;
    if (rc == 0)
        rc = backend_cursor_seek(b->lk, pfx, sizeof pfx, &k, NULL);
    for (; rc == 0; rc = backend_cursor_next(b->lk, &k, NULL)) {
        if (k.len <= sizeof pfx || memcmp(k.data, pfx, sizeof pfx) != 0)
            return 0;
        const uint8_t *u = (const uint8_t *)k.data + sizeof pfx;
        size_t ul = k.len - sizeof pfx;
        if (ul > l + 1 || (ul == l + 1 && u[l] != 0))
            return ERR_CORRUPT;
        rc = ul <= l ? collect_push(b, u, ul) : collect_long(b, u, lease);
        if (rc != 0)
            return rc;
    }
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* walk_long calls fn for the live long keys under index idx that hold
 * lease; fn's result goes to *fn_rc (the return is a storage error). */
static int walk_long(struct mvcc_batch *b, const uint8_t *idx, int64_t lease,
                     mvcc_key_fn fn, void *arg, int *fn_rc)
{
    struct mvcc_lbuf buf = {0};
    struct backend_val k;
    int rc = mvcc__batch_kvl(b);
    if (rc == 0)
        rc = mvcc__idx_gather(b->s->short_max, b->kvl, idx, INT64_MAX, NULL,
                              &buf, &k);
    rc = rc == ERR_NOTFOUND ? 0 : rc;
    for (size_t i = 0; rc == 0 && *fn_rc == 0 && i < buf.n; i++)
        if (!buf.v[i].tomb && buf.v[i].kv.lease == lease)
            *fn_rc = fn(arg, buf.v[i].kv.key, buf.v[i].kv.key_len);
    mem_free(buf.v);
    return rc;
}

/* Unlike lease_collect, nothing is copied: a put with a lease checks the
 * lease's keys each time, and copies would pile up in the batch arena. */
int mvcc_batch_lease_keys(struct mvcc_batch *b, int64_t lease,
                          mvcc_key_fn fn, void *arg)
{
    CHECK(b != NULL && b->open && fn != NULL);
    if (b->err)
        return b->err;
    uint8_t pfx[MVCC_LEASE_PREFIX];
    struct backend_val k;
    size_t l = b->s->short_max;
    int fn_rc = 0;
    int rc = b->lk ? 0 : backend_cursor_open(b->txn, b->s->lkey, &b->lk);
    mvcc__put_be64(pfx, (uint64_t)lease);
    if (rc == 0)
        rc = backend_cursor_seek(b->lk, pfx, sizeof pfx, &k, NULL);
    while (rc == 0 && fn_rc == 0) {
        if (k.len <= sizeof pfx || memcmp(k.data, pfx, sizeof pfx) != 0)
            break;
        /* the cursor's bytes stay valid: fn writes nothing */
        const uint8_t *u = (const uint8_t *)k.data + sizeof pfx;
        size_t ul = k.len - sizeof pfx;
        if (ul > l + 1 || (ul == l + 1 && u[l] != 0))
            rc = ERR_CORRUPT;
        else if (ul <= l)
            fn_rc = fn(arg, u, ul);
        else
            rc = walk_long(b, u, lease, fn, arg, &fn_rc);
        if (rc == 0 && fn_rc == 0)
            rc = backend_cursor_next(b->lk, &k, NULL);
    }
    if (rc != 0 && rc != ERR_NOTFOUND)
        return mvcc__batch_fail(b, rc);
    return fn_rc;
}

int mvcc_txn_delete_lease(struct mvcc_txn *t, int64_t lease,
                          int64_t *deleted_out)
{
    CHECK(t != NULL && t->open && deleted_out != NULL);
    struct mvcc_batch *b = t->b;
    int64_t n = 0;
    int rc = b->err ? b->err : lease_collect(b, lease);
    for (size_t i = 0; rc == 0 && i < b->scratch.n_kvs; i++) {
        const struct mvcc_kv *k = &b->scratch.kvs[i];
        struct mvcc_kv prev;
        bool live;
        rc = mvcc__latest(b, k->key, k->key_len,
                          b->s->observer != NULL && b->prev_values, &prev,
                          &live);
        if (rc != 0 || !live)
            continue;
        rc = copy_kv(&b->arena, &prev, &prev);
        if (rc == 0)
            rc = delete_one(t, &prev);
        n += rc == 0;
    }
    if (rc != 0)
        return mvcc__batch_fail(b, rc);
    *deleted_out = n;
    return 0;
}
