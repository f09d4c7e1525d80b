/*
 * cetcd.h - libcetcd, the C client of the etcd v3 API (cetcd and etcd alike).
 *
 * This is the library's only public header and its manual.
 *
 * PURPOSE
 *   A client connects to a list of endpoints and sends etcd v3 gRPC calls
 *   (KV, Maintenance, ...) to one of them.  It speaks plain gRPC over HTTP/2
 *   through the gRPC C core, with messages encoded by protobuf-c, so it works
 *   against cetcd and against the real etcd (3.4 and later) alike.
 *
 *   Three layers, from low to high:
 *   - cetcd_call_unary(): any unary method, by its path
 *     ("/etcdserverpb.KV/Put") and protobuf-c messages.  Everything else is
 *     built on it.
 *   - typed synchronous calls: cetcd_put(), cetcd_range(), cetcd_get(),
 *     cetcd_delete(), cetcd_txn(), cetcd_compact(), cetcd_endpoint_status().
 *   - an asynchronous interface (cetcd_async_*) for load generators: many
 *     calls in flight on one completion queue per thread, a callback per
 *     completed call.
 *   - Watch streams (cetcd_watch_*): watchers created and cancelled on a
 *     bidirectional stream, responses taken by poll or by callback on an
 *     async queue, with bounded buffers.
 *   - generic streams (cetcd_stream_*): any other streaming method by its
 *     path (LeaseKeepAlive, Snapshot, Election Observe, ...), protobuf-c
 *     messages sent and received by poll, with bounded buffers.
 *   - raw calls and streams (cetcd_async_call_raw, cetcd_raw_stream_*):
 *     request and reply bytes passed through undecoded, with the caller's
 *     metadata and deadline, for a gRPC proxy.
 *   Plus a small latency-statistics helper (cetcd_latency_*) that the
 *   benchmark and callers timing their own calls share.
 *
 * ENDPOINTS AND FAILOVER
 *   The endpoint list is a comma-separated string of items as etcdctl's
 *   --endpoints takes them ("127.0.0.1:2379,https://10.0.0.2:2379"):
 *   "host:port", "http://host:port", "https://host:port", "unix://path",
 *   "unixs://path" (an IPv6 host in brackets: "[::1]:2379").  The client
 *   keeps one gRPC channel (one connection) per endpoint and sends
 *   every call to its current endpoint.  Before sending, it waits up to
 *   dial_timeout_ms for that endpoint's connection; if the connection cannot
 *   be made, nothing was sent and the call moves on to the next endpoint.
 *   If a call that was sent fails with UNAVAILABLE, the client makes the next
 *   endpoint current; the call itself is retried there only when it is
 *   read-only (Range with any options, Status), because a write may already
 *   have been applied (etcd clientv3 follows the same rule).
 *
 * TLS
 *   Which endpoints are dialled with TLS: http:// and unix:// ones never,
 *   https:// and unixs:// ones always, bare "host:port" ones when
 *   opts->tls is given (as etcd's clientv3 does, but for unix://).  With
 *   opts->tls, the client offers its certificate (if any) and verifies the
 *   server's against the given CAs (or the system's) and the endpoint's
 *   host, unless insecure_skip_verify.  An https:// endpoint without
 *   opts->tls verifies the server against the system's CAs and offers no
 *   certificate.  A handshake that fails (an unverifiable server, a
 *   certificate the server refuses) makes the endpoint unreachable:
 *   UNAVAILABLE, as a dead one; the reason is not in the message (gRPC
 *   does not give it).
 *
 * ERRORS
 *   Every call returns 0 on success, or a positive status code: the gRPC
 *   status code the server sent (enum cetcd_code, same numbers as gRPC), or
 *   one the client chose for a local failure:
 *     CETCD_INVALID_ARGUMENT  bad argument or endpoint string
 *     CETCD_UNAVAILABLE       no endpoint could be reached within the dial
 *                             timeout, or the connection broke
 *     CETCD_DEADLINE_EXCEEDED the per-call timeout expired
 *     CETCD_RESOURCE_EXHAUSTED out of memory
 *     CETCD_INTERNAL          a reply that could not be decoded
 *   When a struct cetcd_status pointer is given (it may be NULL), it receives
 *   the same code and a message: etcd's error text for server errors, e.g.
 *   "etcdserver: mvcc: required revision has been compacted".
 *
 * THREADS
 *   A struct cetcd_client is thread-safe: any number of threads may make
 *   synchronous calls on it concurrently, and it may be shared by many async
 *   queues.  A struct cetcd_async_queue belongs to the one thread that calls
 *   cetcd_async_queue_run() on it; callbacks run on that thread.
 *   cetcd_async_call() may be called from any thread.  Results and latency
 *   recorders are plain data owned by whoever holds them.
 *
 * OWNERSHIP
 *   Inputs (keys, values, option structs, request messages) are borrowed for
 *   the duration of the call only.  Results (*_out) are allocated by the
 *   library and owned by the caller, who frees each with its *_free function
 *   (free functions accept NULL).  A result's kvs point into the result
 *   itself: they stay valid until that result is freed.
 *
 * LIFETIME
 *   cetcd_client_open() ... cetcd_client_close().  Close only after every
 *   call on the client returned and every async call completed.  The library
 *   initialises gRPC on the first open and releases it on the last close.
 */
#ifndef CETCD_CETCD_H
#define CETCD_CETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: 0 and the gRPC status codes, same numbers. */
enum cetcd_code {
    CETCD_OK = 0,
    CETCD_CANCELLED = 1,
    CETCD_UNKNOWN = 2,
    CETCD_INVALID_ARGUMENT = 3,
    CETCD_DEADLINE_EXCEEDED = 4,
    CETCD_NOT_FOUND = 5,
    CETCD_ALREADY_EXISTS = 6,
    CETCD_PERMISSION_DENIED = 7,
    CETCD_RESOURCE_EXHAUSTED = 8,
    CETCD_FAILED_PRECONDITION = 9,
    CETCD_ABORTED = 10,
    CETCD_OUT_OF_RANGE = 11,
    CETCD_UNIMPLEMENTED = 12,
    CETCD_INTERNAL = 13,
    CETCD_UNAVAILABLE = 14,
    CETCD_DATA_LOSS = 15,
    CETCD_UNAUTHENTICATED = 16,
};

/* A call's outcome, filled by every call that takes one. */
struct cetcd_status {
    int code;           /* enum cetcd_code; 0 = success */
    char message[256];  /* NUL-terminated; "" on success; truncated if long */
};

