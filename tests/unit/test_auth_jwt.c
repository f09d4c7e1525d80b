/* test_auth_jwt.c - JWT tokens (src/auth/token_jwt.c): known answers
 * (HS256 and Ed25519 are deterministic: the tokens PyJWT makes for the
 * same claims and keys, byte for byte), a sign/verify round trip for every
 * method with keys made here by OpenSSL, verify-only instances, expiry at
 * the second, claim bytes as Go writes them, and the refusals of
 * auth_jwt_create with etcd's texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "auth/auth.h"
#include "util/err.h"
#include "util/mem.h"

#define NOW_MS 1796428800000LL /* exp = NOW + 300 s = 1796429100 */

static const char ed_pem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ9qP4SEroCll82aH/lFML3kExQNubeLJIs+MVKHN+SW\n"
    "-----END PRIVATE KEY-----\n";
static const char secret[] = "fuzz-hmac-secret";

/* PyJWT 2.6: jwt.encode({"exp": 1796429100, "revision": 5,
 * "username": "root"}, key, algorithm=...) */
static const char hs256_root[] =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJleHAiOjE3OTY0MjkxMDAsInJldmlzaW9uIjo1LCJ1c2VybmFtZSI6InJvb3QifQ."
    "Qifo1nosr1Ckk97z7GSYaVSc_-nhVDfjxOlSf6qT1ow";
static const char eddsa_root[] =
    "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9."
    "eyJleHAiOjE3OTY0MjkxMDAsInJldmlzaW9uIjo1LCJ1c2VybmFtZSI6InJvb3QifQ."
    "tB81bREBDrZ1rJ31JaGWeaLdtjGMy9j1JG4RlCn4LbJoPoWuhsE_RGr9QOx8_5Rg0ZjxdI1l"
    "ySsKey5BP535Bw";

static struct auth_jwt *make(const char *method, const char *priv,
                             const char *pub, int64_t ttl_ms, int want)
{
    struct auth_jwt_config c = {
        method, (const uint8_t *)pub, pub ? strlen(pub) : 0,
        (const uint8_t *)priv, priv ? strlen(priv) : 0, ttl_ms};
    struct auth_jwt *j = NULL;
    char why[AUTH_JWT_WHY_MAX];
    assert_int_equal(auth_jwt_create(&c, &j, why), want);
    return j;
}

static void check_user(struct auth_jwt *j, const char *tok, int64_t now_ms,
                       int want, const char *user, uint64_t rev)
{
    char got[64] = "";
    uint64_t r = 0;
    assert_int_equal(auth_jwt_verify(j, tok, strlen(tok), now_ms, got,
                                     sizeof got, &r), want);
    if (want == 0) {
        assert_string_equal(got, user);
        assert_int_equal(r, rev);
    }
}

static void test_known_answers(void **state)
{
    (void)state;
    struct auth_jwt *hs = make("HS256", secret, NULL, 300000, 0);
    struct auth_jwt *ed = make("EdDSA", ed_pem, NULL, 300000, 0);
    char *tok;
    assert_int_equal(auth_jwt_sign(hs, "root", 5, NOW_MS, &tok), 0);
    assert_string_equal(tok, hs256_root);
    mem_free(tok);
    assert_int_equal(auth_jwt_sign(ed, "root", 5, NOW_MS, &tok), 0);
    assert_string_equal(tok, eddsa_root);
    mem_free(tok);
    check_user(hs, hs256_root, NOW_MS, 0, "root", 5);
    check_user(ed, eddsa_root, NOW_MS, 0, "root", 5);
    /* each key refuses the other's token */
    check_user(hs, eddsa_root, NOW_MS, ERR_AUTH_INVALID_TOKEN, NULL, 0);
    check_user(ed, hs256_root, NOW_MS, ERR_AUTH_INVALID_TOKEN, NULL, 0);
    auth_jwt_destroy(hs);
    auth_jwt_destroy(ed);
}

