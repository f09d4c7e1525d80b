/*
 * grpc_proxy.c - `cetcd grpc-proxy start`: the main flow of etcd 3.4's
 * grpc-proxy command, from its parsed flags (grpc_proxy_flags.c) to a
 * running grpcproxy/ (its config, the signals, READY=1), and the plain
 * error lines the other files print.  See grpc_proxy.h.
 *
 * The steps of etcd's startGRPCProxy, in its order: checkArgs (with the
 * flags), the zap logger, the listener's TLS (--listen-cipher-suites,
 * --auto-tls; grpc_proxy_tls.c), the listen address
 * (grpc_proxy_listen.c), the TLS listener, the upstream client
 * (--discovery-srv or --endpoints, its TLS), then serving.  One
 * difference of order: etcd logs "listening for gRPC proxy client
 * requests" before it builds the client; here grpcproxy_start logs it,
 * after the client's checks.
 */
#include "cmd/grpc_proxy.h"

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "cetcd/cetcd.h"
#include "cmd/gateway.h"
#include "cmd/grpc_proxy_int.h"
#include "cmd/notify.h"
#include "grpcproxy/grpcproxy.h"
#include "rpc/rpc.h"
#include "util/log.h"
#include "util/mem.h"

/* etcd's newClientCfg: DialTimeout 5 s. */
#define DIAL_TIMEOUT_MS 5000
/* clientv3's send limit when --max-send-bytes <= 0. */
#define SEND_DEFAULT_BYTES (2u << 20)
/* etcd's proxy server is grpc.NewServer without MaxRecvMsgSize: grpc-go's
 * 4 MiB receive limit.  rpc/ adds 512 KiB to max_request_bytes. */
#define SERVER_RECV_BYTES ((4u << 20) - (512u << 10))

/* --- logging ------------------------------------------------------------ */

