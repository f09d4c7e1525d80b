/*
 * test_rpc_writable.c - goal: the two additions a proxy needs from the
 * gRPC runtime work as rpc.h says: rpc_stream_send_bytes puts already
 * serialized messages on the wire byte for byte, in order with
 * rpc_stream_send's, counted alike (msg_sent, rpc_server_bytes); and
 * ops->on_writable runs once after a refused (ERR_FULL) send, when the
 * queue has drained to half its limits (messages; bytes for a background
 * stream; a background message over half the byte bound waits for the
 * one ahead to leave whole), never for a stream that was not refused and
 * never after on_close.
 *
 * Method: as test_rpc.c, a real server (rpc_server_create) that is never
 * started: the test plays its one event loop, and a client end of a
 * socket pair speaks raw HTTP/2 frames.  A client "stops reading" the way
 * a gRPC client does, by giving no flow-control window back; it "reads
 * again" with a WINDOW_UPDATE.  The last test starts the server for real
 * (one loop thread, a TCP port picked by the kernel) and has a producer
 * thread forward 300 messages with rpc_stream_send_bytes, waiting on
 * ERR_FULL for on_writable, as the proxy's upstream thread will, while a
 * slow client reads; every byte must arrive, in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/mem.h"

#define PATH "/etcdserverpb.Watch/Watch"
#define SIDS 8 /* client streams 1, 3, .. 15 */

/* --- what the owner saw, per stream ------------------------------------ */

struct wst {
    struct rpc_stream *s;  /* the stream, from on_open */
    int writable;          /* on_writable calls */
    int closed;            /* on_close calls */
    bool cancelled;        /* on_close's argument */
    bool after_close;      /* an on_writable came after on_close */
    size_t q_n_at;         /* queued messages at the last on_writable */
    size_t q_bytes_at;     /* queued bytes then */
    pthread_t thread;      /* where on_open ran */
    bool wrong_thread;     /* an on_writable ran elsewhere */
};

static struct wst wst[SIDS];
static int wst_n;
static bool open_background; /* mark the next streams background */
static bool hold_release;    /* on_close leaves the release to the test */
/* The threaded test's producer waits here for on_writable. */
static pthread_mutex_t w_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t w_cv = PTHREAD_COND_INITIALIZER;
static bool w_flag;

static void w_open(struct rpc_stream *s, void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&w_mu);
    assert_true(wst_n < SIDS);
    struct wst *w = &wst[wst_n++];
    w->s = s;
    w->thread = pthread_self();
    rpc_stream_data_set(s, w);
    if (open_background)
        rpc_stream_background(s);
    pthread_cond_broadcast(&w_cv);
    pthread_mutex_unlock(&w_mu);
}

static void w_message(struct rpc_stream *s, const uint8_t *m, size_t n,
                      void *ctx)
{
    (void)s, (void)m, (void)n, (void)ctx;
}

static void w_close(struct rpc_stream *s, bool cancelled, void *ctx)
{
    (void)ctx;
    struct wst *w = rpc_stream_data_get(s);
    pthread_mutex_lock(&w_mu);
    w->closed++;
    w->cancelled = cancelled;
    pthread_mutex_unlock(&w_mu);
    if (!hold_release)
        rpc_stream_release(s);
}

static void w_writable(struct rpc_stream *s, void *ctx)
{
    (void)ctx;
    struct wst *w = rpc_stream_data_get(s);
    pthread_mutex_lock(&s->mu);
    size_t q_n = s->q_n, q_bytes = s->q_bytes;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&w_mu);
    w->writable++;
    w->after_close |= w->closed > 0;
    w->wrong_thread |= !pthread_equal(w->thread, pthread_self());
    w->q_n_at = q_n;
    w->q_bytes_at = q_bytes;
    w_flag = true;
    pthread_cond_broadcast(&w_cv);
    pthread_mutex_unlock(&w_mu);
}

static const struct rpc_stream_ops w_ops = {
    .on_open = w_open,
    .on_message = w_message,
    .on_close = w_close,
    .on_writable = w_writable,
};

