/*
 * import_etcd.c - cetcd started on an etcd data dir (server.h
 * server_import_etcd): the new member dir built beside etcd's, then the
 * two renames.
 *
 * What the new member dir holds (docs/ARCHITECTURE.md "On-disk layout"):
 *   db/data.mdb  the store: every version of etcd's `key` bucket with its
 *                revisions, compacted where etcd compacted, the consistent
 *                index of etcd's db; leases, auth, members, alarms
 *                (import_db.c)
 *   wal/         a snapshot marker at the consistent index (its term from
 *                etcd's log), etcd's entries after it made cetcd's
 *                (import_wal.c), etcd's hard state (term, vote, commit)
 *   ids, seed    etcd's member and cluster ids; the members table
 * cetcd then starts on it as on its own data: raft from the marker, the
 * entries after it applied in order before serving (raft_open.c).
 *
 * Crash safety: nothing is written into etcd's files; member.import is
 * removed and built again by any later start until the last rename; every
 * file of it is fsynced (LMDB syncs its commit, the WAL its records, ids and
 * seed are written and fsynced, each dir fsynced) before the renames.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raft/raft.h"
#include "server/import_int.h"
#include "server/members.h"
#include "util/check.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

#define LOG_MOD "etcdserver"

static bool exists(const char *fmt, const char *dir)
{
    char p[4400];
    struct stat st;
    snprintf(p, sizeof p, fmt, dir);
    return stat(p, &st) == 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes dir and everything in it (a left-over of an earlier import). */
static int rm_rf(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0 : err_from_errno(errno);
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return err_from_errno(errno);
    return 0;
}

/* <tmp>/ids and <tmp>/seed (members_files.c's formats). */
static int ids_seed_write(struct import *im)
{
    char path[4400], line[64];
    snprintf(path, sizeof path, "%s/ids", im->tmp);
    int n = snprintf(line, sizeof line, "%016" PRIx64 "%016" PRIx64 "\n",
                     im->node_id, im->cluster_id);
    int rc = fs_write_file(path, line, (size_t)n);
    uint8_t *buf = mem_malloc(im->n_m * 4100 + 1);
    size_t used = 0;
    if (rc == 0 && buf == NULL)
        rc = ERR_NOMEM;
    for (size_t i = 0; rc == 0 && i < im->n_m; i++) {
        size_t len;
        rc = server__ms_member_pack(&im->m[i], buf + used + 4, 4096, &len);
        for (int k = 0; rc == 0 && k < 4; k++)
            buf[used + (size_t)k] = (uint8_t)(len >> (24 - 8 * k));
        used += rc == 0 ? len + 4 : 0;
    }
    snprintf(path, sizeof path, "%s/seed", im->tmp);
    if (rc == 0)
        rc = fs_write_file(path, buf, used);
    mem_free(buf);
    return rc;
}

/* The members table into the store's buckets (members.c's records). */
static int members_write(struct import *im)
{
    struct backend_txn *txn = mvcc_batch_backend_txn(im->b);
    uint8_t key[8], buf[4096];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < im->n_m; i++) {
        size_t len;
        server__be64_put(key, im->m[i].id);
        rc = server__ms_member_pack(&im->m[i], buf, sizeof buf, &len);
        if (rc == 0)
            rc = backend_put(txn, im->b_members, key, 8, buf, len);
    }
    for (size_t i = 0; rc == 0 && i < im->n_removed; i++) {
        server__be64_put(key, im->removed[i]);
        rc = backend_put(txn, im->b_removed, key, 8, "", 0);
    }
    return rc;
}

static int members_check(struct import *im)
{
    int rc = import__members_replay(im);
    if (rc != 0)
        return rc;
    if (im->n_m == 0) {
        log_error(LOG_MOD, "%s: neither the db nor the WAL names the "
                  "members (the WAL starts after its membership entries "
                  "and the db has no members bucket): not importable",
                  im->src);
        return ERR_IMPORT_UNSUPPORTED;
    }
    for (size_t i = 0; i < im->n_m; i++)
        if (im->m[i].id == im->node_id)
            return 0;
    log_error(LOG_MOD, "%s: the WAL's member id %016" PRIx64 " is not one "
              "of the %zu members", im->src, im->node_id, im->n_m);
    return ERR_CORRUPT;
}

static int buckets_open(struct import *im)
{
    int rc = backend_bucket_open(im->be, "lease", 0, &im->b_lease);
    if (rc == 0)
        rc = backend_bucket_open(im->be, "auth", 0, &im->b_auth);
    if (rc == 0)
        rc = backend_bucket_open(im->be, "members", 0, &im->b_members);
    if (rc == 0)
        rc = backend_bucket_open(im->be, "members_removed", 0,
                                 &im->b_removed);
    if (rc == 0)
        rc = backend_bucket_open(im->be, "alarm", 0, &im->b_alarm);
    return rc;
}

/* <tmp>/db: etcd's db in one write txn, committed (and synced: the
 * backend is opened with fsync on) at etcd's consistent index. */
