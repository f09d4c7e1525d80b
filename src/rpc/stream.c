/*
 * stream.c - streaming calls (Watch, LeaseKeepAlive, Snapshot,
 * Observe): client messages delivered one at a time on the loop, a bounded
 * send queue that nghttp2 drains as the client's flow-control window
 * allows, and trailers once the owner finished; and the owner's
 * on_writable once a refused (ERR_FULL) queue drained.
 *
 * Any thread may send, finish or release: it changes the stream under its
 * mutex and, unless the stream is already waiting there, pushes it onto
 * the loop's inbox; the loop then (re)starts nghttp2's reading of the
 * queue.  The stream is freed on the loop once the owner released it and
 * nghttp2 is done with it (rpc_int.h).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

static void stream_free(struct rpc_stream *s)
{
    struct rpc__conn *c = s->conn;
    assert(s->owner_gone && s->ng_closed && s->close_told);
    assert(!s->scheduled && s->prev == NULL && s->next == NULL);
    while (s->q_n > 0) {
        mem_free(s->queue[s->q_head].p);
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_n--;
    }
    mem_free(s->queue);
    mem_free(s->fin_msg);
    mem_free(s->hdrs.buf);
    mem_free(s->rbuf);
    rpc__guard_in_sub(c, s->rbuf_n);
    pthread_mutex_destroy(&s->mu);
    atomic_fetch_sub(&c->loop->srv->streams_n, 1);
    mem_free(s);
    rpc__conn_unref(c);
}

static void maybe_free(struct rpc_stream *s)
{
    if (s->owner_gone && s->ng_closed)
        stream_free(s);
}

struct rpc_stream *rpc__stream_alloc(struct rpc_call *call)
{
    struct rpc__conn *c = call->conn;
    struct rpc_stream *s = mem_calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->q_limit = (size_t)c->loop->srv->stream_queue;
    s->q_cap = s->q_limit + RPC_STREAM_CTRL_RESERVE;
    s->queue = mem_calloc(s->q_cap, sizeof(*s->queue));
    if (s->queue == NULL) {
        mem_free(s);
        return NULL;
    }
    s->item.kind = RPC__KIND_STREAM;
    s->conn = c;
    s->start_ns = rpc__handling_start();
    s->hdrs = call->hdrs; /* the call's metadata moves to the stream */
    s->cors_origin = call->cors_origin; /* (in hdrs, or static) */
    call->hdrs = (struct rpc__hdrs){0};
    pthread_mutex_init(&s->mu, NULL);
    s->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = s;
    c->streams = s;
    c->refs++;
    atomic_fetch_add(&c->loop->srv->streams_n, 1);
    return s;
}

struct rpc_stream *rpc__stream_open(struct rpc_call *call)
{
    struct rpc__conn *c = call->conn;
    assert(call->state == RPC__CALL_READING && call->method != NULL);
    assert(call->method->kind == RPC__METHOD_STREAM);
    struct rpc_stream *s = rpc__stream_alloc(call);
    if (s == NULL)
        return NULL;
    s->stream_id = call->stream_id;
    s->method = call->method;
    metrics_inc(&s->method->stats->started);
    nghttp2_session_set_stream_user_data(c->ng, s->stream_id, &s->item);
    rpc__call_free(call);
    s->method->ops->on_open(s, s->method->ctx);
    return s;
}

void rpc__stream_tell_close(struct rpc_stream *s, bool cancelled)
{
    if (s->close_told)
        return;
    s->close_told = true;
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    grpc_status_code code = cancelled ? GRPC_STATUS_CANCELLED : s->fin_code;
    grpc_status_code counted = cancelled ? GRPC_STATUS_CANCELLED
                                         : s->count_code;
    pthread_mutex_unlock(&s->mu);
    if (s->http) { /* no method: an HTTP answer is not a gRPC call */
        if (s->http_slot) {
            s->http_slot = false;
            rpc__http_slot_give(s->conn->loop->srv);
        }
        if (s->count_as != NULL) /* the gRPC method it stands for */
            rpc__method_handled(s->count_as, counted, s->start_ns);
        s->http_on_close(s, cancelled, s->http_ctx);
        return;
    }
    rpc__method_handled(s->method, code, s->start_ns);
    s->method->ops->on_close(s, cancelled, s->method->ctx);
}

