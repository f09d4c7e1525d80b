/*
 * grpc_proxy_listen.c - the check `cetcd grpc-proxy start` (grpc_proxy.h)
 * makes of --listen-addr before the TLS listener and the upstream client,
 * where etcd calls net.Listen: the address is split, its port looked up,
 * its host resolved, and a socket bound and closed at once, failures
 * printed as Go's net errors ("listen tcp 127.0.0.1:23790: bind: address
 * already in use").  rpc/ listens for real later.  See grpc_proxy_int.h.
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd/grpc_proxy_int.h"
#include "tcpproxy/tcpproxy.h"

/* Scratch for a message (main thread only, before other threads exist). */
static char why_buf[GRPC_PROXY_MSG_MAX];

/* Go's net.SplitHostPort: NULL, or its reason. */
static const char *split_host_port(const char *hp, char *host, size_t hcap,
                                   const char **port)
{
    const char *colon = strrchr(hp, ':'), *close = NULL, *start = hp;
    if (colon == NULL)
        return "missing port in address";
    if (hp[0] == '[') {
        close = strchr(hp, ']');
        if (close == NULL)
            return "missing ']' in address";
        if (close[1] == '\0')
            return "missing port in address";
        if (close + 1 != colon)
            return close[1] == ':' ? "too many colons in address"
                                   : "missing port in address";
        start = hp + 1;
    } else if (memchr(hp, ':', (size_t)(colon - hp)) != NULL) {
        return "too many colons in address";
    }
    if (strchr(hp + (close != NULL), '[') != NULL)
        return "unexpected '[' in address";
    if (strchr(close != NULL ? close + 1 : hp, ']') != NULL)
        return "unexpected ']' in address";
    size_t n = (size_t)((close != NULL ? close : colon) - start);
    snprintf(host, hcap, "%.*s", (int)n, start);
    *port = colon + 1;
    return NULL;
}

/* Go's LookupPort: the port of service (digits, or a name from
 * /etc/services), or -1 with Go's reason in why. */
static int lookup_port(const char *service, char *why, size_t cap)
{
    const char *p = service + (*service == '+' || *service == '-');
    uint64_t n = 0;
    bool digits = true;
    for (const char *c = p; *c != '\0' && digits; c++) {
        digits = *c >= '0' && *c <= '9';
        n = n * 10 + (uint64_t)(*c - '0');
        n = n > 65536 ? 65536 : n;
    }
    if (!digits) {
        struct servent *se = getservbyname(service, "tcp");
        if (se == NULL) {
            snprintf(why, cap, "address tcp/%s: unknown port", service);
            return -1;
        }
        return ntohs((uint16_t)se->s_port);
    }
    if (n > 65535 || (*service == '-' && n > 0)) {
        snprintf(why, cap, "address %s: invalid port", service);
        return -1;
    }
    return (int)n;
}

/* Go's address text: "ip:port", "[v6]:port", ":port" for no IP. */
static void addr_text(const struct sockaddr *sa, socklen_t len, int port,
                      char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN + 16] = "";
    if (sa != NULL)
        getnameinfo(sa, len, ip, sizeof ip, NULL, 0, NI_NUMERICHOST);
    bool v6 = sa != NULL && sa->sa_family == AF_INET6;
    snprintf(buf, cap, "%s%s%s:%d", v6 ? "[" : "", ip, v6 ? "]" : "", port);
}

/* Binds and listens on ai (a probe, closed at once); 0 or Go's error.
 * bound gets the listener's address as Go's l.Addr() names it. */
static int bind_probe(struct addrinfo *ai, bool wildcard, int port,
                      char *bound, size_t bcap, char *why, size_t cap)
{
    char addr[128], text[128];
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    const char *op = "socket";
    int one = 1, zero = 0, rc = 1;
    bound[0] = '\0';
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6) /* Go's dual-stack wildcard */
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        op = "bind";
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            op = "listen";
            rc = listen(fd, 1) != 0;
        }
    }
    if (rc == 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        int p = ss.ss_family == AF_INET6
                    ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        addr_text((struct sockaddr *)&ss, sl, p, bound, bcap);
    } else if (rc != 0) {
        tcpproxy_errno_text(errno, text, sizeof text);
        addr_text(wildcard ? NULL : ai->ai_addr, ai->ai_addrlen, port, addr,
                  sizeof addr);
        snprintf(why, cap, "listen tcp %s: %s: %s", addr, op, text);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

int grpc_proxy__listen_probe(const char *addr, char *bound, size_t bcap)
{
    char host[256];
    assert(addr != NULL && bcap > 0);
    const char *port, *bad = split_host_port(addr, host, sizeof host, &port);
    if (bad != NULL)
        return grpc_proxy__plain_error("listen tcp: address %s: %s", addr,
                                       bad);
    int p = lookup_port(port, why_buf, sizeof why_buf);
    if (p < 0)
        return grpc_proxy__plain_error("listen tcp: %s", why_buf);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", p);
    if (host[0] == '\0') { /* Go: the IPv6 wildcard, dual-stack */
        hints.ai_flags |= AI_PASSIVE;
        hints.ai_family = AF_INET6;
    }
    int g = getaddrinfo(host[0] ? host : NULL, ps, &hints, &res);
    if (g != 0 && host[0] == '\0') {
        hints.ai_family = AF_INET;
        g = getaddrinfo(NULL, ps, &hints, &res);
    }
    if (g != 0)
        return grpc_proxy__plain_error("listen tcp: lookup %s: no such host",
                                       host);
    struct addrinfo *pick = res; /* Go listens on the first IPv4 one */
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next)
        if (a->ai_family == AF_INET && pick->ai_family != AF_INET)
            pick = a;
    int rc = bind_probe(pick, host[0] == '\0', p, bound, bcap, why_buf,
                        sizeof why_buf);
    freeaddrinfo(res);
    return rc != 0 ? grpc_proxy__plain_error("%s", why_buf) : 0;
}
