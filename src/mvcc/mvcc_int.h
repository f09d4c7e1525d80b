/*
 * mvcc_int.h - private declarations shared by the mvcc_*.c files: the
 * store, read and batch structs, the record codec and the arena.
 *
 * ON-DISK FORMATS (LMDB buckets of the backend; integers are two's
 * complement; BE = big-endian, LE = little-endian).
 *
 * Bucket `kv` (BACKEND_BUCKET_REVKEY order: user key, then the 17-byte
 * suffix bytewise).  One entry per version of every key.
 *   key:   [0, n)      user key bytes, 1 <= n <= mvcc_key_max
 *          [n, n+8)    ~main (bitwise NOT of the main revision), u64 BE
 *          [n+8, n+16) ~sub  (bitwise NOT of the sub revision), u64 BE
 *          [n+16]      kind: 0 = put, 1 = tombstone (deletion)
 *     Inverting the revisions makes the newest version of a key sort first,
 *     so "the version of k visible at rev R" is one seek to (k, ~R, ~MAX,
 *     0) (MDB_SET_RANGE).  The kind lives in the key so that counting and
 *     skipping deleted keys never touches value pages.
 *   value: [0]         format = 1
 *          [1]         flags: bit 0 = tombstone (must equal the key's kind)
 *          [2, 10)     create_rev, i64 LE (0 for tombstones)
 *          [10, 18)    version, i64 LE (0 for tombstones)
 *          [18, 26)    lease, i64 LE (0 for tombstones)
 *          [26, ...)   the value bytes (none for tombstones)
 *
 * Bucket `rev` (bytewise order = revision order).  One entry per version
 * still in `kv`; the revision log for watch replay and compaction.
 *   key:   [0, 8) main u64 BE, [8, 16) sub u64 BE
 *   value: [0] kind (as above), [1, ...) user key bytes
 *
 * Bucket `lkey` (bytewise).  One entry per live key attached to a lease.
 *   key:   [0, 8) lease id u64 BE, [8, ...) user key; value: empty.
 *
 * Bucket `meta` (bytewise), entry "mvcc_state", 52 bytes:
 *          [0, 8)   consistent_index u64 LE
 *          [8, 16)  current_rev i64 LE (1 on an empty store)
 *          [16, 24) compact_scheduled i64 LE (0 = never compacted)
 *          [24, 32) compact_finished i64 LE (<= compact_scheduled)
 *          [32, 40) compact_next_main i64 LE \ next `rev` entry the running
 *          [40, 48) compact_next_sub i64 LE  / compaction examines
 *          [48, 52) CRC32C of bytes [0, 48), u32 LE
 * The state is rewritten by every batch commit, in the batch's txn.
 */
#ifndef CETCD_MVCC_MVCC_INT_H
#define CETCD_MVCC_MVCC_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"

#define MVCC_SUFFIX BACKEND_REVKEY_SUFFIX /* ~main, ~sub, kind */
#define MVCC_REVKEY_LEN 16                /* `rev` bucket key */
#define MVCC_HDR 26                       /* `kv` value header */
#define MVCC_STATE_LEN 52                 /* `meta` mvcc_state */
#define MVCC_FORMAT 1
#define MVCC_KIND_PUT 0
#define MVCC_KIND_TOMB 1
#define MVCC_LEASE_PREFIX 8
/* Longest composite key we ever build (bounded by LMDB's key limit). */
#define MVCC_CKEY_MAX 1024
#define MVCC_READ_POOL_MAX 64

_Static_assert(MVCC_SUFFIX == 8 + 8 + 1, "kv key suffix layout");
_Static_assert(MVCC_HDR == 1 + 1 + 8 + 8 + 8, "kv value header layout");
_Static_assert(MVCC_STATE_LEN == 6 * 8 + 4, "mvcc_state layout");
_Static_assert(sizeof(mvcc_rev) == 8, "revisions are 64-bit");

