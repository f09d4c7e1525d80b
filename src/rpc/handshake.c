/*
 * handshake.c - TLS for the https:// and unixs:// listeners, with OpenSSL
 * on the loops' non-blocking sockets: the server context built from the
 * PEM material of struct rpc_server_config, and the handshake of one
 * connection, in which the extra check on the client certificate
 * (tls_check: CRL, allowed CN or hostname, the peer listener's SAN
 * check) has its say.
 *
 * As etcd (Go's crypto/tls with gRPC): TLS 1.2 or later (or the
 * versions of --tls-min-version / --tls-max-version), the TLS 1.2 suites
 * of --cipher-suites, ALPN "h2" (gRPC clients insist on it), client
 * certificates asked for only when they are verified.  A failed handshake
 * is logged as etcd logs it: "rejected connection from "ip:port" (error
 * "...", ServerName "...")", with crypto/tls's words for the reason.
 *
 * A tls_check that needs DNS lookups (the peer listener's SAN check of a
 * certificate with DNS SANs, tls_san.c) lets the handshake finish, as
 * etcd checks after its handshake: the connection is then held, read
 * from by nobody, while a thread looks the names up (san_lookup.c), and
 * goes on or is closed when the verdict comes back to its loop.  Such a
 * refusal is logged as etcd logs one after its handshake, with the
 * certificate's SANs: "..., ServerName "...", IPAddresses [...],
 * DNSNames [...])".
 *
 * The context is rebuilt when the files behind it change (tls.h
 * rpc_tls_stale): every SSL object holds a reference to the context it
 * was made from, so the old one lives on with the connections that use
 * it and is freed with the last of them.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "rpc/rpc_int.h"
#include "rpc/tls.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/tls_alert.h"

/* Why a client certificate was refused, in Go's words, kept on its SSL
 * (ex data: an OPENSSL_strdup'ed string freed with the SSL) for the log
 * line: OpenSSL's verify error is overwritten to send Go's alert. */
static int ex_index = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

static void ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                    long argl, void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    OPENSSL_free(ptr);
}

static void ex_index_make(void)
{
    ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, ex_free);
}

static void log_ssl(const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    log_error("embed", "%s: %s", what, e != 0 ? buf : "unknown error");
    ERR_clear_error();
}

/* use_chain loads the certificate chain: the first certificate is the
 * server's, the rest go along with it. */
static bool use_chain(SSL_CTX *ctx, const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    if (b == NULL)
        return false;
    X509 *leaf = PEM_read_bio_X509(b, NULL, NULL, NULL);
    bool ok = leaf != NULL && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    while (ok) {
        X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
        if (x == NULL)
            break;
        if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
            X509_free(x);
            ok = false;
        }
    }
    ERR_clear_error(); /* the end of the PEM bundle */
    BIO_free(b);
    return ok;
}

static bool use_key(SSL_CTX *ctx, const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    if (b == NULL)
        return false;
    EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    bool ok = k != NULL && SSL_CTX_use_PrivateKey(ctx, k) == 1 &&
              SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(k);
    BIO_free(b);
    return ok;
}

static bool use_cas(SSL_CTX *ctx, const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    if (b == NULL)
        return false;
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    int n = 0;
    for (;;) {
        X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
        if (x == NULL)
            break;
        if (X509_STORE_add_cert(st, x) == 1)
            n++;
        X509_free(x);
    }
    ERR_clear_error();
    BIO_free(b);
    return n > 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out,
                       unsigned char *out_n, const unsigned char *in,
                       unsigned int in_n, void *arg)
{
    (void)arg;
    /* "h2" first, as Go's server prefers it; "http/1.1" for HTTP/1.x
     * clients (curl --http1.1).  A server without an HTTP handler (gRPC
     * only) offers "h2" only, as grpc-go's: an http/1.1 client is let in
     * without ALPN (Go's fallback) and meets HTTP/2 (conn.c alpn_pick). */
    const struct rpc_server *srv = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    bool grpc_only = srv != NULL && srv->http == NULL;
    const unsigned char *h1 = NULL;
    for (unsigned i = 0; i < in_n; i += 1u + in[i]) {
        if (in[i] == 2 && i + 2 < in_n && memcmp(in + i + 1, "h2", 2) == 0) {
            *out = in + i + 1;
            *out_n = 2;
            return SSL_TLSEXT_ERR_OK;
        }
        if (in[i] == 8 && i + 8 < in_n &&
            memcmp(in + i + 1, "http/1.1", 8) == 0)
            h1 = in + i + 1;
    }
    if (h1 != NULL && !grpc_only) {
        *out = h1;
        *out_n = 8;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* chain_why: Go's words for a chain that did not verify. */
static const char *chain_why(long err)
{
    switch (err) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        return "certificate signed by unknown authority";
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return "certificate has expired or is not yet valid";
    case X509_V_ERR_INVALID_PURPOSE:
        return "certificate specifies an incompatible key usage";
    default:
        return X509_verify_cert_error_string(err);
    }
}

/* remote_ip writes the text of fd's remote IP into buf (an IPv4-mapped
 * IPv6 address as IPv4, as Go prints it) and returns buf; NULL for a
 * socket that is not IP (unix) or has no peer. */
static const char *remote_ip(int fd, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &n) != 0)
        return NULL;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        return inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t)cap);
    }
    if (ss.ss_family != AF_INET6)
        return NULL;
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
        return inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], buf,
                         (socklen_t)cap);
    return inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t)cap);
}

