/*
 * tls.c - loading and generating the TLS material of the member's
 * listeners (see tls.h).  OpenSSL does the parsing and the certificate
 * generation; the gRPC core gets PEM strings.
 *
 * Self-signed certificates follow etcd's transport.SelfCert (behaviour, not
 * code): <dir>/cert.pem + <dir>/key.pem ("EC PRIVATE KEY"), reused when both
 * exist, else created with a random 128-bit serial, O=etcd, key usage
 * digitalSignature + keyEncipherment, extended usage serverAuth, one year
 * of validity, and SANs for the listen hosts.  etcd 3.4 uses P-521; we use
 * P-256, which every TLS stack offers (the certificate is never verified
 * by clients anyway: they run with --insecure-skip-tls-verify).
 */
#include "rpc/tls.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/x509_host.h"

#define TLS_FILE_MAX (4u << 20) /* a PEM bundle larger than this is junk */
#define SELF_CERT_DAYS 365
#define SAN_MAX 2048

/* read_file reads a whole (small) file into a NUL-terminated buffer owned
 * by the caller (mem_free). */
static int read_file(const char *path, char **out)
{
    assert(path != NULL && out != NULL);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        log_error("embed", "cannot open %s: %s", path, strerror(errno));
        return ERR_IO;
    }
    char *buf = mem_malloc(TLS_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(f);
        return ERR_NOMEM;
    }
    size_t n = fread(buf, 1, TLS_FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > TLS_FILE_MAX) {
        log_error("embed", "cannot read %s (unreadable or over %u bytes)",
                  path, TLS_FILE_MAX);
        mem_free(buf);
        return bad ? ERR_IO : ERR_INVAL;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

/* openssl_why returns OpenSSL's last error text (static buffer). */
static const char *openssl_why(void)
{
    static char buf[256];
    unsigned long e = ERR_get_error();
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return e == 0 ? "no PEM data found" : buf;
}

/* --- cipher suites and versions ----------------------------------------- */

/* Go's crypto/tls suite names (tls.CipherSuites() and
 * tls.InsecureCipherSuites() of the Go that built etcd, plus etcd's two
 * aliases) with OpenSSL's names.  NULL: a TLS 1.3 suite, which Go does not
 * let a configuration choose. */
static const struct {
    const char *go;
    const char *openssl;
} suites[] = {
    {"TLS_RSA_WITH_RC4_128_SHA", "RC4-SHA"},
    {"TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA"},
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"},
    {"TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA-RC4-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
    {"TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA-RC4-SHA"},
    {"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
     "ECDHE-ECDSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
     "ECDHE-ECDSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
     "ECDHE-RSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
     "ECDHE-ECDSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
     "ECDHE-ECDSA-CHACHA20-POLY1305"},
    {"TLS_AES_128_GCM_SHA256", NULL},
    {"TLS_AES_256_GCM_SHA384", NULL},
    {"TLS_CHACHA20_POLY1305_SHA256", NULL},
};

/* suite_add appends the OpenSSL name of the Go suite name[0..len) to
 * out->ciphers; false for an unknown name. */
static bool suite_add(const char *name, size_t len, struct rpc_tls_opts *out,
                      bool *tls12)
{
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
        if (strlen(suites[i].go) != len ||
            strncmp(suites[i].go, name, len) != 0)
            continue;
        if (suites[i].openssl == NULL)
            return true;
        size_t n = strlen(out->ciphers);
        snprintf(out->ciphers + n, sizeof out->ciphers - n, "%s%s",
                 n ? ":" : "", suites[i].openssl);
        *tls12 = true;
        return true;
    }
    return false;
}

/* version_parse: etcd 3.5's tlsutil.GetTLSVersion. */
static bool version_parse(const char *s, int *out)
{
    if (s == NULL || *s == '\0')
        *out = 0;
    else if (strcmp(s, "TLS1.2") == 0)
        *out = TLS1_2_VERSION;
    else if (strcmp(s, "TLS1.3") == 0)
        *out = TLS1_3_VERSION;
    else
        return false;
    return true;
}

int rpc_tls_opts_parse(const char *list, const char *min_version,
                       const char *max_version, struct rpc_tls_opts *out,
                       char *why, size_t cap)
{
    assert(out != NULL && why != NULL && cap > 0);
    memset(out, 0, sizeof *out);
    bool tls12 = false, any = false;
    for (const char *p = list; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (!suite_add(p, len, out, &tls12)) {
            snprintf(why, cap, "unexpected TLS cipher suite \"%.*s\"",
                     (int)len, p);
            return ERR_INVAL;
        }
        any = true;
        p += len + (p[len] == ',');
    }
    out->tls13_only_suites = any && !tls12;
    int lo, hi;
    const char *bad = !version_parse(min_version, &lo)   ? min_version
                      : !version_parse(max_version, &hi) ? max_version
                                                         : NULL;
    if (bad != NULL) {
        snprintf(why, cap, "unexpected TLS version \"%s\" (must be one of: "
                 "TLS1.2, TLS1.3)", bad);
        return ERR_INVAL;
    }
    if (hi != 0 && lo > hi) {
        snprintf(why, cap, "min version (%s) is greater than max version "
                 "(%s)", min_version, max_version);
        return ERR_INVAL;
    }
    if (lo == TLS1_3_VERSION && any) {
        snprintf(why, cap, "cipher suites cannot be configured when only "
                 "TLS1.3 is enabled");
        return ERR_INVAL;
    }
    out->min_version = lo != 0 ? lo : TLS1_2_VERSION; /* etcd's floor */
    /* Only TLS 1.3 suites named: TLS 1.2 has none left (Go then fails
     * every TLS 1.2 handshake; OpenSSL refuses an empty list). */
    if (out->tls13_only_suites)
        out->min_version = TLS1_3_VERSION;
    out->max_version = hi;
    return 0;
}

/* --- self-signed certificates ------------------------------------------ */

/* san_add appends "DNS:h" or "IP:h" to san unless already there. */
static void san_add(char *san, const char *host, size_t len)
{
    char item[300];
    char tmp[256];
    unsigned char ip[16];
    if (len == 0 || len >= sizeof tmp)
        return;
    memcpy(tmp, host, len);
    tmp[len] = '\0';
    /* etcd: net.ParseIP decides between an IP and a DNS SAN. */
    bool is_ip = inet_pton(AF_INET, tmp, ip) == 1 ||
                 inet_pton(AF_INET6, tmp, ip) == 1;
    snprintf(item, sizeof item, "%s:%s", is_ip ? "IP" : "DNS", tmp);
    size_t il = strlen(item);
    for (const char *p = strstr(san, item); p; p = strstr(p + 1, item))
        if ((p == san || p[-1] == ',') && (p[il] == ',' || p[il] == '\0'))
            return;
    size_t sl = strlen(san);
    if (sl + il + 2 > SAN_MAX)
        return;
    snprintf(san + sl, SAN_MAX - sl, "%s%s", sl ? "," : "", item);
}

/* san_from_urls builds an OpenSSL subjectAltName value from the hosts of
 * the comma-separated URLs plus localhost and 127.0.0.1. */
static void san_from_urls(const char *urls, char *san)
{
    san[0] = '\0';
    for (const char *u = urls; u && *u;) {
        const char *end = strchr(u, ',');
        size_t ulen = end ? (size_t)(end - u) : strlen(u);
        const char *sep = strstr(u, "://");
        if (sep != NULL && sep < u + ulen) {
            const char *h = sep + 3;
            size_t hl = strcspn(h, "/,");
            if (hl > 0 && h[0] == '[') { /* [v6]:port */
                const char *rb = memchr(h, ']', hl);
                if (rb != NULL)
                    san_add(san, h + 1, (size_t)(rb - h - 1));
            } else {
                const char *colon = memchr(h, ':', hl);
                san_add(san, h, colon ? (size_t)(colon - h) : hl);
            }
        }
        u = end ? end + 1 : NULL;
    }
    san_add(san, "localhost", 9);
    san_add(san, "127.0.0.1", 9);
}

static int cert_ext_add(X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL)
        return ERR_INVAL;
    int ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : ERR_NOMEM;
}