/* exp is whole seconds: valid while now < exp (golang-jwt). */
static void test_expiry(void **state)
{
    (void)state;
    struct auth_jwt *hs = make("HS256", secret, NULL, 300000, 0);
    int64_t exp_ms = 1796429100000LL;
    check_user(hs, hs256_root, exp_ms - 1, 0, "root", 5);
    check_user(hs, hs256_root, exp_ms, ERR_AUTH_INVALID_TOKEN, NULL, 0);
    check_user(hs, hs256_root, exp_ms + 86400000, ERR_AUTH_INVALID_TOKEN,
               NULL, 0);
    auth_jwt_destroy(hs);
}

/* A token lives at least its ttl and less than ttl + 1 s, whatever the
 * millisecond it was signed at: exp is now + ttl rounded up to a whole
 * second (etcd rounds it down: a ttl=1s token signed at x.999 s would be
 * refused a millisecond later). */
static void test_lifetime(void **state)
{
    (void)state;
    struct auth_jwt *hs = make("HS256", secret, NULL, 1000, 0);
    for (int64_t now = NOW_MS - 1000; now <= NOW_MS + 1000; now += 37) {
        char *tok;
        assert_int_equal(auth_jwt_sign(hs, "root", 5, now, &tok), 0);
        check_user(hs, tok, now, 0, "root", 5);
        check_user(hs, tok, now + 999, 0, "root", 5);
        check_user(hs, tok, now + 2000, ERR_AUTH_INVALID_TOKEN, NULL, 0);
        mem_free(tok);
    }
    auth_jwt_destroy(hs);
}

/* A token whose signature verified once (the thread remembers it) is
 * still refused by another key, even by an instance made at the same
 * address after the first was destroyed; a token differing in one byte of
 * its signature is checked again and refused; the claims are checked on
 * every use (test_expiry). */
static void test_seen_tokens(void **state)
{
    (void)state;
    struct auth_jwt *a = make("HS256", secret, NULL, 300000, 0);
    check_user(a, hs256_root, NOW_MS, 0, "root", 5);
    check_user(a, hs256_root, NOW_MS, 0, "root", 5);
    char bad[sizeof hs256_root];
    memcpy(bad, hs256_root, sizeof bad);
    bad[sizeof bad - 10] = bad[sizeof bad - 10] == 'A' ? 'B' : 'A';
    check_user(a, bad, NOW_MS, ERR_AUTH_INVALID_TOKEN, NULL, 0);
    auth_jwt_destroy(a);
    for (int i = 0; i < 4; i++) { /* likely at a's address at least once */
        struct auth_jwt *b = make("HS256", "another-secret", NULL, 300000, 0);
        check_user(b, hs256_root, NOW_MS, ERR_AUTH_INVALID_TOKEN, NULL, 0);
        auth_jwt_destroy(b);
    }
    /* Five tokens in turn: the oldest is forgotten and checked again. */
    struct auth_jwt *c = make("HS256", secret, NULL, 300000, 0);
    char *toks[5];
    for (int i = 0; i < 5; i++) {
        assert_int_equal(auth_jwt_sign(c, "u", (uint64_t)i, NOW_MS,
                                       &toks[i]), 0);
        check_user(c, toks[i], NOW_MS, 0, "u", (uint64_t)i);
    }
    for (int i = 0; i < 5; i++) {
        check_user(c, toks[i], NOW_MS, 0, "u", (uint64_t)i);
        mem_free(toks[i]);
    }
    auth_jwt_destroy(c);
}

static char *b64url_decode(const char *s, size_t n)
{
    char *out = calloc(1, n + 4);
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    static const char a[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 6) | (uint32_t)(strchr(a, s[i]) - a);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)(acc >> bits);
        }
    }
    return out;
}

/* The claims' bytes are Go's encoding/json of etcd's map: sorted keys,
 * <, >, & and controls escaped. */
static void test_claim_bytes(void **state)
{
    (void)state;
    struct auth_jwt *hs = make("HS384", secret, NULL, 1500, 0);
    char *tok;
    assert_int_equal(auth_jwt_sign(hs, "a<b>&\"\\\n\x01", 42, NOW_MS, &tok),
                     0);
    char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.');
    char *head = b64url_decode(tok, (size_t)(d1 - tok));
    char *claims = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1));
    assert_string_equal(head, "{\"alg\":\"HS384\",\"typ\":\"JWT\"}");
    assert_string_equal(claims, "{\"exp\":1796428802,\"revision\":42,"
                                "\"username\":\"a\\u003cb\\u003e\\u0026"
                                "\\\"\\\\\\n\\u0001\"}");
    check_user(hs, tok, NOW_MS, 0, "a<b>&\"\\\n\x01", 42);
    free(head);
    free(claims);
    mem_free(tok);
    auth_jwt_destroy(hs);
}

