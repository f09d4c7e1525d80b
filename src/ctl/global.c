/*
 * global.c - etcdctl's global flags, ETCDCTL_* variables, the client they
 * describe (endpoints or DNS discovery, TLS files, --user and
 * Authenticate) and the error lines and exit codes of failed calls.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl/ctl_int.h"
#include "dnssrv/dnssrv.h"
#include "etcdserverpb/rpc.pb-c.h"

struct ctl_globals ctl_g;

struct ctl_flag ctl__global_flags[] = {
    {"endpoints", 0, CTL_FLAG_STRINGS, &ctl_g.endpoints, "[127.0.0.1:2379]",
     "gRPC endpoints", false},
    {"debug", 0, CTL_FLAG_BOOL, &ctl_g.debug, "false",
     "enable client-side debug logging", false},
    {"write-out", 'w', CTL_FLAG_STRING, &ctl_g.write_out, "simple",
     "set the output format (fields, json, protobuf, simple, table)", false},
    {"hex", 0, CTL_FLAG_BOOL, &ctl_g.hex, "false",
     "print byte strings as hex encoded strings", false},
    {"dial-timeout", 0, CTL_FLAG_DURATION, &ctl_g.dial_timeout_ns, "2s",
     "dial timeout for client connections", false},
    {"command-timeout", 0, CTL_FLAG_DURATION, &ctl_g.command_timeout_ns,
     "5s", "timeout for short running command (excluding dial timeout)",
     false},
    {"keepalive-time", 0, CTL_FLAG_DURATION, &ctl_g.keepalive_time_ns, "2s",
     "keepalive time for client connections", false},
    {"keepalive-timeout", 0, CTL_FLAG_DURATION, &ctl_g.keepalive_timeout_ns,
     "6s", "keepalive timeout for client connections", false},
    {"insecure-transport", 0, CTL_FLAG_BOOL, &ctl_g.insecure_transport,
     "true", "disable transport security for client connections", false},
    {"insecure-discovery", 0, CTL_FLAG_BOOL, &ctl_g.insecure_discovery,
     "true", "accept insecure SRV records describing cluster endpoints",
     false},
    {"insecure-skip-tls-verify", 0, CTL_FLAG_BOOL, &ctl_g.insecure_skip_verify,
     "false",
     "skip server certificate verification (CAUTION: this option should be "
     "enabled only for testing purposes)",
     false},
    {"cert", 0, CTL_FLAG_STRING, &ctl_g.cert, "",
     "identify secure client using this TLS certificate file", false},
    {"key", 0, CTL_FLAG_STRING, &ctl_g.key, "",
     "identify secure client using this TLS key file", false},
    {"cacert", 0, CTL_FLAG_STRING, &ctl_g.cacert, "",
     "verify certificates of TLS-enabled secure servers using this CA bundle",
     false},
    {"user", 0, CTL_FLAG_STRING, &ctl_g.user, "",
     "username[:password] for authentication (prompt if password is not "
     "supplied)",
     false},
    {"password", 0, CTL_FLAG_STRING, &ctl_g.password, "",
     "password for authentication (if this option is used, --user option "
     "shouldn't include password)",
     false},
    {"discovery-srv", 'd', CTL_FLAG_STRING, &ctl_g.discovery_srv, "",
     "domain name to query for SRV records describing cluster endpoints",
     false},
    {"discovery-srv-name", 0, CTL_FLAG_STRING, &ctl_g.discovery_srv_name, "",
     "service name to query when using DNS discovery", false},
    CTL_FLAG_END,
};

static const char *program = "etcdctl";

const char *ctl_program_name(void) { return program; }

void ctl__program_set(const char *argv0)
{
    const char *b = strrchr(argv0, '/');
    program = b ? b + 1 : argv0;
}

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

void ctl_exit(int code, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("Error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(code);
}

/* grpc-go's codes.Code names. */
static const char *go_code(int code)
{
    static const char *const names[] = {
        "OK",         "Canceled",          "Unknown",
        "InvalidArgument", "DeadlineExceeded", "NotFound",
        "AlreadyExists", "PermissionDenied", "ResourceExhausted",
        "FailedPrecondition", "Aborted",   "OutOfRange",
        "Unimplemented", "Internal",       "Unavailable",
        "DataLoss",   "Unauthenticated",
    };
    if (code >= 0 && code < (int)(sizeof names / sizeof names[0]))
        return names[code];
    return "Unknown";
}

