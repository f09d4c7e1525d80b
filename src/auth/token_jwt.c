/*
 * token_jwt.c - JSON Web Tokens (RFC 7519) as etcd's --auth-token jwt
 * makes and checks them (auth.h "JWT tokens"): the header
 * {"alg":"<method>","typ":"JWT"}, the claims
 * {"exp":<unix s>,"revision":<auth revision>,"username":"<name>"} (the
 * keys sorted, as Go's encoding/json writes a map, so our tokens have the
 * same bytes layout as etcd's), base64url without padding, and the
 * signature of "<header>.<claims>" by OpenSSL's libcrypto: HMAC (HS*),
 * RSASSA-PKCS1-v1_5 (RS*), RSASSA-PSS with salt = hash length, verified
 * with any salt (PS*, as golang-jwt), ECDSA with R||S of fixed width
 * (ES*, RFC 7518 3.4), Ed25519 (EdDSA).  Claims are read with json-c.
 *
 * Checking order: shape (three segments, base64url), header (an object
 * whose "alg" is our method: etcd refuses any other), signature, then the
 * claims (exp, nbf, iat as golang-jwt's MapClaims.Valid; "username" a
 * string and "revision" a number, which etcd reads without checking).  A
 * token whose signature the same thread verified a moment ago is not
 * verified again (struct seen).
 */
#include "auth/auth.h"

#include <json-c/json.h>
#include <math.h>
#include <stdatomic.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

enum family { FAM_HMAC, FAM_RSA, FAM_PSS, FAM_EC, FAM_ED };

/* One signing method. */
struct method {
    const char *name;   /* the "alg" and etcd's sign-method value */
    enum family fam;    /* how it signs */
    int hash_bits;      /* SHA-2 size (0: Ed25519 hashes itself) */
    int ec_bits;        /* ES*: the curve's size in bits (P-521: 521) */
    const char *kind;   /* key kind in golang-jwt's messages */
};

static const struct method methods[] = {
    {"HS256", FAM_HMAC, 256, 0, "HMAC"},
    {"HS384", FAM_HMAC, 384, 0, "HMAC"},
    {"HS512", FAM_HMAC, 512, 0, "HMAC"},
    {"RS256", FAM_RSA, 256, 0, "RSA"},
    {"RS384", FAM_RSA, 384, 0, "RSA"},
    {"RS512", FAM_RSA, 512, 0, "RSA"},
    {"PS256", FAM_PSS, 256, 0, "RSA"},
    {"PS384", FAM_PSS, 384, 0, "RSA"},
    {"PS512", FAM_PSS, 512, 0, "RSA"},
    {"ES256", FAM_EC, 256, 256, "ECDSA"},
    {"ES384", FAM_EC, 384, 384, "ECDSA"},
    {"ES512", FAM_EC, 512, 521, "ECDSA"},
    {"EdDSA", FAM_ED, 0, 0, "Ed25519"},
};

struct auth_jwt {
    const struct method *m; /* the sign method */
    EVP_PKEY *key;          /* the private key, else the public one (NULL
                             * for HMAC) */
    bool verify_only;       /* only a public key was given */
    uint8_t *secret;        /* HMAC: the priv-key file's bytes */
    size_t secret_len;      /* their count */
    int64_t ttl_ms;         /* a token's life from its signing */
    char *header;           /* the encoded header, NUL-terminated */
    uint64_t id;            /* unique among the instances of the process:
                             * names it in the threads' seen tokens */
};

/* The tokens whose signature a thread verified last (auth_jwt_verify): a
 * client sends the same token with every request, and an RS256 signature
 * check cost ~12 us of CPU: JWT ranges ran at 0.61-0.73x of the auth-off
 * rate (docs/BENCHMARKS.md session 24).  A token's bytes and its instance's id
 * decide the signature's verdict once and for all, so a token equal to
 * one of these skips that check; the header and the claims (exp, nbf,
 * iat) are checked on every request as before.  Per thread, no lock:
 * SEEN_SLOTS tokens of at most SEEN_TOKEN_MAX bytes (an RS256 token of
 * etcd's claims is ~450), replaced in turn. */
