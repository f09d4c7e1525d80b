/*
 * mvcc_ovl.c - the key index's recent part, kept in memory (the overlay),
 * and the cursor that reads it merged with the `kv` bucket.
 *
 * WHY.  A put files a ~60-byte entry under its key in `kv`: with random
 * keys that is a random leaf per put, and LMDB's copy-on-write makes every
 * such leaf a new page that the next pin writes to the disk (4-5 KB a put,
 * 25x the WAL's bytes: docs/BENCHMARKS.md sessions 19-24).  So the entries
 * of the latest versions go to an in-memory sorted list first, and fold
 * rounds file them into `kv` in key order, each leaf copied once for all
 * its entries of the round.
 *
 * THE INVARIANT.  The state record (mvcc_int.h "mvcc_state") holds
 * fold_rev: `kv` holds the entry of every short-key version <= fold_rev;
 * while a round runs, its record "mvcc_fold" = (target, pos) adds: and of
 * every version <= target of a key <= pos.  The overlay generation whose
 * base is fold_rev holds every newer entry (those a round filed in this
 * process too: the same bytes, merged once by the cursor).  The revision
 * log holds every version, so an open rebuilds the overlay from the log's
 * entries after fold_rev but those the round filed (mvcc__ovl_build):
 * nothing here needs to be durable on its own.
 *
 * ROUNDS.  Once the overlay is at its bound, a round starts at a commit
 * with target = the last committed revision, and every commit files the
 * next MVCC_OVL_SLICE entries <= target past pos (mvcc__fold_slice): a
 * round's pages are dirtied in slices, never all in one batch (a batch's
 * time, and LMDB's buffers of its dirty pages, which it keeps).  The
 * commit that passes the last entry stores fold_rev = target; after it,
 * a new generation (base = target) holding the entries newer than the
 * target replaces the old one.  A batch of many writes, or a compaction
 * that needs every version <= its revision in `kv`, files everything at
 * once instead (mvcc__fold) and writes the rest of its batch to `kv`
 * directly; its commit stores fold_rev = its revision.
 *
 * GENERATIONS.  A read takes a reference on the current generation and
 * then its LMDB snapshot, and keeps the pair only if the snapshot's
 * fold_rev is the generation's base (else it retries: a round ended in
 * between).  The old generation is freed by whoever drops its last
 * reference.
 *
 * CONCURRENCY.  The apply thread is the only writer: it links nodes into
 * a skip list with release stores, readers walk it with acquire loads
 * while it grows.  A node is never freed before its generation; the
 * entries of an aborted batch are unlinked (readers standing on one go on
 * through its links) and stay in memory until then.  Entries newer than a
 * read's revision are there for it to see, as they are in `kv` for a read
 * at an old revision: every read filters by revision already.
 */
#include "mvcc/mvcc_int.h"

#include "util/err.h"
#include "util/mem.h"

size_t mvcc__ovl_max = MVCC_OVL_MAX;
size_t mvcc__ovl_max_bytes = MVCC_OVL_MAX_BYTES;
size_t mvcc__ovl_slice = MVCC_OVL_SLICE;
const char mvcc__round_key[] = "mvcc_fold";

struct mvcc_onode {
    uint16_t klen;   /* composite key bytes */
    uint8_t vlen;    /* value bytes */
    uint8_t height;  /* levels this node is linked on */
    _Atomic(struct mvcc_onode *) next[]; /* height links, then key, value */
};

static uint8_t *node_key(const struct mvcc_onode *n)
{
    return (uint8_t *)&n->next[n->height];
}

/* node_rev is the main revision in n's composite key. */
static mvcc_rev node_rev(const struct mvcc_onode *n)
{
    return (mvcc_rev)~mvcc__get_be64(node_key(n) + n->klen - MVCC_SUFFIX);
}

static int node_cmp(const struct mvcc_onode *n, const uint8_t *key,
                    size_t len)
{
    return backend_revkey_cmp(node_key(n), n->klen, key, len);
}

int mvcc__ovl_new(mvcc_rev base, struct mvcc_ovl **out)
{
    struct mvcc_ovl *o = mem_calloc(1, sizeof *o);
    if (o == NULL)
        return ERR_NOMEM;
    o->base = base;
    o->rng = 0x9e3779b97f4a7c15u ^ (uint64_t)base;
    atomic_init(&o->refs, 1);
    for (int i = 0; i < MVCC_OVL_LEVELS; i++)
        atomic_init(&o->head[i], NULL);
    *out = o;
    return 0;
}