static void wst_reset(void)
{
    memset(wst, 0, sizeof wst);
    wst_n = 0;
    open_background = false;
    hold_release = false;
    w_flag = false;
}

/* --- raw HTTP/2 ---------------------------------------------------------- */

static size_t frame(uint8_t *o, uint8_t type, uint8_t flags, uint32_t sid,
                    const uint8_t *p, size_t n)
{
    o[0] = (uint8_t)(n >> 16);
    o[1] = (uint8_t)(n >> 8);
    o[2] = (uint8_t)n;
    o[3] = type;
    o[4] = flags;
    o[5] = (uint8_t)(sid >> 24);
    o[6] = (uint8_t)(sid >> 16);
    o[7] = (uint8_t)(sid >> 8);
    o[8] = (uint8_t)sid;
    if (n > 0)
        memcpy(o + 9, p, n);
    return 9 + n;
}

/* literal: an HPACK literal header without indexing (short strings). */
static size_t literal(uint8_t *o, const char *k, const char *v)
{
    size_t kn = strlen(k), vn = strlen(v);
    o[0] = 0;
    o[1] = (uint8_t)kn;
    memcpy(o + 2, k, kn);
    o[2 + kn] = (uint8_t)vn;
    memcpy(o + 3 + kn, v, vn);
    return 3 + kn + vn;
}

/* stream_headers: HEADERS opening a Watch call on sid, left open. */
static size_t stream_headers(uint8_t *o, uint32_t sid)
{
    uint8_t h[256];
    size_t n = 0;
    n += literal(h + n, ":method", "POST");
    n += literal(h + n, ":scheme", "http");
    n += literal(h + n, ":path", PATH);
    n += literal(h + n, ":authority", "127.0.0.1");
    n += literal(h + n, "content-type", "application/grpc");
    n += literal(h + n, "te", "trailers");
    return frame(o, 1, 0x4, sid, h, n); /* END_HEADERS */
}

static size_t window_update(uint8_t *o, uint32_t sid, uint32_t inc)
{
    const uint8_t b[4] = {(uint8_t)(inc >> 24), (uint8_t)(inc >> 16),
                          (uint8_t)(inc >> 8), (uint8_t)inc};
    return frame(o, 8, 0, sid, b, 4);
}

/* What the client read, per stream: DATA payload (gRPC messages with
 * their prefixes), trailers (HEADERS with END_STREAM), RST_STREAM. */
struct view {
    uint8_t in[1 << 17];   /* partial frame bytes */
    size_t in_n;           /* bytes in in */
    uint8_t *data[SIDS];   /* DATA payload of stream 2k+1 (malloc) */
    size_t data_n[SIDS];   /* its bytes */
    size_t data_cap[SIDS]; /* allocated */
    bool ended[SIDS];      /* trailers seen */
    size_t data_frames;    /* DATA frames of any stream */
};

static void view_data(struct view *v, uint32_t sid, const uint8_t *p,
                      size_t n)
{
    size_t k = sid / 2;
    if (v->data_n[k] + n > v->data_cap[k]) {
        size_t cap = v->data_cap[k] ? v->data_cap[k] : 65536;
        while (cap < v->data_n[k] + n)
            cap *= 2;
        v->data[k] = realloc(v->data[k], cap);
        assert_non_null(v->data[k]);
        v->data_cap[k] = cap;
    }
    memcpy(v->data[k] + v->data_n[k], p, n);
    v->data_n[k] += n;
}

/* view_frames takes the whole frames in v->in; each DATA frame's stream
 * and payload length go to on_data (may be NULL). */
static void view_frames(struct view *v,
                        void (*on_data)(uint32_t sid, size_t n, void *arg),
                        void *arg)
{
    size_t off = 0;
    while (v->in_n - off >= 9) {
        const uint8_t *h = v->in + off;
        size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        uint32_t sid = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
                        (uint32_t)h[7] << 8 | h[8]) & 0x7fffffffu;
        if (v->in_n - off < 9 + len)
            break;
        if (sid % 2 == 1 && sid / 2 < SIDS) {
            if (h[3] == 0) { /* DATA (no padding from nghttp2 here) */
                view_data(v, sid, h + 9, len);
                v->data_frames++;
                if (on_data != NULL)
                    on_data(sid, len, arg);
            }
            if (h[3] == 1 && (h[4] & 0x1))
                v->ended[sid / 2] = true;
        }
        off += 9 + len;
    }
    memmove(v->in, v->in + off, v->in_n - off);
    v->in_n -= off;
}

