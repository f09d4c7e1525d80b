/*
 * gateway.c - `cetcd gateway start`: etcd 3.4's gateway command (its help,
 * flags, checks and messages) running tcpproxy/.  See gateway.h.
 */
#include "cmd/gateway.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd/flags.h"
#include "cmd/notify.h"
#include "tcpproxy/tcpproxy.h"
#include "util/log.h"

/* A dial of an endpoint gives up after this (etcd: no limit). */
#define GATEWAY_DIAL_TIMEOUT_MS 3000
/* --retry-delay=0: etcd's TCPProxy takes its default monitor interval. */
#define GATEWAY_RETRY_ZERO_MS (5 * 60 * 1000)

static const char gateway_help[] =
    "gateway related command\n"
    "\n"
    "Usage:\n"
    "  etcd gateway [command]\n"
    "\n"
    "Available Commands:\n"
    "  start       start the gateway\n"
    "\n"
    "Flags:\n"
    "  -h, --help   help for gateway\n"
    "\n"
    "Use \"etcd gateway [command] --help\" for more information about a "
    "command.\n";

static const char start_usage[] =
    "Usage:\n"
    "  etcd gateway start [flags]\n"
    "\n"
    "Flags:\n"
    "      --discovery-srv string        DNS domain used to bootstrap "
    "initial cluster\n"
    "      --discovery-srv-name string   service name to query when using "
    "DNS discovery\n"
    "      --endpoints strings           comma separated etcd cluster "
    "endpoints (default [127.0.0.1:2379])\n"
    "  -h, --help                        help for start\n"
    "      --insecure-discovery          accept insecure SRV records\n"
    "      --listen-addr string          listen address (default "
    "\"127.0.0.1:23790\")\n"
    "      --retry-delay duration        duration of delay before retrying "
    "failed endpoints (default 1m0s)\n"
    "      --trusted-ca-file string      path to the client server TLS CA "
    "file for verifying the discovered endpoints when discovery-srv is "
    "provided.\n";

#define ENDPOINTS_MAX TCPPROXY_ENDPOINTS_MAX

struct start_opts {
    const char *listen_addr;
    char *endpoints[ENDPOINTS_MAX];
    uint16_t priority[ENDPOINTS_MAX], weight[ENDPOINTS_MAX]; /* DNS SRV's */
    size_t n_endpoints;
    bool endpoints_set;
    int64_t retry_delay_ns;
    const char *discovery_srv, *discovery_srv_name, *trusted_ca_file;
    bool insecure_discovery;
    bool help;
};

/* cobra's failure: "Error: <msg>", the usage, a blank line on stderr,
 * then etcd's main prints the error once more, without a newline. */
static int usage_error(const char *msg)
{
    fprintf(stderr, "Error: %s\n%s\n%s", msg, start_usage, msg);
    return 1;
}

