/*
 * store.c - the member's store (LMDB + mvcc in <member>/db): opening it
 * the way the member keeps it, at start-up behind the boot guard, closing
 * it, the store gate that readers outside the apply path enter, and the
 * swap that replaces the whole store (a snapshot installed or restored)
 * once the gate is closed and nobody applies.  Lock order: server.h.
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

/* A store the boot guard cannot vouch for is moved aside (kept for
 * inspection) and rebuilt from the WAL. */
static int set_aside(const char *dir)
{
    char aside[4300];
    snprintf(aside, sizeof aside, "%s.untrusted.%ld", dir, (long)time(NULL));
    log_warn("etcdserver", "the store in %s was not shut down cleanly before "
             "a reboot; moving it to %s and rebuilding it from the WAL",
             dir, aside);
    char state[4300];
    snprintf(state, sizeof state, "%s.state", dir);
    if (rename(dir, aside) != 0 && errno != ENOENT)
        return err_from_errno(errno);
    unlink(state);
    return 0;
}

/* The store is durable through the WAL (a crash replays it above the
 * store's index; the boot guard rebuilds a store torn by a power loss),
 * so LMDB does not fsync.  It writes its pages with pwrite, not through a
 * writable map (write_map): each sync of the store (a pin's, snap_pin.c)
 * and the kernel's own writeback write-protect the map's dirty pages, and
 * every later write to one is a fault, 8-14 us of CPU on these VMs.  At
 * 100 Go clients that was 2 faults and 128-138 us of CPU per put against
 * 0.1 and 44-47 with pwrite (docs/BENCHMARKS.md, session 18; session 8
 * had measured write_map 7-16% cheaper, before pins synced the store). */
int server__store_open(struct server *s, const char *dir)
{
    struct backend_options bo = {.no_fsync = true, .write_map = false};
    /* CETCD_MAP_BYTES (README's knobs): a smaller map than the default
     * 64 GiB, for running under valgrind, whose address space is smaller */
    const char *mb = getenv("CETCD_MAP_BYTES");
    if (mb != NULL) {
        char *end;
        bo.map_size_bytes = strtoull(mb, &end, 10);
        if (end == mb || *end != '\0' || bo.map_size_bytes < (1u << 20)) {
            log_error("etcdserver", "CETCD_MAP_BYTES=%s: not a size in "
                      "bytes of at least 1 MiB", mb);
            return ERR_INVAL;
        }
    }
    int rc = backend_open(dir, &bo, &s->be);
    if (rc == 0)
        rc = mvcc_store_open(
            s->be,
            &(struct mvcc_options){
                .count_keys = true,
                .overlay_from = s->defrag.swapping ? s->defrag.replaced
                                                   : NULL},
            &s->mvcc);
    if (rc == ERR_UNSUPPORTED) /* mvcc_int.h "mvcc_format" */
        log_error("etcdserver", "the store in %s has another layout than "
                  "this cetcd's (the key index and a revision log with the "
                  "values); a store written before that layout cannot be "
                  "read by this version", dir);
    if (rc == 0 && !s->defrag.swapping)
        server__compact_log_restored(s);
    if (rc == 0)
        rc = server__watch_store_opened(s); /* the hub, the observer */
    if (rc == 0)
        rc = server__alarms_load(s);
    if (rc == 0)
        rc = s->defrag.swapping ? server__leases_rebind(s) /* same data */
                                : server__leases_load(s);
    if (rc == 0)
        rc = server__auth_load(s);
    if (rc == 0)
        server__quota_update(s);
    return rc;
}

/* etcd's mvcc restore lines (kvstore.go): the compact revision a store
 * opened with, or the compaction it will go on with. */
void server__compact_log_restored(struct server *s)
{
    mvcc_rev rev = mvcc_compact_rev(s->mvcc);
    if (rev <= 0)
        return;
    bool pending = mvcc_compact_pending(s->mvcc);
    if (log_is_zap() && !pending)
        log_zap(LOG_INFO, "restored last compact revision",
                LOG_STR("meta-bucket-name", "meta"),
                LOG_STR("meta-bucket-name-key", "finishedCompactRev"),
                LOG_INT("restored-compact-revision", rev));
    else if (log_is_zap())
        log_zap(LOG_INFO, "resume scheduled compaction",
                LOG_STR("meta-bucket-name", "meta"),
                LOG_STR("meta-bucket-name-key", "scheduledCompactRev"),
                LOG_INT("scheduled-compact-revision", rev));
    else if (!pending)
        log_info("mvcc", "restore compact to %" PRId64, rev);
    else
        log_info("mvcc", "resume scheduled compaction at %" PRId64, rev);
}

