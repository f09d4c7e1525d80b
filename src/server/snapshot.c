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
 * Pinning (any member): every --snapshot-count applied entries, and
 * whenever the store's file grew by max(16 MB, 1/8 of it) since the last
 * pin (pages freed while a pin is held cannot be reused, so the file grows
 * by what is written between pins; this bounds it), the raft thread asks
 * the worker for a pin at >= the applied index N.  The worker takes it in
 * a few microseconds under apply_mu (no write txn then), fsyncs the store
 * beside the running writer, waits until the pinned index C is applied
 * (published: its WAL fsync returned), writes the pin file and releases
 * the previous pin.  Then the raft thread records raft's snapshot at C
 * with the members as of C (read with the pin), writes a WAL snapshot
 * marker (C, term) and drops raft's log and WAL segments before
 * C - SNAP_LOG_KEEP.  A log is thus truncated only behind a durable pin.
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
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

#define SNAP_LOG_KEEP 5000        /* entries kept behind a snapshot */
#define SNAP_APPLY_WAIT_MS 10000  /* a copy waits this long for apply */
#define SNAP_RESEND_MS 3000       /* the same copy again only after this */
#define SNAP_EXPORT_KEEP_MS 30000 /* an unused export is removed after this */
#define SNAP_PATH_MAX 4400

/* A received snapshot on its way from the transport to raft. */
struct server_snap_recv {
    struct server_snap_recv *next; /* FIFO link */
    uint64_t index;                /* the MsgSnap's snapshot index */
    struct raft_conf_state conf;   /* the staged store's members */
    bool has_conf;                 /* conf was read (a cetcd store) */
    char path[SNAP_PATH_MAX];      /* the transport's verified file */
    size_t len;                    /* bytes of msg */
    uint8_t msg[];                 /* raft_msg_encode of the MsgSnap */
};

/* --- paths and files ---------------------------------------------------- */

/* snprintf for paths (a wrapper: paths are bounded by member_dir, and a
 * truncated one only fails the open/rename that uses it). */
__attribute__((format(printf, 3, 4))) static void
pathf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

static void snap_dir(const struct server *s, char *buf, size_t cap)
{
    pathf(buf, cap, "%s/snap", s->member_dir);
}

static void snap_file(const struct server *s, uint64_t index, char *buf,
                      size_t cap)
{
    pathf(buf, cap, "%s/snap/%016" PRIx64 ".snap.db", s->member_dir,
             index);
}

static void db_dir(const struct server *s, char *buf, size_t cap)
{
    pathf(buf, cap, "%s/db", s->member_dir);
}

/* Removes a staging dir and the two files LMDB keeps there. */
static void rm_staging(const char *dir)
{
    char p[SNAP_PATH_MAX + 16];
    pathf(p, sizeof p, "%s/data.mdb", dir);
    unlink(p);
    pathf(p, sizeof p, "%s/lock.mdb", dir);
    unlink(p);
    rmdir(dir);
}

/* Copies src to dst (created or truncated) and fsyncs dst. */
static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return err_from_errno(errno);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        int rc = err_from_errno(errno);
        close(in);
        return rc;
    }
    int rc = 0;
    static char buf[1 << 16];
    static pthread_mutex_t buf_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&buf_mu);
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? err_from_errno(errno) : 0;
            break;
        }
        rc = fs_write_all(out, buf, (size_t)n);
        if (rc != 0)
            break;
    }
    pthread_mutex_unlock(&buf_mu);
    if (rc == 0 && fsync(out) != 0)
        rc = err_from_errno(errno);
    close(out);
    close(in);
    return rc;
}

/* Opens the LMDB file <dir>/data.mdb as a store and reads its consistent
 * index and its members: the ConfState as of that index (members are
 * written in the apply batch that moves the index).  A store without a
 * members table gives ERR_NOTFOUND in *conf_rc_out and an empty conf. */
