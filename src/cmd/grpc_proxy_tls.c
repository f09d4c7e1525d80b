/*
 * grpc_proxy_tls.c - the TLS material of `cetcd grpc-proxy start`
 * (grpc_proxy.h): the listener's (--cert-file, --key-file,
 * --trusted-ca-file, --client-crl-file, --listen-cipher-suites,
 * --auto-tls) and the upstream client's (--cert, --key, --cacert,
 * --insecure-skip-tls-verify).  The files are read and checked here in
 * etcd's order with Go's messages (crypto/tls's X509KeyPair, etcd's
 * NewCertPool and TLSInfo checks) before rpc/ or libcetcd load them, and
 * logged as etcd's TLSInfo.String().  See grpc_proxy_int.h.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "cmd/grpc_proxy_int.h"
#include "tcpproxy/tcpproxy.h"
#include "util/log.h"
#include "util/mem.h"

/* The largest TLS file read (Go has no limit; no PEM file is this big). */
#define PEM_FILE_MAX (16u << 20)

/* Scratch for messages (main thread only, before other threads exist). */
static char msg_buf[GRPC_PROXY_MSG_MAX], why_buf[GRPC_PROXY_MSG_MAX];

/* etcd's transport.TLSInfo.String() of a TLS listener or client. */
static void log_tls(const char *msg, const char *cert, const char *key,
                    const char *ca)
{
    snprintf(msg_buf, sizeof msg_buf, "cert = %s, key = %s, trusted-ca = %s, "
             "client-cert-auth = false, crl-file = ", cert, key, ca);
    log_zap(LOG_INFO, msg, LOG_STR("tls-info", msg_buf));
}

/* --- TLS files ---------------------------------------------------------- */

/* Reads path whole into *out (mem_free), or Go's error into why. */
static int read_file(const char *path, char **out, char *why, size_t cap)
{
    char text[128];
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        tcpproxy_errno_text(errno, text, sizeof text);
        snprintf(why, cap, "open %s: %s", path, text);
        return 1;
    }
    size_t len = 0, size = 4096;
    char *buf = mem_malloc(size);
    while (buf != NULL && !ferror(f) && !feof(f) && len < PEM_FILE_MAX) {
        if (len + 1 >= size) {
            char *g = mem_realloc(buf, size * 2);
            if (g == NULL)
                mem_free(buf);
            buf = g;
            size *= 2;
            continue;
        }
        len += fread(buf + len, 1, size - len - 1, f);
    }
    int err = ferror(f) ? errno : buf == NULL ? ENOMEM : 0;
    fclose(f);
    if (err == 0 && len >= PEM_FILE_MAX)
        err = EFBIG;
    if (err != 0) {
        tcpproxy_errno_text(err, text, sizeof text);
        snprintf(why, cap, "read %s: %s", path, text);
        mem_free(buf);
        return 1;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

/* Whether a PEM block type is a private key's, as Go's X509KeyPair
 * decides ("PRIVATE KEY" or "... PRIVATE KEY"). */
static bool pem_is_key(const char *type)
{
    size_t n = strlen(type);
    return strcmp(type, "PRIVATE KEY") == 0 ||
           (n > 12 && strcmp(type + n - 12, " PRIVATE KEY") == 0);
}

/* The PEM blocks of pem: the DER of the first one whose type fits
 * (CERTIFICATE, or a private key with want_key) into *der (OPENSSL_free),
 * the types skipped before it as Go's %v of a []string ("[A B]"). */
static bool pem_find(const char *pem, bool want_key, unsigned char **der,
                     long *der_len, char *skipped, size_t cap)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    char *type = NULL, *header = NULL;
    unsigned char *data = NULL;
    long len = 0;
    size_t w = 0;
    bool found = false;
    skipped[0] = '\0';
    while (!found && bio != NULL &&
           PEM_read_bio(bio, &type, &header, &data, &len) == 1) {
        found = want_key ? pem_is_key(type) : strcmp(type, "CERTIFICATE") == 0;
        if (found) {
            *der = data;
            *der_len = len;
            data = NULL;
        } else if (w + 2 < cap) {
            w += (size_t)snprintf(skipped + w, cap - w, "%s%s", w ? " " : "[",
                                  type);
        }
        OPENSSL_free(type);
        OPENSSL_free(header);
        OPENSSL_free(data);
    }
    if (w > 0 && w + 2 < cap)
        strcat(skipped, "]");
    ERR_clear_error();
    BIO_free(bio);
    return found;
}

