/*
 * rpc_int.h - private declarations shared by the src/rpc files: the gRPC
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
 *   stream  freed once the owner released it (rpc_stream_release, seen by
 *           the loop through the inbox) and nghttp2 is done with it.
 */
#ifndef CETCD_RPC_RPC_INT_H
#define CETCD_RPC_RPC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#include "http/http.h"
#include "rpc/rpc.h"
#include "rpc/tls.h"

#define rpc__container_of(ptr, type, field)                                 \
    ((type *)((char *)(ptr)-offsetof(type, field)))

#define RPC__LISTENERS_MAX (2 * RPC_URLS_MAX) /* a host may resolve to 2 */
#define RPC__READ_BUF (64 * 1024)             /* one read from a socket */
#define RPC__CONN_BYTES_MIN (64u << 20) /* least in/out bytes per conn */
/* grpc-go's server keepalive defaults (keepalive.ServerParameters and
 * EnforcementPolicy; etcd's --grpc-keepalive-* defaults too). */
#define RPC__KA_MIN_TIME_MS 5000
#define RPC__KA_INTERVAL_MS (2 * 3600 * 1000)
#define RPC__KA_TIMEOUT_MS 20000
/* grpc-go: a client PING while no stream is open is a strike within 2 h
 * of the previous one; more than 2 strikes close the connection. */
#define RPC__KA_IDLE_PING_MS (2 * 3600 * 1000)
#define RPC__KA_MAX_STRIKES 2

/* epoll data: a connection's pointer (aligned, so bit 0 is clear), a
 * listener's index shifted left with bit 0 set, or 0 for the eventfd. */
#define RPC__TAG_LISTENER 1u
#define RPC__TAG_EVFD 0u

enum rpc__method_kind { RPC__METHOD_UNARY, RPC__METHOD_STREAM };

struct rpc__method;

/* The counters of one method (rpc.h "metrics"); any thread adds. */
struct rpc__method_stats {
    struct metrics_counter started;       /* begun */
    struct metrics_counter handled[RPC_STATUS_CODES]; /* ended, by code */
    struct metrics_counter msg_received;  /* request messages */
    struct metrics_counter msg_sent;      /* response messages */
    struct metrics_hist handling;   /* begin to end */
};

/* rpc__method_stats_new: zeroed counters (mem_free frees), or NULL. */
struct rpc__method_stats *rpc__method_stats_new(void);

/* rpc__method_find: the registered method at path p (n bytes), or NULL. */
const struct rpc__method *rpc__method_find(const struct rpc_server *srv,
                                           const uint8_t *p, size_t n);

/* rpc__method_handled counts one end of a call or stream of m that began
 * at start_ns with code. */
void rpc__method_handled(const struct rpc__method *m, grpc_status_code code,
                         int64_t start_ns);
/* rpc__handling_start: the metrics clock now when handling times are on
 * (rpc_metrics_time_handling), else 0 (rpc__method_handled times none). */
int64_t rpc__handling_start(void);

/* One registered method.  Written by the owner before start, read-only
 * afterwards by every thread. */
struct rpc__method {
    struct rpc__method_stats *stats;   /* owned; counters (mutable) */
    enum rpc_method_type type;         /* wire kind, for the metrics */
    char *path;                        /* "/pkg.Svc/Method", owned */
    size_t path_n;                     /* strlen(path) */
    enum rpc__method_kind kind;        /* unary or stream */
    rpc_unary_fn unary;                /* handler when kind is unary */
    const struct rpc_stream_ops *ops;  /* callbacks when kind is stream */
    void *ctx;                         /* handler context */
};

/* What an inbox entry or an HTTP/2 stream's user data points at. */
enum rpc__kind {
    RPC__KIND_CALL, RPC__KIND_STREAM, RPC__KIND_CONN,
    RPC__KIND_SAN_JOB, /* lookups done (san_lookup.c) */
};

/* An inbox entry, embedded in the object it stands for. */
struct rpc__item {
    struct rpc__item *next;            /* inbox link (pusher, then loop) */
    enum rpc__kind kind;               /* immutable */
};

/* Request headers of one call or stream, pseudo headers included
 * (":path" names unknown methods); the layout is conn.c's. */
struct rpc__hdrs {
    char *buf;                         /* owned; kept across reuses */
    size_t n, cap;                     /* bytes used, allocated */
};

struct rpc__loop;

/* What a connection speaks: decided by its first bytes (the HTTP/2
 * preface or not) or by TLS ALPN ("h2", "http/1.1"); h1.c.  A server
 * without an HTTP handler speaks HTTP/2 only, from the first byte. */
enum rpc__proto { RPC__PROTO_SNIFF, RPC__PROTO_H2, RPC__PROTO_H1 };

/* The client's frames looked at before nghttp2 (h2_scan.c): RST_STREAM
 * and WINDOW_UPDATE frames for streams the client never opened are
 * dropped, as grpc-go ignores them.  Zeroed at the connection's start. */
#define RPC__H2_FRAME_HDLEN 9
struct rpc__h2_scan {
    uint8_t magic_n;                   /* bytes of the client magic seen */
    uint8_t hdr_n;                     /* bytes of a cut frame header */
    uint8_t hdr[RPC__H2_FRAME_HDLEN];  /* held here until whole */
    bool dropping;                     /* the frame being read is dropped */
    uint32_t left;                     /* its payload bytes still to come */
    uint32_t max_id;                   /* highest stream id HEADERS opened */
    uint64_t dropped;                  /* frames dropped */
};
/* rpc__h2_scan passes p's kept bytes to pass, in order, in runs; false as
 * soon as pass returns false (the connection died: s is gone too). */
typedef bool (*rpc__h2_pass_fn)(void *ud, const uint8_t *p, size_t n);
bool rpc__h2_scan(struct rpc__h2_scan *s, const uint8_t *p, size_t n,
                  rpc__h2_pass_fn pass, void *ud);

