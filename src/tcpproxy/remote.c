/*
 * remote.c - the proxy's endpoints: parsing and resolving them, dialling,
 * the round-robin pick, deactivation after a failed dial and the
 * background dial that activates an endpoint again.
 */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "tcpproxy/tcpproxy_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

bool tcpproxy_split_host_port(const char *ep, char *host, size_t host_cap,
                              char *port, size_t port_cap)
{
    const char *colon = strrchr(ep, ':');
    if (colon == NULL)
        return false;
    const char *h = ep, *he = colon;
    if (ep[0] == '[') {
        const char *close = strchr(ep, ']');
        if (close == NULL || close + 1 != colon)
            return false;
        h = ep + 1;
        he = close;
    } else if (memchr(ep, ':', (size_t)(colon - ep)) != NULL ||
               strchr(ep, '[') != NULL || strchr(ep, ']') != NULL) {
        return false; /* too many colons, or stray brackets */
    }
    const char *p = colon + 1;
    size_t plen = strlen(p);
    if (plen == 0 || plen > 5)
        return false;
    unsigned long v = 0;
    for (size_t i = 0; i < plen; i++) {
        if (!isdigit((unsigned char)p[i]))
            return false;
        v = v * 10 + (unsigned long)(p[i] - '0');
    }
    size_t hlen = (size_t)(he - h);
    if (v > 65535 || hlen >= host_cap || plen >= port_cap)
        return false;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memcpy(port, p, plen + 1);
    return true;
}

void tcpproxy_addr_string(const struct sockaddr *sa, socklen_t len,
                          const char *port, char *buf, size_t cap)
{
    char ip[64] = "?";
    getnameinfo(sa, len, ip, sizeof ip, NULL, 0, NI_NUMERICHOST);
    snprintf(buf, cap, strchr(ip, ':') ? "[%s]:%s" : "%s:%s", ip, port);
}

void tcpproxy_errno_text(int err, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", strerror(err));
    buf[0] = (char)tolower((unsigned char)buf[0]);
}

int tcpproxy__remotes_resolve(struct tcpproxy *p,
                              const struct tcpproxy_endpoint *eps, size_t n,
                              char *why, size_t why_cap)
{
    if (n == 0 || n > TCPPROXY_ENDPOINTS_MAX) {
        snprintf(why, why_cap, "%zu endpoints (1 to %d)", n,
                 TCPPROXY_ENDPOINTS_MAX);
        return ERR_INVAL;
    }
    p->remotes = mem_calloc(n, sizeof *p->remotes);
    if (p->remotes == NULL)
        return ERR_NOMEM;
    p->n_remotes = n;
    for (size_t i = 0; i < n; i++) {
        p->remotes[i].probe_tag.kind = TAG_PROBE;
        p->remotes[i].probe_fd = -1;
    }
    for (size_t i = 0; i < n; i++) {
        struct remote *r = &p->remotes[i];
        r->priority = eps[i].priority;
        r->weight = eps[i].weight;
        char host[256], port[8];
        if (!tcpproxy_split_host_port(eps[i].addr, host, sizeof host, port,
                                      sizeof port)) {
            snprintf(why, why_cap, "error parsing endpoint \"%s\"",
                     eps[i].addr);
            return ERR_INVAL;
        }
        snprintf(r->addr, sizeof r->addr, strchr(host, ':') ? "[%s]:%s" :
                 "%s:%s", host, port);
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL) {
            snprintf(why, why_cap, "failed to resolve endpoint host: %s",
                     host);
            return ERR_NOTFOUND;
        }
        memcpy(&r->sa, res->ai_addr, res->ai_addrlen);
        r->sa_len = res->ai_addrlen;
        tcpproxy_addr_string(res->ai_addr, res->ai_addrlen, port,
                             r->dialled, sizeof r->dialled);
        freeaddrinfo(res);
    }
    return 0;
}

/* Go's net package on every TCP connection: no Nagle, keepalive probes
 * after 15 s idle, every 15 s. */
void tcpproxy__tune(int fd)
{
    int one = 1, secs = 15;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof secs);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &secs, sizeof secs);
}

int tcpproxy__dial(const struct remote *r, int *err_out, bool *done_out)
{
    *done_out = false;
    int fd = socket(r->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
                    SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err_out = errno;
        return -1;
    }
    tcpproxy__tune(fd);
    if (connect(fd, (const struct sockaddr *)&r->sa, r->sa_len) == 0) {
        *done_out = true;
        return fd;
    }
    if (errno == EINPROGRESS)
        return fd;
    *err_out = errno;
    close(fd);
    return -1;
}

void tcpproxy__dial_error(const struct remote *r, int err, bool timed_out,
                          char *buf, size_t cap)
{
    if (timed_out) {
        snprintf(buf, cap, "dial tcp %s: i/o timeout", r->dialled);
        return;
    }
    char text[128];
    tcpproxy_errno_text(err, text, sizeof text);
    snprintf(buf, cap, "dial tcp %s: connect: %s", r->dialled, text);
}

