/*
 * mvcc.c - the store object: open/close, the persisted state, the record
 * codec, range normalisation, and read snapshots (pooled).  On-disk
 * formats: mvcc_int.h.  Reads: mvcc_read.c; writes: mvcc_write.c;
 * compaction: mvcc_compact.c.
 */
#include "mvcc/mvcc_int.h"

#include "util/crc32c.h"
#include "util/err.h"
#include "util/mem.h"

#include <sched.h>

static const char state_key[] = "mvcc_state";
const char mvcc__format_key[] = "mvcc_format";

/* --- codec ----------------------------------------------------------- */

size_t mvcc__ckey(uint8_t *buf, const void *key, size_t key_len, mvcc_rev main,
                  int64_t sub, int kind)
{
    CHECK(key_len + MVCC_SUFFIX <= MVCC_CKEY_MAX);
    CHECK(main >= 0 && sub >= 0 && (kind == 0 || kind == 1));
    if (buf != key) /* buf may already hold it (a long key's index) */
        memcpy(buf, key, key_len);
    mvcc__put_be64(buf + key_len, ~(uint64_t)main);
    mvcc__put_be64(buf + key_len + 8, ~(uint64_t)sub);
    buf[key_len + 16] = (uint8_t)kind;
    return key_len + MVCC_SUFFIX;
}

int mvcc__ckey_parse(const struct backend_val *k, size_t *ulen_out,
                     mvcc_rev *main_out, int64_t *sub_out, int *kind_out)
{
    if (k->len < MVCC_SUFFIX + 1)
        return ERR_CORRUPT;
    const uint8_t *p = k->data;
    size_t ul = k->len - MVCC_SUFFIX;
    uint64_t m = ~mvcc__get_be64(p + ul), sb = ~mvcc__get_be64(p + ul + 8);
    uint8_t kind = p[ul + 16];
    if (m == 0 || m > INT64_MAX || sb > INT64_MAX || kind > MVCC_KIND_TOMB)
        return ERR_CORRUPT;
    *ulen_out = ul;
    *main_out = (mvcc_rev)m;
    *sub_out = (int64_t)sb;
    *kind_out = kind;
    return 0;
}

void mvcc__value_encode(uint8_t *dst, const struct mvcc_kv *kv, bool tomb,
                        bool long_)
{
    CHECK(tomb || kv->version >= 1);
    dst[0] = long_ ? MVCC_FORMAT_LONG : MVCC_FORMAT;
    dst[1] = tomb ? 1 : 0;
    mvcc__put_le64(dst + 2, (uint64_t)kv->create_rev);
    mvcc__put_le64(dst + 10, (uint64_t)kv->version);
    mvcc__put_le64(dst + 18, (uint64_t)kv->lease);
    if (long_) {
        CHECK(kv->key_len <= MVCC_KEY_MAX);
        for (int i = 0; i < 4; i++)
            dst[MVCC_HDR + i] = (uint8_t)(kv->key_len >> (8 * i));
        memcpy(dst + MVCC_HDR_LONG, kv->key, kv->key_len);
    }
}

void mvcc__log_encode(uint8_t *dst, const struct mvcc_kv *kv, bool tomb)
{
    CHECK(!tomb || kv->value_len == 0);
    CHECK(kv->key_len >= 1 && kv->key_len <= MVCC_KEY_MAX);
    dst[0] = tomb ? MVCC_KIND_TOMB : MVCC_KIND_PUT;
    mvcc__put_le64(dst + 1, (uint64_t)kv->create_rev);
    mvcc__put_le64(dst + 9, (uint64_t)kv->version);
    mvcc__put_le64(dst + 17, (uint64_t)kv->lease);
    for (int i = 0; i < 4; i++)
        dst[25 + i] = (uint8_t)(kv->key_len >> (8 * i));
    memcpy(dst + MVCC_LOG_HDR, kv->key, kv->key_len);
    if (kv->value_len > 0)
        memcpy(dst + MVCC_LOG_HDR + kv->key_len, kv->value, kv->value_len);
}

