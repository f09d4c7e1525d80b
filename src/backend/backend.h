/*
 * backend.h - the LMDB environment under mvcc, lease, auth and membership.
 *
 * One LMDB environment lives in a directory (`<data-dir>/member/db/`, the
 * caller passes the path) and holds named buckets (LMDB named databases):
 * `kv`, `rev`, `meta`, `lkey` for mvcc, and later `lease`, `auth`,
 * `members`, `alarm` for the other modules.  This header is a thin, typed
 * layer over LMDB: it maps LMDB errors to ERR_* codes, pools read
 * transactions, and fixes the durability policy in one place.
 *
 * Threads and lifetime:
 * - Exactly ONE thread writes at a time: in the member, whoever holds the
 *   server's apply_mu (the apply thread, or a raft-pass holder applying
 *   inline; src/server/server.h "Execution contexts and lock order").  At
 *   most one write txn is open at a time (LMDB serialises writers anyway;
 *   we never rely on it).
 * - Any thread may hold read txns, concurrently with the writer.  The env is
 *   opened with MDB_NOTLS, so a read txn is not tied to the thread that began
 *   it: it may be handed between threads (never used by two at once).
 * - Data pointers returned by get/cursor calls point INTO the memory map:
 *   zero-copy, read-only, valid until the txn that produced them ends.  In a
 *   write txn they are valid only until the next write in that txn.
 * - Buckets are opened once, at start-up, before any other thread uses the
 *   backend (LMDB's rule for named databases); the handle is then valid for
 *   the life of the backend.
 * - A failed write poisons its txn: every later call on it fails and the
 *   caller must abort it (LMDB's MDB_TXN_ERROR).
 *
 * Durability: the WAL is the durable log; the consistent index is stored in
 * the same LMDB txn as the data it covers, so after a crash that LMDB
 * survives the store is exactly "everything up to consistent_index" and
 * the WAL replays the rest.  What the member needs from LMDB is integrity,
 * not per-commit durability.  backend_options picks the flags:
 * - default: MDB_NOMETASYNC.  Each commit fdatasync()s its data pages and
 *   defers the meta page to the next commit's sync: integrity survives a
 *   power loss and at most the last commit is lost (the WAL re-applies it).
 *   The cost is one fdatasync per write txn.  Used by tools and tests that
 *   open a store copy.
 * - opts.no_fsync: MDB_NOSYNC, no fsync at all.  kill -9 still loses
 *   nothing committed (pages go to the page cache with pwrite, or straight
 *   into the shared map, and the meta page is switched last), but a power
 *   loss may leave a synced meta page pointing at pages reused since (LMDB
 *   documents "a system crash can corrupt the database" for NOSYNC).
 * - opts.write_map: MDB_WRITEMAP (see the option).  Written pages are
 *   counted in RSS, and a stray pointer could scribble on the map.
 *   Without it LMDB keeps the freed buffers of its largest txn's dirty
 *   pages until the store is closed (its own page pool).
 * The member opens its store with no_fsync and without write_map
 * (src/server/store.c server__store_open): the WAL fsync is the only one
 * on the write path, and what covers a power loss is the server's boot
 * guard (src/server/boot_guard.h): a store not shut down cleanly before a
 * reboot is distrusted and rebuilt from its last durable pin (made
 * durable by backend_pin_sync, see "Pins") plus the WAL.
 * --unsafe-no-fsync turns off the WAL's fsync and the pins' syncs
 * (snap_pin.c); the store is opened the same either way.
 * MDB_NORDAHEAD: the db may be larger than RAM and is read at random.
 */
#ifndef CETCD_BACKEND_BACKEND_H
#define CETCD_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/metrics.h"

/* An open environment.  Owned by whoever opened it (the server). */
struct backend;
/* A read or write transaction (opaque; it is an LMDB MDB_txn). */
struct backend_txn;
/* A cursor over one bucket inside one txn (an LMDB MDB_cursor). */
struct backend_cursor;

/* A bucket handle (an LMDB dbi).  Plain integer, valid until close. */
typedef unsigned int backend_bucket;

/* A byte string.  When filled by the backend, data points into the map. */
struct backend_val {
    size_t len; /* number of bytes at data */
    void *data; /* the bytes; not NUL-terminated */
};

