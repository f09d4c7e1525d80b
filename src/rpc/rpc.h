/*
 * rpc.h - the gRPC server runtime that the etcd v3 API services (api/)
 * and the peer transport (peer/) sit on.  The rpc module is a layer below
 * both (docs/ARCHITECTURE.md): it includes only util/ and the generated
 * protos.  Files: server.c (listeners, loops, shutdown), conn.c (one
 * connection and its nghttp2 session), h1.c (HTTP/1.x connections and
 * protocol sniffing), call.c (unary calls and HTTP answers), stream.c
 * (streams), h1_stream.c (HTTP/1.x answers that stay open), h2_stream.c (the same on HTTP/2), http_limit.c (the gateway's slots), guard.c (limits), handshake.c (TLS handshakes), tls.c/tls.h
 * (the listeners' TLS material).
 *
 * gRPC over our own HTTP/2 connections: libnghttp2 does the framing, HPACK
 * and flow control, OpenSSL the TLS (handshake.c).  A server listens on the
 * client URLs and runs `threads` event loops (epoll); each connection
 * belongs to one loop, which reads it, hands each call to the handler
 * registered for its full method path ("/etcdserverpb.KV/Range") and
 * writes the answers.  Paths nobody registered are answered UNIMPLEMENTED
 * the way grpc-go does: "unknown service <svc>", "unknown method <m> for
 * service <svc>", or, for a method that exists in our protos but has no
 * handler yet, "method <m> not implemented".  grpc.health.v1.Health/Check
 * answers SERVING.  (Until session 10 this ran on the gRPC C core server;
 * see docs/BENCHMARKS.md for why it no longer does.)
 *
 * Life cycle (one thread, the owner):
 *   rpc_server_create -> rpc_server_register_* ... -> rpc_server_start
 *   -> (serve) -> rpc_server_stop (optional, non-blocking) -> rpc_server_close
 *
 * Unary calls.  The handler runs on a loop with the request bytes.
 * It must eventually answer exactly once, with rpc_call_reply,
 * rpc_call_reply_bytes or rpc_call_reply_error, either before it returns or
 * LATER FROM ANY THREAD (e.g. the apply thread waking a waiter).  Until that
 * answer the call, its request bytes and its metadata stay valid; the call
 * is owned by whoever must answer it.  The answering function hands the call
 * back to the runtime: after it returns the caller must not touch the call
 * or the request bytes again (the loop may already have recycled it).
 * A client cancel or deadline does not free the call early: the answer is
 * still required and is then simply dropped by the runtime.  A handler that
 * may wait long should look at rpc_call_deadline_ns.
 *
 * Streaming calls (Watch, LeaseKeepAlive, Snapshot, Observe).  Client
 * messages arrive one at a time through ops->on_message on its loop (the
 * next one is read only after the callback returns: that is the flow
 * control).  Any thread may send with rpc_stream_send; sends are queued in a
 * bounded per-stream queue with one SEND_MESSAGE in flight.  A send past
 * the queue's limit is refused with ERR_FULL; an owner that would rather
 * wait than drop (a proxy) sets ops->on_writable to learn when the queue
 * has drained.  Sends, finish and release only record under the stream's
 * lock and hand the stream to its loop, so another thread may make them
 * while the loop is inside a callback of the same stream; the stream is
 * freed only on its loop, between callbacks.  ops->on_close
 * runs exactly once when the stream has ended (finished, cancelled by the
 * client, deadline, or server shutdown).  The stream object stays valid
 * until its owner calls rpc_stream_release, exactly once, after on_open (it
 * may be called from on_close).  A release before on_close does not stop
 * the callbacks: on_message and on_close still come (the stream stays
 * valid for them), so an owner that releases early keeps its ctx until
 * on_close.
 *
 * Limits (guard.c has the details).  Each connection may open
 * max_concurrent_streams streams at once, must finish its TLS handshake
 * and send the HTTP/2 preface within preface_timeout_ms, may make the
 * runtime hold at most max(64 MiB, 2 x the largest request) of request
 * bytes, and while more than 64 MiB of its replies wait unsent (a client
 * that does not read) its new calls and new replies are answered
 * RESOURCE_EXHAUSTED.  Accepted sockets stay below the open-file limit
 * minus a reserve kept for the member's own files; at that ceiling the
 * loops stop accepting for a moment instead of spinning.  A fatal HTTP/2
 * error closes the connection at once.  TCP sockets get TCP_NODELAY.
 *
 * Shutdown.  rpc_server_close stops listening, cancels all calls and blocks
 * until every call handed out has been answered and every stream released;
 * the threads that answer asynchronously must keep running (and must fail
 * their waiters) until it returns.  It then joins the
 * threads and frees everything.
 *
 * Errors are negative ERR_* codes from util/err.h.
 */