static void view_free(struct view *v)
{
    for (int k = 0; k < SIDS; k++)
        free(v->data[k]);
    free(v);
}

/* --- messages ------------------------------------------------------------ */

/* msg_fill: message i's len bytes, different for every i. */
static void msg_fill(uint8_t *p, size_t len, unsigned i)
{
    for (size_t j = 0; j < len; j++)
        p[j] = (uint8_t)(i * 131u + j * 7u + (j >> 9));
}

/* The wire bytes expected on one stream: each message behind its prefix. */
struct wire {
    uint8_t *p;
    size_t n, cap;
};

static void wire_add(struct wire *e, const uint8_t *m, size_t len)
{
    if (e->n + RPC__PREFIX + len > e->cap) {
        size_t cap = e->cap ? e->cap : 65536;
        while (cap < e->n + RPC__PREFIX + len)
            cap *= 2;
        e->p = realloc(e->p, cap);
        assert_non_null(e->p);
        e->cap = cap;
    }
    rpc__prefix_put(e->p + e->n, len);
    if (len > 0)
        memcpy(e->p + e->n + RPC__PREFIX, m, len);
    e->n += RPC__PREFIX + len;
}

static void wire_check(const struct wire *e, const struct view *v,
                         uint32_t sid)
{
    assert_int_equal(v->data_n[sid / 2], e->n);
    if (e->n > 0)
        assert_memory_equal(v->data[sid / 2], e->p, e->n);
}

/* --- the rig: a server whose loop the test plays ----------------------- */

struct rig {
    struct rpc_server *srv;
    struct rpc__loop *loop;
    int client;
    struct view *v;
};

static void rig_read(struct rig *r)
{
    for (;;) {
        struct view *v = r->v;
        ssize_t got = read(r->client, v->in + v->in_n,
                           sizeof(v->in) - v->in_n);
        if (got <= 0)
            return;
        v->in_n += (size_t)got;
        view_frames(v, NULL, NULL);
    }
}

/* rig_turns lets the loop run (reads, inbox, writes); the client reads. */
static void rig_turns(struct rig *r, int n)
{
    for (int i = 0; i < n; i++) {
        if (r->loop->conns != NULL)
            rpc__conn_io(r->loop->conns, EPOLLIN | EPOLLOUT);
        rpc__loop_turn(r->loop);
        rig_read(r);
    }
}

static void rig_send(struct rig *r, const uint8_t *p, size_t n)
{
    assert_int_equal(write(r->client, p, n), (ssize_t)n);
    rig_turns(r, 10);
}

/* rig_open: a server with a send queue of queue messages and one client
 * connection that sent its preface and default SETTINGS (windows of
 * 65535 bytes, never widened unless a test says so). */
