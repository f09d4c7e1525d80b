/*
 * handshake.c - TLS for the https:// and unixs:// listeners, with OpenSSL
 * on the loops' non-blocking sockets: the server context built from the
 * PEM material of struct rpc_server_config, and the handshake of one
 * connection, in which the extra check on the client certificate
 * (tls_check: CRL, allowed CN or hostname) has its say.
 *
 * As etcd (Go's crypto/tls with gRPC): TLS 1.2 or later, ALPN "h2"
 * (gRPC clients insist on it), client certificates asked for only when
 * they are verified.
 */
#include <assert.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

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
    (void)ssl;
    (void)arg;
    /* "h2" first, as Go's server prefers it; "http/1.1" for HTTP/1.x
     * clients (curl --http1.1).  A server without an HTTP handler still
     * speaks HTTP/2 on such a connection (conn.c alpn_pick). */
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
    if (h1 != NULL) {
        *out = h1;
        *out_n = 8;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* verify_cb: a client certificate that fails verification, or the extra
 * check, ends the handshake with a "bad certificate" alert, as Go's
 * crypto/tls sends (OpenSSL would say "unknown ca" and the like). */
static int verify_cb(int ok, X509_STORE_CTX *xs)
{
    int idx = SSL_get_ex_data_X509_STORE_CTX_idx();
    SSL *ssl = X509_STORE_CTX_get_ex_data(xs, idx);
    const struct rpc_server *srv =
        ssl != NULL ? SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)) : NULL;
    if (ok && X509_STORE_CTX_get_error_depth(xs) == 0 && srv != NULL &&
        srv->tls_check != NULL &&
        !srv->tls_check(X509_STORE_CTX_get_current_cert(xs),
                        srv->tls_check_ctx))
        ok = 0;
    if (!ok)
        X509_STORE_CTX_set_error(xs, X509_V_ERR_CERT_REJECTED);
    return ok;
}

SSL_CTX *rpc__tls_ctx(const struct rpc_server_config *cfg)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        log_ssl("TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
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

int rpc__tls_handshake(struct rpc__conn *c)
{
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1)
        return 1;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (e == SSL_ERROR_WANT_WRITE)
        return 2; /* the socket's buffer is full: wait for EPOLLOUT */
    ERR_clear_error();
    return -1;
}
