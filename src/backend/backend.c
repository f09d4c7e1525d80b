/*
 * backend.c - the LMDB environment: open/close, buckets, txns, cursors,
 * error mapping, size accounting.  Policy and thread rules: backend.h.
 *
 * The opaque struct backend_txn / backend_cursor pointers ARE the LMDB
 * MDB_txn / MDB_cursor pointers (converted, never dereferenced as our
 * types), so wrapping costs nothing but a call.  The backend itself is the
 * env's userctx, so a txn finds its backend with mdb_txn_env.
 */
#define _GNU_SOURCE /* pipe2, fallocate */
#include "backend/backend.h"

#include "util/check.h"
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "backend/backend_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

#define DEFAULT_MAP_SIZE (64ull << 30)
#define DEFAULT_MAX_READERS 1024u
#define MAX_BUCKETS BACKEND__MAX_BUCKETS
/* LMDB numbers named databases from 2 (0: free pages, 1: the names). */
#define DBI_SLOTS (MAX_BUCKETS + 2)
#define NAME_MAX_LEN 64
#define META_PAGES 2u /* LMDB's pages 0 and 1 */

struct backend {
    MDB_env *env;          /* the environment; owned */
    bool writing;          /* a write txn is open (apply thread only) */
    size_t key_max;        /* mdb_env_get_maxkeysize */
    void *map_addr;        /* the data file's mapping (for rss_trim) */
    size_t map_len;        /* its length; 0 if it was not found */
    bool write_map;        /* MDB_WRITEMAP (else pwrite): see alloc_ahead */
    bool room_ok;          /* LMDB's txn layout is known: room_check runs */
    bool no_ahead;         /* backend_options.no_ahead */
    _Atomic uint64_t unmaps; /* trims and syncs so far (any thread): each
                              unmaps or write-protects populated pages */
    uint64_t pop_end;      /* the map is populated up to here (writer) */
    uint64_t pop_unmaps;   /* unmaps when pop_end was set (writer) */
    bool pop_ok;           /* MADV_POPULATE_WRITE works here (writer) */
    int fd;                /* the data file */
    uint64_t page_size;    /* the store's page size */
    uint64_t map_size;     /* the map's size (the file's, with write_map) */
    _Atomic uint64_t last_txnid; /* the last committed write txn's id */
    _Atomic uint64_t extent; /* bytes up to the last committed txn's last
                              page: see extent_update */
    _Atomic uint64_t used; /* bytes of the trees' pages as of the last
                              commit: see tree_pages */
    uint64_t ahead_end;    /* blocks allocated up to here (room_ok) */
    bool ahead_warned;     /* alloc_ahead failed and said so */
    bool said_low;         /* the log's last word on it: full (writer) */
    uint64_t said_low_ms;  /* when it said so (monotonic ms; writer) */
    _Atomic bool low;      /* the disk refused blocks and less than
                              LOW_BYTES are left allocated: see
                              backend_space_low */
    bool txn_refused;      /* the open write txn was refused room: its
                              commit fails (writer only) */
    bool credit_on;        /* the open write txn began short of room: it
                              counts LMDB's reusable free pages (writer
                              only; see room_check) */
    uint64_t credit;       /* those pages, less what its writes were
                              charged (writer only) */
    uint64_t write_pages;  /* a small write's most new pages, from the
                              trees' depth (writer only, credit_on) */
    struct backend_journal *journal; /* the running journal or NULL
                              (backend_journal.c; writer only, changed
                              with the writer excluded) */
    pthread_mutex_t names_mu; /* the bucket names below */
    char names[DBI_SLOTS][NAME_MAX_LEN]; /* under names_mu: bucket dbi's
                              name ("" if not opened) */
    unsigned name_flags[DBI_SLOTS]; /* under names_mu: its flags */
};

struct backend_journal **backend__journal_slot(struct backend *be)
{
    CHECK(be != NULL);
    return &be->journal;
}

bool backend__writing(const struct backend *be)
{
    CHECK(be != NULL);
    return be->writing;
}

MDB_env *backend__env(struct backend *be)
{
    CHECK(be != NULL);
    return be->env;
}

int backend__fd(const struct backend *be)
{
    CHECK(be != NULL);
    return be->fd;
}

bool backend__bucket_name(struct backend *be, MDB_dbi dbi, char *name,
                          unsigned *flags_out)
{
    CHECK(be != NULL && name != NULL);
    if (dbi >= DBI_SLOTS)
        return false;
    pthread_mutex_lock(&be->names_mu);
    memcpy(name, be->names[dbi], NAME_MAX_LEN);
    *flags_out = be->name_flags[dbi];
    pthread_mutex_unlock(&be->names_mu);
    return name[0] != '\0';
}

/* Notes a write of (dbi, key) for the journal, if one runs. */
static void jtouch(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t len)
{
    struct backend *be = mdb_env_get_userctx(mdb_txn_env(txn));
    if (be->journal != NULL)
        backend__journal_touch(be->journal, dbi, key, len);
}

/* With write_map, the data file is as large as the map but sparse, and a
 * page LMDB adds past the data is a hole until it is written: a write
 * fault on a hole of a full disk is SIGBUS, where a pwrite would have
 * returned ENOSPC.  Without it, a pwrite refused by a full disk fails the
 * whole commit, deletes included, and nothing is kept for them.  So in
 * both modes the blocks after LMDB's last page are allocated ahead
 * (fallocate with FALLOC_FL_KEEP_SIZE: a write_map file is the map's size
 * already, the other ends at the data), up to AHEAD_BYTES past
 * the data, ALLOC_CHUNK at a time (a disk that cannot give all of it
 * gives what it has), topped up after each commit that leaves less than
 * half of it.  And no page past the allocated blocks is ever written:
 * before each write of a txn, room_check makes sure that the txn's next
 * new page plus a bound of what the write may add plus RESERVE_BYTES (the
 * commit's freelist pages) lies inside the allocated blocks, allocating
 * more if it can, and refuses the write (ERR_NOSPC, the txn then fails to
 * commit) if it cannot.  The txn's next page number is LMDB's
 * mt_next_pgno, read through the layout check of txn_layout_ok. */
#define AHEAD_BYTES ((uint64_t)64 << 20)
#define AHEAD_DIV 8u
#define ALLOC_CHUNK ((uint64_t)1 << 20)
/* Below this much allocated room, with the disk refusing more, the store
 * says it is low on space (backend_space_low): writes should stop before
 * the room is gone, so that deletes and the alarm still fit. */
