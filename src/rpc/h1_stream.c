/*
 * h1_stream.c - HTTP/1.x answers that stay open (rpc.h "HTTP answers that
 * stay open"): the etcd gateway's streams write chunk after chunk for as
 * long as they run, and learn when the client went away.
 *
 * A streamed answer is a struct rpc_stream with http set and no method:
 * the same mutex, bounded send queue, control reserve, inbox scheduling,
 * release and on_close as the gRPC streams (stream.c), so the services
 * behind it see the same back-pressure (ERR_FULL) on either transport.
 * Its call stays in the connection's H1 queue as a placeholder
 * (SUBMITTED, h1_stream set), which keeps the answers of pipelined
 * requests in order: the stream writes only while its call is the
 * queue's head, and rpc__h1_drain stops at it.
 *
 * The queue holds at most H1_STREAM_BYTES_MAX bytes too (the gRPC
 * streams' messages are bounded by the connection's reply budget; JSON
 * lines of a gateway watch are not).
 *
 * The loop moves queued messages into the connection's output buffer
 * while fewer than H1_OUT_MAX bytes wait there (a client that does not
 * read fills the queue, then the sender gets ERR_FULL); the rest waits
 * for rpc__h1_written.  Once finished and drained, the last chunk goes
 * out, on_close(false) runs, the call is freed and the queue goes on.
 * A connection that dies first (EOF from the client: rpc__h1_eof; a read
 * or write error; shutdown) closes its streams through
 * rpc__stream_closed: on_close(true), the client-gone signal.
 *
 * Everything but rpc_stream_send_http runs on the connection's loop.
 */
#include <assert.h>
#include <string.h>

#include "http/http.h"
#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/mem.h"

#define HEAD_ROOM 1024 /* our response head, at most */

int rpc_call_http_stream(struct rpc_call *call, rpc_http_close_fn on_close,
                         void *ctx, struct rpc_stream **stream_out)
{
    assert(call != NULL && call->http && on_close != NULL);
    assert(call->state == RPC__CALL_HANDLER && stream_out != NULL);
    struct rpc__conn *c = call->conn;
    struct rpc_server *srv = c->loop->srv;
    if (!call->h1)
        return rpc__h2_http_stream(call, on_close, ctx, stream_out);
    struct rpc_stream *s = rpc__stream_alloc(call);
    if (s == NULL)
        return ERR_NOMEM;
    s->http = true;
    s->http_on_close = on_close;
    s->http_ctx = ctx;
    /* The call is no longer a handler's: the loop keeps it in the queue
     * until the stream ends; shutdown now waits for the stream. */
    s->h1_call = call;
    s->http_slot = call->http_slot; /* given back at on_close */
    call->http_slot = false;
    call->h1_stream = s;
    call->state = RPC__CALL_SUBMITTED;
    atomic_fetch_sub(&srv->active_n, 1);
    *stream_out = s;
    return 0;
}

int rpc_stream_send_http(struct rpc_stream *s,
                         const struct rpc_http_head *head, const void *p,
                         size_t n, bool ctrl)
{
    assert(s != NULL && (p != NULL || n == 0));
    if (!s->http)
        return ERR_INVAL;
    uint8_t *copy = NULL;
    if (n > 0) {
        copy = mem_dup(p, n);
        if (copy == NULL)
            return ERR_NOMEM;
    }
    pthread_mutex_lock(&s->mu);
    int rv = 0;
    if (!s->http_head_set && head != NULL) {
        s->http_head = *head;
        s->http_head_set = true;
    } else if (s->http_head_set && s->http_head.whole && n > 0 &&
               s->http_body_sent) {
        rv = ERR_INVAL;
    }
    if (s->http_head.whole && n > 0)
        s->http_body_sent = true;
    pthread_mutex_unlock(&s->mu);
    if (rv == 0)
        rv = rpc__stream_queue(s, copy, n, ctrl ? s->q_cap : s->q_limit);
    if (rv != 0)
        mem_free(copy);
    return rv;
}

bool rpc__h1_streaming(const struct rpc__conn *c)
{
    return c->h1_head != NULL && c->h1_head->h1_stream != NULL;
}

/* out_put appends n bytes to c's output buffer. */
static bool out_put(struct rpc__conn *c, const void *p, size_t n)
{
    if (c->out_off == c->out_n)
        c->out_off = c->out_n = 0;
    uint8_t *b = rpc__buf_grow(c->out, &c->out_cap, c->out_n + n, 16384);
    if (b == NULL)
        return false;
    c->out = b;
    memcpy(c->out + c->out_n, p, n);
    c->out_n += n;
    return true;
}