/* The persisted state (meta "mvcc_state"), decoded. */
struct mvcc_state {
    uint64_t ci;           /* consistent index */
    mvcc_rev rev;          /* current revision */
    mvcc_rev compact;      /* scheduled compact revision */
    mvcc_rev compact_fin;  /* finished compact revision */
    mvcc_rev next_main;    /* compaction position: main */
    int64_t next_sub;      /* compaction position: sub */
};

/* One chunk of the batch arena. */
struct mvcc_chunk {
    struct mvcc_chunk *next; /* older chunk */
    size_t cap;              /* bytes after the header */
    size_t used;             /* bytes handed out */
};

/* A bump allocator whose blocks never move: pointers handed out during a
 * batch stay valid until it is reset.  Owned by the apply thread. */
struct mvcc_arena {
    struct mvcc_chunk *head; /* current chunk (newest first list) */
    size_t total;            /* bytes allocated in all chunks */
    size_t keep;             /* reset frees everything above this */
};

/* A request inside a batch.  Owned by the apply thread. */
struct mvcc_txn {
    struct mvcc_batch *b; /* owning batch */
    mvcc_rev rev;         /* main revision of this txn's writes */
    int64_t sub;          /* next sub revision */
    bool open;            /* between txn_begin and txn_end */
};

/* The apply batch.  One per store, reused; owned by the apply thread. */
struct mvcc_batch {
    struct mvcc_store *s;         /* owning store */
    struct backend_txn *txn;      /* the LMDB write txn */
    struct backend_cursor *kv;    /* cursor on `kv` (freed with txn) */
    struct backend_cursor *revc;  /* cursor on `rev` (freed with txn) */
    struct backend_cursor *lk;    /* cursor on `lkey`, lazily (ditto) */
    struct mvcc_range_result scratch; /* reused by deletes */
    struct mvcc_state st;         /* state as of this batch */
    int err;                      /* poisoning error, 0 = healthy */
    bool open;                    /* between begin and commit/abort */
    struct mvcc_txn t;            /* the one request txn */
    struct mvcc_arena arena;      /* copies handed to the caller */
    struct mvcc_event *events;    /* events of the batch (if observed) */
    size_t n_events;              /* used entries of events */
    size_t cap_events;            /* allocated entries of events */
};

/* A read snapshot; pooled in the store.  Used by one thread at a time. */
struct mvcc_read {
    struct mvcc_store *s;          /* owning store */
    struct backend_txn *txn;       /* read txn (reset while pooled) */
    struct backend_cursor *kv;     /* cursor on `kv` */
    struct backend_cursor *revc;   /* cursor on `rev`, opened lazily */
    struct backend_cursor *lk;     /* cursor on `lkey`, opened lazily */
    mvcc_rev rev;                  /* snapshot's current revision */
    mvcc_rev compact;              /* snapshot's compact revision */
    struct mvcc_read *next_free;   /* pool link */
};

/* The store.  Atomics are written by the apply thread, read by anyone. */
struct mvcc_store {
    struct backend *be;            /* not owned */
    backend_bucket kv;             /* `kv` bucket */
    backend_bucket rev;            /* `rev` bucket */
    backend_bucket meta;           /* `meta` bucket */
    backend_bucket lkey;           /* `lkey` bucket */
    size_t key_max;                /* longest user key */
    _Atomic mvcc_rev cur_rev;      /* committed current revision */
    _Atomic mvcc_rev compact_rev;  /* committed scheduled compact rev */
    _Atomic mvcc_rev compact_fin;  /* committed finished compact rev */
    _Atomic uint64_t ci;           /* committed consistent index */
    _Atomic mvcc_rev lim_rev;      /* reads see at most this rev; 0: all */
    _Atomic mvcc_rev lim_compact;  /* ... and this compact rev (if lim) */
    struct mvcc_state st;          /* committed state (apply thread) */
    struct mvcc_batch batch;       /* the reusable batch */
    mvcc_observer_fn observer;     /* event consumer or NULL */
    void *observer_arg;            /* its argument */
    pthread_mutex_t pool_mu;       /* guards the read pool */
    struct mvcc_read *pool;        /* reset reads ready for reuse */
    size_t pool_len;               /* entries in pool */
};

