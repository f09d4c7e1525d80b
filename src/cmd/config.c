/*
 * config.c - etcd's YAML config file, decoded as etcd 3.4 decodes it (see
 * config.h): libyaml loads the first document; each key of the top mapping
 * is looked up in etcd's key list, its value resolved as yaml.v2 resolves a
 * plain scalar (YAML 1.1: yes/no/on/off are booleans, 0x10 is 16), then
 * checked against the Go type of etcd's field, as encoding/json would.
 * Nothing is set until the whole file passed, so a bad file changes no
 * flag.
 */
#include "cmd/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* The Go type of etcd's field, as encoding/json checks it. */
enum kind {
    K_STR,  /* string: numbers and booleans become their text */
    K_BOOL, /* bool */
    K_UINT, /* uint, uint64 */
    K_U32,  /* uint32 */
    K_INT,  /* int, int64 */
    K_DUR,  /* time.Duration: an integer of nanoseconds */
    K_LIST, /* []string: a sequence, joined with commas for the flag */
    K_SEC,  /* securityConfig: the nested TLS block */
};

struct key {
    const char *name; /* the JSON tag, as written in the file */
    enum kind kind;   /* its Go type */
    const char *go;   /* the Go type's name, for messages */
    const char *flag; /* the flag it sets; NULL: name; "": none (below) */
};

/* embed.configYAML's keys (etcd 3.4.23 embed/config.go). */
static const struct key keys[] = {
    {"name", K_STR, "string", NULL},
    {"data-dir", K_STR, "string", NULL},
    {"wal-dir", K_STR, "string", NULL},
    {"snapshot-count", K_UINT, "uint64", NULL},
    {"max-snapshots", K_UINT, "uint", NULL},
    {"max-wals", K_UINT, "uint", NULL},
    {"heartbeat-interval", K_UINT, "uint", NULL},
    {"election-timeout", K_UINT, "uint", NULL},
    {"initial-election-tick-advance", K_BOOL, "bool", NULL},
    {"backend-batch-interval", K_DUR, "time.Duration", NULL},
    {"backend-batch-limit", K_INT, "int", NULL},
    {"quota-backend-bytes", K_INT, "int64", NULL},
    {"max-txn-ops", K_UINT, "uint", NULL},
    {"max-request-bytes", K_UINT, "uint", NULL},
    {"max-concurrent-streams", K_U32, "uint32", NULL},
    {"cipher-suites", K_LIST, "[]string", NULL},
    {"initial-cluster-state", K_STR, "string", NULL},
    {"discovery-srv", K_STR, "string", NULL},
    {"discovery-srv-name", K_STR, "string", NULL},
    {"discovery-proxy", K_STR, "string", NULL},
    {"discovery", K_STR, "string", NULL},
    {"initial-cluster", K_STR, "string", NULL},
    {"initial-cluster-token", K_STR, "string", NULL},
    {"strict-reconfig-check", K_BOOL, "bool", NULL},
    {"enable-v2", K_BOOL, "bool", NULL},
    {"auto-compaction-mode", K_STR, "string", NULL},
    {"auto-compaction-retention", K_STR, "string", NULL},
    {"grpc-keepalive-min-time", K_DUR, "time.Duration", NULL},
    {"grpc-keepalive-interval", K_DUR, "time.Duration", NULL},
    {"grpc-keepalive-timeout", K_DUR, "time.Duration", NULL},
    {"pre-vote", K_BOOL, "bool", NULL},
    {"auth-token", K_STR, "string", NULL},
    {"bcrypt-cost", K_UINT, "uint", NULL},
    {"auth-token-ttl", K_UINT, "uint", NULL},
    {"experimental-initial-corrupt-check", K_BOOL, "bool", NULL},
    {"experimental-corrupt-check-time", K_DUR, "time.Duration", NULL},
    {"experimental-enable-v2v3", K_STR, "string", NULL},
    {"experimental-backend-bbolt-freelist-type", K_STR, "string", NULL},
    {"experimental-enable-lease-checkpoint", K_BOOL, "bool", NULL},
    /* No flag in etcd 3.4; cetcd always persists remaining TTLs (flags.c,
     * experimental-enable-lease-checkpoint), so either value is what
     * cetcd does. */
    {"experimental-enable-lease-checkpoint-persist", K_BOOL, "bool", ""},
    {"experimental-compaction-batch-limit", K_INT, "int", NULL},
    {"experimental-watch-progress-notify-interval", K_DUR, "time.Duration",
     NULL},
    {"experimental-warning-apply-duration", K_DUR, "time.Duration", NULL},
    {"force-new-cluster", K_BOOL, "bool", NULL},
    {"enable-pprof", K_BOOL, "bool", NULL},
    {"metrics", K_STR, "string", NULL},
    {"listen-metrics-urls", K_STR, "string", NULL},
    {"logger", K_STR, "string", NULL},
    {"log-level", K_STR, "string", NULL},
    {"log-outputs", K_LIST, "[]string", NULL},
    {"enable-grpc-gateway", K_BOOL, "bool", NULL},
    /* etcd 3.4's deprecated spelling of log-outputs. */
    {"log-output", K_LIST, "[]string", "log-outputs"},
    {"debug", K_BOOL, "bool", NULL},
    {"log-package-levels", K_STR, "string", NULL},
    {"unsafe-no-fsync", K_BOOL, "bool", NULL},
    {"listen-peer-urls", K_STR, "string", NULL},
    {"listen-client-urls", K_STR, "string", NULL},
    {"listen-client-http-urls", K_STR, "string", NULL},
    {"initial-advertise-peer-urls", K_STR, "string", NULL},
    {"advertise-client-urls", K_STR, "string", NULL},
    {"cors", K_STR, "string", NULL},
    {"host-whitelist", K_STR, "string", NULL},
    {"client-transport-security", K_SEC, "embed.securityConfig", ""},
    {"peer-transport-security", K_SEC, "embed.securityConfig", "peer-"},
    /* Not etcd 3.4 keys: cetcd's own flags (etcd 3.5 has the second as a
     * time.Duration key), read so that a cetcd file can set them. */
    {"experimental-reported-version", K_STR, "string", NULL},
    {"experimental-lease-checkpoint-interval", K_DUR, "time.Duration", NULL},
    /* etcd 3.5's compaction-time hash check (3.5 embed.Config's JSON
     * tags; cmd/corrupt.h). */
    {"experimental-compact-hash-check-enabled", K_BOOL, "bool", NULL},
    {"experimental-compact-hash-check-time", K_DUR, "time.Duration", NULL},
};

