/*
 * boot_guard.c - the store's state file: "<db_dir>.state" holds one line,
 * "<boot id> clean|dirty\n", replaced atomically (write tmp, fsync, rename,
 * fsync dir).
 */
#include "server/boot_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fs.h"

static const char *override_id;

void boot_guard_set_boot_id(const char *id)
{
    override_id = id;
}

static void boot_id(char *buf, size_t cap)
{
    if (override_id != NULL) {
        snprintf(buf, cap, "%s", override_id);
        return;
    }
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL)
        return;
    if (fgets(buf, (int)cap, f) == NULL)
        snprintf(buf, cap, "unknown");
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

int boot_guard_check(const char *db_dir, bool *trusted_out)
{
    char path[4200], line[256], id[128], state[16];
    snprintf(path, sizeof path, "%s.state", db_dir);
    *trusted_out = true;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT ? 0 : err_from_errno(errno);
    bool ok = fgets(line, sizeof line, f) != NULL &&
              sscanf(line, "%127s %15s", id, state) == 2;
    fclose(f);
    if (!ok) {
        /* Written by rename, so never torn; unreadable means we cannot
         * vouch for the store. */
        *trusted_out = false;
        return 0;
    }
    char now[128];
    boot_id(now, sizeof now);
    if (strcmp(state, "clean") != 0 && strcmp(id, now) != 0)
        *trusted_out = false;
    return 0;
}

static int fsync_dir_of(const char *path)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else
        *slash = '\0';
    return fs_fsync_dir(dir);
}

static int state_write(const char *db_dir, const char *id, bool clean)
{
    char path[4200], tmp[4300], line[256];
    snprintf(path, sizeof path, "%s.state", db_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int n = snprintf(line, sizeof line, "%s %s\n", id,
                     clean ? "clean" : "dirty");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return err_from_errno(errno);
    int rc = 0;
    if (write(fd, line, (size_t)n) != n || fsync(fd) != 0)
        rc = err_from_errno(errno ? errno : EIO);
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = err_from_errno(errno);
    if (rc == 0)
        rc = fsync_dir_of(path);
    return rc;
}

/* The state file already says "dirty" for this boot (it was written
 * durably): marking it again would only cost a store swap (a snapshot
 * install, a defragmentation) two fsyncs while requests wait. */
static bool dirty_now(const char *db_dir, const char *id)
{
    char path[4200], line[256], want[256];
    snprintf(path, sizeof path, "%s.state", db_dir);
    snprintf(want, sizeof want, "%s dirty\n", id);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool same = fgets(line, sizeof line, f) != NULL && strcmp(line, want) == 0;
    fclose(f);
    return same;
}

int boot_guard_mark(const char *db_dir, bool clean)
{
    char id[128];
    boot_id(id, sizeof id);
    if (!clean && dirty_now(db_dir, id))
        return 0;
    return state_write(db_dir, id, clean);
}

int boot_guard_distrust(const char *db_dir)
{
    /* No boot has this id, so the next check rebuilds the store. */
    return state_write(db_dir, "distrusted", false);
}
