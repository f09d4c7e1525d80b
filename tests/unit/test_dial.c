/*
 * test_dial.c - goal: the dial module turns every URL form libcetcd and
 * the peer transport take into the right gRPC target and security, refuses
 * the malformed ones, and builds credentials and channels for each kind of
 * TLS material.  Method: dial_url_parse on good, bad and boundary inputs
 * (including items that are slices of a longer string); dial_creds_create
 * and dial_channel_create with gRPC initialised, checking that gRPC takes
 * the material (handshakes are covered by tests/peer/peer_tls.c and the
 * TLS cluster tests); a channel to a listening socket nobody answers on,
 * timing how long its connection attempt lasts.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/support/time.h>

#include "dial/dial.h"
#include "util/err.h"
#include "util/mem.h"

static int parse(const char *url, char *out, size_t cap,
                 enum dial_security *sec)
{
    return dial_url_parse(url, url ? strlen(url) : 0, out, cap, sec);
}

static void test_url_good(void **state)
{
    static const struct {
        const char *url, *target;
        enum dial_security sec;
    } good[] = {
        {"127.0.0.1:2379", "127.0.0.1:2379", DIAL_SECURITY_DEFAULT},
        {"localhost:1/", "localhost:1", DIAL_SECURITY_DEFAULT},
        {"http://10.0.0.1:2380", "10.0.0.1:2380", DIAL_SECURITY_PLAIN},
        {"http://[::1]:2380/", "[::1]:2380", DIAL_SECURITY_PLAIN},
        {"https://h:1", "h:1", DIAL_SECURITY_TLS},
        {"unix:///tmp/p.sock", "unix:/tmp/p.sock", DIAL_SECURITY_PLAIN},
        {"unixs://rel.sock", "unix:rel.sock", DIAL_SECURITY_TLS},
    };
    char out[64];
    enum dial_security sec;
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(parse(good[i].url, out, sizeof out, &sec), 0);
        assert_string_equal(out, good[i].target);
        assert_int_equal(sec, good[i].sec);
    }
}

static void test_url_bad(void **state)
{
    static const char *const bad[] = {
        "", "h", "h:", ":1", "h:x1", "h::", "http://", "http://h",
        "http://h:1/path", "https://h:1//", "ftp://h:1", "unix://",
        "unixs://", "h:1/p", "/tmp/s",
    };
    char out[64];
    enum dial_security sec;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        out[0] = 'x';
        assert_int_equal(parse(bad[i], out, sizeof out, &sec), ERR_INVAL);
        assert_int_equal(out[0], '\0');
    }
    assert_int_equal(dial_url_parse(NULL, 3, out, sizeof out, &sec),
                     ERR_INVAL);
}

/* Only len bytes are read: the rest of a list is not part of the item. */
static void test_url_slice(void **state)
{
    const char *list = "https://a:1,http://b:2";
    char out[64];
    enum dial_security sec;
    (void)state;
    assert_int_equal(dial_url_parse(list, 11, out, sizeof out, &sec), 0);
    assert_string_equal(out, "a:1");
    assert_int_equal(sec, DIAL_SECURITY_TLS);
    assert_int_equal(dial_url_parse(list, 9, out, sizeof out, &sec),
                     ERR_INVAL); /* "https://a" */
    assert_int_equal(dial_url_parse("unix:///s\0x", 11, out, sizeof out,
                                    &sec),
                     ERR_INVAL); /* a NUL inside the path */
}

static void test_url_capacity(void **state)
{
    char out[8];
    enum dial_security sec;
    (void)state;
    assert_int_equal(parse("abcd:12", out, 8, &sec), 0); /* 7 + NUL */
    assert_int_equal(parse("abcde:12", out, 8, &sec), ERR_INVAL);
    assert_int_equal(parse("unix://ab", out, 8, &sec), 0); /* "unix:ab" */
    assert_string_equal(out, "unix:ab");
    assert_int_equal(parse("unix://abc", out, 8, &sec), ERR_INVAL);
}

/* Credentials for every kind of material, and a channel with each (no
 * connection is made until a call). */