/* etcdmain.configProxy's keys: decoded after configYAML's, so their
 * errors come only when configYAML's decode passed. */
static const struct key proxy_keys[] = {
    {"proxy-failure-wait", K_UINT, "uint", NULL},
    {"proxy-refresh-interval", K_UINT, "uint", NULL},
    {"proxy-dial-timeout", K_UINT, "uint", NULL},
    {"proxy-write-timeout", K_UINT, "uint", NULL},
    {"proxy-read-timeout", K_UINT, "uint", NULL},
    {"proxy", K_STR, "string", NULL},
    {"discovery-fallback", K_STR, "string", NULL},
};

/* securityConfig's keys; the flag is the block's prefix + the name. */
static const struct key sec_keys[] = {
    {"cert-file", K_STR, "string", NULL},
    {"key-file", K_STR, "string", NULL},
    {"client-cert-auth", K_BOOL, "bool", NULL},
    {"trusted-ca-file", K_STR, "string", NULL},
    {"auto-tls", K_BOOL, "bool", NULL},
};

#define NKEYS(t) (sizeof(t) / sizeof((t)[0]))
#define VALUE_MAX 4096 /* a flag value built from one key */

/* What a plain scalar resolves to (yaml.v2 resolve.go's tags). */
enum res { R_NULL, R_BOOL, R_INT, R_UINT, R_FLOAT, R_STR };

struct scalar {
    enum res res;      /* its YAML 1.1 type */
    bool b;            /* R_BOOL */
    int64_t i;         /* R_INT */
    uint64_t u;        /* R_UINT: past INT64_MAX */
    double f;          /* R_FLOAT */
    const char *text;  /* the text as written (libyaml's buffer) */
};

/* One decoded key, kept until the whole file has passed. */
struct setting {
    char key[160];   /* as written, for messages */
    char flag[128];  /* the flag to set */
    char *value;     /* mem_alloc'd */
};