void mvcc__ovl_unref(struct mvcc_ovl *o)
{
    if (o == NULL || atomic_fetch_sub(&o->refs, 1) != 1)
        return;
    mvcc__arena_free(&o->mem);
    mem_free(o);
}

/* link_of is the address of level i's link out of node n (NULL: head). */
static _Atomic(struct mvcc_onode *) *link_of(struct mvcc_ovl *o,
                                             struct mvcc_onode *n, int i)
{
    return n == NULL ? &o->head[i] : &n->next[i];
}

/* find fills pred[i] with the last node < key on every level (NULL: the
 * head) and returns the first node >= key. */
static struct mvcc_onode *find(struct mvcc_ovl *o, const uint8_t *key,
                               size_t len, struct mvcc_onode **pred)
{
    struct mvcc_onode *p = NULL, *n = NULL;
    for (int i = MVCC_OVL_LEVELS - 1; i >= 0; i--) {
        n = atomic_load_explicit(link_of(o, p, i), memory_order_acquire);
        while (n != NULL && node_cmp(n, key, len) < 0) {
            p = n;
            n = atomic_load_explicit(&n->next[i], memory_order_acquire);
        }
        if (pred != NULL)
            pred[i] = p;
    }
    return n;
}

static int pick_height(struct mvcc_ovl *o)
{
    /* xorshift64; each level taken with probability 1/4 */
    uint64_t x = o->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    o->rng = x;
    int h = 1;
    while (h < MVCC_OVL_LEVELS && (x & 3) == 0) {
        h++;
        x >>= 2;
    }
    return h;
}

/* node_new makes an unlinked node of height h holding (key, val), counted
 * in o; NULL if out of memory. */
static struct mvcc_onode *node_new(struct mvcc_ovl *o, int h,
                                   const uint8_t *key, size_t klen,
                                   const uint8_t *val, size_t vlen)
{
    size_t len = sizeof(struct mvcc_onode) +
                 (size_t)h * sizeof(struct mvcc_onode *) + klen + vlen;
    struct mvcc_onode *n = mvcc__arena_alloc(&o->mem, len);
    if (n == NULL)
        return NULL;
    n->klen = (uint16_t)klen;
    n->vlen = (uint8_t)vlen;
    n->height = (uint8_t)h;
    memcpy(node_key(n), key, klen);
    memcpy(node_key(n) + klen, val, vlen);
    o->n++;
    o->bytes += len;
    return n;
}

int mvcc__ovl_insert(struct mvcc_ovl *o, const uint8_t *key, size_t klen,
                     const uint8_t *val, size_t vlen,
                     struct mvcc_onode **out)
{
    CHECK(klen <= UINT16_MAX && vlen <= UINT8_MAX);
    struct mvcc_onode *pred[MVCC_OVL_LEVELS];
    struct mvcc_onode *at = find(o, key, klen, pred);
    if (at != NULL && node_cmp(at, key, klen) == 0)
        return ERR_CORRUPT; /* a version is written once */
    int h = pick_height(o);
    struct mvcc_onode *n = node_new(o, h, key, klen, val, vlen);
    if (n == NULL)
        return ERR_NOMEM;
    for (int i = 0; i < h; i++) {
        struct mvcc_onode *next = atomic_load_explicit(
            link_of(o, pred[i], i), memory_order_relaxed);
        atomic_store_explicit(&n->next[i], next, memory_order_relaxed);
    }
    /* bottom up: a reader that meets n on a level sees it whole */
    for (int i = 0; i < h; i++)
        atomic_store_explicit(link_of(o, pred[i], i), n,
                              memory_order_release);
    if (out != NULL)
        *out = n;
    return 0;
}

void mvcc__ovl_unlink(struct mvcc_ovl *o, struct mvcc_onode *n)
{
    struct mvcc_onode *pred[MVCC_OVL_LEVELS];
    struct mvcc_onode *at = find(o, node_key(n), n->klen, pred);
    CHECK(at == n);
    for (int i = n->height - 1; i >= 0; i--) {
        struct mvcc_onode *next =
            atomic_load_explicit(&n->next[i], memory_order_relaxed);
        atomic_store_explicit(link_of(o, pred[i], i), next,
                              memory_order_release);
    }
    o->n--;
}