const char *ctl_status_text(const struct cetcd_status *st, char *buf,
                            size_t cap)
{
    if (st->code == CETCD_DEADLINE_EXCEEDED &&
        strncmp(st->message, "etcdserver: ", 12) != 0)
        snprintf(buf, cap, "context deadline exceeded");
    else if (st->code == CETCD_UNAVAILABLE &&
             (strstr(st->message, "no endpoint") != NULL ||
              strncmp(st->message, "cannot connect to ", 18) == 0))
        snprintf(buf, cap, "context deadline exceeded");
    else if (strncmp(st->message, "etcdserver: ", 12) == 0)
        snprintf(buf, cap, "%s", st->message);
    else if (st->code == CETCD_CANCELLED)
        snprintf(buf, cap, "context canceled");
    else
        snprintf(buf, cap, "rpc error: code = %s desc = %s",
                 go_code(st->code), st->message);
    return buf;
}

void ctl_exit_status(int code, const struct cetcd_status *st)
{
    char text[512];
    ctl_exit(code, "%s", ctl_status_text(st, text, sizeof text));
}

/* ------------------------------------------------------------------------
 * ETCDCTL_* variables
 * ---------------------------------------------------------------------- */

/* env_name writes ETCDCTL_<NAME> for a flag name. */
static void env_name(const char *flag, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "ETCDCTL_");
    for (; *flag && k + 1 < cap; flag++)
        out[k++] = *flag == '-' ? '_' : (char)(*flag >= 'a' && *flag <= 'z'
                                                   ? *flag - 32
                                                   : *flag);
    out[k] = '\0';
}

/* capnslog's line at level ('W' warning, 'C' critical), as pkg/flags
 * prints it. */
static void capnslog(char level, const char *fmt, const char *a,
                     const char *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(stderr, "%s.%06ld %c | pkg/flags: ", when, ts.tv_nsec / 1000,
            level);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

/* env_flag: the global flag whose variable is key[0..kl), or NULL. */
static struct ctl_flag *env_flag(const char *key, size_t kl)
{
    char name[96];
    for (struct ctl_flag *f = ctl__global_flags; f->name; f++) {
        env_name(f->name, name, sizeof name);
        if (strlen(name) == kl && strncmp(key, name, kl) == 0)
            return f;
    }
    return NULL;
}

void ctl__env_apply(void)
{
    extern char **environ;
    char name[96], err[256];
    bool shadowed[64] = {false}, used[64] = {false};
    size_t i = 0;
    for (struct ctl_flag *f = ctl__global_flags; f->name; f++, i++) {
        env_name(f->name, name, sizeof name);
        const char *v = getenv(name);
        if (f->changed) {
            shadowed[i] = true;
            continue;
        }
        if (!v || !*v)
            continue;
        used[i] = true;
        (void)ctl__flag_apply(f, v, err, sizeof err); /* etcdctl ignores it */
    }
    /* etcdctl's watch command adds two discarded flags to the set */
    const struct ctl_cmd *c = ctl_cmd_running();
    bool watch = c && strncmp(c->use, "watch", 5) == 0;
    for (char **e = environ; *e; e++) {
        size_t kl = strcspn(*e, "=");
        struct ctl_flag *f = env_flag(*e, kl);
        size_t k = f ? (size_t)(f - ctl__global_flags) : 0;
        if (f && used[k])
            continue;
        if (watch && *(*e + kl) == '=' && *(*e + kl + 1) &&
            (strncmp(*e, "ETCDCTL_WATCH_KEY=", 18) == 0 ||
             strncmp(*e, "ETCDCTL_WATCH_RANGE_END=", 24) == 0))
            continue;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)kl, *e);
        if (f && shadowed[k]) {
            /* capnslog's Fatalf: the line, then exit 1 */
            capnslog('C', "conflicting environment variable \"%s\" is "
                          "shadowed by corresponding command-line flag "
                          "(either unset environment variable or disable "
                          "flag)%s", key, "");
            exit(CTL_EXIT_ERROR);
        }
        if (strncmp(*e, "ETCDCTL_", 8) == 0)
            capnslog('W', "unrecognized environment variable %s%s", *e, "");
    }
}

