/*
 * client.c - opening and closing a client: one gRPC channel per endpoint
 * (plain text or TLS, see cetcd.h), made by dial/ with the arguments
 * libcetcd and the peer transport share.
 */
#include <assert.h>
#include <string.h>

#include "util/absl.h"
#include "client/client_int.h"
#include "util/mem.h"

#define DIAL_TIMEOUT_MS_DEFAULT 5000
#define MAX_RECV_BYTES_DEFAULT (64 * 1024 * 1024)

/* creds_for returns the credentials for an endpoint (tls: it is dialled
 * with TLS), creating them on first use in creds[0] (plain) or creds[1]
 * (TLS); NULL if gRPC refuses.  With no cetcd_tls, https:// and unixs://
 * endpoints verify the server against the system's CAs, as clientv3 does.
 * only: the target when the client has one endpoint, told of a refusal
 * for the allowed names (dial_tls alert_target), else NULL. */
static grpc_channel_credentials *creds_for(grpc_channel_credentials *creds[2],
                                           bool tls, const struct cetcd_tls *t,
                                           const char *only)
{
    struct dial_tls d = {0};
    if (creds[tls] != NULL)
        return creds[tls];
    if (tls && t != NULL)
        d = (struct dial_tls){.cert_pem = t->cert_pem, .key_pem = t->key_pem,
                              .ca_pem = t->ca_pem,
                              .skip_verify = t->insecure_skip_verify,
                              .allowed_cn = t->allowed_cn,
                              .allowed_hostname = t->allowed_hostname,
                              .alert_target = only};
    creds[tls] = dial_creds_create(tls ? &d : NULL);
    return creds[tls];
}

/* channels_open creates every endpoint's channel; grpc_init is held.  The
 * reconnect back-off is kept short so a restarted member is found again
 * quickly (failover between endpoints is ours, see unary.c); one
 * connection attempt gets the dial timeout (c->dial_timeout_ms is set). */
static int channels_open(struct cetcd_client *c,
                         const struct cetcd_client_opts *opts, int max_recv)
{
    const struct dial_channel_opts o = {.max_recv_bytes = max_recv,
                                        .backoff_min_ms = 100,
                                        .backoff_max_ms = 1000,
                                        .connect_timeout_ms =
                                            c->dial_timeout_ms,
                                        .keepalive_time_ms =
                                            opts->keepalive_time_ms,
                                        .keepalive_timeout_ms =
                                            opts->keepalive_timeout_ms,
                                        .stream_window_bytes =
                                            opts->stream_window_bytes};
    grpc_channel_credentials *creds[2] = {NULL, NULL};
    int rc = 0;

    for (size_t i = 0; i < c->n_eps && rc == 0; i++) {
        grpc_channel_credentials *cr =
            creds_for(creds, c->eps[i].tls, opts->tls,
                      c->n_eps == 1 ? c->eps[0].target : NULL);
        if (cr != NULL)
            c->eps[i].channel = dial_channel_create(c->eps[i].target, cr,
                                                    &o);
        if (cr == NULL || c->eps[i].channel == NULL)
            rc = CETCD_RESOURCE_EXHAUSTED;
    }
    /* The channels hold their own references. */
    for (int k = 0; k < 2; k++)
        if (creds[k] != NULL)
            grpc_channel_credentials_release(creds[k]);
    return rc;
}

/* tls_valid: no cetcd_tls, or one with both or neither of cert and key
 * and at most one allowed name. */
static bool tls_valid(const struct cetcd_tls *t)
{
    return t == NULL ||
           ((t->cert_pem == NULL) == (t->key_pem == NULL) &&
            (t->allowed_cn == NULL || t->allowed_hostname == NULL));
}

/* client_alloc parses the endpoints into a new client (no channels yet).
 * An endpoint is dialled with TLS when its scheme says so, or when it has
 * none and opts->tls is set. */
static int client_alloc(const struct cetcd_client_opts *opts,
                        struct cetcd_client **out, struct cetcd_status *st)
{
    char (*tg)[CLIENT_TARGET_MAX];
    enum dial_security sec[CETCD_ENDPOINTS_MAX];
    struct cetcd_client *c;
    size_t n = 0;