struct mvcc_onode *mvcc__ovl_first(struct mvcc_ovl *o)
{
    return atomic_load_explicit(&o->head[0], memory_order_acquire);
}

struct mvcc_onode *mvcc__ovl_next(const struct mvcc_onode *n)
{
    return atomic_load_explicit(&((struct mvcc_onode *)n)->next[0],
                                memory_order_acquire);
}

void mvcc__ovl_entry(const struct mvcc_onode *n, struct backend_val *k,
                     struct backend_val *v)
{
    k->data = node_key(n);
    k->len = n->klen;
    if (v != NULL) {
        v->data = node_key(n) + n->klen;
        v->len = n->vlen;
    }
}

/* --- the merged cursor ---------------------------------------------- */

/* settle makes the smaller of the two positions the cursor's entry (both
 * when they hold the same key: a version `kv` and the overlay both have,
 * possible after a batch wrote to `kv` directly; they are equal). */
static int settle(struct mvcc_icur *ic, struct backend_val *k,
                  struct backend_val *v)
{
    struct backend_val ok, ov;
    ic->at = 0;
    if (ic->on != NULL)
        mvcc__ovl_entry(ic->on, &ok, &ov);
    if (ic->db_ok && ic->on != NULL) {
        int c = backend_revkey_cmp(ic->dk.data, ic->dk.len, ok.data,
                                   ok.len);
        ic->at = c < 0 ? 1 : (c > 0 ? 2 : 3);
    } else if (ic->db_ok) {
        ic->at = 1;
    } else if (ic->on != NULL) {
        ic->at = 2;
    }
    if (ic->at == 0)
        return ERR_NOTFOUND;
    const struct backend_val *ck = ic->at == 2 ? &ok : &ic->dk;
    const struct backend_val *cv = ic->at == 2 ? &ov : &ic->dv;
    if (k != NULL)
        *k = *ck;
    if (v != NULL)
        *v = *cv;
    return 0;
}

/* db_result keeps the `kv` cursor's answer: an entry, none, or an
 * error to pass on. */
static int db_result(struct mvcc_icur *ic, int rc)
{
    ic->db_ok = rc == 0;
    return rc == ERR_NOTFOUND ? 0 : rc;
}

int mvcc__ic_seek(struct mvcc_icur *ic, const void *key, size_t len,
                  struct backend_val *k, struct backend_val *v)
{
    int rc = db_result(ic, backend_cursor_seek(ic->db, key, len, &ic->dk,
                                               &ic->dv));
    if (rc != 0)
        return rc;
    ic->on = ic->ovl != NULL ? find(ic->ovl, key, len, NULL) : NULL;
    return settle(ic, k, v);
}

int mvcc__ic_first(struct mvcc_icur *ic, struct backend_val *k,
                   struct backend_val *v)
{
    int rc = db_result(ic, backend_cursor_first(ic->db, &ic->dk, &ic->dv));
    if (rc != 0)
        return rc;
    ic->on = ic->ovl != NULL ? mvcc__ovl_first(ic->ovl) : NULL;
    return settle(ic, k, v);
}

int mvcc__ic_next(struct mvcc_icur *ic, struct backend_val *k,
                  struct backend_val *v)
{
    if (ic->at == 0)
        return ERR_NOTFOUND;
    if (ic->at & 1) {
        int rc = db_result(ic, backend_cursor_next(ic->db, &ic->dk,
                                                   &ic->dv));
        if (rc != 0)
            return rc;
    }
    if (ic->at & 2)
        ic->on = mvcc__ovl_next(ic->on);
    return settle(ic, k, v);
}

/* --- fold and rebuild ------------------------------------------------ */

/* file_node writes n's entry into `kv` in b's txn. */
static int file_node(struct mvcc_batch *b, const struct mvcc_onode *n)
{
    void *dst;
    int rc = backend_cursor_put_reserve(b->kv.db, node_key(n), n->klen,
                                        n->vlen, &dst);
    if (rc == 0)
        memcpy(dst, node_key(n) + n->klen, n->vlen);
    return rc;
}

