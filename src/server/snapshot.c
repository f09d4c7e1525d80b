/*
 * snapshot.c - Raft snapshots of the store: what lets the WAL be released,
 * and how a follower too far behind (or restarted after the leader
 * truncated its log) catches up by receiving the leader's LMDB database.
 *
 * The store is not copied to make a snapshot.  Raft's snapshot is a pin
 * (snap_pin.c): a committed state of the live store at its consistent
 * index C, fsynced and kept intact by a read txn until the next pin is
 * durable, its meta pages saved in <member>/snap/<C>.pin.  That is all a
 * restart needs: after kill -9 the store is as it was; after a power loss
 * (the boot guard distrusts the store) the same file with the pinned meta
 * pages written back opens as exactly C, and the WAL after C replays the
 * rest.  So the data dir holds one store (plus what was written while the
 * pin was held, see below) instead of --max-snapshots full copies, and no
 * snapshot rewrites the whole store.  A copy is made only when a follower
 * needs one, as etcd streams its db.
 *
 * Files, in <member>/snap/:
 *   <index %016x>.pin      the durable pin (snap_pin.c has its layout).
 *   export-<index %016x>.db
 *                          a compacted copy of the store whose consistent
 *                          index is <index>, made when a follower needs a
 *                          snapshot; one at a time, removed once no send
 *                          has used it for SNAP_EXPORT_KEEP_MS (a transfer
 *                          in flight keeps its open fd).
 *   <index %016x>.snap.db  a snapshot received from a leader (the peer
 *                          transport names them so); removed once the
 *                          store it became is pinned.
 *   .copy.d/, .recv-<index %016x>.d/
 *                          staging dirs (data.mdb + lock.mdb) in which the
 *                          worker opens a copy to read its consistent index;
 *                          left-overs are removed before reuse.
 * --max-snapshots is accepted and has nothing left to bound.
 *
 * Pinning (any member): every --snapshot-count applied entries, whenever
 * the store's file grew by max(4 MB, 1/64 of it) since the last pin, and
 * once the pages freed since the last pin pass 1/32 of the store, at
 * least 4 MiB (pages freed while a pin is held cannot be reused, so the
 * file grows by what is freed between pins: bounded by volume, whatever
 * the write rate; snap_pin.c PIN_HELD_MIN says why neither growth alone
 * nor a pin every 250 ms bounded it), the raft thread asks
 * the worker for a pin at >= the applied index N.  The worker takes it in
 * a few microseconds under apply_mu (no write txn then), fsyncs the store
 * beside the running writer, waits until the pinned index C is applied
 * (published: its WAL fsync returned), writes the pin file and releases
 * the previous pin.  Then, for a --snapshot-count pin, the raft thread
 * records raft's snapshot at C with the members as of C (read with the
 * pin), writes a WAL snapshot marker (C, term) and drops raft's log
 * before C - SNAP_LOG_KEEP.  After every durable pin it releases the WAL
 * segments before C - SNAP_LOG_KEEP (snap_raft.c release_wal_behind: a
 * restart replays from the store's applied index, >= C, and a rebuild
 * after a power loss from the pin) and sizes the WAL to the store
 * (wal_budget).  A log is thus truncated only behind a durable pin.
 *
 * Sending (leader): raft emits MsgSnap for index S when a follower needs
 * entries it dropped.  The raft thread sends the export once one with
 * index C >= S exists (else it asks the worker for one: a compacted copy
 * from one LMDB read txn, concurrently with the writer), with a MsgSnap
 * describing C (the copy's own index, term and ConfState as of C; the
 * raft data field stays empty: the file travels beside it).  The follower
 * then acknowledges C >= S, which moves raft's progress out of snapshot
 * state.  One transfer per follower.
 *
 * Receiving (follower): the transport hands over a verified file; the
 * worker copies it into a staging dir, checks that its consistent index
 * is the MsgSnap's index and reads its members; the raft thread steps the
 * MsgSnap, with the store's members as its ConfState should the leader
 * have described another one.  If raft takes it, the next Ready carries
 * the snapshot (raft restores that ConfState), and server__snap_install
 * writes the WAL marker, stops the apply pipeline (apply_mu; queued
 * entries are applied first), closes the store gate (no reader inside),
 * drops the old store's pin and pin file, renames the staged file over
 * db/data.mdb, fsyncs, reopens the store (the members table and the peer
 * transport follow it, see members.c), pins it, and removes the received
 * file.
 *
 * Crash safety: the marker is written before the store is replaced; a
 * store found behind the WAL's newest marker at start-up is restored from
 * the marker's snap file (server__snap_recover), which stays until the
 * new store is pinned.  The marker holds (index, term) as etcd 3.4's
 * does; raft restarts with the members of the store it opens.  A store
 * the boot guard distrusts is rebuilt from the newest pin plus the WAL
 * after it (server__snap_rebuild), or, with no usable pin (a crash
 * between an install's pin drop and its new pin), from the newest snap
 * file.
 *
 * The code, by role: this file (the design above, and the life cycle:
 * open, start, close, rebuild, recover), snap_files.c (paths, copies,
 * listings), snap_worker.c (the cetcd-snap thread: pins, exports,
 * staging), snap_raft.c (the raft-pass holder: results, sends, steps,
 * installs), snap_pin.c (the pins and their files), store.c (the store,
 * its gate and the swap).  snap_int.h declares what they share.
 */
