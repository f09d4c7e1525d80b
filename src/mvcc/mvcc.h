/*
 * mvcc.h - the multi-version key-value store (etcd's mvcc, on LMDB).
 *
 * Every write request that changes something gets the next main revision;
 * the changes inside it are told apart by a sub revision (0, 1, ...).  Every
 * version of every key is kept in LMDB until compaction, so a range can be
 * read at any revision >= the compact revision.  The records, values
 * included, are appended to a revision log; the key index lives in LMDB
 * too (one small entry per version, sorted by key, then revision
 * descending), but for the newest versions' entries, which wait in memory
 * until a fold round files thousands of them in key order, a slice per
 * batch (mvcc_ovl.c: a put then dirties no random page of the index).  Opening a store with millions of
 * keys costs a few page reads and the rebuild of those few thousand
 * entries from the log.  The on-disk formats are documented in
 * mvcc_int.h.  Keys of any length are stored (as etcd, which limits them
 * by the request size only): those longer than LMDB's key limit allows
 * (about 494 bytes) live in a second bucket under a prefix-plus-hash
 * index, with the same semantics; ranges over them cost a walk over each
 * group of long keys sharing their first ~486 bytes (see mvcc_long.c).
 *
 * Semantics follow etcd 3.4 (see shared/reference/etcd-features.md §0):
 * - the empty store is at revision 1; a no-op request does not bump it;
 * - version is 1 at creation, +1 per put, and a delete resets the key (the
 *   next put is a creation again: new create_rev, version 1);
 * - a put of identical bytes still makes a new revision and an event;
 * - ranges: end_len == 0 -> the single key; end == "\0" (1 byte) -> every
 *   key >= key; key == "\0" && end == "\0" -> every key; otherwise
 *   [key, end) in bytewise order (Go bytes.Compare);
 * - compaction at rev C drops, per key, every version <= C except the
 *   newest one <= C, and that one too when it is a deletion older than C.
 *   A deletion at C itself stays (until the next compaction) so that a
 *   watch from C gets it (etcd #18089); reads, counts and the hash skip it
 *   as they skip any deletion.  Reads at a revision < C fail with
 *   ERR_COMPACTED, at C they succeed.
 *
 * Threads:
 * - Readers: any thread, any number, concurrently with the writer.  A read
 *   (struct mvcc_read) is a consistent snapshot: it sees whole batches only.
 *   It may move between threads but is used by one thread at a time.
 * - Writer: one thread (the apply thread) owns every mvcc_batch_* and
 *   mvcc_txn_* call, mvcc_compact* and the observer callback.
 *
 * Memory: nothing returned by a read is copied: keys and values point into
 * the LMDB map and stay valid until mvcc_read_end.  Results of write-side
 * calls (prev kvs, ranges inside a write txn) are copied into the batch's
 * arena and stay valid until the next mvcc_batch_begin or store close.
 *
 * Errors: 0 or a negative ERR_* (util/err.h).  In a batch, any error other
 * than the request-level ones (ERR_KEY_NOT_FOUND, ERR_COMPACTED,
 * ERR_FUTURE_REV, ERR_INVAL, ERR_TOO_LARGE), i.e. ERR_NOMEM, ERR_NOSPC,
 * ERR_IO, ERR_CORRUPT, poisons the batch: later writes fail with the same
 * code and the caller must mvcc_batch_abort (nothing of the batch is kept)
 * and retry or stop.  A request-level error changes nothing.
 */
#ifndef CETCD_MVCC_MVCC_H
#define CETCD_MVCC_MVCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/metrics.h"

struct backend;
struct backend_txn;

/* A main revision (the store revision).  Sub revisions are plain int64. */
typedef int64_t mvcc_rev;

/* The store.  Opened on a backend the caller owns; owned by the server. */
struct mvcc_store;
/* A read snapshot (an LMDB read txn plus cursors). */
struct mvcc_read;
/* The apply batch: one LMDB write txn shared by many requests. */
struct mvcc_batch;
/* One write request inside a batch (one main revision). */
struct mvcc_txn;

