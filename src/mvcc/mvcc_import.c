/*
 * mvcc_import.c - versions written as they are, for importing another
 * store's history (mvcc.h mvcc_batch_import): an etcd data dir's `key`
 * bucket holds every version with its own create revision and version,
 * and after a compaction only the survivors, so the versions cannot be
 * made again by puts (a put counts the version from the key's previous
 * one, which a compaction may have removed).
 */
#include "mvcc/mvcc_int.h"
#include "util/err.h"

int mvcc_batch_import(struct mvcc_batch *b, const struct mvcc_kv *kv,
                      int64_t sub, bool tomb)
{
    CHECK(b != NULL && b->open && !b->t.open && kv != NULL);
    if (b->err != 0)
        return b->err;
    if (kv->key == NULL || kv->key_len == 0 || kv->key_len > MVCC_KEY_MAX ||
        kv->mod_rev < 1 || sub < 0)
        return ERR_INVAL;
    /* Strictly ascending (main, sub): b->t.sub is the sub after the last
     * version imported at b->st.rev. */
    if (kv->mod_rev < b->st.rev ||
        (kv->mod_rev == b->st.rev && b->st.rev > 0 && sub < b->t.sub))
        return ERR_INVAL;
    if (kv->mod_rev > b->st.rev)
        b->t.sub = 0;
    struct mvcc_kv prev;
    bool live;
    int rc = mvcc__latest(b, kv->key, kv->key_len, false, &prev, &live);
    if (rc != 0)
        return mvcc__batch_fail(b, rc);
    struct mvcc_kv w = *kv;
    if (tomb)
        w = (struct mvcc_kv){.key = kv->key, .key_len = kv->key_len,
                             .mod_rev = kv->mod_rev};
    struct mvcc_txn *t = &b->t;
    t->b = b;
    t->rev = kv->mod_rev;
    t->sub = sub;
    rc = mvcc__write_version(t, &w, tomb, live ? prev.lease : 0);
    if (rc != 0)
        return mvcc__batch_fail(b, rc);
    if (live != !tomb) /* a key made live, or a live one deleted */
        b->keys_delta += tomb ? -1 : 1;
    b->st.rev = kv->mod_rev;
    CHECK(t->sub == sub + 1);
    return 0;
}

void mvcc_batch_import_rev(struct mvcc_batch *b, mvcc_rev rev)
{
    CHECK(b != NULL && b->open && !b->t.open);
    if (rev > b->st.rev)
        b->st.rev = rev;
    CHECK(b->st.rev >= rev);
}
