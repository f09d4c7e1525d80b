/*
 * cetcd.c - main() of the cetcd member daemon: flags and ETCD_* variables,
 * then the member (server) and its client API listeners, until SIGINT or
 * SIGTERM.  Prints etcd's start-up lines that tools wait for ("ready to
 * serve client requests", "published ...", "enabled capabilities ...").
 */
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "rpc/rpc.h"
#include "rpc/tls.h"
#include "cmd/auth_token.h"
#include "cmd/corrupt.h"
#include "cmd/discovery_srv.h"
#include "cmd/flags.h"
#include "cmd/gateway.h"
#include "cmd/grpc_proxy.h"
#include "cmd/etcd_dir.h"
#include "cmd/join.h"
#include "cmd/notify.h"
#include "dial/dial.h"
#include "server/server.h"
#include "util/err.h"
#include "util/log.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

/* The data dir default is "<name>.cetcd" (etcd: "<name>.etcd"). */
static const char *data_dir(char *buf, size_t cap)
{
    const char *d = flags_get("data-dir");
    if (strcmp(d, "${name}.cetcd") != 0)
        return d;
    snprintf(buf, cap, "%s.cetcd", flags_get("name"));
    return buf;
}

/* A new cluster is bootstrapped from --initial-cluster (the server finds
 * this member in it); joining an existing one (after MemberAdd) asks its
 * running members first (join.c). */
static void flag_error(const char *why);

static int check_cluster(void)
{
    const char *state = flags_get("initial-cluster-state");
    if (strcmp(state, "new") != 0 && strcmp(state, "existing") != 0) {
        fprintf(stderr, "cetcd: unexpected --initial-cluster-state \"%s\" "
                        "(new or existing)\n", state);
        return 1;
    }
    /* etcd's ErrConflictBootstrapFlags (--discovery is not built). */
    if (flags_get("discovery-srv")[0] != '\0' &&
        flags_was_set("initial-cluster")) {
        flag_error("multiple discovery or bootstrap flags are set. Choose "
                   "one of \"initial-cluster\", \"discovery\" or "
                   "\"discovery-srv\"");
        return 1;
    }
    return 0;
}

/* flag_error reports a bad flag as etcd's startEtcdOrProxyV2 does: its
 * capnslog line, or under zap a "failed to verify flags" warning. */
static void flag_error(const char *why)
{
    if (log_is_zap())
        log_zap(LOG_WARN, "failed to verify flags", LOG_STR("error", why));
    else
        log_error("etcdmain", "error verifying flags, %s. See 'etcd "
                  "--help'.", why);
}

/* The --log-outputs values as etcd's UniqueStringsValue holds them:
 * split at commas, duplicates dropped, sorted (Go's sort.Strings). */
