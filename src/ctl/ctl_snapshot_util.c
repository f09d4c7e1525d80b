/*
 * ctl_snapshot_util.c - the helpers cetcdctl's "snapshot" files share
 * (ctl_snapshot.h): zap's JSON log lines on stderr and two small file
 * helpers; and the bbolt database copy that "snapshot restore" and
 * "defrag --data-dir" share (ctl_bbolt_copy, ctl_fsync_dir: commands.h).
 */
#define _GNU_SOURCE /* tm_gmtoff */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bbolt/bbolt.h"
#include "ctl/commands.h"
#include "ctl/ctl_snapshot.h"
#include "util/err.h"

/* ------------------------------------------------------------------------
 * zap's JSON lines
 *
 * etcdctl logs with zap.NewProduction (epoch seconds as "ts"), clientv3
 * with etcd's default zap config (ISO 8601 local time).  Values are
 * escaped as zap's JSON encoder does: \" \\ \n \r \t, other control bytes
 * as \u00xx, invalid UTF-8 as \ufffd.
 * ---------------------------------------------------------------------- */

/* utf8_len returns the length of the valid UTF-8 sequence at p (n bytes
 * left), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
    if (len == 0 || len > n || p[0] > 0xF4 || (p[0] & 0xFE) == 0xC0)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xF0 && p[1] < 0x90) ||
        (p[0] == 0xF4 && p[1] >= 0x90) || (p[0] == 0xED && p[1] >= 0xA0))
        return 0;
    return len;
}

void ctl_snapshot_zap_str(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    fputc('"', stderr);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x80) {
            size_t l = utf8_len(p + i, n - i);
            if (l == 0) {
                fputs("\\ufffd", stderr);
                i++;
            } else {
                fwrite(p + i, 1, l, stderr);
                i += l;
            }
            continue;
        }
        if (c == '"' || c == '\\')
            fprintf(stderr, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", stderr);
        else if (c == '\r')
            fputs("\\r", stderr);
        else if (c == '\t')
            fputs("\\t", stderr);
        else if (c < 0x20)
            fprintf(stderr, "\\u00%02x", c);
        else
            fputc(c, stderr);
        i++;
    }
    fputc('"', stderr);
}

/* ctl_snapshot_go_float writes v as Go's strconv.FormatFloat(v, 'f', -1, 64):
 * the fewest digits that read back as v (zap's float fields). */
