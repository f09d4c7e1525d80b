/*
 * bbolt.h - the bbolt database format (go.etcd.io/bbolt 1.3.x, the file
 * etcd keeps its store in and streams as a snapshot): a streaming writer
 * and a validating reader.  Uses util only; no Go.
 *
 * THE FORMAT (page size 4096 here; every integer little-endian, as bbolt
 * writes it on the machines etcd runs on).
 *
 * The file is an array of pages; page N starts at byte N * 4096.  A page
 * may span 1 + overflow consecutive pages.  Every page opens with a
 * 16-byte header:
 *   [0, 8)   id        u64, the page's own number
 *   [8, 10)  flags     u16: 0x01 branch, 0x02 leaf, 0x04 meta, 0x10 freelist
 *   [10, 12) count     u16: elements (freelist: ids; 0xFFFF = the count is
 *                      the first u64 of the data and the ids follow it)
 *   [12, 16) overflow  u32: pages that follow this one as its continuation
 *
 * Pages 0 and 1: meta (flags 0x04, count 0).  At byte 16 of the page:
 *   [16, 20) magic     u32 0xED0CDAED
 *   [20, 24) version   u32 2
 *   [24, 28) page_size u32 (4096)
 *   [28, 32) flags     u32 0
 *   [32, 40) root      u64: the root bucket's root page
 *   [40, 48) sequence  u64: the root bucket's sequence (0)
 *   [48, 56) freelist  u64: the freelist page
 *   [56, 64) pgid      u64: the high-water mark, pages in use (the file
 *                      holds at least pgid pages)
 *   [64, 72) txid      u64: the transaction that wrote this meta
 *   [72, 80) checksum  u64: FNV-1a 64 of bytes [16, 72)
 * bbolt opens with the valid meta of the larger txid.
 *
 * Freelist page (flags 0x10): count u64 page ids that are free, sorted.
 *
 * Leaf page (flags 0x02): count elements of 16 bytes from byte 16, then
 * the keys and values.  Element i at e = 16 + 16 * i:
 *   [e, e+4)     flags u32: 0x01 = the value is a nested bucket
 *   [e+4, e+8)   pos   u32: the key starts at byte e + pos of the page
 *   [e+8, e+12)  ksize u32
 *   [e+12, e+16) vsize u32; the value follows its key
 * Branch page (flags 0x01): count elements of 16 bytes:
 *   [e, e+4)     pos   u32: the key starts at byte e + pos
 *   [e+4, e+8)   ksize u32
 *   [e+8, e+16)  pgid  u64: the child page, whose first key is this key
 * Keys of a page ascend (bytewise, shorter first on a tie); a bucket is a
 * B+tree whose leaves hold its entries in order.
 *
 * A bucket's value (in its parent's leaf, flag 0x01) is a 16-byte header:
 *   [0, 8) root u64 (0 = inline), [8, 16) sequence u64;
 * an inline bucket (root 0) is followed by a whole leaf page (header with
 * id 0, its elements and data) holding the bucket's entries.  bbolt makes
 * a bucket inline when it is one leaf without nested buckets whose page
 * would take at most 1024 bytes (page size / 4); this writer does too.
 * The root bucket's leaf holds the top-level buckets.  Every page below
 * pgid is a meta page, the freelist, reachable exactly once from the root
 * bucket, or free (bbolt's tx.Check, run by `etcdctl snapshot status`).
 *
 * THE WRITER streams a database from entries given in order: it holds one
 * page per tree level of each open bucket (and a value too large for a
 * page until its page is written), so memory stays bounded whatever the
 * size of the store.  Pages go out as they fill: leaves first, a branch
 * level once its page is full or its bucket ends, the root bucket's
 * pages last.  Because the meta pages come first in the file and name the
 * root page and the page count, a database is written in two passes over
 * the same input: a plan pass (no output) that counts the pages, then the
 * write pass given the plan.  The plan also gives the exact size in bytes
 * before a byte is written (Snapshot's remaining_bytes).  The database
 * has page 2 as an empty freelist; pages 3.. are the trees.
 *
 * THE READER checks a whole file in memory (or mmap) before use: meta
 * checksums and fields, every page's bounds, header id and type, element
 * bounds, key order, each page reached once, nesting depth; any fault
 * is ERR_BBOLT_CORRUPT with a message naming the page and byte offset
 * (bbolt_reader_error).  It never asserts on its input.
 *
 * Threads: a writer or reader is used by one thread at a time.
 */
#ifndef CETCD_BBOLT_BBOLT_H
#define CETCD_BBOLT_BBOLT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BBOLT_PAGE_SIZE 4096
#define BBOLT_MAGIC 0xED0CDAEDu
#define BBOLT_VERSION 2
#define BBOLT_PAGE_HDR 16
#define BBOLT_ELEM 16
#define BBOLT_BUCKET_HDR 16
#define BBOLT_FLAG_BRANCH 0x01
#define BBOLT_FLAG_LEAF 0x02
#define BBOLT_FLAG_META 0x04
#define BBOLT_FLAG_FREELIST 0x10
#define BBOLT_LEAF_BUCKET 0x01
#define BBOLT_INLINE_MAX (BBOLT_PAGE_SIZE / 4)
/* Buckets nested deeper than this are refused (writer and reader). */
#define BBOLT_DEPTH_MAX 16
/* Longest key the writer takes (bbolt's MaxKeySize). */
#define BBOLT_KEY_MAX 32768
/* Longest value the writer takes (bbolt's MaxValueSize: 2^31 - 2). */
#define BBOLT_VALUE_MAX ((size_t)0x7FFFFFFE)