static void test_creds_and_channel(void **state)
{
    const struct dial_tls kinds[] = {
        {.skip_verify = true},
        {.ca_pem = "-----BEGIN CERTIFICATE-----\n"},
        {.cert_pem = "c", .key_pem = "k", .skip_verify = true},
        {0}, /* the system's CAs */
        /* the allowed-name verifier, with and without an alert target */
        {.allowed_cn = "example.com", .alert_target = "127.0.0.1:1"},
        {.allowed_hostname = "localhost", .skip_verify = true},
    };
    const struct dial_channel_opts o = {
        .max_recv_bytes = 1 << 20, .backoff_min_ms = 10, .backoff_max_ms = 20,
        .connect_timeout_ms = 1000};
    (void)state;
    grpc_init();
    grpc_channel_credentials *plain = dial_creds_create(NULL);
    assert_non_null(plain);
    grpc_channel *ch = dial_channel_create("127.0.0.1:1", plain, &o);
    assert_non_null(ch);
    grpc_channel_credentials_release(plain); /* the channel keeps its own */
    assert_int_equal(grpc_channel_check_connectivity_state(ch, 0),
                     GRPC_CHANNEL_IDLE);
    grpc_channel_destroy(ch);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        grpc_channel_credentials *c = dial_creds_create(&kinds[i]);
        assert_non_null(c);
        ch = dial_channel_create("unix:/nonexistent.sock", c, &o);
        assert_non_null(ch);
        grpc_channel_destroy(ch);
        grpc_channel_credentials_release(c);
    }
    grpc_shutdown_blocking();
}

/* dial_tls_copy copies every string into its own block: the copy stays
 * whole when the original's strings change, and NULL fields stay NULL. */
static void test_tls_copy(void **state)
{
    char cn[] = "example.com", target[] = "127.0.0.1:2380";
    const struct dial_tls t = {.cert_pem = "C", .key_pem = "K",
                               .skip_verify = true, .cert_file = "/c",
                               .allowed_cn = cn, .alert_target = target};
    (void)state;
    struct dial_tls *c = dial_tls_copy(&t);
    assert_non_null(c);
    cn[0] = 'X';
    target[0] = 'X';
    assert_string_equal(c->allowed_cn, "example.com");
    assert_string_equal(c->alert_target, "127.0.0.1:2380");
    assert_string_equal(c->cert_pem, "C");
    assert_string_equal(c->key_pem, "K");
    assert_string_equal(c->cert_file, "/c");
    assert_true(c->skip_verify);
    assert_null(c->ca_pem);
    assert_null(c->key_file);
    assert_null(c->allowed_hostname);
    assert_ptr_not_equal(c->cert_pem, t.cert_pem);
    mem_free(c);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* attempt_ms connects ch and returns how long until its first attempt
 * failed (TRANSIENT_FAILURE), or -1 if that took over 20 s. */
static int64_t attempt_ms(grpc_channel *ch)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    int64_t t0 = now_ms();
    grpc_connectivity_state s = grpc_channel_check_connectivity_state(ch, 1);
    while (s != GRPC_CHANNEL_TRANSIENT_FAILURE && now_ms() - t0 < 20000) {
        gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                       gpr_time_from_millis(100, GPR_TIMESPAN));
        grpc_channel_watch_connectivity_state(ch, s, dl, cq, NULL);
        grpc_event ev = grpc_completion_queue_next(
            cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        assert_int_equal(ev.type, GRPC_OP_COMPLETE);
        s = grpc_channel_check_connectivity_state(ch, 0);
    }
    int64_t took = s == GRPC_CHANNEL_TRANSIENT_FAILURE ? now_ms() - t0 : -1;
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                      NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    return took;
}

/* One connection attempt lasts connect_timeout_ms, however short the
 * back-off: the server here is a listening socket nobody accepts on, so
 * TCP connects (the kernel's backlog) and the server's SETTINGS never
 * come, as with a member too busy to answer its handshake in time.  gRPC
 * takes GRPC_ARG_MIN_RECONNECT_BACKOFF_MS as that timeout; when it was set
 * to the back-off minimum, such an attempt gave up after ~100 ms. */
static void test_connect_timeout(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", ntohs(a.sin_port));
    const struct dial_channel_opts o = {.max_recv_bytes = 1 << 20,
                                        .backoff_min_ms = 100,
                                        .backoff_max_ms = 200,
                                        .connect_timeout_ms = 1500};
    grpc_init();
    grpc_channel_credentials *plain = dial_creds_create(NULL);
    assert_non_null(plain);
    grpc_channel *ch = dial_channel_create(target, plain, &o);
    assert_non_null(ch);
    int64_t took = attempt_ms(ch);
    grpc_channel_destroy(ch);
    grpc_channel_credentials_release(plain);
    grpc_shutdown_blocking();
    close(fd);
    /* gRPC's timers are not exact: a little early, or late on a busy
     * machine, but nowhere near the 100-200 ms back-off. */
    assert_true(took >= 1300);
    assert_true(took < 15000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_good),
        cmocka_unit_test(test_url_bad),
        cmocka_unit_test(test_url_slice),
        cmocka_unit_test(test_url_capacity),
        cmocka_unit_test(test_creds_and_channel),
        cmocka_unit_test(test_tls_copy),
        cmocka_unit_test(test_connect_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
