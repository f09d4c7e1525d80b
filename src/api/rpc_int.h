/*
 * rpc_int.h - private declarations shared by src/api/rpc*.c.
 *
 * Every completion-queue tag points at a struct api__tag whose kind says
 * which object and which operation completed; the object is found with
 * api__container_of.  Streams are bound to the CQ of the worker that
 * requested them, so all completions of one stream arrive on one thread.
 * Unary calls arrive on their worker's CQ and are bound to the server's
 * callback CQ (done_cq): their one batch ends in a callback, see
 * rpc_call.c.
 */
#ifndef CETCD_API_RPC_INT_H
#define CETCD_API_RPC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "api/rpc.h"

#define api__container_of(ptr, type, field)                                 \
    ((type *)((char *)(ptr)-offsetof(type, field)))

/* What a completion-queue tag stands for. */
enum api__tag_kind {
    API__TAG_UNARY,       /* struct api_call: request arrived */
    API__TAG_GENERIC,     /* struct api_call: unregistered method */
    API__TAG_STREAM_NEW,  /* struct api_stream: stream request arrived */
    API__TAG_STREAM_RECV, /* struct api_stream: RECV_MESSAGE done */
    API__TAG_STREAM_SEND, /* struct api_stream: SEND batch done */
    API__TAG_STREAM_CLOSE, /* struct api_stream: RECV_CLOSE_ON_SERVER done */
    API__TAG_SHUTDOWN,    /* server shutdown notification */
};

/* A tag; embedded in the object it belongs to.  Immutable after init. */
struct api__tag {
    enum api__tag_kind kind; /* immutable */
};

enum api__method_kind { API__METHOD_UNARY, API__METHOD_STREAM };

/* One registered method.  Written by the owner before start, read-only
 * afterwards by every thread. */
struct api__method {
    char *path;                        /* "/pkg.Svc/Method", owned */
    enum api__method_kind kind;        /* unary or stream */
    api_unary_fn unary;                /* handler when kind is unary */
    const struct api_stream_ops *ops;  /* callbacks when kind is stream */
    void *ctx;                         /* handler context */
    void *handle;                      /* grpc_server_register_method's */
};

/* Unary call states; see rpc_call.c. */
enum api__call_state {
    API__CALL_POSTED,   /* waiting in the core for a client call */
    API__CALL_HANDLER,  /* owned by the handler until it answers */
    API__CALL_ANSWERED, /* final batch in flight */
};

/*
 * A unary (or generic) call.  Also its own request slot: the worker posts
 * it, the core fills call/deadline/md/payload, the handler owns it until it
 * answers, and the final batch's callback (call_done, on whatever thread
 * the core completes it) releases it and pushes it onto the worker's return
 * stack.  Owned by the worker thread in state POSTED, by the answering
 * thread in HANDLER, by the core in ANSWERED until call_done.
 */
struct api_call {
    struct api__tag tag;               /* UNARY or GENERIC; immutable */
    enum api__call_state state;        /* see above; current owner */
    struct api__worker *worker;        /* owning worker; immutable */
    const struct api__method *method;  /* NULL for generic; current owner */
    grpc_call *call;                   /* core call; current owner */
    gpr_timespec deadline;             /* core's deadline; current owner */
    int64_t deadline_ns;               /* CLOCK_MONOTONIC; current owner */
    grpc_metadata_array md;            /* request metadata; reused */
    grpc_call_details details;         /* generic only: method and host */
    grpc_byte_buffer *payload;         /* request message or NULL */
    grpc_slice flat;                   /* request flattened if multi-slice */
    grpc_byte_buffer *resp;            /* reply in flight or NULL */
    grpc_slice status_msg;             /* error text in flight */
    int cancelled;                     /* RECV_CLOSE_ON_SERVER output */
    grpc_completion_queue_functor done; /* final batch's tag (done_cq) */
    struct api_call *next_free;        /* worker free list link */
};

/* One CQ thread and what it owns. */
struct api__worker {
    struct api_server *srv;            /* immutable */
    grpc_completion_queue *cq;         /* immutable after start */
    pthread_t thread;                  /* owner thread joins it */
    bool started;                      /* owner thread */
    struct api_call *free_list;        /* this worker only */
    _Atomic(struct api_call *) returned; /* answered calls pushed back by
                                          the done_cq callback; any thread
                                          pushes, this worker takes all */
    size_t free_n;                     /* this worker only */
    size_t calls_n;                    /* call objects alive; this worker */
    atomic_long active_n;              /* calls handed out and not yet
                                          completed; written by this worker,
                                          read by the owner at close */
};

/* The server.  Fields are set by the owner before start and read-only
 * afterwards unless noted. */
struct api_server {
    char *addrs[API_URLS_MAX];         /* core addresses ("host:port") */
    int ports[API_URLS_MAX];           /* bound ports */
    bool secure[API_URLS_MAX];         /* https:// or unixs:// (TLS) */
    grpc_server_credentials *tls_creds; /* for the secure URLs, or NULL */
    size_t addrs_n;                    /* number of URLs */
    size_t max_recv_bytes;             /* max_request_bytes + 512 KiB */
    int threads_n;                     /* CQ threads */
    int slots;                         /* request slots per method/thread */
    int stream_queue;                  /* per-stream send queue bound */
    api_unary_gate_fn gate;            /* checks every unary call, or NULL */
    void *gate_ctx;                    /* its argument */
    struct api__method *methods;       /* registered methods */
    size_t methods_n;                  /* entries used */
    size_t methods_cap;                /* entries allocated */
    grpc_server *server;               /* core server */
    grpc_completion_queue *shutdown_cq; /* receives the shutdown tag */
    grpc_completion_queue *done_cq;    /* callback queue every unary call
                                          is bound to: its final batch's
                                          completion runs on the thread
                                          that answered */
    grpc_completion_queue_functor done_cq_shut; /* done_cq shut down */
    atomic_bool done_cq_down;          /* set by done_cq_shut */
    struct api__tag shutdown_tag;      /* kind SHUTDOWN */
    bool started;                      /* owner thread */
    bool stopping;                     /* owner thread */
    atomic_bool shutting_down;         /* any thread: no more re-posts */
    atomic_long streams_n;             /* streams not yet freed */
    struct api__worker workers[API_THREADS_MAX]; /* see api__worker */
};

/* rpc_call.c */
void api__call_post(struct api__worker *w, const struct api__method *m);
void api__generic_post(struct api__worker *w);
void api__call_complete(struct api__worker *w, struct api_call *c,
                        bool ok);
void api__generic_complete(struct api__worker *w, struct api_call *c,
                           bool ok);
void api__worker_free_calls(struct api__worker *w);
const char *api__md_find(const grpc_metadata_array *md, const char *key,
                         size_t *len_out);
void api__health_check(struct api_call *call, const uint8_t *req,
                       size_t len, void *ctx);

/* rpc_stream.c */
void api__stream_post(struct api__worker *w, const struct api__method *m);
void api__stream_complete(struct api__worker *w, struct api__tag *tag,
                          bool ok);

#endif
