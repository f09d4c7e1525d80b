/*
 * fuzz_rpc.c - goal: the gRPC server runtime (src/rpc/)
 * survives any bytes a client sends on a connection, with no crash, leak
 * or sanitizer report: HTTP/2 frames (nghttp2), request headers
 * (grpc-timeout, grpc-encoding, :path, metadata), the 5-byte gRPC message
 * framing of unary requests and of stream messages, resets and closes at
 * any point; and that every call handed to a handler was complete and
 * within the size limit, and every stream object is freed once its owner
 * released it.
 *
 * Method: a real server (rpc_server_create, 64 KiB request limit) that is
 * never started: the target plays its one event loop itself.  Each input
 * is written, after the HTTP/2 client preface, into one end of a socket
 * pair whose other end is a connection of that loop; the target calls the
 * loop's reading (rpc__conn_io) and its turn (dispatch, inbox, writes)
 * until every byte was read, reads away what the server wrote, then
 * closes the connection and turns once more.  Handlers: KV/Range echoes
 * the request, KV/Put answers an error whose message needs escaping after
 * looking at metadata and the deadline, Watch/Watch answers each message
 * and finishes when the client half-closes; its owner releases the stream
 * in on_close.  An input whose first byte is 0xff is written raw, without
 * the preface: sniffing and HTTP/1.x (h1.c), served by an HTTP handler that
 * echoes bodies and holds "/late" requests to answer them after the turn,
 * newest first (pipelined answers out of order); non-gRPC HTTP/2 requests
 * reach it too.  Seeds: fuzz/corpus/rpc (fuzz/rpc_seeds.py; the h1_* ones
 * by hand).
 */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/rpc_int.h"
#include "etcdserverpb/rpc.pb-c.h"

#define MAX_REQ (64 * 1024)
#define INPUT_MAX (256 * 1024)

static struct rpc_server *srv;
static struct rpc__loop *loop;
static long streams_open;

static void range(struct rpc_call *call, const uint8_t *req, size_t len,
                  void *ctx)
{
    (void)ctx;
    /* The runtime promises a whole message within the limit. */
    if (len > srv->max_recv_bytes)
        abort();
    rpc_call_reply_bytes(call, req, len);
}

static void put(struct rpc_call *call, const uint8_t *req, size_t len,
                void *ctx)
{
    size_t n = 0;
    (void)req;
    (void)len;
    (void)ctx;
    const char *tok = rpc_call_metadata(call, "token", &n);
    if (tok != NULL && strlen(tok) != n)
        abort();
    (void)rpc_call_deadline_ns(call);
    rpc_call_reply_error(call, GRPC_STATUS_INVALID_ARGUMENT,
                         "bad % put\n\x01\xff");
}

static void w_open(struct rpc_stream *s, void *ctx)
{
    (void)ctx;
    streams_open++;
    rpc_stream_data_set(s, &streams_open);
}

static void w_message(struct rpc_stream *s, const uint8_t *msg, size_t len,
                      void *ctx)
{
    (void)ctx;
    if (msg == NULL) {
        rpc_stream_finish(s, GRPC_STATUS_OK, NULL);
        return;
    }
    if (len > srv->max_recv_bytes)
        abort();
    Etcdserverpb__WatchResponse r = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    r.watch_id = (int64_t)len;
    r.created = len % 2 == 0;
    rpc_stream_send(s, &r.base); /* ERR_FULL and ERR_CLOSED are fine */
}

static void w_close(struct rpc_stream *s, bool cancelled, void *ctx)
{
    (void)cancelled;
    (void)ctx;
    if (rpc_stream_data_get(s) != &streams_open)
        abort();
    streams_open--;
    rpc_stream_release(s);
}

/* HTTP requests: "/late..." ones are held and answered after the loop's
 * turn, newest first, so that pipelined HTTP/1.x answers come back out of
 * order; the others are echoed at once. */
#define LATE_MAX 32
static struct rpc_call *late[LATE_MAX];
static int late_n;

static void http_fn(struct rpc_call *call, const uint8_t *body, size_t n,
                    void *ctx)
{
    size_t pn = 0;
    (void)ctx;
    if (n > srv->max_recv_bytes)
        abort();
    const char *p = rpc_call_metadata(call, ":path", &pn);
    if (p != NULL && pn >= 5 && memcmp(p, "/late", 5) == 0 &&
        late_n < LATE_MAX) {
        late[late_n++] = call;
        return;
    }
    rpc_call_reply_http(call, 200, "text/plain", 0, body, n);
}

static void answer_late(void)
{
    while (late_n > 0)
        rpc_call_reply_http(late[--late_n], 404, NULL, RPC_HTTP_NOSNIFF,
                            "x", 1);
}

static const struct rpc_stream_ops watch_ops = {
    .on_open = w_open, .on_message = w_message, .on_close = w_close};

static void setup(void)
{
    struct rpc_server_config cfg = {.urls = {"http://127.0.0.1:0"},
                                    .urls_n = 1,
                                    .threads = 1,
                                    .stream_queue = 4,
                                    .max_request_bytes = MAX_REQ};
    if (rpc_server_create(&cfg, &srv) != 0 ||
        rpc_server_register_unary(srv, "/etcdserverpb.KV/Range", range,
                                  NULL) != 0 ||
        rpc_server_register_unary(srv, "/etcdserverpb.KV/Put", put, NULL) !=
            0 ||
        rpc_server_register_stream(srv, "/etcdserverpb.Watch/Watch",
                                   &watch_ops, NULL) != 0)
        abort();
    /* --cors and --host-whitelist with lists: the Origin and Host
     * parsing run on every request */
    static const char *const origins[] = {"http://a.example", "", NULL};
    static const char *const hosts[] = {"localhost", "127.0.0.1", "::1",
                                        NULL};
    struct rpc_http_access access = {origins, hosts};
    rpc_server_set_http(srv, http_fn, NULL, &access);
    loop = &srv->loops[0];
    if (rpc__loop_init(srv, loop) != 0)
        abort();
}

static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    int fds[2];
    if (srv == NULL)
        setup();
    if (size > INPUT_MAX)
        return 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0)
        abort();
    struct rpc__conn *c = rpc__conn_new(loop, fds[0], false);
    if (c == NULL)
        abort();
    rpc__conn_attach(c);
    size_t off = 0, pre = sizeof(preface) - 1;
    if (size > 0 && data[0] == 0xff) {
        /* Raw bytes, no preface: sniffing, then HTTP/1.x (h1.c). */
        data++;
        size--;
        pre = 0;
    }
    while (loop->conns != NULL && off < pre + size) {
        const uint8_t *p = off < pre ? (const uint8_t *)preface + off
                                     : data + (off - pre);
        size_t n = off < pre ? pre - off : size - (off - pre);
        ssize_t w = write(fds[1], p, n);
        if (w > 0)
            off += (size_t)w;
        rpc__conn_io(loop->conns, EPOLLIN);
        rpc__loop_turn(loop);
        answer_late();
        rpc__loop_turn(loop);
        drain(fds[1]);
    }
    /* The client goes away: every call and stream must be let go. */
    close(fds[1]);
    if (loop->conns != NULL)
        rpc__conn_io(loop->conns, EPOLLIN);
    while (loop->conns != NULL)
        rpc__conn_kill(loop->conns);
    rpc__loop_turn(loop);
    answer_late();
    rpc__loop_turn(loop);
    if (streams_open != 0 || atomic_load(&srv->streams_n) != 0 ||
        atomic_load(&srv->active_n) != 0)
        abort();
    return 0;
}