/* One client connection. */
struct rpc__conn {
    struct rpc__item item;             /* CONN: handed to its loop */
    struct rpc__loop *loop;            /* immutable */
    int fd;                            /* the socket */
    SSL *ssl;                          /* TLS, or NULL */
    char *peer_cn;                     /* the verified client certificate's
                                        * CN (tls_cn_identity), or NULL;
                                        * set once the handshake is done,
                                        * then read-only until the last
                                        * unref (calls and streams hold
                                        * refs, so handlers may read it) */
    bool handshaking;                  /* TLS handshake not done yet */
    bool san_wait;                     /* handshaking: TLS done, waiting
                                        * for the lookups of the client
                                        * certificate's DNS SANs (reads
                                        * paused: rd_paused) */
    nghttp2_session *ng;               /* HTTP/2 state */
    int refs;                          /* see the file comment */
    bool dead;                         /* socket closed, session gone */
    /* Background streams (rpc_stream_background, stream.c bg_room): the
     * DATA they may have unacknowledged by the client's connection-level
     * WINDOW_UPDATEs.  All loop-only. */
    int32_t win_max;                   /* the largest send window seen */
    int64_t bg_mark;                   /* window granted in all minus the
                                          bytes known read (probes) */
    int32_t bg_cap;                    /* their in-flight budget, bytes */
    bool bg_waiting;                   /* a background stream is deferred */
    bool bg_updated;                   /* a WINDOW_UPDATE came since the
                                          last keepalive sweep */
    unsigned bg_idle;                  /* sweeps deferred without one */
    unsigned bg_fg;                    /* sweeps left with a tight budget
                                          (rpc__conn_bg_foreground) */
    int32_t bg_tight;                  /* that budget (rpc__bg_tight) */
    int64_t bg_min_rtt_ns;             /* smallest round trip seen, 0 =
                                          none yet */
    int64_t bg_settings_ns;            /* our SETTINGS went out, 0 = no
                                          ACK awaited */
    int64_t bg_probe_ns;               /* the probe went out */
    int64_t bg_probe_inflight;         /* bytes unread then */
    bool bg_probe_out;                 /* our probe PING is unanswered */
    int64_t bg_probe_mark;             /* the window when it was sent,
                                          plus the updates since */
    bool dirty;                        /* on the loop's flush list */
    /* Frames that need no prompt answer (conn.c "Lazy answers"): what the
     * last feed held of them, and the lazy list.  Loop-only. */
    size_t rx_lazy_bytes;              /* bytes of such frames this feed */
    size_t rx_fed;                     /* bytes nghttp2 got this feed */
    struct rpc__h2_scan h2_scan;       /* what it gets (h2_scan.c) */
    int32_t rx_win0;                   /* send window before the feed */
    bool lazy;                         /* on the loop's lazy list */
    bool ping_held;                    /* a PING's ACK not yet sent */
    uint8_t ping_opaque[8];            /* its payload */
    int64_t ping_ride_ns;              /* from then on it goes out with
                                          any write; due at lazy_due_ns */
    int64_t lazy_due_ns;               /* flushed by then at the latest */
    struct rpc__conn *lazy_next;       /* lazy list link */
    bool want_out;                     /* EPOLLOUT armed */
    uint8_t *out;                      /* frames not yet written */
    size_t out_n, out_off, out_cap;    /* end, written up to, allocated */
    struct rpc__conn *dirty_next;      /* flush list link */
    struct rpc__conn *prev, *next;     /* the loop's connections */
    struct rpc_call *calls;            /* calls attached (any state) */
    struct rpc_stream *streams;        /* streams attached */
    int64_t born_ms;                   /* accepted (CLOCK_MONOTONIC) */
    bool preface_ok;                   /* a valid HTTP/2 frame arrived */
    size_t in_bytes;                   /* request bytes held (guard.c) */
    size_t out_bytes;                  /* reply bytes queued, not sent */
    enum rpc__proto proto;             /* see enum rpc__proto */
    uint8_t sniff[24];                 /* SNIFF: first bytes, preface so far */
    size_t sniff_n;                    /* SNIFF: bytes in sniff */
    bool rd_paused;                    /* EPOLLIN off (h1.c back-pressure) */
    uint8_t *h1_in;                    /* H1: request bytes not yet taken */
    size_t h1_in_n, h1_in_cap;         /* H1: used, allocated */
    size_t h1_scan;                    /* H1: head end searched up to */
    struct rpc_call *h1_head, *h1_tail; /* H1: requests in order, answered
                                          in that order (pipelining) */
    int h1_pending;                    /* H1: calls in that queue */
    bool h1_close;                     /* H1: take no more requests; close
                                          once the queue is answered */
    bool h1_shut;                      /* H1: our side shut (SHUT_WR) */
    bool h1_eof;                       /* H1: the client shut its side */
    /* H1: a chunked request body being read (rpc_call with body_open:
     * dispatched at its head, the rest goes to its stream; else held
     * here, not yet queued, until its last chunk), or NULL */
    struct rpc_call *h1_body_call;
    struct http_chunked h1_chunk;      /* H1: that body's framing */
    bool h1_continued;                 /* H1: 100 Continue sent for the
                                          request being read */
    int64_t last_read_ms;              /* H2: bytes last read (keepalive) */
    int64_t ka_ping_ms;                /* H2: our keepalive PING sent at,
                                          0 when none is outstanding */
    int64_t client_ping_ms;            /* H2: the client's last PING, 0:
                                          none yet (grpc-go lastPingAt) */
    int ping_strikes;                  /* H2: PINGs under the policy */
    bool reset_strikes;                /* H2: we sent HEADERS/DATA since */
    bool close_after_flush;            /* H2: GOAWAY queued; close once
                                          written */
};

enum rpc__call_state {
    RPC__CALL_READING, RPC__CALL_READY, RPC__CALL_HANDLER,
    RPC__CALL_ANSWERED, RPC__CALL_SUBMITTED,
    RPC__CALL_PARKED, /* an HTTP request waiting for a slot (http_limit.c) */
};

/* A unary call.  Fields are the loop's except where the state gives the
 * call to its answerer (HANDLER: method, hdrs, body are read-only; the
 * answer fields are written by the answerer). */
