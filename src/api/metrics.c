/*
 * metrics.c - /metrics: a first set of etcd's Prometheus series in the
 * text exposition format (version 0.0.4), with etcd 3.4's names, types
 * and help texts, and numbers written as Go's client writes them
 * (strconv 'g', shortest: 74, 2.46, 2.147483648e+09).
 *
 * The member's values come from server_metrics_get (atomics the member
 * keeps anyway); the process_* series from /proc/self.  One scrape costs a
 * few hundred bytes of formatting, a read of /proc/self/stat and a walk of
 * /proc/self/fd.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_int.h"
#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "peer/peer.h"
#include "rpc/rpc.h"
#include "server/server.h"
#include "util/check.h"
#include "util/mem.h"
#include "util/metrics.h"
#include "wal/wal.h"

/* The exposition starts at 64 KiB and may grow to 4 MiB (about 40 KB
 * with the gRPC series of every method; the histograms of --metrics
 * extensive add about as much). */
#define METRICS_TEXT_FIRST (64 * 1024)
#define METRICS_TEXT_MAX (4 * 1024 * 1024)

/* go_float writes v as Go's strconv.FormatFloat(v, 'g', -1, 64), which
 * Prometheus' Go client uses: the shortest digits that read back as v
 * (p of them, decimal exponent x), in %e form when x < -4 or x >= 6,
 * else in %f form with max(p - x - 1, 0) decimals. */
static void go_float(char *buf, size_t cap, double v)
{
    if (v == 0) {
        snprintf(buf, cap, "0");
        return;
    }
    char e[40];
    int p;
    for (p = 1; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    int x = atoi(strchr(e, 'e') + 1);
    if (x < -4 || x >= 6)
        snprintf(buf, cap, "%s", e);
    else
        snprintf(buf, cap, "%.*f", p - x - 1 > 0 ? p - x - 1 : 0, v);
}

/* The exposition being written: a buffer that grows (bounded by
 * METRICS_TEXT_MAX; past it, or out of memory, the scrape answers 500). */
struct expo {
    char *p;     /* owned */
    size_t n;    /* bytes written */
    size_t cap;  /* bytes allocated */
    bool failed; /* out of memory or over the bound */
};

static void put(struct expo *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(struct expo *e, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !e->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(e->p + e->n, e->cap - e->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            e->failed = true;
            return;
        }
        if ((size_t)k < e->cap - e->n) {
            e->n += (size_t)k;
            return;
        }
        size_t want = e->cap * 2 > e->n + (size_t)k + 1
                          ? e->cap * 2
                          : e->n + (size_t)k + 1;
        char *q = want <= METRICS_TEXT_MAX ? mem_realloc(e->p, want) : NULL;
        if (q == NULL) {
            e->failed = true;
            return;
        }
        e->p = q;
        e->cap = want;
    }
}

static void head(struct expo *e, const char *name, const char *type,
                 const char *help)
{
    put(e, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(struct expo *e, const char *name, const char *labels,
                  double v)
{
    char num[40];
    go_float(num, sizeof num, v);
    put(e, "%s%s %s\n", name, labels, num);
}

/* series_labeled writes one series with one label (or none when label is
 * NULL). */
static void series_labeled(struct expo *e, const char *name,
                           const char *type, const char *help,
                           const char *label, const char *label_value,
                           double v)
{
    char lab[160] = "";
    if (label != NULL)
        snprintf(lab, sizeof lab, "{%s=\"%s\"}", label, label_value);
    head(e, name, type, help);
    value(e, name, lab, v);
}

static void series(struct expo *e, const char *name, const char *type,
                   const char *help, double v)
{
    series_labeled(e, name, type, help, NULL, NULL, v);
}

/* hist_body writes the _bucket, _sum and _count lines of one histogram
 * whose labels (without braces, may be empty) are lab. */
static void hist_body(struct expo *e, const char *name, const char *lab,
                      const struct metrics_hist *h,
                      const struct metrics_hist_snap *snap)
{
    const char *sep = lab[0] != '\0' ? "," : "";
    for (size_t i = 0; i < h->n; i++) {
        char le[40];
        go_float(le, sizeof le, h->bounds[i]);
        put(e, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, lab, sep, le,
            (unsigned long long)snap->cum[i]);
    }
    put(e, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, lab, sep,
        (unsigned long long)snap->count);
    char sum[40];
    go_float(sum, sizeof sum, snap->sum_seconds);
    const char *lo = lab[0] != '\0' ? "{" : "";
    const char *lc = lab[0] != '\0' ? "}" : "";
    put(e, "%s_sum%s%s%s %s\n", name, lo, lab, lc, sum);
    put(e, "%s_count%s%s%s %llu\n", name, lo, lab, lc,
        (unsigned long long)snap->count);
}

static void histogram(struct expo *e, const char *name, const char *help,
                      const struct metrics_hist *h)
{
    struct metrics_hist_snap snap;
    metrics_hist_read(h, &snap);
    head(e, name, "histogram", help);
    hist_body(e, name, "", h, &snap);
}

/* proc_stat reads the CPU seconds and resident bytes of this process. */
static void proc_stat(double *cpu_out, double *rss_out)
{
    *cpu_out = *rss_out = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f == NULL)
        return;
    char line[1024];
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')'); /* the command may hold blanks */
    if (p == NULL)
        return;
    unsigned long long utime = 0, stime = 0;
    long long rss = 0;
    /* After ")": state(3) ... utime(14) stime(15) ... rss(24). */
    int field = 2;
    for (char *save, *t = strtok_r(p + 1, " ", &save); t != NULL;
         t = strtok_r(NULL, " ", &save)) {
        field++;
        if (field == 14)
            utime = strtoull(t, NULL, 10);
        else if (field == 15)
            stime = strtoull(t, NULL, 10);
        else if (field == 24)
            rss = strtoll(t, NULL, 10);
    }
    long tck = sysconf(_SC_CLK_TCK);
    *cpu_out = tck > 0 ? (double)(utime + stime) / (double)tck : 0;
    *rss_out = (double)rss * (double)sysconf(_SC_PAGESIZE);
}

static double open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return 0;
    double n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the walk's own descriptor */
}

