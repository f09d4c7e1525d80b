/*
 * http.c - etcd's HTTP endpoints on the client listener (beside gRPC, as
 * etcd serves them: rpc.h "HTTP requests") and on the --listen-metrics-urls
 * listener: /health (etcd 3.4, with 3.5's ?exclude= and
 * ?serializable=true), /version (3.4), /livez and /readyz (etcd 3.6's
 * checks, ?verbose and ?exclude=, and a sub-path per check such as
 * /readyz/linearizable_read), /metrics (metrics.c), and Go's 404 and
 * 405 answers for the rest.
 *
 * Every handler runs on a loop of the runtime; the linearizable checks
 * (/health's read, /readyz's linearizable_read) pass a ReadIndex barrier
 * (server_barrier_async) and answer from its callback.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/api_int.h"
#include "http/http.h"
#include "rpc/rpc.h"
#include "server/server.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define TEXT "text/plain; charset=utf-8"
#define EXCLUDES_MAX 8 /* ?exclude= values kept */
#define LOGPKG "etcdserver/api/etcdhttp"

/* The query of a request, as the endpoints read it. */
struct query {
    bool verbose;                    /* ?verbose */
    bool serializable;               /* ?serializable=true */
    char exclude[EXCLUDES_MAX][32];  /* ?exclude= values */
    size_t exclude_n;                /* used */
};

static void query_read(const char *t, size_t tn, struct query *q)
{
    memset(q, 0, sizeof *q);
    char k[32], v[32];
    size_t pos = 0;
    while (http_query_next(t, tn, &pos, k, sizeof k, v, sizeof v)) {
        if (strcmp(k, "verbose") == 0)
            q->verbose = true;
        else if (strcmp(k, "serializable") == 0)
            q->serializable = strcmp(v, "true") == 0;
        else if (strcmp(k, "exclude") == 0 && q->exclude_n < EXCLUDES_MAX)
            snprintf(q->exclude[q->exclude_n++], sizeof q->exclude[0], "%s",
                     v);
    }
}

static bool excluded(const struct query *q, const char *name)
{
    for (size_t i = 0; i < q->exclude_n; i++)
        if (strcmp(q->exclude[i], name) == 0)
            return true;
    return false;
}

static void reply_text(struct rpc_call *call, int status, unsigned flags,
                       const char *body)
{
    rpc_call_reply_http(call, status, TEXT, flags, body, strlen(body));
}

/* Go's http.NotFound and http.Error(..., 405). */
static void not_found(struct rpc_call *call)
{
    reply_text(call, 404, RPC_HTTP_NOSNIFF, "404 page not found\n");
}

static void not_allowed(struct rpc_call *call)
{
    reply_text(call, 405, RPC_HTTP_NOSNIFF | RPC_HTTP_ALLOW_GET,
               "Method Not Allowed\n");
}

/* --- /health --- */

/* A /health request while its read runs. */
struct health_check {
    struct rpc_call *call;          /* answered once */
    struct api_health_stats *stats; /* the member's counts */
};

static void health_false(struct api_health_stats *st, struct rpc_call *call)
{
    atomic_fetch_add(&st->failed, 1);
    reply_text(call, 503, RPC_HTTP_NOSNIFF, "{\"health\":\"false\"}\n");
}

static void health_true(struct api_health_stats *st, struct rpc_call *call)
{
    atomic_fetch_add(&st->ok, 1);
    reply_text(call, 200, 0, "{\"health\":\"true\"}");
}

static void health_read_done(void *arg, int err)
{
    struct health_check hc = *(struct health_check *)arg;
    mem_free(arg);
    if (err != 0) {
        log_warn(LOGPKG, "/health error; QGET failed %s (status code 503)",
                 err_str(err));
        health_false(hc.stats, hc.call);
        return;
    }
    health_true(hc.stats, hc.call);
}

/* health: etcd 3.4's checkHealth: no alarm (but the excluded ones), a
 * leader, and a linearizable read (3.4's QGET; a ReadIndex barrier here).
 * etcd 3.5's ?serializable=true checks the local member only: the alarms
 * still, but neither the leader nor a linearizable read (3.5's checkHealth
 * skips "RAFT NO LEADER" then, and its Range is serializable). */
