/*
 * test_rpc.c - goal: the gRPC runtime's memory does not grow with the
 * number of calls a connection has carried (nghttp2 by default keeps
 * closed streams for its priority tree, as many as the concurrent streams
 * allowed, which are unbounded here as in etcd: 1M puts once grew the
 * member by 270 MiB), and every call is answered.
 *
 * Method: a real server (rpc_server_create) that is never started; the
 * test plays its one event loop, as fuzz/fuzz_rpc.c does.  A client
 * end of a socket pair sends the HTTP/2 preface, a connection window
 * update, then unary Range calls, 100 per write (HPACK literals); the
 * handler answers each at once.  The heap in use (mallinfo2, or the
 * sanitizer's allocator under ASan) after 3000 calls and after 15000 more
 * on the same connection must differ by less than 256 KiB (retained
 * streams would take some 200 bytes each, 3 MiB).
 *
 * test_background_yields: goal: a background stream (a Watch) keeps a
 * bounded number of bytes unacknowledged on its connection, so a unary
 * reply is not queued behind a connection window of its DATA, and it
 * never stalls: a client's WINDOW_UPDATE resumes it, and a client that
 * gives window back only lazily gets the budget doubled after a few
 * keepalive sweeps.  Same rig: the client announces a 4 MiB connection
 * window, opens a stream whose 160 queued messages of 16 KiB (2.5 MiB)
 * it does not acknowledge, then a unary call.  A deferred stream sends
 * one probe PING: its ACK (the client read everything before it) lets
 * the stream go on without any WINDOW_UPDATE (grpc's C core holds its
 * window back while its readers pause: a Watch through the grpc-proxy
 * stalled a second per doubling before).  Once the unary call came, the
 * budget is tight (64 KiB: a Put's reply waits behind less) until four
 * keepalive sweeps pass without another call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__)
/* The sanitizer runtime's (gcc ships no header declaring it). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include "rpc/rpc_int.h"
#include "rpc/tls.h"
#include "util/err.h"
#include "util/mem.h"

#include <openssl/ssl.h>

static long answered;

/* stream.c's RPC_BG_TIGHT: the background budget beside other calls. */
#define TIGHT (64 * 1024)

static void range(struct rpc_call *call, const uint8_t *req, size_t len,
                  void *ctx)
{
    (void)ctx;
    answered++;
    rpc_call_reply_bytes(call, req, len);
}

static size_t heap_bytes(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return __sanitizer_get_current_allocated_bytes();
#else
    return mallinfo2().uordblks;
#endif
}

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

/* call_frames writes one unary Range call on stream sid into o. */
static size_t call_frames(uint8_t *o, uint32_t sid)
{
    uint8_t h[256];
    size_t n = 0;
    n += literal(h + n, ":method", "POST");
    n += literal(h + n, ":scheme", "http");
    n += literal(h + n, ":path", "/etcdserverpb.KV/Range");
    n += literal(h + n, ":authority", "127.0.0.1:2379");
    n += literal(h + n, "content-type", "application/grpc");
    n += literal(h + n, "te", "trailers");
    static const uint8_t msg[] = {0, 0, 0, 0, 5, 0x0a, 0x03, 'f', 'o', 'o'};
    size_t w = frame(o, 1, 0x4, sid, h, n);         /* HEADERS, END_HEADERS */
    return w + frame(o + w, 0, 0x1, sid, msg, sizeof(msg)); /* DATA, END */
}

struct rig {
    struct rpc_server *srv;
    struct rpc__loop *loop;
    int client;
    uint32_t next_sid;
};

static void drain(int fd)
{
    uint8_t buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

/* send_all writes n bytes to the server and lets the loop turn until it
 * has read them all. */
static void send_all(struct rig *r, const uint8_t *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(r->client, p + off, n - off);
        if (w > 0)
            off += (size_t)w;
        assert_non_null(r->loop->conns);
        rpc__conn_io(r->loop->conns, EPOLLIN);
        rpc__loop_turn(r->loop);
        drain(r->client);
    }
    rpc__conn_io(r->loop->conns, EPOLLIN);
    rpc__loop_turn(r->loop);
    drain(r->client);
}

static void calls(struct rig *r, int n)
{
    static uint8_t buf[100 * 400];
    while (n > 0) {
        size_t len = 0;
        for (int i = 0; i < 100 && n > 0; i++, n--) {
            len += call_frames(buf + len, r->next_sid);
            r->next_sid += 2;
        }
        send_all(r, buf, len);
    }
}

