/*
 * token.c - simple tokens (auth.h): a chained hash of token -> user and
 * expiry under one mutex.  A lookup renews the token (etcd's
 * simpleTokenTTLKeeper resets a token's TTL at each use); expired tokens
 * are dropped when met and when the table is full.  With --auth-token jwt
 * the same handle holds the JWT signer (token_jwt.c) and the table stays
 * empty: a JWT is checked by its signature, not looked up.
 */
#include "auth/auth.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

#define BUCKETS 4096

struct tok {
    struct tok *next;
    char *user;
    uint64_t expires_ms;
    char token[AUTH_TOKEN_MAX_LEN + 1];
};

struct auth_tokens {
    pthread_mutex_t mu;     /* the table (simple tokens) */
    uint64_t ttl_ms;        /* a simple token's life since its last use */
    size_t n;               /* live simple tokens */
    struct tok *b[BUCKETS]; /* the table's chains */
    struct auth_jwt *jwt;   /* owned; non-NULL: the tokens are JWTs and
                             * the table stays empty */
};

static size_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return (size_t)(h % BUCKETS);
}

int auth_tokens_create(uint64_t ttl_ms, struct auth_tokens **out)
{
    struct auth_tokens *t = mem_calloc(1, sizeof *t);
    if (t == NULL)
        return ERR_NOMEM;
    pthread_mutex_init(&t->mu, NULL);
    t->ttl_ms = ttl_ms;
    *out = t;
    return 0;
}

static void tok_free(struct tok *k)
{
    mem_free(k->user);
    memset(k->token, 0, sizeof k->token);
    mem_free(k);
}

/* Drops the tokens for which drop(k) holds; the lock is held. */
static void sweep(struct auth_tokens *t, bool (*drop)(const struct tok *,
                                                      const void *),
                  const void *arg)
{
    for (size_t i = 0; i < BUCKETS; i++) {
        struct tok **pp = &t->b[i];
        while (*pp != NULL) {
            struct tok *k = *pp;
            if (drop(k, arg)) {
                *pp = k->next;
                tok_free(k);
                t->n--;
            } else {
                pp = &k->next;
            }
        }
    }
}

static bool always(const struct tok *k, const void *arg)
{
    (void)k;
    (void)arg;
    return true;
}

static bool expired(const struct tok *k, const void *arg)
{
    return k->expires_ms <= *(const uint64_t *)arg;
}

static bool of_user(const struct tok *k, const void *arg)
{
    return strcmp(k->user, arg) == 0;
}

int auth_tokens_create_jwt(struct auth_jwt *j, struct auth_tokens **out)
{
    CHECK(j != NULL && out != NULL);
    int rc = auth_tokens_create(0, out);
    if (rc == 0)
        (*out)->jwt = j;
    return rc;
}

bool auth_tokens_jwt(const struct auth_tokens *t)
{
    return t->jwt != NULL;
}

/* A JWT's exp is wall-clock time (Unix seconds), which every member and
 * etcd compare with their own wall clock; the table's times are the
 * server's monotonic clock instead. */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int auth_tokens_issue(struct auth_tokens *t, const char *prefix,
                      uint64_t index, const char *user, uint64_t revision,
                      uint64_t now_ms, char **token_out)
{
    CHECK(t != NULL && user != NULL && token_out != NULL);
    if (t->jwt != NULL)
        return auth_jwt_sign(t->jwt, user, revision, wall_ms(), token_out);
    char token[AUTH_TOKEN_MAX_LEN + 1];
    int n = snprintf(token, sizeof token, "%s.%llu", prefix,
                     (unsigned long long)index);
    if (n < 0 || (size_t)n >= sizeof token)
        return ERR_INVAL;
    int rc = auth_tokens_assign(t, token, user, now_ms);
    if (rc != 0)
        return rc;
    *token_out = mem_dup(token, (size_t)n + 1);
    return *token_out != NULL ? 0 : ERR_NOMEM;
}

void auth_tokens_destroy(struct auth_tokens *t)
{
    if (t == NULL)
        return;
    auth_jwt_destroy(t->jwt);
    sweep(t, always, NULL);
    pthread_mutex_destroy(&t->mu);
    mem_free(t);
}

