/*
 * h1.c - HTTP/1.x connections beside HTTP/2 on the same listener (as etcd
 * serves its HTTP endpoints and gRPC on one port), and the sniffing that
 * tells them apart.
 *
 * Sniffing.  A connection of a server with an HTTP handler starts in
 * SNIFF (no SETTINGS sent yet): while its first bytes match the HTTP/2
 * client preface ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24 bytes) they are
 * kept; all 24 make it HTTP/2 (nghttp2 gets them, our SETTINGS go out),
 * the first byte that differs makes it HTTP/1.x.  Over TLS, ALPN decides
 * first ("h2" or "http/1.1", conn.c alpn_pick); without ALPN it sniffs.
 *
 * HTTP/1.x.  Bytes read are kept in h1_in (at most HTTP_HEAD_MAX plus the
 * receive limit plus one read); each complete request (head parsed by
 * http/, then Content-Length body bytes, or a chunked body decoded in
 * place by http_chunked_decode into the call held in h1_body_call until
 * its last chunk; on an open path the call goes at its head and the rest
 * of its body to its stream: rpc.h "HTTP request bodies that stay
 * open") becomes a call (rpc_call, http
 * and h1 set; ":method", ":path" and the headers in lower case as its
 * metadata) on the connection's queue, dispatched like a unary call.
 * Answers may come back in any order from any thread; they are written in
 * request order (pipelining): each one, once it and all before it are
 * answered, goes into the connection's output buffer.
 *
 * Bounds and timeouts.  At most H1_PIPELINE_MAX requests wait for answers
 * and at most H1_OUT_MAX answer bytes wait unsent; past either, or with
 * the input buffer full, the connection stops reading (EPOLLIN off) until
 * they drain.  A request must be complete within the preface timeout of
 * its first byte (the connection counts as "without preface" meanwhile,
 * so guard.c's sweep closes it): a slow or silent client holds one
 * descriptor and a bounded buffer for 10 s, never a thread.  A malformed
 * request gets Go's "400 Bad Request" (or 413, 431, 501, 505) and the
 * connection closes after it, as one with "Connection: close" or an
 * HTTP/1.0 request without keep-alive does: our side is shut once the
 * last answer is written, and the client's further bytes are read and
 * dropped until it closes too (or the request timeout cuts it off).
 *
 * Everything here runs on the connection's loop.
 */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <sys/socket.h>

#include <openssl/ssl.h>

#include "http/http.h"
#include "rpc/rpc_int.h"
#include "util/mem.h"

#define H1_HEAD_ROOM 1024        /* our response head, at most */

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
_Static_assert(sizeof(preface) - 1 == 24, "HTTP/2 client preface");

static size_t in_max(const struct rpc__conn *c)
{
    return HTTP_HEAD_MAX + c->loop->srv->max_recv_bytes;
}

/* busy: a request is partly in (its timer runs) or none is. */
static void busy(struct rpc__conn *c, bool partial)
{
    if (partial && c->preface_ok) {
        c->preface_ok = false;
        c->loop->unready_n++;
        c->born_ms = rpc__now_ms();
    } else if (!partial && !c->preface_ok) {
        c->preface_ok = true;
        assert(c->loop->unready_n > 0);
        c->loop->unready_n--;
    }
}

/* pause_update turns reading off while the connection holds its fill. */
static void pause_update(struct rpc__conn *c)
{
    bool p = c->h1_eof || c->h1_pending >= H1_PIPELINE_MAX ||
             c->out_n - c->out_off > H1_OUT_MAX || c->h1_in_n >= in_max(c);
    if (p == c->rd_paused || c->dead)
        return;
    c->rd_paused = p;
    rpc__conn_rearm(c);
}

static void enqueue(struct rpc__conn *c, struct rpc_call *call)
{
    call->h1_next = NULL;
    if (c->h1_tail != NULL)
        c->h1_tail->h1_next = call;
    else
        c->h1_head = call;
    c->h1_tail = call;
    c->h1_pending++;
    rpc__call_ready(call);
}

/* refuse queues an answer with status and closes after it; the bytes
 * left are dropped. */