/* Options of backend_open; zeroed fields take the defaults. */
struct backend_options {
    uint64_t map_size_bytes; /* virtual map size; 0 = 64 GiB.  The file
                                only grows as data is written. */
    unsigned max_readers;    /* concurrent read txns; 0 = 1024 */
    bool no_fsync;           /* --unsafe-no-fsync: MDB_NOSYNC */
    /* MDB_WRITEMAP: a write txn changes its pages in place in a writable
     * shared map instead of copying each into a buffer that the commit
     * pwrite()s (about 3 us of kernel time per 4 KiB page on the project's
     * VMs, 1.4-2.2 pages per put).  But every sync of the file (and the
     * kernel's writeback) write-protects the pages it wrote, and the next
     * write to each is a fault (8-14 us here): a store synced often (the
     * member's pins) pays far more than the pwrite (store.c).  LMDB sizes
     * the file to the map size up front: a sparse file whose apparent size
     * is map_size_bytes, while its blocks (du) are what is written.  No
     * nested txns (cetcd uses none). */
    bool write_map;
    /* A short open that reads the store, or writes a copy sized by its
     * caller (a pin's check, reading a store's meta, a defragmentation's
     * copy): no blocks are allocated ahead of the data (AHEAD_BYTES in
     * backend.c), neither at the open nor after commits, so such an open
     * takes no space and, on a full disk, neither fails nor says the disk
     * is full.  A write still gets the blocks it needs first (refused
     * with ERR_NOSPC when the disk has none). */
    bool no_ahead;
};

/* Bucket flags. */
enum {
    /* Keys are "user bytes + BACKEND_REVKEY_SUFFIX fixed bytes".  Order:
     * user bytes first (bytewise, a prefix sorts first, like Go's
     * bytes.Compare), then the suffix bytewise.  This is the order of
     * mvcc's versioned keys (see mvcc.c); plain buckets order bytewise. */
    BACKEND_BUCKET_REVKEY = 1u << 0,
};

/* Length of the fixed suffix of BACKEND_BUCKET_REVKEY keys. */
#define BACKEND_REVKEY_SUFFIX 17

/* backend_revkey_cmp is the order of a BACKEND_BUCKET_REVKEY bucket (<0,
 * 0, >0), for keys kept outside LMDB in the same order.  Keys shorter than
 * the suffix sort first, bytewise among themselves. */
int backend_revkey_cmp(const void *a, size_t al, const void *b, size_t bl);

/*
 * backend_open opens (creating if needed) the environment in directory
 * `dir` (created with mode 0700 if missing; its parent must exist).
 * opts may be NULL.  On success *out owns the env: free with backend_close.
 * Errors: ERR_IO (cannot create/open), ERR_CORRUPT (not an LMDB env, or
 * version mismatch), ERR_NOMEM, ERR_INVAL.
 */
int backend_open(const char *dir, const struct backend_options *opts,
                 struct backend **out);

/* backend_close closes the env.  Every txn must have ended.  NULL is ok. */
void backend_close(struct backend *be);

/*
 * backend_bucket_open opens (creating if needed) the bucket `name` with
 * BACKEND_BUCKET_* flags.  Call only at start-up, before other threads use
 * be; opening the same name twice returns the same handle (flags must
 * agree).  At most 16 buckets.  Errors: ERR_IO, ERR_NOSPC, ERR_INVAL.
 */
int backend_bucket_open(struct backend *be, const char *name, unsigned flags,
                        backend_bucket *out);

/* backend_write_begin starts the one write txn.  Errors: ERR_IO, ERR_NOMEM,
 * ERR_BUSY (the writer already holds one - a caller bug, also asserted). */
int backend_write_begin(struct backend *be, struct backend_txn **out);
/* backend_write_commit commits and frees txn (also on error, where nothing
 * is committed).  Errors: ERR_NOSPC (map full, disk full, or a write of
 * txn was refused for a full disk: see backend_space_low), ERR_IO. */
int backend_write_commit(struct backend_txn *txn);
/* backend_write_abort drops every change of txn and frees it. */
void backend_write_abort(struct backend_txn *txn);