struct rpc_call {
    struct rpc__item item;             /* CALL; also the stream user data */
    enum rpc__call_state state;        /* see rpc_int.h's comment */
    struct rpc__conn *conn;            /* attached connection */
    int32_t stream_id;                 /* HTTP/2 stream */
    bool gone;                         /* stream or connection ended */
    bool too_large;                    /* message over the limit */
    bool over_budget;                  /* connection's request bytes full */
    size_t big_n;                      /* its size, for the error */
    bool bad_encoding;                 /* compressed with what we lack */
    const struct rpc__method *method;  /* NULL: not registered */
    int64_t deadline_ns;               /* CLOCK_MONOTONIC or INT64_MAX */
    int64_t start_ns;                  /* dispatched (metrics' clock) */
    const struct rpc__method *count_as; /* an HTTP call counted as this
                                           method (rpc_call_count_as) */
    const char *cors_origin;           /* HTTP: the Access-Control-Allow-
                                          Origin of its answer ("*", or
                                          its Origin in hdrs), or NULL */
    grpc_status_code count_code;       /* ... ended with this code */
    struct rpc__hdrs hdrs;             /* request headers */
    uint8_t *body;                     /* request bytes, 5-byte prefix on */
    size_t body_n, body_cap;           /* used, allocated */
    uint8_t *out;                      /* answer: prefix + message */
    size_t out_n, out_off, out_cap;    /* end, sent up to, allocated */
    grpc_status_code code;             /* answer's status */
    char *msg;                         /* its message or NULL; owned */
    struct rpc_call *ready_next;       /* dispatch list link */
    bool grpc_ct;                      /* content-type application/grpc* */
    bool bad_ct;                       /* not gRPC on a server without an
                                          HTTP handler: grpc-go's 415 */
    bool http;                         /* an HTTP request, not a gRPC call */
    bool h1;                           /* ... on an HTTP/1.x connection */
    bool h1_close;                     /* H1: close after this answer */
    /* A request body that stays open (rpc_server_set_http_open_paths):
     * dispatched before its body ended; body_ended once it did (before
     * the handler took it: then it is a whole body after all). */
    bool body_open;
    bool body_ended;
    const char *body_err;              /* Go's text of a framing error of
                                          a chunked body, or NULL */
    int http_status;                   /* answer's status; before dispatch
                                          nonzero: refused with it (h1.c) */
    const char *http_ctype;            /* answer's content type (static) */
    unsigned http_flags;               /* RPC_HTTP_* of the answer */
    struct rpc_call *h1_next;          /* H1: the connection's queue */
    bool h1_v10;                       /* H1: an HTTP/1.0 request (no
                                          chunked answer) */
    struct rpc_stream *h1_stream;      /* H1: the stream answering it
                                          (h1_stream.c), or NULL */
    bool http_slot;                    /* holds an HTTP slot (answerer) */
    bool parked;                       /* srv->park_mu: on the park list */
    struct rpc_call *park_next;        /* srv->park_mu: that list's link */
    struct rpc_call *prev, *next;      /* the connection's calls */
};

/* A queued stream message: 5-byte prefix + message. */
struct rpc__msg {
    uint8_t *p;                        /* owned */
    size_t n;                          /* bytes */
};

/* A streaming call.  Loop fields, owner fields and mu fields as marked. */
struct rpc_stream {
    struct rpc__item item;             /* STREAM; also stream user data */
    struct rpc__conn *conn;            /* loop */
    int32_t stream_id;                 /* immutable */
    const struct rpc__method *method;  /* immutable */
    int64_t start_ns;                  /* opened (metrics' clock) */
    struct rpc__hdrs hdrs;             /* read-only after on_open */
    uint8_t *rbuf;                     /* loop: partial client messages */
    size_t rbuf_n, rbuf_cap;           /* loop */
    bool reading_done;                 /* loop: no more client messages */
    bool ng_closed;                    /* loop: nghttp2 is done with it */
    bool close_told;                   /* loop: on_close ran */
    bool owner_gone;                   /* loop: release seen */
    bool headers_sent;                 /* loop: response HEADERS queued */
    bool background;                   /* rpc_stream_background (set on the
                                          loop before any send) */
    bool bg_deferred;                  /* loop: waits for the budget */
    bool fin_submitted;                /* loop (read callback): trailers */
    bool writable_due;                 /* loop: ops->on_writable is to run
                                          at the next inbox visit */
    void *data;                        /* owner's pointer */
    pthread_mutex_t mu;                /* guards the fields below */
    bool scheduled;                    /* mu: in the loop's inbox */
    bool release_req;                  /* mu: rpc_stream_release called */
    bool closed;                       /* mu: on_close ran or runs */
    bool finishing;                    /* mu: rpc_stream_finish called */
    bool writable_want;                /* mu: a send was refused with
                                          ERR_FULL since on_writable was
                                          last due (only with an
                                          on_writable; stream.c) */
    struct rpc__msg *queue;            /* mu: ring of queued messages */
    size_t q_head, q_n, q_cap;         /* mu: ring position, count, size */
    size_t q_limit;                    /* rpc_stream_send's bound (q_cap
                                          less the control reserve) */
    size_t head_off;                   /* mu: bytes of queue[q_head] sent */
    grpc_status_code fin_code;         /* mu: status to finish with */
    char *fin_msg;                     /* mu: its message; owned */
    struct rpc_stream *prev, *next;    /* loop: the connection's streams */
    /* An HTTP/1.x answer that stays open (h1_stream.c): method is NULL,
     * ng_closed means the connection is done with it, headers_sent that
     * its head is in the connection's buffer. */
    bool http;                         /* immutable */
    struct rpc_call *h1_call;          /* loop: its place in the H1 queue,
                                          NULL once done */
    rpc_http_close_fn http_on_close;   /* immutable: the owner's */
    const struct rpc__method *count_as; /* HTTP: counted as this method
                                           (rpc_stream_count_as) */
    const char *cors_origin;           /* HTTP: as its call's (in hdrs) */
    grpc_status_code count_code;       /* ... ending with this code (set
                                          before the finish, read after) */
    void *http_ctx;                    /* immutable: its argument */
    /* rpc_stream_http_body: the rest of an open request body, or NULL
     * (the rest is dropped); http_body_ended once it was told the end */
    rpc_http_body_fn http_on_body;
    bool http_body_ended;
    bool http_head_set;                /* mu: http_head is queued */
    struct rpc_http_head http_head;    /* mu: the answer's head */
    bool http_body_sent;               /* mu: a whole answer's body queued */
    size_t q_bytes;                    /* mu: bytes in the queue */
    /* The same answer on an HTTP/2 stream (h2 set): stream_id is the
     * request's, the bytes go out as DATA frames as the client's window
     * allows, END_STREAM ends it; headers_sent: HEADERS submitted. */
    bool h2;                           /* immutable */
    bool http_slot;                    /* holds an HTTP slot: given back
                                          at on_close (http_limit.c) */
    struct rpc_call *h2_call;          /* loop: the request, kept until
                                          the handler returned (its body
                                          is the handler's until then) */
};

