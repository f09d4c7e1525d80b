/*
 * fs.h - small file-system helpers shared by the daemon's modules.
 * Thread-safe (no shared state).
 */
#ifndef CETCD_UTIL_FS_H
#define CETCD_UTIL_FS_H

#include <stddef.h>
#include <stdint.h>

/* fs_mkdir_p creates path and its missing parents with mode 0700 (etcd's
 * fileutil.TouchDirAll uses 0700 too); an existing directory is fine.
 * Errors: ERR_INVAL (path too long), and the mkdir errors mapped by
 * err_from_errno (ERR_IO, ERR_NOSPC, ...). */
int fs_mkdir_p(const char *path);

/* fs_write_all writes all n bytes of buf to fd (retrying short writes and
 * EINTR).  Errors: those of write mapped by err_from_errno (ERR_IO,
 * ERR_NOSPC, ...); ERR_IO if write makes no progress. */
int fs_write_all(int fd, const void *buf, size_t n);

/* fs_pwrite_all writes all n bytes of buf at offset off of fd (retrying
 * short writes and EINTR).  Errors: those of pwrite mapped by
 * err_from_errno; ERR_IO if pwrite makes no progress. */
int fs_pwrite_all(int fd, const void *buf, size_t n, uint64_t off);

/* fs_pread_all reads exactly n bytes at offset off of fd into buf
 * (retrying short reads and EINTR).  Errors: those of pread mapped by
 * err_from_errno; ERR_IO if the file ends first. */
int fs_pread_all(int fd, void *buf, size_t n, uint64_t off);

/* fs_fsync_dir fsyncs the directory dir, which makes the entries created,
 * renamed or removed in it durable.  Errors: the open and fsync errors
 * mapped by err_from_errno. */
int fs_fsync_dir(const char *dir);

/* fs_write_file makes path (created 0600, truncated) hold the n bytes of
 * buf and fsyncs it; the caller fsyncs the directory when the entry is
 * new or renamed.  Errors: those of open, write, fsync and close mapped
 * by err_from_errno. */
int fs_write_file(const char *path, const void *buf, size_t n);

#endif