struct parse {
    yaml_document_t *doc;   /* the loaded document */
    struct setting *set;    /* decoded keys, file order */
    size_t nset, capset;    /* used, allocated */
    char err_key[160];      /* sort key of the first error (see jerr) */
    char *err;              /* the message of that error */
    size_t cap;             /* err's size */
    bool proxy_pass;        /* decoding configProxy's keys */
    bool have_err;          /* err holds an error */
};

static bool in_list(const char *s, const char *const *l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, l[i]) == 0)
            return true;
    return false;
}

/* Go's strconv.ParseInt/ParseUint with base 0 after yaml.v2 removed the
 * underscores: 0x, 0o, 0b and a leading 0 (octal) prefixes, a sign. */
static bool parse_integer(const char *s, struct scalar *out)
{
    char buf[80];
    size_t n = 0;
    for (; *s && n < sizeof buf - 1; s++)
        if (*s != '_')
            buf[n++] = *s;
    if (*s != '\0' || n == 0)
        return false;
    buf[n] = '\0';
    const char *p = buf;
    bool neg = *p == '-';
    p += *p == '-' || *p == '+';
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        base = 16, p += 2;
    else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
        base = 8, p += 2;
    else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
        base = 2, p += 2;
    else if (p[0] == '0' && p[1] != '\0')
        base = 8, p += 1;
    if (*p == '\0' || *p == '-' || *p == '+')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, base);
    if (errno != 0 || *end != '\0')
        return false;
    if (neg) {
        if (v > (unsigned long long)INT64_MAX + 1)
            return false;
        out->res = R_INT, out->i = (int64_t)(0 - (uint64_t)v);
    } else if (v > INT64_MAX) {
        out->res = R_UINT, out->u = v;
    } else {
        out->res = R_INT, out->i = (int64_t)v;
    }
    return true;
}

/* yaml.v2's float syntax: [-+](.digits|digits[.digits])([eE][-+]digits). */
static bool parse_float(const char *s, struct scalar *out)
{
    const char *p = s + (*s == '-' || *s == '+');
    size_t w = strspn(p, "0123456789");
    p += w;
    size_t fr = 0;
    if (*p == '.')
        fr = strspn(++p, "0123456789"), p += fr;
    if (w == 0 && fr == 0)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '-' || *p == '+';
        size_t e = strspn(p, "0123456789");
        if (e == 0)
            return false;
        p += e;
    }
    if (*p != '\0')
        return false;
    errno = 0;
    out->f = strtod(s, NULL);
    if (errno == ERANGE && isinf(out->f))
        return false; /* Go's ParseFloat fails: yaml.v2 keeps a string */
    out->res = R_FLOAT;
    return true;
}

/* resolve: a scalar node's YAML 1.1 type (quoted ones are strings). */
static void resolve(const yaml_node_t *n, struct scalar *out)
{
    static const char *const yes[] = {"y", "Y", "yes", "Yes", "YES", "true",
                                      "True", "TRUE", "on", "On", "ON"};
    static const char *const no[] = {"n", "N", "no", "No", "NO", "false",
                                     "False", "FALSE", "off", "Off", "OFF"};
    static const char *const nul[] = {"", "~", "null", "Null", "NULL"};
    const char *s = (const char *)n->data.scalar.value;
    memset(out, 0, sizeof *out);
    out->text = s;
    out->res = R_STR;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return;
    if (in_list(s, nul, NKEYS(nul)))
        out->res = R_NULL;
    else if (in_list(s, yes, NKEYS(yes)))
        out->res = R_BOOL, out->b = true;
    else if (in_list(s, no, NKEYS(no)))
        out->res = R_BOOL, out->b = false;
    else if (strchr("+-.0123456789", s[0]) != NULL &&
             !parse_integer(s, out) && !parse_float(s, out))
        out->res = R_STR;
}

/* The JSON kind encoding/json names in a type error. */
static const char *json_kind(const yaml_node_t *n, const struct scalar *sc)
{
    if (n->type == YAML_MAPPING_NODE)
        return "object";
    if (n->type == YAML_SEQUENCE_NODE)
        return "array";
    switch (sc->res) {
    case R_BOOL:
        return "bool";
    case R_INT:
    case R_UINT:
    case R_FLOAT:
        return "number";
    default:
        return "string";
    }
}