static bool refuse(struct rpc__conn *c, int status)
{
    struct rpc_call *call = rpc__call_new(c, 0);
    if (call == NULL)
        return false;
    call->http = call->h1 = call->h1_close = true;
    call->http_status = status;
    c->h1_close = true;
    c->h1_in_n = 0;
    busy(c, false);
    enqueue(c, call);
    return true;
}

static bool add_hdr(struct rpc_call *call, const char *name, size_t name_n,
                    const char *v, size_t v_n)
{
    return rpc__hdrs_add(&call->hdrs, (const uint8_t *)name, name_n,
                         (const uint8_t *)v, v_n) == 0;
}

/* take makes a call of the complete request req (head and body in
 * h1_in); header names are lowered in place.  False: out of memory or
 * header space (the caller refuses it). */
static struct rpc_call *call_make(struct rpc__conn *c,
                                  struct http_request *req)
{
    struct rpc_call *call = rpc__call_new(c, 0);
    if (call == NULL)
        return NULL;
    call->http = call->h1 = true;
    call->h1_close = !req->keep_alive;
    call->h1_v10 = req->minor == 0;
    bool ok = add_hdr(call, ":method", 7, req->method, req->method_n) &&
              add_hdr(call, ":path", 5, req->target, req->target_n);
    for (size_t i = 0; ok && i < req->headers_n; i++) {
        struct http_header *h = &req->headers[i];
        char *name = (char *)h->name; /* points into our own h1_in */
        for (size_t k = 0; k < h->name_n; k++)
            name[k] = (char)tolower((unsigned char)name[k]);
        ok = add_hdr(call, name, h->name_n, h->value, h->value_n);
    }
    if (!ok) {
        call->http_status = 431;
        call->h1_close = true;
    }
    return call;
}

static bool take(struct rpc__conn *c, struct http_request *req)
{
    struct rpc_call *call = call_make(c, req);
    if (call == NULL)
        return false;
    bool ok = call->http_status == 0;
    size_t n = req->content_length;
    if (ok && n > 0) {
        uint8_t *b = rpc__buf_grow(call->body, &call->body_cap, n, 1024);
        if (b != NULL && rpc__guard_in_add(c, n)) {
            call->body = b;
            memcpy(call->body, c->h1_in + req->head_n, n);
            call->body_n = n;
        } else {
            if (b != NULL)
                call->body = b;
            call->http_status = 413;
            call->h1_close = true;
        }
    }
    if (call->h1_close)
        c->h1_close = true;
    enqueue(c, call);
    return true;
}

static void continue_once(struct rpc__conn *c, const struct http_request *r);

/* chunked_begin takes the head of a request with a chunked body: a call
 * on an open path (rpc__http_open_path) is queued (dispatched) now and
 * its body follows it; any other waits in h1_body_call until its last
 * chunk.  The head leaves h1_in; body_step reads the rest. */
static bool chunked_begin(struct rpc__conn *c, struct http_request *req)
{
    struct rpc_call *call = call_make(c, req);
    if (call == NULL)
        return false;
    continue_once(c, req); /* curl asks before a chunked upload */
    c->h1_continued = false;
    memmove(c->h1_in, c->h1_in + req->head_n, c->h1_in_n - req->head_n);
    c->h1_in_n -= req->head_n;
    c->h1_scan = 0;
    http_chunked_init(&c->h1_chunk);
    if (call->http_status != 0) { /* refused: its body is not read */
        c->h1_close = true;
        c->h1_in_n = 0;
        busy(c, false);
        enqueue(c, call);
        return true;
    }
    c->h1_body_call = call;
    call->body_open = rpc__http_open_path(c->loop->srv, call);
    if (!call->body_open)
        busy(c, true); /* the whole body within the request timeout */
    if (call->body_open) {
        /* Go's server closes after such an answer (its request body is
         * not all read when the answer starts; with curl's Expect:
         * 100-continue etcd streams both ways and says so) */
        call->h1_close = true;
        busy(c, false); /* it may stay open for as long as it streams */
        enqueue(c, call);
    }
    return true;
}

/* held_more adds n decoded bytes to the body of the held call; false:
 * past the receive limit (413, the connection closes after it). */
