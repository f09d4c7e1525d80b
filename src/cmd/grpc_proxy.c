/*
 * grpc_proxy.c - `cetcd grpc-proxy start`: etcd 3.4's grpc-proxy command
 * (cobra's and pflag's parsing, its help, checks and messages) filling a
 * struct grpcproxy_config and running grpcproxy/.  See grpc_proxy.h.
 *
 * The steps of etcd's startGRPCProxy, in its order: checkArgs, the zap
 * logger, the listener's TLS (--listen-cipher-suites, --auto-tls), the
 * listen address, the TLS listener, the upstream client (--discovery-srv
 * or --endpoints, its TLS), then serving.  One difference of order: etcd
 * logs "listening for gRPC proxy client requests" before it builds the
 * client; here grpcproxy_start logs it, after the client's checks.
 */
#include "cmd/grpc_proxy.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "cetcd/cetcd.h"
#include "cmd/gateway.h"
#include "cmd/notify.h"
#include "grpcproxy/grpcproxy.h"
#include "rpc/rpc.h"
#include "rpc/tls.h"
#include "tcpproxy/tcpproxy.h"
#include "util/log.h"
#include "util/mem.h"

/* Values one list flag (--endpoints, --listen-cipher-suites) holds. */
#define LIST_MAX CETCD_ENDPOINTS_MAX
/* The largest TLS file read (Go has no limit; no PEM file is this big). */
#define PEM_FILE_MAX (16u << 20)
/* etcd's newClientCfg: DialTimeout 5 s. */
#define DIAL_TIMEOUT_MS 5000
/* clientv3's send limit when --max-send-bytes <= 0. */
#define SEND_DEFAULT_BYTES (2u << 20)
/* etcd's proxy server is grpc.NewServer without MaxRecvMsgSize: grpc-go's
 * 4 MiB receive limit.  rpc/ adds 512 KiB to max_request_bytes. */
#define SERVER_RECV_BYTES ((4u << 20) - (512u << 10))
/* Message buffers: the messages quote flag values (one argv string). */
#define MSG_MAX 8192

/* --- the flags ---------------------------------------------------------- */

enum flag_type { T_STR, T_BOOL, T_LIST, T_INT, T_U32 };

/* One pflag flag. */
struct flag_def {
    const char *name;  /* without dashes */
    enum flag_type type;
    const char *def;   /* default as pflag shows it, "" for none */
    const char *usage; /* help text */
};

/* The start command's flags, in pflag's (alphabetical) help order. */
enum {
    F_ADVERTISE, F_AUTO_TLS, F_CACERT, F_CERT, F_CERT_FILE, F_CRL,
    F_DATA_DIR, F_DEBUG, F_SRV, F_SRV_NAME, F_PPROF, F_ENDPOINTS, F_LEASING,
    F_ORDERING, F_HELP, F_INSECURE_DISC, F_SKIP_VERIFY, F_KEY, F_KEY_FILE,
    F_LISTEN, F_SUITES, F_STREAMS, F_RECV, F_SEND, F_METRICS, F_NS,
    F_PREFIX, F_TTL, F_CA_FILE, F_N
};

static const struct flag_def start_defs[F_N] = {
    [F_ADVERTISE] = {"advertise-client-url", T_STR, "127.0.0.1:23790",
                     "advertise address to register (must be reachable by "
                     "client)"},
    [F_AUTO_TLS] = {"auto-tls", T_BOOL, "",
                    "proxy TLS using generated certificates"},
    [F_CACERT] = {"cacert", T_STR, "",
                  "verify certificates of TLS-enabled secure etcd servers "
                  "using this CA bundle"},
    [F_CERT] = {"cert", T_STR, "",
                "identify secure connections with etcd servers using this "
                "TLS certificate file"},
    [F_CERT_FILE] = {"cert-file", T_STR, "",
                     "identify secure connections to the proxy using this "
                     "TLS certificate file"},
    [F_CRL] = {"client-crl-file", T_STR, "",
               "proxy client certificate revocation list file."},
    [F_DATA_DIR] = {"data-dir", T_STR, "default.proxy",
                    "Data directory for persistent data"},
    [F_DEBUG] = {"debug", T_BOOL, "",
                 "Enable debug-level logging for grpc-proxy."},
    [F_SRV] = {"discovery-srv", T_STR, "",
               "domain name to query for SRV records describing cluster "
               "endpoints"},
    [F_SRV_NAME] = {"discovery-srv-name", T_STR, "",
                    "service name to query when using DNS discovery"},
    [F_PPROF] = {"enable-pprof", T_BOOL, "",
                 "Enable runtime profiling data via HTTP server. Address is "
                 "at client URL + \"/debug/pprof/\""},
    [F_ENDPOINTS] = {"endpoints", T_LIST, "127.0.0.1:2379",
                     "comma separated etcd cluster endpoints"},
    [F_LEASING] = {"experimental-leasing-prefix", T_STR, "",
                   "leasing metadata prefix for disconnected linearized "
                   "reads."},
    [F_ORDERING] = {"experimental-serializable-ordering", T_BOOL, "",
                    "Ensure serializable reads have monotonically "
                    "increasing store revisions across endpoints."},
    [F_HELP] = {"help", T_BOOL, "", "help for start"},
    [F_INSECURE_DISC] = {"insecure-discovery", T_BOOL, "",
                         "accept insecure SRV records"},
    [F_SKIP_VERIFY] = {"insecure-skip-tls-verify", T_BOOL, "",
                       "skip authentication of etcd server TLS certificates "
                       "(CAUTION: this option should be enabled only for "
                       "testing purposes)"},
    [F_KEY] = {"key", T_STR, "",
               "identify secure connections with etcd servers using this "
               "TLS key file"},
    [F_KEY_FILE] = {"key-file", T_STR, "",
                    "identify secure connections to the proxy using this "
                    "TLS key file"},
    [F_LISTEN] = {"listen-addr", T_STR, "127.0.0.1:23790", "listen address"},
    [F_SUITES] = {"listen-cipher-suites", T_LIST, "",
                  "Comma-separated list of supported TLS cipher suites "
                  "between client/proxy (empty will be auto-populated by "
                  "Go)."},
    [F_STREAMS] = {"max-concurrent-streams", T_U32, "4294967295",
                   "Maximum concurrent streams that each client can open at "
                   "a time."},
    [F_RECV] = {"max-recv-bytes", T_INT, "2147483647",
                "message receive limits in bytes (default value is "
                "math.MaxInt32)"},
    [F_SEND] = {"max-send-bytes", T_INT, "1572864",
                "message send limits in bytes (default value is 1.5 MiB)"},
    [F_METRICS] = {"metrics-addr", T_STR, "",
                   "listen for endpoint /metrics requests on an additional "
                   "interface"},
    [F_NS] = {"namespace", T_STR, "",
              "string to prefix to all keys for namespacing requests"},
    [F_PREFIX] = {"resolver-prefix", T_STR, "",
                  "prefix to use for registering proxy (must be shared with "
                  "other grpc-proxy members)"},
    [F_TTL] = {"resolver-ttl", T_INT, "",
               "specify TTL, in seconds, when registering proxy endpoints"},
    [F_CA_FILE] = {"trusted-ca-file", T_STR, "",
                   "verify certificates of TLS-enabled secure proxy using "
                   "this CA bundle"},
};

