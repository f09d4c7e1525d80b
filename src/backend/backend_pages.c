/*
 * backend_pages.c - the pages a pin needs on disk, and syncing only those
 * (backend.h, "Pins": backend_pin_pages, backend_pin_sync).
 *
 * Why: the store commits without fsync and a pin makes its state durable.
 * Syncing the whole file writes every page dirtied since the last pin, and
 * most of those are dead by then: each commit copies the pages on its
 * paths (branch pages, the last leaf of the revision tree, the meta and
 * names leaves, the free list's record) to new pages, and the next commit
 * copies them again.  At one client that was ~11 pages written per put of
 * which about one is still in use at the next pin (docs/BENCHMARKS.md,
 * session 20).  A pin P only needs the pages P reaches; the pages P
 * reaches that the previous durable pin Q also reached are on disk
 * already (by induction from the first pin, which syncs everything).
 *
 * Which pages are new since Q: LMDB allocates a page either from the free
 * list, or past the last page.  While Q's read txn is open it reuses only
 * records freed before Q (backend_snap.c), so every page allocated since Q
 * was on Q's free list or past Q's last page; and copy-on-write means a
 * page that P and Q both reach is unchanged, with everything below it.
 * So the walk from P's roots (pages read with pread: the page cache holds
 * what LMDB wrote) descends only into pages that are "new"
 * (past Q's last page or on Q's free list) and stops at the first page
 * that is not.  What it reads (LMDB 0.9's page format, 64-bit):
 * - page header, 16 bytes: pgno (8), pad (2), flags (2), lower (2),
 *   upper (2); an overflow page has its page count (4) at byte 12;
 * - node pointers (2 bytes each) from byte 16 to lower;
 * - a node: lo (2), hi (2), flags (2), key size (2), key, data.  In a
 *   branch page the child is lo | hi << 16 | flags << 32; in a leaf, a
 *   F_BIGDATA node's data is the first overflow page's number, a
 *   F_SUBDATA node's data an MDB_db (48 bytes, root at byte 40): the
 *   named buckets in the main tree.
 * - meta: the FREE and MAIN MDB_db at bytes 40 and 88 of the meta page,
 *   last_pg at 136.
 * Every field is checked against the page size and P's last page; a page
 * that does not parse makes the walk fail (ERR_CORRUPT) and the caller
 * syncs the whole file instead.
 *
 * Making them durable (backend_pin_sync): sync_file_range writes exactly
 * those pages (and waits), then one page of them is written again, same
 * bytes, with RWF_DSYNC.  On Linux that write syncs its own range, the
 * file's metadata (size, the blocks of the pages just written: ext4
 * converts a preallocated extent when its pages are written back) and
 * flushes the device's cache, which holds the other pages' writes too.
 * The metadata part is true of ext4 (with a journal: a journal commit;
 * without: the inode and its metadata buffers) and XFS (a log force),
 * which write a file's existing blocks in place; on any other file system
 * (btrfs writes a page's new version elsewhere) the whole file is synced.
 */
#define _GNU_SOURCE /* sync_file_range, pwritev2 */
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "backend/backend_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/mem.h"

#define PAGE_HDR 16u
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define P_OVERFLOW 0x04u
#define P_LEAF2 0x20u
#define F_BIGDATA 0x01u
#define F_SUBDATA 0x02u
#define NODE_HDR 8u
#define DB_ROOT_OFF 40u /* md_root in an MDB_db */
#define DB_SIZE 48u
#define META_FREE_DB 40u
#define META_MAIN_DB 88u
#define META_LAST_PG 136u
#define META_TXNID 144u
#define P_INVALID (~(uint64_t)0)

#define EXT4_MAGIC 0xEF53
#define XFS_MAGIC 0x58465342
#define TMPFS_MAGIC 0x01021994

/* How many bytes of pages are written before waiting for them. */
#define PACE_BYTES ((uint64_t)256 << 10)

/* A growable array of uint64_t. */
struct u64s {
    uint64_t *v;
    size_t n, cap;
};