#ifndef CETCD_RPC_RPC_H
#define CETCD_RPC_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/status.h>
#include <protobuf-c/protobuf-c.h>

#include "util/metrics.h"

/* Defaults, as in etcd 3.4 where etcd has one. */
#define RPC_DEFAULT_MAX_REQUEST_BYTES (1536 * 1024) /* --max-request-bytes */
#define RPC_DEFAULT_THREADS 2
#define RPC_DEFAULT_STREAM_QUEUE 128 /* queued sends per stream */
/* Slots per stream beyond the send queue, for rpc_stream_send_ctrl only
 * (etcd's watch keeps 16 control responses: ctrlStreamBufLen). */
#define RPC_STREAM_CTRL_RESERVE 16
#define RPC_THREADS_MAX 64
/* Concurrent HTTP/2 streams per connection (--max-concurrent-streams).
 * etcd's default is unlimited, which lets one connection hold as many
 * calls and replies as it likes; a client over the limit waits for a
 * slot (grpc-go and the gRPC core queue their streams). */
#define RPC_DEFAULT_MAX_STREAMS 1000
/* A connection must finish its TLS handshake and send the HTTP/2 preface
 * within this, or it is closed. */
#define RPC_DEFAULT_PREFACE_TIMEOUT_MS 10000
#define RPC_URLS_MAX 16

struct rpc_server;
struct rpc_call;
struct rpc_stream;
struct x509_st; /* OpenSSL's X509 */

/* What a client certificate check (rpc_server_config.tls_check) says. */
enum rpc_tls_verdict {
    RPC_TLS_REFUSE, /* refused: the reason is in why */
    RPC_TLS_PASS,   /* accepted */
    /* The answer needs etcd's DNS lookups of the certificate's DNS SANs
     * against the remote IP (tls.h check_client_san): the runtime makes
     * them off its loops and asks again with their verdict. */
    RPC_TLS_LOOKUP,
};

/* The verdict of those lookups (etcd 3.4's isHostInDNS): a name of the
 * remote IP (reverse lookup) fits a DNS SAN, or a DNS SAN resolves to the
 * remote IP (forward lookups). */
struct rpc_tls_dns {
    bool match;      /* one did */
    const char *why; /* else etcd's refusal text, with the lookup error */
};

/* Server settings; the strings are copied by rpc_server_create. */
/* HTTP/2 keepalive as grpc-go's server (etcd --grpc-keepalive-*): a
 * connection idle (nothing read) for interval_ms gets a PING, and is
 * closed when nothing arrives within timeout_ms after it; a client that
 * PINGs more often than min_time_ms (every 2 h at most while it has no
 * stream open) gets strikes, and past 2 a GOAWAY ENHANCE_YOUR_CALM
 * "too_many_pings" that closes the connection.  Sending HEADERS or DATA
 * clears the strikes.  0 means grpc-go's default (5 s, 2 h, 20 s).  A
 * client's PING is answered within 110 ms, with the next frames written
 * on its connection once 100 ms have passed (conn.c "Lazy answers"). */
struct rpc_keepalive {
    int64_t min_time_ms; /* least gap between a client's PINGs */
    int64_t interval_ms; /* idle time before the server PINGs */
    int64_t timeout_ms;  /* wait for any bytes after that PING */
};

