/*
 * ctl_endpoint.c - "endpoint health|status|hashkv" (and --cluster): etcdctl
 * 3.4's per-endpoint checks.
 *
 * Each endpoint gets its own client, as etcdctl dials each one.  health
 * probes all endpoints at once (one thread each, as etcdctl's goroutines)
 * with a linearizable Get of "health": an answer, or "permission denied"
 * (the request went through consensus to be refused), is healthy; any
 * other error is not, and makes the command fail with "unhealthy
 * cluster".  Results are listed in the order the probes finished, as
 * etcdctl collects them from a channel.  status and hashkv ask the
 * endpoints one after the other; a failed one is reported on stderr and
 * left out of the list.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

/* --cluster, a flag of the "endpoint" group its commands inherit. */
static bool cluster;

static struct ctl_flag endpoint_flags[] = {
    {"cluster", 0, CTL_FLAG_BOOL, &cluster, "false",
     "use all endpoints from the cluster member list", false},
    CTL_FLAG_END,
};

/* ------------------------------------------------------------------------
 * The endpoints
 * ---------------------------------------------------------------------- */

/* client_no_auth opens a client on endpoints that does not
 * authenticate: given token (not NULL), it sends that one. */
static struct cetcd_client *client_no_auth(const char *endpoints,
                                           const char *token)
{
    const char *user = ctl_g.user;
    ctl_g.user = ""; /* ctl_client_for authenticates for --user only */
    struct cetcd_client *c = ctl_client_for(endpoints);
    ctl_g.user = user;
    if (token && cetcd_client_token_set(c, token) != 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    return c;
}

/* member_urls fills out with the client URLs of every member, from a
 * MemberList on the --endpoints; exits as etcdctl when it fails. */
static void member_urls(struct ctl_strings *out)
{
    /* etcdctl leaves --user out of this client ("MemberList() doesn't
     * need authentication"): no Authenticate, no password prompt */
    struct cetcd_client *c = client_no_auth(ctl_endpoints_joined(), NULL);
    Etcdserverpb__MemberListRequest req =
        ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st = {0};
    char text[512];
    if (ctl_unary(c, "/etcdserverpb.Cluster/MemberList", &req.base,
                  &etcdserverpb__member_list_response__descriptor, &resp,
                  &st) != 0)
        ctl_exit(CTL_EXIT_ERROR,
                 "failed to fetch endpoints from etcd cluster member list: "
                 "%s",
                 ctl_status_text(&st, text, sizeof text));
    Etcdserverpb__MemberListResponse *r =
        (Etcdserverpb__MemberListResponse *)resp;
    for (size_t i = 0; i < r->n_members; i++)
        for (size_t k = 0; k < r->members[i]->n_clienturls; k++)
            ctl_strings_add(out, r->members[i]->clienturls[k]);
    protobuf_c_message_free_unpacked(resp, NULL);
    cetcd_client_close(c);
}

/* endpoints_of fills out as etcdctl's endpointsFromCluster: the
 * --endpoints flag as given (not trimmed, not from --discovery-srv), or
 * with --cluster the members' client URLs. */
static void endpoints_of(struct ctl_strings *out)
{
    assert(out->n == 0);
    if (cluster) {
        member_urls(out);
        return;
    }
    for (size_t i = 0; i < ctl_g.endpoints.n; i++)
        ctl_strings_add(out, ctl_g.endpoints.v[i]);
}

/* unsupported exits as etcdctl's printers do for a format a command has
 * no printer for. */
__attribute__((noreturn)) static void unsupported(void)
{
    ctl_exit(CTL_EXIT_BAD_FEATURE, "%s not supported as output format",
             ctl_g.write_out);
}

/* ------------------------------------------------------------------------
 * endpoint health
 * ---------------------------------------------------------------------- */

/* One endpoint's probe, owned by its thread until it is joined. */
struct probe {
    size_t index;             /* its place in the endpoint list */
    const char *ep;           /* the endpoint (borrowed from the list) */
    struct cetcd_client *c;   /* a client on that endpoint alone */
    bool health;              /* the Get succeeded */
    char took[CTL_DURATION_MAX]; /* how long it took, Go's Duration */
    char error[512];          /* why it failed, "" if it did not */
    struct cetcd_status st;   /* the Get's outcome */
    pthread_t thread;         /* the thread probing */
};

/* The order the probes finished in, which the probes' threads append to. */
static struct {
    pthread_mutex_t mu; /* guards n and order */
    pthread_cond_t cv;  /* signalled at each append */
    size_t n;           /* probes finished */
    size_t *order;      /* their indices, first finished first */
} done = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* probe_run is one probe's thread (arg: its struct probe). */
static void *probe_run(void *arg)
{
    struct probe *p = arg;
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)"health";
    req.key.len = 6;
    ProtobufCMessage *resp = NULL;
    int64_t t0 = now_ns();
    /* not ctl_unary: its warning line is written by the main thread */
    int rc = cetcd_call_unary(p->c, "/etcdserverpb.KV/Range", &req.base,
                              &etcdserverpb__range_response__descriptor,
                              &resp, &p->st);
    ctl_duration(p->took, sizeof p->took, now_ns() - t0);
    bool denied = rc == CETCD_PERMISSION_DENIED &&
                  strcmp(p->st.message, "etcdserver: permission denied") == 0;
    p->health = rc == 0 || denied;
    if (!p->health)
        ctl_status_text(&p->st, p->error, sizeof p->error);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    pthread_mutex_lock(&done.mu);
    done.order[done.n++] = p->index;
    pthread_cond_signal(&done.cv);
    pthread_mutex_unlock(&done.mu);
    return NULL;
}

