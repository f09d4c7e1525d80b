/*
 * proxy.c - the grpc-proxy's life cycle: the upstream client and its
 * completion thread, the server with one route per etcd method, the
 * metadata passed up.  See grpcproxy.h.
 */
#include "grpcproxy/grpcproxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpcproxy/grpcproxy_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

/* Every method of etcd 3.4's eight services. */
#define U(path, kind) {path, kind, false, RPC_TYPE_UNARY}
#define S(path, wire) {path, GP_PLAIN, true, wire}
const struct gp_method gp_methods[] = {
    U("/etcdserverpb.KV/Range", GP_RANGE),
    U("/etcdserverpb.KV/Put", GP_PUT),
    U("/etcdserverpb.KV/DeleteRange", GP_DELETE),
    U("/etcdserverpb.KV/Txn", GP_TXN),
    U("/etcdserverpb.KV/Compact", GP_COMPACT),
    S("/etcdserverpb.Watch/Watch", RPC_TYPE_BIDI_STREAM),
    U("/etcdserverpb.Lease/LeaseGrant", GP_PLAIN),
    U("/etcdserverpb.Lease/LeaseRevoke", GP_PLAIN),
    S("/etcdserverpb.Lease/LeaseKeepAlive", RPC_TYPE_BIDI_STREAM),
    U("/etcdserverpb.Lease/LeaseTimeToLive", GP_PLAIN),
    U("/etcdserverpb.Lease/LeaseLeases", GP_PLAIN),
    U("/etcdserverpb.Cluster/MemberAdd", GP_PLAIN),
    U("/etcdserverpb.Cluster/MemberRemove", GP_PLAIN),
    U("/etcdserverpb.Cluster/MemberUpdate", GP_PLAIN),
    U("/etcdserverpb.Cluster/MemberList", GP_MEMBER_LIST),
    U("/etcdserverpb.Cluster/MemberPromote", GP_MEMBER_PROMOTE),
    U("/etcdserverpb.Maintenance/Alarm", GP_PLAIN),
    U("/etcdserverpb.Maintenance/Status", GP_PLAIN),
    U("/etcdserverpb.Maintenance/Defragment", GP_PLAIN),
    U("/etcdserverpb.Maintenance/Hash", GP_PLAIN),
    U("/etcdserverpb.Maintenance/HashKV", GP_PLAIN),
    S("/etcdserverpb.Maintenance/Snapshot", RPC_TYPE_SERVER_STREAM),
    U("/etcdserverpb.Maintenance/MoveLeader", GP_PLAIN),
    U("/etcdserverpb.Auth/AuthEnable", GP_PLAIN),
    U("/etcdserverpb.Auth/AuthDisable", GP_PLAIN),
    U("/etcdserverpb.Auth/Authenticate", GP_PLAIN),
    U("/etcdserverpb.Auth/UserAdd", GP_PLAIN),
    U("/etcdserverpb.Auth/UserGet", GP_PLAIN),
    U("/etcdserverpb.Auth/UserList", GP_PLAIN),
    U("/etcdserverpb.Auth/UserDelete", GP_PLAIN),
    U("/etcdserverpb.Auth/UserChangePassword", GP_PLAIN),
    U("/etcdserverpb.Auth/UserGrantRole", GP_PLAIN),
    U("/etcdserverpb.Auth/UserRevokeRole", GP_PLAIN),
    U("/etcdserverpb.Auth/RoleAdd", GP_PLAIN),
    U("/etcdserverpb.Auth/RoleGet", GP_PLAIN),
    U("/etcdserverpb.Auth/RoleList", GP_PLAIN),
    U("/etcdserverpb.Auth/RoleDelete", GP_PLAIN),
    U("/etcdserverpb.Auth/RoleGrantPermission", GP_PLAIN),
    U("/etcdserverpb.Auth/RoleRevokePermission", GP_PLAIN),
    S("/v3electionpb.Election/Campaign", RPC_TYPE_UNARY),
    U("/v3electionpb.Election/Proclaim", GP_PLAIN),
    U("/v3electionpb.Election/Leader", GP_PLAIN),
    S("/v3electionpb.Election/Observe", RPC_TYPE_SERVER_STREAM),
    U("/v3electionpb.Election/Resign", GP_PLAIN),
    S("/v3lockpb.Lock/Lock", RPC_TYPE_UNARY),
    U("/v3lockpb.Lock/Unlock", GP_PLAIN),
};
#undef U
#undef S
const size_t gp_methods_n = sizeof gp_methods / sizeof gp_methods[0];