/* One version of one key.  key/value borrow memory (see Memory above). */
struct mvcc_kv {
    const uint8_t *key;  /* user key bytes (never NULL when present) */
    size_t key_len;      /* >= 1 */
    const uint8_t *value; /* value bytes; NULL if keys-only or deletion */
    size_t value_len;    /* 0 if keys-only (the real length is lost) */
    mvcc_rev create_rev; /* revision of the key's last creation */
    mvcc_rev mod_rev;    /* revision of this version; 0 = "no kv" */
    int64_t version;     /* 1 at creation, +1 per put; 0 for deletions */
    int64_t lease;       /* attached lease id, 0 = none */
};

/* Flags of mvcc_range / mvcc_txn_range. */
enum {
    MVCC_RANGE_KEYS_ONLY = 1u << 0,  /* kvs without values */
    MVCC_RANGE_COUNT_ONLY = 1u << 1, /* only count; no kvs at all */
};

/* A range result.  Zero it before first use; reuse it across calls (its
 * kvs array is kept and grown); free with mvcc_range_result_close. */
struct mvcc_range_result {
    struct mvcc_kv *kvs; /* n_kvs entries, in key order */
    size_t n_kvs;        /* kvs returned (<= limit when limit > 0) */
    size_t cap;          /* allocated entries of kvs (internal) */
    int64_t count;       /* live keys in the range at rev, before limit */
    bool more;           /* limit truncated the result */
    mvcc_rev rev;        /* the revision that was read */
};

/* Options of mvcc_store_open; NULL = defaults. */
struct mvcc_options {
    size_t arena_keep_bytes; /* batch arena kept between batches; larger
                                arenas are freed. 0 = 16 MiB */
    /* Count the live keys at open (one pass over the keys, no values)
     * when the store's state has no count yet (a store written before
     * the count was kept, mvcc_int.h "mvcc_state"): mvcc_keys (etcd's
     * etcd_debugging_mvcc_keys_total).  Batches keep the count in the
     * state from then on, so later opens read it. */
    bool count_keys;
    /* The store this one is a copy of (a defragmentation's switch-over:
     * the same revision, the same log), or NULL: its in-memory index
     * entries (mvcc_ovl.c) are shared instead of read back from the log,
     * when its fold_rev and revision are the copy's; otherwise ignored.
     * It must not write again. */
    const struct mvcc_store *overlay_from;
};

/*
 * mvcc_store_open opens the store's buckets in be (at start-up, before other
 * threads use be) and loads its meta data.  Resumes nothing by itself: if
 * mvcc_compact_pending() says so, the apply thread continues the compaction
 * with mvcc_compact_step.  Errors: ERR_NOMEM, ERR_IO, ERR_CORRUPT (meta
 * records of a wrong size or an impossible state).
 */
int mvcc_store_open(struct backend *be, const struct mvcc_options *opts,
                    struct mvcc_store **out);
/* mvcc_store_close frees the store (not be).  No read/batch may be open. */
void mvcc_store_close(struct mvcc_store *s);

/* mvcc_keys: the live keys (keys, not versions) as of the last commit,
 * or -1 when the store's state has no count and it was opened without
 * count_keys.  Any thread. */
int64_t mvcc_keys(const struct mvcc_store *s);

/* mvcc_overlay_entries: the entries of the key index held in memory,
 * not yet folded into LMDB (mvcc_ovl.c).  The apply thread, or any thread
 * while no batch is open. */
size_t mvcc_overlay_entries(const struct mvcc_store *s);

/* Latest committed state, readable from any thread (atomics). */
mvcc_rev mvcc_current_rev(const struct mvcc_store *s);
/* The compact revision in effect for reads (the scheduled one). */
mvcc_rev mvcc_compact_rev(const struct mvcc_store *s);
/* The consistent index stored by the last committed batch (0 initially). */
uint64_t mvcc_consistent_index(const struct mvcc_store *s);

