/*
 * peer_harness.h - the scaffolding the peer transport programs share
 * (peer_pair.c, peer_tls.c, peer_member.c): a member under test, the
 * callbacks and waits every one of them needs, and the check macro.
 *
 * Each program owns its nodes and the test thread drives them; the fields
 * marked mu are written by the transport's callbacks.  A node's fields are
 * the union of what the programs use: the ones only one of them reads are
 * grouped at the end under its name.
 */
#ifndef CETCD_TESTS_PEER_HARNESS_H
#define CETCD_TESTS_PEER_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "rpc/rpc.h"
#include "peer/peer.h"

/* Room for every node id any of the programs uses (ids index arrays). */
#define NODES_MAX 16

/* A failed check ends the process with _exit: exit() would run OpenSSL's
 * and gRPC's exit handlers under the feet of the transports' threads, and
 * their crashes would bury the FAIL line. */
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            fflush(stdout);                                                  \
            _exit(1);                                                        \
        }                                                                    \
    } while (0)

/* One member under test. */
struct node {
    raft_id id;                      /* member id, also the index here */
    struct peer_transport *t;        /* NULL while down */
    struct rpc_server *srv;          /* NULL while down (or dial only) */
    int port;                        /* bound port, kept across restarts */
    char url[160];                   /* http(s)://127.0.0.1:port */
    char dir[128];                   /* snapshot directory, or "" */
    pthread_mutex_t mu;              /* guards the fields below */
    uint64_t got[NODES_MAX];         /* mu: messages per sender */
    uint64_t last[NODES_MAX];        /* mu: last number seen per sender */
    uint64_t disorder;               /* mu: numbers out of order */
    int snaps_in;                    /* mu: snapshots taken */
    int snap_ok, snap_fail;          /* mu: on_snapshot_status outcomes */
    /* peer_pair only */
    uint64_t cluster;                /* its cluster id */
    uint64_t gaps[NODES_MAX];        /* mu: missing numbers per sender */
    uint64_t unreachable[NODES_MAX]; /* mu: on_unreachable per peer */
    const char *expect_file;         /* snapshot source to compare with */
    atomic_bool stall;               /* on_messages blocks while set */
    /* peer_tls only */
    char unix_url[160];              /* unixs:// URL, or "" */
    /* peer_member only */
    bool removed[NODES_MAX];         /* mu: ids this node knows removed */
    int removed_by;                  /* mu: on_removed calls */
    int64_t removed_at_us;           /* mu: the first one */
};

/* now_us is the monotonic clock in microseconds. */
int64_t now_us(void);

/* files_equal compares two files byte by byte (false if one is missing). */
bool files_equal(const char *a, const char *b);

/* random_file writes size bytes (a multiple of 8) of xorshift output, the
 * same bytes every time, to path. */
void random_file(const char *path, uint64_t size);

/* node_init clears nd and gives it its id; with root, also its snapshot
 * directory root/n<id>, which it creates. */
void node_init(struct node *nd, raft_id id, const char *root);

/* node_listen creates nd's server from scfg, registers nd's transport on
 * it and, when more is not NULL, calls more(nd) to register anything else
 * before the server starts.  It sets nd->port to the first URL's bound
 * port and nd->url to https:// (scfg has a certificate) or http:// on
 * 127.0.0.1 and that port. */
void node_listen(struct node *nd, const struct rpc_server_config *scfg,
                 void (*more)(struct node *nd));

/* node_stop closes nd's server (if any), then its transport. */
void node_stop(struct node *nd);

/* link_url makes `to` a peer of from, reached at url; link_peer at to's
 * url. */
void link_url(struct node *from, const struct node *to, const char *url);
void link_peer(struct node *from, const struct node *to);

/* stats returns a's stats for its peer id. */
struct peer_stats stats(struct node *a, raft_id id);

/* wait_active waits until a's stream to id is up, at most max_ms; returns
 * the ms waited. */
int64_t wait_active(struct node *a, raft_id id, int64_t max_ms);

/* got returns how many messages nd has from `from`. */
uint64_t got(struct node *nd, raft_id from);

/* on_snapshot_status is the transport callback counting snapshot outcomes
 * in snap_ok and snap_fail. */
void on_snapshot_status(void *arg, raft_id to, bool ok);

#endif