static int push(struct u64s *a, uint64_t x)
{
    uint64_t *v = mem_grow(a->v, &a->cap, a->n, sizeof *v, 256);
    if (v == NULL)
        return ERR_NOMEM;
    a->v = v;
    a->v[a->n++] = x;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The newer of a pin's two meta pages. */
static const uint8_t *newest_meta(const struct backend_pin *p)
{
    size_t ps = p->meta_len / 2;
    const uint8_t *a = p->meta, *b = p->meta + ps;
    uint64_t ta = backend__get64(a + META_TXNID);
    return backend__get64(b + META_TXNID) > ta ? b : a;
}

/* The walk's state. */
struct walk {
    int fd;               /* the data file */
    uint8_t *page;        /* one page read (psize bytes) */
    uint64_t psize;       /* page size */
    uint64_t last_pg;     /* P's last page */
    uint64_t since_last;  /* Q's last page (P_INVALID: no Q, all new) */
    struct u64s free;     /* Q's free pages, sorted */
    struct u64s stack;    /* pages to visit */
    struct u64s runs;     /* pairs: first page, count */
    uint64_t visited;     /* pages visited (a bound against cycles) */
};

static bool is_new(const struct walk *w, uint64_t pgno)
{
    if (w->since_last == P_INVALID || pgno > w->since_last)
        return true;
    return bsearch(&pgno, w->free.v, w->free.n, sizeof pgno, cmp_u64) !=
           NULL;
}

/* Queues pgno if it is new (and in range). */
static int consider(struct walk *w, uint64_t pgno)
{
    if (pgno == P_INVALID)
        return 0;
    if (pgno < 2 || pgno > w->last_pg)
        return ERR_CORRUPT;
    return is_new(w, pgno) ? push(&w->stack, pgno) : 0;
}

/* The free pages of Q's state: every record of Q's free list. */
static int read_free(struct backend_txn *q, struct u64s *out)
{
    MDB_txn *txn = (MDB_txn *)q;
    MDB_cursor *c;
    if (mdb_cursor_open(txn, 0, &c) != 0)
        return ERR_IO;
    MDB_val k, v;
    int rc = 0, mrc;
    for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && rc == 0;
         mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *d = v.mv_data;
        if (v.mv_size < 8) {
            rc = ERR_CORRUPT;
            break;
        }
        uint64_t n = backend__get64(d);
        if (n > (v.mv_size - 8) / 8) {
            rc = ERR_CORRUPT;
            break;
        }
        for (uint64_t i = 0; i < n && rc == 0; i++)
            rc = push(out, backend__get64(d + 8 + 8 * i));
    }
    mdb_cursor_close(c);
    if (rc == 0 && mrc != MDB_NOTFOUND)
        rc = ERR_IO;
    if (rc == 0 && out->n > 0)
        qsort(out->v, out->n, sizeof *out->v, cmp_u64);
    return rc;
}

/* Visits one new page: records it (and an overflow run's pages) and
 * queues the new pages it points to. */