void rpc__stream_data(struct rpc_stream *s, const uint8_t *p, size_t n)
{
    size_t max = s->conn->loop->srv->max_recv_bytes;
    if (s->http && s->http_on_body != NULL && !s->http_body_ended &&
        !s->close_told) {
        s->http_on_body(s, p, n, false, NULL, s->http_ctx); /* open body */
        return;
    }
    if (s->reading_done || s->close_told || s->http)
        return; /* an HTTP answer's request was read whole before it */
    if (!rpc__guard_in_add(s->conn, n)) {
        char msg[160];
        rpc__over_budget_msg(msg, sizeof msg, s->conn);
        s->reading_done = true;
        rpc_stream_finish(s, GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        return;
    }
    uint8_t *b = rpc__buf_grow(s->rbuf, &s->rbuf_cap, s->rbuf_n + n, 1024);
    if (b == NULL) {
        rpc__guard_in_sub(s->conn, n);
        s->reading_done = true;
        rpc_stream_finish(s, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    s->rbuf = b;
    memcpy(s->rbuf + s->rbuf_n, p, n);
    s->rbuf_n += n;
    size_t off = 0;
    while (s->rbuf_n - off >= RPC__PREFIX && !s->reading_done &&
           !s->close_told) {
        size_t len = rpc__prefix_len(s->rbuf + off);
        if (len > max || s->rbuf[off] != 0) {
            char msg[128];
            if (len > max)
                rpc__too_large_msg(msg, sizeof msg, len, max);
            else
                snprintf(msg, sizeof msg, "grpc: compressed message");
            s->reading_done = true;
            rpc_stream_finish(s, len > max ? GRPC_STATUS_RESOURCE_EXHAUSTED
                                           : GRPC_STATUS_UNIMPLEMENTED,
                              msg);
            break;
        }
        if (s->rbuf_n - off - RPC__PREFIX < len)
            break;
        metrics_inc(&s->method->stats->msg_received);
        metrics_add(&s->conn->loop->srv->rx_bytes, len);
        s->method->ops->on_message(s, s->rbuf + off + RPC__PREFIX, len,
                                   s->method->ctx);
        off += RPC__PREFIX + len;
    }
    memmove(s->rbuf, s->rbuf + off, s->rbuf_n - off);
    s->rbuf_n -= off;
    rpc__guard_in_sub(s->conn, off);
}

void rpc__stream_half_closed(struct rpc_stream *s)
{
    if (s->http && s->http_on_body != NULL && !s->http_body_ended &&
        !s->close_told) {
        s->http_body_ended = true; /* an open body's END_STREAM */
        s->http_on_body(s, NULL, 0, true, NULL, s->http_ctx);
        return;
    }
    if (s->reading_done || s->http)
        return;
    s->reading_done = true;
    if (!s->close_told)
        s->method->ops->on_message(s, NULL, 0, s->method->ctx);
}

void rpc__stream_trailers_sent(struct rpc_stream *s)
{
    rpc__stream_tell_close(s, false);
}

/* rpc__stream_closed: nghttp2 closed the stream, or the connection died. */
void rpc__stream_closed(struct rpc_stream *s)
{
    struct rpc__conn *c = s->conn;
    if (s->ng_closed)
        return;
    s->ng_closed = true;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
    rpc__h2_call_drop(s); /* h2_stream.c: the request it kept */
    if (s->h1_call != NULL) { /* h1_stream.c: the connection died */
        s->h1_call->h1_stream = NULL;
        s->h1_call = NULL;
    }
    rpc__stream_tell_close(s, true);
    maybe_free(s);
}

/* --- background streams ---------------------------------------------------
 *
 * A stream marked background (a Watch) yields its connection to the other
 * calls on it.  HTTP/2 flow control alone lets a server put a whole
 * connection window of stream DATA (4 MiB from grpc's C core) in front of
 * a unary reply, and a client slower to read than the server is to write
 * keeps that window full: every Put response on the connection then waits
 * for the client to chew through megabytes of watch events first.  So
 * background streams keep at most a budget of bytes unacknowledged on the
 * connection (sent, not yet given back by the client's connection-level
 * WINDOW_UPDATE); past it they are deferred until an update comes.  Unary
 * replies and other streams are never held back.
 *
 * The budget must not stall a client that gives window back lazily, only
 * once it consumed some threshold T (grpc-go: a quarter of its window):
 * it is the larger of RPC_BG_INFLIGHT_MIN and a quarter of the largest
 * window the client ever gave plus a frame.  What may be unread is the
 * smaller of two upper bounds: that largest window minus the window now
 * (right for a client that gives back all it read), and what was sent
 * since the last probe answered.  The probe: a client may hold its window
 * back for other reasons (grpc's C core: the grpcio clients,
 * cetcd-bench, the grpc-proxy's upstream, gives it back only once it
 * fell to half of a target that shrinks while its streams' readers
 * pause), so when a stream is deferred the connection sends one PING
 * (rpc__conn_bg_probe, one unanswered at a time).  A client answers PINGs
 * in order, having read every frame sent before, so its ACK marks all
 * that as read (bg_mark: the window granted in all minus the bytes known
 * read).  Without it a Watch through the grpc-proxy stalled for a second
 * per doubling below (600k events in 6 s, not 0.5 s).  A connection
 * whose deferred streams saw no update for RPC_BG_STALL_SWEEPS keepalive
 * sweeps (a client that answers no PING either) doubles the budget
 * (rpc__conn_bg_sweep), so progress is certain for any client that reads:
 * the wait is bounded by about a second, once per doubling.
 *
 * The budget is tight while the connection carries other calls: from a
 * unary call or a foreground stream's send (rpc__conn_bg_foreground) until
 * RPC_BG_FG_SWEEPS keepalive sweeps without one, it is bg_tight (or the
 * doubled budget, if larger; never more than the lazy one), the lazy
 * quarter not counted: the probe keeps such a client going.  A Put's
 * reply then waits behind at most that, not a quarter of the client's
 * window (grpc's C core: 4 MiB, so 1 MiB; 100 Put clients beside 10 000
 * prefix watchers: 1.5k -> 2.5-4k puts/s, docs/BENCHMARKS.md session 37).
 * bg_tight is RPC_BG_TIGHT, or twice the bytes the network itself holds
 * if that is more (rpc__bg_tight: the rate of the last probe, what was in
 * flight over its round trip, times the smallest round trip seen, the
 * SETTINGS exchange's included): on a long link one budget per round
 * trip would cap a Watch (64 KiB per 10 ms: 6.4 MB/s), while a slow
 * reader's long round trips do not loosen it.  The lazy budget takes it
 * too when it is larger (a 20 ms round trip with a fast reader: 160 MB of
 * events in 1.2-1.3 s, against 1.8-1.9 s at a quarter of the window and
 * 3.6 s at 64 KiB; etcd 1.5 s: bench/watch_longlink.sh).  A connection
 * that carries only background streams (a mirror, a proxy's watch
 * connection) has nothing to protect and keeps the lazy budget. */

#define RPC_BG_INFLIGHT_MIN (256 * 1024) /* bytes */
#define RPC_BG_TIGHT (64 * 1024)          /* bytes, beside other calls */
#define RPC_BG_FRAME (16 * 1024)          /* one DATA frame */
/* Keepalive sweeps (SWEEP_MS, 250 ms) deferred without an update before
 * the budget doubles. */
#define RPC_BG_STALL_SWEEPS 4
/* Keepalive sweeps without another call before the budget is lazy again. */
#define RPC_BG_FG_SWEEPS 4

void rpc_stream_background(struct rpc_stream *s)
{
    assert(s != NULL);
    s->background = true;
}

static int32_t bg_budget(const struct rpc__conn *c)
{
    int32_t cap = c->bg_cap > RPC_BG_INFLIGHT_MIN ? c->bg_cap
                                                   : RPC_BG_INFLIGHT_MIN;
    int32_t lazy = c->win_max / 4 + RPC_BG_FRAME; /* grpc-go's T + a frame */
    int32_t loose = cap > lazy ? cap : lazy;
    if (c->bg_tight > loose) /* a long link holds more than that */
        loose = c->bg_tight;
    if (c->bg_fg == 0)
        return loose;
    /* Each term is also one of loose's: never above it. */
    int32_t tight = c->bg_tight > RPC_BG_TIGHT ? c->bg_tight : RPC_BG_TIGHT;
    return c->bg_cap > tight ? c->bg_cap : tight;
}

int32_t rpc__bg_tight(int64_t inflight, int64_t rtt_ns, int64_t min_rtt_ns)
{
    if (inflight <= 0 || rtt_ns <= 0 || min_rtt_ns <= 0 ||
        min_rtt_ns > rtt_ns)
        return RPC_BG_TIGHT;
    /* inflight / rtt is the rate; times min_rtt the network's share;
     * twice that keeps the link busy while the rate is probed upward. */
    double held = (double)inflight * (double)min_rtt_ns / (double)rtt_ns;
    double t = 2 * held;
    if (t <= RPC_BG_TIGHT)
        return RPC_BG_TIGHT;
    return t >= INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)t;
}

/* rtt_sample: one round trip of ours (a probe's or the SETTINGS'). */
static void rtt_sample(struct rpc__conn *c, int64_t rtt_ns)
{
    if (rtt_ns <= 0)
        rtt_ns = 1;
    if (c->bg_min_rtt_ns == 0 || rtt_ns < c->bg_min_rtt_ns)
        c->bg_min_rtt_ns = rtt_ns;
}

void rpc__conn_bg_settings_acked(struct rpc__conn *c)
{
    if (c->bg_settings_ns == 0)
        return;
    rtt_sample(c, rpc__now_ns() - c->bg_settings_ns);
    c->bg_settings_ns = 0;
}

void rpc__conn_bg_foreground(struct rpc__conn *c)
{
    c->bg_fg = RPC_BG_FG_SWEEPS;
}

/* bg_unread: the bytes that may be unread on c, its send window being r:
 * the smaller of the largest window's count and what was sent since the
 * bytes known read (bg_mark). */
static int64_t bg_unread(const struct rpc__conn *c, int32_t r)
{
    int64_t base = c->bg_mark < c->win_max ? c->bg_mark : c->win_max;
    return base - r;
}

/* bg_room: how many bytes background stream s may send now (0: defer). */
static size_t bg_room(struct rpc_stream *s, nghttp2_session *ng)
{
    struct rpc__conn *c = s->conn;
    int32_t r = nghttp2_session_get_remote_window_size(ng);
    if (r > c->win_max)
        c->win_max = r;
    int64_t used = bg_unread(c, r), cap = bg_budget(c);
    return used >= cap ? 0 : (size_t)(cap - used);
}

void rpc__conn_bg_update(struct rpc__conn *c, int32_t increment)
{
    int32_t r = nghttp2_session_get_remote_window_size(c->ng);
    if (r > c->win_max)
        c->win_max = r;
    c->bg_mark += increment;
    c->bg_probe_mark += increment;
    c->bg_updated = true;
    if (c->bg_waiting)
        rpc__conn_bg_resume(c);
}

void rpc__conn_bg_resume(struct rpc__conn *c)
{
    c->bg_waiting = false;
    for (struct rpc_stream *s = c->streams; s != NULL; s = s->next)
        if (s->bg_deferred) {
            s->bg_deferred = false;
            nghttp2_session_resume_data(c->ng, s->stream_id);
        }
    rpc__conn_mark_dirty(c);
}

/* The payload of the window probe (any 8 bytes of our own). */
static const uint8_t bg_probe_opaque[8] = {'c', 'e', 't', 'c',
                                           'd', 'w', 'i', 'n'};

bool rpc__conn_bg_probe(struct rpc__conn *c)
{
    if (!c->bg_waiting || c->bg_probe_out ||
        nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, bg_probe_opaque) != 0)
        return false;
    c->bg_probe_out = true;
    /* Every DATA frame gathered so far goes out before the PING: the
     * window now is what was granted minus what they make. */
    int32_t r = nghttp2_session_get_remote_window_size(c->ng);
    c->bg_probe_mark = r;
    c->bg_probe_inflight = bg_unread(c, r);
    c->bg_probe_ns = rpc__now_ns();
    return true;
}

void rpc__conn_bg_probe_ack(struct rpc__conn *c, const uint8_t opaque[8])
{
    if (!c->bg_probe_out ||
        memcmp(opaque, bg_probe_opaque, sizeof bg_probe_opaque) != 0)
        return;
    c->bg_probe_out = false;
    /* The tight budget from this round trip, measured against the
     * smallest one known before it (a first sample only sets that). */
    int64_t rtt = rpc__now_ns() - c->bg_probe_ns;
    bool known = c->bg_min_rtt_ns > 0;
    rtt_sample(c, rtt);
    if (known)
        c->bg_tight = rpc__bg_tight(c->bg_probe_inflight, rtt,
                                    c->bg_min_rtt_ns);
    /* Read up to the PING: what is unread was sent after it.  Progress,
     * as an update is, for the stall sweeps. */
    if (c->bg_probe_mark < c->bg_mark)
        c->bg_mark = c->bg_probe_mark;
    c->bg_updated = true;
    if (c->bg_waiting)
        rpc__conn_bg_resume(c);
}

void rpc__conn_bg_sweep(struct rpc__conn *c)
{
    if (c->bg_fg > 0 && --c->bg_fg == 0 && c->bg_waiting) {
        /* The lazy budget again: the deferred streams may have room. */
        c->bg_idle = 0;
        c->bg_updated = false;
        rpc__conn_bg_resume(c);
        return;
    }
    if (!c->bg_waiting || c->bg_updated) {
        c->bg_idle = 0;
    } else if (++c->bg_idle >= RPC_BG_STALL_SWEEPS) {
        /* Deferred that long without an update: the client may wait for
         * more before it gives any back (above). */
        int32_t cap = bg_budget(c);
        c->bg_cap = cap < INT32_MAX / 2 ? 2 * cap : INT32_MAX;
        c->bg_idle = 0;
        rpc__conn_bg_resume(c);
    }
    c->bg_updated = false;
}

/* schedule_locked: the loop must look at s; true when the caller must push
 * it (s->mu held). */
static bool schedule_locked(struct rpc_stream *s)
{
    if (s->scheduled)
        return false;
    s->scheduled = true;
    return true;
}

/* --- on_writable ----------------------------------------------------------
 *
 * A send refused with ERR_FULL sets writable_want (any thread, under mu)
 * when the owner has an on_writable (streams without one see no change).
 * stream_read, having taken whole messages off the queue (its count and
 * bytes only drop then), checks under the same lock whether the queue is
 * down to half its limits; if so it turns the want into writable_due and
 * pushes the stream onto its loop's inbox, where rpc__stream_inbox runs
 * ops->on_writable outside nghttp2's callbacks (the owner may send from
 * it, which resumes this very read).  A background stream's message
 * larger than half its byte bound may be refused again after that call
 * (it waits for an empty queue, as before): the refusal arms the next
 * call, due when the next message leaves the queue.
 * The stream is not pushed once its owner is gone: nobody would listen,
 * and a stream released and done with must not sit in the inbox. */

/* drained_locked: s's queue holds at most half of its limits (s->mu). */
static bool drained_locked(const struct rpc_stream *s)
{
    if (s->q_n > s->q_limit / 2)
        return false;
    return !s->background || s->q_bytes <= RPC_BG_QUEUE_BYTES / 2;
}

/* writable_check_locked: stream_read took messages off s's queue; true
 * when s must be pushed for its on_writable (s->mu held, loop). */
static bool writable_check_locked(struct rpc_stream *s)
{
    if (!s->writable_want || s->owner_gone || !drained_locked(s))
        return false;
    s->writable_want = false;
    s->writable_due = true;
    return schedule_locked(s);
}

/* tell_writable runs the owner's on_writable if one is due (loop, from the
 * inbox).  Not once on_close ran or the release was seen. */
static void tell_writable(struct rpc_stream *s)
{
    assert(!s->http);
    if (!s->writable_due)
        return;
    s->writable_due = false;
    if (s->close_told || s->owner_gone ||
        s->method->ops->on_writable == NULL)
        return;
    s->method->ops->on_writable(s, s->method->ctx);
}

/* stream_read feeds nghttp2 the queued messages as the window allows, then
 * the trailers once the owner finished. */
static ssize_t stream_read(nghttp2_session *ng, int32_t stream_id,
                           uint8_t *buf, size_t length, uint32_t *flags,
                           nghttp2_data_source *src, void *ud)
{
    struct rpc_stream *s = src->ptr;
    size_t done = 0;
    bool taken = false; /* a whole message left the queue */
    ssize_t rv;
    (void)ud;
    if (s->background) {
        size_t room = bg_room(s, ng);
        if (room < length)
            length = room;
    }
    pthread_mutex_lock(&s->mu);
    while (done < length && s->q_n > 0) {
        struct rpc__msg *m = &s->queue[s->q_head];
        size_t n = m->n - s->head_off;
        if (n > length - done)
            n = length - done;
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
            taken = true;
        }
    }
    rv = (ssize_t)done;
    if (!s->background && done > 0)
        rpc__conn_bg_foreground(s->conn);
    bool push = taken && writable_check_locked(s);
    if (s->q_n == 0 && s->finishing && !s->fin_submitted) {
        nghttp2_nv nv[2];
        char code_buf[12], msg_buf[1024];
        size_t k = rpc__status_nv(nv, s->fin_code, s->fin_msg, code_buf,
                                  msg_buf, sizeof(msg_buf));
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        s->fin_submitted = true;
        if (nghttp2_submit_trailer(ng, stream_id, nv, k) != 0)
            rv = NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    } else if (done == 0) {
        rv = NGHTTP2_ERR_DEFERRED;
        if (s->q_n > 0) { /* held back by the background budget */
            s->bg_deferred = true;
            s->conn->bg_waiting = true;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (push)
        rpc__loop_push(s->conn->loop, &s->item);
    return rv;
}

/* rpc__stream_inbox: the loop takes a stream someone sent on, finished or
 * released. */
void rpc__stream_inbox(struct rpc_stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->scheduled = false;
    bool release = s->release_req;
    s->release_req = false;
    bool work = s->q_n > 0 || s->finishing;
    pthread_mutex_unlock(&s->mu);
    if (release)
        s->owner_gone = true;
    struct rpc__conn *c = s->conn;
    if (s->h2) { /* h2_stream.c: an HTTP answer on an HTTP/2 stream */
        rpc__h2_call_drop(s); /* the handler has returned by now */
        if (work && !s->ng_closed && !c->dead)
            rpc__h2_http_pump(s);
        maybe_free(s);
        return;
    }
    if (s->http) {
        /* The pump may end s and free it (once released): then s is
         * gone; otherwise s is not freeable (the connection still has
         * it), unless the connection is done with it already. */
        if (work && !s->ng_closed && !c->dead)
            rpc__h1_pump(c);
        else
            maybe_free(s);
        return;
    }
    if (work && !s->ng_closed && !c->dead) {
        if (!s->headers_sent) {
            nghttp2_data_provider prd = {.source.ptr = s,
                                         .read_callback = stream_read};
            s->headers_sent = true;
            int rv = nghttp2_submit_response(c->ng, s->stream_id,
                                             rpc__resp_headers, 2, &prd);
            if (rv != 0)
                log_warn("rpc", "submit_response (stream): %s",
                         nghttp2_strerror(rv));
        } else {
            nghttp2_session_resume_data(c->ng, s->stream_id);
        }
        rpc__conn_mark_dirty(c);
    }
    tell_writable(s);
    maybe_free(s);
}

/* admit_locked: may n more bytes be queued on s under limit messages?
 * 0, ERR_CLOSED or ERR_FULL (s->mu held). */
static int admit_locked(const struct rpc_stream *s, size_t n, size_t limit)
{
    if (s->closed || s->finishing)
        return ERR_CLOSED;
    if (s->q_n >= limit)
        return ERR_FULL;
    /* Control sends (limit q_cap) count in the bytes but do not wait. */
    if (s->http && limit < s->q_cap && s->q_bytes > 0 &&
        s->q_bytes + n > H1_STREAM_BYTES_MAX)
        return ERR_FULL;
    /* A background stream yields its connection (bg_room), so what it
     * cannot send waits here: bounded in bytes too (a Watch falls back to
     * catching up from the store, as at 128 messages). */
    if (s->background && limit < s->q_cap && s->q_bytes > 0 &&
        s->q_bytes + n > RPC_BG_QUEUE_BYTES)
        return ERR_FULL;
    return 0;
}

int rpc__stream_queue(struct rpc_stream *s, uint8_t *p, size_t n,
                      size_t limit)
{
    assert(s != NULL && (p != NULL || n == 0));
    assert(limit <= s->q_cap);
    bool push = false;
    pthread_mutex_lock(&s->mu);
    int rv = admit_locked(s, n, limit);
    if (rv == ERR_FULL && !s->http && s->method->ops->on_writable != NULL) {
        s->writable_want = true; /* stream_read tells once it drained */
    } else if (rv == 0) {
        s->q_bytes += n;
        s->queue[(s->q_head + s->q_n) % s->q_cap] =
            (struct rpc__msg){.p = p, .n = n};
        s->q_n++;
        if (!s->http) {
            metrics_inc(&s->method->stats->msg_sent);
            metrics_add(&s->conn->loop->srv->tx_bytes, n - RPC__PREFIX);
        }
        push = schedule_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    if (push)
        rpc__loop_push(s->conn->loop, &s->item);
    return rv;
}

/* framed_queue queues len message bytes behind their 5-byte prefix,
 * written by fill (msg packed, or bytes copied) into a buffer of its own,
 * if fewer than limit are queued.  The one way gRPC stream sends go. */
static int framed_queue(struct rpc_stream *s, size_t len,
                        void (*fill)(uint8_t *dst, const void *src,
                                     size_t len),
                        const void *src, size_t limit)
{
    assert(s != NULL && !s->http);
    assert(fill != NULL && limit <= s->q_cap);
    if (len > UINT32_MAX)
        return ERR_INVAL;
    uint8_t *p = mem_malloc(len + RPC__PREFIX);
    if (p == NULL)
        return ERR_NOMEM;
    rpc__prefix_put(p, len);
    fill(p + RPC__PREFIX, src, len);
    int rv = rpc__stream_queue(s, p, len + RPC__PREFIX, limit);
    if (rv != 0)
        mem_free(p);
    return rv;
}

static void fill_packed(uint8_t *dst, const void *msg, size_t len)
{
    size_t packed = protobuf_c_message_pack(msg, dst);
    assert(packed == len);
    (void)packed, (void)len;
}

static void fill_copied(uint8_t *dst, const void *bytes, size_t len)
{
    if (len > 0)
        memcpy(dst, bytes, len);
}

/* queue_msg packs msg and queues it if fewer than limit are queued. */
static int queue_msg(struct rpc_stream *s, const ProtobufCMessage *msg,
                     size_t limit)
{
    assert(s != NULL && msg != NULL);
    return framed_queue(s, protobuf_c_message_get_packed_size(msg),
                        fill_packed, msg, limit);
}

int rpc_stream_send(struct rpc_stream *s, const ProtobufCMessage *msg)
{
    return queue_msg(s, msg, s->q_limit);
}

int rpc_stream_send_bytes(struct rpc_stream *s, const uint8_t *msg,
                          size_t len)
{
    assert(s != NULL && (msg != NULL || len == 0));
    return framed_queue(s, len, fill_copied, msg, s->q_limit);
}

int rpc_stream_send_ctrl(struct rpc_stream *s, const ProtobufCMessage *msg)
{
    return queue_msg(s, msg, s->q_cap);
}

int rpc_stream_finish(struct rpc_stream *s, grpc_status_code code,
                      const char *msg)
{
    assert(s != NULL);
    if (msg == NULL)
        msg = "";
    char *copy = mem_dup(msg, strlen(msg) + 1);
    int rv = 0;
    bool push = false;
    pthread_mutex_lock(&s->mu);
    if (s->closed || s->finishing) {
        rv = ERR_CLOSED;
    } else {
        s->finishing = true;
        s->fin_code = code;
        s->fin_msg = copy;
        copy = NULL;
        push = schedule_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    mem_free(copy);
    if (push)
        rpc__loop_push(s->conn->loop, &s->item);
    return rv;
}

const char *rpc_stream_metadata(const struct rpc_stream *s, const char *key,
                                size_t *len_out)
{
    assert(s != NULL);
    return rpc__hdrs_find(&s->hdrs, key, len_out);
}

const char *rpc_stream_peer_cn(const struct rpc_stream *s)
{
    assert(s != NULL);
    return s->conn->peer_cn; /* the stream holds a ref on its conn */
}

const char *rpc_stream_method(const struct rpc_stream *s)
{
    assert(s != NULL);
    return s->method->path;
}

void rpc_stream_data_set(struct rpc_stream *s, void *data)
{
    assert(s != NULL);
    s->data = data;
}

void *rpc_stream_data_get(const struct rpc_stream *s)
{
    assert(s != NULL);
    return s->data;
}

void rpc_stream_release(struct rpc_stream *s)
{
    assert(s != NULL);
    pthread_mutex_lock(&s->mu);
    assert(!s->release_req);
    s->release_req = true;
    bool push = schedule_locked(s);
    pthread_mutex_unlock(&s->mu);
    if (push)
        rpc__loop_push(s->conn->loop, &s->item);
}

void rpc_stream_count_as(struct rpc_stream *s, const char *method_path)
{
    assert(s != NULL && s->http && method_path != NULL);
    assert(s->count_as == NULL);
    s->count_as = rpc__method_find(rpc__count_srv(s->conn->loop->srv),
                                   (const uint8_t *)method_path,
                                   strlen(method_path));
    if (s->count_as == NULL)
        return;
    s->count_code = GRPC_STATUS_OK;
    s->start_ns = rpc__handling_start();
    metrics_inc(&s->count_as->stats->started);
}

void rpc_stream_count_msg(struct rpc_stream *s, bool sent)
{
    assert(s != NULL && s->http);
    if (s->count_as != NULL)
        metrics_inc(sent ? &s->count_as->stats->msg_sent
                         : &s->count_as->stats->msg_received);
}

void rpc_stream_count_code(struct rpc_stream *s, grpc_status_code code)
{
    assert(s != NULL && s->http);
    pthread_mutex_lock(&s->mu); /* read by the loop when it ends */
    s->count_code = code;
    pthread_mutex_unlock(&s->mu);
}

void rpc_stream_http_body(struct rpc_stream *s, rpc_http_body_fn fn)
{
    assert(s != NULL && s->http && fn != NULL && s->http_on_body == NULL);
    s->http_on_body = fn;
}
