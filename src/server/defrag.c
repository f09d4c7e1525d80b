/*
 * defrag.c - online defragmentation of the member's store
 * (Maintenance.Defragment, etcdctl defrag): the store's free pages go
 * back to the file system while reads and writes go on.
 *
 * etcd stops its member for the whole defragmentation (bbolt rewrites the
 * db with every request waiting: etcd #9222).  Here the copy runs beside
 * the writer, and requests wait only for the switch-over:
 *   1. Checks: the disk must have room for the copy (the live data plus
 *      the room the store allocates ahead), else ERR_DEFRAG_NO_DISK.
 *   2. With apply_mu (no write txn open), the backend's journal starts
 *      (backend.h "Journal": each commit records its written keys' final
 *      values) and the store gate is entered, so that no store swap (a
 *      snapshot install) closes the env under the copy.
 *   3. LMDB's compacting copy (backend_copy_fd, its own read txn: LMDB
 *      readers never block the writer) writes <member>/db.defrag/data.mdb;
 *      fdatasync.  The apply side keeps applying meanwhile.
 *   4. Catch-up rounds: the copy is opened as an env and the journal's
 *      records (what was committed since step 2) are replayed into it
 *      (no sync: a round must be quick, so that little piles up for the
 *      next), until a round replays < DEFRAG_ROUND_SMALL; the copy is
 *      presized and synced, and rounds run again.  Then db/prev.mdb is
 *      made a second name of the store's file, durably (prev_link).
 *   5. Switch-over, with the locks a snapshot install takes (snap
 *      export_mu so that no export holds the gate, raft_mu, apply_mu, the
 *      gate closed): the last records are replayed (what was committed
 *      during the last round), the journal stops, the old store's pin is
 *      dropped in memory, its lock file unlinked, the copy renamed over
 *      db/data.mdb and the store reopened on it.  No fsync and no close:
 *      this is the only pause, a few ms of CPU (logged with its parts).
 *   6. After it: the copy's env and the old store's env close (their
 *      unmaps and ext4's release of a written file cost up to hundreds of
 *      ms), the db directory is fsynced (server__defrag_dir_settle), and
 *      the raft thread asks for the new store's pin (it has none:
 *      server__pin_grown); once that pin is durable, prev.mdb goes
 *      (server__defrag_pinned) and the answer is sent.
 * Crash safety.  kill -9 at any step: before the rename the store is the
 * old file, untouched, and db.defrag is a leftover that the next start
 * removes (server__defrag_cleanup); the rename is atomic, and the copy it
 * moves holds the same consistent index and data as the store it
 * replaces, so after it the WAL replays from that index as it would have.
 * Power loss: the store is distrusted and rebuilt from the newest pin
 * file plus the WAL after it.  Until the new store's pin is durable that
 * is the OLD store's pin, whose file survives as prev.mdb (linked and
 * fsynced before the pause, found by server__pin_restore in the set-aside
 * dir); the WAL is truncated only behind a durable pin, so it still holds
 * what followed.  A pin file never names the new file before the rename
 * is durable: every pin file write settles the db directory first.
 *
 * Requests: one defragmentation runs at a time, on its own thread
 * (cetcd-defrag).  A request that arrives while one runs is answered
 * after the NEXT one (which starts once the running one ends): its
 * answer then covers every page freed before it asked.  At most
 * SERVER_DEFRAG_WAITERS_MAX requests wait.
 *
 * Test knobs (environment, read at each defragmentation):
 *   CETCD_TEST_CRASH_AT=<step>   SIGKILL this process at the named step
 *                                (server__crash_point: the defrag-* steps
 *                                below; store.c has the installs' ones);
 *   CETCD_TEST_DEFRAG_PAUSE_MS=n sleep n ms between the copy and the
 *                                catch-up, so that a small store sees
 *                                writes pile up in the journal.
 */
#define _GNU_SOURCE /* fallocate */
#include "util/check.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "server/boot_guard.h"
#include "server/server_int.h"
#include "server/snap_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

/* Journal bytes that may wait for a replay (backend_journal_start). */
#define DEFRAG_JOURNAL_MAX ((size_t)256 << 20)
/* A catch-up round that replayed less than this ends the rounds: what is
 * committed during that round (and while the locks are taken) is
 * replayed with requests paused.  Rounds do not sync the copy (the new
 * store's pin does, after the pause), so a small round takes a few ms. */
