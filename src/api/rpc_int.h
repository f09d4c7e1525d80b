/*
 * rpc_int.h - private declarations shared by src/api/rpc*.c: the gRPC
 * server runtime on our own HTTP/2 connections (libnghttp2 does the
 * framing, HPACK and flow control; OpenSSL the TLS).
 *
 * Threads.  The server runs `threads` event loops (epoll).  Each accepted
 * connection belongs to one loop for its whole life, and only that loop
 * touches the connection, its nghttp2 session and the HTTP/2 side of its
 * calls and streams.  Handlers run on the loop (after the loop has fed the
 * bytes it read to nghttp2); their answers may come from any thread: an
 * answer is pushed onto the loop's inbox (a lock-free stack) and the loop
 * is woken through its eventfd when the inbox was empty.  The loop then
 * hands every answer of the batch to nghttp2 and writes each connection's
 * frames with one write: many replies share one system call, where the
 * gRPC C core wrote each reply on its own.
 *
 * Object lives (loop-only fields unless marked otherwise):
 *   conn    refs: the loop's own (until the connection dies) plus one per
 *           call and stream object attached to it; freed at zero.
 *   call    READING (headers and body arriving) -> READY (on the loop's
 *           dispatch list) -> HANDLER (owned by whoever must answer) ->
 *           ANSWERED (in the inbox) -> SUBMITTED (nghttp2 sends it; freed
 *           when nghttp2 closes the HTTP/2 stream).  `gone` marks a call
 *           whose HTTP/2 stream or connection ended first: its answer is
 *           dropped.
 *   stream  freed once the owner released it (api_stream_release, seen by
 *           the loop through the inbox) and nghttp2 is done with it.
 */
#ifndef CETCD_API_RPC_INT_H
#define CETCD_API_RPC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#include "api/rpc.h"

#define api__container_of(ptr, type, field)                                 \
    ((type *)((char *)(ptr)-offsetof(type, field)))

#define API__LISTENERS_MAX (2 * API_URLS_MAX) /* a host may resolve to 2 */
#define API__READ_BUF (64 * 1024)             /* one read from a socket */
#define API__CONN_BYTES_MIN (64u << 20) /* least in/out bytes per conn */

/* epoll data: a connection's pointer (aligned, so bit 0 is clear), a
 * listener's index shifted left with bit 0 set, or 0 for the eventfd. */
#define API__TAG_LISTENER 1u
#define API__TAG_EVFD 0u

enum api__method_kind { API__METHOD_UNARY, API__METHOD_STREAM };

/* One registered method.  Written by the owner before start, read-only
 * afterwards by every thread. */
struct api__method {
    char *path;                        /* "/pkg.Svc/Method", owned */
    size_t path_n;                     /* strlen(path) */
    enum api__method_kind kind;        /* unary or stream */
    api_unary_fn unary;                /* handler when kind is unary */
    const struct api_stream_ops *ops;  /* callbacks when kind is stream */
    void *ctx;                         /* handler context */
};

/* What an inbox entry or an HTTP/2 stream's user data points at. */
enum api__kind { API__KIND_CALL, API__KIND_STREAM, API__KIND_CONN };

/* An inbox entry, embedded in the object it stands for. */
struct api__item {
    struct api__item *next;            /* inbox link (pusher, then loop) */
    enum api__kind kind;               /* immutable */
};

/* Request headers of one call or stream, pseudo headers included
 * (":path" names unknown methods); the layout is rpc_conn.c's. */
struct api__hdrs {
    char *buf;                         /* owned; kept across reuses */
    size_t n, cap;                     /* bytes used, allocated */
};

struct api__loop;

/* One client connection. */
struct api__conn {
    struct api__item item;             /* CONN: handed to its loop */
    struct api__loop *loop;            /* immutable */
    int fd;                            /* the socket */
    SSL *ssl;                          /* TLS, or NULL */
    bool handshaking;                  /* TLS handshake not done yet */
    nghttp2_session *ng;               /* HTTP/2 state */
    int refs;                          /* see the file comment */
    bool dead;                         /* socket closed, session gone */
    bool dirty;                        /* on the loop's flush list */
    bool want_out;                     /* EPOLLOUT armed */
    uint8_t *out;                      /* frames not yet written */
    size_t out_n, out_off, out_cap;    /* end, written up to, allocated */
    struct api__conn *dirty_next;      /* flush list link */
    struct api__conn *prev, *next;     /* the loop's connections */
    struct api_call *calls;            /* calls attached (any state) */
    struct api_stream *streams;        /* streams attached */
    int64_t born_ms;                   /* accepted (CLOCK_MONOTONIC) */
    bool preface_ok;                   /* a valid HTTP/2 frame arrived */
    size_t in_bytes;                   /* request bytes held (rpc_guard.c) */
    size_t out_bytes;                  /* reply bytes queued, not sent */
};