/* Go's reason when X509KeyPair finds no block of the kind it wants. */
static void pem_missing(bool key, const char *skipped, char *why, size_t cap)
{
    const char *input = key ? "key" : "certificate";
    if (!key && strstr(skipped, "PRIVATE KEY") != NULL)
        snprintf(why, cap, "tls: failed to find certificate PEM data in "
                 "certificate input, but did find a private key; PEM inputs "
                 "may have been switched");
    else if (key && strstr(skipped, "CERTIFICATE") != NULL)
        snprintf(why, cap, "tls: found a certificate rather than a key in "
                 "the PEM for the private key");
    else if (skipped[0] != '\0')
        snprintf(why, cap, "tls: failed to find %s PEM block in %s input "
                 "after skipping PEM blocks of the following types: %s",
                 key ? "PEM block with type ending in \"PRIVATE KEY\""
                     : "\"CERTIFICATE\"",
                 input, skipped);
    else
        snprintf(why, cap, "tls: failed to find any PEM data in %s input",
                 input);
}

/* Go's x509.ParseCertificate of der; its reason in why on failure. */
static X509 *parse_cert(const unsigned char *der, long len, char *why,
                        size_t cap)
{
    const unsigned char *p = der;
    X509 *x = d2i_X509(NULL, &p, len);
    if (x == NULL)
        snprintf(why, cap, "x509: malformed %scertificate",
                 len > 0 && der[0] == 0x30 ? "tbs " : "");
    ERR_clear_error();
    return x;
}

/* The last common name of x's subject (Go's Subject.CommonName). */
static void cert_cn(X509 *x, char *cn, size_t cap)
{
    X509_NAME *name = X509_get_subject_name(x);
    int last = -1;
    cn[0] = '\0';
    for (int i = -1; (i = X509_NAME_get_index_by_NID(name, NID_commonName,
                                                      i)) >= 0;)
        last = i;
    if (last < 0)
        return;
    ASN1_STRING *s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, last));
    int n = ASN1_STRING_length(s);
    snprintf(cn, cap, "%.*s", n, (const char *)ASN1_STRING_get0_data(s));
}

/* Go's tls.X509KeyPair checks of a client certificate and key, with its
 * messages; the certificate's common name into cn. */
static int key_pair_check(const char *cert_pem, const char *key_pem,
                          char *cn, size_t cn_cap, char *why, size_t cap)
{
    char skipped[512];
    unsigned char *der = NULL;
    long len = 0;
    assert(cert_pem != NULL && key_pem != NULL && cn_cap > 0);
    if (!pem_find(cert_pem, false, &der, &len, skipped, sizeof skipped)) {
        pem_missing(false, skipped, why, cap);
        return 1;
    }
    X509 *x = parse_cert(der, len, why, cap);
    OPENSSL_free(der);
    der = NULL;
    if (x == NULL)
        return 1;
    cert_cn(x, cn, cn_cap);
    int rc = 1;
    EVP_PKEY *k = NULL;
    if (!pem_find(key_pem, true, &der, &len, skipped, sizeof skipped)) {
        pem_missing(true, skipped, why, cap);
    } else {
        BIO *bio = BIO_new_mem_buf(key_pem, -1);
        k = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)
                        : NULL;
        BIO_free(bio);
        if (k == NULL)
            snprintf(why, cap, "tls: failed to parse private key");
        else if (X509_check_private_key(x, k) != 1)
            snprintf(why, cap, "tls: private key does not match public key");
        else
            rc = 0;
    }
    ERR_clear_error();
    OPENSSL_free(der);
    EVP_PKEY_free(k);
    X509_free(x);
    return rc;
}

/* etcd's tlsutil.NewCertPool: every PEM block must be a certificate (a
 * file without any is an empty pool, as in Go). */
static int ca_check(const char *pem, char *why, size_t cap)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    char *type = NULL, *header = NULL;
    unsigned char *data = NULL;
    long len = 0;
    int rc = 0;
    while (rc == 0 && bio != NULL &&
           PEM_read_bio(bio, &type, &header, &data, &len) == 1) {
        X509 *x = parse_cert(data, len, why, cap);
        rc = x == NULL;
        X509_free(x);
        OPENSSL_free(type);
        OPENSSL_free(header);
        OPENSSL_free(data);
    }
    ERR_clear_error();
    BIO_free(bio);
    return rc;
}
/* --- the listener's TLS ------------------------------------------------- */

/* --listen-cipher-suites: etcd's names (tlsutil.GetCipherSuites); a bad
 * one is Go's log.Fatal.  Without TLS flags etcd 3.4.23 crashes: refused
 * here. */