/* cert_fill sets the fields and extensions of the self-signed certificate
 * and signs it with key. */
static int cert_fill(X509 *x, EVP_PKEY *key, const char *san)
{
    unsigned char serial[16];
    if (RAND_bytes(serial, sizeof serial) != 1)
        return ERR_NOMEM;
    serial[0] &= 0x7f; /* positive, below 2^128 as in etcd */
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    int ok = bn != NULL && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    X509_NAME *name = X509_get_subject_name(x);
    ok = ok && X509_set_version(x, 2) &&
         X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                    (const unsigned char *)"etcd", -1, -1,
                                    0) &&
         X509_set_issuer_name(x, name) &&
         X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
         X509_gmtime_adj(X509_getm_notAfter(x),
                         (long)SELF_CERT_DAYS * 24 * 3600) &&
         X509_set_pubkey(x, key);
    if (!ok)
        return ERR_NOMEM;
    int rc = cert_ext_add(x, NID_basic_constraints, "critical,CA:FALSE");
    if (rc == 0)
        rc = cert_ext_add(x, NID_key_usage,
                          "critical,digitalSignature,keyEncipherment");
    if (rc == 0)
        rc = cert_ext_add(x, NID_ext_key_usage, "serverAuth");
    if (rc == 0)
        rc = cert_ext_add(x, NID_subject_alt_name, san);
    if (rc == 0 && X509_sign(x, key, EVP_sha256()) == 0)
        rc = ERR_NOMEM;
    return rc;
}

