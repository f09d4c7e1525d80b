/*
 * client.c - opening and closing a client: one insecure gRPC channel per
 * endpoint, with the channel arguments every call shares.
 */
#include <assert.h>
#include <string.h>

#include <grpc/grpc_security.h>

#include "client/client_int.h"
#include "util/mem.h"

#define DIAL_TIMEOUT_MS_DEFAULT 5000
#define MAX_RECV_BYTES_DEFAULT (64 * 1024 * 1024)

/* channel_open creates ep's channel.  A local subchannel pool gives every
 * client its own TCP connection (cetcd-bench --conns relies on it); retries
 * are off because failover is ours; reconnect backoff is kept short so a
 * restarted member is found again quickly. */
static grpc_channel *channel_open(const char *target, int max_recv_bytes)
{
    grpc_arg args[6];
    grpc_channel_args cargs;
    grpc_channel_credentials *creds;
    grpc_channel *ch;
    int n = 0;

    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[n++].value.integer = max_recv_bytes;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[n++].value.integer = 1;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_ENABLE_RETRIES;
    args[n++].value.integer = 0;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
    args[n++].value.integer = 100;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MIN_RECONNECT_BACKOFF_MS;
    args[n++].value.integer = 100;
    args[n].type = GRPC_ARG_INTEGER;
    args[n].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[n++].value.integer = 1000;
    cargs.num_args = (size_t)n;
    cargs.args = args;
    creds = grpc_insecure_credentials_create();
    if (creds == NULL)
        return NULL;
    ch = grpc_channel_create(target, creds, &cargs);
    grpc_channel_credentials_release(creds);
    return ch;
}

static int client_alloc(const struct cetcd_client_opts *opts,
                        struct cetcd_client **out, struct cetcd_status *st)
{
    char (*hp)[CLIENT_HOSTPORT_MAX];
    struct cetcd_client *c;
    size_t n = 0;

    hp = mem_malloc(sizeof(*hp) * CETCD_ENDPOINTS_MAX);
    if (hp == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    if (client__endpoints_parse(opts->endpoints, hp, CETCD_ENDPOINTS_MAX,
                                &n) != 0) {
        mem_free(hp);
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                   "bad endpoint list \"%s\"",
                                   opts->endpoints ? opts->endpoints : "");
    }
    c = mem_calloc(1, sizeof(*c));
    if (c != NULL)
        c->eps = mem_calloc(n, sizeof(*c->eps));
    if (c == NULL || c->eps == NULL) {
        mem_free(c);
        mem_free(hp);
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    }
    for (size_t i = 0; i < n; i++)
        memcpy(c->eps[i].host_port, hp[i], CLIENT_HOSTPORT_MAX);
    c->n_eps = n;
    mem_free(hp);
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
    rc = client_alloc(opts, &c, st);
    if (rc != 0)
        return rc;
    c->dial_timeout_ms = opts->dial_timeout_ms > 0 ? opts->dial_timeout_ms
                                                   : DIAL_TIMEOUT_MS_DEFAULT;
    c->call_timeout_ms = opts->call_timeout_ms > 0 ? opts->call_timeout_ms : 0;
    atomic_init(&c->cur, 0);
    max_recv = opts->max_recv_bytes > 0 ? opts->max_recv_bytes
                                        : MAX_RECV_BYTES_DEFAULT;
    grpc_init();
    for (size_t i = 0; i < c->n_eps; i++) {
        c->eps[i].channel = channel_open(c->eps[i].host_port, max_recv);
        if (c->eps[i].channel == NULL)
            goto err_close;
    }
    if (cetcd_client_token_set(c, opts->token) != 0)
        goto err_close;
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
    mem_free(c);
    grpc_shutdown();
}

const char *cetcd_client_endpoint(const struct cetcd_client *c)
{
    size_t cur;

    assert(c != NULL);
    cur = atomic_load(&((struct cetcd_client *)c)->cur);
    assert(cur < c->n_eps);
    return c->eps[cur].host_port;
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