/* leaf_check asks the server's tls_check about the client certificate x
 * on ssl; why (cap bytes) stays empty when it passes for now: accepted,
 * or its DNS SANs to be looked up after the handshake (a job on ssl). */
static void leaf_check(const struct rpc_server *srv, SSL *ssl, X509 *x,
                       char *why, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    const char *rip = remote_ip(SSL_get_fd(ssl), ip, sizeof ip);
    enum rpc_tls_verdict v = srv->tls_check(x, rip, NULL, srv->tls_check_ctx,
                                            why, cap);
    if (v == RPC_TLS_LOOKUP &&
        (rip == NULL || rpc__san_job_attach(ssl, x, rip) != 0))
        snprintf(why, cap, "tls: client certificate's DNS names not "
                 "checked: out of memory");
    else if (v == RPC_TLS_REFUSE && why[0] == '\0')
        snprintf(why, cap, "client certificate refused");
    else if (v != RPC_TLS_REFUSE)
        why[0] = '\0';
}

/* verify_cb: a client certificate that fails verification, or the extra
 * check, ends the handshake with a "bad certificate" alert, as Go's
 * crypto/tls sends (OpenSSL would say "unknown ca" and the like).  etcd
 * makes its listener's checks (SANs, CRL) after the handshake and closes
 * the connection without an alert; the client is refused either way and
 * the server logs the same line.  A check that needs DNS lookups is made
 * after the handshake, as etcd's (rpc__tls_handshake). */
static int verify_cb(int ok, X509_STORE_CTX *xs)
{
    int idx = SSL_get_ex_data_X509_STORE_CTX_idx();
    SSL *ssl = X509_STORE_CTX_get_ex_data(xs, idx);
    const struct rpc_server *srv =
        ssl != NULL ? SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)) : NULL;
    char why[256] = "";
    if (!ok)
        snprintf(why, sizeof why, "tls: failed to verify client certificate:"
                 " x509: %s", chain_why(X509_STORE_CTX_get_error(xs)));
    else if (X509_STORE_CTX_get_error_depth(xs) == 0 && srv != NULL &&
             srv->tls_check != NULL)
        leaf_check(srv, ssl, X509_STORE_CTX_get_current_cert(xs), why,
                   sizeof why);
    if (why[0] == '\0')
        return ok;
    if (ssl != NULL && ex_index >= 0 &&
        SSL_get_ex_data(ssl, ex_index) == NULL) {
        char *copy = OPENSSL_strdup(why);
        if (copy != NULL && SSL_set_ex_data(ssl, ex_index, copy) != 1)
            OPENSSL_free(copy);
    }
    X509_STORE_CTX_set_error(xs, X509_V_ERR_CERT_REJECTED);
    return 0;
}