/* write_pem writes a key or a certificate to path with mode. */
static int write_pem(const char *path, int mode, EVP_PKEY *key, X509 *x)
{
    assert((key == NULL) != (x == NULL));
    FILE *f = fopen(path, "wb");
    if (f == NULL || fchmod(fileno(f), (mode_t)mode) != 0) {
        log_error("embed", "cannot create %s: %s", path, strerror(errno));
        if (f != NULL)
            fclose(f);
        return ERR_IO;
    }
    /* "EC PRIVATE KEY" (SEC 1), the form etcd writes. */
    BIO *b = BIO_new_fp(f, BIO_NOCLOSE);
    int ok = b != NULL &&
             (key ? PEM_write_bio_PrivateKey_traditional(b, key, NULL, NULL,
                                                         0, NULL, NULL)
                  : PEM_write_bio_X509(b, x));
    ok = ok && BIO_flush(b) == 1;
    BIO_free(b);
    if (fclose(f) != 0 || !ok) {
        log_error("embed", "cannot write %s", path);
        return ERR_IO;
    }
    log_info("embed", "created %s file %s", key ? "key" : "cert", path);
    return 0;
}

static int self_cert_generate(const char *cert_path, const char *key_path,
                              const char *urls)
{
    char san[SAN_MAX];
    san_from_urls(urls, san);
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    int rc = key && x ? cert_fill(x, key, san) : ERR_NOMEM;
    if (rc == 0)
        rc = write_pem(key_path, 0600, key, NULL);
    if (rc == 0)
        rc = write_pem(cert_path, 0600, NULL, x); /* data dir: private */
    if (rc != 0)
        log_error("embed", "cannot generate a self-signed certificate for "
                  "%s: %s", san, err_str(rc));
    X509_free(x);
    EVP_PKEY_free(key);
    return rc;
}

int rpc_tls_self_cert(const char *dir, const char *urls, char *cert_out,
                      char *key_out, size_t cap)
{
    assert(dir != NULL && urls != NULL && cert_out != NULL && key_out);
    if (snprintf(cert_out, cap, "%s/cert.pem", dir) >= (int)cap ||
        snprintf(key_out, cap, "%s/key.pem", dir) >= (int)cap)
        return ERR_INVAL;
    int rc = fs_mkdir_p(dir);
    if (rc != 0) {
        log_error("embed", "cannot create cert directory %s", dir);
        return rc;
    }
    if (access(cert_out, F_OK) == 0 && access(key_out, F_OK) == 0)
        return 0; /* etcd reuses what an earlier start generated */
    return self_cert_generate(cert_out, key_out, urls);
}

/* --- loading ------------------------------------------------------------ */

/* check_pair: both parse, and the key belongs to the (first) certificate. */
static int check_pair(const struct rpc_tls_files *f, const struct rpc_tls *t)
{
    BIO *cb = BIO_new_mem_buf(t->cert_pem, -1);
    BIO *kb = BIO_new_mem_buf(t->key_pem, -1);
    X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    const char *why = x ? NULL : openssl_why();
    EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    int rc = 0;
    if (x == NULL) {
        log_error("embed", "cannot parse cert file %s: %s", f->cert_file, why);
        rc = ERR_INVAL;
    } else if (k == NULL) {
        log_error("embed", "cannot parse key file %s: %s", f->key_file,
                  openssl_why());
        rc = ERR_INVAL;
    } else if (X509_check_private_key(x, k) != 1) {
        log_error("embed", "tls: private key in %s does not match public key "
                  "in %s", f->key_file, f->cert_file);
        ERR_clear_error();
        rc = ERR_INVAL;
    }
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(kb);
    BIO_free(cb);
    return rc;
}