/* jerr records a type error; of several, etcd reports the first key in
 * sorted order (its JSON is a sorted map), configYAML's before
 * configProxy's.  field is "configYAML.<key>" or the nested path. */
static void jerr(struct parse *p, const char *sort, const char *what,
                 const char *field, const char *go)
{
    char k[160];
    if (snprintf(k, sizeof k, "%c%s", p->proxy_pass ? '1' : '0', sort) >=
        (int)sizeof k)
        k[sizeof k - 1] = '\0'; /* a longer key sorts by its start */
    if (p->have_err && strcmp(k, p->err_key) >= 0)
        return;
    snprintf(p->err_key, sizeof p->err_key, "%s", k);
    snprintf(p->err, p->cap,
             "error unmarshaling JSON: while decoding JSON: json: cannot "
             "unmarshal %s into Go struct field %s of type %s",
             what, field, go);
    p->have_err = true;
}

/* go_float writes "number " and f as Go's encoding/json writes a float64:
 * the shortest digits that read back as f, in plain notation unless
 * |f| < 1e-6 or >= 1e21. */
static void go_float(double f, char *out, size_t cap)
{
    char e[40];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f)
            break;
    }
    snprintf(e, sizeof e, "%.*e", prec - 1, f);
    double a = fabs(f);
    if (a != 0 && (a < 1e-6 || a >= 1e21)) {
        /* Go writes e-7 where C writes e-07 (e+21 alike in both). */
        char *x = strstr(e, "e-0");
        if (x != NULL)
            memmove(x + 2, x + 3, strlen(x + 3) + 1);
        snprintf(out, cap, "number %s", e);
        return;
    }
    /* digits d1.d2d3... e±X to plain notation */
    char digits[24];
    size_t nd = 0;
    const char *p = e + (*e == '-');
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    digits[nd] = '\0';
    int exp = atoi(p + 1);
    char plain[64];
    size_t n = 0;
    if (f < 0)
        plain[n++] = '-';
    if (exp < 0) {
        n += (size_t)snprintf(plain + n, sizeof plain - n, "0.");
        for (int i = -1; i > exp; i--)
            plain[n++] = '0';
        n += (size_t)snprintf(plain + n, sizeof plain - n, "%s", digits);
    } else {
        for (int i = 0; i <= exp || (size_t)i < nd; i++) {
            if (i == exp + 1)
                plain[n++] = '.';
            plain[n++] = (size_t)i < nd ? digits[i] : '0';
        }
        plain[n] = '\0';
    }
    plain[n] = '\0';
    snprintf(out, cap, "number %s", plain);
}

/* number_error: a number that does not fit the integer field (Go names
 * the literal: "number -1", "number 1.5"). */
static void number_error(struct parse *p, const char *sort,
                         const struct scalar *sc, const char *field,
                         const char *go)
{
    char what[96];
    if (sc->res == R_FLOAT)
        go_float(sc->f, what, sizeof what);
    else if (sc->res == R_UINT)
        snprintf(what, sizeof what, "number %" PRIu64, sc->u);
    else
        snprintf(what, sizeof what, "number %" PRId64, sc->i);
    jerr(p, sort, what, field, go);
}

static int add_setting(struct parse *p, const char *key, const char *flag,
                       const char *value)
{
    if (p->nset == p->capset) {
        size_t cap = p->capset ? p->capset * 2 : 16;
        struct setting *s = mem_realloc(p->set, cap * sizeof *s);
        if (s == NULL)
            return ERR_NOMEM;
        p->set = s, p->capset = cap;
    }
    struct setting *s = &p->set[p->nset];
    size_t vl = strlen(value);
    s->value = mem_malloc(vl + 1);
    if (s->value == NULL)
        return ERR_NOMEM;
    memcpy(s->value, value, vl + 1);
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->flag, sizeof s->flag, "%s", flag);
    p->nset++;
    return 0;
}