void ctl__debug_dump(void)
{
    /* pflag's VisitAll: the inherited flags (the globals and the group's,
     * "endpoint --cluster"), sorted by name */
    struct ctl_flag *all[64];
    size_t n = 0;
    const struct ctl_cmd *group = ctl__cmd_parent(NULL, ctl_cmd_running());
    for (struct ctl_flag *f = ctl__global_flags; f->name && n < 64; f++)
        all[n++] = f;
    for (struct ctl_flag *f = group ? group->flags : NULL; f && f->name &&
                                                          n < 64; f++)
        all[n++] = f;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(all[j - 1]->name,
                                           all[j]->name) > 0; j--) {
            struct ctl_flag *t = all[j];
            all[j] = all[j - 1];
            all[j - 1] = t;
        }
    char name[96];
    for (size_t i = 0; i < n; i++) {
        const struct ctl_flag *f = all[i];
        env_name(f->name, name, sizeof name);
        fprintf(stderr, "%s=", name);
        switch (f->type) {
        case CTL_FLAG_BOOL:
            fputs(*(bool *)f->var ? "true" : "false", stderr);
            break;
        case CTL_FLAG_STRING:
            fputs(*(const char **)f->var, stderr);
            break;
        case CTL_FLAG_STRINGS: {
            const struct ctl_strings *l = f->var;
            fputc('[', stderr);
            for (size_t k = 0; k < l->n; k++)
                fprintf(stderr, "%s%s", k ? "," : "", l->v[k]);
            fputc(']', stderr);
            break;
        }
        default:
            ctl_duration_print(stderr, *(int64_t *)f->var);
        }
        fputc('\n', stderr);
    }
}

/* ------------------------------------------------------------------------
 * The client
 * ---------------------------------------------------------------------- */

static bool configured;
static bool require_leader; /* ctl_require_leader() was called */
static struct ctl_strings eps;
static struct cetcd_client *client;

/* discover fills eps from --discovery-srv, as etcdctl's
 * endpointsFromFlagValue. */
static void discover(void)
{
    const char *svc = ctl_g.discovery_srv_name;
    char https[300], http[300], why1[600] = "", why2[600] = "";
    snprintf(https, sizeof https, "etcd-client-ssl%s%s", *svc ? "-" : "",
             svc);
    snprintf(http, sizeof http, "etcd-client%s%s", *svc ? "-" : "", svc);
    static struct dnssrv_record r1[DNSSRV_RECORDS_MAX], r2[DNSSRV_RECORDS_MAX];
    size_t n1 = 0, n2 = 0;
    int e1 = dnssrv_lookup(https, ctl_g.discovery_srv, r1, DNSSRV_RECORDS_MAX,
                           &n1, why1, sizeof why1);
    int e2 = dnssrv_lookup(http, ctl_g.discovery_srv, r2, DNSSRV_RECORDS_MAX,
                           &n2, why2, sizeof why2);
    if (e1 != 0 && e2 != 0)
        ctl_exit(CTL_EXIT_ERROR, "dns lookup errors: %s and %s", why1, why2);
    char url[400];
    for (size_t i = 0; e1 == 0 && i < n1; i++) {
        snprintf(url, sizeof url, "https://%s:%u", r1[i].target, r1[i].port);
        ctl_strings_add(&eps, url);
    }
    for (size_t i = 0; e2 == 0 && i < n2; i++) {
        snprintf(url, sizeof url, "http://%s:%u", r2[i].target, r2[i].port);
        if (!ctl_g.insecure_discovery) {
            fprintf(stderr, "ignoring discovered insecure endpoint \"%s\"\n",
                    url);
            continue;
        }
        ctl_strings_add(&eps, url);
    }
}

