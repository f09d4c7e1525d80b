/*
 * mvcc_int.h - private declarations shared by the mvcc_*.c files: the
 * store, read and batch structs, the record codec and the arena.
 *
 * ON-DISK FORMATS (LMDB buckets of the backend; integers are two's
 * complement; BE = big-endian, LE = little-endian).
 *
 * Every version is stored twice: its record, value included, appended to
 * the revision log `rev` (sequential writes: the log's right edge), and a
 * small index entry in `kv` (or `kvl`) filed by key, newest first, whose
 * value is the record's header only.  A put so touches one leaf of a tree
 * of ~60-byte entries, not of whole records: an index of 100k keys x a few
 * versions fits in a few MiB, and the pages a commit copies per put fall
 * from a random leaf of the record tree to a random leaf of the index plus
 * the log's edge (docs/BENCHMARKS.md, session 21).  Reads that want values
 * go index -> log (one more seek per key); counts, keys-only ranges and
 * writes' version lookups read the index alone; the history replay of
 * watchers and the hashes walk the log alone.
 *
 * Bucket `kv` (BACKEND_BUCKET_REVKEY order: user key, then the 17-byte
 * suffix bytewise).  One entry per version of every short key: L = the
 * store's short_max = LMDB's key limit - 17 (494 bytes with LMDB's default
 * 511-byte keys).
 *   key:   [0, n)      user key bytes, 1 <= n <= L (a short key)
 *          [n, n+8)    ~main (bitwise NOT of the main revision), u64 BE
 *          [n+8, n+16) ~sub  (bitwise NOT of the sub revision), u64 BE
 *          [n+16]      kind: 0 = put, 1 = tombstone (deletion)
 *     Inverting the revisions makes the newest version of a key sort first,
 *     so "the version of k visible at rev R" is one seek to (k, ~R, ~MAX,
 *     0) (MDB_SET_RANGE).  The kind lives in the key so that counting and
 *     skipping deleted keys never touches value pages.
 *   value: [0]         format = 3 (MVCC_FORMAT)
 *          [1]         flags: bit 0 = tombstone (must equal the key's kind)
 *          [2, 10)     create_rev, i64 LE (0 for tombstones)
 *          [10, 18)    version, i64 LE (0 for tombstones)
 *          [18, 26)    lease, i64 LE (0 for tombstones)
 *     26 bytes exactly: the value bytes are in the version's `rev` entry.
 *
 * Bucket `kvl` (BACKEND_BUCKET_REVKEY order).  One entry per version of
 * every long key (n > L bytes), which LMDB cannot hold as a key.  With
 * P = L - 8, the long key K is filed under its index I(K), L bytes:
 *   key:   [0, P)      K's first P bytes
 *          [P, L)      mvcc__key_hash(K), u64 BE
 *          [L, L+17)   ~main, ~sub, kind, as in `kv`
 *   value: [0]         format = 4 (MVCC_FORMAT_LONG)
 *          [1, 26)     flags, create_rev, version, lease, as in `kv`
 *          [26, 30)    n = the length of K, u32 LE (n > L)
 *          [30, 30+n)  K itself: the index does not identify it
 *   Keys that share their first P bytes form a "group", and a group's
 *   entries are contiguous (I(K) starts with K's first P bytes).  The
 *   hash only spreads a group: two long keys may share an index (a
 *   collision), their versions then interleave under it by revision, so
 *   every reader compares the full key in the value, never the index
 *   alone.  A point lookup walks one index; a range gathers each group it
 *   meets whole and sorts it by full key (mvcc_long.c).  Order against
 *   short keys needs no care: a short key S and a long key K compare as S
 *   and K's first L bytes do, S first when equal, and the range walk
 *   merges both buckets by full key (mvcc_read.c).
 *
 * Bucket `rev` (bytewise order = revision order), the revision log.  One
 * entry per version still in `kv` or `kvl`, with its whole record:
 *   key:   [0, 8) main u64 BE, [8, 16) sub u64 BE
 *   value: [0]          kind (as above)
 *          [1, 9)       create_rev, i64 LE (0 for tombstones)
 *          [9, 17)      version, i64 LE (0 for tombstones)
 *          [17, 25)     lease, i64 LE (0 for tombstones)
 *          [25, 29)     n = the user key's length, u32 LE (n >= 1)
 *          [29, 29+n)   the user key (short or long)
 *          [29+n, ...)  the value bytes (none for tombstones)
 *   The header repeats the index entry's: a record read from the log alone
 *   (replay, hashes, export) is whole; a value read through the index is
 *   checked against it (same kind and key).
 *
 * Bucket `lkey` (bytewise).  One entry per live short key attached to a
 * lease, and one per (lease, index of `kvl`) that live long keys with that
 * lease are filed under:
 *   short: key [0, 8) lease id u64 BE, [8, 8+n) user key (n <= L);
 *          value empty.
 *   long:  key [0, 8) lease id u64 BE, [8, 8+L) the index I(K), [8+L] 0
 *          (so 8+L+1 bytes: longer than any short entry); value: how many
 *          live long keys under that index hold the lease, u64 LE (>= 1).
 *          The keys themselves are found in `kvl` (those whose newest
 *          version is a put holding the lease).
 *
 * Bucket `meta` (bytewise), entry "mvcc_format": the layout above, one
 * byte, MVCC_LAYOUT (2).  Written by the first commit of an empty store; a
 * store with state but another layout (or none: cetcd before session 21
 * kept whole records in `kv`) is refused at open (ERR_UNSUPPORTED).
 *
 * Bucket `meta` (bytewise), entry "mvcc_state", 68 bytes:
 *          [0, 8)   consistent_index u64 LE
 *          [8, 16)  current_rev i64 LE (1 on an empty store)
 *          [16, 24) compact_scheduled i64 LE (0 = never compacted)
 *          [24, 32) compact_finished i64 LE (<= compact_scheduled)
 *          [32, 40) compact_next_main i64 LE \ next `rev` entry the running
 *          [40, 48) compact_next_sub i64 LE  / compaction examines
 *          [48, 56) live keys i64 LE (-1: not counted)
 *          [56, 64) fold_rev i64 LE: `kv` holds the entry of every short
 *                   key's version <= fold_rev; newer ones may be only in
 *                   the overlay, in memory (mvcc_ovl.c)
 *          [64, 68) CRC32C of bytes [0, 64), u32 LE
 * The state is rewritten by every batch commit, in the batch's txn, so the
 * live key count is as durable as the keys: an open reads it instead of
 * counting every key (tens of ms per 100k keys, in the restart and in a
 * defragmentation's switch-over).  A 60-byte record (layout 2: no
 * fold_rev, `kv` complete) is read with fold_rev = rev; a 52-byte one (no
 * count either, before session 23) also as "not counted".
 *
 * Bucket `meta`, entry "mvcc_fold", only while a fold round runs
 * (mvcc_ovl.c): 8 + n + 4 bytes
 *          [0, 8)     target i64 LE: the round files the versions <= it
 *          [8, 8+n)   pos: the composite `kv` key the round has passed
 *                     (n >= 18); every version in (fold_rev, target] of
 *                     a key <= pos is in `kv`
 *          [8+n, +4)  CRC32C of the bytes before, u32 LE
 *
 * Layouts: 2 (sessions 21-24) had no overlay; 3 is 2 plus fold_rev.  A
 * layout-2 store opens as is (its `kv` is complete) and is marked 3 by its
 * first commit, so an older cetcd refuses it from then on (its `kv` may
 * lack the newest versions).
 */