/* header_check validates the decoded header of a version at mod_rev. */
static int header_check(const struct mvcc_kv *kv, bool tomb)
{
    if (tomb ? kv->create_rev != 0 || kv->version != 0 || kv->lease != 0
             : kv->create_rev <= 0 || kv->create_rev > kv->mod_rev ||
                   kv->version <= 0)
        return ERR_CORRUPT;
    return 0;
}

int mvcc__log_decode(const struct backend_val *k, const struct backend_val *v,
                     struct mvcc_event *ev)
{
    const uint8_t *p = v->data;
    if (k->len != MVCC_REVKEY_LEN || v->len < MVCC_LOG_HDR + 1 ||
        p[0] > MVCC_KIND_TOMB)
        return ERR_CORRUPT;
    uint64_t m = mvcc__get_be64(k->data);
    uint64_t sb = mvcc__get_be64((const uint8_t *)k->data + 8);
    size_t n = 0;
    for (int i = 3; i >= 0; i--)
        n = (n << 8) | p[25 + i];
    if (m == 0 || m > INT64_MAX || sb >= INT64_MAX || n == 0 ||
        n > MVCC_KEY_MAX || n > v->len - MVCC_LOG_HDR)
        return ERR_CORRUPT;
    bool tomb = p[0] == MVCC_KIND_TOMB;
    memset(ev, 0, sizeof *ev);
    ev->type = tomb ? MVCC_EVENT_DELETE : MVCC_EVENT_PUT;
    ev->sub_rev = (int64_t)sb;
    struct mvcc_kv *kv = &ev->kv;
    kv->mod_rev = (mvcc_rev)m;
    kv->create_rev = (mvcc_rev)mvcc__get_le64(p + 1);
    kv->version = (int64_t)mvcc__get_le64(p + 9);
    kv->lease = (int64_t)mvcc__get_le64(p + 17);
    kv->key = p + MVCC_LOG_HDR;
    kv->key_len = n;
    size_t off = MVCC_LOG_HDR + n;
    if (tomb && v->len != off)
        return ERR_CORRUPT;
    kv->value = tomb ? NULL : p + off;
    kv->value_len = v->len - off;
    return header_check(kv, tomb);
}

int mvcc_log_decode(const void *rkey, size_t rkey_len, const void *val,
                    size_t val_len, struct mvcc_event *ev)
{
    if (rkey == NULL || val == NULL || ev == NULL)
        return ERR_CORRUPT;
    struct backend_val k = {rkey_len, (void *)rkey};
    struct backend_val v = {val_len, (void *)val};
    return mvcc__log_decode(&k, &v, ev);
}

int mvcc__value_load(struct backend_cursor *revc, struct mvcc_kv *kv,
                     int64_t sub, bool tomb)
{
    uint8_t rk[MVCC_REVKEY_LEN];
    struct backend_val k, v;
    struct mvcc_event ev;
    mvcc__put_be64(rk, (uint64_t)kv->mod_rev);
    mvcc__put_be64(rk + 8, (uint64_t)sub);
    /* Keys written in key order sit in the log in that order too: a range
     * over them finds the next value right after the last one read (one
     * step on the same page instead of a descent from the root). */
    int rc = backend_cursor_next(revc, &k, &v);
    if (rc != 0 || k.len != sizeof rk || memcmp(k.data, rk, sizeof rk) != 0)
        rc = backend_cursor_seek(revc, rk, sizeof rk, &k, &v);
    if (rc == ERR_NOTFOUND || (rc == 0 && (k.len != sizeof rk ||
                                           memcmp(k.data, rk, sizeof rk))))
        return ERR_CORRUPT; /* the index names a version the log lacks */
    if (rc == 0)
        rc = mvcc__log_decode(&k, &v, &ev);
    if (rc != 0)
        return rc;
    if ((ev.type == MVCC_EVENT_DELETE) != tomb ||
        ev.kv.key_len != kv->key_len ||
        memcmp(ev.kv.key, kv->key, kv->key_len) != 0 ||
        ev.kv.create_rev != kv->create_rev || ev.kv.version != kv->version ||
        ev.kv.lease != kv->lease)
        return ERR_CORRUPT;
    kv->value = ev.kv.value;
    kv->value_len = ev.kv.value_len;
    return 0;
}