/* grpc-go's names of the status codes, by code. */
static const char *const code_names[RPC_STATUS_CODES] = {
    "OK",           "Canceled",          "Unknown",
    "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted",
    "FailedPrecondition", "Aborted",       "OutOfRange",
    "Unimplemented", "Internal",          "Unavailable",
    "DataLoss",     "Unauthenticated",
};

static const char *const type_names[] = {
    [RPC_TYPE_BIDI_STREAM] = "bidi_stream",
    [RPC_TYPE_UNARY] = "unary",
    [RPC_TYPE_CLIENT_STREAM] = "client_stream",
    [RPC_TYPE_SERVER_STREAM] = "server_stream",
};

enum grpc_family { G_STARTED, G_HANDLED, G_RECEIVED, G_SENT, G_HANDLING };

struct grpc_pass {
    struct expo *e;
    enum grpc_family family;
};

/* grpc_method writes one method's series of the pass's family; its labels
 * as go-grpc-prometheus writes them (sorted by name). */
static void grpc_method(const struct rpc_method_metrics *m, void *ctx)
{
    struct grpc_pass *g = ctx;
    const char *slash = strrchr(m->path, '/');
    if (slash == NULL || slash == m->path)
        return;
    char lab[256];
    snprintf(lab, sizeof lab,
             "grpc_method=\"%s\",grpc_service=\"%.*s\",grpc_type=\"%s\"",
             slash + 1, (int)(slash - m->path - 1), m->path + 1,
             type_names[m->type]);
    char braced[270];
    snprintf(braced, sizeof braced, "{%s}", lab);
    switch (g->family) {
    case G_STARTED:
        value(g->e, "grpc_server_started_total", braced, (double)m->started);
        break;
    case G_HANDLED:
        for (int c = 0; c < RPC_STATUS_CODES; c++) {
            char with_code[300];
            snprintf(with_code, sizeof with_code, "{grpc_code=\"%s\",%s}",
                     code_names[c], lab);
            value(g->e, "grpc_server_handled_total", with_code,
                  (double)m->handled[c]);
        }
        break;
    case G_RECEIVED:
        value(g->e, "grpc_server_msg_received_total", braced,
              (double)m->msg_received);
        break;
    case G_SENT:
        value(g->e, "grpc_server_msg_sent_total", braced,
              (double)m->msg_sent);
        break;
    case G_HANDLING: {
        static const double bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                        0.5,   1,    2.5,   5,    10};
        static const struct metrics_hist shape = METRICS_HIST_INIT(bounds);
        hist_body(g->e, "grpc_server_handling_seconds", lab, &shape,
                  &m->handling);
        break;
    }
    }
}

