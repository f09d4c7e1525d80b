/*
 * members_files.c - the member's two files beside the store (members.c
 * has the table itself): <member>/ids, who this member is, and
 * <member>/seed, the members its table started from.  Both are written
 * atomically and durably (file_replace) and are not in the store, which a
 * snapshot or a rebuild replaces.  Start-up only (server__members_open).
 */
#include "server/members.h"

#include "util/check.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

/* <member>/ids: this member's id and the cluster id, as 32 hex digits
 * and a newline.  Not in the store: a snapshot from the leader replaces
 * the store but not who we are. */
static void ids_path(struct server *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/ids", s->member_dir);
}

/* file_replace writes the n bytes of buf as the file at path, durably and
 * atomically (a 0600 temporary file, fsync, rename, fsync of the dir), so
 * that a crash leaves the old file or the new one, never a torn one. */
static int file_replace(const char *path, const void *buf, size_t n)
{
    char tmp[4300], dir[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = fs_write_file(tmp, buf, n);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = err_from_errno(errno);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    int dfd = rc == 0 && slash != NULL ? open(dir, O_RDONLY | O_DIRECTORY |
                                                      O_CLOEXEC)
                                       : -1;
    if (dfd >= 0) {
        if (fsync(dfd) != 0)
            rc = err_from_errno(errno);
        close(dfd);
    }
    if (rc != 0)
        unlink(tmp);
    return rc;
}

int server__ms_ids_write(struct server *s)
{
    char path[4200], line[64];
    ids_path(s, path, sizeof path);
    int n = snprintf(line, sizeof line, "%016llx%016llx\n",
                     (unsigned long long)s->member_id,
                     (unsigned long long)s->cluster_id);
    CHECK(n == 33);
    return file_replace(path, line, (size_t)n);
}

/* 0 and the ids, ERR_NOTFOUND when the file is absent, or ERR_CORRUPT
 * when it does not start with 32 hex digits naming two non-zero ids
 * (strtoull would take a damaged file for other ids, or for 0). */
int server__ms_ids_read(struct server *s, uint8_t meta[16])
{
    char path[4200], line[64];
    ids_path(s, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return ERR_NOTFOUND;
    bool ok = fgets(line, sizeof line, f) != NULL && strlen(line) >= 32;
    fclose(f);
    for (int i = 0; ok && i < 32; i++)
        ok = isxdigit((unsigned char)line[i]) != 0;
    if (ok) {
        char a[17], b[17];
        memcpy(a, line, 16);
        memcpy(b, line + 16, 16);
        a[16] = b[16] = '\0';
        server__be64_put(meta, strtoull(a, NULL, 16));
        server__be64_put(meta + 8, strtoull(b, NULL, 16));
        ok = server__be64_get(meta) != 0 && server__be64_get(meta + 8) != 0;
    }
    if (!ok)
        log_error("etcdserver", "%s is corrupt: it must hold the member id "
                  "and the cluster id as 32 hex digits", path);
    return ok ? 0 : ERR_CORRUPT;
}


/* <member>/seed keeps the members a new member seeded its table with
 * (--initial-cluster, or the running cluster's answer to a join), so that a
 * store rebuilt from the WAL after the flags changed (etcd ignores the
 * --initial-* flags once a member has data) starts from the same table;
 * the WAL's entries then replay every change made since.  Like ids, it is
 * not in the store, which a rebuild replaces.
 *
 *   repeated: u32 len (big-endian), len bytes of an etcdserverpb.Member
 *
 * Written once, before the WAL is created, by file_replace. */
#define SEED_RECORD_MAX 4096

static void seed_path(struct server *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/seed", s->member_dir);
}

int server__ms_seed_save(struct server *s)
{
    struct server_ms *ms = s->ms;
    size_t cap = ms->n * (SEED_RECORD_MAX + 4), used = 0;
    uint8_t *buf = mem_malloc(cap > 0 ? cap : 1);
    if (buf == NULL)
        return ERR_NOMEM;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ms->n; i++) {
        size_t len;
        rc = server__ms_member_pack(&ms->m[i], buf + used + 4, SEED_RECORD_MAX, &len);
        for (int k = 0; rc == 0 && k < 4; k++)
            buf[used + (size_t)k] = (uint8_t)(len >> (24 - 8 * k));
        used += rc == 0 ? len + 4 : 0;
    }
    CHECK(used <= cap);
    char path[4200];
    seed_path(s, path, sizeof path);
    if (rc == 0)
        rc = file_replace(path, buf, used);
    mem_free(buf);
    return rc;
}

/* seed_parse fills the table from the seed bytes (p, n); false when they
 * are not a list of valid Member records. */
static bool seed_parse(struct server_ms *ms, const uint8_t *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        if (n - off < 4)
            return false;
        size_t len = (size_t)p[off] << 24 | (size_t)p[off + 1] << 16 |
                     (size_t)p[off + 2] << 8 | p[off + 3];
        off += 4;
        if (len > n - off || len > SEED_RECORD_MAX)
            return false;
        Etcdserverpb__Member *pb =
            etcdserverpb__member__unpack(NULL, len, p + off);
        if (pb == NULL || pb->id == 0) {
            if (pb != NULL)
                etcdserverpb__member__free_unpacked(pb, NULL);
            return false;
        }
        struct server_member_info *m = server__ms_slot(ms, pb->id);
        if (m != NULL)
            server__ms_info_from_pb(m, pb);
        etcdserverpb__member__free_unpacked(pb, NULL);
        off += len;
    }
    return ms->n > 0;
}

/* server__ms_seed_load: 0 and the table seeded from <member>/seed, ERR_NOTFOUND when
 * there is none, or ERR_CORRUPT (logged). */
int server__ms_seed_load(struct server *s)
{
    char path[4200];
    seed_path(s, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT ? ERR_NOTFOUND : err_from_errno(errno);
    size_t cap = SERVER_MEMBERS_MAX * (SEED_RECORD_MAX + 4) + 1;
    uint8_t *buf = mem_malloc(cap);
    size_t n = buf != NULL ? fread(buf, 1, cap, f) : 0;
    bool ok = buf != NULL && ferror(f) == 0 && n < cap &&
              seed_parse(s->ms, buf, n);
    fclose(f);
    mem_free(buf);
    if (buf == NULL)
        return ERR_NOMEM;
    if (!ok) {
        s->ms->n = 0;
        log_error("etcdserver", "%s is corrupt: it must hold the members "
                  "this member started with", path);
        return ERR_CORRUPT;
    }
    return 0;
}