static int suites_parse(const struct grpc_proxy_flag_value *v,
                        struct grpc_proxy_srv_tls *t)
{
    static char joined[GRPC_PROXY_LIST_MAX * 64];
    size_t w = 0;
    const struct grpc_proxy_flag_value *fv = &v[GRPC_PROXY_F_SUITES];
    for (size_t i = 0; i < fv->n; i++) {
        if (fv->list[i][0] == '\0')
            return grpc_proxy__std_fatal("unexpected TLS cipher suite \"\"");
        if (rpc_tls_opts_parse(fv->list[i], NULL, NULL, &t->opts, msg_buf,
                               sizeof msg_buf) != 0)
            return grpc_proxy__std_fatal(msg_buf);
        int k = snprintf(joined + w, sizeof joined - w, "%s%s", w ? "," : "",
                         fv->list[i]);
        w += k > 0 && (size_t)k < sizeof joined - w ? (size_t)k : 0;
    }
    if (rpc_tls_opts_parse(joined, NULL, NULL, &t->opts, msg_buf,
                           sizeof msg_buf) != 0)
        return grpc_proxy__std_fatal(msg_buf);
    if (fv->n > 0 && !t->on) {
        grpc_proxy__plain_error("cetcd: --listen-cipher-suites needs "
                                "--cert-file, --key-file or "
                                "--trusted-ca-file (etcd 3.4.23 crashes "
                                "then; --auto-tls certificates take no "
                                "suites)");
        return 1;
    }
    return 0;
}

int grpc_proxy__srv_tls_prepare(const struct grpc_proxy_flag_value *v,
                                struct grpc_proxy_srv_tls *t)
{
    char dir[1100], url[1100];
    assert(t->tls == NULL);
    t->cert = v[GRPC_PROXY_F_CERT_FILE].s;
    t->key = v[GRPC_PROXY_F_KEY_FILE].s;
    t->ca = v[GRPC_PROXY_F_CA_FILE].s;
    t->on = t->cert[0] || t->key[0] || t->ca[0];
    if (suites_parse(v, t) != 0)
        return 1;
    if (!t->on && v[GRPC_PROXY_F_AUTO_TLS].b) {
        const char *d = v[GRPC_PROXY_F_DATA_DIR].s;
        size_t n = strlen(d);
        while (n > 1 && d[n - 1] == '/') /* filepath.Join cleans it */
            n--;
        snprintf(dir, sizeof dir, "%.*s%sfixtures/proxy", (int)n, d,
                 n == 0 || d[n - 1] == '/' ? "" : "/");
        snprintf(url, sizeof url, "https://%s", v[GRPC_PROXY_F_LISTEN].s);
        if (rpc_tls_self_cert(dir, url, t->auto_cert, t->auto_key,
                              sizeof t->auto_cert) != 0)
            return grpc_proxy__std_fatal("cannot create the --auto-tls "
                                         "certificate (see the log line "
                                         "above)");
        t->cert = t->auto_cert;
        t->key = t->auto_key;
        t->on = true;
    }
    if (t->on)
        log_tls("gRPC proxy server TLS", t->cert, t->key, t->ca);
    return 0;
}

/* zap's Fatal of etcd's transport.NewTLSListener failure. */
static int listener_fatal(const char *why)
{
    log_zap(LOG_FATAL, "failed to create TLS listener", LOG_STR("error", why));
    return 1;
}

/* The files' checks in etcd's order (NewTLSListener, ServerConfig) with
 * its messages, then rpc_tls_load.  A CRL only matters with a CA (etcd
 * reads it for client certificates, asked for only then). */
int grpc_proxy__srv_tls_load(const struct grpc_proxy_flag_value *v,
                             struct grpc_proxy_srv_tls *t, const char *bound)
{
    char *cert = NULL, *key = NULL, *ca = NULL, cn[256];
    const char *crl = v[GRPC_PROXY_F_CRL].s;
    int rc = 1;
    assert(t->tls == NULL && bound != NULL);
    if (!t->on)
        return 0;
    if (!t->cert[0] && !t->key[0]) {
        snprintf(why_buf, sizeof why_buf, "cannot listen on TLS for %s: "
                 "KeyFile and CertFile are not presented", bound);
        return listener_fatal(why_buf);
    }
    if (!t->cert[0] || !t->key[0]) {
        snprintf(why_buf, sizeof why_buf, "KeyFile and CertFile must both be "
                 "present[key: %s, cert: %s]", t->key, t->cert);
        return listener_fatal(why_buf);
    }
    if (read_file(t->cert, &cert, why_buf, sizeof why_buf) == 0 &&
        read_file(t->key, &key, why_buf, sizeof why_buf) == 0 &&
        key_pair_check(cert, key, cn, sizeof cn, why_buf,
                       sizeof why_buf) == 0 &&
        (!t->ca[0] || (read_file(t->ca, &ca, why_buf, sizeof why_buf) == 0 &&
                       ca_check(ca, why_buf, sizeof why_buf) == 0)))
        rc = 0;
    mem_free(cert);
    mem_free(key);
    mem_free(ca);
    if (rc != 0)
        return listener_fatal(why_buf);
    struct rpc_tls_files f = {
        .cert_file = t->cert, .key_file = t->key,
        .trusted_ca_file = t->ca[0] ? t->ca : NULL,
        .crl_file = t->ca[0] && crl[0] ? crl : NULL,
        .opts = &t->opts};
    if (rpc_tls_load(&f, &t->tls) != 0)
        return listener_fatal("the TLS files do not load (see the line "
                              "above)");
    assert(t->tls != NULL);
    return 0;
}