    tg = mem_malloc(sizeof(*tg) * CETCD_ENDPOINTS_MAX);
    if (tg == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    if (client__endpoints_parse(opts->endpoints, tg, sec, CETCD_ENDPOINTS_MAX,
                                &n) != 0) {
        mem_free(tg);
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                   "bad endpoint list \"%s\"",
                                   opts->endpoints ? opts->endpoints : "");
    }
    c = mem_calloc(1, sizeof(*c));
    if (c != NULL)
        c->eps = mem_calloc(n, sizeof(*c->eps));
    if (c == NULL || c->eps == NULL) {
        mem_free(c);
        mem_free(tg);
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(c->eps[i].target, tg[i], CLIENT_TARGET_MAX);
        c->eps[i].tls = sec[i] == DIAL_SECURITY_TLS ||
                        (sec[i] == DIAL_SECURITY_DEFAULT && opts->tls != NULL);
    }
    c->n_eps = n;
    mem_free(tg);
    *out = c;
    return 0;
}

int cetcd_client_open(const struct cetcd_client_opts *opts,
                      struct cetcd_client **client_out,
                      struct cetcd_status *st)
{
    struct cetcd_client *c = NULL;
    int max_recv, rc;

    if (opts == NULL || client_out == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no options");
    *client_out = NULL;
    if (!tls_valid(opts->tls))
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "TLS: cert_pem and key_pem go together, "
                                  "and allowed_cn and allowed_hostname "
                                  "do not");
    rc = client_alloc(opts, &c, st);
    if (rc != 0)
        return rc;
    c->dial_timeout_ms = opts->dial_timeout_ms > 0 ? opts->dial_timeout_ms
                                                   : DIAL_TIMEOUT_MS_DEFAULT;
    c->call_timeout_ms = opts->call_timeout_ms > 0 ? opts->call_timeout_ms : 0;
    atomic_init(&c->cur, 0);
    max_recv = opts->max_recv_bytes > 0 ? opts->max_recv_bytes
                                        : MAX_RECV_BYTES_DEFAULT;
    absl_deadlock_detection_off(); /* see util/absl.h */
    grpc_init();
    if (channels_open(c, opts, max_recv) != 0)
        goto err_close;
    if (cetcd_client_token_set(c, opts->token) != 0)
        goto err_close;
    if (opts->md_key != NULL) {
        const char *v = opts->md_value != NULL ? opts->md_value : "";
        c->md_key = mem_dup(opts->md_key, strlen(opts->md_key) + 1);
        c->md_value = mem_dup(v, strlen(v) + 1);
        if (c->md_key == NULL || c->md_value == NULL)
            goto err_close;
    }
    *client_out = c;
    assert(c->n_eps > 0);
    return client__status_set(st, 0, "%s", "");

err_close:
    cetcd_client_close(c);
    return client__status_set(st, CETCD_RESOURCE_EXHAUSTED,
                              "cannot create channel");
}

void cetcd_client_close(struct cetcd_client *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n_eps; i++)
        if (c->eps[i].channel != NULL)
            grpc_channel_destroy(c->eps[i].channel);
    mem_free(c->eps);
    mem_free(c->token);
    mem_free(c->md_key);
    mem_free(c->md_value);
    mem_free(c);
    grpc_shutdown();
}

const char *cetcd_client_endpoint(const struct cetcd_client *c)
{
    size_t cur;

    assert(c != NULL);
    cur = atomic_load(&((struct cetcd_client *)c)->cur);
    assert(cur < c->n_eps);
    return c->eps[cur].target;
}

int cetcd_client_token_set(struct cetcd_client *c, const char *token)
{
    char *t = NULL;

    assert(c != NULL);
    if (token != NULL) {
        t = mem_dup(token, strlen(token) + 1);
        if (t == NULL)
            return CETCD_RESOURCE_EXHAUSTED;
    }
    mem_free(c->token);
    c->token = t;
    return 0;
}

gpr_timespec client__deadline(int ms)
{
    if (ms <= 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(ms, GPR_TIMESPAN));
}
