/*
 * rpc_server.c - the gRPC server object: configuration, listeners, method
 * registration, the completion-queue threads and shutdown.
 *
 * Each worker thread owns one completion queue; every request slot it posts
 * binds the future call to that queue, so a call's whole life is handled
 * by one thread and its slot objects need no locks (see rpc_call.c).
 */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/string_util.h>

#include "util/absl.h"
#include "util/thread.h"
#include "api/rpc_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define RECV_SLACK_BYTES (512 * 1024) /* etcd's grpcOverheadBytes */
#define KEEPALIVE_MIN_TIME_MS 5000    /* etcd --grpc-keepalive-min-time */
#define KEEPALIVE_TIME_MS (2 * 3600 * 1000) /* --grpc-keepalive-interval */
#define KEEPALIVE_TIMEOUT_MS 20000    /* --grpc-keepalive-timeout */
#define GENERIC_SLOTS 4               /* unknown-method slots per thread */

/* url_to_addr turns a URL into a core listen address (malloc'd) and tells
 * whether it wants TLS: https:// and unixs:// do, http:// and unix:// not. */
static int url_to_addr(const char *url, char **addr_out, bool *secure_out)
{
    char buf[512];
    assert(url != NULL && addr_out != NULL && secure_out != NULL);
    bool tcp = strncmp(url, "http://", 7) == 0;
    bool unix_sock = strncmp(url, "unix://", 7) == 0;
    size_t skip = 7;
    *secure_out = false;
    if (strncmp(url, "https://", 8) == 0 || strncmp(url, "unixs://", 8) == 0) {
        tcp = url[0] == 'h';
        unix_sock = !tcp;
        skip = 8;
        *secure_out = true;
    }
    const char *hp = url + skip;
    if (tcp) {
        size_t n = strcspn(hp, "/");
        if (n == 0 || memchr(hp, ':', n) == NULL || n >= sizeof(buf))
            return ERR_INVAL;
        snprintf(buf, sizeof(buf), "%.*s", (int)n, hp);
    } else if (unix_sock && *hp != '\0') {
        if (snprintf(buf, sizeof(buf), "unix:%s", hp) >= (int)sizeof(buf))
            return ERR_INVAL;
    } else {
        return ERR_INVAL;
    }
    *addr_out = mem_dup(buf, strlen(buf) + 1);
    return *addr_out == NULL ? ERR_NOMEM : 0;
}

static grpc_server *core_server_create(size_t max_recv)
{
    grpc_arg args[6];
    char k[6][64];
    const struct { const char *key; int value; } kv[6] = {
        {GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, (int)max_recv},
        {GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, INT32_MAX},
        {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
         KEEPALIVE_MIN_TIME_MS},
        {GRPC_ARG_KEEPALIVE_TIME_MS, KEEPALIVE_TIME_MS},
        {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, KEEPALIVE_TIMEOUT_MS},
        /* Two members must not share a port silently. */
        {GRPC_ARG_ALLOW_REUSEPORT, 0},
    };
    for (int i = 0; i < 6; i++) {
        snprintf(k[i], sizeof(k[i]), "%s", kv[i].key);
        args[i].type = GRPC_ARG_INTEGER;
        args[i].key = k[i];
        args[i].value.integer = kv[i].value;
    }
    grpc_channel_args ca = {.num_args = 6, .args = args};
    return grpc_server_create(&ca, NULL);
}

