/*
 * etcd_dir.h - recognising an etcd data dir given to cetcd (etcd_dir.c).
 */
#ifndef CETCD_CMD_ETCD_DIR_H
#define CETCD_CMD_ETCD_DIR_H

#include <stdbool.h>

/* etcd_dir_refused: data_dir holds etcd's member/snap/db and no cetcd
 * store; logs why it is refused (and any damage the bbolt reader finds,
 * with file and offset) and returns true.  Main thread, before the member
 * touches the dir. */
bool etcd_dir_refused(const char *data_dir);

#endif