static bool parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(v, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcmp(v, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

/* pflag's StringSlice: the first use replaces the default, later ones
 * append; the value is comma separated ("" adds nothing). */
static int add_endpoints(struct start_opts *o, const char *v)
{
    if (!o->endpoints_set) {
        for (size_t i = 0; i < o->n_endpoints; i++)
            free(o->endpoints[i]);
        o->n_endpoints = 0;
        o->endpoints_set = true;
    }
    const char *p = v;
    bool more = *p != '\0';
    while (more) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (o->n_endpoints == ENDPOINTS_MAX) {
            fprintf(stderr, "cetcd gateway: more than %d endpoints\n",
                    ENDPOINTS_MAX);
            return 1;
        }
        char *ep = strndup(p, n);
        if (ep == NULL) {
            fprintf(stderr, "cetcd gateway: out of memory\n");
            return 1;
        }
        o->endpoints[o->n_endpoints++] = ep;
        more = comma != NULL; /* "a," is "a" and "" */
        p += n + 1;
    }
    return 0;
}

/* One flag (name without dashes) with its value (NULL: none given).
 * *used: the value was taken. */
static int set_flag(struct start_opts *o, const char *name, const char *v,
                    bool inline_v, bool *used)
{
    char msg[512];
    *used = false;
    if (strcmp(name, "help") == 0 || strcmp(name, "insecure-discovery") == 0) {
        bool b = true;
        if (inline_v && !parse_bool(v, &b)) {
            snprintf(msg, sizeof msg,
                     "invalid argument \"%s\" for \"%s%s\" flag: "
                     "strconv.ParseBool: parsing \"%s\": invalid syntax",
                     v, strcmp(name, "help") == 0 ? "-h, --" : "--", name, v);
            return usage_error(msg);
        }
        if (name[0] == 'h')
            o->help = b;
        else
            o->insecure_discovery = b;
        return 0;
    }
    static const char *const valued[] = {
        "listen-addr", "endpoints", "retry-delay", "discovery-srv",
        "discovery-srv-name", "trusted-ca-file"};
    size_t k = 0;
    while (k < 6 && strcmp(name, valued[k]) != 0)
        k++;
    if (k == 6) {
        snprintf(msg, sizeof msg, "unknown flag: --%s", name);
        return usage_error(msg);
    }
    if (v == NULL) {
        snprintf(msg, sizeof msg, "flag needs an argument: --%s", name);
        return usage_error(msg);
    }
    *used = !inline_v;
    switch (k) {
    case 0:
        o->listen_addr = v;
        return 0;
    case 1:
        return add_endpoints(o, v);
    case 2: {
        int64_t ns;
        if (!flags_parse_duration(v, &ns)) {
            char why[256];
            flags_duration_error(v, why, sizeof why);
            snprintf(msg, sizeof msg,
                     "invalid argument \"%s\" for \"--retry-delay\" flag: %s",
                     v, why);
            return usage_error(msg);
        }
        if (ns < 0) {
            snprintf(msg, sizeof msg,
                     "invalid argument \"%s\" for \"--retry-delay\" flag: "
                     "must not be negative", v);
            return usage_error(msg);
        }
        o->retry_delay_ns = ns;
        return 0;
    }
    case 3:
        o->discovery_srv = v;
        return 0;
    case 4:
        o->discovery_srv_name = v;
        return 0;
    default:
        o->trusted_ca_file = v;
        return 0;
    }
}

/* pflag over args[0..n): --name=v, --name v, -h, "--" ends the flags.
 * Returns 0 or the exit code of an error (printed). */
static int parse_start(struct start_opts *o, char **args, int n)
{
    for (int i = 0; i < n; i++) {
        const char *a = args[i];
        if (strcmp(a, "--") == 0) {
            if (i + 1 < n) {
                char msg[300];
                snprintf(msg, sizeof msg,
                         "unknown command \"%s\" for \"etcd gateway start\"",
                         args[i + 1]);
                return usage_error(msg);
            }
            return 0;
        }
        if (a[0] != '-' || a[1] == '\0') {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "unknown command \"%s\" for \"etcd gateway start\"", a);
            return usage_error(msg);
        }
        if (a[1] != '-') { /* shorthands: only -h */
            for (const char *c = a + 1; *c != '\0'; c++) {
                if (*c == 'h') {
                    o->help = true;
                    continue;
                }
                char msg[300];
                snprintf(msg, sizeof msg,
                         "unknown shorthand flag: '%c' in -%s", *c, c);
                return usage_error(msg);
            }
            continue;
        }
        char name[128];
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (len >= sizeof name)
            len = sizeof name - 1;
        memcpy(name, a + 2, len);
        name[len] = '\0';
        const char *v = eq ? eq + 1 : (i + 1 < n ? args[i + 1] : NULL);
        bool used;
        int rc = set_flag(o, name, v, eq != NULL, &used);
        if (rc != 0)
            return rc;
        if (used)
            i++;
    }
    return 0;
}

static int refuse_unbuilt(const struct start_opts *o)
{
    if (o->trusted_ca_file[0] == '\0')
        return 0;
    fprintf(stderr,
            "cetcd: --trusted-ca-file is not supported yet: the feature "
            "behind it (a TLS check of the endpoints --discovery-srv finds) "
            "is not built in this version of cetcd\n");
    return 1;
}

/* url.Parse(ep).Host when ep is a URL with a host, else ep: etcd strips the
 * scheme because the gateway proxies TCP. */
static void strip_scheme(char *ep)
{
    char *s = strstr(ep, "://");
    if (s == NULL)
        return;
    char *host = s + 3;
    size_t n = strcspn(host, "/?#");
    if (n == 0)
        return;
    char *at = memchr(host, '@', n); /* user info is not part of Host */
    if (at != NULL) {
        n -= (size_t)(at + 1 - host);
        host = at + 1;
    }
    memmove(ep, host, n);
    ep[n] = '\0';
}

