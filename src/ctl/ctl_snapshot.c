/*
 * ctl_snapshot.c - "snapshot save | status": etcdctl's snapshot commands
 * (clientv3/snapshot's Save and Status), and the "snapshot" group that
 * lists them with restore (ctl_snapshot_restore.c).  The helpers they
 * share are in ctl_snapshot_util.c (ctl_snapshot.h).
 *
 * save <file>: streams Maintenance/Snapshot from the one endpoint into
 *   <file>.part (0600), checks the SHA-256 trailer etcd appends (etcdctl
 *   only checks that the size leaves room for one: we also compare the
 *   digest, so a damaged stream is never saved), fsyncs, renames to
 *   <file> and prints "Snapshot saved at <file>".  On stderr, the zap
 *   lines etcdctl's logger and clientv3's print on the way (their
 *   timestamps are ours).  Exit code 5 (etcdctl's ExitInterrupted) on any
 *   failure, and the .part file is removed.
 * status <file>: opens the file as bbolt does (the same error texts for
 *   a missing, empty, short or foreign file), checks it with the
 *   project's validating reader (bbolt's tx.Check), and prints hash,
 *   revision, total keys and size: the hash is etcd's CRC-32C over every
 *   top-level bucket's name and its keys and values, in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bbolt/bbolt.h"
#include "ctl/commands.h"
#include "ctl/ctl_snapshot.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "util/crc32c.h"
#include "util/err.h"

/* ------------------------------------------------------------------------
 * save
 * ---------------------------------------------------------------------- */

/* The download: the file, its size and the running SHA-256 of every byte
 * but the last 32 seen (the trailer, held back in tail). */
struct fetch {
    int fd;                     /* <file>.part */
    uint64_t size;              /* bytes written */
    EVP_MD_CTX *sha;            /* digest of the data before tail */
    uint8_t tail[CTL_SNAPSHOT_SHA256_LEN];   /* the last bytes seen */
    size_t held;                /* how many of them */
};

static void fetch_digest(struct fetch *f, const uint8_t *p, size_t n)
{
    if (n >= CTL_SNAPSHOT_SHA256_LEN) {
        EVP_DigestUpdate(f->sha, f->tail, f->held);
        EVP_DigestUpdate(f->sha, p, n - CTL_SNAPSHOT_SHA256_LEN);
        memcpy(f->tail, p + n - CTL_SNAPSHOT_SHA256_LEN,
               CTL_SNAPSHOT_SHA256_LEN);
        f->held = CTL_SNAPSHOT_SHA256_LEN;
        return;
    }
    if (f->held + n > CTL_SNAPSHOT_SHA256_LEN) {
        size_t out = f->held + n - CTL_SNAPSHOT_SHA256_LEN;
        EVP_DigestUpdate(f->sha, f->tail, out);
        memmove(f->tail, f->tail + out, f->held - out);
        f->held -= out;
    }
    memcpy(f->tail + f->held, p, n);
    f->held += n;
}

static const char *part_path; /* removed by save_fail */

/* save_fail removes the .part file, as etcdctl's deferred RemoveAll does
 * before it exits, and exits with etcdctl's ExitInterrupted. */
