/*
 * test_client.c - goal: libcetcd's pure parts are right without a server.
 * Method: endpoint strings (good, bad, schemes, limits), failover order,
 * which methods may be retried, status code names, client open/close with
 * bad input and with lazily-connecting channels, and the latency summary
 * (mean, stddev, etcd's percentile rule, histogram) on known samples.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client/client_int.h"
#include "util/mem.h"

static char eps[CETCD_ENDPOINTS_MAX][CLIENT_TARGET_MAX];
static enum dial_security sec[CETCD_ENDPOINTS_MAX];

/* One endpoint a list should parse into. */
struct parsed {
    const char *target;         /* the gRPC target */
    enum dial_security security; /* how to dial it */
};

/* assert_parsed checks that list parses into exactly want[0..n_want). */
static void assert_parsed(const char *list, const struct parsed *want,
                          size_t n_want)
{
    size_t n = 0;
    assert_int_equal(client__endpoints_parse(list, eps, sec, 8, &n), 0);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n_want; i++) {
        assert_string_equal(eps[i], want[i].target);
        assert_int_equal(sec[i], want[i].security);
    }
}

static void test_endpoints_parse_good(void **state)
{
    static const struct parsed one[] = {
        {"127.0.0.1:2379", DIAL_SECURITY_DEFAULT},
    };
    static const struct parsed three[] = {
        {"a:1", DIAL_SECURITY_PLAIN},
        {"b:22", DIAL_SECURITY_DEFAULT},
        {"[::1]:2379", DIAL_SECURITY_PLAIN},
    };
    (void)state;
    assert_parsed("127.0.0.1:2379", one, 1);
    assert_parsed("http://a:1, b:22 ,http://[::1]:2379/", three, 3);
}

/* The schemes etcdctl takes: TLS ones and unix sockets. */
static void test_endpoints_parse_schemes(void **state)
{
    static const struct parsed three[] = {
        {"h:1", DIAL_SECURITY_TLS},
        {"unix:/tmp/s", DIAL_SECURITY_PLAIN},
        {"unix:rel/s.sock", DIAL_SECURITY_TLS},
    };
    (void)state;
    assert_parsed("https://h:1,unix:///tmp/s,unixs://rel/s.sock", three, 3);
}

static void test_endpoints_parse_bad(void **state)
{
    static const char *const bad[] = {
        "", ",", "a:1,", "a", "a:", ":1", "a:x1", "ftp://a:1",
        "unix://", "unixs://", "http://", "https://a", "a:1/path", "a::",
        "https://a:1/p",
    };
    size_t n = 7;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(client__endpoints_parse(bad[i], eps, sec, 8, &n),
                         CETCD_INVALID_ARGUMENT);
        assert_int_equal(n, 0);
    }
    assert_int_equal(client__endpoints_parse(NULL, eps, sec, 8, &n),
                     CETCD_INVALID_ARGUMENT);
}

static void test_endpoints_parse_limits(void **state)
{
    char s[2 * CLIENT_TARGET_MAX];
    size_t n;
    (void)state;
    assert_int_equal(client__endpoints_parse("a:1,b:2,c:3", eps, sec, 2, &n),
                     CETCD_INVALID_ARGUMENT);
    assert_int_equal(client__endpoints_parse("a:1,b:2", eps, sec, 2, &n), 0);
    assert_int_equal(n, 2);
    memset(s, 'h', sizeof(s));
    memcpy(s + CLIENT_TARGET_MAX - 4, ":12", 4); /* 255 chars: fits */
    assert_int_equal(client__endpoints_parse(s, eps, sec, 2, &n), 0);
    assert_int_equal(strlen(eps[0]), CLIENT_TARGET_MAX - 1);
    memcpy(s + CLIENT_TARGET_MAX - 3, ":12", 4); /* 256 chars: too long */
    assert_int_equal(client__endpoints_parse(s, eps, sec, 2, &n),
                     CETCD_INVALID_ARGUMENT);
}

static void test_failover_order(void **state)
{
    (void)state;
    /* From the current endpoint onwards, wrapping, each tried once. */
    assert_int_equal(client__failover_order(0, 1, 0), 0);
    assert_int_equal(client__failover_order(1, 3, 0), 1);
    assert_int_equal(client__failover_order(1, 3, 1), 2);
    assert_int_equal(client__failover_order(1, 3, 2), 0);
    for (size_t cur = 0; cur < 5; cur++) {
        unsigned seen = 0;
        for (size_t a = 0; a < 5; a++)
            seen |= 1u << client__failover_order(cur, 5, a);
        assert_int_equal(seen, 0x1f);
    }
}

static void test_method_readonly(void **state)
{
    (void)state;
    assert_true(client__method_is_readonly("/etcdserverpb.KV/Range"));
    assert_true(client__method_is_readonly("/etcdserverpb.Maintenance/Status"));
    assert_false(client__method_is_readonly("/etcdserverpb.KV/Put"));
    assert_false(client__method_is_readonly("/etcdserverpb.KV/Txn"));
    assert_false(client__method_is_readonly("/etcdserverpb.KV/DeleteRange"));
    assert_false(client__method_is_readonly("/etcdserverpb.KV/Range2"));
}