#define LOW_BYTES ((uint64_t)8 << 20)
/* Kept free after every write of a txn, for its commit. */
#define RESERVE_BYTES ((uint64_t)1 << 20)
/* What one write may add besides its value: the copies of the pages on
 * its path and the splits (a few per level of a tree of depth <= 16). */
#define WRITE_PAGES_MAX 64

static void alloc_ahead(struct backend *be);
static void extent_update(struct backend *be);
static uint64_t tree_pages(MDB_txn *txn);

static MDB_txn *mtxn(struct backend_txn *t)
{
    return (MDB_txn *)t;
}

static MDB_cursor *mcur(struct backend_cursor *c)
{
    return (MDB_cursor *)c;
}

/* map turns an LMDB or errno result into an ERR_* code. */
static int map(int rc)
{
    switch (rc) {
    case MDB_SUCCESS:
        return 0;
    case MDB_NOTFOUND:
        return ERR_NOTFOUND;
    case MDB_MAP_FULL:
    case MDB_TXN_FULL:
    case MDB_DBS_FULL:
        return ERR_NOSPC;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
        return ERR_CORRUPT;
    case MDB_READERS_FULL:
        return ERR_BUSY;
    case MDB_BAD_VALSIZE:
    case MDB_INCOMPATIBLE:
    case EINVAL:
        return ERR_INVAL;
    case ENOMEM:
        return ERR_NOMEM;
    default:
        return rc > 0 ? err_from_errno(rc) : ERR_IO;
    }
}

static void to_bval(const MDB_val *m, struct backend_val *b)
{
    if (b != NULL) {
        b->len = m->mv_size;
        b->data = m->mv_data;
    }
}

/* revkey_cmp orders "user bytes + fixed suffix" keys: user bytes bytewise
 * with the shorter prefix first, then the suffix.  Keys shorter than the
 * suffix (never written by mvcc) fall back to plain bytewise order among
 * themselves and sort before the others, so the order stays total. */
int backend_revkey_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    const size_t s = BACKEND_REVKEY_SUFFIX;
    if (al < s || bl < s) {
        if (al >= s)
            return 1;
        if (bl >= s)
            return -1;
        int c = memcmp(a, b, al < bl ? al : bl);
        if (c != 0 || al == bl)
            return c;
        return al < bl ? -1 : 1;
    }
    size_t la = al - s, lb = bl - s;
    int c = memcmp(a, b, la < lb ? la : lb);
    if (c != 0)
        return c;
    if (la != lb)
        return la < lb ? -1 : 1;
    return memcmp((const char *)a + la, (const char *)b + lb, s);
}

static int revkey_cmp(const MDB_val *a, const MDB_val *b)
{
    return backend_revkey_cmp(a->mv_data, a->mv_size, b->mv_data, b->mv_size);
}

static int env_configure(MDB_env *env, const struct backend_options *o)
{
    uint64_t map_size = o && o->map_size_bytes ? o->map_size_bytes
                                               : DEFAULT_MAP_SIZE;
    unsigned readers = o && o->max_readers ? o->max_readers
                                           : DEFAULT_MAX_READERS;
    int rc = mdb_env_set_mapsize(env, (size_t)map_size);
    if (rc == 0)
        rc = mdb_env_set_maxreaders(env, readers);
    if (rc == 0)
        rc = mdb_env_set_maxdbs(env, MAX_BUCKETS);
    return map(rc);
}

/* find_map locates the env's data file mapping in /proc/self/maps by
 * inode: LMDB's API does not expose the map address (mdb_env_info's
 * me_mapaddr is only set with MDB_FIXEDMAP). */
static void find_map(struct backend *be)
{
    int fd;
    struct stat st;
    if (mdb_env_get_fd(be->env, &fd) != 0 || fstat(fd, &st) != 0)
        return;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi, ino;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &ino) != 3)
            continue;
        if (ino == (unsigned long)st.st_ino && strstr(line, "data.mdb")) {
            be->map_addr = (void *)lo;
            be->map_len = hi - lo;
            break;
        }
    }
    fclose(f);
}

/* env_open creates and opens be's env in dir (be->env: NULL on error). */
static int env_open(struct backend *be, const char *dir,
                    const struct backend_options *opts, bool write_map)
{
    int rc = map(mdb_env_create(&be->env));
    if (rc != 0) {
        be->env = NULL;
        return rc;
    }
    rc = env_configure(be->env, opts);
    unsigned flags = MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC;
    if (opts != NULL && opts->no_fsync)
        flags |= MDB_NOSYNC;
    if (write_map)
        flags |= MDB_WRITEMAP;
    if (rc == 0)
        rc = map(mdb_env_open(be->env, dir, flags, 0600));
    if (rc != 0) {
        mdb_env_close(be->env);
        be->env = NULL;
        return rc;
    }
    mdb_env_set_userctx(be->env, be);
    be->write_map = write_map;
    be->pop_ok = true;
    return 0;
}

/* The head of LMDB 0.9's struct MDB_txn (mdb.c, 64-bit builds): what
 * room_check reads.  txn_layout_ok checks it against the public API
 * before write_map is trusted. */
struct lmdb_txn_head {
    void *parent;        /* mt_parent */
    void *child;         /* mt_child */
    size_t next_pgno;    /* mt_next_pgno: the txn's next new page */
    size_t txnid;        /* mt_txnid */
    MDB_env *env;        /* mt_env */
};

static size_t txn_next_pgno(MDB_txn *txn)
{
    return ((const struct lmdb_txn_head *)(void *)txn)->next_pgno;
}

/* txn_layout_ok tells whether a fresh write txn's head reads as LMDB 0.9
 * lays it out: its env, its id and its next page (one past the last
 * committed page). */
static bool txn_layout_ok(struct backend *be)
{
    MDB_envinfo info;
    MDB_txn *txn;
    if (mdb_env_info(be->env, &info) != 0 ||
        mdb_txn_begin(be->env, NULL, 0, &txn) != 0)
        return false;
    const struct lmdb_txn_head *h = (const void *)txn;
    bool ok = h->env == be->env && h->txnid == mdb_txn_id(txn) &&
              h->txnid == info.me_last_txnid + 1 &&
              h->next_pgno == info.me_last_pgno + 1;
    mdb_txn_abort(txn);
    return ok;
}