/* trim copies s without leading and trailing blanks. */
static void add_trimmed(struct ctl_strings *l, const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && strchr(" \t\n\r", s[n - 1]))
        n--;
    char *c = strndup(s, n);
    if (!c)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    ctl_strings_add(l, c);
    free(c);
}

/* config runs once before the first use of the client or the printer,
 * as etcdctl's clientConfigFromCmd: variables, --debug, endpoints. */
static void config(void)
{
    if (configured)
        return;
    configured = true;
    ctl__env_apply();
    if (ctl_g.debug)
        ctl__debug_dump();
    if (ctl_g.discovery_srv[0])
        discover();
    if (eps.n == 0)
        for (size_t i = 0; i < ctl_g.endpoints.n; i++)
            add_trimmed(&eps, ctl_g.endpoints.v[i]);
}

enum ctl_output ctl_output_format(void)
{
    config();
    static const char *const names[] = {"simple", "json", "protobuf",
                                        "fields", "table"};
    for (int i = 0; i < 5; i++)
        if (strcmp(ctl_g.write_out, names[i]) == 0)
            return (enum ctl_output)i;
    ctl_exit(CTL_EXIT_BAD_FEATURE, "unsupported output format");
}

const struct ctl_strings *ctl_endpoint_list(void)
{
    config();
    return &eps;
}

const char *ctl_endpoints_joined(void)
{
    static char *joined;
    config();
    if (joined)
        return joined;
    size_t len = 1;
    for (size_t i = 0; i < eps.n; i++)
        len += strlen(eps.v[i]) + 1;
    joined = calloc(1, len);
    if (!joined)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < eps.n; i++) {
        if (i)
            strcat(joined, ",");
        strcat(joined, eps.v[i]);
    }
    return joined;
}

int ctl_timeout_ms(void)
{
    int64_t ms = ctl_g.command_timeout_ns / 1000000;
    if (ms < 1)
        return 1;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* read_file reads a PEM file for TLS; exits with Go's open error. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        ctl_exit(CTL_EXIT_BAD_ARGS, "open %s: %s", path,
                 errno == ENOENT ? "no such file or directory"
                                 : strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *g = realloc(buf, cap);
            if (!g)
                ctl_exit(CTL_EXIT_ERROR, "out of memory");
            buf = g;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (!buf && !(buf = calloc(1, 1)))
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    buf[len] = '\0';
    return buf;
}

/* tls_config builds the TLS settings from --cert/--key/--cacert,
 * --insecure-transport and --insecure-skip-tls-verify; NULL = none. */
static const struct cetcd_tls *tls_config(void)
{
    static struct cetcd_tls tls;
    static bool done, use;
    if (done)
        return use ? &tls : NULL;
    done = true;
    if (ctl_flag_changed("cert") && !ctl_g.cert[0])
        ctl_exit(CTL_EXIT_BAD_ARGS, "empty string is passed to --cert option");
    if (ctl_flag_changed("key") && !ctl_g.key[0])
        ctl_exit(CTL_EXIT_BAD_ARGS, "empty string is passed to --key option");
    if (ctl_flag_changed("cacert") && !ctl_g.cacert[0])
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "empty string is passed to --cacert option");
    bool files = ctl_g.cert[0] || ctl_g.key[0] || ctl_g.cacert[0];
    if (files && (!ctl_g.cert[0] != !ctl_g.key[0]))
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "KeyFile and CertFile must both be present[key: %s, cert: "
                 "%s]",
                 ctl_g.key, ctl_g.cert);
    if (ctl_g.cert[0]) {
        tls.cert_pem = read_file(ctl_g.cert);
        tls.key_pem = read_file(ctl_g.key);
    }
    if (ctl_g.cacert[0])
        tls.ca_pem = read_file(ctl_g.cacert);
    /* a domain from --discovery-srv also makes TLS (its server name) */
    use = files || !ctl_g.insecure_transport ||
          (ctl_g.discovery_srv[0] && !ctl_g.insecure_discovery);
    tls.insecure_skip_verify = ctl_g.insecure_skip_verify;
    return use ? &tls : NULL;
}

