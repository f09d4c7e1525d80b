/*
 * test_rpc_san.c - goal: the peer listener's check of a client
 * certificate's SANs against the remote address decides as etcd 3.4's
 * checkCertSAN and isHostInDNS (pkg/transport/listener_tls.go), DNS SANs
 * included, and its lookups run off the event loop without losing or
 * touching a connection that goes away meanwhile.
 *
 * Method: rpc__tls_san_check on certificates built here (no SANs, IP
 * SANs, DNS SANs, both) with and without a lookup verdict;
 * rpc__san_dns_match with a scripted resolver (PTR names, forward
 * answers, failures; it records the order of its lookups) for each rule
 * of isHostInDNS and its error text; the system resolver on localhost
 * (/etc/hosts: 127.0.0.1 is localhost) and on a name under .invalid
 * (RFC 6761: never resolves); then a real TLS server (one loop thread)
 * whose check is rpc__tls_san_check, and OpenSSL clients on 127.0.0.1
 * presenting certificates of the server's CA: DNS:localhost is served
 * (the server's HTTP/2 SETTINGS arrive), DNS:nothere.invalid is closed
 * without a byte, IP:127.0.0.1 is served without a lookup, and clients
 * that hang up while their lookups run, with the server closed right
 * after, leave nothing behind (ASan's leak check in that build).
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "rpc/rpc_int.h"

/* --- certificates --- */

static void add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    assert_non_null(e);
    assert_int_equal(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

/* cert_make: a certificate for key with the given SANs (OpenSSL's
 * "DNS:a,IP:1.2.3.4" syntax, NULL: none), signed by ca_key as ca (NULL:
 * self-signed, a CA). */
static X509 *cert_make(EVP_PKEY *key, const char *san, X509 *ca,
                       EVP_PKEY *ca_key)
{
    static long serial = 1;
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                               (const unsigned char *)(ca ? "peer" : "ca"),
                               -1, -1, 0);
    X509_set_issuer_name(x, ca != NULL ? X509_get_subject_name(ca) : n);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, ca != NULL ? ca : x, x, NULL, NULL, 0);
    if (ca == NULL) {
        add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(x, &ctx, NID_ext_key_usage, "serverAuth,clientAuth");
    }
    if (san != NULL)
        add_ext(x, &ctx, NID_subject_alt_name, san);
    assert_true(X509_sign(x, ca_key != NULL ? ca_key : key, EVP_sha256()) >
                0);
    return x;
}

static X509 *bare_cert(const char *san)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    assert_non_null(k);
    X509 *x = cert_make(k, san, NULL, NULL);
    EVP_PKEY_free(k);
    return x;
}

/* --- rpc__tls_san_check --- */