static int visit(struct walk *w, uint64_t pgno)
{
    if (++w->visited > w->last_pg + 1)
        return ERR_CORRUPT; /* more pages than the file has: a cycle */
    uint8_t *pg = w->page;
    int rc = fs_pread_all(w->fd, pg, w->psize, pgno * w->psize);
    if (rc != 0)
        return rc;
    uint16_t flags = backend__get16(pg + 10);
    if (backend__get64(pg) != pgno)
        return ERR_CORRUPT;
    if (flags & P_OVERFLOW) {
        uint64_t n = backend__get32(pg + 12);
        if (n == 0 || pgno + n - 1 > w->last_pg)
            return ERR_CORRUPT;
        rc = push(&w->runs, pgno);
        return rc == 0 ? push(&w->runs, n) : rc;
    }
    rc = push(&w->runs, pgno);
    if (rc == 0)
        rc = push(&w->runs, 1);
    if (rc != 0 || (flags & P_LEAF2))
        return rc; /* LEAF2 pages hold fixed-size keys only */
    if (!(flags & (P_BRANCH | P_LEAF)))
        return ERR_CORRUPT;
    uint16_t lower = backend__get16(pg + 12), upper = backend__get16(pg + 14);
    if (lower < PAGE_HDR || lower > upper || upper > w->psize)
        return ERR_CORRUPT;
    unsigned keys = (lower - PAGE_HDR) / 2;
    for (unsigned i = 0; i < keys && rc == 0; i++) {
        uint16_t off = backend__get16(pg + PAGE_HDR + 2 * i);
        if (off < upper || off + NODE_HDR > w->psize)
            return ERR_CORRUPT;
        const uint8_t *node = pg + off;
        uint64_t lo = backend__get16(node), hi = backend__get16(node + 2);
        uint64_t nflags = backend__get16(node + 4);
        uint64_t ksize = backend__get16(node + 6);
        if (flags & P_BRANCH) {
            rc = consider(w, lo | hi << 16 | nflags << 32);
            continue;
        }
        uint64_t dsize = lo | hi << 16;
        const uint8_t *data = node + NODE_HDR + ksize;
        uint64_t end = off + NODE_HDR + ksize;
        if (nflags & F_BIGDATA) {
            if (end + 8 > w->psize)
                return ERR_CORRUPT;
            rc = consider(w, backend__get64(data));
        } else if (nflags & F_SUBDATA) {
            if (dsize < DB_SIZE || end + DB_SIZE > w->psize)
                return ERR_CORRUPT;
            rc = consider(w, backend__get64(data + DB_ROOT_OFF));
        }
    }
    return rc;
}

/* Sorts the (first, count) pairs and merges touching runs. */
static size_t merge_runs(uint64_t *v, size_t pairs)
{
    if (pairs == 0)
        return 0; /* (v may be NULL then: qsort wants an array) */
    /* Pairs sort by their first page: qsort over 16-byte elements. */
    qsort(v, pairs, 2 * sizeof *v, cmp_u64);
    size_t out = 0;
    for (size_t i = 0; i < pairs; i++) {
        uint64_t first = v[2 * i], n = v[2 * i + 1];
        if (out > 0 && v[2 * (out - 1)] + v[2 * (out - 1) + 1] >= first) {
            uint64_t end = first + n, *prev = &v[2 * (out - 1)];
            if (end > prev[0] + prev[1])
                prev[1] = end - prev[0];
            continue;
        }
        v[2 * out] = first;
        v[2 * out + 1] = n;
        out++;
    }
    return out;
}

int backend_pin_pages(struct backend *be, const struct backend_pin *since,
                      const struct backend_pin *p, struct backend_run **out,
                      size_t *n_out)
{
    CHECK(be != NULL && p != NULL && p->txn != NULL && out != NULL &&
          n_out != NULL);
    *out = NULL;
    *n_out = 0;
    MDB_envinfo info;
    if (mdb_env_info(backend__env(be), &info) != 0)
        return ERR_IO;
    struct walk w = {.fd = backend__fd(be),
                     .psize = backend_page_bytes(be),
                     .since_last = P_INVALID};
    if (p->meta_len != 2 * w.psize ||
        (since != NULL && since->meta_len != p->meta_len))
        return ERR_CORRUPT;
    const uint8_t *m = newest_meta(p);
    w.last_pg = backend__get64(m + META_LAST_PG);
    if ((w.last_pg + 1) * w.psize > info.me_mapsize)
        return ERR_CORRUPT;
    w.page = mem_malloc(w.psize);
    if (w.page == NULL)
        return ERR_NOMEM;
    int rc = 0;
    if (since != NULL) {
        if (since->txn == NULL || since->txnid > p->txnid) {
            mem_free(w.page);
            return ERR_INVAL;
        }
        w.since_last = backend__get64(newest_meta(since) + META_LAST_PG);
        rc = read_free(since->txn, &w.free);
    }
    if (rc == 0)
        rc = consider(&w, backend__get64(m + META_FREE_DB + DB_ROOT_OFF));
    if (rc == 0)
        rc = consider(&w, backend__get64(m + META_MAIN_DB + DB_ROOT_OFF));
    while (rc == 0 && w.stack.n > 0)
        rc = visit(&w, w.stack.v[--w.stack.n]);
    mem_free(w.free.v);
    mem_free(w.stack.v);
    mem_free(w.page);
    if (rc != 0) {
        mem_free(w.runs.v);
        return rc;
    }
    size_t n = merge_runs(w.runs.v, w.runs.n / 2);
    _Static_assert(sizeof(struct backend_run) == 2 * sizeof(uint64_t),
                   "backend_run is a (first, count) pair");
    *out = (struct backend_run *)w.runs.v;
    *n_out = n;
    return 0;
}

