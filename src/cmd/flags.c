/*
 * flags.c - the flag table and the parser (Go flag package syntax, as etcd
 * uses it: -flag, --flag, -flag=value, --flag value; booleans take no
 * separate value).
 */
#include "cmd/flags.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/config.h"
#include "server/server.h"
#include "util/check.h"
#include "util/log.h"
#include "util/mem.h"

#define CETCD_ETCD_VERSION SERVER_REPORTED_VERSION_DEFAULT

enum ftype { F_STR, F_BOOL, F_UINT, F_U32, F_INT, F_DUR, F_SEMVER, F_ORIGINS };

/* Whether cetcd has built what the flag controls. */
enum fstate {
    BUILT,    /* honoured */
    NOT_YET,  /* refused unless left at its default */
    OFF_ONLY, /* a boolean whose feature is not built: false (nothing
               * served, which cetcd does) is accepted, true given on the
               * command line or through ETCD_* is refused; the default is
               * left as it is (--enable-grpc-gateway was one until its
               * gateway was built, api/gateway.c) */
};

struct flag {
    const char *name;    /* without dashes */
    enum ftype type;     /* value syntax */
    const char *def;     /* default, as etcd prints it */
    enum fstate state;   /* built or not */
    const char *group;   /* help section */
    const char *help;    /* one-line help */
    const char *value;   /* final value (points into argv/env or def) */
    bool set;            /* given on the command line */
    bool env;            /* given through ETCD_* */
    bool file;           /* given in the --config-file file */
};

