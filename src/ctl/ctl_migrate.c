/*
 * ctl_migrate.c - "migrate": etcdctl's migration of the v2 store's keys
 * into the mvcc store of an offline etcd data dir.
 *
 * cetcd has no v2 store (it serves the v3 API only) and keeps its data
 * dir in LMDB, so there is nothing to migrate from or into: the command
 * keeps etcdctl's flags (its help and flag errors stay the same) and
 * refuses to run, naming itself.  Replaying an etcd data dir's v2 store
 * from its WAL and snapshot into bbolt would need the whole v2 applier;
 * cetcd imports etcd 3.4 data dirs itself instead (their v3 data).
 */
#include <stdbool.h>

#include "ctl/commands.h"

static bool no_ttl;
static const char *data_dir;
static const char *wal_dir;
static const char *transformer;

static struct ctl_flag flags[] = {
    {"no-ttl", 0, CTL_FLAG_BOOL, &no_ttl, "false", "Do not convert TTL keys",
     false},
    {"data-dir", 0, CTL_FLAG_STRING, &data_dir, "",
     "Path to the data directory", false},
    {"wal-dir", 0, CTL_FLAG_STRING, &wal_dir, "",
     "Path to the WAL directory", false},
    {"transformer", 0, CTL_FLAG_STRING, &transformer, "",
     "Path to the user-provided transformer program", false},
    CTL_FLAG_END,
};

static int run(int argc, char **argv)
{
    (void)argc, (void)argv;
    /* etcdctl takes any positional arguments here and ignores them; the
     * refusal does not depend on them either. */
    ctl_exit(CTL_EXIT_BAD_FEATURE,
             "migrate is not supported: cetcd has no v2 store (it serves "
             "the v3 API only), so there are no v2 keys to migrate");
}

const struct ctl_cmd ctl_cmd_migrate = {
    .use = "migrate",
    .short_desc = "Migrates keys in a v2 store to a mvcc store",
    .flags = flags,
    .run = run,
};