/* Tentative batches.  The server may commit a batch whose entries are not
 * durable yet (a lone voter applies while its WAL fsync runs, see
 * server/apply.c); no read may see such a batch before it is.
 * mvcc_visible_hold (writer thread, before that batch) pins the revision
 * and compact revision that reads started from now on see to the current
 * committed ones; mvcc_visible_release (any thread, once the batch is
 * durable) lets reads see the latest commit again.  A held store's readers
 * get mvcc_read_rev = the pinned revision, so ranges, counts, the header
 * revision and ErrFutureRev all agree with the durable state. */
void mvcc_visible_hold(struct mvcc_store *s);
void mvcc_visible_release(struct mvcc_store *s);

/* --- reads ------------------------------------------------------------ */

/* mvcc_read_begin opens a snapshot of the latest committed batch.
 * Errors: ERR_BUSY (too many concurrent readers), ERR_NOMEM, ERR_IO. */
int mvcc_read_begin(struct mvcc_store *s, struct mvcc_read **out);
/* mvcc_read_end ends the snapshot; every pointer it gave is then invalid. */
void mvcc_read_end(struct mvcc_read *r);
/* The snapshot's current and compact revisions (what a Range header and
 * the ERR_COMPACTED/ERR_FUTURE_REV checks use). */
mvcc_rev mvcc_read_rev(const struct mvcc_read *r);
mvcc_rev mvcc_read_compact_rev(const struct mvcc_read *r);

/* mvcc_read_backend_txn: the LMDB read txn under r, to read other buckets
 * of the same backend at the same point (valid until mvcc_read_end). */
struct backend_txn *mvcc_read_backend_txn(struct mvcc_read *r);
/* mvcc_read_consistent_index: the consistent index stored in r's
 * snapshot (0 when none is). */
uint64_t mvcc_read_consistent_index(struct mvcc_read *r);

/* mvcc_etcd_walk calls fn for every entry etcd 3.4's bbolt `key` bucket
 * would hold for r's snapshot (mvcc_etcd.c: revision key, marshaled
 * mvccpb.KeyValue), in key order, as after etcd's compaction at r's
 * compact revision finished.  key and val are valid during the call.
 * fn returns 0 to go on, else the walk stops with its value.  Errors:
 * fn's, ERR_CORRUPT, ERR_NOMEM. */
#define MVCC_ETCD_REVKEY_MAX 18
typedef int (*mvcc_etcd_fn)(void *arg, const uint8_t *key, size_t key_len,
                            const uint8_t *val, size_t val_len);
int mvcc_etcd_walk(struct mvcc_read *r, mvcc_etcd_fn fn, void *arg);

/*
 * mvcc_range reads the live keys of the range (see semantics above) at
 * revision rev (<= 0 = the snapshot's current revision) in key order.
 * limit > 0 returns at most limit kvs (more = true if there were more);
 * counting continues past the limit without reading values.
 * Errors: ERR_COMPACTED (rev < compact rev), ERR_FUTURE_REV (rev >
 * current), ERR_NOMEM (result untouched but for n_kvs = 0), ERR_INVAL
 * (key_len == 0), ERR_TOO_LARGE (key_len > mvcc_key_max), ERR_CORRUPT
 * (a bad record on disk).
 */
int mvcc_range(struct mvcc_read *r, const void *key, size_t key_len,
               const void *end, size_t end_len, mvcc_rev rev, int64_t limit,
               unsigned flags, struct mvcc_range_result *res);
/* mvcc_range_result_close frees res->kvs (not what they point to). */
void mvcc_range_result_close(struct mvcc_range_result *res);

/* --- events ----------------------------------------------------------- */

enum mvcc_event_type {
    MVCC_EVENT_PUT = 0,    /* mvccpb.Event.PUT */
    MVCC_EVENT_DELETE = 1, /* mvccpb.Event.DELETE */
};

/* One change.  A DELETE's kv has key, mod_rev (the delete revision) and
 * zeros elsewhere, like etcd's. */
