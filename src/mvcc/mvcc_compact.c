/*
 * mvcc_compact.c - compaction: scheduling, and the physical deletion in
 * bounded steps that survive restarts.
 *
 * Compacting at C must drop, for every key, each version <= C except the
 * newest one <= C, and that one too if it is a tombstone - unless the
 * tombstone is at C itself: a watcher may start at C (the oldest revision
 * still readable), and it must get that delete (etcd #18089, #19179).  So
 * a tombstone at exactly C is kept, with its `rev` entry, until the next
 * compaction.  Range and count skip it like any tombstone, and the hash
 * skips it (mvcc_read.c), so reads are as if it were gone.
 *
 * A version that survived the previous compaction at C' can only become
 * dead because of a newer version at a revision in (C', C], or, for a
 * tombstone kept at C', because C > C'.  So the step walks the `rev` log
 * over [C', C] only - work proportional to the writes since the last
 * compaction, not to the number of keys - and for each key it meets, drops
 * all of its versions older than its newest version <= C (and that one if
 * it is a tombstone older than C).  The position in the log is persisted
 * (mvcc_state.compact_next_*) with every step, in the same txn as the
 * deletions, so a crash resumes exactly where it stopped.
 */
#include "mvcc/mvcc_int.h"

#include "util/err.h"
#include "util/mem.h"

static bool pending(const struct mvcc_state *st)
{
    return st->compact > st->compact_fin;
}

int mvcc_compact(struct mvcc_batch *b, mvcc_rev rev)
{
    CHECK(b != NULL && b->open && !b->t.open);
    if (b->err != 0)
        return b->err;
    if (rev <= b->st.compact)
        return ERR_COMPACTED;
    if (rev > b->st.rev)
        return ERR_FUTURE_REV;
    if (!pending(&b->st)) {
        /* From C' itself: the tombstones kept there die now. */
        b->st.next_main = b->st.compact_fin;
        b->st.next_sub = 0;
    } else if (b->st.next_main >= b->st.compact) {
        /* The running walk has reached its old target, whose tombstones
         * it kept: walk that revision again for the new target. */
        b->st.next_main = b->st.compact;
        b->st.next_sub = 0;
    }
    b->st.compact = rev;
    CHECK(pending(&b->st));
    return 0;
}

mvcc_rev mvcc_batch_compact_rev(const struct mvcc_batch *b)
{
    CHECK(b != NULL && b->open);
    return b->st.compact;
}

bool mvcc_compact_pending(const struct mvcc_store *s)
{
    return pending(&s->st);
}

/* del_current deletes the entry under cursor c (of `kv` or `kvl`) and its
 * `rev` entry;
 * k receives the entry that followed (ERR_NOTFOUND at the end, also when
 * this deletion emptied the `kv` bucket: a compaction past a revision
 * where every key was deleted drops every entry). */
static int del_current(struct mvcc_batch *b, struct backend_cursor *c,
                       struct backend_val *k)
{
    size_t ul;
    mvcc_rev main;
    int64_t sub;
    int kind;
    uint8_t rk[MVCC_REVKEY_LEN];
    int rc = mvcc__ckey_parse(k, &ul, &main, &sub, &kind);
    if (rc != 0)
        return rc;
    mvcc__put_be64(rk, (uint64_t)main);
    mvcc__put_be64(rk + 8, (uint64_t)sub);
    rc = backend_cursor_del(c);
    if (rc == 0)
        rc = backend_del(b->txn, b->s->rev, rk, sizeof rk);
    if (rc != 0)
        return rc == ERR_NOTFOUND ? ERR_CORRUPT : rc;
    return backend_cursor_current(c, k, NULL);
}

bool mvcc__room_for(struct mvcc_batch *b, unsigned writes)
{
    return backend_write_room(b->txn) >=
           (uint64_t)writes * backend_write_bound(b->txn);
}

/* Before a deletion (two writes, `kv` and `rev`) of a step short of room:
 * ERR_FULL stops the step there (see mvcc_compact_step). */
static int del_room(struct mvcc_batch *b)
{
    return b->compact_low && !mvcc__room_for(b, 4) ? ERR_FULL : 0;
}

/* compact_key drops the versions of user key u that are dead at c: all
 * those older than its newest one <= c, and that one if it is a tombstone
 * older than c (see the top of the file).  The tombstone goes last, found
 * again: a step stopped for room (ERR_FULL) between the deletions leaves
 * it the newest version <= c, so reads never see an older one come back. */