/* cetcd_code_name returns the static upper-case name of code
 * ("UNAVAILABLE"), or "UNKNOWN_CODE" for numbers outside the table. */
const char *cetcd_code_name(int code);

/* ------------------------------------------------------------------------
 * Client
 * ---------------------------------------------------------------------- */

/* TLS material of a client (etcdctl's --cacert, --cert, --key and
 * --insecure-skip-tls-verify; read the PEM files yourself).  Every string
 * is NUL-terminated PEM text, borrowed for the cetcd_client_open() call
 * only: the client keeps its own copies.  The material is checked by the
 * handshakes, not at open: a bad certificate makes the endpoints
 * unreachable (see TLS at the top). */
struct cetcd_tls {
    const char *ca_pem;        /* CAs the server's certificate must chain
                                  to; NULL = the system's */
    const char *cert_pem;      /* client certificate chain, offered when
                                  the server asks; NULL = none */
    const char *key_pem;       /* its private key; set with cert_pem or
                                  not at all */
    bool insecure_skip_verify; /* accept any server certificate unverified
                                  (still encrypted); ca_pem is ignored */
    const char *allowed_cn;       /* the server's certificate must carry
                                     this common name (etcd's
                                     --peer-cert-allowed-cn); NULL = any */
    const char *allowed_hostname; /* or be valid for this host name or IP
                                     by its SANs (never its CN); NULL =
                                     any.  At most one of the two; with
                                     insecure_skip_verify every server is
                                     refused */
};

/* Options for cetcd_client_open(); zero-initialise, then set what you need. */
struct cetcd_client_opts {
    const char *endpoints;   /* required: "h:p,h:p" or "https://h:p,..." */
    int dial_timeout_ms;     /* wait for a connection; 0 = 5000 */
    int call_timeout_ms;     /* per-call deadline; 0 = none */
    const char *token;       /* auth token sent as "token" metadata; NULL =
                                none.  Copied. */
    int max_recv_bytes;      /* largest reply accepted; 0 = 64 MiB */
    int keepalive_time_ms;   /* a PING after this long without activity
                                while a call or stream is open (grpc-go's
                                keepalive as etcd's clients set it); 0 =
                                none */
    int keepalive_timeout_ms; /* no answer to it within this long closes
                                 the connection (its calls and streams
                                 fail UNAVAILABLE); 0 = the C core's 20 s */
    const char *md_key;      /* one more metadata pair sent with every
                                call and stream (lower-case key; e.g.
                                "hasleader" = "true", etcd's
                                WithRequireLeader), or NULL = none.  Both
                                copied. */
    const char *md_value;
    /* The most a stream's server may send ahead of what the caller takes
     * (the HTTP/2 stream window, with the gRPC core's bandwidth probing,
     * which grows windows to megabytes, turned off): a paused raw stream
     * (cetcd_raw_stream_pause) then holds at most this plus one message.
     * 0 = gRPC's defaults.  A proxy sets it; it costs throughput on slow
     * long links. */
    int stream_window_bytes;
    const struct cetcd_tls *tls; /* TLS material (borrowed for the open
                                    call), or NULL: bare endpoints are plain
                                    text, https:// ones use the system's
                                    CAs */
};

struct cetcd_client; /* opaque */

/* cetcd_client_open parses opts->endpoints and creates one channel per
 * endpoint.  It does not connect: the first call does (within
 * dial_timeout_ms).  On success *client_out owns the client; free it with
 * cetcd_client_close().
 * Errors: CETCD_INVALID_ARGUMENT (no or bad endpoints, too many
 * endpoints: more than CETCD_ENDPOINTS_MAX, tls with only one of cert_pem
 * and key_pem), CETCD_RESOURCE_EXHAUSTED. */
#define CETCD_ENDPOINTS_MAX 64
int cetcd_client_open(const struct cetcd_client_opts *opts,
                      struct cetcd_client **client_out,
                      struct cetcd_status *st);

/* cetcd_client_close destroys the client's channels.  Every call on it must
 * have returned (async calls: completed).  NULL is fine. */
void cetcd_client_close(struct cetcd_client *client);

/* cetcd_client_endpoint returns the current endpoint as its gRPC target,
 * "host:port" or "unix:path" (static for the client's lifetime), the one
 * the next call goes to. */
const char *cetcd_client_endpoint(const struct cetcd_client *client);

/* cetcd_client_token_set replaces the auth token (NULL clears it).  Not
 * safe concurrently with calls on the same client.
 * Errors: CETCD_RESOURCE_EXHAUSTED. */
int cetcd_client_token_set(struct cetcd_client *client, const char *token);

/* ------------------------------------------------------------------------
 * Generic unary call
 * ---------------------------------------------------------------------- */

/* cetcd_call_unary sends req to method_path ("/etcdserverpb.KV/Range") and
 * decodes the reply with resp_desc into *resp_out, which the caller frees
 * with protobuf_c_message_free_unpacked(*resp_out, NULL).  On error
 * *resp_out is NULL.  Failover as described at the top.
 * Errors: any gRPC status the server returns; CETCD_UNAVAILABLE,
 * CETCD_DEADLINE_EXCEEDED, CETCD_INTERNAL (undecodable reply),
 * CETCD_RESOURCE_EXHAUSTED, CETCD_INVALID_ARGUMENT. */
int cetcd_call_unary(struct cetcd_client *client, const char *method_path,
                     const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc,
                     ProtobufCMessage **resp_out, struct cetcd_status *st);

/* ------------------------------------------------------------------------
 * KV: results
 * ---------------------------------------------------------------------- */

/* The response header every etcd reply carries. */
struct cetcd_header {
    uint64_t cluster_id; /* the cluster's id */
    uint64_t member_id;  /* the member that answered */
    int64_t revision;    /* the store revision when the request was applied */
    uint64_t raft_term;  /* the raft term when the request was applied */
};

/* One key-value pair (mvccpb.KeyValue).  key/value point into the result
 * that holds the pair; they are not NUL-terminated. */
struct cetcd_kv {
    const uint8_t *key;      /* the key bytes */
    size_t key_len;          /* its length */
    const uint8_t *value;    /* the value bytes (NULL if empty) */
    size_t value_len;        /* its length */
    int64_t create_revision; /* revision of the last creation of the key */
    int64_t mod_revision;    /* revision of the last modification */
    int64_t version;         /* modifications since creation (1 = created) */
    int64_t lease;           /* attached lease id, 0 = none */
};