struct log_outputs {
    char buf[4096];                  /* the values, NUL-separated */
    const char *v[LOG_OUTPUTS_MAX]; /* into buf */
    size_t n;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int outputs_parse(const char *list, struct log_outputs *o)
{
    snprintf(o->buf, sizeof o->buf, "%s", list);
    o->n = 0;
    for (char *save = NULL, *t = strtok_r(o->buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        bool dup = false;
        for (size_t i = 0; i < o->n; i++)
            dup = dup || strcmp(o->v[i], t) == 0;
        if (dup)
            continue;
        if (o->n == LOG_OUTPUTS_MAX)
            return -1;
        o->v[o->n++] = t;
    }
    qsort(o->v, o->n, sizeof o->v[0], cmp_str);
    return 0;
}

/* Go's %q of a []string: ["a" "b"]. */
static void quote_list(const struct log_outputs *o, char *buf, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < o->n && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s\"%s\"", i ? " " : "",
                              o->v[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* etcd 3.4's capnslog checks (embed/config_logging.go): one output of
 * default, stderr or stdout. */
static const char *capnslog_outputs(const struct log_outputs *o, char *buf,
                                    size_t cap)
{
    char list[1024];
    quote_list(o, list, sizeof list);
    if (o->n != 1) {
        snprintf(buf, cap, "--logger=capnslog supports only 1 value in "
                 "'--log-outputs', got %s", list);
        return buf;
    }
    if (strcmp(o->v[0], "default") != 0 && strcmp(o->v[0], "stderr") != 0 &&
        strcmp(o->v[0], "stdout") != 0) {
        snprintf(buf, cap, "unknown log-output \"%s\" (only supports "
                 "\"default\", \"stderr\", \"stdout\")", o->v[0]);
        return buf;
    }
    log_set_stdout(strcmp(o->v[0], "stdout") == 0);
    return NULL;
}

/* etcd 3.4's zap checks, then the outputs opened (files, the journal):
 * "default" is stderr and cannot be combined; the journal cannot be
 * combined with anything. */
static const char *zap_outputs(struct log_outputs *o, char *buf, size_t cap)
{
    char list[1024];
    quote_list(o, list, sizeof list);
    bool journal = false;
    for (size_t i = 0; i < o->n; i++) {
        if (o->n > 1 && strcmp(o->v[i], "default") == 0) {
            snprintf(buf, cap, "multi logoutput for \"default\" is not "
                     "supported yet");
            return buf;
        }
        journal = journal || strcmp(o->v[i], "systemd/journal") == 0;
    }
    if (journal && o->n > 1) {
        snprintf(buf, cap, "running with systemd/journal but other "
                 "'--log-outputs' values (%s) are configured with "
                 "'default'; override 'default' value with something else",
                 list);
        return buf;
    }
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->v[i], "default") == 0)
            o->v[i] = "stderr";
    if (log_open(true, o->v, o->n, buf, cap) != 0)
        return buf;
    return NULL;
}

/* --logger, --log-outputs and --log-level (and the config file's logger,
 * log-outputs and log-level, which arrive as these flags), refused with
 * etcd 3.4's messages; capnslog stays the default, as in etcd 3.4. */
static int setup_logging(void)
{
    const char *logger = flags_get("logger");
    char buf[1200];
    const char *why = NULL;
    struct log_outputs outs;
    if (strcmp(logger, "capnslog") != 0 && strcmp(logger, "zap") != 0) {
        snprintf(buf, sizeof buf, "unknown logger option \"%s\"", logger);
        flag_error(buf);
        return 1;
    }
    int lvl = log_level_parse(flags_get("log-level"));
    if (lvl < 0) { /* etcd's logutil panics on it */
        fprintf(stderr, "panic: unknown level \"%s\"\n",
                flags_get("log-level"));
        return 2;
    }
    if (flags_get_bool("debug"))
        lvl = LOG_DEBUG;
    log_set_level((enum log_level)lvl);
    if (outputs_parse(flags_get("log-outputs"), &outs) != 0) {
        snprintf(buf, sizeof buf, "more than %d '--log-outputs' values",
                 LOG_OUTPUTS_MAX);
        why = buf;
    } else if (strcmp(logger, "capnslog") == 0) {
        why = capnslog_outputs(&outs, buf, sizeof buf);
        if (why == NULL)
            log_open(false,
                     (const char *[]){strcmp(outs.v[0], "stdout") == 0
                                          ? "stdout"
                                          : "stderr"},
                     1, buf, sizeof buf);
    } else {
        why = zap_outputs(&outs, buf, sizeof buf);
    }
    if (why != NULL) {
        flag_error(why);
        return 1;
    }
    return 0;
}

/* --auto-compaction-mode and --auto-compaction-retention as etcd reads
 * them: a plain number is revisions (revision mode) or hours (periodic),
 * anything else a Go duration.  Returns 0, or 1 after etcd's message. */
static int compaction_flags(int *mode, uint64_t *retention)
{
    const char *m = flags_get("auto-compaction-mode");
    const char *r = flags_get("auto-compaction-retention");
    if (strcmp(m, "periodic") == 0 || *m == '\0') {
        *mode = SERVER_COMPACT_PERIODIC;
    } else if (strcmp(m, "revision") == 0) {
        *mode = SERVER_COMPACT_REVISION;
    } else {
        char why[300];
        snprintf(why, sizeof why, "unknown auto-compaction-mode \"%s\"", m);
        flag_error(why);
        return 1;
    }
    char *end;
    errno = 0;
    long long n = strtoll(r, &end, 10);
    bool integer = *r != '\0' && *end == '\0' && errno == 0 &&
                   !isspace((unsigned char)*r) && *r != '+';
    if (integer && n >= 0) {
        *retention = *mode == SERVER_COMPACT_REVISION
                         ? (uint64_t)n
                         : (uint64_t)n * 3600u * 1000u; /* hours */
        return 0;
    }
    int64_t ns;
    if (!flags_parse_duration(r, &ns)) {
        char why[256];
        flags_duration_error(r, why, sizeof why);
        log_msg(LOG_FATAL, "etcdmain", "error parsing CompactionRetention: %s",
                why);
        return 1;
    }
    if (ns < 0) { /* etcd would run a compactor with a negative period */
        log_msg(LOG_FATAL, "etcdmain", "error parsing CompactionRetention: "
                "--auto-compaction-retention %s is negative", r);
        return 1;
    }
    /* revision mode with a duration: its nanoseconds, as etcd takes them */
    *retention = *mode == SERVER_COMPACT_REVISION
                     ? (uint64_t)ns
                     : (ns > 0 && ns < 1000000 ? 1 : (uint64_t)ns / 1000000u);
    return 0;
}

static int check_compaction(void)
{
    int mode;
    uint64_t retention;
    return compaction_flags(&mode, &retention);
}

/* The listeners' versions and TLS 1.2 suites (both kinds, as etcd). */
static struct rpc_tls_opts tls_opts;

/* check_tls_opts reads --cipher-suites, --tls-min-version and
 * --tls-max-version with etcd's messages: a bad version is a flag error
 * (etcd 3.5's Config.Validate); an unknown suite stops the member as
 * etcd's configure*Listeners do. */
static int check_tls_opts(void)
{
    char why[300];
    if (rpc_tls_opts_parse(NULL, flags_get("tls-min-version"),
                           flags_get("tls-max-version"), &tls_opts, why,
                           sizeof why) != 0) {
        flag_error(why);
        return 1;
    }
    if (rpc_tls_opts_parse(flags_get("cipher-suites"),
                           flags_get("tls-min-version"),
                           flags_get("tls-max-version"), &tls_opts, why,
                           sizeof why) != 0) {
        bool suite = strncmp(why, "unexpected TLS cipher", 21) == 0;
        if (suite)
            log_msg(LOG_FATAL, "etcdmain", "%s", why);
        else
            flag_error(why);
        return 1;
    }
    return 0;
}

/* --auth-token: etcd's "simple" or "jwt,..." (cmd/auth_token.h), whose
 * options and keys are checked here, before anything starts; a refusal
 * prints etcd's error.  --bcrypt-cost: etcd's bcrypt
 * takes a cost below 4 as its default 10 and fails every UserAdd above 31;
 * cetcd refuses the latter at start-up with bcrypt's text. */
static struct cmd_auth_token auth_token; /* lives as long as the process */

static int check_auth(void)
{
    const char *tok = flags_get("auth-token");
    char why[AUTH_JWT_WHY_MAX], detail[512];
    if (cmd_auth_token_parse(tok, &auth_token, why, detail,
                             sizeof why) != 0) {
        if (detail[0] != '\0')
            log_error("auth", "%s", detail);
        fprintf(stderr, "cetcd: --auth-token=%s: failed to create token "
                        "provider: %s\n", tok, why);
        cmd_auth_token_free(&auth_token);
        return 1;
    }
    uint64_t cost = flags_get_u64("bcrypt-cost");
    if (cost > 31) {
        fprintf(stderr, "cetcd: --bcrypt-cost=%llu: crypto/bcrypt: cost %llu "
                        "is outside allowed range (4,31)\n",
                (unsigned long long)cost, (unsigned long long)cost);
        return 1;
    }
    return 0;
}

static int check_timing(void)
{
    uint64_t hb = flags_get_u64("heartbeat-interval");
    uint64_t el = flags_get_u64("election-timeout");
    if (el < 5 * hb) {
        fprintf(stderr, "cetcd: --election-timeout[%llums] should be at "
                        "least as 5 times as --heartbeat-interval[%llums]\n",
                (unsigned long long)el, (unsigned long long)hb);
        return 1;
    }
    if (el > 50000) {
        fprintf(stderr, "cetcd: --election-timeout[%llums] is too long, and "
                        "should be set less than 50000ms\n",
                (unsigned long long)el);
        return 1;
    }
    int64_t chk = flags_get_dur_ns("experimental-compact-hash-check-time");
    if (chk <= 0) {
        /* etcd prints the time.Duration (a config file's 0 is "0s"). */
        char d[64];
        log_go_duration(chk, d, sizeof d);
        log_error("etcdmain", "error verifying flags, "
                  "--experimental-compact-hash-check-time must be >0 (set "
                  "to: %s). See 'etcd --help'.", d);
        return 1;
    }
    return 0;
}

/* etcd: without --initial-cluster, a member not named "default" forms a
 * cluster of itself at its advertised peer URLs. */
static const char *initial_cluster(void)
{
    static char buf[4096];
    if (flags_get("discovery-srv")[0] != '\0')
        return ""; /* etcd clears it; run() asks DNS (a member without data) */
    if (flags_was_set("initial-cluster") ||
        strcmp(flags_get("name"), "default") == 0)
        return flags_get("initial-cluster");
    snprintf(buf, sizeof buf, "%s=%s", flags_get("name"),
             flags_get("initial-advertise-peer-urls"));
    return buf;
}

static void fill_config(struct server_config *c, const char *dir)
{
    memset(c, 0, sizeof *c);
    c->name = flags_get("name");
    c->data_dir = dir;
    c->wal_dir = *flags_get("wal-dir") ? flags_get("wal-dir") : NULL;
    c->peer_urls = flags_get("initial-advertise-peer-urls");
    c->client_urls = flags_get("advertise-client-urls");
    c->version = flags_get("experimental-reported-version");
    c->cluster_token = flags_get("initial-cluster-token");
    c->snapshot_count = flags_get_u64("snapshot-count");
    c->max_snapshots = (uint32_t)flags_get_u64("max-snapshots");
    c->quota_backend_bytes = flags_get_i64("quota-backend-bytes");
    c->max_request_bytes = flags_get_u64("max-request-bytes");
    c->max_txn_ops = (uint32_t)flags_get_u64("max-txn-ops");
    c->compaction_batch_limit =
        (uint32_t)flags_get_u64("experimental-compaction-batch-limit");
    c->unsafe_no_fsync = flags_get_bool("unsafe-no-fsync");
    /* etcd's --max-wals=0 keeps every WAL file. */
    uint64_t wals = flags_get_u64("max-wals");
    c->wal_segments_keep = wals == 0 ? UINT64_MAX : wals;
    /* etcd warns when an apply took more than the duration; at 0 or less
     * that is every apply, which 1 ns gives too (0 is the server's
     * default of 100 ms). */
    int64_t warn = flags_get_dur_ns("experimental-warning-apply-duration");
    c->warn_apply_ns = warn > 0 ? (uint64_t)warn : 1;
    int64_t pn = flags_get_dur_ns("experimental-watch-progress-notify-interval");
    c->watch_progress_ms = pn > 0 ? (uint64_t)pn / 1000000u : 0;
    if (pn > 0 && c->watch_progress_ms == 0)
        c->watch_progress_ms = 1;
    int64_t cp = flags_get_dur_ns("experimental-lease-checkpoint-interval");
    c->lease_checkpoint_ms = cp > 0 ? (uint64_t)cp / 1000000u : 0;
    if (cp > 0 && c->lease_checkpoint_ms == 0)
        c->lease_checkpoint_ms = 1;
    c->no_tick_advance = !flags_get_bool("initial-election-tick-advance");
    uint64_t cost = flags_get_u64("bcrypt-cost");
    c->bcrypt_cost = cost < 4 ? 10 : (int)cost; /* bcrypt: below min: 10 */
    c->auth_token_ttl_ms = flags_get_u64("auth-token-ttl") * 1000u;
    c->auth_jwt = auth_token.jwt ? &auth_token.cfg : NULL;
    (void)compaction_flags(&c->auto_compact_mode, &c->auto_compact_retention);
    /* Tests only: the revision mode looks every 5 minutes otherwise. */
    const char *every = getenv("CETCD_TEST_COMPACTOR_INTERVAL_MS");
    c->auto_compact_rev_interval_ms =
        every != NULL ? strtoull(every, NULL, 10) : 0;
    const char *nospec = getenv("CETCD_NO_SPECULATIVE_APPLY");
    c->no_speculation = nospec != NULL && strcmp(nospec, "1") == 0;
    const char *rpause = getenv("CETCD_TEST_READ_PAUSE_MS");
    c->test_read_pause_ms =
        rpause != NULL ? (uint32_t)strtoul(rpause, NULL, 10) : 0;
    const char *noinline = getenv("CETCD_NO_INLINE_RAFT");
    c->no_inline_raft = noinline != NULL && strcmp(noinline, "1") == 0;
    c->heartbeat_ms = flags_get_u64("heartbeat-interval");
    c->election_ms = flags_get_u64("election-timeout");
    c->pre_vote = flags_get_bool("pre-vote");
    c->strict_reconfig_check = flags_get_bool("strict-reconfig-check");
    c->force_new_cluster = flags_get_bool("force-new-cluster");
    c->initial_cluster = initial_cluster();
}

/* One kind of listener's TLS flags: client ("") or peer ("peer-"). */
struct tls_kind {
    const char *name;     /* "client" or "peer": fixtures dir, messages */
    const char *prefix;   /* flag name prefix */
    const char *crl_flag; /* client-crl-file or peer-crl-file */
    const char *urls;     /* the listen URLs */
};

static const char *kflag(const struct tls_kind *k, const char *suffix)
{
    static char name[64];
    snprintf(name, sizeof name, "%s%s", k->prefix, suffix);
    return flags_get(name);
}

/* --client-cert-allowed-hostname / --peer-cert-allowed-hostname */
static const char *kflag_cert_allowed_hostname(const struct tls_kind *k)
{
    return flags_get(*k->prefix ? "peer-cert-allowed-hostname"
                                : "client-cert-allowed-hostname");
}

/* has_tls_url: some URL in the comma-separated list wants TLS. */
static bool has_tls_url(const char *urls, char *first, size_t cap)
{
    for (const char *u = urls; u != NULL; u = strchr(u, ',')) {
        u += *u == ',';
        if (strncmp(u, "https://", 8) == 0 || strncmp(u, "unixs://", 8) == 0) {
            snprintf(first, cap, "%.*s", (int)strcspn(u, ","), u);
            return true;
        }
    }
    return false;
}

static void tls_log(const struct tls_kind *k, const struct rpc_tls_files *f)
{
    log_info("embed", "%s: cert = %s, key = %s, trusted-ca = %s, "
             "client-cert-auth = %s, crl-file = %s",
             strcmp(k->name, "peer") == 0 ? "peerTLS" : "ClientTLS",
             f->cert_file, f->key_file, f->trusted_ca_file ? f->trusted_ca_file : "",
             f->client_cert_auth ? "true" : "false",
             f->crl_file ? f->crl_file : "");
}

/*
 * tls_setup builds one listener kind's TLS material from its flags, as
 * etcd's configure{Client,Peer}Listeners do: --[peer-]auto-tls replaces an
 * empty cert/key pair by a self-signed one under <data-dir>/fixtures/<kind>
 * (dropping the CA, cert auth and CRL, as etcd's SelfCert TLSInfo does);
 * TLS material is only loaded when some URL is https:// or unixs://, and
 * such a URL without material is refused.  *tls_out stays NULL for none.
 */
static int tls_setup(const struct tls_kind *k, const char *dir,
                     struct rpc_tls **tls_out)
{
    char cert[1200], key[1200], sub[1100], url[512];
    struct rpc_tls_files f = {
        .cert_file = kflag(k, "cert-file"), .key_file = kflag(k, "key-file"),
        .trusted_ca_file = kflag(k, "trusted-ca-file"),
        .crl_file = flags_get(k->crl_flag),
        .allowed_cn = *k->prefix ? flags_get("peer-cert-allowed-cn") : NULL,
        .allowed_hostname = kflag_cert_allowed_hostname(k),
        .client_cert_auth = flags_get_bool(
            *k->prefix ? "peer-client-cert-auth" : "client-cert-auth"),
        /* etcd's peer listener (rafthttp.NewListener -> wrapTLS) checks
         * client certificates' SANs; its client listeners do not. */
        .check_client_san =
            *k->prefix &&
            !flags_get_bool("experimental-peer-skip-client-san-verification"),
        .opts = &tls_opts};
    bool empty = !*f.cert_file && !*f.key_file;
    *tls_out = NULL;
    if (flags_get_bool(*k->prefix ? "peer-auto-tls" : "auto-tls")) {
        if (!empty) {
            log_warn("embed", "ignoring %s auto TLS since certs given",
                     k->name);
        } else {
            snprintf(sub, sizeof sub, "%s/fixtures/%s", dir, k->name);
            if (rpc_tls_self_cert(sub, k->urls, cert, key, sizeof cert) != 0)
                return 1;
            struct rpc_tls_files self = {.cert_file = cert, .key_file = key,
                                         .opts = &tls_opts};
            f = self;
            empty = false;
        }
    }
    if (!has_tls_url(k->urls, url, sizeof url)) {
        if (!empty)
            log_warn("embed", "scheme is HTTP while key and cert files are "
                     "present; ignoring key and cert files (%s urls %s)",
                     k->name, k->urls);
        return 0;
    }
    if (empty) {
        if (strcmp(k->name, "peer") == 0)
            log_error("etcdmain", "cannot listen on TLS for %s: KeyFile and "
                      "CertFile are not presented", url);
        else
            log_error("etcdmain", "TLS key/cert (--cert-file, --key-file) "
                      "must be provided for client url %s with HTTPS scheme",
                      url);
        return 1;
    }
    tls_log(k, &f);
    return rpc_tls_load(&f, tls_out) == 0 ? 0 : 1;
}

/* print_serving prints etcd's line per client listener: tools (and
 * people) look for "serving client requests on" to know TLS is on. */
static void print_serving(const char *urls, const char *traffic)
{
    for (const char *u = urls; u != NULL && *u; u = strchr(u, ',')) {
        u += *u == ',';
        size_t n = strcspn(u, ",");
        const char *sep = strstr(u, "://");
        if (sep == NULL || sep > u + n)
            continue;
        bool secure = sep[-1] == 's';
        const char *addr = sep + 3;
        int alen = (int)(n - (size_t)(addr - u));
        if (strncmp(u, "http", 4) == 0)
            alen = (int)strcspn(addr, "/,");
        char a[300];
        snprintf(a, sizeof a, "%.*s", alen, addr);
        /* etcd 3.5 names the traffic once HTTP has its own listeners */
        if (log_is_zap() && traffic != NULL)
            log_zap(LOG_INFO, secure ? "serving client traffic securely"
                                     : "serving client traffic insecurely; "
                                       "this is strongly discouraged!",
                    LOG_STR("traffic", traffic), LOG_STR("address", a));
        else if (log_is_zap())
            log_zap(LOG_INFO, secure ? "serving client traffic securely"
                                     : "serving client traffic insecurely; "
                                       "this is strongly discouraged!",
                    LOG_STR("address", a));
        else if (secure)
            log_info("embed", "serving client requests on %.*s", alen, addr);
        else
            log_info("embed", "serving insecure client requests on %.*s, "
                     "this is strongly discouraged!", alen, addr);
    }
}

/* etcd's zap line at start (embed/etcd.go), with the fields that are
 * cetcd's flags too. */
static void print_startup_zap(const struct server_config *c, bool has_data)
{
    char member_dir[4200];
    snprintf(member_dir, sizeof member_dir, "%s/member", c->data_dir);
    log_zap(LOG_INFO, "starting an etcd server",
            LOG_STR("etcd-version", c->version),
            LOG_STR("git-sha", CETCD_GIT_SHA),
            LOG_BOOL("member-initialized", has_data),
            LOG_STR("name", c->name), LOG_STR("data-dir", c->data_dir),
            LOG_STR("wal-dir", flags_get("wal-dir")),
            LOG_STR("member-dir", member_dir),
            LOG_BOOL("force-new-cluster", flags_get_bool("force-new-cluster")),
            LOG_DUR_MS("heartbeat-interval",
                       flags_get_u64("heartbeat-interval")),
            LOG_DUR_MS("election-timeout", flags_get_u64("election-timeout")),
            LOG_UINT("snapshot-count", c->snapshot_count),
            LOG_CSV("initial-advertise-peer-urls",
                    flags_get("initial-advertise-peer-urls")),
            LOG_CSV("listen-peer-urls", flags_get("listen-peer-urls")),
            LOG_CSV("advertise-client-urls", flags_get("advertise-client-urls")),
            LOG_CSV("listen-client-urls", flags_get("listen-client-urls")),
            LOG_CSV("listen-metrics-urls", flags_get("listen-metrics-urls")),
            LOG_STR("initial-cluster", initial_cluster()),
            LOG_STR("initial-cluster-state", flags_get("initial-cluster-state")),
            LOG_STR("initial-cluster-token", flags_get("initial-cluster-token")),
            LOG_UINT("max-request-bytes", flags_get_u64("max-request-bytes")),
            LOG_BOOL("pre-vote", flags_get_bool("pre-vote")),
            LOG_STR("auto-compaction-mode", flags_get("auto-compaction-mode")));
}

static void print_startup(const struct server_config *c, bool has_data)
{
    if (log_is_zap()) {
        print_startup_zap(c, has_data);
        return;
    }
    log_info("etcdmain", "etcd Version: %s (cetcd %s)", c->version,
             CETCD_GIT_SHA);
    log_info("embed", "name = %s", c->name);
    log_info("embed", "data dir = %s", c->data_dir);
    log_info("embed", "member dir = %s/member", c->data_dir);
    log_info("embed", "snapshot count = %llu",
             (unsigned long long)c->snapshot_count);
    log_info("embed", "advertise client URLs = %s", c->client_urls);
}

/* loopback_host: the host of "http://host:port..." (n bytes after the
 * scheme) reaches only this machine. */
static bool loopback_host(const char *h, size_t n)
{
    if (n > 0 && h[0] == '[') /* [::1]:2380 */
        return n >= 5 && memcmp(h, "[::1]", 5) == 0;
    size_t hn = strcspn(h, ":/,");
    if (hn > n)
        hn = n;
    return (hn == 9 && memcmp(h, "localhost", 9) == 0) ||
           (hn >= 4 && memcmp(h, "127.", 4) == 0);
}

/* warn_plain_peers: without peer TLS, anyone who reaches the peer port
 * can forge raft messages from a member id (ids are in every response
 * header), so a plain listener beyond loopback is worth a warning (see
 * the README's threat model). */
static void warn_plain_peers(const char *urls)
{
    for (const char *u = urls; u != NULL && *u; u = strchr(u, ',')) {
        u += *u == ',';
        size_t n = strcspn(u, ",");
        if (n < 7 || strncmp(u, "http://", 7) != 0 ||
            loopback_host(u + 7, n - 7))
            continue;
        log_warn("embed",
                 "peers listen on plain %.*s: anyone who can reach it can "
                 "forge raft messages and change this member's data; use "
                 "peer TLS (--peer-cert-file, --peer-key-file, "
                 "--peer-trusted-ca-file, --peer-client-cert-auth)",
                 (int)n, u);
    }
}

/* go_mode formats mode as Go's os.FileMode.String does for a directory or
 * a file ("drwxr-xr-x"): etcd's permission warning quotes it. */
static void go_mode(mode_t mode, char out[16])
{
    static const char rwx[] = "rwxrwxrwx";
    size_t n = 0;
    if (S_ISDIR(mode))
        out[n++] = 'd';
    if (mode & S_ISUID)
        out[n++] = 'u';
    if (mode & S_ISGID)
        out[n++] = 'g';
    if (mode & S_ISVTX)
        out[n++] = 't';
    if (n == 0)
        out[n++] = '-';
    for (int i = 0; i < 9; i++)
        out[n++] = mode & (1u << (8 - i)) ? rwx[i] : '-';
    out[n] = '\0';
}

/* etcd (fileutil.TouchDirAll on the data dir) warns when an existing data
 * dir's permission is not 0700, and carries on with it as it is: it
 * neither changes the mode nor refuses to start.  A new one is made 0700
 * (fs_mkdir_p). */
static void check_data_dir_mode(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || (st.st_mode & 07777) == 0700)
        return;
    char mode[16];
    go_mode(st.st_mode, mode);
    log_warn("pkg/fileutil", "check file permission: directory \"%s\" "
             "exist, but the permission is \"%s\". The recommended "
             "permission is \"-rwx------\" to prevent possible unprivileged "
             "access to the data.", dir, mode);
}

/* Once a member has data (a WAL) the --initial-* flags are ignored: its
 * ids and members come from what it stored (server.c, members.c).  etcd
 * says so in these words. */
static bool log_has_data(const struct server_config *c)
{
    bool has = join_has_wal(c->data_dir, c->wal_dir);
    if (has && log_is_zap())
        log_zap(LOG_INFO, "server has been already initialized",
                LOG_STR("data-dir", c->data_dir),
                LOG_STR("dir-type", "member"));
    else if (has)
        log_info("etcdmain", "the server is already initialized as member "
                 "before, starting as etcd member...");
    return has;
}

/* The member's TLS material and peer listener, set up before the member
 * starts (etcd opens its peer listeners before creating the server). */
struct listeners {
    struct rpc_tls *client_tls; /* NULL: no client TLS */
    struct rpc_tls *peer_tls;   /* NULL: no peer TLS */
    struct rpc_tls *metrics_tls; /* client_tls with the SAN check, or NULL */
    struct rpc_server *peer;    /* the peer listener */
    struct dial_tls peer_dial;  /* peer_tls's material for dialling */
};

static void listeners_close(struct listeners *l)
{
    api_peer_stop(l->peer);
    rpc_tls_free(l->peer_tls);
    rpc_tls_free(l->client_tls);
    rpc_tls_free(l->metrics_tls);
}

/* url_addr: the address part of a listen URL as etcd 3.5 compares them
 * (host:port, or a unix socket's path), its length in *n_out. */
static const char *url_addr(const char *u, size_t n, size_t *n_out)
{
    const char *sep = strstr(u, "://");
    if (sep == NULL || sep >= u + n) {
        *n_out = n;
        return u;
    }
    const char *a = sep + 3;
    size_t an = n - (size_t)(a - u);
    if (strncmp(u, "unix", 4) != 0)
        an = strcspn(a, "/,") < an ? strcspn(a, "/,") : an;
    *n_out = an;
    return a;
}

/* url_listed: the address of u (n bytes) is one of the list's. */
static bool url_listed(const char *list, const char *u, size_t n)
{
    size_t an, bn;
    const char *a = url_addr(u, n, &an);
    for (const char *v = list; *v != '\0'; v += *v == ',') {
        size_t vn = strcspn(v, ",");
        const char *b = url_addr(v, vn, &bn);
        if (vn > 0 && an == bn && memcmp(a, b, an) == 0)
            return true;
        v += vn;
    }
    return false;
}

/* http_urls_check: etcd 3.5 refuses a --listen-client-http-urls URL on
 * the address of a --listen-client-urls one (embed/etcd.go
 * configureClientListeners). */
static int http_urls_check(void)
{
    const char *h = flags_get("listen-client-http-urls");
    for (const char *u = h; *u != '\0'; u += *u == ',') {
        size_t n = strcspn(u, ",");
        if (n > 0 && url_listed(flags_get("listen-client-urls"), u, n)) {
            log_error("etcdmain", "cannot bind both --client-listen-urls and "
                      "--client-listen-http-urls on the same url %.*s",
                      (int)n, u);
            return 1;
        }
        u += n;
    }
    return 0;
}

static int listeners_open(struct listeners *l, const char *dir)
{
    /* The client TLS serves the HTTP-only listeners too (etcd 3.5 checks
     * both lists for an https:// URL without a cert, in this order). */
    char curls[8192];
    const char *h = flags_get("listen-client-http-urls");
    snprintf(curls, sizeof curls, "%s%s%s", flags_get("listen-client-urls"),
             *h ? "," : "", h);
    const struct tls_kind client = {"client", "", "client-crl-file", curls};
    const struct tls_kind peer = {"peer", "peer-", "peer-crl-file",
                                  flags_get("listen-peer-urls")};
    memset(l, 0, sizeof *l);
    if (tls_setup(&peer, dir, &l->peer_tls) != 0 ||
        tls_setup(&client, dir, &l->client_tls) != 0) {
        listeners_close(l);
        return 1;
    }
    warn_plain_peers(peer.urls);
    if (l->peer_tls != NULL) {
        /* Other members are dialled with the listener's certificate (as
         * etcd's rafthttp uses the one PeerTLSInfo); self-signed ones are
         * not verified (etcd: InsecureSkipVerify for a SelfCert). */
        const char *c = flags_get("peer-cert-file");
        const char *k = flags_get("peer-key-file");
        l->peer_dial = (struct dial_tls){
            .cert_pem = l->peer_tls->cert_pem,
            .key_pem = l->peer_tls->key_pem,
            .ca_pem = l->peer_tls->ca_pem,
            .skip_verify = flags_get_bool("peer-auto-tls") && !*c && !*k,
            /* The files, re-read when they change (none for auto-TLS:
             * its certificate never changes while the member runs). */
            .cert_file = *c && *k ? c : NULL,
            .key_file = *c && *k ? k : NULL,
            .ca_file = *flags_get("peer-trusted-ca-file")
                           ? flags_get("peer-trusted-ca-file")
                           : NULL,
            /* etcd checks them on the certificates of the members it
             * dials too (one tls.Config for both ends). */
            .allowed_cn = l->peer_tls->allowed_cn,
            .allowed_hostname = l->peer_tls->allowed_hostname};
    }
    int rc = api_peer_create(peer.urls, l->peer_tls, &l->peer);
    if (rc != 0) {
        log_error("etcdmain", "failed to listen on peer urls %s: %s",
                  peer.urls, err_str(rc));
        listeners_close(l);
        return 1;
    }
    if (log_is_zap()) {
        log_zap(LOG_INFO, "configuring peer listeners",
                LOG_CSV("listen-peer-urls", peer.urls));
        log_zap(LOG_INFO, "configuring client listeners",
                LOG_CSV("listen-client-urls", client.urls));
    }
    for (const char *u = peer.urls; u != NULL && !log_is_zap();
         u = strchr(u + 1, ','))
        log_info("embed", "listening for peers on %.*s",
                 (int)strcspn(u + (*u == ','), ","), u + (*u == ','));
    return 0;
}

/* etcd's zap lines once the peer listener serves (embed/etcd.go). */
static void log_serving_peers(const struct server *s)
{
    if (!log_is_zap())
        return;
    log_zap(LOG_INFO, "now serving peer/client/metrics",
            LOG_ID("local-member-id", server_member_id(s)),
            LOG_CSV("initial-advertise-peer-urls",
                    flags_get("initial-advertise-peer-urls")),
            LOG_CSV("listen-peer-urls", flags_get("listen-peer-urls")),
            LOG_CSV("advertise-client-urls", flags_get("advertise-client-urls")),
            LOG_CSV("listen-client-urls", flags_get("listen-client-urls")),
            LOG_CSV("listen-metrics-urls", flags_get("listen-metrics-urls")));
    for (const char *u = flags_get("listen-peer-urls"); *u != '\0';) {
        size_t n = strcspn(u, ",");
        const char *sep = strstr(u, "://");
        if (sep != NULL && sep < u + n) {
            char a[300];
            snprintf(a, sizeof a, "%.*s", (int)strcspn(sep + 3, "/,"),
                     sep + 3);
            log_zap(LOG_INFO, "serving peer traffic", LOG_STR("address", a));
        }
        u += n + (u[n] == ',');
    }
}

/* etcd serves clients once the member has published its name and client
 * URLs through raft (ReadyNotify).  A member that cannot reach a quorum
 * would wait forever there; cetcd serves after the request timeout. */
static void wait_published(struct server *s)
{
    uint64_t waited_ms = 0, limit_ms = 5000 + 2 * flags_get_u64(
                                                      "election-timeout");
    while (!server_published(s) && !got_signal && !server_removed(s) &&
           waited_ms < limit_ms) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        waited_ms += 10;
    }
    if (!server_published(s) && !server_removed(s))
        log_warn("etcdserver", "not yet published to the cluster after "
                 "%llu ms; serving clients anyway",
                 (unsigned long long)waited_ms);
}