/* ------------------------------------------------------------------------
 * Password prompts (etcdctl asks with bgentry/speakeasy)
 * ---------------------------------------------------------------------- */

size_t ctl_go_space_len(const char *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    if (n >= 1 && (b[0] == ' ' || (b[0] >= '\t' && b[0] <= '\r')))
        return 1;
    if (n >= 2 && b[0] == 0xc2 && (b[1] == 0x85 || b[1] == 0xa0))
        return 2; /* U+0085, U+00A0 */
    if (n < 3)
        return 0;
    if (b[0] == 0xe2 && b[1] == 0x80) /* U+2000-200A, 2028, 2029, 202F */
        return (b[2] >= 0x80 && b[2] <= 0x8a) || b[2] == 0xa8 ||
                       b[2] == 0xa9 || b[2] == 0xaf
                   ? 3
                   : 0;
    if ((b[0] == 0xe1 && b[1] == 0x9a && b[2] == 0x80) || /* U+1680 */
        (b[0] == 0xe2 && b[1] == 0x81 && b[2] == 0x9f) || /* U+205F */
        (b[0] == 0xe3 && b[1] == 0x80 && b[2] == 0x80))   /* U+3000 */
        return 3;
    return 0;
}

/* go_trim_space trims s in place as Go's strings.TrimSpace (Unicode
 * spaces at both ends; bytes of invalid UTF-8 are not spaces). */
static void go_trim_space(char *s)
{
    size_t n = strlen(s), k, skip = 0;
    while (skip < n && (k = ctl_go_space_len(s + skip, n - skip)) > 0)
        skip += k;
    memmove(s, s + skip, n - skip + 1);
    n -= skip;
    for (bool cut = true; cut && n > 0;) {
        cut = false;
        /* the last rune is a space if one of its possible lengths is */
        for (k = 1; k <= 3 && k <= n && !cut; k++)
            if (ctl_go_space_len(s + n - k, k) == k) {
                n -= k;
                cut = true;
            }
    }
    s[n] = '\0';
    assert(strlen(s) == n);
}

/* stty runs /bin/stty with one argument on our own standard streams and
 * waits for it: speakeasy turns echo off and on so, and when stdin is not
 * a terminal stty's complaint ("stty: 'standard input': Inappropriate
 * ioctl for device") reaches stderr as it does under etcdctl.  Only
 * fork, execv, write, waitpid and _exit: the signal handler calls it too.
 * Returns 0, or the errno of a failed fork or exec when report. */
static int stty(const char *arg, bool report)
{
    int fds[2] = {-1, -1}, e = 0;
    if (report && (pipe(fds) != 0 || fcntl(fds[1], F_SETFD, FD_CLOEXEC)))
        return errno;
    pid_t pid = fork();
    if (pid == 0) {
        char *const argv[] = {"stty", (char *)arg, NULL};
        execv("/bin/stty", argv);
        e = errno;
        if (report && write(fds[1], &e, sizeof e) < 0)
            _exit(126);
        _exit(127);
    }
    if (pid < 0)
        e = errno;
    if (report) {
        close(fds[1]);
        if (pid > 0 && read(fds[0], &e, sizeof e) != (ssize_t)sizeof e)
            e = 0; /* closed on a successful exec */
        close(fds[0]);
    }
    while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        continue;
    return e;
}

/* on_signal: speakeasy turns echo back on and exits with -1 when the
 * prompt is interrupted. */
static void on_signal(int sig)
{
    (void)sig;
    (void)stty("echo", false);
    _exit(255);
}