static struct flag table[] = {
    {"name", F_STR, "default", BUILT, "Member", "Human-readable name for this member."},
    {"data-dir", F_STR, "${name}.cetcd", BUILT, "Member", "Path to the data directory."},
    {"wal-dir", F_STR, "", BUILT, "Member", "Path to the dedicated wal directory."},
    {"snapshot-count", F_UINT, "100000", BUILT, "Member", "Number of committed transactions to trigger a snapshot to disk."},
    {"heartbeat-interval", F_UINT, "100", BUILT, "Member", "Time (in milliseconds) of a heartbeat interval."},
    {"election-timeout", F_UINT, "1000", BUILT, "Member", "Time (in milliseconds) for an election to timeout."},
    {"initial-election-tick-advance", F_BOOL, "true", BUILT, "Member", "Whether to fast-forward initial election ticks on boot for faster election."},
    {"listen-peer-urls", F_STR, "http://localhost:2380", BUILT, "Member", "List of URLs to listen on for peer traffic."},
    {"listen-client-urls", F_STR, "http://localhost:2379", BUILT, "Member", "List of URLs to listen on for client traffic."},
    {"listen-client-http-urls", F_STR, "", BUILT, "Member", "List of URLs to listen on for http only client traffic. Enabling this flag removes http services from --listen-client-urls."},
    {"max-snapshots", F_UINT, "5", BUILT, "Member", "Maximum number of snapshot files to retain (0 is unlimited)."},
    {"max-wals", F_UINT, "5", BUILT, "Member", "Maximum number of wal files to retain (0 is unlimited)."},
    {"quota-backend-bytes", F_INT, "0", BUILT, "Member", "Raise alarms when backend size exceeds the given quota (0 defaults to low space quota)."},
    {"backend-batch-interval", F_STR, "", NOT_YET, "Member", "BackendBatchInterval is the maximum time before commit the backend transaction."},
    {"backend-batch-limit", F_UINT, "0", NOT_YET, "Member", "BackendBatchLimit is the maximum operations before commit the backend transaction."},
    {"max-txn-ops", F_UINT, "128", BUILT, "Member", "Maximum number of operations permitted in a transaction."},
    {"max-request-bytes", F_UINT, "1572864", BUILT, "Member", "Maximum client request size in bytes the server will accept."},
    {"max-concurrent-streams", F_U32, "math.MaxUint32", BUILT, "Member", "Maximum concurrent streams that each client can open at a time."},
    {"grpc-keepalive-min-time", F_DUR, "5s", BUILT, "Member", "Minimum duration interval that a client should wait before pinging server."},
    {"grpc-keepalive-interval", F_DUR, "2h", BUILT, "Member", "Frequency duration of server-to-client ping to check if a connection is alive (0 to disable)."},
    {"grpc-keepalive-timeout", F_DUR, "20s", BUILT, "Member", "Additional duration of wait before closing a non-responsive connection (0 to disable)."},
    {"initial-advertise-peer-urls", F_STR, "http://localhost:2380", BUILT, "Clustering", "List of this member's peer URLs to advertise to the rest of the cluster."},
    {"initial-cluster", F_STR, "default=http://localhost:2380", BUILT, "Clustering", "Initial cluster configuration for bootstrapping."},
    {"initial-cluster-state", F_STR, "new", BUILT, "Clustering", "Initial cluster state ('new' or 'existing')."},
    {"initial-cluster-token", F_STR, "etcd-cluster", BUILT, "Clustering", "Initial cluster token for the etcd cluster during bootstrap."},
    {"advertise-client-urls", F_STR, "http://localhost:2379", BUILT, "Clustering", "List of this member's client URLs to advertise to the public."},
    {"discovery", F_STR, "", NOT_YET, "Clustering", "Discovery URL used to bootstrap the cluster."},
    {"discovery-fallback", F_STR, "proxy", NOT_YET, "Clustering", "Expected behavior ('exit' or 'proxy') when discovery services fails."},
    {"discovery-proxy", F_STR, "", NOT_YET, "Clustering", "HTTP proxy to use for traffic to discovery service."},
    {"discovery-srv", F_STR, "", BUILT, "Clustering", "DNS srv domain used to bootstrap the cluster."},
    {"discovery-srv-name", F_STR, "", BUILT, "Clustering", "Suffix to the dns srv name queried when bootstrapping."},
    {"strict-reconfig-check", F_BOOL, "true", BUILT, "Clustering", "Reject reconfiguration requests that would cause quorum loss."},
    {"pre-vote", F_BOOL, "false", BUILT, "Clustering", "Enable to run an additional Raft election phase."},
    {"auto-compaction-retention", F_STR, "0", BUILT, "Clustering", "Auto compaction retention length. 0 means disable auto compaction."},
    {"auto-compaction-mode", F_STR, "periodic", BUILT, "Clustering", "Interpret 'auto-compaction-retention' one of: periodic|revision."},
    {"enable-v2", F_BOOL, "false", NOT_YET, "Clustering", "Accept etcd V2 client requests."},
    {"cert-file", F_STR, "", BUILT, "Security", "Path to the client server TLS cert file."},
    {"key-file", F_STR, "", BUILT, "Security", "Path to the client server TLS key file."},
    {"client-cert-auth", F_BOOL, "false", BUILT, "Security", "Enable client cert authentication."},
    {"client-crl-file", F_STR, "", BUILT, "Security", "Path to the client certificate revocation list file."},
    {"client-cert-allowed-hostname", F_STR, "", BUILT, "Security", "Allowed TLS hostname for client cert authentication."},
    {"trusted-ca-file", F_STR, "", BUILT, "Security", "Path to the client server TLS trusted CA cert file."},
    {"auto-tls", F_BOOL, "false", BUILT, "Security", "Client TLS using generated certificates."},
    {"peer-cert-file", F_STR, "", BUILT, "Security", "Path to the peer server TLS cert file."},
    {"peer-key-file", F_STR, "", BUILT, "Security", "Path to the peer server TLS key file."},
    {"peer-client-cert-auth", F_BOOL, "false", BUILT, "Security", "Enable peer client cert authentication."},
    {"peer-trusted-ca-file", F_STR, "", BUILT, "Security", "Path to the peer server TLS trusted CA file."},
    {"peer-cert-allowed-cn", F_STR, "", BUILT, "Security", "Required CN for client certs connecting to the peer endpoint."},
    {"peer-cert-allowed-hostname", F_STR, "", BUILT, "Security", "Allowed TLS hostname for inter peer authentication."},
    {"peer-auto-tls", F_BOOL, "false", BUILT, "Security", "Peer TLS using self-generated certificates if --peer-key-file and --peer-cert-file are not provided."},
    {"peer-crl-file", F_STR, "", BUILT, "Security", "Path to the peer certificate revocation list file."},
    {"cipher-suites", F_STR, "", BUILT, "Security", "Comma-separated list of supported TLS cipher suites between client/server and peers (empty will be auto-populated by Go)."},
    /* etcd 3.5's flags (not in 3.4). */
    {"tls-min-version", F_STR, "TLS1.2", BUILT, "Security", "Minimum TLS version supported by etcd. Possible values: TLS1.2, TLS1.3."},
    {"tls-max-version", F_STR, "", BUILT, "Security", "Maximum TLS version supported by etcd. Possible values: TLS1.2, TLS1.3 (empty defers to Go)."},
    {"cors", F_ORIGINS, "*", BUILT, "Security", "Comma-separated whitelist of origins for CORS (empty or * means allow all)."},
    {"host-whitelist", F_STR, "*", BUILT, "Security", "Acceptable hostnames from HTTP client requests, if server is not secure (empty or * means allow all)."},
    {"auth-token", F_STR, "simple", BUILT, "Auth", "Specify a v3 authentication token type and its options ('simple' or 'jwt')."},
    {"bcrypt-cost", F_UINT, "10", BUILT, "Auth", "Specify the cost / strength of the bcrypt algorithm for hashing auth passwords. Valid values are between 4 and 31."},
    {"auth-token-ttl", F_UINT, "300", BUILT, "Auth", "Time (in seconds) of the auth-token-ttl."},
    {"enable-pprof", F_BOOL, "false", NOT_YET, "Profiling and Monitoring", "Enable runtime profiling data via HTTP server."},
    {"metrics", F_STR, "basic", BUILT, "Profiling and Monitoring", "Set level of detail for exported metrics, specify 'extensive' to include histogram metrics."},
    {"listen-metrics-urls", F_STR, "", BUILT, "Profiling and Monitoring", "List of URLs to listen on for the metrics and health endpoints."},
    {"logger", F_STR, "capnslog", BUILT, "Logging", "Specify 'zap' for structured logging or 'capnslog'."},
    {"log-outputs", F_STR, "default", BUILT, "Logging", "Specify 'stdout' or 'stderr' to skip journald logging even when running under systemd."},
    {"log-level", F_STR, "info", BUILT, "Logging", "Configures log level. Only supports debug, info, warn, error, panic, or fatal."},
    {"debug", F_BOOL, "false", BUILT, "Logging", "Enable debug-level logging for etcd. Use '--log-level=debug' instead."},
    {"log-package-levels", F_STR, "", NOT_YET, "Logging", "Specify a particular log level for each etcd package."},
    {"proxy", F_STR, "off", NOT_YET, "v2 Proxy", "Proxy mode setting ('off', 'readonly' or 'on')."},
    {"proxy-failure-wait", F_UINT, "5000", NOT_YET, "v2 Proxy", "Time (in milliseconds) an endpoint will be held in a failed state."},
    {"proxy-refresh-interval", F_UINT, "30000", NOT_YET, "v2 Proxy", "Time (in milliseconds) of the endpoints refresh interval."},
    {"proxy-dial-timeout", F_UINT, "1000", NOT_YET, "v2 Proxy", "Time (in milliseconds) for a dial to timeout."},
    {"proxy-write-timeout", F_UINT, "5000", NOT_YET, "v2 Proxy", "Time (in milliseconds) for a write to timeout."},
    {"proxy-read-timeout", F_UINT, "0", NOT_YET, "v2 Proxy", "Time (in milliseconds) for a read to timeout."},
    /* On by default in cetcd (etcd: off): docs/BENCHMARKS.md "Corruption
     * checks" measured their cost; cmd/corrupt.h. */
    {"experimental-initial-corrupt-check", F_BOOL, "true", BUILT, "Experimental feature", "Enable to check data corruption before serving any client/peer traffic."},
    {"experimental-corrupt-check-time", F_DUR, "5m0s", BUILT, "Experimental feature", "Duration of time between cluster corruption check passes."},
    /* etcd 3.5's (3.4.23 has neither): cmd/corrupt.h. */
    {"experimental-compact-hash-check-enabled", F_BOOL, "true", BUILT, "Experimental feature", "Enable leader to periodically check followers compaction hashes."},
    {"experimental-compact-hash-check-time", F_DUR, "1m0s", BUILT, "Experimental feature", "Duration of time between leader checks followers compaction hashes."},
    {"experimental-enable-v2v3", F_STR, "", NOT_YET, "Experimental feature", "Serve v2 requests through the v3 backend under a given prefix."},
    {"experimental-backend-bbolt-freelist-type", F_STR, "array", BUILT, "Experimental feature", "Accepted for compatibility; cetcd's backend is LMDB."},
    /* cetcd always checkpoints (and persists) remaining TTLs: the bound of
     * docs/ARCHITECTURE.md "Leases" needs it; either value is accepted. */
    {"experimental-enable-lease-checkpoint", F_BOOL, "false", BUILT, "Experimental feature", "ExperimentalEnableLeaseCheckpoint enables primary lessor to persist lease remainingTTL to prevent indefinite auto-renewal of long lived leases."},
    /* Not an etcd 3.4 flag (3.5 has it): how often the leader checkpoints. */
    {"experimental-lease-checkpoint-interval", F_DUR, "5m", BUILT, "Experimental feature", "Duration of periodic lease checkpoints (cetcd: always on)."},
    {"experimental-compaction-batch-limit", F_UINT, "1000", BUILT, "Experimental feature", "Sets the maximum revisions deleted in each compaction batch."},
    {"experimental-peer-skip-client-san-verification", F_BOOL, "false", BUILT, "Experimental feature", "Skip verification of SAN field in client certificate for peer connections."},
    {"experimental-watch-progress-notify-interval", F_DUR, "10m", BUILT, "Experimental feature", "Duration of periodical watch progress notification."},
    {"experimental-warning-apply-duration", F_DUR, "100ms", BUILT, "Experimental feature", "Warning is generated if requests take more than this duration."},
    {"experimental-reported-version", F_SEMVER, SERVER_REPORTED_VERSION_DEFAULT, BUILT, "Experimental feature", "The etcd version this member reports (Status, the startup log; cetcd only): major.minor.patch."},
    {"unsafe-no-fsync", F_BOOL, "false", BUILT, "Unsafe feature", "Disables fsync, unsafe, will cause data loss."},
    {"force-new-cluster", F_BOOL, "false", BUILT, "Unsafe feature", "Force to create a new one-member cluster."},
    /* The /v3 JSON gateway is not built yet (a later issue).  etcd's e2e
     * suite never gives this flag, so =false (serve no gateway: what
     * cetcd does) is accepted and an explicit =true is refused.  The
     * default stays etcd's "true" in the help, though nothing is served
     * at /v3 until the gateway is built. */
    {"enable-grpc-gateway", F_BOOL, "true", BUILT, "Member", "Enable GRPC gateway."},
    {"config-file", F_STR, "", BUILT, "Member", "Path to the server configuration file."},
};