#define DEFRAG_ROUND_SMALL ((size_t)64 << 10)
#define DEFRAG_ROUNDS_MAX 50
/* Free disk kept beyond the copy's size: the room the reopened store
 * allocates ahead (backend.c AHEAD_BYTES) and a margin. */
#define DEFRAG_DISK_MARGIN ((uint64_t)80 << 20)
/* How long a defragmentation waits for the new store's pin (the raft
 * thread asks for it at its next tick). */
#define DEFRAG_PIN_WAIT_MS 10000

/* One Defragment request waiting for its answer. */
struct server_defrag_waiter {
    struct server_defrag_waiter *next; /* the next request */
    server_defrag_fn done;             /* its answer */
    void *arg;                         /* done's argument */
};

void server__crash_point(const char *step)
{
    const char *at = getenv("CETCD_TEST_CRASH_AT");
    if (at == NULL || strcmp(at, step) != 0)
        return;
    log_warn("etcdserver", "CETCD_TEST_CRASH_AT=%s: killing this process",
             step);
    raise(SIGKILL);
}

/* The disk must hold the copy: the data in use plus DEFRAG_DISK_MARGIN. */
static int space_check(struct server *s)
{
    uint64_t in_use = 0;
    server__store_enter(s);
    int rc = backend_size(s->be, NULL, &in_use);
    server__store_leave(s);
    struct statvfs v;
    if (rc == 0 && statvfs(s->member_dir, &v) != 0)
        rc = err_from_errno(errno);
    if (rc != 0)
        return rc;
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (avail >= in_use + DEFRAG_DISK_MARGIN)
        return 0;
    log_warn("etcdserver", "cannot defragment: the copy needs %" PRIu64
             " bytes of free disk, %" PRIu64 " are free", in_use +
             DEFRAG_DISK_MARGIN, avail);
    return ERR_DEFRAG_NO_DISK;
}

/* Step 2: the journal starts with the writer excluded; the caller is
 * then inside the gate and holds the store's generation in *gen. */
static int journal_begin(struct server *s, uint64_t *gen)
{
    pthread_mutex_lock(&s->apply_mu);
    server__store_enter(s);
    int rc = backend_journal_start(s->be, DEFRAG_JOURNAL_MAX);
    pthread_mutex_lock(&s->snap.mu);
    *gen = s->snap.pin_gen; /* bumped by a store swap */
    pthread_mutex_unlock(&s->snap.mu);
    pthread_mutex_unlock(&s->apply_mu);
    if (rc != 0)
        server__store_leave(s);
    return rc;
}

/* Stops the journal of a defragmentation that failed (outside the gate:
 * apply_mu comes first in the lock order).  A store swap since the start
 * (generation gen) has closed the journal with its store. */
static void journal_abort(struct server *s, uint64_t gen)
{
    pthread_mutex_lock(&s->apply_mu);
    pthread_mutex_lock(&s->snap.mu);
    bool same = s->snap.pin_gen == gen;
    pthread_mutex_unlock(&s->snap.mu);
    if (same)
        backend_journal_stop(s->be);
    pthread_mutex_unlock(&s->apply_mu);
}

/* Before the switch-over, the copy's file gets the size and the blocks
 * the reopened store gives it (LMDB sizes a write_map file to the map;
 * backend.c allocates backend_ahead_bytes ahead, past the file's size
 * without write_map), synced: that metadata then costs no fsync while
 * requests wait.  Failures only move that cost back. */
static void presize(struct server *s, struct backend *dst, const char *data)
{
    bool in_map = backend_write_map(s->be);
    uint64_t map = backend_map_bytes(s->be), end = backend_file_bytes(dst);
    int fd = open(data, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (in_map && map > 0 && fstat(fd, &st) == 0 &&
        (uint64_t)st.st_size < map)
        (void)ftruncate(fd, (off_t)map);
    (void)fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)end,
                    (off_t)backend_ahead_bytes(end));
    (void)fdatasync(fd);
    close(fd);
}

