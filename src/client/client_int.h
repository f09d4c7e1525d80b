/*
 * client_int.h - declarations shared between libcetcd's files.
 *
 * Not installed.  The pure parts (endpoint parsing, failover order, method
 * classification) are declared first and have no gRPC dependency, so unit
 * tests can exercise them without a server.
 */
#ifndef CETCD_CLIENT_INT_H
#define CETCD_CLIENT_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <grpc/grpc.h>

#include "cetcd/cetcd.h"
#include "dial/dial.h"
#include "etcdserverpb/rpc.pb-c.h"

/* Longest gRPC target kept for one endpoint, NUL included. */
#define CLIENT_TARGET_MAX 256

/* client__endpoints_parse splits s ("a:1,http://b:2,unixs:///run/s") into
 * gRPC targets written to out[0..max) ("a:1", "b:2", "unix:/run/s") and
 * what each item's scheme says about TLS into sec_out[0..max)
 * (dial_url_parse).  Whitespace around items is ignored, a trailing "/"
 * after host:port too.  Returns 0 and sets *n_out, or
 * CETCD_INVALID_ARGUMENT (empty list, empty item, no port, a path, unknown
 * scheme, target too long, more than max items). */
int client__endpoints_parse(const char *s, char (*out)[CLIENT_TARGET_MAX],
                            enum dial_security *sec_out, size_t max,
                            size_t *n_out);

/* client__failover_order returns the endpoint index tried at attempt
 * (0-based) when the current endpoint is cur out of n. */
size_t client__failover_order(size_t cur, size_t n, size_t attempt);

/* client__method_is_readonly says whether method_path may be retried on
 * another endpoint after it was sent (it changes nothing). */
bool client__method_is_readonly(const char *method_path);

/* client__status_set fills st (if not NULL) and returns code. */
int client__status_set(struct cetcd_status *st, int code, const char *fmt,
                        ...) __attribute__((format(printf, 3, 4)));

/* Most outgoing metadata pairs of one call: the client's token and extra
 * pair, or a raw call's own list (cetcd_md). */
#define CLIENT_MD_MAX 4
_Static_assert(CLIENT_MD_MAX >= 2 && CLIENT_MD_MAX >= CETCD_RAW_MD_MAX,
               "room for every kind of call's metadata");

/* client__md_check says whether md[0..n) is a metadata list a raw call may
 * send (n <= CETCD_RAW_MD_MAX, legal keys and values; raw.c). */
bool client__md_check(const struct cetcd_md *md, size_t n);

/* client__md_set copies the checked md[0..n) into out[0..n) as slices,
 * which the caller unrefs (grpc_slice_unref of each key and value);
 * returns n. */
size_t client__md_set(grpc_metadata *out, const struct cetcd_md *md,
                      size_t n);

/* client__deadline_mono turns a CLOCK_MONOTONIC point in ns into a gRPC
 * deadline (ns <= 0 or INT64_MAX: infinite; a past point: now). */
gpr_timespec client__deadline_mono(int64_t ns);

/* One endpoint of a client.  Owned by the client; channel is thread-safe. */
struct client__endpoint {
    char target[CLIENT_TARGET_MAX]; /* "host:port" or "unix:path" */
    bool tls;                       /* dialled with TLS */
    grpc_channel *channel;          /* created at open */
};

/* The client.  Immutable after open except cur (atomic) and token (set by
 * cetcd_client_token_set, documented as not concurrent with calls). */
struct cetcd_client {
    struct client__endpoint *eps; /* n_eps endpoints */
    size_t n_eps;                 /* 1..CETCD_ENDPOINTS_MAX */
    atomic_size_t cur;            /* index of the current endpoint */
    int dial_timeout_ms;          /* wait for READY before sending */
    int call_timeout_ms;          /* per-call deadline; 0 = none */
    char *token;                  /* "token" metadata value or NULL */
    char *md_key, *md_value;      /* opts' extra metadata pair, or NULL */
};

