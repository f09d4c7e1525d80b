/*
 * conn.c - one client connection: its socket (plain or TLS), its
 * nghttp2 server session, and the session callbacks that turn HTTP/2
 * streams into calls (call.c) and streams (stream.c).
 *
 * Everything here runs on the connection's loop.  Reads are fed to
 * nghttp2 as they come; frames nghttp2 wants to send are gathered into one
 * buffer and written with one system call when the loop flushes.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define OUT_GATHER (64 * 1024)      /* frames gathered before a write */
#define OUT_KEEP (128 * 1024)       /* a larger buffer is freed once empty */
#define READS_PER_EVENT 8           /* fairness between connections */
#define STREAM_WINDOW (1 << 20)     /* SETTINGS_INITIAL_WINDOW_SIZE */
#define CONN_WINDOW (16 << 20)      /* connection receive window */
#define HDRS_MAX (64 * 1024)        /* request header bytes kept */

void *rpc__buf_grow(void *buf, size_t *cap, size_t need, size_t first)
{
    assert(cap != NULL && first > 0);
    if (need <= *cap)
        return buf;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *p = mem_realloc(buf, n);
    if (p != NULL)
        *cap = n;
    return p;
}

/* --- request headers --- */

/* Each header is stored as its two lengths (uint32_t, native order), the
 * name, a NUL, the value and a NUL: names and values may hold NUL bytes
 * themselves (nghttp2's HTTP checks are off, see rpc__conn_new). */
int rpc__hdrs_add(struct rpc__hdrs *h, const uint8_t *name, size_t name_n,
                  const uint8_t *value, size_t value_n)
{
    size_t need = h->n + 8 + name_n + value_n + 2;
    if (need > HDRS_MAX)
        return ERR_FULL;
    char *p = rpc__buf_grow(h->buf, &h->cap, need, 256);
    if (p == NULL)
        return ERR_NOMEM;
    h->buf = p;
    uint32_t lens[2] = {(uint32_t)name_n, (uint32_t)value_n};
    char *o = h->buf + h->n;
    memcpy(o, lens, 8);
    memcpy(o + 8, name, name_n);
    o[8 + name_n] = '\0';
    memcpy(o + 9 + name_n, value, value_n);
    o[9 + name_n + value_n] = '\0';
    h->n = need;
    return 0;
}

const char *rpc__hdrs_find(const struct rpc__hdrs *h, const char *key,
                           size_t *len_out)
{
    size_t key_n = strlen(key), off = 0;
    while (off < h->n) {
        uint32_t lens[2];
        memcpy(lens, h->buf + off, 8);
        const char *k = h->buf + off + 8;
        if (lens[0] == key_n && memcmp(k, key, key_n) == 0) {
            if (len_out != NULL)
                *len_out = lens[1];
            return k + lens[0] + 1;
        }
        off += 8 + (size_t)lens[0] + lens[1] + 2;
    }
    return NULL;
}

/* rpc__grpc_timeout_ns turns a grpc-timeout value ("100m", "5S") into a
 * CLOCK_MONOTONIC deadline, INT64_MAX when absent or unreadable. */
int64_t rpc__grpc_timeout_ns(const uint8_t *v, size_t n)
{
    if (n < 2 || n > 9)
        return INT64_MAX;
    int64_t x = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return INT64_MAX;
        x = x * 10 + (v[i] - '0');
    }
    int64_t unit;
    switch (v[n - 1]) {
    case 'H': unit = 3600000000000LL; break;
    case 'M': unit = 60000000000LL; break;
    case 'S': unit = 1000000000LL; break;
    case 'm': unit = 1000000LL; break;
    case 'u': unit = 1000LL; break;
    case 'n': unit = 1LL; break;
    default: return INT64_MAX;
    }
    if (x > INT64_MAX / unit / 2)
        return INT64_MAX;
    return rpc__now_ns() + x * unit;
}

void rpc__too_large_msg(char *buf, size_t cap, size_t n, size_t max)
{
    snprintf(buf, cap, "grpc: received message larger than max (%zu vs. %zu)",
             n, max);
}

#define NV(n, v, vl, fl)                                                    \
    ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl),     \
                  NGHTTP2_NV_FLAG_NO_COPY_NAME | (fl)})