/* One event loop thread and what it owns. */
struct rpc__loop {
    struct rpc_server *srv;            /* immutable */
    int ep;                            /* epoll fd; immutable */
    int evfd;                          /* eventfd waking the loop */
    pthread_t thread;                  /* joined by the owner */
    bool started;                      /* owner */
    _Atomic(struct rpc__item *) inbox; /* any thread pushes, loop takes */
    struct rpc__conn *conns;           /* live connections */
    struct rpc__conn *dirty;           /* connections with frames to write */
    struct rpc__conn *lazy, *lazy_tail; /* answers that may wait, by due
                                           time (conn.c "Lazy answers") */
    struct rpc_call *ready;            /* requests complete, to dispatch */
    struct rpc_call *ready_tail;       /* its end */
    struct rpc_call *free_calls;       /* recycled call objects */
    size_t free_n;                     /* their count */
    bool stopped;                      /* stop handled: conns closed */
    size_t unready_n;                  /* conns without a valid preface */
    bool accept_paused;                /* listeners out of the epoll set */
    int64_t accept_resume_ms;          /* when they go back in */
    int64_t next_sweep_ms;             /* next preface-timeout sweep */
    int64_t next_ka_ms;                /* next keepalive sweep */
    uint8_t rbuf[RPC__READ_BUF];       /* read buffer */
};

/* A listening socket. */
struct rpc__listener {
    int fd;                            /* -1 when closed */
    size_t url;                        /* index of its URL */
    bool tls;                          /* https:// or unixs:// */
    char *unix_path;                   /* socket file to unlink, or NULL */
};

/* The server.  Fields are set by the owner before start and read-only
 * afterwards unless noted. */
struct rpc_server {
    char *urls[RPC_URLS_MAX];          /* copies of the URLs */
    bool secure[RPC_URLS_MAX];         /* https:// or unixs:// */
    int ports[RPC_URLS_MAX];           /* bound TCP ports */
    size_t urls_n;                     /* number of URLs */
    struct rpc__listener lis[RPC__LISTENERS_MAX]; /* bound sockets */
    size_t lis_n;                      /* used */
    SSL_CTX *tls;                      /* for the secure URLs, or NULL;
                                        * replaced under tls_mu when the
                                        * files change (tls_files) */
    pthread_mutex_t tls_mu;            /* guards tls after start */
    struct rpc_tls *tls_files;         /* reload source, or NULL */
    struct rpc_tls_stamp tls_stamps[RPC_TLS_FILES]; /* its files as this
                                        * server last saw them (tls_mu) */
    char *tls_ciphers;                 /* cfg's, copied (NULL: default) */
    int tls_min_version;               /* cfg's */
    int tls_max_version;               /* cfg's */
    enum rpc_tls_verdict (*tls_check)(struct x509_st *cert,
                                      const char *remote_ip,
                                      const struct rpc_tls_dns *dns,
                                      void *ctx, char *why,
                                      size_t cap); /* or NULL */
    void *tls_check_ctx;               /* its argument */
    struct rpc__san_hub *san_hub;      /* with tls_check: its lookups'
                                        * threads (san_lookup.c) */
    bool tls_cn_identity;              /* cfg's: keep the peer's CN */
    size_t max_recv_bytes;             /* max_request_bytes + 512 KiB */
    int threads_n;                     /* event loops */
    int stream_queue;                  /* per-stream send queue bound */
    uint32_t max_streams;              /* concurrent streams per conn */
    int preface_timeout_ms;            /* to send a preface (TLS too) */
    int64_t ka_min_time_ms;            /* least gap between client PINGs */
    int64_t ka_interval_ms;            /* idle time before our PING */
    int64_t ka_timeout_ms;             /* wait for bytes after our PING */
    size_t conn_in_max;                /* request bytes held per conn */
    size_t conn_out_max;               /* reply bytes queued per conn */
    int fd_limit;                      /* soft RLIMIT_NOFILE at create */
    int fd_ceiling;                    /* accepted fds stay below this */
    atomic_llong refused_n;            /* connections refused at limits */
    atomic_llong refuse_logged_ms;     /* last log line about them */
    rpc_http_fn http;                  /* HTTP requests' handler, or NULL */
    void *http_ctx;                    /* its argument */
    struct rpc_http_access http_access; /* --cors, --host-whitelist */
    bool http_only;                    /* rpc_server_set_http_only */
    const char *const *http_open_paths; /* rpc_server_set_http_open_paths */
    /* rpc_server_set_count_in: whose methods rpc_call_count_as and
     * rpc_stream_count_as count in (NULL: this server's) */
    const struct rpc_server *count_in;
    /* rpc_server_set_http_limit (http_limit.c): at most http_limit HTTP
     * requests under those path prefixes are served at once (0: no
     * limit); the others wait on the park list, in order. */
    uint32_t http_limit;
    const char *const *http_limit_prefixes;
    pthread_mutex_t park_mu;           /* guards the fields below */
    uint32_t http_slots_used;          /* park_mu */
    struct rpc_call *park_head, *park_tail; /* park_mu */
    rpc_unary_gate_fn gate;            /* checks every unary call, or NULL */
    void *gate_ctx;                    /* its argument */
    struct rpc__method *methods;       /* registered methods */
    size_t methods_n, methods_cap;     /* used, allocated */
    bool started;                      /* owner */
    bool stop_called;                  /* owner */
    atomic_bool stopping;              /* any thread: close connections */
    atomic_bool exiting;               /* any thread: loops return */
    atomic_long active_n;              /* calls handed out, not answered */
    struct metrics_counter rx_bytes;   /* gRPC request bytes (DATA) */
    struct metrics_counter tx_bytes;   /* gRPC response bytes queued */
    atomic_long streams_n;             /* streams not yet freed */
    atomic_uint next_loop;             /* round robin for new connections */
    struct rpc__loop loops[RPC_THREADS_MAX]; /* see rpc__loop */
};