static int config_apply(struct api_server *srv,
                        const struct api_server_config *cfg)
{
    size_t max_req = cfg->max_request_bytes ? cfg->max_request_bytes
                                            : API_DEFAULT_MAX_REQUEST_BYTES;
    bool has_tls = cfg->tls_cert_pem != NULL && cfg->tls_key_pem != NULL;
    if ((cfg->tls_cert_pem != NULL) != (cfg->tls_key_pem != NULL) ||
        (cfg->tls_verify_clients && cfg->tls_ca_pem == NULL) ||
        (cfg->tls_check != NULL && !cfg->tls_verify_clients))
        return ERR_INVAL;
    if (cfg->urls_n == 0 || cfg->urls_n > API_URLS_MAX ||
        max_req > INT32_MAX - RECV_SLACK_BYTES || cfg->threads < 0 ||
        cfg->threads > API_THREADS_MAX || cfg->slots < 0 ||
        cfg->stream_queue < 0)
        return ERR_INVAL;
    srv->max_recv_bytes = max_req + RECV_SLACK_BYTES;
    srv->threads_n = cfg->threads ? cfg->threads : API_DEFAULT_THREADS;
    srv->slots = cfg->slots ? cfg->slots : API_DEFAULT_SLOTS;
    srv->stream_queue =
        cfg->stream_queue ? cfg->stream_queue : API_DEFAULT_STREAM_QUEUE;
    for (size_t i = 0; i < cfg->urls_n; i++) {
        int rv = url_to_addr(cfg->urls[i], &srv->addrs[i], &srv->secure[i]);
        if (rv != 0)
            return rv;
        srv->addrs_n = i + 1;
        if (srv->secure[i] && !has_tls)
            return ERR_INVAL;
    }
    return 0;
}

/* The core's external certificate verifier, wrapping cfg->tls_check.
 * Freed by the core (destruct) when the last credentials using it go. */
struct tls_verifier {
    grpc_tls_certificate_verifier_external ext; /* handed to the core */
    bool (*check)(const char *cert_pem, void *ctx); /* the decision */
    void *ctx;                                   /* its context */
};

static int verifier_verify(void *user_data,
                           grpc_tls_custom_verification_check_request *req,
                           grpc_tls_on_custom_verification_check_done_cb cb,
                           void *cb_arg, grpc_status_code *status_out,
                           char **details_out)
{
    struct tls_verifier *v = user_data;
    (void)cb;
    (void)cb_arg;
    assert(v != NULL && req != NULL);
    if (v->check(req->peer_info.peer_cert, v->ctx)) {
        *status_out = GRPC_STATUS_OK;
        return 1; /* decided synchronously */
    }
    *status_out = GRPC_STATUS_UNAUTHENTICATED;
    *details_out = gpr_strdup("client certificate authentication failed");
    return 1;
}

static void verifier_cancel(void *user_data,
                            grpc_tls_custom_verification_check_request *req)
{
    (void)user_data; /* synchronous: nothing in flight to cancel */
    (void)req;
}

static void verifier_destruct(void *user_data)
{
    mem_free(user_data);
}

/* tls_check_creds builds credentials with the experimental grpc_tls API,
 * the only one of the core with a post-handshake hook (the external
 * verifier), on top of its usual chain verification. */
static grpc_server_credentials *
tls_check_creds(const struct api_server_config *cfg,
                grpc_ssl_client_certificate_request_type req)
{
    assert(cfg->tls_check != NULL && cfg->tls_ca_pem != NULL);
    struct tls_verifier *v = mem_calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    v->ext = (grpc_tls_certificate_verifier_external){
        .user_data = v, .verify = verifier_verify, .cancel = verifier_cancel,
        .destruct = verifier_destruct};
    v->check = cfg->tls_check;
    v->ctx = cfg->tls_check_ctx;
    grpc_tls_identity_pairs *pairs = grpc_tls_identity_pairs_create();
    grpc_tls_identity_pairs_add_pair(pairs, cfg->tls_key_pem,
                                     cfg->tls_cert_pem);
    /* The provider takes the pairs; the options take their own refs on
     * the provider and the verifier; the credentials take the options. */
    grpc_tls_certificate_provider *prov =
        grpc_tls_certificate_provider_static_data_create(cfg->tls_ca_pem,
                                                         pairs);
    grpc_tls_certificate_verifier *ver =
        grpc_tls_certificate_verifier_external_create(&v->ext);
    grpc_tls_credentials_options *opts = grpc_tls_credentials_options_create();
    grpc_tls_credentials_options_set_certificate_provider(opts, prov);
    grpc_tls_credentials_options_watch_root_certs(opts);
    grpc_tls_credentials_options_watch_identity_key_cert_pairs(opts);
    grpc_tls_credentials_options_set_cert_request_type(opts, req);
    grpc_tls_credentials_options_set_certificate_verifier(opts, ver);
    grpc_server_credentials *creds = grpc_tls_server_credentials_create(opts);
    grpc_tls_certificate_verifier_release(ver);
    grpc_tls_certificate_provider_release(prov);
    return creds;
}

