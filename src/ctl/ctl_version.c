/*
 * ctl_version.c - "version": the etcdctl version cetcdctl matches and
 * the API version.
 */
#include <stdio.h>

#include "ctl/commands.h"

static int run(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("etcdctl version: %s\nAPI version: %s\n", CTL_VERSION,
           CTL_API_VERSION);
    return CTL_EXIT_SUCCESS;
}

const struct ctl_cmd ctl_cmd_version = {
    .use = "version",
    .short_desc = "Prints the version of etcdctl",
    .run = run,
};
