/*
 * wal.h - the write-ahead log: raft entries, HardState and snapshot markers
 * made durable in CRC32C-chained records inside preallocated segment files.
 *
 * This header is the module's manual.
 *
 * Purpose.  The raft thread appends what a Ready asks to persist (entries and
 * HardState) with wal_append, then makes the whole batch durable with ONE
 * wal_sync (group commit).  Nothing may be acknowledged, and no message that
 * depends on the batch may be sent, before wal_sync has returned 0.  On
 * restart, wal_open checks every segment and repairs a torn tail, and
 * wal_replay hands the caller the final raft log above its snapshot.
 *
 * On disk.  <dir>/ holds segment files "%016llx-%016llx.wal" (sequence
 * number, index of the first raft entry expected in the segment), each
 * preallocated to wal_options.segment_bytes and cut (a new one started) when
 * the next batch would not fit.  The byte-by-byte record format is documented
 * at the top of src/wal/record.c.  "<dir>/next.wal.tmp" is the pre-created
 * next segment; it never holds data that matters and wal_open deletes it.
 *
 * Damage.  After a crash the last segment may end in a torn record: a
 * partial, zero or CRC-bad record followed by nothing that verifies (zeros of
 * the preallocation or the remains of the unsynced batch), and shaped like a
 * torn write: it runs past the end of the file, or one of its 512-byte
 * sector pieces is still all zero.  wal_open zeroes it and carries on
 * (logged as a warning).  Any other damage - a complete last record whose
 * every sector holds data but whose CRC or shape is wrong ("crc mismatch",
 * as etcd refuses it), a bad record
 * followed by records that verify, a bad record in a non-last segment, a
 * broken CRC chain between segments, a missing segment, mismatched metadata -
 * makes wal_open return ERR_CORRUPT after logging one error line that names
 * the file and the byte offset.  Unsynced data may be lost by a crash; synced
 * data never is, unless the disk itself damages it (then: ERR_CORRUPT).
 *
 * Threads.  A struct wal is owned by one thread (the raft thread) from
 * wal_create/wal_open to wal_close; it has no internal locking.  Different
 * struct wal (different dirs) are independent.  wal_exists is safe anywhere.
 *
 * Errors.  Every int function returns 0 or a negative ERR_* (util/err.h).
 * I/O errors come from err_from_errno at the syscall (ERR_IO, ERR_NOSPC, ...).
 * After any failed write or sync the wal is broken: every later wal_append,
 * wal_sync, wal_save_snapshot and wal_release_before returns the same error
 * (LMDB's MDB_TXN_ERROR rule); close it and reopen (which re-checks the disk).
 */
#ifndef CETCD_WAL_WAL_H
#define CETCD_WAL_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/metrics.h"

/* The default segment size, as etcd's: 64,000,000 bytes. */
#define WAL_SEGMENT_BYTES_DEFAULT 64000000ull
/* The smallest segment size accepted (tests use small segments). */
#define WAL_SEGMENT_BYTES_MIN 4096ull
/* The segment sizes a server picks for its store (wal_set_sizes): the
 * smallest, for a small store, and the largest (etcd's). */
#define WAL_SEGMENT_BYTES_STORE_MIN (2ull << 20)
#define WAL_SEGMENT_BYTES_STORE_MAX WAL_SEGMENT_BYTES_DEFAULT
/* The largest data of one entry; larger appends get ERR_TOO_LARGE. */
#define WAL_ENTRY_BYTES_MAX (256u * 1024u * 1024u)
/* The most entries one wal_append takes; more get ERR_TOO_LARGE. */
#define WAL_APPEND_ENTRIES_MAX (1u << 20)

/* Options of wal_create and wal_open; NULL means all defaults. */
struct wal_options {
    /* Preallocated size of a segment file; 0 = WAL_SEGMENT_BYTES_DEFAULT.
     * Must be >= WAL_SEGMENT_BYTES_MIN.  A batch larger than a segment
     * still goes into one segment, which then grows past this size. */
    uint64_t segment_bytes;
    /* --unsafe-no-fsync: wal_sync and the cut/rename paths skip fdatasync
     * and directory fsync.  A crash may then lose acknowledged writes. */
    bool no_fsync;
    /* --max-wals: how many segment files the dir keeps.  wal_release_before
     * marks segments released; a released segment is deleted (oldest
     * first) only while the dir holds more than segments_keep of them, and
     * a segment still needed for replay (not released) never is, so the
     * dir holds max(segments_keep, needed) segments, as etcd's purge of
     * unlocked WAL files keeps max(--max-wals, needed).  0 = keep none
     * beyond the needed ones (every released segment is deleted at once);
     * WAL_SEGMENTS_KEEP_ALL = delete none (etcd's --max-wals=0). */
    uint64_t segments_keep;
    /* ... and the released segments kept take at most this many bytes
     * (allocated blocks), oldest deleted first: --max-wals is a maximum,
     * this keeps the data dir in proportion to the store (the server sets
     * it with wal_set_sizes).  0 = no limit by bytes; none either with
     * WAL_SEGMENTS_KEEP_ALL (--max-wals=0 asks to keep every segment). */
    uint64_t released_keep_bytes;
};

