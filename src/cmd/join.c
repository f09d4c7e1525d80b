/*
 * join.c - --initial-cluster-state=existing: before a new member starts,
 * it asks the running members (at the peer URLs --initial-cluster lists
 * for them) for the cluster id and the current members, through cetcd's
 * Join service on their peer listeners (etcd: GetClusterFromRemotePeers),
 * and finds its own id, chosen by MemberAdd, by its advertised peer URLs.
 * The running members do not compare --initial-cluster-token (as etcd).  https://
 * and unixs:// peers are dialled with the member's own peer TLS material
 * (--peer-cert-file/--peer-key-file/--peer-trusted-ca-file, or unverified
 * with --peer-auto-tls), as its peer transport dials them later, with
 * --peer-cert-allowed-cn / --peer-cert-allowed-hostname checked on their
 * certificates (etcd's peer TLS config checks them on both ends).
 */
#include "cmd/join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cetcd/cetcd.h"
#include "cetcdpb/internal.pb-c.h"
#include "dial/dial.h"
#include "util/log.h"

#define JOIN_URLS_MAX 16 /* peer URLs of one member compared */
/* Per peer URL asked: the connection (TLS handshake included) within 1 s
 * plus the election timeout (etcd's peer dial timeout), then the answer
 * (etcd allows 10 s per URL in all). */
#define JOIN_DIAL_BASE_MS 1000
#define JOIN_CALL_TIMEOUT_MS 5000
/* The diagnostic handshake after a TLS peer could not be reached. */
#define JOIN_PROBE_MS 2000

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The advertised URLs, sorted, into out (pointers into buf). */
static size_t sorted_urls(char *buf, const char **out)
{
    size_t n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t && n < JOIN_URLS_MAX;
         t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    qsort(out, n, sizeof out[0], cmp_str);
    return n;
}

static bool same_urls(const Etcdserverpb__Member *m, const char *self_urls)
{
    char buf[4096];
    const char *mine[JOIN_URLS_MAX], *theirs[JOIN_URLS_MAX];
    snprintf(buf, sizeof buf, "%s", self_urls);
    size_t n = sorted_urls(buf, mine);
    if (m->n_peerurls != n || n == 0)
        return false;
    memcpy(theirs, m->peerurls, n * sizeof theirs[0]);
    qsort(theirs, n, sizeof theirs[0], cmp_str);
    for (size_t i = 0; i < n; i++)
        if (strcmp(mine[i], theirs[i]) != 0)
            return false;
    return true;
}

/* The other members' peer URLs from --initial-cluster (name=url,...),
 * comma-separated into out. */
static void endpoints_of(const char *initial_cluster, const char *self,
                         char *out, size_t cap)
{
    char buf[4096];
    size_t used = 0;
    out[0] = '\0';
    snprintf(buf, sizeof buf, "%s", initial_cluster);
    for (char *save, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq == NULL || ((size_t)(eq - t) == strlen(self) &&
                           strncmp(t, self, strlen(self)) == 0))
            continue;
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                     used ? "," : "", eq + 1);
    }
}