#include "util/check.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/thread.h"
#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "peer/peer.h"
#include "raft/raft.h"
#include "server/boot_guard.h"
#include "server/server_int.h"
#include "server/snap_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

/* Removes export files a previous run left (start-up). */
static void rm_exports(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "export", 6) != 0)
            continue;
        char p[SNAP_PATH_MAX + 300];
        server__pathf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

int server__snap_open(struct server *s)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_init(&sn->mu, NULL);
    pthread_cond_init(&sn->cv, NULL);
    pthread_mutex_init(&sn->gate_mu, NULL);
    pthread_cond_init(&sn->gate_cv, NULL);
    pthread_mutex_init(&sn->export_mu, NULL);
    sn->inited = true;
    char dir[SNAP_PATH_MAX];
    server__snap_dir(s, dir, sizeof dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    rm_exports(dir);
    return 0;
}

int server__snap_start(struct server *s)
{
    if (pthread_create(&s->snap.thread, NULL, server__snap_worker_main,
                       s) != 0)
        return ERR_NOMEM;
    thread_name_set(s->snap.thread, "cetcd-snap");
    s->snap.started = true;
    return 0;
}

static void free_list(struct server_snap_recv *r)
{
    while (r != NULL) {
        struct server_snap_recv *next = r->next;
        mem_free(r);
        r = next;
    }
}

void server__snap_close(struct server *s)
{
    struct server_snap *sn = &s->snap;
    if (!sn->inited)
        return;
    if (sn->started) {
        pthread_mutex_lock(&sn->mu);
        sn->stop = true;
        pthread_cond_signal(&sn->cv);
        pthread_mutex_unlock(&sn->mu);
        pthread_join(sn->thread, NULL);
        sn->started = false;
    }
    free_list(sn->recv_head);
    free_list(sn->staged_head);
    sn->recv_head = sn->staged_head = NULL;
    server__snap_export_drop(s);
    server__pin_drop(s); /* its file stays: see snap_pin.c */
    pthread_mutex_destroy(&sn->export_mu);
    pthread_mutex_destroy(&sn->mu);
    pthread_cond_destroy(&sn->cv);
    pthread_mutex_destroy(&sn->gate_mu);
    pthread_cond_destroy(&sn->gate_cv);
    sn->inited = false;
}

int server__snap_rebuild(struct server *s, const char *db)
{
    if (server__pin_restore(s, db) == 0)
        return 0;
    uint64_t *v;
    size_t n;
    int rc = server__snap_list(s, &v, &n);
    if (rc != 0 || n == 0)
        return rc;
    char src[SNAP_PATH_MAX], dst[SNAP_PATH_MAX + 16], tmp[SNAP_PATH_MAX + 16];
    server__snap_file(s, v[n - 1], src, sizeof src);
    mem_free(v);
    server__pathf(dst, sizeof dst, "%s/data.mdb", db);
    server__pathf(tmp, sizeof tmp, "%s/data.mdb.tmp", db);
    log_warn("etcdserver", "rebuilding the store from %s and the WAL after "
             "it", src);
    if (mkdir(db, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    rc = server__copy_file(src, tmp);
    if (rc == 0 && rename(tmp, dst) != 0)
        rc = err_from_errno(errno);
    if (rc == 0)
        rc = fs_fsync_dir(db);
    return rc;
}

static int r_marker(void *arg, const struct wal_snapshot *snap)
{
    *(struct wal_snapshot *)arg = *snap;
    return 0;
}

int server__snap_recover(struct server *s)
{
    struct wal_snapshot from = {UINT64_MAX / 2, 0}, mark = {0, 0};
    struct wal_replay_cb cb = {.on_snapshot = r_marker};
    int rc = wal_replay(s->wal, &from, &cb, &mark);
    uint64_t ci = mvcc_consistent_index(s->mvcc);
    if (rc != 0)
        return rc;
    if (mark.index <= ci) {
        /* No pin of an earlier run holds: pin before anything writes. */
        rc = server__pin_locked(s);
        if (rc == 0)
            server__snap_prune(s);
        return rc;
    }
    char src[SNAP_PATH_MAX];
    server__snap_file(s, mark.index, src, sizeof src);
    if (access(src, R_OK) != 0) {
        log_error("etcdserver", "the store is at index %" PRIu64 " but the "
                  "WAL has a snapshot at %" PRIu64 " and %s is missing", ci,
                  mark.index, src);
        return ERR_CORRUPT;
    }
    log_warn("etcdserver", "the store (index %" PRIu64 ") is behind the "
             "snapshot at index %" PRIu64 " (a crash while installing it); "
             "restoring it from %s", ci, mark.index, src);
    rc = server__store_replace(s, src, false); /* pins the new store */
    if (rc == 0)
        server__snap_prune(s);
    return rc;
}