struct rpc_server_config {
    /* "http://host:port", "unix://path" (port 0 picks a free port, see
     * rpc_server_port); "https://host:port" and "unixs://path" serve TLS
     * with the tls_* PEM material below and are refused with ERR_INVAL
     * when there is none (etcd: "TLS key/cert ... must be provided"). */
    const char *urls[RPC_URLS_MAX];
    size_t urls_n;
    /* Largest request etcd accepts; the gRPC receive limit is this plus
     * 512 KiB, as in etcd.  0 means RPC_DEFAULT_MAX_REQUEST_BYTES. */
    size_t max_request_bytes;
    int threads;        /* event loops; 0 means RPC_DEFAULT_THREADS */
    int stream_queue;   /* per-stream send queue; 0 means the default */
    /* SETTINGS_MAX_CONCURRENT_STREAMS; 0 means RPC_DEFAULT_MAX_STREAMS. */
    uint32_t max_concurrent_streams;
    /* Handshake + preface deadline; 0 means the default. */
    int preface_timeout_ms;
    struct rpc_keepalive keepalive; /* zeroes: grpc-go's defaults */
    /* TLS for the https:// and unixs:// URLs (plain URLs stay plain, as
     * in etcd).  PEM strings, loaded into the runtime's OpenSSL context by
     * rpc_server_create; NULL cert and key mean no TLS. */
    const char *tls_cert_pem; /* certificate chain of this server */
    const char *tls_key_pem;  /* its private key */
    const char *tls_ca_pem;   /* CAs that sign client certs, or NULL */
    /* Require a client certificate and verify it against tls_ca_pem
     * (which must then be set); otherwise none is asked for. */
    bool tls_verify_clients;
    /* An extra decision on every verified client certificate (OpenSSL's
     * X509, borrowed for the call), made on a loop during the handshake:
     * RPC_TLS_REFUSE refuses the connection (CRLs, allowed CN/hostname,
     * SANs against the address), with the reason for the log in why (cap
     * bytes).  remote_ip is the text of the client's IP address, or NULL
     * for a unix socket.  dns is NULL at first; after RPC_TLS_LOOKUP the
     * runtime finishes the handshake, holds the connection (nothing read
     * from it) while a thread makes the lookups, then asks again with
     * their verdict in dns (borrowed for the call); a refusal then closes
     * the connection without an alert, as etcd's checks after its
     * handshake do.  NULL: none.  Needs tls_verify_clients; tls_check_ctx
     * must outlive the server. */
    enum rpc_tls_verdict (*tls_check)(struct x509_st *cert,
                                      const char *remote_ip,
                                      const struct rpc_tls_dns *dns,
                                      void *ctx, char *why, size_t cap);
    void *tls_check_ctx;
    /* --client-cert-auth: the common name of a connection's verified
     * client certificate names its caller (etcd's AuthInfoFromTLS), read
     * with rpc_call_peer_cn / rpc_stream_peer_cn.  Needs
     * tls_verify_clients. */
    bool tls_cn_identity;
    /* TLS 1.2 cipher list (OpenSSL syntax; NULL or "" for OpenSSL's
     * default) and protocol versions (0: TLS 1.2 and up, as etcd). */
    const char *tls_ciphers;
    int tls_min_version;
    int tls_max_version;
    /* The files behind the PEM strings (tls.h), or NULL: before each new
     * TLS connection the server asks rpc_tls_stale and, when some file
     * changed, builds a new context from rpc_tls_reload's material; the
     * connections already open keep the old one.  Must outlive the
     * server. */
    struct rpc_tls *tls_files;
};

/*
 * Unary handler.  Runs on a loop.  req/req_len is the serialized
 * request (valid until the call is answered); ctx is the registration's.
 * The handler must answer the call exactly once, now or later, from any
 * thread.  It must not block the loop for long.
 */
typedef void (*rpc_unary_fn)(struct rpc_call *call, const uint8_t *req,
                             size_t req_len, void *ctx);

/* A method's kind on the wire (grpc-go's grpc_type label). */
enum rpc_method_type {
    RPC_TYPE_BIDI_STREAM = 0,
    RPC_TYPE_UNARY,
    RPC_TYPE_CLIENT_STREAM,
    RPC_TYPE_SERVER_STREAM,
};