/* `grpc-proxy` itself has only cobra's help flag. */
static const struct flag_def proxy_defs[] = {
    {"help", T_BOOL, "", "help for grpc-proxy"},
};

static const char proxy_usage[] =
    "Usage:\n"
    "  etcd grpc-proxy [command]\n"
    "\n"
    "Available Commands:\n"
    "  start       start the grpc proxy\n"
    "\n"
    "Flags:\n"
    "  -h, --help   help for grpc-proxy\n"
    "\n"
    "Use \"etcd grpc-proxy [command] --help\" for more information about a "
    "command.\n";

/* One flag's value.  Owned by the main thread. */
struct flag_value {
    const char *s;        /* T_STR: the default or an argv string */
    bool b;               /* T_BOOL */
    int64_t i;            /* T_INT, T_U32 */
    char *list[LIST_MAX]; /* T_LIST: mem_malloc'd strings */
    size_t n;             /* T_LIST: values in list */
    bool changed;         /* given on the command line */
};

/* A command's flags: its table, their values and its usage text. */
struct flag_set {
    const struct flag_def *defs;
    size_t n;
    struct flag_value *vals;
    const char *usage; /* printed after "Error: ..." */
};

/* Scratch for messages (main thread only, before other threads exist). */
static char msg_buf[MSG_MAX], why_buf[MSG_MAX], quote_buf[MSG_MAX];

/* --- Go's texts --------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
               : s[0] >= 0xe0 && s[0] <= 0xef ? 3
               : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                                              : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* go_quote writes s as Go's strconv.Quote (%q) does into buf (cap bytes,
 * cut if short) and returns buf. */
static const char *go_quote(const char *s, char *buf, size_t cap)
{
    static const char esc[] = "\a\b\f\n\r\t\v", name[] = "abfnrtv";
    size_t w = 0;
    assert(s != NULL && cap >= 16);
    buf[w++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && w + 8 < cap;
         p++) {
        const char *e = *p ? strchr(esc, *p) : NULL;
        size_t u = *p >= 0x80 ? utf8_len(p) : 0;
        if (*p == '"' || *p == '\\') {
            buf[w++] = '\\';
            buf[w++] = (char)*p;
        } else if (e != NULL) {
            buf[w++] = '\\';
            buf[w++] = name[e - esc];
        } else if (*p < 0x20 || *p == 0x7f || (*p >= 0x80 && u == 0)) {
            w += (size_t)snprintf(buf + w, cap - w, "\\x%02x", *p);
        } else if (u > 0) {
            memcpy(buf + w, p, u);
            w += u;
            p += u - 1;
        } else {
            buf[w++] = (char)*p;
        }
    }
    buf[w++] = '"';
    buf[w] = '\0';
    assert(w < cap);
    return buf;
}

/* strconv.ParseBool. */
static bool go_parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(v, yes[i]) == 0 || strcmp(v, no[i]) == 0) {
            *out = strcmp(v, yes[i]) == 0;
            return true;
        }
    }
    return false;
}

enum go_num { GO_OK, GO_SYNTAX, GO_RANGE };

/* strconv's underscoreOK: '_' only between digits or after a base
 * prefix. */
static bool go_underscores_ok(const char *s)
{
    char saw = '^';
    bool hex = false;
    size_t i = 0;
    if (*s == '+' || *s == '-')
        s++;
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '0' && strchr("bBoOxX", s[1]) != NULL) {
        i = 2;
        saw = '0';
        hex = (s[1] | 0x20) == 'x';
    }
    for (; i < n; i++) {
        char l = (char)(s[i] | 0x20);
        if ((s[i] >= '0' && s[i] <= '9') || (hex && l >= 'a' && l <= 'f')) {
            saw = '0';
        } else if (s[i] == '_') {
            if (saw != '0')
                return false;
            saw = '_';
        } else {
            if (saw == '_')
                return false;
            saw = '!';
        }
    }
    return saw != '_';
}

/* strconv.ParseUint(s, 0, bits): Go's base prefixes and underscores. */
static enum go_num go_parse_uint(const char *s, int bits, uint64_t *out)
{
    const char *s0 = s;
    size_t n = strlen(s);
    unsigned base = 10;
    bool underscores = false;
    uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    *out = 0;
    if (n == 0)
        return GO_SYNTAX;
    if (s[0] == '0') {
        char l = (char)(s[1] | 0x20);
        base = n >= 3 && l == 'b' ? 2 : n >= 3 && l == 'x' ? 16 : 8;
        s += n >= 3 && (l == 'b' || l == 'o' || l == 'x') ? 2 : 1;
    }
    uint64_t v = 0, cutoff = UINT64_MAX / base + 1;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s, l = c | 0x20;
        unsigned d;
        if (c == '_') {
            underscores = true;
            continue;
        }
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (l >= 'a' && l <= 'z')
            d = l - 'a' + 10u;
        else
            return GO_SYNTAX;
        if (d >= base)
            return GO_SYNTAX;
        if (v >= cutoff || v * base + d < v * base || v * base + d > max) {
            *out = max;
            return GO_RANGE;
        }
        v = v * base + d;
    }
    if (underscores && !go_underscores_ok(s0))
        return GO_SYNTAX;
    *out = v;
    return GO_OK;
}