/* The result of a Range (also a txn's range op). */
struct cetcd_range_result {
    struct cetcd_header header; /* reply header */
    struct cetcd_kv *kvs;       /* kvs_len pairs (NULL if none) */
    size_t kvs_len;             /* number of pairs returned */
    bool more;                  /* more keys matched than were returned */
    int64_t count;              /* number of keys in the range */
    void *internal_;            /* library-owned; do not touch */
};

/* The result of a Put. */
struct cetcd_put_result {
    struct cetcd_header header; /* reply header */
    struct cetcd_kv *prev_kv;   /* previous pair if asked and existing */
    void *internal_;            /* library-owned; do not touch */
};

/* The result of a DeleteRange. */
struct cetcd_delete_result {
    struct cetcd_header header; /* reply header */
    int64_t deleted;            /* number of keys deleted */
    struct cetcd_kv *prev_kvs;  /* deleted pairs if prev_kv was asked */
    size_t prev_kvs_len;        /* their number */
    void *internal_;            /* library-owned; do not touch */
};

void cetcd_range_result_free(struct cetcd_range_result *r);
void cetcd_put_result_free(struct cetcd_put_result *r);
void cetcd_delete_result_free(struct cetcd_delete_result *r);

/* ------------------------------------------------------------------------
 * KV: options and calls.  Option pointers may be NULL for defaults.
 * ---------------------------------------------------------------------- */

struct cetcd_put_opts {
    int64_t lease;     /* lease id to attach; 0 = none */
    bool prev_kv;      /* return the previous pair in result->prev_kv */
    bool ignore_value; /* keep the current value (value must be empty) */
    bool ignore_lease; /* keep the current lease (lease must be 0) */
};

/* cetcd_put stores value under key.  result_out may be NULL.
 * Errors: as cetcd_call_unary; notably INVALID_ARGUMENT "etcdserver: key is
 * not provided", NOT_FOUND "etcdserver: requested lease not found". */
int cetcd_put(struct cetcd_client *client, const void *key, size_t key_len,
              const void *value, size_t value_len,
              const struct cetcd_put_opts *opts,
              struct cetcd_put_result **result_out, struct cetcd_status *st);

enum cetcd_sort_order { CETCD_SORT_NONE = 0, CETCD_SORT_ASCEND = 1,
                        CETCD_SORT_DESCEND = 2 };
enum cetcd_sort_target { CETCD_SORT_KEY = 0, CETCD_SORT_VERSION = 1,
                         CETCD_SORT_CREATE = 2, CETCD_SORT_MOD = 3,
                         CETCD_SORT_VALUE = 4 };

/* Every RangeRequest option.  range_end semantics are etcd's: NULL/empty =
 * the single key; "\0" (len 1) = every key >= key; else [key, range_end). */
struct cetcd_range_opts {
    const void *range_end;       /* end of the range, exclusive */
    size_t range_end_len;        /* its length */
    int64_t limit;               /* max pairs returned; 0 = no limit */
    int64_t revision;            /* read at this revision; 0 = newest */
    int sort_order;              /* enum cetcd_sort_order */
    int sort_target;             /* enum cetcd_sort_target */
    bool serializable;           /* local read, no linearizable round */
    bool keys_only;              /* return keys without values */
    bool count_only;             /* return only the count */
    int64_t min_mod_revision;    /* filter: mod_revision >= this; 0 = off */
    int64_t max_mod_revision;    /* filter: mod_revision <= this; 0 = off */
    int64_t min_create_revision; /* filter: create_revision >= this */
    int64_t max_create_revision; /* filter: create_revision <= this */
};

/* cetcd_range reads key (or the range [key, opts->range_end)).  Read-only:
 * retried on the next endpoint on UNAVAILABLE.
 * Errors: as cetcd_call_unary; OUT_OF_RANGE "etcdserver: mvcc: required
 * revision has been compacted" / "... is a future revision". */
int cetcd_range(struct cetcd_client *client, const void *key, size_t key_len,
                const struct cetcd_range_opts *opts,
                struct cetcd_range_result **result_out,
                struct cetcd_status *st);

/* cetcd_get reads the single NUL-terminated key (linearizable). */
int cetcd_get(struct cetcd_client *client, const char *key,
              struct cetcd_range_result **result_out,
              struct cetcd_status *st);

struct cetcd_delete_opts {
    const void *range_end; /* as in cetcd_range_opts */
    size_t range_end_len;  /* its length */
    bool prev_kv;          /* return the deleted pairs */
};

/* cetcd_delete deletes key or a range.  result_out may be NULL. */
int cetcd_delete(struct cetcd_client *client, const void *key, size_t key_len,
                 const struct cetcd_delete_opts *opts,
                 struct cetcd_delete_result **result_out,
                 struct cetcd_status *st);

/* ------------------------------------------------------------------------
 * Txn
 * ---------------------------------------------------------------------- */

enum cetcd_compare_result { CETCD_CMP_EQUAL = 0, CETCD_CMP_GREATER = 1,
                            CETCD_CMP_LESS = 2, CETCD_CMP_NOT_EQUAL = 3 };
enum cetcd_compare_target { CETCD_CMP_VERSION = 0, CETCD_CMP_CREATE = 1,
                            CETCD_CMP_MOD = 2, CETCD_CMP_VALUE = 3,
                            CETCD_CMP_LEASE = 4 };

/* One comparison of a txn's "if" part. */
struct cetcd_compare {
    int result;            /* enum cetcd_compare_result */
    int target;            /* enum cetcd_compare_target */
    const void *key;       /* the key compared */
    size_t key_len;        /* its length */
    const void *range_end; /* compare every key in [key, range_end) */
    size_t range_end_len;  /* its length; 0 = single key */
    int64_t number;        /* version / create / mod revision / lease */
    const void *value;     /* for CETCD_CMP_VALUE */
    size_t value_len;      /* its length */
};

/* CETCD_OP_TXN appears only in results: a nested txn's result, which the
 * typed API does not expose (use cetcd_call_unary for nested txns). */
enum cetcd_op_type { CETCD_OP_RANGE = 0, CETCD_OP_PUT = 1,
                     CETCD_OP_DELETE = 2, CETCD_OP_TXN = 3 };

/* One operation of a txn's "then" or "else" part (nested txns: use
 * cetcd_call_unary). */
struct cetcd_op {
    int type;               /* enum cetcd_op_type */
    const void *key;        /* the key */
    size_t key_len;         /* its length */
    const void *value;      /* CETCD_OP_PUT: the value */
    size_t value_len;       /* its length */
    struct cetcd_put_opts put;       /* CETCD_OP_PUT options */
    struct cetcd_range_opts range;   /* CETCD_OP_RANGE options */
    struct cetcd_delete_opts delete; /* CETCD_OP_DELETE options */
};

