/*
 * timeout.h - why a request timed out.  etcd 3.4 tells a client more than
 * "request timed out" when it can guess the cause
 * (EtcdServer.parseProposeCtxErr): the request started shortly before this
 * member became leader (its predecessor most likely failed with it), or
 * this member lost its link to the leader, or, as leader, to a quorum,
 * after the request started.  The decision is a pure function of a view of
 * the member taken when the request expires, so that it can be tested
 * alone.  Private to src/server.
 */
#ifndef CETCD_SERVER_TIMEOUT_H
#define CETCD_SERVER_TIMEOUT_H

#include <stddef.h>
#include <stdint.h>

/* Most members a view holds (SERVER_MEMBERS_MAX fits). */
#define SERVER_TIMEOUT_MEMBERS_MAX 16

/* What a member knows when one of its requests times out.  Times are
 * CLOCK_MONOTONIC milliseconds.  Owned by whoever fills it (the house
 * thread, or a test). */
struct server_timeout_view {
    uint64_t self;            /* this member's id */
    uint64_t lead;            /* the leader it knows now (0: none) */
    uint64_t lead_elected_ms; /* when this member last became leader (0:
                                 never; kept after it steps down, as etcd's
                                 leadElectedTime) */
    uint64_t election_ms;     /* --election-timeout; non-zero */
    size_t n;                 /* members in id[], this one included */
    uint64_t id[SERVER_TIMEOUT_MEMBERS_MAX]; /* the cluster's members */
    /* Since when the link to id[i] has been up (0: down); ignored for
     * self (etcd's Transport.ActiveSince). */
    uint64_t active_since_ms[SERVER_TIMEOUT_MEMBERS_MAX];
};

/* server__timeout_err returns the error for a request that started at
 * start_ms and has timed out, as etcd 3.4 chooses it:
 *   ERR_TIMEOUT_LEADER_FAIL when it started within 2 election timeouts
 *     before this member became leader;
 *   else, with no leader, ERR_TIMEOUT;
 *   else ERR_TIMEOUT_CONN_LOST when this member leads and has not been
 *     linked to a quorum of the members (counting itself) since before
 *     start_ms, or follows and has not been linked to its leader since
 *     before start_ms;
 *   else ERR_TIMEOUT. */
int server__timeout_err(const struct server_timeout_view *v,
                        uint64_t start_ms);

#endif