/* int_value: an integer field's value as flag text, or a type error. */
static bool int_value(struct parse *p, const char *sort,
                      const struct scalar *sc, enum kind kind,
                      const char *field, const char *go, char *out)
{
    double f = sc->f;
    int64_t i = sc->i;
    uint64_t u = sc->u;
    bool isint = sc->res == R_INT || sc->res == R_UINT;
    /* JSON has one number type: 1e3 decodes into an integer field. */
    if (sc->res == R_FLOAT && f == floor(f) && fabs(f) < 9.2e18)
        isint = true, i = (int64_t)f, u = 0;
    bool neg = sc->res != R_UINT && i < 0;
    bool fits = isint;
    if (kind == K_UINT || kind == K_U32)
        fits = fits && !neg;
    if (kind == K_U32)
        fits = fits && sc->res != R_UINT && i <= (int64_t)UINT32_MAX;
    if (kind == K_INT || kind == K_DUR)
        fits = fits && sc->res != R_UINT;
    if (!fits) {
        number_error(p, sort, sc, field, go);
        return false;
    }
    if (sc->res == R_UINT)
        snprintf(out, VALUE_MAX, "%" PRIu64, u);
    else
        snprintf(out, VALUE_MAX, "%" PRId64 "%s", i,
                 kind == K_DUR ? "ns" : "");
    return true;
}

/* list_value: a []string field (a sequence of scalars), comma-joined. */
static bool list_value(struct parse *p, const char *sort,
                       const yaml_node_t *n, const char *field, char *out)
{
    size_t len = 0;
    out[0] = '\0';
    for (yaml_node_item_t *it = n->data.sequence.items.start;
         it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(p->doc, *it);
        struct scalar sc = {0};
        if (e == NULL)
            continue;
        if (e->type == YAML_SCALAR_NODE)
            resolve(e, &sc);
        if (e->type != YAML_SCALAR_NODE ||
            (sc.res != R_STR && sc.res != R_NULL)) {
            char f[200];
            snprintf(f, sizeof f, "%s", field);
            jerr(p, sort, json_kind(e, &sc), f, "string");
            return false;
        }
        const char *t = sc.res == R_NULL ? "" : sc.text;
        int w = snprintf(out + len, VALUE_MAX - len, "%s%s",
                         len ? "," : "", t);
        if (w < 0 || (size_t)w >= VALUE_MAX - len)
            return false;
        len += (size_t)w;
    }
    return true;
}

/* value_of converts one key's node to its flag text.  Returns 1 with the
 * text in out, 0 for a null (keep the default), -1 after a type error. */
static int value_of(struct parse *p, const char *sort, const yaml_node_t *n,
                    const struct key *k, const char *field, char *out)
{
    struct scalar sc = {0};
    if (n->type == YAML_SCALAR_NODE) {
        resolve(n, &sc);
        if (sc.res == R_NULL)
            return 0;
    }
    if (k->kind == K_LIST && n->type == YAML_SEQUENCE_NODE)
        return list_value(p, sort, n, field, out) ? 1 : -1;
    if (n->type != YAML_SCALAR_NODE || k->kind == K_LIST) {
        jerr(p, sort, json_kind(n, &sc), field, k->go);
        return -1;
    }
    switch (k->kind) {
    case K_STR:
        /* etcd 3.4's yaml decoding turns no number or boolean into a
         * string: `name: 15` is refused, `name: "15"` taken. */
        if (sc.res != R_STR) {
            jerr(p, sort, json_kind(n, &sc), field, k->go);
            return -1;
        }
        snprintf(out, VALUE_MAX, "%s", sc.text);
        return 1;
    case K_BOOL:
        if (sc.res != R_BOOL) {
            jerr(p, sort, json_kind(n, &sc), field, k->go);
            return -1;
        }
        snprintf(out, VALUE_MAX, "%s", sc.b ? "true" : "false");
        return 1;
    default:
        if (sc.res != R_INT && sc.res != R_UINT && sc.res != R_FLOAT) {
            jerr(p, sort, json_kind(n, &sc), field, k->go);
            return -1;
        }
        return int_value(p, sort, &sc, k->kind, field, k->go, out) ? 1 : -1;
    }
}