/* long_key finds the full key of a `kvl` value (ul: the index's length)
 * and checks it against the index's prefix. */
static int long_key(const struct backend_val *k, const struct backend_val *v,
                    size_t ul, struct mvcc_kv *kv)
{
    const uint8_t *p = v->data;
    if (v->len < MVCC_HDR_LONG || p[0] != MVCC_FORMAT_LONG ||
        ul <= MVCC_HASH_LEN)
        return ERR_CORRUPT;
    size_t n = 0;
    for (int i = 3; i >= 0; i--)
        n = (n << 8) | p[MVCC_HDR + i];
    if (n <= ul || n != v->len - MVCC_HDR_LONG ||
        memcmp(p + MVCC_HDR_LONG, k->data, ul - MVCC_HASH_LEN) != 0)
        return ERR_CORRUPT;
    kv->key = p + MVCC_HDR_LONG;
    kv->key_len = n;
    return 0;
}

int mvcc__entry_decode(const struct backend_val *k,
                       const struct backend_val *v,
                       struct backend_cursor *revc, bool long_,
                       struct mvcc_kv *kv, bool *tomb_out)
{
    size_t ul;
    int64_t sub;
    int kind;
    int rc = mvcc__ckey_parse(k, &ul, &kv->mod_rev, &sub, &kind);
    if (rc != 0)
        return rc;
    const uint8_t *p = v->data;
    if (v->len < MVCC_HDR || p[1] != kind)
        return ERR_CORRUPT;
    if (long_)
        rc = long_key(k, v, ul, kv);
    else if (p[0] != MVCC_FORMAT || v->len != MVCC_HDR)
        rc = ERR_CORRUPT;
    if (rc != 0)
        return rc;
    if (!long_) {
        kv->key = k->data;
        kv->key_len = ul;
    }
    kv->create_rev = (mvcc_rev)mvcc__get_le64(p + 2);
    kv->version = (int64_t)mvcc__get_le64(p + 10);
    kv->lease = (int64_t)mvcc__get_le64(p + 18);
    kv->value = NULL;
    kv->value_len = 0;
    bool tomb = kind == MVCC_KIND_TOMB;
    if ((rc = header_check(kv, tomb)) != 0)
        return rc;
    *tomb_out = tomb;
    return revc != NULL && !tomb ? mvcc__value_load(revc, kv, sub, tomb) : 0;
}

uint64_t mvcc__hash_mask = UINT64_MAX;

/* A 64-bit multiply-xorshift hash (our own; any fixed function would do:
 * collisions cost time, never correctness, see mvcc_int.h). */
uint64_t mvcc__key_hash(const uint8_t *key, size_t key_len)
{
    return mvcc__key_hash64(key, key_len) & mvcc__hash_mask;
}

uint64_t mvcc__key_hash64(const uint8_t *key, size_t key_len)
{
    const uint64_t m = 0x9e3779b97f4a7c15u;
    uint64_t h = 0x6a09e667f3bcc909u ^ ((uint64_t)key_len * m);
    size_t i = 0;
    for (; i + 8 <= key_len; i += 8) {
        h = (h ^ mvcc__get_le64(key + i)) * m;
        h ^= h >> 29;
    }
    for (; i < key_len; i++) {
        h = (h ^ key[i]) * m;
        h ^= h >> 31;
    }
    h ^= h >> 32;
    return h * m ^ (h >> 29);
}