/* grpc_series: go-grpc-prometheus' server series over the client
 * listener's methods (the handling histogram with --metrics extensive
 * only, as etcd registers it). */
static void grpc_series(struct expo *e, const struct api *api)
{
    static const struct {
        enum grpc_family family;
        const char *name, *type, *help;
    } fams[] = {
        {G_STARTED, "grpc_server_started_total", "counter",
         "Total number of RPCs started on the server."},
        {G_HANDLED, "grpc_server_handled_total", "counter",
         "Total number of RPCs completed on the server, regardless of "
         "success or failure."},
        {G_RECEIVED, "grpc_server_msg_received_total", "counter",
         "Total number of RPC stream messages received on the server."},
        {G_SENT, "grpc_server_msg_sent_total", "counter",
         "Total number of gRPC stream messages sent by the server."},
        {G_HANDLING, "grpc_server_handling_seconds", "histogram",
         "Histogram of response latency (seconds) of gRPC that had been "
         "application-level handled by the server."},
    };
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        if (fams[i].family == G_HANDLING && !api->metrics_extensive)
            continue;
        head(e, fams[i].name, fams[i].type, fams[i].help);
        struct grpc_pass g = {e, fams[i].family};
        rpc_server_metrics(api->rpc, grpc_method, &g);
    }
}

/* mvcc_series: etcd's mvcc counters, each under both of etcd 3.4's names
 * (etcd_mvcc_* and the older etcd_debugging_mvcc_*), and the watchers. */
static void mvcc_series(struct expo *e, const struct server_metrics *m)
{
    static const struct {
        const char *what;
        const char *help;
    } names[] = {
        {"delete_total", "Total number of deletes seen by this member."},
        {"put_total", "Total number of puts seen by this member."},
        {"range_total", "Total number of ranges seen by this member."},
        {"txn_total", "Total number of txns seen by this member."},
    };
    const struct metrics_counter *counters[] = {
        &mvcc_metrics.del, &mvcc_metrics.put, &mvcc_metrics.range,
        &mvcc_metrics.txn};
    for (int dbg = 0; dbg < 2; dbg++) {
        for (size_t i = 0; i < 4; i++) {
            char name[80];
            snprintf(name, sizeof name, "%s_mvcc_%s",
                     dbg ? "etcd_debugging" : "etcd", names[i].what);
            series(e, name, "counter", names[i].help,
                   (double)metrics_get(counters[i]));
        }
        if (dbg)
            continue;
        series(e, "etcd_mvcc_db_total_size_in_bytes", "gauge",
               "Total size of the underlying database physically allocated "
               "in bytes.",
               (double)m->db_size);
        series(e, "etcd_mvcc_db_total_size_in_use_in_bytes", "gauge",
               "Total size of the underlying database logically in use in "
               "bytes.",
               (double)m->db_in_use);
    }
    series(e, "etcd_debugging_mvcc_slow_watcher_total", "gauge",
           "Total number of unsynced slow watchers.",
           (double)m->slow_watchers);
    series(e, "etcd_debugging_mvcc_watcher_total", "gauge",
           "Total number of watchers.", (double)m->watchers);
    if (m->keys >= 0)
        series(e, "etcd_debugging_mvcc_keys_total", "gauge",
               "Total number of keys.", (double)m->keys);
}

/* disk_series: the WAL fsync and backend commit histograms, and the client
 * gRPC bytes. */