#define NFLAGS (sizeof table / sizeof table[0])

static struct flag *find(const char *name, size_t len)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (strlen(table[i].name) == len &&
            strncmp(table[i].name, name, len) == 0)
            return &table[i];
    return NULL;
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *t[] = {"1", "t", "T", "true", "TRUE", "True"};
    static const char *f[] = {"0", "f", "F", "false", "FALSE", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(s, t[i]) == 0)
            return *out = true, true;
        if (strcmp(s, f[i]) == 0)
            return *out = false, true;
    }
    return false;
}

static bool parse_uint(const char *s, uint64_t *out)
{
    if (*s == '\0' || *s == '-' || *s == '+')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* Go's int64 flags (strconv.ParseInt base 0): a sign, then as parse_uint. */
static bool parse_int(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    uint64_t u;
    if (*s == '-' || *s == '+')
        s++;
    if (!parse_uint(s, &u) || u > (uint64_t)INT64_MAX + neg)
        return false;
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    return true;
}

/* unit_ns reads a Go duration unit at s: its length in bytes, its size in
 * *ns_out; 0 for none.  Longest first: "ms" before "m", "ns" before "s". */
static size_t unit_ns(const char *s, uint64_t *ns_out)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {{"ns", 1},          {"us", 1000},
                 {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
                 {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
                 {"ms", 1000000},    {"s", 1000000000},
                 {"m", 60000000000}, {"h", 3600000000000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].name);
        if (strncmp(s, units[i].name, n) == 0) {
            *ns_out = units[i].ns;
            return n;
        }
    }
    return 0;
}

/* The error Go's time.ParseDuration gives for s (which it refused). */
void flags_duration_error(const char *s, char *buf, size_t cap)
{
    const char *p = s + (*s == '-' || *s == '+');
    while (*p != '\0') {
        const char *num = p;
        while (isdigit((unsigned char)*p) || *p == '.')
            p++;
        if (p == num)
            break; /* no number: invalid */
        const char *u = p;
        while (*p != '\0' && *p != '.' && !isdigit((unsigned char)*p))
            p++;
        uint64_t ns;
        if (p == u) {
            snprintf(buf, cap, "time: missing unit in duration \"%s\"", s);
            return;
        }
        if (unit_ns(u, &ns) != (size_t)(p - u)) {
            snprintf(buf, cap, "time: unknown unit \"%.*s\" in duration "
                     "\"%s\"", (int)(p - u), u, s);
            return;
        }
    }
    snprintf(buf, cap, "time: invalid duration \"%s\"", s);
}

/* Go's time.ParseDuration: [-+] then one or more <digits[.digits]><unit>
 * ("1h30m", "1.5s", "100ms"; "0" alone needs no unit), at most int64
 * nanoseconds.  Fraction digits past the 18th are dropped, as Go's are. */
static bool parse_dur(const char *s, int64_t *ns_out);

bool flags_parse_duration(const char *s, int64_t *ns_out)
{
    return parse_dur(s, ns_out);
}

static bool parse_dur(const char *s, int64_t *ns_out)
{
    bool neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (strcmp(s, "0") == 0 || *s == '\0')
        return *ns_out = 0, strcmp(s, "0") == 0;
    unsigned __int128 total = 0;
    while (*s) {
        uint64_t whole = 0, frac = 0, scale = 1, unit;
        bool digits = false;
        for (; isdigit((unsigned char)*s); s++, digits = true)
            if ((whole = whole * 10 + (uint64_t)(*s - '0')) > INT64_MAX / 10)
                return false;
        if (*s == '.')
            for (s++; isdigit((unsigned char)*s); s++, digits = true)
                if (scale < 1000000000000000000ull)
                    frac = frac * 10 + (uint64_t)(*s - '0'), scale *= 10;
        size_t n = unit_ns(s, &unit);
        if (!digits || n == 0)
            return false;
        s += n;
        total += (unsigned __int128)whole * unit +
                 (unsigned __int128)frac * unit / scale;
        if (total > (unsigned __int128)INT64_MAX)
            return false;
    }
    *ns_out = neg ? -(int64_t)total : (int64_t)total;
    return true;
}

/* parse_semver: "major.minor.patch", each 1 to 9 digits (a version
 * clients compare, as Kubernetes does with Status.version). */
static bool parse_semver(const char *v)
{
    for (int part = 0; part < 3; part++) {
        size_t n = strspn(v, "0123456789");
        if (n == 0 || n > 9)
            return false;
        v += n;
        if (part < 2 && *v++ != '.')
            return false;
    }
    return *v == '\0';
}

/* origins_why: why v is not a --cors value as etcd's flag (the list "*",
 * or comma-separated URLs: http/https/unix/unixs, "host:port", no path)
 * takes it; NULL when it is one.  The reason names the bad item (why,
 * cap bytes). */
static const char *origins_why(const char *v, char *why, size_t cap)
{
    if (strcmp(v, "*") == 0)
        return NULL;
    for (const char *item = v;;) {
        const char *end = strchr(item, ',');
        size_t n = end != NULL ? (size_t)(end - item) : strlen(item);
        while (n > 0 && isspace((unsigned char)*item)) /* Go's TrimSpace */
            item++, n--;
        while (n > 0 && isspace((unsigned char)item[n - 1]))
            n--;
        const char *sep = n > 3 ? strstr(item, "://") : NULL;
        size_t sn = sep != NULL && sep < item + n ? (size_t)(sep - item) : 0;
        bool scheme = (sn == 4 && memcmp(item, "http", 4) == 0) ||
                      (sn == 5 && memcmp(item, "https", 5) == 0) ||
                      (sn == 4 && memcmp(item, "unix", 4) == 0) ||
                      (sn == 5 && memcmp(item, "unixs", 5) == 0);
        if (!scheme) {
            snprintf(why, cap, "URL scheme must be http, https, unix, or "
                     "unixs: %.*s", (int)n, item);
            return why;
        }
        const char *host = item + sn + 3, *stop = item + n;
        const char *slash = memchr(host, '/', (size_t)(stop - host));
        const char *hend = slash != NULL ? slash : stop;
        const char *colon = NULL;
        for (const char *p = host; p < hend; p++)
            if (*p == ':')
                colon = p;
        bool bracket = host < hend && *host == '[';
        bool port_ok = colon != NULL &&
                       (bracket ? colon > host && colon[-1] == ']'
                                : memchr(host, ':', (size_t)(colon - host)) ==
                                      NULL);
        if (!port_ok) {
            snprintf(why, cap, "URL address does not have the form "
                     "\"host:port\": %.*s", (int)n, item);
            return why;
        }
        if (slash != NULL) {
            snprintf(why, cap, "URL must not contain a path: %.*s", (int)n,
                     item);
            return why;
        }
        if (end == NULL)
            return NULL;
        item = end + 1;
    }
}

static bool value_ok(const struct flag *f, const char *v)
{
    bool b;
    uint64_t u;
    int64_t i;
    switch (f->type) {
    case F_BOOL:
        return parse_bool(v, &b);
    case F_UINT:
        return parse_uint(v, &u);
    case F_U32:
        return parse_uint(v, &u) && u <= UINT32_MAX;
    case F_INT:
        return parse_int(v, &i);
    case F_DUR:
        return parse_dur(v, &i);
    case F_STR:
        return true;
    case F_SEMVER:
        return parse_semver(v);
    case F_ORIGINS: {
        char why[256];
        return origins_why(v, why, sizeof why) == NULL;
    }
    }
    return false;
}

static int bad_value(const struct flag *f, const char *v)
{
    char why[256];
    const char *reason = f->type == F_ORIGINS
                             ? origins_why(v, why, sizeof why)
                             : "parse error";
    fprintf(stderr, "invalid value \"%s\" for flag -%s: %s\n", v, f->name,
            reason != NULL ? reason : "parse error");
    flags_print_help();
    return 2;
}

/* One argv element; *i advances past a separate value if used. */
static int parse_one(int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *name = a + (a[1] == '-' ? 2 : 1);
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    struct flag *f = find(name, len);
    if (f == NULL) {
        fprintf(stderr, "flag provided but not defined: -%.*s\n", (int)len,
                name);
        flags_print_help();
        return 2;
    }
    const char *v;
    if (eq != NULL) {
        v = eq + 1;
    } else if (f->type == F_BOOL) {
        v = "true";
    } else if (*i + 1 < argc) {
        v = argv[++*i];
    } else {
        fprintf(stderr, "flag needs an argument: -%s\n", f->name);
        flags_print_help();
        return 2;
    }
    if (!value_ok(f, v))
        return bad_value(f, v);
    f->value = v;
    f->set = true;
    return 0;
}

/* ETCD_<UPPER_SNAKE> for each flag not given on the command line. */
static int apply_env(void)
{
    for (size_t i = 0; i < NFLAGS; i++) {
        struct flag *f = &table[i];
        char env[128] = "ETCD_";
        size_t n = 5;
        for (const char *p = f->name; *p && n < sizeof env - 1; p++)
            env[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[n] = '\0';
        const char *v = getenv(env);
        if (v == NULL)
            continue;
        if (f->set) {
            log_msg(LOG_FATAL, "pkg/flags",
                    "conflicting environment variable \"%s\" is shadowed by "
                    "corresponding command-line flag (either unset "
                    "environment variable or disable flag)",
                    env);
            continue;
        }
        if (!value_ok(f, v)) {
            fprintf(stderr, "invalid value \"%s\" for %s: parse error\n", v,
                    env);
            return 2;
        }
        f->value = v;
        f->env = true;
    }
    return 0;
}

/* at_default: the flag's value means its default (a config file writes
 * durations in nanoseconds, "5000000000ns" for "5s"; a zero duration is
 * etcd's "unset" for a flag whose default is empty). */
static bool at_default(const struct flag *f)
{
    int64_t a, b;
    if (strcmp(f->value, f->def) == 0)
        return true;
    if (!parse_dur(f->value, &a))
        return false;
    if (f->def[0] == '\0')
        return a == 0;
    return parse_dur(f->def, &b) && a == b;
}

/* A flag whose feature is not built may only carry its default; an
 * OFF_ONLY one only false. */
static int refuse_unbuilt(void)
{
    for (size_t i = 0; i < NFLAGS; i++) {
        struct flag *f = &table[i];
        bool on = false;
        if (f->state == BUILT || (!f->set && !f->env && !f->file))
            continue;
        if (f->state == OFF_ONLY && (!parse_bool(f->value, &on) || !on))
            continue;
        if (f->state == NOT_YET && at_default(f))
            continue;
        if (f->file)
            fprintf(stderr,
                    "cetcd: %s in the configuration file is not supported "
                    "yet: the feature behind it is not built in this "
                    "version of cetcd (--%s=%s)\n",
                    f->name, f->name, f->value);
        else if (f->state == OFF_ONLY)
            fprintf(stderr,
                    "cetcd: --%s=true is not supported yet: the feature "
                    "behind it is not built in this version of cetcd "
                    "(--%s=false is accepted)\n",
                    f->name, f->name);
        else
            fprintf(stderr,
                    "cetcd: --%s is not supported yet: the feature behind "
                    "it is not built in this version of cetcd\n",
                    f->name);
        return 1;
    }
    return 0;
}

/* The values read from the config file, owned here for the process's
 * life (flag values point into them). */
static char *file_values[NFLAGS];

/* from_file: config_set_fn that sets a flag as the file's key says. */
static int from_file(void *ctx, const char *key, const char *flag,
                     const char *value, char *err, size_t cap)
{
    (void)ctx;
    struct flag *f = find(flag, strlen(flag));
    CHECK(f != NULL); /* config.c maps keys to flags of this table */
    if (!value_ok(f, value)) {
        snprintf(err, cap, "invalid value \"%s\" for configuration key "
                 "%s: parse error", value, key);
        return 1;
    }
    size_t i = (size_t)(f - table);
    char *copy = mem_dup(value, strlen(value) + 1);
    if (copy == NULL) {
        snprintf(err, cap, "out of memory");
        return 1;
    }
    mem_free(file_values[i]);
    file_values[i] = copy;
    f->value = copy;
    f->file = true;
    return 0;
}

static void file_warn(void *ctx, const char *msg)
{
    (void)ctx;
    log_msg(LOG_WARN, "etcdmain", "%s", msg);
}

/* use_config_file: --config-file, else ETCD_CONFIG_FILE (etcd reads that
 * one variable even though a file makes it ignore the others). */
static bool use_config_file(void)
{
    struct flag *f = find("config-file", strlen("config-file"));
    if (!f->set) {
        const char *e = getenv("ETCD_CONFIG_FILE");
        if (e != NULL)
            f->value = e, f->env = true;
    }
    return f->value[0] != '\0';
}

/* load_config_file: as etcd, every other flag and ETCD_* variable is
 * ignored (their values were checked, as Go's flag package checks them,
 * then dropped) and the file sets the options. */
static int load_config_file(void)
{
    const char *path = flags_get("config-file");
    for (size_t i = 0; i < NFLAGS; i++) {
        if (strcmp(table[i].name, "config-file") == 0)
            continue;
        table[i].value = table[i].def;
        table[i].set = false;
    }
    log_msg(LOG_INFO, "etcdmain", "Loading server configuration from "
            "\"%s\". Other configuration command line flags and environment "
            "variables will be ignored if provided.", path);
    char err[1024];
    if (config_load(path, from_file, file_warn, NULL, err, sizeof err) != 0) {
        log_msg(LOG_ERROR, "etcdmain", "error verifying flags, %s. See "
                "'etcd --help'.", err);
        return 1;
    }
    return 0;
}

enum flags_action flags_parse(int argc, char **argv, int *exit_code_out)
{
    *exit_code_out = 0;
    for (size_t i = 0; i < NFLAGS; i++)
        table[i].value = table[i].def;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ||
            strcmp(a, "-help") == 0)
            return FLAGS_HELP;
        if (strcmp(a, "--version") == 0 || strcmp(a, "-version") == 0)
            return FLAGS_VERSION;
        if (a[0] != '-' || a[1] == '\0') {
            fprintf(stderr, "'%s' is not a valid flag\n", a);
            *exit_code_out = 1;
            return FLAGS_ERROR;
        }
        int rc = parse_one(argc, argv, &i);
        if (rc != 0) {
            *exit_code_out = rc;
            return FLAGS_ERROR;
        }
    }
    int rc = use_config_file() ? load_config_file() : apply_env();
    if (rc == 0)
        rc = refuse_unbuilt();
    if (rc != 0) {
        *exit_code_out = rc;
        return FLAGS_ERROR;
    }
    return FLAGS_RUN;
}