/* server.c */
/* rpc__loop_init sets up loop l of srv (its epoll set with the eventfd
 * and srv's listeners) without starting its thread.  ERR_IO. */
int rpc__loop_init(struct rpc_server *srv, struct rpc__loop *l);
/* rpc__loop_push puts it on l's inbox (any thread). */
void rpc__loop_push(struct rpc__loop *l, struct rpc__item *it);
/* rpc__loop_turn does what a loop does after its socket events: dispatch
 * the complete requests, end the thread's turn (the work its handlers
 * deferred, util/thread.h), take the inbox, write what nghttp2 has to
 * send. */
void rpc__loop_turn(struct rpc__loop *l);

/* gRPC message framing: a flag byte (1: compressed) and a big-endian
 * 32-bit length before each message. */
#define RPC__PREFIX 5

static inline uint32_t rpc__prefix_len(const uint8_t *p)
{
    return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 8 | p[4];
}

static inline void rpc__prefix_put(uint8_t *p, size_t len)
{
    p[0] = 0;
    p[1] = (uint8_t)(len >> 24);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
}

/* conn.c */
/* rpc__buf_grow returns buf with room for need bytes (*cap updated),
 * doubling from first, or NULL (buf and *cap untouched) when out of
 * memory; the caller stores the result back. */
void *rpc__buf_grow(void *buf, size_t *cap, size_t need, size_t first);
/* rpc__conn_new makes a connection for loop l (on any thread); the loop
 * itself then attaches it: its list, its epoll set, its first flush. */
struct rpc__conn *rpc__conn_new(struct rpc__loop *l, int fd, bool tls);
void rpc__conn_attach(struct rpc__conn *c);
void rpc__conn_io(struct rpc__conn *c, uint32_t events);
void rpc__conn_flush(struct rpc__conn *c);
void rpc__conn_mark_dirty(struct rpc__conn *c);
/* Lazy answers (conn.c): rpc__conn_lazy_timeout_ms caps a loop's epoll
 * timeout ms (-1: none) at the first lazy connection's due time;
 * rpc__conn_lazy_due marks the connections that are due (all: every one)
 * dirty and takes them off the lazy list. */
int rpc__conn_lazy_timeout_ms(const struct rpc__loop *l, int ms);
void rpc__conn_lazy_due(struct rpc__loop *l, bool all);
/* rpc__conn_kill closes c, ends its calls and streams; the call site
 * (function and line) is logged at debug level, a record of why each
 * connection ended. */
#define rpc__conn_kill(c) rpc__conn_kill_at((c), __func__, __LINE__)
void rpc__conn_kill_at(struct rpc__conn *c, const char *fn, int line);
void rpc__conn_unref(struct rpc__conn *c);
int rpc__hdrs_add(struct rpc__hdrs *h, const uint8_t *name, size_t name_n,
                  const uint8_t *value, size_t value_n);
/* rpc__count_srv: the server whose methods srv's HTTP calls count in. */
static inline const struct rpc_server *
rpc__count_srv(const struct rpc_server *srv)
{
    return srv->count_in != NULL ? srv->count_in : srv;
}

const char *rpc__hdrs_find(const struct rpc__hdrs *h, const char *key,
                           size_t *len_out);
int64_t rpc__grpc_timeout_ns(const uint8_t *v, size_t n);
/* rpc__too_large_msg writes grpc-go's text for a message of n bytes over
 * the limit max. */
void rpc__too_large_msg(char *buf, size_t cap, size_t n, size_t max);
size_t rpc__status_nv(nghttp2_nv *nv, grpc_status_code code,
                      const char *msg, char *code_buf, char *msg_buf,
                      size_t msg_cap);

/* h1.c: HTTP/1.x connections and protocol sniffing. */
#define H1_PIPELINE_MAX 16       /* requests waiting for their answers */
#define H1_OUT_MAX (1u << 20)    /* answer bytes unsent before pausing */
/* Bytes an HTTP stream's queue holds at most (besides its message count):
 * a gateway watch's events are JSON lines of any size, and 144 of them
 * may be large.  One message is always taken into an empty queue. */
#define H1_STREAM_BYTES_MAX (4u << 20)
/* A background stream's queue, bytes (besides its messages; stream.c). */
#define RPC_BG_QUEUE_BYTES (1u << 20)
/* rpc__sniff takes a SNIFF connection's first bytes: the HTTP/2 preface
 * makes it H2, anything else H1; the bytes go on to that protocol.  False
 * when the connection died. */
bool rpc__sniff(struct rpc__conn *c, const uint8_t *p, size_t n);
/* rpc__h1_feed takes bytes read from an H1 connection; false when the
 * connection died. */
bool rpc__h1_feed(struct rpc__conn *c, const uint8_t *p, size_t n);
/* rpc__h1_eof: the client closed its side; true when the connection stays
 * to write the answers still due (it closes after them). */
bool rpc__h1_eof(struct rpc__conn *c);
/* rpc__h1_answered: an H1 call's answer came back from its handler. */
void rpc__h1_answered(struct rpc_call *call);
/* rpc__h1_written: c's output buffer was written out. */
void rpc__h1_written(struct rpc__conn *c);
/* h1_stream.c: HTTP/1.x answers that stay open. */
/* rpc__http_open_path: call's :path (query cut) is one whose request
 * body may stay open (rpc_server_set_http_open_paths). */