/* strconv.ParseInt(s, 0, 64). */
static enum go_num go_parse_int(const char *s, int64_t *out)
{
    const char *p = s + (*s == '+' || *s == '-');
    uint64_t un, cutoff = UINT64_C(1) << 63;
    *out = 0;
    if (*s == '\0' || go_parse_uint(p, 64, &un) == GO_SYNTAX)
        return GO_SYNTAX;
    if ((*s != '-' && un >= cutoff) || (*s == '-' && un > cutoff))
        return GO_RANGE;
    *out = *s == '-' ? (int64_t)(0 - un) : (int64_t)un;
    return GO_OK;
}

/* --- pflag -------------------------------------------------------------- */

/* cobra's failure of a command's flags: "Error: <msg>", its usage and a
 * blank line on stderr, then etcd's main prints the error once more. */
static int usage_error(const struct flag_set *fs, const char *msg)
{
    fprintf(stderr, "Error: %s\n%s\n%s", msg, fs->usage, msg);
    return 1;
}

/* Frees a list flag's values. */
static void list_clear(struct flag_value *fv)
{
    for (size_t i = 0; i < fv->n; i++)
        mem_free(fv->list[i]);
    fv->n = 0;
}

/* Appends one value to a list flag; false when it is full (printed). */
static bool list_add(struct flag_value *fv, const char *name, const char *b,
                     size_t len)
{
    if (fv->n == LIST_MAX) {
        fprintf(stderr, "cetcd: more than %d values for --%s\n", LIST_MAX,
                name);
        return false;
    }
    char *s = mem_malloc(len + 1);
    if (s == NULL) {
        fprintf(stderr, "cetcd: out of memory\n");
        return false;
    }
    memcpy(s, b, len);
    s[len] = '\0';
    fv->list[fv->n++] = s;
    return true;
}

/* The end of an unquoted csv field at p (',', a line end, or NUL). */
static bool csv_field_end(const char *p)
{
    return *p == '\0' || *p == ',' || *p == '\n' ||
           (p[0] == '\r' && p[1] == '\n');
}

/* encoding/csv's error at byte col (1-based) of the record. */
static int csv_error(char *why, size_t cap, size_t col, bool bare)
{
    snprintf(why, cap, "parse error on line 1, column %zu: %s", col,
             bare ? "bare \" in non-quoted-field"
                  : "extraneous or missing \" in quoted-field");
    return -1;
}

/* One csv field of v at *p into field (n_out bytes; field has room for
 * all of v), *p left at its end.  0, or -1 with csv's error in why. */
static int csv_field(const char *v, const char **p, char *field,
                     size_t *n_out, char *why, size_t cap)
{
    const char *c = *p;
    size_t n = 0;
    if (*c == '"') {
        for (c++; !(c[0] == '"' && c[1] != '"'); c++) {
            if (*c == '\0')
                return csv_error(why, cap, (size_t)(c - v) + 1, false);
            c += c[0] == '"'; /* "" is one quote */
            field[n++] = *c;
        }
        if (!csv_field_end(++c)) /* the column of the closing quote */
            return csv_error(why, cap, (size_t)(c - v), false);
    } else {
        for (; !csv_field_end(c); c++) {
            if (*c == '"')
                return csv_error(why, cap, (size_t)(c - v) + 1, true);
            field[n++] = *c;
        }
    }
    assert(n <= strlen(v));
    *p = c;
    *n_out = n;
    return 0;
}

/*
 * pflag's stringSlice: encoding/csv's first record of v (quoted fields,
 * "" inside quotes), appended to fv.  Returns 0; 1 after printing a full
 * list (or no memory); -1 with csv's error in why.
 */
static int csv_add(struct flag_value *fv, const char *name, const char *v,
                   char *why, size_t cap)
{
    const char *p = v;
    char *field = mem_malloc(strlen(v) + 1);
    int rc = 0;
    assert(fv != NULL && fv->n <= LIST_MAX);
    if (field == NULL) {
        fprintf(stderr, "cetcd: out of memory\n");
        return 1;
    }
    for (bool more = *v != '\0'; more && rc == 0;) {
        size_t n = 0;
        rc = csv_field(v, &p, field, &n, why, cap);
        if (rc == 0 && !list_add(fv, name, field, n))
            rc = 1;
        more = *p == ',';
        p += more;
    }
    mem_free(field);
    return rc;
}

/* The "strconv..." reason a number flag refuses v, or "" when it takes
 * it (stored in fv). */
static void set_number(const struct flag_def *d, struct flag_value *fv,
                       const char *v, char *why, size_t cap)
{
    uint64_t u = 0;
    int64_t i = 0;
    enum go_num r = d->type == T_INT ? go_parse_int(v, &i)
                                     : go_parse_uint(v, 32, &u);
    if (r == GO_OK) {
        fv->i = d->type == T_INT ? i : (int64_t)u;
        return;
    }
    snprintf(why, cap, "strconv.%s: parsing %s: %s",
             d->type == T_INT ? "ParseInt" : "ParseUint",
             go_quote(v, quote_buf, sizeof quote_buf),
             r == GO_RANGE ? "value out of range" : "invalid syntax");
}