int grpc_proxy__plain_error(const char *fmt, ...)
{
    va_list ap;
    log_close(); /* drains the lines logged so far */
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int grpc_proxy__std_fatal(const char *msg)
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

/* --- the upstream client ------------------------------------------------ */

/* --discovery-srv's endpoints (gateway_discover), else --endpoints, joined
 * for libcetcd into *out (mem_free): clientv3 takes both "host:port" and
 * URLs as they are. */
static int endpoints_join(const struct grpc_proxy_flag_value *v, char **out)
{
    static struct gateway_endpoint found[GRPC_PROXY_LIST_MAX];
    const struct grpc_proxy_flag_value *srv = &v[GRPC_PROXY_F_SRV];
    const struct grpc_proxy_flag_value *eps_flag = &v[GRPC_PROXY_F_ENDPOINTS];
    const char *eps[GRPC_PROXY_LIST_MAX];
    size_t n = 0, len = 1;
    assert(*out == NULL);
    if (srv->s[0] != '\0' &&
        gateway_discover(srv->s, v[GRPC_PROXY_F_SRV_NAME].s,
                         v[GRPC_PROXY_F_INSECURE_DISC].b, found,
                         GRPC_PROXY_LIST_MAX, &n) != 0)
        return 1;
    for (size_t i = 0; i < n; i++)
        eps[i] = found[i].url;
    if (n == 0)
        for (; n < eps_flag->n; n++)
            eps[n] = eps_flag->list[n];
    for (size_t i = 0; i < n; i++)
        len += strlen(eps[i]) + 1;
    char *s = mem_malloc(len);
    if (s == NULL)
        return grpc_proxy__plain_error("cetcd: out of memory");
    s[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(s, ",");
        strcat(s, eps[i]);
    }
    assert(strlen(s) < len);
    *out = s;
    return 0;
}

/* --- serving ------------------------------------------------------------ */

/* An int flag as an int, clamped. */
static int clamp_int(int64_t i)
{
    return i > INT_MAX ? INT_MAX : i < INT_MIN ? INT_MIN : (int)i;
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

/* Fills the proxy's config from the flags, the listener's TLS t, the
 * endpoints and the client's TLS c, starts it, tells systemd and serves
 * until a signal. */
static int serve(const struct grpc_proxy_flag_value *v,
                 const struct grpc_proxy_srv_tls *t, const char *endpoints,
                 const struct grpc_proxy_cli_tls *c, const sigset_t *stop)
{
    char url[1100];
    assert(endpoints != NULL && endpoints[0] != '\0');
    assert(t->on == (t->tls != NULL));
    snprintf(url, sizeof url, "%s://%s", t->tls ? "https" : "http",
             v[GRPC_PROXY_F_LISTEN].s);
    struct rpc_server_config sc = {.urls = {url}, .urls_n = 1,
                                   .max_request_bytes = SERVER_RECV_BYTES};
    /* etcd's default (math.MaxUint32: unlimited) is rpc/'s bounded one */
    int64_t streams = v[GRPC_PROXY_F_STREAMS].i;
    sc.max_concurrent_streams = streams == UINT32_MAX ? 0 : (uint32_t)streams;
    grpc_proxy__srv_tls_apply(t, &sc);
    int64_t recv = v[GRPC_PROXY_F_RECV].i, send = v[GRPC_PROXY_F_SEND].i;
    struct cetcd_client_opts co = {
        .endpoints = endpoints, .dial_timeout_ms = DIAL_TIMEOUT_MS,
        .max_recv_bytes = recv > 0 ? clamp_int(recv) : INT32_MAX,
        .tls = c->on ? &c->tls : NULL};
    struct grpcproxy_config gc = {
        .server = &sc, .client = &co,
        .max_send_bytes = send > 0 ? (size_t)send : SEND_DEFAULT_BYTES,
        .ns = v[GRPC_PROXY_F_NS].s,
        .advertise_url = v[GRPC_PROXY_F_ADVERTISE].s,
        .resolver_prefix = v[GRPC_PROXY_F_PREFIX].s,
        .resolver_ttl = clamp_int(v[GRPC_PROXY_F_TTL].i),
        .metrics_url = v[GRPC_PROXY_F_METRICS].s};
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
static int run(const struct grpc_proxy_flag_value *v)
{
    struct grpc_proxy_srv_tls t;
    struct grpc_proxy_cli_tls c;
    char *endpoints = NULL, bound[128];
    sigset_t stop;
    memset(&t, 0, sizeof t);
    memset(&c, 0, sizeof c);
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    int rc = log_setup(v[GRPC_PROXY_F_DEBUG].b, &stop);
    if (rc == 0)
        rc = grpc_proxy__srv_tls_prepare(v, &t);
    if (rc == 0)
        rc = grpc_proxy__listen_probe(v[GRPC_PROXY_F_LISTEN].s, bound,
                                      sizeof bound);
    if (rc == 0)
        rc = grpc_proxy__srv_tls_load(v, &t, bound);
    if (rc == 0)
        rc = endpoints_join(v, &endpoints);
    if (rc == 0)
        rc = grpc_proxy__cli_tls_load(v, &c);
    if (rc == 0 && endpoints[0] == '\0')
        rc = grpc_proxy__plain_error("etcdclient: no available endpoints");
    if (rc == 0)
        rc = serve(v, &t, endpoints, &c, &stop);
    grpc_proxy__srv_tls_close(&t);
    grpc_proxy__cli_tls_close(&c);
    mem_free(endpoints);
    return rc;
}

/* --- the command -------------------------------------------------------- */

int grpc_proxy_main(int argc, char **argv)
{
    static struct grpc_proxy_flag_value vals[GRPC_PROXY_F_N];
    bool start = false;
    assert(argc >= 2 && strcmp(argv[1], "grpc-proxy") == 0);
    int rc = grpc_proxy__flags_parse(argc, argv, vals, &start);
    if (rc == 0 && start)
        rc = run(vals);
    grpc_proxy__flags_free(vals);
    return rc;
}