/* check_ca: at least one certificate parses. */
static int check_ca(const char *path, const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    int rc = x ? 0 : ERR_INVAL;
    if (x == NULL)
        log_error("embed", "cannot parse trusted CA file %s: %s", path,
                  openssl_why());
    X509_free(x);
    BIO_free(b);
    return rc;
}

/* crl_read reads a CRL in PEM or DER (etcd's fixtures are DER). */
static X509_CRL *crl_read(const char *path)
{
    BIO *b = BIO_new_file(path, "rb");
    if (b == NULL)
        return NULL;
    X509_CRL *crl = PEM_read_bio_X509_CRL(b, NULL, NULL, NULL);
    if (crl == NULL && BIO_reset(b) == 0)
        crl = d2i_X509_CRL_bio(b, NULL);
    ERR_clear_error();
    BIO_free(b);
    return crl;
}

static bool given(const char *s)
{
    return s != NULL && *s != '\0';
}

/* load_ca fills t->ca_pem from the trusted CA file or, when client cert
 * auth is on without one, from the system bundle (Go verifies against
 * the system roots when tls.Config.ClientCAs is nil). */
static int load_ca(const struct rpc_tls_files *f, struct rpc_tls *t)
{
    static const char system_bundle[] = "/etc/ssl/certs/ca-certificates.crt";
    const char *path = given(f->trusted_ca_file) ? f->trusted_ca_file
                                                 : system_bundle;
    assert(t->verify_clients);
    int rc = read_file(path, &t->ca_pem);
    if (rc == 0)
        rc = check_ca(path, t->ca_pem);
    return rc;
}

/* load_client_checks loads the CRL and the allowed names: they only make
 * sense for verified client certificates. */
static int load_client_checks(const struct rpc_tls_files *f,
                              struct rpc_tls *t)
{
    if (!given(f->crl_file) && !given(f->allowed_cn) &&
        !given(f->allowed_hostname))
        return 0;
    if (!t->verify_clients) {
        log_error("embed", "a CRL file or an allowed CN/hostname needs "
                  "client certificate verification (--client-cert-auth)");
        return ERR_INVAL;
    }
    if (given(f->allowed_cn) && given(f->allowed_hostname)) {
        log_error("embed", "AllowedCN and AllowedHostname are mutually "
                  "exclusive (cn=\"%s\", hostname=\"%s\")", f->allowed_cn,
                  f->allowed_hostname);
        return ERR_INVAL;
    }
    if (given(f->crl_file)) {
        t->crl = crl_read(f->crl_file);
        if (t->crl == NULL) {
            log_error("embed", "cannot read or parse CRL file %s",
                      f->crl_file);
            return ERR_INVAL;
        }
    }
    if (given(f->allowed_cn))
        t->allowed_cn = mem_dup(f->allowed_cn, strlen(f->allowed_cn) + 1);
    if (given(f->allowed_hostname))
        t->allowed_hostname =
            mem_dup(f->allowed_hostname, strlen(f->allowed_hostname) + 1);
    if ((given(f->allowed_cn) && t->allowed_cn == NULL) ||
        (given(f->allowed_hostname) && t->allowed_hostname == NULL))
        return ERR_NOMEM;
    return 0;
}

/* stamp_take looks at path (NULL: no file, the zero stamp). */
static void stamp_take(const char *path, struct rpc_tls_stamp *st)
{
    struct stat sb;
    memset(st, 0, sizeof *st);
    if (path == NULL)
        return;
    if (stat(path, &sb) != 0) {
        st->missing = true;
        return;
    }
    st->ino = sb.st_ino;
    st->size = sb.st_size;
    st->mtime = (long long)sb.st_mtim.tv_sec * 1000000000LL +
                sb.st_mtim.tv_nsec;
    st->ctime = (long long)sb.st_ctim.tv_sec * 1000000000LL +
                sb.st_ctim.tv_nsec;
}

static bool stamp_same(const struct rpc_tls_stamp *a,
                       const struct rpc_tls_stamp *b)
{
    return a->ino == b->ino && a->size == b->size && a->mtime == b->mtime &&
           a->ctime == b->ctime && a->missing == b->missing;
}

static char *dup_given(const char *s)
{
    return given(s) ? mem_dup(s, strlen(s) + 1) : NULL;
}

/* remember keeps copies of the file names (and the stamps as they were
 * before reading, so a change made while loading is seen later). */
