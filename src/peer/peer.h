/*
 * peer.h - the peer transport: Raft messages and snapshots between the
 * members of a cluster, over gRPC (proto/cetcdpb/peer.proto), and its
 * manual.
 *
 * PURPOSE
 * The raft thread hands outgoing messages to peer_send, which never blocks:
 * each message is encoded and appended to a bounded queue of its
 * destination.  Every peer has its own sender thread that keeps one
 * long-lived client stream (/cetcdpb.Peer/Stream) open, packs whatever is
 * queued into one PeerBatch per write, and reconnects with exponential
 * back-off when the stream breaks.  A slow or dead peer therefore only
 * fills (and overflows) its own queue; the others are not delayed.
 * Incoming batches arrive on the event loop threads of the
 * api_server the transport registered its service on, are checked
 * (cluster id, receiver id, known sender) and handed to on_messages.
 * Snapshots (the LMDB file) travel on a separate call per snapshot,
 * /cetcdpb.Peer/Snapshot, in chunks followed by a SHA-256; the receiver
 * writes them to a temp file in snap_dir, verifies size and checksum,
 * fsyncs, and hands the file to on_snapshot.
 * Both calls dial https:// and unixs:// peers over TLS when the transport
 * has TLS material (struct dial_tls): this member presents its
 * certificate as a client certificate and verifies the other's, or, with
 * etcd's peer auto-TLS, accepts it unverified.
 * peer_call makes one unary call to a peer's listener (a member's own
 * services there, e.g. a promotion forwarded to the leader, or the hash a
 * corruption check asks of each peer) with the same
 * credentials, on a thread of its own; peer_ask makes the short frequent
 * ones (a renewal forwarded to the leader) on a channel kept per peer,
 * completed on one shared thread.
 *
 * REMOVED MEMBERS
 * As etcd's peer handler answers 410 Gone to a member it knows was
 * removed, the receiving side asks is_removed about every sender that is
 * not a peer and refuses a removed one with PERMISSION_DENIED and
 * PEER_REMOVED_MSG; peer_remove also ends the streams the removed member
 * has open to us that way, so it hears of its removal at once even when
 * nothing is left to send it.  A sender refused so reports on_removed:
 * this member must stop.
 *
 * LIFE CYCLE (one owner thread)
 *   peer_transport_create -> peer_transport_register(t, srv) ->
 *   peer_add (every known member) -> rpc_server_start(srv) -> (serve,
 *   peer_add/update/remove as membership changes) ->
 *   rpc_server_close(srv) -> peer_transport_close(t)
 * Adding the members before the server starts avoids refusing their first
 * streams as "member unknown" (they would retry after a back-off).  The
 * api_server calls the transport's handlers until it is closed, so it must
 * be closed BEFORE the transport (or never have been started).
 *
 * THREADS
 * - peer_send, peer_send_snapshot: the raft thread (any one thread at a
 *   time per transport is fine; they never block on the network).
 * - peer_add, peer_update, peer_remove, peer_stats, peer_call, peer_ask: any
 *   thread; they are serialised with each other and with peer_send by the
 *   transport's lock.
 *   peer_remove and peer_transport_close wait for the peer's threads to
 *   stop (at most about 100 ms plus the time a cancelled call takes).
 * - Callbacks run on transport or gRPC threads (named at each callback)
 *   with no transport lock held.  They must not block and must not call
 *   peer_remove or peer_transport_close; they may call peer_send and
 *   peer_stats (peer_send_snapshot from on_snapshot_status returns
 *   ERR_BUSY: the finishing transfer still holds the peer's slot).
 *
 * DELIVERY
 * Messages to one peer are delivered in the order peer_send queued them,
 * each at most once.  Messages may be lost: when the queue overflows, when
 * the peer is down (then peer_send drops at once rather than letting stale
 * messages pile up) and when a stream breaks with writes in flight.  Each
 * such loss is reported through on_unreachable, so raft can back off
 * (raft_report_unreachable) and retry; Raft tolerates loss by design.
 *
 * LIMITS
 * Everything is bounded: per-peer queues (messages and bytes), batch
 * size, one outgoing snapshot per peer, snapshots_in_max incoming at once,
 * their size.  The peer api_server must accept messages of
 * batch_bytes_max + a little and chunk_bytes + the MsgSnap (its receive
 * limit is max_request_bytes + 512 KiB; the defaults, 1 MiB each, fit the
 * API default); a single raft message larger than that limit can never be
 * delivered, so raft's max_size_per_msg must stay below it.
 *
 * ERRORS
 * Functions return 0 or a negative ERR_* code from util/err.h.  Input from
 * the network is never asserted on: a bad batch or chunk ends its call
 * with a gRPC status (FAILED_PRECONDITION for another cluster or member,
 * PERMISSION_DENIED for a removed member, INVALID_ARGUMENT for
 * undecodable data, DATA_LOSS for a snapshot whose size or checksum is
 * wrong, RESOURCE_EXHAUSTED over limits, UNAVAILABLE when the snapshot
 * cannot be stored or on_snapshot refuses it).
 */