/* pflag's Set of flag k to v: 0, or the exit code after printing. */
static int set_value(const struct flag_set *fs, size_t k, const char *v)
{
    assert(k < fs->n && v != NULL);
    const struct flag_def *d = &fs->defs[k];
    struct flag_value *fv = &fs->vals[k];
    why_buf[0] = '\0';
    if (d->type == T_STR) {
        fv->s = v;
    } else if (d->type == T_BOOL) {
        if (!go_parse_bool(v, &fv->b))
            snprintf(why_buf, sizeof why_buf,
                     "strconv.ParseBool: parsing %s: invalid syntax",
                     go_quote(v, quote_buf, sizeof quote_buf));
    } else if (d->type == T_LIST) {
        if (!fv->changed) /* the first use replaces the default */
            list_clear(fv);
        if (csv_add(fv, d->name, v, why_buf, sizeof why_buf) > 0)
            return 1;
    } else {
        set_number(d, fv, v, why_buf, sizeof why_buf);
    }
    if (why_buf[0] != '\0') {
        char q[MSG_MAX];
        int n = snprintf(msg_buf, sizeof msg_buf,
                         "invalid argument %s for \"%s%s\" flag: %s",
                         go_quote(v, q, sizeof q),
                         strcmp(d->name, "help") == 0 ? "-h, --" : "--",
                         d->name, why_buf);
        (void)n; /* a huge value's message is cut: fine */
        return usage_error(fs, msg_buf);
    }
    fv->changed = true;
    assert(d->type != T_LIST || fv->n <= LIST_MAX);
    return 0;
}

/* The index of the flag named name[0..len), or fs->n. */
static size_t flag_find(const struct flag_set *fs, const char *name,
                        size_t len)
{
    size_t k = 0;
    while (k < fs->n && (strlen(fs->defs[k].name) != len ||
                         memcmp(fs->defs[k].name, name, len) != 0))
        k++;
    return k;
}

/* pflag's parseLongArg of args[*i] ("--name[=value]"). */
static int parse_long(const struct flag_set *fs, char **args, int n, int *i)
{
    const char *s = args[*i], *name = s + 2;
    if (*name == '-' || *name == '=') {
        snprintf(msg_buf, sizeof msg_buf, "bad flag syntax: %s", s);
        return usage_error(fs, msg_buf);
    }
    const char *eq = strchr(name, '=');
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    size_t k = flag_find(fs, name, len);
    if (k == fs->n) {
        snprintf(msg_buf, sizeof msg_buf, "unknown flag: --%.*s", (int)len,
                 name);
        return usage_error(fs, msg_buf);
    }
    const char *v = eq != NULL ? eq + 1 : NULL;
    if (v == NULL && fs->defs[k].type == T_BOOL)
        v = "true";
    else if (v == NULL && *i + 1 < n)
        v = args[++*i];
    if (v == NULL) {
        snprintf(msg_buf, sizeof msg_buf, "flag needs an argument: %s", s);
        return usage_error(fs, msg_buf);
    }
    return set_value(fs, k, v);
}

/* Go's %q of a byte (a rune below 256), as pflag names a shorthand. */
static void quote_char(unsigned char c, char *buf, size_t cap)
{
    if (c == '\'' || c == '\\')
        snprintf(buf, cap, "'\\%c'", c);
    else if (c >= 0x20 && c < 0x7f)
        snprintf(buf, cap, "'%c'", c);
    else if (c < 0x20 || c == 0x7f)
        snprintf(buf, cap, "'\\x%02x'", c);
    else if (c <= 0xa0 || c == 0xad) /* not printable in Go */
        snprintf(buf, cap, "'\\u%04x'", c);
    else
        snprintf(buf, cap, "'%c%c'", 0xc0 | (c >> 6), 0x80 | (c & 0x3f));
}

/* pflag's parseShortArg of "-abc": only -h exists (help, a bool). */
static int parse_short(const struct flag_set *fs, const char *s)
{
    size_t help = flag_find(fs, "help", 4);
    for (const char *sh = s + 1; *sh != '\0';) {
        if (strncmp(sh, "test.", 5) == 0) /* pflag skips go test's flags */
            return 0;
        if (*sh != 'h') {
            char c[16];
            quote_char((unsigned char)*sh, c, sizeof c);
            snprintf(msg_buf, sizeof msg_buf,
                     "unknown shorthand flag: %s in -%s", c, sh);
            return usage_error(fs, msg_buf);
        }
        const char *v = "true";
        if (strlen(sh) > 2 && sh[1] == '=') {
            v = sh + 2;
            sh += strlen(sh);
        } else {
            sh++;
        }
        int rc = set_value(fs, help, v);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* pflag's parse of args[0..n), flags and arguments interspersed ("--"
 * ends the flags).  *n_pos_out counts the arguments, *pos_out is the
 * first one.  Returns 0 or the exit code after printing. */
static int parse_flags(const struct flag_set *fs, char **args, int n,
                       const char **pos_out, int *n_pos_out)
{
    assert(fs != NULL && n >= 0);
    *pos_out = NULL;
    *n_pos_out = 0;
    for (int i = 0; i < n; i++) {
        const char *s = args[i];
        int rc = 0;
        if (s[0] != '-' || s[1] == '\0' || strcmp(s, "--") == 0) {
            bool dash = strcmp(s, "--") == 0;
            int from = dash ? i + 1 : i, to = dash ? n : i + 1;
            if (*n_pos_out == 0 && from < to)
                *pos_out = args[from];
            *n_pos_out += to - from;
            if (dash)
                break;
            continue;
        }
        rc = s[1] == '-' ? parse_long(fs, args, n, &i) : parse_short(fs, s);
        if (rc != 0)
            return rc;
    }
    assert(*n_pos_out <= n);
    return 0;
}

/* Sets every value of fs to its default. */
static int flags_init(const struct flag_set *fs)
{
    for (size_t k = 0; k < fs->n; k++) {
        const struct flag_def *d = &fs->defs[k];
        struct flag_value *fv = &fs->vals[k];
        memset(fv, 0, sizeof *fv);
        fv->s = d->def;
        if ((d->type == T_INT || d->type == T_U32) && d->def[0] != '\0')
            fv->i = strtoll(d->def, NULL, 10);
        if (d->type == T_LIST && d->def[0] != '\0' &&
            !list_add(fv, d->name, d->def, strlen(d->def)))
            return 1;
    }
    return 0;
}

/* Frees what the values of fs hold. */
static void flags_free(const struct flag_set *fs)
{
    for (size_t k = 0; k < fs->n; k++)
        list_clear(&fs->vals[k]);
}

/* One help line's left part: "      --name type" or "  -h, --help". */
static int flag_left(const struct flag_def *d, char *buf, size_t cap)
{
    static const char *const word[] = {"string", "", "strings", "int",
                                       "uint32"};
    bool h = strcmp(d->name, "help") == 0;
    return snprintf(buf, cap, "  %s--%s%s%s", h ? "-h, " : "    ", d->name,
                    word[d->type][0] ? " " : "", word[d->type]);
}

/* cobra's usage of the start command, its flags as pflag prints them:
 * the texts in one column, defaults that are not zero after them. */
static const char *start_usage(void)
{
    static char buf[MSG_MAX];
    char left[128], q[256];
    int width = 0;
    if (buf[0] != '\0')
        return buf;
    for (size_t k = 0; k < F_N; k++) {
        int w = flag_left(&start_defs[k], left, sizeof left);
        width = w > width ? w : width;
    }
    size_t n = (size_t)snprintf(buf, sizeof buf, "Usage:\n  etcd grpc-proxy "
                                "start [flags]\n\nFlags:\n");
    for (size_t k = 0; k < F_N && n < sizeof buf; k++) {
        const struct flag_def *d = &start_defs[k];
        int w = flag_left(d, left, sizeof left);
        const char *def = d->def;
        if (d->type == T_STR && def[0] != '\0')
            def = go_quote(def, q, sizeof q);
        else if (d->type == T_LIST && def[0] != '\0')
            def = (snprintf(q, sizeof q, "[%s]", d->def), q);
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%*s   %s%s%s%s\n",
                              left, width - w, "", d->usage,
                              def[0] ? " (default " : "", def,
                              def[0] ? ")" : "");
    }
    assert(n < sizeof buf); /* the whole usage fits */
    return buf;
}