/* pem_of: a PEM text of k (private or public), malloc'd. */
static char *pem_of(EVP_PKEY *k, int priv)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (priv)
        assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL,
                                                  NULL), 1);
    else
        assert_int_equal(PEM_write_bio_PUBKEY(b, k), 1);
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *out = calloc(1, (size_t)n + 1);
    memcpy(out, p, (size_t)n);
    BIO_free(b);
    return out;
}

/* RSA keys take the time on a loaded machine: two are made and shared by
 * the six RS and PS methods (the first and second call of each). */
static EVP_PKEY *rsa_key(void)
{
    static EVP_PKEY *k[2];
    static int n;
    EVP_PKEY **slot = &k[n++ % 2];
    if (*slot == NULL)
        *slot = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    EVP_PKEY_up_ref(*slot);
    return *slot;
}

static EVP_PKEY *keygen(const char *method)
{
    if (method[0] == 'R' || method[0] == 'P')
        return rsa_key();
    if (strcmp(method, "ES256") == 0)
        return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (strcmp(method, "ES384") == 0)
        return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    if (strcmp(method, "ES512") == 0)
        return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-521");
    return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
}

/* Every asymmetric method: sign, verify with the full instance and with a
 * verify-only one; the verify-only one cannot sign; another key of the
 * same kind refuses the token. */
static void test_methods_round_trip(void **state)
{
    (void)state;
    static const char *m[] = {"RS256", "RS384", "RS512", "PS256", "PS384",
                              "PS512", "ES256", "ES384", "ES512", "EdDSA"};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        EVP_PKEY *k = keygen(m[i]), *k2 = keygen(m[i]);
        assert_non_null(k);
        char *priv = pem_of(k, 1), *pub = pem_of(k, 0), *pub2 = pem_of(k2, 0);
        struct auth_jwt *full = make(m[i], priv, pub, 60000, 0);
        struct auth_jwt *vo = make(m[i], NULL, pub, 60000, 0);
        struct auth_jwt *other = make(m[i], NULL, pub2, 60000, 0);
        assert_false(auth_jwt_verify_only(full));
        assert_true(auth_jwt_verify_only(vo));
        char *tok, *none = NULL;
        assert_int_equal(auth_jwt_sign(full, "alice", 9, NOW_MS, &tok), 0);
        assert_int_equal(auth_jwt_sign(vo, "alice", 9, NOW_MS, &none),
                         ERR_AUTH_VERIFY_ONLY);
        check_user(full, tok, NOW_MS, 0, "alice", 9);
        check_user(vo, tok, NOW_MS + 59000, 0, "alice", 9);
        check_user(other, tok, NOW_MS, ERR_AUTH_INVALID_TOKEN, NULL, 0);
        /* a key whose PEM is not the pub's: refused at create */
        make(m[i], priv, pub2, 60000, ERR_AUTH_INVALID_OPTS);
        mem_free(tok);
        auth_jwt_destroy(full);
        auth_jwt_destroy(vo);
        auth_jwt_destroy(other);
        free(priv);
        free(pub);
        free(pub2);
        EVP_PKEY_free(k);
        EVP_PKEY_free(k2);
    }
}

static void refused(const char *method, const char *priv, const char *pub,
                    const char *why_want)
{
    struct auth_jwt_config c = {
        method, (const uint8_t *)pub, pub ? strlen(pub) : 0,
        (const uint8_t *)priv, priv ? strlen(priv) : 0, 1000};
    struct auth_jwt *j = NULL;
    char why[AUTH_JWT_WHY_MAX];
    assert_int_equal(auth_jwt_create(&c, &j, why), ERR_AUTH_INVALID_OPTS);
    assert_null(j);
    assert_string_equal(why, why_want);
}