static void test_memory_flat_over_calls(void **state)
{
    (void)state;
    struct rig r = {.next_sid = 1};
    struct rpc_server_config cfg = {.urls = {"http://127.0.0.1:0"},
                                    .urls_n = 1, .threads = 1};
    assert_int_equal(rpc_server_create(&cfg, &r.srv), 0);
    assert_int_equal(rpc_server_register_unary(
                         r.srv, "/etcdserverpb.KV/Range", range, NULL),
                     0);
    r.loop = &r.srv->loops[0];
    assert_int_equal(rpc__loop_init(r.srv, r.loop), 0);
    int fds[2];
    assert_int_equal(
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    r.client = fds[1];
    struct rpc__conn *c = rpc__conn_new(r.loop, fds[0], false);
    assert_non_null(c);
    rpc__conn_attach(c);
    uint8_t start[64];
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t n = sizeof(preface) - 1;
    memcpy(start, preface, n);
    n += frame(start + n, 4, 0, 0, NULL, 0); /* SETTINGS */
    static const uint8_t inc[] = {0x40, 0, 0, 0}; /* 2^30 */
    n += frame(start + n, 8, 0, 0, inc, 4);      /* WINDOW_UPDATE */
    send_all(&r, start, n);

    calls(&r, 3000);
    assert_int_equal(answered, 3000);
    size_t before = heap_bytes();
    calls(&r, 15000);
    assert_int_equal(answered, 18000);
    size_t after = heap_bytes();
    size_t grown = after > before ? after - before : 0;
    print_message("heap %zu -> %zu bytes over 15000 calls\n", before, after);
    assert_true(grown < 256 * 1024);

    close(r.client);
    while (r.loop->conns != NULL)
        rpc__conn_kill(r.loop->conns);
    rpc__loop_turn(r.loop);
    assert_int_equal(atomic_load(&r.srv->active_n), 0);
    rpc_server_close(r.srv);
}

/* --- background streams -------------------------------------------------- */

#define BG_MSG (16 * 1024)
#define BG_MSGS 160

static struct rpc_stream *bg_stream;

static void bg_queue(struct rpc_stream *s, int n)
{
    for (int i = 0; i < n; i++) {
        uint8_t *p = mem_malloc(RPC__PREFIX + BG_MSG);
        assert_non_null(p);
        rpc__prefix_put(p, BG_MSG);
        memset(p + RPC__PREFIX, 'w', BG_MSG);
        assert_int_equal(rpc__stream_queue(s, p, RPC__PREFIX + BG_MSG,
                                           s->q_cap),
                         0);
    }
}

static void bg_open(struct rpc_stream *s, void *ctx)
{
    (void)ctx;
    bg_stream = s;
    rpc_stream_background(s);
}

static void bg_message(struct rpc_stream *s, const uint8_t *m, size_t n,
                       void *ctx)
{
    (void)s, (void)m, (void)n, (void)ctx;
}

static void bg_close(struct rpc_stream *s, bool cancelled, void *ctx)
{
    (void)cancelled, (void)ctx;
    rpc_stream_release(s);
}

static const struct rpc_stream_ops bg_ops = {bg_open, bg_message, bg_close,
                                             RPC_TYPE_BIDI_STREAM};

/* What the client read: DATA bytes on the stream, the unary reply. */
struct bg_seen {
    uint8_t buf[1 << 16];
    size_t n;            /* partial frame bytes kept in buf */
    size_t data;         /* DATA payload bytes of stream 1 */
    bool unary_headers;  /* HEADERS on stream 3 */
    int pings;           /* PINGs (not ACKs) from the server */
    uint8_t ping[8];     /* the last one's payload */
};

static void bg_read(struct rig *r, struct bg_seen *v)
{
    for (;;) {
        ssize_t got = read(r->client, v->buf + v->n, sizeof(v->buf) - v->n);
        if (got <= 0)
            return;
        v->n += (size_t)got;
        size_t off = 0;
        while (v->n - off >= 9) {
            const uint8_t *h = v->buf + off;
            size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
            uint32_t sid = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
                            (uint32_t)h[7] << 8 | h[8]) & 0x7fffffffu;
            if (v->n - off < 9 + len)
                break;
            if (h[3] == 0 && sid == 1)
                v->data += len;
            if (h[3] == 1 && sid == 3)
                v->unary_headers = true;
            if (h[3] == 6 && (h[4] & 1) == 0 && len == 8) {
                v->pings++;
                memcpy(v->ping, h + 9, 8);
            }
            off += 9 + len;
        }
        memmove(v->buf, v->buf + off, v->n - off);
        v->n -= off;
    }
}

