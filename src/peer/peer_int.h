/*
 * peer_int.h - declarations shared between the peer module's files.
 *
 * The pure parts come first (queue, back-off, batch framing, decoding,
 * URLs): they touch no gRPC object and no thread, so the unit tests and
 * the fuzz target use them directly.  Then the transport's structs.
 */
#ifndef CETCD_PEER_INT_H
#define CETCD_PEER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include "cetcdpb/peer.pb-c.h"
#include "peer/peer.h"

struct rpc_stream;

#define PEER__STREAM_PATH "/cetcdpb.Peer/Stream"
#define PEER__SNAPSHOT_PATH "/cetcdpb.Peer/Snapshot"
#define PEER__SHA256_LEN 32
/* How often blocked peer threads look at their stop flag. */
#define PEER__POLL_MS 50

/* ---- queue.c: a bounded FIFO of encoded messages (not thread-safe; the
 * peer's mutex guards it) ---- */

/* One encoded message; data is mem_malloc'd and owned by whoever holds
 * the struct. */
struct peer__buf {
    uint8_t *data; /* raft_msg_encode output */
    size_t len;    /* bytes of data */
};

/* The queue.  Owned by its peer, guarded by the peer's mutex. */
struct peer__queue {
    struct peer__buf *ring; /* msgs_max slots */
    size_t head;            /* index of the oldest message */
    size_t n;               /* messages queued */
    size_t msgs_max;        /* capacity in messages */
    size_t bytes;           /* sum of queued lens */
    size_t bytes_max;       /* capacity in bytes */
};

/* peer__queue_init allocates the ring.  Errors: ERR_NOMEM. */
int peer__queue_init(struct peer__queue *q, size_t msgs_max,
                     size_t bytes_max);
/* peer__queue_close frees the ring and every queued message. */
void peer__queue_close(struct peer__queue *q);
/* peer__queue_push appends b, taking ownership of b->data on success.
 * Errors: ERR_FULL (a bound would be exceeded; nothing changes). */
int peer__queue_push(struct peer__queue *q, const struct peer__buf *b);
/* peer__queue_take moves the oldest messages into out[0..max_n), as many
 * as fit in max_bytes but at least one when the queue is not empty, and
 * returns how many; the caller owns their data. */
size_t peer__queue_take(struct peer__queue *q, struct peer__buf *out,
                        size_t max_n, size_t max_bytes);
/* peer__queue_clear frees every queued message and returns how many. */
size_t peer__queue_clear(struct peer__queue *q);

/* ---- backoff.c ---- */

/* peer__backoff_ms returns the delay before reconnect attempt `failures`
 * (1 = after the first failure): min doubled per failure, capped at max. */
uint32_t peer__backoff_ms(uint32_t failures, uint32_t min_ms,
                          uint32_t max_ms);

/* ---- codec.c: framing and checks of PeerBatch and SnapshotChunk ---- */

/* The identity every request carries. */
struct peer__hdr {
    uint64_t cluster_id; /* sender's cluster */
    raft_id from;        /* sender */
    raft_id to;          /* receiver */
};

/* peer__batch_size returns the packed size of a PeerBatch of msgs[0..n). */
size_t peer__batch_size(const struct peer__hdr *h, const struct peer__buf *msgs,
                        size_t n);
/* peer__batch_pack writes that PeerBatch into out (peer__batch_size bytes)
 * and returns the bytes written. */
size_t peer__batch_pack(const struct peer__hdr *h,
                        const struct peer__buf *msgs, size_t n, uint8_t *out);

/* A decoded PeerBatch.  msgs point into pb, which owns all memory;
 * released with peer__batch_free. */
struct peer__batch {
    Cetcdpb__PeerBatch *pb; /* protobuf-c unpacked message */
    struct raft_msg *msgs;  /* pb->n_msgs decoded messages */
    size_t n;               /* how many were decoded */
};

/* peer__batch_decode unpacks buf and decodes every message in it.
 * Errors: ERR_CORRUPT (undecodable batch or message), ERR_TOO_LARGE (more
 * than PEER_BATCH_MSGS_MAX messages), ERR_NOMEM.  On error *out is empty. */
int peer__batch_decode(const uint8_t *buf, size_t len, struct peer__batch *out);
/* peer__batch_free releases what peer__batch_decode allocated. */
void peer__batch_free(struct peer__batch *b);

/* What the receiver knows of a sender. */
enum peer__sender {
    PEER__SENDER_PEER = 0,    /* a peer: accepted */
    PEER__SENDER_UNKNOWN = 1, /* not a member we know (yet) */
    PEER__SENDER_REMOVED = 2, /* a member removed from the cluster */
};

