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

/* join_fetch asks the other members of cfg->initial_cluster for the
 * cluster (sending cfg->cluster_token) and finds this member (by
 * cfg->peer_urls).  https:// and unixs:// members are dialled with
 * cfg->peer_tls (the member's peer TLS material; NULL: the system's CAs
 * and no client certificate, as libcetcd without TLS material), each
 * within 1 s + cfg->election_ms as etcd's peer dial timeout.  0, or 1
 * after logging why.  Free *out with join_free. */
int join_fetch(const struct server_config *cfg, struct join_result *out);
void join_free(struct join_result *j);

#endif