#ifndef CETCD_MVCC_MVCC_INT_H
#define CETCD_MVCC_MVCC_INT_H

#include "util/check.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"

#define MVCC_SUFFIX BACKEND_REVKEY_SUFFIX /* ~main, ~sub, kind */
#define MVCC_REVKEY_LEN 16                /* `rev` bucket key */
#define MVCC_HDR 26                       /* `kv` value header */
#define MVCC_LOG_HDR 29                   /* `rev` value header */
#define MVCC_STATE_LEN 68                 /* `meta` mvcc_state */
#define MVCC_STATE_LEN_NOFOLD 60          /* the same without fold_rev */
#define MVCC_STATE_LEN_NOKEYS 52          /* ... and without the count */
#define MVCC_FORMAT 3
#define MVCC_FORMAT_LONG 4
#define MVCC_LAYOUT 3                     /* `meta` mvcc_format */
#define MVCC_LAYOUT_NOFOLD 2              /* read, rewritten as 3 */
#define MVCC_HDR_LONG (MVCC_HDR + 4)      /* `kvl` value header */
#define MVCC_HASH_LEN 8                   /* hash at the end of an index */
/* Longest user key: the request size limit (--max-request-bytes) is the
 * real one, as in etcd; this only keeps lengths inside a u32. */