/* peer__hdr_check compares a request's identity with the receiver's.
 * Returns GRPC_STATUS_OK, or a status code with a static message in
 * *why_out: FAILED_PRECONDITION for another cluster, another receiver or
 * an unknown sender, PERMISSION_DENIED and PEER_REMOVED_MSG for a removed
 * one, INVALID_ARGUMENT for a zero sender. */
grpc_status_code peer__hdr_check(const struct peer__hdr *got,
                                 uint64_t cluster_id, raft_id self,
                                 enum peer__sender sender,
                                 const char **why_out);

/* peer__status_removed: does a call's final status (details: len bytes,
 * not NUL-terminated) say the receiver refuses us as a removed member? */
bool peer__status_removed(grpc_status_code code, const char *details,
                          size_t len);

/* peer__call_err maps the final status of a peer_call attempt to the
 * ERR_* its callback gets (0 for OK); stopping: the transport cancelled
 * the call because it is closing. */
int peer__call_err(grpc_status_code code, const char *details, size_t len,
                   bool stopping);

/* peer__msgs_check checks that every message of a batch is from `from`
 * to `to` and is not a snapshot (those travel by Snapshot).  Returns
 * GRPC_STATUS_OK or INVALID_ARGUMENT with *why_out. */
grpc_status_code peer__msgs_check(const struct raft_msg *msgs, size_t n,
                                  raft_id from, raft_id to,
                                  const char **why_out);

/* peer__chunk_decode unpacks a SnapshotChunk into *out (free it with
 * cetcdpb__snapshot_chunk__free_unpacked) and, when it carries a msg,
 * decodes that into *msg_out (pointing into *out; release with
 * raft_msg_release) and sets *has_msg_out.  Errors: ERR_CORRUPT (bad
 * chunk, bad msg, msg not a SNAP, sha256 of the wrong length),
 * ERR_NOMEM. */
int peer__chunk_decode(const uint8_t *buf, size_t len,
                       Cetcdpb__SnapshotChunk **out, struct raft_msg *msg_out,
                       bool *has_msg_out);

/* peer__url_parse turns "http[s]://host:port" into the gRPC target
 * "host:port" and "unix[s]://path" into "unix:path", in out (cap bytes),
 * and says in *tls_out whether the scheme asks for TLS (dial_url_parse,
 * with a scheme required).  Errors: ERR_INVAL (empty, no scheme, no port,
 * longer than PEER_URL_LEN_MAX, unknown scheme). */
int peer__url_parse(const char *url, char *out, size_t cap, bool *tls_out);

/* peer__url_target is peer__url_parse for a transport without TLS: the
 * secure schemes are refused with ERR_UNSUPPORTED. */
int peer__url_target(const char *url, char *out, size_t cap);

/* peer__now_ms returns CLOCK_MONOTONIC in milliseconds. */
int64_t peer__now_ms(void);

/* ---- the transport ---- */

/* The state of one stream of a sender thread.  Owned by that thread. */
struct peer__stream {
    grpc_channel *channel;        /* to the current URL, or NULL */
    uint64_t urls_gen;            /* the peer's urls_gen it was made for */
    size_t url_i;                 /* index of the URL in use */
    grpc_completion_queue *cq;    /* a "next" queue of this thread */
    grpc_call *call;              /* the open stream, or NULL */
    int pending;                  /* batches started, not yet completed */
    bool failing;                 /* cancelled; draining pending */
    bool sending;                 /* a SEND_MESSAGE is in flight */
    bool acked;                   /* the receiver's PeerAck arrived */
    int64_t send_start_ms;        /* when the in-flight send started */
    size_t send_msgs;             /* messages in the in-flight send */
    size_t send_bytes;            /* ... and its encoded bytes */
    grpc_byte_buffer *send_bb;    /* its buffer */
    struct peer__buf *take;       /* scratch for one batch (take_max) */
    size_t take_max;              /* messages per batch at most */
    grpc_byte_buffer *ack_bb;     /* RECV_MESSAGE output */
    grpc_metadata_array init_md;  /* RECV_INITIAL_METADATA output */
    grpc_metadata_array trail_md; /* RECV_STATUS output */
    grpc_status_code status;      /* RECV_STATUS output */
    grpc_slice details;           /* RECV_STATUS output */
    uint32_t failures;            /* consecutive failed attempts */
    int64_t next_attempt_ms;      /* no reconnect before this */
    char send_tag, ack_tag, status_tag; /* completion tags (addresses) */
};

/* One incoming Stream call, listed in the transport so that peer_remove
 * can end those of a removed member.  Created by the stream's on_open,
 * unlinked and freed by its on_close. */