/* One op's result: the member matching type is set; its internal_ is
 * NULL (the txn result owns the memory). */
struct cetcd_op_result {
    int type;                          /* enum cetcd_op_type */
    struct cetcd_range_result range;   /* CETCD_OP_RANGE */
    struct cetcd_put_result put;       /* CETCD_OP_PUT */
    struct cetcd_delete_result delete; /* CETCD_OP_DELETE */
};

struct cetcd_txn_result {
    struct cetcd_header header;        /* reply header */
    bool succeeded;                    /* all compares held: "then" ran */
    struct cetcd_op_result *responses; /* one per op that ran */
    size_t responses_len;              /* their number */
    void *internal_;                   /* library-owned; do not touch */
};

/* cetcd_txn runs if (all cmps) then success_ops else failure_ops atomically.
 * result_out may be NULL.
 * Errors: as cetcd_call_unary; INVALID_ARGUMENT "etcdserver: too many
 * operations in txn request" / "duplicate key given in txn request". */
int cetcd_txn(struct cetcd_client *client, const struct cetcd_compare *cmps,
              size_t cmps_len, const struct cetcd_op *success_ops,
              size_t success_len, const struct cetcd_op *failure_ops,
              size_t failure_len, struct cetcd_txn_result **result_out,
              struct cetcd_status *st);
void cetcd_txn_result_free(struct cetcd_txn_result *r);

/* cetcd_compact discards history before revision; physical waits until the
 * space is reclaimed.  header_out may be NULL.
 * Errors: OUT_OF_RANGE (already compacted / future revision), ... */
int cetcd_compact(struct cetcd_client *client, int64_t revision,
                  bool physical, struct cetcd_header *header_out,
                  struct cetcd_status *st);

/* Maintenance.Status of the current endpoint. */
struct cetcd_endpoint_status {
    struct cetcd_header header; /* reply header */
    char version[32];           /* server version, e.g. "3.4.23" */
    int64_t db_size;            /* backend size in bytes */
    uint64_t leader;            /* member id of the leader, 0 = none */
    uint64_t raft_index;        /* the member's raft log index */
    uint64_t raft_term;         /* the member's raft term */
    uint64_t raft_applied_index; /* the applied index */
    int64_t db_size_in_use;     /* logical size in use */
    bool is_learner;            /* the member is a learner */
};

/* cetcd_endpoint_status asks the current endpoint for its status.  The
 * result is copied into *status_out (no free needed). */
int cetcd_endpoint_status(struct cetcd_client *client,
                          struct cetcd_endpoint_status *status_out,
                          struct cetcd_status *st);

/* ------------------------------------------------------------------------
 * Asynchronous calls
 *
 * A queue is one gRPC completion queue.  Start calls on it with
 * cetcd_async_call(); its owner thread runs cetcd_async_queue_run(), which
 * invokes each completed call's callback.  A load generator keeps N calls
 * in flight by starting the next one from the callback.  The client's
 * current endpoint is used, without failover or dial wait: an unreachable
 * endpoint fails the call with UNAVAILABLE.
 * ---------------------------------------------------------------------- */

struct cetcd_async_queue; /* opaque */

/* cetcd_async_queue_open creates a queue.
 * Errors: CETCD_RESOURCE_EXHAUSTED. */
int cetcd_async_queue_open(struct cetcd_async_queue **queue_out);

/* cetcd_async_queue_close shuts the queue down and frees it.  Every call
 * started on it must have completed (its callback ran).  NULL is fine. */
void cetcd_async_queue_close(struct cetcd_async_queue *queue);

/* The callback of a completed call, run on the queue's thread.  st is the
 * outcome (borrowed for the callback); resp is the decoded reply (owned by
 * the callback: free with protobuf_c_message_free_unpacked), or NULL on
 * error or when the call was started with resp_desc == NULL. */
struct cetcd_async_done {
    void (*fn)(void *arg, const struct cetcd_status *st,
               ProtobufCMessage *resp);
    void *arg; /* passed to fn */
};

/* cetcd_async_call starts req on method_path via client on queue.  resp_desc
 * NULL skips decoding the reply (only the status is reported).  On success
 * (0) the callback will run exactly once; on error it will not.
 * Errors: CETCD_RESOURCE_EXHAUSTED, CETCD_INTERNAL (gRPC refused the
 * batch), CETCD_INVALID_ARGUMENT. */
int cetcd_async_call(struct cetcd_client *client,
                     struct cetcd_async_queue *queue, const char *method_path,
                     const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc,
                     const struct cetcd_async_done *done);

/* cetcd_async_queue_run waits for completions for up to timeout_ms (<0:
 * forever, 0: only what is ready) and runs their callbacks.  It returns
 * when the time is up, or as soon as a callback leaves no call pending
 * (callbacks that start new calls keep it running).  Returns the number of
 * callbacks run (>= 0). */
int cetcd_async_queue_run(struct cetcd_async_queue *queue, int timeout_ms);

/* cetcd_async_queue_pending returns the number of calls started on the
 * queue whose callbacks have not run yet. */
size_t cetcd_async_queue_pending(const struct cetcd_async_queue *queue);

/* ------------------------------------------------------------------------
 * Watch
 *
 * A watch stream is one bidirectional Watch call on the client's current
 * endpoint (no failover: a broken connection ends the stream, and the
 * caller opens a new one, from the last revision it saw + 1).  On a
 * stream, cetcd_watch_create() starts watchers, cetcd_watch_cancel() stops
 * one, cetcd_watch_progress() asks for a progress notification; the
 * server's WatchResponses (created / canceled confirmations, batches of
 * events, progress notifications) come back as struct
 * cetcd_watch_response, in the order the server sent them.  Fragments
 * (a create with fragment set) are delivered as they arrive: every part
 * but the last has fragment set.
 *
 * Two ways to receive:
 *   - poll: open with opts->queue NULL and no on_response.  The stream
 *     has its own completion queue and makes progress (sends, receives)
 *     only inside cetcd_watch_poll(), which returns the next response.
 *     At most opts->buffer_max responses wait in the stream: when it is
 *     full the stream stops reading, and HTTP/2 flow control holds the
 *     server back, until poll takes one.
 *   - callback: open with opts->queue (an async queue) and on_response.
 *     The queue's thread runs the callbacks inside
 *     cetcd_async_queue_run(); each started stream counts as pending on
 *     the queue until it has ended (so a run loop "while pending > 0"
 *     ends once every stream is closed).
 *
 * Requests waiting to be sent are bounded too: at most opts->send_max
 * behind the one being written (CETCD_RESOURCE_EXHAUSTED beyond).
 *
 * THREADS: create, cancel and progress may be called from any thread.
 * poll belongs to one thread.  Callbacks run on the queue's thread.
 *
 * LIFETIME: cetcd_watch_stream_open() ... cetcd_watch_stream_close().  In
 * poll mode close cancels the call, waits until gRPC gave every operation
 * back and frees the stream.  In callback mode close cancels the call and
 * returns at once; the queue's thread frees the stream once its last
 * operation completed, after on_close ran.  Either way, the handle must
 * not be used after close.  Close the stream before its client.
 * ---------------------------------------------------------------------- */