static void health(const struct api_http *h, struct rpc_call *call,
                   const char *m, const struct query *q)
{
    struct server *s = h->server;
    if (strcmp(m, "GET") != 0) {
        log_warn(LOGPKG, "/health error (status code 405)");
        not_allowed(call);
        return;
    }
    /* etcd 3.4 logs the first alarm not excluded, as its AlarmMember's
     * text ("memberID:<id> alarm:NOSPACE "). */
    struct server_alarm al[SERVER_ALARMS_MAX];
    size_t n = server_alarms_list(s, al, SERVER_ALARMS_MAX);
    for (size_t i = 0; i < n; i++) {
        const char *alarm =
            al[i].type == ETCDSERVERPB__ALARM_TYPE__NOSPACE ? "NOSPACE"
                                                            : "CORRUPT";
        if (excluded(q, alarm))
            continue;
        char text[64];
        log_warn(LOGPKG, "/health error due to %s",
                 server_alarm_text(&al[i], text, sizeof text));
        health_false(h->health, call);
        return;
    }
    if (!q->serializable && !server_has_leader(s)) {
        log_warn(LOGPKG, "/health error; no leader (status code 503)");
        health_false(h->health, call);
        return;
    }
    if (q->serializable) {
        health_true(h->health, call); /* the local store: no read needed */
        return;
    }
    struct health_check *hc = mem_calloc(1, sizeof *hc);
    if (hc == NULL) {
        health_false(h->health, call);
        return;
    }
    hc->call = call;
    hc->stats = h->health;
    server_barrier_async(s, health_read_done, hc);
}

/* --- /livez, /readyz (etcd 3.6) --- */

enum check { CHECK_CORRUPTION, CHECK_SERIALIZABLE, CHECK_LINEARIZABLE };

static const char *const check_names[] = {
    "data_corruption", "serializable_read", "linearizable_read"};

/* A /livez or /readyz request while its linearizable check runs. */
struct probe {
    struct rpc_call *call;  /* answered once */
    const char *name;       /* "livez" or "readyz" */
    struct query q;         /* its query */
    unsigned checks;        /* 1 << enum check, the checks it runs */
    unsigned failed;        /* those that failed */
    char reason[3][64];     /* why, per failed check */
};

/* probe_answer writes the answer as etcd 3.6's newHealthHandler does for
 * a root and a sub-path alike: one line per check run (excluded ones are
 * not run and not listed), "[+]<check> ok" or "[-]<check> failed: why";
 * 200 "ok\n" with those lines first under ?verbose; on a failure 503 with
 * the lines, always, and the newline http.Error (Fprintln) adds. */
static void probe_answer(struct probe *p)
{
    for (size_t i = 0; i < p->q.exclude_n; i++) {
        bool known = false;
        for (int c = 0; c < 3; c++)
            known |= (p->checks & (1u << c)) &&
                     strcmp(p->q.exclude[i], check_names[c]) == 0;
        if (!known)
            log_warn(LOGPKG, "/%s: cannot exclude health check %s: no "
                     "such check", p->name, p->q.exclude[i]);
    }
    char body[512];
    size_t o = 0;
    for (int c = 0; c < 3; c++) {
        if (!(p->checks & (1u << c)) || excluded(&p->q, check_names[c]))
            continue;
        if (p->failed & (1u << c))
            o += (size_t)snprintf(body + o, sizeof body - o,
                                  "[-]%s failed: %s\n", check_names[c],
                                  p->reason[c]);
        else
            o += (size_t)snprintf(body + o, sizeof body - o, "[+]%s ok\n",
                                  check_names[c]);
    }
    CHECK(o < sizeof body); /* 3 lines of at most 100 bytes */
    if (p->failed != 0) {
        snprintf(body + o, sizeof body - o, "\n");
        log_warn(LOGPKG, "/%s error (status code 503)", p->name);
        reply_text(p->call, 503, RPC_HTTP_NOSNIFF, body);
    } else {
        snprintf(p->q.verbose ? body + o : body,
                 p->q.verbose ? sizeof body - o : sizeof body, "ok\n");
        reply_text(p->call, 200, RPC_HTTP_NOSNIFF, body);
    }
    mem_free(p);
}

static void probe_read_done(void *arg, int err)
{
    struct probe *p = arg;
    if (err != 0) {
        p->failed |= 1u << CHECK_LINEARIZABLE;
        snprintf(p->reason[CHECK_LINEARIZABLE], sizeof p->reason[0], "%s",
                 err_str(err));
    }
    probe_answer(p);
}

/* probe runs checks for /livez or /readyz (name); sub: a sub-path's one
 * check, which etcd runs whatever ?exclude= says. */