void grpc_proxy__srv_tls_apply(const struct grpc_proxy_srv_tls *t,
                               struct rpc_server_config *cfg)
{
    if (t->tls == NULL)
        return;
    cfg->tls_cert_pem = t->tls->cert_pem;
    cfg->tls_key_pem = t->tls->key_pem;
    cfg->tls_ca_pem = t->tls->ca_pem;
    cfg->tls_verify_clients = t->tls->verify_clients;
    cfg->tls_ciphers = t->tls->opts.ciphers;
    cfg->tls_min_version = t->tls->opts.min_version;
    cfg->tls_max_version = t->tls->opts.max_version;
    cfg->tls_files = t->tls;
    if (rpc_tls_has_client_check(t->tls)) {
        cfg->tls_check = rpc_tls_client_check;
        cfg->tls_check_ctx = t->tls;
    }
}

void grpc_proxy__srv_tls_close(struct grpc_proxy_srv_tls *t)
{
    rpc_tls_free(t->tls);
    t->tls = NULL;
}

/* --- the upstream client's TLS ----------------------------------------- */

int grpc_proxy__cli_tls_load(const struct grpc_proxy_flag_value *v,
                             struct grpc_proxy_cli_tls *c)
{
    const char *ca = v[GRPC_PROXY_F_CACERT].s, *cert = v[GRPC_PROXY_F_CERT].s;
    const char *key = v[GRPC_PROXY_F_KEY].s;
    bool skip = v[GRPC_PROXY_F_SKIP_VERIFY].b;
    char cn[256] = "";
    assert(!c->on && c->ca_pem == NULL && c->cert_pem == NULL);
    if (!ca[0] && !cert[0] && !key[0] && !skip)
        return 0;
    if ((cert[0] || key[0]) && (!cert[0] || !key[0]))
        return grpc_proxy__plain_error("KeyFile and CertFile must both be "
                                       "present[key: %s, cert: %s]", key,
                                       cert);
    if (cert[0] &&
        (read_file(cert, &c->cert_pem, why_buf, sizeof why_buf) != 0 ||
         read_file(key, &c->key_pem, why_buf, sizeof why_buf) != 0 ||
         key_pair_check(c->cert_pem, c->key_pem, cn, sizeof cn, why_buf,
                        sizeof why_buf) != 0))
        return grpc_proxy__plain_error("%s", why_buf);
    if (ca[0] && (read_file(ca, &c->ca_pem, why_buf, sizeof why_buf) != 0 ||
                  ca_check(c->ca_pem, why_buf, sizeof why_buf) != 0))
        return grpc_proxy__plain_error("%s", why_buf);
    if (cn[0] != '\0')
        return grpc_proxy__plain_error("cert has non empty Common Name (%s)",
                                       cn);
    if (skip)
        log_zap_at(LOG_WARN, __FILE__, __LINE__, "--insecure-skip-tls-verify "
                   "was given, this grpc proxy process skips authentication "
                   "of etcd server TLS certificates. This option should be "
                   "enabled only for testing purposes.", NULL, 0);
    log_tls("gRPC proxy client TLS", cert, key, ca);
    c->tls = (struct cetcd_tls){.ca_pem = c->ca_pem, .cert_pem = c->cert_pem,
                                .key_pem = c->key_pem,
                                .insecure_skip_verify = skip};
    c->on = true;
    return 0;
}

void grpc_proxy__cli_tls_close(struct grpc_proxy_cli_tls *c)
{
    mem_free(c->ca_pem);
    mem_free(c->cert_pem);
    mem_free(c->key_pem);
    memset(c, 0, sizeof *c);
}
