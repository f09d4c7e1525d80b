/*
 * discovery_srv.c - --initial-cluster from DNS SRV records (etcd's
 * srv.GetCluster and Config.GetDNSClusterNames).  See discovery_srv.h.
 */
#include "cmd/discovery_srv.h"

#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "dnssrv/dnssrv.h"
#include "tcpproxy/tcpproxy.h"
#include "util/log.h"

#define APURLS_MAX 16

struct apurl {
    char scheme[16];
    char url[300];
    char addr[80]; /* the resolved "ip:port" */
};

/* host:port resolved as Go's ResolveTCPAddr does (an IPv4 address first):
 * "ip:port" into out; false with Go's lookup error in why. */
static bool resolve(const char *host, const char *port, char *out, size_t cap,
                    char *why, size_t why_cap)
{
    struct addrinfo hints, *res = NULL, *pick = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        snprintf(why, why_cap, "lookup %s: no such host", host);
        return false;
    }
    for (struct addrinfo *a = res; a != NULL && pick == NULL; a = a->ai_next)
        if (a->ai_family == AF_INET)
            pick = a;
    if (pick == NULL)
        pick = res;
    tcpproxy_addr_string(pick->ai_addr, pick->ai_addrlen, port, out, cap);
    freeaddrinfo(res);
    return true;
}

static int parse_apurls(const char *csv, struct apurl *ap, size_t *n,
                        char *why, size_t why_cap)
{
    *n = 0;
    const char *p = csv;
    while (*p != '\0' && *n < APURLS_MAX) {
        size_t len = strcspn(p, ",");
        struct apurl *a = &ap[*n];
        snprintf(a->url, sizeof a->url, "%.*s", (int)len, p);
        p += len + (p[len] == ',');
        const char *sep = strstr(a->url, "://");
        if (sep == NULL || (size_t)(sep - a->url) >= sizeof a->scheme)
            continue;
        snprintf(a->scheme, sizeof a->scheme, "%.*s", (int)(sep - a->url),
                 a->url);
        char hostport[300], host[256], port[8];
        snprintf(hostport, sizeof hostport, "%.*s",
                 (int)strcspn(sep + 3, "/?#"), sep + 3);
        if (!tcpproxy_split_host_port(hostport, host, sizeof host, port,
                                      sizeof port)) {
            snprintf(why, why_cap, "address %s: missing port in address",
                     hostport);
            return -1;
        }
        if (!resolve(host, port, a->addr, sizeof a->addr, why, why_cap))
            return -1;
        (*n)++;
    }
    return 0;
}

/* etcd's GetCluster for one service: "<name>=<scheme>://<host>:<port>"
 * appended to out (comma separated) for each record; *found how many.
 * -1 (why: the lookup's error, or the last record's) when none. */
static int get_cluster(const char *scheme, const char *service,
                       const char *name, const char *domain,
                       const struct apurl *ap, size_t n_ap, char *out,
                       size_t cap, size_t *found, char *why, size_t why_cap)
{
    struct dnssrv_record recs[DNSSRV_RECORDS_MAX];
    size_t n = 0;
    char err[1200] = "";
    *found = 0;
    if (dnssrv_lookup(service, domain, recs, DNSSRV_RECORDS_MAX, &n, err,
                      sizeof err) != 0) {
        snprintf(why, why_cap, "error querying DNS SRV records for _%s %s",
                 service, err);
        return -1;
    }
    int temp = 0;
    for (size_t i = 0; i < n; i++) {
        char port[8], addr[80], terr[300];
        snprintf(port, sizeof port, "%u", recs[i].port);
        if (!resolve(recs[i].target, port, addr, sizeof addr, terr,
                     sizeof terr)) {
            snprintf(err, sizeof err, "%s", terr);
            continue;
        }
        const struct apurl *mine = NULL;
        for (size_t k = 0; k < n_ap && mine == NULL; k++)
            if (strcmp(ap[k].addr, addr) == 0)
                mine = &ap[k];
        char tmp[16];
        snprintf(tmp, sizeof tmp, "%d", temp);
        const char *who = mine != NULL ? name : tmp;
        if (mine == NULL)
            temp++;
        char host[256];
        snprintf(host, sizeof host, "%s", recs[i].target);
        size_t hl = strlen(host);
        if (hl > 1 && host[hl - 1] == '.')
            host[hl - 1] = '\0'; /* SRV targets end in a dot, URLs do not */
        if (mine != NULL && strcmp(mine->scheme, scheme) != 0) {
            snprintf(err, sizeof err, "bootstrap at %s://%s:%s from DNS for "
                     "%s has scheme mismatch with expected peer %s", scheme,
                     host, port, service, mine->url);
            continue;
        }
        size_t w = strlen(out);
        int k = snprintf(out + w, cap - w, "%s%s=%s://%s:%s", w ? "," : "",
                         who, scheme, host, port);
        if (k < 0 || (size_t)k >= cap - w) {
            out[w] = '\0';
            break;
        }
        (*found)++;
    }
    if (*found > 0)
        return 0;
    snprintf(why, why_cap, "error querying DNS SRV records for _%s %s",
             service, err);
    return -1;
}