static void test_code_name(void **state)
{
    struct cetcd_status st;
    (void)state;
    assert_string_equal(cetcd_code_name(0), "OK");
    assert_string_equal(cetcd_code_name(CETCD_UNAVAILABLE), "UNAVAILABLE");
    assert_string_equal(cetcd_code_name(16), "UNAUTHENTICATED");
    assert_string_equal(cetcd_code_name(17), "UNKNOWN_CODE");
    assert_string_equal(cetcd_code_name(-1), "UNKNOWN_CODE");
    assert_int_equal(client__status_set(&st, 4, "x %d", 7), 4);
    assert_int_equal(st.code, 4);
    assert_string_equal(st.message, "x 7");
    assert_int_equal(client__status_set(NULL, 3, "y"), 3);
}

static void test_client_open(void **state)
{
    struct cetcd_client_opts o = {.endpoints = "ftp://a:1"};
    struct cetcd_client *c = (void *)1;
    struct cetcd_status st;
    (void)state;
    assert_int_equal(cetcd_client_open(&o, &c, &st), CETCD_INVALID_ARGUMENT);
    assert_null(c);
    assert_non_null(strstr(st.message, "ftp://a:1"));
    /* Opening does not connect: an unused port is fine until a call. */
    o.endpoints = "127.0.0.1:1,http://127.0.0.1:2";
    o.token = "tok";
    assert_int_equal(cetcd_client_open(&o, &c, &st), 0);
    assert_string_equal(cetcd_client_endpoint(c), "127.0.0.1:1");
    assert_false(c->eps[0].tls);
    assert_false(c->eps[1].tls);
    assert_string_equal(c->token, "tok");
    assert_int_equal(c->dial_timeout_ms, 5000);
    assert_int_equal(cetcd_client_token_set(c, NULL), 0);
    assert_null(c->token);
    cetcd_client_close(c);
    cetcd_client_close(NULL);
}

/* Which endpoints get TLS: the scheme decides, a bare one follows
 * opts->tls; half a key pair is refused. */
static void test_client_open_tls(void **state)
{
    struct cetcd_tls tls = {.insecure_skip_verify = true};
    struct cetcd_client_opts o = {
        .endpoints = "https://127.0.0.1:1,http://127.0.0.1:2,127.0.0.1:3,"
                     "unixs:///tmp/x.sock,unix:///tmp/y.sock"};
    struct cetcd_client *c = NULL;
    struct cetcd_status st;
    (void)state;
    assert_int_equal(cetcd_client_open(&o, &c, &st), 0);
    assert_true(c->eps[0].tls);  /* https without material: system CAs */
    assert_false(c->eps[1].tls);
    assert_false(c->eps[2].tls); /* bare, no material */
    assert_true(c->eps[3].tls);
    assert_false(c->eps[4].tls);
    assert_string_equal(c->eps[3].target, "unix:/tmp/x.sock");
    cetcd_client_close(c);
    o.tls = &tls;
    assert_int_equal(cetcd_client_open(&o, &c, &st), 0);
    assert_true(c->eps[0].tls);
    assert_false(c->eps[1].tls); /* http:// stays plain */
    assert_true(c->eps[2].tls);  /* bare with material */
    cetcd_client_close(c);
    tls.cert_pem = "-----BEGIN CERTIFICATE-----";
    c = (void *)1;
    assert_int_equal(cetcd_client_open(&o, &c, &st), CETCD_INVALID_ARGUMENT);
    assert_null(c);
    assert_non_null(strstr(st.message, "cert_pem and key_pem"));
    tls.cert_pem = NULL;
    tls.allowed_cn = "a";
    tls.allowed_hostname = "b"; /* one allowed name at most */
    assert_int_equal(cetcd_client_open(&o, &c, &st), CETCD_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "allowed_cn and allowed_hostname"));
    tls.allowed_hostname = NULL;
    assert_int_equal(cetcd_client_open(&o, &c, &st), 0);
    cetcd_client_close(c);
}

static void test_client_unreachable(void **state)
{
    struct cetcd_client_opts o = {.endpoints = "127.0.0.1:1,127.0.0.1:2",
                                  .dial_timeout_ms = 300};
    struct cetcd_client *c = NULL;
    struct cetcd_status st;
    struct cetcd_range_result *r = (void *)1;
    (void)state;
    assert_int_equal(cetcd_client_open(&o, &c, &st), 0);
    assert_int_equal(cetcd_get(c, "k", &r, &st), CETCD_UNAVAILABLE);
    assert_null(r);
    assert_non_null(strstr(st.message, "cannot connect"));
    cetcd_client_close(c);
}