/* One unary call in flight: everything its single batch points at.  Owned
 * by whoever started it until client__call_finish. */
struct client__call {
    grpc_call *call;                /* the core call */
    grpc_metadata md[2];            /* outgoing metadata (token, extra) */
    size_t md_len;                  /* used entries of md */
    grpc_byte_buffer *send_buf;     /* packed request */
    struct dial_reply reply;        /* reply, status and metadata */
};

/* client__call_start packs req and starts the whole unary batch on the
 * endpoint's channel with completion tag on cq.  On error nothing is left
 * to clean up and no completion will arrive.
 * Errors: CETCD_RESOURCE_EXHAUSTED, CETCD_INTERNAL. */
int client__call_start(struct cetcd_client *c, size_t ep,
                       grpc_completion_queue *cq, const char *method_path,
                       const ProtobufCMessage *req, void *tag,
                       struct client__call *call);

/* client__call_finish, after the batch completed (ok = the event's
 * success), decodes the reply into *resp_out (if resp_desc), fills st and
 * releases everything the call held.  Returns the status code. */
int client__call_finish(struct client__call *call, int ok,
                        const ProtobufCMessageDescriptor *resp_desc,
                        ProtobufCMessage **resp_out, struct cetcd_status *st);

/* client__pack encodes req into a fresh byte buffer (NULL: no memory),
 * which the caller destroys (or a send op takes). */
grpc_byte_buffer *client__pack(const ProtobufCMessage *req);

/* What every completion tag on an async queue starts with: the queue's run
 * loop calls complete(tag, ok) for each event (async.c's calls, watch.c's
 * stream operations).  complete may free the object holding the tag. */
struct client__tag {
    void (*complete)(struct client__tag *tag, int ok); /* the handler */
};

/* client__queue_cq returns the queue's completion queue, for calls whose
 * operations complete on it (their tags are struct client__tag). */
grpc_completion_queue *client__queue_cq(struct cetcd_async_queue *q);

/* client__queue_hold and client__queue_release count one more or one less
 * pending user of the queue (cetcd_async_queue_pending): a watch stream
 * holds the queue from its open until it is freed. */
void client__queue_hold(struct cetcd_async_queue *q);
void client__queue_release(struct cetcd_async_queue *q);

/* Streaming calls (stream.c): one gRPC call on the client's current
 * endpoint, with requests sent through a bounded ring and responses
 * decoded into objects that are either held for a poller (poll mode, at
 * most buffer_max) or handed to a callback on an async queue (callback
 * mode).  struct cetcd_stream is that engine; the public cetcd_stream_*
 * calls are its protobuf-c flavour, and the Watch stream (watch.c) is a
 * flavour with its own decoding, messages and callbacks. */

/* How a flavour decodes, frees and delivers its objects.  Static and
 * immutable. */
struct client__stream_hooks {
    /* decode turns one received message of len bytes into a new object
     * (*obj_out); returns 0, CETCD_INTERNAL (not that message) or
     * CETCD_RESOURCE_EXHAUSTED.  decode_ctx is the cfg's. */
    int (*decode)(const void *decode_ctx, const uint8_t *data, size_t len,
                  void **obj_out);
    /* obj_free frees an object decode made (those still held at the end). */
    void (*obj_free)(void *obj);
    /* on_msg (callback mode) receives each object and owns it; runs on the
     * queue's thread without the stream's lock.  ctx is the cfg's. */
    void (*on_msg)(void *ctx, void *obj);
    /* on_close (callback mode, NULL = none) runs once when the call ended
     * and nothing is outstanding; st is the final status (borrowed). */
    void (*on_close)(void *ctx, const struct cetcd_status *st);
    /* release (NULL = none) runs exactly once, as the stream's last act
     * when it is freed (also when its open fails): the flavour frees ctx
     * there. */
    void (*release)(void *ctx);
};