/* segments_keep: released segments are never deleted. */
#define WAL_SEGMENTS_KEEP_ALL UINT64_MAX

/* One raft entry.  In wal_append the caller owns data (read during the call
 * only).  In wal_replay's on_entry, data is borrowed: valid only during the
 * callback; copy it to keep it. */
struct wal_entry {
    uint64_t index;   /* raft index, >= 1 */
    uint64_t term;    /* raft term */
    uint32_t type;    /* raft entry type (normal, conf change, ...) */
    const void *data; /* len bytes; may be NULL when len == 0 */
    size_t len;       /* bytes of data, <= WAL_ENTRY_BYTES_MAX */
};

/* Raft's HardState. */
struct wal_hardstate {
    uint64_t term;   /* current term */
    uint64_t vote;   /* node voted for in term, 0 = none */
    uint64_t commit; /* highest index known committed */
};

/* A snapshot marker: a snapshot at (index, term) exists (in src/snap). */
struct wal_snapshot {
    uint64_t index; /* last index the snapshot covers */
    uint64_t term;  /* term of that entry */
};

/* Counters since wal_create/wal_open; read with wal_stats. */
struct wal_stats {
    uint64_t bytes_written; /* record bytes written (pwrite) */
    uint64_t syncs;         /* fdatasync calls made by wal_sync */
    uint64_t segments;      /* segment files currently in the dir */
    uint64_t segments_cut;  /* segments started (cuts) by this handle */
    uint64_t last_index;    /* index of the last entry in the log, 0 = none */
};

/*
 * What wal_replay delivers, in this order: on_metadata once; on_snapshot at
 * most once (the latest marker whose index <= from_snap->index); on_hardstate
 * at most once (the last HardState written); then on_entry for each entry of
 * the final log with index > from_snap->index, in index order, contiguous.
 * Any member may be NULL (not interested).  A callback returning non-zero
 * stops the replay; wal_replay returns that value.  Pointers passed to a
 * callback are borrowed and valid only during the call.
 */
struct wal_replay_cb {
    int (*on_metadata)(void *arg, uint64_t node_id, uint64_t cluster_id);
    int (*on_snapshot)(void *arg, const struct wal_snapshot *snap);
    int (*on_hardstate)(void *arg, const struct wal_hardstate *hs);
    int (*on_entry)(void *arg, const struct wal_entry *ent);
};

struct wal;

/*
 * wal_create makes dir (mode 0700, parents must exist; an existing dir
 * without segments is fine) and its first segment holding the metadata
 * (node_id, cluster_id), and returns an open wal in *wal_out (the caller owns
 * it; free with wal_close).  The segment is written as the pre-created
 * temporary file, fdatasync'ed, renamed into place and the dir fsync'ed, so
 * a crash leaves either no WAL or a complete one.
 * Errors: ERR_EXIST (dir already holds a segment), ERR_INVAL (bad options),
 * ERR_NOMEM, ERR_IO/ERR_NOSPC/... from the syscalls.
 */
int wal_create(const char *dir, const struct wal_options *opts,
               uint64_t node_id, uint64_t cluster_id, struct wal **wal_out);

/*
 * wal_open opens an existing WAL: it reads and checks every segment (CRC
 * chain, record shapes, metadata, sequence numbers), deletes a leftover
 * pre-created segment, zeroes a torn tail of the last segment (fdatasync'ed,
 * logged as a warning), and returns a wal ready to append after the last
 * valid record.  Reading everything costs one pass over the WAL; wal_replay
 * makes a second one.  The caller owns *wal_out (wal_close).
 * Errors: ERR_NOTFOUND (no segment in dir), ERR_CORRUPT (damage other than a
 * torn tail; one error line names the file and offset), ERR_INVAL (bad
 * options), ERR_NOMEM, ERR_IO and other syscall errors.
 */
int wal_open(const char *dir, const struct wal_options *opts,
             struct wal **wal_out);

/* wal_exists is true if dir holds at least one segment file. */
bool wal_exists(const char *dir);

/*
 * wal_replay reads the WAL again and delivers (see struct wal_replay_cb) the
 * metadata, the snapshot marker, the last HardState and the final log above
 * from_snap->index (from_snap NULL = {0, 0}: the whole log).  An entry
 * written at an index <= an earlier one replaces that entry and everything
 * after it (raft log truncation), so the caller sees only the final log.
 * It checks that the log is contiguous from from_snap->index + 1 (when any
 * entry lies above it).  Whether the delivered marker matches the snapshot
 * the caller loaded is the caller's check.  Entries are held in memory
 * (copied) until delivered; the memory is freed before returning.  Normally
 * called once right after wal_open; it may be called at any time.
 * Errors: ERR_WAL_GAP (entries above from_snap are missing, e.g. released),
 * ERR_CORRUPT (the files changed under us since wal_open), ERR_NOMEM,
 * ERR_IO, or the non-zero value a callback returned.
 */