struct mvcc_event {
    enum mvcc_event_type type; /* PUT or DELETE */
    mvcc_rev sub_rev;          /* position inside its main revision */
    struct mvcc_kv kv;         /* the new version (or the deletion) */
    struct mvcc_kv prev_kv;    /* previous version; mod_rev 0 = none */
    bool prev_no_value;        /* prev_kv's value was not read (its
                                  value NULL): see below */
};

/* Called on the apply thread after each committed batch that changed
 * something, with its n events in revision order.  Pointers are valid only
 * during the call; rev is the store revision after the batch. */
typedef void (*mvcc_observer_fn)(void *arg, const struct mvcc_event *events,
                                 size_t n, mvcc_rev rev);
/* mvcc_store_set_observer installs fn (NULL = none).  Call from the apply
 * thread or before it starts.  Events are only collected while an observer
 * is installed (they cost a copy of each value). */
void mvcc_store_set_observer(struct mvcc_store *s, mvcc_observer_fn fn,
                             void *arg);
/* mvcc_store_set_prev_values says whether the observer's events carry
 * their previous version's value (default off; any thread).  A value is
 * a read of the revision log, where the version it replaced was written
 * (a random page of the log), so a store without watchers that want
 * prev_kv does not pay it.  A batch takes the setting when it begins:
 * events of a batch begun before it was switched on have prev_no_value
 * set (prev_kv's header and key are there), and the observer must get
 * the values another way (the watch hub replays such a batch from the
 * store, mvcc_events_read with want_prev). */
void mvcc_store_set_prev_values(struct mvcc_store *s, bool on);

/* Called per event by mvcc_events_read; pointers valid during the call.
 * Return 0 to continue, anything else to stop (it is returned). */
typedef int (*mvcc_event_fn)(void *arg, const struct mvcc_event *ev);

/*
 * mvcc_events_read replays history from the snapshot: the events with
 * start_rev <= main rev <= snapshot rev on keys in [key, end) (same range
 * rules as mvcc_range; key_len 0 = "\0"), in revision order.  With
 * want_prev, prev_kv is filled when the previous version still exists.
 * It stops after the revision during which max_events (> 0) was reached, so
 * a revision's events are never split; *next_rev_out = the first revision
 * not yet read.  Errors: ERR_COMPACTED (start_rev < compact rev),
 * ERR_CORRUPT, or what fn returned.
 */
int mvcc_events_read(struct mvcc_read *r, mvcc_rev start_rev,
                     const void *key, size_t key_len, const void *end,
                     size_t end_len, size_t max_events, bool want_prev,
                     mvcc_event_fn fn, void *arg, mvcc_rev *next_rev_out);

/* A history scan (mvcc_events_scan).  key/end follow mvcc_events_read. */
struct mvcc_scan {
    mvcc_rev start_rev;   /* first revision to read (< 1 = 1) */
    const void *key;      /* the span's key (key_len 0 = "\0") */
    size_t key_len;
    const void *end;      /* its end (rules of mvcc_range) */
    size_t end_len;
    size_t max_events;    /* > 0: stop after the revision during which
                             this many events were passed to fn */
    size_t max_walk;      /* > 0: stop at the first revision boundary
                             after this many history entries were walked,
                             inside the span or not: bounds the work of a
                             narrow span over a long history */
    bool want_prev;       /* fill prev_kv */
    size_t walked;        /* out: history entries walked */
};

/* mvcc_events_scan is mvcc_events_read with a walk bound (sc): it stops
 * between revisions once either bound is reached; *next_rev_out = the
 * first revision not walked, sc->walked the entries walked (also on
 * error).  Errors as mvcc_events_read. */
int mvcc_events_scan(struct mvcc_read *r, struct mvcc_scan *sc,
                     mvcc_event_fn fn, void *arg, mvcc_rev *next_rev_out);

/* --- writes (apply thread only) --------------------------------------- */

