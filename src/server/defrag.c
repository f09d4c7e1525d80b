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
 *      fsync.  The apply side keeps applying meanwhile.
 *   4. Catch-up rounds: the copy is opened as an env and the journal's
 *      records (what was committed since step 2) are replayed into it,
 *      then it is synced, until a round finds little to do.
 *   5. Switch-over, with the locks a snapshot install takes (snap
 *      export_mu so that no export holds the gate, raft_mu, apply_mu, the
 *      gate closed): the last records are replayed (only what was
 *      committed during the last round), the journal stops, and
 *      server__store_replace renames the copy over db/data.mdb, fsyncs the
 *      directory, reopens the store and pins it.  This is the only pause;
 *      it is logged with its length.
 * Crash safety (kill -9 at any step): before the rename the store is the
 * old file, untouched, and db.defrag is a leftover that the next start
 * removes (server__defrag_cleanup); the rename is atomic, and the copy it
 * moves holds the same consistent index and data as the store it
 * replaces, so after it the WAL replays from that index as it would have.
 * A power loss is the boot guard's case as for any store write (the new
 * store is pinned before the gate opens).
 *
 * Requests: one defragmentation runs at a time, on its own thread
 * (cetcd-defrag).  A request that arrives while one runs is answered
 * after the NEXT one (which starts once the running one ends): its
 * answer then covers every page freed before it asked.  At most
 * SERVER_DEFRAG_WAITERS_MAX requests wait.
 *
 * Test knobs (environment, read at each defragmentation):
 *   CETCD_TEST_CRASH_AT=<step>   SIGKILL this process at the named step
 *                                (server__crash_point; steps below and in
 *                                store.c);
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
#include "server/server_int.h"
#include "server/snap_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

/* Journal bytes that may wait for a replay (backend_journal_start). */
#define DEFRAG_JOURNAL_MAX ((size_t)256 << 20)
/* A catch-up round that took less than this ends the rounds: what is
 * committed during the next one is replayed with requests paused. */
#define DEFRAG_ROUND_SMALL ((size_t)256 << 10)
#define DEFRAG_ROUNDS_MAX 50
/* Free disk kept beyond the copy's size: the room the reopened store
 * allocates ahead (backend.c AHEAD_BYTES) and a margin. */
#define DEFRAG_DISK_MARGIN ((uint64_t)80 << 20)

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
 * backend.c allocates backend_ahead_bytes ahead), synced: that metadata then costs no
 * fsync while requests wait.  Failures only move that cost back. */
static void presize(struct server *s, struct backend *dst, const char *data)
{
    uint64_t map = backend_map_bytes(s->be), end = backend_file_bytes(dst);
    int fd = open(data, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (map > 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size < map)
        (void)ftruncate(fd, (off_t)map);
    (void)fallocate(fd, 0, (off_t)end, (off_t)backend_ahead_bytes(end));
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
        if (rc == 0)
            rc = backend_sync(dst); /* the switch-over syncs little */
        if (rc != 0)
            return rc;
        *total += n;
        server__crash_point(round == 0 ? "defrag-round0" : "defrag-round");
        if (n < DEFRAG_ROUND_SMALL)
            return 0;
    }
    return 0;
}

/* Step 5, all locks held and the gate closed: the last records, then the
 * copy replaces the store.  dst is closed either way. */
static int swap_in(struct server *s, struct backend *dst, const char *data,
                   size_t *total, int *old_fd)
{
    size_t n = 0;
    int rc = backend_journal_replay(s->be, dst, &n);
    *total += n;
    backend_journal_stop(s->be);
    server__crash_point("defrag-replayed");
    backend_close(dst);
    if (rc != 0)
        return rc;
    server__crash_point("defrag-swap");
    /* The old file stays open until the gate opens: its blocks are then
     * freed by the close, not by the rename while requests wait. */
    char old[SNAP_PATH_MAX + 16];
    server__pathf(old, sizeof old, "%s/db/data.mdb", s->member_dir);
    *old_fd = open(old, O_RDONLY | O_CLOEXEC);
    s->defrag.swapping = true;
    rc = server__store_replace(s, data, true);
    s->defrag.swapping = false;
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
                       uint64_t *pause_us)
{
    pthread_mutex_lock(&s->snap.export_mu);
    pthread_mutex_lock(&s->node.raft_mu);
    pthread_mutex_lock(&s->apply_mu);
    uint64_t t0 = server__now_ns();
    int old_fd = -1;
    pthread_mutex_lock(&s->snap.mu);
    bool same = s->snap.pin_gen == gen;
    pthread_mutex_unlock(&s->snap.mu);
    int rc;
    if (!same || atomic_load(&s->stopping)) {
        /* The journal ran on a store that is gone (closed with it). */
        backend_close(dst);
        rc = same ? ERR_STOPPED : ERR_DEFRAG_STORE_REPLACED;
        if (same)
            backend_journal_stop(s->be);
    } else {
        server__store_gate_close(s);
        rc = swap_in(s, dst, data, total, &old_fd);
        server__store_gate_open(s);
    }
    *pause_us = (server__now_ns() - t0) / 1000u;
    pthread_mutex_unlock(&s->apply_mu);
    pthread_mutex_unlock(&s->node.raft_mu);
    pthread_mutex_unlock(&s->snap.export_mu);
    if (old_fd >= 0)
        close(old_fd); /* frees the old store's blocks */
    return rc;
}

/* Steps 3 and 4, inside the gate; *dst_out is the caught-up copy. */
static int copy_and_catch_up(struct server *s, const char *tmp,
                             const char *data, size_t *total,
                             struct backend **dst_out)
{
    int rc = copy_store(s, data);
    struct backend_options bo = {.no_fsync = true};
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

void server__defrag_cleanup(const struct server *s)
{
    char tmp[SNAP_PATH_MAX];
    server__pathf(tmp, sizeof tmp, "%s/db.defrag", s->member_dir);
    struct stat st;
    if (stat(tmp, &st) != 0)
        return;
    log_info("etcdserver", "removing %s, left by a defragmentation that "
             "did not finish", tmp);
    server__snap_rm_staging(tmp);
}

/* One whole defragmentation. */
static int defrag_run(struct server *s)
{
    char tmp[SNAP_PATH_MAX], data[SNAP_PATH_MAX + 16];
    server__pathf(tmp, sizeof tmp, "%s/db.defrag", s->member_dir);
    server__pathf(data, sizeof data, "%s/data.mdb", tmp);
    uint64_t t0 = server__now_ns(), before = 0, after = 0, gen = 0;
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
    uint64_t pause_us = 0;
    rc = copy_and_catch_up(s, tmp, data, &replayed, &dst);
    server__store_leave(s);
    if (rc != 0)
        journal_abort(s, gen);
    if (rc == 0)
        rc = switch_over(s, dst, data, gen, &replayed, &pause_us);
    server__snap_rm_staging(tmp); /* lock.mdb (data.mdb moved) */
    if (rc != 0)
        return rc;
    server__store_enter(s);
    after = backend_file_bytes(s->be);
    server__store_leave(s);
    log_info("etcdserver", "finished defragmenting the storage backend: "
             "%" PRIu64 " -> %" PRIu64 " bytes, %zu journal bytes caught "
             "up, took %" PRIu64 " ms, requests paused %" PRIu64 " us",
             before, after, replayed, (server__now_ns() - t0) / 1000000u,
             pause_us);
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