int wal_replay(struct wal *wal, const struct wal_snapshot *from_snap,
               const struct wal_replay_cb *cb, void *arg);

/*
 * wal_append writes (not synced) the n entries ents, then the HardState
 * hs_or_null if not NULL, with one pwrite.  ents must be contiguous
 * (ents[i+1].index == ents[i].index + 1) and ents[0].index must be
 * <= last_index + 1; an index <= last_index truncates the log there (raft
 * conflict resolution).  If the batch does not fit in the current segment
 * the segment is cut first (the old one is fdatasync'ed, the pre-created
 * next one renamed into place, the dir fsync'ed).  The data is durable only
 * after wal_sync.  n == 0 with hs_or_null == NULL is a no-op.
 * Errors: ERR_INVAL (bad indexes), ERR_TOO_LARGE (an entry over
 * WAL_ENTRY_BYTES_MAX or n over WAL_APPEND_ENTRIES_MAX), ERR_NOMEM (nothing
 * written, the wal stays usable), ERR_NOSPC with nothing written and the
 * wal usable (a write past a put-off cut found no blocks: try again once
 * space is freed), ERR_IO/ERR_NOSPC/... from the write itself (the wal is
 * broken), or the earlier error of a broken wal.
 */
int wal_append(struct wal *wal, const struct wal_hardstate *hs_or_null,
               const struct wal_entry *ents, size_t n);

/*
 * wal_sync makes everything appended since the last sync durable with one
 * fdatasync (none when nothing was appended, or with no_fsync) and counts
 * it in wal_stats.syncs.
 * Errors: ERR_IO and other fdatasync errors (the wal is broken; what was
 * appended must be treated as lost), or the error of a broken wal.
 */
int wal_sync(struct wal *wal);

/*
 * wal_save_snapshot appends a snapshot marker and syncs (together with
 * anything appended before).  Call it after the snapshot file itself is
 * durable.  Errors: as wal_append plus wal_sync.
 */
int wal_save_snapshot(struct wal *wal, const struct wal_snapshot *snap);

/*
 * wal_release_before releases the oldest segments whose entries all have an
 * index < index (call it with a snapshot's index once the snapshot is saved,
 * or any index the caller's durable state no longer needs the log below),
 * never the segment in use.  Released segments are deleted, oldest first,
 * while the dir holds more than wal_options.segments_keep segments (at once
 * with the default 0) or the released ones take more than
 * released_keep_bytes, here and again after each later cut; the dir is
 * fsync'ed after a deletion.  Release is remembered by this handle only: a
 * reopened wal deletes nothing before its first wal_release_before.
 * Metadata, the latest HardState and snapshot marker are repeated at every
 * segment head, so nothing else is lost.  Errors: ERR_IO and other
 * unlink/fsync errors, or the error of a broken wal.
 */
int wal_release_before(struct wal *wal, uint64_t index);

/*
 * wal_set_sizes changes, from now on, the size of the segments pre-created
 * (segment_bytes, >= WAL_SEGMENT_BYTES_MIN; the segment in use and one
 * already pre-created keep theirs: each is cut at its own size) and the
 * bytes the released segments kept may take (keep_bytes, as
 * wal_options.released_keep_bytes; 0 = no limit; the next release or cut
 * applies it).  segment_bytes 0 = unchanged.  The server sizes both to its
 * store (snap_raft.c wal_budget).
 */
void wal_set_sizes(struct wal *wal, uint64_t segment_bytes,
                   uint64_t keep_bytes);

/* wal_stats copies the counters into *stats_out. */
void wal_stats(const struct wal *wal, struct wal_stats *stats_out);

/* wal_space_low tells (any thread) that the next segment could not be
 * pre-created for a full disk: the caller should stop taking new writes
 * (etcd's NOSPACE) while half a segment is left for what it accepted.
 * Meanwhile a cut is put off (records go past the segment's size) and the
 * pre-creation is tried again at most once a second, on appends; it turns
 * false once it succeeds.  Each change is logged once. */
bool wal_space_low(const struct wal *wal);

/* wal_broken: a write or sync failed and the wal takes nothing more (its
 * error is returned by every later call).  After an ERR_NOSPC from
 * wal_append it tells a write that found no blocks (false: nothing was
 * written, try again later) from one that failed midway (true). */
bool wal_broken(const struct wal *wal);

/* wal_last_index returns the index of the last entry in the log (0: none). */
uint64_t wal_last_index(const struct wal *wal);

/*
 * wal_close closes the files and frees the wal (NULL is fine).  It does not
 * sync: call wal_sync first for anything that must be durable.
 */
void wal_close(struct wal *wal);

/* Process-wide: every WAL fdatasync of a batch or a segment cut
 * (etcd_disk_wal_fsync_duration_seconds; etcd's buckets, 1 ms to 8 s).
 * Not recorded with no_fsync. */
extern struct metrics_hist wal_metrics_fsync;

#endif
