/*
 * snap_files.c - the files of <member>/snap (their layout is in
 * snapshot.c's header) and the helpers the snapshot files share: paths,
 * a file copy, reading a store copy's consistent index and members,
 * listing and pruning received snap files, the export file.
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

/* snprintf for paths (a wrapper: paths are bounded by member_dir, and a
 * truncated one only fails the open/rename that uses it). */
__attribute__((format(printf, 3, 4))) void
server__pathf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

void server__snap_dir(const struct server *s, char *buf, size_t cap)
{
    server__pathf(buf, cap, "%s/snap", s->member_dir);
}

void server__snap_file(const struct server *s, uint64_t index, char *buf,
                       size_t cap)
{
    server__pathf(buf, cap, "%s/snap/%016" PRIx64 ".snap.db", s->member_dir,
             index);
}

void server__db_dir(const struct server *s, char *buf, size_t cap)
{
    server__pathf(buf, cap, "%s/db", s->member_dir);
}

/* Removes a staging dir and the two files LMDB keeps there. */
void server__snap_rm_staging(const char *dir)
{
    char p[SNAP_PATH_MAX + 16];
    server__pathf(p, sizeof p, "%s/data.mdb", dir);
    unlink(p);
    server__pathf(p, sizeof p, "%s/lock.mdb", dir);
    unlink(p);
    rmdir(dir);
}

/* Copies src to dst (created or truncated) and fsyncs dst. */
int server__copy_file(const char *src, const char *dst)
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
int server__snap_read_meta(const char *dir, uint64_t *index_out,
                           struct raft_conf_state *conf_out,
                           int *conf_rc_out)
{
    struct backend_options bo = {.no_fsync = true, .max_readers = 8,
                                .no_ahead = true};
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
void server__conf_fmt(const struct raft_conf_state *cs, char *buf,
                      size_t cap)
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
bool server__conf_same(const struct raft_conf_state *a,
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
int server__snap_list(const struct server *s, uint64_t **out, size_t *n_out)
{
    char dir[SNAP_PATH_MAX];
    server__snap_dir(s, dir, sizeof dir);
    return server__snap_indexes(dir, ".snap.db", out, n_out);
}

/* Removes the received snap files the store has gone past: it is pinned
 * at or after their index, so neither a restart nor a rebuild needs them. */
void server__snap_prune(struct server *s)
{
    uint64_t *v;
    size_t n;
    pthread_mutex_lock(&s->snap.mu);
    uint64_t pinned = s->snap.pin_index;
    pthread_mutex_unlock(&s->snap.mu);
    if (pinned == 0 || server__snap_list(s, &v, &n) != 0)
        return;
    for (size_t i = 0; i < n && v[i] <= pinned; i++) {
        char p[SNAP_PATH_MAX];
        server__snap_file(s, v[i], p, sizeof p);
        unlink(p);
    }
    mem_free(v);
}

void server__snap_export_file(const struct server *s, uint64_t index,
                              char *buf, size_t cap)
{
    server__pathf(buf, cap, "%s/snap/export-%016" PRIx64 ".db", s->member_dir,
          index);
}

/* Raft thread: removes the export file (a send in flight keeps its fd). */
void server__snap_export_drop(struct server *s)
{
    if (s->snap.export_index == 0)
        return;
    char p[SNAP_PATH_MAX];
    server__snap_export_file(s, s->snap.export_index, p, sizeof p);
    unlink(p);
    s->snap.export_index = 0;
}