static void test_san_check(void **state)
{
    (void)state;
    char why[512];
    X509 *none = bare_cert(NULL), *ip = bare_cert("IP:10.0.0.1,IP:10.0.0.2");
    X509 *dns = bare_cert("DNS:localhost");
    X509 *both = bare_cert("DNS:a.test,IP:127.0.0.1");
    X509 *other_ip = bare_cert("IP:10.0.0.1,DNS:a.test");
    assert_int_equal(rpc__tls_san_check(none, "127.0.0.1", NULL, why,
                                        sizeof why), RPC_TLS_PASS);
    assert_int_equal(rpc__tls_san_check(ip, "10.0.0.2", NULL, why,
                                        sizeof why), RPC_TLS_PASS);
    assert_int_equal(rpc__tls_san_check(ip, "127.0.0.1", NULL, why,
                                        sizeof why), RPC_TLS_REFUSE);
    assert_string_equal(why, "x509: certificate is valid for 10.0.0.1, "
                             "10.0.0.2, not 127.0.0.1");
    assert_int_equal(rpc__tls_san_check(dns, NULL, NULL, why, sizeof why),
                     RPC_TLS_REFUSE);
    assert_string_equal(why, "address @: missing port in address");
    /* DNS SANs: lookups wanted, then their verdict decides. */
    assert_int_equal(rpc__tls_san_check(dns, "127.0.0.1", NULL, why,
                                        sizeof why), RPC_TLS_LOOKUP);
    struct rpc_tls_dns yes = {.match = true}, no = {
        .match = false, .why = "tls: \"127.0.0.1\" does not match any of "
                               "DNSNames [\"localhost\"]"};
    assert_int_equal(rpc__tls_san_check(dns, "127.0.0.1", &yes, why,
                                        sizeof why), RPC_TLS_PASS);
    assert_int_equal(rpc__tls_san_check(dns, "127.0.0.1", &no, why,
                                        sizeof why), RPC_TLS_REFUSE);
    assert_string_equal(why, no.why);
    /* An IP SAN equal to the address passes without lookups; another
     * one with DNS SANs leads to them (Go's VerifyHostname, then
     * isHostInDNS). */
    assert_int_equal(rpc__tls_san_check(both, "127.0.0.1", NULL, why,
                                        sizeof why), RPC_TLS_PASS);
    assert_int_equal(rpc__tls_san_check(other_ip, "127.0.0.1", NULL, why,
                                        sizeof why), RPC_TLS_LOOKUP);
    /* etcd's log line of a refusal after the handshake lists them. */
    char lists[256];
    rpc__san_lists(other_ip, lists, sizeof lists);
    assert_string_equal(lists, "IPAddresses [\"10.0.0.1\"], DNSNames "
                               "[\"a.test\"]");
    rpc__san_lists(ip, lists, sizeof lists);
    assert_string_equal(lists, "IPAddresses [\"10.0.0.1\" \"10.0.0.2\"], "
                               "DNSNames []");
    rpc__san_lists(none, lists, 20);
    assert_string_equal(lists, "IPAddresses [], DNS");
    X509_free(none);
    X509_free(ip);
    X509_free(dns);
    X509_free(both);
    X509_free(other_ip);
}

/* --- rpc__san_dns_match with a scripted resolver --- */

struct script {
    const char *ptr[3];      /* the reverse lookup's names */
    const char *ptr_err;     /* or its failure */
    const char *fwd[4][2];   /* name -> "ip" or "!error" */
    char log[256];           /* the lookups made, "R" and "F:name" */
};

static int script_reverse(void *ctx, const char *ip,
                          char (*names)[RPC__DNS_NAME_MAX], int max,
                          char *err, size_t cap)
{
    struct script *s = ctx;
    (void)ip;
    strcat(s->log, "R ");
    if (s->ptr_err != NULL) {
        snprintf(err, cap, "%s", s->ptr_err);
        return -1;
    }
    int n = 0;
    for (; n < 3 && n < max && s->ptr[n] != NULL; n++)
        snprintf(names[n], RPC__DNS_NAME_MAX, "%s", s->ptr[n]);
    return n;
}

static int script_forward(void *ctx, const char *name, const char *ip,
                          char *err, size_t cap)
{
    struct script *s = ctx;
    snprintf(s->log + strlen(s->log), sizeof s->log - strlen(s->log),
             "F:%s ", name);
    for (int i = 0; i < 4 && s->fwd[i][0] != NULL; i++) {
        if (strcmp(s->fwd[i][0], name) != 0)
            continue;
        if (s->fwd[i][1][0] == '!') {
            snprintf(err, cap, "%s", s->fwd[i][1] + 1);
            return -1;
        }
        return strcmp(s->fwd[i][1], ip) == 0;
    }
    snprintf(err, cap, "lookup %s: no such host", name);
    return -1;
}

static bool match(struct script *s, const char *ip, const char *const *sans,
                  size_t n, char *why, size_t cap)
{
    struct rpc__resolver r = {script_reverse, script_forward, s};
    why[0] = '\0';
    return rpc__san_dns_match(ip, sans, n, &r, why, cap);
}