/* The numeric addresses name resolves to (AF_INET/AF_INET6), as strings;
 * false when it does not resolve. */
static bool lookup_host(const char *name, char addrs[][64], size_t cap,
                        size_t *n_out)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    *n_out = 0;
    if (name[0] == '\0' || getaddrinfo(name, NULL, &hints, &res) != 0)
        return false;
    for (struct addrinfo *a = res; a != NULL && *n_out < cap; a = a->ai_next) {
        if (getnameinfo(a->ai_addr, a->ai_addrlen, addrs[*n_out], 64, NULL, 0,
                        NI_NUMERICHOST) == 0)
            (*n_out)++;
    }
    freeaddrinfo(res);
    return *n_out > 0;
}

/* net.Listen("tcp", addr): an IPv4 address first, as Go prefers; the
 * listening fd, or -1 with Go's error printed on stderr. */
static int listen_on(const char *host, const char *port, const char *addr)
{
    struct addrinfo hints, *res = NULL, *pick = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        fprintf(stderr, "listen tcp %s: %s\n", addr, gai_strerror(g));
        return -1;
    }
    for (struct addrinfo *a = res; a != NULL && pick == NULL; a = a->ai_next)
        if (a->ai_family == AF_INET)
            pick = a;
    if (pick == NULL)
        pick = res;
    int fd = socket(pick->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
                    SOCK_CLOEXEC, 0);
    int one = 1;
    const char *op = "socket";
    if (fd >= 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        op = "bind";
        if (bind(fd, pick->ai_addr, pick->ai_addrlen) == 0) {
            op = "listen";
            if (listen(fd, 4096) == 0) {
                freeaddrinfo(res);
                return fd;
            }
        }
    }
    char text[128];
    tcpproxy_errno_text(errno, text, sizeof text);
    fprintf(stderr, "listen tcp %s: %s: %s\n", addr, op, text);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return -1;
}

static struct tcpproxy *running;
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
    if (running != NULL)
        tcpproxy_stop(running);
}

/* etcd's checks before it listens, in its order; 0 or the exit code. */
static int check_addresses(struct start_opts *o, char *lhost, size_t lcap,
                           char *lport, size_t pcap)
{
    char host[256], port[8];
    for (size_t i = 0; i < o->n_endpoints; i++) {
        strip_scheme(o->endpoints[i]);
        if (!tcpproxy_split_host_port(o->endpoints[i], host, sizeof host,
                                      port, sizeof port)) {
            printf("error parsing endpoint \"%s\"", o->endpoints[i]);
            return 1;
        }
    }
    if (!tcpproxy_split_host_port(o->listen_addr, lhost, lcap, lport, pcap)) {
        printf("failed to validate listen address: %s\n", o->listen_addr);
        return 1;
    }
    static char laddrs[16][64], eaddrs[16][64];
    size_t nl, ne;
    if (!lookup_host(lhost, laddrs, 16, &nl)) {
        printf("failed to resolve listen host: %s\n", lhost);
        return 1;
    }
    for (size_t i = 0; i < o->n_endpoints; i++) {
        tcpproxy_split_host_port(o->endpoints[i], host, sizeof host, port,
                                 sizeof port);
        if (!lookup_host(host, eaddrs, 16, &ne)) {
            printf("failed to resolve endpoint host: %s\n", host);
            return 1;
        }
        if (atoi(port) != atoi(lport))
            continue;
        for (size_t e = 0; e < ne; e++) {
            for (size_t l = 0; l < nl; l++) {
                if (strcmp(eaddrs[e], laddrs[l]) != 0)
                    continue;
                printf("SRV or endpoint (%s:%d->%s:%d) should not resolve to "
                       "the gateway listen addr (%s)\n", host, atoi(port),
                       eaddrs[e], atoi(port), o->listen_addr);
                return 1;
            }
        }
    }
    if (o->n_endpoints == 0) {
        printf("no endpoints found\n");
        return 1;
    }
    return 0;
}

/* --discovery-srv: the endpoints found replace --endpoints' (which stay
 * when nothing is found), with their priorities and weights. */