static void test_latency_summary(void **state)
{
    struct cetcd_latency l;
    struct cetcd_latency_summary s;
    (void)state;
    assert_int_equal(cetcd_latency_init(&l, 1), 0);
    /* 1000 samples 1..1000 ms, added in reverse to exercise sorting. */
    for (int i = 1000; i >= 1; i--)
        assert_int_equal(cetcd_latency_add(&l, i / 1000.0), 0);
    cetcd_latency_summarise(&l, 2.0, &s);
    assert_int_equal(s.count, 1000);
    assert_true(fabs(s.rps - 500.0) < 1e-9);
    assert_true(fabs(s.fastest_s - 0.001) < 1e-12);
    assert_true(fabs(s.slowest_s - 1.0) < 1e-12);
    assert_true(fabs(s.average_s - 0.5005) < 1e-9);
    /* Population stddev of 1..n is sqrt((n^2-1)/12). */
    assert_true(fabs(s.stddev_s - sqrt((1e6 - 1) / 12) / 1000) < 1e-9);
    /* etcd: the first sample with index*100/n >= p. */
    assert_true(fabs(s.pctl_s[0] - 0.101) < 1e-12);  /* 10% */
    assert_true(fabs(s.pctl_s[2] - 0.501) < 1e-12);  /* 50% */
    assert_true(fabs(s.pctl_s[6] - 0.991) < 1e-12);  /* 99% */
    assert_true(fabs(s.pctl_s[7] - 1.000) < 1e-12);  /* 99.9% */
    /* Histogram: 11 upper bounds from fastest to slowest, all counted. */
    size_t total = 0;
    for (int i = 0; i < CETCD_LATENCY_BUCKETS; i++)
        total += s.bucket_n[i];
    assert_int_equal(total, 1000);
    assert_true(fabs(s.bucket_s[0] - 0.001) < 1e-12);
    assert_true(fabs(s.bucket_s[10] - 1.0) < 1e-12);
    assert_int_equal(s.bucket_n[0], 1);
    assert_int_equal(s.bucket_n[1], 99); /* (0.001, 0.1009]: 2..100 ms */
    cetcd_latency_close(&l);
}

static void test_latency_small_and_merge(void **state)
{
    struct cetcd_latency a, b;
    struct cetcd_latency_summary s;
    (void)state;
    assert_int_equal(cetcd_latency_init(&a, 0), 0);
    assert_int_equal(cetcd_latency_init(&b, 4), 0);
    cetcd_latency_summarise(&a, 1.0, &s);
    assert_int_equal(s.count, 0);
    assert_true(s.rps == 0 && s.pctl_s[2] == 0);
    assert_int_equal(cetcd_latency_add(&a, 0.002), 0);
    assert_int_equal(cetcd_latency_add(&b, 0.004), 0);
    b.errors = 3;
    assert_int_equal(cetcd_latency_merge(&a, &b), 0);
    assert_int_equal(a.len, 2);
    assert_int_equal(a.errors, 3);
    cetcd_latency_summarise(&a, 0, &s);
    assert_true(s.rps == 0);
    /* Two samples: 10%, 25% from index 1? no: index 0 has rank 0, index 1
     * rank 50, so 10/25/50 take the second sample; 75+ stay unset. */
    assert_true(fabs(s.pctl_s[0] - 0.004) < 1e-12);
    assert_true(fabs(s.pctl_s[2] - 0.004) < 1e-12);
    assert_true(s.pctl_s[3] == 0);
    /* Identical samples: zero-width buckets still count every sample. */
    cetcd_latency_close(&a);
    assert_int_equal(cetcd_latency_init(&a, 0), 0);
    for (int i = 0; i < 5; i++)
        cetcd_latency_add(&a, 0.5);
    cetcd_latency_summarise(&a, 1, &s);
    assert_int_equal(s.bucket_n[0], 5);
    assert_true(s.stddev_s == 0);
    cetcd_latency_close(&a);
    cetcd_latency_close(&b);
}

static void test_latency_nomem(void **state)
{
    struct cetcd_latency l;
    (void)state;
    mem_fault_set(1);
    assert_int_equal(cetcd_latency_init(&l, 4), CETCD_RESOURCE_EXHAUSTED);
    assert_int_equal(cetcd_latency_init(&l, 1), 0);
    assert_int_equal(cetcd_latency_add(&l, 1), 0);
    mem_fault_set(1);
    assert_int_equal(cetcd_latency_add(&l, 2), CETCD_RESOURCE_EXHAUSTED);
    assert_int_equal(l.len, 1);
    cetcd_latency_close(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints_parse_good),
        cmocka_unit_test(test_endpoints_parse_schemes),
        cmocka_unit_test(test_endpoints_parse_bad),
        cmocka_unit_test(test_endpoints_parse_limits),
        cmocka_unit_test(test_failover_order),
        cmocka_unit_test(test_method_readonly),
        cmocka_unit_test(test_code_name),
        cmocka_unit_test(test_client_open),
        cmocka_unit_test(test_client_open_tls),
        cmocka_unit_test(test_client_unreachable),
        cmocka_unit_test(test_latency_summary),
        cmocka_unit_test(test_latency_small_and_merge),
        cmocka_unit_test(test_latency_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