static bool held_more(struct rpc__conn *c, struct rpc_call *call,
                      const uint8_t *p, size_t n)
{
    size_t max = c->loop->srv->max_recv_bytes;
    if (call->body_n + n > max || !rpc__guard_in_add(c, n))
        return false;
    uint8_t *b = rpc__buf_grow(call->body, &call->body_cap,
                               call->body_n + n, 1024);
    if (b == NULL) {
        rpc__guard_in_sub(c, n);
        return false;
    }
    call->body = b;
    memcpy(call->body + call->body_n, p, n);
    call->body_n += n;
    return true;
}

/* held_done queues the held call once its body ended (or failed). */
static void held_done(struct rpc__conn *c, struct rpc_call *call, int st,
                      const char *err)
{
    c->h1_body_call = NULL;
    call->body_err = err;
    if (st != 0)
        call->http_status = st;
    if (st != 0 || err != NULL) /* the framing is lost: no next request */
        call->h1_close = true;
    if (call->h1_close) {
        c->h1_close = true;
        c->h1_in_n = 0;
    }
    busy(c, false);
    enqueue(c, call);
}

/* body_step decodes the chunked body bytes in h1_in (in place) and hands
 * them on; false: out of memory or an open body past its bound (the
 * caller closes).  *wait_out: more bytes are needed. */
static bool body_step(struct rpc__conn *c, bool *wait_out)
{
    struct rpc_call *call = c->h1_body_call;
    size_t out_n = 0;
    size_t used = http_chunked_decode(&c->h1_chunk, c->h1_in, c->h1_in_n,
                                      c->h1_in, &out_n);
    bool end = http_chunked_done(&c->h1_chunk);
    const char *err = c->h1_chunk.err;
    *wait_out = !end && err == NULL;
    if (call->body_open) {
        if (!rpc__http_body_more(call, c->h1_in, out_n, end || err != NULL,
                                 err))
            return false;
        if (err != NULL) {
            c->h1_close = true; /* the framing is lost */
            c->h1_in_n = 0;
        }
        if (end || err != NULL)
            c->h1_body_call = NULL;
    } else if (!held_more(c, call, c->h1_in, out_n)) {
        held_done(c, call, 413, NULL);
        return true;
    } else if (end || err != NULL) {
        held_done(c, call, 0, err);
    } else {
        busy(c, true); /* the whole body within the request timeout */
    }
    if (c->h1_in_n > 0) {
        memmove(c->h1_in, c->h1_in + used, c->h1_in_n - used);
        c->h1_in_n -= used;
    }
    return true;
}

/* continue_once answers "Expect: 100-continue" (curl sends it before a
 * large body) with an interim 100 Continue, once per request and only
 * when no earlier answer is due, as Go does when the handler reads the
 * body; otherwise the client waits a second before sending it. */
static void continue_once(struct rpc__conn *c, const struct http_request *r)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    size_t n = 0;
    const char *e = http_request_header(r, "expect", &n);
    if (c->h1_continued || e == NULL || n != 12 ||
        strncasecmp(e, "100-continue", 12) != 0 || c->h1_head != NULL)
        return;
    if (c->out_off == c->out_n)
        c->out_off = c->out_n = 0;
    uint8_t *b = rpc__buf_grow(c->out, &c->out_cap,
                               c->out_n + sizeof cont - 1, 16384);
    if (b == NULL)
        return; /* the client sends its body after its own wait */
    c->out = b;
    memcpy(c->out + c->out_n, cont, sizeof cont - 1);
    c->out_n += sizeof cont - 1;
    c->h1_continued = true;
    rpc__conn_mark_dirty(c);
}