enum cetcd_event_type { CETCD_EVENT_PUT = 0, CETCD_EVENT_DELETE = 1 };

/* One event (mvccpb.Event).  kv and prev_kv point into the response that
 * holds the event. */
struct cetcd_watch_event {
    int type;                 /* enum cetcd_event_type (as sent) */
    struct cetcd_kv kv;       /* the pair after the change; for a delete,
                                 its key and mod_revision only */
    bool has_prev_kv;         /* prev_kv is set (asked for and existing) */
    struct cetcd_kv prev_kv;  /* the pair before the change */
};

/* One WatchResponse.  A progress notification is a response with no
 * events that is neither created nor canceled (watch_id -1 when asked for
 * with cetcd_watch_progress on etcd 3.4). */
struct cetcd_watch_response {
    struct cetcd_header header;       /* header.revision: store revision */
    int64_t watch_id;                 /* the watcher it is about */
    bool created;                     /* confirms a create */
    bool canceled;                    /* the watcher is gone */
    bool fragment;                    /* more parts of this batch follow */
    int64_t compact_revision;         /* canceled: the start revision was
                                         compacted; watch from this one */
    const char *cancel_reason;        /* NUL-terminated, "" if none */
    struct cetcd_watch_event *events; /* events_len events (NULL if none) */
    size_t events_len;                /* their number */
    void *internal_;                  /* library-owned; do not touch */
};

/* cetcd_watch_response_free frees a response (NULL is fine). */
void cetcd_watch_response_free(struct cetcd_watch_response *r);

/* cetcd_watch_response_is_progress says whether r is a progress
 * notification (see struct cetcd_watch_response). */
bool cetcd_watch_response_is_progress(const struct cetcd_watch_response *r);

struct cetcd_watch_stream; /* opaque */

#define CETCD_WATCH_BUFFER_DEFAULT 1024 /* poll mode responses held */
#define CETCD_WATCH_SEND_DEFAULT 1024   /* requests waiting to be sent */

/* Options of a stream; zero-initialise, then set what you need. */
struct cetcd_watch_stream_opts {
    struct cetcd_async_queue *queue; /* callback mode: the queue whose
                                        thread runs the callbacks; NULL =
                                        poll mode */
    /* on_response (callback mode, required) receives each response; it
     * owns r (free with cetcd_watch_response_free). */
    void (*on_response)(void *arg, struct cetcd_watch_response *r);
    /* on_close (callback mode, optional) runs once when the stream ended:
     * st is the call's final status (CETCD_CANCELLED after a close),
     * borrowed for the callback.  No on_response follows it. */
    void (*on_close)(void *arg, const struct cetcd_status *st);
    void *arg;         /* passed to both */
    size_t buffer_max; /* poll mode: responses held; 0 = default */
    size_t send_max;   /* requests waiting to be sent; 0 = default */
};

/* cetcd_watch_stream_open starts a Watch call on the client's current
 * endpoint.  It does not wait for the connection: a server that cannot be
 * reached ends the stream (UNAVAILABLE from poll, or on_close).
 * Errors: CETCD_INVALID_ARGUMENT (no client or stream_out; a queue
 * without on_response or on_response without a queue),
 * CETCD_RESOURCE_EXHAUSTED, CETCD_INTERNAL (gRPC refused the call). */
int cetcd_watch_stream_open(struct cetcd_client *client,
                            const struct cetcd_watch_stream_opts *opts,
                            struct cetcd_watch_stream **stream_out,
                            struct cetcd_status *st);

/* cetcd_watch_stream_close ends the stream (see LIFETIME).  NULL is
 * fine. */
void cetcd_watch_stream_close(struct cetcd_watch_stream *stream);

/* Options of one watcher (WatchCreateRequest).  range_end as in
 * cetcd_range_opts ("\0", length 1: every key >= key). */
struct cetcd_watch_opts {
    const void *range_end;  /* end of the watched range, exclusive */
    size_t range_end_len;   /* its length; 0 = the single key */
    int64_t start_revision; /* first revision to report; 0 = the next */
    bool prev_kv;           /* events carry the previous pair */
    bool no_put;            /* filter out puts */
    bool no_delete;         /* filter out deletes */
    bool progress_notify;   /* periodic progress notifications */
    bool fragment;          /* the server may split large batches */
    int64_t watch_id;       /* ask for this id; 0 = the server picks */
};

/* cetcd_watch_create queues a create request for key (opts may be NULL).
 * The server answers with a created response (its watch_id names the
 * watcher) or, for an invalid request, a canceled one with its
 * cancel_reason (etcd's text, e.g. "mvcc: required revision has been
 * compacted" comes as canceled + compact_revision).
 * Errors: CETCD_INVALID_ARGUMENT (no stream), CETCD_FAILED_PRECONDITION
 * (the stream has ended), CETCD_RESOURCE_EXHAUSTED (send_max requests
 * waiting, or no memory). */
int cetcd_watch_create(struct cetcd_watch_stream *stream, const void *key,
                       size_t key_len, const struct cetcd_watch_opts *opts,
                       struct cetcd_status *st);

/* cetcd_watch_cancel queues a cancel of watch_id; the server answers with
 * a canceled response.  Errors: as cetcd_watch_create. */
int cetcd_watch_cancel(struct cetcd_watch_stream *stream, int64_t watch_id,
                       struct cetcd_status *st);

/* cetcd_watch_progress queues a progress request: the server answers with
 * a progress notification once every watcher of the stream is synced.
 * Errors: as cetcd_watch_create. */
int cetcd_watch_progress(struct cetcd_watch_stream *stream,
                         struct cetcd_status *st);