static int remember(const struct rpc_tls_files *f, struct rpc_tls *t,
                    const struct rpc_tls_stamp *before)
{
    const char *names[4] = {f->cert_file, f->key_file, f->trusted_ca_file,
                            f->crl_file};
    if (pthread_mutex_init(&t->mu, NULL) != 0)
        return ERR_NOMEM;
    t->mu_init = true;
    for (int i = 0; i < 4; i++) {
        t->files[i] = dup_given(names[i]);
        if (given(names[i]) && t->files[i] == NULL)
            return ERR_NOMEM;
        t->stamps[i] = before[i];
    }
    t->client_cert_auth = f->client_cert_auth;
    return 0;
}

int rpc_tls_load(const struct rpc_tls_files *f, struct rpc_tls **tls_out)
{
    assert(f != NULL && tls_out != NULL);
    if (!given(f->cert_file) || !given(f->key_file)) {
        log_error("embed", "KeyFile and CertFile must both be present "
                  "[key: %s, cert: %s]", given(f->key_file) ? f->key_file : "",
                  given(f->cert_file) ? f->cert_file : "");
        return ERR_INVAL;
    }
    struct rpc_tls *t = mem_calloc(1, sizeof *t);
    if (t == NULL)
        return ERR_NOMEM;
    struct rpc_tls_stamp before[4];
    const char *names[4] = {f->cert_file, f->key_file,
                            given(f->trusted_ca_file) ? f->trusted_ca_file
                                                      : NULL,
                            given(f->crl_file) ? f->crl_file : NULL};
    for (int i = 0; i < 4; i++)
        stamp_take(names[i], &before[i]);
    t->verify_clients = given(f->trusted_ca_file) || f->client_cert_auth;
    /* No client certificate is asked for otherwise: nothing to check. */
    t->check_san = f->check_client_san && t->verify_clients;
    if (f->opts != NULL)
        t->opts = *f->opts;
    else
        t->opts.min_version = TLS1_2_VERSION;
    int rc = remember(f, t, before);
    if (rc == 0)
        rc = read_file(f->cert_file, &t->cert_pem);
    if (rc == 0)
        rc = read_file(f->key_file, &t->key_pem);
    if (rc == 0)
        rc = check_pair(f, t);
    if (rc == 0 && t->verify_clients)
        rc = load_ca(f, t);
    if (rc == 0)
        rc = load_client_checks(f, t);
    if (rc != 0) {
        rpc_tls_free(t);
        return rc;
    }
    *tls_out = t;
    return 0;
}

void rpc_tls_stamps_init(const struct rpc_tls *t,
                         struct rpc_tls_stamp stamps[RPC_TLS_FILES])
{
    assert(t != NULL && stamps != NULL);
    memcpy(stamps, t->stamps, sizeof t->stamps);
}

bool rpc_tls_stale(const struct rpc_tls *t,
                   struct rpc_tls_stamp stamps[RPC_TLS_FILES])
{
    assert(t != NULL && stamps != NULL);
    bool stale = false;
    for (int i = 0; i < RPC_TLS_FILES; i++) {
        struct rpc_tls_stamp now;
        stamp_take(t->files[i], &now);
        if (!stamp_same(&now, &stamps[i]))
            stale = true;
        stamps[i] = now;
    }
    return stale;
}

/* files_of: the files and options t was loaded from (rpc_tls_load's
 * input; check_client_san as t checks). */
static struct rpc_tls_files files_of(const struct rpc_tls *t)
{
    return (struct rpc_tls_files){
        .cert_file = t->files[0], .key_file = t->files[1],
        .trusted_ca_file = t->files[2], .crl_file = t->files[3],
        .allowed_cn = t->allowed_cn, .allowed_hostname = t->allowed_hostname,
        .client_cert_auth = t->client_cert_auth,
        .check_client_san = t->check_san, .opts = &t->opts};
}

int rpc_tls_reload(struct rpc_tls *t, struct rpc_tls **fresh_out)
{
    assert(t != NULL && fresh_out != NULL);
    struct rpc_tls_files f = files_of(t);
    struct rpc_tls *fresh = NULL;
    int rc = rpc_tls_load(&f, &fresh);
    if (rc != 0) {
        log_warn("embed", "TLS files changed but do not load (%s); still "
                 "using the previous certificate", err_str(rc));
        return rc;
    }
    /* The CRL moves to t, which the handshakes' check reads. */
    pthread_mutex_lock(&t->mu);
    void *old = t->crl;
    t->crl = fresh->crl;
    fresh->crl = old;
    pthread_mutex_unlock(&t->mu);
    log_info("embed", "reloaded TLS files (cert = %s, key = %s, trusted-ca "
             "= %s, crl-file = %s)", f.cert_file, f.key_file,
             f.trusted_ca_file ? f.trusted_ca_file : "",
             f.crl_file ? f.crl_file : "");
    *fresh_out = fresh;
    return 0;
}