/* process takes every complete request buffered, within the bounds. */
static bool process(struct rpc__conn *c)
{
    struct rpc_server *srv = c->loop->srv;
    struct http_request req;
    while (!c->dead && !c->h1_close && c->h1_in_n > 0 &&
           c->h1_pending < H1_PIPELINE_MAX) {
        if (c->h1_body_call != NULL) { /* a chunked body goes on */
            bool wait = false;
            if (!body_step(c, &wait))
                return false;
            if (wait)
                break;
            continue;
        }
        size_t head = http_head_len(c->h1_in, c->h1_in_n, &c->h1_scan);
        if (head == 0 && c->h1_in_n >= HTTP_HEAD_MAX)
            return refuse(c, 431);
        if (head == 0) {
            busy(c, true);
            break;
        }
        int st = http_request_parse(c->h1_in, head, srv->max_recv_bytes,
                                    &req);
        if (st != 0)
            return refuse(c, st);
        if (req.chunked) {
            if (!chunked_begin(c, &req))
                return false;
            continue;
        }
        size_t total = head + req.content_length;
        if (c->h1_in_n < total) {
            continue_once(c, &req);
            busy(c, true);
            break;
        }
        c->h1_continued = false;
        if (!take(c, &req))
            return false;
        memmove(c->h1_in, c->h1_in + total, c->h1_in_n - total);
        c->h1_in_n -= total;
        c->h1_scan = 0;
        busy(c, false);
    }
    pause_update(c);
    return true;
}

bool rpc__h1_feed(struct rpc__conn *c, const uint8_t *p, size_t n)
{
    assert(c->proto == RPC__PROTO_H1 && n > 0);
    if (c->h1_close)
        return true; /* no more requests taken: the bytes are dropped */
    uint8_t *b = rpc__buf_grow(c->h1_in, &c->h1_in_cap, c->h1_in_n + n,
                               4096);
    if (b == NULL) {
        rpc__conn_kill(c);
        return false;
    }
    c->h1_in = b;
    memcpy(c->h1_in + c->h1_in_n, p, n);
    c->h1_in_n += n;
    if (!process(c)) {
        rpc__conn_kill(c);
        return false;
    }
    return !c->dead;
}

bool rpc__sniff(struct rpc__conn *c, const uint8_t *p, size_t n)
{
    assert(c->proto == RPC__PROTO_SNIFF && c->sniff_n < 24);
    size_t take_n = n < 24 - c->sniff_n ? n : 24 - c->sniff_n;
    bool match = memcmp(p, preface + c->sniff_n, take_n) == 0;
    if (match && c->sniff_n + take_n < 24) {
        memcpy(c->sniff + c->sniff_n, p, take_n);
        c->sniff_n += take_n;
        return true;
    }
    size_t had = c->sniff_n;
    c->sniff_n = 0;
    if (match && c->loop->srv->http_only && c->ssl == NULL) {
        /* HTTP only in plain text (etcd 3.5's cmux has only its HTTP/1
         * matcher there): no h2c, the connection closes unanswered */
        rpc__conn_kill(c);
        return false;
    }
    if (match) {
        c->proto = RPC__PROTO_H2;
        if (!rpc__h2_feed(c, (const uint8_t *)preface, 24))
            return false;
        return n == take_n || rpc__h2_feed(c, p + take_n, n - take_n);
    }
    c->proto = RPC__PROTO_H1;
    if (had > 0 && !rpc__h1_feed(c, (const uint8_t *)preface, had))
        return false;
    return rpc__h1_feed(c, p, n);
}

bool rpc__h1_eof(struct rpc__conn *c)
{
    if (c->h1_head == NULL && c->out_off == c->out_n)
        return false;
    if (rpc__h1_streaming(c))
        return false; /* the client left an open answer: cancel it */
    c->h1_close = true; /* answer what was asked, then close */
    c->h1_eof = true;   /* and read no more (EPOLLIN would spin) */
    c->h1_in_n = 0;
    busy(c, false);
    pause_update(c);
    return true;
}