/* What client__stream_open starts. */
struct client__stream_cfg {
    const char *method;        /* gRPC method path; borrowed for the open */
    const char *what;          /* the response's type name, static: errors
                                  say "cannot decode <what>" */
    const struct client__stream_hooks *hooks; /* static */
    const void *decode_ctx;    /* passed to decode */
    void *ctx;                 /* passed to the other hooks */
    struct cetcd_async_queue *queue; /* callback mode; NULL = poll mode */
    size_t buffer_max;         /* poll mode: objects held, > 0 */
    size_t send_max;           /* requests waiting to be sent, > 0 */
    int timeout_ms;            /* whole-call deadline; <= 0 = none */
    bool md_extra;             /* send the client's md_key/md_value pair
                                  besides the token (unary calls do) */
    bool ok_is_cancelled;      /* report a server's OK end as CANCELLED
                                  (a Watch never ends well for a client) */
    const struct cetcd_md *md; /* checked metadata sent INSTEAD of the
                                  token and extra pair (raw streams);
                                  NULL = those.  Borrowed for the open */
    size_t md_n;               /* entries of md */
    int64_t deadline_mono_ns;  /* > 0 and < INT64_MAX: the call's
                                  deadline on CLOCK_MONOTONIC, instead of
                                  timeout_ms */
};

/* client__stream_open starts the call: initial metadata, the status
 * receiver and the first receive.  It does not wait for the connection.
 * On success *stream_out is the stream; on error nothing is left but
 * what completes later (callback mode), and release ran or will run.
 * Returns 0, CETCD_RESOURCE_EXHAUSTED or CETCD_INTERNAL. */
int client__stream_open(struct cetcd_client *c,
                        const struct client__stream_cfg *cfg,
                        struct cetcd_stream **stream_out);

/* client__stream_send sends buf (taken in every case), or queues it
 * behind the one being written.  Any thread.  Returns 0,
 * CETCD_FAILED_PRECONDITION (the call ended, or sending was closed),
 * CETCD_RESOURCE_EXHAUSTED (send_max waiting) or CETCD_INTERNAL. */
int client__stream_send(struct cetcd_stream *s, grpc_byte_buffer *buf);

/* client__stream_close_send half-closes once the queued requests are
 * written.  Any thread; repeating it, or after the call ended, does
 * nothing.  Returns 0 or CETCD_INTERNAL. */
int client__stream_close_send(struct cetcd_stream *s);

/* What client__stream_poll got. */
enum client__stream_got {
    CLIENT_STREAM_MSG,     /* *obj_out is the next object */
    CLIENT_STREAM_END,     /* the call ended: *final_out is its status */
    CLIENT_STREAM_TIMEOUT, /* nothing within the time; the call goes on */
};

/* client__stream_poll (poll mode, one thread) runs the stream's
 * completions until an object is held, the call has ended (objects held
 * before come first) or timeout_ms passed (< 0: forever, 0: only what is
 * ready). */
enum client__stream_got client__stream_poll(struct cetcd_stream *s,
                                            int timeout_ms, void **obj_out,
                                            struct cetcd_status *final_out);

/* client__stream_buffered returns the number of objects held. */
size_t client__stream_buffered(const struct cetcd_stream *s);

/* client__stream_pause (callback mode, any thread, also inside on_msg)
 * stops receiving (paused) or starts again.  While paused no RECV is
 * armed; a message already on its way is held (one at most) and on_msg
 * gets it, on the queue's thread, once resumed.  on_close waits for a
 * held message to be delivered, unless the stream is closed (close drops
 * it).  Streams never paused behave as before. */
void client__stream_pause(struct cetcd_stream *s, bool paused);

/* client__stream_close cancels the call if it still runs.  Poll mode: it
 * waits until gRPC gave every operation back and frees the stream.
 * Callback mode: it returns at once; the queue's thread frees the stream
 * after its last completion (and on_close).  NULL is fine. */
