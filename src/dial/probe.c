/*
 * probe.c - why a TLS connection fails (see dial.h, dial_tls_probe).
 *
 * gRPC reports an endpoint it cannot connect to as UNAVAILABLE whatever
 * the cause; the TLS reason only reaches its own debug log.  To tell an
 * operator why (etcd prints Go's "remote error: tls: bad certificate"),
 * the probe makes one handshake of its own with OpenSSL, with the same
 * material and the same checks as dial_creds_create, and then waits
 * briefly for the server's first bytes: with TLS 1.3 a server that
 * refuses the client certificate says so only after the client finished
 * its side of the handshake.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "dial/dial.h"
#include "dial/dial_int.h"
#include "util/err.h"
#include "util/mem.h"

/* split_host copies the host of "host:port" / "[v6]:port" into host and
 * points *port at the port. */
static int split_host(const char *target, char *host, size_t cap,
                      const char **port)
{
    const char *colon = strrchr(target, ':');
    if (colon == NULL)
        return ERR_INVAL;
    const char *b = target, *e = colon;
    if (*b == '[' && e > b && e[-1] == ']') {
        b++;
        e--;
    }
    if ((size_t)(e - b) + 1 > cap)
        return ERR_INVAL;
    memcpy(host, b, (size_t)(e - b));
    host[e - b] = '\0';
    *port = colon + 1;
    return 0;
}

static void timeouts_set(int fd, int timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000,
                         .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); /* connect */
}

/* sock_open connects to target (a dial_url_parse output) within
 * timeout_ms; host gets the name certificates are checked against. */