/* tls_creds turns the PEM material into the core's server credentials
 * (which copy it), or NULL when no TLS is configured. */
static grpc_server_credentials *tls_creds(const struct api_server_config *cfg)
{
    if (cfg->tls_cert_pem == NULL)
        return NULL;
    /* etcd asks for client certificates only when it verifies them
     * (tls.RequireAndVerifyClientCert or tls.NoClientCert). */
    grpc_ssl_client_certificate_request_type req =
        cfg->tls_verify_clients
            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    if (cfg->tls_check != NULL)
        return tls_check_creds(cfg, req);
    grpc_ssl_pem_key_cert_pair pair = {.private_key = cfg->tls_key_pem,
                                       .cert_chain = cfg->tls_cert_pem};
    return grpc_ssl_server_credentials_create_ex(
        cfg->tls_verify_clients ? cfg->tls_ca_pem : NULL, &pair, 1, req, NULL);
}

/* done_cq_down runs once the callback queue has shut down. */
static void done_cq_down(grpc_completion_queue_functor *f, int ok)
{
    struct api_server *srv =
        api__container_of(f, struct api_server, done_cq_shut);
    (void)ok;
    atomic_store(&srv->done_cq_down, true);
}

static void server_free(struct api_server *srv)
{
    for (size_t i = 0; i < srv->addrs_n; i++)
        mem_free(srv->addrs[i]);
    for (size_t i = 0; i < srv->methods_n; i++)
        mem_free(srv->methods[i].path);
    mem_free(srv->methods);
    mem_free(srv);
}

int api_server_create(const struct api_server_config *cfg,
                      struct api_server **srv_out)
{
    assert(cfg != NULL && srv_out != NULL);
    struct api_server *srv = mem_calloc(1, sizeof(*srv));
    if (srv == NULL)
        return ERR_NOMEM;
    srv->shutdown_tag.kind = API__TAG_SHUTDOWN;
    atomic_init(&srv->shutting_down, false);
    atomic_init(&srv->streams_n, 0);
    int rv = config_apply(srv, cfg);
    if (rv != 0)
        goto err_free;
    absl_deadlock_detection_off(); /* see util/absl.h */
    grpc_init();
    srv->tls_creds = tls_creds(cfg);
    if (cfg->tls_cert_pem != NULL && srv->tls_creds == NULL) {
        /* The core refused the PEM material; it logs why. */
        grpc_shutdown_blocking();
        rv = ERR_INVAL;
        goto err_free;
    }
    /* The core's own limit is set higher so that, up to it, the runtime
     * itself refuses oversized requests with grpc-go's exact message (what
     * etcd clients see); beyond it the core refuses on its own. */
    size_t core_max = srv->max_recv_bytes * 2;
    if (core_max < srv->max_recv_bytes + (8u << 20))
        core_max = srv->max_recv_bytes + (8u << 20);
    if (core_max > INT32_MAX)
        core_max = INT32_MAX;
    srv->server = core_server_create(core_max);
    srv->shutdown_cq = grpc_completion_queue_create_for_pluck(NULL);
    srv->done_cq_shut.functor_run = done_cq_down;
    srv->done_cq_shut.inlineable = 0;
    atomic_init(&srv->done_cq_down, false);
    srv->done_cq = grpc_completion_queue_create_for_callback(
        &srv->done_cq_shut, NULL);
    for (int i = 0; i < srv->threads_n; i++) {
        srv->workers[i].srv = srv;
        atomic_init(&srv->workers[i].active_n, 0);
        atomic_init(&srv->workers[i].returned, NULL);
        srv->workers[i].cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(srv->server,
                                              srv->workers[i].cq, NULL);
    }
    rv = api_server_register_unary(srv, "/grpc.health.v1.Health/Check",
                                   api__health_check, NULL);
    assert(rv == 0 || rv == ERR_NOMEM);
    if (rv != 0) {
        api_server_close(srv);
        return rv;
    }
    *srv_out = srv;
    return 0;
err_free:
    assert(rv == ERR_INVAL || rv == ERR_NOMEM);
    server_free(srv);
    return rv;
}