/* backend_read_begin starts a read txn on the latest committed state.
 * Errors: ERR_BUSY (all reader slots in use), ERR_NOMEM, ERR_IO. */
int backend_read_begin(struct backend *be, struct backend_txn **out);
/* backend_read_end ends and frees a read txn (and its cursors). */
void backend_read_end(struct backend_txn *txn);
/* backend_read_reset releases the snapshot of a read txn but keeps the
 * handle (and its reader slot) for backend_read_renew: pooling readers
 * avoids a malloc and a lock per read.  Cursors survive via cursor_renew. */
void backend_read_reset(struct backend_txn *txn);
/* backend_read_renew re-arms a reset read txn on the latest state. */
int backend_read_renew(struct backend_txn *txn);

/* backend_get looks key up.  ERR_NOTFOUND if absent.  *val_out points into
 * the map (see lifetime rules above). */
int backend_get(struct backend_txn *txn, backend_bucket b, const void *key,
                size_t key_len, struct backend_val *val_out);
/* backend_put inserts or replaces key -> val.  Errors: ERR_NOSPC (map
 * or disk full: see backend_space_low), ERR_INVAL (key too long: > backend_key_max), ERR_IO, ERR_NOMEM. */
int backend_put(struct backend_txn *txn, backend_bucket b, const void *key,
                size_t key_len, const void *val, size_t val_len);
/* backend_put_reserve inserts key with val_len uninitialised bytes and
 * returns where to write them (valid until the next write in txn): saves a
 * copy when the value is encoded in place.  Errors as backend_put. */
int backend_put_reserve(struct backend_txn *txn, backend_bucket b,
                        const void *key, size_t key_len, size_t val_len,
                        void **data_out);
/* backend_append_reserve is backend_put_reserve for a key after every key
 * of b (ascending keys, such as revisions): LMDB goes straight to the last
 * page, comparing the key with the last one only.  A key that is not after
 * the last one is put as by backend_put_reserve. */
int backend_append_reserve(struct backend_txn *txn, backend_bucket b,
                           const void *key, size_t key_len, size_t val_len,
                           void **data_out);
/* backend_cursor_put_reserve is backend_put_reserve through write cursor c
 * (left on the new entry): a key on the page c is on is found there
 * without a search from the root. */
int backend_cursor_put_reserve(struct backend_cursor *c, const void *key,
                               size_t key_len, size_t val_len,
                               void **data_out);
/* backend_del deletes key.  ERR_NOTFOUND if it was absent. */
int backend_del(struct backend_txn *txn, backend_bucket b, const void *key,
                size_t key_len);

/* backend_cursor_open opens a cursor on b in txn.  A cursor of a write txn
 * is freed with its txn; one of a read txn must be closed (or renewed into
 * another read txn) before or after its txn ends.  Errors: ERR_NOMEM. */
int backend_cursor_open(struct backend_txn *txn, backend_bucket b,
                        struct backend_cursor **out);
/* backend_cursor_close frees a cursor.  NULL is ok. */
void backend_cursor_close(struct backend_cursor *c);
/* backend_cursor_renew binds a read cursor to (renewed) read txn txn. */
int backend_cursor_renew(struct backend_txn *txn, struct backend_cursor *c);

/* Cursor moves.  Each fills key_out/val_out (either may be NULL) with the
 * entry it lands on and returns 0, or ERR_NOTFOUND when there is none. */
/* seek: the first entry with key >= key (MDB_SET_RANGE). */
int backend_cursor_seek(struct backend_cursor *c, const void *key,
                        size_t key_len, struct backend_val *key_out,
                        struct backend_val *val_out);
int backend_cursor_first(struct backend_cursor *c, struct backend_val *key_out,
                         struct backend_val *val_out);
int backend_cursor_last(struct backend_cursor *c, struct backend_val *key_out,
                        struct backend_val *val_out);
int backend_cursor_next(struct backend_cursor *c, struct backend_val *key_out,
                        struct backend_val *val_out);
int backend_cursor_prev(struct backend_cursor *c, struct backend_val *key_out,
                        struct backend_val *val_out);
