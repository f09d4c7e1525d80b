/*
 * snap_worker.c - the snapshot worker thread (cetcd-snap): pins the store
 * (snap_pin.c) every --snapshot-count entries, makes a compacted export
 * for a follower that needs one, and stages received snapshots for the
 * raft thread.  It reads the store inside the store gate and talks to the
 * raft thread through the snap.mu fields (server_int.h, struct
 * server_snap).  The design is in snapshot.c's header.
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

bool server__snap_wait_applied(struct server *s, uint64_t index)
{
    uint64_t deadline = server__clock_ms(s) + SNAP_APPLY_WAIT_MS;
    pthread_mutex_lock(&s->applied_mu);
    while (atomic_load(&s->applied_index) < index &&
           !atomic_load(&s->stopping) && server__clock_ms(s) < deadline) {
        struct timespec ts = thread_deadline_ms(CLOCK_REALTIME, 100);
        pthread_cond_timedwait(&s->applied_cv, &s->applied_mu, &ts);
    }
    pthread_mutex_unlock(&s->applied_mu);
    return atomic_load(&s->applied_index) >= index;
}

/* Copies the store (compacted, from one read txn) into the staging dir
 * and reads the copy's index and members (see server__snap_export). */
static int copy_staged(struct server *s, const char *stage, uint64_t *index,
                       struct raft_conf_state *conf_out)
{
    char data[SNAP_PATH_MAX + 32];
    server__pathf(data, sizeof data, "%s/data.mdb", stage);
    server__snap_rm_staging(stage);
    if (mkdir(stage, 0700) != 0)
        return err_from_errno(errno);
    int fd = open(data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? err_from_errno(errno) : 0;
    if (rc == 0) {
        server__store_enter(s);
        rc = backend_copy_fd(s->be, fd, true);
        server__store_leave(s);
        close(fd);
    }
    int conf_rc = 0;
    if (rc == 0)
        rc = server__snap_read_meta(stage, index, conf_out, &conf_rc);
    if (rc == 0 && conf_rc != 0)
        rc = ERR_CORRUPT; /* the store lost its members */
    return rc;
}

int server__snap_export(struct server *s, uint64_t target, const char *path,
                        uint64_t *index_out, struct raft_conf_state *conf_out)
{
    char dir[SNAP_PATH_MAX], stage[SNAP_PATH_MAX + 16], data[SNAP_PATH_MAX + 32];
    CHECK(path != NULL && index_out != NULL && conf_out != NULL);
    if (!server__snap_wait_applied(s, target))
        return atomic_load(&s->stopping) ? ERR_STOPPED : ERR_TIMEOUT;
    server__snap_dir(s, dir, sizeof dir);
    server__pathf(stage, sizeof stage, "%s/.copy.d", dir);
    server__pathf(data, sizeof data, "%s/data.mdb", stage);
    pthread_mutex_lock(&s->snap.export_mu);
    uint64_t index = 0;
    int rc = copy_staged(s, stage, &index, conf_out);
    if (rc == 0 && index < target)
        rc = ERR_CORRUPT; /* the store went backwards */
    /* A lone voter's store may hold a tentative batch (speculative apply,
     * apply.c) whose WAL fsync has not returned: the copy stands for a
     * committed state only once that index is applied (published). */
    if (rc == 0 && !server__snap_wait_applied(s, index))
        rc = atomic_load(&s->stopping) ? ERR_STOPPED : ERR_TIMEOUT;
    if (rc == 0 && rename(data, path) != 0)
        rc = err_from_errno(errno);
    server__snap_rm_staging(stage);
    pthread_mutex_unlock(&s->snap.export_mu);
    if (rc == 0)
        *index_out = index;
    return rc;
}

/* Worker: the export for a follower, renamed export-<index>.db. */
static int make_export(struct server *s, uint64_t target, uint64_t *index_out,
                       struct raft_conf_state *conf_out)
{
    char tmp[SNAP_PATH_MAX], final[SNAP_PATH_MAX];
    server__pathf(tmp, sizeof tmp, "%s/snap/export.db.tmp", s->member_dir);
    int rc = server__snap_export(s, target, tmp, index_out, conf_out);
    if (rc != 0)
        return rc;
    server__snap_export_file(s, *index_out, final, sizeof final);
    rc = rename(tmp, final) == 0 ? 0 : err_from_errno(errno);
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/* Checks a received file and stages it (see the file comment). */
static bool stage(struct server *s, struct server_snap_recv *r)
{
    char dir[SNAP_PATH_MAX], st[SNAP_PATH_MAX + 32], data[SNAP_PATH_MAX + 48];
    server__snap_dir(s, dir, sizeof dir);
    server__pathf(st, sizeof st, "%s/.recv-%016" PRIx64 ".d", dir, r->index);
    server__pathf(data, sizeof data, "%s/data.mdb", st);
    server__snap_rm_staging(st);
    uint64_t index = 0;
    int conf_rc = 0;
    int rc = mkdir(st, 0700) == 0 ? 0 : err_from_errno(errno);
    if (rc == 0)
        rc = server__copy_file(r->path, data);
    if (rc == 0)
        rc = server__snap_read_meta(st, &index, &r->conf, &conf_rc);
    if (rc == 0 && index != r->index)
        rc = ERR_CORRUPT;
    r->has_conf = rc == 0 && conf_rc == 0;
    if (rc != 0) {
        log_error("etcdserver", "dropping the snapshot received at index "
                  "%" PRIu64 " (%s; its store is at index %" PRIu64 ")",
                  r->index, err_str(rc), index);
        server__snap_rm_staging(st);
        unlink(r->path);
        return false;
    }
    return true;
}

/* Worker, mu held (released meanwhile): stages the received r. */
static void do_stage(struct server *s, struct server_snap_recv *r)
{
    struct server_snap *sn = &s->snap;
    sn->recv_head = r->next;
    sn->staging_index = r->index;
    pthread_mutex_unlock(&sn->mu);
    bool ok = stage(s, r);
    pthread_mutex_lock(&sn->mu);
    sn->staging_index = 0;
    if (ok) {
        struct server_snap_recv **p = &sn->staged_head;
        while (*p != NULL)
            p = &(*p)->next;
        r->next = NULL;
        *p = r;
    } else {
        sn->n_recv--;
        mem_free(r);
    }
}

/* Worker, mu held (released meanwhile): the export asked for. */
static void do_export(struct server *s)
{
    struct server_snap *sn = &s->snap;
    uint64_t target = sn->copy_want, index = 0;
    struct raft_conf_state conf;
    sn->copy_want = 0;
    pthread_mutex_unlock(&sn->mu);
    int rc = make_export(s, target, &index, &conf);
    if (rc != 0 && rc != ERR_STOPPED)
        log_warn("etcdserver", "copy of the store at index >= %" PRIu64
                 " for a follower failed: %s", target, err_str(rc));
    pthread_mutex_lock(&sn->mu);
    sn->copy_done = rc == 0 ? index : 0;
    if (rc == 0)
        sn->copy_conf = conf;
    sn->copy_failed = rc != 0;
}

/* A pin that keeps failing is logged once per this many ms. */
#define PIN_FAIL_LOG_MS 60000u

/* Worker, mu held (released meanwhile): the pin asked for. */
static void do_pin(struct server *s)
{
    struct server_snap *sn = &s->snap;
    uint64_t target = sn->pin_want, index = 0;
    struct raft_conf_state conf;
    sn->pin_want = 0;
    pthread_mutex_unlock(&sn->mu);
    int rc = server__snap_wait_applied(s, target) ? 0 : ERR_TIMEOUT;
    if (rc == 0)
        rc = server__pin_worker(s, &index, &conf);
    pthread_mutex_lock(&sn->mu);
    if (rc != 0 && !atomic_load(&s->stopping) && rc != ERR_STOPPED) {
        /* Retried (snap_raft.c), and said once per PIN_FAIL_LOG_MS: a full
         * disk may last. */
        uint64_t now = server__clock_ms(s);
        sn->pin_fails++;
        if (sn->pin_fail_log_ms == 0 ||
            now >= sn->pin_fail_log_ms + PIN_FAIL_LOG_MS) {
            log_warn("etcdserver", "snapshot of the store at index >= %"
                     PRIu64 " failed: %s (pinning it; %" PRIu64 " failed "
                     "since the last such line)", target, err_str(rc),
                     sn->pin_fails);
            sn->pin_fail_log_ms = now;
            sn->pin_fails = 0;
        }
    } else if (rc == 0 && sn->pin_fail_log_ms != 0) {
        log_info("etcdserver", "the store is pinned again at index %" PRIu64,
                 index);
        sn->pin_fail_log_ms = 0;
        sn->pin_fails = 0;
    }
    sn->pin_done = rc == 0 ? index : 0;
    if (rc == 0)
        sn->pin_conf = conf;
    sn->pin_failed = rc != 0;
}

void *server__snap_worker_main(void *arg)
{
    struct server *s = arg;
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    for (;;) {
        while (!sn->stop && sn->recv_head == NULL && sn->copy_want == 0 &&
               sn->pin_want == 0)
            pthread_cond_wait(&sn->cv, &sn->mu);
        if (sn->stop)
            break;
        if (sn->recv_head != NULL)
            do_stage(s, sn->recv_head);
        else if (sn->copy_want != 0)
            do_export(s);
        else
            do_pin(s);
        pthread_mutex_unlock(&sn->mu);
        server__kick(s);
        pthread_mutex_lock(&sn->mu);
    }
    pthread_mutex_unlock(&sn->mu);
    return NULL;
}