/* cetcd_watch_poll (poll mode) waits up to timeout_ms (<0: forever, 0: only
 * what is ready) for the next response and sets *resp_out to it (owned by
 * the caller: cetcd_watch_response_free).  Responses buffered before the
 * stream ended are returned first.
 * Errors: CETCD_DEADLINE_EXCEEDED (none within timeout_ms; the stream goes
 * on), the stream's final status once it has ended (e.g. UNAVAILABLE, or
 * a server error), CETCD_INTERNAL (a response that could not be decoded:
 * the stream is ended), CETCD_INVALID_ARGUMENT (callback mode). */
int cetcd_watch_poll(struct cetcd_watch_stream *stream, int timeout_ms,
                     struct cetcd_watch_response **resp_out,
                     struct cetcd_status *st);

/* cetcd_watch_stream_buffered returns the number of responses held by a
 * poll-mode stream (at most its buffer_max). */
size_t cetcd_watch_stream_buffered(const struct cetcd_watch_stream *stream);

/* ------------------------------------------------------------------------
 * Generic streams
 *
 * A stream is one streaming call of any method, by its path, with
 * protobuf-c messages as cetcd_call_unary() takes them: bidirectional
 * ("/etcdserverpb.Lease/LeaseKeepAlive"), server-streaming
 * ("/etcdserverpb.Maintenance/Snapshot", "/v3electionpb.Election/Observe":
 * send the one request, then cetcd_stream_close_send()) or
 * client-streaming.  It goes to the client's current endpoint with the
 * metadata unary calls send (the auth token and md_key/md_value, as they
 * are at open), without failover or dial wait: a server that cannot be
 * reached ends the stream with UNAVAILABLE, and the caller opens a new
 * one (a unary call moves the client on to an endpoint that answers).
 *
 * Poll mode only: the stream has its own completion queue and makes
 * progress (sends, receives) only inside cetcd_stream_recv().  recv
 * returns the responses in the order the server sent them, then, once
 * every one was taken, the call's final status, again at every later
 * recv:
 *   0, *msg_out set       a response
 *   0, *msg_out NULL      the server ended the call with OK
 *   a gRPC status code    the call failed: the server's code and message
 *                         in st (etcd's error text, as unary calls report
 *                         it), UNAVAILABLE (unreachable, connection
 *                         lost), DEADLINE_EXCEEDED (opts->timeout_ms
 *                         passed; the server is told the deadline and
 *                         may end the call first with its own status:
 *                         etcd's UNKNOWN "context deadline exceeded"),
 *                         CANCELLED, RESOURCE_EXHAUSTED (a response
 *                         above the client's max_recv_bytes),
 *                         INTERNAL (a response resp_desc cannot decode:
 *                         the stream is ended)
 *   CETCD_STREAM_WAIT_TIMEOUT  nothing within this recv's timeout_ms; the
 *                         call goes on (not a gRPC code:
 *                         cetcd_code_name() says "UNKNOWN_CODE")
 *
 * BOUNDS: at most opts->buffer_max responses wait in the stream: when it
 * is full the stream stops reading, and HTTP/2 flow control holds the
 * server back, until recv takes one.  A response is at most the client's
 * max_recv_bytes.  At most opts->send_max requests wait behind the one
 * being written (CETCD_RESOURCE_EXHAUSTED beyond); they leave the ring
 * only inside recv, so a caller that sends a lot receives in between.
 *
 * THREADS: send and close_send may be called from any thread; recv
 * belongs to one thread.  Close only after every other call on the
 * stream returned.
 *
 * LIFETIME: cetcd_stream_open() ... cetcd_stream_close(), which cancels
 * the call if it still runs, waits until gRPC gave every operation back
 * and frees the stream with the requests and responses it still holds.
 * The handle must not be used after close.  Close the stream before its
 * client.  Requests are borrowed for the send call only (packed at once);
 * responses belong to the caller.
 * ---------------------------------------------------------------------- */

struct cetcd_stream; /* opaque */

#define CETCD_STREAM_BUFFER_DEFAULT 64 /* responses held */
#define CETCD_STREAM_SEND_DEFAULT 64   /* requests waiting to be sent */
#define CETCD_STREAM_WAIT_TIMEOUT 100  /* recv: this wait timed out */

/* Options of a stream; zero-initialise, then set what you need. */
struct cetcd_stream_opts {
    size_t buffer_max; /* responses held; 0 = default */
    size_t send_max;   /* requests waiting to be sent; 0 = default */
    int timeout_ms;    /* deadline of the whole call (its end is
                          DEADLINE_EXCEEDED); 0 = none, not the client's
                          call_timeout_ms */
};

/* cetcd_stream_open starts a call of method_path on the client's current
 * endpoint, whose responses are decoded with resp_desc (e.g.
 * &etcdserverpb__lease_keep_alive_response__descriptor).  opts may be
 * NULL for defaults.  It does not wait for the connection.  On success
 * *stream_out is the stream; free it with cetcd_stream_close().
 * Errors: CETCD_INVALID_ARGUMENT (no client, stream_out or resp_desc, a
 * method_path not starting with '/', timeout_ms < 0),
 * CETCD_RESOURCE_EXHAUSTED, CETCD_INTERNAL (gRPC refused the call). */
int cetcd_stream_open(struct cetcd_client *client, const char *method_path,
                      const ProtobufCMessageDescriptor *resp_desc,
                      const struct cetcd_stream_opts *opts,
                      struct cetcd_stream **stream_out,
                      struct cetcd_status *st);

/* cetcd_stream_send packs req (borrowed for the call) and sends it, or
 * queues it behind the one being written.  Success says nothing of the
 * server: a failure shows in recv.
 * Errors: CETCD_INVALID_ARGUMENT (no stream or req),
 * CETCD_FAILED_PRECONDITION (the call has ended, or close_send was
 * called), CETCD_RESOURCE_EXHAUSTED (send_max requests waiting, or no
 * memory), CETCD_INTERNAL (gRPC refused the send). */
int cetcd_stream_send(struct cetcd_stream *s, const ProtobufCMessage *req,
                      struct cetcd_status *st);

/* cetcd_stream_close_send half-closes the call once the requests sent so
 * far are written: no more sends; the server sees the end of its input
 * (a server-streaming method needs it after its one request).  Calling it
 * again, or after the call ended, does nothing.
 * Errors: CETCD_INVALID_ARGUMENT (no stream), CETCD_INTERNAL (gRPC
 * refused the half-close). */
int cetcd_stream_close_send(struct cetcd_stream *s, struct cetcd_status *st);