/* etcd's zap lines around a stop (embed/etcd.go Close). */
static void log_closing(const struct server_config *c, const char *msg)
{
    if (log_is_zap())
        log_zap(LOG_INFO, msg, LOG_STR("name", c->name),
                LOG_STR("data-dir", c->data_dir),
                LOG_CSV("advertise-peer-urls",
                        flags_get("initial-advertise-peer-urls")),
                LOG_CSV("advertise-client-urls",
                        flags_get("advertise-client-urls")));
}

static int64_t ka_ms(const char *flag)
{
    int64_t ns = flags_get_dur_ns(flag);
    return ns <= 0 ? 0 : ns < 1000000 ? 1 : ns / 1000000;
}

static int run(void)
{
    char buf[4096];
    struct server_config cfg;
    struct listeners l;
    fill_config(&cfg, data_dir(buf, sizeof buf));
    if (etcd_dir_import(cfg.data_dir, cfg.wal_dir) != 0)
        return 1;
    bool has_data = log_has_data(&cfg);
    print_startup(&cfg, has_data);
    check_data_dir_mode(cfg.data_dir);
    if (http_urls_check() != 0 || listeners_open(&l, cfg.data_dir) != 0)
        return 1;
    struct server *s;
    cfg.peer_listener = l.peer;
    cfg.peer_tls = l.peer_tls != NULL ? &l.peer_dial : NULL;
    static char srv_cluster[8192];
    if (flags_get("discovery-srv")[0] != '\0' && !has_data) {
        char why[2048];
        if (discovery_srv_cluster(cfg.name, flags_get("discovery-srv"),
                                  flags_get("discovery-srv-name"),
                                  cfg.peer_urls, srv_cluster,
                                  sizeof srv_cluster, why, sizeof why) != 0) {
            if (log_is_zap()) {
                char e[2200];
                snprintf(e, sizeof e, "error setting up initial cluster: %s",
                         why);
                log_zap(LOG_FATAL, "discovery failed", LOG_STR("error", e));
            } else {
                log_msg(LOG_FATAL, "etcdmain", "error setting up initial "
                        "cluster: %s", why);
            }
            listeners_close(&l);
            return 1;
        }
        cfg.initial_cluster = srv_cluster;
    }
    struct join_result join;
    memset(&join, 0, sizeof join);
    if (strcmp(flags_get("initial-cluster-state"), "existing") == 0 &&
        !has_data) {
        if (join_fetch(&cfg, &join) != 0) {
            listeners_close(&l);
            return 1;
        }
        cfg.join = &join.join;
    }
    int rc = server_start(&cfg, &s);
    join_free(&join);
    cfg.join = NULL;
    if (rc == 0 && (rc = api_peer_register(l.peer, s)) != 0) {
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    if (rc != 0) {
        log_error("etcdmain", "failed to start the member: %s", err_str(rc));
        listeners_close(&l);
        return 1;
    }
    rc = api_peer_serve(l.peer);
    if (rc == 0 && log_is_zap())
        log_zap(LOG_INFO, "starting etcd server",
                LOG_ID("local-member-id", server_member_id(s)),
                LOG_STR("local-server-version", cfg.version),
                LOG_STR("cluster-version", "to_be_decided"));
    if (rc == 0)
        log_serving_peers(s);
    if (rc != 0) {
        log_error("etcdmain", "failed to listen on peer urls %s: %s",
                  flags_get("listen-peer-urls"), err_str(rc));
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    /* As etcd: a member that starts with no data has nothing to check
     * (its peers' data reaches it through raft). */
    if (has_data && flags_get_bool("experimental-initial-corrupt-check") &&
        corrupt_check_initial(s, cfg.election_ms) != 0) {
        /* etcd: the start fails, fatal (embed.StartEtcd's error). */
        log_msg(LOG_FATAL, "etcdmain", "%016llx found data inconsistency "
                "with peers", (unsigned long long)server_member_id(s));
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    wait_published(s);
    if (server_removed(s)) { /* refused by the cluster: never serve */
        listeners_close(&l);
        server_stop(s);
        return 0;
    }
    struct api *api;
    /* etcd's default (math.MaxUint32: unlimited) reads as 0 here, which
     * is the runtime's bounded default (RPC_DEFAULT_MAX_STREAMS). */
    uint32_t streams = (uint32_t)flags_get_u64("max-concurrent-streams");
    api_gateway_enable(flags_get_bool("enable-grpc-gateway"));
    const char *hurls = flags_get("listen-client-http-urls");
    api_client_http_split(hurls[0] != '\0');
    if (api_http_access(flags_get("cors"), flags_get("host-whitelist")) !=
        0) {
        log_error("etcdmain", "out of memory for --cors/--host-whitelist");
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    /* --grpc-keepalive-*: 0 (and, here, a negative value) is grpc-go's
     * default, as in rpc.h; below 1 ms is 1 ms. */
    struct rpc_keepalive ka = {.min_time_ms = ka_ms("grpc-keepalive-min-time"),
                               .interval_ms = ka_ms("grpc-keepalive-interval"),
                               .timeout_ms = ka_ms("grpc-keepalive-timeout")};
    rc = api_start(s, flags_get("listen-client-urls"), l.client_tls, streams,
                   &ka, &api);
    if (rc != 0) {
        log_error("etcdmain", "failed to listen on client urls %s: %s",
                  flags_get("listen-client-urls"), err_str(rc));
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    if (hurls[0] != '\0' &&
        (rc = api_http_start(api, hurls, l.client_tls)) != 0) {
        log_error("etcdmain", "failed to listen on client http urls %s: %s",
                  hurls, err_str(rc));
        api_stop(api);
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    /* etcd takes any value and turns the histograms on for "extensive"
     * only; so does cetcd. */
    api_metrics_extensive(api, strcmp(flags_get("metrics"), "extensive") == 0);
    const char *murls = flags_get("listen-metrics-urls");
    char first[512];
    /* etcd's https metrics listener checks client certificates' SANs
     * (transport.NewListener), with the client TLS material. */
    if (l.client_tls != NULL && has_tls_url(murls, first, sizeof first) &&
        rpc_tls_with_san(l.client_tls, &l.metrics_tls) != 0) {
        api_stop(api);
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    if (murls[0] != '\0' && (rc = api_metrics_start(api, murls,
                                                    l.metrics_tls)) != 0) {
        log_error("etcdmain", "failed to listen on metrics urls %s: %s",
                  murls, err_str(rc));
        api_stop(api);
        listeners_close(&l);
        server_stop(s);
        return 1;
    }
    for (const char *u = murls; *u != '\0'; u += *u == ',') {
        size_t n = strcspn(u, ",");
        log_info("embed", "listening for metrics on %.*s", (int)n, u);
        u += n;
    }
    if (log_is_zap()) {
        /* etcd's zap has no "ready to serve" line: the serving lines
         * below say it. */
        log_zap(LOG_INFO, "enabled capabilities for version",
                LOG_STR("cluster-version", "3.4"));
    } else {
        log_info("etcdserver/api", "enabled capabilities for version 3.4");
        log_info("embed", "ready to serve client requests");
    }
    print_serving(flags_get("listen-client-urls"), *hurls ? "grpc" : NULL);
    print_serving(hurls, "http");
    struct corrupt_monitor *cm = NULL;
    int64_t check_ns = flags_get_dur_ns("experimental-corrupt-check-time");
    if (check_ns > 0 &&
        corrupt_monitor_start(
            s, cfg.election_ms, (uint64_t)(check_ns + 999999) / 1000000,
            false, !flags_was_set("experimental-corrupt-check-time"),
            &cm) != 0)
        log_error("etcdmain", "cannot start the corruption check");
    struct corrupt_monitor *chm = NULL;
    check_ns = flags_get_dur_ns("experimental-compact-hash-check-time");
    if (flags_get_bool("experimental-compact-hash-check-enabled") &&
        corrupt_monitor_start(
            s, cfg.election_ms, (uint64_t)(check_ns + 999999) / 1000000,
            true, !flags_was_set("experimental-compact-hash-check-time"),
            &chm) != 0)
        log_error("etcdmain", "cannot start the compact hash check");
    rc = notify_ready(); /* systemd Type=notify, as etcd */
    if (rc != 0)
        log_error("etcdmain", "failed to notify systemd for readiness: %s",
                  err_str(rc));
    while (!got_signal && !server_removed(s)) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (got_signal && log_is_zap())
        log_zap(LOG_INFO, "received signal; shutting down",
                LOG_STR("signal", got_signal == SIGINT ? "interrupt"
                                                       : "terminated"));
    else if (got_signal)
        log_info("pkg/osutil", "received %s signal, shutting down...",
                 got_signal == SIGINT ? "interrupt" : "terminated");
    log_closing(&cfg, "closing etcd server");
    corrupt_monitor_stop(cm);
    corrupt_monitor_stop(chm);
    api_stop(api);
    listeners_close(&l); /* the peer listener before the transport */
    server_stop(s);
    log_closing(&cfg, "closed etcd server");
    return 0;
}

/* glibc grows a thread's malloc arena by the pages a request needs, one
 * mprotect each time; the store's and raft log's memory grows steadily
 * under a put load, which made ~0.2 mprotect calls per put (each taking
 * the process's mmap lock against the other threads' page faults).
 * Growing by 1 MiB at a time makes that rare; 2-3% less CPU per put at
 * 1000 clients (measured with 4 MiB).  The pad is address space until
 * touched, and a trimmed arena keeps at most this much: a few MiB of RSS
 * over all arenas at worst. */
static void tune_malloc(void)
{
    mallopt(M_TOP_PAD, 1 << 20);
}

int main(int argc, char **argv)
{
    int code;
    /* etcd's modes other than the member: `etcd gateway ...` and
     * `etcd grpc-proxy ...`. */
    if (argc > 1 && strcmp(argv[1], "gateway") == 0)
        return gateway_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "grpc-proxy") == 0)
        return grpc_proxy_main(argc, argv);
    switch (flags_parse(argc, argv, &code)) {
    case FLAGS_HELP:
        flags_print_help();
        return 0;
    case FLAGS_VERSION:
        flags_print_version();
        return 0;
    case FLAGS_ERROR:
        return code;
    case FLAGS_RUN:
        break;
    }
    /* gRPC's default poller (epoll1) lets any thread blocked in a
     * completion queue poll every connection, then hands each event to the
     * queue's owner and the poller role to another thread: several wake-ups
     * per message.  With "poll" each queue's thread polls the connections
     * of its own calls, which measured 1.3-1.4x the single-client put rate
     * of a 3-member cluster (docs/BENCHMARKS.md).  A GRPC_POLL_STRATEGY
     * given by the user wins.  With "poll" a client channel's connection
     * is polled only by threads waiting on a call of it, so a peer
     * channel's TLS handshake, started before any such wait, would stall;
     * gRPC's backup poller (every 5 s by default) then has to drive it:
     * every 10 ms keeps peer connects prompt at a negligible cost. */
    setenv("GRPC_POLL_STRATEGY", "poll", 0);
    setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "10", 0);
    tune_malloc();
    dial_log_install();
    int bad = setup_logging();
    if (bad != 0)
        return bad;
    if (check_timing() != 0 || check_auth() != 0 ||
        check_compaction() != 0 || check_tls_opts() != 0 ||
        check_cluster() != 0)
        return 1;
    /* etcd's peer transport dials with --cipher-suites too: the gRPC
     * core has no per-channel knob, only this process-wide setting, which
     * it reads at grpc_init (the member's only channels are to peers). */
    if (tls_opts.ciphers[0] != '\0')
        setenv("GRPC_SSL_CIPHER_SUITES", tls_opts.ciphers, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return run();
}
