/*
 * server.h - the member core: the proposal funnel, the log (WAL) loop, the
 * apply loop and the read path of one cetcd member.
 *
 * Write path (DESIGN.md "The write path"): an API thread calls
 * server_propose() with an InternalRequest.  The server stamps a request id,
 * registers a waiter, and queues the encoded request for the raft thread,
 * which proposes everything queued to raft (a follower's raft forwards to
 * the leader), writes each Ready's entries and HardState to the WAL with ONE
 * fdatasync (group commit), sends the messages, and hands committed entries
 * to the applier.  The applier runs a batch inside one LMDB write txn
 * (mvcc_batch_*) that also stores the consistent index, and only after that
 * commit wakes each waiter with its response.  Nothing is acknowledged
 * before it is committed by a quorum and applied.
 *
 * Read path: server_range() runs a ReadIndex round through raft (batched
 * with the reads arriving meanwhile) and waits until the applied index
 * reaches it, unless the request is serializable; then it reads in an LMDB
 * read txn; the response points into the map until server_read_end().
 *
 * Threads: server_propose/server_range_* are safe from any thread.  Done
 * callbacks run on the apply thread and must not block.
 */
#ifndef CETCD_SERVER_H
#define CETCD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct api_server;
struct peer_tls;

#include "cetcdpb/internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"

/* server_config: everything the daemon's flags decide.  Strings are
 * borrowed for the life of the server. */
struct server_config {
    const char *name;             /* --name */
    const char *data_dir;         /* --data-dir */
    const char *wal_dir;          /* --wal-dir; NULL = <data-dir>/member/wal */
    const char *peer_urls;        /* --initial-advertise-peer-urls (comma list) */
    const char *client_urls;      /* --advertise-client-urls (comma list) */
    const char *cluster_token;    /* --initial-cluster-token */
    const char *initial_cluster;  /* --initial-cluster: name=url,... */
    uint64_t heartbeat_ms;        /* --heartbeat-interval (raft tick) */
    uint64_t election_ms;         /* --election-timeout */
    bool pre_vote;                /* --pre-vote */
    /* The peer listener (a gRPC server created but NOT yet started); the
     * peer transport registers its services on it.  The caller starts it
     * after server_start and closes it BEFORE server_stop.  NULL: no peers
     * (a single member only). */
    struct api_server *peer_listener;
    /* TLS for dialling https:// and unixs:// peers (borrowed; see
     * peer/peer.h), or NULL: such peers are refused. */
    const struct peer_tls *peer_tls;
    uint64_t snapshot_count;      /* --snapshot-count */
    uint32_t max_snapshots;       /* --max-snapshots: snap files kept (0 = all) */
    uint64_t quota_backend_bytes; /* --quota-backend-bytes (0 = 2 GiB) */
    uint64_t max_request_bytes;   /* --max-request-bytes */
    uint32_t max_txn_ops;         /* --max-txn-ops */
    bool unsafe_no_fsync;         /* --unsafe-no-fsync */
};

struct server;

/* server_response: what a waiter gets.  `err` is 0 or a negative ERR_* code
 * (api maps it to etcd's gRPC error); on success `msg` is the response
 * message (PutResponse, DeleteRangeResponse, TxnResponse, CompactionResponse)
 * whose memory stays valid only during the callback. */
struct server_response {
    int err;                        /* 0 or ERR_* */
    const ProtobufCMessage *msg;    /* response on success, else NULL */
};

typedef void (*server_done_fn)(void *arg, const struct server_response *r);

/* server_start opens (or creates) the member's data dir, replays the WAL
 * above the consistent index, and starts the log and apply threads.
 * Errors: ERR_IO, ERR_CORRUPT (refuses to start; logged), ERR_NOMEM. */
int server_start(const struct server_config *cfg, struct server **server_out);

/* server_stop stops accepting proposals, fails queued ones with ERR_STOPPED,
 * joins the threads and closes the stores.  NULL is fine. */
void server_stop(struct server *s);

/* server_propose queues `req` (borrowed; encoded before return).  `done` is
 * called exactly once, on the apply thread (or inline with an error before
 * return when the request is refused: ERR_REQUEST_TOO_LARGE, ERR_STOPPED,
 * ERR_TOO_MANY_REQUESTS).  Returns 0, or the error also given to `done`. */
int server_propose(struct server *s, Cetcdpb__InternalRequest *req,
                   server_done_fn done, void *arg);

/* server_read: a read txn with the response it produced (opaque). */
struct server_read;

/* server_range runs a Range (linearizable unless req->serializable) and
 * stores the response in *resp_out; it and everything it points to stays
 * valid until server_read_end(*read_out).  Errors: ERR_COMPACTED,
 * ERR_FUTURE_REV, ERR_STOPPED, ERR_NOMEM. */
int server_range(struct server *s, const Etcdserverpb__RangeRequest *req,
                 Etcdserverpb__RangeResponse **resp_out,
                 struct server_read **read_out);


void server_read_end(struct server_read *read);

/* A Range's answer: err 0 and resp (valid during the call only), or an
 * ERR_*.  Runs on the caller's thread (served at once) or a read worker. */
typedef void (*server_read_fn)(void *arg, int err,
                               const Etcdserverpb__RangeResponse *resp);

/* server_range_async serves req without blocking the caller on raft: a
 * serializable read (or one on a lone leading voter) is served at once;
 * a linearizable one joins the next ReadIndex round and is served by a
 * read worker once the applied index reaches the round's answer.  Takes
 * ownership of req (an unpacked message; freed after fn).  fn is called
 * exactly once.  Errors given to fn: as server_range, plus ERR_TIMEOUT
 * (no ReadIndex answer within the request timeout). */
void server_range_async(struct server *s, Etcdserverpb__RangeRequest *req,
                        server_read_fn fn, void *arg);

/* server_header fills a response header with the ids, the current revision
 * and the raft term. */
void server_header_fill(struct server *s, Etcdserverpb__ResponseHeader *h);

/* Limits the API enforces before proposing. */
uint64_t server_max_request_bytes(const struct server *s);
uint32_t server_max_txn_ops(const struct server *s);

/* server_stats: counters for tests, metrics and benchmarks. */
struct server_stats {
    uint64_t proposals;     /* proposals accepted */
    uint64_t wal_syncs;     /* fdatasyncs of the WAL */
    uint64_t apply_batches; /* LMDB write txns committed by the apply loop */
    uint64_t applied_index; /* last applied log index */
};
void server_stats_get(struct server *s, struct server_stats *out);

/* server_status: what Maintenance.Status reports. */
struct server_status {
    uint64_t leader;        /* member id of the leader (0 = none) */
    uint64_t raft_index;    /* last committed log index */
    uint64_t raft_term;     /* current term */
    uint64_t applied_index; /* last applied log index */
    uint64_t db_size;       /* backend file size */
    uint64_t db_in_use;     /* backend bytes in use */
    bool is_learner;        /* this member is a learner */
};
/* server_status_get: 0, or ERR_BUSY/ERR_IO from the backend. */
int server_status_get(struct server *s, struct server_status *out);

uint64_t server_member_id(const struct server *s);
uint64_t server_cluster_id(const struct server *s);

#endif