/* mvcc_batch_begin opens the batch's LMDB write txn.  One batch at a time.
 * Errors: ERR_IO, ERR_NOMEM. */
int mvcc_batch_begin(struct mvcc_store *s, struct mvcc_batch **out);
/*
 * mvcc_batch_commit stores consistent_index (must be >= the stored one) and
 * the store revisions in the same LMDB txn, commits, then calls the
 * observer.  The batch is freed, whatever the result.  No mvcc_txn may be
 * open.  Errors: the poisoning error, ERR_NOSPC, ERR_IO: nothing of the
 * batch is then kept.
 */
int mvcc_batch_commit(struct mvcc_batch *b, uint64_t consistent_index);
/* mvcc_batch_abort drops the whole batch (and any open mvcc_txn). */
void mvcc_batch_abort(struct mvcc_batch *b);
/* The batch's write txn, for other modules (lease, auth) to write their
 * buckets atomically with the store.  Valid until commit/abort. */
struct backend_txn *mvcc_batch_backend_txn(struct mvcc_batch *b);

/* mvcc_batch_import writes kv as it is (its create revision, version and
 * lease; at mod_rev, sub), or with tomb a deletion of kv->key at mod_rev,
 * sub: for importing a history (an etcd data dir), into a store that got
 * no other write.  Versions come in ascending (mod_rev, sub) order; the
 * store's revision follows them.  The key's lease index follows its newest
 * version.  No watch events.  Errors: ERR_INVAL (empty or too long key,
 * revision < 1, out of order: nothing written), the poisoning ones. */
int mvcc_batch_import(struct mvcc_batch *b, const struct mvcc_kv *kv,
                      int64_t sub, bool tomb);
/* mvcc_batch_import_rev raises the store's current revision to rev (etcd's
 * current revision may be past its newest version: a compaction at it). */
void mvcc_batch_import_rev(struct mvcc_batch *b, mvcc_rev rev);

/* mvcc_txn_begin starts one request in b: its writes get main revision
 * current + 1 and sub revisions 0, 1, ...  At most one open at a time.
 * Never fails (the txn lives inside the batch). */
struct mvcc_txn *mvcc_txn_begin(struct mvcc_batch *b);
/* mvcc_txn_end closes t and returns the store revision after it: bumped by
 * one iff t changed something. */
mvcc_rev mvcc_txn_end(struct mvcc_txn *t);
/* The revision t's writes get (current + 1). */
mvcc_rev mvcc_txn_rev(const struct mvcc_txn *t);

/* Flags of mvcc_txn_put (etcd's PutRequest.ignore_value/ignore_lease). */
enum {
    MVCC_PUT_IGNORE_VALUE = 1u << 0, /* keep the current value */
    MVCC_PUT_IGNORE_LEASE = 1u << 1, /* keep the current lease */
};

/*
 * mvcc_txn_put writes a new version of key.  If prev_out is not NULL it
 * receives the previous live version (mod_rev 0 if none), copied into the
 * batch arena.  With an IGNORE flag on a key that does not exist:
 * ERR_KEY_NOT_FOUND (nothing written).  Errors: ERR_INVAL (key_len 0),
 * ERR_TOO_LARGE (key_len > mvcc_key_max), ERR_KEY_NOT_FOUND, and the
 * poisoning ones.
 */
int mvcc_txn_put(struct mvcc_txn *t, const void *key, size_t key_len,
                 const void *value, size_t value_len, int64_t lease,
                 unsigned flags, struct mvcc_kv *prev_out);

/*
 * mvcc_txn_delete_range deletes the live keys of the range.  *deleted_out
 * = how many.  With prev_kvs_out, receives an arena array of the deleted
 * versions (in key order, values included).  Deleting nothing writes
 * nothing.  Errors: ERR_INVAL, and the poisoning ones.
 */
int mvcc_txn_delete_range(struct mvcc_txn *t, const void *key,
                          size_t key_len, const void *end, size_t end_len,
                          int64_t *deleted_out,
                          struct mvcc_kv **prev_kvs_out);