SSL_CTX *rpc__tls_ctx(const struct rpc_server_config *cfg)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        log_ssl("TLS context");
        return NULL;
    }
    pthread_once(&ex_once, ex_index_make);
    SSL_CTX_set_min_proto_version(ctx, cfg->tls_min_version
                                           ? cfg->tls_min_version
                                           : TLS1_2_VERSION);
    if (cfg->tls_max_version != 0)
        SSL_CTX_set_max_proto_version(ctx, cfg->tls_max_version);
    if (cfg->tls_ciphers != NULL && *cfg->tls_ciphers != '\0' &&
        SSL_CTX_set_cipher_list(ctx, cfg->tls_ciphers) != 1) {
        log_ssl("TLS cipher suites");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    /* No session resumption: a resumed handshake skips the verify
     * callback, so the client certificate's checks (allowed names, SANs,
     * CRL, which etcd makes on every connection) would not run, and a
     * session ticket is issued before a check made after the handshake
     * (the DNS SANs) has refused the certificate. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    if (!use_chain(ctx, cfg->tls_cert_pem) ||
        !use_key(ctx, cfg->tls_key_pem)) {
        log_ssl("TLS certificate or key");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (cfg->tls_verify_clients) {
        if (!use_cas(ctx, cfg->tls_ca_pem)) {
            log_ssl("TLS trusted CA");
            SSL_CTX_free(ctx);
            return NULL;
        }
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           verify_cb);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    return ctx;
}

/* failure_why puts crypto/tls's words for a failed handshake into buf. */
static void failure_why(SSL *ssl, int ssl_err, char *buf, size_t cap)
{
    unsigned long e = ERR_peek_error();
    int reason = ERR_GET_REASON(e);
    const char *refused = ex_index >= 0 ? SSL_get_ex_data(ssl, ex_index)
                                        : NULL;
    char alert[64];
    if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
        snprintf(buf, cap, "remote error: tls: %s",
                 tls_alert_text(reason - SSL_AD_REASON_OFFSET, alert,
                                sizeof alert));
    else if (refused != NULL)
        snprintf(buf, cap, "%s", refused);
    else if (reason == SSL_R_NO_SHARED_CIPHER)
        snprintf(buf, cap, "tls: no cipher suite supported by both client "
                 "and server");
    else if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
        snprintf(buf, cap, "tls: client didn't provide a certificate");
    else if (reason == SSL_R_UNSUPPORTED_PROTOCOL ||
             reason == SSL_R_VERSION_TOO_LOW ||
             reason == SSL_R_VERSION_TOO_HIGH)
        snprintf(buf, cap, "tls: client offered only unsupported versions");
    else if (reason == SSL_R_HTTP_REQUEST || reason == SSL_R_WRONG_VERSION_NUMBER
             || reason == SSL_R_HTTPS_PROXY_REQUEST)
        snprintf(buf, cap, "tls: first record does not look like a TLS "
                 "handshake");
    else if (e == 0)
        snprintf(buf, cap, ssl_err == SSL_ERROR_SYSCALL ||
                           ssl_err == SSL_ERROR_ZERO_RETURN ? "EOF"
                                                            : "unknown error");
    else
        snprintf(buf, cap, "tls: %s", ERR_reason_error_string(e)
                                          ? ERR_reason_error_string(e)
                                          : "handshake failed");
}

/* peer_addr writes "ip:port" (or the socket path) of fd into buf. */
static void peer_addr(int fd, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "";
    buf[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&ss, &n) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        snprintf(buf, cap, "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    } else {
        snprintf(buf, cap, "@"); /* a unix socket: Go prints "@" too */
    }
}

/* peer_cn is the common name of the verified client certificate, as Go's
 * x509 Subject.CommonName (the last CN attribute, as UTF-8), copied
 * (mem_free it): "" for a certificate without one (Go's CommonName is ""
 * then too, and etcd names the user "": permission denied, not "user name
 * is empty"); NULL: no certificate, not verified, a NUL inside, no memory. */
static char *peer_cn(SSL *ssl)
{
    X509 *x = SSL_get0_peer_certificate(ssl);
    if (x == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
        return NULL;
    X509_NAME *name = X509_get_subject_name(x);
    int at = -1;
    for (int i; (i = X509_NAME_get_index_by_NID(name, NID_commonName,
                                                at)) >= 0;)
        at = i;
    if (at < 0)
        return mem_calloc(1, 1);
    unsigned char *utf8 = NULL;
    int n = ASN1_STRING_to_UTF8(
        &utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at)));
    char *cn = NULL;
    if (n == 0 || (n > 0 && memchr(utf8, '\0', (size_t)n) == NULL))
        cn = mem_malloc((size_t)n + 1);
    if (cn != NULL) {
        memcpy(cn, utf8, (size_t)n);
        cn[n] = '\0';
    }
    OPENSSL_free(utf8);
    return cn;
}