bool rpc__http_open_path(const struct rpc_server *srv,
                         const struct rpc_call *call);
/* rpc__http_body_more hands n more bytes of an open body to call: kept
 * with its body while it waits for its handler, given to the stream it
 * became, or dropped once answered; end (err: a framing error) once.
 * False: more than the receive limit waiting (the caller closes). */
bool rpc__http_body_more(struct rpc_call *call, const uint8_t *p, size_t n,
                         bool end, const char *err);
/* rpc__h1_pump moves the queued bytes of the stream answering c's first
 * request into c's buffer (within its bound), ends it once finished and
 * goes on with the requests after it. */
void rpc__h1_pump(struct rpc__conn *c);
/* rpc__h1_streaming: c's first request is answered by a stream. */
bool rpc__h1_streaming(const struct rpc__conn *c);
/* rpc__h2_http_stream turns an HTTP/2 HTTP call into an answer that
 * stays open (h1_stream.c); rpc__h2_http_pump submits or resumes it. */
int rpc__h2_http_stream(struct rpc_call *call, rpc_http_close_fn on_close,
                        void *ctx, struct rpc_stream **stream_out);
void rpc__h2_http_pump(struct rpc_stream *s);
/* rpc__h2_call_drop frees the request an HTTP/2 answer kept, if any. */
void rpc__h2_call_drop(struct rpc_stream *s);
/* rpc__h1_drain writes the answered calls at the head of c's queue, up to
 * a streamed one (h1.c). */
void rpc__h1_drain(struct rpc__conn *c);
/* rpc__h2_feed gives bytes to c's nghttp2 session (conn.c). */
bool rpc__h2_feed(struct rpc__conn *c, const uint8_t *p, size_t n);
/* rpc__conn_rearm sets c's epoll events from want_out and rd_paused. */
void rpc__conn_rearm(struct rpc__conn *c);
/* rpc__conn_san_resume: the lookups c waited for (san_wait) are done: its
 * handshake goes on (conn.c). */
void rpc__conn_san_resume(struct rpc__conn *c);
/* http_access.c.  rpc__http_host_allowed: call may be served under
 * --host-whitelist (else host_out, cap bytes, is the host refused).
 * rpc__http_cors_origin: the Access-Control-Allow-Origin of the answer to
 * a request with hdrs ("*", the Origin value in hdrs, or NULL: no CORS
 * headers).  rpc__http_refuse_host answers etcd's 421. */
bool rpc__http_host_allowed(const struct rpc_server *srv,
                            const struct rpc_call *call, char *host_out,
                            size_t cap);
const char *rpc__http_cors_origin(const struct rpc_server *srv,
                                  const struct rpc__hdrs *hdrs);
void rpc__http_refuse_host(struct rpc_call *call, const char *host);

/* rpc__http_extra writes the extra header lines of an HTTP answer (CORS
 * with origin cors, NULL: none; RPC_HTTP_* flags) into buf (cap >= 256
 * plus the origin's length); returns its length. */
size_t rpc__http_extra(const char *cors, unsigned flags, char *buf,
                       size_t cap);

/* http_limit.c */
/* rpc__http_slot_take: call (an HTTP request on its loop, HANDLER) may be
 * served now (true: it holds a slot if it needs one), or it was parked
 * (false: it comes back through the inbox once a slot is free). */
bool rpc__http_slot_take(struct rpc_call *call);
/* rpc__http_slot_give gives a slot back (any thread): to the first parked
 * request, if any, which its loop then dispatches. */
void rpc__http_slot_give(struct rpc_server *srv);
/* rpc__call_parked_closed: the connection of a PARKED call ended (loop):
 * true when the call was freed here. */
bool rpc__call_parked_closed(struct rpc_call *call);

/* call.c */
/* rpc__call_redispatch: the loop takes a parked call back (its slot is
 * free now) and hands it to the HTTP handler. */
void rpc__call_redispatch(struct rpc_call *call);
/* rpc__http_submit answers an HTTP request that came over HTTP/2. */
void rpc__http_submit(struct rpc_call *call);
/* The response HEADERS of an HTTP answer over HTTP/2 (status, type,
 * length when len >= 0, date, CORS and the RPC_HTTP_* extras); the
 * values live in the struct until nghttp2 copied them at submit. */
struct rpc__http_nv {
    nghttp2_nv nv[12];
    size_t n;
    char st[8], len[24], date[40];
};
void rpc__http_nv_make(struct rpc__http_nv *h, const char *cors,
                       int status, const char *ctype, unsigned flags,
                       long long len);
extern const nghttp2_nv rpc__resp_headers[2]; /* :status, content-type */
struct rpc_call *rpc__call_new(struct rpc__conn *c, int32_t stream_id);
void rpc__call_free(struct rpc_call *call);
void rpc__call_ready(struct rpc_call *call);
void rpc__call_data(struct rpc_call *call, const uint8_t *p, size_t n);
void rpc__call_closed(struct rpc_call *call);
void rpc__call_dispatch(struct rpc__loop *l);
void rpc__call_inbox(struct rpc_call *call);
void rpc__loop_free_calls(struct rpc__loop *l);
void rpc__health_check(struct rpc_call *call, const uint8_t *req,
                       size_t len, void *ctx);

/* stream.c */
/* rpc__stream_alloc: a stream for call, on its connection, with its
 * bounded send queue (the server's stream_queue + RPC_STREAM_CTRL_RESERVE):
 * the call's metadata (moved) and CORS origin taken, the open time set, linked into the connection's streams (a reference on it); or
 * NULL.  The callers (rpc__stream_open, rpc_call_http_stream) fill in the
 * rest. */