bool join_has_wal(const char *data_dir, const char *wal_dir)
{
    char path[4200];
    struct stat st;
    if (wal_dir != NULL && *wal_dir)
        snprintf(path, sizeof path, "%s", wal_dir);
    else
        snprintf(path, sizeof path, "%s/member/wal", data_dir);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* tls_why explains, into why, a failure to reach the TLS peer at url
 * (gRPC only says UNAVAILABLE); "" when the URL is not a TLS one. */
static void tls_why(const char *url, const struct dial_tls *tls, char *why,
                    size_t cap)
{
    char target[512], reason[256];
    enum dial_security sec;
    why[0] = '\0';
    if (dial_url_parse(url, strlen(url), target, sizeof target, &sec) != 0 ||
        sec != DIAL_SECURITY_TLS)
        return;
    const struct dial_tls system_cas = {0};
    if (dial_tls_probe(target, tls ? tls : &system_cas, JOIN_PROBE_MS,
                       reason, sizeof reason) != 0)
        snprintf(why, cap, "; %s", reason);
}

/* ask_one asks the member at peer URL url, dialling https:// and unixs://
 * with tls; 0, or the status code after logging why (etcd: "could not get
 * cluster response from"). */
static int ask_one(const char *url, const struct server_config *cfg,
                   const Cetcdpb__JoinRequest *req,
                   Cetcdpb__JoinResponse **resp_out)
{
    const struct dial_tls *tls = cfg->peer_tls;
    struct cetcd_tls ct;
    if (tls != NULL)
        ct = (struct cetcd_tls){.ca_pem = tls->ca_pem,
                                .cert_pem = tls->cert_pem,
                                .key_pem = tls->key_pem,
                                .insecure_skip_verify = tls->skip_verify,
                                .allowed_cn = tls->allowed_cn,
                                .allowed_hostname = tls->allowed_hostname};
    struct cetcd_client_opts o = {.endpoints = url,
                                  /* election_ms <= 50000: checked */
                                  .dial_timeout_ms =
                                      JOIN_DIAL_BASE_MS + (int)cfg->election_ms,
                                  .call_timeout_ms = JOIN_CALL_TIMEOUT_MS,
                                  .tls = tls != NULL ? &ct : NULL};
    struct cetcd_client *c;
    struct cetcd_status st;
    ProtobufCMessage *resp = NULL;
    char why[300] = "";
    int code = cetcd_client_open(&o, &c, &st);
    if (code == 0) {
        code = cetcd_call_unary(c, "/cetcdpb.Join/Members", &req->base,
                                &cetcdpb__join_response__descriptor, &resp,
                                &st);
        cetcd_client_close(c);
    }
    if (code == 0) {
        *resp_out = (Cetcdpb__JoinResponse *)resp;
        return 0;
    }
    if (code == CETCD_UNAVAILABLE)
        tls_why(url, tls, why, sizeof why);
    log_warn("etcdserver", "could not get cluster response from %s: %s "
             "(%s)%s", url, st.message, cetcd_code_name(code), why);
    return code;
}

/* ask asks the members at the comma-separated peer URLs in turn, as etcd
 * does (GetClusterFromRemotePeers), until one answers, dialling https://
 * and unixs:// ones with the member's own peer TLS material. */
static int ask(char *urls, const struct server_config *cfg,
               Cetcdpb__JoinResponse **resp_out)
{
    Cetcdpb__JoinRequest req = CETCDPB__JOIN_REQUEST__INIT;
    req.cluster_token = (char *)cfg->cluster_token;
    for (char *save, *u = strtok_r(urls, ",", &save); u;
         u = strtok_r(NULL, ",", &save))
        if (ask_one(u, cfg, &req, resp_out) == 0)
            return 0;
    log_error("etcdmain", "cannot fetch cluster info from peer urls: could "
              "not retrieve cluster information from the given URLs");
    return 1;
}

int join_fetch(const struct server_config *cfg, struct join_result *out)
{
    char endpoints[4096];
    memset(out, 0, sizeof *out);
    endpoints_of(cfg->initial_cluster, cfg->name, endpoints,
                 sizeof endpoints);
    if (endpoints[0] == '\0') {
        fprintf(stderr, "cetcd: --initial-cluster-state=existing needs the "
                        "running members in --initial-cluster\n");
        return 1;
    }
    Cetcdpb__JoinResponse *r;
    if (ask(endpoints, cfg, &r) != 0)
        return 1;
    const Etcdserverpb__Member *self = NULL;
    for (size_t i = 0; i < r->n_members; i++)
        if (same_urls(r->members[i], cfg->peer_urls))
            self = r->members[i];
    if (self == NULL) {
        fprintf(stderr, "cetcd: cluster %016llx has no member with peer URLs "
                        "%s (add it first: etcdctl member add)\n",
                (unsigned long long)r->cluster_id, cfg->peer_urls);
        cetcdpb__join_response__free_unpacked(r, NULL);
        return 1;
    }
    /* Ids are never 0: the member could not start with them (the peer
     * transport and the stored ids refuse 0). */
    if (r->cluster_id == 0 || self->id == 0) {
        fprintf(stderr, "cetcd: the running members answered cluster id "
                        "%016llx and member id %016llx for this member: "
                        "ids are never 0\n",
                (unsigned long long)r->cluster_id,
                (unsigned long long)self->id);
        cetcdpb__join_response__free_unpacked(r, NULL);
        return 1;
    }
    out->resp = r;
    out->join.cluster_id = r->cluster_id;
    out->join.member_id = self->id;
    out->join.members = (const Etcdserverpb__Member *const *)r->members;
    out->join.n_members = r->n_members;
    log_info("etcdserver", "joining cluster %016llx as member %016llx",
             (unsigned long long)r->cluster_id,
             (unsigned long long)self->id);
    return 0;
}

void join_free(struct join_result *j)
{
    if (j->resp != NULL)
        cetcdpb__join_response__free_unpacked(j->resp, NULL);
    j->resp = NULL;
}
