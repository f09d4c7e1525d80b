/*
 * mvcc_etcd.c - the store as etcd 3.4's bbolt `key` bucket holds it
 * (mvcc.h mvcc_etcd_walk), for snapshots in etcd's format.
 *
 * etcd keys its bucket by revision: main u64 BE, '_', sub u64 BE (17
 * bytes), and a tombstone adds 't' (18 bytes); the value is the
 * mvccpb.KeyValue of the version, marshaled as gogoproto does (fields 1
 * key, 2 create_revision, 3 mod_revision, 4 version, 5 value, 6 lease,
 * in that order, zero values left out; a tombstone holds only its key).
 * After a compaction at C etcd's bucket holds, at and below C, only each
 * key's newest version at C, and not even that when it is a deletion
 * (keyIndex.compact drops a generation's tombstone); above C every
 * version.  cetcd may still hold more below C (the tombstone kept at C
 * for watchers, versions a running compaction has not reached): they are
 * left out here by that rule, so the walk is what etcd would hold once
 * its compaction finished.
 */
#include <string.h>

#include "mvcc/mvcc_int.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/varint.h"

struct etcd_walk {
    struct mvcc_read *r;
    mvcc_etcd_fn fn;
    void *arg;
    mvcc_rev compact;              /* C, 0 = never compacted */
    uint8_t *buf;                  /* the value being marshaled */
    size_t cap;                    /* its bytes */
    struct mvcc_range_result res;  /* the keep check's lookup */
};

static size_t put_bytes(uint8_t *p, unsigned tag, const void *b, size_t len)
{
    p[0] = (uint8_t)(tag << 3 | 2);
    size_t n = 1 + varint_put(p + 1, len);
    if (len > 0)
        memcpy(p + n, b, len);
    return n + len;
}

/* Marshals ev's KeyValue into w->buf; *len_out its length. */
static int marshal(struct etcd_walk *w, const struct mvcc_event *ev,
                   size_t *len_out)
{
    const struct mvcc_kv *kv = &ev->kv;
    size_t need = 2 * 11 + kv->key_len + kv->value_len + 4 * 11;
    if (need > w->cap) {
        uint8_t *p = mem_realloc(w->buf, need);
        if (p == NULL)
            return ERR_NOMEM;
        w->buf = p;
        w->cap = need;
    }
    size_t n = put_bytes(w->buf, 1, kv->key, kv->key_len);
    if (ev->type != MVCC_EVENT_DELETE) {
        n += varint_field_put(w->buf + n, 2, kv->create_rev);
        n += varint_field_put(w->buf + n, 3, kv->mod_rev);
        n += varint_field_put(w->buf + n, 4, kv->version);
        if (kv->value_len > 0)
            n += put_bytes(w->buf + n, 5, kv->value, kv->value_len);
        n += varint_field_put(w->buf + n, 6, kv->lease);
    }
    CHECK(n <= need);
    *len_out = n;
    return 0;
}

/* Would etcd still hold ev, a version at or below C?  Only as its key's
 * newest version at C, and a put. */
static int kept_at_compact(struct etcd_walk *w, const struct mvcc_event *ev,
                           bool *out)
{
    *out = false;
    if (ev->type == MVCC_EVENT_DELETE)
        return 0;
    /* mvcc__range: the export's lookups are not client ranges (metrics) */
    int rc = mvcc__range(w->r, ev->kv.key, ev->kv.key_len, NULL, 0,
                         w->compact, 1, MVCC_RANGE_KEYS_ONLY, &w->res);
    if (rc == 0)
        *out = w->res.n_kvs == 1 && w->res.kvs[0].mod_rev == ev->kv.mod_rev;
    return rc;
}

static int on_version(void *arg, const struct mvcc_event *ev)
{
    struct etcd_walk *w = arg;
    if (w->compact > 0 && ev->kv.mod_rev <= w->compact) {
        bool keep;
        int rc = kept_at_compact(w, ev, &keep);
        if (rc != 0 || !keep)
            return rc;
    }
    uint8_t k[MVCC_ETCD_REVKEY_MAX];
    mvcc__put_be64(k, (uint64_t)ev->kv.mod_rev);
    k[8] = '_';
    mvcc__put_be64(k + 9, (uint64_t)ev->sub_rev);
    size_t kl = 17;
    if (ev->type == MVCC_EVENT_DELETE)
        k[kl++] = 't';
    size_t vl;
    int rc = marshal(w, ev, &vl);
    return rc != 0 ? rc : w->fn(w->arg, k, kl, w->buf, vl);
}

int mvcc_etcd_walk(struct mvcc_read *r, mvcc_etcd_fn fn, void *arg)
{
    CHECK(r != NULL && fn != NULL);
    struct etcd_walk w = {.r = r, .fn = fn, .arg = arg,
                          .compact = r->compact};
    int rc = mvcc__rev_walk(r, r->rev, on_version, &w);
    mvcc_range_result_close(&w.res);
    mem_free(w.buf);
    CHECK(rc <= 0);
    return rc;
}

struct backend_txn *mvcc_read_backend_txn(struct mvcc_read *r)
{
    CHECK(r != NULL && r->txn != NULL);
    return r->txn;
}

uint64_t mvcc_read_consistent_index(struct mvcc_read *r)
{
    CHECK(r != NULL && r->txn != NULL);
    static const char key[] = "mvcc_state";
    struct backend_val v;
    struct mvcc_state st;
    if (backend_get(r->txn, r->s->meta, key, sizeof key - 1, &v) != 0 ||
        mvcc__state_decode(&v, &st) != 0)
        return 0;
    return st.ci;
}