static int sock_open(const char *target, int timeout_ms, char *host,
                     size_t cap, char *why, size_t why_cap)
{
    int fd = -1;
    host[0] = '\0';
    if (strncmp(target, "unix:", 5) == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(target + 5) >= sizeof sa.sun_path) {
            snprintf(why, why_cap, "socket path too long");
            return -1;
        }
        memcpy(sa.sun_path, target + 5, strlen(target + 5) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeouts_set(fd, timeout_ms);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
    } else {
        const char *port;
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (split_host(target, host, cap, &port) != 0 ||
            getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL) {
            snprintf(why, why_cap, "cannot resolve %s", target);
            return -1;
        }
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeouts_set(fd, timeout_ms);
        int rc = fd >= 0 ? connect(fd, ai->ai_addr, ai->ai_addrlen) : -1;
        freeaddrinfo(ai);
        if (rc == 0)
            return fd;
    }
    snprintf(why, why_cap, "cannot connect: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

/* certs_add adds every certificate of pem to the store (roots) or, with
 * ctx, uses the first as the certificate and the rest as its chain.
 * Returns how many were read. */
static int certs_add(const char *pem, X509_STORE *roots, SSL_CTX *ctx)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x;
    int n = 0;
    while (b != NULL && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        int ok = roots != NULL  ? X509_STORE_add_cert(roots, x)
                 : n == 0       ? SSL_CTX_use_certificate(ctx, x)
                                : SSL_CTX_add_extra_chain_cert(ctx, x);
        if (roots != NULL || n == 0 || !ok)
            X509_free(x); /* add_extra_chain_cert took it on success */
        n += ok == 1;
    }
    ERR_clear_error(); /* the end of the PEM text */
    BIO_free(b);
    return n;
}

/* ctx_create builds the OpenSSL context for tls, as dial_creds_create
 * configures gRPC: own certificate, CAs or the system's, verification;
 * alpn: the protocols offered (wire format). */
static SSL_CTX *ctx_create(const struct dial_tls *tls, const char *alpn)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return NULL;
    bool ok = SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)alpn,
                                      (unsigned)strlen(alpn)) == 0;
    SSL_CTX_set_verify(ctx, tls->skip_verify ? SSL_VERIFY_NONE
                                             : SSL_VERIFY_PEER, NULL);
    if (!tls->skip_verify && tls->ca_pem != NULL)
        ok = ok && certs_add(tls->ca_pem, SSL_CTX_get_cert_store(ctx),
                             NULL) > 0;
    else if (!tls->skip_verify)
        ok = ok && SSL_CTX_set_default_verify_paths(ctx) == 1;
    if (ok && tls->cert_pem != NULL) {
        BIO *b = BIO_new_mem_buf(tls->key_pem, -1);
        EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
        ok = certs_add(tls->cert_pem, NULL, ctx) > 0 && k != NULL &&
             SSL_CTX_use_PrivateKey(ctx, k) == 1;
        EVP_PKEY_free(k);
        BIO_free(b);
    }
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* ssl_why writes why the handshake or the first read failed. */
static void ssl_why(SSL *ssl, int rc, const char *stage, char *why,
                    size_t cap)
{
    long v = SSL_get_verify_result(ssl);
    unsigned long e = ERR_peek_last_error();
    int err = SSL_get_error(ssl, rc);
    /* OpenSSL 3 reports a close without close_notify as an error. */
    bool eof = (e != 0 &&
                ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
               (e == 0 && (err == SSL_ERROR_ZERO_RETURN || rc == 0 ||
                           (err == SSL_ERROR_SYSCALL && errno == 0)));
    if (v != X509_V_OK)
        snprintf(why, cap, "%s: the server certificate: %s", stage,
                 X509_verify_cert_error_string(v));
    else if (eof)
        snprintf(why, cap, "%s: the server closed the connection (does it "
                 "trust this client certificate?)", stage);
    else if (e != 0)
        snprintf(why, cap, "%s: %s", stage, ERR_reason_error_string(e));
    else
        snprintf(why, cap, "%s: %s", stage, strerror(errno));
}

/* host_check makes the handshake check the certificate against host. */
static void host_check(SSL *ssl, const char *host)
{
    unsigned char ip[16];
    bool is_ip = inet_pton(AF_INET, host, ip) == 1 ||
                 inet_pton(AF_INET6, host, ip) == 1;
    if (is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
    } else {
        SSL_set1_host(ssl, host);
        SSL_set_tlsext_host_name(ssl, host);
    }
}

/* names_allowed: tls has no allowed CN or hostname, or the server's
 * certificate on ssl fits them (as the credentials' verifier decides;
 * with skip_verify none does, as etcd's check then has no chain). */
static bool names_allowed(SSL *ssl, const struct dial_tls *tls)
{
    if (tls->allowed_cn == NULL && tls->allowed_hostname == NULL)
        return true;
    if (tls->skip_verify)
        return false;
    X509 *x = SSL_get1_peer_certificate(ssl);
    bool ok = dial__cert_allowed(x, tls->allowed_cn,
                                 tls->allowed_cn != NULL
                                     ? NULL
                                     : tls->allowed_hostname);
    X509_free(x);
    return ok;
}

/* A connection: TLS (ssl set) made with a dial_tls's material and
 * checks, or plain text (ssl and ctx NULL). */
struct conn {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
};

static void conn_close(struct conn *t)
{
    SSL_free(t->ssl);
    if (t->fd >= 0)
        close(t->fd);
    SSL_CTX_free(t->ctx);
    ERR_clear_error();
}

/* tls_connect connects to target and makes the handshake, offering alpn;
 * 0, or an ERR_* with why written (t is then closed already). */
static int tls_connect(struct conn *t, const char *target,
                       const struct dial_tls *tls, const char *alpn,
                       int timeout_ms, char *why, size_t cap)
{
    char host[256];
    assert(target != NULL && tls != NULL && why != NULL && cap > 0);
    assert((tls->cert_pem == NULL) == (tls->key_pem == NULL));
    why[0] = '\0';
    ERR_clear_error();
    t->ssl = NULL;
    t->fd = -1;
    t->ctx = ctx_create(tls, alpn);
    if (t->ctx == NULL) {
        snprintf(why, cap, "unusable TLS material");
        return ERR_INVAL;
    }
    t->fd = sock_open(target, timeout_ms, host, sizeof host, why, cap);
    t->ssl = t->fd >= 0 ? SSL_new(t->ctx) : NULL;
    int rv = t->fd < 0 ? ERR_IO : t->ssl == NULL ? ERR_NOMEM : 0;
    if (rv == ERR_NOMEM)
        snprintf(why, cap, "out of memory");
    if (rv == 0) {
        if (!tls->skip_verify && host[0] != '\0')
            host_check(t->ssl, host);
        SSL_set_fd(t->ssl, t->fd);
        int rc = SSL_connect(t->ssl);
        if (rc != 1) {
            ssl_why(t->ssl, rc, "TLS handshake failed", why, cap);
            rv = ERR_IO;
        }
    }
    if (rv == 0 && !names_allowed(t->ssl, tls)) {
        snprintf(why, cap, "TLS handshake failed: client certificate "
                 "authentication failed (the server certificate lacks "
                 "the allowed %s \"%s\")",
                 tls->allowed_cn != NULL ? "CN" : "hostname",
                 tls->allowed_cn != NULL ? tls->allowed_cn
                                         : tls->allowed_hostname);
        rv = ERR_IO;
    }
    if (rv != 0)
        conn_close(t);
    return rv;
}

/* conn_write writes all n bytes of p to t (TLS) or fd (plain); false
 * on failure, with why written. */
static bool conn_write(struct conn *t, const void *p, size_t n,
                       char *why, size_t cap)
{
    if (t->ssl != NULL) {
        int rc = n > 0 ? SSL_write(t->ssl, p, (int)n) : 1;
        if (rc > 0)
            return true;
        ssl_why(t->ssl, rc, "TLS write failed", why, cap);
        return false;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = send(t->fd, (const char *)p + off, n - off,
                         MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(why, cap, "write failed: %s", strerror(errno));
            return false;
        }
        off += (size_t)w;
    }
    return true;
}

/* conn_read reads at most n bytes into p: > 0 bytes read, 0 at the end,
 * -1 on failure (why written). */
static ssize_t conn_read(struct conn *t, void *p, size_t n, char *why,
                         size_t cap)
{
    if (t->ssl == NULL) {
        for (;;) {
            ssize_t r = recv(t->fd, p, n, 0);
            if (r >= 0)
                return r;
            if (errno != EINTR) {
                snprintf(why, cap, "read failed: %s", strerror(errno));
                return -1;
            }
        }
    }
    int rc = SSL_read(t->ssl, p, (int)n);
    if (rc > 0)
        return rc;
    int err = SSL_get_error(t->ssl, rc);
    unsigned long e = ERR_peek_last_error();
    /* The end: close_notify, or a close without it (OpenSSL 3 calls that
     * an error; HTTP/1.0 answers end so). */
    if (err == SSL_ERROR_ZERO_RETURN ||
        (e != 0 && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
        (err == SSL_ERROR_SYSCALL && e == 0 && errno == 0))
        return 0;
    ssl_why(t->ssl, rc, "TLS read failed", why, cap);
    return -1;
}

int dial_exchange(const char *target, const struct dial_tls *tls,
                  const char *alpn, const void *req, size_t req_len,
                  int timeout_ms, size_t max, char **resp_out,
                  size_t *len_out, char *why, size_t cap)
{
    struct conn t = {.fd = -1};
    char host[256];
    char *buf = NULL;
    size_t len = 0;
    int rv = 0;
    assert(target != NULL && req != NULL && resp_out != NULL &&
           len_out != NULL && max > 0 && why != NULL && cap > 0);
    *resp_out = NULL;
    *len_out = 0;
    why[0] = '\0';
    if (tls != NULL) {
        rv = tls_connect(&t, target, tls, alpn, timeout_ms, why, cap);
        if (rv != 0)
            return rv;
    } else {
        t.fd = sock_open(target, timeout_ms, host, sizeof host, why, cap);
        if (t.fd < 0)
            return ERR_IO;
    }
    if (!conn_write(&t, req, req_len, why, cap)) {
        conn_close(&t);
        return ERR_IO;
    }
    buf = mem_malloc(max + 1);
    if (buf == NULL) {
        snprintf(why, cap, "out of memory");
        conn_close(&t);
        return ERR_NOMEM;
    }
    for (;;) {
        if (len == max) { /* more than max: refused */
            snprintf(why, cap, "answer longer than %zu bytes", max);
            rv = ERR_TOO_LARGE;
            break;
        }
        size_t want = max - len < 65536 ? max - len : 65536;
        ssize_t r = conn_read(&t, buf + len, want, why, cap);
        if (r < 0)
            rv = ERR_IO;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    conn_close(&t);
    if (rv != 0) {
        mem_free(buf);
        return rv;
    }
    buf[len] = '\0';
    *resp_out = buf;
    *len_out = len;
    return 0;
}

int dial_tls_probe(const char *target, const struct dial_tls *tls,
                   int timeout_ms, char *why, size_t cap)
{
    struct conn t;
    int rv = tls_connect(&t, target, tls, "\x02h2", timeout_ms, why, cap);
    if (rv != 0)
        return rv;
    /* A gRPC server speaks first (HTTP/2 settings); a refusal of our
     * certificate arrives instead.  Silence (a timeout) is no error. */
    char byte;
    int rc = SSL_read(t.ssl, &byte, 1);
    int err = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(t.ssl, rc);
    bool quiet = err == SSL_ERROR_WANT_READ ||
                 (err == SSL_ERROR_SYSCALL &&
                  (errno == EAGAIN || errno == EWOULDBLOCK));
    if (rc <= 0 && !quiet) {
        ssl_why(t.ssl, rc, "TLS refused after the handshake", why, cap);
        rv = ERR_IO;
    }
    conn_close(&t);
    assert(rv == 0 || why[0] != '\0');
    return rv;
}

/* refuse_cb fails the server's certificate, whatever it is: OpenSSL then
 * sends the alert of X509_V_ERR_CERT_REJECTED, "bad certificate". */
static int refuse_cb(int ok, X509_STORE_CTX *xs)
{
    (void)ok;
    X509_STORE_CTX_set_error(xs, X509_V_ERR_CERT_REJECTED);
    return 0;
}

void dial__tls_refuse(const char *target, int timeout_ms)
{
    static const unsigned char alpn[] = "\x02h2";
    char host[256], why[160];
    assert(target != NULL && timeout_ms > 0);
    int fd = sock_open(target, timeout_ms, host, sizeof host, why,
                       sizeof why);
    if (fd < 0)
        return;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = ctx != NULL ? SSL_new(ctx) : NULL;
    if (ssl != NULL) {
        SSL_set_alpn_protos(ssl, alpn, sizeof alpn - 1);
        SSL_set_verify(ssl, SSL_VERIFY_PEER, refuse_cb);
        SSL_set_fd(ssl, fd);
        /* Fails in refuse_cb as soon as the server's certificate comes
         * (a server that sends none gets no alert: nothing to refuse). */
        (void)SSL_connect(ssl);
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    ERR_clear_error();
}