/* rpc__status_nv fills nv (room for 2) with grpc-status and, when msg is
 * not empty, grpc-message percent-encoded as gRPC wants; the buffers back
 * the values until nghttp2 copied them.  Returns the count. */
size_t rpc__status_nv(nghttp2_nv *nv, grpc_status_code code,
                      const char *msg, char *code_buf, char *msg_buf,
                      size_t msg_cap)
{
    int cn = snprintf(code_buf, 12, "%d", (int)code);
    nv[0] = NV("grpc-status", code_buf, (size_t)cn, 0);
    if (msg == NULL || msg[0] == '\0')
        return 1;
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)msg;
         *p != '\0' && o + 3 < msg_cap; p++) {
        if (*p < 0x20 || *p > 0x7e || *p == '%') {
            msg_buf[o++] = '%';
            msg_buf[o++] = hex[*p >> 4];
            msg_buf[o++] = hex[*p & 15];
        } else {
            msg_buf[o++] = (char)*p;
        }
    }
    nv[1] = NV("grpc-message", msg_buf, o, 0);
    return 2;
}

/* --- nghttp2 callbacks --- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f,
                            void *ud)
{
    struct rpc__conn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS ||
        f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct rpc_call *call = rpc__call_new(c, f->hd.stream_id);
    if (call == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM */
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, &call->item);
    return 0;
}