static void test_dns_match_reverse(void **state)
{
    (void)state;
    char why[512];
    const char *plain[] = {"a.test", "localhost"};
    struct script s = {.ptr = {"localhost"}};
    assert_true(match(&s, "127.0.0.1", plain, 2, why, sizeof why));
    assert_string_equal(s.log, "R "); /* no forward lookup needed */
    /* A PTR record's trailing dot is cut. */
    struct script dot = {.ptr = {"other.test.", "localhost."}};
    assert_true(match(&dot, "127.0.0.1", plain, 2, why, sizeof why));
    /* A wildcard matches by its suffix ".example.com" only. */
    const char *wild[] = {"*.example.com"};
    struct script sub = {.ptr = {"node1.example.com."}};
    assert_true(match(&sub, "10.0.0.1", wild, 1, why, sizeof why));
    struct script apex = {.ptr = {"example.com"}};
    assert_false(match(&apex, "10.0.0.1", wild, 1, why, sizeof why));
    assert_string_equal(apex.log, "R "); /* a wildcard is not resolved */
    assert_string_equal(why, "tls: \"10.0.0.1\" does not match any of "
                             "DNSNames [\"*.example.com\"]");
    /* Names compare exactly, as Go's ==. */
    const char *lower[] = {"localhost"};
    struct script upper = {.ptr = {"LOCALHOST"},
                           .fwd = {{"localhost", "127.0.0.2"}}};
    assert_false(match(&upper, "127.0.0.1", lower, 1, why, sizeof why));
}

static void test_dns_match_forward(void **state)
{
    (void)state;
    char why[512];
    const char *sans[] = {"*.x.test", "a.test", "b.test", "c.test"};
    struct script s = {.ptr = {"elsewhere.test"},
                       .fwd = {{"a.test", "10.0.0.9"},
                               {"b.test", "127.0.0.1"},
                               {"c.test", "127.0.0.1"}}};
    assert_true(match(&s, "127.0.0.1", sans, 4, why, sizeof why));
    /* Reverse first, the wildcard skipped, stop at the first match. */
    assert_string_equal(s.log, "R F:a.test F:b.test ");
    struct script none = {.fwd = {{"a.test", "10.0.0.9"},
                                  {"b.test", "10.0.0.9"},
                                  {"c.test", "10.0.0.9"}}};
    assert_false(match(&none, "127.0.0.1", sans, 4, why, sizeof why));
    assert_string_equal(why, "tls: \"127.0.0.1\" does not match any of "
                             "DNSNames [\"*.x.test\" \"a.test\" "
                             "\"b.test\" \"c.test\"]");
}

static void test_dns_match_errors(void **state)
{
    (void)state;
    char why[512];
    const char *sans[] = {"x.invalid", "y.test"};
    /* The reverse failure is told when every forward lookup answered. */
    struct script rev = {.ptr_err = "lookup 10.0.0.1: no such host",
                         .fwd = {{"x.invalid", "10.0.0.2"},
                                 {"y.test", "10.0.0.3"}}};
    assert_false(match(&rev, "10.0.0.1", sans, 2, why, sizeof why));
    assert_string_equal(why, "tls: \"10.0.0.1\" does not match any of "
                             "DNSNames [\"x.invalid\" \"y.test\"] (lookup "
                             "10.0.0.1: no such host)");
    /* A forward failure replaces it; the last one is told. */
    struct script fwd = {.ptr_err = "lookup 10.0.0.1: no such host",
                         .fwd = {{"x.invalid", "!lookup x.invalid: no such "
                                               "host"},
                                 {"y.test", "!lookup y.test: timeout"}}};
    assert_false(match(&fwd, "10.0.0.1", sans, 2, why, sizeof why));
    assert_string_equal(why, "tls: \"10.0.0.1\" does not match any of "
                             "DNSNames [\"x.invalid\" \"y.test\"] (lookup "
                             "y.test: timeout)");
    struct script one = {.ptr = {"z.test"},
                         .fwd = {{"x.invalid", "!lookup x.invalid: no such "
                                               "host"},
                                 {"y.test", "10.0.0.3"}}};
    assert_false(match(&one, "10.0.0.1", sans, 2, why, sizeof why));
    assert_string_equal(why, "tls: \"10.0.0.1\" does not match any of "
                             "DNSNames [\"x.invalid\" \"y.test\"] (lookup "
                             "x.invalid: no such host)");
    /* Go's %q of odd names; a short buffer cuts the text safely. */
    const char *odd[] = {"a\"b\\c\x01"};
    struct script q = {.ptr = {"q.test"}, .fwd = {{"a\"b\\c\x01", "1.1.1.1"}}};
    assert_false(match(&q, "10.0.0.1", odd, 1, why, sizeof why));
    assert_string_equal(why, "tls: \"10.0.0.1\" does not match any of "
                             "DNSNames [\"a\\\"b\\\\c\\x01\"]");
    char small[24];
    struct script cut = {.ptr = {"q.test"}, .fwd = {{"x.invalid", "1.1.1.1"}}};
    assert_false(match(&cut, "10.0.0.1", sans, 2, small, sizeof small));
    assert_true(strlen(small) < sizeof small);
    assert_memory_equal(small, "tls: \"10.0.0.1\" does", 20);
}