static int read_meta(const char *dir, uint64_t *index_out,
                     struct raft_conf_state *conf_out, int *conf_rc_out)
{
    struct backend_options bo = {.no_fsync = true, .max_readers = 8};
    struct backend *be;
    struct mvcc_store *mv;
    int rc = backend_open(dir, &bo, &be);
    if (rc != 0)
        return rc;
    rc = mvcc_store_open(be, NULL, &mv);
    if (rc == 0) {
        *index_out = mvcc_consistent_index(mv);
        mvcc_store_close(mv);
        *conf_rc_out = server__members_conf_read(be, conf_out);
        if (*conf_rc_out != 0 && *conf_rc_out != ERR_NOTFOUND)
            rc = *conf_rc_out;
    }
    backend_close(be);
    return rc;
}

/* "voters=(id,...) learners=(id,...)" for the log. */
static void conf_fmt(const struct raft_conf_state *cs, char *buf, size_t cap)
{
    size_t w = 0;
    const char *names[2] = {"voters", "learners"};
    const raft_id *ids[2] = {cs->voters, cs->learners};
    uint32_t n[2] = {cs->n_voters, cs->n_learners};
    buf[0] = '\0';
    for (int k = 0; k < 2 && w < cap; k++) {
        w += (size_t)snprintf(buf + w, cap - w, "%s%s=(", k ? " " : "",
                              names[k]);
        for (uint32_t i = 0; i < n[k] && w < cap; i++)
            w += (size_t)snprintf(buf + w, cap - w, "%s%016" PRIx64,
                                  i ? "," : "", ids[k][i]);
        if (w < cap)
            w += (size_t)snprintf(buf + w, cap - w, ")");
    }
}

static bool ids_same(const raft_id *a, uint32_t na, const raft_id *b,
                     uint32_t nb)
{
    if (na != nb)
        return false;
    for (uint32_t i = 0; i < na; i++) {
        bool found = false;
        for (uint32_t k = 0; k < nb && !found; k++)
            found = a[i] == b[k];
        if (!found)
            return false;
    }
    return true;
}

/* The same membership (as sets; ids are unique within a ConfState). */
static bool conf_same(const struct raft_conf_state *a,
                      const struct raft_conf_state *b)
{
    return ids_same(a->voters, a->n_voters, b->voters, b->n_voters) &&
           ids_same(a->learners, a->n_learners, b->learners,
                    b->n_learners) &&
           ids_same(a->voters_outgoing, a->n_voters_outgoing,
                    b->voters_outgoing, b->n_voters_outgoing) &&
           ids_same(a->learners_next, a->n_learners_next, b->learners_next,
                    b->n_learners_next) &&
           a->auto_leave == b->auto_leave;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int server__snap_indexes(const char *dir, const char *suffix,
                         uint64_t **out, size_t *n_out)
{
    size_t len = 16 + strlen(suffix);
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : err_from_errno(errno);
    size_t n = 0, cap = 0;
    uint64_t *v = NULL;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *nm = e->d_name;
        if (strlen(nm) != len || strcmp(nm + 16, suffix) != 0 ||
            strspn(nm, "0123456789abcdef") != 16)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *p = mem_realloc(v, cap * sizeof *v);
            if (p == NULL) {
                closedir(d);
                mem_free(v);
                return ERR_NOMEM;
            }
            v = p;
        }
        v[n++] = strtoull(nm, NULL, 16);
    }
    closedir(d);
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_u64);
    *out = v;
    *n_out = n;
    return 0;
}

/* The indexes of the received snap files in <member>/snap, ascending. */
static int list_snaps(const struct server *s, uint64_t **out, size_t *n_out)
{
    char dir[SNAP_PATH_MAX];
    snap_dir(s, dir, sizeof dir);
    return server__snap_indexes(dir, ".snap.db", out, n_out);
}

/* Removes the received snap files the store has gone past: it is pinned
 * at or after their index, so neither a restart nor a rebuild needs them. */
static void prune(struct server *s)
{
    uint64_t *v;
    size_t n;
    pthread_mutex_lock(&s->snap.mu);
    uint64_t pinned = s->snap.pin_index;
    pthread_mutex_unlock(&s->snap.mu);
    if (pinned == 0 || list_snaps(s, &v, &n) != 0)
        return;
    for (size_t i = 0; i < n && v[i] <= pinned; i++) {
        char p[SNAP_PATH_MAX];
        snap_file(s, v[i], p, sizeof p);
        unlink(p);
    }
    mem_free(v);
}