/* bg_turns lets the loop run (reads, inbox, writes) and reads its output. */
static void bg_turns(struct rig *r, struct bg_seen *v)
{
    for (int i = 0; i < 20; i++) {
        rpc__conn_io(r->loop->conns, EPOLLIN | EPOLLOUT);
        rpc__loop_turn(r->loop);
        bg_read(r, v);
    }
}

static void bg_send(struct rig *r, struct bg_seen *v, const uint8_t *p,
                    size_t n)
{
    assert_int_equal(write(r->client, p, n), (ssize_t)n);
    bg_turns(r, v);
}

static size_t window_update(uint8_t *o, uint32_t sid, uint32_t inc)
{
    const uint8_t b[4] = {(uint8_t)(inc >> 24), (uint8_t)(inc >> 16),
                          (uint8_t)(inc >> 8), (uint8_t)inc};
    return frame(o, 8, 0, sid, b, 4);
}

static void test_background_yields(void **state)
{
    (void)state;
    struct rig r = {0};
    struct rpc_server_config cfg = {.urls = {"http://127.0.0.1:0"},
                                    .urls_n = 1, .threads = 1,
                                    .stream_queue = BG_MSGS};
    assert_int_equal(rpc_server_create(&cfg, &r.srv), 0);
    assert_int_equal(rpc_server_register_unary(
                         r.srv, "/etcdserverpb.KV/Range", range, NULL),
                     0);
    assert_int_equal(rpc_server_register_stream(
                         r.srv, "/etcdserverpb.Watch/Watch", &bg_ops, NULL),
                     0);
    r.loop = &r.srv->loops[0];
    assert_int_equal(rpc__loop_init(r.srv, r.loop), 0);
    int fds[2];
    assert_int_equal(
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    int big = 8 << 20; /* the socket must not be what holds data back */
    setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    r.client = fds[1];
    struct rpc__conn *c = rpc__conn_new(r.loop, fds[0], false);
    assert_non_null(c);
    rpc__conn_attach(c);
    struct bg_seen *v = calloc(1, sizeof *v);
    assert_non_null(v);

    /* Preface, SETTINGS (stream windows of 64 MiB: only the connection's
     * budget limits), the connection window to 4 MiB. */
    uint8_t start[128];
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t n = sizeof(preface) - 1;
    memcpy(start, preface, n);
    static const uint8_t win[6] = {0, 4, 0x04, 0, 0, 0}; /* 64 MiB */
    n += frame(start + n, 4, 0, 0, win, sizeof win);
    n += window_update(start + n, 0, (4u << 20) - 65535u);
    bg_send(&r, v, start, n);

    /* The stream: HEADERS without END_STREAM; then its 2.5 MiB queued. */
    uint8_t h[256];
    size_t hn = 0;
    hn += literal(h + hn, ":method", "POST");
    hn += literal(h + hn, ":scheme", "http");
    hn += literal(h + hn, ":path", "/etcdserverpb.Watch/Watch");
    hn += literal(h + hn, ":authority", "127.0.0.1:2379");
    hn += literal(h + hn, "content-type", "application/grpc");
    hn += literal(h + hn, "te", "trailers");
    uint8_t out[512];
    bg_send(&r, v, out, frame(out, 1, 0x4, 1, h, hn));
    assert_non_null(bg_stream);
    bg_queue(bg_stream, BG_MSGS);
    bg_turns(&r, v);
    /* The budget: a quarter of the 4 MiB window plus a frame, well below
     * the 2.5 MiB queued and the 4 MiB the window allows (no other call
     * on the connection yet: the lazy budget, not the tight one). */
    size_t budget = (4u << 20) / 4 + 16 * 1024;
    print_message("background: %zu bytes sent unacknowledged\n", v->data);
    assert_true(v->data > TIGHT);
    assert_true(v->data <= budget);
    assert_true(c->bg_waiting);
    /* What waits is bounded in bytes too: a send past 1 MiB is refused
     * (control sends, as bg_queue's, may still pass). */
    uint8_t *extra = mem_malloc(RPC__PREFIX + BG_MSG);
    assert_non_null(extra);
    rpc__prefix_put(extra, BG_MSG);
    assert_int_equal(rpc__stream_queue(bg_stream, extra, RPC__PREFIX + BG_MSG,
                                       bg_stream->q_limit),
                     ERR_FULL);
    mem_free(extra);

    /* A unary call on the same connection is answered at once. */
    long answered0 = answered;
    size_t un = call_frames(out, 3);
    bg_send(&r, v, out, un);
    assert_true(v->unary_headers);
    assert_int_equal(answered, answered0 + 1);

    /* The probe: one PING went out when the stream was deferred.  Its ACK
     * says the client read everything sent before it: the stream goes on
     * without any WINDOW_UPDATE, at most a budget past the PING, and is
     * deferred again with a new probe out.  The budget is the tight one
     * now: the connection carries a unary call. */
    size_t first = v->data;
    assert_int_equal(v->pings, 1);
    assert_memory_equal(v->ping, "cetcdwin", 8);
    uint8_t ack[32];
    bg_send(&r, v, ack, frame(ack, 6, 0x1, 0, v->ping, 8));
    size_t second = v->data;
    print_message("background: %zu more after the probe's ACK\n",
                  second - first);
    assert_true(second > first);
    assert_true(second <= first + TIGHT + 64);
    assert_true(c->bg_waiting);
    assert_int_equal(v->pings, 2);
    /* An ACK of another PING (a keepalive's) changes nothing. */
    static const uint8_t zero[8] = {0};
    bg_send(&r, v, ack, frame(ack, 6, 0x1, 0, zero, 8));
    assert_int_equal(v->data, second);

    /* The client gives back what it read: the stream goes on, within the
     * budget of what the window says is unread. */
    /* Refilled: 2.5 MiB waiting, past every budget. */
    bg_queue(bg_stream, (int)(bg_stream->q_cap - bg_stream->q_n));
    bg_send(&r, v, out, window_update(out, 0, (uint32_t)second));
    size_t third = v->data;
    assert_true(third > second);
    assert_true(third <= second + TIGHT + 64);

    /* Four keepalive sweeps without another call: the lazy budget again,
     * and the deferred stream goes on at once. */
    assert_true(c->bg_waiting);
    assert_int_equal(v->pings, 2); /* the second still unanswered */
    rpc__conn_bg_sweep(c); /* the sweep that saw the update */
    for (int i = 0; i < 2; i++)
        rpc__conn_bg_sweep(c);
    bg_turns(&r, v);
    assert_int_equal(v->data, third); /* still tight */
    rpc__conn_bg_sweep(c);
    bg_turns(&r, v);
    size_t fourth = v->data;
    print_message("background: %zu more once lazy again\n", fourth - third);
    assert_true(fourth > third + TIGHT);
    assert_true(fourth <= second + budget + 64);

    /* A client that gives nothing back and answers no PING: after the
     * stall sweeps the budget doubles, and the stream goes on without
     * any update. */
    assert_true(c->bg_waiting);
    for (int i = 0; i < 3; i++)
        rpc__conn_bg_sweep(c);
    bg_turns(&r, v);
    assert_int_equal(v->data, fourth); /* not yet */
    rpc__conn_bg_sweep(c);
    bg_turns(&r, v);
    assert_true(v->data > fourth);
    assert_true(c->bg_cap >= (int32_t)(2 * budget));

    free(v);
    close(r.client);
    while (r.loop->conns != NULL)
        rpc__conn_kill(r.loop->conns);
    /* The lazy list (conn.c "Lazy answers": the WINDOW_UPDATEs above)
     * holds the connection until its due time; the loop's exit drains it
     * so. */
    rpc__conn_lazy_due(r.loop, true);
    rpc__loop_turn(r.loop);
    rpc_server_close(r.srv);
}

/* The tight background budget's size (rpc__bg_tight): twice what the
 * network holds at the last probe's rate, never below 64 KiB.  A slow
 * reader on a short link (round trips long only because the client is
 * busy) stays at 64 KiB; a fast one on a long link gets twice the bytes in
 * flight, so the budget doubles per round trip until the link or the
 * reader is the limit. */
static void test_background_tight_size(void **state)
{
    (void)state;
    const int64_t ms = 1000000;
    /* unknown inputs: the floor */
    assert_int_equal(rpc__bg_tight(0, 10 * ms, 10 * ms), TIGHT);
    assert_int_equal(rpc__bg_tight(TIGHT, 0, 10 * ms), TIGHT);
    assert_int_equal(rpc__bg_tight(TIGHT, 10 * ms, 0), TIGHT);
    assert_int_equal(rpc__bg_tight(TIGHT, 5 * ms, 10 * ms), TIGHT);
    /* localhost, a busy reader: 64 KiB took 5 ms, the link 50 us */
    assert_int_equal(rpc__bg_tight(TIGHT, 5 * ms, ms / 20), TIGHT);
    /* a 10 ms link and a reader that keeps up: doubling per round trip */
    assert_int_equal(rpc__bg_tight(TIGHT, 10 * ms, 10 * ms), 2 * TIGHT);
    assert_int_equal(rpc__bg_tight(4 * TIGHT, 10 * ms, 10 * ms), 8 * TIGHT);
    /* the same link once the reader is the limit (4 MiB took 40 ms):
     * twice its rate times the link, 2 MiB, not more */
    int32_t t = rpc__bg_tight(4 << 20, 40 * ms, 10 * ms);
    assert_int_equal(t, 2 << 20);
    /* bounded */
    assert_int_equal(rpc__bg_tight(INT64_MAX / 4, 10 * ms, 10 * ms),
                     INT32_MAX / 2);
}

/* test_h2_scan: goal: RST_STREAM and WINDOW_UPDATE frames for streams
 * the client never opened are taken out of what nghttp2 gets (it would
 * end the connection; grpc-go ignores them), every other byte reaches it
 * unchanged and in order, wherever the reads cut the frames. */
struct scan_out {
    uint8_t buf[512];
    size_t n;
    size_t calls;
    size_t fail_after; /* pass fails on this call (0: never) */
};

static bool scan_pass(void *ud, const uint8_t *p, size_t n)
{
    struct scan_out *o = ud;
    if (++o->calls == o->fail_after)
        return false;
    assert_true(n > 0 && o->n + n <= sizeof o->buf);
    memcpy(o->buf + o->n, p, n);
    o->n += n;
    return true;
}

static size_t scan_frame(uint8_t *p, uint8_t type, uint32_t id,
                         const char *payload, size_t len)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = 0;
    p[5] = (uint8_t)(id >> 24);
    p[6] = (uint8_t)(id >> 16);
    p[7] = (uint8_t)(id >> 8);
    p[8] = (uint8_t)id;
    memcpy(p + 9, payload, len);
    return 9 + len;
}