/* put_head writes s's head (a finish without one: 200, empty). */
static bool put_head(struct rpc__conn *c, struct rpc_stream *s,
                     size_t whole_n)
{
    struct rpc_http_head h = s->http_head_set
                                 ? s->http_head
                                 : (struct rpc_http_head){.status = 200};
    char extra[1024], head[HEAD_ROOM];
    rpc__http_extra(s->cors_origin, h.flags, extra, sizeof extra);
    struct rpc_call *call = s->h1_call;
    size_t body_n = h.whole ? whole_n : HTTP_BODY_CHUNKED;
    if (call->h1_v10 && !h.whole) {
        /* HTTP/1.0 has no chunks: the body runs until the connection
         * closes, as Go's net/http streams to a 1.0 client */
        body_n = HTTP_BODY_UNTIL_CLOSE;
        call->h1_close = true;
    }
    size_t n = http_response_head(head, sizeof head, h.status, h.ctype,
                                  body_n, extra,
                                  (call->h1_close ? HTTP_HEAD_CLOSE : 0u) |
                                      (call->h1_v10 ? HTTP_HEAD_V10 : 0u));
    return n > 0 && out_put(c, head, n);
}

/* put_chunk writes one queued message as a chunk (or a whole body). */
static bool put_chunk(struct rpc__conn *c, const struct rpc__msg *m,
                      bool whole)
{
    if (m->n == 0)
        return true; /* a chunk of 0 would end the answer */
    if (whole)
        return out_put(c, m->p, m->n);
    char line[24];
    size_t k = http_chunk_head(line, sizeof line, m->n);
    return out_put(c, line, k) && out_put(c, m->p, m->n) &&
           out_put(c, "\r\n", 2);
}

/* take moves what may go now into c's buffer; *fin_out: the answer is
 * complete (finished and drained).  Under s->mu. */
static bool take(struct rpc__conn *c, struct rpc_stream *s, bool *fin_out)
{
    /* a whole answer, or a 1.0 one: the bytes as they are, no chunks */
    bool whole = (s->http_head_set && s->http_head.whole) ||
                 s->h1_call->h1_v10;
    if (!s->headers_sent && (s->http_head_set || s->finishing)) {
        /* A whole answer's head waits for its body (or the finish). */
        size_t body_n = s->q_n > 0 ? s->queue[s->q_head].n : 0;
        if (whole && s->q_n == 0 && !s->finishing)
            return true;
        if (!put_head(c, s, body_n))
            return false;
        s->headers_sent = true;
    }
    while (s->headers_sent && s->q_n > 0 &&
           c->out_n - c->out_off <= H1_OUT_MAX) {
        struct rpc__msg *m = &s->queue[s->q_head];
        if (!put_chunk(c, m, whole))
            return false;
        assert(s->q_bytes >= m->n);
        s->q_bytes -= m->n;
        mem_free(m->p);
        m->p = NULL;
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_n--;
    }
    *fin_out = s->headers_sent && s->q_n == 0 && s->finishing;
    if (*fin_out && !whole)
        return out_put(c, HTTP_CHUNK_END, sizeof HTTP_CHUNK_END - 1);
    return true;
}

/* done: s's answer is all in c's buffer: its call leaves the queue, the
 * owner hears on_close(false), and the next requests go on. */
static void done(struct rpc__conn *c, struct rpc_stream *s)
{
    struct rpc_call *call = s->h1_call;
    assert(call == c->h1_head && call->h1_stream == s);
    c->h1_head = call->h1_next;
    if (c->h1_head == NULL)
        c->h1_tail = NULL;
    c->h1_pending--;
    if (call == c->h1_body_call) { /* ended before its request body */
        c->h1_body_call = NULL;
        call->h1_close = true;
    }
    if (call->h1_close)
        c->h1_close = true;
    call->h1_stream = NULL;
    s->h1_call = NULL;
    rpc__call_free(call);
    rpc__stream_tell_close(s, false);
    rpc__stream_closed(s); /* unlinks it; frees it if released */
}

void rpc__h1_pump(struct rpc__conn *c)
{
    if (c->dead || !rpc__h1_streaming(c))
        return;
    struct rpc_stream *s = c->h1_head->h1_stream;
    assert(s->http && s->h1_call == c->h1_head);
    bool fin = false;
    size_t before = c->out_n - c->out_off;
    pthread_mutex_lock(&s->mu);
    bool ok = take(c, s, &fin);
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        rpc__conn_kill(c); /* out of memory: the stream is cancelled */
        return;
    }
    /* Only when there is something new to write: rpc__h1_written pumps
     * again after each flush, which must not go round for ever. */
    if (c->out_n - c->out_off != before || fin)
        rpc__conn_mark_dirty(c);
    if (!fin)
        return;
    c->refs++; /* done may free the last stream holding c */
    done(c, s);
    rpc__h1_drain(c);
    rpc__conn_unref(c);
}