const struct rpc__method *rpc__method_find(const struct rpc_server *srv,
                                           const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < srv->methods_n; i++) {
        const struct rpc__method *m = &srv->methods[i];
        if (m->path_n == n && memcmp(m->path, p, n) == 0)
            return m;
    }
    return NULL;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f,
                     const uint8_t *name, size_t name_n, const uint8_t *value,
                     size_t value_n, uint8_t flags, void *ud)
{
    struct rpc__conn *c = ud;
    (void)flags;
    if (f->hd.type != NGHTTP2_HEADERS ||
        f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* client trailers: gRPC clients send none */
    struct rpc__item *it =
        nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (it == NULL || it->kind != RPC__KIND_CALL)
        return 0;
    struct rpc_call *call = rpc__container_of(it, struct rpc_call, item);
    if (name_n == 5 && memcmp(name, ":path", 5) == 0)
        call->method = rpc__method_find(c->loop->srv, value, value_n);
    else if (name_n == 12 && memcmp(name, "grpc-timeout", 12) == 0)
        call->deadline_ns = rpc__grpc_timeout_ns(value, value_n);
    else if (name_n == 13 && memcmp(name, "grpc-encoding", 13) == 0)
        call->bad_encoding =
            !(value_n == 8 && memcmp(value, "identity", 8) == 0);
    else if (name_n == 12 && memcmp(name, "content-type", 12) == 0)
        call->grpc_ct = value_n >= 16 &&
                        memcmp(value, "application/grpc", 16) == 0;
    if (rpc__hdrs_add(&call->hdrs, name, name_n, value, value_n) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

/*
 * Lazy answers.  grpc-go's client sends a PING (its bandwidth probe, with
 * a connection WINDOW_UPDATE before it) whenever DATA arrives and no probe
 * is out: after nearly every reply, and after every burst of watch events
 * on every connection.  Answered at once (nghttp2's automatic ACK), each
 * cost a write here and a wake-up and a read in the client, and let the
 * client probe again at the next reply: at 1000 puts/s with watchers on
 * 10 connections, 16 writes per put.  Now a PING's ACK is held:
 * it goes out with the next frames written on the connection once
 * RPC__PING_RIDE_NS have passed, else on its own at RPC__LAZY_NS, so a
 * client probes at most about once per RPC__PING_RIDE_NS per connection.
 * The hold is 100 ms (it was 5 ms until session 29): grpc-go grows its
 * receive windows (65 535 bytes at first) only when a probe's round trip
 * saw at least 2/3 of the window arrive, and a watch connection getting
 * 3.5 MB/s saw 17 KB in 5 ms, so it kept the small windows and sent a
 * WINDOW_UPDATE per 16 KB read.  Held 100 ms, its windows grow after the
 * first probes: with 100 watchers on 10 connections at 1000 puts/s the
 * member's reads fell from 3.3 to 1.8 per put and its CPU by 7 %, and
 * 100 unary clients put 8-10 % faster (docs/BENCHMARKS.md session 29).
 * HTTP/2 asks (SHOULD) that PING answers go before other frames: they
 * do, in the write that carries them; grpc-go and the gRPC core only
 * time their probes with them, their keepalive timeouts are seconds
 * (etcdctl's 6 s, grpc-go's and the core's 20 s), and grpc-go counts any
 * frame read as the peer being alive.
 * A read made of such frames alone (a PING, a PING or SETTINGS ACK, a
 * connection WINDOW_UPDATE while the send window was not short) needs no
 * write now: the connection goes on the loop's lazy list, written at its
 * due time if nothing else wrote it before.  Any other frame, a partial
 * one, or an error is answered at once, as before.
 */
#define RPC__LAZY_NS 110000000       /* 110 ms: a held ACK's latest */
#define RPC__PING_RIDE_NS 100000000  /* 100 ms: it rides with data after */
#define RPC__LAZY_WIN_MIN (16 * 1024) /* below it, a WINDOW_UPDATE is urgent */

static bool lazy_frame(const struct rpc__conn *c, const nghttp2_frame *f)
{
    switch (f->hd.type) {
    case NGHTTP2_PING:
        return true;
    case NGHTTP2_SETTINGS:
        return (f->hd.flags & NGHTTP2_FLAG_ACK) != 0;
    case NGHTTP2_WINDOW_UPDATE:
        return f->hd.stream_id == 0 && c->rx_win0 >= RPC__LAZY_WIN_MIN;
    default:
        return false;
    }
}

/* ping_ack_send submits the held ACK (the caller writes it); false when
 * nghttp2 refuses it: more ACKs queued than a client that reads would
 * leave (a PING flood), or out of memory. */
static bool ping_ack_send(struct rpc__conn *c)
{
    c->ping_held = false;
    return nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_ACK, c->ping_opaque) == 0;
}

/* ping_ack_ready: the held ACK goes out with this write (see above). */
static void ping_ack_ready(struct rpc__conn *c, bool due)
{
    if (c->ping_held && !c->dead && c->ng != NULL &&
        (due || rpc__now_ns() >= c->ping_ride_ns) && !ping_ack_send(c))
        c->close_after_flush = true; /* one held ACK: not a flood */
}

static void lazy_add(struct rpc__conn *c)
{
    if (c->lazy || c->dead)
        return;
    struct rpc__loop *l = c->loop;
    c->lazy = true;
    c->refs++; /* the lazy list's */
    c->lazy_due_ns = rpc__now_ns() + RPC__LAZY_NS;
    c->lazy_next = NULL;
    if (l->lazy_tail != NULL)
        l->lazy_tail->lazy_next = c;
    else
        l->lazy = c;
    l->lazy_tail = c;
}

int rpc__conn_lazy_timeout_ms(const struct rpc__loop *l, int ms)
{
    if (l->lazy == NULL)
        return ms;
    int64_t left = l->lazy->lazy_due_ns - rpc__now_ns();
    int lazy_ms = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
    return ms < 0 || lazy_ms < ms ? lazy_ms : ms;
}

void rpc__conn_lazy_due(struct rpc__loop *l, bool all)
{
    if (l->lazy == NULL)
        return;
    int64_t now = all ? INT64_MAX : rpc__now_ns();
    while (l->lazy != NULL && l->lazy->lazy_due_ns <= now) {
        struct rpc__conn *c = l->lazy;
        l->lazy = c->lazy_next;
        if (l->lazy == NULL)
            l->lazy_tail = NULL;
        c->lazy = false;
        ping_ack_ready(c, true);
        rpc__conn_mark_dirty(c); /* nothing to write if it was flushed */
        rpc__conn_unref(c);
    }
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f,
                         void *ud)
{
    struct rpc__conn *c = ud;
    if (!c->preface_ok) {
        /* nghttp2 checked the client magic; this is its first frame. */
        c->preface_ok = true;
        assert(c->loop->unready_n > 0);
        c->loop->unready_n--;
    }
    if (lazy_frame(c, f))
        c->rx_lazy_bytes += RPC__H2_FRAME_HDLEN + f->hd.length;
    if (f->hd.type == NGHTTP2_PING &&
        (f->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
        rpc__keepalive_ping(c);
        if (c->ping_held) {
            /* A second PING before the first's ACK left: answer the
             * first now (every PING gets its own ACK); a flood of them
             * that the client does not read ends the connection. */
            if (!ping_ack_send(c))
                return NGHTTP2_ERR_CALLBACK_FAILURE;
            c->rx_lazy_bytes = 0; /* a write is due */
        }
        memcpy(c->ping_opaque, f->ping.opaque_data, sizeof c->ping_opaque);
        c->ping_held = true;
        c->ping_ride_ns = rpc__now_ns() + RPC__PING_RIDE_NS;
        lazy_add(c);
    }
    if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK))
        rpc__conn_bg_probe_ack(c, f->ping.opaque_data);
    if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK))
        rpc__conn_bg_settings_acked(c);
    if (f->hd.type == NGHTTP2_WINDOW_UPDATE && f->hd.stream_id == 0)
        rpc__conn_bg_update(c, f->window_update.window_size_increment);
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        return 0;
    struct rpc__item *it =
        nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (it == NULL)
        return 0;
    bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (it->kind == RPC__KIND_STREAM) {
        if (end)
            rpc__stream_half_closed(
                rpc__container_of(it, struct rpc_stream, item));
        return 0;
    }
    struct rpc_call *call = rpc__container_of(it, struct rpc_call, item);
    if (end && call->body_open && !call->body_ended &&
        !rpc__http_body_more(call, NULL, 0, true, NULL))
        return 0;
    if (call->state != RPC__CALL_READING)
        return 0;
    bool req_headers = f->hd.type == NGHTTP2_HEADERS &&
                       f->headers.cat == NGHTTP2_HCAT_REQUEST;
    struct rpc_server *srv = c->loop->srv;
    if (req_headers && !call->grpc_ct && srv->http == NULL) {
        /* gRPC only: grpc-go answers at once, whatever the path */
        call->bad_ct = true;
        rpc__call_ready(call);
        return 0;
    }
    if (req_headers && (!call->grpc_ct || srv->http_only) &&
        srv->http != NULL) {
        /* Not gRPC (curl --http2): an HTTP request, as etcd routes by
         * content-type; it is dispatched once its body is in. */
        call->http = true;
        /* a body that may stay open (a gateway watch): dispatched now,
         * the rest follows (rpc.h "HTTP request bodies that stay open") */
        call->body_open = !end && rpc__http_open_path(srv, call);
        if (end || call->body_open)
            rpc__call_ready(call);
        return 0;
    }
    if (req_headers && call->method != NULL &&
        call->method->kind == RPC__METHOD_STREAM) {
        struct rpc_stream *s = rpc__stream_open(call); /* frees call */
        if (s == NULL)
            return nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE,
                                             f->hd.stream_id,
                                             NGHTTP2_INTERNAL_ERROR) == 0
                       ? 0
                       : NGHTTP2_ERR_CALLBACK_FAILURE;
        if (end)
            rpc__stream_half_closed(s);
        return 0;
    }
    /* Unknown methods are answered at once, as grpc-go does. */
    if (end || (req_headers && call->method == NULL))
        rpc__call_ready(call);
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags,
                         int32_t stream_id, const uint8_t *data, size_t len,
                         void *ud)
{
    (void)flags;
    (void)ud;
    struct rpc__item *it = nghttp2_session_get_stream_user_data(ng,
                                                                stream_id);
    if (it == NULL)
        return 0;
    if (it->kind == RPC__KIND_STREAM)
        rpc__stream_data(rpc__container_of(it, struct rpc_stream, item),
                         data, len);
    else
        rpc__call_data(rpc__container_of(it, struct rpc_call, item), data,
                       len);
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f,
                         void *ud)
{
    struct rpc__conn *c = ud;
    if (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA)
        c->reset_strikes = true; /* grpc-go: writes reset ping strikes */
    if (f->hd.type == NGHTTP2_GOAWAY)
        log_debug("rpc", "GOAWAY sent on fd %d: error code %u, last stream "
                  "%d, \"%.*s\"", c->fd, f->goaway.error_code,
                  f->goaway.last_stream_id,
                  (int)(f->goaway.opaque_data_len > 200
                            ? 200
                            : f->goaway.opaque_data_len),
                  f->goaway.opaque_data != NULL
                      ? (const char *)f->goaway.opaque_data
                      : "");
    if (f->hd.type == NGHTTP2_SETTINGS &&
        (f->hd.flags & NGHTTP2_FLAG_ACK) == 0)
        c->bg_settings_ns = rpc__now_ns(); /* a round trip: stream.c */
    /* END_STREAM ends a stream's answer: on the trailers of a gRPC
     * stream, on the last DATA (or HEADERS) of an HTTP one. */
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0)
        return 0;
    struct rpc__item *it =
        nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (it != NULL && it->kind == RPC__KIND_STREAM)
        rpc__stream_trailers_sent(
            rpc__container_of(it, struct rpc_stream, item));
    /* Answered before the request ended (an early refusal, a stream's
     * status while the client still sends): RST_STREAM NO_ERROR asks the
     * client to stop sending (RFC 9113 8.1), as grpc-go does; without it
     * a client that stopped sending at the answer (curl) waits on. */
    if (nghttp2_session_get_stream_remote_close(ng, f->hd.stream_id) == 0)
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                  NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t stream_id,
                           uint32_t error_code, void *ud)
{
    (void)error_code;
    (void)ud;
    struct rpc__item *it = nghttp2_session_get_stream_user_data(ng,
                                                                stream_id);
    if (it == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, stream_id, NULL);
    if (it->kind == RPC__KIND_STREAM)
        rpc__stream_closed(rpc__container_of(it, struct rpc_stream, item));
    else
        rpc__call_closed(rpc__container_of(it, struct rpc_call, item));
    return 0;
}