__attribute__((noreturn, format(printf, 1, 2))) static void
save_fail(const char *fmt, ...)
{
    if (part_path)
        unlink(part_path);
    fputs("Error: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(CTL_EXIT_INTERRUPTED);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* stream_start opens the Snapshot stream, sends its request and waits
 * for the first answer: returns the stream and sets *rc to the first
 * recv's result (a response in *first, or the server's error).  While
 * the endpoint refuses connections it reopens, as gRPC waits for the
 * connection, until deadline_ms; then (or on any local failure) it
 * exits as etcdctl does when the stream could not be made.  With whole
 * (--command-timeout given) deadline_ms is also the whole call's. */
static struct cetcd_stream *stream_start(struct cetcd_client *c,
                                         int64_t deadline_ms, bool whole,
                                         ProtobufCMessage **first, int *rc,
                                         struct cetcd_status *st)
{
    Etcdserverpb__SnapshotRequest req = ETCDSERVERPB__SNAPSHOT_REQUEST__INIT;
    char text[512];
    for (;;) {
        int64_t left = deadline_ms - now_ms();
        left = left > 1 ? left : 1;
        struct cetcd_stream_opts o = {.buffer_max = 16};
        o.timeout_ms = whole ? (int)left : 0;
        struct cetcd_stream *s = NULL;
        if (cetcd_stream_open(c, "/etcdserverpb.Maintenance/Snapshot",
                              &etcdserverpb__snapshot_response__descriptor,
                              &o, &s, st) != 0)
            save_fail("%s", ctl_status_text(st, text, sizeof text));
        if (cetcd_stream_send(s, &req.base, st) == 0)
            (void)cetcd_stream_close_send(s, st);
        /* a server that is slow to start sending is waited for, as
         * etcdctl waits; the stream's own deadline (whole) ends it */
        *rc = cetcd_stream_recv(s, -1, first, st);
        if (*rc != CETCD_UNAVAILABLE && *rc != CETCD_DEADLINE_EXCEEDED)
            return s;
        cetcd_stream_close(s);
        if (*rc != CETCD_UNAVAILABLE || now_ms() + 100 >= deadline_ms)
            save_fail("context deadline exceeded");
        /* not reachable (yet): gRPC's client waits for the connection */
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

/* grpc_text is grpc-go's error text for a failed stream, which etcdctl
 * prints as it is for Snapshot (it does not convert stream errors). */
static const char *grpc_text(const struct cetcd_status *st, char *buf,
                             size_t cap)
{
    static const char *const names[] = {
        "OK",          "Canceled",         "Unknown",
        "InvalidArgument", "DeadlineExceeded", "NotFound",
        "AlreadyExists", "PermissionDenied", "ResourceExhausted",
        "FailedPrecondition", "Aborted",  "OutOfRange",
        "Unimplemented", "Internal",       "Unavailable",
        "DataLoss",    "Unauthenticated",
    };
    int code = st->code >= 0 && st->code <= 16 ? st->code : 2;
    const char *desc = st->message;
    if (code == CETCD_DEADLINE_EXCEEDED)
        desc = "context deadline exceeded";
    else if (code == CETCD_CANCELLED)
        desc = "context canceled";
    snprintf(buf, cap, "rpc error: code = %s desc = %s", names[code], desc);
    return buf;
}

/* fetch_blob writes one chunk to the .part file. */
static void fetch_blob(struct fetch *f, const ProtobufCMessage *m)
{
    const Etcdserverpb__SnapshotResponse *r =
        (const Etcdserverpb__SnapshotResponse *)m;
    char eb[128];
    int e = ctl_snapshot_write_all(f->fd, r->blob.data, r->blob.len);
    if (e != 0)
        save_fail("write %s: %s", part_path,
                  ctl_snapshot_go_errno(e, eb, sizeof eb));
    fetch_digest(f, r->blob.data, r->blob.len);
    f->size += r->blob.len;
}

/* fetch_all takes the responses until the server ends the stream; exits
 * on an error as etcdctl (clientv3 logs it, Save returns it). */
static void fetch_all(struct fetch *f, struct cetcd_stream *s,
                      ProtobufCMessage *m, int rc, struct cetcd_status *st)
{
    char text[512];
    while (rc == 0 && m != NULL) {
        fetch_blob(f, m);
        protobuf_c_message_free_unpacked(m, NULL);
        m = NULL;
        rc = cetcd_stream_recv(s, -1, &m, st);
    }
    cetcd_stream_close(s);
    if (rc != 0) {
        grpc_text(st, text, sizeof text);
        ctl_snapshot_zap_begin("warn", true, "clientv3/maintenance.go:210",
                  "failed to receive from snapshot stream; closing");
        ctl_snapshot_zap_field("error", text);
        ctl_snapshot_zap_end();
        save_fail("%s", text);
    }
    ctl_snapshot_zap_begin("info", true, "clientv3/maintenance.go:208",
              "completed snapshot read; closing");
    ctl_snapshot_zap_end();
}

/* fetch_check checks the trailer: etcd appends the SHA-256 of the db. */
static void fetch_check(struct fetch *f)
{
    if (f->size % 512 != CTL_SNAPSHOT_SHA256_LEN)
        save_fail("sha256 checksum not found [bytes: %llu]",
                  (unsigned long long)f->size);
    uint8_t sum[CTL_SNAPSHOT_SHA256_LEN];
    unsigned int n = 0;
    EVP_DigestFinal_ex(f->sha, sum, &n);
    if (n != CTL_SNAPSHOT_SHA256_LEN ||
        memcmp(sum, f->tail, CTL_SNAPSHOT_SHA256_LEN) != 0) {
        char want[2 * CTL_SNAPSHOT_SHA256_LEN + 1],
            got[2 * CTL_SNAPSHOT_SHA256_LEN + 1];
        for (int i = 0; i < CTL_SNAPSHOT_SHA256_LEN; i++) {
            snprintf(want + 2 * i, 3, "%02x", f->tail[i]);
            snprintf(got + 2 * i, 3, "%02x", sum[i]);
        }
        save_fail("sha256 checksum mismatch [bytes: %llu]: the snapshot's "
                  "trailer says %s, its data hashes to %s",
                  (unsigned long long)f->size, want, got);
    }
}

/* save_download streams the snapshot into fd (etcdctl's Save from the
 * Snapshot call to the fsync); returns the bytes saved. */
static uint64_t save_download(struct cetcd_client *c, int fd,
                              const char *ep)
{
    struct fetch f = {.fd = fd, .sha = EVP_MD_CTX_new()};
    if (f.sha == NULL || !EVP_DigestInit_ex(f.sha, EVP_sha256(), NULL))
        save_fail("out of memory");
    /* Without --command-timeout etcdctl sets no deadline at all, and on
     * an endpoint that never answers it waits forever; we stop waiting
     * for the connection after --dial-timeout (the download itself still
     * has no deadline). */
    bool whole = ctl_flag_changed("command-timeout");
    int64_t limit_ns = whole ? ctl_g.command_timeout_ns : ctl_g.dial_timeout_ns;
    int64_t deadline = now_ms() + (limit_ns > 1000000 ? limit_ns / 1000000 : 1);
    ProtobufCMessage *m = NULL;
    struct cetcd_status st = {0};
    int rc = 0;
    struct cetcd_stream *s = stream_start(c, deadline, whole, &m, &rc, &st);
    ctl_snapshot_zap_begin("info", true, "clientv3/maintenance.go:200",
              "opened snapshot stream; downloading");
    ctl_snapshot_zap_end();
    ctl_snapshot_zap_begin("info", false, "snapshot/v3_snapshot.go:127",
              "fetching snapshot");
    ctl_snapshot_zap_field("endpoint", ep);
    ctl_snapshot_zap_end();
    fetch_all(&f, s, m, rc, &st);
    fetch_check(&f);
    EVP_MD_CTX_free(f.sha);
    char eb[128];
    if (fsync(fd) != 0)
        save_fail("sync %s: %s", part_path,
                  ctl_snapshot_go_errno(errno, eb, sizeof eb));
    if (close(fd) != 0)
        save_fail("close %s: %s", part_path,
                  ctl_snapshot_go_errno(errno, eb, sizeof eb));
    return f.size;
}

static int save_run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "snapshot save expects one argument");
    const struct ctl_strings *eps = ctl_endpoint_list();
    if (eps->n != 1) {
        fputs("Error: snapshot must be requested to one selected node, not "
              "multiple [",
              stderr);
        for (size_t i = 0; i < eps->n; i++)
            fprintf(stderr, "%s%s", i ? " " : "", eps->v[i]);
        fputs("]\n", stderr);
        return CTL_EXIT_INTERRUPTED;
    }
    struct cetcd_client *c = ctl_client();
    const char *path = argv[0];
    static char part[4200];
    char eb[128];
    snprintf(part, sizeof part, "%s.part", path);
    int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        save_fail("could not open %s (open %s: %s)", part, part,
                  ctl_snapshot_go_errno(errno, eb, sizeof eb));
    part_path = part;
    ctl_snapshot_zap_begin("info", false, "snapshot/v3_snapshot.go:119",
              "created temporary db file");
    ctl_snapshot_zap_field("path", part);
    ctl_snapshot_zap_end();
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t size = save_download(c, fd, eps->v[0]);
    clock_gettime(CLOCK_MONOTONIC, &b);
    char human[CTL_HUMAN_MAX];
    ctl_snapshot_zap_begin("info", false, "snapshot/v3_snapshot.go:142",
              "fetched snapshot");
    ctl_snapshot_zap_field("endpoint", eps->v[0]);
    ctl_snapshot_zap_field("size",
                           ctl_humanize_bytes(human, sizeof human, size));
    fputs(",\"took\":", stderr);
    ctl_snapshot_go_float(stderr, (double)(b.tv_sec - a.tv_sec) +
                         (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    ctl_snapshot_zap_end();
    if (rename(part, path) != 0)
        save_fail("could not rename %s to %s (rename %s %s: %s)", part, path,
                  part, path, ctl_snapshot_go_errno(errno, eb, sizeof eb));
    part_path = NULL;
    ctl_fsync_dir(path);
    ctl_snapshot_zap_begin("info", false, "snapshot/v3_snapshot.go:152",
                           "saved");
    ctl_snapshot_zap_field("path", path);
    ctl_snapshot_zap_end();
    printf("Snapshot saved at %s\n", path);
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * status
 * ---------------------------------------------------------------------- */

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* meta_error is bbolt's meta.validate() of the meta at m (a page start):
 * NULL when valid. */
static const char *meta_error(const uint8_t *m)
{
    const uint8_t *b = m + BBOLT_PAGE_HDR;
    if (le32(b) != BBOLT_MAGIC)
        return "invalid database";
    if (le32(b + 4) != BBOLT_VERSION)
        return "version mismatch";
    uint64_t sum = le64(b + 56), h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 56; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    if (sum != 0 && sum != h)
        return "checksum error";
    return NULL;
}

/* status_open makes the checks bbolt.Open makes (read-only), with its
 * error texts, before the project's reader checks the whole file. */
static void status_open(const char *path)
{
    struct stat st;
    char eb[128];
    if (stat(path, &st) != 0)
        ctl_exit(CTL_EXIT_ERROR, "stat %s: %s", path,
                 ctl_snapshot_go_errno(errno, eb, sizeof eb));
    if (S_ISDIR(st.st_mode)) /* bbolt opens with O_CREATE */
        ctl_exit(CTL_EXIT_ERROR, "open %s: is a directory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        ctl_exit(CTL_EXIT_ERROR, "open %s: %s", path,
                 ctl_snapshot_go_errno(errno, eb, sizeof eb));
    if (st.st_size == 0) /* bbolt initialises an empty file: a write */
        ctl_exit(CTL_EXIT_ERROR, "write %s: bad file descriptor", path);
    static uint8_t m0[BBOLT_PAGE_SIZE], m1[BBOLT_PAGE_SIZE];
    if (pread(fd, m0, sizeof m0, 0) != (ssize_t)sizeof m0)
        ctl_exit(CTL_EXIT_ERROR, "invalid database");
    uint32_t ps = BBOLT_PAGE_SIZE;
    if (meta_error(m0) == NULL)
        ps = le32(m0 + BBOLT_PAGE_HDR + 8);
    if (ps == 0 || st.st_size < 2 * (off_t)ps)
        ctl_exit(CTL_EXIT_ERROR, "file size too small");
    const char *e0 = meta_error(m0), *e1 = "invalid database";
    if (pread(fd, m1, BBOLT_PAGE_HDR + 72, ps) == BBOLT_PAGE_HDR + 72)
        e1 = meta_error(m1);
    close(fd);
    if (e0 != NULL && e1 != NULL)
        ctl_exit(CTL_EXIT_ERROR, "%s", e0);
}

/* The walk of clientv3/snapshot's Status. */
struct status_walk {
    uint32_t crc;             /* CRC-32C so far */
    bool key_bucket;          /* the bucket walked is "key" */
    struct ctl_db_status ds;  /* the result */
};

static int status_entry(void *arg, const struct bbolt_entry *e)
{
    struct status_walk *s = arg;
    if (e->depth == 0) {
        s->crc = crc32c_extend(s->crc, e->key, e->key_len);
        s->key_bucket = e->key_len == 3 && memcmp(e->key, "key", 3) == 0;
        return 0;
    }
    if (e->depth > 1) /* bbolt's ForEach does not enter nested buckets */
        return 0;
    s->crc = crc32c_extend(s->crc, e->key, e->key_len);
    if (!e->is_bucket)
        s->crc = crc32c_extend(s->crc, e->value, e->value_len);
    /* etcd reads the revision from every key of "key" (the last wins);
     * a key too short for one would make it panic: skip it instead */
    if (s->key_bucket && e->key_len >= 17) {
        uint64_t main = 0;
        for (int i = 0; i < 8; i++)
            main = main << 8 | e->key[i];
        s->ds.revision = (int64_t)main;
    }
    s->ds.total_key++;
    return 0;
}

static int status_run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "snapshot status requires exactly one argument");
    enum ctl_output out = ctl_output_format();
    status_open(argv[0]);
    struct bbolt_reader *r = NULL;
    int rc = bbolt_reader_open_file(argv[0], &r);
    if (rc == ERR_BBOLT_CORRUPT)
        ctl_exit(CTL_EXIT_ERROR,
                 "snapshot file integrity check failed. 1 errors found.\n%s",
                 bbolt_reader_error(r));
    if (rc != 0)
        ctl_exit(CTL_EXIT_ERROR, "open %s: %s", argv[0], err_str(rc));
    struct status_walk s = {0};
    s.ds.total_size = (int64_t)(bbolt_reader_pages(r) * BBOLT_PAGE_SIZE);
    rc = bbolt_reader_walk(r, status_entry, &s);
    if (rc != 0)
        ctl_exit(CTL_EXIT_ERROR, "%s", bbolt_reader_error(r));
    bbolt_reader_free(r);
    s.ds.hash = s.crc;
    switch (out) {
    case CTL_OUT_JSON:
        ctl_json_db_status(stdout, &s.ds);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_db_status(stdout, &s.ds);
        break;
    case CTL_OUT_PROTOBUF:
        fputs("Error: ", stderr);
        ctl_unsupported(stderr, "protobuf");
        fputc('\n', stderr);
        return CTL_EXIT_BAD_FEATURE;
    default:
        ctl_rows_db_status(stdout, &s.ds, out == CTL_OUT_TABLE);
    }
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The commands
 * ---------------------------------------------------------------------- */

static const struct ctl_cmd save_cmd = {
    .use = "save <filename>",
    .short_desc = "Stores an etcd node backend snapshot to a given file",
    .run = save_run,
};

static const struct ctl_cmd status_cmd = {
    .use = "status <filename>",
    .short_desc = "Gets backend snapshot status of a given file",
    .long_desc = "When --write-out is set to simple, this command prints "
                 "out comma-separated status lists for each endpoint.\n"
                 "The items in the lists are hash, revision, total keys, "
                 "total size.\n",
    .run = status_run,
};

static const struct ctl_cmd *const subs[] = {
    &save_cmd, &ctl_snapshot_restore_cmd, &status_cmd, NULL};

const struct ctl_cmd ctl_cmd_snapshot = {
    .use = "snapshot <subcommand>",
    .short_desc = "Manages etcd node snapshots",
    .subs = subs,
};
