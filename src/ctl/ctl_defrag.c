/*
 * ctl_defrag.c - "defrag": Maintenance.Defragment on each endpoint (or on
 * every member's client URLs with --cluster), and the offline
 * defragmentation of a data dir with --data-dir.
 *
 * Online, as etcdctl: one "Finished defragmenting etcd member[<ep>]" line
 * on stdout per endpoint that answered, one "Failed to defragment etcd
 * member[<ep>] (<error>)" line on stderr per one that did not, and exit
 * code 1 if any failed.  Each endpoint gets its own client, as clientv3's
 * Defragment dials the endpoint it is given, with the --command-timeout
 * deadline.
 *
 * Offline (--data-dir): etcdctl opens <dir>/member/snap/db as bbolt and
 * rewrites it compacted.  An etcd data dir is defragmented the same way
 * here: the project's validating bbolt reader walks the db and its
 * writer writes every bucket and entry in order into member/snap/db.tmp,
 * which is fsynced and renamed over the db, under bbolt's file lock (so a
 * running etcd is never touched; etcdctl waits for the lock and says so
 * after a second, as here).  A cetcd data dir holds an LMDB store
 * (member/db/), which this command cannot defragment offline: it is
 * refused with a message naming the flag (defragment a running cetcd
 * member without --data-dir instead).
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl/commands.h"
#include "etcdserverpb/rpc.pb-c.h"

static bool cluster;
static const char *data_dir;

static struct ctl_flag flags[] = {
    {"cluster", 0, CTL_FLAG_BOOL, &cluster, "false",
     "use all endpoints from the cluster member list", false},
    {"data-dir", 0, CTL_FLAG_STRING, &data_dir, "",
     "Optional. If present, defragments a data directory not in use by "
     "etcd.",
     false},
    CTL_FLAG_END,
};

/* ---- online ---------------------------------------------------------- */

/* client_with_token opens a client on endpoints that does not
 * authenticate itself but sends token (if any): clientv3's Dial of one
 * endpoint reuses the shared client's token, and etcdctl's member list
 * for --cluster goes without one. */