static void test_h2_scan(void **state)
{
    (void)state;
    /* the stream, and the bytes nghttp2 must get from it */
    static const struct {
        uint8_t type;
        uint32_t id;
        size_t len;
        bool drop;
    } fr[] = {
        {4, 0, 6, false},  /* SETTINGS */
        {3, 1, 4, true},   /* RST_STREAM before stream 1's HEADERS */
        {1, 1, 10, false}, /* HEADERS 1 */
        {8, 3, 4, true},   /* WINDOW_UPDATE, idle stream 3 */
        {8, 1, 4, false},  /* WINDOW_UPDATE, stream 1: open */
        {0, 1, 20, false}, /* DATA 1 */
        {8, 0, 4, false},  /* the connection's WINDOW_UPDATE */
        {3, 2, 4, true},   /* RST_STREAM, even: the server opens none */
        {3, 9, 5, false},  /* a bad length: nghttp2's error to answer */
        {3, 0, 4, false},  /* stream 0: nghttp2's error to answer */
        {0, 5, 3, false},  /* DATA on an idle stream: left to nghttp2 */
        {1, 7, 12, false}, /* HEADERS 7 */
        {3, 5, 4, false},  /* 5 < 7: closed, not idle */
        {3, 0x80000007, 4, false}, /* the reserved bit ignored: 7 */
        {3, 11, 4, true},  /* past 7: idle */
        {6, 0, 8, false},  /* PING */
    };
    static const char magic[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    static const char pay[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    uint8_t in[512], want[512];
    size_t in_n = 24, want_n = 24, drops = 0;
    memcpy(in, magic, 24);
    memcpy(want, magic, 24);
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) {
        size_t k = scan_frame(in + in_n, fr[i].type, fr[i].id, pay,
                              fr[i].len);
        if (fr[i].drop) {
            drops++;
        } else {
            memcpy(want + want_n, in + in_n, k);
            want_n += k;
        }
        in_n += k;
    }
    /* whole, in one read: one run per gap the drops leave */
    struct rpc__h2_scan s;
    struct scan_out o;
    memset(&s, 0, sizeof s);
    memset(&o, 0, sizeof o);
    assert_true(rpc__h2_scan(&s, in, in_n, scan_pass, &o));
    assert_int_equal(o.n, want_n);
    assert_memory_equal(o.buf, want, want_n);
    assert_int_equal(s.dropped, drops);
    assert_int_equal(o.calls, drops + 1);
    /* cut in two and in three at every place */
    for (size_t a = 0; a <= in_n; a++) {
        for (size_t b = a; b <= in_n; b += 7) {
            memset(&s, 0, sizeof s);
            memset(&o, 0, sizeof o);
            assert_true(rpc__h2_scan(&s, in, a, scan_pass, &o));
            assert_true(rpc__h2_scan(&s, in + a, b - a, scan_pass, &o));
            assert_true(rpc__h2_scan(&s, in + b, in_n - b, scan_pass, &o));
            assert_int_equal(o.n, want_n);
            assert_memory_equal(o.buf, want, want_n);
            assert_int_equal(s.dropped, drops);
        }
    }
    /* a byte per read */
    memset(&s, 0, sizeof s);
    memset(&o, 0, sizeof o);
    for (size_t i = 0; i < in_n; i++)
        assert_true(rpc__h2_scan(&s, in + i, 1, scan_pass, &o));
    assert_int_equal(o.n, want_n);
    assert_memory_equal(o.buf, want, want_n);
    /* a pass that fails (the connection died) stops the scan at once */
    memset(&s, 0, sizeof s);
    memset(&o, 0, sizeof o);
    o.fail_after = 2;
    assert_false(rpc__h2_scan(&s, in, in_n, scan_pass, &o));
    assert_int_equal(o.calls, 2);
}

/* --cipher-suites / --tls-min-version / --tls-max-version: Go's names to
 * OpenSSL's, etcd's messages for bad values. */
static void test_tls_opts_parse(void **state)
{
    (void)state;
    struct rpc_tls_opts o;
    char why[200];
    assert_int_equal(rpc_tls_opts_parse(NULL, NULL, NULL, &o, why,
                                        sizeof why), 0);
    assert_string_equal(o.ciphers, "");
    assert_int_equal(o.min_version, TLS1_2_VERSION);
    assert_int_equal(o.max_version, 0);
    assert_int_equal(
        rpc_tls_opts_parse("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
                           "TLS_AES_128_GCM_SHA256,"
                           "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
                           "TLS1.2", "TLS1.3", &o, why, sizeof why),
        0);
    assert_string_equal(o.ciphers, "ECDHE-RSA-AES128-GCM-SHA256:"
                                   "ECDHE-ECDSA-CHACHA20-POLY1305");
    assert_false(o.tls13_only_suites);
    assert_int_equal(o.max_version, TLS1_3_VERSION);
    /* Only TLS 1.3 names: TLS 1.2 is left without suites. */
    assert_int_equal(rpc_tls_opts_parse("TLS_AES_256_GCM_SHA384", "", "", &o,
                                        why, sizeof why), 0);
    assert_true(o.tls13_only_suites);
    assert_int_equal(o.min_version, TLS1_3_VERSION);
    assert_int_equal(rpc_tls_opts_parse("TLS_ECDHE_RSA_WITH_AES_128_GCM_"
                                        "SHA256,FOO", "", "", &o, why,
                                        sizeof why), ERR_INVAL);
    assert_string_equal(why, "unexpected TLS cipher suite \"FOO\"");
    assert_int_equal(rpc_tls_opts_parse("", "TLS1.1", "", &o, why,
                                        sizeof why), ERR_INVAL);
    assert_string_equal(why, "unexpected TLS version \"TLS1.1\" (must be "
                             "one of: TLS1.2, TLS1.3)");
    assert_int_equal(rpc_tls_opts_parse("", "TLS1.3", "TLS1.2", &o, why,
                                        sizeof why), ERR_INVAL);
    assert_string_equal(why, "min version (TLS1.3) is greater than max "
                             "version (TLS1.2)");
    assert_int_equal(rpc_tls_opts_parse("TLS_RSA_WITH_AES_128_CBC_SHA",
                                        "TLS1.3", "", &o, why, sizeof why),
                     ERR_INVAL);
    assert_string_equal(why, "cipher suites cannot be configured when only "
                             "TLS1.3 is enabled");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_flat_over_calls),
        cmocka_unit_test(test_tls_opts_parse),
        cmocka_unit_test(test_background_yields),
        cmocka_unit_test(test_background_tight_size),
        cmocka_unit_test(test_h2_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
