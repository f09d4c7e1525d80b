/* fs.c - file-system helpers (see fs.h). */
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "util/err.h"

int fs_mkdir_p(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ERR_INVAL;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return err_from_errno(errno);
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    return 0;
}

int fs_write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return err_from_errno(errno);
        if (w == 0)
            return ERR_IO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* at_all is the loop of fs_pread_all and fs_pwrite_all: it moves all n
 * bytes at offset off, retrying short transfers and EINTR; a transfer of
 * nothing (end of file, or a write that makes no progress) is ERR_IO. */
static int at_all(int fd, unsigned char *p, size_t n, uint64_t off,
                  bool writing)
{
    while (n > 0) {
        ssize_t r = writing ? pwrite(fd, p, n, (off_t)off)
                            : pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return err_from_errno(errno);
        if (r == 0)
            return ERR_IO;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int fs_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    return at_all(fd, buf, n, off, false);
}

int fs_pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
    /* at_all only reads from p when writing */
    return at_all(fd, (unsigned char *)(uintptr_t)buf, n, off, true);
}

int fs_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return err_from_errno(errno);
    int rc = fsync(fd) == 0 ? 0 : err_from_errno(errno);
    close(fd);
    return rc;
}

int fs_write_file(const char *path, const void *buf, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_from_errno(errno);
    int rc = fs_write_all(fd, buf, n);
    if (rc == 0 && fsync(fd) != 0)
        rc = err_from_errno(errno);
    if (close(fd) != 0 && rc == 0)
        rc = err_from_errno(errno);
    return rc;
}