static void probe(struct server *s, struct rpc_call *call, const char *name,
                  unsigned checks, bool sub, const struct query *q)
{
    CHECK(checks != 0 && checks < 1u << 3);
    struct probe *p = mem_calloc(1, sizeof *p);
    if (p == NULL) {
        reply_text(call, 500, RPC_HTTP_NOSNIFF, "out of memory\n");
        return;
    }
    p->call = call;
    p->name = name;
    p->q = *q;
    p->checks = checks;
    if (sub)
        p->q.exclude_n = 0;
    bool nospace, corrupt;
    server_alarms_active(s, &nospace, &corrupt);
    if ((checks & (1u << CHECK_CORRUPTION)) && corrupt &&
        !excluded(q, check_names[CHECK_CORRUPTION])) {
        p->failed |= 1u << CHECK_CORRUPTION;
        snprintf(p->reason[CHECK_CORRUPTION], sizeof p->reason[0],
                 "alarm activated: CORRUPT");
    }
    /* A serializable read is the local store's: it cannot fail while the
     * member runs (its loop answers this very request). */
    if ((checks & (1u << CHECK_LINEARIZABLE)) &&
        !excluded(q, check_names[CHECK_LINEARIZABLE])) {
        server_barrier_async(s, probe_read_done, p);
        return;
    }
    probe_answer(p);
}

/* --- routing --- */

static bool path_is(const char *t, size_t pn, const char *path)
{
    return strlen(path) == pn && memcmp(t, path, pn) == 0;
}

static void version(struct rpc_call *call, const char *m,
                    const struct api_http *h)
{
    if (strcmp(m, "GET") != 0) {
        not_allowed(call);
        return;
    }
    char v[128];
    int n = snprintf(v, sizeof v, "{\"etcdserver\":\"%s\",\"etcdcluster\":"
                     "\"3.4.0\"}", server_reported_version(h->server));
    rpc_call_reply_http(call, 200, "application/json", 0, v,
                        n > 0 && (size_t)n < sizeof v ? (size_t)n : 0);
}

/* The checks of /livez and /readyz (etcd 3.6's registries). */
#define LIVEZ_CHECKS (1u << CHECK_SERIALIZABLE)
#define READYZ_CHECKS                                                      \
    (1u << CHECK_CORRUPTION | 1u << CHECK_SERIALIZABLE |                   \
     1u << CHECK_LINEARIZABLE)

/* sub_check: for a path root + "/" + a check's name among checks, that
 * check's bit; 0 for any other path. */
static unsigned sub_check(const char *t, size_t pn, const char *root,
                          unsigned checks)
{
    size_t rn = strlen(root);
    if (pn <= rn + 1 || memcmp(t, root, rn) != 0 || t[rn] != '/')
        return 0;
    for (int c = 0; c < 3; c++)
        if ((checks & (1u << c)) && path_is(t + rn + 1, pn - rn - 1,
                                             check_names[c]))
            return 1u << c;
    return 0;
}

/* health_route serves /livez, /readyz and their per-check sub-paths
 * (/readyz/linearizable_read); false for any other path, which includes
 * a sub-path naming no check (Go's mux: 404). */
static bool health_route(struct server *s, struct rpc_call *call,
                         const char *m, const char *t, size_t pn,
                         const struct query *q)
{
    static const struct {
        const char *name; /* "livez" */
        const char *root; /* "/livez" */
        unsigned checks;  /* its registry */
    } roots[] = {{"livez", "/livez", LIVEZ_CHECKS},
                 {"readyz", "/readyz", READYZ_CHECKS}};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        bool root = path_is(t, pn, roots[i].root);
        unsigned one = sub_check(t, pn, roots[i].root, roots[i].checks);
        if (!root && one == 0)
            continue;
        if (strcmp(m, "GET") != 0) {
            log_warn(LOGPKG, "/%s error (status code 405)", roots[i].name);
            not_allowed(call);
        } else {
            probe(s, call, roots[i].name, root ? roots[i].checks : one,
                  !root, q);
        }
        return true;
    }
    return false;
}

void api__http_serve(struct rpc_call *call, const uint8_t *body,
                     size_t body_len, void *ctx)
{
    const struct api_http *h = ctx;
    size_t tn = 0;
    const char *t = rpc_call_metadata(call, ":path", &tn);
    const char *m = rpc_call_metadata(call, ":method", NULL);
    if (t == NULL || m == NULL) {
        reply_text(call, 400, 0, "400 Bad Request");
        return;
    }
    size_t pn = http_path_len(t, tn);
    struct query q;
    query_read(t, tn, &q);
    if (h->gateway && api__gw_serve(h->server, call, t, pn, m, body,
                                    body_len))
        return;
    if (path_is(t, pn, "/health"))
        health(h, call, m, &q);
    else if (path_is(t, pn, "/metrics"))
        api__metrics_serve(h, call);
    else if (h->metrics_only)
        not_found(call);
    else if (path_is(t, pn, "/version"))
        version(call, m, h);
    else if (!health_route(h->server, call, m, t, pn, &q))
        not_found(call);
}