static void rig_open(struct rig *r, int queue)
{
    wst_reset();
    memset(r, 0, sizeof *r);
    struct rpc_server_config cfg = {.urls = {"http://127.0.0.1:0"},
                                    .urls_n = 1, .threads = 1,
                                    .stream_queue = queue};
    assert_int_equal(rpc_server_create(&cfg, &r->srv), 0);
    assert_int_equal(rpc_server_register_stream(r->srv, PATH, &w_ops, NULL),
                     0);
    r->loop = &r->srv->loops[0];
    assert_int_equal(rpc__loop_init(r->srv, r->loop), 0);
    int fds[2];
    assert_int_equal(
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    int big = 8 << 20; /* the socket must not be what holds data back */
    setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    r->client = fds[1];
    struct rpc__conn *c = rpc__conn_new(r->loop, fds[0], false);
    assert_non_null(c);
    rpc__conn_attach(c);
    r->v = calloc(1, sizeof *r->v);
    assert_non_null(r->v);
    uint8_t start[64];
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t n = sizeof(preface) - 1;
    memcpy(start, preface, n);
    n += frame(start + n, 4, 0, 0, NULL, 0); /* SETTINGS */
    rig_send(r, start, n);
}

/* rig_stream opens client stream sid; returns the owner's view of it. */
static struct wst *rig_stream(struct rig *r, uint32_t sid)
{
    int before = wst_n;
    uint8_t out[512];
    rig_send(r, out, stream_headers(out, sid));
    assert_int_equal(wst_n, before + 1);
    return &wst[before];
}

/* rig_window gives inc bytes of window to the connection and stream sid. */
static void rig_window(struct rig *r, uint32_t sid, uint32_t inc)
{
    uint8_t out[64];
    size_t n = window_update(out, 0, inc);
    n += window_update(out + n, sid, inc);
    rig_send(r, out, n);
}

static void rig_close(struct rig *r)
{
    close(r->client);
    while (r->loop->conns != NULL)
        rpc__conn_kill(r->loop->conns);
    rpc__conn_lazy_due(r->loop, true);
    rpc__loop_turn(r->loop);
    assert_int_equal(atomic_load(&r->srv->streams_n), 0);
    rpc_server_close(r->srv);
    view_free(r->v);
}

/* fill_until_full sends message after message (len bytes, numbered from
 * *next) on s, with the loop turning in between if turn, until one is
 * refused; the accepted ones go to e.  Returns how many were accepted. */
static int fill_until_full(struct rig *r, struct rpc_stream *s, size_t len,
                           bool turn, unsigned *next, struct wire *e)
{
    uint8_t *m = malloc(len);
    assert_non_null(m);
    int sent = 0;
    for (;;) {
        msg_fill(m, len, *next);
        int rv = rpc_stream_send_bytes(s, m, len);
        if (rv == ERR_FULL)
            break;
        assert_int_equal(rv, 0);
        wire_add(e, m, len);
        (*next)++;
        sent++;
        assert_true(sent < 1000);
        if (turn)
            rig_turns(r, 2);
    }
    free(m);
    return sent;
}

/* queued: the messages s has in its send queue now. */
static size_t queued(struct rpc_stream *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->q_n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* --- metrics ------------------------------------------------------------- */

static void sent_of(const struct rpc_method_metrics *m, void *ctx)
{
    if (strcmp(m->path, PATH) == 0)
        *(uint64_t *)ctx = m->msg_sent;
}

static uint64_t msg_sent(const struct rpc_server *srv)
{
    uint64_t n = 0;
    rpc_server_metrics(srv, sent_of, &n);
    return n;
}

/* --- rpc_stream_send_bytes ------------------------------------------------ */

/* Goal: the bytes arrive as given, in order with rpc_stream_send's (a
 * message packed by the runtime and the same message passed as bytes are
 * the same on the wire), and are counted as rpc_stream_send counts. */
static void test_send_bytes_identical(void **state)
{
    (void)state;
    struct rig r;
    rig_open(&r, 16);
    struct wst *w = rig_stream(&r, 1);
    struct wire e = {0};
    uint64_t rx0, tx0, tx1;
    rpc_server_bytes(r.srv, &rx0, &tx0);
    uint64_t sent0 = msg_sent(r.srv);

    assert_int_equal(rpc_stream_send_bytes(w->s, NULL, 0), 0);
    wire_add(&e, NULL, 0);
    assert_int_equal(rpc_stream_send_bytes(w->s, (const uint8_t *)"abc", 3),
                     0);
    wire_add(&e, (const uint8_t *)"abc", 3);
    static uint8_t big[40000];
    msg_fill(big, sizeof big, 7);
    assert_int_equal(rpc_stream_send_bytes(w->s, big, sizeof big), 0);
    wire_add(&e, big, sizeof big);
    /* A real message both ways. */
    Etcdserverpb__WatchResponse wr = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    wr.watch_id = 42;
    wr.created = true;
    uint8_t packed[64];
    size_t pn = protobuf_c_message_pack(&wr.base, packed);
    assert_int_equal(rpc_stream_send(w->s, &wr.base), 0);
    wire_add(&e, packed, pn);
    assert_int_equal(rpc_stream_send_bytes(w->s, packed, pn), 0);
    wire_add(&e, packed, pn);

    rpc_server_bytes(r.srv, &rx0, &tx1);
    assert_int_equal(tx1 - tx0, 0 + 3 + sizeof big + 2 * pn);
    assert_int_equal(msg_sent(r.srv) - sent0, 5);

    rig_turns(&r, 5); /* all within the first 64 KiB of window */
    wire_check(&e, r.v, 1);
    assert_int_equal(rpc_stream_finish(w->s, GRPC_STATUS_OK, NULL), 0);
    assert_int_equal(rpc_stream_send_bytes(w->s, packed, pn), ERR_CLOSED);
    rig_turns(&r, 5);
    assert_true(r.v->ended[0]);
    assert_int_equal(w->closed, 1);
    assert_int_equal(w->writable, 0); /* never refused */
    free(e.p);
    rig_close(&r);
}

/* --- on_writable ---------------------------------------------------------- */

#define MSG (16 * 1024)

/* send_small sends two messages of 100 bytes on s (added to e). */
static void send_small(struct rig *r, struct rpc_stream *s, struct wire *e)
{
    for (unsigned i = 0; i < 2; i++) {
        uint8_t m[100];
        msg_fill(m, sizeof m, 1000u + i);
        assert_int_equal(rpc_stream_send_bytes(s, m, sizeof m), 0);
        wire_add(e, m, sizeof m);
    }
    rig_turns(r, 3);
}

/* Goal: a client that stops reading makes sends fail with ERR_FULL and
 * on_writable stays quiet; once it reads again, on_writable runs once
 * (for two refusals), with the queue at most half full, and sends go on.
 * A stream beside it that was never refused gets no on_writable. */
static void test_writable_after_full(void **state)
{
    (void)state;
    struct rig r;
    rig_open(&r, 8);
    struct wst *w1 = rig_stream(&r, 1);
    struct wst *w3 = rig_stream(&r, 3);
    struct wire e1 = {0}, e3 = {0};
    unsigned next = 0;

    send_small(&r, w3->s, &e3); /* never refused */

    /* Stream 1 fills the 64 KiB window, then its queue of 8. */
    int sent = fill_until_full(&r, w1->s, MSG, true, &next, &e1);
    print_message("accepted %d messages before ERR_FULL\n", sent);
    assert_true(sent >= 8);
    Etcdserverpb__WatchResponse wr = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    assert_int_equal(rpc_stream_send(w1->s, &wr.base), ERR_FULL);
    rig_turns(&r, 10);
    assert_int_equal(w1->writable, 0); /* nothing drained */

    /* The client reads again, a message's worth at a time: no call while
     * more than half of the 8 are queued, one call once half are. */
    int steps = 0;
    for (; steps < 20; steps++) {
        rig_window(&r, 1, RPC__PREFIX + MSG);
        if (queued(w1->s) <= 8 / 2)
            break;
        assert_int_equal(w1->writable, 0);
    }
    print_message("on_writable after %d window steps\n", steps + 1);
    assert_true(steps > 0 && steps < 20);
    assert_int_equal(w1->writable, 1);
    assert_true(w1->q_n_at <= 8 / 2);
    assert_false(w1->wrong_thread);
    rig_window(&r, 1, 16u << 20);
    assert_int_equal(w1->writable, 1);
    uint8_t m[MSG];
    for (int i = 0; i < 8; i++) { /* the whole queue is free again */
        msg_fill(m, sizeof m, next++);
        assert_int_equal(rpc_stream_send_bytes(w1->s, m, sizeof m), 0);
        wire_add(&e1, m, sizeof m);
    }
    rig_turns(&r, 10);
    assert_int_equal(w1->writable, 1); /* no refusal since */
    wire_check(&e1, r.v, 1);
    wire_check(&e3, r.v, 3);

    /* A second refusal gets a second call: the window is wide now, so
     * the queue fills only while the loop does not turn. */
    sent = fill_until_full(&r, w1->s, MSG, false, &next, &e1);
    assert_int_equal(sent, 8);
    rig_turns(&r, 5);
    assert_int_equal(w1->writable, 2);
    wire_check(&e1, r.v, 1);

    assert_int_equal(rpc_stream_finish(w1->s, GRPC_STATUS_OK, NULL), 0);
    assert_int_equal(rpc_stream_finish(w3->s, GRPC_STATUS_OK, NULL), 0);
    rig_turns(&r, 5);
    assert_int_equal(w1->closed, 1);
    assert_int_equal(w3->closed, 1);
    assert_int_equal(w1->writable, 2);
    assert_int_equal(w3->writable, 0);
    free(e1.p);
    free(e3.p);
    rig_close(&r);
}

/* Goal: a background stream is refused on its byte bound (1 MiB) long
 * before its message count, and on_writable waits until at most half of
 * those bytes are queued. */
static void test_writable_background_bytes(void **state)
{
    (void)state;
    struct rig r;
    rig_open(&r, 128);
    open_background = true;
    struct wst *w = rig_stream(&r, 1);
    struct wire e = {0};
    unsigned next = 0;
    size_t len = 200 * 1024;
    int sent = fill_until_full(&r, w->s, len, true, &next, &e);
    print_message("background: %d messages of 200 KiB before ERR_FULL\n",
                  sent);
    assert_true(sent >= 5 && sent < 16);
    rig_turns(&r, 5);
    assert_int_equal(w->writable, 0);
    for (int i = 0; i < 50 && w->writable == 0; i++)
        rig_window(&r, 1, 1u << 20); /* as the client reads */
    assert_int_equal(w->writable, 1);
    assert_true(w->q_bytes_at <= RPC_BG_QUEUE_BYTES / 2);
    uint8_t *m = malloc(len);
    assert_non_null(m);
    msg_fill(m, len, next++);
    assert_int_equal(rpc_stream_send_bytes(w->s, m, len), 0);
    wire_add(&e, m, len);
    free(m);
    for (int i = 0; i < 50 && r.v->data_n[0] < e.n; i++)
        rig_window(&r, 1, 1u << 20);
    wire_check(&e, r.v, 1);
    assert_int_equal(w->writable, 1);
    assert_int_equal(rpc_stream_finish(w->s, GRPC_STATUS_OK, NULL), 0);
    rig_turns(&r, 5);
    assert_int_equal(w->closed, 1);
    free(e.p);
    rig_close(&r);
}

/* queued_bytes: the bytes s has in its send queue now. */
static size_t queued_bytes(struct rpc_stream *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->q_bytes;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Goal: a background stream's message over half its byte bound, refused
 * behind one being sent, is told writable only once that one left the
 * queue whole (its bytes drop only then), so the retry passes; there is
 * no call per partial write in between. */
static void test_writable_big_message(void **state)
{
    (void)state;
    struct rig r;
    rig_open(&r, 128);
    open_background = true;
    struct wst *w = rig_stream(&r, 1);
    struct wire e = {0};
    size_t a_len = 400 * 1024, b_len = 700 * 1024;
    uint8_t *a = malloc(a_len), *b = malloc(b_len);
    assert_non_null(a);
    assert_non_null(b);
    msg_fill(a, a_len, 1);
    msg_fill(b, b_len, 2);
    assert_int_equal(rpc_stream_send_bytes(w->s, a, a_len), 0);
    wire_add(&e, a, a_len);
    rig_turns(&r, 3); /* its first 64 KiB go out */
    assert_int_equal(rpc_stream_send_bytes(w->s, b, b_len), ERR_FULL);
    int steps = 0;
    for (; steps < 100 && queued_bytes(w->s) > 0; steps++) {
        assert_int_equal(w->writable, 0);
        rig_window(&r, 1, 16 * 1024); /* the client reads 16 KiB more */
    }
    print_message("big message: on_writable after %d window steps\n",
                  steps);
    assert_true(steps > 1 && steps < 100);
    assert_int_equal(w->writable, 1);
    assert_int_equal(rpc_stream_send_bytes(w->s, b, b_len), 0);
    wire_add(&e, b, b_len);
    rig_window(&r, 1, 4u << 20);
    wire_check(&e, r.v, 1);
    assert_int_equal(w->writable, 1);
    assert_int_equal(rpc_stream_finish(w->s, GRPC_STATUS_OK, NULL), 0);
    rig_turns(&r, 5);
    assert_int_equal(w->closed, 1);
    free(a);
    free(b);
    free(e.p);
    rig_close(&r);
}

/* Goal: on_writable never comes after on_close: a refused stream that
 * finishes (its queue drains, then its trailers end it) and a refused
 * stream the client resets get no call. */
static void test_no_writable_after_close(void **state)
{
    (void)state;
    struct rig r;
    rig_open(&r, 8);
    hold_release = true; /* a release seen would silence it anyway */
    struct wst *w1 = rig_stream(&r, 1);
    struct wst *w3 = rig_stream(&r, 3);
    struct wire e1 = {0}, e3 = {0};
    unsigned next = 0;
    /* Small messages: what is left after the refusal (8 KiB) and the
     * trailers go out in one write, so the loop's inbox, where a due
     * on_writable would run, comes only after on_close. */
    fill_until_full(&r, w1->s, 1024, true, &next, &e1);
    assert_int_equal(rpc_stream_finish(w1->s, GRPC_STATUS_OK, NULL), 0);
    rig_window(&r, 1, 16u << 20);
    rig_turns(&r, 10);
    wire_check(&e1, r.v, 1);
    assert_true(r.v->ended[0]);
    assert_int_equal(w1->closed, 1);
    assert_int_equal(w1->writable, 0);

    /* Stream 3 has the connection's window left over from stream 1. */
    fill_until_full(&r, w3->s, 1024, true, &next, &e3);
    uint8_t rst[16];
    static const uint8_t cancel[4] = {0, 0, 0, 8}; /* CANCEL */
    rig_send(&r, rst, frame(rst, 3, 0, 3, cancel, 4));
    assert_int_equal(w3->closed, 1);
    assert_true(w3->cancelled);
    rig_window(&r, 3, 16u << 20);
    rig_turns(&r, 10);
    assert_int_equal(w3->writable, 0);
    assert_false(w1->after_close || w3->after_close);
    rpc_stream_release(w1->s);
    rpc_stream_release(w3->s);
    rig_turns(&r, 2);
    free(e1.p);
    free(e3.p);
    rig_close(&r);
}

/* --- a started server, a producer thread, a slow client ------------------ */

#define T_MSGS 300

static size_t t_len(unsigned i)
{
    return 1 + (i * 7919u) % 30000u;
}

/* What the producer thread did. */
struct producer {
    struct rpc_stream *s; /* the stream it forwards to */
    int full;             /* ERR_FULL answers, each waited out */
    int timeouts;         /* waits that on_writable never ended */
    int errors;           /* other failures */
};

/* producer_main forwards T_MSGS messages as the proxy's upstream thread
 * would: on ERR_FULL it waits for on_writable, then sends again. */
static void *producer_main(void *arg)
{
    struct producer *p = arg;
    uint8_t *m = malloc(30001);
    if (m == NULL)
        return NULL;
    for (unsigned i = 0; i < T_MSGS && p->timeouts == 0; i++) {
        msg_fill(m, t_len(i), i);
        int rv;
        while ((rv = rpc_stream_send_bytes(p->s, m, t_len(i))) == ERR_FULL) {
            p->full++;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 10;
            pthread_mutex_lock(&w_mu);
            int wr = 0;
            while (!w_flag && wr == 0)
                wr = pthread_cond_timedwait(&w_cv, &w_mu, &until);
            bool got = w_flag;
            w_flag = false;
            pthread_mutex_unlock(&w_mu);
            if (!got) {
                p->timeouts++;
                break;
            }
        }
        if (rv != 0 && rv != ERR_FULL)
            p->errors++;
    }
    if (rpc_stream_finish(p->s, GRPC_STATUS_OK, NULL) != 0)
        p->errors++;
    free(m);
    return NULL;
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* give_back: the client read a DATA frame of n bytes: it returns the
 * window (connection and stream), as a gRPC client that consumed it. */
static void give_back(uint32_t sid, size_t n, void *arg)
{
    if (n == 0)
        return;
    uint8_t out[32];
    size_t k = window_update(out, 0, (uint32_t)n);
    k += window_update(out + k, sid, (uint32_t)n);
    write_all(*(int *)arg, out, k);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* client_read reads until stream 1's trailers, pausing now and then as a
 * slow reader; false on a 30 s silence. */
static bool client_read(int fd, struct view *v)
{
    size_t paused_at = 0;
    while (!v->ended[0]) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 30000) <= 0)
            return false;
        ssize_t got = read(fd, v->in + v->in_n, sizeof(v->in) - v->in_n);
        if (got <= 0)
            return false;
        v->in_n += (size_t)got;
        view_frames(v, give_back, &fd);
        if (v->data_frames >= paused_at + 64) {
            paused_at = v->data_frames;
            usleep(20 * 1000); /* the queue fills meanwhile */
        }
    }
    return true;
}

/* Goal: the proxy's pattern across threads: every message forwarded
 * arrives whole and in order, each ERR_FULL is ended by exactly one
 * on_writable, which runs on the stream's loop. */
static void test_writable_threads(void **state)
{
    (void)state;
    wst_reset();
    struct rpc_server *srv;
    struct rpc_server_config cfg = {.urls = {"http://127.0.0.1:0"},
                                    .urls_n = 1, .threads = 1,
                                    .stream_queue = 16};
    assert_int_equal(rpc_server_create(&cfg, &srv), 0);
    assert_int_equal(rpc_server_register_stream(srv, PATH, &w_ops, NULL), 0);
    assert_int_equal(rpc_server_start(srv), 0);
    int fd = connect_to(rpc_server_port(srv, 0));
    uint8_t start[512];
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t n = sizeof(preface) - 1;
    memcpy(start, preface, n);
    n += frame(start + n, 4, 0, 0, NULL, 0);
    n += stream_headers(start + n, 1);
    write_all(fd, start, n);

    pthread_mutex_lock(&w_mu);
    while (wst_n == 0)
        pthread_cond_wait(&w_cv, &w_mu);
    struct producer p = {.s = wst[0].s};
    pthread_mutex_unlock(&w_mu);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, producer_main, &p), 0);
    usleep(200 * 1000); /* not reading yet: the queue fills */
    struct view *v = calloc(1, sizeof *v);
    assert_non_null(v);
    bool done = client_read(fd, v);
    pthread_join(t, NULL);
    print_message("threads: %d ERR_FULL, %d on_writable\n", p.full,
                  wst[0].writable);
    assert_true(done);
    assert_int_equal(p.timeouts, 0);
    assert_int_equal(p.errors, 0);
    assert_true(p.full > 0);
    struct wire e = {0};
    uint8_t *m = malloc(30001);
    assert_non_null(m);
    for (unsigned i = 0; i < T_MSGS; i++) {
        msg_fill(m, t_len(i), i);
        wire_add(&e, m, t_len(i));
    }
    free(m);
    wire_check(&e, v, 1);
    close(fd);
    rpc_server_close(srv); /* on_close released the stream */
    pthread_mutex_lock(&w_mu);
    assert_int_equal(wst[0].writable, p.full);
    assert_int_equal(wst[0].closed, 1);
    assert_false(wst[0].wrong_thread);
    assert_false(wst[0].after_close);
    pthread_mutex_unlock(&w_mu);
    free(e.p);
    view_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_send_bytes_identical),
        cmocka_unit_test(test_writable_after_full),
        cmocka_unit_test(test_writable_background_bytes),
        cmocka_unit_test(test_writable_big_message),
        cmocka_unit_test(test_no_writable_after_close),
        cmocka_unit_test(test_writable_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
