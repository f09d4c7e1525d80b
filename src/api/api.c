/* api.c - start/stop the client API: runtime config from the member's
 * limits, service registration. */
#include "api/api.h"

#include <stdio.h>
#include <string.h>

#include "api/api_int.h"
#include "rpc/tls.h"
#include "server/server.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* tls_apply points cfg's TLS fields at tls (NULL: no TLS). */
static void tls_apply(const struct rpc_tls *tls, struct rpc_server_config *cfg)
{
    if (tls == NULL)
        return;
    cfg->tls_cert_pem = tls->cert_pem;
    cfg->tls_key_pem = tls->key_pem;
    cfg->tls_ca_pem = tls->ca_pem;
    cfg->tls_verify_clients = tls->verify_clients;
    cfg->tls_ciphers = tls->opts.ciphers;
    cfg->tls_min_version = tls->opts.min_version;
    cfg->tls_max_version = tls->opts.max_version;
    /* The listener re-reads the files when they change (cast: the
     * server only uses tls through rpc_tls_stale/rpc_tls_reload, which
     * lock). */
    cfg->tls_files = (struct rpc_tls *)tls;
    if (rpc_tls_has_client_check(tls)) {
        cfg->tls_check = rpc_tls_client_check;
        cfg->tls_check_ctx = (void *)tls;
    }
}

/* config_init sets cfg to the listeners of the comma-separated urls and to
 * tls, the rest zero.  The urls are copied into buf (cap bytes) and cut up
 * there: buf must outlive the rpc_server_create call. */
static void config_init(struct rpc_server_config *cfg, char *buf, size_t cap,
                        const char *urls, const struct rpc_tls *tls)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(buf, cap, "%s", urls);
    for (char *save, *t = strtok_r(buf, ",", &save);
         t && cfg->urls_n < RPC_URLS_MAX; t = strtok_r(NULL, ",", &save))
        cfg->urls[cfg->urls_n++] = t;
    tls_apply(tls, cfg);
}

/* etcd's learner interceptor: a learner serves only Status and
 * serializable Ranges; everything else gets "rpc not supported for
 * learner" (Unavailable in 3.4, so clients move to another member). */
static bool learner_gate(void *ctx, const char *method, const uint8_t *req,
                         size_t len, grpc_status_code *code_out,
                         const char **msg_out)
{
    struct api *api = ctx;
    if (!server_is_learner(api->server) ||
        strcmp(method, "/etcdserverpb.Maintenance/Status") == 0)
        return true;
    if (strcmp(method, "/etcdserverpb.KV/Range") == 0) {
        Etcdserverpb__RangeRequest *r =
            etcdserverpb__range_request__unpack(NULL, len, req);
        bool ok = r == NULL || r->serializable; /* bad bytes: the handler */
        if (r != NULL)
            etcdserverpb__range_request__free_unpacked(r, NULL);
        if (ok)
            return true;
    }
    *code_out = GRPC_STATUS_UNAVAILABLE;
    *msg_out = "etcdserver: rpc not supported for learner";
    return false;
}

static bool gateway_on = true; /* api_gateway_enable; main thread */
static bool http_split;        /* api_client_http_split; main thread */

void api_gateway_enable(bool on)
{
    gateway_on = on;
}

void api_client_http_split(bool on)
{
    http_split = on;
}

/* --cors and --host-whitelist (api_http_access): NULL-ended lists of
 * strings, kept for the process's life; etcd's default "*" for both. */
static const char *const all_allowed[] = {"*", NULL};
static const char *const *cors_list = all_allowed;
static const char *const *hosts_list = all_allowed;

/* split_list splits v at commas into a NULL-ended list (one allocation,
 * never freed: flags live as long as the process). */
static const char *const *split_list(const char *v)
{
    size_t n = 1;
    for (const char *p = v; *p != '\0'; p++)
        n += *p == ',';
    size_t len = strlen(v) + 1;
    char **list = mem_malloc((n + 1) * sizeof *list + len);
    if (list == NULL)
        return NULL;
    char *copy = (char *)(list + n + 1);
    memcpy(copy, v, len);
    size_t i = 0;
    list[i++] = copy;
    for (char *p = copy; *p != '\0'; p++)
        if (*p == ',') {
            *p = '\0';
            list[i++] = p + 1;
        }
    list[i] = NULL;
    return (const char *const *)list;
}

int api_http_access(const char *cors, const char *hosts)
{
    const char *const *c = split_list(cors);
    const char *const *h = split_list(hosts);
    if (c == NULL || h == NULL) {
        mem_free((void *)c);
        mem_free((void *)h);
        return ERR_NOMEM;
    }
    cors_list = c;
    hosts_list = h;
    return 0;
}

/* http_install puts the client HTTP endpoints (h, the gateway as
 * api_gateway_enable says) on srv with --cors and --host-whitelist. */
static void http_install(struct api *api, struct rpc_server *srv,
                         struct api_http *h)
{
    h->server = api->server;
    h->api = api;
    h->health = &api->health;
    h->gateway = gateway_on;
    struct rpc_http_access access = {cors_list, hosts_list};
    rpc_server_set_http(srv, api__http_serve, h, &access);
    /* etcd's gateway is a gRPC client of its own server on one
     * connection: an explicit --max-concurrent-streams bounds its calls
     * too */
    static const char *const gw_prefixes[] = {"/v3/", "/v3beta/", NULL};
    if (gateway_on && api->max_streams != 0)
        rpc_server_set_http_limit(srv, api->max_streams, gw_prefixes);
    /* the gateway's bidirectional streams read requests from a body that
     * stays open (gw_stream.c) */
    static const char *const open_paths[] = {
        "/v3/watch", "/v3beta/watch", "/v3/lease/keepalive",
        "/v3beta/lease/keepalive", NULL};
    if (gateway_on)
        rpc_server_set_http_open_paths(srv, open_paths);
}