int auth_token_prefix(char buf[17])
{
    static const char letters[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint8_t r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return ERR_IO;
    for (int i = 0; i < 16; i++)
        buf[i] = letters[r[i] % 52];
    buf[16] = '\0';
    return 0;
}

int auth_token_parse(const char *token, size_t len, uint64_t *index_out)
{
    if (len < 18 || len > AUTH_TOKEN_MAX_LEN || token[16] != '.')
        return ERR_INVAL;
    for (size_t i = 0; i < 16; i++) {
        char c = token[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return ERR_INVAL;
    }
    uint64_t idx = 0;
    for (size_t i = 17; i < len; i++) {
        char c = token[i];
        if (c < '0' || c > '9' || idx > (UINT64_MAX - 9) / 10)
            return ERR_INVAL;
        idx = idx * 10 + (uint64_t)(c - '0');
    }
    *index_out = idx;
    return 0;
}

int auth_tokens_assign(struct auth_tokens *t, const char *token,
                       const char *user, uint64_t now_ms)
{
    size_t len = strlen(token);
    uint64_t idx;
    if (auth_token_parse(token, len, &idx) != 0)
        return ERR_INVAL;
    struct tok *k = mem_calloc(1, sizeof *k);
    char *u = mem_dup(user, strlen(user) + 1);
    if (k == NULL || u == NULL) {
        mem_free(k);
        mem_free(u);
        return ERR_NOMEM;
    }
    memcpy(k->token, token, len + 1);
    k->user = u;
    k->expires_ms = now_ms + t->ttl_ms;
    size_t h = hash(token, len);
    pthread_mutex_lock(&t->mu);
    if (t->n >= AUTH_TOKENS_MAX)
        sweep(t, expired, &now_ms);
    int rc = t->n >= AUTH_TOKENS_MAX ? ERR_TOO_MANY_REQUESTS : 0;
    if (rc == 0) {
        k->next = t->b[h];
        t->b[h] = k;
        t->n++;
    }
    pthread_mutex_unlock(&t->mu);
    if (rc != 0)
        tok_free(k);
    return rc;
}

int auth_tokens_info(struct auth_tokens *t, const char *token, size_t len,
                     uint64_t now_ms, char *user_out, size_t cap,
                     uint64_t *revision_out)
{
    if (t->jwt != NULL)
        return auth_jwt_verify(t->jwt, token, len, wall_ms(), user_out, cap,
                               revision_out);
    return auth_tokens_user(t, token, len, now_ms, user_out, cap);
}

int auth_tokens_user(struct auth_tokens *t, const char *token, size_t len,
                     uint64_t now_ms, char *user_out, size_t cap)
{
    uint64_t idx;
    if (t->jwt != NULL) {
        uint64_t rev;
        return auth_jwt_verify(t->jwt, token, len, wall_ms(), user_out, cap,
                               &rev);
    }
    if (auth_token_parse(token, len, &idx) != 0)
        return ERR_AUTH_INVALID_TOKEN;
    size_t h = hash(token, len);
    int rc = ERR_AUTH_INVALID_TOKEN;
    pthread_mutex_lock(&t->mu);
    for (struct tok **pp = &t->b[h]; *pp != NULL; pp = &(*pp)->next) {
        struct tok *k = *pp;
        if (strlen(k->token) != len || memcmp(k->token, token, len) != 0)
            continue;
        if (k->expires_ms <= now_ms) {
            *pp = k->next;
            tok_free(k);
            t->n--;
            break;
        }
        size_t ul = strlen(k->user);
        if (ul >= cap) {
            rc = ERR_TOO_LARGE;
            break;
        }
        memcpy(user_out, k->user, ul + 1);
        k->expires_ms = now_ms + t->ttl_ms;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void auth_tokens_drop_user(struct auth_tokens *t, const char *user)
{
    pthread_mutex_lock(&t->mu);
    sweep(t, of_user, user);
    pthread_mutex_unlock(&t->mu);
}

void auth_tokens_clear(struct auth_tokens *t)
{
    pthread_mutex_lock(&t->mu);
    sweep(t, always, NULL);
    pthread_mutex_unlock(&t->mu);
}

size_t auth_tokens_count(struct auth_tokens *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}
