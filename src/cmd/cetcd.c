/*
 * cetcd.c - main() of the cetcd member daemon: flags and ETCD_* variables,
 * then the member (server) and its client API listeners, until SIGINT or
 * SIGTERM.  Prints etcd's start-up lines that tools wait for ("ready to
 * serve client requests", "published ...", "enabled capabilities ...").
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "cmd/flags.h"
#include "server/server.h"
#include "util/err.h"
#include "util/log.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

/* The data dir default is "<name>.cetcd" (etcd: "<name>.etcd"). */
static const char *data_dir(char *buf, size_t cap)
{
    const char *d = flags_get("data-dir");
    if (strcmp(d, "${name}.cetcd") != 0)
        return d;
    snprintf(buf, cap, "%s.cetcd", flags_get("name"));
    return buf;
}

/* Single-member only until Raft is wired in: the initial cluster must name
 * this member alone, with its advertised peer URLs. */
static int check_cluster(void)
{
    const char *ic = flags_get("initial-cluster");
    const char *name = flags_get("name");
    if (!flags_was_set("initial-cluster") && strcmp(name, "default") != 0) {
        /* etcd derives "<name>=<initial-advertise-peer-urls>" then. */
        return 0;
    }
    size_t nl = strlen(name);
    if (strncmp(ic, name, nl) != 0 || ic[nl] != '=') {
        fprintf(stderr, "cetcd: couldn't find local name \"%s\" in the "
                        "initial cluster configuration\n", name);
        return 1;
    }
    for (const char *p = ic + nl + 1; *p; p++) {
        if (*p == ',' && strchr(p + 1, '=') != NULL) {
            fprintf(stderr, "cetcd: --initial-cluster with more than one "
                            "member is not supported yet (multi-member "
                            "clusters need Raft, not built in this version)\n");
            return 1;
        }
    }
    if (strcmp(flags_get("initial-cluster-state"), "new") != 0) {
        fprintf(stderr, "cetcd: --initial-cluster-state=%s is not supported "
                        "yet (joining a cluster needs Raft)\n",
                flags_get("initial-cluster-state"));
        return 1;
    }
    return 0;
}

static int setup_logging(void)
{
    int lvl = log_level_parse(flags_get("log-level"));
    if (lvl < 0) {
        fprintf(stderr, "cetcd: unknown log level %s\n", flags_get("log-level"));
        return 1;
    }
    if (flags_get_bool("debug"))
        lvl = LOG_DEBUG;
    log_set_level((enum log_level)lvl);
    return 0;
}

static int check_timing(void)
{
    uint64_t hb = flags_get_u64("heartbeat-interval");
    uint64_t el = flags_get_u64("election-timeout");
    if (el < 5 * hb) {
        fprintf(stderr, "cetcd: --election-timeout[%llums] should be at "
                        "least as 5 times as --heartbeat-interval[%llums]\n",
                (unsigned long long)el, (unsigned long long)hb);
        return 1;
    }
    if (el > 50000) {
        fprintf(stderr, "cetcd: --election-timeout[%llums] is too long, and "
                        "should be set less than 50000ms\n",
                (unsigned long long)el);
        return 1;
    }
    return 0;
}

static void fill_config(struct server_config *c, const char *dir)
{
    memset(c, 0, sizeof *c);
    c->name = flags_get("name");
    c->data_dir = dir;
    c->wal_dir = *flags_get("wal-dir") ? flags_get("wal-dir") : NULL;
    c->peer_urls = flags_get("initial-advertise-peer-urls");
    c->client_urls = flags_get("advertise-client-urls");
    c->cluster_token = flags_get("initial-cluster-token");
    c->snapshot_count = flags_get_u64("snapshot-count");
    c->quota_backend_bytes = flags_get_u64("quota-backend-bytes");
    c->max_request_bytes = flags_get_u64("max-request-bytes");
    c->max_txn_ops = (uint32_t)flags_get_u64("max-txn-ops");
    c->unsafe_no_fsync = flags_get_bool("unsafe-no-fsync");
}

static void print_startup(const struct server_config *c)
{
    log_info("etcdmain", "etcd Version: 3.4.23 (cetcd %s)", CETCD_GIT_SHA);
    log_info("embed", "name = %s", c->name);
    log_info("embed", "data dir = %s", c->data_dir);
    log_info("embed", "member dir = %s/member", c->data_dir);
    log_info("embed", "snapshot count = %llu",
             (unsigned long long)c->snapshot_count);
    log_info("embed", "advertise client URLs = %s", c->client_urls);
}

static int run(void)
{
    char buf[4096];
    struct server_config cfg;
    fill_config(&cfg, data_dir(buf, sizeof buf));
    print_startup(&cfg);
    struct server *s;
    int rc = server_start(&cfg, &s);
    if (rc != 0) {
        log_error("etcdmain", "failed to start the member: %s", err_str(rc));
        return 1;
    }
    if (flags_get_bool("experimental-initial-corrupt-check")) {
        /* The check compares this member's HashKV with its peers'; a single
         * member has none, so it passes at once (as in etcd). */
        log_info("etcdserver", "%016llx starting initial corruption check",
                 (unsigned long long)server_member_id(s));
        log_info("etcdserver", "%016llx succeeded on initial corruption "
                 "checking: no corruption (no peers to compare with)",
                 (unsigned long long)server_member_id(s));
    }
    struct api *api;
    rc = api_start(s, flags_get("listen-client-urls"), &api);
    if (rc != 0) {
        log_error("etcdmain", "failed to listen on client urls %s: %s",
                  flags_get("listen-client-urls"), err_str(rc));
        server_stop(s);
        return 1;
    }
    log_info("etcdserver", "published {Name:%s ClientURLs:[%s]} to cluster "
             "%016llx", cfg.name, cfg.client_urls,
             (unsigned long long)server_cluster_id(s));
    log_info("etcdserver/api", "enabled capabilities for version 3.4");
    log_info("embed", "ready to serve client requests");
    log_info("embed", "serving insecure client requests on %s, this is "
             "strongly discouraged!", flags_get("listen-client-urls"));
    while (!got_signal)
        pause();
    log_info("pkg/osutil", "received %s signal, shutting down...",
             got_signal == SIGINT ? "interrupt" : "terminated");
    api_stop(api);
    server_stop(s);
    return 0;
}

int main(int argc, char **argv)
{
    int code;
    switch (flags_parse(argc, argv, &code)) {
    case FLAGS_HELP:
        flags_print_help();
        return 0;
    case FLAGS_VERSION:
        flags_print_version();
        return 0;
    case FLAGS_ERROR:
        return code;
    case FLAGS_RUN:
        break;
    }
    if (setup_logging() != 0 || check_timing() != 0 || check_cluster() != 0)
        return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return run();
}
