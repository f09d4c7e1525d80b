/*
 * join.h - learning the running cluster before joining it
 * (--initial-cluster-state=existing), see join.c.
 */
#ifndef CETCD_CMD_JOIN_H
#define CETCD_CMD_JOIN_H

#include <stdbool.h>

#include "server/server.h"

struct join_result {
    struct server_join join;      /* for server_config.join */
    Cetcdpb__JoinResponse *resp;  /* owns what join points into */
};

/* join_has_wal: the member has a WAL already (a restart: no join). */
bool join_has_wal(const char *data_dir, const char *wal_dir);

/* join_fetch asks the other members of initial_cluster for the cluster
 * and finds this member (by peer_urls).  0, or 1 after printing why.
 * Free *out with join_free. */
int join_fetch(const char *initial_cluster, const char *name,
               const char *peer_urls, const char *token,
               struct join_result *out);
void join_free(struct join_result *j);

#endif