int mvcc_kv_decode(const void *ckey, size_t ckey_len, const void *val,
                   size_t val_len, struct mvcc_kv *kv, bool *tombstone_out)
{
    struct backend_val k = {ckey_len, (void *)ckey};
    struct backend_val v = {val_len, (void *)val};
    if (ckey == NULL || val == NULL || kv == NULL || tombstone_out == NULL)
        return ERR_CORRUPT;
    bool long_ = val_len > 0 && ((const uint8_t *)val)[0] == MVCC_FORMAT_LONG;
    int rc = mvcc__entry_decode(&k, &v, NULL, long_, kv, tombstone_out);
    if (rc != 0 || !long_)
        return rc;
    /* The full check of a long key's index: its hash too. */
    size_t ul = ckey_len - MVCC_SUFFIX;
    uint64_t h = mvcc__key_hash(kv->key, kv->key_len);
    if (mvcc__get_be64((const uint8_t *)ckey + ul - MVCC_HASH_LEN) != h)
        return ERR_CORRUPT;
    return 0;
}

void mvcc__crc_seal(uint8_t *p, size_t body)
{
    uint32_t crc = crc32c_extend(0, p, body);
    for (int i = 0; i < 4; i++)
        p[body + i] = (uint8_t)(crc >> (8 * i));
}

bool mvcc__crc_ok(const uint8_t *p, size_t len)
{
    CHECK(len >= 4);
    size_t body = len - 4;
    uint32_t crc = 0;
    for (int i = 3; i >= 0; i--)
        crc = (crc << 8) | p[body + i];
    return crc == crc32c_extend(0, p, body);
}

void mvcc__state_encode(uint8_t *dst, const struct mvcc_state *st)
{
    CHECK(st->rev >= 1 && st->compact <= st->rev);
    CHECK(st->compact_fin <= st->compact);
    CHECK(st->fold_rev >= 0 && st->fold_rev <= st->rev);
    mvcc__put_le64(dst, st->ci);
    mvcc__put_le64(dst + 8, (uint64_t)st->rev);
    mvcc__put_le64(dst + 16, (uint64_t)st->compact);
    mvcc__put_le64(dst + 24, (uint64_t)st->compact_fin);
    mvcc__put_le64(dst + 32, (uint64_t)st->next_main);
    mvcc__put_le64(dst + 40, (uint64_t)st->next_sub);
    mvcc__put_le64(dst + 48, (uint64_t)st->keys);
    mvcc__put_le64(dst + 56, (uint64_t)st->fold_rev);
    mvcc__crc_seal(dst, 64);
}

int mvcc__state_decode(const struct backend_val *v, struct mvcc_state *st)
{
    const uint8_t *p = v->data;
    if (v->len != MVCC_STATE_LEN && v->len != MVCC_STATE_LEN_NOFOLD &&
        v->len != MVCC_STATE_LEN_NOKEYS)
        return ERR_CORRUPT;
    size_t body = v->len - 4;
    if (!mvcc__crc_ok(p, v->len))
        return ERR_CORRUPT;
    st->ci = mvcc__get_le64(p);
    st->rev = (mvcc_rev)mvcc__get_le64(p + 8);
    st->compact = (mvcc_rev)mvcc__get_le64(p + 16);
    st->compact_fin = (mvcc_rev)mvcc__get_le64(p + 24);
    st->next_main = (mvcc_rev)mvcc__get_le64(p + 32);
    st->next_sub = (int64_t)mvcc__get_le64(p + 40);
    st->keys = body > 48 ? (int64_t)mvcc__get_le64(p + 48) : -1;
    /* before the overlay `kv` held every version */
    st->fold_rev = body > 56 ? (mvcc_rev)mvcc__get_le64(p + 56) : st->rev;
    if (st->rev < 1 || st->compact < 0 || st->compact > st->rev ||
        st->compact_fin < 0 || st->compact_fin > st->compact ||
        st->next_main < 0 || st->next_sub < 0 || st->keys < -1 ||
        st->fold_rev < 0 || st->fold_rev > st->rev)
        return ERR_CORRUPT;
    return 0;
}