void ctl_snapshot_go_float(FILE *f, double v)
{
    char buf[64];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*f", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

/* ctl_snapshot_zap_begin opens a line: level, ts (epoch seconds, or ISO 8601
 * when iso is true), caller and msg; fields follow with
 * ctl_snapshot_zap_field*, then ctl_snapshot_zap_end. */
void ctl_snapshot_zap_begin(const char *level, bool iso, const char *caller,
                      const char *msg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr, "{\"level\":\"%s\",\"ts\":", level);
    if (iso) {
        struct tm tm;
        char when[40], zone[24] = "Z";
        localtime_r(&ts.tv_sec, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        long off = tm.tm_gmtoff / 60;
        if (off != 0)
            snprintf(zone, sizeof zone, "%c%02ld%02ld", off < 0 ? '-' : '+',
                     labs(off) / 60, labs(off) % 60);
        fprintf(stderr, "\"%s.%03ld%s\"", when, ts.tv_nsec / 1000000, zone);
    } else {
        ctl_snapshot_go_float(stderr,
                              (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
    }
    fputs(",\"caller\":", stderr);
    ctl_snapshot_zap_str(caller);
    fputs(",\"msg\":", stderr);
    ctl_snapshot_zap_str(msg);
}

void ctl_snapshot_zap_field(const char *key, const char *value)
{
    fprintf(stderr, ",\"%s\":", key);
    ctl_snapshot_zap_str(value);
}

void ctl_snapshot_zap_end(void)
{
    fputs("}\n", stderr);
    fflush(stderr);
}

/* ------------------------------------------------------------------------
 * Small file helpers
 * ---------------------------------------------------------------------- */

/* ctl_snapshot_go_errno is Go's text for an errno (syscall.Errno.Error): the C
 * library's message with a lower-case first letter. */
const char *ctl_snapshot_go_errno(int e, char *buf, size_t cap)
{
    if (e == EBADF)
        return "bad file descriptor";
    snprintf(buf, cap, "%s", strerror(e));
    if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
        buf[0] = (char)(buf[0] + 32);
    return buf;
}

/* ctl_snapshot_write_all writes n bytes to fd; 0 or errno. */
int ctl_snapshot_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

void ctl_fsync_dir(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: the data itself was synced */
        close(fd);
    }
}

/* ------------------------------------------------------------------------
 * Copying a bbolt database (offline defrag, restore)
 * ---------------------------------------------------------------------- */

/* The copy's walk state.  With ci >= 0 (restore) the copy also does what
 * etcd's mvcc store does when restore opens the db: makes the key, lease
 * and meta buckets if missing and writes meta/consistent_index. */
struct copy {
    struct bbolt_writer *w; /* the pass's writer */
    int open;               /* buckets open below the root */
    int64_t ci;             /* consistent index to write, or -1 */
    bool in_meta;           /* the open top-level bucket is "meta" */
    bool ci_done;           /* consistent_index written */
    int need;               /* next of the buckets etcd makes to check */
};

static const char *const made_buckets[] = {"key", "lease", "meta"};
#define MADE_BUCKETS 3
static const char ci_key[] = "consistent_index";

static int keycmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

static int put_ci(struct copy *c)
{
    uint8_t be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (uint8_t)((uint64_t)c->ci >> (56 - 8 * i));
    c->ci_done = true;
    return bbolt_writer_put(c->w, ci_key, sizeof ci_key - 1, be, 8);
}

/* close_to closes buckets until depth are open (writing the consistent
 * index at the end of meta if it was not met). */
static int close_to(struct copy *c, int depth)
{
    while (c->open > depth) {
        int rc = 0;
        if (c->open == 1 && c->in_meta && c->ci >= 0 && !c->ci_done)
            rc = put_ci(c);
        if (rc == 0)
            rc = bbolt_writer_bucket_end(c->w);
        if (rc != 0)
            return rc;
        c->open--;
    }
    return 0;
}

/* made_before adds the buckets etcd would make that sort before name
 * (all of them when name is NULL) and are not in the file. */
static int made_before(struct copy *c, const uint8_t *name, size_t len)
{
    for (; c->ci >= 0 && c->need < MADE_BUCKETS; c->need++) {
        const char *m = made_buckets[c->need];
        int cmp = name ? keycmp(m, strlen(m), name, len) : -1;
        if (cmp == 0)
            c->need++;
        if (cmp >= 0)
            return 0;
        int rc = bbolt_writer_bucket_begin(c->w, m, strlen(m));
        c->in_meta = strcmp(m, "meta") == 0;
        c->open = 1;
        if (rc == 0)
            rc = close_to(c, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int copy_entry(void *arg, const struct bbolt_entry *e)
{
    struct copy *c = arg;
    int rc = close_to(c, e->depth);
    if (rc == 0 && e->depth == 0)
        rc = made_before(c, e->key, e->key_len);
    if (rc != 0)
        return rc;
    if (e->is_bucket) {
        if (e->depth == 0)
            c->in_meta = keycmp(e->key, e->key_len, "meta", 4) == 0;
        c->open++;
        return bbolt_writer_bucket_begin(c->w, e->key, e->key_len);
    }
    if (e->depth == 1 && c->in_meta && c->ci >= 0 && !c->ci_done) {
        int cmp = keycmp(e->key, e->key_len, ci_key, sizeof ci_key - 1);
        if (cmp >= 0)
            rc = put_ci(c);
        if (rc != 0 || cmp == 0)
            return rc;
    }
    return bbolt_writer_put(c->w, e->key, e->key_len, e->value,
                            e->value_len);
}

struct sink_fd {
    int fd;  /* the file written */
    int err; /* errno of a failed write */
};

static int sink_write(void *ctx, const void *buf, size_t len)
{
    struct sink_fd *s = ctx;
    s->err = ctl_snapshot_write_all(s->fd, buf, len);
    return s->err ? ERR_IO : 0;
}

/* copy_pass runs one writer pass over the reader (plan NULL: the plan
 * pass); fills *plan_out. */
static int copy_pass(struct bbolt_reader *r, const struct bbolt_plan *plan,
                     struct sink_fd *s, int64_t ci,
                     struct bbolt_plan *plan_out)
{
    struct bbolt_sink sink = {sink_write, s};
    struct copy c = {.ci = ci};
    int rc = bbolt_writer_create(plan, sink, &c.w);
    if (rc == 0)
        rc = bbolt_reader_walk(r, copy_entry, &c);
    if (rc == 0)
        rc = close_to(&c, 0);
    if (rc == 0)
        rc = made_before(&c, NULL, 0);
    if (rc == 0)
        rc = bbolt_writer_finish(c.w, plan_out);
    bbolt_writer_free(c.w);
    return rc;
}

int ctl_bbolt_copy(const char *src, const char *dst, int64_t ci, char *err,
                   size_t cap)
{
    char eb[128];
    struct bbolt_reader *r = NULL;
    int rc = bbolt_reader_open_file(src, &r);
    if (rc != 0) {
        snprintf(err, cap, "%s", rc == ERR_BBOLT_CORRUPT
                                     ? bbolt_reader_error(r)
                                     : err_str(rc));
        bbolt_reader_free(r);
        return rc;
    }
    struct sink_fd s = {.fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC |
                                            O_CLOEXEC, 0600)};
    struct bbolt_plan plan;
    if (s.fd < 0) {
        snprintf(err, cap, "open %s: %s", dst,
                 ctl_snapshot_go_errno(errno, eb, sizeof eb));
        bbolt_reader_free(r);
        return ERR_IO;
    }
    rc = copy_pass(r, NULL, &s, ci, &plan);
    if (rc == 0)
        rc = copy_pass(r, &plan, &s, ci, NULL);
    if (rc == 0 && fsync(s.fd) != 0)
        s.err = errno, rc = ERR_IO;
    if (rc != 0 && s.err)
        snprintf(err, cap, "write %s: %s", dst,
                 ctl_snapshot_go_errno(s.err, eb, sizeof eb));
    else if (rc != 0)
        snprintf(err, cap, "%s: %s", src, err_str(rc));
    close(s.fd);
    bbolt_reader_free(r);
    return rc;
}