static int compact_key(struct mvcc_batch *b, const uint8_t *u, size_t ul,
                       mvcc_rev c)
{
    struct mvcc_kv kv;
    struct backend_val k;
    bool tomb;
    /* `kv` alone: it holds every version <= fold_rev >= c (the step
     * folded the overlay first), and only those are dropped */
    struct backend_cursor *db = b->kv.db;
    struct mvcc_icur raw = {.db = db};
    int rc = mvcc__visible(&raw, u, ul, c, NULL, &kv, &tomb);
    if (rc == ERR_NOTFOUND)
        return 0; /* every version <= c is already gone */
    if (rc != 0)
        return rc;
    CHECK(kv.mod_rev <= c);
    bool drop = tomb && kv.mod_rev < c;
    rc = backend_cursor_next(db, &k, NULL);
    while (rc == 0 && mvcc__same_ukey(&k, u, ul) && (rc = del_room(b)) == 0)
        rc = del_current(b, db, &k);
    if (rc == ERR_NOTFOUND)
        rc = 0;
    if (rc == 0 && drop && (rc = del_room(b)) == 0 &&
        (rc = mvcc__visible(&raw, u, ul, c, NULL, &kv, &tomb)) == 0 &&
        (rc = backend_cursor_current(db, &k, NULL)) == 0)
        rc = del_current(b, db, &k);
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* compact_long is compact_key for a long key: its older versions are
 * those of its index that carry its full key (a colliding key's are
 * stepped over). */
static int compact_long(struct mvcc_batch *b, const uint8_t *u, size_t ul,
                        mvcc_rev c)
{
    uint8_t idx[MVCC_CKEY_MAX];
    size_t l = b->s->short_max;
    struct mvcc_kv kv;
    struct backend_val k, v;
    bool tomb;
    int rc = mvcc__batch_kvl(b);
    if (rc == 0)
        rc = mvcc__visible_long(l, b->kvl, u, ul, c, NULL, &kv, &tomb);
    if (rc == ERR_NOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    CHECK(kv.mod_rev <= c);
    bool drop = tomb && kv.mod_rev < c;
    mvcc__lindex(l, idx, u, ul);
    rc = backend_cursor_next(b->kvl, &k, NULL);
    while (rc == 0 && mvcc__same_ukey(&k, idx, l)) {
        rc = backend_cursor_current(b->kvl, &k, &v);
        if (rc == 0)
            rc = mvcc__entry_decode(&k, &v, NULL, true, &kv, &tomb);
        if (rc != 0)
            break;
        bool mine = kv.key_len == ul && memcmp(kv.key, u, ul) == 0;
        if (mine && (rc = del_room(b)) != 0)
            break;
        rc = mine ? del_current(b, b->kvl, &k)
                  : backend_cursor_next(b->kvl, &k, NULL);
    }
    if (rc == ERR_NOTFOUND)
        rc = 0;
    if (rc == 0 && drop && (rc = del_room(b)) == 0 &&
        (rc = mvcc__visible_long(l, b->kvl, u, ul, c, NULL, &kv, &tomb)) ==
            0 &&
        (rc = backend_cursor_current(b->kvl, &k, NULL)) == 0)
        rc = del_current(b, b->kvl, &k);
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* next_rev reads the next `rev` log entry to examine into u/ul; *done when
 * the log has nothing left at or below the compact rev. */
static int next_rev(struct mvcc_batch *b, size_t *ul, bool *done)
{
    uint8_t rk[MVCC_REVKEY_LEN];
    struct backend_val k, v;
    mvcc__put_be64(rk, (uint64_t)b->st.next_main);
    mvcc__put_be64(rk + 8, (uint64_t)b->st.next_sub);
    int rc = backend_cursor_seek(b->revc, rk, sizeof rk, &k, &v);
    *done = rc == ERR_NOTFOUND;
    if (rc != 0)
        return *done ? 0 : rc;
    struct mvcc_event ev;
    if ((rc = mvcc__log_decode(&k, &v, &ev)) != 0)
        return rc;
    mvcc_rev main = ev.kv.mod_rev;
    *done = main > b->st.compact;
    *ul = ev.kv.key_len;
    if (*ul > b->ubuf_cap) {
        uint8_t *p = mem_realloc(b->ubuf, *ul);
        if (p == NULL)
            return ERR_NOMEM;
        b->ubuf = p;
        b->ubuf_cap = *ul;
    }
    /* pages move as we delete: keep a copy */
    memcpy(b->ubuf, ev.kv.key, *ul);
    b->st.next_main = main;
    b->st.next_sub = ev.sub_rev + 1;
    return 0;
}

int mvcc_compact_step(struct mvcc_batch *b, size_t max_revs, bool *more_out)
{
    CHECK(b != NULL && b->open && !b->t.open && more_out != NULL);
    CHECK(max_revs > 0);
    if (b->err != 0)
        return b->err;
    bool done = !pending(&b->st);
    *more_out = !done;
    size_t ul = 0;
    /* A txn short of room (a nearly full disk): a step does what fits,
     * or nothing (ERR_FULL). */
    b->compact_low = backend_write_room(b->txn) != UINT64_MAX;
    if (!done && b->compact_low && !mvcc__room_for(b, 8))
        return ERR_FULL;
    /* the versions to drop must all be in `kv` (mvcc_ovl.c): at once, or
     * short of room a slice per step (up to one leaf copied per entry),
     * deleting after the last */
    if (!done && !b->folded && b->st.fold_rev < b->st.compact) {
        int rc = b->compact_low ? mvcc__fold_slice_low(b) : mvcc__fold(b);
        if (rc == ERR_FULL)
            return rc; /* the fold goes on in the next batch */
        if (rc != 0)
            return mvcc__batch_fail(b, rc);
        if (b->compact_low)
            return 0;
    }
    for (size_t n = 0; !done && n < max_revs; n++) {
        mvcc_rev at_main = b->st.next_main;
        int64_t at_sub = b->st.next_sub;
        if (b->compact_low && !mvcc__room_for(b, 8))
            break;
        int rc = next_rev(b, &ul, &done);
        if (rc == 0 && !done && ul <= b->s->short_max)
            rc = compact_key(b, b->ubuf, ul, b->st.compact);
        else if (rc == 0 && !done)
            rc = compact_long(b, b->ubuf, ul, b->st.compact);
        if (rc == ERR_FULL) {
            /* stopped within a key: its entry again next step (if this
             * step deleted that version itself, the key's newer one in
             * the walk comes next and finishes it) */
            b->st.next_main = at_main;
            b->st.next_sub = at_sub;
            break;
        }
        if (rc != 0)
            return mvcc__batch_fail(b, rc);
    }
    if (done && pending(&b->st)) {
        b->st.compact_fin = b->st.compact;
        b->st.next_main = b->st.compact; /* where the next walk starts */
        b->st.next_sub = 0;
    }
    *more_out = pending(&b->st);
    return 0;
}
