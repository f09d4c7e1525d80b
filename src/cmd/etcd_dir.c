/*
 * etcd_dir.c - an etcd data dir given as --data-dir (etcd_dir.h).
 *
 * etcd keeps its store in member/snap/db (bbolt) and its raft log in
 * member/wal in etcd's WAL format; cetcd keeps member/db/data.mdb and its
 * own WAL.  Importing an etcd data dir (issue 21, second part) is not
 * built: until it is, such a dir is refused before anything is created
 * in it (cetcd would otherwise make an empty store beside etcd's files
 * and then stop at etcd's WAL as a corrupt one).  The bbolt file is
 * checked first so that the message says whether it is even readable
 * (a damaged one: which file and offset).
 */
#include <stdio.h>
#include <sys/stat.h>

#include "bbolt/bbolt.h"
#include "cmd/etcd_dir.h"
#include "util/err.h"
#include "util/log.h"

bool etcd_dir_refused(const char *data_dir)
{
    char db[4200], mine[4200];
    struct stat st;
    snprintf(db, sizeof db, "%s/member/snap/db", data_dir);
    snprintf(mine, sizeof mine, "%s/member/db", data_dir);
    if (stat(db, &st) != 0 || stat(mine, &st) == 0)
        return false;
    struct bbolt_reader *r = NULL;
    int rc = bbolt_reader_open_file(db, &r);
    if (rc != 0 && r != NULL)
        log_error("etcdmain", "%s", bbolt_reader_error(r));
    else if (rc != 0)
        log_error("etcdmain", "%s: %s", db, err_str(rc));
    bbolt_reader_free(r);
    log_error("etcdmain",
              "%s holds an etcd data dir (member/snap/db, etcd's WAL): "
              "starting cetcd on an etcd data dir (importing it) is not "
              "built yet; nothing in it was changed",
              data_dir);
    return true;
}