#ifndef CETCD_PEER_PEER_H
#define CETCD_PEER_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/metrics.h"

#include "raft/raft.h"

struct rpc_server;
struct dial_tls;
struct peer_transport;

/* Defaults for struct peer_limits fields left 0. */
#define PEER_DEFAULT_QUEUE_MSGS 4096            /* per peer, as etcd */
#define PEER_DEFAULT_QUEUE_BYTES (64u << 20)    /* per peer */
#define PEER_DEFAULT_BATCH_BYTES (1u << 20)     /* per PeerBatch */
#define PEER_DEFAULT_BACKOFF_MIN_MS 100
#define PEER_DEFAULT_BACKOFF_MAX_MS 2000
#define PEER_DEFAULT_SEND_TIMEOUT_MS 5000
/* etcd gives a peer dial 1 s + the election timeout and a TLS handshake
 * 10 s; one attempt here is TCP, TLS and the first SETTINGS together. */
#define PEER_DEFAULT_CONNECT_TIMEOUT_MS 5000
#define PEER_DEFAULT_CHUNK_BYTES (1u << 20)     /* per SnapshotChunk */
#define PEER_DEFAULT_SNAPSHOT_BYTES (8ull << 30) /* etcd's largest quota */
#define PEER_DEFAULT_SNAPSHOT_TIMEOUT_MS 30000
#define PEER_DEFAULT_SNAPSHOTS_IN 4

/* Hard limits, also applied to input from the network. */
#define PEER_BATCH_MSGS_MAX 65536   /* messages in one PeerBatch */
#define PEER_PEERS_MAX RAFT_MAX_MEMBERS
#define PEER_URLS_MAX 8             /* URLs per peer */
#define PEER_URL_LEN_MAX 256        /* bytes per URL, NUL excluded */
#define PEER_CALLS_MAX 8            /* peer_call calls in flight */
#define PEER_ASKS_MAX 16384         /* peer_ask calls in flight */

/* The status message that refuses a removed member (etcd's
 * errMemberRemoved), with GRPC_STATUS_PERMISSION_DENIED. */
#define PEER_REMOVED_MSG \
    "the member has been permanently removed from the cluster"

