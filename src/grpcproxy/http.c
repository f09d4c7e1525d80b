/*
 * http.c - HTTP on the proxy's port (and on --metrics-addr), as etcd
 * 3.4's proxy serves it:
 *   /health   a Get of "a" through the proxy's client within 1 s: healthy
 *             when it answers (or answers "permission denied", or, better
 *             than etcd, "user name is empty": auth is on);
 *             {"health":"true"} 200, else {"health":"false"} 503
 *   /metrics  the first endpoint's /metrics, fetched and passed on
 *             ("Internal server error", 500, when it cannot be fetched)
 *   else      404, Go's NotFound.
 * /metrics is fetched by a thread of its own (at most GP_METRICS_MAX at
 * once, the others answered 503) with HTTP/1.0: over TLS for an https://
 * endpoint, or a bare "host:port" one when the client has TLS material
 * (as its gRPC side dials it), with that material (dial_exchange:
 * --cacert or the system's CAs, --cert/--key, --insecure-skip-tls-verify).
 * etcd 3.4.23's proxy asks a bare endpoint in plain HTTP whatever the
 * flags (500 from a member that serves TLS), and checks the member
 * against the system's CAs unless --cacert, --cert and --key are all
 * given: both differences on purpose (tests/integration/
 * test_grpc_proxy_tls.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grpcproxy/grpcproxy_int.h"
#include "util/log.h"
#include "util/mem.h"

#define TEXT "text/plain; charset=utf-8"
#define GP_METRICS_MAX 4
#define GP_METRICS_BODY_MAX (16u << 20)
#define GP_METRICS_TIMEOUT_MS 5000

static atomic_int metrics_running;

static void reply_text(struct rpc_call *call, int status, unsigned flags,
                       const char *body)
{
    rpc_call_reply_http(call, status, TEXT, flags, body, strlen(body));
}

/* --- /health --- */

static void health_done(void *arg, const struct cetcd_status *st,
                        const uint8_t *resp, size_t len)
{
    struct rpc_call *call = arg;

    (void)resp;
    (void)len;
    /* etcd's proxy: healthy when the Get answers or is denied.  With auth
     * on, its Get (no user) is answered "user name is empty", and etcd's
     * proxy stays unhealthy for ever; here that answer counts too: the
     * cluster served it. */
    if (st->code == 0 ||
        (st->code == CETCD_PERMISSION_DENIED &&
         strcmp(st->message, "etcdserver: permission denied") == 0) ||
        (st->code == CETCD_INVALID_ARGUMENT &&
         strcmp(st->message, "etcdserver: user name is empty") == 0))
        reply_text(call, 200, 0, "{\"health\":\"true\"}");
    else
        reply_text(call, 503, RPC_HTTP_NOSNIFF, "{\"health\":\"false\"}\n");
}

static void health(struct grpcproxy *p, struct rpc_call *call)
{
    /* RangeRequest{key: "a"} */
    static const uint8_t get_a[] = {0x0a, 0x01, 'a'};
    struct cetcd_raw_opts o;
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    memset(&o, 0, sizeof o);
    o.deadline_mono_ns =
        (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + 1000000000;
    if (cetcd_async_call_raw(p->cli, p->q, "/etcdserverpb.KV/Range", get_a,
                             sizeof get_a, &o, health_done, call) != 0)
        reply_text(call, 503, RPC_HTTP_NOSNIFF, "{\"health\":\"false\"}\n");
}

/* --- /metrics --- */

/* One /metrics request for its thread.  What it reads of the proxy
 * (the target and TLS material) stays valid: the proxy's servers are
 * closed, which waits for this call's answer, before the proxy is freed. */
struct metrics_fetch {
    struct rpc_call *call;
    const struct grpcproxy *p;
};

/* body_take: buf (len bytes, NUL-terminated) is an HTTP/1.x answer; its
 * body is moved to the front.  False when it is no answer. */
static bool body_take(char *buf, size_t len, size_t *len_out)
{
    char *body = strstr(buf, "\r\n\r\n");

    if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || body == NULL)
        return false;
    body += 4;
    *len_out = len - (size_t)(body - buf);
    memmove(buf, body, *len_out);
    return true;
}

