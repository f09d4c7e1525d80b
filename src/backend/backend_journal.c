/*
 * backend_journal.c - the write journal that lets a copy of the store
 * catch up with the live one (online defragmentation: backend.h,
 * "Journal").
 *
 * While a journal runs, every write call of a write txn (put, the
 * reserves, del, cursor_del) notes the (bucket, key) it touches.  Just
 * before the commit, the journal reads each touched key's final value in
 * that txn and appends one record per key to the txn's pending buffer;
 * once the commit succeeds the buffer is published (a chunk on a list
 * under mu), else dropped.  A record says "after txn T, key K of bucket B
 * is V" (or "is absent"), not what the write did, so replaying records
 * is idempotent: replayed in commit order onto ANY committed state taken
 * after the journal started, they give the live store's latest published
 * state.  That is why the copy needs no particular start point: LMDB's
 * compacting copy takes its own read txn, at some state after the start.
 *
 * Record layout (host byte order, in memory only, never on disk):
 *   u32 dbi | u32 key_len | u32 val_len (JOURNAL_DELETED: absent) |
 *   key bytes | value bytes
 *
 * Bounds: published records not yet replayed are at most max_bytes; past
 * that the journal fails (ERR_DEFRAG_JOURNAL_FULL), frees what it holds
 * and records nothing more, and so does a failed allocation (ERR_NOMEM).
 * A journal failure never fails a write of the store.
 */
#include "backend/backend.h"

#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

#define JOURNAL_DELETED UINT32_MAX
#define REC_HEAD 12u
/* A replay commits its write txn every this many record bytes: LMDB
 * bounds the dirty pages of one txn. */
#define REPLAY_TXN_BYTES ((size_t)8 << 20)

/* A growable byte buffer (writer only). */
struct jbuf {
    uint8_t *p;  /* the bytes (mem_malloc) */
    size_t len;  /* bytes used */
    size_t cap;  /* bytes allocated */
};

/* Published records of one committed txn. */
struct jchunk {
    struct jchunk *next; /* the next txn's records */
    size_t len;          /* bytes at data */
    uint8_t data[];      /* records */
};

struct backend_journal {
    size_t max_bytes;      /* bound of published, unreplayed bytes */
    /* The writer's (whoever holds the write txn). */
    struct jbuf touched;   /* the txn's keys: u32 dbi, u32 len, key */
    struct jbuf pending;   /* the txn's records, until its commit */
    bool failed;           /* writer's view: record nothing more */
    /* Shared with the replaying thread. */
    pthread_mutex_t mu;
    struct jchunk *head;   /* under mu: oldest published chunk */
    struct jchunk *tail;   /* under mu: newest */
    size_t bytes;          /* under mu: bytes in the list */
    int err;               /* under mu: 0 or why the journal failed */
};

static void chunks_free(struct jchunk *c)
{
    while (c != NULL) {
        struct jchunk *next = c->next;
        mem_free(c);
        c = next;
    }
}