/* on_error: what nghttp2 found wrong in the client's frames (it answers
 * a connection error with a GOAWAY on its own), at debug level. */
static int on_error(nghttp2_session *ng, int lib_error_code, const char *msg,
                    size_t len, void *ud)
{
    (void)ng;
    const struct rpc__conn *c = ud;
    log_debug("rpc", "HTTP/2 error on fd %d: %.*s (%s)", c->fd, (int)len, msg,
              nghttp2_strerror(lib_error_code));
    return 0;
}

/* The callback table, made once. */
static nghttp2_session_callbacks *cbs_table;

static void cbs_init(void)
{
    if (nghttp2_session_callbacks_new(&cbs_table) != 0)
        abort();
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs_table,
                                                            on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs_table, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs_table,
                                                         on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs_table,
                                                              on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs_table,
                                                         on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs_table,
                                                           on_stream_close);
    nghttp2_session_callbacks_set_error_callback2(cbs_table, on_error);
}

static const nghttp2_session_callbacks *rpc_callbacks(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, cbs_init);
    return cbs_table;
}

/* --- the connection --- */

struct rpc__conn *rpc__conn_new(struct rpc__loop *l, int fd, bool tls)
{
    struct rpc__conn *c = mem_calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->item.kind = RPC__KIND_CONN;
    c->loop = l;
    c->fd = fd;
    c->refs = 1;
    c->born_ms = rpc__now_ms();
    c->last_read_ms = c->born_ms;
    c->bg_mark = NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE; /* granted so far */
    c->proto = l->srv->http != NULL ? RPC__PROTO_SNIFF : RPC__PROTO_H2;
    if (tls) {
        c->ssl = rpc__tls_ssl_new(l->srv);
        if (c->ssl == NULL || SSL_set_fd(c->ssl, fd) != 1)
            goto fail;
        SSL_set_accept_state(c->ssl);
        c->handshaking = true;
    }
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0)
        goto fail;
    nghttp2_option_set_peer_max_concurrent_streams(opt, UINT32_MAX);
    /* grpc-go sends ":authority: http://host:port" for endpoints given as
     * URLs, which nghttp2's HTTP checks refuse (RST_STREAM); the gRPC core
     * and grpc-go servers accept it, and gRPC needs none of those checks:
     * a request without a :path is answered "malformed method name". */
    nghttp2_option_set_no_http_messaging(opt, 1);
    /* nghttp2 keeps closed streams for its priority tree, as many as the
     * concurrent streams allowed (unbounded here, as etcd allows): 1M
     * puts on 10 connections grew the member by 270 MiB. */
    nghttp2_option_set_no_closed_streams(opt, 1);
    /* PING ACKs are sent here (see "Lazy answers"). */
    nghttp2_option_set_no_auto_ping_ack(opt, 1);
    int rv = nghttp2_session_server_new2(&c->ng, rpc_callbacks(), c,
                                         opt);
    nghttp2_option_del(opt);
    if (rv != 0)
        goto fail;
    const nghttp2_settings_entry set[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, l->srv->max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
    };
    if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, set, 2) != 0 ||
        nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0,
                                              CONN_WINDOW) != 0)
        goto fail;
    return c;