struct peer__in {
    struct peer__in *next;        /* t->in_mu: list link */
    struct rpc_stream *stream;    /* immutable */
    raft_id from;                 /* t->in_mu: sender of the first
                                     accepted batch, 0 before */
    bool refused;                 /* t->in_mu: finished with an error */
    bool acked;                   /* event loop only: PeerAck sent */
};

/* One peer_call in flight (a slot of t->calls).  Its thread owns the
 * fields but `used` and `done`. */
struct peer__call {
    struct peer_transport *t;     /* immutable while used */
    bool used;                    /* t->calls_mu: the slot is taken */
    atomic_bool done;             /* the thread finished: join it */
    pthread_t thread;             /* the call's thread */
    raft_id to;                   /* the peer called */
    const char *method;           /* static path */
    uint8_t *req;                 /* the request bytes (owned) */
    size_t req_len;               /* their length */
    char urls[PEER_URLS_MAX][PEER_URL_LEN_MAX + 1]; /* copied at start */
    size_t urls_n;                /* how many */
    int64_t deadline_ms;          /* peer__now_ms() limit */
    peer_call_fn fn;              /* the outcome */
    void *arg;                    /* fn's argument */
};

/* A channel peer_ask keeps for one peer (ask.c). */
struct peer__ask_ch {
    raft_id to;                   /* the peer (0: slot unused) */
    uint64_t urls_gen;            /* its urls_gen the channel was made for */
    size_t url_i;                 /* the URL it dials */
    grpc_channel *ch;             /* the channel, or NULL */
};

/* peer_ask's state (ask.c), in the transport. */
struct peer__asks {
    pthread_mutex_t mu;           /* guards everything below */
    bool started;                 /* thread and cq exist */
    pthread_t thread;             /* cetcd-peer-ask */
    grpc_completion_queue *cq;    /* every ask's "next" queue */
    struct peer__ask_ch chans[PEER_PEERS_MAX];
    struct peer__ask *live;       /* asks in flight (list) */
    size_t n;                     /* how many */
};

/* One remote member.  Created and freed by the owner (peer_add,
 * peer_remove, close); its sender thread owns `st`; the fields marked mu
 * are shared with peer_send, peer_update and the snapshot thread. */
struct peer__peer {
    struct peer_transport *t;     /* immutable */
    raft_id id;                   /* immutable */
    pthread_t thread;             /* the sender thread */
    pthread_mutex_t mu;           /* guards the fields marked mu */
    pthread_cond_t cond;          /* mu: queue push, stop, URL change */
    struct peer__queue q;         /* mu */
    char urls[PEER_URLS_MAX][PEER_URL_LEN_MAX + 1]; /* mu */
    size_t urls_n;                /* mu */
    uint64_t urls_gen;            /* mu: bumped by peer_update */
    bool stop;                    /* mu: threads must exit */
    bool down;                    /* mu: last attempt failed; drop sends */
    bool lent;                    /* mu: the sender thread is parked with an
                                   * idle open stream: peer_send may start
                                   * one write on it (send.c) */
    struct peer_stats stats;      /* mu */
    int64_t hb_sent_ns;           /* mu: a heartbeat queued then, not yet
                                     answered (0: none); see peer_rtt_bounds */
    struct metrics_hist rtt;      /* round trips (atomics: any thread) */
    bool snap_busy;               /* mu: a snapshot thread is running */
    bool snap_joinable;           /* owner: snap_thread must be joined */
    pthread_t snap_thread;        /* owner: the last snapshot thread */
    struct peer__stream st;       /* sender thread only */
};

/* transport.c: a heartbeat response among msgs from `from` ends the
 * round trip its peer's hb_sent_ns began (peer_rtt_bounds). */
void peer__rtt_note(struct peer_transport *t, raft_id from,
                    const struct raft_msg *msgs, size_t n);

/* send.c: with p->mu held, start a write of the queued messages on the
 * stream the parked sender thread lent (see send.c); false if it was not
 * lent or nothing is queued. */
bool peer__write_lent_locked(struct peer__peer *p);

/* The transport.  Created and closed by its owner; peers[] is guarded by
 * lock (write: add/remove/close; read: everyone else). */