#define SEEN_SLOTS 4
#define SEEN_TOKEN_MAX 1024
struct seen {
    uint64_t jwt_id;            /* 0: empty */
    size_t len;
    char token[SEEN_TOKEN_MAX];
};
static _Thread_local struct seen seen[SEEN_SLOTS];
static _Thread_local unsigned seen_next;
static _Atomic uint64_t jwt_ids;

static bool seen_has(const struct auth_jwt *j, const char *token, size_t len)
{
    for (int i = 0; i < SEEN_SLOTS; i++)
        if (seen[i].jwt_id == j->id && seen[i].len == len &&
            memcmp(seen[i].token, token, len) == 0)
            return true;
    return false;
}

static void seen_add(const struct auth_jwt *j, const char *token, size_t len)
{
    if (len > SEEN_TOKEN_MAX)
        return;
    struct seen *e = &seen[seen_next++ % SEEN_SLOTS];
    e->jwt_id = j->id;
    e->len = len;
    memcpy(e->token, token, len);
}

static int sign(const struct auth_jwt *j, const char *in, size_t n,
                uint8_t **sig_out, size_t *len_out);
static bool verify(const struct auth_jwt *j, const char *in, size_t n,
                   const uint8_t *sig, size_t sl);
static bool self_test(const struct auth_jwt *j);

static const EVP_MD *md_of(const struct method *m)
{
    switch (m->hash_bits) {
    case 256:
        return EVP_sha256();
    case 384:
        return EVP_sha384();
    case 512:
        return EVP_sha512();
    default:
        return NULL;
    }
}

/* --- base64url (RFC 4648 5, no padding) ---------------------------------- */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* b64_put writes n bytes of p encoded at out (room for b64_len(n) + 1). */
static size_t b64_len(size_t n)
{
    return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

static void b64_put(char *out, const uint8_t *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        size_t k = n - i >= 3 ? 4 : n - i + 1;
        for (size_t j = 0; j < k; j++)
            out[o++] = b64[(v >> (18 - 6 * j)) & 63];
    }
    out[o] = '\0';
}

static int b64_val(char c)
{
    const char *p = c != '\0' ? strchr(b64, c) : NULL;
    return p != NULL ? (int)(p - b64) : -1;
}

/* b64_get decodes s (n chars, no padding) into a new buffer (mem_free).
 * A length of 1 mod 4 or a char outside the alphabet: ERR_INVAL. */
static int b64_get(const char *s, size_t n, uint8_t **out, size_t *len_out)
{
    if (n % 4 == 1)
        return ERR_INVAL;
    uint8_t *p = mem_malloc(n / 4 * 3 + 3);
    if (p == NULL)
        return ERR_NOMEM;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val(s[i]);
        if (v < 0) {
            mem_free(p);
            return ERR_INVAL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            p[o++] = (uint8_t)(acc >> bits);
        }
    }
    *out = p;
    *len_out = o;
    return 0;
}

/* --- keys ------------------------------------------------------------------ */

static bool key_fits(const struct method *m, EVP_PKEY *k)
{
    switch (m->fam) {
    case FAM_RSA:
    case FAM_PSS:
        return EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA;
    case FAM_EC:
        return EVP_PKEY_get_base_id(k) == EVP_PKEY_EC;
    case FAM_ED:
        return EVP_PKEY_get_base_id(k) == EVP_PKEY_ED25519;
    default:
        return false;
    }
}

/* An encrypted key is refused, never prompted for (OpenSSL's default
 * callback would read a passphrase from the terminal). */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* read_key reads a PEM private key, or a public key (a PUBLIC KEY block or
 * a certificate's) from pem.  NULL: none of them. */
static EVP_PKEY *read_key(const uint8_t *pem, size_t len, bool priv)
{
    if (len > INT32_MAX)
        return NULL;
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    if (b == NULL)
        return NULL;
    EVP_PKEY *k = priv ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL)
                       : PEM_read_bio_PUBKEY(b, NULL, no_passphrase, NULL);
    if (k == NULL && !priv && BIO_reset(b) == 1) {
        X509 *x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL);
        k = x != NULL ? X509_get_pubkey(x) : NULL;
        X509_free(x);
    }
    BIO_free(b);
    return k;
}

