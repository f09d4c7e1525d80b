/*
 * etcd_dir.h - starting on an etcd data dir (etcd_dir.c).
 */
#ifndef CETCD_CMD_ETCD_DIR_H
#define CETCD_CMD_ETCD_DIR_H

/* etcd_dir_import: when data_dir holds an etcd member (member/snap/db and
 * etcd's WAL, no cetcd store), imports it (server_import_etcd; wal_dir is
 * --wal-dir or NULL) and returns 0; a data dir without one: 0, untouched.
 * On an error (logged with the file and offset) etcd's files are
 * unchanged and cetcd must exit.  Main thread, before the member starts. */
int etcd_dir_import(const char *data_dir, const char *wal_dir);

#endif