int rpc_tls_with_san(const struct rpc_tls *tls, struct rpc_tls **out)
{
    assert(tls != NULL && out != NULL);
    struct rpc_tls_files f = files_of(tls);
    f.check_client_san = true;
    return rpc_tls_load(&f, out);
}

bool rpc_tls_has_client_check(const struct rpc_tls *tls)
{
    return tls != NULL && (tls->crl != NULL || tls->allowed_cn != NULL ||
                           tls->allowed_hostname != NULL || tls->check_san);
}

/* cn_is: the subject's common name is exactly cn. */
static bool cn_is(X509 *x, const char *cn)
{
    char buf[256];
    int n = X509_NAME_get_text_by_NID(X509_get_subject_name(x),
                                      NID_commonName, buf, sizeof buf);
    return n >= 0 && (size_t)n == strlen(cn) && strcmp(buf, cn) == 0;
}

/* serial_hex writes x's serial as Go's %x of its bytes (lower case). */
static void serial_hex(X509 *x, char *buf, size_t cap)
{
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *hex = bn != NULL ? BN_bn2hex(bn) : NULL;
    snprintf(buf, cap, "%s", hex != NULL ? hex : "");
    for (char *p = buf; *p != '\0'; p++)
        *p = (char)tolower((unsigned char)*p);
    OPENSSL_free(hex);
    BN_free(bn);
}

/* revoked: x's serial is in t's CRL.  etcd compares serials only (its
 * checkCRL), so an expired CRL still revokes; OpenSSL's own CRL check
 * would refuse everything then.  The lock: rpc_tls_reload may swap the
 * CRL meanwhile. */
static bool revoked(struct rpc_tls *t, X509 *x)
{
    X509_REVOKED *rev = NULL;
    pthread_mutex_lock(&t->mu);
    bool r = t->crl != NULL &&
             X509_CRL_get0_by_serial(t->crl, &rev,
                                     X509_get_serialNumber(x)) == 1;
    pthread_mutex_unlock(&t->mu);
    return r;
}

enum rpc_tls_verdict rpc_tls_client_check(X509 *x, const char *remote_ip,
                                          const struct rpc_tls_dns *dns,
                                          void *ctx, char *why, size_t cap)
{
    struct rpc_tls *t = ctx;
    assert(t != NULL && why != NULL && cap > 0);
    if (x == NULL) {
        snprintf(why, cap, "tls: client didn't provide a certificate");
        return RPC_TLS_REFUSE;
    }
    /* etcd's order: the allowed names inside the handshake
     * (VerifyPeerCertificate), then its listener's checkSAN and checkCRL. */
    bool ok = true;
    if (t->allowed_cn != NULL)
        ok = cn_is(x, t->allowed_cn);
    if (ok && t->allowed_hostname != NULL)
        ok = x509_valid_for_host(x, t->allowed_hostname);
    ERR_clear_error();
    if (!ok) {
        snprintf(why, cap, "client certificate authentication failed");
        return RPC_TLS_REFUSE;
    }
    if (t->check_san) {
        enum rpc_tls_verdict v = rpc__tls_san_check(x, remote_ip, dns, why,
                                                    cap);
        if (v != RPC_TLS_PASS)
            return v; /* refused, or the CRL waits for the lookups */
    }
    if (revoked(t, x)) {
        char hex[128];
        serial_hex(x, hex, sizeof hex);
        snprintf(why, cap, "transport: certificate serial %s revoked", hex);
        return RPC_TLS_REFUSE;
    }
    return RPC_TLS_PASS;
}

void rpc_tls_free(struct rpc_tls *tls)
{
    if (tls == NULL)
        return;
    if (tls->key_pem != NULL)
        OPENSSL_cleanse(tls->key_pem, strlen(tls->key_pem));
    mem_free(tls->cert_pem);
    mem_free(tls->key_pem);
    mem_free(tls->ca_pem);
    X509_CRL_free(tls->crl);
    mem_free(tls->allowed_cn);
    mem_free(tls->allowed_hostname);
    for (int i = 0; i < 4; i++)
        mem_free(tls->files[i]);
    if (tls->mu_init)
        pthread_mutex_destroy(&tls->mu);
    mem_free(tls);
}