/* The callbacks.  arg is passed back to each.  Any may be NULL. */
struct peer_callbacks {
    void *arg;
    /* n messages from member `from`, in the order it sent them.  Runs on a
     * event loop of the api_server.  msgs and everything they point to are
     * valid during the call only: copy what you keep.  Must not block (the
     * next batch of that stream is read after it returns). */
    void (*on_messages)(void *arg, raft_id from, const struct raft_msg *msgs,
                        size_t n);
    /* Messages to `id` were lost (queue full, peer down, stream broken):
     * call raft_report_unreachable.  Runs on the thread that called
     * peer_send (drops) or on the peer's sender thread (broken stream). */
    void (*on_unreachable)(void *arg, raft_id id);
    /* A verified snapshot from `from`: snap_msg is its RAFT_MSG_SNAP
     * (valid during the call), path the fsynced data file in snap_dir.
     * Return 0 to accept: the file then belongs to the callee (rename or
     * delete it).  Return a negative ERR_* to refuse: the transport deletes
     * the file and the sender is told.  Runs on an event loop; the sender
     * waits for the answer, so keep it short. */
    int (*on_snapshot)(void *arg, raft_id from, const struct raft_msg *snap_msg,
                       const char *path);
    /* The snapshot sent to `to` was accepted (ok) or not: call
     * raft_report_snapshot.  Runs on that peer's snapshot thread. */
    void (*on_snapshot_status)(void *arg, raft_id to, bool ok);
    /* Was member id removed from the cluster?  Asked about senders that
     * are not peers, on an event loop or in peer_remove, with no transport
     * lock held: a quick lookup, no blocking.  NULL: no member is ever
     * taken for removed. */
    bool (*is_removed)(void *arg, raft_id id);
    /* Peer `by` refused this member as removed from the cluster: it must
     * stop (etcd: errMemberRemoved).  Runs on that peer's sender or
     * snapshot thread, possibly once per peer. */
    void (*on_removed)(void *arg, raft_id by);
};

/* Limits; 0 in any field means its PEER_DEFAULT_*. */
struct peer_limits {
    size_t queue_msgs_max;        /* queued messages per peer */
    size_t queue_bytes_max;       /* queued encoded bytes per peer */
    size_t batch_bytes_max;       /* encoded bytes per PeerBatch; a larger
                                     single message goes alone */
    uint32_t backoff_min_ms;      /* first reconnect delay */
    uint32_t backoff_max_ms;      /* reconnect delay ceiling */
    uint32_t send_timeout_ms;     /* a write not taken by then breaks the
                                     stream (a stalled peer) */
    uint32_t connect_timeout_ms;  /* one connection attempt (TCP, TLS
                                     handshake, first SETTINGS) at least;
                                     not a delay (dial.h) */
    size_t chunk_bytes;           /* data bytes per SnapshotChunk */
    uint64_t snapshot_bytes_max;  /* larger incoming snapshots refused */
    uint32_t snapshot_timeout_ms; /* no progress for this long fails a
                                     snapshot transfer */
    int snapshots_in_max;         /* snapshots received at once */
};

struct peer_config {
    raft_id self;           /* this member's id; non-zero */
    uint64_t cluster_id;    /* this cluster's id; non-zero */
    /* Directory for incoming snapshot files (created by the caller, on the
     * same file system as the data dir so a rename moves the file).
     * Copied.  NULL refuses incoming snapshots (UNAVAILABLE). */
    const char *snap_dir;
    struct peer_callbacks cb;  /* copied */
    struct peer_limits limits; /* copied */
    /* TLS of the dialling side (dial/dial.h; read by peer_transport_create
     * only, gRPC keeps copies of the material), as etcd's peer
     * transport uses its --peer-* TLSInfo for the client end: https:// and
     * unixs:// URLs are dialled with TLS, presenting cert_pem (the member's
     * --peer-cert-file) when the other member asks for a client
     * certificate (--peer-client-cert-auth) and verifying its server
     * certificate against ca_pem (--peer-trusted-ca-file) unless
     * skip_verify (self-signed certificates of --peer-auto-tls, which no
     * member can verify).  http:// and unix:// URLs are dialled in the
     * clear.  NULL: the secure URLs are refused by peer_add and
     * peer_update. */
    const struct dial_tls *tls;
};

/* Counters of one peer, for logs, metrics and tests. */
struct peer_stats {
    uint64_t sent_msgs;      /* messages handed to gRPC */
    uint64_t sent_batches;   /* PeerBatch writes handed to gRPC */
    uint64_t dropped_msgs;   /* lost: full queue, peer down, broken stream */
    uint64_t connects;       /* streams the peer acknowledged */
    uint64_t failures;       /* streams that failed or broke */
    uint64_t refusals;       /* of those, refused by the peer (another
                                cluster, unknown or removed member) */
    uint64_t sent_bytes;     /* raft messages and snapshot chunks sent to
                                the peer: PeerBatch and SnapshotChunk bytes
                                gRPC took (etcd_network_peer_sent_bytes) */
    uint64_t received_bytes; /* ... received from it and accepted */
    size_t queued_msgs;      /* in the queue right now */
    bool active;             /* the stream is up (acknowledged) */
    int64_t active_since_ms; /* CLOCK_MONOTONIC ms the stream has been up
                                since (its PeerAck arrived); 0 when down
                                (etcd's Transport.ActiveSince) */
    struct metrics_hist_snap rtt; /* round trips to the peer, with the
                                     bounds of peer_rtt_bounds */
};