/* backend_cursor_del deletes the entry under c (write txns only); c then
 * sits on the entry that followed it, read it with cursor_current.
 * Errors: ERR_NOTFOUND (c is past the last entry), ERR_INVAL (c is not
 * positioned), ERR_NOSPC, ERR_IO. */
int backend_cursor_del(struct backend_cursor *c);
/* backend_cursor_current reads the entry under c: ERR_NOTFOUND when none
 * is there - after a cursor_del of the last entry, including the one that
 * emptied the bucket (which leaves c unpositioned: seek it again before
 * any other move).  ERR_INVAL if c was never positioned in a non-empty
 * bucket (a caller bug). */
int backend_cursor_current(struct backend_cursor *c,
                           struct backend_val *key_out,
                           struct backend_val *val_out);

/* backend_key_max is the longest key a bucket accepts (LMDB's limit, 511
 * bytes with the default build).  Callers validate sizes before writing. */
size_t backend_key_max(const struct backend *be);

/*
 * backend_size reports the file size (total, what etcd calls dbSize) and
 * the bytes in use (etcd's dbSizeInUse, the live data).
 * "File size" is LMDB's extent: (last page number + 1) * page size, the
 * bytes up to the last page the latest txn reaches.  It is what bbolt's
 * file size is to etcd (the high-water mark of pages, free ones included:
 * it shrinks only with a defragmentation), while the data file itself is
 * sparse and as large as the map with write_map, or ends at the data
 * without (its blocks, du, are the extent plus what the backend allocates
 * ahead either way).  In use is the pages of
 * the store's trees: the two meta pages, the tree of bucket names and
 * every opened bucket (LMDB's own counts), not the free list nor its
 * records; the extent minus in use is the free list and its records (bbolt:
 * size minus free pages).  Either out may be NULL.  Errors: ERR_BUSY,
 * ERR_IO.
 */
int backend_size(struct backend *be, uint64_t *total_bytes_out,
                 uint64_t *in_use_bytes_out);

/* backend_map_bytes is the map's size (with write_map, the data file's
 * apparent size: LMDB sizes the file to it at open). */
uint64_t backend_map_bytes(struct backend *be);

/* backend_ahead_bytes is how much a store allocates ahead of data_bytes
 * of data (an eighth, 16 to 64 MiB; less on a disk short of room): what
 * a file made to become a store (a defragmented copy) can be given up
 * front. */
uint64_t backend_ahead_bytes(uint64_t data_bytes);

/* backend_write_map tells whether be writes through its map (opened with
 * write_map, and LMDB's layout known): its file is then as large as the
 * map; otherwise it ends at the data and the blocks ahead are allocated
 * past its size (FALLOC_FL_KEEP_SIZE). */
bool backend_write_map(const struct backend *be);

/* backend_txnid_last is the id of the last committed write txn (LMDB's
 * txn ids count commits; a read txn's id is the last commit it sees):
 * cheap, any thread, as of the last commit on this handle or its open. */
uint64_t backend_txnid_last(struct backend *be);

/* backend_freed_since sums the pages that the txns after after_txnid
 * freed and that are still on LMDB's free list (*pages_out), and gives
 * the last such txn's id (*last_txnid_out; after_txnid if none).  While a
 * read txn at or before after_txnid is open (a pin), those pages are all
 * still there (LMDB reuses only pages freed before its oldest reader): it
 * is what the pin holds back.  One read txn and a cursor walk over the
 * freelist's records after after_txnid (one per commit): callers go on
 * from *last_txnid_out.  Any thread.  Errors: ERR_BUSY, ERR_IO. */
int backend_freed_since(struct backend *be, uint64_t after_txnid,
                        uint64_t *last_txnid_out, uint64_t *pages_out);

/* backend_page_bytes is the store's page size. */
uint64_t backend_page_bytes(const struct backend *be);

/* backend_file_bytes is backend_size's total without its read txn: the
 * extent of the pages the last committed txn reaches (cheap; any thread). */
uint64_t backend_file_bytes(struct backend *be);

/* backend_used_bytes is backend_size's in use without its read txn: the
 * pages of the trees as the last committed write txn left them (counted
 * in it before its commit; cheap; any thread).  Unlike the extent it does
 * not depend on how long read txns (pins) kept freed pages from reuse:
 * the same writes give the same figure (the backend quota's measure). */