static int method_add(struct api_server *srv, const char *path,
                      enum api__method_kind kind, struct api__method **m_out)
{
    assert(srv != NULL && m_out != NULL);
    if (srv->started || path == NULL || path[0] != '/' ||
        strchr(path + 1, '/') == NULL)
        return ERR_INVAL;
    for (size_t i = 0; i < srv->methods_n; i++)
        if (strcmp(srv->methods[i].path, path) == 0)
            return ERR_EXIST;
    if (srv->methods_n == srv->methods_cap) {
        size_t cap = srv->methods_cap ? 2 * srv->methods_cap : 16;
        void *p = mem_realloc(srv->methods, cap * sizeof(*srv->methods));
        if (p == NULL)
            return ERR_NOMEM;
        srv->methods = p;
        srv->methods_cap = cap;
    }
    struct api__method *m = &srv->methods[srv->methods_n];
    memset(m, 0, sizeof(*m));
    m->path = mem_dup(path, strlen(path) + 1);
    if (m->path == NULL)
        return ERR_NOMEM;
    m->kind = kind;
    m->handle = grpc_server_register_method(
        srv->server, path, NULL,
        kind == API__METHOD_UNARY ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER
                                  : GRPC_SRM_PAYLOAD_NONE,
        0);
    if (m->handle == NULL) {
        mem_free(m->path);
        return ERR_INVAL;
    }
    srv->methods_n++;
    *m_out = m;
    return 0;
}

void api_server_set_gate(struct api_server *srv, api_unary_gate_fn gate,
                         void *ctx)
{
    assert(srv != NULL && !srv->started);
    srv->gate = gate;
    srv->gate_ctx = ctx;
}

int api_server_register_unary(struct api_server *srv, const char *path,
                              api_unary_fn fn, void *ctx)
{
    struct api__method *m;
    assert(fn != NULL);
    int rv = method_add(srv, path, API__METHOD_UNARY, &m);
    if (rv != 0)
        return rv;
    m->unary = fn;
    m->ctx = ctx;
    return 0;
}

int api_server_register_stream(struct api_server *srv, const char *path,
                               const struct api_stream_ops *ops, void *ctx)
{
    struct api__method *m;
    assert(ops != NULL && ops->on_open != NULL && ops->on_message != NULL &&
           ops->on_close != NULL);
    int rv = method_add(srv, path, API__METHOD_STREAM, &m);
    if (rv != 0)
        return rv;
    m->ops = ops;
    m->ctx = ctx;
    return 0;
}

/* worker_main is a CQ thread: it runs every completion of its queue until
 * the queue is shut down, then frees what it owns. */
static void *worker_main(void *arg)
{
    struct api__worker *w = arg;
    gpr_timespec forever = gpr_inf_future(GPR_CLOCK_REALTIME);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(w->cq, forever, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        assert(ev.type == GRPC_OP_COMPLETE);
        struct api__tag *tag = ev.tag;
        switch (tag->kind) {
        case API__TAG_UNARY:
            api__call_complete(
                w, api__container_of(tag, struct api_call, tag), ev.success);
            break;
        case API__TAG_GENERIC:
            api__generic_complete(
                w, api__container_of(tag, struct api_call, tag), ev.success);
            break;
        default:
            api__stream_complete(w, tag, ev.success);
            break;
        }
    }
    api__worker_free_calls(w);
    return NULL;
}

static void worker_post_all(struct api__worker *w)
{
    struct api_server *srv = w->srv;
    for (size_t i = 0; i < srv->methods_n; i++) {
        const struct api__method *m = &srv->methods[i];
        int n = m->kind == API__METHOD_UNARY ? srv->slots : 2;
        for (int k = 0; k < n; k++) {
            if (m->kind == API__METHOD_UNARY)
                api__call_post(w, m);
            else
                api__stream_post(w, m);
        }
    }
    for (int k = 0; k < GENERIC_SLOTS; k++)
        api__generic_post(w);
}