struct peer_transport {
    raft_id self;                 /* immutable */
    uint64_t cluster_id;          /* immutable */
    char *snap_dir;               /* immutable, or NULL */
    struct peer_callbacks cb;     /* immutable */
    struct peer_limits lim;       /* immutable, defaults filled in */
    pthread_rwlock_t lock;        /* guards peers, peers_n */
    struct peer__peer *peers[PEER_PEERS_MAX]; /* lock */
    size_t peers_n;                           /* lock */
    atomic_int snapshots_in;      /* snapshots being received */
    atomic_uint_fast64_t snap_seq; /* names temp files uniquely */
    atomic_bool test_corrupt;     /* tests: flip a bit in sent snapshots */
    grpc_channel_credentials *plain; /* immutable: http://, unix:// */
    grpc_channel_credentials *tls;   /* immutable: https://, unixs://, or
                                        NULL (no TLS configured) */
    /* immutable: a copy of the TLS config when it has an allowed CN or
     * hostname, else NULL: each TLS channel then gets credentials of its
     * own, whose verifier knows the address to send a refusal's alert
     * to (dial.h alert_target). */
    struct dial_tls *tls_named;
    pthread_mutex_t in_mu;        /* guards ins and their marked fields */
    struct peer__in *ins;         /* in_mu: incoming Stream calls */
    pthread_mutex_t calls_mu;     /* guards calls[].used, closing */
    struct peer__call calls[PEER_CALLS_MAX]; /* calls_mu: peer_call slots */
    struct peer__asks asks;       /* peer_ask (ask.c) */
    atomic_bool closing;          /* peer_transport_close has begun */
};

/* peer__find returns the peer with id under t->lock (held by the caller,
 * read or write), or NULL. */
struct peer__peer *peer__find(struct peer_transport *t, raft_id id);

/* peer__hold returns peer id with t->lock read-held and its mu locked, or
 * NULL (nothing held) if there is no such peer; peer__unhold lets go of
 * what peer__hold took. */
struct peer__peer *peer__hold(struct peer_transport *t, raft_id id);
/* peer__bytes_note adds to peer id's byte counters (none: no such peer). */
void peer__bytes_note(struct peer_transport *t, raft_id id, uint64_t sent,
                      uint64_t received);
void peer__unhold(struct peer_transport *t, struct peer__peer *p);

/* peer__known says whether id is a peer (takes the read lock). */
bool peer__known(struct peer_transport *t, raft_id id);

/* peer__sender_of says what t knows of sender `from` (not 0): a peer,
 * removed (cb.is_removed), or unknown.  Takes the read lock, then calls
 * is_removed without it. */
enum peer__sender peer__sender_of(struct peer_transport *t, raft_id from);

/* recv.c: peer__in_refuse_from ends every incoming stream of `from` with
 * the status a new one would get (peer_remove, after unlinking it). */
void peer__in_refuse_from(struct peer_transport *t, raft_id from);

/* call.c: peer__calls_close cancels every peer_call (their callbacks get
 * ERR_STOPPED) and joins their threads (peer_transport_close). */
void peer__calls_close(struct peer_transport *t);

/* ask.c: peer__asks_init readies t->asks (transport create);
 * peer__asks_close cancels every ask (callbacks get ERR_STOPPED), joins
 * the thread and frees the channels (peer_transport_close, closing set). */
void peer__asks_init(struct peer_transport *t);
void peer__asks_close(struct peer_transport *t);

/* send.c: the sender thread of p (argument p). */
void *peer__sender_main(void *arg);

/* snap_send.c: starts the snapshot thread of p for the encoded message
 * (ownership of msg and fd passes on success).  p->mu not held; the
 * caller holds t->lock for reading.  Errors: ERR_BUSY, ERR_NOMEM, ERR_IO. */
int peer__snap_start(struct peer__peer *p, uint8_t *msg, size_t msg_len,
                     int fd, uint64_t size);
/* peer__snap_join joins a finished or stopping snapshot thread of p. */
void peer__snap_join(struct peer__peer *p);

/* recv.c, snap_recv.c: the service handlers. */
extern const struct rpc_stream_ops peer__stream_ops;
extern const struct rpc_stream_ops peer__snapshot_ops;
/* peer__in_attach, for both handlers' on_open, gives stream a zeroed state
 * of size bytes (rpc_stream_data_get returns it); NULL when out of memory,
 * the stream then being finished with RESOURCE_EXHAUSTED.
 * peer__in_detach, at the end of their on_close, once the state is freed,
 * detaches it and releases the stream. */
void *peer__in_attach(struct rpc_stream *stream, size_t size);
void peer__in_detach(struct rpc_stream *stream);

/* peer__channel_create opens a channel to url (checked by peer_add or
 * peer_update) with t's credentials for its scheme and the module's
 * arguments (own subchannel pool, no retries, short reconnect back-off).
 * NULL on failure. */
grpc_channel *peer__channel_create(struct peer_transport *t, const char *url);

/* peer__test_corrupt makes t flip one bit of every snapshot it sends from
 * now on, after hashing (tests of the receiver's checksum). */
void peer__test_corrupt(struct peer_transport *t, bool on);

#endif