/* --- etcd's checks ------------------------------------------------------ */

/* etcd's checkArgs: --resolver-prefix and --resolver-ttl go together, and
 * need --advertise-client-url. */
static int check_args(const struct flag_value *v)
{
    const char *prefix = v[F_PREFIX].s, *adv = v[F_ADVERTISE].s;
    int64_t ttl = v[F_TTL].i;
    if (prefix[0] != '\0' && ttl < 1) {
        fprintf(stderr, "invalid resolver-ttl %lld\n", (long long)ttl);
        return 1;
    }
    if (prefix[0] == '\0' && ttl > 0) {
        fprintf(stderr, "invalid resolver-prefix %s\n",
                go_quote(prefix, quote_buf, sizeof quote_buf));
        return 1;
    }
    if (prefix[0] != '\0' && ttl > 0 && adv[0] == '\0') {
        fprintf(stderr, "invalid advertise-client-url %s\n",
                go_quote(adv, quote_buf, sizeof quote_buf));
        return 1;
    }
    return 0;
}

/* The flags whose feature cetcd has not built: refused, never ignored. */
static int refuse_unbuilt(const struct flag_value *v)
{
    const char *name = v[F_PPROF].b      ? "enable-pprof=true"
                       : v[F_ORDERING].b ? "experimental-serializable-"
                                           "ordering=true"
                       : v[F_LEASING].s[0] != '\0'
                           ? "experimental-leasing-prefix"
                           : NULL;
    if (name == NULL)
        return 0;
    fprintf(stderr, "cetcd: --%s is not supported yet: the feature behind "
            "it is not built in this version of cetcd\n", name);
    return 1;
}

/* --- logging ------------------------------------------------------------ */

/* etcd's fmt.Fprintln(os.Stderr, err): after the log lines before it. */
static int plain_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int plain_error(const char *fmt, ...)
{
    va_list ap;
    log_close(); /* drains the lines logged so far */
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

/* Go's log.Fatal as etcd routes it through capnslog: "<time> I | msg". */
static int std_fatal(const char *msg)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    log_close();
    fprintf(stderr, "%04d-%02d-%02d %02d:%02d:%02d.%06ld I | %s\n",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, (long)tv.tv_usec, msg);
    return 1;
}

/* logutil.DefaultZapLoggerConfig: zap JSON lines (ISO8601 "ts") on
 * stderr, info or (--debug) debug.  The writer thread starts with SIGINT
 * and SIGTERM blocked: only the main thread takes them. */
static int log_setup(bool debug, const sigset_t *stop)
{
    char why[512];
    const char *out[] = {"stderr"};
    sigset_t old;
    log_set_zap_epoch_time(false);
    log_set_level(debug ? LOG_DEBUG : LOG_INFO);
    pthread_sigmask(SIG_BLOCK, stop, &old);
    int rc = log_open(true, out, 1, why, sizeof why);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        fprintf(stderr, "%s\n", why);
    return rc != 0;
}

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

/* --- the listener ------------------------------------------------------- */

/* Go's net.SplitHostPort: NULL, or its reason. */
static const char *split_host_port(const char *hp, char *host, size_t hcap,
                                   const char **port)
{
    const char *colon = strrchr(hp, ':'), *close = NULL, *start = hp;
    if (colon == NULL)
        return "missing port in address";
    if (hp[0] == '[') {
        close = strchr(hp, ']');
        if (close == NULL)
            return "missing ']' in address";
        if (close[1] == '\0')
            return "missing port in address";
        if (close + 1 != colon)
            return close[1] == ':' ? "too many colons in address"
                                   : "missing port in address";
        start = hp + 1;
    } else if (memchr(hp, ':', (size_t)(colon - hp)) != NULL) {
        return "too many colons in address";
    }
    if (strchr(hp + (close != NULL), '[') != NULL)
        return "unexpected '[' in address";
    if (strchr(close != NULL ? close + 1 : hp, ']') != NULL)
        return "unexpected ']' in address";
    size_t n = (size_t)((close != NULL ? close : colon) - start);
    snprintf(host, hcap, "%.*s", (int)n, start);
    *port = colon + 1;
    return NULL;
}

/* Go's LookupPort: the port of service (digits, or a name from
 * /etc/services), or -1 with Go's reason in why. */