static void disk_series(struct expo *e, const struct api *api)
{
    histogram(e, "etcd_disk_backend_commit_duration_seconds",
              "The latency distributions of commit called by backend.",
              &backend_metrics_commit);
    histogram(e, "etcd_disk_wal_fsync_duration_seconds",
              "The latency distributions of fsync called by WAL.",
              &wal_metrics_fsync);
    uint64_t rx = 0, tx = 0;
    rpc_server_bytes(api->rpc, &rx, &tx);
    series(e, "etcd_network_client_grpc_received_bytes_total", "counter",
           "The total number of bytes received from grpc clients.",
           (double)rx);
    series(e, "etcd_network_client_grpc_sent_bytes_total", "counter",
           "The total number of bytes sent to grpc clients.", (double)tx);
}

enum peer_family { P_ACTIVE, P_FAILURES, P_SENT, P_RECEIVED, P_RTT };

struct peer_pass {
    struct expo *e;
    enum peer_family family;
    uint64_t self; /* this member's id */
};

static void peer_one(const struct server_peer_metrics *p, void *ctx)
{
    struct peer_pass *g = ctx;
    char lab[96];
    switch (g->family) {
    case P_ACTIVE:
        snprintf(lab, sizeof lab, "{Local=\"%llx\",Remote=\"%llx\"}",
                 (unsigned long long)g->self, (unsigned long long)p->id);
        value(g->e, "etcd_network_active_peers", lab, p->active ? 1 : 0);
        break;
    case P_FAILURES:
        snprintf(lab, sizeof lab, "{To=\"%llx\"}", (unsigned long long)p->id);
        value(g->e, "etcd_network_peer_sent_failures_total", lab,
              (double)p->sent_failures);
        break;
    case P_SENT:
        snprintf(lab, sizeof lab, "{To=\"%llx\"}", (unsigned long long)p->id);
        value(g->e, "etcd_network_peer_sent_bytes_total", lab,
              (double)p->sent_bytes);
        break;
    case P_RECEIVED:
        snprintf(lab, sizeof lab, "{From=\"%llx\"}",
                 (unsigned long long)p->id);
        value(g->e, "etcd_network_peer_received_bytes_total", lab,
              (double)p->received_bytes);
        break;
    case P_RTT: {
        static const struct metrics_hist shape =
            METRICS_HIST_INIT(peer_rtt_bounds);
        snprintf(lab, sizeof lab, "To=\"%llx\"", (unsigned long long)p->id);
        hist_body(g->e, "etcd_network_peer_round_trip_time_seconds", lab,
                  &shape, &p->rtt);
        break;
    }
    }
}

static void peer_count(const struct server_peer_metrics *p, void *ctx)
{
    (void)p;
    (*(size_t *)ctx)++;
}

/* peer_series: etcd's rafthttp series, one per other member (none, not
 * even the family's head, for a lone member: Go's client writes no empty
 * family). */
static void peer_series(struct expo *e, const struct api_http *h,
                        const struct server_metrics *m)
{
    static const struct {
        enum peer_family family;
        const char *name, *type, *help;
    } fams[] = {
        {P_ACTIVE, "etcd_network_active_peers", "gauge",
         "The current number of active peer connections."},
        {P_FAILURES, "etcd_network_peer_sent_failures_total", "counter",
         "The total number of send failures from peers."},
        {P_SENT, "etcd_network_peer_sent_bytes_total", "counter",
         "The total number of bytes sent to peers."},
        {P_RECEIVED, "etcd_network_peer_received_bytes_total", "counter",
         "The total number of bytes received from peers."},
        {P_RTT, "etcd_network_peer_round_trip_time_seconds", "histogram",
         "Round-Trip-Time histogram between peers"},
    };
    size_t peers = 0;
    server_peer_metrics(h->server, peer_count, &peers);
    for (size_t i = 0; peers > 0 && i < sizeof fams / sizeof fams[0]; i++) {
        head(e, fams[i].name, fams[i].type, fams[i].help);
        struct peer_pass g = {e, fams[i].family, m->member_id};
        server_peer_metrics(h->server, peer_one, &g);
    }
}