/* The proxy's own gRPC receive limit: grpc-go's server default (4 MiB),
 * which etcd's proxy keeps; rpc/ adds 512 KiB to max_request_bytes. */
#define GP_RECV_LIMIT (4u << 20)
#define GP_DEFAULT_MAX_SEND (1536u * 1024)
/* What an upstream stream may send ahead of the proxy: a stream paused for
 * a slow client (stream.c) holds this at most, plus one message. */
#define GP_STREAM_WINDOW (256 * 1024)

size_t gp_md_fill(const char *(*get)(const void *obj, const char *key,
                                     size_t *len),
                  const void *obj, struct cetcd_md *md, char *buf,
                  size_t cap)
{
    static const char *const keys[] = {"token", "hasleader"};
    size_t n = 0, used = 0;

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        size_t len = 0;
        const char *v = get(obj, keys[i], &len);
        if (v == NULL || used + len + 1 > cap)
            continue;
        memcpy(buf + used, v, len);
        buf[used + len] = '\0';
        md[n].key = keys[i];
        md[n].value = buf + used;
        used += len + 1;
        n++;
    }
    return n;
}

bool gp_ns_apply(const struct grpcproxy *p, const char *method, bool reply,
                 const uint8_t **msg, size_t *len, uint8_t **out,
                 int *code_out, const char **msg_out)
{
    size_t out_len = 0;
    enum gp_ns_result r;

    *out = NULL;
    if (p->ns == NULL)
        return true;
    r = reply ? gp_ns_reply(p->ns, p->ns_len, method, *msg, *len, out,
                            &out_len, code_out, msg_out)
              : gp_ns_request(p->ns, p->ns_len, method, *msg, *len, out,
                              &out_len, code_out, msg_out);
    if (r == GP_NS_ERROR)
        return false;
    if (r == GP_NS_NEW) {
        *msg = *out;
        *len = out_len;
    }
    return true;
}

bool gp_too_big(const struct grpcproxy *p, size_t len, char *msg,
                size_t cap)
{
    if (len <= p->max_send)
        return false;
    snprintf(msg, cap, "trying to send message larger than max (%zu vs. %zu)",
             len, p->max_send);
    return true;
}

/* queue_main runs the upstream completions until close has begun and
 * nothing is pending. */
static void *queue_main(void *arg)
{
    struct grpcproxy *p = arg;

    thread_name_set(pthread_self(), "proxy-upstream");
    while (!atomic_load(&p->stopping) ||
           cetcd_async_queue_pending(p->q) > 0)
        cetcd_async_queue_run(p->q, 100);
    return NULL;
}

/* strings_set keeps the namespace, advertise address, resolver prefix
 * and TTL, and the host name (MemberList and the registration name it). */
static int strings_set(struct grpcproxy *p, const struct grpcproxy_config *cfg)
{
    char host[256] = "";

    if (cfg->ns != NULL && cfg->ns[0] != '\0') {
        p->ns_len = strlen(cfg->ns);
        p->ns = (uint8_t *)strdup(cfg->ns);
        if (p->ns == NULL)
            return ERR_NOMEM;
    }
    if (cfg->advertise_url != NULL && cfg->advertise_url[0] != '\0' &&
        (p->advertise = strdup(cfg->advertise_url)) == NULL)
        return ERR_NOMEM;
    if (cfg->resolver_prefix != NULL && cfg->resolver_prefix[0] != '\0' &&
        (p->prefix = strdup(cfg->resolver_prefix)) == NULL)
        return ERR_NOMEM;
    p->ttl = cfg->resolver_ttl;
    if (gethostname(host, sizeof host - 1) == 0)
        snprintf(p->hostname, sizeof p->hostname, "%s", host);
    return 0;
}