/* Makes room for n more bytes in b; false when memory ran out. */
static bool jbuf_reserve(struct jbuf *b, size_t n)
{
    if (b->len + n <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
        cap *= 2;
    uint8_t *p = mem_realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

/* The journal fails with err: everything it holds is dropped. */
static void fail(struct backend_journal *j, int err)
{
    CHECK(err < 0);
    j->failed = true;
    j->touched.len = j->pending.len = 0;
    pthread_mutex_lock(&j->mu);
    if (j->err == 0)
        j->err = err;
    struct jchunk *c = j->head;
    j->head = j->tail = NULL;
    j->bytes = 0;
    pthread_mutex_unlock(&j->mu);
    chunks_free(c);
}

void backend__journal_touch(struct backend_journal *j, MDB_dbi dbi,
                            const void *key, size_t key_len)
{
    CHECK(j != NULL && key_len > 0);
    if (j->failed)
        return;
    if (!jbuf_reserve(&j->touched, 8 + key_len)) {
        fail(j, ERR_NOMEM);
        return;
    }
    uint8_t *p = j->touched.p + j->touched.len;
    put32(p, (uint32_t)dbi);
    put32(p + 4, (uint32_t)key_len);
    memcpy(p + 8, key, key_len);
    j->touched.len += 8 + key_len;
}

/* Appends the record of (dbi, key) as txn leaves it. */
static int capture_one(struct backend_journal *j, MDB_txn *txn, MDB_dbi dbi,
                       const uint8_t *key, uint32_t key_len)
{
    MDB_val k = {key_len, (void *)key}, v = {0, NULL};
    int rc = mdb_get(txn, dbi, &k, &v);
    if (rc != 0 && rc != MDB_NOTFOUND)
        return ERR_IO;
    bool gone = rc == MDB_NOTFOUND;
    CHECK(gone || v.mv_size < JOURNAL_DELETED);
    size_t vlen = gone ? 0 : v.mv_size;
    if (!jbuf_reserve(&j->pending, REC_HEAD + key_len + vlen))
        return ERR_NOMEM;
    uint8_t *p = j->pending.p + j->pending.len;
    put32(p, (uint32_t)dbi);
    put32(p + 4, key_len);
    put32(p + 8, gone ? JOURNAL_DELETED : (uint32_t)vlen);
    memcpy(p + REC_HEAD, key, key_len);
    if (vlen > 0)
        memcpy(p + REC_HEAD + key_len, v.mv_data, vlen);
    j->pending.len += REC_HEAD + key_len + vlen;
    return 0;
}

void backend__journal_capture(struct backend_journal *j, MDB_txn *txn)
{
    CHECK(j != NULL && txn != NULL);
    if (j->failed)
        return;
    size_t off = 0;
    while (off < j->touched.len) {
        const uint8_t *p = j->touched.p + off;
        uint32_t dbi = backend__get32(p), klen = backend__get32(p + 4);
        int rc = capture_one(j, txn, dbi, p + 8, klen);
        if (rc != 0) {
            fail(j, rc);
            return;
        }
        off += 8 + (size_t)klen;
    }
    CHECK(off == j->touched.len);
}

void backend__journal_end_txn(struct backend_journal *j, bool committed)
{
    CHECK(j != NULL);
    size_t n = j->pending.len;
    j->touched.len = 0;
    j->pending.len = 0;
    if (j->failed || !committed || n == 0)
        return;
    struct jchunk *c = mem_malloc(sizeof *c + n);
    if (c == NULL) {
        fail(j, ERR_NOMEM);
        return;
    }
    c->next = NULL;
    c->len = n;
    memcpy(c->data, j->pending.p, n);
    pthread_mutex_lock(&j->mu);
    bool full = j->bytes + n > j->max_bytes;
    if (!full) {
        if (j->tail != NULL)
            j->tail->next = c;
        else
            j->head = c;
        j->tail = c;
        j->bytes += n;
    }
    pthread_mutex_unlock(&j->mu);
    if (full) {
        mem_free(c);
        fail(j, ERR_DEFRAG_JOURNAL_FULL);
    }
}

int backend_journal_start(struct backend *be, size_t max_bytes)
{
    CHECK(be != NULL && max_bytes > 0);
    CHECK(!backend__writing(be)); /* the caller excludes the writer */
    struct backend_journal **slot = backend__journal_slot(be);
    if (*slot != NULL)
        return ERR_BUSY;
    struct backend_journal *j = mem_calloc(1, sizeof *j);
    if (j == NULL)
        return ERR_NOMEM;
    j->max_bytes = max_bytes;
    pthread_mutex_init(&j->mu, NULL);
    *slot = j;
    return 0;
}

void backend_journal_stop(struct backend *be)
{
    CHECK(be != NULL);
    CHECK(!backend__writing(be)); /* the caller excludes the writer */
    struct backend_journal **slot = backend__journal_slot(be);
    struct backend_journal *j = *slot;
    if (j == NULL)
        return;
    *slot = NULL;
    chunks_free(j->head);
    mem_free(j->touched.p);
    mem_free(j->pending.p);
    pthread_mutex_destroy(&j->mu);
    mem_free(j);
}

/* Opens on dst every bucket the records of list use (dst_dbi[src dbi]),
 * before dst's write txn: LMDB opens named databases in a txn of its
 * own here (backend_bucket_open). */
static int buckets_map(struct backend *be, struct backend *dst,
                       const struct jchunk *list, MDB_dbi *dst_dbi)
{
    for (const struct jchunk *c = list; c != NULL; c = c->next) {
        for (size_t off = 0; off < c->len;) {
            const uint8_t *p = c->data + off;
            uint32_t dbi = backend__get32(p), klen = backend__get32(p + 4);
            uint32_t vlen = backend__get32(p + 8);
            CHECK(dbi < BACKEND__MAX_BUCKETS + 2);
            off += REC_HEAD + klen + (vlen == JOURNAL_DELETED ? 0 : vlen);
            if (dst_dbi[dbi] != 0)
                continue;
            char name[64];
            unsigned flags;
            if (!backend__bucket_name(be, dbi, name, &flags))
                return ERR_CORRUPT;
            backend_bucket b;
            int rc = backend_bucket_open(dst, name, flags, &b);
            if (rc != 0)
                return rc;
            dst_dbi[dbi] = b;
        }
    }
    return 0;
}

/* Writes one record into dst's txn. */
static int replay_one(struct backend_txn *txn, const uint8_t *p,
                      const MDB_dbi *dst_dbi, size_t *len_out)
{
    uint32_t dbi = backend__get32(p), klen = backend__get32(p + 4);
    uint32_t vlen = backend__get32(p + 8);
    const uint8_t *key = p + REC_HEAD;
    int rc;
    if (vlen == JOURNAL_DELETED) {
        rc = backend_del(txn, dst_dbi[dbi], key, klen);
        if (rc == ERR_NOTFOUND) /* absent in the copy too */
            rc = 0;
        *len_out = REC_HEAD + klen;
    } else {
        rc = backend_put(txn, dst_dbi[dbi], key, klen, key + klen, vlen);
        *len_out = REC_HEAD + klen + vlen;
    }
    return rc;
}

/* Writes list into dst, committing every REPLAY_TXN_BYTES. */
static int replay_list(struct backend *dst, const struct jchunk *list,
                       const MDB_dbi *dst_dbi)
{
    struct backend_txn *txn = NULL;
    size_t in_txn = 0;
    int rc = 0;
    for (const struct jchunk *c = list; c != NULL && rc == 0; c = c->next) {
        for (size_t off = 0; off < c->len && rc == 0;) {
            if (txn == NULL && (rc = backend_write_begin(dst, &txn)) != 0)
                break;
            size_t n = 0;
            rc = replay_one(txn, c->data + off, dst_dbi, &n);
            off += n;
            in_txn += n;
            if (rc == 0 && in_txn >= REPLAY_TXN_BYTES) {
                rc = backend_write_commit(txn);
                txn = NULL;
                in_txn = 0;
            }
        }
    }
    if (txn != NULL && rc == 0)
        rc = backend_write_commit(txn);
    else if (txn != NULL)
        backend_write_abort(txn);
    return rc;
}

int backend_journal_replay(struct backend *be, struct backend *dst,
                           size_t *bytes_out)
{
    CHECK(be != NULL && dst != NULL && be != dst);
    struct backend_journal *j = *backend__journal_slot(be);
    CHECK(j != NULL);
    pthread_mutex_lock(&j->mu);
    struct jchunk *list = j->head;
    size_t bytes = j->bytes;
    int err = j->err;
    j->head = j->tail = NULL;
    j->bytes = 0;
    pthread_mutex_unlock(&j->mu);
    MDB_dbi dst_dbi[BACKEND__MAX_BUCKETS + 2] = {0};
    int rc = err;
    if (rc == 0)
        rc = buckets_map(be, dst, list, dst_dbi);
    if (rc == 0)
        rc = replay_list(dst, list, dst_dbi);
    chunks_free(list);
    if (bytes_out != NULL)
        *bytes_out = bytes;
    return rc;
}