int api_start(struct server *s, const char *listen_urls,
              const struct rpc_tls *tls, uint32_t max_streams,
              const struct rpc_keepalive *ka, struct api **api_out)
{
    struct api *api = mem_calloc(1, sizeof *api);
    if (api == NULL)
        return ERR_NOMEM;
    api->server = s;
    char buf[4096];
    struct rpc_server_config cfg;
    config_init(&cfg, buf, sizeof buf, listen_urls, tls);
    /* --client-cert-auth: a client certificate's CN is its user when it
     * sends no token (etcd's AuthInfoFromTLS; client listeners only) */
    cfg.tls_cn_identity = tls != NULL && tls->client_cert_auth;
    cfg.max_request_bytes = server_max_request_bytes(s);
    cfg.max_concurrent_streams = max_streams;
    if (ka != NULL)
        cfg.keepalive = *ka;
    int rc = rpc_server_create(&cfg, &api->rpc);
    if (rc != 0) {
        mem_free(api);
        return rc;
    }
    rpc_server_set_gate(api->rpc, learner_gate, api);
    api->max_streams = max_streams;
    if (!http_split) /* else gRPC only: api_http_start serves the HTTP */
        http_install(api, api->rpc, &api->http);
    rc = api__kv_register(api);
    if (rc == 0)
        rc = api__maintenance_register(api);
    if (rc == 0)
        rc = api__snapshot_register(api);
    if (rc == 0)
        rc = api__cluster_register(api);
    if (rc == 0)
        rc = api__watch_register(api);
    if (rc == 0)
        rc = api__lease_register(api);
    if (rc == 0)
        rc = api__lock_register(api);
    if (rc == 0)
        rc = api__auth_register(api);
    if (rc == 0)
        rc = rpc_server_start(api->rpc);
    if (rc != 0) {
        rpc_server_close(api->rpc);
        mem_free(api);
        return rc;
    }
    *api_out = api;
    return 0;
}

int api_peer_create(const char *listen_peer_urls, const struct rpc_tls *tls,
                    struct rpc_server **peer_out)
{
    char buf[4096];
    struct rpc_server_config cfg;
    config_init(&cfg, buf, sizeof buf, listen_peer_urls, tls);
    /* Raft messages and snapshots come here (the peer transport registers
     * its services before the listener starts). */
    cfg.threads = 1;
    return rpc_server_create(&cfg, peer_out);
}

int api_peer_serve(struct rpc_server *peer)
{
    return rpc_server_start(peer);
}

void api_peer_stop(struct rpc_server *peer)
{
    if (peer != NULL)
        rpc_server_close(peer);
}

int api_metrics_start(struct api *api, const char *listen_urls,
                      const struct rpc_tls *tls)
{
    char buf[4096];
    struct rpc_server_config cfg;
    config_init(&cfg, buf, sizeof buf, listen_urls, tls);
    cfg.threads = 1;
    cfg.max_request_bytes = server_max_request_bytes(api->server);
    int rc = rpc_server_create(&cfg, &api->metrics);
    if (rc != 0)
        return rc;
    api->metrics_http.server = api->server;
    api->metrics_http.api = api;
    api->metrics_http.metrics_only = true;
    api->metrics_http.health = &api->health;
    rpc_server_set_http(api->metrics, api__http_serve, &api->metrics_http,
                        NULL);
    rc = rpc_server_start(api->metrics);
    if (rc != 0) {
        rpc_server_close(api->metrics);
        api->metrics = NULL;
    }
    return rc;
}

int api_http_start(struct api *api, const char *listen_urls,
                   const struct rpc_tls *tls)
{
    CHECK(api != NULL && api->http_only == NULL && http_split);
    char buf[4096];
    struct rpc_server_config cfg;
    config_init(&cfg, buf, sizeof buf, listen_urls, tls);
    cfg.max_request_bytes = server_max_request_bytes(api->server);
    cfg.max_concurrent_streams = api->max_streams;
    int rc = rpc_server_create(&cfg, &api->http_only);
    if (rc != 0)
        return rc;
    http_install(api, api->http_only, &api->split_http);
    rpc_server_set_http_only(api->http_only);
    rpc_server_set_count_in(api->http_only, api->rpc);
    rc = rpc_server_start(api->http_only);
    if (rc != 0) {
        rpc_server_close(api->http_only);
        api->http_only = NULL;
    }
    return rc;
}

void api_metrics_extensive(struct api *api, bool on)
{
    CHECK(api != NULL);
    api->metrics_extensive = on;
    rpc_metrics_time_handling(on); /* the histogram's clock reads */
}

void api_stop(struct api *api)
{
    if (api == NULL)
        return;
    if (api->metrics != NULL)
        rpc_server_close(api->metrics);
    if (api->http_only != NULL)
        rpc_server_close(api->http_only);
    rpc_server_close(api->rpc);
    mem_free(api);
}
