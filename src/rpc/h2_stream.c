/*
 * h2_stream.c - HTTP answers that stay open on an HTTP/2 stream (rpc.h
 * "HTTP answers that stay open"): the etcd gateway's /v3/watch and the
 * other streams asked with curl --http2 (or ALPN h2 over TLS), served as
 * Go's net/http serves etcd's grpc-gateway over HTTP/2: the response
 * HEADERS at the first send, each message as DATA as the client's flow
 * control window allows, END_STREAM at the finish.
 *
 * The same struct rpc_stream as the HTTP/1.x answers (http set, h2 set,
 * no method): the same bounded queue (messages and H1_STREAM_BYTES_MAX
 * bytes), inbox scheduling and release.  nghttp2 reads the queue through
 * h2_read only while the client's window is open, so a client that does
 * not read holds at most the queue.  The end:
 *   - finished: the DATA frame with END_STREAM is sent, then on_frame_send
 *     (conn.c) tells on_close(false);
 *   - the client reset the stream (RST_STREAM), closed or lost the
 *     connection, or the server stops: nghttp2 closes the stream or the
 *     connection dies, rpc__stream_closed tells on_close(true).
 *
 * The request (struct rpc_call) stays attached until the loop takes the
 * stream from its inbox the first time: the handler that made the stream
 * may read the request body until it returns.
 *
 * Everything runs on the connection's loop.
 */
#include <assert.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

int rpc__h2_http_stream(struct rpc_call *call, rpc_http_close_fn on_close,
                        void *ctx, struct rpc_stream **stream_out)
{
    struct rpc__conn *c = call->conn;
    struct rpc_server *srv = c->loop->srv;
    assert(!call->h1 && call->http && c->ng != NULL);
    struct rpc_stream *s = rpc__stream_alloc(call);
    if (s == NULL)
        return ERR_NOMEM;
    s->http = true;
    s->h2 = true;
    s->stream_id = call->stream_id;
    s->http_on_close = on_close;
    s->http_ctx = ctx;
    /* nghttp2's events for this stream now go to s; the call is kept (not
     * a handler's any more) until rpc__h2_call_drop. */
    nghttp2_session_set_stream_user_data(c->ng, s->stream_id, &s->item);
    call->state = RPC__CALL_SUBMITTED;
    call->out_n = call->out_off = 0;
    s->h2_call = call;
    s->http_slot = call->http_slot; /* given back at on_close */
    call->http_slot = false;
    atomic_fetch_sub(&srv->active_n, 1);
    *stream_out = s;
    return 0;
}

void rpc__h2_call_drop(struct rpc_stream *s)
{
    if (s->h2_call == NULL)
        return;
    rpc__call_free(s->h2_call);
    s->h2_call = NULL;
}

/* h2_read gives nghttp2 the queued bytes as the window allows, and the
 * end of the stream once the owner finished and the queue is empty. */
static ssize_t h2_read(nghttp2_session *ng, int32_t stream_id, uint8_t *buf,
                       size_t length, uint32_t *flags,
                       nghttp2_data_source *src, void *ud)
{
    struct rpc_stream *s = src->ptr;
    size_t done = 0;
    (void)ng;
    (void)stream_id;
    (void)ud;
    pthread_mutex_lock(&s->mu);
    while (done < length && s->q_n > 0) {
        struct rpc__msg *m = &s->queue[s->q_head];
        size_t n = m->n - s->head_off;
        if (n > length - done)
            n = length - done;
        if (n > 0)
            memcpy(buf + done, m->p + s->head_off, n);
        done += n;
        s->head_off += n;
        if (s->head_off == m->n) {
            assert(s->q_bytes >= m->n);
            s->q_bytes -= m->n;
            mem_free(m->p);
            m->p = NULL;
            s->head_off = 0;
            s->q_head = (s->q_head + 1) % s->q_cap;
            s->q_n--;
        }
    }
    ssize_t rv = (ssize_t)done;
    if (s->q_n == 0 && s->finishing)
        *flags |= NGHTTP2_DATA_FLAG_EOF; /* END_STREAM: the answer ends */
    else if (done == 0)
        rv = NGHTTP2_ERR_DEFERRED;
    pthread_mutex_unlock(&s->mu);
    return rv;
}

/* submit_head submits s's response HEADERS with its data provider; false
 * when it must wait (a whole answer waits for its body or the finish). */
static bool submit_head(struct rpc_stream *s)
{
    struct rpc__conn *c = s->conn;
    pthread_mutex_lock(&s->mu);
    bool ready = s->http_head_set || s->finishing;
    struct rpc_http_head h = s->http_head_set
                                 ? s->http_head
                                 : (struct rpc_http_head){.status = 200};
    long long len = -1;
    if (h.whole) {
        if (s->q_n == 0 && !s->finishing)
            ready = false;
        len = s->q_n > 0 ? (long long)s->queue[s->q_head].n : 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (!ready)
        return false;
    struct rpc__http_nv hv;
    rpc__http_nv_make(&hv, s->cors_origin, h.status, h.ctype, h.flags, len);
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = h2_read};
    int rv = nghttp2_submit_response(c->ng, s->stream_id, hv.nv, hv.n, &prd);
    if (rv != 0) {
        log_warn("rpc", "submit_response (http stream): %s",
                 nghttp2_strerror(rv));
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->stream_id,
                                  NGHTTP2_INTERNAL_ERROR);
    }
    return true;
}

void rpc__h2_http_pump(struct rpc_stream *s)
{
    struct rpc__conn *c = s->conn;
    assert(s->http && s->h2 && !s->ng_closed && !c->dead);
    if (!s->headers_sent) {
        if (!submit_head(s))
            return;
        s->headers_sent = true;
    } else {
        nghttp2_session_resume_data(c->ng, s->stream_id);
    }
    rpc__conn_mark_dirty(c);
}