static const struct key *lookup(const struct key *t, size_t n,
                                const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

/* one_key decodes a key/value pair of a mapping; prefix is NULL at the top
 * level, else the nested block's flag prefix with block its key. */
static int one_key(struct parse *p, const char *name, const yaml_node_t *v,
                   const struct key *k, const char *block,
                   const char *prefix);

/* sec_block decodes client-/peer-transport-security. */
static int sec_block(struct parse *p, const char *block, const yaml_node_t *n,
                     const struct key *k)
{
    struct scalar sc = {0};
    if (n->type == YAML_SCALAR_NODE)
        resolve(n, &sc);
    if (n->type == YAML_SCALAR_NODE && sc.res == R_NULL)
        return 0;
    if (n->type != YAML_MAPPING_NODE) {
        char field[160];
        snprintf(field, sizeof field, "configYAML.%s", block);
        jerr(p, block, json_kind(n, &sc), field, k->go);
        return 0;
    }
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start;
         pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(p->doc, pr->value);
        if (kn == NULL || vn == NULL || kn->type != YAML_SCALAR_NODE)
            continue;
        const char *name = (const char *)kn->data.scalar.value;
        const struct key *sk = lookup(sec_keys, NKEYS(sec_keys), name);
        if (sk == NULL)
            continue; /* json ignores it, as at the top level */
        int rc = one_key(p, name, vn, sk, block, k->flag);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int one_key(struct parse *p, const char *name, const yaml_node_t *v,
                   const struct key *k, const char *block,
                   const char *prefix)
{
    char sort[160], field[200], key[160], flag[128];
    static char out[VALUE_MAX];
    if (block != NULL) {
        snprintf(sort, sizeof sort, "%s\x01%s", block, name);
        snprintf(field, sizeof field, "securityConfig.%s.%s", block, name);
        snprintf(key, sizeof key, "%s.%s", block, name);
        snprintf(flag, sizeof flag, "%s%s", prefix, name);
    } else {
        snprintf(sort, sizeof sort, "%s", name);
        snprintf(field, sizeof field, "%s.%s",
                 p->proxy_pass ? "configProxy" : "configYAML", name);
        snprintf(key, sizeof key, "%s", name);
        snprintf(flag, sizeof flag, "%s", k->flag ? k->flag : name);
    }
    if (k->kind == K_SEC)
        return sec_block(p, name, v, k);
    int r = value_of(p, sort, v, k, field, out);
    if (r <= 0)
        return 0; /* null, or an error recorded for later */
    if (block == NULL && k->flag != NULL && k->flag[0] == '\0')
        return 0; /* a key cetcd always honours (see keys[]) */
    return add_setting(p, key, flag, out);
}

/* top_level walks the top mapping once per struct etcd decodes into. */
static int top_level(struct parse *p, const yaml_node_t *root,
                     config_warn_fn warn, void *ctx)
{
    for (int pass = 0; pass < 2; pass++) {
        p->proxy_pass = pass == 1;
        if (pass == 1 && p->have_err)
            break; /* configYAML's error wins */
        for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
             pr < root->data.mapping.pairs.top; pr++) {
            yaml_node_t *kn = yaml_document_get_node(p->doc, pr->key);
            yaml_node_t *vn = yaml_document_get_node(p->doc, pr->value);
            if (kn == NULL || vn == NULL || kn->type != YAML_SCALAR_NODE)
                continue;
            const char *name = (const char *)kn->data.scalar.value;
            const struct key *k =
                pass == 0 ? lookup(keys, NKEYS(keys), name)
                          : lookup(proxy_keys, NKEYS(proxy_keys), name);
            if (k == NULL) {
                bool known = lookup(keys, NKEYS(keys), name) != NULL ||
                             lookup(proxy_keys, NKEYS(proxy_keys), name);
                if (pass == 1 && !known && warn != NULL) {
                    char m[256];
                    snprintf(m, sizeof m, "unknown key \"%.120s\" in the "
                             "configuration file ignored (as etcd "
                             "ignores it)", name);
                    warn(ctx, m);
                }
                continue;
            }
            int rc = one_key(p, name, vn, k, NULL, NULL);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* yaml_error: yaml.v2's message for a libyaml failure (decode.go fail()). */
static void yaml_error(const yaml_parser_t *y, char *err, size_t cap)
{
    size_t line = 0;
    if (y->problem_mark.line != 0)
        line = y->problem_mark.line + (y->error == YAML_SCANNER_ERROR);
    else if (y->context_mark.line != 0)
        line = y->context_mark.line;
    char where[48] = "";
    if (line != 0)
        snprintf(where, sizeof where, "line %zu: ", line);
    snprintf(err, cap, "error converting YAML to JSON: yaml: %s%s", where,
             y->problem ? y->problem : "unknown problem parsing YAML content");
}

static int root_error(const yaml_node_t *root, char *err, size_t cap)
{
    struct scalar sc = {0};
    if (root->type == YAML_SCALAR_NODE)
        resolve(root, &sc);
    snprintf(err, cap,
             "error unmarshaling JSON: while decoding JSON: json: cannot "
             "unmarshal %s into Go value of type embed.configYAML",
             json_kind(root, &sc));
    return ERR_CONFIG_FILE;
}

static int apply_all(struct parse *p, config_set_fn set, void *ctx)
{
    for (size_t i = 0; i < p->nset; i++) {
        struct setting *s = &p->set[i];
        if (set(ctx, s->key, s->flag, s->value, p->err, p->cap) != 0)
            return ERR_CONFIG_FILE;
    }
    return 0;
}

static int decode(yaml_document_t *doc, config_set_fn set,
                  config_warn_fn warn, void *ctx, char *err, size_t cap)
{
    struct parse p = {.doc = doc, .err = err, .cap = cap};
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (root == NULL)
        return 0; /* an empty file: every default */
    if (root->type == YAML_SCALAR_NODE) {
        struct scalar sc;
        resolve(root, &sc);
        if (sc.res == R_NULL)
            return 0;
    }
    if (root->type != YAML_MAPPING_NODE)
        return root_error(root, err, cap);
    rc = top_level(&p, root, warn, ctx);
    if (rc == 0 && p.have_err)
        rc = ERR_CONFIG_FILE;
    if (rc == 0)
        rc = apply_all(&p, set, ctx);
    else if (rc == ERR_NOMEM)
        snprintf(err, cap, "out of memory reading the configuration file");
    for (size_t i = 0; i < p.nset; i++)
        mem_free(p.set[i].value);
    mem_free(p.set);
    return rc == 0 ? 0 : ERR_CONFIG_FILE;
}

int config_parse(const char *buf, size_t len, config_set_fn set,
                 config_warn_fn warn, void *ctx, char *err, size_t cap)
{
    CHECK(set != NULL && err != NULL && cap > 0);
    CHECK(buf != NULL || len == 0);
    err[0] = '\0';
    yaml_parser_t y;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&y)) {
        snprintf(err, cap, "out of memory reading the configuration file");
        return ERR_CONFIG_FILE;
    }
    yaml_parser_set_input_string(&y, (const unsigned char *)(buf ? buf : ""),
                                 len);
    int rc;
    if (!yaml_parser_load(&y, &doc)) {
        yaml_error(&y, err, cap);
        rc = ERR_CONFIG_FILE;
    } else {
        rc = decode(&doc, set, warn, ctx, err, cap);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&y);
    CHECK(rc == 0 || err[0] != '\0');
    return rc;
}

int config_load(const char *path, config_set_fn set, config_warn_fn warn,
                void *ctx, char *err, size_t cap)
{
    CHECK(path != NULL && err != NULL);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        /* Go's os.PathError text: the errno message in lower case. */
        int n = snprintf(err, cap, "open %s: %s", path, strerror(errno));
        size_t at = strlen(path) + 7;
        if (n > 0 && at < cap)
            err[at] = (char)tolower((unsigned char)err[at]);
        return ERR_CONFIG_FILE;
    }
    char *buf = mem_malloc(CONFIG_FILE_BYTES_MAX + 1);
    size_t n = buf ? fread(buf, 1, CONFIG_FILE_BYTES_MAX + 1, f) : 0;
    bool bad = buf == NULL || ferror(f) || n > CONFIG_FILE_BYTES_MAX;
    fclose(f);
    int rc = ERR_CONFIG_FILE;
    if (bad)
        snprintf(err, cap, "read %s: %s", path,
                 buf == NULL ? "out of memory"
                 : n > CONFIG_FILE_BYTES_MAX
                     ? "file larger than cetcd's limit (4 MiB)"
                     : "read error");
    else
        rc = config_parse(buf, n, set, warn, ctx, err, cap);
    mem_free(buf);
    return rc;
}