/* Streaming handler callbacks, all run on the stream's loop. */
struct rpc_stream_ops {
    /* A client opened a stream.  The owner now holds a reference that it
     * drops with rpc_stream_release. */
    void (*on_open)(struct rpc_stream *stream, void *ctx);
    /* One client message (bytes valid during the callback only), or
     * msg == NULL once: the client half-closed its side. */
    void (*on_message)(struct rpc_stream *stream, const uint8_t *msg,
                       size_t len, void *ctx);
    /* The stream ended; cancelled tells whether it ended without a status
     * from us (client cancel, deadline, shutdown).  Called exactly once;
     * later rpc_stream_send/finish return ERR_CLOSED. */
    void (*on_close)(struct rpc_stream *stream, bool cancelled, void *ctx);
    /* What the method is on the wire, for its metrics' grpc_type label
     * (zero: a bidirectional stream).  A unary wire method served as a
     * stream (v3lock's Lock) says RPC_TYPE_UNARY. */
    enum rpc_method_type wire_type;
    /* Optional (NULL: never called), for an owner that paces what it
     * sends by the client's reading (a proxy forwarding an upstream
     * stream): once a send on the stream was refused with ERR_FULL
     * (rpc_stream_send, _send_bytes or _send_ctrl) and the stream's send
     * queue has since drained to at most half of its limits (stream_queue
     * messages and, for a background stream, RPC_BG_QUEUE_BYTES bytes),
     * this runs once on the stream's loop; it may send, finish or
     * release.  Refusals before that call share it: one call per run of
     * refusals, none without a refusal.  Never after on_close, nor once
     * the loop has seen the owner's rpc_stream_release (a release from
     * another thread may cross a call already under way).  A queue that
     * does not drain (the client reads nothing) never calls it: the
     * stream ends through on_close instead. */
    void (*on_writable)(struct rpc_stream *stream, void *ctx);
};

/* --- metrics --- */

/* gRPC status codes are 0 (OK) .. 16 (UNAUTHENTICATED). */
#define RPC_STATUS_CODES 17

/* What the runtime counted for one registered method since start, as
 * grpc-go's Prometheus interceptors count (grpc_server_started_total,
 * grpc_server_handled_total by code, grpc_server_msg_received_total,
 * grpc_server_msg_sent_total, grpc_server_handling_seconds).  A stream
 * the client cancels is handled with CANCELLED.  Calls to unregistered
 * methods and HTTP requests are not counted. */
struct rpc_method_metrics {
    const char *path;           /* "/pkg.Svc/Method" */
    enum rpc_method_type type;  /* its wire kind */
    uint64_t started;           /* calls and streams begun */
    uint64_t handled[RPC_STATUS_CODES]; /* ended, by status code */
    uint64_t msg_received;      /* request messages */
    uint64_t msg_sent;          /* response messages */
    struct metrics_hist_snap handling; /* begin to end, seconds */
};

/* rpc_server_metrics calls fn once per registered method, in
 * registration order, with a snapshot valid during the call.  Any thread,
 * after start. */
void rpc_server_metrics(const struct rpc_server *srv,
                        void (*fn)(const struct rpc_method_metrics *m,
                                   void *ctx),
                        void *ctx);

/* rpc_metrics_time_handling turns the timing of each call and stream for
 * grpc_server_handling_seconds on or off (off by default: two clock reads
 * and a histogram per call that only --metrics extensive shows, as etcd
 * turns go-grpc-prometheus' handling-time histogram on only then).
 * Process-wide, as that histogram; any thread. */
void rpc_metrics_time_handling(bool on);

/* rpc_server_bytes: the gRPC message bytes (without their 5-byte
 * prefixes, as etcd's codec counts them) srv received and queued for
 * sending since start (etcd's
 * etcd_network_client_grpc_{received,sent}_bytes_total).  Any thread. */
void rpc_server_bytes(const struct rpc_server *srv, uint64_t *received_out,
                      uint64_t *sent_out);

/* --- server (owner thread only) --- */

/* rpc_server_create validates cfg and builds an unstarted server in
 * *srv_out.  Errors: ERR_INVAL (bad URL or limits, a TLS URL without TLS
 * material, half of a cert/key pair, verify_clients without a CA),
 * ERR_NOMEM. */
int rpc_server_create(const struct rpc_server_config *cfg,
                      struct rpc_server **srv_out);

/* rpc_server_register_unary routes the full method path (copied) to fn.
 * Before rpc_server_start only.  Errors: ERR_EXIST, ERR_INVAL, ERR_NOMEM. */
int rpc_server_register_unary(struct rpc_server *srv, const char *path,
                              rpc_unary_fn fn, void *ctx);

/* rpc_server_register_stream routes path to the stream callbacks; ops must
 * outlive the server.  Same rules and errors as register_unary. */
int rpc_server_register_stream(struct rpc_server *srv, const char *path,
                               const struct rpc_stream_ops *ops, void *ctx);

/* A gate every unary call passes before its handler (etcd's interceptors):
 * return true to let it through, or false with a status code and a static
 * message to refuse it.  Runs on the loop; must not block. */