/* go_errno writes Go's text for an errno (strerror, lower-case first). */
static void go_errno(char *buf, size_t cap, const char *pfx, int e)
{
    char lower[128];
    snprintf(lower, sizeof lower, "%s", strerror(e));
    if (lower[0] >= 'A' && lower[0] <= 'Z')
        lower[0] = (char)(lower[0] - 'A' + 'a');
    snprintf(buf, cap, "%s%s", pfx, lower);
}

/* read_line reads stdin one byte at a time up to a newline or the end,
 * as speakeasy does (so later readers of stdin see the rest).  Returns a
 * malloc'd line, or NULL with errno set. */
static char *read_line(void)
{
    size_t len = 0, cap = 64;
    char *buf = malloc(cap);
    for (; buf;) {
        char c;
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            errno = e;
            return NULL;
        }
        if (r == 0 || c == '\n')
            break;
        if (len + 2 > cap) {
            char *g = realloc(buf, cap *= 2);
            if (!g)
                free(buf);
            buf = g;
            if (!g)
                break;
        }
        buf[len++] = c;
    }
    if (!buf)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    buf[len] = '\0';
    return buf;
}

char *ctl_password_ask(const char *prompt, char *err, size_t cap)
{
    assert(prompt && err && cap > 0);
    fputs(prompt, stdout);
    fflush(stdout);
    struct sigaction sa = {0}, old[4];
    static const int sigs[4] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    sa.sa_handler = on_signal;
    for (int i = 0; i < 4; i++)
        sigaction(sigs[i], &sa, &old[i]);
    char *pw = NULL;
    int e = stty("-echo", true);
    if (e != 0) {
        go_errno(err, cap, "failed turning off console echo for password "
                           "entry:\n\t", e);
    } else {
        pw = read_line();
        if (!pw)
            go_errno(err, cap, "failed during password entry: read "
                               "/dev/stdin: ", errno);
        (void)stty("echo", false);
    }
    for (int i = 0; i < 4; i++)
        sigaction(sigs[i], &old[i], NULL);
    fputc('\n', stdout);
    fflush(stdout);
    if (pw) {
        size_t n = strlen(pw);
        if (n > 0 && pw[n - 1] == '\r')
            pw[n - 1] = '\0';
        go_trim_space(pw);
    }
    return pw;
}

/* credentials returns --user's name and password once per run (the
 * prompt is asked once however many clients are made), as etcdctl's
 * authCfgFromCmd: "--user name" prompts, "--user name:pw" splits at the
 * first colon, --password takes the whole --user as the name. */
static void credentials(const char **name_out, const char **pw_out)
{
    static char *name, *pw;
    static bool done;
    if (!done) {
        done = true;
        name = strdup(ctl_g.user);
        char *colon = name ? strchr(name, ':') : NULL;
        char err[256];
        if (!name)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        if (ctl_g.password[0])
            pw = strdup(ctl_g.password);
        else if (colon)
            *colon = '\0', pw = strdup(colon + 1);
        else if (!(pw = ctl_password_ask("Password: ", err, sizeof err)))
            ctl_exit(CTL_EXIT_ERROR, "%s", err);
        if (!pw)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
    }
    *name_out = name;
    *pw_out = pw;
}

/* The token the last Authenticate got (ctl_client_token). */
static char *last_token;

/* get_token authenticates on c with the credentials and installs the
 * token, as clientv3's getToken; returns 0 or the failed call's code with
 * its status in st (the failure logged as clientv3 logs it: etcd's e2e
 * tests look for that line when --user meets a server without auth). */