int mvcc__fold(struct mvcc_batch *b)
{
    CHECK(b->open && !b->folded);
    struct mvcc_ovl *next;
    int rc = mvcc__ovl_new(0, &next); /* base: set when it is installed */
    if (rc != 0)
        return rc;
    /* After a round that ended in b, `kv` holds the versions up to its
     * target (those a compaction step in b did not delete since: never
     * filed again) and the round's next generation every newer one. */
    struct mvcc_ovl *from = b->next_ovl != NULL ? b->next_ovl : b->s->ovl;
    /* in key order: each leaf of `kv` is copied once for all its entries */
    for (struct mvcc_onode *n = mvcc__ovl_first(from); rc == 0 && n != NULL;
         n = mvcc__ovl_next(n))
        rc = file_node(b, n);
    if (rc != 0) {
        mvcc__ovl_unref(next);
        return rc;
    }
    mvcc__ovl_unref(b->next_ovl);
    b->next_ovl = next;
    b->folded = true;
    b->kv.ovl = NULL; /* `kv` holds everything now */
    b->round.target = 0; /* (a running round is done with) */
    b->round.folded = 0;
    return 0;
}

/* copy_newer fills the unpublished generation o with the entries of from
 * newer than rev, appended in key order. */
static int copy_newer(struct mvcc_ovl *from, mvcc_rev rev,
                      struct mvcc_ovl *o)
{
    struct mvcc_onode *tail[MVCC_OVL_LEVELS] = {0};
    for (struct mvcc_onode *f = mvcc__ovl_first(from); f != NULL;
         f = mvcc__ovl_next(f)) {
        if (node_rev(f) <= rev)
            continue;
        int h = pick_height(o);
        struct mvcc_onode *n = node_new(o, h, node_key(f), f->klen,
                                        node_key(f) + f->klen, f->vlen);
        if (n == NULL)
            return ERR_NOMEM;
        for (int i = 0; i < h; i++) {
            atomic_init(&n->next[i], NULL);
            atomic_store_explicit(link_of(o, tail[i], i), n,
                                  memory_order_relaxed);
            tail[i] = n;
        }
    }
    return 0;
}

/* round_put writes the round's meta record (or deletes it: target 0). */
static int round_put(struct mvcc_batch *b)
{
    static const size_t klen = sizeof mvcc__round_key - 1;
    const struct mvcc_round *r = &b->round;
    if (r->target == 0) {
        int rc = backend_del(b->txn, b->s->meta, mvcc__round_key, klen);
        return rc == ERR_NOTFOUND ? 0 : rc;
    }
    uint8_t rec[8 + MVCC_CKEY_MAX + 4];
    mvcc__put_le64(rec, (uint64_t)r->target);
    memcpy(rec + 8, r->pos, r->pos_len);
    mvcc__crc_seal(rec, 8 + r->pos_len);
    return backend_put(b->txn, b->s->meta, mvcc__round_key, klen, rec,
                       8 + r->pos_len + 4);
}

int mvcc__round_decode(const struct backend_val *v, struct mvcc_round *r)
{
    const uint8_t *p = v->data;
    if (v->len < 8 + MVCC_SUFFIX + 1 + 4 || v->len > 8 + MVCC_CKEY_MAX + 4)
        return ERR_CORRUPT;
    size_t body = v->len - 4;
    if (!mvcc__crc_ok(p, v->len))
        return ERR_CORRUPT;
    r->target = (mvcc_rev)mvcc__get_le64(p);
    r->pos_len = body - 8;
    memcpy(r->pos, p + 8, r->pos_len);
    r->folded = 0;
    return r->target >= 1 ? 0 : ERR_CORRUPT;
}

/* slice files the next `max` entries of the round (starting one at the
 * overlay's bound, or at once if `now`). */