fail:
    if (c->ng != NULL)
        nghttp2_session_del(c->ng);
    if (c->ssl != NULL)
        SSL_free(c->ssl);
    mem_free(c);
    return NULL;
}

void rpc__conn_attach(struct rpc__conn *c)
{
    struct rpc__loop *l = c->loop;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    c->next = l->conns;
    if (l->conns != NULL)
        l->conns->prev = c;
    l->conns = c;
    l->unready_n++; /* until its preface (rpc__guard_tick) */
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        rpc__conn_kill(c);
        return;
    }
    rpc__conn_flush(c); /* the server's SETTINGS */
}

void rpc__conn_unref(struct rpc__conn *c)
{
    assert(c->refs > 0);
    if (--c->refs > 0)
        return;
    assert(c->dead && c->calls == NULL && c->streams == NULL);
    mem_free(c->peer_cn);
    mem_free(c->out);
    mem_free(c);
}

void rpc__conn_mark_dirty(struct rpc__conn *c)
{
    if (c->dirty || c->dead)
        return;
    c->dirty = true;
    c->refs++; /* the flush list's */
    c->dirty_next = c->loop->dirty;
    c->loop->dirty = c;
}

void rpc__conn_kill_at(struct rpc__conn *c, const char *fn, int line)
{
    if (c->dead)
        return;
    struct rpc__loop *l = c->loop;
    log_debug("rpc", "connection fd %d closed by %s:%d (%s)", c->fd, fn,
              line, c->preface_ok ? "after its preface" : "before a preface");
    c->dead = true;
    if (!c->preface_ok) {
        assert(l->unready_n > 0);
        l->unready_n--;
    }
    epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->refs++; /* held while the calls and streams let go */
    while (c->streams != NULL) {
        rpc__stream_closed(c->streams); /* unlinks it */
    }
    struct rpc_call *call = c->calls;
    while (call != NULL) {
        struct rpc_call *next = call->next;
        rpc__call_closed(call); /* may unlink and free call */
        call = next;
    }
    nghttp2_session_del(c->ng);
    c->ng = NULL;
    mem_free(c->h1_in);
    c->h1_in = NULL;
    c->h1_in_n = c->h1_in_cap = 0;
    if (c->ssl != NULL) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    close(c->fd);
    c->fd = -1;
    rpc__conn_unref(c); /* the one taken above */
    rpc__conn_unref(c); /* the loop's */
}