struct rpc_stream *rpc__stream_alloc(struct rpc_call *call);
struct rpc_stream *rpc__stream_open(struct rpc_call *call);
void rpc__stream_data(struct rpc_stream *s, const uint8_t *p, size_t n);
void rpc__stream_half_closed(struct rpc_stream *s);
void rpc__stream_trailers_sent(struct rpc_stream *s);
void rpc__stream_closed(struct rpc_stream *s);
/* Background streams' budget (stream.c "background streams"): a
 * connection-level WINDOW_UPDATE of increment came (on_frame_recv, after
 * nghttp2 applied it); resume the deferred ones; the keepalive sweep's
 * check for a stalled budget (guard.c). */
void rpc__conn_bg_update(struct rpc__conn *c, int32_t increment);
void rpc__conn_bg_resume(struct rpc__conn *c);
void rpc__conn_bg_sweep(struct rpc__conn *c);
/* rpc__conn_bg_foreground: a unary call came or a foreground stream sent
 * on c: its background streams' budget is tight for a while. */
void rpc__conn_bg_foreground(struct rpc__conn *c);
/* rpc__conn_bg_settings_acked: the client ACKed our SETTINGS (sent at
 * bg_settings_ns): a round trip with nothing in flight. */
void rpc__conn_bg_settings_acked(struct rpc__conn *c);
/* rpc__bg_tight: the tight budget after a probe that had inflight bytes
 * unread when sent and came back after rtt_ns, the smallest round trip
 * known being min_rtt_ns: twice inflight * min_rtt / rtt, at least
 * RPC_BG_TIGHT (64 KiB; also when an input is unknown, <= 0). */
int32_t rpc__bg_tight(int64_t inflight, int64_t rtt_ns, int64_t min_rtt_ns);
/* rpc__conn_bg_probe submits the probe PING when a background stream is
 * deferred and none is out (true: one was submitted; conn.c's flush
 * writes it); rpc__conn_bg_probe_ack: a PING ACK came (ours or not). */
bool rpc__conn_bg_probe(struct rpc__conn *c);
void rpc__conn_bg_probe_ack(struct rpc__conn *c, const uint8_t opaque[8]);
void rpc__stream_inbox(struct rpc_stream *s);
/* rpc__stream_tell_close runs the owner's on_close once. */
void rpc__stream_tell_close(struct rpc_stream *s, bool cancelled);
/* rpc__stream_queue queues p (n bytes, owned: taken on success) under the
 * limit; counts metrics for gRPC streams.  ERR_FULL (it arms the gRPC
 * owner's ops->on_writable, if any), ERR_CLOSED. */
int rpc__stream_queue(struct rpc_stream *s, uint8_t *p, size_t n,
                      size_t limit);

/* guard.c: the limits one client must not pass (fd reserve, accept
 * back-off, preface timeout, buffered bytes per connection). */
/* rpc__now_ns / rpc__now_ms: CLOCK_MONOTONIC, the clock of deadlines
 * (grpc-timeout) and of the limits' timers. */
int64_t rpc__now_ns(void);
int64_t rpc__now_ms(void);
/* rpc__guard_init reads the fd limit into srv->fd_ceiling. */
void rpc__guard_init(struct rpc_server *srv);
/* rpc__guard_accept_ok: fd (just accepted) may be served; false means it
 * was closed (too close to the fd limit) and accepting pauses. */
bool rpc__guard_accept_ok(struct rpc__loop *l, int fd);
/* rpc__guard_accept_failed: accept4 failed with errno e; true when the
 * loop must stop accepting for now (the fd limit, memory). */
bool rpc__guard_accept_failed(struct rpc__loop *l, int e);
/* rpc__guard_timeout_ms: how long the loop may sleep (-1: forever). */
int rpc__guard_timeout_ms(const struct rpc__loop *l);
/* rpc__keepalive_ping: the policy check of a client PING (conn.c). */
void rpc__keepalive_ping(struct rpc__conn *c);

/* rpc__guard_tick: resume accepting, close connections past their
 * preface timeout; run after every loop turn. */
void rpc__guard_tick(struct rpc__loop *l);
/* rpc__guard_in_add: n more request bytes for c; false when that passes
 * the connection's budget (nothing is added then). */
bool rpc__guard_in_add(struct rpc__conn *c, size_t n);
void rpc__guard_in_sub(struct rpc__conn *c, size_t n);
/* rpc__over_budget_msg / rpc__not_reading_msg: the RESOURCE_EXHAUSTED
 * texts for a connection over its request or reply budget. */
void rpc__over_budget_msg(char *buf, size_t cap, const struct rpc__conn *c);
void rpc__not_reading_msg(char *buf, size_t cap, const struct rpc__conn *c);
/* rpc__guard_out_full: c has more reply bytes queued than allowed. */
bool rpc__guard_out_full(const struct rpc__conn *c);

/* tls_san.c: etcd 3.4's check of a peer's client certificate SANs. */

/* rpc__tls_san_check: does the client certificate x fit remote_ip (the
 * text of the client's IP, NULL for a unix socket), as etcd 3.4's
 * checkSAN decides: RPC_TLS_PASS; RPC_TLS_REFUSE with Go's words in why
 * (cap bytes); RPC_TLS_LOOKUP when x's DNS SANs must be looked up and
 * dns (their verdict, rpc__san_dns_match's) is NULL.  Pure. */
enum rpc_tls_verdict rpc__tls_san_check(struct x509_st *x,
                                        const char *remote_ip,
                                        const struct rpc_tls_dns *dns,
                                        char *why, size_t cap);

#define RPC__DNS_NAME_MAX 1025 /* a name and its NUL (NI_MAXHOST) */
#define RPC__PTR_NAMES_MAX 4   /* names a reverse lookup gives, at most */
#define RPC__DNS_ERR_MAX 256   /* a lookup error's words */

/* A resolver: the system's (san_lookup.c) or a test's.  Each function may
 * block; err (cap bytes) gets Go's words for a failure ("lookup
 * nothere.invalid on 10.0.0.53:53: no such host"). */