/* --- the system's resolver --- */

static void test_sys_resolver(void **state)
{
    (void)state;
    char names[RPC__PTR_NAMES_MAX][RPC__DNS_NAME_MAX], err[256] = "";
    int n = rpc__san_sys_reverse(NULL, "127.0.0.1", names,
                                 RPC__PTR_NAMES_MAX, err, sizeof err);
    assert_int_equal(n, 1);
    assert_string_equal(names[0], "localhost");
    assert_int_equal(rpc__san_sys_forward(NULL, "localhost", "127.0.0.1",
                                          err, sizeof err), 1);
    assert_int_equal(rpc__san_sys_forward(NULL, "localhost", "10.9.9.9",
                                          err, sizeof err), 0);
    /* Go's resolver's words: "lookup nothere.invalid on
     * 10.0.0.53:53: no such host" (without a DNS server: the system's). */
    assert_int_equal(rpc__san_sys_forward(NULL, "nothere.invalid",
                                          "127.0.0.1", err, sizeof err), -1);
    assert_memory_equal(err, "lookup nothere.invalid", 22);
    if (strstr(err, " on ") != NULL)
        assert_string_equal(err + strlen(err) - 14, ": no such host");
    /* A reverse lookup names the address's PTR name, as Go's does
     * (documentation addresses: RFC 5737, RFC 3849). */
    assert_int_equal(rpc__san_sys_reverse(NULL, "192.0.2.1", names,
                                          RPC__PTR_NAMES_MAX, err,
                                          sizeof err), -1);
    assert_memory_equal(err, "lookup 1.2.0.192.in-addr.arpa.", 30);
    assert_int_equal(rpc__san_sys_reverse(NULL, "2001:db8::1", names,
                                          RPC__PTR_NAMES_MAX, err,
                                          sizeof err), -1);
    static const char v6[] = "lookup 1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0."
                             "0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.";
    assert_memory_equal(err, v6, sizeof v6 - 1);
    const char *sans[] = {"nothere.invalid"};
    struct rpc__resolver sys = {rpc__san_sys_reverse, rpc__san_sys_forward,
                                NULL};
    char why[512];
    assert_false(rpc__san_dns_match("127.0.0.1", sans, 1, &sys, why,
                                    sizeof why));
    assert_memory_equal(why, "tls: \"127.0.0.1\" does not match any of "
                             "DNSNames [\"nothere.invalid\"] (lookup "
                             "nothere.invalid", 75);
}

/* --- a TLS server: the lookups off the loop --- */

struct pki {
    EVP_PKEY *ca_key;
    X509 *ca;
    char *ca_pem, *srv_cert_pem, *srv_key_pem;
};

static char *pem_of(X509 *x, EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    assert_non_null(b);
    if (x != NULL)
        assert_int_equal(PEM_write_bio_X509(b, x), 1);
    else
        assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL,
                                                  NULL), 1);
    char *d;
    long n = BIO_get_mem_data(b, &d);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    memcpy(s, d, (size_t)n);
    s[n] = '\0';
    BIO_free(b);
    return s;
}

static enum rpc_tls_verdict san_only(X509 *x, const char *ip,
                                     const struct rpc_tls_dns *dns,
                                     void *ctx, char *why, size_t cap)
{
    (void)ctx;
    return rpc__tls_san_check(x, ip, dns, why, cap);
}

