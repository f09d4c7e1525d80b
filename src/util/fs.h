/*
 * fs.h - small file-system helpers shared by the daemon's modules.
 * Thread-safe (no shared state).
 */
#ifndef CETCD_UTIL_FS_H
#define CETCD_UTIL_FS_H

/* fs_mkdir_p creates path and its missing parents with mode 0700 (etcd's
 * fileutil.TouchDirAll uses 0700 too); an existing directory is fine.
 * Errors: ERR_INVAL (path too long), and the mkdir errors mapped by
 * err_from_errno (ERR_IO, ERR_NOSPC, ...). */
int fs_mkdir_p(const char *path);

#endif