/* log_rejected logs c's refusal as etcd does: the address and the
 * ServerName of the client, Go's %q of the reason; after the handshake
 * (x: the client's certificate, else NULL) the certificate's SANs too. */
static void log_rejected(const struct rpc__conn *c, const char *why, X509 *x)
{
    char addr[80], quoted[2100], sans[600] = "";
    size_t at = 0;
    peer_addr(c->fd, addr, sizeof addr);
    rpc__go_quote(why, quoted, sizeof quoted, &at);
    if (x != NULL) {
        sans[0] = ',';
        sans[1] = ' ';
        rpc__san_lists(x, sans + 2, sizeof sans - 2);
    }
    const char *sni = SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
    log_info("embed", "rejected connection from \"%s\" (error %s, "
             "ServerName \"%s\"%s)", addr, quoted, sni != NULL ? sni : "",
             sans);
}

/* san_verdict: the handshake is over and job (c's lookups) was made for
 * the client certificate: the lookups are started, under way, or done,
 * and then the server's check is asked again with their verdict, as
 * etcd's listener checks after its handshake.  rpc__tls_handshake's
 * codes; a refusal closes without an alert, as in etcd. */
static int san_verdict(struct rpc__conn *c, struct rpc__san_job *job)
{
    const struct rpc_server *srv = c->loop->srv;
    char why[1024] = "";
    struct rpc_tls_dns dns;
    int rv = rpc__san_job_poll(job, c, &dns, why, sizeof why);
    if (rv == 0)
        return RPC__TLS_SAN_WAIT;
    X509 *x = SSL_get0_peer_certificate(c->ssl);
    if (rv == 1 && x != NULL &&
        srv->tls_check(x, rpc__san_job_ip(job), &dns, srv->tls_check_ctx,
                       why, sizeof why) == RPC_TLS_PASS)
        return 1;
    if (why[0] == '\0')
        snprintf(why, sizeof why, "client certificate refused");
    log_rejected(c, why, x);
    return -1;
}

int rpc__tls_handshake(struct rpc__conn *c)
{
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        struct rpc__san_job *job = rpc__san_job_of(c->ssl);
        int rv = job != NULL ? san_verdict(c, job) : 1;
        if (rv != 1)
            return rv;
        assert(c->peer_cn == NULL);
        if (c->loop->srv->tls_cn_identity)
            c->peer_cn = peer_cn(c->ssl);
        return 1;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (e == SSL_ERROR_WANT_WRITE)
        return 2; /* the socket's buffer is full: wait for EPOLLOUT */
    char why[256];
    failure_why(c->ssl, e, why, sizeof why);
    ERR_clear_error();
    log_rejected(c, why, NULL);
    return -1;
}

/* ctx_rebuild makes a context from the reloaded files (tls_mu held). */
static void ctx_rebuild(struct rpc_server *srv)
{
    struct rpc_tls *fresh = NULL;
    if (rpc_tls_reload(srv->tls_files, &fresh) != 0)
        return; /* logged; the old context stays */
    struct rpc_server_config cfg = {
        .tls_cert_pem = fresh->cert_pem,
        .tls_key_pem = fresh->key_pem,
        .tls_ca_pem = fresh->ca_pem,
        .tls_verify_clients = fresh->verify_clients,
        .tls_ciphers = srv->tls_ciphers,
        .tls_min_version = srv->tls_min_version,
        .tls_max_version = srv->tls_max_version};
    SSL_CTX *ctx = rpc__tls_ctx(&cfg);
    rpc_tls_free(fresh);
    if (ctx == NULL) {
        log_warn("embed", "cannot use the changed TLS files; still using "
                 "the previous certificate");
        return;
    }
    SSL_CTX_set_app_data(ctx, srv);
    SSL_CTX_free(srv->tls); /* connections hold their own references */
    srv->tls = ctx;
}

SSL *rpc__tls_ssl_new(struct rpc_server *srv)
{
    assert(srv != NULL && srv->tls != NULL);
    pthread_mutex_lock(&srv->tls_mu);
    if (srv->tls_files != NULL && rpc_tls_stale(srv->tls_files, srv->tls_stamps))
        ctx_rebuild(srv);
    SSL *ssl = SSL_new(srv->tls);
    pthread_mutex_unlock(&srv->tls_mu);
    return ssl;
}
