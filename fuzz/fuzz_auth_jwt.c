/* fuzz_auth_jwt.c - JWT tokens (auth/token_jwt.c): what a client sends as
 * its token (any bytes: segments, base64url, JSON header and claims,
 * signatures) verified with an HMAC, an ECDSA and an Ed25519 key; claims
 * that pass the signature (the target signs what the input gives, so the
 * claim checks are reached); the key parser (auth_jwt_create with the
 * input as a PEM key); and sign-then-verify of any user name, which must
 * give the name and revision back.
 *
 * Input: byte 0 picks the part; the rest is its bytes.
 *   0: a token, verified by each key;
 *   1: header JSON, 0x00, claims JSON: encoded, HS256-signed, verified;
 *   2: byte 1 picks the method, the rest is a private key (PEM), then a
 *      public key after a 0x00;
 *   3: a user name (up to a 0x00), 8 bytes of revision: signed, verified. */
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* Test keys, made for this file only (openssl ecparam / genpkey). */
static const char ec_pem[] =
    "-----BEGIN EC PRIVATE KEY-----\n"
    "MHcCAQEEILTeiFjLYKra/uxkDdTe1oknuq5FLT42ZDVCPouBqkd0oAoGCCqGSM49\n"
    "AwEHoUQDQgAElr+uhlcXLm6fZdZaVLcvCDAMdbTV3W7Y+OkOh0rV+lR1fPHCMTa5\n"
    "QktOLbXLt+RYeu636n6ZeCVZ10YHtI6nKA==\n"
    "-----END EC PRIVATE KEY-----\n";
static const char ed_pem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIJ9qP4SEroCll82aH/lFML3kExQNubeLJIs+MVKHN+SW\n"
    "-----END PRIVATE KEY-----\n";
static const char secret[] = "fuzz-hmac-secret";

/* A fixed "now" (2026-12-04), so runs replay. */
#define NOW_MS 1796428800000LL

static struct auth_jwt *keys[3];

static struct auth_jwt *make(const char *method, const char *pem)
{
    struct auth_jwt_config c = {method, NULL, 0, (const uint8_t *)pem,
                                strlen(pem), 300000};
    struct auth_jwt *j = NULL;
    char why[AUTH_JWT_WHY_MAX];
    CHECK(auth_jwt_create(&c, &j, why) == 0);
    return j;
}

static void setup(void)
{
    if (keys[0] != NULL)
        return;
    keys[0] = make("HS256", secret);
    keys[1] = make("ES256", ec_pem);
    keys[2] = make("EdDSA", ed_pem);
}

static void verify_all(const char *tok, size_t n)
{
    char user[AUTH_NAME_MAX + 1];
    uint64_t rev = 0;
    for (int i = 0; i < 3; i++) {
        int rc = auth_jwt_verify(keys[i], tok, n, NOW_MS, user, sizeof user,
                                 &rev);
        CHECK(rc == 0 || rc == ERR_AUTH_INVALID_TOKEN || rc == ERR_NOMEM ||
              rc == ERR_TOO_LARGE);
        if (rc == 0)
            CHECK(strlen(user) < sizeof user);
    }
}

static size_t b64url(char *out, const uint8_t *p, size_t n)
{
    static const char a[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        v |= i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0;
        v |= i + 2 < n ? p[i + 2] : 0;
        size_t k = n - i >= 3 ? 4 : n - i + 1;
        for (size_t j = 0; j < k; j++)
            out[o++] = a[(v >> (18 - 6 * j)) & 63];
    }
    return o;
}

/* Part 1: header 0x00 claims, signed with HS256 as a good member would. */
static void signed_claims(const uint8_t *p, size_t n)
{
    const uint8_t *nul = memchr(p, 0, n);
    if (nul == NULL)
        return;
    size_t hl = (size_t)(nul - p), cl = n - hl - 1;
    char *tok = malloc(2 * n + 128);
    size_t o = b64url(tok, p, hl);
    tok[o++] = '.';
    o += b64url(tok + o, nul + 1, cl);
    uint8_t mac[64];
    unsigned int ml = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const uint8_t *)tok, o,
         mac, &ml);
    tok[o++] = '.';
    o += b64url(tok + o, mac, ml);
    verify_all(tok, o);
    free(tok);
}

static void key_parse(const uint8_t *p, size_t n)
{
    static const char *m[] = {"RS256", "PS384", "ES256", "ES512", "EdDSA",
                              "HS256", "RS512", "ES384"};
    if (n < 1)
        return;
    const uint8_t *nul = memchr(p + 1, 0, n - 1);
    size_t kl = nul ? (size_t)(nul - p - 1) : n - 1;
    struct auth_jwt_config c = {m[p[0] % 8], nul ? nul + 1 : NULL,
                                nul ? n - kl - 2 : 0, p + 1, kl, 1000};
    struct auth_jwt *j = NULL;
    char why[AUTH_JWT_WHY_MAX];
    int rc = auth_jwt_create(&c, &j, why);
    CHECK(rc == 0 || rc == ERR_AUTH_INVALID_OPTS || rc == ERR_NOMEM);
    CHECK(rc != ERR_AUTH_INVALID_OPTS || why[0] != '\0');
    char *tok = NULL;
    if (rc == 0 && auth_jwt_sign(j, "u", 7, NOW_MS, &tok) == 0) {
        char user[8];
        uint64_t rev = 0;
        CHECK(auth_jwt_verify(j, tok, strlen(tok), NOW_MS, user, sizeof user,
                              &rev) == 0);
        CHECK(rev == 7 && strcmp(user, "u") == 0);
    }
    mem_free(tok);
    auth_jwt_destroy(j);
}

static void round_trip(const uint8_t *p, size_t n)
{
    const uint8_t *nul = memchr(p, 0, n);
    if (nul == NULL || n - (size_t)(nul - p) - 1 < 8)
        return;
    size_t ul = (size_t)(nul - p);
    char *name = malloc(ul + 1);
    memcpy(name, p, ul);
    name[ul] = '\0';
    uint64_t rev = 0;
    memcpy(&rev, nul + 1, 8);
    for (int i = 0; i < 3; i++) {
        char *tok = NULL;
        int rc = auth_jwt_sign(keys[i], name, rev, NOW_MS, &tok);
        CHECK(rc == 0 || rc == ERR_INVAL || rc == ERR_NOMEM);
        if (rc != 0)
            continue;
        char user[AUTH_NAME_MAX + 1];
        uint64_t got = 0;
        rc = auth_jwt_verify(keys[i], tok, strlen(tok), NOW_MS, user,
                             sizeof user, &got);
        /* a revision near 2^64 is refused (read as a double, it passes
         * 2^64); names with invalid UTF-8 may not parse */
        CHECK(rc == 0 || rc == ERR_AUTH_INVALID_TOKEN || rc == ERR_NOMEM);
        if (rc == 0) {
            CHECK(strcmp(user, name) == 0);
            CHECK(got == rev);
        }
        mem_free(tok);
    }
    free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0:
        verify_all((const char *)p, n);
        break;
    case 1:
        signed_claims(p, n);
        break;
    case 2:
        key_parse(p, n);
        break;
    default:
        round_trip(p, n);
        break;
    }
    return 0;
}