static void log_service(const char *scheme, const char *service,
                        const char *name, const char *domain,
                        const char *apurls, const char *found,
                        const char *err)
{
    if (!log_is_zap())
        return;
    char msg[400];
    snprintf(msg, sizeof msg, "get cluster for %s SRV",
             strcmp(scheme, "https") == 0 ? "etcd-server-ssl" : "etcd-server");
    struct log_field f[] = {
        LOG_STR("service-scheme", scheme), LOG_STR("service-name", service),
        LOG_STR("server-name", name), LOG_STR("discovery-srv", domain),
        LOG_CSV("advertise-peer-urls", apurls), LOG_CSV("found-cluster", found),
        LOG_STR("error", err)};
    log_zap_at(LOG_INFO, __FILE__, __LINE__, msg, f,
               err[0] != '\0' ? 7 : 6);
}

int discovery_srv_cluster(const char *name, const char *domain,
                          const char *service_name, const char *apurls,
                          char *out, size_t cap, char *why, size_t why_cap)
{
    struct apurl ap[APURLS_MAX];
    size_t n_ap;
    out[0] = '\0';
    if (parse_apurls(apurls, ap, &n_ap, why, why_cap) != 0)
        return -1;
    const char *dash = service_name[0] ? "-" : "";
    char svc[2][300], errs[2][700] = {"", ""};
    snprintf(svc[0], sizeof svc[0], "etcd-server-ssl%s%s", dash,
             service_name);
    snprintf(svc[1], sizeof svc[1], "etcd-server%s%s", dash, service_name);
    static const char *const schemes[2] = {"https", "http"};
    size_t total = 0;
    for (int s = 0; s < 2; s++) {
        size_t found;
        (void)get_cluster(schemes[s], svc[s], name, domain, ap, n_ap, out,
                          cap, &found, errs[s], sizeof errs[s]);
        total += found;
        log_service(schemes[s], svc[s], name, domain, apurls, out, errs[s]);
    }
    if (total == 0) {
        snprintf(why, why_cap, "%s; %s", errs[0], errs[1]);
        if (log_is_zap())
            log_zap(LOG_WARN, "failed to resolve during SRV discovery",
                    LOG_STR("error", why));
        else
            log_msg(LOG_ERROR, "embed", "couldn't resolve during SRV "
                    "discovery (%s)", why);
        return -1;
    }
    for (const char *p = out; *p != '\0';) {
        size_t len = strcspn(p, ",");
        char node[700];
        snprintf(node, sizeof node, "%.*s", (int)len, p);
        if (log_is_zap())
            log_zap(LOG_INFO, "got bootstrap from DNS for etcd-server",
                    LOG_STR("node", node));
        else
            log_msg(LOG_NOTICE, "embed",
                    "got bootstrap from DNS for etcd-server at %s", node);
        p += len + (p[len] == ',');
    }
    /* Only a member of the discovered cluster may start from it. */
    size_t nl = strlen(name);
    for (const char *p = out; *p != '\0';) {
        if (strncmp(p, name, nl) == 0 && p[nl] == '=')
            return 0;
        p += strcspn(p, ",");
        p += *p == ',';
    }
    snprintf(why, why_cap, "cannot find local etcd member \"%s\" in SRV "
             "records", name);
    return -1;
}