/* A key range as given by the caller, normalised. */
struct mvcc_span {
    const uint8_t *key; /* start key (inclusive) */
    size_t key_len;     /* >= 1 */
    const uint8_t *end; /* end (exclusive) when bounded */
    size_t end_len;     /* length of end */
    bool single;        /* only `key` */
    bool unbounded;     /* every key >= key */
};

/* --- byte helpers ---------------------------------------------------- */

static inline void mvcc__put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t mvcc__get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline void mvcc__put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t mvcc__get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* bytes_cmp is Go's bytes.Compare. */
static inline int mvcc__bytes_cmp(const void *a, size_t al, const void *b,
                                  size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0)
        return c;
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

/* --- mvcc.c ---------------------------------------------------------- */

/* mvcc__ckey builds the composite `kv` key into buf (MVCC_CKEY_MAX bytes);
 * returns its length.  key_len <= store key_max is the caller's duty. */
size_t mvcc__ckey(uint8_t *buf, const void *key, size_t key_len, mvcc_rev main,
                  int64_t sub, int kind);
/* mvcc__ckey_parse splits a composite key; ERR_CORRUPT if malformed. */
int mvcc__ckey_parse(const struct backend_val *k, size_t *ulen_out,
                     mvcc_rev *main_out, int64_t *sub_out, int *kind_out);
/* mvcc__value_encode writes the value record of kv into dst. */
void mvcc__value_encode(uint8_t *dst, const struct mvcc_kv *kv, bool tomb);
/* mvcc__entry_decode = mvcc_kv_decode on backend values, skipping the
 * value bytes when keys_only. */
int mvcc__entry_decode(const struct backend_val *k,
                       const struct backend_val *v, bool keys_only,
                       struct mvcc_kv *kv, bool *tomb_out);
/* mvcc__span_init normalises a range; ERR_INVAL / ERR_TOO_LARGE. */
int mvcc__span_init(struct mvcc_span *sp, const struct mvcc_store *s,
                    const void *key, size_t key_len, const void *end,
                    size_t end_len);
/* mvcc__span_has tells whether user key u is inside sp (u >= sp->key is
 * the caller's knowledge). */
bool mvcc__span_has(const struct mvcc_span *sp, const uint8_t *u, size_t ul);
/* mvcc__state_encode / decode: the meta record. */
void mvcc__state_encode(uint8_t *dst, const struct mvcc_state *st);
int mvcc__state_decode(const struct backend_val *v, struct mvcc_state *st);

/* --- mvcc_read.c ----------------------------------------------------- */

/* mvcc__result_grow makes room for one more entry of res->kvs; 0 or
 * ERR_NOMEM. */
int mvcc__result_grow(struct mvcc_range_result *res);

/* mvcc__scan runs a range over cursor kv at rev (already validated) into
 * res (grown with mem_realloc).  Pointers are those of the cursor's txn. */
int mvcc__scan(struct backend_cursor *kv, const struct mvcc_span *sp,
               mvcc_rev rev, int64_t limit, unsigned flags,
               struct mvcc_range_result *res);
/* mvcc__visible seeks the version of key visible at rev: 0 and out, tomb_out
 * filled if the key has a version <= rev, ERR_NOTFOUND if not.  The
 * cursor is left on that version. */
int mvcc__visible(struct backend_cursor *kv, const void *key, size_t key_len,
                  mvcc_rev rev, bool keys_only, struct mvcc_kv *out,
                  bool *tomb_out);

/* --- mvcc_write.c ---------------------------------------------------- */

/* mvcc__arena_alloc returns len bytes (8-aligned) that live until the next
 * batch, or NULL (ERR_NOMEM). */
void *mvcc__arena_alloc(struct mvcc_arena *a, size_t len);
void mvcc__arena_reset(struct mvcc_arena *a);
void mvcc__arena_free(struct mvcc_arena *a);
/* mvcc__batch_fail records the first poisoning error and returns it. */
int mvcc__batch_fail(struct mvcc_batch *b, int err);

#endif