enum api__call_state {
    API__CALL_READING, API__CALL_READY, API__CALL_HANDLER,
    API__CALL_ANSWERED, API__CALL_SUBMITTED,
};

/* A unary call.  Fields are the loop's except where the state gives the
 * call to its answerer (HANDLER: method, hdrs, body are read-only; the
 * answer fields are written by the answerer). */
struct api_call {
    struct api__item item;             /* CALL; also the stream user data */
    enum api__call_state state;        /* see rpc_int.h's comment */
    struct api__conn *conn;            /* attached connection */
    int32_t stream_id;                 /* HTTP/2 stream */
    bool gone;                         /* stream or connection ended */
    bool too_large;                    /* message over the limit */
    bool over_budget;                  /* connection's request bytes full */
    size_t big_n;                      /* its size, for the error */
    bool bad_encoding;                 /* compressed with what we lack */
    const struct api__method *method;  /* NULL: not registered */
    int64_t deadline_ns;               /* CLOCK_MONOTONIC or INT64_MAX */
    struct api__hdrs hdrs;             /* request headers */
    uint8_t *body;                     /* request bytes, 5-byte prefix on */
    size_t body_n, body_cap;           /* used, allocated */
    uint8_t *out;                      /* answer: prefix + message */
    size_t out_n, out_off, out_cap;    /* end, sent up to, allocated */
    grpc_status_code code;             /* answer's status */
    char *msg;                         /* its message or NULL; owned */
    struct api_call *ready_next;       /* dispatch list link */
    struct api_call *prev, *next;      /* the connection's calls */
};

/* A queued stream message: 5-byte prefix + message. */
struct api__msg {
    uint8_t *p;                        /* owned */
    size_t n;                          /* bytes */
};

/* A streaming call.  Loop fields, owner fields and mu fields as marked. */
struct api_stream {
    struct api__item item;             /* STREAM; also stream user data */
    struct api__conn *conn;            /* loop */
    int32_t stream_id;                 /* immutable */
    const struct api__method *method;  /* immutable */
    struct api__hdrs hdrs;             /* read-only after on_open */
    uint8_t *rbuf;                     /* loop: partial client messages */
    size_t rbuf_n, rbuf_cap;           /* loop */
    bool reading_done;                 /* loop: no more client messages */
    bool ng_closed;                    /* loop: nghttp2 is done with it */
    bool close_told;                   /* loop: on_close ran */
    bool owner_gone;                   /* loop: release seen */
    bool headers_sent;                 /* loop: response HEADERS queued */
    bool fin_submitted;                /* loop (read callback): trailers */
    void *data;                        /* owner's pointer */
    pthread_mutex_t mu;                /* guards the fields below */
    bool scheduled;                    /* mu: in the loop's inbox */
    bool release_req;                  /* mu: api_stream_release called */
    bool closed;                       /* mu: on_close ran or runs */
    bool finishing;                    /* mu: api_stream_finish called */
    struct api__msg *queue;            /* mu: ring of queued messages */
    size_t q_head, q_n, q_cap;         /* mu: ring position, count, size */
    size_t head_off;                   /* mu: bytes of queue[q_head] sent */
    grpc_status_code fin_code;         /* mu: status to finish with */
    char *fin_msg;                     /* mu: its message; owned */
    struct api_stream *prev, *next;    /* loop: the connection's streams */
};