struct rpc__resolver {
    /* reverse: the names of ip (PTR records, /etc/hosts) into names (at
     * most max): their count, or -1 when the lookup failed. */
    int (*reverse)(void *ctx, const char *ip,
                   char (*names)[RPC__DNS_NAME_MAX], int max, char *err,
                   size_t cap);
    /* forward: 1 when name has ip (text, as rpc__tls_san_check gets it)
     * among its addresses (A and AAAA), 0 when not, -1 when the lookup
     * failed. */
    int (*forward)(void *ctx, const char *name, const char *ip, char *err,
                   size_t cap);
    void *ctx; /* their first argument */
};

/* rpc__san_dns_match makes etcd 3.4's isHostInDNS lookups of ip for the
 * DNS SANs sans (n of them, "*.x" wildcards among them) with r: true when
 * one matches, else false with etcd's refusal text in why (cap bytes):
 * tls: "ip" does not match any of DNSNames ["a" "b"] (<last error>). */
bool rpc__san_dns_match(const char *ip, const char *const *sans, size_t n,
                        const struct rpc__resolver *r, char *why,
                        size_t cap);

/* rpc__san_lists writes x's SANs as etcd's log line of a connection
 * refused after its handshake ends: IPAddresses ["10.0.0.1"], DNSNames
 * ["a"] (cut to fit cap bytes). */
void rpc__san_lists(struct x509_st *x, char *buf, size_t cap);

/* rpc__go_quote appends s as Go's %q writes it (in double quotes, '"' and
 * '\\' escaped, control and non-ASCII bytes as \n or \xNN) to buf at *at,
 * cut to fit cap bytes with its NUL; *at moves past it. */
void rpc__go_quote(const char *s, char *buf, size_t cap, size_t *at);

/* san_lookup.c: the lookups rpc__tls_san_check asks for, on threads.
 *
 * A job is made by the handshake's verify callback when the server's
 * tls_check answers RPC_TLS_LOOKUP: the remote IP and the certificate's
 * DNS SANs copied, kept on the SSL (ex data; the SSL holds a reference,
 * dropped when it is freed).  Once OpenSSL finished the handshake (with
 * the certificate provisionally accepted: OpenSSL 3.0 cannot suspend a
 * server's verification, SSL_set_retry_verify works on clients only),
 * rpc__tls_handshake starts it: a detached thread (at most
 * RPC__SAN_THREADS_MAX per server, more are refused) makes the lookups,
 * then hands the job back through the connection's loop inbox (its
 * reference goes with it); the loop asks tls_check again with the
 * verdict, and the connection, which read nothing meanwhile, goes on or
 * is closed.  The thread touches neither the connection nor, once the
 * server closed its hub, the loop: a connection freed meanwhile (its
 * handshake timed out) only clears the job's pointer to it, on its loop,
 * and tells the thread to skip the lookups left. */
#define RPC__SAN_THREADS_MAX 8

struct rpc__san_job;

/* The lookups of one server: shared by the server and the threads making
 * them (refcounted, under its own lock), so a thread ending after the
 * server closed finds that out here without touching the server. */
struct rpc__san_hub;

/* rpc__san_hub_new: a hub for a server (rpc_server_create), or NULL. */
struct rpc__san_hub *rpc__san_hub_new(void);
/* rpc__san_hub_close: the server is closing (before its loops take their
 * last inbox): no job is started or handed back from now on.
 * rpc__san_hub_free (server_free, the loops gone) closes it and drops the
 * server's reference.  NULL is fine for both. */
void rpc__san_hub_close(struct rpc__san_hub *h);
void rpc__san_hub_free(struct rpc__san_hub *h);
/* rpc__san_job_attach: a job for x's DNS SANs against ip, kept on ssl
 * (verify callback, any loop).  ERR_NOMEM. */
int rpc__san_job_attach(SSL *ssl, struct x509_st *x, const char *ip);
/* rpc__san_job_of: the job kept on ssl, or NULL. */
struct rpc__san_job *rpc__san_job_of(const SSL *ssl);
/* rpc__san_job_ip: the remote IP job was made for (the socket's peer
 * may be gone by the time its verdict is asked for). */
const char *rpc__san_job_ip(const struct rpc__san_job *job);
/* rpc__san_job_poll (c's loop; job is c's SSL's): 1 with the verdict in
 * *dns_out (its text borrowed from the job, valid while c's SSL lives);
 * 0 while the lookups run (started now, for c, if they had not been);
 * -1 when they cannot be started, with why (cap bytes) for the log. */
int rpc__san_job_poll(struct rpc__san_job *job, struct rpc__conn *c,
                      struct rpc_tls_dns *dns_out, char *why, size_t cap);
/* The system's resolver (getnameinfo, getaddrinfo), for struct
 * rpc__resolver; ctx is the job (its lookups stop once it is cancelled)
 * or NULL. */
int rpc__san_sys_reverse(void *ctx, const char *ip,
                         char (*names)[RPC__DNS_NAME_MAX], int max,
                         char *err, size_t cap);
int rpc__san_sys_forward(void *ctx, const char *name, const char *ip,
                         char *err, size_t cap);
/* rpc__san_job_inbox: the loop takes a job handed back (it: the job's
 * inbox entry, kind SAN_JOB): its connection, if still there, resumes
 * (rpc__conn_san_resume). */
void rpc__san_job_inbox(struct rpc__item *it);

/* handshake.c */
SSL_CTX *rpc__tls_ctx(const struct rpc_server_config *cfg);
/* rpc__tls_handshake goes on with c's handshake: 1 done (and the client
 * certificate accepted), 0 waiting for bytes, 2 waiting to write,
 * RPC__TLS_SAN_WAIT waiting for the lookups of the client certificate's
 * DNS SANs (read nothing from c until rpc__conn_san_resume), -1 failed
 * (logged as etcd logs a rejected connection). */
#define RPC__TLS_SAN_WAIT 3
int rpc__tls_handshake(struct rpc__conn *c);
/* rpc__tls_ssl_new makes the TLS state of a new connection from the
 * server's current context, after a reload when its files changed.
 * NULL when OpenSSL fails.  Any loop. */
SSL *rpc__tls_ssl_new(struct rpc_server *srv);


#endif