/* cetcd_stream_recv waits up to timeout_ms (<0: forever, 0: only what is
 * ready) for the next response and sets *msg_out to it, owned by the
 * caller: free with protobuf_c_message_free_unpacked(*msg_out, NULL).
 * *msg_out is NULL whenever recv does not return a response.  Returns as
 * the table above says; CETCD_INVALID_ARGUMENT for no stream or
 * msg_out. */
int cetcd_stream_recv(struct cetcd_stream *s, int timeout_ms,
                      ProtobufCMessage **msg_out, struct cetcd_status *st);

/* cetcd_stream_buffered returns the number of responses held (at most
 * buffer_max). */
size_t cetcd_stream_buffered(const struct cetcd_stream *s);

/* cetcd_stream_close ends the stream (see LIFETIME).  NULL is fine. */
void cetcd_stream_close(struct cetcd_stream *s);

/* ------------------------------------------------------------------------
 * Raw calls and streams (a proxy's)
 *
 * What a gRPC proxy needs to forward calls it does not decode: request
 * bytes in, reply bytes out, the caller's metadata and deadline passed on,
 * the upstream's status code and message passed back unchanged.  Both
 * kinds run on an async queue (cetcd_async_queue_*): their callbacks run
 * on the queue's thread inside cetcd_async_queue_run(), and each call or
 * stream counts as pending on the queue until its last callback ran (so
 * the queue can be closed once pending is 0).
 *
 * METADATA: md == NULL sends the client's own (the token and the
 * md_key/md_value pair, as other calls do); otherwise md[0..md_n) is sent
 * INSTEAD (md_n 0: none at all, not even the client's token).  Keys are
 * lower case and legal HTTP/2 header names (not ":..." nor "grpc-..."),
 * values printable ASCII unless the key ends in "-bin".  Copied.
 *
 * DEADLINE: deadline_mono_ns is a point on CLOCK_MONOTONIC in ns (0 or
 * INT64_MAX: none).  The server is told it (grpc-timeout) and the call
 * ends DEADLINE_EXCEEDED when it passes, unless the server ended it first
 * with a status of its own.
 *
 * FAILOVER (unary only): a raw unary call goes to the client's current
 * endpoint.  When it fails UNAVAILABLE because the endpoint could not be
 * reached or the connection broke (not a status the server sent, which
 * etcd words "etcdserver: ..."), the
 * client's current endpoint moves on to the next one, and the call is
 * tried again on the next endpoints (each at most once, within the same
 * deadline) when that is safe: the method is read-only (as cetcd_range),
 * or the request certainly never left (no connection could be made).  A
 * mutation that may have reached a server is never sent again.  Streams
 * have no failover: a broken connection ends them UNAVAILABLE and the
 * caller opens a new one.
 * ---------------------------------------------------------------------- */

/* One metadata pair of a raw call (key lower case, value NUL-terminated). */
struct cetcd_md {
    const char *key;   /* the header name, e.g. "token" */
    const char *value; /* its value */
};

#define CETCD_RAW_MD_MAX 4      /* metadata pairs of one raw call */
#define CETCD_RAW_SEND_DEFAULT 64 /* raw stream: requests waiting */

/* Options of a raw unary call; zero-initialise, then set what you need. */
struct cetcd_raw_opts {
    /* The call's metadata: md[0..md_n) INSTEAD of the client's token and
     * md_key pair (md == NULL: the client's, as other calls send).  Copied
     * (see METADATA above). */
    const struct cetcd_md *md;
    size_t md_n;                 /* <= CETCD_RAW_MD_MAX */
    /* Deadline on CLOCK_MONOTONIC in ns (INT64_MAX or 0: none, then the
     * client's call_timeout_ms if it has one, from the start); the server
     * is told it (grpc-timeout) and the call ends DEADLINE_EXCEEDED at
     * it. */
    int64_t deadline_mono_ns;
};

/* Completion of a raw unary call, on the queue's thread: st is the outcome
 * (code 0 = OK; else the server's code and message as sent, or the
 * transport's UNAVAILABLE / DEADLINE_EXCEEDED / ...; an OK end without a
 * reply message is INTERNAL "no reply message"); resp/len the reply bytes
 * (NULL, 0 unless OK; non-NULL when OK, also for an empty reply), borrowed
 * for the callback.  st is borrowed for the callback too. */
typedef void (*cetcd_raw_done_fn)(void *arg, const struct cetcd_status *st,
                                  const uint8_t *resp, size_t len);

/* cetcd_async_call_raw starts a unary call of method_path
 * ("/etcdserverpb.KV/Range") with the len request bytes req (copied; NULL
 * is fine when len is 0) on queue q, with the options o (NULL: the
 * client's metadata, no deadline of the call's own).  Failover as FAILOVER
 * above says.  done runs exactly once on success (0); never on error.
 * Any thread; also inside a callback of q.
 * Errors: CETCD_INVALID_ARGUMENT (no client, queue, method path starting
 * with '/' or done; req NULL with len > 0; bad metadata),
 * CETCD_RESOURCE_EXHAUSTED, CETCD_INTERNAL (gRPC refused the call). */
int cetcd_async_call_raw(struct cetcd_client *c, struct cetcd_async_queue *q,
                         const char *method_path, const uint8_t *req,
                         size_t len, const struct cetcd_raw_opts *o,
                         cetcd_raw_done_fn done, void *arg);

/* A raw stream: one streaming call of any method by its path
 * (bidirectional, server- or client-streaming), in callback mode only: no
 * thread per stream, the queue's thread runs the callbacks.  It goes to
 * the client's current endpoint without waiting for the connection.
 *
 * THREADS: send, close_send, pause and close may be called from any
 * thread, also inside the stream's own callbacks.  The callbacks run one
 * at a time on the queue's thread, never inside those calls.
 *
 * LIFETIME: cetcd_raw_stream_open() ... cetcd_raw_stream_close(), which
 * the owner calls exactly once, whether or not the call has ended.  close
 * cancels the call if it still runs; after it, on_msg is not called
 * any more, but for one the queue's thread had already begun to deliver
 * when close came from another thread.  on_close
 * runs exactly once for every stream open returned, before or after
 * close (CANCELLED when close ended the call), and is the last callback.
 * The library frees the stream once both happened; the handle must not
 * be used after close.  Close every stream before its client, and let
 * their on_close run before closing the queue. */
struct cetcd_raw_stream; /* opaque */