int backend_open(const char *dir, const struct backend_options *opts,
                 struct backend **out)
{
    CHECK(dir != NULL && out != NULL);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    struct backend *be = mem_calloc(1, sizeof *be);
    if (be == NULL)
        return ERR_NOMEM;
    pthread_mutex_init(&be->names_mu, NULL);
    bool write_map = opts != NULL && opts->write_map;
    int rc = env_open(be, dir, opts, write_map);
    be->room_ok = rc == 0 && txn_layout_ok(be);
    if (rc == 0 && write_map && !be->room_ok) {
        /* Without the txn's next page a full disk could SIGBUS us. */
        log_warn("backend", "this LMDB's txn layout is not the one cetcd "
                 "knows; writing the store with pwrite (no write map)");
        mdb_env_close(be->env);
        rc = env_open(be, dir, opts, false);
    }
    if (rc != 0)
        goto err_free;
    be->key_max = (size_t)mdb_env_get_maxkeysize(be->env);
    MDB_stat st;
    rc = map(mdb_env_stat(be->env, &st));
    if (rc == 0)
        rc = map(mdb_env_get_fd(be->env, &be->fd));
    if (rc != 0)
        goto err_env;
    be->page_size = st.ms_psize;
    extent_update(be);
    /* No bucket is open yet: the meta pages and the names' tree. */
    atomic_store(&be->used, (META_PAGES + st.ms_branch_pages +
                             st.ms_leaf_pages + st.ms_overflow_pages) *
                                be->page_size);
    be->no_ahead = opts != NULL && opts->no_ahead;
    if (be->room_ok && !be->no_ahead)
        alloc_ahead(be);
    CHECK(be->key_max > BACKEND_REVKEY_SUFFIX);
    find_map(be);
    *out = be;
    return 0;
err_env:
    CHECK(rc < 0);
    mdb_env_close(be->env);
err_free:
    pthread_mutex_destroy(&be->names_mu);
    mem_free(be);
    return rc;
}

void backend_close(struct backend *be)
{
    if (be == NULL)
        return;
    CHECK(!be->writing);
    CHECK(be->journal == NULL); /* backend_journal_stop first */
    mdb_env_close(be->env);
    pthread_mutex_destroy(&be->names_mu);
    mem_free(be);
}

int backend_bucket_open(struct backend *be, const char *name, unsigned flags,
                        backend_bucket *out)
{
    CHECK(be != NULL && name != NULL && out != NULL);
    CHECK(!be->writing);
    if (strlen(name) >= NAME_MAX_LEN)
        return ERR_INVAL;
    MDB_txn *txn;
    int rc = mdb_txn_begin(be->env, NULL, 0, &txn);
    if (rc != 0)
        return map(rc);
    MDB_dbi dbi;
    rc = mdb_dbi_open(txn, name, MDB_CREATE, &dbi);
    if (rc == 0 && (flags & BACKEND_BUCKET_REVKEY))
        rc = mdb_set_compare(txn, dbi, revkey_cmp);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return map(rc);
    }
    uint64_t used = tree_pages(txn) * be->page_size;
    rc = mdb_txn_commit(txn);
    if (rc != 0)
        return map(rc);
    extent_update(be);
    atomic_store(&be->used, used);
    CHECK(dbi < DBI_SLOTS);
    pthread_mutex_lock(&be->names_mu);
    snprintf(be->names[dbi], NAME_MAX_LEN, "%s", name);
    be->name_flags[dbi] = flags;
    pthread_mutex_unlock(&be->names_mu);
    *out = dbi;
    return 0;
}

/* etcd's backend commit buckets: prometheus.ExponentialBuckets(0.001, 2,
 * 14). */
static const double commit_bounds[] = {0.001, 0.002, 0.004, 0.008, 0.016,
                                       0.032, 0.064, 0.128, 0.256, 0.512,
                                       1.024, 2.048, 4.096, 8.192};
struct metrics_hist backend_metrics_commit = METRICS_HIST_INIT(commit_bounds);

static uint64_t reusable_bytes(struct backend *be);
static void credit_begin(struct backend *be, MDB_txn *txn);

int backend_write_begin(struct backend *be, struct backend_txn **out)
{
    CHECK(be != NULL && out != NULL);
    CHECK(!be->writing); /* one writer, one txn at a time */
    /* Short of room on a disk that gives no more: the free list's
     * reusable pages, counted before the txn may take any. */
    be->credit_on = be->room_ok && !be->no_ahead &&
                    (atomic_load(&be->low) || be->ahead_warned ||
                     be->ahead_end < atomic_load(&be->extent) + LOW_BYTES);
    be->credit = be->credit_on ? reusable_bytes(be) / be->page_size : 0;
    MDB_txn *txn;
    int rc = mdb_txn_begin(be->env, NULL, 0, &txn);
    if (rc != 0)
        return map(rc);
    if (be->credit_on)
        credit_begin(be, txn);
    be->writing = true;
    *out = (struct backend_txn *)txn;
    return 0;
}

static struct backend *txn_backend(MDB_txn *txn)
{
    struct backend *be = mdb_env_get_userctx(mdb_txn_env(txn));
    CHECK(be != NULL);
    return be;
}

/* alloc_to allocates the store file's blocks up to `to` (capped at the
 * map), ALLOC_CHUNK at a time so that a disk short of all of it gives
 * what it has; the writer only.  Returns 0 or the errno of the refusal. */
static int alloc_to(struct backend *be, uint64_t to)
{
    CHECK(be->room_ok);
    if (to > be->map_size)
        to = be->map_size;
    uint64_t used = atomic_load(&be->extent);
    if (be->ahead_end < used)
        be->ahead_end = used; /* written pages have their blocks */
    while (be->ahead_end < to) {
        uint64_t n = to - be->ahead_end;
        if (n > ALLOC_CHUNK)
            n = ALLOC_CHUNK;
        if (fallocate(be->fd, FALLOC_FL_KEEP_SIZE, (off_t)be->ahead_end,
                      (off_t)n) != 0)
            return errno;
        be->ahead_end += n;
    }
    return 0;
}

/* free_records sums the pages of the free list's records whose txn ids
 * are in [from, below) (*pages_out), with the last such id (*last_out,
 * left as it was if none): a cursor walk in txn.  Errors: map()'s. */
