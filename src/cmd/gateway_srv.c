/*
 * gateway_srv.c - the gateway's --discovery-srv: etcd 3.4's
 * discoverEndpoints (etcdmain/util.go) with srv.GetClient: the client
 * endpoints from the SRV records _etcd-client-ssl[-<name>]._tcp.<domain>
 * (https) and _etcd-client[-<name>]._tcp.<domain> (http), then, unless
 * --insecure-discovery, only the https ones that accept a TCP connection
 * within 5 s (what etcd's ValidateSecureEndpoints checks: its transport's
 * Dial is a plain TCP dial).  Log lines as etcd's zap lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd/gateway.h"
#include "dnssrv/dnssrv.h"
#include "tcpproxy/tcpproxy.h"
#include "util/log.h"

#define VALIDATE_TIMEOUT_MS 5000

/* A TCP connection to host:port within VALIDATE_TIMEOUT_MS; 0 or the
 * errno (ETIMEDOUT), Go's text in why. */
static int tcp_dial(const char *hostport, char *why, size_t why_cap)
{
    char host[256], port[8];
    if (!tcpproxy_split_host_port(hostport, host, sizeof host, port,
                                  sizeof port)) {
        snprintf(why, why_cap, "dial tcp %s: missing port in address",
                 hostport);
        return EINVAL;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        snprintf(why, why_cap, "dial tcp: lookup %s: no such host", host);
        return ENOENT;
    }
    int err = 0;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
                    SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err = errno;
    } else if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            socklen_t len = sizeof err;
            if (poll(&pf, 1, VALIDATE_TIMEOUT_MS) != 1)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                err = errno;
        }
    }
    if (fd >= 0)
        close(fd);
    /* Go names the address it dialled, not the host it was given. */
    char addr[80], text[128];
    tcpproxy_addr_string(res->ai_addr, res->ai_addrlen, port, addr,
                         sizeof addr);
    freeaddrinfo(res);
    tcpproxy_errno_text(err, text, sizeof text);
    if (err == ETIMEDOUT)
        snprintf(why, why_cap, "dial tcp %s: i/o timeout", addr);
    else if (err != 0)
        snprintf(why, why_cap, "dial tcp %s: connect: %s", addr, text);
    return err;
}

static void csv(const struct gateway_endpoint *eps, size_t n, char *buf,
                size_t cap)
{
    size_t w = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && w + 1 < cap; i++) {
        int k = snprintf(buf + w, cap - w, "%s%s", i ? "," : "", eps[i].url);
        if (k < 0 || (size_t)k >= cap - w)
            break;
        w += (size_t)k;
    }
}

/* The records of one service, appended as "<scheme>://<target>:<port>". */
static int lookup_into(const char *service, const char *scheme,
                       const char *dns, struct gateway_endpoint *eps,
                       size_t cap, size_t *n, char *why, size_t why_cap)
{
    struct dnssrv_record recs[DNSSRV_RECORDS_MAX];
    size_t got;
    int rc = dnssrv_lookup(service, dns, recs, DNSSRV_RECORDS_MAX, &got, why,
                           why_cap);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < got && *n < cap; i++) {
        struct gateway_endpoint *e = &eps[(*n)++];
        snprintf(e->url, sizeof e->url, "%s://%s:%u", scheme,
                 recs[i].target, recs[i].port);
        e->priority = recs[i].priority;
        e->weight = recs[i].weight;
    }
    return 0;
}

int gateway_discover(const char *dns, const char *service_name,
                     bool insecure, struct gateway_endpoint *eps, size_t cap,
                     size_t *n_out)
{
    char svc_https[300], svc_http[300];
    const char *dash = service_name[0] ? "-" : "";
    snprintf(svc_https, sizeof svc_https, "etcd-client-ssl%s%s", dash,
             service_name);
    snprintf(svc_http, sizeof svc_http, "etcd-client%s%s", dash,
             service_name);
    char why_https[600] = "", why_http[600] = "";
    size_t n = 0;
    int rs = lookup_into(svc_https, "https", dns, eps, cap, &n, why_https,
                         sizeof why_https);
    int rh = lookup_into(svc_http, "http", dns, eps, cap, &n, why_http,
                         sizeof why_http);
    if (rs != 0 && rh != 0) {
        fprintf(stderr, "dns lookup errors: %s and %s\n", why_https,
                why_http);
        return 1;
    }
    static char list[TCPPROXY_ENDPOINTS_MAX * 320];
    csv(eps, n, list, sizeof list);
    log_zap(LOG_INFO, "discovered cluster from SRV", LOG_STR("srv-server", dns),
            LOG_CSV("endpoints", list));
    *n_out = n;
    if (insecure)
        return 0;
    log_zap(LOG_INFO, "validating discovered SRV endpoints",
            LOG_STR("srv-server", dns), LOG_CSV("endpoints", list));
    /* etcd's ValidateSecureEndpoints: http ones are insecure, https ones
     * must take a TCP connection; the errors joined by ",". */
    static char errs[TCPPROXY_ENDPOINTS_MAX * 1000];
    size_t kept = 0, ew = 0;
    errs[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char e[1000] = "";
        if (strncmp(eps[i].url, "https://", 8) != 0)
            snprintf(e, sizeof e, "\"%s\" is insecure", eps[i].url);
        else {
            char dial[600] = "";
            if (tcp_dial(eps[i].url + 8, dial, sizeof dial) != 0)
                snprintf(e, sizeof e, "\"%s\" failed to dial (%s)",
                         eps[i].url, dial);
        }
        if (e[0] == '\0') {
            eps[kept++] = eps[i];
            continue;
        }
        int k = snprintf(errs + ew, sizeof errs - ew, "%s%s", ew ? "," : "",
                         e);
        if (k > 0 && (size_t)k < sizeof errs - ew)
            ew += (size_t)k;
    }
    *n_out = kept;
    csv(eps, kept, list, sizeof list);
    if (ew > 0)
        log_zap(LOG_WARN, "failed to validate discovered endpoints",
                LOG_STR("srv-server", dns), LOG_CSV("endpoints", list),
                LOG_STR("error", errs));
    else
        log_zap(LOG_INFO, "using validated discovered SRV endpoints",
                LOG_STR("srv-server", dns), LOG_CSV("endpoints", list));
    return 0;
}