/* Options of a raw stream; zero-initialise, then set what you need. */
struct cetcd_raw_stream_opts {
    struct cetcd_async_queue *queue; /* required: its thread runs the
                                        callbacks */
    const struct cetcd_md *md;       /* as in cetcd_raw_opts */
    size_t md_n;                     /* as in cetcd_raw_opts */
    int64_t deadline_mono_ns;        /* as in cetcd_raw_opts, but none is
                                        none (never call_timeout_ms) */
    /* on_msg (required) receives each message from the server, in order;
     * msg/len borrowed for the callback. */
    void (*on_msg)(void *arg, const uint8_t *msg, size_t len);
    /* on_close (optional) runs once, last, when the call ended: st its
     * final status, borrowed for the callback (0 when the server ended it
     * with OK; the server's code and message; UNAVAILABLE when the
     * connection broke or none could be made; DEADLINE_EXCEEDED;
     * CANCELLED after a close). */
    void (*on_close)(void *arg, const struct cetcd_status *st);
    void *arg;       /* passed to both */
    size_t send_max; /* requests waiting to be sent behind the one being
                        written; 0 = CETCD_RAW_SEND_DEFAULT */
};

/* cetcd_raw_stream_open starts a call of method_path on the client's
 * current endpoint.  On success (0) *out is the stream, whose on_close
 * will run once; on error no callback runs and *out is NULL.
 * Errors: CETCD_INVALID_ARGUMENT (no client, out, opts, queue or on_msg;
 * a method path not starting with '/'; bad metadata),
 * CETCD_RESOURCE_EXHAUSTED, CETCD_INTERNAL (gRPC refused the call). */
int cetcd_raw_stream_open(struct cetcd_client *c, const char *method_path,
                          const struct cetcd_raw_stream_opts *o,
                          struct cetcd_raw_stream **out,
                          struct cetcd_status *st);

/* cetcd_raw_stream_send copies the len bytes msg (NULL is fine when len is
 * 0) and sends them, or queues them behind the one being written.  Any
 * thread.  Success says nothing of the server: a failure ends the call
 * (on_close).
 * Errors: CETCD_INVALID_ARGUMENT (no stream; msg NULL with len > 0),
 * CETCD_FAILED_PRECONDITION (the call has ended, or close_send or close
 * was called), CETCD_RESOURCE_EXHAUSTED (send_max requests waiting, or no
 * memory), CETCD_INTERNAL (gRPC refused the send). */
int cetcd_raw_stream_send(struct cetcd_raw_stream *s, const uint8_t *msg,
                          size_t len, struct cetcd_status *st);

/* cetcd_raw_stream_close_send half-closes the call once the requests sent
 * so far are written (a server-streaming method needs it after its one
 * request).  Any thread; again, or after the call ended, it does nothing.
 * Errors: CETCD_INVALID_ARGUMENT (no stream), CETCD_INTERNAL (gRPC
 * refused the half-close). */
int cetcd_raw_stream_close_send(struct cetcd_raw_stream *s,
                                struct cetcd_status *st);

/* cetcd_raw_stream_pause(s, true) stops receiving: no on_msg runs until
 * cetcd_raw_stream_pause(s, false), and HTTP/2 flow control then holds the
 * server back (a message that was already on its way is held, one at
 * most).  Resuming delivers what was held first, then receives again, in
 * the server's order.  A paused stream whose call ended keeps its held
 * message, and its on_close, until it is resumed or closed (a close drops
 * the held message).  Any thread, also inside on_msg; never after close. */
void cetcd_raw_stream_pause(struct cetcd_raw_stream *s, bool paused);

/* cetcd_raw_stream_close ends the stream (see LIFETIME above).  NULL is
 * fine. */
void cetcd_raw_stream_close(struct cetcd_raw_stream *s);

/* ------------------------------------------------------------------------
 * Latency statistics (pure computation, no I/O)
 *
 * A recorder collects latencies (seconds, as double) and summarises them the
 * way etcd's benchmark report does.  One thread per recorder; merge
 * recorders of several threads with cetcd_latency_merge().
 * ---------------------------------------------------------------------- */

#define CETCD_LATENCY_PCTLS 8       /* 10 25 50 75 90 95 99 99.9 */
#define CETCD_LATENCY_BUCKETS 11    /* histogram buckets, as etcd */

struct cetcd_latency {
    double *lats;   /* recorded latencies (seconds); sorted by summarise */
    size_t len;     /* number recorded */
    size_t cap;     /* allocated slots */
    uint64_t errors; /* calls that failed (not in lats) */
};

/* Percentiles reported, in percent: 10 25 50 75 90 95 99 99.9. */
extern const double cetcd_latency_pctls[CETCD_LATENCY_PCTLS];

struct cetcd_latency_summary {
    size_t count;     /* successful calls */
    double total_s;   /* wall time of the run (given by the caller) */
    double fastest_s; /* minimum latency */
    double slowest_s; /* maximum latency */
    double average_s; /* mean latency */
    double stddev_s;  /* population standard deviation */
    double rps;       /* count / total_s */
    double pctl_s[CETCD_LATENCY_PCTLS];      /* etcd's percentile rule */
    double bucket_s[CETCD_LATENCY_BUCKETS];  /* histogram upper bounds */
    size_t bucket_n[CETCD_LATENCY_BUCKETS];  /* histogram counts */
};

/* cetcd_latency_init prepares an empty recorder with room for cap_hint
 * samples.  Errors: CETCD_RESOURCE_EXHAUSTED. */
int cetcd_latency_init(struct cetcd_latency *l, size_t cap_hint);
void cetcd_latency_close(struct cetcd_latency *l);
/* cetcd_latency_add records one latency (grows as needed).
 * Errors: CETCD_RESOURCE_EXHAUSTED. */
int cetcd_latency_add(struct cetcd_latency *l, double seconds);
/* cetcd_latency_merge appends src's samples and errors to dst.
 * Errors: CETCD_RESOURCE_EXHAUSTED. */
int cetcd_latency_merge(struct cetcd_latency *dst,
                        const struct cetcd_latency *src);
/* cetcd_latency_summarise sorts l and fills *out.  A percentile p is the
 * first sorted sample at index i with i*100/n >= p (etcd's rule, except
 * that one sample may fill several percentiles when n is small); the
 * histogram has 10 equal-width buckets from fastest to slowest plus a last
 * bucket at slowest.  With no samples, *out is all zeros. */
void cetcd_latency_summarise(struct cetcd_latency *l, double total_s,
                             struct cetcd_latency_summary *out);

#ifdef __cplusplus
}
#endif

#endif