uint64_t backend_used_bytes(struct backend *be);

/*
 * A full disk.  With write_map the store is written through a shared map
 * of a sparse file, where a page without blocks on a full disk would be
 * SIGBUS, not an error; without it a pwrite refused fails the whole
 * commit, a delete's as well.  So in both modes no page past the blocks
 * the backend allocated ahead (fallocate) is ever written: every write of a write txn (put,
 * the reserves, del, cursor_del) first checks that what it may add, plus
 * a reserve for the commit, fits in the allocated blocks, allocating more
 * if the disk has it, and returns ERR_NOSPC if not.  The txn is then
 * refused: every later write and its commit return ERR_NOSPC, and nothing
 * of it is committed (the caller aborts or commits it, either frees it).
 * (Where LMDB's txn layout is not the one known, write_map is refused
 * and a full disk shows as ERR_NOSPC from the commit.)
 *
 * backend_space_low tells (any thread, cheap) that the disk refused to
 * give the store more blocks and less than 8 MiB are left allocated: the
 * caller should stop adding data (etcd's NOSPACE alarm) while deletes and
 * small writes still fit.  The pages on LMDB's free list that the next
 * write txn may reuse (freed before the oldest read txn, i.e. the pin)
 * count as room too, as long as 4 MiB are still allocated past the last
 * page (a value longer than a page needs consecutive pages): so a
 * compaction makes room on a full disk once the pin after its deletes
 * is durable.  It turns false again after a commit or
 * backend_space_recheck finds the room.  The change is logged once each
 * way.
 */
bool backend_space_low(struct backend *be);

/* backend_space_recheck looks again, while backend_space_low, for room
 * on the disk or in the file's free list (the writer, with no write txn
 * open: e.g. an idle apply thread, after a pin released pages). */
void backend_space_recheck(struct backend *be);

/* A write txn begun short of room (the disk refused the last blocks
 * asked for, or less than 8 MiB are allocated past the store's last
 * page) may also take the pages of
 * LMDB's free list that it is sure to reuse (counted at its begin, as
 * backend_space_recheck does), each write charged a worst case for its
 * trees' depth: so deletes and a compaction still go on when the blocks
 * past the last page are down to the commit's reserve.
 *
 * backend_write_room is the room such a txn has for new pages for
 * certain, leaving the 4 MiB past the last page that values longer than
 * a page need (UINT64_MAX for any other txn: its writes allocate blocks
 * as they need them, and are refused only if the disk fills meanwhile), and
 * backend_write_bound what one more write of up to 1 KiB of key and
 * value takes from it at most: a writer that must not be refused halfway
 * (a compaction step on a nearly full disk) stops before room < its
 * writes x bound, commits what it did, and goes on in a later txn, once
 * a pin has made the pages it freed reusable. */
uint64_t backend_write_room(struct backend_txn *txn);
uint64_t backend_write_bound(struct backend_txn *txn);

/* backend_sync forces everything committed to disk (used at clean shutdown
 * and after no_fsync runs).  Errors: ERR_IO. */
int backend_sync(struct backend *be);

/* backend_sync_paced is backend_sync for a thread beside the writer (a
 * pin): without write_map it first writes the file's dirty pages out
 * SYNC_PACE_BYTES of the file at a time, each waited for before the next
 * (sync_file_range), so that an fsync of the WAL meanwhile queues behind
 * one small write, not behind all of them; the final sync then finds
 * little left.  Errors: ERR_IO. */
int backend_sync_paced(struct backend *be);

/*
 * backend_copy_fd writes a consistent copy of the env's data file to fd
 * (a snapshot for a lagging peer, or a defragmented db when compact is true:
 * free pages dropped).  Runs in its own read txn, concurrently with the
 * writer.  LMDB writes into a pipe that a relay thread empties into fd,
 * trimming the map (backend_rss_trim) every 1 MiB, so the copy does not map
 * the whole store into the process's RSS; into a regular file it sends
 * every 4 MiB to the disk as it goes and waits for the 4 MiB before them
 * (sync_file_range), so that the copy is never a burst of dirty pages that
 * WAL fsyncs would queue behind.  Errors: ERR_IO, ERR_NOSPC and
 * the other write errors mapped by err_from_errno, ERR_NOMEM.
 */