static void server_series(struct expo *e, const struct api_http *h,
                          const struct server_metrics *m)
{
    series_labeled(e, "etcd_cluster_version", "gauge",
                   "Which version is running. 1 for 'cluster_version' "
                   "label with current cluster version",
                   "cluster_version", "3.4", 1);
    series(e, "etcd_server_has_leader", "gauge",
           "Whether or not a leader exists. 1 is existence, 0 is not.",
           m->has_leader ? 1 : 0);
    char id[20];
    /* etcd writes ids as types.ID does: hex without leading zeros. */
    snprintf(id, sizeof id, "%llx", (unsigned long long)m->member_id);
    series_labeled(e, "etcd_server_id", "gauge",
                   "Server or member ID in hexadecimal format. 1 for "
                   "'server_id' label with current ID.",
                   "server_id", id, 1);
    series(e, "etcd_server_health_failures", "counter",
           "The total number of failed health checks",
           (double)atomic_load(&h->health->failed));
    series(e, "etcd_server_health_success", "counter",
           "The total number of successful health checks",
           (double)atomic_load(&h->health->ok));
    series(e, "etcd_server_is_leader", "gauge",
           "Whether or not this member is a leader. 1 if is, 0 otherwise.",
           m->is_leader ? 1 : 0);
    series(e, "etcd_server_is_learner", "gauge",
           "Whether or not this member is a learner. 1 if is, 0 otherwise.",
           m->is_learner ? 1 : 0);
    series(e, "etcd_server_leader_changes_seen_total", "counter",
           "The number of leader changes seen.", (double)m->leader_changes);
    series(e, "etcd_server_proposals_applied_total", "gauge",
           "The total number of consensus proposals applied.",
           (double)m->applied_index);
    series(e, "etcd_server_proposals_committed_total", "gauge",
           "The total number of consensus proposals committed.",
           (double)m->committed_index);
    series(e, "etcd_server_proposals_failed_total", "counter",
           "The total number of failed proposals seen.",
           (double)m->proposals_failed);
    series(e, "etcd_server_proposals_pending", "gauge",
           "The current number of pending proposals to commit.",
           (double)m->proposals_pending);
    series(e, "etcd_server_quota_backend_bytes", "gauge",
           "Current backend storage quota size in bytes.",
           (double)m->quota_bytes);
    series_labeled(e, "etcd_server_version", "gauge",
                   "Which version is running. 1 for 'server_version' label "
                   "with current version.",
                   "server_version", server_reported_version(h->server), 1);
}

static void process_series(struct expo *e)
{
    double cpu, rss;
    proc_stat(&cpu, &rss);
    series(e, "process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.", cpu);
    series(e, "process_open_fds", "gauge", "Number of open file descriptors.",
           open_fds());
    series(e, "process_resident_memory_bytes", "gauge",
           "Resident memory size in bytes.", rss);
}

char *api__metrics_text(const struct api_http *h, size_t *len_out)
{
    CHECK(h != NULL && h->api != NULL && len_out != NULL);
    struct server_metrics m;
    server_metrics_get(h->server, &m);
    struct expo e = {.p = mem_malloc(METRICS_TEXT_FIRST),
                     .cap = METRICS_TEXT_FIRST};
    e.failed = e.p == NULL;
    server_series(&e, h, &m);
    disk_series(&e, h->api);
    peer_series(&e, h, &m);
    mvcc_series(&e, &m);
    grpc_series(&e, h->api);
    process_series(&e);
    if (e.failed) {
        mem_free(e.p);
        return NULL;
    }
    *len_out = e.n;
    return e.p;
}

void api__metrics_serve(const struct api_http *h, struct rpc_call *call)
{
    size_t n = 0;
    char *text = api__metrics_text(h, &n);
    if (text == NULL) {
        static const char oom[] = "out of memory\n";
        rpc_call_reply_http(call, 500, "text/plain; charset=utf-8", 0, oom,
                            sizeof oom - 1);
        return;
    }
    rpc_call_reply_http(call, 200, "text/plain; version=0.0.4; charset=utf-8",
                        0, text, n);
    mem_free(text);
}