/* has_pem: a "-----BEGIN" line somewhere in p (golang-jwt: pem.Decode). */
static bool has_pem(const uint8_t *p, size_t n)
{
    static const char tag[] = "-----BEGIN";
    for (size_t i = 0; i + sizeof tag - 1 <= n; i++)
        if (memcmp(p + i, tag, sizeof tag - 1) == 0)
            return true;
    return false;
}

/* load_key: *out the key of pem (len 0: none, *out NULL).  why gets
 * golang-jwt's text on failure. */
static int load_key(const struct method *m, const uint8_t *pem, size_t len,
                    bool priv, EVP_PKEY **out, char *why)
{
    *out = NULL;
    if (len == 0)
        return 0;
    const char *side = priv ? "private" : "public";
    if (!has_pem(pem, len)) {
        snprintf(why, AUTH_JWT_WHY_MAX, "invalid key: Key must be a PEM "
                 "encoded PKCS1 or PKCS8 key");
        return ERR_AUTH_INVALID_OPTS;
    }
    EVP_PKEY *k = read_key(pem, len, priv);
    bool curve_ok = k == NULL || m->fam != FAM_EC ||
                    EVP_PKEY_get_bits(k) == m->ec_bits;
    if (k == NULL || !key_fits(m, k)) {
        snprintf(why, AUTH_JWT_WHY_MAX, "key is not a valid %s %s key",
                 m->kind, side);
        EVP_PKEY_free(k);
        return ERR_AUTH_INVALID_OPTS;
    }
    if (!curve_ok) { /* golang-jwt: at signing, "key is invalid" */
        snprintf(why, AUTH_JWT_WHY_MAX, "key is invalid: %s needs a P-%d "
                 "key", m->name, m->ec_bits);
        EVP_PKEY_free(k);
        return ERR_AUTH_INVALID_OPTS;
    }
    *out = k;
    return 0;
}

static int keys_load(struct auth_jwt *j, const struct auth_jwt_config *c,
                     char *why)
{
    if (j->m->fam == FAM_HMAC) {
        if (c->priv_key_len == 0)
            goto missing;
        j->secret = mem_dup(c->priv_key, c->priv_key_len);
        j->secret_len = c->priv_key_len;
        return j->secret != NULL ? 0 : ERR_NOMEM;
    }
    EVP_PKEY *priv, *pub;
    int rc = load_key(j->m, c->priv_key, c->priv_key_len, true, &priv, why);
    if (rc != 0)
        return rc;
    rc = load_key(j->m, c->pub_key, c->pub_key_len, false, &pub, why);
    if (rc != 0) {
        EVP_PKEY_free(priv);
        return rc;
    }
    if (priv == NULL && pub == NULL)
        goto missing;
    /* etcd keeps the private key and ignores a public one that does not
     * match it; we refuse that configuration (a member would verify with
     * another key than the one its peers are told to use). */
    if (priv != NULL && pub != NULL && EVP_PKEY_eq(priv, pub) != 1) {
        snprintf(why, AUTH_JWT_WHY_MAX,
                 "auth: public and private keys don't match");
        EVP_PKEY_free(priv);
        EVP_PKEY_free(pub);
        return ERR_AUTH_INVALID_OPTS;
    }
    j->verify_only = priv == NULL;
    j->key = priv != NULL ? priv : pub;
    if (priv != NULL)
        EVP_PKEY_free(pub);
    return 0;
missing:
    snprintf(why, AUTH_JWT_WHY_MAX, "auth: missing key data");
    return ERR_AUTH_INVALID_OPTS;
}

static char *b64_dup(const char *s)
{
    size_t n = strlen(s);
    char *out = mem_malloc(b64_len(n) + 1);
    if (out != NULL)
        b64_put(out, (const uint8_t *)s, n);
    return out;
}