typedef bool (*rpc_unary_gate_fn)(void *ctx, const char *method,
                                  const uint8_t *req, size_t req_len,
                                  grpc_status_code *code_out,
                                  const char **msg_out);

/* rpc_server_set_gate installs gate (NULL: none).  Before start only. */
void rpc_server_set_gate(struct rpc_server *srv, rpc_unary_gate_fn gate,
                         void *ctx);

/* rpc_server_start binds every URL and starts the event loops.  Errors: ERR_IO (a URL could not be bound), ERR_NOMEM.  On
 * error the server must still be closed with rpc_server_close. */
int rpc_server_start(struct rpc_server *srv);

/* rpc_server_port returns the port bound for urls[i] (after start), or 0
 * (unix sockets, unbound). */
int rpc_server_port(const struct rpc_server *srv, size_t i);

/* rpc_server_stop starts shutdown without blocking: listeners close and all
 * calls get cancelled.  Idempotent. */
void rpc_server_stop(struct rpc_server *srv);

/* rpc_server_close stops the server if needed, waits for every call and
 * stream to be answered/released, joins the threads and frees srv. */
void rpc_server_close(struct rpc_server *srv);

/* --- HTTP requests ---
 *
 * A server with an HTTP handler serves HTTP beside gRPC on the same
 * listeners, as etcd does: a connection whose first bytes are not the
 * HTTP/2 preface (or whose TLS ALPN is "http/1.1") speaks HTTP/1.x (h1.c:
 * keep-alive, pipelined requests answered in order, a head within 64 KiB
 * and 10 s, bodies up to the receive limit), and an HTTP/2 request whose
 * content-type is not application/grpc is an HTTP request too (curl
 * --http2).  The handler gets it as a call (request bytes: its body;
 * rpc_call_metadata gives ":method", ":path" and the headers, names in
 * lower case) and answers it once with rpc_call_reply_http, now or later
 * from any thread, as a unary call. */
typedef void (*rpc_http_fn)(struct rpc_call *call, const uint8_t *body,
                            size_t body_len, void *ctx);

/* etcd's access rules for the HTTP requests of a server (its
 * accessController: --cors, --host-whitelist), as NULL-ended lists of
 * strings that outlive the server.
 * - cors: NULL: no CORS headers.  A "*" entry: every answer carries the
 *   Access-Control-Allow-* headers with origin "*"; else an answer to a
 *   request whose Origin header is listed carries them with that origin.
 * - hosts: NULL or a "*" entry: every host.  Else a plaintext request
 *   whose Host (HTTP/2: :authority) without its port is not listed is
 *   refused 421 with etcd's text and a warning (DNS rebinding,
 *   CVE-2018-5702); requests over TLS are not checked, as etcd's. */
struct rpc_http_access {
    const char *const *cors;
    const char *const *hosts;
};

/* rpc_server_set_http installs fn (NULL: HTTP/2 gRPC only) with access
 * (NULL: no CORS headers, every host; copied).  Before start only. */
void rpc_server_set_http(struct rpc_server *srv, rpc_http_fn fn, void *ctx,
                         const struct rpc_http_access *access);

/* rpc_server_set_http_only makes a server with an HTTP handler serve
 * HTTP only, as etcd 3.5's --listen-client-http-urls listeners (cmux
 * with only its HTTP/1 matcher; Go's net/http over TLS): every HTTP/2
 * request goes to the handler whatever its content-type (a gRPC call
 * gets the handler's 404), and a plaintext connection that opens with
 * the HTTP/2 preface is closed at once, unanswered (etcd serves no h2c
 * there).  Over TLS, ALPN h2 is served as HTTP.  Before start only.
 *
 * A server WITHOUT an HTTP handler is gRPC only, as grpc-go's server
 * (etcd 3.5's --listen-client-urls once HTTP has listeners of its own):
 * HTTP/1.x bytes get the server's SETTINGS and the connection closes at
 * the bad preface (over TLS, ALPN offers "h2" only: an http/1.1 client is
 * let in without ALPN, as Go's), and an HTTP/2 request whose content-type is not
 * application/grpc* is answered at once with :status 415, grpc-status 3
 * and "invalid gRPC request content-type \"<its type>\"". */
void rpc_server_set_http_only(struct rpc_server *srv);