/* probe_all runs the probes in parallel; done.order then lists them in
 * the order they finished. */
static void probe_all(struct probe *ps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pthread_create(&ps[i].thread, NULL, probe_run, &ps[i]) != 0)
            ctl_exit(CTL_EXIT_ERROR, "cannot start a thread");
    pthread_mutex_lock(&done.mu);
    while (done.n < n)
        pthread_cond_wait(&done.cv, &done.mu);
    pthread_mutex_unlock(&done.mu);
    for (size_t i = 0; i < n; i++)
        pthread_join(ps[i].thread, NULL);
    assert(done.n == n);
}

/* health_print is etcdctl's display.EndpointHealth. */
static void health_print(enum ctl_output o, const struct ctl_ep_health *v,
                         size_t n)
{
    switch (o) {
    case CTL_OUT_SIMPLE: /* etcdctl writes these lines on stderr */
        for (size_t i = 0; i < n; i++) {
            if (!v[i].error[0])
                fprintf(stderr, "%s is healthy: successfully committed "
                                "proposal: took = %s\n",
                        v[i].ep, v[i].took);
            else
                fprintf(stderr, "%s is unhealthy: failed to commit "
                                "proposal: %s\n",
                        v[i].ep, v[i].error);
        }
        break;
    case CTL_OUT_JSON:
        ctl_json_endpoint_health(stdout, v, n);
        break;
    case CTL_OUT_TABLE:
        ctl_rows_endpoint_health(stdout, v, n, true);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_endpoint_health(stdout, v, n);
        break;
    default:
        unsupported();
    }
}