static int store_build(struct import *im)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/db", im->tmp);
    int rc = fs_mkdir_p(dir);
    if (rc == 0)
        rc = backend_open(dir, NULL, &im->be);
    if (rc == 0)
        rc = mvcc_store_open(im->be, NULL, &im->ms);
    if (rc == 0)
        rc = buckets_open(im);
    if (rc == 0)
        rc = mvcc_batch_begin(im->ms, &im->b);
    if (rc != 0)
        return rc;
    rc = import__db_write(im);
    if (rc == 0)
        rc = members_check(im);
    if (rc == 0)
        rc = members_write(im);
    if (rc != 0) {
        mvcc_batch_abort(im->b);
        im->b = NULL;
        return rc;
    }
    rc = mvcc_batch_commit(im->b, im->ci);
    im->b = NULL;
    if (rc == 0)
        rc = backend_sync(im->be);
    return rc;
}

/* Appends entries (translated) after ci and then the hard state. */
static int wal_entries(struct import *im, struct wal *w,
                       const struct wal_hardstate *hs)
{
    size_t first = 0;
    while (first < im->n_ents && im->ents[first].index <= im->ci)
        first++;
    size_t n = im->n_ents - first;
    struct wal_entry *v = mem_calloc(n > 0 ? n : 1, sizeof *v);
    if (v == NULL)
        return ERR_NOMEM;
    int rc = 0;
    /* the messages of a refused entry name etcd's WAL */
    snprintf(im->path, sizeof im->path, "%s/wal", im->src);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct import_ent *e = &im->ents[first + i];
        uint8_t *d;
        size_t len;
        rc = import__translate(im, e, &d, &len);
        v[i] = (struct wal_entry){.index = e->index, .term = e->term,
                                  .type = RAFT_ENTRY_NORMAL, .data = d,
                                  .len = len};
    }
    for (size_t i = 0; rc == 0 && i < n; i += WAL_APPEND_ENTRIES_MAX) {
        size_t k = n - i < WAL_APPEND_ENTRIES_MAX ? n - i
                                                  : WAL_APPEND_ENTRIES_MAX;
        rc = wal_append(w, i + k == n ? hs : NULL, v + i, k);
    }
    if (rc == 0 && n == 0)
        rc = wal_append(w, hs, NULL, 0);
    for (size_t i = 0; i < n; i++)
        mem_free((void *)v[i].data);
    mem_free(v);
    return rc;
}

/* <tmp>/wal: a snapshot marker at ci, the entries after it, the hard
 * state, synced. */
static int wal_build(struct import *im)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/wal", im->tmp);
    struct wal *w = NULL;
    int rc = wal_create(dir, NULL, im->node_id, im->cluster_id, &w);
    if (rc == 0 && im->ci > 0) {
        struct wal_snapshot sn = {im->ci, im->ci_term};
        rc = wal_save_snapshot(w, &sn);
    }
    uint64_t last = im->last_index > im->ci ? im->last_index : im->ci;
    uint64_t commit = im->hs.commit < im->ci ? im->ci : im->hs.commit;
    struct wal_hardstate hs = {
        .term = im->hs.term > im->ci_term ? im->hs.term : im->ci_term,
        .vote = im->hs.vote,
        .commit = commit > last ? last : commit};
    if (rc == 0)
        rc = wal_entries(im, w, &hs);
    if (rc == 0)
        rc = wal_sync(w);
    wal_close(w);
    return rc;
}

/* The log must go on from the db: the term at ci known, and every entry
 * after ci there. */
static int log_check(struct import *im)
{
    im->ci_term = im->ci > 0 ? import__term_at(im, im->ci) : 0;
    if (im->ci_term == 0)
        im->ci_term = im->db_term; /* etcd 3.5 keeps it in meta */
    if (im->ci > 0 && im->ci_term == 0) {
        log_error(LOG_MOD, "%s/wal holds neither entry %" PRIu64 " (the "
                  "db's consistent index) nor a snapshot at it, and the db "
                  "no term (the log holds %" PRIu64 "..%" PRIu64 ")",
                  im->src, im->ci, im->first_index, im->last_index);
        return ERR_CORRUPT;
    }
    if (im->last_index > im->ci && im->first_index > im->ci + 1) {
        log_error(LOG_MOD, "%s/wal starts at entry %" PRIu64 ", after the "
                  "db's consistent index %" PRIu64 ": entries are missing",
                  im->src, im->first_index, im->ci);
        return ERR_CORRUPT;
    }
    return 0;
}