void rpc__conn_rearm(struct rpc__conn *c)
{
    if (c->dead)
        return;
    struct epoll_event ev = {
        .events = (c->rd_paused ? 0u : EPOLLIN | EPOLLRDHUP) |
                  (c->want_out ? EPOLLOUT : 0u),
        .data.ptr = c};
    epoll_ctl(c->loop->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void want_out(struct rpc__conn *c, bool on)
{
    if (c->want_out == on)
        return;
    c->want_out = on;
    rpc__conn_rearm(c);
}

/* sock_write writes what it can; false when the connection failed. */
static bool sock_write(struct rpc__conn *c)
{
    while (c->out_off < c->out_n) {
        size_t n = c->out_n - c->out_off;
        ssize_t w;
        if (c->ssl != NULL) {
            ERR_clear_error();
            int r = SSL_write(c->ssl, c->out + c->out_off,
                              n > INT32_MAX ? INT32_MAX : (int)n);
            if (r <= 0) {
                int e = SSL_get_error(c->ssl, r);
                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                    want_out(c, true);
                    return true;
                }
                return false;
            }
            w = r;
        } else {
            w = send(c->fd, c->out + c->out_off, n, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    want_out(c, true);
                    return true;
                }
                return false;
            }
        }
        c->out_off += (size_t)w;
    }
    c->out_n = c->out_off = 0;
    if (c->out_cap > OUT_KEEP) {
        mem_free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
    want_out(c, false);
    return true;
}

static bool gather(struct rpc__conn *c)
{
    if (c->proto != RPC__PROTO_H2)
        return true; /* H1 answers are put in c->out by h1.c */
    while (c->out_n < OUT_GATHER) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(c->ng, &d);
        if (n < 0)
            return false;
        if (n == 0)
            break;
        uint8_t *p = rpc__buf_grow(c->out, &c->out_cap,
                                   c->out_n + (size_t)n, 16384);
        if (p == NULL)
            return false;
        c->out = p;
        memcpy(c->out + c->out_n, d, (size_t)n);
        c->out_n += (size_t)n;
    }
    return true;
}