void client__stream_close(struct cetcd_stream *s);

/* client__watch_response_decode unpacks len bytes of a WatchResponse into
 * a new public response (*resp_out, freed with
 * cetcd_watch_response_free).  Returns 0, CETCD_INTERNAL (not a
 * WatchResponse; *resp_out NULL) or CETCD_RESOURCE_EXHAUSTED. */
int client__watch_response_decode(const uint8_t *data, size_t len,
                                  struct cetcd_watch_response **resp_out);

/* client__kv_copy points kv at m's bytes (m must outlive kv). */
void client__kv_copy(struct cetcd_kv *kv, const Mvccpb__KeyValue *m);

/* client__deadline returns now + ms (ms <= 0: infinite). */
gpr_timespec client__deadline(int ms);

/* Conversions between the public structs and protobuf-c messages, shared by
 * kv.c and txn.c.  Requests borrow the caller's bytes (no copies); results
 * point into the decoded reply (resp), which the caller keeps alive.
 * The *_fill functions return 0 or CETCD_RESOURCE_EXHAUSTED. */
void client__range_req_fill(Etcdserverpb__RangeRequest *req, const void *key,
                            size_t key_len, const struct cetcd_range_opts *o);
void client__put_req_fill(Etcdserverpb__PutRequest *req, const void *key,
                          size_t key_len, const void *value, size_t value_len,
                          const struct cetcd_put_opts *o);
void client__delete_req_fill(Etcdserverpb__DeleteRangeRequest *req,
                             const void *key, size_t key_len,
                             const struct cetcd_delete_opts *o);
int client__range_fill(struct cetcd_range_result *r,
                       const Etcdserverpb__RangeResponse *resp);
int client__put_fill(struct cetcd_put_result *r,
                     const Etcdserverpb__PutResponse *resp);
int client__delete_fill(struct cetcd_delete_result *r,
                        const Etcdserverpb__DeleteRangeResponse *resp);
/* client__range_clear etc. free what *_fill allocated (not the reply). */
void client__range_clear(struct cetcd_range_result *r);
void client__put_clear(struct cetcd_put_result *r);
void client__delete_clear(struct cetcd_delete_result *r);
/* client__header_copy sets h from m (all zero when m is NULL). */
void client__header_copy(struct cetcd_header *h,
                         const Etcdserverpb__ResponseHeader *m);

/* How one typed call (cetcd_range, cetcd_put, cetcd_txn, ...) reaches its
 * method and exposes the reply through its public result struct.  Static
 * and immutable. */
struct client__typed {
    const char *method;                      /* gRPC method path */
    const ProtobufCMessageDescriptor *reply; /* the reply's type */
    size_t result_size;                      /* sizeof the public result */
    size_t internal_off;                     /* offsetof its internal_ */
    /* fill sets the zeroed result r from resp, which stays alive while r
     * does; returns 0, or CETCD_RESOURCE_EXHAUSTED having left nothing
     * allocated in r. */
    int (*fill)(void *r, const ProtobufCMessage *resp);
};

/* client__call_typed sends req to t->method (cetcd_call_unary).  With
 * result_out NULL the reply is dropped; otherwise *result_out is a new
 * public result of t's type, keeping the reply in its internal_, which the
 * caller frees with the type's *_result_free.  Returns 0, the call's
 * error, or CETCD_RESOURCE_EXHAUSTED ("no memory" in st, nothing left
 * allocated); *result_out is only set on success. */
int client__call_typed(struct cetcd_client *c, const struct client__typed *t,
                       const ProtobufCMessage *req, void **result_out,
                       struct cetcd_status *st);

/* client__result_free ends the *_result_free of a public result r, once
 * what its fill allocated is freed: it frees the reply it kept (NULL: none)
 * and r. */
void client__result_free(void *r, void *reply);

#endif