int backend_copy_fd(struct backend *be, int fd, bool compact);

/*
 * backend_rss_trim drops the process's page mappings of the map
 * (MADV_DONTNEED on a read-only shared file mapping: the page cache keeps
 * the data, the next access maps it again for the price of a minor fault).
 * Keeps RSS bounded by the working set instead of "every page ever read".
 * Safe at any time, from any thread.
 */
void backend_rss_trim(struct backend *be);

/* ====================================================================
 * Journal (backend_journal.c): online defragmentation.
 *
 * A compacting copy (backend_copy_fd with compact) runs beside the writer
 * and captures one committed state; what the writer commits meanwhile is
 * caught up from the journal.  While a journal runs, each commit of the
 * env also records, for every key its txn wrote or deleted, the key's
 * final value (or its absence), in memory.  backend_journal_replay moves
 * the records published so far into another env (the copy), in commit
 * order.  Records are states, not operations: replayed onto any committed
 * state taken AFTER backend_journal_start, they bring it to the env's
 * latest published state (a key nobody wrote since the start is the same
 * in both).  So: start the journal, copy, open the copy, replay until
 * little is left, then exclude the writer, replay the rest, stop the
 * journal: the copy equals the env.  The cost while it runs: a note per
 * write and one lookup per written key at each commit.
 *
 * Bounds: at most max_bytes of records wait for a replay; past that, or
 * when memory runs out, the journal fails and records nothing more (the
 * store's writes go on as ever) and the next replay returns its error.
 * ==================================================================== */

/* backend_journal_start starts be's journal.  The writer must be excluded
 * (no write txn open; the caller's lock keeps it so until return).
 * Errors: ERR_BUSY (one runs already), ERR_NOMEM. */
int backend_journal_start(struct backend *be, size_t max_bytes);
/* backend_journal_replay writes every record published so far into dst
 * (an env the caller owns and nobody else writes: the copy), committing
 * as it goes, and drops them; *bytes_out (may be NULL) is how many record
 * bytes it took.  Any thread, concurrently with be's writer; one replayer
 * at a time.  The buckets the records name are opened on dst with be's
 * names and flags.  Errors: the journal's (ERR_DEFRAG_JOURNAL_FULL,
 * ERR_NOMEM), dst's write errors (ERR_NOSPC, ERR_IO, ...), ERR_CORRUPT
 * (a record names a bucket be never opened). */
int backend_journal_replay(struct backend *be, struct backend *dst,
                           size_t *bytes_out);
/* backend_journal_stop ends be's journal and frees what it holds (no-op
 * if none runs).  The writer must be excluded.  Required before
 * backend_close. */
void backend_journal_stop(struct backend *be);

/* ====================================================================
 * Pins (backend_snap.c): a committed state kept intact on disk.
 *
 * The store commits without fsync, so a power loss may tear any page
 * written since the last sync, the meta pages included.  A pin makes one
 * committed state P recoverable without copying the store:
 *   1. backend_pin_begin, with no write txn running (the caller excludes
 *      the writer): a read txn on P, and a copy of the two meta pages as
 *      they are then (P's is the newer).
 *   2. backend_sync, or backend_pin_sync from the durable pin before:
 *      P's pages are on disk.
 *   3. The caller saves pin.meta durably beside the store.
 * As long as the read txn is open LMDB writes no page P reaches (it is
 * copy-on-write and reuses only pages freed before its oldest reader),
 * only other pages and the meta slots.  So after a power loss, writing
 * the saved meta pages back (backend_meta_restore) makes the file open
 * as exactly P; the caller then checks backend_txnid == pin.txnid.  The
 * price: pages freed while a pin is held are not reused, the file grows
 * by what is written between two pins.  Relies on LMDB 0.9's file layout
 * (two meta pages at pages 0 and 1): see backend_snap.c, which checks it.
 * A pin belongs to the backend it was taken on: end it before
 * backend_close.
 * ==================================================================== */

