/*
 * etcd_dir.c - an etcd data dir given as --data-dir (etcd_dir.h): imported
 * on the first start (server.h server_import_etcd does the work and says
 * where etcd's files are kept), then started as cetcd's own.
 */
#include "cmd/etcd_dir.h"
#include "server/server.h"
#include "util/err.h"
#include "util/log.h"

int etcd_dir_import(const char *data_dir, const char *wal_dir)
{
    bool imported;
    int rc = server_import_etcd(data_dir, wal_dir, &imported);
    if (rc != 0)
        log_error("etcdmain", "cannot start on the etcd data dir %s: %s",
                  data_dir, err_str(rc));
    return rc;
}