void rpc__conn_flush(struct rpc__conn *c)
{
    if (c->dead || c->handshaking)
        return;
    if (c->proto == RPC__PROTO_H1 && c->out_off < c->out_n && !c->want_out &&
        !sock_write(c)) {
        rpc__conn_kill(c); /* H1 answers are in c->out already (h1.c) */
        return;
    }
    if (c->proto == RPC__PROTO_H2)
        ping_ack_ready(c, false); /* rides with this write (above) */
    for (bool probed = false;;) {
        while (c->proto != RPC__PROTO_H1 && c->out_off == c->out_n) {
            if (!gather(c)) {
                rpc__conn_kill(c);
                return;
            }
            if (c->out_n == 0)
                break;
            if (!sock_write(c)) {
                rpc__conn_kill(c);
                return;
            }
        }
        /* A background stream deferred while gathering: the window probe
         * (stream.c "background streams") goes out with this flush. */
        if (probed || c->proto != RPC__PROTO_H2 || c->out_off != c->out_n ||
            !rpc__conn_bg_probe(c))
            break;
        probed = true;
    }
    if (c->out_off != c->out_n)
        return;
    if (c->proto == RPC__PROTO_H1)
        rpc__h1_written(c);
    else if (c->proto == RPC__PROTO_H2 &&
             ((!nghttp2_session_want_read(c->ng) &&
               !nghttp2_session_want_write(c->ng)) ||
              (c->close_after_flush && !nghttp2_session_want_write(c->ng))))
        rpc__conn_kill(c); /* GOAWAY exchanged, or a protocol error */
}

/* sock_read reads into the loop's buffer: bytes, 0 when nothing more is
 * there now, -1 on end of stream or error. */
static ssize_t sock_read(struct rpc__conn *c)
{
    uint8_t *buf = c->loop->rbuf;
    if (c->ssl != NULL) {
        ERR_clear_error();
        int r = SSL_read(c->ssl, buf, RPC__READ_BUF);
        if (r > 0)
            return r;
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ)
            return 0;
        if (e == SSL_ERROR_WANT_WRITE) {
            want_out(c, true);
            return 0;
        }
        return -1;
    }
    for (;;) {
        ssize_t r = recv(c->fd, buf, RPC__READ_BUF, 0);
        if (r > 0)
            return r;
        if (r == 0)
            return -1;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
}

/* h2_pass: kept bytes of the client's (h2_scan.c) into nghttp2; false
 * when the connection died. */
static bool h2_pass(void *ud, const uint8_t *p, size_t n)
{
    struct rpc__conn *c = ud;
    if (c->dead)
        return false;
    ssize_t used = nghttp2_session_mem_recv(c->ng, p, n);
    if (used < 0) {
        /* A fatal error (bad preface, a flood, a broken frame): the rest
         * of the bytes are out of frame alignment.  Send what nghttp2
         * queued (a GOAWAY, if any) and close. */
        log_debug("rpc", "closing a connection: %s",
                  nghttp2_strerror((int)used));
        c->refs++;
        rpc__conn_flush(c);
        rpc__conn_kill(c);
        rpc__conn_unref(c);
        return false;
    }
    c->rx_fed += n;
    return true;
}

bool rpc__h2_feed(struct rpc__conn *c, const uint8_t *p, size_t n)
{
    c->rx_lazy_bytes = 0;
    c->rx_fed = 0;
    c->rx_win0 = nghttp2_session_get_remote_window_size(c->ng);
    uint64_t dropped = c->h2_scan.dropped;
    if (!rpc__h2_scan(&c->h2_scan, p, n, h2_pass, c))
        return false;
    if (c->h2_scan.dropped != dropped)
        log_debug("rpc", "fd %d: %llu frame(s) for streams never opened "
                  "dropped (RST_STREAM or WINDOW_UPDATE; grpc-go ignores "
                  "them)", c->fd,
                  (unsigned long long)(c->h2_scan.dropped - dropped));
    if (c->rx_lazy_bytes == c->rx_fed && c->preface_ok)
        lazy_add(c); /* see "Lazy answers" */
    else
        rpc__conn_mark_dirty(c); /* WINDOW_UPDATE, SETTINGS ACK, ... */
    return true;
}