/* A pinned state.  Owned by whoever began it (the server's snapshot
 * worker); fields are read-only for the owner. */
struct backend_pin {
    struct backend_txn *txn; /* the read txn holding P's pages */
    uint64_t txnid;          /* LMDB's txn id of P */
    uint8_t *meta;           /* pages 0 and 1 at the pin (mem_malloc) */
    size_t meta_len;         /* bytes at meta: two pages */
};

/* backend_pin_begin pins the latest committed state into *out (end it with
 * backend_pin_end).  No write txn may be open or begin meanwhile (else the
 * meta pages read may be another state's: checked, ERR_CORRUPT).
 * Errors: ERR_BUSY (no reader slot), ERR_NOMEM, ERR_IO, ERR_CORRUPT (the
 * meta pages are not LMDB 0.9's layout or not P's). */
int backend_pin_begin(struct backend *be, struct backend_pin *out);
/* backend_pin_end ends the pin's read txn and frees its copy (zeroes *p;
 * a zeroed pin is fine). */
void backend_pin_end(struct backend_pin *p);
/* backend_meta_check: 0 if meta[0..len) are two meta pages whose newer
 * one is txnid's (the check backend_pin_begin makes; also for saved meta
 * read back from disk), else ERR_CORRUPT. */
int backend_meta_check(const void *meta, size_t len, uint64_t txnid);
/* backend_meta_restore writes meta[0..len) (a pin's meta pages) over the
 * head of <dir>/data.mdb and fdatasyncs it.  The env must not be open.
 * Errors: ERR_INVAL (len), ERR_IO and the errno codes of open/pwrite. */
int backend_meta_restore(const char *dir, const void *meta, size_t len);
/* A run of pages: pages [first, first + pages). */
struct backend_run {
    uint64_t first;
    uint64_t pages;
};

/*
 * backend_pin_pages lists the pages pin p's state reaches that pin since's
 * state did not (since NULL: every page p reaches), as sorted, merged runs
 * in *out (mem_free it).  Both pins must be open on be, since the older.
 * While since's read txn is open these are exactly the pages committed
 * after it that p still uses (backend_pages.c says why); the others p
 * reaches are since's.  Reads p's pages (pread) and since's free list.
 * Any thread, beside the writer.  Errors: ERR_CORRUPT (a page that is not
 * LMDB 0.9's layout), ERR_INVAL (since not open, or not the older),
 * ERR_NOMEM, ERR_IO.
 */
int backend_pin_pages(struct backend *be, const struct backend_pin *since,
                      const struct backend_pin *p, struct backend_run **out,
                      size_t *n_out);

/*
 * backend_pin_sync puts pin p's state on disk (step 2 of a pin) given
 * that the durable pin since's state is: it writes only the pages of
 * backend_pin_pages(since, p), then makes them and the file's metadata
 * durable (backend_pages.c: sync_file_range, then one page rewritten with
 * RWF_DSYNC).  The pages dirtied since that p does not reach (most of
 * them: each commit copies its path's pages again) are left to the
 * kernel.  It syncs the whole file instead (backend_sync_paced; *pages_out
 * UINT64_MAX) when since is NULL or not open, with write_map, on a file
 * system other than ext4, XFS or tmpfs, or when the walk fails; else
 * *pages_out is the pages written.  Any thread, beside the writer.
 * Errors: ERR_IO and the errno codes of the writes.
 */
int backend_pin_sync(struct backend *be, const struct backend_pin *since,
                     const struct backend_pin *p, uint64_t *pages_out);

/* backend_txnid is LMDB's txn id of the latest committed state (0 if no
 * reader slot was free). */
uint64_t backend_txnid(struct backend *be);
/* backend_file_id gives the data file's device and inode (which file a
 * saved pin belongs to).  Errors: ERR_IO, ERR_BUSY. */
int backend_file_id(struct backend *be, uint64_t *dev_out,
                    uint64_t *ino_out);

/* Process-wide: every write txn commit (etcd_disk_backend_commit_duration
 * _seconds, etcd's buckets 1 ms to 8 s).  LMDB commits here without an
 * fsync (the WAL is the durable copy), so this is the page write only. */
extern struct metrics_hist backend_metrics_commit;

#endif