#define MVCC_KEY_MAX ((size_t)1 << 30)
#define MVCC_KIND_PUT 0
#define MVCC_KIND_TOMB 1
#define MVCC_LEASE_PREFIX 8
/* Longest composite key we ever build (bounded by LMDB's key limit). */
#define MVCC_CKEY_MAX 1024
#define MVCC_READ_POOL_MAX 64

_Static_assert(MVCC_SUFFIX == 8 + 8 + 1, "kv key suffix layout");
_Static_assert(MVCC_HDR == 1 + 1 + 8 + 8 + 8, "kv value header layout");
_Static_assert(MVCC_LOG_HDR == 1 + 8 + 8 + 8 + 4, "rev value header layout");
_Static_assert(MVCC_STATE_LEN == 8 * 8 + 4, "mvcc_state layout");
_Static_assert(sizeof(mvcc_rev) == 8, "revisions are 64-bit");

/* The persisted state (meta "mvcc_state"), decoded. */
struct mvcc_state {
    uint64_t ci;           /* consistent index */
    mvcc_rev rev;          /* current revision */
    mvcc_rev compact;      /* scheduled compact revision */
    mvcc_rev compact_fin;  /* finished compact revision */
    mvcc_rev next_main;    /* compaction position: main */
    int64_t next_sub;      /* compaction position: sub */
    int64_t keys;          /* live keys, -1: not counted */
    mvcc_rev fold_rev;     /* `kv` holds every version <= this */
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

/* --- the overlay (mvcc_ovl.c) ----------------------------------------- */

#define MVCC_OVL_LEVELS 12
/* Once the overlay holds MVCC_OVL_MAX entries or MVCC_OVL_MAX_BYTES of
 * nodes, a fold round starts: each batch's commit then files up to
 * MVCC_OVL_SLICE of its entries into `kv`, in key order, until the round
 * has passed every entry.  At 4x the bounds (a batch of many writes) a
 * batch files all of them at once.  Tests narrow them (mvcc__ovl_*); a
 * bound of 0 files every entry in `kv` at once, as before the overlay. */
#define MVCC_OVL_MAX 16384
#define MVCC_OVL_MAX_BYTES (4u << 20)
#define MVCC_OVL_SLICE 1024
extern size_t mvcc__ovl_max;
extern size_t mvcc__ovl_max_bytes;
extern size_t mvcc__ovl_slice;

struct mvcc_onode;  /* an entry: composite key and index value */

/* One generation of the overlay: the index entries of the versions after
 * base that `kv` lacks, in a skip list (one writer, any readers). */
struct mvcc_ovl {
    mvcc_rev base;                  /* the fold_rev it goes with */
    _Atomic int refs;               /* the store's + one per read */
    _Atomic(struct mvcc_onode *) head[MVCC_OVL_LEVELS]; /* first nodes */
    size_t n;                       /* linked entries (writer) */
    size_t bytes;                   /* bytes of nodes allocated (writer) */
    uint64_t rng;                   /* node heights (writer) */
    struct mvcc_arena mem;          /* every node's memory */
};

/* A cursor on the whole key index: `kv` merged with an overlay.  With
 * ovl NULL it is the `kv` (or any bucket's) cursor alone. */
struct mvcc_icur {
    struct backend_cursor *db;      /* on `kv` */
    struct mvcc_ovl *ovl;           /* NULL: none */
    struct mvcc_onode *on;          /* overlay position, NULL: the end */
    struct backend_val dk, dv;      /* db position when db_ok */
    bool db_ok;                     /* db has an entry at its position */
    int at;                         /* 0 none; bit 0 db, bit 1 overlay */
};

/* A fold round (mvcc_ovl.c): the versions <= target are being filed into
 * `kv` in key order, a slice per batch; those of keys <= pos are there.
 * Persisted in meta "mvcc_fold" (mvcc_int.h) while it runs. */
struct mvcc_round {
    mvcc_rev target;                /* 0: no round */
    uint8_t pos[MVCC_CKEY_MAX];     /* the last composite key passed */
    size_t pos_len;                 /* 0: none yet */
    size_t folded;                  /* entries of the current generation
                                       this process filed in this round
                                       (also in `kv`) */
};

/* A request inside a batch.  Owned by the apply thread. */
struct mvcc_txn {
    struct mvcc_batch *b; /* owning batch */
    mvcc_rev rev;         /* main revision of this txn's writes */
    int64_t sub;          /* next sub revision */
    bool open;            /* between txn_begin and txn_end */
    uint32_t ranges;      /* ranges, puts and deletes asked of this txn: */
    uint32_t puts;        /* added to mvcc_metrics at txn_end, as etcd */
    uint32_t deletes;     /* counts a write txn's operations */
};

/* The apply batch.  One per store, reused; owned by the apply thread. */
struct mvcc_batch {
    struct mvcc_store *s;         /* owning store */
    struct backend_txn *txn;      /* the LMDB write txn */
    struct mvcc_icur kv;          /* on `kv` (db freed with txn) and the
                                     overlay, until a fold: then `kv` */
    struct backend_cursor *revc;  /* cursor on `rev` (freed with txn) */
    struct backend_cursor *revv;  /* on `rev` for values, lazily (ditto) */
    struct backend_cursor *lk;    /* cursor on `lkey`, lazily (ditto) */
    struct backend_cursor *kvl;   /* cursor on `kvl`, lazily (ditto) */
    uint8_t *ubuf;                /* compaction's copy of a user key */
    size_t ubuf_cap;              /* allocated bytes of ubuf */
    struct mvcc_range_result scratch; /* reused by deletes */
    struct mvcc_state st;         /* state as of this batch */
    int err;                      /* poisoning error, 0 = healthy */
    int64_t keys_delta;           /* live keys made less deleted */
    bool prev_values;             /* events carry prev values (begin's
                                     copy of the store's flag) */
    bool open;                    /* between begin and commit/abort */
    struct mvcc_txn t;            /* the one request txn */
    struct mvcc_arena arena;      /* copies handed to the caller */
    struct mvcc_event *events;    /* events of the batch (if observed) */
    size_t n_events;              /* used entries of events */
    size_t cap_events;            /* allocated entries of events */
    struct mvcc_onode **added;    /* overlay nodes linked by this batch */
    size_t n_added;               /* (unlinked again if it aborts) */
    size_t cap_added;
    bool folded;                  /* the overlay is in `kv` (this txn) */
    bool compact_low;             /* its compaction step runs short of
                                     room: mvcc__room_for before writes */
    struct mvcc_ovl *next_ovl;    /* the generation after the fold */
    struct mvcc_round round;      /* the store's, as this batch leaves it */
};

/* A read snapshot; pooled in the store.  Used by one thread at a time. */
struct mvcc_read {
    struct mvcc_store *s;          /* owning store */
    struct backend_txn *txn;       /* read txn (reset while pooled) */
    struct mvcc_icur kv;           /* on `kv` and the read's overlay
                                      generation (a reference) */
    struct backend_cursor *revc;   /* cursor on `rev`, opened lazily */
    struct backend_cursor *revv;   /* on `rev` for values, lazily */
    struct backend_cursor *lk;     /* cursor on `lkey`, opened lazily */
    struct backend_cursor *kvl;    /* cursor on `kvl`, opened lazily */
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
    backend_bucket kvl;            /* `kvl` bucket (long keys) */
    size_t short_max;              /* L: longest key stored in `kv` */
    _Atomic mvcc_rev cur_rev;      /* committed current revision */
    _Atomic mvcc_rev compact_rev;  /* committed scheduled compact rev */
    _Atomic mvcc_rev compact_fin;  /* committed finished compact rev */
    _Atomic uint64_t ci;           /* committed consistent index */
    _Atomic int64_t keys;          /* live keys, -1: not counted */
    _Atomic mvcc_rev lim_rev;      /* reads see at most this rev; 0: all */
    _Atomic mvcc_rev lim_compact;  /* ... and this compact rev (if lim) */
    struct mvcc_state st;          /* committed state (apply thread) */
    struct mvcc_batch batch;       /* the reusable batch */
    bool formatted;                /* meta holds mvcc_format (this
                                      layout) */
    struct mvcc_ovl *ovl;          /* current overlay generation; the
                                      pointer is swapped under pool_mu */
    struct mvcc_round round;       /* the committed fold round */
    _Atomic bool prev_values;      /* mvcc_store_set_prev_values */
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
    size_t short_max;   /* the store's L (keys above it live in `kvl`) */
};

/* One version gathered from `kvl`. */
struct mvcc_lent {
    struct mvcc_kv kv; /* decoded (pointers into the txn's pages) */
    bool tomb;         /* a deletion */
};

/* A growable array of gathered versions (mem_realloc; free v). */
struct mvcc_lbuf {
    struct mvcc_lent *v; /* n entries */
    size_t n;            /* used */
    size_t cap;          /* allocated */
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

static inline bool mvcc__same_ukey(const struct backend_val *k,
                                   const uint8_t *u, size_t ul)
{
    return k->len == ul + MVCC_SUFFIX && memcmp(k->data, u, ul) == 0;
}

/* --- mvcc.c ---------------------------------------------------------- */

/* mvcc__ckey builds the composite `kv` key into buf (MVCC_CKEY_MAX bytes);
 * returns its length.  key_len <= the store's L is the caller's duty; key
 * may be buf itself. */
size_t mvcc__ckey(uint8_t *buf, const void *key, size_t key_len, mvcc_rev main,
                  int64_t sub, int kind);
/* mvcc__ckey_parse splits a composite key; ERR_CORRUPT if malformed. */
int mvcc__ckey_parse(const struct backend_val *k, size_t *ulen_out,
                     mvcc_rev *main_out, int64_t *sub_out, int *kind_out);
/* mvcc__value_encode writes the index entry's value of kv into dst: the
 * `kv` layout (MVCC_HDR bytes), or with long the `kvl` one (MVCC_HDR_LONG
 * + key_len bytes).  The value bytes go to the log (mvcc__log_encode). */
void mvcc__value_encode(uint8_t *dst, const struct mvcc_kv *kv, bool tomb,
                        bool long_);
/* mvcc__log_encode writes the `rev` value of kv (MVCC_LOG_HDR + key_len +
 * value_len bytes) into dst. */
void mvcc__log_encode(uint8_t *dst, const struct mvcc_kv *kv, bool tomb);
/* mvcc__log_decode = mvcc_log_decode on backend values. */
int mvcc__log_decode(const struct backend_val *k, const struct backend_val *v,
                     struct mvcc_event *ev);
/* mvcc__entry_decode = mvcc_kv_decode on backend values of `kv` (long =
 * false) or `kvl` (long = true, the index's prefix checked, not its
 * hash); with revc (a cursor on `rev`) a put's value is read from the log
 * (mvcc__value_load), without it value is NULL. */
int mvcc__entry_decode(const struct backend_val *k,
                       const struct backend_val *v,
                       struct backend_cursor *revc, bool long_,
                       struct mvcc_kv *kv, bool *tomb_out);
/* mvcc__value_load points kv->value at the value of version (kv->mod_rev,
 * sub) in the log (cursor revc), checking that the log's record is that
 * of kv (kind tomb, key, header); ERR_CORRUPT when it is not there. */
int mvcc__value_load(struct backend_cursor *revc, struct mvcc_kv *kv,
                     int64_t sub, bool tomb);
/* meta's layout entry ("mvcc_format") */
extern const char mvcc__format_key[];
/* mvcc__key_hash is the hash at the end of a long key's index, ANDed with
 * mvcc__hash_mask: all ones, but for tests, which narrow it (before opening
 * a store, and for that store's life) to make index collisions common. */
extern uint64_t mvcc__hash_mask;
uint64_t mvcc__key_hash(const uint8_t *key, size_t key_len);
/* Keys per page of the hash's pass over the key index (mvcc_hash.c);
 * tests make it tiny. */
extern size_t mvcc__keep_page;
/* mvcc__key_hash64: the same hash, never narrowed. */
uint64_t mvcc__key_hash64(const uint8_t *key, size_t key_len);
/* mvcc__range flag of internal walks that read a range in pages: stop
 * once limit keys are out (res->more says whether more follow; res->count
 * is then not the range's count, which would read the whole range). */
#define MVCC__RANGE_NO_COUNT (1u << 30)
/* mvcc__range is mvcc_range without counting it in mvcc_metrics (the
 * hashes' own lookups are not client ranges). */
int mvcc__range(struct mvcc_read *r, const void *key, size_t key_len,
                const void *end, size_t end_len, mvcc_rev rev, int64_t limit,
                unsigned flags, struct mvcc_range_result *res);

/* mvcc__span_init normalises a range; ERR_INVAL / ERR_TOO_LARGE. */
int mvcc__span_init(struct mvcc_span *sp, const struct mvcc_store *s,
                    const void *key, size_t key_len, const void *end,
                    size_t end_len);
/* mvcc__span_has tells whether user key u is inside sp (u >= sp->key is
 * the caller's knowledge). */
bool mvcc__span_has(const struct mvcc_span *sp, const uint8_t *u, size_t ul);
/* mvcc__crc_seal writes the CRC32C of p[0, body) after it (u32 LE), the
 * trailer of the meta records; mvcc__crc_ok checks it on a record of len
 * bytes (>= 4). */
void mvcc__crc_seal(uint8_t *p, size_t body);
bool mvcc__crc_ok(const uint8_t *p, size_t len);
/* mvcc__state_encode / decode: the meta record. */
void mvcc__state_encode(uint8_t *dst, const struct mvcc_state *st);
int mvcc__state_decode(const struct backend_val *v, struct mvcc_state *st);

/* --- mvcc_write.c (also mvcc_import.c's) ---------------------------- */

/* mvcc__write_version stores kv (a put, or a tombstone of kv->key) at
 * (t->rev, t->sub) in `kv` or `kvl` and `rev`, moves the key's `lkey`
 * entry from old_lease to kv's lease (0 for a tombstone), bumps t->sub. */
int mvcc__write_version(struct mvcc_txn *t, const struct mvcc_kv *kv,
                        bool tomb, int64_t old_lease);
/* mvcc__latest finds the newest version of key written so far (this
 * batch's too): *found false when there is none or it is a deletion; its
 * value is read from the log only with value (else NULL). */
int mvcc__latest(struct mvcc_batch *b, const void *key, size_t key_len,
                 bool value, struct mvcc_kv *kv, bool *found);
/* mvcc__batch_revv opens b's value cursor on `rev` if it is not yet. */
int mvcc__batch_revv(struct mvcc_batch *b);

/* --- mvcc_ovl.c ------------------------------------------------------ */

/* mvcc__ovl_new makes an empty generation for fold_rev base (one
 * reference: the caller's). */
int mvcc__ovl_new(mvcc_rev base, struct mvcc_ovl **out);
/* mvcc__ovl_unref drops a reference; the last one frees it.  Any thread. */
void mvcc__ovl_unref(struct mvcc_ovl *o);
/* mvcc__ovl_insert links a copy of (key, val) (writer only): ERR_NOMEM,
 * or ERR_CORRUPT if that key is there already.  *out (may be NULL) gets
 * the node, for mvcc__ovl_unlink. */
int mvcc__ovl_insert(struct mvcc_ovl *o, const uint8_t *key, size_t klen,
                     const uint8_t *val, size_t vlen,
                     struct mvcc_onode **out);
/* mvcc__ovl_unlink takes a linked node out of the list (writer only); its
 * memory stays until the generation goes. */
void mvcc__ovl_unlink(struct mvcc_ovl *o, struct mvcc_onode *n);
/* Walking the entries in key order (any thread): first, next (NULL: no
 * more), and the entry of a node (v may be NULL). */
struct mvcc_onode *mvcc__ovl_first(struct mvcc_ovl *o);
struct mvcc_onode *mvcc__ovl_next(const struct mvcc_onode *n);
void mvcc__ovl_entry(const struct mvcc_onode *n, struct backend_val *k,
                     struct backend_val *v);
/* The merged cursor's moves, as backend_cursor_seek/first/next: 0 and the
 * entry (pointers valid while the read's txn and generation are, or, in
 * a batch, until its next write), ERR_NOTFOUND past the end, or the
 * backend's error.  ic->db and ic->ovl are set by the owner. */
int mvcc__ic_seek(struct mvcc_icur *ic, const void *key, size_t len,
                  struct backend_val *k, struct backend_val *v);
int mvcc__ic_first(struct mvcc_icur *ic, struct backend_val *k,
                   struct backend_val *v);
int mvcc__ic_next(struct mvcc_icur *ic, struct backend_val *k,
                  struct backend_val *v);
/* mvcc__ovl_build fills o (base = fold_rev) from the log's entries after
 * base, in the read txn txn: what the index lacks after an open (those
 * a running round r already filed are skipped). */
int mvcc__ovl_build(struct mvcc_store *s, struct backend_txn *txn,
                    struct mvcc_ovl *o, const struct mvcc_round *r);
/* mvcc__fold files every entry of the store's overlay into `kv` in b's
 * txn; the rest of the batch writes to `kv` directly, and its commit
 * stores fold_rev = its revision and installs an empty generation. */
int mvcc__fold(struct mvcc_batch *b);
/* mvcc__fold_slice runs, at b's commit, the next slice of a fold round
 * (starting one when the overlay is at its bound): the slice's entries
 * into `kv`, the round's meta record, and when the round has passed
 * every entry, the next generation (b->next_ovl) and fold_rev. */
int mvcc__fold_slice(struct mvcc_batch *b);
/* mvcc__fold_slice_low is a compaction's fold on a nearly full disk
 * (backend_write_room), where mvcc__fold could need more new pages than
 * are left (up to one leaf per entry) and its batch would stall the apply
 * until space is freed: the next MVCC_OVL_SLICE_LOW entries of a round,
 * started now whatever the overlay's size, one slice per compaction
 * step (fewer entries where the txn's room runs short: mvcc__room_for);
 * the compaction deletes once the round has passed its revision.
 * ERR_FULL (b unharmed): no slice in b - a round ended in b (the next
 * one walks the generation b's commit installs), or the entries to fold
 * are all b's own (a round's target is a committed revision). */
int mvcc__fold_slice_low(struct mvcc_batch *b);
#define MVCC_OVL_SLICE_LOW 128
/* mvcc__room_for: b's txn has room for `writes` more small writes for
 * certain (backend_write_room): a compaction step on a nearly full disk
 * (b->compact_low) stops before it is refused halfway, its slice of the
 * fold as well. */
bool mvcc__room_for(struct mvcc_batch *b, unsigned writes);
/* The round's meta record ("mvcc_fold"): mvcc__round_decode fills r
 * (ERR_CORRUPT if malformed). */
extern const char mvcc__round_key[];
int mvcc__round_decode(const struct backend_val *v, struct mvcc_round *r);

/* --- mvcc_read.c ----------------------------------------------------- */

/* mvcc__result_grow makes room for one more entry of res->kvs; 0 or
 * ERR_NOMEM. */
int mvcc__result_grow(struct mvcc_range_result *res);

/* mvcc__seek_at moves c to the newest version <= rev of user key u (after
 * = false) or of the smallest key > u (after = true), or past that to the
 * next user key's entries when there is none (u: at most MVCC_CKEY_MAX -
 * MVCC_SUFFIX - 1 bytes).  mvcc__iseek_at: the same on the merged index. */
int mvcc__seek_at(struct backend_cursor *c, const uint8_t *u, size_t ul,
                  bool after, mvcc_rev rev, struct backend_val *k,
                  struct backend_val *v);
int mvcc__iseek_at(struct mvcc_icur *ic, const uint8_t *u, size_t ul,
                   bool after, mvcc_rev rev, struct backend_val *k,
                   struct backend_val *v);
/* mvcc__scan runs a range over cursors kv and kvl (kvl may be NULL for a
 * single short key) at rev (already validated) into res (grown with
 * mem_realloc), reading values through revc (a cursor on `rev`, NULL only
 * with MVCC_RANGE_KEYS_ONLY or COUNT_ONLY).  Pointers are those of the
 * cursors' txn. */
int mvcc__scan(struct mvcc_icur *kv, struct backend_cursor *kvl,
               struct backend_cursor *revc, const struct mvcc_span *sp, mvcc_rev rev, int64_t limit,
               unsigned flags, struct mvcc_range_result *res);
/* mvcc__visible seeks the version of key visible at rev: 0 and out, tomb_out
 * filled if the key has a version <= rev, ERR_NOTFOUND if not; the value
 * is read through revc (NULL: none, value NULL).  The cursor is left on
 * that version. */
int mvcc__visible(struct mvcc_icur *kv, const void *key, size_t key_len,
                  mvcc_rev rev, struct backend_cursor *revc,
                  struct mvcc_kv *out, bool *tomb_out);

/* --- mvcc_long.c ----------------------------------------------------- */

/* mvcc__lindex writes the `kvl` index of long key key (key_len > l, the
 * store's L) into idx (l bytes).  The functions below take l too. */
void mvcc__lindex(size_t l, uint8_t *idx, const void *key,
                  size_t key_len);
/* mvcc__visible_long is mvcc__visible for a long key, on a `kvl` cursor:
 * the cursor is left on the version found. */
int mvcc__visible_long(size_t l, struct backend_cursor *kvl,
                       const void *key, size_t key_len, mvcc_rev rev,
                       struct backend_cursor *revc, struct mvcc_kv *out,
                       bool *tomb_out);
/* mvcc__lbuf_push appends an entry; ERR_NOMEM. */
int mvcc__lbuf_push(struct mvcc_lbuf *b, const struct mvcc_kv *kv, bool tomb);
/* mvcc__idx_gather appends to buf the newest version <= rev of every long
 * key filed under index idx (L bytes), values read through revc (NULL:
 * none), and leaves *k on the first entry after them (returns ERR_NOTFOUND
 * when there is none). */
int mvcc__idx_gather(size_t l, struct backend_cursor *kvl,
                     const uint8_t *idx, mvcc_rev rev,
                     struct backend_cursor *revc,
                     struct mvcc_lbuf *buf, struct backend_val *k);
/* mvcc__group_gather does mvcc__idx_gather for every index of the group
 * whose first entry is at *k, leaving *k on the next group's first entry;
 * *end when no entry is left. */
int mvcc__group_gather(size_t l, struct backend_cursor *kvl,
                       struct backend_val *k, mvcc_rev rev,
                       struct backend_cursor *revc, struct mvcc_lbuf *buf,
                       bool *end);
/* mvcc__lbuf_sort sorts buf by full key. */
void mvcc__lbuf_sort(struct mvcc_lbuf *buf);

/* --- mvcc_write.c ---------------------------------------------------- */

/* mvcc__arena_alloc returns len bytes (8-aligned) that live until the next
 * batch, or NULL (ERR_NOMEM). */
void *mvcc__arena_alloc(struct mvcc_arena *a, size_t len);
void mvcc__arena_reset(struct mvcc_arena *a);
void mvcc__arena_free(struct mvcc_arena *a);
/* mvcc__batch_kvl opens b->kvl if it is not yet; 0 or ERR_NOMEM. */
int mvcc__batch_kvl(struct mvcc_batch *b);
/* mvcc__batch_fail records the first poisoning error and returns it. */
int mvcc__batch_fail(struct mvcc_batch *b, int err);

/* mvcc_read.c: mvcc__rev_walk calls fn for every version still stored
 * (below the compact revision too) with main rev <= to, in revision order
 * (no prev_kv); for mvcc_hash.c. */
int mvcc__rev_walk(struct mvcc_read *r, mvcc_rev to, mvcc_event_fn fn,
                   void *arg);

#endif