/* mvcc_txn_range is mvcc_range inside t: it sees t's earlier writes (rev
 * <= 0 reads the latest state including them).  The kvs are copied into the
 * batch arena (valid as above).  Errors as mvcc_range. */
int mvcc_txn_range(struct mvcc_txn *t, const void *key, size_t key_len,
                   const void *end, size_t end_len, mvcc_rev rev,
                   int64_t limit, unsigned flags,
                   struct mvcc_range_result *res);

/* mvcc_txn_delete_lease deletes every key attached to lease (lease revoke
 * or expiry), like delete_range.  Errors as mvcc_txn_delete_range. */
int mvcc_txn_delete_lease(struct mvcc_txn *t, int64_t lease,
                          int64_t *deleted_out);

/* Called per key by mvcc_lease_keys; return non-zero to stop. */
typedef int (*mvcc_key_fn)(void *arg, const uint8_t *key, size_t key_len);
/* mvcc_lease_keys lists the live keys attached to lease (LeaseTimeToLive
 * keys=true; etcd's order is random): short keys in key order, long ones
 * by their index.  Errors: what fn returned, ERR_CORRUPT, ERR_NOMEM. */
int mvcc_lease_keys(struct mvcc_read *r, int64_t lease, mvcc_key_fn fn,
                    void *arg);

/* mvcc_batch_lease_keys lists the keys attached to lease as b stands
 * (its own earlier writes included), in mvcc_lease_keys' order: the keys
 * a revoke applied now would delete (the auth applier checks them before
 * a revoke or a put with the lease).  Nothing is copied: a key is valid
 * during its fn call only, and no mvcc_txn write may run inside fn.  Errors: what fn returned; storage errors (ERR_CORRUPT, ERR_NOMEM,
 * the backend's) poison b. */
int mvcc_batch_lease_keys(struct mvcc_batch *b, int64_t lease,
                          mvcc_key_fn fn, void *arg);

/* mvcc_key_max is the longest user key the store accepts: 1 GiB, far
 * beyond any request the server takes (--max-request-bytes decides). */
size_t mvcc_key_max(const struct mvcc_store *s);

/* --- compaction (apply thread) ---------------------------------------- */

/*
 * mvcc_compact schedules compaction at rev inside batch b (persisted with
 * it): from then on reads below rev fail with ERR_COMPACTED.  The physical
 * deletion is done by mvcc_compact_step, in bounded steps, possibly over
 * many batches and across restarts.  Scheduling a higher rev while one is
 * still running extends the running one.  Errors: ERR_COMPACTED (rev <=
 * compact rev), ERR_FUTURE_REV (rev > current).
 */
int mvcc_compact(struct mvcc_batch *b, mvcc_rev rev);
/* mvcc_compact_step deletes the dead versions of at most max_revs
 * revisions; *more_out tells whether work remains.  When it finishes, the
 * finished compact rev is stored (in b).  On a nearly full disk (the
 * backend low on space, or short of room for the whole in-memory index)
 * a step does what b's txn has room for (backend_write_room) and stops
 * there; ERR_FULL: nothing more can go in b, b is unharmed (commit or
 * abort it; the next batch goes on, once a pin made freed pages reusable
 * if it had no room).  Errors: ERR_FULL, the poisoning ones. */
int mvcc_compact_step(struct mvcc_batch *b, size_t max_revs, bool *more_out);
/* mvcc_batch_compact_rev is the compact revision scheduled as of batch b
 * (mvcc_compact_rev plus what b scheduled). */
mvcc_rev mvcc_batch_compact_rev(const struct mvcc_batch *b);
/* mvcc_compact_pending tells whether a compaction is unfinished. */
bool mvcc_compact_pending(const struct mvcc_store *s);
/* The last fully finished compaction revision. */
mvcc_rev mvcc_compact_finished_rev(const struct mvcc_store *s);

/* --- integrity -------------------------------------------------------- */