static void export_file(const struct server *s, uint64_t index, char *buf,
                        size_t cap)
{
    pathf(buf, cap, "%s/snap/export-%016" PRIx64 ".db", s->member_dir,
          index);
}

/* Raft thread: removes the export file (a send in flight keeps its fd). */
static void export_drop(struct server *s)
{
    if (s->snap.export_index == 0)
        return;
    char p[SNAP_PATH_MAX];
    export_file(s, s->snap.export_index, p, sizeof p);
    unlink(p);
    s->snap.export_index = 0;
}

/* --- the store and its gate ---------------------------------------------- */

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

static void gate_close(struct server *s)
{
    pthread_mutex_lock(&s->snap.gate_mu);
    CHECK(!s->snap.gate_closed);
    s->snap.gate_closed = true;
    while (s->snap.gate_users > 0)
        pthread_cond_wait(&s->snap.gate_cv, &s->snap.gate_mu);
    pthread_mutex_unlock(&s->snap.gate_mu);
}

static void gate_open(struct server *s)
{
    pthread_mutex_lock(&s->snap.gate_mu);
    s->snap.gate_closed = false;
    pthread_cond_broadcast(&s->snap.gate_cv);
    pthread_mutex_unlock(&s->snap.gate_mu);
}

/* Replaces the store by the LMDB file src (moved, or copied when !move)
 * and reopens it.  Nobody may use the store meanwhile: before the threads
 * run, or with apply_mu held and the gate closed. */
