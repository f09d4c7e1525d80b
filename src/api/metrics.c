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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_int.h"
#include "rpc/rpc.h"
#include "server/server.h"

#define METRICS_BUF (8 * 1024)

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

/* series_labeled writes one series (with one label when label is not
 * NULL) after o; returns the new end. */
static size_t series_labeled(char *buf, size_t cap, size_t o,
                             const char *name, const char *type,
                             const char *help, const char *label,
                             const char *label_value, double v)
{
    char num[40], lab[128] = "";
    go_float(num, sizeof num, v);
    if (o >= cap)
        return o;
    if (label != NULL)
        snprintf(lab, sizeof lab, "{%s=\"%s\"}", label, label_value);
    int n = snprintf(buf + o, cap - o,
                     "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", name, help,
                     name, type, name, lab, num);
    return n > 0 ? o + (size_t)n : o;
}

static size_t series(char *buf, size_t cap, size_t o, const char *name,
                     const char *type, const char *help, double v)
{
    return series_labeled(buf, cap, o, name, type, help, NULL, NULL, v);
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

size_t api__metrics_text(const struct api_http *h, char *buf, size_t cap)
{
    struct server_metrics m;
    server_metrics_get(h->server, &m);
    double cpu, rss;
    proc_stat(&cpu, &rss);
    size_t o = 0;
    o = series(buf, cap, o, "etcd_mvcc_db_total_size_in_bytes", "gauge",
               "Total size of the underlying database physically allocated "
               "in bytes.",
               (double)m.db_size);
    o = series(buf, cap, o, "etcd_mvcc_db_total_size_in_use_in_bytes",
               "gauge",
               "Total size of the underlying database logically in use in "
               "bytes.",
               (double)m.db_in_use);
    o = series_labeled(buf, cap, o, "etcd_cluster_version", "gauge",
                       "Which version is running. 1 for 'cluster_version' "
                       "label with current cluster version",
                       "cluster_version", "3.4", 1);
    o = series(buf, cap, o, "etcd_server_has_leader", "gauge",
               "Whether or not a leader exists. 1 is existence, 0 is not.",
               m.has_leader ? 1 : 0);
    char id[20];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)m.member_id);
    o = series_labeled(buf, cap, o, "etcd_server_id", "gauge",
                       "Server or member ID in hexadecimal format. 1 for "
                       "'server_id' label with current ID.",
                       "server_id", id, 1);
    o = series(buf, cap, o, "etcd_server_health_failures", "counter",
               "The total number of failed health checks",
               (double)atomic_load(&h->health->failed));
    o = series(buf, cap, o, "etcd_server_health_success", "counter",
               "The total number of successful health checks",
               (double)atomic_load(&h->health->ok));
    o = series(buf, cap, o, "etcd_server_is_leader", "gauge",
               "Whether or not this member is a leader. 1 if is, 0 "
               "otherwise.",
               m.is_leader ? 1 : 0);
    o = series(buf, cap, o, "etcd_server_is_learner", "gauge",
               "Whether or not this member is a learner. 1 if is, 0 "
               "otherwise.",
               m.is_learner ? 1 : 0);
    o = series(buf, cap, o, "etcd_server_leader_changes_seen_total",
               "counter", "The number of leader changes seen.",
               (double)m.leader_changes);
    o = series(buf, cap, o, "etcd_server_proposals_applied_total", "gauge",
               "The total number of consensus proposals applied.",
               (double)m.applied_index);
    o = series(buf, cap, o, "etcd_server_proposals_committed_total", "gauge",
               "The total number of consensus proposals committed.",
               (double)m.committed_index);
    o = series(buf, cap, o, "etcd_server_proposals_failed_total", "counter",
               "The total number of failed proposals seen.",
               (double)m.proposals_failed);
    o = series(buf, cap, o, "etcd_server_proposals_pending", "gauge",
               "The current number of pending proposals to commit.",
               (double)m.proposals_pending);
    o = series(buf, cap, o, "etcd_server_quota_backend_bytes", "gauge",
               "Current backend storage quota size in bytes.",
               (double)m.quota_bytes);
    o = series_labeled(buf, cap, o, "etcd_server_version", "gauge",
                       "Which version is running. 1 for 'server_version' "
                       "label with current version.",
                       "server_version", server_reported_version(h->server), 1);
    o = series(buf, cap, o, "process_cpu_seconds_total", "counter",
               "Total user and system CPU time spent in seconds.", cpu);
    o = series(buf, cap, o, "process_open_fds", "gauge",
               "Number of open file descriptors.", open_fds());
    o = series(buf, cap, o, "process_resident_memory_bytes", "gauge",
               "Resident memory size in bytes.", rss);
    return o < cap ? o : cap;
}

void api__metrics_serve(const struct api_http *h, struct rpc_call *call)
{
    static _Thread_local char buf[METRICS_BUF];
    size_t n = api__metrics_text(h, buf, sizeof buf);
    rpc_call_reply_http(call, 200, "text/plain; version=0.0.4; charset=utf-8",
                        0, buf, n);
}