/* --- ranges ---------------------------------------------------------- */

int mvcc__span_init(struct mvcc_span *sp, const struct mvcc_store *s,
                    const void *key, size_t key_len, const void *end,
                    size_t end_len)
{
    if (key_len == 0 || key == NULL)
        return ERR_INVAL;
    if (key_len > MVCC_KEY_MAX)
        return ERR_TOO_LARGE;
    sp->key = key;
    sp->key_len = key_len;
    sp->end = end;
    sp->end_len = end_len;
    sp->single = end_len == 0;
    sp->unbounded = end_len == 1 && ((const uint8_t *)end)[0] == 0;
    sp->short_max = s->short_max;
    return 0;
}

bool mvcc__span_has(const struct mvcc_span *sp, const uint8_t *u, size_t ul)
{
    if (sp->single)
        return ul == sp->key_len && memcmp(u, sp->key, ul) == 0;
    if (sp->unbounded)
        return true;
    return mvcc__bytes_cmp(u, ul, sp->end, sp->end_len) < 0;
}

/* --- store ----------------------------------------------------------- */

static int store_buckets(struct mvcc_store *s)
{
    int rc = backend_bucket_open(s->be, "kv", BACKEND_BUCKET_REVKEY, &s->kv);
    if (rc == 0)
        rc = backend_bucket_open(s->be, "rev", 0, &s->rev);
    if (rc == 0)
        rc = backend_bucket_open(s->be, "meta", 0, &s->meta);
    if (rc == 0)
        rc = backend_bucket_open(s->be, "lkey", 0, &s->lkey);
    if (rc == 0)
        rc = backend_bucket_open(s->be, "kvl", BACKEND_BUCKET_REVKEY, &s->kvl);
    return rc;
}

static int store_load(struct mvcc_store *s, const struct mvcc_store *from)
{
    struct backend_txn *txn;
    int rc = backend_read_begin(s->be, &txn);
    if (rc != 0)
        return rc;
    struct backend_val v;
    rc = backend_get(txn, s->meta, state_key, sizeof state_key - 1, &v);
    if (rc == ERR_NOTFOUND) {
        memset(&s->st, 0, sizeof s->st);
        s->st.rev = 1; /* etcd: the empty store is at revision 1 */
        s->st.keys = 0;
        rc = 0;
    } else if (rc == 0) {
        rc = mvcc__state_decode(&v, &s->st);
        /* a store with state must be of this layout (mvcc_int.h) */
        int frc = rc == 0 ? backend_get(txn, s->meta, mvcc__format_key,
                                        sizeof mvcc__format_key - 1, &v)
                          : 0;
        if (rc == 0 && frc == ERR_NOTFOUND)
            rc = ERR_UNSUPPORTED;
        else if (rc == 0 && frc != 0)
            rc = frc;
        else if (rc == 0 && (v.len != 1 ||
                             (((const uint8_t *)v.data)[0] != MVCC_LAYOUT &&
                              ((const uint8_t *)v.data)[0] !=
                                  MVCC_LAYOUT_NOFOLD)))
            rc = ERR_UNSUPPORTED;
        /* layout 2 is rewritten as 3 by the first commit */
        s->formatted = rc == 0 &&
                       ((const uint8_t *)v.data)[0] == MVCC_LAYOUT;
    }
    memset(&s->round, 0, sizeof s->round);
    if (rc == 0) {
        int frc = backend_get(txn, s->meta, mvcc__round_key,
                              strlen(mvcc__round_key), &v);
        if (frc == 0)
            rc = mvcc__round_decode(&v, &s->round);
        else if (frc != ERR_NOTFOUND)
            rc = frc;
        if (rc == 0 && s->round.target != 0 &&
            s->round.target <= s->st.fold_rev)
            rc = ERR_CORRUPT;
    }
    if (rc == 0 && from != NULL && from->ovl->base == s->st.fold_rev &&
        from->st.rev == s->st.rev && !from->batch.open &&
        from->round.target == s->round.target) {
        s->ovl = from->ovl; /* the same entries: share them */
        atomic_fetch_add(&s->ovl->refs, 1);
        s->round = from->round;
    } else if (rc == 0) {
        rc = mvcc__ovl_new(s->st.fold_rev, &s->ovl);
        if (rc == 0)
            rc = mvcc__ovl_build(s, txn, s->ovl, &s->round);
    }
    backend_read_end(txn);
    if (rc != 0) {
        mvcc__ovl_unref(s->ovl);
        s->ovl = NULL;
        return rc;
    }
    atomic_store(&s->cur_rev, s->st.rev);
    atomic_store(&s->compact_rev, s->st.compact);
    atomic_store(&s->compact_fin, s->st.compact_fin);
    atomic_store(&s->ci, s->st.ci);
    atomic_store(&s->keys, s->st.keys);
    return 0;
}