int auth_jwt_create(const struct auth_jwt_config *c, struct auth_jwt **out,
                    char why[AUTH_JWT_WHY_MAX])
{
    CHECK(c != NULL && out != NULL && why != NULL);
    why[0] = '\0';
    const struct method *m = NULL;
    for (size_t i = 0; c->sign_method != NULL &&
                       i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i].name, c->sign_method) == 0)
            m = &methods[i];
    if (m == NULL) {
        snprintf(why, AUTH_JWT_WHY_MAX,
                 "auth: invalid auth signature method");
        return ERR_AUTH_INVALID_OPTS;
    }
    struct auth_jwt *j = mem_calloc(1, sizeof *j);
    if (j == NULL)
        return ERR_NOMEM;
    j->m = m;
    j->ttl_ms = c->ttl_ms;
    j->id = atomic_fetch_add(&jwt_ids, 1) + 1;
    char head[64];
    snprintf(head, sizeof head, "{\"alg\":\"%s\",\"typ\":\"JWT\"}", m->name);
    j->header = b64_dup(head);
    int rc = j->header != NULL ? keys_load(j, c, why) : ERR_NOMEM;
    if (rc == 0 && !j->verify_only && !self_test(j)) {
        snprintf(why, AUTH_JWT_WHY_MAX, "key is invalid: a signature by "
                 "the private key does not verify with its public key");
        rc = ERR_AUTH_INVALID_OPTS;
    }
    if (rc != 0) {
        auth_jwt_destroy(j);
        return rc;
    }
    CHECK(j->m->fam == FAM_HMAC ? j->secret != NULL : j->key != NULL);
    *out = j;
    return 0;
}

void auth_jwt_destroy(struct auth_jwt *j)
{
    if (j == NULL)
        return;
    EVP_PKEY_free(j->key);
    if (j->secret != NULL)
        OPENSSL_cleanse(j->secret, j->secret_len);
    mem_free(j->secret);
    mem_free(j->header);
    mem_free(j);
}

bool auth_jwt_verify_only(const struct auth_jwt *j)
{
    return j->verify_only;
}

const char *auth_jwt_method(const struct auth_jwt *j)
{
    return j->m->name;
}

/* --- signatures ------------------------------------------------------------ */

/* An ECDSA signature's DER <-> R||S of w bytes each. */
static int ec_der_to_raw(const uint8_t *der, size_t n, uint8_t *raw, int w)
{
    const uint8_t *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)n);
    if (sig == NULL)
        return ERR_IO;
    const BIGNUM *r, *s;
    ECDSA_SIG_get0(sig, &r, &s);
    int ok = BN_bn2binpad(r, raw, w) == w && BN_bn2binpad(s, raw + w, w) == w;
    ECDSA_SIG_free(sig);
    return ok ? 0 : ERR_IO;
}

static int ec_raw_to_der(const uint8_t *raw, int w, uint8_t **der_out,
                         size_t *n_out)
{
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, w, NULL), *s = BN_bin2bn(raw + w, w, NULL);
    if (sig == NULL || r == NULL || s == NULL ||
        ECDSA_SIG_set0(sig, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(sig);
        return ERR_NOMEM;
    }
    uint8_t *der = NULL;
    int n = i2d_ECDSA_SIG(sig, &der);
    ECDSA_SIG_free(sig);
    if (n <= 0)
        return ERR_NOMEM;
    *der_out = der;
    *n_out = (size_t)n;
    return 0;
}

/* digest_init: a DigestSign/VerifyInit of j's key with its padding. */
static int digest_init(const struct auth_jwt *j, EVP_MD_CTX *ctx, bool sign)
{
    EVP_PKEY_CTX *pc = NULL;
    const EVP_MD *md = j->m->fam == FAM_ED ? NULL : md_of(j->m);
    int ok = sign ? EVP_DigestSignInit(ctx, &pc, md, NULL, j->key)
                  : EVP_DigestVerifyInit(ctx, &pc, md, NULL, j->key);
    if (ok == 1 && (j->m->fam == FAM_RSA || j->m->fam == FAM_PSS))
        ok = EVP_PKEY_CTX_set_rsa_padding(pc, j->m->fam == FAM_PSS
                                                  ? RSA_PKCS1_PSS_PADDING
                                                  : RSA_PKCS1_PADDING);
    /* golang-jwt signs with salt = hash length and verifies any salt */
    if (ok == 1 && j->m->fam == FAM_PSS)
        ok = EVP_PKEY_CTX_set_rsa_pss_saltlen(
            pc, sign ? RSA_PSS_SALTLEN_DIGEST : RSA_PSS_SALTLEN_AUTO);
    return ok == 1 ? 0 : ERR_IO;
}