/*
 * mvcc_hash_kv computes CRC32C over every stored version with main rev <=
 * rev (<= 0: current), but the deletions kept at the compact rev - key,
 * revision and value record, in the kv bucket's order - for HashKV and corruption checks.  Members agree once their
 * compactions have finished.  *compact_rev_out = the snapshot's compact rev.
 * Errors: ERR_COMPACTED, ERR_FUTURE_REV, ERR_CORRUPT.
 */
int mvcc_hash_kv(struct mvcc_read *r, mvcc_rev rev, uint32_t *hash_out,
                 mvcc_rev *compact_rev_out);

/*
 * mvcc_hash_kv_etcd is HashKV as etcd 3.4 computes it over its bbolt key
 * bucket (mvcc_hash.c says how), at rev (0: current; < 0: no entry, as
 * etcd's): a member of
 * either that applied the same history answers the same hash.  The
 * compact revision to answer with is mvcc_read_compact_rev (etcd says -1
 * where it is 0).  *hash_rev_out = the revision hashed.  Errors:
 * ERR_COMPACTED (0 < rev <= compact rev), ERR_FUTURE_REV, ERR_CORRUPT,
 * ERR_NOMEM.
 */
int mvcc_hash_kv_etcd(struct mvcc_read *r, mvcc_rev rev, uint32_t *hash_out,
                      mvcc_rev *hash_rev_out);

/*
 * mvcc_hash_kv_compacted is the same hash at r's compact revision C itself
 * (which HashKV refuses as compacted): what the store holds at or below C
 * once the compaction at C has finished, whatever part of it has run.  It
 * depends only on the history up to C, so members that compacted at C
 * agree until their next compaction (the compaction-time hash check,
 * cmd/corrupt.h).  Errors: ERR_NOTFOUND (never compacted), ERR_CORRUPT,
 * ERR_NOMEM.
 */
int mvcc_hash_kv_compacted(struct mvcc_read *r, uint32_t *hash_out);

/* --- record codec (exposed for the fuzzer and tests) ------------------ */

/* mvcc_kv_decode parses one `kv` or `kvl` bucket entry (composite key +
 * index record; the value's format byte tells which) into kv (value NULL:
 * values are in the log; pointing into the inputs; a long key's bytes are
 * in the index record, its index checked
 * against them, hash included) and *tombstone_out.  Returns 0 or
 * ERR_CORRUPT; never asserts on its input. */
int mvcc_kv_decode(const void *ckey, size_t ckey_len, const void *val,
                   size_t val_len, struct mvcc_kv *kv, bool *tombstone_out);
/* mvcc_log_decode parses one `rev` bucket entry (revision key + record)
 * into ev (pointing into the inputs; no prev_kv).  Returns 0 or
 * ERR_CORRUPT; never asserts on its input. */
int mvcc_log_decode(const void *rkey, size_t rkey_len, const void *val,
                    size_t val_len, struct mvcc_event *ev);

/* Process-wide counts of what the stores were asked, as etcd's mvcc
 * metrics (etcd_mvcc_{range,put,delete,txn}_total): every Range (the
 * read path's mvcc_range and a write txn's mvcc_txn_range, which counts
 * the ranges a Txn's compares and prev_kv lookups make, as etcd's do),
 * every Put and DeleteRange call (not the keys it deletes), and every
 * write txn with more than one of those. */
struct mvcc_metrics {
    struct metrics_counter range;  /* ranges seen */
    struct metrics_counter put;    /* puts seen */
    struct metrics_counter del;    /* delete ranges seen */
    struct metrics_counter txn;    /* txns of more than one operation */
};
extern struct mvcc_metrics mvcc_metrics;

/* mvcc_txn_note_range counts one range in t's metrics without reading:
 * the lookup etcd makes with a Range where cetcd's own write needs none
 * (a Put with prev_kv, ignore_value or ignore_lease reads the previous
 * version inside mvcc_txn_put). */
void mvcc_txn_note_range(struct mvcc_txn *t);

#endif