static void test_create_refusals(void **state)
{
    (void)state;
    EVP_PKEY *ec = keygen("ES256");
    char *ec_priv = pem_of(ec, 1), *ec_pub = pem_of(ec, 0);
    refused("XS256", secret, NULL, "auth: invalid auth signature method");
    refused(NULL, secret, NULL, "auth: invalid auth signature method");
    refused("RS256", NULL, NULL, "auth: missing key data");
    refused("HS256", NULL, ec_pub, "auth: missing key data");
    refused("RS256", "not a pem", NULL, "invalid key: Key must be a PEM "
                                        "encoded PKCS1 or PKCS8 key");
    refused("RS256", ec_priv, NULL, "key is not a valid RSA private key");
    refused("PS512", NULL, ec_pub, "key is not a valid RSA public key");
    refused("EdDSA", ec_priv, NULL, "key is not a valid Ed25519 private key");
    refused("ES384", ec_priv, NULL, "key is invalid: ES384 needs a P-384 "
                                    "key");
    refused("ES256", "-----BEGIN PRIVATE KEY-----\ngarbage\n", NULL,
            "key is not a valid ECDSA private key");
    /* an encrypted key: refused (with a terminal, OpenSSL would have asked
     * for its passphrase: token_jwt.c passes a callback that refuses) */
    BIO *b = BIO_new(BIO_s_mem());
    assert_int_equal(PEM_write_bio_PKCS8PrivateKey(b, ec, EVP_aes_128_cbc(),
                                                   "pw", 2, NULL, NULL), 1);
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *enc = calloc(1, (size_t)n + 1);
    memcpy(enc, p, (size_t)n);
    BIO_free(b);
    assert_non_null(strstr(enc, "ENCRYPTED"));
    refused("ES256", enc, NULL, "key is not a valid ECDSA private key");
    free(enc);
    free(ec_priv);
    free(ec_pub);
    EVP_PKEY_free(ec);
}

/* Malformed tokens of every shape are invalid, never a crash. */
static void test_malformed(void **state)
{
    (void)state;
    struct auth_jwt *hs = make("HS256", secret, NULL, 300000, 0);
    const char *bad[] = {"", ".", "..", "...", "a.b.c", hs256_root + 1,
                         "eyJhbGciOiJIUzI1NiJ9.e30.",
                         "eyJhbGciOiJub25lIn0.eyJ1c2VybmFtZSI6InJvb3QifQ."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_user(hs, bad[i], NOW_MS, ERR_AUTH_INVALID_TOKEN, NULL, 0);
    char padded[sizeof hs256_root + 2];
    snprintf(padded, sizeof padded, "%s=", hs256_root);
    check_user(hs, padded, NOW_MS, ERR_AUTH_INVALID_TOKEN, NULL, 0);
    /* a user name longer than the caller's buffer */
    char small[3];
    uint64_t r;
    assert_int_equal(auth_jwt_verify(hs, hs256_root, strlen(hs256_root),
                                     NOW_MS, small, sizeof small, &r),
                     ERR_TOO_LARGE);
    auth_jwt_destroy(hs);
}

/* The token table with a JWT signer: issue signs, info verifies and
 * tells the revision; the table stays empty. */
static void test_tokens_jwt(void **state)
{
    (void)state;
    struct auth_jwt *hs = make("HS512", secret, NULL, 60000, 0);
    struct auth_tokens *t;
    assert_int_equal(auth_tokens_create_jwt(hs, &t), 0);
    assert_true(auth_tokens_jwt(t));
    char *tok;
    assert_int_equal(auth_tokens_issue(t, "ignored", 7, "bob", 11, 0, &tok),
                     0);
    char user[16];
    uint64_t rev = 99;
    assert_int_equal(auth_tokens_info(t, tok, strlen(tok), 0, user,
                                      sizeof user, &rev), 0);
    assert_string_equal(user, "bob");
    assert_int_equal(rev, 11);
    assert_int_equal(auth_tokens_count(t), 0);
    auth_tokens_drop_user(t, "bob"); /* etcd: JWTs live on until exp */
    assert_int_equal(auth_tokens_user(t, tok, strlen(tok), 0, user,
                                      sizeof user), 0);
    mem_free(tok);
    auth_tokens_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_lifetime),
        cmocka_unit_test(test_seen_tokens),
        cmocka_unit_test(test_claim_bytes),
        cmocka_unit_test(test_methods_round_trip),
        cmocka_unit_test(test_create_refusals),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_tokens_jwt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