/* metrics_target: /metrics asks the first endpoint (etcd shuffles them
 * and takes the first), over TLS with the client's material (--cacert,
 * --cert, --key, --insecure-skip-tls-verify) for an https:// one, or a
 * bare one when that material is given (http.c). */
static int metrics_target(struct grpcproxy *p,
                          const struct cetcd_client_opts *c)
{
    const char *e = c->endpoints, *end = strchr(e, ',');
    size_t n = end != NULL ? (size_t)(end - e) : strlen(e);

    while (n > 0 && (*e == ' ' || *e == '\t'))
        e++, n--;
    if (n > 8 && strncmp(e, "https://", 8) == 0)
        p->metrics_scheme = GP_SCHEME_HTTPS, e += 8, n -= 8;
    else if (n > 7 && strncmp(e, "http://", 7) == 0)
        p->metrics_scheme = GP_SCHEME_HTTP, e += 7, n -= 7;
    while (n > 0 && (e[n - 1] == '/' || e[n - 1] == ' '))
        n--;
    p->metrics_target = strndup(e, n);
    if (p->metrics_target == NULL)
        return ERR_NOMEM;
    if (c->tls != NULL) {
        /* etcd 3.4 uses the CA only with a certificate and key too (else
         * the system's CAs); here the CA given is always the one. */
        struct dial_tls t = {
            .cert_pem = c->tls->cert_pem,
            .key_pem = c->tls->cert_pem != NULL ? c->tls->key_pem : NULL,
            .ca_pem = c->tls->ca_pem,
            .skip_verify = c->tls->insecure_skip_verify,
        };
        p->metrics_tls = dial_tls_copy(&t);
        if (p->metrics_tls == NULL)
            return ERR_NOMEM;
    }
    return 0;
}

static int serve(struct grpcproxy *p, const struct grpcproxy_config *cfg)
{
    struct rpc_server_config sc = *cfg->server;
    int rc;

    sc.max_request_bytes = GP_RECV_LIMIT - 512 * 1024;
    rc = rpc_server_create(&sc, &p->srv);
    if (rc != 0)
        return rc;
    p->routes = mem_calloc(gp_methods_n, sizeof *p->routes);
    if (p->routes == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < gp_methods_n && rc == 0; i++) {
        const struct gp_method *m = &gp_methods[i];
        p->routes[i] = (struct gp_route){.p = p, .m = m};
        if (!m->stream)
            rc = rpc_server_register_unary(p->srv, m->path, gp_unary,
                                           &p->routes[i]);
        else if (m->wire == RPC_TYPE_UNARY)
            rc = rpc_server_register_stream(p->srv, m->path,
                                            &gp_stream_ops_unary,
                                            &p->routes[i]);
        else if (m->wire == RPC_TYPE_SERVER_STREAM)
            rc = rpc_server_register_stream(p->srv, m->path,
                                            &gp_stream_ops_server,
                                            &p->routes[i]);
        else
            rc = rpc_server_register_stream(p->srv, m->path, &gp_stream_ops,
                                            &p->routes[i]);
    }
    if (rc != 0)
        return rc;
    rpc_server_set_http(p->srv, gp_http, p, NULL);
    rc = rpc_server_start(p->srv);
    if (rc != 0)
        return rc;
    if (cfg->metrics_url != NULL && cfg->metrics_url[0] != '\0') {
        struct rpc_server_config mc = *cfg->server;
        mc.urls[0] = cfg->metrics_url;
        mc.urls_n = 1;
        mc.threads = 1;
        rc = rpc_server_create(&mc, &p->metrics_srv);
        if (rc != 0)
            return rc;
        rpc_server_set_http(p->metrics_srv, gp_http, p, NULL);
        rpc_server_set_http_only(p->metrics_srv);
        rc = rpc_server_start(p->metrics_srv);
        if (rc != 0)
            return rc;
        log_zap(LOG_INFO, "gRPC proxy listening for metrics",
                LOG_STR("address", cfg->metrics_url));
    }
    return 0;
}