static int get_token(struct cetcd_client *c, const char *user,
                     const char *pw, struct cetcd_status *st)
{
    Etcdserverpb__AuthenticateRequest req =
        ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    req.name = (char *)user;
    req.password = (char *)pw;
    ProtobufCMessage *resp = NULL;
    int rc = ctl_unary(c, "/etcdserverpb.Auth/Authenticate", &req.base,
                       &etcdserverpb__authenticate_response__descriptor,
                       &resp, st);
    if (rc != 0)
        return rc;
    Etcdserverpb__AuthenticateResponse *ar =
        (Etcdserverpb__AuthenticateResponse *)resp;
    if (cetcd_client_token_set(c, ar->token) != 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    free(last_token);
    if (!(last_token = strdup(ar->token)))
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

/* authenticate gets a token for --user on c, as clientv3 does at New:
 * only when both the name and the password are not empty, and a server
 * without auth ("authentication is not enabled") is used without one. */
static void authenticate(struct cetcd_client *c)
{
    if (!ctl_g.user[0])
        return;
    const char *user, *pw;
    credentials(&user, &pw);
    if (!user[0] || !pw[0])
        return;
    struct cetcd_status st = {0};
    if (get_token(c, user, pw, &st) != 0 &&
        strcmp(st.message, "etcdserver: authentication is not enabled") != 0)
        ctl_exit_status(CTL_EXIT_BAD_CONNECTION, &st);
}

/* auth_retry says whether clientv3's retry interceptor would send a
 * failed call again: after "invalid auth token" or "revision of auth
 * store is old" (a token that expired, or auth data changed under a
 * CN-authenticated call), and after "user name is empty" when it has
 * credentials; it gets a new token first when it has credentials, and
 * a failure there ends the command with that error. */
static bool auth_retry(struct cetcd_client *c, const struct cetcd_status *st)
{
    const char *user = "", *pw = "", *m = st->message;
    if (ctl_g.user[0])
        credentials(&user, &pw);
    bool creds = user[0] && pw[0];
    if (strcmp(m, "etcdserver: invalid auth token") != 0 &&
        strcmp(m, "etcdserver: revision of auth store is old") != 0 &&
        !(creds && strcmp(m, "etcdserver: user name is empty") == 0))
        return false;
    if (!creds)
        return true;
    /* the token goes first, as clientv3's refreshToken clears it: an
     * Authenticate that carries an expired token is refused with that
     * same "invalid auth token" (etcd checks any token a proposal
     * carries, and Authenticate is a proposal) */
    if (cetcd_client_token_set(c, NULL) != 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    struct cetcd_status rst = {0};
    if (get_token(c, user, pw, &rst) != 0)
        ctl_exit_status(CTL_EXIT_ERROR, &rst);
    return true;
}

const char *ctl_client_token(void) { return last_token; }

void ctl_require_leader(void) { require_leader = true; }

struct cetcd_client *ctl_client_for(const char *endpoints)
{
    config();
    struct cetcd_client_opts o = {0};
    o.endpoints = endpoints;
    if (require_leader) {
        o.md_key = "hasleader";
        o.md_value = "true";
    }
    /* etcdctl's calls wait for a connection within the command's own
     * deadline (its dial does not block) */
    o.dial_timeout_ms = ctl_timeout_ms();
    o.call_timeout_ms = ctl_timeout_ms();
    o.tls = tls_config();
    /* grpc-go raises a keepalive time under 10 s to 10 s (etcdctl's
     * default 2s becomes 10 s); 0 turns keepalive off, as in clientv3 */
    int64_t ka = ctl_g.keepalive_time_ns / 1000000;
    if (ka > 0) {
        o.keepalive_time_ms = ka < 10000 ? 10000
                              : ka > INT32_MAX ? INT32_MAX : (int)ka;
        int64_t kt = ctl_g.keepalive_timeout_ns / 1000000;
        o.keepalive_timeout_ms = kt <= 0 ? 0 : kt > INT32_MAX ? INT32_MAX
                                                              : (int)kt;
    }
    struct cetcd_client *c = NULL;
    struct cetcd_status st = {0};
    if (cetcd_client_open(&o, &c, &st) != 0)
        ctl_exit(CTL_EXIT_BAD_CONNECTION, "%s", st.message);
    authenticate(c);
    return c;
}

struct cetcd_client *ctl_client(void)
{
    if (!client)
        client = ctl_client_for(ctl_endpoints_joined());
    return client;
}

/* client_uuid: the random id clientv3 puts in its balancer target
 * ("endpoint://client-<uuid>/host:port"), one per process here. */
static const char *client_uuid(void)
{
    static char id[40];
    if (id[0])
        return id;
    unsigned char b[16] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(b, 1, sizeof b, f) != sizeof b)
            b[0] ^= (unsigned char)getpid();
        fclose(f);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(id, sizeof id,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x"
             "%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
             b[10], b[11], b[12], b[13], b[14], b[15]);
    return id;
}

/* zap_ts writes zap's ISO8601 time with milliseconds and Go's zone. */
static void zap_ts(char *out, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char base[24], zone[8];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    if (tm.tm_gmtoff == 0)
        snprintf(zone, sizeof zone, "Z");
    else
        strftime(zone, sizeof zone, "%z", &tm);
    snprintf(out, cap, "%s.%03ld%s", base, ts.tv_nsec / 1000000, zone);
}

void ctl_warn_unary_failed(struct cetcd_client *c,
                           const struct cetcd_status *st)
{
    char ts[64], err[600];
    zap_ts(ts, sizeof ts);
    if (st->code == CETCD_UNAVAILABLE &&
        strncmp(st->message, "etcdserver: ", 12) != 0)
        /* no endpoint answered: grpc-go's picker error at the deadline */
        snprintf(err, sizeof err, "rpc error: code = DeadlineExceeded desc "
                                  "= latest balancer error: all SubConns "
                                  "are in TransientFailure");
    else if (st->code == CETCD_DEADLINE_EXCEEDED &&
             strncmp(st->message, "etcdserver: ", 12) != 0)
        snprintf(err, sizeof err, "rpc error: code = DeadlineExceeded desc "
                                  "= context deadline exceeded");
    else
        snprintf(err, sizeof err, "rpc error: code = %s desc = %s",
                 go_code(st->code), st->message);
    fprintf(stderr,
            "{\"level\":\"warn\",\"ts\":\"%s\",\"caller\":\"clientv3/"
            "retry_interceptor.go:62\",\"msg\":\"retrying of unary invoker "
            "failed\",\"target\":\"endpoint://client-%s/%s\","
            "\"attempt\":0,\"error\":\"",
            ts, client_uuid(), cetcd_client_endpoint(c));
    for (const char *p = err; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', stderr);
        if ((unsigned char)*p < 0x20)
            fprintf(stderr, "\\u%04x", (unsigned char)*p);
        else
            fputc(*p, stderr);
    }
    fputs("\"}\n", stderr);
}

int ctl_unary(struct cetcd_client *c, const char *method_path,
              const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc,
              ProtobufCMessage **resp_out, struct cetcd_status *st)
{
    int rc = cetcd_call_unary(c, method_path, req, resp_desc, resp_out, st);
    if (rc != 0)
        ctl_warn_unary_failed(c, st);
    return rc;
}

ProtobufCMessage *ctl_call(const char *method_path,
                           const ProtobufCMessage *req,
                           const ProtobufCMessageDescriptor *resp_desc)
{
    struct cetcd_client *c = ctl_client();
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st = {0};
    /* clientv3 sends a call up to 100 times, 25 ms apart, while its
     * token needs refreshing (auth_retry) */
    for (int attempt = 1;; attempt++) {
        if (ctl_unary(c, method_path, req, resp_desc, &resp, &st) == 0)
            return resp;
        if (attempt >= 100 || !auth_retry(c, &st))
            ctl_exit_status(CTL_EXIT_ERROR, &st);
        nanosleep(&(struct timespec){0, 25 * 1000 * 1000}, NULL);
    }
}

char *ctl_read_stdin(size_t *len_out)
{
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[65536];
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *g = realloc(buf, cap);
            if (!g) {
                free(buf);
                return NULL;
            }
            buf = g;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    if (!buf && !(buf = calloc(1, 1)))
        return NULL;
    buf[len] = '\0';
    *len_out = len;
    return buf;
}