/* Start-up: the store in <member>/db, set aside and rebuilt when the boot
 * guard distrusts it, marked dirty, opened. */
int server__store_boot(struct server *s)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/db", s->member_dir);
    bool trusted;
    int rc = boot_guard_check(dir, &trusted);
    server__defrag_cleanup(s); /* the old store is whole either way */
    if (rc == 0 && !trusted)
        rc = set_aside(dir);
    if (rc == 0 && !trusted)
        rc = server__snap_rebuild(s, dir); /* newest snap file, if any */
    if (rc == 0)
        rc = boot_guard_mark(dir, false);
    server__quota_log(s);
    return rc == 0 ? server__store_open(s, dir) : rc;
}

/* A clean stop: the store is synced, so the next boot may trust it. */
void server__store_close(struct server *s)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/db", s->member_dir);
    bool clean = s->be != NULL && s->fatal == 0 && backend_sync(s->be) == 0;
    mvcc_store_close(s->mvcc);
    backend_close(s->be);
    if (clean)
        boot_guard_mark(dir, true);
}

/* --- the store gate ------------------------------------------------------ */

void server__store_enter(struct server *s)
{
    pthread_mutex_lock(&s->snap.gate_mu);
    while (s->snap.gate_closed)
        pthread_cond_wait(&s->snap.gate_cv, &s->snap.gate_mu);
    s->snap.gate_users++;
    pthread_mutex_unlock(&s->snap.gate_mu);
}

void server__store_leave(struct server *s)
{
    pthread_mutex_lock(&s->snap.gate_mu);
    CHECK(s->snap.gate_users > 0);
    if (--s->snap.gate_users == 0)
        pthread_cond_broadcast(&s->snap.gate_cv);
    pthread_mutex_unlock(&s->snap.gate_mu);
}

void server__store_gate_close(struct server *s)
{
    pthread_mutex_lock(&s->snap.gate_mu);
    CHECK(!s->snap.gate_closed);
    s->snap.gate_closed = true;
    while (s->snap.gate_users > 0)
        pthread_cond_wait(&s->snap.gate_cv, &s->snap.gate_mu);
    pthread_mutex_unlock(&s->snap.gate_mu);
}

void server__store_gate_open(struct server *s)
{
    pthread_mutex_lock(&s->snap.gate_mu);
    s->snap.gate_closed = false;
    pthread_cond_broadcast(&s->snap.gate_cv);
    pthread_mutex_unlock(&s->snap.gate_mu);
}

/* Replaces the store by the LMDB file src (moved, or copied when !move)
 * and reopens it.  Nobody may use the store meanwhile: before the threads
 * run, or with apply_mu held and the gate closed. */
int server__store_replace(struct server *s, const char *src, bool move)
{
    char dir[SNAP_PATH_MAX], dst[SNAP_PATH_MAX + 16], tmp[SNAP_PATH_MAX + 16];
    server__db_dir(s, dir, sizeof dir);
    server__pathf(dst, sizeof dst, "%s/data.mdb", dir);
    server__pathf(tmp, sizeof tmp, "%s/data.mdb.tmp", dir);
    /* The old store's pin would restore pages of another file. */
    int frc = server__pin_forget(s);
    if (frc != 0) {
        log_error("etcdserver", "cannot remove the store's pin: %s",
                  err_str(frc));
        return frc;
    }
    server__crash_point("store-pin-forgotten");
    /* A defragmentation's journal ends with the store it recorded. */
    backend_journal_stop(s->be);
    mvcc_store_close(s->mvcc);
    backend_close(s->be);
    s->mvcc = NULL;
    s->be = NULL;
    int rc = 0;
    if (move) {
        rc = rename(src, dst) == 0 ? 0 : err_from_errno(errno);
        server__crash_point("store-renamed");
    } else {
        rc = server__copy_file(src, tmp);
        if (rc == 0 && rename(tmp, dst) != 0)
            rc = err_from_errno(errno);
    }
    if (rc == 0)
        rc = fs_fsync_dir(dir);
    if (rc == 0)
        rc = boot_guard_mark(dir, false);
    if (rc == 0)
        rc = server__store_open(s, dir);
    if (rc == 0 && s->ms != NULL) /* its buckets, on the new env */
        rc = server__members_reload(s, !s->threads_started);
    server__crash_point("store-reopened");
    if (rc == 0)
        rc = server__pin_locked(s);
    if (rc != 0)
        log_error("etcdserver", "cannot replace the store in %s by %s: %s",
                  dir, src, err_str(rc));
    return rc;
}