static int store_replace(struct server *s, const char *src, bool move)
{
    char dir[SNAP_PATH_MAX], dst[SNAP_PATH_MAX + 16], tmp[SNAP_PATH_MAX + 16];
    db_dir(s, dir, sizeof dir);
    pathf(dst, sizeof dst, "%s/data.mdb", dir);
    pathf(tmp, sizeof tmp, "%s/data.mdb.tmp", dir);
    /* The old store's pin would restore pages of another file. */
    int frc = server__pin_forget(s);
    if (frc != 0) {
        log_error("etcdserver", "cannot remove the store's pin: %s",
                  err_str(frc));
        return frc;
    }
    mvcc_store_close(s->mvcc);
    backend_close(s->be);
    s->mvcc = NULL;
    s->be = NULL;
    int rc = 0;
    if (move) {
        rc = rename(src, dst) == 0 ? 0 : err_from_errno(errno);
    } else {
        rc = copy_file(src, tmp);
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
    if (rc == 0)
        rc = server__pin_locked(s);
    if (rc != 0)
        log_error("etcdserver", "cannot replace the store in %s by %s: %s",
                  dir, src, err_str(rc));
    return rc;
}

/* --- the worker ----------------------------------------------------------- */

bool server__snap_wait_applied(struct server *s, uint64_t index)
{
    uint64_t deadline = server__now_ms() + SNAP_APPLY_WAIT_MS;
    pthread_mutex_lock(&s->applied_mu);
    while (atomic_load(&s->applied_index) < index &&
           !atomic_load(&s->stopping) && server__now_ms() < deadline) {
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
    pathf(data, sizeof data, "%s/data.mdb", stage);
    rm_staging(stage);
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
        rc = read_meta(stage, index, conf_out, &conf_rc);
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
    snap_dir(s, dir, sizeof dir);
    pathf(stage, sizeof stage, "%s/.copy.d", dir);
    pathf(data, sizeof data, "%s/data.mdb", stage);
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
    rm_staging(stage);
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
    pathf(tmp, sizeof tmp, "%s/snap/export.db.tmp", s->member_dir);
    int rc = server__snap_export(s, target, tmp, index_out, conf_out);
    if (rc != 0)
        return rc;
    export_file(s, *index_out, final, sizeof final);
    rc = rename(tmp, final) == 0 ? 0 : err_from_errno(errno);
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/* Checks a received file and stages it (see the file comment). */
static bool stage(struct server *s, struct server_snap_recv *r)
{
    char dir[SNAP_PATH_MAX], st[SNAP_PATH_MAX + 32], data[SNAP_PATH_MAX + 48];
    snap_dir(s, dir, sizeof dir);
    pathf(st, sizeof st, "%s/.recv-%016" PRIx64 ".d", dir, r->index);
    pathf(data, sizeof data, "%s/data.mdb", st);
    rm_staging(st);
    uint64_t index = 0;
    int conf_rc = 0;
    int rc = mkdir(st, 0700) == 0 ? 0 : err_from_errno(errno);
    if (rc == 0)
        rc = copy_file(r->path, data);
    if (rc == 0)
        rc = read_meta(st, &index, &r->conf, &conf_rc);
    if (rc == 0 && index != r->index)
        rc = ERR_CORRUPT;
    r->has_conf = rc == 0 && conf_rc == 0;
    if (rc != 0) {
        log_error("etcdserver", "dropping the snapshot received at index "
                  "%" PRIu64 " (%s; its store is at index %" PRIu64 ")",
                  r->index, err_str(rc), index);
        rm_staging(st);
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
    if (rc != 0 && !atomic_load(&s->stopping) && rc != ERR_STOPPED)
        log_warn("etcdserver", "snapshot of the store at index >= %"
                 PRIu64 " failed: %s (pinning it)", target, err_str(rc));
    pthread_mutex_lock(&sn->mu);
    sn->pin_done = rc == 0 ? index : 0;
    if (rc == 0)
        sn->pin_conf = conf;
    sn->pin_failed = rc != 0;
}

static void *worker_main(void *arg)
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

/* --- life cycle ------------------------------------------------------------ */

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
        pathf(p, sizeof p, "%s/%s", dir, e->d_name);
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
    snap_dir(s, dir, sizeof dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    rm_exports(dir);
    return 0;
}

int server__snap_start(struct server *s)
{
    if (pthread_create(&s->snap.thread, NULL, worker_main, s) != 0)
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
    export_drop(s);
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
    int rc = list_snaps(s, &v, &n);
    if (rc != 0 || n == 0)
        return rc;
    char src[SNAP_PATH_MAX], dst[SNAP_PATH_MAX + 16], tmp[SNAP_PATH_MAX + 16];
    snap_file(s, v[n - 1], src, sizeof src);
    mem_free(v);
    pathf(dst, sizeof dst, "%s/data.mdb", db);
    pathf(tmp, sizeof tmp, "%s/data.mdb.tmp", db);
    log_warn("etcdserver", "rebuilding the store from %s and the WAL after "
             "it", src);
    if (mkdir(db, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    rc = copy_file(src, tmp);
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
            prune(s);
        return rc;
    }
    char src[SNAP_PATH_MAX];
    snap_file(s, mark.index, src, sizeof src);
    if (access(src, R_OK) != 0) {
        log_error("etcdserver", "the store is at index %" PRIu64 " but the "
                  "WAL has a snapshot at %" PRIu64 " and %s is missing", ci,
                  mark.index, src);
        return ERR_CORRUPT;
    }
    log_warn("etcdserver", "the store (index %" PRIu64 ") is behind the "
             "snapshot at index %" PRIu64 " (a crash while installing it); "
             "restoring it from %s", ci, mark.index, src);
    rc = store_replace(s, src, false); /* pins the new store */
    if (rc == 0)
        prune(s);
    return rc;
}

/* --- the raft thread ---------------------------------------------------- */

/* Asks the worker for an export (a copy to send) at >= target. */
static void ask_copy(struct server *s, uint64_t target)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    if (!sn->copy_busy) {
        sn->copy_busy = true;
        sn->copy_want = target > 0 ? target : 1;
        pthread_cond_signal(&sn->cv);
    }
    pthread_mutex_unlock(&sn->mu);
}

/* Asks the worker for a pin at >= target (for raft: to become raft's
 * next snapshot; else only to bound the store's growth).  False: one is
 * under way. */
static bool ask_pin(struct server *s, uint64_t target, bool for_raft)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    bool asked = !sn->pin_busy;
    if (asked) {
        sn->pin_busy = true;
        sn->pin_want = target > 0 ? target : 1;
        sn->pin_raft = for_raft;
        pthread_cond_signal(&sn->cv);
    }
    pthread_mutex_unlock(&sn->mu);
    return asked;
}

/* Truncates raft's log and the WAL behind snapshot index `index`. */
static void release_behind(struct server *s, uint64_t index)
{
    if (index <= SNAP_LOG_KEEP)
        return;
    raft_log_compact(s->node.raft, index - SNAP_LOG_KEEP);
    int rc = wal_release_before(s->wal, index - SNAP_LOG_KEEP);
    if (rc != 0)
        log_warn("etcdserver", "cannot release WAL segments: %s",
                 err_str(rc));
}

static void save_marker(struct server *s, uint64_t index, uint64_t term)
{
    struct wal_snapshot ws = {index, term};
    int rc = wal_save_snapshot(s->wal, &ws);
    if (rc != 0) {
        log_error("etcdserver", "cannot write a WAL snapshot marker: %s; "
                  "stopping", err_str(rc));
        abort();
    }
}

/* Raft thread: raft's newest snapshot is (index, term, conf). */
static void set_newest(struct server *s, uint64_t index, uint64_t term,
                       const struct raft_conf_state *conf)
{
    struct server_snap *sn = &s->snap;
    CHECK(conf != NULL && index > 0);
    pthread_mutex_lock(&sn->mu);
    sn->newest_index = index;
    sn->newest_term = term;
    sn->newest_conf = *conf;
    pthread_mutex_unlock(&sn->mu);
}

int server__snap_newest(struct server *s, struct raft_snapshot_meta *out)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    *out = (struct raft_snapshot_meta){sn->newest_index, sn->newest_term,
                                       sn->newest_conf};
    pthread_mutex_unlock(&sn->mu);
    return out->index > 0 ? 0 : ERR_NOTFOUND;
}

/* A durable pin at index exists: it becomes raft's snapshot and the WAL's
 * marker, and the logs behind it are dropped.  Its metadata is the state
 * as of index: conf is the pinned store's members, not raft's membership
 * now (conf changes after index may already have taken effect in raft;
 * the log after index re-delivers them). */
static void copy_done(struct server *s, uint64_t index,
                      const struct raft_conf_state *conf)
{
    prune(s);
    if (index < s->snap.newest_index || index == 0 || conf->n_voters == 0)
        return; /* before an installed snapshot, or nothing applied yet */
    raft_term term;
    int rc = raft_term_at(s->node.raft, index, &term);
    if (rc != 0) {
        log_warn("etcdserver", "snapshot at index %" PRIu64 " dropped: its "
                 "term is unknown (%s)", index, err_str(rc));
        return;
    }
    if (index > s->node.snap_index) {
        rc = raft_snapshot_create(s->node.raft, index, conf, NULL, 0);
        if (rc == 0)
            s->node.snap_index = index;
        else
            log_warn("etcdserver", "raft refused the snapshot at index %"
                     PRIu64 ": %s", index, err_str(rc));
    }
    set_newest(s, index, term, conf);
    save_marker(s, index, term);
    release_behind(s, s->node.snap_index);
    char cs[1024];
    conf_fmt(conf, cs, sizeof cs);
    log_info("etcdserver", "saved snapshot of the store at index %" PRIu64
             " (term %" PRIu64 ", %s; pinned, not copied)", index, term, cs);
}

/* An export at index was made: it replaces the previous one. */
static void export_done(struct server *s, uint64_t index,
                        const struct raft_conf_state *conf)
{
    struct server_snap *sn = &s->snap;
    raft_term term;
    int rc = raft_term_at(s->node.raft, index, &term);
    if (rc != 0 || index <= sn->export_index) {
        char p[SNAP_PATH_MAX];
        export_file(s, index, p, sizeof p);
        if (index != sn->export_index)
            unlink(p);
        if (rc != 0)
            log_warn("etcdserver", "copy at index %" PRIu64 " dropped: its "
                     "term is unknown (%s)", index, err_str(rc));
        return;
    }
    export_drop(s);
    sn->export_index = index;
    sn->export_term = term;
    sn->export_conf = *conf;
    sn->export_ms = server__now_ms();
}

/* Sends the export to w->to (its index >= w->index). */
static void send_one(struct server *s, struct server_snap_want *w)
{
    char path[SNAP_PATH_MAX];
    export_file(s, s->snap.export_index, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc = fd < 0 ? err_from_errno(errno) : 0;
    if (rc == 0 && fstat(fd, &st) != 0)
        rc = err_from_errno(errno);
    if (rc == 0) {
        /* The metadata of the copy sent, as of its index. */
        struct raft_snapshot snap = {
            .meta = {s->snap.export_index, s->snap.export_term,
                     s->snap.export_conf}};
        struct raft_msg m = {.type = RAFT_MSG_SNAP, .from = s->member_id,
                             .to = w->to, .term = w->term, .snapshot = &snap};
        rc = peer_send_snapshot(s->transport, w->to, &m, fd,
                                (uint64_t)st.st_size);
    }
    if (rc == 0) {
        log_info("etcdserver", "sending snapshot at index %" PRIu64 " (%lld "
                 "bytes) to %016" PRIx64, s->snap.export_index,
                 (long long)st.st_size, w->to);
        w->sent_index = s->snap.export_index;
        w->sent_ms = server__now_ms();
        s->snap.export_ms = w->sent_ms;
    }
    if (rc != 0 && fd >= 0)
        close(fd);
    if (rc != 0 && rc != ERR_BUSY) {
        log_warn("etcdserver", "cannot send a snapshot to %016" PRIx64 ": %s",
                 w->to, err_str(rc));
        raft_report_snapshot(s->node.raft, w->to, false);
    }
    w->pending = false;
}

void server__snap_want_send(struct server *s, const struct raft_msg *m)
{
    struct server_snap_want *free_slot = NULL;
    uint64_t index = m->snapshot != NULL ? m->snapshot->meta.index : 0;
    for (size_t i = 0; i < SERVER_MEMBERS_MAX; i++) {
        struct server_snap_want *w = &s->snap.want[i];
        if (w->to == m->to || (w->to == 0 && free_slot == NULL))
            free_slot = w;
        if (w->to == m->to)
            break;
    }
    if (free_slot == NULL || s->transport == NULL) {
        /* Inside a Ready raft takes no report: queue it. */
        pthread_mutex_lock(&s->node.ev_mu);
        if (s->node.n_reports < SERVER_MEMBERS_MAX * 3)
            s->node.reports[s->node.n_reports++] = (struct server_report){
                m->to, SERVER_REPORT_SNAP_FAIL};
        pthread_mutex_unlock(&s->node.ev_mu);
        return;
    }
    free_slot->to = m->to;
    free_slot->pending = true;
    free_slot->index = index;
    free_slot->term = m->term;
}

/* The follower took our copy a moment ago and is still installing it:
 * raft, seeing its log still behind, asks again.  Wait a little rather
 * than send the same file again; drop the request once raft no longer
 * waits for a snapshot (the follower acknowledged the installed one). */
static bool resent_too_soon(struct server *s, struct server_snap_want *w)
{
    if (w->sent_index != s->snap.export_index ||
        server__now_ms() >= w->sent_ms + SNAP_RESEND_MS)
        return false;
    struct raft_status st;
    raft_status(s->node.raft, &st);
    for (uint32_t i = 0; i < st.n_progress; i++)
        if (st.progress[i].id == w->to &&
            st.progress[i].state != RAFT_PROGRESS_SNAPSHOT)
            w->pending = false;
    return true;
}

/* Removes what a stepped snapshot left if raft did not install it. */
static void cleanup_stepped(struct server *s)
{
    uint64_t index = s->snap.stepped_index;
    s->snap.stepped_index = 0;
    if (index == 0 || index == s->snap.installed_index)
        return;
    char dir[SNAP_PATH_MAX], st[SNAP_PATH_MAX + 32], f[SNAP_PATH_MAX];
    snap_dir(s, dir, sizeof dir);
    pathf(st, sizeof st, "%s/.recv-%016" PRIx64 ".d", dir, index);
    rm_staging(st);
    snap_file(s, index, f, sizeof f);
    unlink(f);
}

/* The ConfState raft installs with a received snapshot is the one its
 * store holds (as of its index): a leader that described it otherwise
 * (cetcd before this check sent its membership at send time) would leave
 * raft's membership inconsistent with the store and with the conf changes
 * the log re-delivers after the index. */
static void conf_from_store(struct server_snap_recv *r, struct raft_msg *m,
                            struct raft_snapshot *fixed)
{
    if (!r->has_conf || m->snapshot == NULL ||
        conf_same(&r->conf, &m->snapshot->meta.conf))
        return;
    char got[1024], want[1024];
    conf_fmt(&m->snapshot->meta.conf, got, sizeof got);
    conf_fmt(&r->conf, want, sizeof want);
    log_warn("etcdserver", "the snapshot at index %" PRIu64 " from %016"
             PRIx64 " says %s, its store holds %s: installing the store's",
             r->index, m->from, got, want);
    *fixed = *m->snapshot;
    fixed->meta.conf = r->conf;
    m->snapshot = fixed;
}

/* Steps one staged snapshot into raft; the Ready installs it. */
static void step_staged(struct server *s, struct server_snap_recv *r)
{
    struct raft_msg m;
    struct raft_snapshot fixed;
    int rc = raft_msg_decode(r->msg, r->len, &m);
    if (rc == 0) {
        conf_from_store(r, &m, &fixed);
        s->snap.stepped_index = r->index;
        rc = raft_step(s->node.raft, &m);
        raft_msg_release(&m);
    }
    if (rc != 0)
        log_warn("etcdserver", "snapshot at index %" PRIu64 " not taken: %s",
                 r->index, err_str(rc));
    mem_free(r);
}

int server__snap_pin_now(struct server *s)
{
    uint64_t target = atomic_load(&s->applied_index);
    uint64_t deadline = server__now_ms() + SNAP_APPLY_WAIT_MS;
    struct raft_snapshot_meta m;
    for (;;) {
        if (server__snap_newest(s, &m) == 0 && m.index >= target)
            return 0;
        if (server__now_ms() >= deadline)
            return ERR_TIMEOUT;
        ask_pin(s, target, true); /* a no-op while one is under way */
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* A finished job's result, taken under mu: busy, want (0 once taken by
 * the worker), done (its index, 0 on failure) and failed. */
static bool take(bool *busy, uint64_t want, uint64_t *done, bool *failed,
                 uint64_t *index_out)
{
    bool finished = *busy && want == 0 && (*done != 0 || *failed);
    *index_out = finished ? *done : 0;
    if (finished) {
        *busy = false;
        *done = 0;
        *failed = false;
    }
    return finished;
}

/* Raft thread: takes what the worker finished (pins, exports, staged). */
static void take_results(struct server *s)
{
    struct server_snap *sn = &s->snap;
    uint64_t pin = 0, exp = 0;
    pthread_mutex_lock(&sn->mu);
    struct raft_conf_state pin_conf = sn->pin_conf, exp_conf = sn->copy_conf;
    bool for_raft = sn->pin_raft;
    take(&sn->pin_busy, sn->pin_want, &sn->pin_done, &sn->pin_failed, &pin);
    take(&sn->copy_busy, sn->copy_want, &sn->copy_done, &sn->copy_failed,
         &exp);
    struct server_snap_recv *r = sn->staged_head;
    if (r != NULL) {
        sn->staged_head = r->next;
        sn->n_recv--;
    }
    pthread_mutex_unlock(&sn->mu);
    if (pin != 0 && for_raft)
        copy_done(s, pin, &pin_conf);
    else if (pin != 0)
        prune(s); /* a pin that bounds the store's growth only */
    if (exp != 0)
        export_done(s, exp, &exp_conf);
    if (r != NULL)
        step_staged(s, r);
}

void server__snap_tick(struct server *s)
{
    struct server_snap *sn = &s->snap;
    cleanup_stepped(s);
    take_results(s);
    uint64_t every = s->cfg.snapshot_count ? s->cfg.snapshot_count : 100000;
    bool due = s->node.applied_raft >= sn->copy_asked_at + every;
    if ((due || server__pin_grown(s)) && ask_pin(s, s->node.applied_raft, due) &&
        due)
        sn->copy_asked_at = s->node.applied_raft;
    bool pending = false;
    for (size_t i = 0; i < SERVER_MEMBERS_MAX; i++) {
        struct server_snap_want *w = &sn->want[i];
        if (w->to == 0 || !w->pending)
            continue;
        pending = true;
        if (resent_too_soon(s, w))
            continue;
        if (sn->export_index > 0 && sn->export_index >= w->index)
            send_one(s, w);
        else
            ask_copy(s, w->index > s->node.applied_raft ? s->node.applied_raft
                                                   : w->index);
    }
    if (!pending && sn->export_index != 0 &&
        server__now_ms() >= sn->export_ms + SNAP_EXPORT_KEEP_MS)
        export_drop(s);
}

int server__snap_install(struct server *s, const struct raft_snapshot *snap)
{
    uint64_t index = snap->meta.index, term = snap->meta.term;
    char dir[SNAP_PATH_MAX], st[SNAP_PATH_MAX + 32], data[SNAP_PATH_MAX + 48];
    snap_dir(s, dir, sizeof dir);
    pathf(st, sizeof st, "%s/.recv-%016" PRIx64 ".d", dir, index);
    pathf(data, sizeof data, "%s/data.mdb", st);
    if (access(data, R_OK) != 0) {
        log_error("etcdserver", "raft installed a snapshot at index %" PRIu64
                  " but no store for it is staged", index);
        return ERR_CORRUPT;
    }
    save_marker(s, index, term);
    pthread_mutex_lock(&s->apply_mu);
    server__apply_drain_locked(s);
    gate_close(s);
    int rc = store_replace(s, data, true);
    gate_open(s);
    pthread_mutex_unlock(&s->apply_mu);
    rm_staging(st);
    if (rc == 0 && mvcc_consistent_index(s->mvcc) != index)
        rc = ERR_CORRUPT;
    if (rc != 0)
        return rc;
    s->node.applied_raft = index;
    s->node.snap_index = index;
    s->snap.copy_asked_at = index;
    s->snap.installed_index = index;
    set_newest(s, index, term, &snap->meta.conf);
    atomic_store(&s->committed_index, index);
    atomic_store(&s->applied_index, index);
    pthread_mutex_lock(&s->applied_mu);
    pthread_cond_broadcast(&s->applied_cv);
    pthread_mutex_unlock(&s->applied_mu);
    int wrc = wal_release_before(s->wal, index > SNAP_LOG_KEEP
                                             ? index - SNAP_LOG_KEEP : 0);
    if (wrc != 0)
        log_warn("etcdserver", "cannot release WAL segments: %s",
                 err_str(wrc));
    prune(s);
    char cs[1024];
    conf_fmt(&snap->meta.conf, cs, sizeof cs);
    log_info("etcdserver", "installed snapshot of the store at index %" PRIu64
             " (term %" PRIu64 ", %s) from the leader", index, term, cs);
    return 0;
}

int server__snap_received(struct server *s, const struct raft_msg *m,
                          const char *path)
{
    if (m->snapshot == NULL || m->snapshot->meta.index == 0 ||
        strlen(path) >= SNAP_PATH_MAX)
        return ERR_INVAL;
    size_t len = raft_msg_encoded_size(m);
    struct server_snap_recv *r = mem_malloc(sizeof *r + len);
    if (r == NULL)
        return ERR_NOMEM;
    int rc = raft_msg_encode(m, r->msg, len, &r->len);
    if (rc != 0) {
        mem_free(r);
        return rc;
    }
    r->next = NULL;
    r->index = m->snapshot->meta.index;
    pathf(r->path, sizeof r->path, "%s", path);
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    /* The leader resends while we stage (raft probes, finds the log
     * still behind, sends again).  The transport stored the same index
     * under the same name: the queued one reads it; do not refuse (the
     * transport would delete that very file). */
    bool dup = sn->staging_index == r->index;
    for (int list = 0; list < 2; list++)
        for (struct server_snap_recv *q = list ? sn->staged_head
                                               : sn->recv_head;
             q != NULL; q = q->next)
            dup = dup || q->index == r->index;
    if (dup) {
        pthread_mutex_unlock(&sn->mu);
        mem_free(r);
        return 0;
    }
    if (sn->n_recv >= SERVER_SNAP_RECV_MAX || !sn->started) {
        pthread_mutex_unlock(&sn->mu);
        mem_free(r);
        return ERR_BUSY;
    }
    struct server_snap_recv **p = &sn->recv_head;
    while (*p != NULL)
        p = &(*p)->next;
    *p = r;
    sn->n_recv++;
    pthread_cond_signal(&sn->cv);
    pthread_mutex_unlock(&sn->mu);
    log_info("etcdserver", "received snapshot at index %" PRIu64 " (term %"
             PRIu64 ") from %016" PRIx64, r->index, m->snapshot->meta.term,
             m->from);
    return 0;
}