const char *flags_get(const char *name)
{
    struct flag *f = find(name, strlen(name));
    return f ? f->value : NULL;
}

bool flags_get_bool(const char *name)
{
    bool b = false;
    const char *v = flags_get(name);
    if (v != NULL)
        parse_bool(v, &b);
    return b;
}

uint64_t flags_get_u64(const char *name)
{
    uint64_t u = 0;
    const char *v = flags_get(name);
    if (v != NULL)
        parse_uint(v, &u);
    return u;
}

int64_t flags_get_dur_ns(const char *name)
{
    int64_t ns = 0;
    const char *v = flags_get(name);
    if (v != NULL)
        parse_dur(v, &ns);
    return ns;
}

int64_t flags_get_i64(const char *name)
{
    int64_t i = 0;
    const char *v = flags_get(name);
    if (v != NULL)
        parse_int(v, &i);
    return i;
}

bool flags_was_set(const char *name)
{
    struct flag *f = find(name, strlen(name));
    return f != NULL && (f->set || f->env || f->file);
}

void flags_print_help(void)
{
    printf("Usage:\n\n  etcd [flags]\n    Start an etcd server.\n\n"
           "  etcd --version\n    Show the version of etcd.\n\n"
           "  etcd -h | --help\n    Show the help information about etcd.\n\n"
           "  etcd --config-file\n    Path to the server configuration file."
           " Note that if a configuration file is provided, other command "
           "line flags and environment variables will be ignored.\n");
    const char *group = "";
    for (size_t i = 0; i < NFLAGS; i++) {
        const struct flag *f = &table[i];
        if (strcmp(f->name, "config-file") == 0)
            continue;
        if (strcmp(group, f->group) != 0) {
            group = f->group;
            printf("\n%s:\n", group);
        }
        if (f->type == F_UINT && (strcmp(f->group, "Auth") == 0 ||
                                  strcmp(f->group, "v2 Proxy") == 0))
            printf("  --%s %s\n", f->name, f->def);
        else
            printf("  --%s '%s'\n", f->name, f->def);
        printf("    %s%s\n", f->help,
               f->state == NOT_YET    ? " [not built in cetcd yet]"
               : f->state == OFF_ONLY ? " [=true not built in cetcd yet]"
                                      : "");
    }
}

void flags_print_version(void)
{
    printf("etcd Version: %s\n", CETCD_ETCD_VERSION);
    printf("Git SHA: %s\n", CETCD_GIT_SHA);
    printf("Go Version: none (cetcd is written in C)\n");
    printf("Go OS/Arch: linux/amd64\n");
}