/* rpc_server_set_count_in: srv's HTTP requests counted with
 * rpc_call_count_as / rpc_stream_count_as count in grpc's methods (an
 * HTTP-only listener's gateway calls show in the gRPC listener's
 * grpc_server_* series, as etcd 3.5's gateway dials its gRPC listener);
 * grpc must outlive srv.  Before start only. */
void rpc_server_set_count_in(struct rpc_server *srv,
                             const struct rpc_server *grpc);

/* rpc_server_set_http_limit: at most limit HTTP requests whose path
 * starts with one of prefixes (a NULL-ended array that outlives srv) are
 * served at once, answers that stay open included; the others wait, in
 * arrival order, until one ends or their client leaves (etcd's gateway
 * is one gRPC connection to its own server, so --max-concurrent-streams
 * bounds its calls and streams together).  0: no limit.  Before start. */
void rpc_server_set_http_limit(struct rpc_server *srv, uint32_t limit,
                               const char *const *prefixes);

/* Extra headers of an HTTP answer. */
#define RPC_HTTP_NOSNIFF 1u   /* X-Content-Type-Options: nosniff */
#define RPC_HTTP_ALLOW_GET 2u /* Allow: GET (a 405) */
/* Grpc-Metadata-Content-Type: application/grpc (etcd's gateway passes the
 * gRPC answer's content-type on as this header) */
#define RPC_HTTP_GRPC_META 4u

/* rpc_call_reply_http answers an HTTP request with status, the content
 * type ctype (a static string, or NULL), flags (RPC_HTTP_*) and len body
 * bytes (copied).  A HEAD request gets the head only. */
void rpc_call_reply_http(struct rpc_call *call, int status,
                         const char *ctype, unsigned flags, const void *body,
                         size_t len);

/* rpc_call_count_as counts an HTTP request as a call of the registered
 * gRPC method method_path ("/etcdserverpb.KV/Range") in the grpc_server_*
 * series (rpc_server_metrics): etcd's gateway is a gRPC client of its own
 * server, so its requests show there.  Started and one message received
 * now; at the answer, handled with the code rpc_call_count_code gave (OK
 * if none) and, if OK, one message sent.  A path not registered counts
 * nothing.  Once per call, on the handler's thread before the answer. */
void rpc_call_count_as(struct rpc_call *call, const char *method_path);

/* rpc_call_count_code: the gRPC code a counted HTTP call ends with (before
 * its rpc_call_reply_http). */
void rpc_call_count_code(struct rpc_call *call, grpc_status_code code);

/* rpc_stream_count_as counts an HTTP answer that stays open
 * (rpc_call_http_stream) as a call of the registered gRPC method
 * method_path in grpc_server_*, as etcd's gateway's streams show there:
 * started now; rpc_stream_count_msg(s, false) per request message it
 * takes, (s, true) per message it sends; handled when it ends, Canceled
 * if its client went away, else the code rpc_stream_count_code gave (OK
 * if none).  A path not registered counts nothing.  Once, right after
 * rpc_call_http_stream, before the stream is handed to another thread. */
void rpc_stream_count_as(struct rpc_stream *s, const char *method_path);
void rpc_stream_count_msg(struct rpc_stream *s, bool sent);
void rpc_stream_count_code(struct rpc_stream *s, grpc_status_code code);

/* --- HTTP answers that stay open (h1_stream.c, h2_stream.c) ---
 *
 * An HTTP request (HTTP/1.x or HTTP/2, plain or TLS) may be answered by a
 * stream instead
 * of one rpc_call_reply_http: the etcd gateway's /v3/watch and the other
 * streams write newline-delimited JSON for as long as they run, and
 * /v3/lock/lock waits.  rpc_call_http_stream turns the call into a struct
 * rpc_stream that the caller owns (rpc_stream_release, once): its bytes
 * go out in request order (after the answers of earlier pipelined
 * requests, before later ones) as the chunks of a chunked answer, or as
 * one Content-Length answer (head.whole); to an HTTP/1.0 request, as
 * they are until the connection closes (no chunks in 1.0); on HTTP/2, as
 * DATA frames within the client's flow-control window, END_STREAM at the
 * finish.  The send queue is the gRPC
 * streams' (stream_queue messages plus RPC_STREAM_CTRL_RESERVE for ctrl
 * sends; ERR_FULL past it) and at most 4 MiB of queued bytes (but one
 * message, and ctrl sends), and the connection holds at most 1 MiB of
 * unsent answer bytes before it stops taking from that queue: a client
 * that does not read holds a bounded amount.  rpc_stream_finish ends the
 * answer (code and msg are ignored: the owner writes its own error body
 * first) and lets the connection go on with its next request.
 *
 * The client-gone signal: on_close(cancelled=true) runs on the loop when
 * the connection ends before the answer did (the client closed its side
 * or reset (RST_STREAM on HTTP/2), a write failed, the server stops);
 * cancelled=false once the
 * finished answer is written into the connection's buffer.  Exactly once
 * either way, and rpc_stream_send_http/finish return ERR_CLOSED after.
 *
 * rpc_call_http_stream must be called by the HTTP handler on the loop
 * before it returns; the request body it was given stays valid until it
 * returns.  Errors: ERR_NOMEM (the call is still the caller's to
 * answer).  On success the call is gone. */