static struct rpc_server *server_start(struct pki *p)
{
    p->ca_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    p->ca = cert_make(p->ca_key, NULL, NULL, NULL);
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509 *x = cert_make(k, "IP:127.0.0.1", p->ca, p->ca_key);
    p->ca_pem = pem_of(p->ca, NULL);
    p->srv_cert_pem = pem_of(x, NULL);
    p->srv_key_pem = pem_of(NULL, k);
    X509_free(x);
    EVP_PKEY_free(k);
    struct rpc_server_config cfg = {
        .urls = {"https://127.0.0.1:0"}, .urls_n = 1, .threads = 1,
        .tls_cert_pem = p->srv_cert_pem, .tls_key_pem = p->srv_key_pem,
        .tls_ca_pem = p->ca_pem, .tls_verify_clients = true,
        .tls_check = san_only};
    struct rpc_server *srv;
    assert_int_equal(rpc_server_create(&cfg, &srv), 0);
    assert_int_equal(rpc_server_start(srv), 0);
    return srv;
}

static void pki_free(struct pki *p)
{
    X509_free(p->ca);
    EVP_PKEY_free(p->ca_key);
    free(p->ca_pem);
    free(p->srv_cert_pem);
    free(p->srv_key_pem);
}

/* client: a TLS client on 127.0.0.1 presenting a certificate with san,
 * handshake done (TLS 1.3: before the server checked it); *fd_out is its
 * socket, 5 s read timeout. */
static SSL *client(struct pki *p, int port, const char *san, int *fd_out)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509 *x = cert_make(k, san, p->ca, p->ca_key);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    assert_int_equal(SSL_CTX_use_certificate(ctx, x), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, k), 1);
    static const unsigned char h2[] = {2, 'h', '2'};
    SSL_CTX_set_alpn_protos(ctx, h2, sizeof h2);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    assert_int_equal(SSL_connect(ssl), 1);
    SSL_CTX_free(ctx); /* the SSL holds its own reference */
    X509_free(x);
    EVP_PKEY_free(k);
    *fd_out = fd;
    return ssl;
}

/* served: the server sent application data (its HTTP/2 SETTINGS) over
 * ssl, rather than closing. */
static bool served(SSL *ssl)
{
    uint8_t buf[64];
    int n = SSL_read(ssl, buf, sizeof buf);
    ERR_clear_error();
    return n >= 9 && buf[3] == 0x4; /* a SETTINGS frame */
}

static void client_close(SSL *ssl, int fd)
{
    SSL_free(ssl);
    close(fd);
}

static void test_server_lookups(void **state)
{
    (void)state;
    struct pki p = {0};
    struct rpc_server *srv = server_start(&p);
    int port = rpc_server_port(srv, 0), fd;
    SSL *ok = client(&p, port, "DNS:localhost", &fd);
    assert_true(served(ok));
    client_close(ok, fd);
    SSL *bad = client(&p, port, "DNS:nothere.invalid", &fd);
    assert_false(served(bad));
    client_close(bad, fd);
    SSL *ip = client(&p, port, "IP:127.0.0.1", &fd);
    assert_true(served(ip));
    client_close(ip, fd);
    /* Clients gone while their lookups may still run; the server closes
     * right after (its loop takes back or drops what the threads hand
     * back, and the threads ending later touch nothing of it). */
    for (int i = 0; i < 6; i++) {
        SSL *gone = client(&p, port, "DNS:localhost,DNS:nothere.invalid",
                           &fd);
        client_close(gone, fd);
    }
    SSL *last = client(&p, port, "DNS:nothere.invalid,DNS:localhost", &fd);
    rpc_server_close(srv);
    client_close(last, fd);
    pki_free(&p);
    usleep(200 * 1000); /* threads still resolving end (leak check) */
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a client writing to a closed socket */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_san_check),
        cmocka_unit_test(test_dns_match_reverse),
        cmocka_unit_test(test_dns_match_forward),
        cmocka_unit_test(test_dns_match_errors),
        cmocka_unit_test(test_sys_resolver),
        cmocka_unit_test(test_server_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