static int health_run(int argc, char **argv)
{
    (void)argc, (void)argv;
    /* etcdctl's health reads the ETCDCTL_* variables itself and never
     * builds clientConfigFromCmd: --debug prints no flag dump here */
    ctl_g.debug = false;
    enum ctl_output o = ctl_output_format();
    struct ctl_strings eps = {0};
    endpoints_of(&eps);
    struct probe *ps = calloc(eps.n + 1, sizeof *ps);
    struct ctl_ep_health *hs = calloc(eps.n + 1, sizeof *hs);
    done.order = calloc(eps.n + 1, sizeof *done.order);
    if (!ps || !hs || !done.order)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (size_t i = 0; i < eps.n; i++) {
        ps[i].index = i;
        ps[i].ep = eps.v[i];
        ps[i].c = ctl_client_for(eps.v[i]);
    }
    probe_all(ps, eps.n);
    bool errs = false;
    for (size_t i = 0; i < eps.n; i++) {
        const struct probe *p = &ps[done.order[i]];
        if (p->st.code != CETCD_OK) /* clientv3's line for a failed call */
            ctl_warn_unary_failed(p->c, &p->st);
        hs[i] = (struct ctl_ep_health){p->ep, p->health, p->took, p->error};
        errs |= p->error[0] != '\0';
    }
    health_print(o, hs, eps.n);
    if (errs)
        ctl_exit(CTL_EXIT_ERROR, "unhealthy cluster");
    for (size_t i = 0; i < eps.n; i++)
        cetcd_client_close(ps[i].c);
    free(ps), free(hs), free(done.order);
    ctl_strings_clear(&eps);
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * endpoint status and hashkv
 * ---------------------------------------------------------------------- */

/* ask sends one call to ep alone, with the token the shared client got
 * (clientv3's Dial of one endpoint: no Authenticate of its own); NULL
 * (with etcdctl's line on stderr, "Failed to get the <what> of endpoint
 * <ep> (<error>)", and the error's text in err) when it fails. */
static ProtobufCMessage *ask(const char *ep, const char *method,
                             const ProtobufCMessage *req,
                             const ProtobufCMessageDescriptor *desc,
                             const char *what, char *err, size_t cap)
{
    struct cetcd_client *c = client_no_auth(ep, ctl_client_token());
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st = {0};
    if (ctl_unary(c, method, req, desc, &resp, &st) != 0) {
        ctl_status_text(&st, err, cap);
        fprintf(stderr, "Failed to get the %s of endpoint %s (%s)\n", what,
                ep, err);
        resp = NULL;
    }
    cetcd_client_close(c);
    return resp;
}

static void status_print(enum ctl_output o, const struct ctl_ep_status *v,
                         size_t n)
{
    if (o == CTL_OUT_SIMPLE || o == CTL_OUT_TABLE)
        ctl_rows_endpoint_status(stdout, v, n, o == CTL_OUT_TABLE);
    else if (o == CTL_OUT_JSON)
        ctl_json_endpoint_status(stdout, v, n);
    else if (o == CTL_OUT_FIELDS)
        ctl_fields_endpoint_status(stdout, v, n);
    else
        unsupported();
}

static int status_run(int argc, char **argv)
{
    (void)argc, (void)argv;
    enum ctl_output o = ctl_output_format();
    (void)ctl_client(); /* etcdctl's mustClientFromCmd comes first */
    struct ctl_strings eps = {0};
    endpoints_of(&eps);
    struct ctl_ep_status *v = calloc(eps.n + 1, sizeof *v);
    if (!v)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    size_t n = 0;
    bool failed = false;
    char err[512];
    for (size_t i = 0; i < eps.n; i++) {
        Etcdserverpb__StatusRequest req = ETCDSERVERPB__STATUS_REQUEST__INIT;
        ProtobufCMessage *r =
            ask(eps.v[i], "/etcdserverpb.Maintenance/Status", &req.base,
                &etcdserverpb__status_response__descriptor, "status", err,
                sizeof err);
        failed |= r == NULL;
        if (r)
            v[n++] = (struct ctl_ep_status){
                eps.v[i], (const Etcdserverpb__StatusResponse *)r};
    }
    status_print(o, v, n);
    if (failed) { /* etcdctl exits without an "Error:" line here */
        fflush(stdout);
        exit(CTL_EXIT_ERROR);
    }
    for (size_t i = 0; i < n; i++)
        protobuf_c_message_free_unpacked((ProtobufCMessage *)v[i].resp,
                                         NULL);
    free(v);
    ctl_strings_clear(&eps);
    return CTL_EXIT_SUCCESS;
}

static int64_t hashkv_rev;

static struct ctl_flag hashkv_flags[] = {
    {"rev", 0, CTL_FLAG_INT64, &hashkv_rev, "0",
     "maximum revision to hash (default: all revisions)", false},
    CTL_FLAG_END,
};

static void hashkv_print(enum ctl_output o, const struct ctl_ep_hashkv *v,
                         size_t n)
{
    if (o == CTL_OUT_SIMPLE || o == CTL_OUT_TABLE)
        ctl_rows_endpoint_hashkv(stdout, v, n, o == CTL_OUT_TABLE);
    else if (o == CTL_OUT_JSON)
        ctl_json_endpoint_hashkv(stdout, v, n);
    else if (o == CTL_OUT_FIELDS)
        ctl_fields_endpoint_hashkv(stdout, v, n);
    else
        unsupported();
}

static int hashkv_run(int argc, char **argv)
{
    (void)argc, (void)argv;
    enum ctl_output o = ctl_output_format();
    (void)ctl_client();
    struct ctl_strings eps = {0};
    endpoints_of(&eps);
    struct ctl_ep_hashkv *v = calloc(eps.n + 1, sizeof *v);
    if (!v)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    size_t n = 0;
    char err[512] = "", last[512] = "";
    for (size_t i = 0; i < eps.n; i++) {
        Etcdserverpb__HashKVRequest req = ETCDSERVERPB__HASH_KVREQUEST__INIT;
        req.revision = hashkv_rev;
        ProtobufCMessage *r =
            ask(eps.v[i], "/etcdserverpb.Maintenance/HashKV", &req.base,
                &etcdserverpb__hash_kvresponse__descriptor, "hash", err,
                sizeof err);
        if (!r)
            memcpy(last, err, sizeof last);
        else
            v[n++] = (struct ctl_ep_hashkv){
                eps.v[i], (const Etcdserverpb__HashKVResponse *)r};
    }
    hashkv_print(o, v, n);
    if (last[0]) /* the last endpoint's error, as etcdctl keeps it */
        ctl_exit(CTL_EXIT_ERROR, "%s", last);
    for (size_t i = 0; i < n; i++)
        protobuf_c_message_free_unpacked((ProtobufCMessage *)v[i].resp,
                                         NULL);
    free(v);
    ctl_strings_clear(&eps);
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The commands
 * ---------------------------------------------------------------------- */

static const struct ctl_cmd health_cmd = {
    .use = "health",
    .short_desc = "Checks the healthiness of endpoints specified in "
                  "`--endpoints` flag",
    .run = health_run,
};

static const struct ctl_cmd status_cmd = {
    .use = "status",
    .short_desc = "Prints out the status of endpoints specified in "
                  "`--endpoints` flag",
    .long_desc = "When --write-out is set to simple, this command prints out "
                 "comma-separated status lists for each endpoint.\nThe items "
                 "in the lists are endpoint, ID, version, db size, is leader, "
                 "is learner, raft term, raft index, raft applied index, "
                 "errors.\n",
    .run = status_run,
};

static const struct ctl_cmd hashkv_cmd = {
    .use = "hashkv",
    .short_desc = "Prints the KV history hash for each endpoint in "
                  "--endpoints",
    .flags = hashkv_flags,
    .run = hashkv_run,
};

static const struct ctl_cmd *const endpoint_subs[] = {
    &health_cmd, &status_cmd, &hashkv_cmd, NULL,
};

const struct ctl_cmd ctl_cmd_endpoint = {
    .use = "endpoint <subcommand>",
    .short_desc = "Endpoint related commands",
    .flags = endpoint_flags,
    .subs = endpoint_subs,
};