struct rpc_http_head {
    int status;        /* the answer's status */
    const char *ctype; /* content type (static), or NULL */
    unsigned flags;    /* RPC_HTTP_* */
    bool whole;        /* one body with Content-Length: the first send
                          carries all of it, then finish */
};
typedef void (*rpc_http_close_fn)(struct rpc_stream *stream, bool cancelled,
                                  void *ctx);
int rpc_call_http_stream(struct rpc_call *call, rpc_http_close_fn on_close,
                         void *ctx, struct rpc_stream **stream_out);

/* --- HTTP request bodies that stay open ---
 *
 * etcd's gateway reads the body of /v3/watch and /v3/lease/keepalive as a
 * sequence of JSON requests while it streams the answer, so a client may
 * add and cancel watches on an open request.  A request on one of the
 * paths rpc_server_set_http_open_paths lists (exact, the query cut off)
 * whose body has not ended (HTTP/1.1 chunked, HTTP/2 without END_STREAM)
 * is dispatched at once with the body bytes in so far
 * (rpc_call_http_body_open is then true); the handler turns it into a
 * stream (rpc_call_http_stream) and calls rpc_stream_http_body before it
 * returns to get the rest: fn runs on the loop with each piece, then once
 * with end set (err: Go's text of a chunked framing error, else NULL).
 * Pieces are not buffered for the owner: it takes them during the call
 * (the socket is read as fast as the owner takes them).  A call answered
 * without a stream while its body is open closes the HTTP/1.1
 * connection after its answer (its body is not read); on HTTP/2 the rest
 * of the stream's DATA is dropped.  Other paths and other requests get
 * their whole body, chunked ones decoded (bounded by the receive limit,
 * else 413), within the slow-client timeout; a framing error gives the
 * handler what came before it and rpc_call_http_body_error.  paths: a
 * NULL-ended array that outlives srv; before start. */
typedef void (*rpc_http_body_fn)(struct rpc_stream *stream, const uint8_t *p,
                                 size_t n, bool end, const char *err,
                                 void *ctx);
void rpc_server_set_http_open_paths(struct rpc_server *srv,
                                    const char *const *paths);
bool rpc_call_http_body_open(const struct rpc_call *call);
const char *rpc_call_http_body_error(const struct rpc_call *call);
/* rpc_stream_http_body: fn (with the stream's ctx) gets the rest of the
 * open body of the request stream was made from. */
void rpc_stream_http_body(struct rpc_stream *stream, rpc_http_body_fn fn);

/* rpc_stream_send_http queues n bytes (copied; n may be 0) of an HTTP
 * stream's answer; head (copied) is the answer's head when none was
 * queued yet, else ignored: the first send decides it.  ctrl may use the
 * control reserve (as rpc_stream_send_ctrl).  Any thread.  Errors:
 * ERR_FULL, ERR_CLOSED, ERR_NOMEM, ERR_INVAL (not an HTTP stream, or a
 * second body of a whole answer). */
int rpc_stream_send_http(struct rpc_stream *stream,
                         const struct rpc_http_head *head, const void *p,
                         size_t n, bool ctrl);

/* --- unary calls (any thread that owns the call) --- */

/* rpc_call_reply packs resp and sends it with status OK. */
void rpc_call_reply(struct rpc_call *call, const ProtobufCMessage *resp);

/* rpc_call_reply_bytes sends len already serialized bytes with status OK;
 * the bytes are copied. */
void rpc_call_reply_bytes(struct rpc_call *call, const uint8_t *bytes,
                          size_t len);