static int lookup_port(const char *service, char *why, size_t cap)
{
    const char *p = service + (*service == '+' || *service == '-');
    uint64_t n = 0;
    bool digits = true;
    for (const char *c = p; *c != '\0' && digits; c++) {
        digits = *c >= '0' && *c <= '9';
        n = n * 10 + (uint64_t)(*c - '0');
        n = n > 65536 ? 65536 : n;
    }
    if (!digits) {
        struct servent *se = getservbyname(service, "tcp");
        if (se == NULL) {
            snprintf(why, cap, "address tcp/%s: unknown port", service);
            return -1;
        }
        return ntohs((uint16_t)se->s_port);
    }
    if (n > 65535 || (*service == '-' && n > 0)) {
        snprintf(why, cap, "address %s: invalid port", service);
        return -1;
    }
    return (int)n;
}

/* Go's address text: "ip:port", "[v6]:port", ":port" for no IP. */
static void addr_text(const struct sockaddr *sa, socklen_t len, int port,
                      char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN + 16] = "";
    if (sa != NULL)
        getnameinfo(sa, len, ip, sizeof ip, NULL, 0, NI_NUMERICHOST);
    bool v6 = sa != NULL && sa->sa_family == AF_INET6;
    snprintf(buf, cap, "%s%s%s:%d", v6 ? "[" : "", ip, v6 ? "]" : "", port);
}

/* Binds and listens on ai (a probe, closed at once); 0 or Go's error.
 * bound gets the listener's address as Go's l.Addr() names it. */
static int bind_probe(struct addrinfo *ai, bool wildcard, int port,
                      char *bound, size_t bcap, char *why, size_t cap)
{
    char addr[128], text[128];
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    const char *op = "socket";
    int one = 1, zero = 0, rc = 1;
    bound[0] = '\0';
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6) /* Go's dual-stack wildcard */
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        op = "bind";
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            op = "listen";
            rc = listen(fd, 1) != 0;
        }
    }
    if (rc == 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        int p = ss.ss_family == AF_INET6
                    ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        addr_text((struct sockaddr *)&ss, sl, p, bound, bcap);
    } else if (rc != 0) {
        tcpproxy_errno_text(errno, text, sizeof text);
        addr_text(wildcard ? NULL : ai->ai_addr, ai->ai_addrlen, port, addr,
                  sizeof addr);
        snprintf(why, cap, "listen tcp %s: %s: %s", addr, op, text);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Go's net.Listen("tcp", addr), closed at once: prints Go's error and
 * returns 1 when the address cannot be listened on.  bound: see
 * bind_probe. */
static int listen_probe(const char *addr, char *bound, size_t bcap)
{
    char host[256];
    const char *port, *bad = split_host_port(addr, host, sizeof host, &port);
    if (bad != NULL)
        return plain_error("listen tcp: address %s: %s", addr, bad);
    int p = lookup_port(port, why_buf, sizeof why_buf);
    if (p < 0)
        return plain_error("listen tcp: %s", why_buf);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", p);
    if (host[0] == '\0') { /* Go: the IPv6 wildcard, dual-stack */
        hints.ai_flags |= AI_PASSIVE;
        hints.ai_family = AF_INET6;
    }
    int g = getaddrinfo(host[0] ? host : NULL, ps, &hints, &res);
    if (g != 0 && host[0] == '\0') {
        hints.ai_family = AF_INET;
        g = getaddrinfo(NULL, ps, &hints, &res);
    }
    if (g != 0)
        return plain_error("listen tcp: lookup %s: no such host", host);
    struct addrinfo *pick = res; /* Go listens on the first IPv4 one */
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next)
        if (a->ai_family == AF_INET && pick->ai_family != AF_INET)
            pick = a;
    int rc = bind_probe(pick, host[0] == '\0', p, bound, bcap, why_buf,
                        sizeof why_buf);
    freeaddrinfo(res);
    return rc != 0 ? plain_error("%s", why_buf) : 0;
}

/* --- the listener's TLS ------------------------------------------------- */

/* The listener's TLS material, from the flags or --auto-tls. */
struct srv_tls {
    bool on;                      /* etcd's tlsInfo != nil */
    const char *cert, *key, *ca;  /* the files */
    char auto_cert[1200], auto_key[1200];
    struct rpc_tls_opts opts;     /* --listen-cipher-suites */
    struct rpc_tls *tls;          /* loaded: rpc_tls_free */
};

/* --listen-cipher-suites: etcd's names (tlsutil.GetCipherSuites); a bad
 * one is Go's log.Fatal.  Without TLS flags etcd 3.4.23 crashes: refused
 * here. */
static int suites_parse(const struct flag_value *v, struct srv_tls *t)
{
    static char joined[LIST_MAX * 64];
    size_t w = 0;
    const struct flag_value *fv = &v[F_SUITES];
    for (size_t i = 0; i < fv->n; i++) {
        if (fv->list[i][0] == '\0')
            return std_fatal("unexpected TLS cipher suite \"\"");
        if (rpc_tls_opts_parse(fv->list[i], NULL, NULL, &t->opts, msg_buf,
                               sizeof msg_buf) != 0)
            return std_fatal(msg_buf);
        int k = snprintf(joined + w, sizeof joined - w, "%s%s", w ? "," : "",
                         fv->list[i]);
        w += k > 0 && (size_t)k < sizeof joined - w ? (size_t)k : 0;
    }
    if (rpc_tls_opts_parse(joined, NULL, NULL, &t->opts, msg_buf,
                           sizeof msg_buf) != 0)
        return std_fatal(msg_buf);
    if (fv->n > 0 && !t->on) {
        plain_error("cetcd: --listen-cipher-suites needs --cert-file, "
                    "--key-file or --trusted-ca-file (etcd 3.4.23 crashes "
                    "then; --auto-tls certificates take no suites)");
        return 1;
    }
    return 0;
}

/* etcd's newTLS for the listener, --listen-cipher-suites and --auto-tls
 * (a self-signed certificate in <data-dir>/fixtures/proxy), logged as
 * "gRPC proxy server TLS". */
