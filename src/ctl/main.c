/*
 * main.c - cetcdctl's main(): ETCDCTL_API as etcdctl's main.go reads it,
 * the root command and the list of etcdctl's commands.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/ctl_int.h"

/* etcdctl's commands, in the order etcdctl adds them (cobra suggests in
 * this order; help lists them sorted). */
static const struct ctl_cmd *const top[] = {
    &ctl_cmd_get,
    &ctl_cmd_put,
    &ctl_cmd_del,
    &ctl_cmd_txn,
    &ctl_cmd_compaction,
    &ctl_cmd_alarm,
    &ctl_cmd_defrag,
    &ctl_cmd_endpoint,
    &ctl_cmd_move_leader,
    &ctl_cmd_watch,
    &ctl_cmd_version,
    &ctl_cmd_lease,
    &ctl_cmd_member,
    &ctl_cmd_snapshot,
    &ctl_cmd_make_mirror,
    &ctl_cmd_migrate,
    &ctl_cmd_lock,
    &ctl_cmd_elect,
    &ctl_cmd_auth,
    &ctl_cmd_user,
    &ctl_cmd_role,
    &ctl_cmd_check,
    NULL,
};

static const struct ctl_cmd root = {
    .use = "etcdctl",
    .short_desc = "A simple command line client for etcd3.",
    .subs = top,
};

int main(int argc, char **argv)
{
    const char *api = getenv("ETCDCTL_API");
    if (api && *api && strcmp(api, "3") != 0) {
        if (strcmp(api, "2") == 0)
            fprintf(stderr, "cetcdctl: ETCDCTL_API=2 (the v2 API) is not "
                            "built; cetcd serves the v3 API only\n");
        else
            fprintf(stderr, "unsupported API version %s\n", api);
        return 1;
    }
    unsetenv("ETCDCTL_API");
    ctl__program_set(argv[0]);
    return ctl_main(&root, argc, argv);
}
