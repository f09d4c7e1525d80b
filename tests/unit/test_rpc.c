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
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

#include <openssl/ssl.h>

static long answered;

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