/* keys_count counts the live keys of a store whose state has no count
 * (written before the count was kept): a count-only range of every key
 * (keys read, values not).  The next commit stores it. */
static int keys_count(struct mvcc_store *s)
{
    static const uint8_t all[1] = {0}; /* key and range end "\0": all */
    struct mvcc_read *r;
    struct mvcc_range_result res = {0};
    int rc = mvcc_read_begin(s, &r);
    if (rc != 0)
        return rc;
    rc = mvcc__range(r, all, 1, all, 1, 0, 0, MVCC_RANGE_COUNT_ONLY, &res);
    if (rc == 0) {
        s->st.keys = res.count;
        atomic_store(&s->keys, res.count);
    }
    mvcc_range_result_close(&res);
    mvcc_read_end(r);
    return rc;
}

int mvcc_store_open(struct backend *be, const struct mvcc_options *opts,
                    struct mvcc_store **out)
{
    CHECK(be != NULL && out != NULL);
    struct mvcc_store *s = mem_calloc(1, sizeof *s);
    if (s == NULL)
        return ERR_NOMEM;
    s->be = be;
    size_t km = backend_key_max(be);
    if (km > MVCC_CKEY_MAX)
        km = MVCC_CKEY_MAX;
    CHECK(km > MVCC_SUFFIX + MVCC_LEASE_PREFIX + 2 * MVCC_HASH_LEN);
    /* lkey keys are lease + short key, or lease + index + 1 byte: L is the
     * tightest of the limits. */
    s->short_max = km - MVCC_SUFFIX;
    if (s->short_max > km - MVCC_LEASE_PREFIX - 1)
        s->short_max = km - MVCC_LEASE_PREFIX - 1;
    CHECK(s->short_max + MVCC_SUFFIX <= km);
    int rc = store_buckets(s);
    if (rc == 0)
        rc = store_load(s, opts != NULL ? opts->overlay_from : NULL);
    if (rc != 0) {
        mem_free(s);
        return rc;
    }
    s->batch.arena.keep = opts && opts->arena_keep_bytes
                              ? opts->arena_keep_bytes
                              : (16u << 20);
    pthread_mutex_init(&s->pool_mu, NULL);
    if (s->st.keys < 0 && opts != NULL && opts->count_keys &&
        (rc = keys_count(s)) != 0) {
        mvcc_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

size_t mvcc_overlay_entries(const struct mvcc_store *s)
{
    return s->ovl->n - s->round.folded; /* (those are in `kv` too) */
}

int64_t mvcc_keys(const struct mvcc_store *s)
{
    return atomic_load(&s->keys);
}

static void read_free(struct mvcc_read *r)
{
    mvcc__ovl_unref(r->kv.ovl);
    backend_cursor_close(r->kv.db);
    backend_cursor_close(r->revc);
    backend_cursor_close(r->revv);
    backend_cursor_close(r->lk);
    backend_cursor_close(r->kvl);
    backend_read_end(r->txn);
    mem_free(r);
}

void mvcc_store_close(struct mvcc_store *s)
{
    if (s == NULL)
        return;
    CHECK(!s->batch.open);
    while (s->pool != NULL) {
        struct mvcc_read *r = s->pool;
        s->pool = r->next_free;
        read_free(r);
    }
    mvcc__arena_free(&s->batch.arena);
    mvcc_range_result_close(&s->batch.scratch);
    mem_free(s->batch.added);
    mvcc__ovl_unref(s->ovl);
    mem_free(s->batch.ubuf);
    mem_free(s->batch.events);
    pthread_mutex_destroy(&s->pool_mu);
    mem_free(s);
}

mvcc_rev mvcc_current_rev(const struct mvcc_store *s)
{
    return atomic_load(&((struct mvcc_store *)s)->cur_rev);
}

void mvcc_visible_hold(struct mvcc_store *s)
{
    /* compact first: a reader that sees lim_rev != 0 then reads a
     * lim_compact at least as new as the pin (see read_state). */
    atomic_store(&s->lim_compact, atomic_load(&s->compact_rev));
    mvcc_rev rev = atomic_load(&s->cur_rev);
    atomic_store(&s->lim_rev, rev > 0 ? rev : 1);
}

void mvcc_visible_release(struct mvcc_store *s)
{
    atomic_store(&s->lim_rev, 0);
}

mvcc_rev mvcc_compact_rev(const struct mvcc_store *s)
{
    return atomic_load(&((struct mvcc_store *)s)->compact_rev);
}

mvcc_rev mvcc_compact_finished_rev(const struct mvcc_store *s)
{
    return atomic_load(&((struct mvcc_store *)s)->compact_fin);
}

uint64_t mvcc_consistent_index(const struct mvcc_store *s)
{
    return atomic_load(&((struct mvcc_store *)s)->ci);
}

size_t mvcc_key_max(const struct mvcc_store *s)
{
    CHECK(s != NULL);
    return MVCC_KEY_MAX;
}

void mvcc_store_set_observer(struct mvcc_store *s, mvcc_observer_fn fn,
                             void *arg)
{
    CHECK(s != NULL && !s->batch.open);
    s->observer = fn;
    s->observer_arg = arg;
}

void mvcc_store_set_prev_values(struct mvcc_store *s, bool on)
{
    CHECK(s != NULL);
    atomic_store(&s->prev_values, on);
}

/* --- read snapshots -------------------------------------------------- */

static int read_new(struct mvcc_store *s, struct mvcc_read **out)
{
    struct mvcc_read *r = mem_calloc(1, sizeof *r);
    if (r == NULL)
        return ERR_NOMEM;
    r->s = s;
    int rc = backend_read_begin(s->be, &r->txn);
    if (rc != 0) {
        mem_free(r);
        return rc;
    }
    rc = backend_cursor_open(r->txn, s->kv, &r->kv.db);
    if (rc != 0) {
        backend_read_end(r->txn);
        mem_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int read_renew(struct mvcc_read *r)
{
    int rc = backend_read_renew(r->txn);
    if (rc == 0)
        rc = backend_cursor_renew(r->txn, r->kv.db);
    if (rc == 0 && r->revc != NULL)
        rc = backend_cursor_renew(r->txn, r->revc);
    if (rc == 0 && r->revv != NULL)
        rc = backend_cursor_renew(r->txn, r->revv);
    if (rc == 0 && r->lk != NULL)
        rc = backend_cursor_renew(r->txn, r->lk);
    if (rc == 0 && r->kvl != NULL)
        rc = backend_cursor_renew(r->txn, r->kvl);
    return rc;
}

/* read_state reads the snapshot's revisions, and its fold_rev into
 * *fold. */
static int read_state(struct mvcc_read *r, mvcc_rev *fold)
{
    struct backend_val v;
    struct mvcc_state st;
    int rc = backend_get(r->txn, r->s->meta, state_key, sizeof state_key - 1,
                         &v);
    if (rc == ERR_NOTFOUND) {
        r->rev = 1;
        r->compact = 0;
        *fold = 0;
        return 0;
    }
    if (rc == 0)
        rc = mvcc__state_decode(&v, &st);
    if (rc != 0)
        return rc;
    r->rev = st.rev;
    r->compact = st.compact;
    *fold = st.fold_rev;
    /* A tentative batch (mvcc_visible_hold) may be in this snapshot: read
     * as of the pinned, durable state instead.  What reads at or above the
     * pinned compact revision need is all there: a tentative batch only
     * takes steps of a compaction scheduled before it (server/apply.c),
     * at a revision these reads already see as compacted. */
    mvcc_rev lim = atomic_load(&r->s->lim_rev);
    if (lim != 0) {
        mvcc_rev lc = atomic_load(&r->s->lim_compact);
        if (r->rev > lim)
            r->rev = lim;
        if (r->compact > lc)
            r->compact = lc;
    }
    return 0;
}

/* ovl_take returns the store's current overlay generation, referenced. */
static struct mvcc_ovl *ovl_take(struct mvcc_store *s)
{
    pthread_mutex_lock(&s->pool_mu);
    struct mvcc_ovl *o = s->ovl;
    atomic_fetch_add(&o->refs, 1);
    pthread_mutex_unlock(&s->pool_mu);
    return o;
}

int mvcc_read_begin(struct mvcc_store *s, struct mvcc_read **out)
{
    CHECK(s != NULL && out != NULL);
    pthread_mutex_lock(&s->pool_mu);
    struct mvcc_read *r = s->pool;
    if (r != NULL) {
        s->pool = r->next_free;
        s->pool_len--;
    }
    pthread_mutex_unlock(&s->pool_mu);
    /* the generation first, then the snapshot: a fold committed between
     * the two shows as another fold_rev, and the pair is taken again
     * (mvcc_ovl.c) */
    struct mvcc_ovl *o = ovl_take(s);
    int rc = r != NULL ? read_renew(r) : read_new(s, &r);
    for (int tries = 0; rc == 0; tries++) {
        mvcc_rev fold;
        rc = read_state(r, &fold);
        if (rc != 0 || fold == o->base)
            break;
        backend_read_reset(r->txn);
        mvcc__ovl_unref(o);
        if (tries > 2)
            sched_yield(); /* the apply thread installs it next */
        o = ovl_take(s);
        rc = read_renew(r);
    }
    if (rc != 0) {
        mvcc__ovl_unref(o);
        if (r != NULL)
            read_free(r);
        return rc;
    }
    r->kv.ovl = o;
    r->next_free = NULL;
    *out = r;
    return 0;
}

void mvcc_read_end(struct mvcc_read *r)
{
    if (r == NULL)
        return;
    struct mvcc_store *s = r->s;
    backend_read_reset(r->txn);
    mvcc__ovl_unref(r->kv.ovl);
    r->kv.ovl = NULL;
    pthread_mutex_lock(&s->pool_mu);
    bool pooled = s->pool_len < MVCC_READ_POOL_MAX;
    if (pooled) {
        r->next_free = s->pool;
        s->pool = r;
        s->pool_len++;
    }
    pthread_mutex_unlock(&s->pool_mu);
    if (!pooled)
        read_free(r);
}

mvcc_rev mvcc_read_rev(const struct mvcc_read *r)
{
    return r->rev;
}

mvcc_rev mvcc_read_compact_rev(const struct mvcc_read *r)
{
    return r->compact;
}