/* put writes call's answer (head and body) after c's unsent bytes. */
static bool put(struct rpc__conn *c, struct rpc_call *call)
{
    const char *m = rpc__hdrs_find(&call->hdrs, ":method", NULL);
    size_t body = m != NULL && strcmp(m, "HEAD") == 0 ? 0 : call->out_n;
    if (c->out_off == c->out_n)
        c->out_off = c->out_n = 0;
    uint8_t *b = rpc__buf_grow(c->out, &c->out_cap,
                               c->out_n + H1_HEAD_ROOM + body, 16384);
    if (b == NULL)
        return false;
    c->out = b;
    char extra[1024];
    rpc__http_extra(call->cors_origin, call->http_flags, extra, sizeof extra);
    size_t h = http_response_head((char *)c->out + c->out_n, H1_HEAD_ROOM,
                                  call->http_status, call->http_ctype,
                                  call->out_n, extra,
                                  (call->h1_close ? HTTP_HEAD_CLOSE : 0u) |
                                      (call->h1_v10 ? HTTP_HEAD_V10 : 0u));
    if (h == 0)
        return false;
    c->out_n += h;
    if (body > 0) /* call->out may be NULL for an empty answer */
        memcpy(c->out + c->out_n, call->out, body);
    c->out_n += body;
    return true;
}

void rpc__h1_drain(struct rpc__conn *c)
{
    while (!c->dead && c->h1_head != NULL &&
           c->h1_head->state == RPC__CALL_SUBMITTED) {
        struct rpc_call *done = c->h1_head;
        if (done->h1_stream != NULL) { /* its stream writes it */
            rpc__h1_pump(c);           /* and drains on once it ends */
            return;
        }
        c->h1_head = done->h1_next;
        if (c->h1_head == NULL)
            c->h1_tail = NULL;
        c->h1_pending--;
        if (done == c->h1_body_call) {
            /* answered while its body is still coming: not read, so
             * the connection ends after this answer */
            c->h1_body_call = NULL;
            done->h1_close = true;
        }
        bool ok = put(c, done);
        if (done->h1_close)
            c->h1_close = true;
        rpc__call_free(done);
        if (!ok) {
            rpc__conn_kill(c);
            return;
        }
    }
    if (c->dead)
        return;
    rpc__conn_mark_dirty(c);
    if (!process(c))
        rpc__conn_kill(c);
}

void rpc__h1_answered(struct rpc_call *call)
{
    assert(call->h1 && call->state == RPC__CALL_ANSWERED);
    call->state = RPC__CALL_SUBMITTED; /* the loop's until written */
    rpc__h1_drain(call->conn);
}

void rpc__h1_written(struct rpc__conn *c)
{
    if (c->h1_eof && c->h1_head == NULL) {
        rpc__conn_kill(c); /* the client left: the last answer is out */
        return;
    }
    if (c->h1_close && c->h1_head == NULL && !c->h1_shut) {
        /* The last answer is out.  Close our side only and drop what the
         * client still sends until it closes (or the request timeout
         * passes): closing with its bytes unread would send a reset,
         * which can destroy the answer before the client reads it (Go's
         * closeWriteAndWait). */
        c->h1_shut = true;
        if (c->ssl != NULL)
            SSL_shutdown(c->ssl);
        shutdown(c->fd, SHUT_WR);
        busy(c, true);
        return;
    }
    if (rpc__h1_streaming(c)) {
        rpc__h1_pump(c); /* room again for a stream's queued bytes */
        return;
    }
    if (c->rd_paused && !process(c))
        rpc__conn_kill(c);
}

size_t rpc__http_extra(const char *cors, unsigned flags, char *buf,
                       size_t cap)
{
    assert(cap >= 256);
    size_t n = 0;
    buf[0] = '\0';
    if (cors != NULL && strlen(cors) + 256 <= cap)
        n += (size_t)snprintf(buf + n, cap - n,
                              "Access-Control-Allow-Headers: accept, "
                              "content-type, authorization\r\n"
                              "Access-Control-Allow-Methods: POST, GET, "
                              "OPTIONS, PUT, DELETE\r\n"
                              "Access-Control-Allow-Origin: %s\r\n",
                              cors);
    if (flags & RPC_HTTP_ALLOW_GET)
        n += (size_t)snprintf(buf + n, cap - n, "Allow: GET\r\n");
    if (flags & RPC_HTTP_GRPC_META)
        n += (size_t)snprintf(buf + n, cap - n,
                              "Grpc-Metadata-Content-Type: "
                              "application/grpc\r\n");
    if (flags & RPC_HTTP_NOSNIFF)
        n += (size_t)snprintf(buf + n, cap - n,
                              "X-Content-Type-Options: nosniff\r\n");
    return n;
}