/* bare_addr: a listener URL without its scheme, as etcd logs
 * --listen-addr. */
static const char *bare_addr(const char *url)
{
    const char *p = strstr(url, "://");

    return p != NULL ? p + 3 : url;
}

int grpcproxy_start(const struct grpcproxy_config *cfg,
                    struct grpcproxy **out)
{
    struct grpcproxy *p = mem_calloc(1, sizeof *p);
    struct cetcd_client_opts copts;
    struct cetcd_status st;
    int rc;

    *out = NULL;
    if (p == NULL)
        return ERR_NOMEM;
    pthread_mutex_init(&p->reg_mu, NULL);
    pthread_cond_init(&p->reg_cv, NULL);
    p->max_send = cfg->max_send_bytes != 0 ? cfg->max_send_bytes
                                           : GP_DEFAULT_MAX_SEND;
    rc = strings_set(p, cfg);
    if (rc == 0)
        rc = metrics_target(p, cfg->client);
    if (rc == 0)
        rc = gp_cache_open(0, 0, &p->cache);
    if (rc != 0)
        goto fail;
    copts = *cfg->client;
    copts.stream_window_bytes = GP_STREAM_WINDOW;
    if (cetcd_client_open(&copts, &p->cli, &st) != 0) {
        log_zap(LOG_ERROR, "failed to create the gRPC proxy's client",
                LOG_STR("error", st.message));
        rc = ERR_INVAL;
        goto fail;
    }
    if (cetcd_async_queue_open(&p->q) != 0) {
        rc = ERR_NOMEM;
        goto fail;
    }
    if (pthread_create(&p->q_thread, NULL, queue_main, p) != 0) {
        rc = ERR_NOMEM;
        goto fail;
    }
    p->q_started = true;
    rc = serve(p, cfg);
    if (rc != 0) {
        log_zap(LOG_ERROR, "failed to listen for gRPC proxy client requests",
                LOG_STR("address", bare_addr(cfg->server->urls[0])),
                LOG_STR("error", err_str(rc)));
        goto fail;
    }
    log_zap(LOG_INFO, "listening for gRPC proxy client requests",
            LOG_STR("address", bare_addr(cfg->server->urls[0])));
    if (p->prefix != NULL && p->advertise != NULL) {
        rc = gp_register_start(p);
        if (rc != 0)
            goto fail;
    }
    log_zap(LOG_INFO, "started gRPC proxy",
            LOG_STR("address", bare_addr(cfg->server->urls[0])));
    *out = p;
    return 0;
fail:
    grpcproxy_close(p);
    return rc;
}

void grpcproxy_close(struct grpcproxy *p)
{
    if (p == NULL)
        return;
    gp_register_stop(p);
    /* The servers first: their close waits for every call and stream,
     * which the upstream thread answers, so it runs on meanwhile. */
    if (p->metrics_srv != NULL)
        rpc_server_close(p->metrics_srv);
    if (p->srv != NULL)
        rpc_server_close(p->srv);
    atomic_store(&p->stopping, true);
    if (p->q_started)
        pthread_join(p->q_thread, NULL);
    cetcd_async_queue_close(p->q);
    cetcd_client_close(p->cli);
    gp_cache_close(p->cache);
    free(p->routes);
    free(p->ns);
    free(p->advertise);
    free(p->prefix);
    free(p->metrics_target);
    mem_free(p->metrics_tls);
    pthread_mutex_destroy(&p->reg_mu);
    pthread_cond_destroy(&p->reg_cv);
    free(p);
}