static int build(struct import *im)
{
    int rc = rm_rf(im->tmp);
    if (rc == 0 && mkdir(im->tmp, 0700) != 0)
        rc = err_from_errno(errno);
    if (rc == 0)
        rc = import__db_meta(im);
    if (rc == 0)
        rc = import__wal_read(im);
    if (rc == 0)
        rc = log_check(im);
    if (rc == 0)
        rc = store_build(im);
    if (rc == 0)
        rc = wal_build(im);
    if (rc == 0)
        rc = ids_seed_write(im);
    if (im->ms != NULL)
        mvcc_store_close(im->ms);
    backend_close(im->be);
    im->ms = NULL;
    im->be = NULL;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/db", im->tmp);
    if (rc == 0)
        rc = fs_fsync_dir(dir);
    if (rc == 0)
        rc = fs_fsync_dir(im->tmp);
    return rc;
}

static void import_free(struct import *im)
{
    for (size_t i = 0; i < im->n_ents; i++)
        mem_free(im->ents[i].data);
    mem_free(im->ents);
    mem_free(im->m);
    mem_free(im);
}

static void log_done(const struct import *im, const char *data_dir)
{
    log_info(LOG_MOD, "imported the etcd data dir %s: %" PRIu64 " versions "
             "of keys up to revision %" PRId64 " (compacted at %" PRId64
             "), %" PRIu64 " leases, %" PRIu64 " users, %" PRIu64 " roles, "
             "auth %s, %zu members (this member %016" PRIx64 ", cluster %016"
             PRIx64 "), %" PRIu64 " alarms; raft: consistent index %" PRIu64
             " (term %" PRIu64 "), hard state term %" PRIu64 " vote %016"
             PRIx64 " commit %" PRIu64 ", %" PRIu64 " requests after the "
             "index to apply; etcd's files are kept untouched in "
             "%s/member.etcd", data_dir, im->versions,
             im->last_rev > im->compact ? im->last_rev
                                        : im->compact > 1 ? im->compact : 1,
             im->compact, im->leases, im->users, im->roles,
             im->auth_enabled ? "enabled" : "disabled", im->n_m, im->node_id,
             im->cluster_id, im->alarms, im->ci, im->ci_term, im->hs.term,
             im->hs.vote, im->hs.commit, im->translated, data_dir);
}

/* The renames, each followed by a fsync of data_dir. */
static int swap_in(const char *data_dir, const struct import *im,
                   bool from_member)
{
    char member[4200], saved[4200];
    snprintf(member, sizeof member, "%s/member", data_dir);
    snprintf(saved, sizeof saved, "%s/member.etcd", data_dir);
    int rc = 0;
    if (from_member && rename(member, saved) != 0)
        rc = err_from_errno(errno);
    if (rc == 0)
        rc = fs_fsync_dir(data_dir);
    if (rc == 0 && getenv("CETCD_TEST_IMPORT_CRASH") != NULL)
        _exit(3); /* tests: a crash between the two renames */
    if (rc == 0 && rename(im->tmp, member) != 0)
        rc = err_from_errno(errno);
    if (rc == 0)
        rc = fs_fsync_dir(data_dir);
    return rc;
}

int server_import_etcd(const char *data_dir, const char *wal_dir,
                       bool *imported_out)
{
    CHECK(data_dir != NULL && imported_out != NULL);
    *imported_out = false;
    bool in_member = exists("%s/member/snap/db", data_dir) &&
                     !exists("%s/member/db", data_dir);
    bool in_saved = !exists("%s/member", data_dir) &&
                    exists("%s/member.etcd/snap/db", data_dir);
    if (!in_member && !in_saved)
        return 0;
    if (wal_dir != NULL) {
        log_error(LOG_MOD, "%s holds an etcd data dir: importing it with "
                  "--wal-dir is not supported (etcd's WAL must be in "
                  "member/wal); nothing was changed", data_dir);
        return ERR_IMPORT_LAYOUT;
    }
    if (in_member && exists("%s/member.etcd", data_dir)) {
        log_error(LOG_MOD, "%s holds an etcd data dir to import, but "
                  "%s/member.etcd (where its files are kept) exists already; "
                  "nothing was changed", data_dir, data_dir);
        return ERR_IMPORT_LAYOUT;
    }
    struct import *im = mem_calloc(1, sizeof *im);
    struct server_member_info *m =
        mem_calloc(SERVER_MEMBERS_MAX, sizeof *m);
    if (im == NULL || m == NULL) {
        mem_free(im);
        mem_free(m);
        return ERR_NOMEM;
    }
    im->m = m;
    snprintf(im->src, sizeof im->src, "%s/%s", data_dir,
             in_member ? "member" : "member.etcd");
    snprintf(im->tmp, sizeof im->tmp, "%s/member.import", data_dir);
    log_info(LOG_MOD, "importing the etcd data dir %s into %s",
             im->src, im->tmp);
    int rc = build(im);
    if (rc == 0)
        rc = swap_in(data_dir, im, in_member);
    if (rc == 0)
        log_done(im, data_dir);
    else
        log_error(LOG_MOD, "the import of %s failed (%s): etcd's files are "
                  "unchanged", im->src, err_str(rc));
    if (rc != 0)
        rm_rf(im->tmp);
    *imported_out = rc == 0;
    import_free(im);
    return rc;
}