/* fetch GETs http(s)://<the first endpoint>/metrics; the body in
 * *body_out (mem_free).  TLS with the client's material, or the system's
 * CAs and no certificate. */
static bool fetch(const struct grpcproxy *p, char **body_out,
                  size_t *len_out)
{
    static const struct dial_tls system_cas = {0};
    const char *target = p->metrics_target;
    bool tls = p->metrics_scheme == GP_SCHEME_HTTPS ||
               (p->metrics_scheme == GP_SCHEME_NONE && p->metrics_tls != NULL);
    char req[512], why[256];
    char *buf = NULL;
    size_t len = 0;

    *body_out = NULL;
    snprintf(req, sizeof req,
             "GET /metrics HTTP/1.0\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\n\r\n",
             target);
    if (dial_exchange(target,
                      !tls                     ? NULL
                      : p->metrics_tls != NULL ? p->metrics_tls
                                               : &system_cas,
                      "\x08http/1.1", req, strlen(req),
                      GP_METRICS_TIMEOUT_MS, GP_METRICS_BODY_MAX, &buf, &len,
                      why, sizeof why) != 0) {
        /* etcd's proxy logs nothing here; the reason at debug level */
        log_debug("grpcproxy", "/metrics from %s: %s", target, why);
        return false;
    }
    if (!body_take(buf, len, len_out)) {
        mem_free(buf);
        return false;
    }
    *body_out = buf;
    return true;
}

static void *metrics_main(void *arg)
{
    struct metrics_fetch *f = arg;
    char *body = NULL;
    size_t len = 0;

    if (fetch(f->p, &body, &len))
        rpc_call_reply_http(f->call, 200, "text/plain; version=0.0.4", 0,
                            body, len);
    else
        reply_text(f->call, 500, RPC_HTTP_NOSNIFF, "Internal server error\n");
    mem_free(body);
    mem_free(f);
    atomic_fetch_sub(&metrics_running, 1);
    return NULL;
}

static void metrics(struct grpcproxy *p, struct rpc_call *call)
{
    struct metrics_fetch *f;
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    if (atomic_fetch_add(&metrics_running, 1) >= GP_METRICS_MAX) {
        atomic_fetch_sub(&metrics_running, 1);
        reply_text(call, 503, RPC_HTTP_NOSNIFF, "Service Unavailable\n");
        return;
    }
    f = mem_calloc(1, sizeof *f);
    rc = f == NULL ? -1 : 0;
    if (rc == 0) {
        f->call = call;
        f->p = p;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&t, &attr, metrics_main, f);
        pthread_attr_destroy(&attr);
    }
    if (rc != 0) {
        mem_free(f);
        atomic_fetch_sub(&metrics_running, 1);
        reply_text(call, 500, RPC_HTTP_NOSNIFF, "Internal server error\n");
    }
}

void gp_http(struct rpc_call *call, const uint8_t *body, size_t len,
             void *ctx)
{
    struct grpcproxy *p = ctx;
    size_t mlen = 0, plen = 0;
    const char *method = rpc_call_metadata(call, ":method", &mlen);
    const char *path = rpc_call_metadata(call, ":path", &plen);
    size_t pend = 0;

    (void)body;
    (void)len;
    while (path != NULL && pend < plen && path[pend] != '?')
        pend++;
    if (path != NULL && pend == 7 && memcmp(path, "/health", 7) == 0) {
        if (method == NULL || mlen != 3 || memcmp(method, "GET", 3) != 0) {
            log_warn("etcdhttp", "/health error (status code 405)");
            reply_text(call, 405, RPC_HTTP_NOSNIFF | RPC_HTTP_ALLOW_GET,
                       "Method Not Allowed\n");
            return;
        }
        health(p, call);
        return;
    }
    if (path != NULL && pend == 8 && memcmp(path, "/metrics", 8) == 0) {
        metrics(p, call);
        return;
    }
    reply_text(call, 404, RPC_HTTP_NOSNIFF, "404 page not found\n");
}