/* sign: the signature of in (n bytes) into a new buffer (mem_free). */
static int sign(const struct auth_jwt *j, const char *in, size_t n,
                uint8_t **sig_out, size_t *len_out)
{
    if (j->m->fam == FAM_HMAC) {
        uint8_t *mac = mem_malloc(EVP_MAX_MD_SIZE);
        unsigned int ml = 0;
        if (mac == NULL)
            return ERR_NOMEM;
        if (HMAC(md_of(j->m), j->secret, (int)j->secret_len,
                 (const uint8_t *)in, n, mac, &ml) == NULL) {
            mem_free(mac);
            return ERR_IO;
        }
        *sig_out = mac;
        *len_out = ml;
        return 0;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t sl = 0;
    uint8_t *s = NULL;
    int rc = ctx != NULL ? digest_init(j, ctx, true) : ERR_NOMEM;
    if (rc == 0 && EVP_DigestSign(ctx, NULL, &sl, (const uint8_t *)in, n) != 1)
        rc = ERR_IO;
    if (rc == 0 && (s = mem_malloc(sl + 2 * 66)) == NULL)
        rc = ERR_NOMEM;
    if (rc == 0 && EVP_DigestSign(ctx, s, &sl, (const uint8_t *)in, n) != 1)
        rc = ERR_IO;
    EVP_MD_CTX_free(ctx);
    if (rc == 0 && j->m->fam == FAM_EC) {
        int w = (j->m->ec_bits + 7) / 8;
        uint8_t raw[2 * 66];
        rc = ec_der_to_raw(s, sl, raw, w);
        memcpy(s, raw, 2 * (size_t)w);
        sl = 2 * (size_t)w;
    }
    if (rc != 0) {
        mem_free(s);
        return rc;
    }
    *sig_out = s;
    *len_out = sl;
    return 0;
}

static bool verify(const struct auth_jwt *j, const char *in, size_t n,
                   const uint8_t *sig, size_t sl)
{
    if (j->m->fam == FAM_HMAC) {
        uint8_t mac[EVP_MAX_MD_SIZE];
        unsigned int ml = 0;
        if (HMAC(md_of(j->m), j->secret, (int)j->secret_len,
                 (const uint8_t *)in, n, mac, &ml) == NULL)
            return false;
        return ml == sl && CRYPTO_memcmp(mac, sig, sl) == 0;
    }
    uint8_t *der = NULL;
    if (j->m->fam == FAM_EC) {
        int w = (j->m->ec_bits + 7) / 8;
        if (sl != 2 * (size_t)w || ec_raw_to_der(sig, w, &der, &sl) != 0)
            return false;
        sig = der;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx != NULL && digest_init(j, ctx, false) == 0 &&
              EVP_DigestVerify(ctx, sig, sl, (const uint8_t *)in, n) == 1;
    EVP_MD_CTX_free(ctx);
    OPENSSL_free(der);
    return ok;
}

/* self_test: a key whose signature its own public half does not verify
 * (a PEM private key whose stored public point is not its scalar's: Go
 * recomputes it, OpenSSL trusts the file) would make tokens that no
 * member accepts; refused at start instead. */
static bool self_test(const struct auth_jwt *j)
{
    static const char msg[] = "cetcd jwt key self-test";
    uint8_t *sig = NULL;
    size_t sl = 0;
    bool ok = sign(j, msg, sizeof msg - 1, &sig, &sl) == 0 &&
              verify(j, msg, sizeof msg - 1, sig, sl);
    mem_free(sig);
    return ok;
}

/* --- claims ---------------------------------------------------------------- */

/* json_put_name appends s as a JSON string, escaped as Go's encoding/json
 * does for ASCII (<, >, & and controls as \u00XX; \n \r \t short). */
static size_t json_quote(char *out, const char *s)
{
    size_t o = 0;
    out[o++] = '"';
    for (const uint8_t *p = (const uint8_t *)s; *p != '\0'; p++) {
        uint8_t c = *p;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            out[o++] = '\\';
            out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            o += (size_t)snprintf(out + o, 7, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return o;
}

int auth_jwt_sign(struct auth_jwt *j, const char *user, uint64_t revision,
                  int64_t now_ms, char **token_out)
{
    CHECK(j != NULL && user != NULL && token_out != NULL);
    if (j->verify_only)
        return ERR_AUTH_VERIFY_ONLY;
    size_t ul = strlen(user);
    if (ul > AUTH_NAME_MAX)
        return ERR_INVAL;
    /* exp is whole seconds and a token is valid while now < exp (in
     * seconds, rounded down, on the checking member).  etcd rounds
     * now + ttl down (time.Now().Add(ttl).Unix()), so a token may live
     * only ttl - 1 s (with ttl=1s a millisecond: a client can be refused
     * the token it was just given).  Rounded up here, a token lives at
     * least ttl and less than ttl + 1 s. */
    int64_t exp_ms = now_ms + j->ttl_ms;
    int64_t exp = exp_ms >= 0 ? (exp_ms + 999) / 1000 : -(-exp_ms / 1000);
    char *claims = mem_malloc(ul * 6 + 96);
    if (claims == NULL)
        return ERR_NOMEM;
    int n = snprintf(claims, 80, "{\"exp\":%lld,\"revision\":%llu,"
                     "\"username\":", (long long)exp,
                     (unsigned long long)revision);
    size_t cl = (size_t)n + json_quote(claims + n, user);
    claims[cl++] = '}';
    size_t hl = strlen(j->header);
    size_t body = hl + 1 + b64_len(cl);
    char *tok = mem_malloc(body + 1 + b64_len(2 * 512) + 1);
    uint8_t *sig = NULL;
    size_t sl = 0;
    int rc = tok != NULL ? 0 : ERR_NOMEM;
    if (rc == 0) {
        memcpy(tok, j->header, hl);
        tok[hl] = '.';
        b64_put(tok + hl + 1, (const uint8_t *)claims, cl);
        rc = sign(j, tok, body, &sig, &sl);
    }
    if (rc == 0 && sl <= 2 * 512) {
        tok[body] = '.';
        b64_put(tok + body + 1, sig, sl);
    } else if (rc == 0) {
        rc = ERR_AUTH_SIGN; /* a key larger than any we can encode */
    }
    if (rc == ERR_IO)
        rc = ERR_AUTH_SIGN; /* libcrypto's: this request fails, no more */
    mem_free(sig);
    mem_free(claims);
    if (rc != 0) {
        mem_free(tok);
        return rc;
    }
    if (strlen(tok) > AUTH_JWT_TOKEN_MAX) { /* a name near AUTH_NAME_MAX */
        mem_free(tok);
        return ERR_INVAL;
    }
    *token_out = tok;
    return 0;
}

/* parse_obj: the JSON object of a base64url segment (json_object_put). */
static struct json_object *parse_obj(const char *s, size_t n)
{
    uint8_t *raw;
    size_t rl;
    if (b64_get(s, n, &raw, &rl) != 0)
        return NULL;
    struct json_tokener *tk = json_tokener_new_ex(32);
    struct json_object *o = NULL;
    if (tk != NULL && rl <= INT32_MAX)
        o = json_tokener_parse_ex(tk, (const char *)raw, (int)rl);
    /* one whole value and nothing after it but blanks (Go's Unmarshal) */
    if (o != NULL) {
        size_t off = json_tokener_get_parse_end(tk);
        while (off < rl && strchr(" \t\r\n", raw[off]) != NULL && raw[off])
            off++;
        if (off != rl || !json_object_is_type(o, json_type_object)) {
            json_object_put(o);
            o = NULL;
        }
    }
    json_tokener_free(tk);
    mem_free(raw);
    return o;
}

/* num: the claim key of c as a number; false if absent, true and *v if a
 * number; *bad if present and not a number. */
static bool num(struct json_object *c, const char *key, double *v, bool *bad)
{
    struct json_object *x;
    if (!json_object_object_get_ex(c, key, &x))
        return false;
    if (!json_object_is_type(x, json_type_int) &&
        !json_object_is_type(x, json_type_double)) {
        *bad = true;
        return false;
    }
    *v = json_object_get_double(x);
    if (!isfinite(*v))
        *bad = true;
    return true;
}

/* claims_check: golang-jwt's MapClaims.Valid at now_s (exp: now < exp;
 * iat, nbf: now >= them; 0 or absent: not checked) and etcd's two. */
static int claims_check(struct json_object *c, int64_t now_ms, char *user_out,
                        size_t cap, uint64_t *revision_out)
{
    double now = (double)(now_ms >= 0 ? now_ms / 1000 : -1), v = 0;
    bool bad = false;
    if (num(c, "exp", &v, &bad) && v != 0 && !(now < v))
        return ERR_AUTH_INVALID_TOKEN;
    if (num(c, "iat", &v, &bad) && v != 0 && !(now >= v))
        return ERR_AUTH_INVALID_TOKEN;
    if (num(c, "nbf", &v, &bad) && v != 0 && !(now >= v))
        return ERR_AUTH_INVALID_TOKEN;
    struct json_object *u;
    if (bad || !json_object_object_get_ex(c, "username", &u) ||
        !json_object_is_type(u, json_type_string))
        return ERR_AUTH_INVALID_TOKEN;
    if (!num(c, "revision", &v, &bad) || bad || v < 0 || v >= 0x1p64)
        return ERR_AUTH_INVALID_TOKEN;
    /* an integer exactly (Go reads it as a float64: the same below 2^53) */
    struct json_object *r;
    uint64_t rev = (uint64_t)v;
    if (json_object_object_get_ex(c, "revision", &r) &&
        json_object_is_type(r, json_type_int))
        rev = json_object_get_uint64(r);
    const char *name = json_object_get_string(u);
    size_t nl = (size_t)json_object_get_string_len(u);
    if (memchr(name, '\0', nl) != NULL)
        return ERR_AUTH_INVALID_TOKEN;
    if (nl >= cap)
        return ERR_TOO_LARGE;
    memcpy(user_out, name, nl + 1);
    *revision_out = rev;
    return 0;
}

/* header_ok: the header decodes to an object whose "alg" is ours. */
static bool header_ok(const struct auth_jwt *j, const char *s, size_t n)
{
    struct json_object *h = parse_obj(s, n), *alg;
    bool ok = h != NULL && json_object_object_get_ex(h, "alg", &alg) &&
              json_object_is_type(alg, json_type_string) &&
              strcmp(json_object_get_string(alg), j->m->name) == 0;
    json_object_put(h);
    return ok;
}

int auth_jwt_verify(struct auth_jwt *j, const char *token, size_t len,
                    int64_t now_ms, char *user_out, size_t cap,
                    uint64_t *revision_out)
{
    CHECK(j != NULL && user_out != NULL && cap > 0);
    if (token == NULL || len > AUTH_JWT_TOKEN_MAX)
        return ERR_AUTH_INVALID_TOKEN;
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token))
                        : NULL;
    if (d2 == NULL || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)))
        return ERR_AUTH_INVALID_TOKEN;
    const char *end = token + len;
    if (!header_ok(j, token, (size_t)(d1 - token)))
        return ERR_AUTH_INVALID_TOKEN;
    int rc;
    if (!seen_has(j, token, len)) {
        uint8_t *sig;
        size_t sl;
        rc = b64_get(d2 + 1, (size_t)(end - d2 - 1), &sig, &sl);
        if (rc != 0)
            return rc == ERR_NOMEM ? rc : ERR_AUTH_INVALID_TOKEN;
        bool good = verify(j, token, (size_t)(d2 - token), sig, sl);
        mem_free(sig);
        if (!good)
            return ERR_AUTH_INVALID_TOKEN;
        seen_add(j, token, len);
    }
    struct json_object *c = parse_obj(d1 + 1, (size_t)(d2 - d1 - 1));
    rc = c != NULL ? claims_check(c, now_ms, user_out, cap, revision_out)
                   : ERR_AUTH_INVALID_TOKEN;
    json_object_put(c);
    return rc;
}