/* One event loop thread and what it owns. */
struct api__loop {
    struct api_server *srv;            /* immutable */
    int ep;                            /* epoll fd; immutable */
    int evfd;                          /* eventfd waking the loop */
    pthread_t thread;                  /* joined by the owner */
    bool started;                      /* owner */
    _Atomic(struct api__item *) inbox; /* any thread pushes, loop takes */
    struct api__conn *conns;           /* live connections */
    struct api__conn *dirty;           /* connections with frames to write */
    struct api_call *ready;            /* requests complete, to dispatch */
    struct api_call *ready_tail;       /* its end */
    struct api_call *free_calls;       /* recycled call objects */
    size_t free_n;                     /* their count */
    bool stopped;                      /* stop handled: conns closed */
    size_t unready_n;                  /* conns without a valid preface */
    bool accept_paused;                /* listeners out of the epoll set */
    int64_t accept_resume_ms;          /* when they go back in */
    int64_t next_sweep_ms;             /* next preface-timeout sweep */
    uint8_t rbuf[API__READ_BUF];       /* read buffer */
};

/* A listening socket. */
struct api__listener {
    int fd;                            /* -1 when closed */
    size_t url;                        /* index of its URL */
    bool tls;                          /* https:// or unixs:// */
    char *unix_path;                   /* socket file to unlink, or NULL */
};

/* The server.  Fields are set by the owner before start and read-only
 * afterwards unless noted. */
struct api_server {
    char *urls[API_URLS_MAX];          /* copies of the URLs */
    bool secure[API_URLS_MAX];         /* https:// or unixs:// */
    int ports[API_URLS_MAX];           /* bound TCP ports */
    size_t urls_n;                     /* number of URLs */
    struct api__listener lis[API__LISTENERS_MAX]; /* bound sockets */
    size_t lis_n;                      /* used */
    SSL_CTX *tls;                      /* for the secure URLs, or NULL */
    bool (*tls_check)(struct x509_st *cert, void *ctx); /* or NULL */
    void *tls_check_ctx;               /* its argument */
    size_t max_recv_bytes;             /* max_request_bytes + 512 KiB */
    int threads_n;                     /* event loops */
    int stream_queue;                  /* per-stream send queue bound */
    uint32_t max_streams;              /* concurrent streams per conn */
    int preface_timeout_ms;            /* to send a preface (TLS too) */
    size_t conn_in_max;                /* request bytes held per conn */
    size_t conn_out_max;               /* reply bytes queued per conn */
    int fd_limit;                      /* soft RLIMIT_NOFILE at create */
    int fd_ceiling;                    /* accepted fds stay below this */
    atomic_llong refused_n;            /* connections refused at limits */
    atomic_llong refuse_logged_ms;     /* last log line about them */
    api_unary_gate_fn gate;            /* checks every unary call, or NULL */
    void *gate_ctx;                    /* its argument */
    struct api__method *methods;       /* registered methods */
    size_t methods_n, methods_cap;     /* used, allocated */
    bool started;                      /* owner */
    bool stop_called;                  /* owner */
    atomic_bool stopping;              /* any thread: close connections */
    atomic_bool exiting;               /* any thread: loops return */
    atomic_long active_n;              /* calls handed out, not answered */
    atomic_long streams_n;             /* streams not yet freed */
    atomic_uint next_loop;             /* round robin for new connections */
    struct api__loop loops[API_THREADS_MAX]; /* see api__loop */
};

/* rpc_server.c */
/* api__loop_init sets up loop l of srv (its epoll set with the eventfd
 * and srv's listeners) without starting its thread.  ERR_IO. */
int api__loop_init(struct api_server *srv, struct api__loop *l);
/* api__loop_push puts it on l's inbox (any thread). */
void api__loop_push(struct api__loop *l, struct api__item *it);
/* api__loop_turn does what a loop does after its socket events: dispatch
 * the complete requests, take the inbox, write what nghttp2 has to send. */
void api__loop_turn(struct api__loop *l);

/* gRPC message framing: a flag byte (1: compressed) and a big-endian
 * 32-bit length before each message. */
#define API__PREFIX 5

static inline uint32_t api__prefix_len(const uint8_t *p)
{
    return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 8 | p[4];
}

static inline void api__prefix_put(uint8_t *p, size_t len)
{
    p[0] = 0;
    p[1] = (uint8_t)(len >> 24);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
}

/* rpc_conn.c */
/* api__buf_grow returns buf with room for need bytes (*cap updated),
 * doubling from first, or NULL (buf and *cap untouched) when out of
 * memory; the caller stores the result back. */
