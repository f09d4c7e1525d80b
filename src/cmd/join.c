/*
 * join.c - --initial-cluster-state=existing: before a new member starts,
 * it asks the running members (at the peer URLs --initial-cluster lists
 * for them) for the cluster id and the current members, through cetcd's
 * Join service on their peer listeners (etcd: GetClusterFromRemotePeers),
 * and finds its own id, chosen by MemberAdd, by its advertised peer URLs.
 * A running member of another cluster token refuses to answer.
 */
#include "cmd/join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cetcd/cetcd.h"
#include "cetcdpb/internal.pb-c.h"
#include "util/log.h"

#define JOIN_URLS_MAX 16 /* peer URLs of one member compared */

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

/* The other members' peer URLs from --initial-cluster (name=url,...). */
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

static int ask(const char *endpoints, const char *token,
               Cetcdpb__JoinResponse **resp_out)
{
    struct cetcd_client_opts o = {.endpoints = endpoints,
                                  .dial_timeout_ms = 5000,
                                  .call_timeout_ms = 5000};
    struct cetcd_client *c;
    struct cetcd_status st;
    if (cetcd_client_open(&o, &c, &st) != 0) {
        fprintf(stderr, "cetcd: cannot join the cluster at %s: %s (joining "
                        "needs http:// peer URLs)\n", endpoints, st.message);
        return 1;
    }
    Cetcdpb__JoinRequest req = CETCDPB__JOIN_REQUEST__INIT;
    req.cluster_token = (char *)token;
    ProtobufCMessage *resp = NULL;
    int code = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        code = cetcd_call_unary(c, "/cetcdpb.Join/Members", &req.base,
                                &cetcdpb__join_response__descriptor, &resp,
                                &st);
        if (code != CETCD_UNAVAILABLE && code != CETCD_DEADLINE_EXCEEDED)
            break;
    }
    cetcd_client_close(c);
    if (code != 0) {
        fprintf(stderr, "cetcd: cannot get the cluster from the peers at "
                        "%s: %s\n", endpoints, st.message);
        return 1;
    }
    *resp_out = (Cetcdpb__JoinResponse *)resp;
    return 0;
}

int join_fetch(const char *initial_cluster, const char *name,
               const char *peer_urls, const char *token,
               struct join_result *out)
{
    char endpoints[4096];
    memset(out, 0, sizeof *out);
    endpoints_of(initial_cluster, name, endpoints, sizeof endpoints);
    if (endpoints[0] == '\0') {
        fprintf(stderr, "cetcd: --initial-cluster-state=existing needs the "
                        "running members in --initial-cluster\n");
        return 1;
    }
    Cetcdpb__JoinResponse *r;
    if (ask(endpoints, token, &r) != 0)
        return 1;
    const Etcdserverpb__Member *self = NULL;
    for (size_t i = 0; i < r->n_members; i++)
        if (same_urls(r->members[i], peer_urls))
            self = r->members[i];
    if (self == NULL) {
        fprintf(stderr, "cetcd: cluster %016llx has no member with peer URLs "
                        "%s (add it first: etcdctl member add)\n",
                (unsigned long long)r->cluster_id, peer_urls);
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