/* feed gives bytes read to the connection's protocol; false when the
 * connection died. */
static bool feed(struct rpc__conn *c, const uint8_t *p, size_t n)
{
    switch (c->proto) {
    case RPC__PROTO_H2: return rpc__h2_feed(c, p, n);
    case RPC__PROTO_H1: return rpc__h1_feed(c, p, n);
    default: return rpc__sniff(c, p, n);
    }
}

/* alpn_pick: after a handshake, ALPN decides the protocol ("h2" or
 * "http/1.1"); without ALPN the first bytes will (sniffing). */
static void alpn_pick(struct rpc__conn *c)
{
    const unsigned char *a = NULL;
    unsigned int an = 0;
    if (c->proto != RPC__PROTO_SNIFF)
        return;
    SSL_get0_alpn_selected(c->ssl, &a, &an);
    if (an == 2 && memcmp(a, "h2", 2) == 0)
        c->proto = RPC__PROTO_H2;
    else if (an == 8 && memcmp(a, "http/1.1", 8) == 0)
        c->proto = RPC__PROTO_H1;
}

/* san_hold: c's handshake waits for the lookups of its client
 * certificate's DNS SANs: nothing is read meanwhile (the level-triggered
 * EPOLLIN of the client's bytes would wake the loop again and again), a
 * hang-up still kills it. */
static void san_hold(struct rpc__conn *c)
{
    assert(c->handshaking && !c->san_wait);
    c->san_wait = true;
    c->rd_paused = true;
    c->want_out = false;
    rpc__conn_rearm(c);
}

void rpc__conn_san_resume(struct rpc__conn *c)
{
    assert(c->handshaking && c->san_wait && !c->dead);
    c->san_wait = false;
    c->rd_paused = false;
    rpc__conn_rearm(c);
    c->refs++; /* the handshake may end it */
    rpc__conn_io(c, EPOLLIN);
    rpc__conn_unref(c);
}

void rpc__conn_io(struct rpc__conn *c, uint32_t events)
{
    if (c->dead)
        return;
    if (c->handshaking && c->san_wait) {
        if ((events & (EPOLLHUP | EPOLLERR)) != 0)
            rpc__conn_kill(c);
        return; /* the lookups' verdict resumes it */
    }
    if (c->handshaking) {
        int rv = rpc__tls_handshake(c);
        if (rv < 0) {
            rpc__conn_kill(c);
            return;
        }
        if (rv == RPC__TLS_SAN_WAIT) {
            san_hold(c);
            return;
        }
        want_out(c, rv == 2);
        if (rv != 1)
            return; /* more to come */
        c->handshaking = false;
        alpn_pick(c);
        if (c->proto == RPC__PROTO_H2)
            rpc__conn_mark_dirty(c); /* the server's SETTINGS */
        events |= EPOLLIN; /* OpenSSL may hold the client's first bytes */
    }
    if ((events & EPOLLOUT) != 0 && c->out_off < c->out_n) {
        if (!sock_write(c)) {
            rpc__conn_kill(c);
            return;
        }
        rpc__conn_mark_dirty(c);
    } else if ((events & EPOLLOUT) != 0) {
        /* Armed by OpenSSL wanting to write inside SSL_read: the read
         * below retries it and arms it again if it must. */
        want_out(c, false);
        events |= EPOLLIN;
    }
    if ((events & (EPOLLHUP | EPOLLERR)) != 0 && c->rd_paused) {
        rpc__conn_kill(c); /* gone both ways: nothing left to answer */
        return;
    }
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0)
        return;
    for (int i = 0; i < READS_PER_EVENT && !c->rd_paused; i++) {
        ssize_t n = sock_read(c);
        if (n < 0) {
            if (c->proto != RPC__PROTO_H1 || !rpc__h1_eof(c))
                rpc__conn_kill(c);
            return;
        }
        if (n == 0)
            break;
        c->last_read_ms = rpc__now_ms();
        if (!feed(c, c->loop->rbuf, (size_t)n))
            return;
        if (c->ssl == NULL && n < RPC__READ_BUF)
            break;
    }
}