/* --- writer -------------------------------------------------------------- */

/* Where the write pass's bytes go: write(ctx, buf, len) takes len bytes in
 * file order (whole pages); 0 or an ERR_* code, which stops the writer. */
struct bbolt_sink {
    int (*write)(void *ctx, const void *buf, size_t len);
    void *ctx;
};

/* What the plan pass found; given to the write pass. */
struct bbolt_plan {
    uint64_t root;  /* the root bucket's root page */
    uint64_t pages; /* pgid, the high-water mark; the file is pages * 4096 */
};

struct bbolt_writer;

/* bbolt_writer_create starts a pass: plan NULL is the plan pass (sink
 * ignored, nothing written), else the write pass, which writes the meta
 * pages and the freelist at once.  *out is freed by bbolt_writer_free.
 * Errors: ERR_NOMEM, the sink's. */
int bbolt_writer_create(const struct bbolt_plan *plan, struct bbolt_sink sink,
                        struct bbolt_writer **out);

/* bbolt_writer_bucket_begin opens bucket `name` inside the open bucket (the
 * root bucket at first); its entries follow, then bbolt_writer_bucket_end.
 * The name is an entry of the parent and must sort after the parent's
 * entries so far.  Errors: ERR_BBOLT_ORDER, ERR_BBOLT_DEPTH, ERR_INVAL
 * (empty or too long name), ERR_NOMEM, the sink's. */
int bbolt_writer_bucket_begin(struct bbolt_writer *w, const void *name,
                              size_t name_len);

/* bbolt_writer_put adds key -> value to the open bucket (not the root
 * bucket); keys strictly ascend.  Borrowed: copied before return.
 * Errors: ERR_BBOLT_ORDER, ERR_INVAL (no bucket open, empty or too long key,
 * value too long), ERR_NOMEM, the sink's. */
int bbolt_writer_put(struct bbolt_writer *w, const void *key, size_t key_len,
                     const void *value, size_t value_len);

/* bbolt_writer_bucket_end closes the innermost open bucket.  Errors:
 * ERR_INVAL (none open), ERR_NOMEM, the sink's. */
int bbolt_writer_bucket_end(struct bbolt_writer *w);

/* bbolt_writer_finish closes the root bucket (every bucket must be
 * closed): the plan pass fills *plan_out; the write pass checks that
 * the input matched its plan (else ERR_BBOLT_PLAN) and fills *plan_out
 * too (may be NULL).  Errors: ERR_INVAL, ERR_NOMEM, ERR_BBOLT_PLAN, the
 * sink's.  After any error the writer refuses every call with it. */
int bbolt_writer_finish(struct bbolt_writer *w, struct bbolt_plan *plan_out);

/* bbolt_writer_bytes: the bytes written (or counted) so far. */
uint64_t bbolt_writer_bytes(const struct bbolt_writer *w);

void bbolt_writer_free(struct bbolt_writer *w);

/* --- reader -------------------------------------------------------------- */

struct bbolt_reader;

/* bbolt_reader_open_mem checks buf (len bytes, borrowed until
 * bbolt_reader_free) as a bbolt database and keeps it for walks.
 * bbolt_reader_open_file does the same on a file (mapped read-only); a
 * file whose size is 32 bytes past a multiple of 512 (an etcd snapshot
 * with its sha256 trailer) is read without the trailer.  On
 * ERR_BBOLT_CORRUPT, *out is still set (free it) so that
 * bbolt_reader_error can say what and where.  Errors: ERR_BBOLT_CORRUPT,
 * ERR_NOMEM, ERR_IO / ERR_NOTFOUND (file). */
int bbolt_reader_open_mem(const void *buf, size_t len,
                          struct bbolt_reader **out);
int bbolt_reader_open_file(const char *path, struct bbolt_reader **out);

/* bbolt_reader_error: why the last call failed ("" if it did not);
 * valid until the next call on r. */
const char *bbolt_reader_error(const struct bbolt_reader *r);

/* One entry of a walk.  Pointers are into the reader's bytes. */
struct bbolt_entry {
    int depth;                               /* 0: a top-level bucket (is_bucket) */
    const uint8_t *path[BBOLT_DEPTH_MAX];    /* bucket names, outermost first */
    size_t path_len[BBOLT_DEPTH_MAX];        /* their lengths */
    const uint8_t *key;                      /* the key */
    size_t key_len;                          /* its length */
    const uint8_t *value;                    /* NULL when is_bucket */
    size_t value_len;                        /* its length */
    bool is_bucket;                          /* a nested bucket begins */
};

/* fn returns 0 to go on, anything else to stop the walk with it. */
typedef int (*bbolt_walk_fn)(void *arg, const struct bbolt_entry *e);

/* bbolt_reader_walk calls fn for every entry of every bucket, depth
 * first in key order; a nested bucket's entry (is_bucket) comes before
 * its own entries.  Returns 0, fn's value, or ERR_BBOLT_CORRUPT. */
int bbolt_reader_walk(struct bbolt_reader *r, bbolt_walk_fn fn, void *arg);

/* bbolt_reader_pages: the meta's page count (pgid). */
uint64_t bbolt_reader_pages(const struct bbolt_reader *r);

void bbolt_reader_free(struct bbolt_reader *r);

#endif