/* Can the file's pages be synced one by one (see the top)? */
static bool in_place_fs(int fd)
{
    struct statfs st;
    if (fstatfs(fd, &st) != 0)
        return false;
    return st.f_type == EXT4_MAGIC || st.f_type == XFS_MAGIC ||
           st.f_type == TMPFS_MAGIC;
}

/* Writes runs[from, to) out (sync_file_range) and waits for them. */
static int write_out(int fd, uint64_t psize, const struct backend_run *r,
                     size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (sync_file_range(fd, (off64_t)(r[i].first * psize),
                            (off64_t)(r[i].pages * psize),
                            SYNC_FILE_RANGE_WAIT_BEFORE |
                                SYNC_FILE_RANGE_WRITE) != 0)
            return err_from_errno(errno);
    for (size_t i = from; i < to; i++)
        if (sync_file_range(fd, (off64_t)(r[i].first * psize),
                            (off64_t)(r[i].pages * psize),
                            SYNC_FILE_RANGE_WAIT_AFTER) != 0)
            return err_from_errno(errno);
    return 0;
}

/* One page of P written again, same bytes, with RWF_DSYNC: the file's
 * metadata and the device's cache (see the top). */
static int dsync_one(struct backend *be, uint64_t pgno)
{
    uint64_t psize = backend_page_bytes(be);
    void *buf = mem_malloc(psize);
    if (buf == NULL)
        return ERR_NOMEM;
    int fd = backend__fd(be);
    int rc = fs_pread_all(fd, buf, psize, pgno * psize);
    struct iovec iov = {buf, psize};
    ssize_t n = rc == 0 ? pwritev2(fd, &iov, 1, (off_t)(pgno * psize),
                                   RWF_DSYNC)
                        : 0;
    if (rc == 0 && n < 0 && (errno == EOPNOTSUPP || errno == EINVAL)) {
        /* A kernel without RWF_DSYNC (before 4.7): the whole file. */
        n = fdatasync(fd) == 0 ? (ssize_t)psize : -1;
    }
    if (rc == 0)
        rc = n == (ssize_t)psize ? 0 : n < 0 ? err_from_errno(errno) : ERR_IO;
    mem_free(buf);
    return rc;
}

int backend_pin_sync(struct backend *be, const struct backend_pin *since,
                     const struct backend_pin *p, uint64_t *pages_out)
{
    CHECK(be != NULL && p != NULL);
    *pages_out = UINT64_MAX;
    if (since == NULL || since->txn == NULL || backend_write_map(be) ||
        !in_place_fs(backend__fd(be)))
        return backend_sync_paced(be);
    struct backend_run *r;
    size_t n;
    if (backend_pin_pages(be, since, p, &r, &n) != 0)
        return backend_sync_paced(be); /* not a layout we can walk */
    uint64_t psize = backend_page_bytes(be), pages = 0, group = 0;
    int fd = backend__fd(be), rc = 0;
    size_t from = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        pages += r[i].pages;
        group += r[i].pages * psize;
        if (group >= PACE_BYTES || i + 1 == n) {
            rc = write_out(fd, psize, r, from, i + 1);
            from = i + 1;
            group = 0;
        }
    }
    if (rc == 0 && n > 0)
        rc = dsync_one(be, r[0].first);
    mem_free(r);
    if (rc == 0)
        *pages_out = pages;
    return rc;
}