static int discover(struct start_opts *o)
{
    static struct gateway_endpoint found[ENDPOINTS_MAX];
    size_t n = 0;
    if (o->discovery_srv[0] == '\0')
        return 0;
    int rc = gateway_discover(o->discovery_srv, o->discovery_srv_name,
                              o->insecure_discovery, found, ENDPOINTS_MAX,
                              &n);
    if (rc != 0 || n == 0)
        return rc;
    for (size_t i = 0; i < o->n_endpoints; i++)
        free(o->endpoints[i]);
    o->n_endpoints = 0;
    for (size_t i = 0; i < n; i++) {
        char *u = strdup(found[i].url);
        if (u == NULL)
            return 1;
        o->endpoints[i] = u;
        o->priority[i] = found[i].priority;
        o->weight[i] = found[i].weight;
        o->n_endpoints++;
    }
    return 0;
}

static int start(struct start_opts *o)
{
    char lhost[256], lport[8], why[512];
    log_set_zap_epoch_time(true);
    const char *out[] = {"stderr"};
    if (log_open(true, out, 1, why, sizeof why) != 0) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    int rc = discover(o);
    if (rc == 0)
        rc = check_addresses(o, lhost, sizeof lhost, lport, sizeof lport);
    if (rc != 0)
        return rc;
    int lfd = listen_on(lhost, lport, o->listen_addr);
    if (lfd < 0)
        return 1;
    int64_t delay_ms = o->retry_delay_ns / 1000000;
    if (o->retry_delay_ns == 0)
        delay_ms = GATEWAY_RETRY_ZERO_MS;
    else if (delay_ms == 0)
        delay_ms = 1;
    static struct tcpproxy_endpoint eps[ENDPOINTS_MAX];
    for (size_t i = 0; i < o->n_endpoints; i++)
        eps[i] = (struct tcpproxy_endpoint){.addr = o->endpoints[i],
                                            .priority = o->priority[i],
                                            .weight = o->weight[i]};
    struct tcpproxy_options po = {
        .listen_fd = lfd,
        .endpoints = eps,
        .n_endpoints = o->n_endpoints,
        .retry_delay_ms = delay_ms,
        .connect_timeout_ms = GATEWAY_DIAL_TIMEOUT_MS,
    };
    struct tcpproxy *p;
    rc = tcpproxy_create(&po, &p, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "cetcd gateway: %s\n", why);
        return 1;
    }
    if (notify_ready() != 0)
        log_zap(LOG_ERROR, "failed to notify systemd for readiness",
                LOG_STR("error", "sd_notify failed"));
    running = p;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = tcpproxy_run(p);
    running = NULL;
    tcpproxy_destroy(p);
    if (rc != 0) {
        log_zap(LOG_ERROR, "gateway loop failed",
                LOG_STR("error", strerror(rc)));
        return 1;
    }
    log_close();
    if (got_signal != 0) {
        signal(got_signal, SIG_DFL);
        raise(got_signal);
    }
    return 0;
}

int gateway_main(int argc, char **argv)
{
    /* cobra finds the subcommand among the arguments that are not flags
     * (or values of the flags that take one). */
    int sub = -1;
    for (int i = 2; i < argc && sub < 0; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            sub = i;
        } else if (a[1] == '-' && strchr(a, '=') == NULL &&
                   strcmp(a, "--help") != 0 &&
                   strcmp(a, "--insecure-discovery") != 0) {
            i++; /* --flag value */
        }
    }
    if (sub < 0 || strcmp(argv[sub], "start") != 0) {
        fputs(gateway_help, stdout);
        return 0;
    }
    struct start_opts o = {
        .listen_addr = "127.0.0.1:23790",
        .retry_delay_ns = 60LL * 1000000000,
        .discovery_srv = "",
        .discovery_srv_name = "",
        .trusted_ca_file = "",
    };
    o.endpoints[0] = strdup("127.0.0.1:2379");
    o.n_endpoints = o.endpoints[0] != NULL;
    /* The flags before and after "start", in their order. */
    char *args[argc];
    int n = 0;
    for (int i = 2; i < argc; i++)
        if (i != sub)
            args[n++] = argv[i];
    int rc = parse_start(&o, args, n);
    srandom((unsigned)time(NULL) ^ (unsigned)getpid()); /* SRV weights */
    if (rc == 0 && o.help) {
        printf("start the gateway\n\n%s", start_usage);
    } else if (rc == 0) {
        rc = refuse_unbuilt(&o);
        if (rc == 0)
            rc = start(&o);
    }
    for (size_t i = 0; i < o.n_endpoints; i++)
        free(o.endpoints[i]);
    return rc;
}