static int slice(struct mvcc_batch *b, bool now, size_t max)
{
    struct mvcc_store *s = b->s;
    struct mvcc_ovl *o = s->ovl;
    struct mvcc_round *r = &b->round;
    CHECK(b->next_ovl == NULL); /* one round ends in a batch */
    if (r->target == 0) {
        if ((!now && o->n - r->folded < mvcc__ovl_max &&
             o->bytes < mvcc__ovl_max_bytes) ||
            s->st.rev == s->st.fold_rev)
            return 0;
        /* the versions already committed; this batch's wait for the next
         * round (a batch's own may still be aborted) */
        r->target = s->st.rev;
        r->pos_len = 0;
        r->folded = 0;
    }
    struct mvcc_onode *n;
    if (r->pos_len == 0) {
        n = mvcc__ovl_first(o);
    } else {
        n = find(o, r->pos, r->pos_len, NULL);
        if (n != NULL && node_cmp(n, r->pos, r->pos_len) == 0)
            n = mvcc__ovl_next(n);
    }
    int rc = 0;
    size_t done = 0;
    for (; rc == 0 && n != NULL && done < max; n = mvcc__ovl_next(n)) {
        if (b->compact_low && !mvcc__room_for(b, 4))
            break; /* the rest in the next step (the round's record and
                      the state still fit) */
        memcpy(r->pos, node_key(n), n->klen);
        r->pos_len = n->klen;
        if (node_rev(n) > r->target)
            continue; /* for the next generation */
        rc = file_node(b, n);
        done++;
    }
    r->folded += done;
    if (rc == 0 && n == NULL) { /* every entry passed: the round is done */
        struct mvcc_ovl *next;
        rc = mvcc__ovl_new(0, &next);
        if (rc == 0 && (rc = copy_newer(o, r->target, next)) != 0)
            mvcc__ovl_unref(next);
        if (rc == 0) {
            b->next_ovl = next;
            b->st.fold_rev = r->target;
            r->target = 0;
            r->folded = 0;
        }
    }
    return rc == 0 ? round_put(b) : rc;
}

int mvcc__fold_slice(struct mvcc_batch *b)
{
    if (b->folded) /* everything is in `kv`: a round is over */
        return b->s->round.target != 0 ? round_put(b) : 0;
    if (backend_space_low(b->s->be))
        return 0; /* no pages for a slice now: the disk is nearly full */
    if (b->next_ovl != NULL)
        return 0; /* a round ended in b: see mvcc__fold_slice_low */
    return slice(b, false, mvcc__ovl_slice);
}

int mvcc__fold_slice_low(struct mvcc_batch *b)
{
    CHECK(b->open && !b->folded);
    /* A round that ended in b (an earlier step's) leaves the next one to
     * the next batch: the generation a round walks is still the one the
     * ended round walked (replaced at b's commit), whose versions <= its
     * target are in `kv` - or were deleted from it by b's compaction
     * steps after the round: filing those again brought them back
     * without their `rev` entries, and every later compaction step that
     * met one failed (ERR_CORRUPT). */
    if (b->next_ovl != NULL)
        return ERR_FULL;
    /* a round's target is a committed revision: none of b's own */
    if (b->round.target == 0 && b->s->st.rev == b->s->st.fold_rev)
        return ERR_FULL;
    return slice(b, true, MVCC_OVL_SLICE_LOW);
}

int mvcc__ovl_build(struct mvcc_store *s, struct backend_txn *txn,
                    struct mvcc_ovl *o, const struct mvcc_round *r)
{
    struct backend_cursor *c;
    int rc = backend_cursor_open(txn, s->rev, &c);
    if (rc != 0)
        return rc;
    uint8_t rk[MVCC_REVKEY_LEN];
    mvcc__put_be64(rk, (uint64_t)o->base + 1);
    mvcc__put_be64(rk + 8, 0);
    struct backend_val k, v;
    for (rc = backend_cursor_seek(c, rk, sizeof rk, &k, &v); rc == 0;
         rc = backend_cursor_next(c, &k, &v)) {
        struct mvcc_event ev;
        if ((rc = mvcc__log_decode(&k, &v, &ev)) != 0)
            break;
        if (ev.kv.key_len > s->short_max)
            continue; /* long keys are filed in `kvl` at once */
        bool tomb = ev.type == MVCC_EVENT_DELETE;
        if (!tomb && ev.kv.version < 1) {
            rc = ERR_CORRUPT;
            break;
        }
        uint8_t ck[MVCC_CKEY_MAX], val[MVCC_HDR];
        size_t n = mvcc__ckey(ck, ev.kv.key, ev.kv.key_len, ev.kv.mod_rev,
                              ev.sub_rev,
                              tomb ? MVCC_KIND_TOMB : MVCC_KIND_PUT);
        if (r->target != 0 && ev.kv.mod_rev <= r->target &&
            backend_revkey_cmp(ck, n, r->pos, r->pos_len) <= 0)
            continue; /* the running round filed it in `kv` */
        mvcc__value_encode(val, &ev.kv, tomb, false);
        if ((rc = mvcc__ovl_insert(o, ck, n, val, sizeof val, NULL)) != 0)
            break;
    }
    backend_cursor_close(c);
    return rc == ERR_NOTFOUND ? 0 : rc;
}
