/*
 * grpc_proxy_flags.c - the command line of `cetcd grpc-proxy`
 * (grpc_proxy.h) as etcd 3.4.23's cobra and pflag read it: the start
 * command's flag table with its defaults and help texts, cobra's search
 * for the subcommand, pflag's parsing (long flags, -h, "--", interspersed
 * arguments, stringSlice's csv values) with its messages, the usage
 * texts, then etcd's checkArgs and the refusal of the flags whose feature
 * cetcd has not built.  See grpc_proxy_int.h.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/grpc_proxy_int.h"
#include "util/mem.h"

/* The kinds of pflag value: string, bool, stringSlice, int, uint32. */
enum flag_type { T_STR, T_BOOL, T_LIST, T_INT, T_U32 };

/* One pflag flag. */
struct flag_def {
    const char *name;  /* without dashes */
    enum flag_type type;
    const char *def;   /* default as pflag shows it, "" for none */
    const char *usage; /* help text */
};

/* The start command's flags (grpc_proxy_int.h has their order). */
static const struct flag_def start_defs[GRPC_PROXY_F_N] = {
    [GRPC_PROXY_F_ADVERTISE] =
        {"advertise-client-url", T_STR, "127.0.0.1:23790",
         "advertise address to register (must be reachable by client)"},
    [GRPC_PROXY_F_AUTO_TLS] =
        {"auto-tls", T_BOOL, "", "proxy TLS using generated certificates"},
    [GRPC_PROXY_F_CACERT] =
        {"cacert", T_STR, "",
         "verify certificates of TLS-enabled secure etcd servers using this "
         "CA bundle"},
    [GRPC_PROXY_F_CERT] =
        {"cert", T_STR, "",
         "identify secure connections with etcd servers using this TLS "
         "certificate file"},
    [GRPC_PROXY_F_CERT_FILE] =
        {"cert-file", T_STR, "",
         "identify secure connections to the proxy using this TLS "
         "certificate file"},
    [GRPC_PROXY_F_CRL] =
        {"client-crl-file", T_STR, "",
         "proxy client certificate revocation list file."},
    [GRPC_PROXY_F_DATA_DIR] =
        {"data-dir", T_STR, "default.proxy",
         "Data directory for persistent data"},
    [GRPC_PROXY_F_DEBUG] =
        {"debug", T_BOOL, "", "Enable debug-level logging for grpc-proxy."},
    [GRPC_PROXY_F_SRV] =
        {"discovery-srv", T_STR, "",
         "domain name to query for SRV records describing cluster endpoints"},
    [GRPC_PROXY_F_SRV_NAME] =
        {"discovery-srv-name", T_STR, "",
         "service name to query when using DNS discovery"},
    [GRPC_PROXY_F_PPROF] =
        {"enable-pprof", T_BOOL, "",
         "Enable runtime profiling data via HTTP server. Address is at "
         "client URL + \"/debug/pprof/\""},
    [GRPC_PROXY_F_ENDPOINTS] =
        {"endpoints", T_LIST, "127.0.0.1:2379",
         "comma separated etcd cluster endpoints"},
    [GRPC_PROXY_F_LEASING] =
        {"experimental-leasing-prefix", T_STR, "",
         "leasing metadata prefix for disconnected linearized reads."},
    [GRPC_PROXY_F_ORDERING] =
        {"experimental-serializable-ordering", T_BOOL, "",
         "Ensure serializable reads have monotonically increasing store "
         "revisions across endpoints."},
    [GRPC_PROXY_F_HELP] =
        {"help", T_BOOL, "", "help for start"},
    [GRPC_PROXY_F_INSECURE_DISC] =
        {"insecure-discovery", T_BOOL, "", "accept insecure SRV records"},
    [GRPC_PROXY_F_SKIP_VERIFY] =
        {"insecure-skip-tls-verify", T_BOOL, "",
         "skip authentication of etcd server TLS certificates (CAUTION: this "
         "option should be enabled only for testing purposes)"},
    [GRPC_PROXY_F_KEY] =
        {"key", T_STR, "",
         "identify secure connections with etcd servers using this TLS key "
         "file"},
    [GRPC_PROXY_F_KEY_FILE] =
        {"key-file", T_STR, "",
         "identify secure connections to the proxy using this TLS key file"},
    [GRPC_PROXY_F_LISTEN] =
        {"listen-addr", T_STR, "127.0.0.1:23790", "listen address"},
    [GRPC_PROXY_F_SUITES] =
        {"listen-cipher-suites", T_LIST, "",
         "Comma-separated list of supported TLS cipher suites between "
         "client/proxy (empty will be auto-populated by Go)."},
    [GRPC_PROXY_F_STREAMS] =
        {"max-concurrent-streams", T_U32, "4294967295",
         "Maximum concurrent streams that each client can open at a time."},
    [GRPC_PROXY_F_RECV] =
        {"max-recv-bytes", T_INT, "2147483647",
         "message receive limits in bytes (default value is math.MaxInt32)"},
    [GRPC_PROXY_F_SEND] =
        {"max-send-bytes", T_INT, "1572864",
         "message send limits in bytes (default value is 1.5 MiB)"},
    [GRPC_PROXY_F_METRICS] =
        {"metrics-addr", T_STR, "",
         "listen for endpoint /metrics requests on an additional interface"},
    [GRPC_PROXY_F_NS] =
        {"namespace", T_STR, "",
         "string to prefix to all keys for namespacing requests"},
    [GRPC_PROXY_F_PREFIX] =
        {"resolver-prefix", T_STR, "",
         "prefix to use for registering proxy (must be shared with other "
         "grpc-proxy members)"},
    [GRPC_PROXY_F_TTL] =
        {"resolver-ttl", T_INT, "",
         "specify TTL, in seconds, when registering proxy endpoints"},
    [GRPC_PROXY_F_CA_FILE] =
        {"trusted-ca-file", T_STR, "",
         "verify certificates of TLS-enabled secure proxy using this CA "
         "bundle"},
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

/* A command's flags: its table, their values and its usage text. */
struct flag_set {
    const struct flag_def *defs;
    size_t n;
    struct grpc_proxy_flag_value *vals;
    const char *usage; /* printed after "Error: ..." */
};

/* Scratch for messages (main thread only, before other threads exist). */
static char msg_buf[GRPC_PROXY_MSG_MAX], why_buf[GRPC_PROXY_MSG_MAX],
    quote_buf[GRPC_PROXY_MSG_MAX];

/* --- pflag -------------------------------------------------------------- */

/* cobra's failure of a command's flags: "Error: <msg>", its usage and a
 * blank line on stderr, then etcd's main prints the error once more. */
static int usage_error(const struct flag_set *fs, const char *msg)
{
    fprintf(stderr, "Error: %s\n%s\n%s", msg, fs->usage, msg);
    return 1;
}

/* Frees a list flag's values. */
static void list_clear(struct grpc_proxy_flag_value *fv)
{
    for (size_t i = 0; i < fv->n; i++)
        mem_free(fv->list[i]);
    fv->n = 0;
}

/* Appends one value to a list flag; false when it is full (printed). */
static bool list_add(struct grpc_proxy_flag_value *fv, const char *name,
                     const char *b, size_t len)
{
    if (fv->n == GRPC_PROXY_LIST_MAX) {
        fprintf(stderr, "cetcd: more than %d values for --%s\n",
                GRPC_PROXY_LIST_MAX, name);
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
/*
 * pflag's stringSlice: encoding/csv's first record of v (quoted fields,
 * "" inside quotes), appended to fv.  Returns 0; 1 after printing a full
 * list (or no memory); -1 with csv's error in why.
 */
static int csv_add(struct grpc_proxy_flag_value *fv, const char *name,
                   const char *v, char *why, size_t cap)
{
    const char *p = v;
    char *field = mem_malloc(strlen(v) + 1);
    int rc = 0;
    assert(fv != NULL && fv->n <= GRPC_PROXY_LIST_MAX);
    if (field == NULL) {
        fprintf(stderr, "cetcd: out of memory\n");
        return 1;
    }
    for (bool more = *v != '\0'; more && rc == 0;) {
        size_t n = 0;
        rc = grpc_proxy__csv_field(v, &p, field, &n, why, cap);
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
static void set_number(const struct flag_def *d,
                       struct grpc_proxy_flag_value *fv, const char *v,
                       char *why, size_t cap)
{
    uint64_t u = 0;
    int64_t i = 0;
    enum grpc_proxy_go_num r = d->type == T_INT
                                   ? grpc_proxy__go_parse_int(v, &i)
                                   : grpc_proxy__go_parse_uint(v, 32, &u);
    if (r == GRPC_PROXY_GO_OK) {
        fv->i = d->type == T_INT ? i : (int64_t)u;
        return;
    }
    snprintf(why, cap, "strconv.%s: parsing %s: %s",
             d->type == T_INT ? "ParseInt" : "ParseUint",
             grpc_proxy__go_quote(v, quote_buf, sizeof quote_buf),
             r == GRPC_PROXY_GO_RANGE ? "value out of range"
                                      : "invalid syntax");
}

/* pflag's Set of flag k to v: 0, or the exit code after printing. */
static int set_value(const struct flag_set *fs, size_t k, const char *v)
{
    assert(k < fs->n && v != NULL);
    const struct flag_def *d = &fs->defs[k];
    struct grpc_proxy_flag_value *fv = &fs->vals[k];
    why_buf[0] = '\0';
    if (d->type == T_STR) {
        fv->s = v;
    } else if (d->type == T_BOOL) {
        if (!grpc_proxy__go_parse_bool(v, &fv->b))
            snprintf(why_buf, sizeof why_buf,
                     "strconv.ParseBool: parsing %s: invalid syntax",
                     grpc_proxy__go_quote(v, quote_buf, sizeof quote_buf));
    } else if (d->type == T_LIST) {
        if (!fv->changed) /* the first use replaces the default */
            list_clear(fv);
        if (csv_add(fv, d->name, v, why_buf, sizeof why_buf) > 0)
            return 1;
    } else {
        set_number(d, fv, v, why_buf, sizeof why_buf);
    }
    if (why_buf[0] != '\0') {
        char q[GRPC_PROXY_MSG_MAX];
        int n = snprintf(msg_buf, sizeof msg_buf,
                         "invalid argument %s for \"%s%s\" flag: %s",
                         grpc_proxy__go_quote(v, q, sizeof q),
                         strcmp(d->name, "help") == 0 ? "-h, --" : "--",
                         d->name, why_buf);
        (void)n; /* a huge value's message is cut: fine */
        return usage_error(fs, msg_buf);
    }
    fv->changed = true;
    assert(d->type != T_LIST || fv->n <= GRPC_PROXY_LIST_MAX);
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

/* pflag's parseShortArg of "-abc": only -h exists (help, a bool). */
static int parse_short(const struct flag_set *fs, const char *s)
{
    size_t help = flag_find(fs, "help", 4);
    for (const char *sh = s + 1; *sh != '\0';) {
        if (strncmp(sh, "test.", 5) == 0) /* pflag skips go test's flags */
            return 0;
        if (*sh != 'h') {
            char c[16];
            grpc_proxy__go_quote_char((unsigned char)*sh, c, sizeof c);
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
        struct grpc_proxy_flag_value *fv = &fs->vals[k];
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
    static char buf[GRPC_PROXY_MSG_MAX];
    char left[128], q[256];
    int width = 0;
    if (buf[0] != '\0')
        return buf;
    for (size_t k = 0; k < GRPC_PROXY_F_N; k++) {
        int w = flag_left(&start_defs[k], left, sizeof left);
        width = w > width ? w : width;
    }
    size_t n = (size_t)snprintf(buf, sizeof buf, "Usage:\n  etcd grpc-proxy "
                                "start [flags]\n\nFlags:\n");
    for (size_t k = 0; k < GRPC_PROXY_F_N && n < sizeof buf; k++) {
        const struct flag_def *d = &start_defs[k];
        int w = flag_left(d, left, sizeof left);
        const char *def = d->def;
        if (d->type == T_STR && def[0] != '\0')
            def = grpc_proxy__go_quote(def, q, sizeof q);
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
static int check_args(const struct grpc_proxy_flag_value *v)
{
    const char *prefix = v[GRPC_PROXY_F_PREFIX].s;
    const char *adv = v[GRPC_PROXY_F_ADVERTISE].s;
    int64_t ttl = v[GRPC_PROXY_F_TTL].i;
    if (prefix[0] != '\0' && ttl < 1) {
        fprintf(stderr, "invalid resolver-ttl %lld\n", (long long)ttl);
        return 1;
    }
    if (prefix[0] == '\0' && ttl > 0) {
        fprintf(stderr, "invalid resolver-prefix %s\n",
                grpc_proxy__go_quote(prefix, quote_buf, sizeof quote_buf));
        return 1;
    }
    if (prefix[0] != '\0' && ttl > 0 && adv[0] == '\0') {
        fprintf(stderr, "invalid advertise-client-url %s\n",
                grpc_proxy__go_quote(adv, quote_buf, sizeof quote_buf));
        return 1;
    }
    return 0;
}

/* The flags whose feature cetcd has not built: refused, never ignored. */
static int refuse_unbuilt(const struct grpc_proxy_flag_value *v)
{
    const char *name =
        v[GRPC_PROXY_F_PPROF].b      ? "enable-pprof=true"
        : v[GRPC_PROXY_F_ORDERING].b ? "experimental-serializable-ordering=true"
        : v[GRPC_PROXY_F_LEASING].s[0] != '\0' ? "experimental-leasing-prefix"
                                                : NULL;
    if (name == NULL)
        return 0;
    fprintf(stderr, "cetcd: --%s is not supported yet: the feature behind "
            "it is not built in this version of cetcd\n", name);
    return 1;
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
    struct grpc_proxy_flag_value help;
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

/* `grpc-proxy start`: its flags before and after "start" (argv[sub]) into
 * vals, then its help, cobra's error for an argument, or etcd's checks;
 * *start_out is set when the proxy is to run. */
static int start_parse(int argc, char **argv, int sub,
                       struct grpc_proxy_flag_value *vals, bool *start_out)
{
    const struct flag_set fs = {start_defs, GRPC_PROXY_F_N, vals,
                                start_usage()};
    char **args = mem_calloc((size_t)argc, sizeof *args);
    if (args == NULL)
        return grpc_proxy__plain_error("cetcd: out of memory");
    const char *pos = NULL;
    int n = 0, n_pos = 0, rc = flags_init(&fs);
    for (int i = 2; i < argc && rc == 0; i++)
        if (i != sub) /* the flags before and after "start" */
            args[n++] = argv[i];
    if (rc == 0)
        rc = parse_flags(&fs, args, n, &pos, &n_pos);
    if (rc == 0 && vals[GRPC_PROXY_F_HELP].b) {
        printf("start the grpc proxy\n\n%s", fs.usage);
    } else if (rc == 0 && n_pos > 0) { /* etcd ignores them */
        snprintf(msg_buf, sizeof msg_buf,
                 "unknown command %s for \"etcd grpc-proxy start\"",
                 grpc_proxy__go_quote(pos, quote_buf, sizeof quote_buf));
        rc = usage_error(&fs, msg_buf);
    } else if (rc == 0) {
        rc = check_args(vals);
        if (rc == 0)
            rc = refuse_unbuilt(vals);
        *start_out = rc == 0;
    }
    mem_free(args);
    return rc;
}

int grpc_proxy__flags_parse(int argc, char **argv,
                            struct grpc_proxy_flag_value *vals,
                            bool *start_out)
{
    assert(argc >= 2 && vals != NULL);
    *start_out = false;
    int sub = find_subcommand(argc, argv);
    if (sub < 0 || strcmp(argv[sub], "start") != 0)
        return proxy_help(argc, argv);
    return start_parse(argc, argv, sub, vals, start_out);
}

void grpc_proxy__flags_free(struct grpc_proxy_flag_value *vals)
{
    for (size_t k = 0; k < GRPC_PROXY_F_N; k++)
        list_clear(&vals[k]);
}