void *api__buf_grow(void *buf, size_t *cap, size_t need, size_t first);
/* api__conn_new makes a connection for loop l (on any thread); the loop
 * itself then attaches it: its list, its epoll set, its first flush. */
struct api__conn *api__conn_new(struct api__loop *l, int fd, bool tls);
void api__conn_attach(struct api__conn *c);
void api__conn_io(struct api__conn *c, uint32_t events);
void api__conn_flush(struct api__conn *c);
void api__conn_mark_dirty(struct api__conn *c);
void api__conn_kill(struct api__conn *c);
void api__conn_unref(struct api__conn *c);
int api__hdrs_add(struct api__hdrs *h, const uint8_t *name, size_t name_n,
                  const uint8_t *value, size_t value_n);
const char *api__hdrs_find(const struct api__hdrs *h, const char *key,
                           size_t *len_out);
int64_t api__grpc_timeout_ns(const uint8_t *v, size_t n);
/* api__too_large_msg writes grpc-go's text for a message of n bytes over
 * the limit max. */
void api__too_large_msg(char *buf, size_t cap, size_t n, size_t max);
size_t api__status_nv(nghttp2_nv *nv, grpc_status_code code,
                      const char *msg, char *code_buf, char *msg_buf,
                      size_t msg_cap);

/* rpc_call.c */
extern const nghttp2_nv api__resp_headers[2]; /* :status, content-type */
struct api_call *api__call_new(struct api__conn *c, int32_t stream_id);
void api__call_free(struct api_call *call);
void api__call_ready(struct api_call *call);
void api__call_data(struct api_call *call, const uint8_t *p, size_t n);
void api__call_closed(struct api_call *call);
void api__call_dispatch(struct api__loop *l);
void api__call_inbox(struct api_call *call);
void api__loop_free_calls(struct api__loop *l);
void api__health_check(struct api_call *call, const uint8_t *req,
                       size_t len, void *ctx);

/* rpc_stream.c */
struct api_stream *api__stream_open(struct api_call *call);
void api__stream_data(struct api_stream *s, const uint8_t *p, size_t n);
void api__stream_half_closed(struct api_stream *s);
void api__stream_trailers_sent(struct api_stream *s);
void api__stream_closed(struct api_stream *s);
void api__stream_inbox(struct api_stream *s);

/* rpc_guard.c: the limits one client must not pass (fd reserve, accept
 * back-off, preface timeout, buffered bytes per connection). */
int64_t api__now_ms(void);
/* api__guard_init reads the fd limit into srv->fd_ceiling. */
void api__guard_init(struct api_server *srv);
/* api__guard_accept_ok: fd (just accepted) may be served; false means it
 * was closed (too close to the fd limit) and accepting pauses. */
bool api__guard_accept_ok(struct api__loop *l, int fd);
/* api__guard_accept_failed: accept4 failed with errno e; true when the
 * loop must stop accepting for now (the fd limit, memory). */
bool api__guard_accept_failed(struct api__loop *l, int e);
/* api__guard_timeout_ms: how long the loop may sleep (-1: forever). */
int api__guard_timeout_ms(const struct api__loop *l);
/* api__guard_tick: resume accepting, close connections past their
 * preface timeout; run after every loop turn. */
void api__guard_tick(struct api__loop *l);
/* api__guard_in_add: n more request bytes for c; false when that passes
 * the connection's budget (nothing is added then). */
bool api__guard_in_add(struct api__conn *c, size_t n);
void api__guard_in_sub(struct api__conn *c, size_t n);
/* api__over_budget_msg / api__not_reading_msg: the RESOURCE_EXHAUSTED
 * texts for a connection over its request or reply budget. */
void api__over_budget_msg(char *buf, size_t cap, const struct api__conn *c);
void api__not_reading_msg(char *buf, size_t cap, const struct api__conn *c);
/* api__guard_out_full: c has more reply bytes queued than allowed. */
bool api__guard_out_full(const struct api__conn *c);

/* rpc_tls.c */
SSL_CTX *api__tls_ctx(const struct api_server_config *cfg);
/* api__tls_handshake goes on with c's handshake: 1 done (and the client
 * certificate accepted), 0 waiting for bytes, 2 waiting to write, -1
 * failed. */
int api__tls_handshake(struct api__conn *c);

#endif