static struct cetcd_client *client_with_token(const char *endpoints,
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

/* cluster_endpoints fills l with every member's client URLs, in the
 * member list's order (etcdctl's endpointsFromCluster). */
static void cluster_endpoints(struct ctl_strings *l)
{
    Etcdserverpb__MemberListRequest req =
        ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st = {0};
    char text[512];
    struct cetcd_client *c = client_with_token(ctl_endpoints_joined(), NULL);
    int rc = ctl_unary(c, "/etcdserverpb.Cluster/MemberList", &req.base,
                       &etcdserverpb__member_list_response__descriptor,
                       &resp, &st);
    cetcd_client_close(c);
    if (rc != 0)
        ctl_exit(CTL_EXIT_ERROR,
                 "failed to fetch endpoints from etcd cluster member list: "
                 "%s",
                 ctl_status_text(&st, text, sizeof text));
    Etcdserverpb__MemberListResponse *ml =
        (Etcdserverpb__MemberListResponse *)resp;
    for (size_t i = 0; i < ml->n_members; i++)
        for (size_t k = 0; k < ml->members[i]->n_clienturls; k++)
            ctl_strings_add(l, ml->members[i]->clienturls[k]);
    protobuf_c_message_free_unpacked(resp, NULL);
}

/* warn_failed writes the line clientv3's retry interceptor logs when
 * Defragment fails: its connection to the one endpoint is a plain dial
 * ("passthrough:///<ep>"), unlike the shared client's balancer target.
 * A call that could not reach the server is grpc-go's DeadlineExceeded
 * (its exact text names the dial error, which libcetcd does not give). */
static void warn_failed(const char *ep, const struct cetcd_status *st)
{
    static const char *const codes[] = {
        "OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded",
        "NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted",
        "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented",
        "Internal", "Unavailable", "DataLoss", "Unauthenticated"};
    struct timespec ts;
    struct tm tm;
    char when[40], zone[16] = "Z", err[600];
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    if (tm.tm_gmtoff != 0)
        strftime(zone, sizeof zone, "%z", &tm);
    if (st->code == CETCD_DEADLINE_EXCEEDED || st->code == CETCD_UNAVAILABLE)
        snprintf(err, sizeof err, "rpc error: code = DeadlineExceeded desc = "
                                  "context deadline exceeded");
    else
        snprintf(err, sizeof err, "rpc error: code = %s desc = %s",
                 codes[st->code >= 0 && st->code <= 16 ? st->code : 2],
                 st->message);
    fprintf(stderr, "{\"level\":\"warn\",\"ts\":\"%s.%03ld%s\",\"caller\":"
                    "\"clientv3/retry_interceptor.go:62\",\"msg\":\"retrying "
                    "of unary invoker failed\",\"target\":\"passthrough:///",
            when, ts.tv_nsec / 1000000, zone);
    for (const char *p = ep; *p; p++)
        fprintf(stderr, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    fputs("\",\"attempt\":0,\"error\":\"", stderr);
    for (const char *p = err; *p; p++)
        fprintf(stderr, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    fputs("\"}\n", stderr);
}

/* defrag_one defragments the member at ep; false (and the failure line)
 * when it fails. */
static bool defrag_one(const char *ep)
{
    struct cetcd_client *c = client_with_token(ep, ctl_client_token());
    Etcdserverpb__DefragmentRequest req =
        ETCDSERVERPB__DEFRAGMENT_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st = {0};
    int rc = cetcd_call_unary(c, "/etcdserverpb.Maintenance/Defragment",
                              &req.base,
                              &etcdserverpb__defragment_response__descriptor,
                              &resp, &st);
    protobuf_c_message_free_unpacked(resp, NULL);
    cetcd_client_close(c);
    if (rc != 0) {
        char text[512];
        warn_failed(ep, &st);
        fprintf(stderr, "Failed to defragment etcd member[%s] (%s)\n", ep,
                ctl_status_text(&st, text, sizeof text));
        return false;
    }
    printf("Finished defragmenting etcd member[%s]\n", ep);
    fflush(stdout);
    return true;
}

static int run_online(void)
{
    /* etcdctl makes its client first (with --user, that authenticates
     * and can fail before anything else). */
    (void)ctl_client();
    struct ctl_strings eps = {0};
    if (cluster) {
        cluster_endpoints(&eps);
    } else {
        /* the --endpoints values as given (etcdctl reads the flag, not
         * the endpoints a --discovery-srv lookup found) */
        for (size_t i = 0; i < ctl_g.endpoints.n; i++)
            ctl_strings_add(&eps, ctl_g.endpoints.v[i]);
    }
    int failures = 0;
    for (size_t i = 0; i < eps.n; i++)
        if (!defrag_one(eps.v[i]))
            failures++;
    ctl_strings_clear(&eps);
    return failures ? CTL_EXIT_ERROR : CTL_EXIT_SUCCESS;
}

/* ---- offline ---------------------------------------------------------- */

/* fail_data prints etcdctl's line for a failed offline defrag and exits. */
__attribute__((noreturn, format(printf, 1, 2))) static void
fail_data(const char *fmt, ...)
{
    fprintf(stderr, "Failed to defragment etcd data[%s] (", data_dir);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(")\n", stderr);
    exit(CTL_EXIT_ERROR);
}

/* lock_db takes bbolt's exclusive lock on the db file, as etcd's backend
 * does when it opens it: a running etcd holds it.  Like etcdctl, says
 * after a second that it waits. */
static void lock_db(int fd, const char *db)
{
    struct timespec start, now, nap = {0, 50 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    bool told = false;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            fail_data("flock %s: %s", db, strerror(errno));
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!told && now.tv_sec - start.tv_sec >= 1) {
            fprintf(stderr,
                    "waiting for etcd to close and release its lock on "
                    "\"%s\". To defrag a running etcd instance, omit "
                    "--data-dir.\n",
                    db);
            told = true;
        }
        nanosleep(&nap, NULL);
    }
}

static int run_offline(void)
{
    char db[4096], tmp[4200], lmdb[4096], why[600];
    /* Go's texts for errno: the C library's, first letter lower case */
    const char *noent = "no such file or directory";
    snprintf(db, sizeof db, "%s/member/snap/db", data_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", db);
    snprintf(lmdb, sizeof lmdb, "%s/member/db", data_dir);
    struct stat st;
    if (stat(db, &st) != 0 && stat(lmdb, &st) == 0)
        ctl_exit(CTL_EXIT_BAD_FEATURE,
                 "--data-dir %s is a cetcd data dir: its store is LMDB, "
                 "not bbolt, and cannot be defragmented offline; defragment "
                 "the running member instead (etcdctl defrag without "
                 "--data-dir)",
                 data_dir);
    /* etcdctl's bbolt would create an empty db here; that only hides a
     * wrong path, so a missing db is an error (etcdctl panics when even
     * the directory is missing). */
    int fd = open(db, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        fail_data("open %s: %s", db,
                  errno == ENOENT ? noent : strerror(errno));
    lock_db(fd, db);
    if (ctl_bbolt_copy(db, tmp, -1, why, sizeof why) != 0) {
        unlink(tmp);
        fail_data("%s", why);
    }
    if (rename(tmp, db) != 0) {
        int e = errno;
        unlink(tmp);
        fail_data("rename %s %s: %s", tmp, db, strerror(e));
    }
    ctl_fsync_dir(db);
    close(fd); /* drops the lock, after the rename */
    return CTL_EXIT_SUCCESS;
}

static int run(int argc, char **argv)
{
    (void)argc, (void)argv; /* etcdctl ignores positional arguments */
    if (data_dir[0])
        return run_offline();
    return run_online();
}

const struct ctl_cmd ctl_cmd_defrag = {
    .use = "defrag",
    .short_desc =
        "Defragments the storage of the etcd members with given endpoints",
    .flags = flags,
    .run = run,
};
