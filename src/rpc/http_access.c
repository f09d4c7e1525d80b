/*
 * http_access.c - etcd's access rules for the HTTP requests of a server
 * (rpc.h struct rpc_http_access): --host-whitelist refuses a plaintext
 * request whose host is not listed (etcd's guard against DNS rebinding,
 * CVE-2018-5702), --cors decides which answers carry the
 * Access-Control-Allow-* headers and with which origin.  Both are
 * decided once per request, when it is dispatched to the handler.
 */
#define _GNU_SOURCE /* memrchr */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

/* listed: s (n bytes) is in list (NULL-ended), or list has "*". */
static bool listed(const char *const *list, const char *s, size_t n)
{
    for (const char *const *x = list; *x != NULL; x++)
        if (strcmp(*x, "*") == 0 ||
            (strlen(*x) == n && memcmp(*x, s, n) == 0))
            return true;
    return false;
}

/* host_of: the host name of a Host value as Go's httputil.GetHostname
 * takes it (net.SplitHostPort; a value it cannot split is the host):
 * "[::1]:2379" -> "::1", "a:2379" -> "a", "a" -> "a". */
static void host_of(const char *v, size_t n, const char **h, size_t *hn)
{
    *h = v;
    *hn = n;
    const char *colon = n > 0 ? memrchr(v, ':', n) : NULL;
    if (colon == NULL)
        return;
    if (v[0] == '[') { /* "[host]:port" */
        if (colon > v && colon[-1] == ']') {
            *h = v + 1;
            *hn = (size_t)(colon - v) - 2;
        }
        return;
    }
    if (memchr(v, ':', (size_t)(colon - v)) != NULL)
        return; /* two colons, no brackets: Go's "too many colons" */
    *hn = (size_t)(colon - v);
}

bool rpc__http_host_allowed(const struct rpc_server *srv,
                            const struct rpc_call *call, char *host_out,
                            size_t cap)
{
    assert(cap > 0);
    host_out[0] = '\0';
    const char *const *hosts = srv->http_access.hosts;
    if (hosts == NULL || call->conn->ssl != NULL)
        return true; /* TLS requests are not checked (etcd) */
    size_t n = 0;
    const char *v = rpc__hdrs_find(&call->hdrs, ":authority", &n);
    if (v == NULL)
        v = rpc__hdrs_find(&call->hdrs, "host", &n);
    if (v == NULL) {
        v = "";
        n = 0;
    }
    const char *h;
    size_t hn;
    host_of(v, n, &h, &hn);
    if (listed(hosts, h, hn))
        return true;
    snprintf(host_out, cap, "%.*s", (int)hn, h);
    return false;
}

const char *rpc__http_cors_origin(const struct rpc_server *srv,
                                  const struct rpc__hdrs *hdrs)
{
    const char *const *cors = srv->http_access.cors;
    if (cors == NULL)
        return NULL;
    if (listed(cors, "*", 1))
        return "*";
    size_t n = 0;
    const char *origin = rpc__hdrs_find(hdrs, "origin", &n);
    if (origin == NULL) {
        origin = ""; /* Go's Header.Get of a missing header */
        n = 0;
    }
    return listed(cors, origin, n) ? origin : NULL;
}

void rpc__http_refuse_host(struct rpc_call *call, const char *host)
{
    char body[640];
    log_warn("rpc", "rejecting HTTP request from \"%s\" to prevent DNS "
                    "rebinding attacks", host);
    int n = snprintf(body, sizeof body,
                     "\netcd received your request, but the Host header was "
                     "unrecognized.\n\nTo fix this, choose one of the "
                     "following options:\n- Enable TLS, then any HTTPS "
                     "request will be allowed.\n- Add the hostname you want "
                     "to use to the whitelist in settings.\n  - e.g. etcd "
                     "--host-whitelist \"%s\"\n\nThis requirement has been "
                     "added to help prevent \"DNS Rebinding\" attacks "
                     "(CVE-2018-5702).\n\n",
                     host);
    if (n < 0 || (size_t)n >= sizeof body)
        n = (int)strlen(body);
    rpc_call_reply_http(call, 421, "text/plain; charset=utf-8",
                        RPC_HTTP_NOSNIFF, body, (size_t)n);
}