long tcpproxy__pick(struct tcpproxy *p, const struct pair *c)
{
    size_t n = p->n_remotes;
    /* The best priority among the active endpoints not dialled yet. */
    long best = -1;
    unsigned long weights = 0;
    for (size_t k = 0; k < n; k++) {
        const struct remote *r = &p->remotes[k];
        if (r->inactive || (c->tried & (1ull << k)))
            continue;
        if (best < 0 || r->priority < best) {
            best = r->priority;
            weights = 0;
        }
        if (r->priority == best)
            weights += r->weight;
    }
    if (best >= 0 && weights > 0) {
        /* RFC 2782: at random in proportion to the weights (an endpoint
         * of weight 0 is taken only when no weighted one is left). */
        unsigned long s = (unsigned long)random() % weights;
        for (size_t k = 0; k < n; k++) {
            const struct remote *r = &p->remotes[k];
            if (r->inactive || (c->tried & (1ull << k)) ||
                r->priority != best || r->weight == 0)
                continue;
            if (s < r->weight)
                return (long)k;
            s -= r->weight;
        }
    }
    if (best >= 0) {
        for (size_t i = 0; i < n; i++) {
            size_t k = p->pick_count++ % n;
            const struct remote *r = &p->remotes[k];
            if (!r->inactive && !(c->tried & (1ull << k)) &&
                r->priority == best)
                return (long)k;
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (!(c->tried & (1ull << k)))
            return (long)k;
    }
    return -1;
}

void tcpproxy__deactivate(struct tcpproxy *p, struct remote *r, int err,
                          bool timed_out)
{
    char e[400];
    tcpproxy__dial_error(r, err, timed_out, e, sizeof e);
    if (!r->inactive) {
        r->inactive = true;
        r->retry_at_ms = tcpproxy__now_ms() + p->retry_delay_ms;
    }
    log_zap(LOG_WARN, "deactivated endpoint", LOG_STR("address", r->addr),
            LOG_SECS_MS("interval", p->retry_delay_ms), LOG_STR("error", e));
}

void tcpproxy__activate(struct tcpproxy *p, struct remote *r)
{
    (void)p;
    if (!r->inactive)
        return;
    r->inactive = false;
    log_zap(LOG_INFO, "activated", LOG_STR("address", r->addr));
}

/* A background dial failed: the endpoint waits another interval. */
static void probe_failed(struct tcpproxy *p, struct remote *r, int err,
                         bool timed_out)
{
    r->retry_at_ms = tcpproxy__now_ms() + p->retry_delay_ms;
    if (!r->inactive)
        return; /* a client's dial activated it meanwhile */
    char e[400];
    tcpproxy__dial_error(r, err, timed_out, e, sizeof e);
    log_zap(LOG_WARN,
            "failed to activate endpoint (stay inactive for another "
            "interval)",
            LOG_STR("address", r->addr),
            LOG_SECS_MS("interval", p->retry_delay_ms), LOG_STR("error", e));
}

static void probe_end(struct tcpproxy *p, struct remote *r, int err,
                      bool timed_out)
{
    uint32_t cur = EPOLLOUT;
    tcpproxy__watch(p, r->probe_fd, &r->probe_tag, &cur, 0);
    close(r->probe_fd);
    r->probe_fd = -1;
    if (err == 0 && !timed_out)
        tcpproxy__activate(p, r);
    else
        probe_failed(p, r, err, timed_out);
}

void tcpproxy__probes_due(struct tcpproxy *p, int64_t now)
{
    for (size_t i = 0; i < p->n_remotes; i++) {
        struct remote *r = &p->remotes[i];
        if (r->probe_fd >= 0 && now >= r->probe_deadline_ms) {
            probe_end(p, r, ETIMEDOUT, true);
            continue;
        }
        if (!r->inactive || r->probe_fd >= 0 || now < r->retry_at_ms)
            continue;
        int err = 0;
        bool done;
        int fd = tcpproxy__dial(r, &err, &done);
        if (fd < 0) {
            probe_failed(p, r, err, false);
            continue;
        }
        if (done) {
            close(fd);
            tcpproxy__activate(p, r);
            continue;
        }
        r->probe_fd = fd;
        r->probe_deadline_ms = now + p->connect_timeout_ms;
        uint32_t cur = 0;
        tcpproxy__watch(p, fd, &r->probe_tag, &cur, EPOLLOUT);
    }
}

void tcpproxy__probe_event(struct tcpproxy *p, struct remote *r)
{
    if (r->probe_fd < 0)
        return;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(r->probe_fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    probe_end(p, r, err, false);
}

int64_t tcpproxy__probes_next(const struct tcpproxy *p)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < p->n_remotes; i++) {
        const struct remote *r = &p->remotes[i];
        int64_t t = r->probe_fd >= 0 ? r->probe_deadline_ms :
                    r->inactive ? r->retry_at_ms : INT64_MAX;
        if (t < next)
            next = t;
    }
    return next;
}

void tcpproxy__probes_close(struct tcpproxy *p)
{
    for (size_t i = 0; i < p->n_remotes; i++) {
        if (p->remotes[i].probe_fd >= 0) {
            close(p->remotes[i].probe_fd);
            p->remotes[i].probe_fd = -1;
        }
    }
}
