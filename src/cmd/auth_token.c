/*
 * auth_token.c - --auth-token at start-up (auth_token.h).  etcd splits
 * the value at ',' (the first part is the type) and each option at '='
 * (exactly one '=': a value may not hold one), refuses a repeated name,
 * reads ttl (Go's time.ParseDuration; absent or empty: 5m), pub-key and
 * priv-key (files, read whole), then sign-method, then builds the key.
 */
#include "cmd/auth_token.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/flags.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define OPTS_MAX 16
#define KEY_FILE_MAX (1u << 20) /* a PEM key is a few KB */

struct opt {
    char name[64];
    const char *val; /* into the copy of the option string */
};

/* split: the type and the k=v pairs of s (modified in place). */
static int split(char *s, char **type, struct opt *o, size_t *n)
{
    *n = 0;
    *type = s;
    char *p = strchr(s, ',');
    if (p != NULL)
        *p++ = '\0';
    while (p != NULL) {
        char *item = p;
        p = strchr(item, ',');
        if (p != NULL)
            *p++ = '\0';
        char *eq = strchr(item, '=');
        if (eq == NULL || strchr(eq + 1, '=') != NULL || *n == OPTS_MAX ||
            (size_t)(eq - item) >= sizeof o[0].name)
            return -1;
        *eq = '\0';
        for (size_t i = 0; i < *n; i++)
            if (strcmp(o[i].name, item) == 0)
                return -1; /* etcd: duplicated parameters */
        snprintf(o[*n].name, sizeof o[0].name, "%s", item);
        o[*n].val = eq + 1;
        (*n)++;
    }
    return 0;
}

static const char *get(const struct opt *o, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(o[i].name, name) == 0)
            return o[i].val;
    return "";
}

/* read_file: the whole file (at most KEY_FILE_MAX bytes). */
static int read_file(const char *path, uint8_t **out, size_t *len,
                     char *detail, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(detail, cap, "problem loading JWT options: open %s: %s",
                 path, errno == ENOENT ? "no such file or directory"
                                       : strerror(errno));
        return -1;
    }
    uint8_t *buf = mem_malloc(KEY_FILE_MAX);
    size_t n = buf != NULL ? fread(buf, 1, KEY_FILE_MAX, f) : 0;
    bool bad = buf == NULL || ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        snprintf(detail, cap, "problem loading JWT options: read %s: "
                 "unreadable or larger than %u bytes", path, KEY_FILE_MAX);
        mem_free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

static int jwt_opts(const struct opt *o, size_t n, struct cmd_auth_token *t,
                    char *detail, size_t cap)
{
    static const char *known[] = {"sign-method", "pub-key", "priv-key",
                                  "ttl"};
    for (size_t i = 0; i < n; i++) {
        bool k = false;
        for (size_t j = 0; j < 4; j++)
            k = k || strcmp(o[i].name, known[j]) == 0;
        if (!k)
            log_msg(LOG_WARN, "auth", "unknown JWT options: [%s]",
                    o[i].name);
    }
    const char *ttl = get(o, n, "ttl");
    int64_t ns = 5LL * 60 * 1000000000LL;
    if (*ttl != '\0' && !flags_parse_duration(ttl, &ns)) {
        char e[200];
        flags_duration_error(ttl, e, sizeof e);
        snprintf(detail, cap, "problem loading JWT options: %s", e);
        return -1;
    }
    t->cfg.ttl_ms = ns / 1000000;
    const char *pub = get(o, n, "pub-key"), *priv = get(o, n, "priv-key");
    if (*pub != '\0' &&
        read_file(pub, (uint8_t **)&t->cfg.pub_key, &t->cfg.pub_key_len,
                  detail, cap) != 0)
        return -1;
    if (*priv != '\0' &&
        read_file(priv, (uint8_t **)&t->cfg.priv_key, &t->cfg.priv_key_len,
                  detail, cap) != 0)
        return -1;
    t->cfg.sign_method = mem_dup(get(o, n, "sign-method"),
                                 strlen(get(o, n, "sign-method")) + 1);
    return t->cfg.sign_method != NULL ? 0 : -1;
}

int cmd_auth_token_parse(const char *opt, struct cmd_auth_token *t,
                         char *why, char *detail, size_t cap)
{
    why[0] = detail[0] = '\0';
    snprintf(why, cap, "auth: invalid auth options");
    char *s = mem_dup(opt, strlen(opt) + 1);
    char *type;
    struct opt o[OPTS_MAX];
    size_t n;
    int rc = s != NULL ? split(s, &type, o, &n) : -1;
    if (rc != 0 && s != NULL)
        snprintf(detail, cap, "invalid token specific option: %s", opt);
    if (rc == 0 && strcmp(type, "simple") == 0) {
        mem_free(s);
        return 0;
    }
    if (rc == 0 && strcmp(type, "jwt") != 0) {
        snprintf(detail, cap, "unknown token type: %s", type);
        rc = -1;
    }
    t->jwt = rc == 0;
    if (rc == 0)
        rc = jwt_opts(o, n, t, detail, cap);
    mem_free(s);
    /* a method we do not know is refused by auth_jwt_create's parse, as
     * etcd's jwtOptions.Parse does: "auth: invalid auth options" */
    struct auth_jwt *j = NULL;
    char jwhy[AUTH_JWT_WHY_MAX];
    int jrc = rc == 0 ? auth_jwt_create(&t->cfg, &j, jwhy) : 0;
    auth_jwt_destroy(j);
    if (rc == 0 && jrc != 0) {
        rc = -1;
        if (strcmp(jwhy, "auth: invalid auth signature method") == 0)
            snprintf(detail, cap, "problem loading JWT options: %s", jwhy);
        else
            snprintf(why, cap, "%s", jrc == ERR_NOMEM ? err_str(jrc) : jwhy);
    }
    return rc == 0 ? 0 : 1;
}

void cmd_auth_token_free(struct cmd_auth_token *t)
{
    mem_free((void *)t->cfg.sign_method);
    mem_free((void *)t->cfg.pub_key);
    mem_free((void *)t->cfg.priv_key);
    memset(t, 0, sizeof *t);
}