static int free_records(MDB_txn *txn, uint64_t from, uint64_t below,
                        uint64_t *last_out, uint64_t *pages_out)
{
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, 0, &c);
    if (rc != 0)
        return map(rc);
    /* The freelist's keys are txn ids (size_t, MDB_INTEGERKEY). */
    size_t key = (size_t)from;
    MDB_val k = {sizeof key, &key}, v;
    uint64_t pages = 0;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        size_t id, n;
        if (k.mv_size != sizeof id || v.mv_size < sizeof n)
            continue;
        memcpy(&id, k.mv_data, sizeof id);
        if (id >= below)
            break; /* keys ascend: the rest are newer still */
        memcpy(&n, v.mv_data, sizeof n);
        pages += n;
        *last_out = id;
    }
    mdb_cursor_close(c);
    *pages_out = pages;
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : map(rc);
}

/* Reader-table lines of mdb_reader_list: "pid thread txnid" (txnid "-"
 * for a slot without a txn; a header line first). */
static int oldest_reader(const char *line, void *ctx)
{
    uint64_t *oldest = ctx;
    int pid;
    size_t tid, txnid;
    if (sscanf(line, "%d %zx %zu", &pid, &tid, &txnid) == 3 &&
        txnid < *oldest)
        *oldest = txnid;
    return 0;
}

/* reusable_bytes is what LMDB's free list can give the next write txn
 * without growing the file: the pages of the records freed by txns
 * before the oldest reader (LMDB reuses no newer ones; a pin is such a
 * reader, snap_pin.c) and before the last commit.  A compaction's
 * deletes come back this way once the pin taken after them is durable.
 * A walk of those records in a read txn; the writer, with no write txn
 * open (after a commit).  0 if it cannot be read. */
static uint64_t reusable_bytes(struct backend *be)
{
    MDB_txn *txn;
    if (mdb_txn_begin(be->env, NULL, MDB_RDONLY, &txn) != 0)
        return 0;
    uint64_t oldest = mdb_txn_id(txn); /* the last commit */
    uint64_t pages = 0, last;
    if (mdb_reader_list(be->env, oldest_reader, &oldest) >= 0 &&
        free_records(txn, 0, oldest, &last, &pages) != 0)
        pages = 0;
    mdb_txn_abort(txn);
    return pages * be->page_size;
}

/* The "disk is full" line at most this often: while a compaction frees
 * pages on a full disk the flag may turn on and off at every step. */
#define LOW_LOG_MS 60000u

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* low_update sets the low flag after an allocation that got rc, logging
 * a change (not each write): "full" at most once per LOW_LOG_MS (a flag
 * still on after a quiet interval is said then), "room again" after a
 * "full" that was said.  `reusable`: the free list's bytes
 * the next txn can take (reusable_bytes), counted as room, but half of
 * LOW_BYTES must still be allocated past the last page: a value longer
 * than a page takes a run of consecutive pages, which the free list may
 * not have. */
static void low_update(struct backend *be, int rc, uint64_t reusable)
{
    uint64_t room = be->ahead_end - atomic_load(&be->extent);
    bool low = rc != 0 &&
               (room < LOW_BYTES / 2 || room + reusable < LOW_BYTES);
    if (rc != 0 && !be->ahead_warned) {
        be->ahead_warned = true;
        log_warn("backend", "cannot allocate blocks ahead in the store "
                 "file: %s (%llu bytes allocated ahead)", strerror(rc),
                 (unsigned long long)room);
    }
    if (rc == 0)
        be->ahead_warned = false;
    atomic_store(&be->low, low);
    if (low == be->said_low)
        return;
    uint64_t now = mono_ms();
    if (low && be->said_low_ms != 0 && now - be->said_low_ms < LOW_LOG_MS)
        return; /* said a moment ago; said again later if it stays */
    be->said_low = low;
    if (low) {
        be->said_low_ms = now;
        log_error("backend", "the store's disk is full (%s, %llu bytes left "
                  "allocated): writes are refused until space is freed",
                  strerror(rc), (unsigned long long)room);
    } else if (rc != 0)
        log_info("backend", "the store's disk has room again: %llu bytes "
                 "free in the store file", (unsigned long long)reusable);
    else
        log_info("backend", "the store's disk has room again");
}

/* ahead_want is how far past `used` bytes of data to allocate: an
 * AHEAD_DIV-th of the data, at most AHEAD_BYTES (the data dir's size is
 * the store's plus this: 64 MiB ahead of a 30 MiB store was most of its
 * data dir) and at least twice LOW_BYTES (room for a txn's value plus
 * RESERVE_BYTES, and what the low mark is measured against). */
static uint64_t ahead_want(uint64_t used)
{
    uint64_t t = used / AHEAD_DIV;
    if (t > AHEAD_BYTES)
        t = AHEAD_BYTES;
    return t < 2 * LOW_BYTES ? 2 * LOW_BYTES : t;
}

uint64_t backend_ahead_bytes(uint64_t data_bytes)
{
    return ahead_want(data_bytes);
}

/* ahead_target is ahead_want, but no more than half the disk's free
 * space (others share a small disk), and never less than twice LOW_BYTES
 * (a disk that cannot give that much is full). */
static uint64_t ahead_target(struct backend *be)
{
    struct statvfs v;
    uint64_t t = ahead_want(atomic_load(&be->extent));
    if (fstatvfs(be->fd, &v) == 0 &&
        (uint64_t)v.f_bavail * v.f_frsize / 2 < t)
        t = (uint64_t)v.f_bavail * v.f_frsize / 2;
    return t < 2 * LOW_BYTES ? 2 * LOW_BYTES : t;
}

/* Tops the allocated blocks up to ahead_target past LMDB's last page once
 * less than half of that is left (or the disk was low); the writer only. */
static void alloc_ahead(struct backend *be)
{
    uint64_t used = atomic_load(&be->extent);
    if (be->ahead_end >= used + ahead_want(used) / 2 &&
        !atomic_load(&be->low))
        return;
    uint64_t t = ahead_target(be);
    if (be->ahead_end >= used + t / 2 && !atomic_load(&be->low))
        return;
    int rc = alloc_to(be, used + t);
    /* The disk is short: the free list inside the file may still hold
     * room (a compaction's deletes). */
    bool short_room = rc != 0 && be->ahead_end - used < LOW_BYTES &&
                      be->ahead_end - used >= LOW_BYTES / 2;
    low_update(be, rc, short_room ? reusable_bytes(be) : 0);
}

/* A new page past the data is a hole of the page cache: the first write to
 * it is a fault that reads it (zeros, from the blocks allocated ahead),
 * maps it and makes it writable, 8-14 us of CPU here, most of it the
 * fault's entry and exit on these VMs (a 10k-key delete of 1 KB values
 * writes 5-10k new pages: a pin keeps freed pages from being reused).
 * MADV_POPULATE_WRITE does the same for POP_CHUNK pages in one call, so
 * the writer maps the pages just ahead of the txn's next page before it
 * gets there, never past the blocks allocated ahead (a hole of a full
 * disk would fail, not SIGBUS: it is a system call).  A map trim unmaps
 * them again and a sync write-protects them (be->unmaps), which
 * populate notices. */