int api_server_start(struct api_server *srv)
{
    assert(srv != NULL && !srv->started);
    grpc_server_credentials *plain = grpc_insecure_server_credentials_create();
    for (size_t i = 0; i < srv->addrs_n; i++) {
        /* The core takes its own reference on the credentials. */
        srv->ports[i] = grpc_server_add_http2_port(
            srv->server, srv->addrs[i],
            srv->secure[i] ? srv->tls_creds : plain);
        if (srv->ports[i] == 0) {
            log_error("api", "cannot listen on %s", srv->addrs[i]);
            grpc_server_credentials_release(plain);
            return ERR_IO;
        }
    }
    grpc_server_credentials_release(plain);
    grpc_server_start(srv->server);
    srv->started = true;
    for (int i = 0; i < srv->threads_n; i++)
        worker_post_all(&srv->workers[i]);
    for (int i = 0; i < srv->threads_n; i++) {
        struct api__worker *w = &srv->workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            abort(); /* No way to serve; nothing sane to unwind to. */
        thread_name_set(w->thread, "cetcd-rpc");
        w->started = true;
    }
    return 0;
}

int api_server_port(const struct api_server *srv, size_t i)
{
    assert(srv != NULL);
    if (i >= srv->addrs_n || strncmp(srv->addrs[i], "unix:", 5) == 0)
        return 0;
    return srv->ports[i];
}

void api_server_stop(struct api_server *srv)
{
    assert(srv != NULL);
    if (!srv->started || srv->stopping)
        return;
    srv->stopping = true;
    atomic_store(&srv->shutting_down, true);
    grpc_server_shutdown_and_notify(srv->server, srv->shutdown_cq,
                                    &srv->shutdown_tag);
    grpc_server_cancel_all_calls(srv->server);
}

/* The shutdown waits below poll: they run once per server life. */
static void shutdown_tick(void)
{
    const struct timespec tick = {0, 1000000};
    nanosleep(&tick, NULL);
}

/* wait_idle waits until every call handed to a handler has been answered
 * and completed and every stream freed: the core's shutdown tag may come
 * while handlers still hold calls, and their answers need live queues. */
static void wait_idle(struct api_server *srv)
{
    for (;;) {
        long busy = atomic_load(&srv->streams_n);
        for (int i = 0; i < srv->threads_n; i++)
            busy += atomic_load(&srv->workers[i].active_n);
        if (busy == 0)
            return;
        shutdown_tick();
    }
}

/* cq_drain waits for a shut-down queue nobody else polls to be empty. */
static void cq_drain(grpc_completion_queue *cq)
{
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                      NULL)
               .type != GRPC_QUEUE_SHUTDOWN) {
    }
}

void api_server_close(struct api_server *srv)
{
    assert(srv != NULL);
    if (srv->started) {
        api_server_stop(srv);
        grpc_event ev = grpc_completion_queue_pluck(
            srv->shutdown_cq, &srv->shutdown_tag,
            gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        assert(ev.type == GRPC_OP_COMPLETE);
        (void)ev;
        wait_idle(srv);
    }
    for (int i = 0; i < srv->threads_n; i++)
        grpc_completion_queue_shutdown(srv->workers[i].cq);
    for (int i = 0; i < srv->threads_n; i++) {
        struct api__worker *w = &srv->workers[i];
        if (w->started) {
            pthread_join(w->thread, NULL);
        } else {
            cq_drain(w->cq);
            api__worker_free_calls(w);
        }
    }
    grpc_server_destroy(srv->server);
    if (srv->tls_creds != NULL)
        grpc_server_credentials_release(srv->tls_creds);
    for (int i = 0; i < srv->threads_n; i++)
        grpc_completion_queue_destroy(srv->workers[i].cq);
    grpc_completion_queue_shutdown(srv->done_cq);
    while (!atomic_load(&srv->done_cq_down))
        shutdown_tick();
    grpc_completion_queue_destroy(srv->done_cq);
    grpc_completion_queue_shutdown(srv->shutdown_cq);
    grpc_completion_queue_destroy(srv->shutdown_cq);
    assert(atomic_load(&srv->streams_n) == 0);
    server_free(srv);
    grpc_shutdown_blocking();
}