/* rpc_call_reply_error ends the call with status code (not OK) and message
 * msg (copied; may be NULL). */
void rpc_call_reply_error(struct rpc_call *call, grpc_status_code code,
                          const char *msg);

/* rpc_call_metadata returns the value of request metadata key (lower case,
 * e.g. "token", "hasleader") and its length in *len_out, or NULL.  Not
 * NUL-terminated; valid until the call is answered. */
const char *rpc_call_metadata(const struct rpc_call *call, const char *key,
                              size_t *len_out);

/* rpc_call_peer_cn: the CN of the connection's verified client
 * certificate when the server has tls_cn_identity, else NULL
 * (NUL-terminated; valid until the call is answered). */
const char *rpc_call_peer_cn(const struct rpc_call *call);

/* rpc_call_method returns the full method path ("/etcdserverpb.KV/Range"),
 * static for the server's lifetime. */
const char *rpc_call_method(const struct rpc_call *call);

/* rpc_call_deadline_ns returns the client's deadline on CLOCK_MONOTONIC in
 * nanoseconds, or INT64_MAX when the client set none. */
int64_t rpc_call_deadline_ns(const struct rpc_call *call);

/* --- streams --- */

/* rpc_stream_send queues msg (packed now, so it may be freed on return).
 * Any thread.  Errors: ERR_FULL (the send queue is at its limit; nothing
 * queued - the caller decides, e.g. etcd cancels a slow watcher),
 * ERR_CLOSED (stream ended or finishing), ERR_NOMEM. */
int rpc_stream_send(struct rpc_stream *stream, const ProtobufCMessage *msg);

/* rpc_stream_send_bytes queues len already serialized message bytes (msg,
 * copied, so it may be freed on return; NULL when len is 0) exactly as
 * rpc_stream_send queues a packed message: the same queue, order, limits
 * and counting (msg_sent, rpc_server_bytes).  For a module that passes
 * messages on without decoding them (a proxy).  Any thread.  Errors:
 * ERR_FULL (nothing queued; see ops->on_writable), ERR_CLOSED, ERR_NOMEM,
 * ERR_INVAL (len over 4 GiB - 1, the gRPC frame's limit). */
int rpc_stream_send_bytes(struct rpc_stream *stream, const uint8_t *msg,
                          size_t len);

/* rpc_stream_send_ctrl queues msg as rpc_stream_send does, in the same
 * order, but may also take one of RPC_STREAM_CTRL_RESERVE slots past the
 * send queue's limit: for the few answers a service must never drop
 * (etcd's watch created/canceled).  Errors: ERR_FULL (the reserve is used
 * up too), ERR_CLOSED, ERR_NOMEM, ERR_INVAL. */
int rpc_stream_send_ctrl(struct rpc_stream *stream,
                         const ProtobufCMessage *msg);

/* rpc_stream_background marks stream as background traffic (a Watch): its
 * messages yield the connection to the other calls on it, keeping a
 * bounded number of bytes unacknowledged by the client (stream.c
 * "background streams"), and its send queue is bounded in bytes too
 * (RPC_BG_QUEUE_BYTES, 1 MiB: rpc_stream_send answers ERR_FULL past it).
 * Call from on_open (the stream's loop), before any send. */
void rpc_stream_background(struct rpc_stream *stream);

/* rpc_stream_finish ends the stream with code/msg once the queued messages
 * are sent.  Any thread.  Errors: ERR_CLOSED (already ended/finishing). */
int rpc_stream_finish(struct rpc_stream *stream, grpc_status_code code,
                      const char *msg);

/* rpc_stream_metadata, rpc_stream_method: as for calls; valid until
 * release. */
const char *rpc_stream_metadata(const struct rpc_stream *stream,
                                const char *key, size_t *len_out);
const char *rpc_stream_method(const struct rpc_stream *stream);
const char *rpc_stream_peer_cn(const struct rpc_stream *stream);

/* rpc_stream_data_set/get: one pointer for the owner (e.g. its watcher
 * set); the runtime never touches it. */
void rpc_stream_data_set(struct rpc_stream *stream, void *data);
void *rpc_stream_data_get(const struct rpc_stream *stream);

/* rpc_stream_release drops the owner's reference taken at on_open; the
 * stream is freed once the runtime is done with it too.  Any thread, once. */
void rpc_stream_release(struct rpc_stream *stream);

#endif