#define POP_CHUNK ((uint64_t)1 << 20)

static void populate(struct backend *be, size_t next_pgno)
{
    uint64_t unmaps = atomic_load(&be->unmaps);
    if (unmaps != be->pop_unmaps) {
        be->pop_unmaps = unmaps;
        be->pop_end = 0;
    }
    uint64_t at = (uint64_t)next_pgno * be->page_size;
    if (!be->write_map || be->map_len == 0 || !be->pop_ok ||
        at + POP_CHUNK / 2 < be->pop_end)
        return;
    uint64_t from = at > be->pop_end ? at : be->pop_end;
    uint64_t to = from + POP_CHUNK;
    if (to > be->ahead_end)
        to = be->ahead_end;
    if (to > be->map_len)
        to = be->map_len;
    if (from >= to)
        return;
    if (madvise((char *)be->map_addr + from, to - from,
                MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
        be->pop_ok = false; /* a kernel before 5.14: fault page by page */
    be->pop_end = to;
}

/* credit_begin sets, for a write txn that counts the free list's pages
 * (credit_on), the most pages one small write may take: per level of the
 * deepest tree, a copy of the page on its path, a split (or, for a
 * delete, a sibling touched by a merge) and a split of the parent whose
 * separator key a merge replaced, with a level more for a root split. */
static void credit_begin(struct backend *be, MDB_txn *txn)
{
    unsigned depth = 0;
    pthread_mutex_lock(&be->names_mu);
    for (MDB_dbi dbi = 1; dbi < DBI_SLOTS; dbi++) {
        MDB_stat st;
        if ((dbi == 1 || be->names[dbi][0] != '\0') &&
            mdb_stat(txn, dbi, &st) == 0 && st.ms_depth > depth)
            depth = st.ms_depth;
    }
    pthread_mutex_unlock(&be->names_mu);
    be->write_pages = 3u * (depth + 1u) + 2u;
}

/* A value this long or shorter never takes overflow pages (a run of
 * consecutive pages, which the free list may not have). */
#define CREDIT_BYTES_MAX 1024u

/* charge counts a write of `bytes` against the txn's credit: whatever
 * room it passed on, the pages it takes may come from the free list. */
static void charge(struct backend *be, size_t bytes)
{
    if (!be->credit_on)
        return;
    uint64_t c = be->write_pages + (2 * (uint64_t)bytes + be->page_size - 1) /
                                       be->page_size;
    be->credit = be->credit > c ? be->credit - c : 0;
}

/* room_check makes sure a write adding about `bytes` to txn stays inside
 * the allocated blocks (see AHEAD_BYTES); ERR_NOSPC refuses it, and the
 * txn with it.  A txn that began short of room (credit_on) may also
 * take pages of the free list that LMDB is sure to reuse (LMDB takes a
 * page from its free list before it adds one past the last), as long as
 * the free pages counted at its begin, less a worst case for each of its
 * writes so far, cover the write's worst case: then only the commit's
 * reserve must lie past the next page.  Without that, a disk with no
 * block left past the margin refused every write, the deletes of a
 * compaction too, although the free list had the pages.  `commit`: the
 * check before the commit (no write of its own). */
static int room_check_at(MDB_txn *txn, size_t bytes, bool commit)
{
    struct backend *be = txn_backend(txn);
    if (!be->room_ok)
        return 0; /* pwrite reports a full disk itself (the commit) */
    if (be->txn_refused)
        return ERR_NOSPC;
    uint64_t at = (uint64_t)txn_next_pgno(txn) * be->page_size;
    uint64_t need = at + WRITE_PAGES_MAX * be->page_size +
                    2 * (uint64_t)bytes + RESERVE_BYTES;
    bool ok = need <= be->ahead_end;
    int rc = 0;
    if (!ok)
        ok = (rc = alloc_to(be, need + ALLOC_CHUNK)) == 0 ||
             need <= be->ahead_end;
    if (!ok && be->credit_on && at + RESERVE_BYTES <= be->ahead_end)
        ok = commit || (bytes <= CREDIT_BYTES_MAX &&
                        be->credit >=
                            be->write_pages + 2 * (uint64_t)bytes /
                                                  be->page_size + 1);
    if (ok) {
        if (!commit)
            charge(be, bytes);
        populate(be, txn_next_pgno(txn));
        return 0;
    }
    /* This txn had to grow the file: the free list could not serve it. */
    low_update(be, rc, 0);
    be->txn_refused = true;
    return ERR_NOSPC;
}

static int room_check(MDB_txn *txn, size_t bytes)
{
    return room_check_at(txn, bytes, false);
}

uint64_t backend_write_room(struct backend_txn *txn)
{
    CHECK(txn != NULL);
    struct backend *be = txn_backend(mtxn(txn));
    if (!be->credit_on)
        return UINT64_MAX; /* room_check allocates what it needs */
    if (be->txn_refused)
        return 0;
    /* LOW_BYTES / 2 past the last page stays for values longer than a
     * page (see low_update): the room to take is above it */
    uint64_t at = (uint64_t)txn_next_pgno(mtxn(txn)) * be->page_size;
    uint64_t head = at + WRITE_PAGES_MAX * be->page_size + RESERVE_BYTES +
                    LOW_BYTES / 2;
    uint64_t room = be->ahead_end > head ? be->ahead_end - head : 0;
    if (at + RESERVE_BYTES <= be->ahead_end)
        room += be->credit * be->page_size;
    return room;
}

uint64_t backend_write_bound(struct backend_txn *txn)
{
    CHECK(txn != NULL);
    struct backend *be = txn_backend(mtxn(txn));
    /* a write passing on the blocks past the next page is charged to
     * the credit as well: twice its pages */
    return 2 * (be->credit_on ? be->write_pages : WRITE_PAGES_MAX) *
           be->page_size;
}

bool backend_space_low(struct backend *be)
{
    CHECK(be != NULL);
    return atomic_load(&be->low);
}

void backend_space_recheck(struct backend *be)
{
    CHECK(be != NULL);
    CHECK(!be->writing);
    if (be->room_ok && !be->no_ahead && atomic_load(&be->low))
        alloc_ahead(be);
}

int backend_write_commit(struct backend_txn *txn)
{
    CHECK(txn != NULL);
    struct backend *be = txn_backend(mtxn(txn));
    CHECK(be->writing);
    be->writing = false;
    if (be->txn_refused || room_check_at(mtxn(txn), 0, true) != 0) {
        /* A write was refused room (its caller may have gone on): none
         * of this txn is committed. */
        be->txn_refused = false;
        mdb_txn_abort(mtxn(txn));
        if (be->journal != NULL)
            backend__journal_end_txn(be->journal, false);
        return ERR_NOSPC;
    }
    if (be->journal != NULL)
        backend__journal_capture(be->journal, mtxn(txn));
    /* Counted before the commit, in the txn that has the final trees (the
     * commit itself only rewrites the changed buckets' records in the
     * names' tree, which keeps its pages). */
    uint64_t used = tree_pages(mtxn(txn)) * be->page_size;
    int64_t t0 = metrics_now_ns();
    int rc = map(mdb_txn_commit(mtxn(txn)));
    metrics_since(&backend_metrics_commit, t0);
    if (be->journal != NULL)
        backend__journal_end_txn(be->journal, rc == 0);
    if (rc == 0) {
        extent_update(be);
        atomic_store(&be->used, used);
    }
    if (rc == 0 && be->room_ok && !be->no_ahead)
        alloc_ahead(be);
    return rc;
}

void backend_write_abort(struct backend_txn *txn)
{
    CHECK(txn != NULL);
    struct backend *be = txn_backend(mtxn(txn));
    CHECK(be->writing);
    be->writing = false;
    be->txn_refused = false;
    mdb_txn_abort(mtxn(txn));
    if (be->journal != NULL)
        backend__journal_end_txn(be->journal, false);
}

int backend_read_begin(struct backend *be, struct backend_txn **out)
{
    CHECK(be != NULL && out != NULL);
    MDB_txn *txn;
    int rc = mdb_txn_begin(be->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return map(rc);
    *out = (struct backend_txn *)txn;
    return 0;
}

void backend_read_end(struct backend_txn *txn)
{
    CHECK(txn != NULL);
    mdb_txn_abort(mtxn(txn));
}

void backend_read_reset(struct backend_txn *txn)
{
    CHECK(txn != NULL);
    mdb_txn_reset(mtxn(txn));
}

int backend_read_renew(struct backend_txn *txn)
{
    CHECK(txn != NULL);
    return map(mdb_txn_renew(mtxn(txn)));
}

int backend_get(struct backend_txn *txn, backend_bucket b, const void *key,
                size_t key_len, struct backend_val *val_out)
{
    CHECK(txn != NULL && val_out != NULL);
    MDB_val k = {key_len, (void *)key}, v;
    int rc = mdb_get(mtxn(txn), b, &k, &v);
    if (rc == 0)
        to_bval(&v, val_out);
    return map(rc);
}

int backend_put(struct backend_txn *txn, backend_bucket b, const void *key,
                size_t key_len, const void *val, size_t val_len)
{
    CHECK(txn != NULL && key_len > 0);
    MDB_val k = {key_len, (void *)key}, v = {val_len, (void *)val};
    int rc = room_check(mtxn(txn), key_len + val_len);
    if (rc == 0)
        rc = map(mdb_put(mtxn(txn), b, &k, &v, 0));
    if (rc == 0)
        jtouch(mtxn(txn), b, key, key_len);
    return rc;
}

int backend_put_reserve(struct backend_txn *txn, backend_bucket b,
                        const void *key, size_t key_len, size_t val_len,
                        void **data_out)
{
    CHECK(txn != NULL && key_len > 0 && data_out != NULL);
    MDB_val k = {key_len, (void *)key}, v = {val_len, NULL};
    int rc = room_check(mtxn(txn), key_len + val_len);
    if (rc != 0)
        return rc;
    rc = mdb_put(mtxn(txn), b, &k, &v, MDB_RESERVE);
    if (rc == 0) {
        *data_out = v.mv_data;
        jtouch(mtxn(txn), b, key, key_len);
    }
    return map(rc);
}

int backend_append_reserve(struct backend_txn *txn, backend_bucket b,
                           const void *key, size_t key_len, size_t val_len,
                           void **data_out)
{
    CHECK(txn != NULL && key_len > 0 && data_out != NULL);
    MDB_val k = {key_len, (void *)key}, v = {val_len, NULL};
    int rc = room_check(mtxn(txn), key_len + val_len);
    if (rc != 0)
        return rc;
    rc = mdb_put(mtxn(txn), b, &k, &v, MDB_RESERVE | MDB_APPEND);
    if (rc == MDB_KEYEXIST) /* not after the last key: an ordinary put */
        return backend_put_reserve(txn, b, key, key_len, val_len, data_out);
    if (rc == 0) {
        *data_out = v.mv_data;
        jtouch(mtxn(txn), b, key, key_len);
    }
    return map(rc);
}

int backend_cursor_put_reserve(struct backend_cursor *c, const void *key,
                               size_t key_len, size_t val_len,
                               void **data_out)
{
    CHECK(c != NULL && key_len > 0 && data_out != NULL);
    MDB_val k = {key_len, (void *)key}, v = {val_len, NULL};
    int rc = room_check(mdb_cursor_txn(mcur(c)), key_len + val_len);
    if (rc != 0)
        return rc;
    rc = mdb_cursor_put(mcur(c), &k, &v, MDB_RESERVE);
    if (rc == 0) {
        *data_out = v.mv_data;
        jtouch(mdb_cursor_txn(mcur(c)), mdb_cursor_dbi(mcur(c)), key,
               key_len);
    }
    return map(rc);
}

int backend_del(struct backend_txn *txn, backend_bucket b, const void *key,
                size_t key_len)
{
    CHECK(txn != NULL && key_len > 0);
    MDB_val k = {key_len, (void *)key};
    int rc = room_check(mtxn(txn), key_len);
    if (rc == 0)
        rc = map(mdb_del(mtxn(txn), b, &k, NULL));
    if (rc == 0)
        jtouch(mtxn(txn), b, key, key_len);
    return rc;
}

int backend_cursor_open(struct backend_txn *txn, backend_bucket b,
                        struct backend_cursor **out)
{
    CHECK(txn != NULL && out != NULL);
    MDB_cursor *c;
    int rc = mdb_cursor_open(mtxn(txn), b, &c);
    if (rc == 0)
        *out = (struct backend_cursor *)c;
    return map(rc);
}

void backend_cursor_close(struct backend_cursor *c)
{
    if (c != NULL)
        mdb_cursor_close(mcur(c));
}

int backend_cursor_renew(struct backend_txn *txn, struct backend_cursor *c)
{
    CHECK(txn != NULL && c != NULL);
    return map(mdb_cursor_renew(mtxn(txn), mcur(c)));
}

static int cursor_move(struct backend_cursor *c, MDB_cursor_op op,
                       MDB_val *k, struct backend_val *key_out,
                       struct backend_val *val_out)
{
    CHECK(c != NULL);
    MDB_val v;
    int rc = mdb_cursor_get(mcur(c), k, &v, op);
    if (rc == 0) {
        to_bval(k, key_out);
        to_bval(&v, val_out);
    }
    return map(rc);
}

int backend_cursor_seek(struct backend_cursor *c, const void *key,
                        size_t key_len, struct backend_val *key_out,
                        struct backend_val *val_out)
{
    CHECK(key_len > 0);
    MDB_val k = {key_len, (void *)key};
    return cursor_move(c, MDB_SET_RANGE, &k, key_out, val_out);
}

int backend_cursor_first(struct backend_cursor *c, struct backend_val *key_out,
                         struct backend_val *val_out)
{
    MDB_val k;
    return cursor_move(c, MDB_FIRST, &k, key_out, val_out);
}

int backend_cursor_last(struct backend_cursor *c, struct backend_val *key_out,
                        struct backend_val *val_out)
{
    MDB_val k;
    return cursor_move(c, MDB_LAST, &k, key_out, val_out);
}

int backend_cursor_next(struct backend_cursor *c, struct backend_val *key_out,
                        struct backend_val *val_out)
{
    MDB_val k;
    return cursor_move(c, MDB_NEXT, &k, key_out, val_out);
}

int backend_cursor_prev(struct backend_cursor *c, struct backend_val *key_out,
                        struct backend_val *val_out)
{
    MDB_val k;
    return cursor_move(c, MDB_PREV, &k, key_out, val_out);
}

/* bucket_empty tells whether c's bucket holds no entry at all. */
static bool bucket_empty(struct backend_cursor *c)
{
    MDB_stat st;
    MDB_cursor *mc = mcur(c);
    CHECK(mc != NULL);
    if (mdb_stat(mdb_cursor_txn(mc), mdb_cursor_dbi(mc), &st) != 0)
        return false; /* keep the caller's error */
    return st.ms_entries == 0;
}

int backend_cursor_current(struct backend_cursor *c,
                           struct backend_val *key_out,
                           struct backend_val *val_out)
{
    MDB_val k;
    int rc = cursor_move(c, MDB_GET_CURRENT, &k, key_out, val_out);
    /* When mdb_cursor_del removes a bucket's last entry, LMDB frees the
     * root page and unpositions the cursor, and MDB_GET_CURRENT then
     * answers EINVAL, not MDB_NOTFOUND as it does after deleting the last
     * entry of a bucket that still holds others.  "Nothing follows" is
     * the same fact either way, so report it the same way: a compaction
     * that drops every version of every key must not fail its batch. */
    if (rc == ERR_INVAL && bucket_empty(c))
        return ERR_NOTFOUND;
    return rc;
}

int backend_cursor_del(struct backend_cursor *c)
{
    CHECK(c != NULL);
    MDB_txn *txn = mdb_cursor_txn(mcur(c));
    int rc = room_check(txn, 0);
    if (rc != 0)
        return rc;
    /* The journal needs the key, which the delete takes away: note it
     * first (a note of a key the delete then keeps costs nothing). */
    MDB_val k, v;
    if (txn_backend(txn)->journal != NULL &&
        mdb_cursor_get(mcur(c), &k, &v, MDB_GET_CURRENT) == 0)
        jtouch(txn, mdb_cursor_dbi(mcur(c)), k.mv_data, k.mv_size);
    return map(mdb_cursor_del(mcur(c), 0));
}

size_t backend_key_max(const struct backend *be)
{
    CHECK(be != NULL);
    return be->key_max;
}

/* tree_pages counts the pages of the store's trees as txn sees them:
 * LMDB's two meta pages, the tree of bucket names (dbi 1) and every
 * bucket this handle opened (a bucket in the file that no module opens is
 * not counted).  Not the free list (dbi 0): neither its free pages nor
 * the pages of its own records, whose number follows how long pins held
 * freed pages, not the data.  LMDB keeps each tree's page counts in its
 * record as pages are allocated and freed, so this is a dozen reads.  */
static uint64_t tree_pages(MDB_txn *txn)
{
    uint64_t pages = META_PAGES;
    for (MDB_dbi dbi = 1; dbi < DBI_SLOTS; dbi++) {
        MDB_stat st;
        if (mdb_stat(txn, dbi, &st) != 0)
            continue; /* a slot no bucket was opened in */
        pages += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
    }
    return pages;
}

int backend_freed_since(struct backend *be, uint64_t after_txnid,
                        uint64_t *last_txnid_out, uint64_t *pages_out)
{
    CHECK(be != NULL && last_txnid_out != NULL && pages_out != NULL);
    *last_txnid_out = after_txnid;
    *pages_out = 0;
    MDB_txn *txn;
    int rc = mdb_txn_begin(be->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return map(rc);
    rc = free_records(txn, after_txnid + 1, UINT64_MAX, last_txnid_out,
                      pages_out);
    mdb_txn_abort(txn);
    return rc;
}

uint64_t backend_page_bytes(const struct backend *be)
{
    CHECK(be != NULL);
    return be->page_size;
}

int backend_size(struct backend *be, uint64_t *total_bytes_out,
                 uint64_t *in_use_bytes_out)
{
    CHECK(be != NULL);
    MDB_txn *txn;
    int rc = mdb_txn_begin(be->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return map(rc);
    MDB_envinfo info;
    uint64_t pages = tree_pages(txn);
    rc = mdb_env_info(be->env, &info);
    mdb_txn_abort(txn);
    if (rc != 0)
        return map(rc);
    uint64_t total = ((uint64_t)info.me_last_pgno + 1) * be->page_size;
    uint64_t used = pages * be->page_size;
    CHECK(used <= total); /* the extent read after the txn only grew */
    if (total_bytes_out != NULL)
        *total_bytes_out = total;
    if (in_use_bytes_out != NULL)
        *in_use_bytes_out = used;
    return 0;
}

uint64_t backend_used_bytes(struct backend *be)
{
    CHECK(be != NULL);
    return atomic_load(&be->used);
}

/* extent_update reads, after a commit (on the writer's thread), how far
 * the store's pages reach: for alloc_ahead and backend_file_bytes. */
static void extent_update(struct backend *be)
{
    MDB_envinfo info;
    if (mdb_env_info(be->env, &info) != 0)
        return;
    be->map_size = info.me_mapsize;
    uint64_t pages = (uint64_t)info.me_last_pgno + 1;
    atomic_store(&be->extent, pages * be->page_size);
    atomic_store(&be->last_txnid, (uint64_t)info.me_last_txnid);
}

uint64_t backend_txnid_last(struct backend *be)
{
    CHECK(be != NULL);
    return atomic_load(&be->last_txnid);
}

uint64_t backend_map_bytes(struct backend *be)
{
    CHECK(be != NULL);
    MDB_envinfo info;
    if (mdb_env_info(be->env, &info) != 0)
        return 0;
    return info.me_mapsize;
}

bool backend_write_map(const struct backend *be)
{
    CHECK(be != NULL);
    return be->write_map;
}

uint64_t backend_file_bytes(struct backend *be)
{
    CHECK(be != NULL);
    return atomic_load(&be->extent);
}

int backend_sync(struct backend *be)
{
    CHECK(be != NULL);
    atomic_fetch_add(&be->unmaps, 1); /* msync write-protects the map */
    return map(mdb_env_sync(be->env, 1));
}

#define SYNC_PACE_BYTES ((uint64_t)256 << 10)

int backend_sync_paced(struct backend *be)
{
    CHECK(be != NULL);
    if (!be->write_map) {
        uint64_t end = atomic_load(&be->extent);
        for (uint64_t off = 0; off < end; off += SYNC_PACE_BYTES)
            if (sync_file_range(be->fd, (off64_t)off, SYNC_PACE_BYTES,
                                SYNC_FILE_RANGE_WAIT_BEFORE |
                                    SYNC_FILE_RANGE_WRITE |
                                    SYNC_FILE_RANGE_WAIT_AFTER) != 0)
                break; /* the sync below says what failed */
    }
    return backend_sync(be);
}

/* A copy reads the whole store through the map, faster than any clock
 * could trim it (8 GB/s here), and each page it faults in brings up to 15
 * neighbours with it.  So LMDB writes the copy into a pipe, and a relay
 * thread moves it to the file and trims the map every COPY_TRIM_BYTES:
 * LMDB's reader cannot run further ahead of the relay than the pipe and
 * its own two 1 MiB buffers.  A trim costs ~30 µs. */
#define COPY_TRIM_BYTES (1u << 20)
#define COPY_CHUNK (64u << 10) /* a pipe holds 64 KiB */
/* The copy's writeback, paced: left to the kernel, a 1 GiB copy stayed
 * dirty in the page cache (24 GiB of RAM, the default dirty ratios) until
 * its fdatasync wrote it all at once, and the WAL fsyncs queued behind
 * that burst held puts 400-700 ms (session 23).  So every COPY_PACE_BYTES
 * of a regular file are sent to the disk as they are written, and the
 * relay waits for the chunk before them: at most two chunks are dirty or
 * in flight, and a WAL fsync waits behind one chunk at most. */
#define COPY_PACE_BYTES ((uint64_t)4 << 20)

struct copy_relay {
    struct backend *be; /* whose map to trim */
    int in;             /* the pipe's read end */
    int out;            /* the destination */
    int err;            /* 0 or the first error (ERR_*) */
    bool pace;          /* out is a regular file: pace its writeback */
    uint64_t off;       /* bytes written to out */
    uint64_t sent;      /* of them, sent to the disk (a chunk boundary) */
};

/* relay_pace starts the writeback of the chunk just completed and waits
 * for the one before it.  Errors are the final fdatasync's to report. */
static void relay_pace(struct copy_relay *r)
{
    if (!r->pace || r->off - r->sent < COPY_PACE_BYTES)
        return;
    uint64_t end = r->off - (r->off - r->sent) % COPY_PACE_BYTES;
    if (sync_file_range(r->out, (off64_t)r->sent, (off64_t)(end - r->sent),
                        SYNC_FILE_RANGE_WRITE) != 0)
        r->pace = false;
    if (r->pace && r->sent >= COPY_PACE_BYTES &&
        sync_file_range(r->out, (off64_t)(r->sent - COPY_PACE_BYTES),
                        (off64_t)COPY_PACE_BYTES,
                        SYNC_FILE_RANGE_WAIT_BEFORE |
                            SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER) != 0)
        r->pace = false;
    r->sent = end;
}

/* relay_main moves everything from the pipe to the file; after a write
 * error it keeps draining (LMDB must not block) and keeps the error. */
static void *relay_main(void *arg)
{
    struct copy_relay *r = arg;
    char buf[COPY_CHUNK];
    size_t since_trim = 0;
    for (;;) {
        ssize_t n = read(r->in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0 && r->err == 0)
                r->err = err_from_errno(errno);
            break;
        }
        if (r->err == 0)
            r->err = fs_write_all(r->out, buf, (size_t)n);
        r->off += (uint64_t)n;
        relay_pace(r);
        since_trim += (size_t)n;
        if (since_trim >= COPY_TRIM_BYTES) {
            backend_rss_trim(r->be);
            since_trim = 0;
        }
    }
    return NULL;
}

int backend_copy_fd(struct backend *be, int fd, bool compact)
{
    CHECK(be != NULL && fd >= 0);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return err_from_errno(errno);
    struct stat st;
    struct copy_relay r = {.be = be, .in = p[0], .out = fd,
                           .pace = fstat(fd, &st) == 0 &&
                                   S_ISREG(st.st_mode)};
    pthread_t t;
    if (pthread_create(&t, NULL, relay_main, &r) != 0) {
        close(p[0]);
        close(p[1]);
        return ERR_NOMEM;
    }
    int rc = map(mdb_env_copyfd2(be->env, p[1], compact ? MDB_CP_COMPACT : 0));
    close(p[1]); /* the relay sees the end */
    pthread_join(t, NULL);
    close(p[0]);
    backend_rss_trim(be);
    if (rc == 0)
        rc = r.err;
    return rc;
}

void backend_rss_trim(struct backend *be)
{
    CHECK(be != NULL);
    if (be->map_len == 0)
        return;
    /* Errors are harmless: the mappings just stay. */
    (void)madvise(be->map_addr, be->map_len, MADV_DONTNEED);
    atomic_fetch_add(&be->unmaps, 1);
}