static int server_tls_prepare(const struct flag_value *v, struct srv_tls *t)
{
    char dir[1100], url[1100];
    t->cert = v[F_CERT_FILE].s;
    t->key = v[F_KEY_FILE].s;
    t->ca = v[F_CA_FILE].s;
    t->on = t->cert[0] || t->key[0] || t->ca[0];
    if (suites_parse(v, t) != 0)
        return 1;
    if (!t->on && v[F_AUTO_TLS].b) {
        const char *d = v[F_DATA_DIR].s;
        size_t n = strlen(d);
        while (n > 1 && d[n - 1] == '/') /* filepath.Join cleans it */
            n--;
        snprintf(dir, sizeof dir, "%.*s%sfixtures/proxy", (int)n, d,
                 n == 0 || d[n - 1] == '/' ? "" : "/");
        snprintf(url, sizeof url, "https://%s", v[F_LISTEN].s);
        if (rpc_tls_self_cert(dir, url, t->auto_cert, t->auto_key,
                              sizeof t->auto_cert) != 0)
            return std_fatal("cannot create the --auto-tls certificate "
                             "(see the log line above)");
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
static int server_tls_load(const struct flag_value *v, struct srv_tls *t,
                           const char *bound)
{
    char *cert = NULL, *key = NULL, *ca = NULL, cn[256];
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
        .crl_file = t->ca[0] && v[F_CRL].s[0] ? v[F_CRL].s : NULL,
        .opts = &t->opts};
    if (rpc_tls_load(&f, &t->tls) != 0)
        return listener_fatal("the TLS files do not load (see the line "
                              "above)");
    assert(t->tls != NULL);
    return 0;
}

/* --- the upstream client ------------------------------------------------ */

/* What the upstream client is opened with. */
struct upstream {
    char *endpoints;                /* comma separated: mem_free */
    char *ca_pem, *cert_pem, *key_pem; /* mem_free */
    struct cetcd_tls tls;
    bool tls_on;
};

/* --discovery-srv's endpoints (gateway_discover), else --endpoints, joined
 * for libcetcd: clientv3 takes both "host:port" and URLs as they are. */
static int endpoints_join(const struct flag_value *v, struct upstream *u)
{
    static struct gateway_endpoint found[LIST_MAX];
    const char *eps[LIST_MAX];
    size_t n = 0, len = 1;
    assert(u->endpoints == NULL);
    if (v[F_SRV].s[0] != '\0' &&
        gateway_discover(v[F_SRV].s, v[F_SRV_NAME].s, v[F_INSECURE_DISC].b,
                         found, LIST_MAX, &n) != 0)
        return 1;
    for (size_t i = 0; i < n; i++)
        eps[i] = found[i].url;
    if (n == 0)
        for (; n < v[F_ENDPOINTS].n; n++)
            eps[n] = v[F_ENDPOINTS].list[n];
    for (size_t i = 0; i < n; i++)
        len += strlen(eps[i]) + 1;
    u->endpoints = mem_malloc(len);
    if (u->endpoints == NULL)
        return plain_error("cetcd: out of memory");
    u->endpoints[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(u->endpoints, ",");
        strcat(u->endpoints, eps[i]);
    }
    assert(strlen(u->endpoints) < len);
    return 0;
}

/* etcd's newClientCfg TLS: --cacert/--cert/--key/--insecure-skip-tls-
 * verify, the files checked as etcd's TLSInfo.ClientConfig does (a
 * client certificate must have an empty CN), logged as etcd logs it. */
static int client_tls(const struct flag_value *v, struct upstream *u)
{
    const char *ca = v[F_CACERT].s, *cert = v[F_CERT].s, *key = v[F_KEY].s;
    bool skip = v[F_SKIP_VERIFY].b;
    char cn[256] = "";
    if (!ca[0] && !cert[0] && !key[0] && !skip)
        return 0;
    if ((cert[0] || key[0]) && (!cert[0] || !key[0]))
        return plain_error("KeyFile and CertFile must both be present[key: "
                           "%s, cert: %s]", key, cert);
    if (cert[0] &&
        (read_file(cert, &u->cert_pem, why_buf, sizeof why_buf) != 0 ||
         read_file(key, &u->key_pem, why_buf, sizeof why_buf) != 0 ||
         key_pair_check(u->cert_pem, u->key_pem, cn, sizeof cn, why_buf,
                        sizeof why_buf) != 0))
        return plain_error("%s", why_buf);
    if (ca[0] && (read_file(ca, &u->ca_pem, why_buf, sizeof why_buf) != 0 ||
                  ca_check(u->ca_pem, why_buf, sizeof why_buf) != 0))
        return plain_error("%s", why_buf);
    if (cn[0] != '\0')
        return plain_error("cert has non empty Common Name (%s)", cn);
    if (skip)
        log_zap_at(LOG_WARN, __FILE__, __LINE__, "--insecure-skip-tls-verify "
                   "was given, this grpc proxy process skips authentication "
                   "of etcd server TLS certificates. This option should be "
                   "enabled only for testing purposes.", NULL, 0);
    log_tls("gRPC proxy client TLS", cert, key, ca);
    u->tls = (struct cetcd_tls){.ca_pem = u->ca_pem, .cert_pem = u->cert_pem,
                                .key_pem = u->key_pem,
                                .insecure_skip_verify = skip};
    u->tls_on = true;
    return 0;
}

/* --- serving ------------------------------------------------------------ */

/* An int flag as an int, clamped. */
static int clamp_int(int64_t i)
{
    return i > INT_MAX ? INT_MAX : i < INT_MIN ? INT_MIN : (int)i;
}

/* The listener's TLS fields of cfg from t's loaded material. */
static void server_tls_apply(const struct srv_tls *t,
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

/* Waits for SIGINT or SIGTERM (blocked in every thread), closes the proxy
 * and dies of that signal, as the Go program does. */
static void wait_and_die(struct grpcproxy *p, const sigset_t *stop)
{
    int sig = 0;
    while (sigwait(stop, &sig) != 0)
        ;
    grpcproxy_close(p);
    log_close();
    signal(sig, SIG_DFL);
    raise(sig); /* pending until unblocked */
    pthread_sigmask(SIG_UNBLOCK, stop, NULL);
}

/* Fills the proxy's config from the flags, starts it, tells systemd and
 * serves until a signal. */
static int serve(const struct flag_value *v, const struct srv_tls *t,
                 const struct upstream *u, const sigset_t *stop)
{
    char url[1100];
    assert(u->endpoints != NULL && u->endpoints[0] != '\0');
    assert(t->on == (t->tls != NULL));
    snprintf(url, sizeof url, "%s://%s", t->tls ? "https" : "http",
             v[F_LISTEN].s);
    struct rpc_server_config sc = {.urls = {url}, .urls_n = 1,
                                   .max_request_bytes = SERVER_RECV_BYTES};
    /* etcd's default (math.MaxUint32: unlimited) is rpc/'s bounded one */
    sc.max_concurrent_streams = v[F_STREAMS].i == UINT32_MAX
                                    ? 0 : (uint32_t)v[F_STREAMS].i;
    server_tls_apply(t, &sc);
    int64_t recv = v[F_RECV].i, send = v[F_SEND].i;
    struct cetcd_client_opts co = {
        .endpoints = u->endpoints, .dial_timeout_ms = DIAL_TIMEOUT_MS,
        .max_recv_bytes = recv > 0 ? clamp_int(recv) : INT32_MAX,
        .tls = u->tls_on ? &u->tls : NULL};
    struct grpcproxy_config gc = {
        .server = &sc, .client = &co,
        .max_send_bytes = send > 0 ? (size_t)send : SEND_DEFAULT_BYTES,
        .ns = v[F_NS].s, .advertise_url = v[F_ADVERTISE].s,
        .resolver_prefix = v[F_PREFIX].s,
        .resolver_ttl = clamp_int(v[F_TTL].i),
        .metrics_url = v[F_METRICS].s};
    struct grpcproxy *p = NULL;
    signal(SIGPIPE, SIG_IGN);
    pthread_sigmask(SIG_BLOCK, stop, NULL); /* the proxy's threads too */
    if (grpcproxy_start(&gc, &p) != 0)
        return 1;
    if (notify_ready() != 0)
        log_zap(LOG_ERROR, "failed to notify systemd for readiness",
                LOG_STR("error", "sd_notify failed"));
    wait_and_die(p, stop);
    return 1;
}

/* etcd's startGRPCProxy after checkArgs. */
static int run(const struct flag_value *v)
{
    struct srv_tls t;
    struct upstream u;
    char bound[128];
    sigset_t stop;
    memset(&t, 0, sizeof t);
    memset(&u, 0, sizeof u);
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    int rc = log_setup(v[F_DEBUG].b, &stop);
    if (rc == 0)
        rc = server_tls_prepare(v, &t);
    if (rc == 0)
        rc = listen_probe(v[F_LISTEN].s, bound, sizeof bound);
    if (rc == 0)
        rc = server_tls_load(v, &t, bound);
    if (rc == 0)
        rc = endpoints_join(v, &u);
    if (rc == 0)
        rc = client_tls(v, &u);
    if (rc == 0 && u.endpoints[0] == '\0')
        rc = plain_error("etcdclient: no available endpoints");
    if (rc == 0)
        rc = serve(v, &t, &u, &stop);
    rpc_tls_free(t.tls);
    mem_free(u.endpoints);
    mem_free(u.ca_pem);
    mem_free(u.cert_pem);
    mem_free(u.key_pem);
    return rc;
}

/* --- the command -------------------------------------------------------- */

/* cobra's Find below `grpc-proxy`: the first argument that is neither a
 * flag nor (no flag being known yet) the word after a flag without "=".
 * Its index, or -1. */
static int find_subcommand(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        bool eq = strchr(s, '=') != NULL;
        if (strcmp(s, "--") == 0)
            return -1;
        if (!eq && s[0] == '-' && (s[1] == '-' || strlen(s) == 2))
            i++; /* "--flag value", "-f value" */
        else if (s[0] != '\0' && s[0] != '-')
            return i;
    }
    return -1;
}

/* `grpc-proxy` without `start`: its help, or cobra's flag error. */
static int proxy_help(int argc, char **argv)
{
    struct flag_value help;
    const struct flag_set fs = {proxy_defs, 1, &help, proxy_usage};
    const char *pos;
    int n_pos;
    if (flags_init(&fs) != 0)
        return 1;
    int rc = parse_flags(&fs, argv + 2, argc - 2, &pos, &n_pos);
    if (rc == 0)
        printf("grpc-proxy related command\n\n%s", proxy_usage);
    return rc;
}

int grpc_proxy_main(int argc, char **argv)
{
    static struct flag_value vals[F_N];
    assert(argc >= 2 && strcmp(argv[1], "grpc-proxy") == 0);
    int sub = find_subcommand(argc, argv);
    if (sub < 0 || strcmp(argv[sub], "start") != 0)
        return proxy_help(argc, argv);
    const struct flag_set fs = {start_defs, F_N, vals, start_usage()};
    char **args = mem_calloc((size_t)argc, sizeof *args);
    if (args == NULL)
        return plain_error("cetcd: out of memory");
    const char *pos = NULL;
    int n = 0, n_pos = 0, rc = flags_init(&fs);
    for (int i = 2; i < argc && rc == 0; i++)
        if (i != sub) /* the flags before and after "start" */
            args[n++] = argv[i];
    if (rc == 0)
        rc = parse_flags(&fs, args, n, &pos, &n_pos);
    if (rc == 0 && vals[F_HELP].b) {
        printf("start the grpc proxy\n\n%s", fs.usage);
    } else if (rc == 0 && n_pos > 0) { /* etcd ignores them */
        snprintf(msg_buf, sizeof msg_buf,
                 "unknown command %s for \"etcd grpc-proxy start\"",
                 go_quote(pos, quote_buf, sizeof quote_buf));
        rc = usage_error(&fs, msg_buf);
    } else if (rc == 0) {
        rc = check_args(vals);
        if (rc == 0)
            rc = refuse_unbuilt(vals);
        if (rc == 0)
            rc = run(vals);
    }
    flags_free(&fs);
    mem_free(args);
    return rc;
}