/* Round trips to a peer, as etcd_network_peer_round_trip_time_seconds
 * (etcd's buckets, 100 us to 0.8 s): from a heartbeat queued for the peer
 * to the next heartbeat response received from it.  etcd's prober times
 * a probe request on its own connection; cetcd times the raft traffic it
 * already has, so the figure includes the peer's queueing and the raft
 * pass that answers (a leader only: followers send no heartbeats). */
#define PEER_RTT_BUCKETS 14
extern const double peer_rtt_bounds[PEER_RTT_BUCKETS];

/* peer_transport_create validates cfg and builds a transport with no peers
 * in *t_out.  Errors: ERR_INVAL (self or cluster_id 0, snap_dir too long,
 * only one of tls->cert_pem and tls->key_pem, TLS material gRPC refuses),
 * ERR_NOMEM. */
int peer_transport_create(const struct peer_config *cfg,
                          struct peer_transport **t_out);

/* peer_transport_register registers the Peer service handlers on srv,
 * which must not be started yet.  srv must be closed before t.  Errors:
 * those of rpc_server_register_stream (ERR_EXIST: registered twice). */
int peer_transport_register(struct peer_transport *t,
                            struct rpc_server *srv);

/* peer_transport_close stops every sender, snapshot and peer_call thread
 * (cancelling their calls), frees queued messages and t.  Snapshots being
 * sent are reported with on_snapshot_status(false), peer_calls in flight
 * with ERR_STOPPED.  Owner thread; t may be NULL. */
void peer_transport_close(struct peer_transport *t);

/* peer_add makes member id (not self) a peer reachable at urls[0..n)
 * ("http://host:port", "unix://path", or with cfg->tls "https://host:port"
 * and "unixs://path"; copied), and starts its sender thread, which
 * connects at once.  A TLS handshake that fails (an unverifiable server
 * certificate, a client certificate the peer refuses) counts as a failed
 * connection: retried with back-off, messages reported unreachable.
 * Errors: ERR_INVAL (id 0 or self, no URL, too many, bad or too long URL),
 * ERR_UNSUPPORTED (https:// or unixs:// on a transport without TLS),
 * ERR_EXIST, ERR_FULL (PEER_PEERS_MAX peers), ERR_NOMEM, ERR_IO
 * (thread). */
int peer_add(struct peer_transport *t, raft_id id, const char *const *urls,
             size_t n);

/* peer_update replaces the URLs of peer id; its stream is closed and
 * reopened to the new ones at once (messages queued or being written at
 * that moment are dropped and reported, as for any broken stream).  A
 * snapshot already being sent keeps its old URL.  Errors: as peer_add,
 * and ERR_NOTFOUND. */
int peer_update(struct peer_transport *t, raft_id id, const char *const *urls,
                size_t n);

/* peer_remove stops peer id's threads and drops its queue; messages to id
 * are then dropped silently.  A snapshot being sent to id is reported
 * failed.  The streams id has open to this member are ended as any later
 * one is refused: PERMISSION_DENIED and PEER_REMOVED_MSG when is_removed
 * says id was removed (call peer_remove after the removal is recorded),
 * FAILED_PRECONDITION otherwise.  Errors: ERR_NOTFOUND. */
int peer_remove(struct peer_transport *t, raft_id id);