/* Step 3: the compacted copy into data (created), fsynced. */
static int copy_store(struct server *s, const char *data)
{
    int fd = open(data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_from_errno(errno);
    server__crash_point("defrag-copy");
    int rc = backend_copy_fd(s->be, fd, true);
    if (rc == 0 && fdatasync(fd) != 0)
        rc = err_from_errno(errno);
    close(fd);
    server__crash_point("defrag-copied");
    const char *pause = getenv("CETCD_TEST_DEFRAG_PAUSE_MS");
    if (rc == 0 && pause != NULL) {
        long ms = strtol(pause, NULL, 10);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return rc;
}

/* Step 4: replays the journal into dst until a round is small. */
static int catch_up(struct server *s, struct backend *dst, size_t *total)
{
    for (int round = 0; round < DEFRAG_ROUNDS_MAX; round++) {
        if (atomic_load(&s->stopping))
            return ERR_STOPPED;
        size_t n = 0;
        int rc = backend_journal_replay(s->be, dst, &n);
        if (rc != 0)
            return rc;
        *total += n;
        server__crash_point(round == 0 ? "defrag-round0" : "defrag-round");
        if (n < DEFRAG_ROUND_SMALL)
            return 0;
    }
    return 0;
}

/* Where the switch-over's pause goes, in ns (the log line shows them). */
struct defrag_pause {
    uint64_t locks;   /* raft_mu, then apply_mu (the apply batch ends) */
    size_t bytes;     /* the last records' bytes */
    uint64_t replay;  /* the last records into the copy, the copy closed */
    uint64_t close;   /* the old store's pin dropped, its lock file gone */
    uint64_t rename;  /* the copy renamed over db/data.mdb */
    uint64_t reopen;  /* the store, members, leases... opened on it */
    uint64_t reopen_cpu; /* of reopen: CPU */
    uint64_t members; /* of reopen: the members table's reload */
    uint64_t old_close; /* after the pause: the old store closed */
    uint64_t cpu;     /* the pause's CPU time (this thread's) */
    uint64_t dst_close; /* after the pause: the copy's env closed */
};

/* This thread's CPU time in ns: the pause's wall time on a loaded
 * machine is mostly waiting for a CPU; the log shows both. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Nanoseconds since *t, which moves to now. */
static uint64_t lap(uint64_t *t)
{
    uint64_t now = server__now_ns(), d = now - *t;
    *t = now;
    return d;
}

/* The store a swap replaced: closed once requests run again (unmapping
 * a large map costs tens of ms). */
struct defrag_old {
    struct mvcc_store *mvcc;
    struct backend *be;
};

/* Step 5, the pointer swap: the old store is set aside (its pin ends in
 * memory; its pin FILE stays valid, as db/prev.mdb keeps its pages), the
 * copy takes its name, the store reopens on it.  The old env stays open
 * until the gate opens: it keeps its lock file, unlinked here, and the
 * new env gets a new one (LMDB forbids opening one lock file twice in a
 * process: closing either would drop the other's fcntl locks; two inodes
 * share nothing).  No fsync: the directory is synced once the gate is
 * open (server__defrag_dir_settle), and nothing needs it durable before
 * then (a power loss meanwhile restores the old pin from prev.mdb; a
 * kill -9 sees the rename either way). */
static int swap_store(struct server *s, const char *data,
                      struct defrag_pause *ph, uint64_t *t,
                      struct defrag_old *old)
{
    char dir[SNAP_PATH_MAX], dst[SNAP_PATH_MAX + 16], lock[SNAP_PATH_MAX + 16];
    server__db_dir(s, dir, sizeof dir);
    server__pathf(dst, sizeof dst, "%s/data.mdb", dir);
    server__pathf(lock, sizeof lock, "%s/lock.mdb", dir);
    server__pin_drop(s);
    old->mvcc = s->mvcc;
    old->be = s->be;
    s->defrag.replaced = old->mvcc;
    s->mvcc = NULL;
    s->be = NULL;
    int rc = unlink(lock) == 0 || errno == ENOENT ? 0 : err_from_errno(errno);
    ph->close = lap(t);
    if (rc != 0)
        return rc;
    atomic_store(&s->defrag.dir_unsynced, true); /* before any new pin */
    rc = rename(data, dst) == 0 ? 0 : err_from_errno(errno);
    server__crash_point("defrag-renamed");
    ph->rename = lap(t);
    uint64_t c = cpu_ns();
    if (rc == 0)
        rc = boot_guard_mark(dir, false); /* already dirty: no write */
    if (rc == 0)
        rc = server__store_open(s, dir);
    uint64_t m = server__now_ns();
    if (rc == 0 && s->ms != NULL) /* its buckets, on the new env */
        rc = server__members_reload(s, false);
    ph->members = server__now_ns() - m;
    ph->reopen_cpu = cpu_ns() - c;
    server__crash_point("defrag-reopened");
    ph->reopen = lap(t);
    return rc;
}

/* Step 5, all locks held and the gate closed: the last records, then the
 * copy replaces the store.  dst stays open (its caller closes it once
 * requests run again: closing the last writable fd of the file waits for
 * its writeback in ext4, 800 ms once here); no txn touches it again, and
 * its lock file is its own (db.defrag/lock.mdb). */
static int swap_in(struct server *s, struct backend *dst, const char *data,
                   size_t *total, struct defrag_pause *ph, uint64_t *t,
                   struct defrag_old *old)
{
    size_t n = 0;
    int rc = backend_journal_replay(s->be, dst, &n);
    *total += n;
    backend_journal_stop(s->be);
    server__crash_point("defrag-replayed");
    ph->replay = lap(t);
    ph->bytes = n;
    if (rc != 0)
        return rc;
    server__crash_point("defrag-swap");
    s->defrag.swapping = true;
    rc = swap_store(s, data, ph, t, old);
    s->defrag.swapping = false;
    s->defrag.replaced = NULL;
    if (rc != 0) {
        /* The old store is closed and the copy may be in its place: only
         * a restart (which trusts whichever file is there, both are
         * whole, and replays the WAL) gets a store back. */
        log_error("etcdserver", "defragmentation could not reopen the "
                  "store: %s; stopping the member", err_str(rc));
        abort();
    }
    server__crash_point("defrag-swapped");
    return 0;
}

/* Step 5: takes the locks, checks that the store is still the one the
 * journal ran on, swaps, and says how long requests waited. */
static int switch_over(struct server *s, struct backend *dst,
                       const char *data, uint64_t gen, size_t *total,
                       uint64_t *pause_us, struct defrag_pause *ph)
{
    pthread_mutex_lock(&s->snap.export_mu);
    /* Requests wait from here: the raft thread stops once raft_mu is
     * ours, while the apply thread ends its batch. */
    uint64_t t0 = server__now_ns(), t = t0, c0 = cpu_ns();
    pthread_mutex_lock(&s->node.raft_mu);
    pthread_mutex_lock(&s->apply_mu);
    ph->locks = lap(&t);
    struct defrag_old old = {NULL, NULL};
    pthread_mutex_lock(&s->snap.mu);
    bool same = s->snap.pin_gen == gen;
    pthread_mutex_unlock(&s->snap.mu);
    int rc;
    if (!same || atomic_load(&s->stopping)) {
        /* The journal ran on a store that is gone (closed with it). */
        rc = same ? ERR_STOPPED : ERR_DEFRAG_STORE_REPLACED;
        if (same)
            backend_journal_stop(s->be);
    } else {
        server__store_gate_close(s);
        rc = swap_in(s, dst, data, total, ph, &t, &old);
        server__store_gate_open(s);
    }
    *pause_us = (server__now_ns() - t0) / 1000u;
    ph->cpu = cpu_ns() - c0;
    pthread_mutex_unlock(&s->apply_mu);
    pthread_mutex_unlock(&s->node.raft_mu);
    pthread_mutex_unlock(&s->snap.export_mu);
    backend_close(dst);
    ph->dst_close = lap(&t);
    mvcc_store_close(old.mvcc); /* nobody can reach them now */
    backend_close(old.be);
    ph->old_close = lap(&t);
    return rc;
}

/* --- db/prev.mdb: the old pin stays valid across the swap ------------------ */

static void prev_path(const struct server *s, char *buf, size_t cap)
{
    server__pathf(buf, cap, "%s/db/prev.mdb", s->member_dir);
}

/* Before the switch-over, inside the gate: db/prev.mdb becomes a second
 * name of the store's file, durably.  The store's pin file then names a
 * file a power loss keeps (the boot sets db/ aside with prev.mdb in it,
 * and server__pin_restore looks there) until the new store's pin is
 * durable: the switch-over needs no fsync of the pin files. */
static int prev_link(struct server *s)
{
    char cur[SNAP_PATH_MAX + 16], prev[SNAP_PATH_MAX + 16], dir[SNAP_PATH_MAX];
    server__pathf(cur, sizeof cur, "%s/db/data.mdb", s->member_dir);
    prev_path(s, prev, sizeof prev);
    server__db_dir(s, dir, sizeof dir);
    CHECK(!atomic_load(&s->defrag.prev_linked));
    if (unlink(prev) != 0 && errno != ENOENT) /* a link to this store */
        return err_from_errno(errno);
    if (link(cur, prev) != 0)
        return err_from_errno(errno);
    atomic_store(&s->defrag.prev_linked, true);
    int rc = fs_fsync_dir(dir);
    server__crash_point("defrag-linked");
    return rc;
}

/* A defragmentation that failed before its swap: prev.mdb goes (a name
 * of the store's own file, or of a store a snapshot install replaced, whose
 * pin file the install removed). */
static void prev_unlink(struct server *s)
{
    char prev[SNAP_PATH_MAX + 16];
    prev_path(s, prev, sizeof prev);
    if (atomic_load(&s->defrag.prev_linked))
        unlink(prev);
    atomic_store(&s->defrag.prev_linked, false);
}

/* Waits (up to DEFRAG_PIN_WAIT_MS) until the store that replaced
 * prev.mdb is pinned: the raft thread asks the snap worker for a pin as
 * soon as the store has none (server__pin_grown), and its promotion
 * removes prev.mdb. */
static bool prev_wait(struct server *s)
{
    for (int ms = 0; ms < DEFRAG_PIN_WAIT_MS; ms += 5) {
        if (!atomic_load(&s->defrag.prev_linked))
            return true;
        if (atomic_load(&s->stopping))
            return false;
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    return !atomic_load(&s->defrag.prev_linked);
}

int server__defrag_dir_settle(struct server *s)
{
    if (!atomic_load(&s->defrag.dir_unsynced))
        return 0;
    char dir[SNAP_PATH_MAX];
    server__db_dir(s, dir, sizeof dir);
    pthread_mutex_lock(&s->defrag.mu); /* a pin waits for this fsync */
    int rc = 0;
    if (atomic_load(&s->defrag.dir_unsynced)) {
        rc = fs_fsync_dir(dir);
        if (rc == 0)
            atomic_store(&s->defrag.dir_unsynced, false);
    }
    pthread_mutex_unlock(&s->defrag.mu);
    return rc;
}

void server__defrag_pinned(struct server *s)
{
    if (!atomic_load(&s->defrag.prev_linked))
        return;
    char prev[SNAP_PATH_MAX + 16];
    prev_path(s, prev, sizeof prev);
    uint64_t dev = 0, ino = 0;
    struct stat st;
    if (stat(prev, &st) == 0 &&
        (backend_file_id(s->be, &dev, &ino) != 0 ||
         ((uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino)))
        return; /* the pinned store's own file: not swapped yet */
    unlink(prev); /* frees the replaced store's blocks */
    atomic_store(&s->defrag.prev_linked, false);
}

/* Steps 3 and 4, inside the gate; *dst_out is the caught-up copy. */
static int copy_and_catch_up(struct server *s, const char *tmp,
                             const char *data, size_t *total,
                             struct backend **dst_out)
{
    int rc = copy_store(s, data);
    struct backend_options bo = {.no_fsync = true, .no_ahead = true};
    if (rc == 0)
        rc = backend_open(tmp, &bo, dst_out);
    if (rc == 0) {
        rc = catch_up(s, *dst_out, total);
        if (rc == 0) {
            presize(s, *dst_out, data);
            rc = catch_up(s, *dst_out, total); /* what came meanwhile */
        }
        if (rc != 0) {
            backend_close(*dst_out);
            *dst_out = NULL;
        }
    }
    return rc;
}

/* Start-up: prev.mdb left by a kill -9 after its link.  Another name of
 * the store's own file goes; the replaced store's file stays until the
 * start-up pin of the store is durable (server__defrag_pinned), the db
 * directory synced before that pin (the rename may not be durable). */
static void prev_cleanup(struct server *s)
{
    char cur[SNAP_PATH_MAX + 16], prev[SNAP_PATH_MAX + 16];
    server__pathf(cur, sizeof cur, "%s/db/data.mdb", s->member_dir);
    prev_path(s, prev, sizeof prev);
    struct stat a, b;
    if (lstat(prev, &b) != 0)
        return;
    if (stat(cur, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        unlink(prev);
        return;
    }
    atomic_store(&s->defrag.prev_linked, true);
    atomic_store(&s->defrag.dir_unsynced, true);
}

void server__defrag_cleanup(struct server *s)
{
    prev_cleanup(s);
    char tmp[SNAP_PATH_MAX];
    server__pathf(tmp, sizeof tmp, "%s/db.defrag", s->member_dir);
    struct stat st;
    if (stat(tmp, &st) != 0)
        return;
    log_info("etcdserver", "removing %s, left by a defragmentation that "
             "did not finish", tmp);
    server__snap_rm_staging(tmp);
}

/* After the pause: the rename's directory fsync, then the new store's
 * pin (the snap worker's), which removes prev.mdb.  Slow steps that
 * requests do not wait for; the Defragment answer waits for them so
 * that it means the space is back. */
static void settle(struct server *s, uint64_t *dir_ms, uint64_t *pin_ms)
{
    uint64_t t = server__now_ns();
    int rc = server__defrag_dir_settle(s);
    if (rc != 0) /* the pin retries it before it writes a pin file */
        log_warn("etcdserver", "cannot fsync the store's directory after "
                 "defragmenting: %s", err_str(rc));
    server__crash_point("defrag-dir-synced");
    *dir_ms = lap(&t) / 1000000u;
    if (!prev_wait(s) && !atomic_load(&s->stopping))
        log_warn("etcdserver", "the defragmented store is not pinned after "
                 "%d ms; the replaced store's file stays until it is",
                 DEFRAG_PIN_WAIT_MS);
    else
        server__crash_point("defrag-pinned");
    *pin_ms = lap(&t) / 1000000u;
}

/* One whole defragmentation. */
static int defrag_run(struct server *s)
{
    char tmp[SNAP_PATH_MAX], data[SNAP_PATH_MAX + 16];
    server__pathf(tmp, sizeof tmp, "%s/db.defrag", s->member_dir);
    server__pathf(data, sizeof data, "%s/data.mdb", tmp);
    uint64_t t0 = server__now_ns(), before = 0, after = 0, gen = 0;
    if (!prev_wait(s)) /* the last one's store must be pinned first */
        return ERR_DEFRAG_PIN_PENDING;
    server__snap_rm_staging(tmp);
    server__store_enter(s);
    before = backend_file_bytes(s->be);
    server__store_leave(s);
    int rc = space_check(s);
    if (rc == 0 && mkdir(tmp, 0700) != 0)
        rc = err_from_errno(errno);
    if (rc == 0)
        rc = journal_begin(s, &gen);
    if (rc != 0) {
        server__snap_rm_staging(tmp);
        return rc;
    }
    struct backend *dst = NULL;
    size_t replayed = 0;
    uint64_t pause_us = 0, dir_ms = 0, pin_ms = 0;
    struct defrag_pause ph = {0};
    rc = copy_and_catch_up(s, tmp, data, &replayed, &dst);
    if (rc == 0)
        rc = prev_link(s);
    if (rc != 0 && dst != NULL) {
        backend_close(dst);
        dst = NULL;
    }
    server__store_leave(s);
    if (rc != 0)
        journal_abort(s, gen);
    if (rc == 0)
        rc = switch_over(s, dst, data, gen, &replayed, &pause_us, &ph);
    server__snap_rm_staging(tmp); /* lock.mdb (data.mdb moved) */
    if (rc != 0) {
        prev_unlink(s);
        return rc;
    }
    settle(s, &dir_ms, &pin_ms);
    server__store_enter(s);
    after = backend_file_bytes(s->be);
    server__store_leave(s);
    log_info("etcdserver", "finished defragmenting the storage backend: "
             "%" PRIu64 " -> %" PRIu64 " bytes, %zu journal bytes caught "
             "up, took %" PRIu64 " ms, requests paused %" PRIu64 " us "
             "(CPU %" PRIu64 " us; locks %" PRIu64 " us, last replay of %zu "
             "bytes %" PRIu64 " us, "
             "old store set aside %"
             PRIu64 " us, rename %" PRIu64 " us, reopen %" PRIu64 " us "
             "(CPU %" PRIu64 " us, members %" PRIu64 " us)); "
             "then copy's env closed %" PRIu64 " ms, old store closed %" PRIu64
             " ms, directory fsync %"
             PRIu64 " ms, new pin %" PRIu64 " ms",
             before, after, replayed, (server__now_ns() - t0) / 1000000u,
             pause_us, ph.cpu / 1000u, ph.locks / 1000u, ph.bytes,
             ph.replay / 1000u,
             ph.close / 1000u, ph.rename / 1000u, ph.reopen / 1000u,
             ph.reopen_cpu / 1000u, ph.members / 1000u,
             ph.dst_close / 1000000u, ph.old_close / 1000000u,
             dir_ms, pin_ms);
    return 0;
}

/* Answers every waiter of list with err. */
static void answer(struct server_defrag_waiter *list, int err)
{
    while (list != NULL) {
        struct server_defrag_waiter *next = list->next;
        list->done(list->arg, err);
        mem_free(list);
        list = next;
    }
}

/* cetcd-defrag: runs defragmentations while requests wait for one. */
static void *defrag_main(void *arg)
{
    struct server *s = arg;
    struct server_defrag *d = &s->defrag;
    pthread_mutex_lock(&d->mu);
    while (d->next != NULL && !atomic_load(&s->stopping)) {
        struct server_defrag_waiter *cur = d->next;
        d->next = NULL;
        d->n_next = 0;
        pthread_mutex_unlock(&d->mu);
        log_info("etcdserver", "starting to defragment the storage backend");
        int rc = defrag_run(s);
        if (rc != 0)
            log_error("etcdserver", "failed to defragment the storage "
                      "backend (%s)", err_str(rc));
        answer(cur, rc);
        pthread_mutex_lock(&d->mu);
    }
    d->running = false;
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

void server_defrag(struct server *s, server_defrag_fn done, void *arg)
{
    CHECK(s != NULL && done != NULL);
    struct server_defrag *d = &s->defrag;
    struct server_defrag_waiter *w = mem_malloc(sizeof *w);
    if (w == NULL) {
        done(arg, ERR_NOMEM);
        return;
    }
    *w = (struct server_defrag_waiter){NULL, done, arg};
    int rc = 0;
    pthread_mutex_lock(&d->mu);
    if (atomic_load(&s->stopping) || !s->threads_started)
        rc = ERR_STOPPED;
    else if (d->n_next >= SERVER_DEFRAG_WAITERS_MAX)
        rc = ERR_TOO_MANY_REQUESTS;
    if (rc == 0) {
        w->next = d->next; /* the order of answers does not matter */
        d->next = w;
        d->n_next++;
    }
    if (rc == 0 && !d->running) {
        if (d->live) /* the last worker has exited (running is false) */
            pthread_join(d->thread, NULL);
        d->live = pthread_create(&d->thread, NULL, defrag_main, s) == 0;
        d->running = d->live;
        if (!d->live) {
            d->next = w->next;
            d->n_next--;
            rc = ERR_NOMEM;
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (rc != 0) {
        mem_free(w);
        done(arg, rc);
    }
}

void server__defrag_init(struct server *s)
{
    memset(&s->defrag, 0, sizeof s->defrag);
    pthread_mutex_init(&s->defrag.mu, NULL);
}

void server__defrag_stop(struct server *s)
{
    struct server_defrag *d = &s->defrag;
    pthread_mutex_lock(&d->mu);
    bool live = d->live;
    d->live = false;
    pthread_mutex_unlock(&d->mu);
    if (live)
        pthread_join(d->thread, NULL); /* it sees s->stopping */
    pthread_mutex_lock(&d->mu);
    struct server_defrag_waiter *left = d->next;
    d->next = NULL;
    d->n_next = 0;
    pthread_mutex_unlock(&d->mu);
    answer(left, ERR_STOPPED);
}

void server__defrag_free(struct server *s)
{
    pthread_mutex_destroy(&s->defrag.mu);
}