/* peer_send queues msgs[0..n) (borrowed for the call; encoded copies are
 * queued) for msgs[i].to.  Never blocks on the network.  Messages to self,
 * to unknown members, and RAFT_MSG_SNAP messages (they need
 * peer_send_snapshot; such a message is reported with
 * on_snapshot_status(to, false)) are not sent.  Losses are reported as
 * described under DELIVERY.  Errors: ERR_NOMEM (encoding buffers; the
 * message is then dropped and reported unreachable; later messages are
 * still tried).  Returns the first error met. */
int peer_send(struct peer_transport *t, const struct raft_msg *msgs,
              size_t n);

/* peer_send_snapshot sends the RAFT_MSG_SNAP snap_msg (encoded now;
 * borrowed for the call; snap_msg->to must be `to`) and `size` bytes read
 * from fd starting at offset 0 to member `to`, on a thread of its own.
 * On success the transport owns fd (it closes it when done) and reports
 * the outcome exactly once with on_snapshot_status.  On error the caller
 * keeps fd and nothing is reported.  Errors: ERR_INVAL (not a SNAP message, to mismatch, fd < 0),
 * ERR_NOTFOUND (to is not a peer), ERR_BUSY (a snapshot to that peer is in
 * flight: one at a time per peer), ERR_NOMEM, ERR_IO (thread). */
int peer_send_snapshot(struct peer_transport *t, raft_id to,
                       const struct raft_msg *snap_msg, int fd,
                       uint64_t size);

/* peer_stats copies the counters of peer id into *out.  Errors:
 * ERR_NOTFOUND. */
int peer_stats(struct peer_transport *t, raft_id id, struct peer_stats *out);

/* The outcome of a peer_call: err 0 and the reply (valid during the
 * callback only), or an ERR_* with reply NULL.  Runs on the call's thread;
 * must not call peer_remove or peer_transport_close. */
typedef void (*peer_call_fn)(void *arg, int err, const uint8_t *reply,
                             size_t len);

/* peer_call sends req[0..len) (copied) as a unary gRPC call of `method`
 * (a full path such as "/cetcdpb.Cluster/Promote"; static) to peer `to`,
 * trying its URLs in turn while they are unreachable, for at most
 * timeout_ms, on a thread of its own.  On success fn gets the outcome
 * exactly once: 0 and the reply, or ERR_TIMEOUT (no answer in time),
 * ERR_STOPPED (the transport is closing), ERR_UNSUPPORTED (the peer does
 * not serve method), ERR_MEMBER_REMOVED (it refuses us as removed),
 * ERR_IO (unreachable at every URL, or any other failure).  Errors of
 * peer_call itself (fn is not called): ERR_INVAL (timeout_ms 0, no
 * method), ERR_NOTFOUND (to is not a peer), ERR_BUSY (PEER_CALLS_MAX
 * calls in flight), ERR_STOPPED, ERR_NOMEM, ERR_IO (thread).  Any thread
 * (a callback's too). */
int peer_call(struct peer_transport *t, raft_id to, const char *method,
              const uint8_t *req, size_t len, uint32_t timeout_ms,
              peer_call_fn fn, void *arg);

/* peer_ask is peer_call for short calls made often (a renewal a follower
 * forwards to the leader, etcd's POST to the leader's /leases): the call
 * runs on a channel the transport keeps per peer (one connection, reused;
 * the next of the peer's URLs after one is unreachable) and completes on
 * one shared thread (cetcd-peer-ask), so it costs a round trip, not a
 * thread and a connection.  One attempt: fn gets 0 and the reply, or
 * ERR_TIMEOUT, ERR_STOPPED, ERR_UNSUPPORTED, ERR_MEMBER_REMOVED, ERR_IO
 * (the caller retries).  fn runs on the shared thread and must not block
 * (it may call peer_ask).  Errors of peer_ask itself (fn is not called):
 * ERR_INVAL, ERR_NOTFOUND, ERR_BUSY (PEER_ASKS_MAX in flight),
 * ERR_STOPPED, ERR_NOMEM, ERR_IO (thread, channel).  Any thread. */
int peer_ask(struct peer_transport *t, raft_id to, const char *method,
             const uint8_t *req, size_t len, uint32_t timeout_ms,
             peer_call_fn fn, void *arg);

#endif
