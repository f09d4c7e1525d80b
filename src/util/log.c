/*
 * log.c - capnslog text lines or zap JSON lines, handed to one writer
 * thread through a bounded ring so that no caller blocks on an output
 * (see log.h for the contract).
 */
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"
#include "util/err.h"
#include "util/thread.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

/* One output: a file descriptor, or the journald socket. */
struct output {
    int fd;       /* where lines go; the datagram socket for the journal */
    bool owned;   /* opened by log_open (a file or the journal socket) */
    bool journal; /* send each line as a journald native datagram */
    struct sockaddr_un addr; /* the journal socket's address */
};

/* The logger's state.  The settings are written by main() before other
 * threads run (log_set_*, log_open) and only read afterwards; the ring
 * fields are guarded by mu. */
static struct {
    enum log_level min_level; /* lines below it are skipped */
    bool to_stdout;           /* capnslog: stdout instead of stderr */
    bool zap;                 /* JSON lines */
    bool zap_epoch;           /* their "ts" in epoch seconds, not ISO8601 */
    struct output out[LOG_OUTPUTS_MAX]; /* after log_open */
    size_t n_out;                       /* 0: synchronous, stderr/stdout */
    pthread_mutex_t mu;
    pthread_cond_t more;   /* the writer waits for bytes (or stop) */
    pthread_cond_t idle;   /* log_close waits for the writer to finish */
    char ring[LOG_RING_BYTES]; /* whole lines, FIFO */
    size_t head, used;         /* ring[head..head+used) modulo size */
    uint64_t dropped;          /* lines dropped on a full ring */
    bool running, stop, done;  /* writer thread state */
    pthread_t writer;
} L = {.min_level = LOG_INFO,
       .mu = PTHREAD_MUTEX_INITIALIZER,
       .more = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER};

void log_set_stdout(bool on)
{
    L.to_stdout = on;
}

void log_set_zap_epoch_time(bool on)
{
    L.zap_epoch = on;
}

void log_set_level(enum log_level level)
{
    L.min_level = level;
}

bool log_is_zap(void)
{
    return L.zap;
}

int log_level_parse(const char *s)
{
    static const struct {
        const char *name;
        enum log_level level;
    } names[] = {{"debug", LOG_DEBUG},  {"info", LOG_INFO},
                 {"warn", LOG_WARN},    {"error", LOG_ERROR},
                 {"dpanic", LOG_FATAL}, {"panic", LOG_FATAL},
                 {"fatal", LOG_FATAL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0)
            return (int)names[i].level;
    return -1;
}

/* ---- writing to the outputs (writer thread, or the caller before
 * log_open) ---- */

static void write_fd(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a closed pipe or full disk loses the line */
        p += w;
        n -= (size_t)w;
    }
}

/* journald's syslog priority for a zap line (it starts {"level":"x"). */
static int journal_priority(const char *line)
{
    static const struct {
        const char *name;
        int pri;
    } pri[] = {{"debug", 7}, {"info", 6},  {"warn", 4},
               {"error", 3}, {"fatal", 2}, {"panic", 2}};
    const char *lv = line + strlen("{\"level\":\"");
    for (size_t i = 0; i < sizeof pri / sizeof pri[0]; i++)
        if (strncmp(lv, pri[i].name, strlen(pri[i].name)) == 0)
            return pri[i].pri;
    return 6;
}

/* One line (without its '\n') as a journald native-protocol datagram:
 * MESSAGE, PRIORITY, PACKAGE (the caller's directory, as etcd sends) and
 * SYSLOG_IDENTIFIER.  A failed send writes the line to stderr, as etcd's
 * journal writer falls back. */
static void write_journal(const struct output *o, const char *line, size_t n)
{
    char dgram[LOG_LINE_MAX + 256];
    const char *c = strstr(line, "\"caller\":\"");
    size_t pkg = 0;
    if (c != NULL && c < line + n) {
        c += strlen("\"caller\":\"");
        const char *slash = memchr(c, '/', (size_t)(line + n - c));
        pkg = slash != NULL ? (size_t)(slash - c) : 0;
    }
    int len = snprintf(dgram, sizeof dgram,
                       "MESSAGE=%.*s\nPRIORITY=%d\nPACKAGE=%.*s\n"
                       "SYSLOG_IDENTIFIER=cetcd\n",
                       (int)n, line, journal_priority(line), (int)pkg,
                       c != NULL ? c : "");
    if (len > 0 && (size_t)len < sizeof dgram &&
        sendto(o->fd, dgram, (size_t)len, MSG_NOSIGNAL,
               (const struct sockaddr *)&o->addr, sizeof o->addr) == len)
        return;
    write_fd(2, line, n);
    write_fd(2, "\n", 1);
}

/* Whole lines p[0..n) to every output. */
static void write_outputs(const char *p, size_t n)
{
    if (L.n_out == 0) {
        write_fd(L.to_stdout ? 1 : 2, p, n);
        return;
    }
    for (size_t i = 0; i < L.n_out; i++) {
        if (!L.out[i].journal) {
            write_fd(L.out[i].fd, p, n);
            continue;
        }
        for (size_t at = 0; at < n;) {
            const char *nl = memchr(p + at, '\n', n - at);
            size_t len = nl != NULL ? (size_t)(nl - (p + at)) : n - at;
            write_journal(&L.out[i], p + at, len);
            at += len + 1;
        }
    }
}

/* ---- the ring ---- */

static void ring_put(const char *p, size_t n)
{
    CHECK(n > 0 && n <= LOG_RING_BYTES - L.used);
    CHECK(p[n - 1] == '\n'); /* whole lines only: ring_take cuts at '\n' */
    size_t tail = (L.head + L.used) % LOG_RING_BYTES;
    size_t first = LOG_RING_BYTES - tail < n ? LOG_RING_BYTES - tail : n;
    memcpy(L.ring + tail, p, first);
    memcpy(L.ring, p + first, n - first);
    L.used += n;
}

/* Takes up to cap bytes of whole lines out of the ring (mu held). */
static size_t ring_take(char *buf, size_t cap)
{
    size_t n = L.used < cap ? L.used : cap;
    for (size_t i = 0; i < n; i++)
        buf[i] = L.ring[(L.head + i) % LOG_RING_BYTES];
    while (n > 0 && buf[n - 1] != '\n') /* keep a cut line for later */
        n--;
    CHECK(n > 0 || L.used == 0); /* a line is < LOG_LINE_MAX < cap */
    L.head = (L.head + n) % LOG_RING_BYTES;
    L.used -= n;
    return n;
}

static size_t format_dropped(char *buf, size_t cap, uint64_t dropped);

static void *writer_main(void *arg)
{
    (void)arg;
    static char chunk[64 * 1024]; /* only this thread uses it */
    pthread_mutex_lock(&L.mu);
    for (;;) {
        while (L.used == 0 && L.dropped == 0 && !L.stop)
            pthread_cond_wait(&L.more, &L.mu);
        if (L.used == 0 && L.dropped == 0 && L.stop)
            break;
        size_t n = ring_take(chunk, sizeof chunk);
        uint64_t dropped = L.dropped;
        L.dropped = 0;
        pthread_mutex_unlock(&L.mu);
        write_outputs(chunk, n);
        if (dropped > 0) {
            char note[LOG_LINE_MAX];
            write_outputs(note, format_dropped(note, sizeof note, dropped));
        }
        pthread_mutex_lock(&L.mu);
    }
    L.done = true;
    pthread_cond_broadcast(&L.idle);
    pthread_mutex_unlock(&L.mu);
    return NULL;
}

/* A finished line to the ring (or, with no writer, to the output now). */
static void emit(const char *line, size_t n)
{
    pthread_mutex_lock(&L.mu);
    if (!L.running) {
        write_outputs(line, n); /* under mu: lines do not interleave */
    } else if (LOG_RING_BYTES - L.used >= n) {
        ring_put(line, n);
        pthread_cond_signal(&L.more);
    } else {
        L.dropped++;
        pthread_cond_signal(&L.more);
    }
    pthread_mutex_unlock(&L.mu);
}

/* ---- zap JSON ---- */

/* A bounded JSON writer: `end` keeps room for the closing bytes, so a cut
 * line still parses. */
struct jw {
    char *b;    /* the line */
    size_t end; /* usable bytes before the reserved tail */
    size_t len; /* bytes written */
    bool full;  /* something did not fit: stop adding */
};

static bool jw_raw(struct jw *w, const char *s, size_t n)
{
    if (w->full || w->len + n > w->end) {
        w->full = true;
        return false;
    }
    memcpy(w->b + w->len, s, n);
    w->len += n;
    return true;
}

/* Closing bytes go into the reserved tail. */
static void jw_close(struct jw *w, const char *s)
{
    size_t n = strlen(s);
    memcpy(w->b + w->len, s, n);
    w->len += n;
}

/* Length of the valid UTF-8 sequence at s (0: invalid). */
static size_t utf8_len(const unsigned char *s, size_t left)
{
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
               : s[0] >= 0xe0                 ? 3
               : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                                              : 0;
    if (n == 0 || n > left)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* The body of a JSON string (no quotes), escaped as zap does: quote,
 * backslash, \n \r \t, other control bytes as \u00XX, invalid UTF-8 as
 * \ufffd; the string may be cut. */
static void jw_chars(struct jw *w, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0 && !w->full) {
        char esc[8];
        size_t n = 1;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            jw_raw(w, esc, 2);
        } else if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\', esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            jw_raw(w, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            jw_raw(w, esc, 6);
        } else if (*p < 0x80) {
            jw_raw(w, (const char *)p, 1);
        } else if ((n = utf8_len(p, left)) > 0) {
            jw_raw(w, (const char *)p, n);
        } else {
            n = 1;
            jw_raw(w, "\\ufffd", 6);
        }
        p += n;
        left -= n;
    }
}

static void jw_string(struct jw *w, const char *s)
{
    if (!jw_raw(w, "\"", 1))
        return;
    jw_chars(w, s);
    jw_close(w, "\"");
}

/* The longest scalar value a field writes (a quoted Go duration, a
 * number): a key is written only with room for it after. */
#define SCALAR_MAX 32

/* ,"key": atomically (a key is never cut, nor left without a value). */
static bool jw_key(struct jw *w, const char *key)
{
    char k[160];
    int n = snprintf(k, sizeof k, ",\"%s\":", key);
    if (n <= 0 || (size_t)n >= sizeof k || w->full ||
        w->len + (size_t)n + SCALAR_MAX > w->end) {
        w->full = true;
        return false;
    }
    return jw_raw(w, k, (size_t)n);
}

static void jw_csv(struct jw *w, const char *s)
{
    if (!jw_raw(w, "[", 1))
        return;
    for (const char *p = s; *p != '\0' && !w->full;) {
        size_t len = strcspn(p, ",");
        char item[1024];
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        if (p != s && !jw_raw(w, ",", 1))
            break;
        jw_string(w, item);
        p += len;
        if (*p == ',')
            p++;
    }
    jw_close(w, "]");
}

void log_go_duration(int64_t ns, char *buf, size_t cap)
{
    const char *sign = ns < 0 ? "-" : "";
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    char frac[16] = "";
    if (u == 0) {
        snprintf(buf, cap, "0s");
        return;
    }
    if (u < 1000) {
        snprintf(buf, cap, "%s%lluns", sign, (unsigned long long)u);
        return;
    }
    /* below 1s: µs or ms with up to 3 or 6 fraction digits; else h/m/s
     * with up to 9 fraction digits, trailing zeros trimmed as Go does */
    uint64_t unit = u < 1000000 ? 1000 : u < 1000000000 ? 1000000 : 1000000000;
    int digits = unit == 1000 ? 3 : unit == 1000000 ? 6 : 9;
    uint64_t whole = u / unit, rest = u % unit;
    if (rest != 0) {
        snprintf(frac, sizeof frac, ".%0*llu", digits, (unsigned long long)rest);
        size_t k = strlen(frac); /* ".", then a nonzero digit somewhere */
        while (k > 1 && frac[k - 1] == '0')
            frac[--k] = '\0';
    }
    if (unit == 1000) {
        snprintf(buf, cap, "%s%llu%s\xc2\xb5s", sign,
                 (unsigned long long)whole, frac);
    } else if (unit == 1000000) {
        snprintf(buf, cap, "%s%llu%sms", sign, (unsigned long long)whole, frac);
    } else if (whole < 60) {
        snprintf(buf, cap, "%s%llu%ss", sign, (unsigned long long)whole, frac);
    } else if (whole < 3600) {
        snprintf(buf, cap, "%s%llum%llu%ss", sign,
                 (unsigned long long)(whole / 60),
                 (unsigned long long)(whole % 60), frac);
    } else {
        snprintf(buf, cap, "%s%lluh%llum%llu%ss", sign,
                 (unsigned long long)(whole / 3600),
                 (unsigned long long)(whole / 60 % 60),
                 (unsigned long long)(whole % 60), frac);
    }
}

/* go-humanize's Bytes: SI units, one decimal below 10 ("2.1 GB"). */
static void human_bytes(uint64_t b, char *buf, size_t cap)
{
    static const char *unit[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    if (b < 10) {
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
        return;
    }
    double v = (double)b;
    int e = 0;
    while (v >= 1000 && e < 6) {
        v /= 1000;
        e++;
    }
    v = (double)(long long)(v * 10 + 0.5) / 10;
    snprintf(buf, cap, v < 10 ? "%.1f %s" : "%.0f %s", v, unit[e]);
}

static void jw_field(struct jw *w, const struct log_field *f)
{
    char num[64];
    if (!jw_key(w, f->key))
        return;
    switch (f->kind) {
    case LOG_K_STR:
        jw_string(w, f->s != NULL ? f->s : "");
        return;
    case LOG_K_CSV:
        jw_csv(w, f->s != NULL ? f->s : "");
        return;
    case LOG_K_INT:
        snprintf(num, sizeof num, "%lld", (long long)f->i);
        break;
    case LOG_K_UINT:
        snprintf(num, sizeof num, "%llu", (unsigned long long)f->u);
        break;
    case LOG_K_BOOL:
        snprintf(num, sizeof num, "%s", f->i ? "true" : "false");
        break;
    case LOG_K_ID:
        snprintf(num, sizeof num, "\"%llx\"", (unsigned long long)f->u);
        break;
    case LOG_K_DUR:
        num[0] = '"';
        log_go_duration(f->i, num + 1, sizeof num - 2);
        strcat(num, "\"");
        break;
    case LOG_K_SECS:
        snprintf(num, sizeof num, "%.9g", (double)f->i / 1e9);
        break;
    case LOG_K_SIZE:
        num[0] = '"';
        human_bytes(f->u, num + 1, sizeof num - 2);
        strcat(num, "\"");
        break;
    }
    jw_raw(w, num, strlen(num));
}

/* zap's ISO8601 time: local time, milliseconds, Go's "Z0700" zone. */
static void zap_time(char *buf, size_t cap)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    long off = tm.tm_gmtoff / 60;
    char zone[24] = "Z";
    if (off != 0)
        snprintf(zone, sizeof zone, "%c%02ld%02ld", off < 0 ? '-' : '+',
                 labs(off) / 60, labs(off) % 60);
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ld%.8s",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (long)tv.tv_usec / 1000, zone);
}

/* zap's short caller: the last directory and the file, ":line". */
static void short_caller(const char *file, int line, char *buf, size_t cap)
{
    const char *base = strrchr(file, '/');
    const char *dir = file;
    if (base != NULL) {
        for (const char *p = base - 1; p >= file && *p != '/'; p--)
            dir = p;
    }
    snprintf(buf, cap, "%s:%d", dir, line);
}

size_t log_format_zap(char *buf, size_t cap, enum log_level level,
                      const char *file, int line, const char *msg,
                      const struct log_field *fields, size_t n)
{
    static const char *names[] = {"debug", "info",  "info",
                                  "warn",  "error", "fatal"};
    if (cap < 512)
        return 0;
    char ts[96], caller[200];
    if (L.zap_epoch) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(ts, sizeof ts, "%lld.%07ld", (long long)now.tv_sec,
                 now.tv_nsec / 100);
    } else {
        ts[0] = '"';
        zap_time(ts + 1, sizeof ts - 2);
        strcat(ts, "\"");
    }
    short_caller(file, line, caller, sizeof caller);
    struct jw w = {.b = buf, .end = cap - 8};
    /* The head always fits (cap >= 512): level, ts, caller. */
    int n0 = snprintf(buf, cap, "{\"level\":\"%s\",\"ts\":%s,\"caller\":",
                      names[level], ts);
    w.len = n0 > 0 ? (size_t)n0 : 0;
    jw_string(&w, caller);
    jw_raw(&w, ",\"msg\":", 7);
    jw_string(&w, msg);
    for (size_t i = 0; i < n && !w.full; i++)
        jw_field(&w, &fields[i]);
    jw_close(&w, "}\n");
    CHECK(w.len < cap && buf[w.len - 1] == '\n');
    return w.len;
}

static size_t format_capnslog(char *line, size_t cap, enum log_level level,
                              const char *module, const char *text)
{
    static const char tag[] = "DINWEC"; /* capnslog: C = critical */
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, cap, "%04d-%02d-%02d %02d:%02d:%02d.%06ld %c | "
                     "%s: %s", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec,
                     tag[level], module, text);
    if (n < 0)
        return 0;
    if ((size_t)n >= cap - 1)
        n = (int)cap - 2;
    line[n++] = '\n';
    return (size_t)n;
}

static size_t format_dropped(char *buf, size_t cap, uint64_t dropped)
{
    char text[96];
    snprintf(text, sizeof text, "dropped %llu log lines: the log outputs "
             "are slower than the server", (unsigned long long)dropped);
    if (L.zap)
        return log_format_zap(buf, cap, LOG_WARN, __FILE__, __LINE__, text,
                              NULL, 0);
    return format_capnslog(buf, cap, LOG_WARN, "log", text);
}

void log_msg_at(enum log_level level, const char *module, const char *file,
                int line, const char *fmt, ...)
{
    if (level < L.min_level)
        return;
    char text[LOG_LINE_MAX], out[LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = L.zap ? log_format_zap(out, sizeof out, level, file, line,
                                      text, NULL, 0)
                     : format_capnslog(out, sizeof out, level, module, text);
    if (n > 0)
        emit(out, n);
}

void log_zap_at(enum log_level level, const char *file, int line,
                const char *msg, const struct log_field *fields, size_t n)
{
    if (!L.zap || level < L.min_level)
        return;
    char out[LOG_LINE_MAX];
    size_t len = log_format_zap(out, sizeof out, level, file, line, msg,
                                fields, n);
    if (len > 0)
        emit(out, len);
}

/* ---- opening and closing ---- */

/* Go's error texts are strerror's, starting lower case. */
static void go_errno_text(int e, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", strerror(e));
    if (buf[0] >= 'A' && buf[0] <= 'Z')
        buf[0] = (char)(buf[0] - 'A' + 'a');
}

static int open_journal(struct output *o, char *why, size_t why_cap)
{
    const char *path = getenv("CETCD_JOURNAL_SOCKET");
    if (path == NULL || *path == '\0')
        path = JOURNAL_SOCKET;
    o->journal = true;
    o->owned = true;
    o->addr.sun_family = AF_UNIX;
    snprintf(o->addr.sun_path, sizeof o->addr.sun_path, "%s", path);
    o->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    /* etcd dials the socket once to see that journald is there */
    if (o->fd >= 0 && connect(o->fd, (const struct sockaddr *)&o->addr,
                              sizeof o->addr) == 0)
        return 0;
    char e[128];
    go_errno_text(errno, e, sizeof e);
    if (o->fd >= 0)
        close(o->fd);
    snprintf(why, why_cap, "can't find journal (dial unixgram %s: connect: "
             "%s)", path, e);
    return ERR_LOG_OUTPUT;
}

static int open_output(struct output *o, const char *name, char *why,
                       size_t why_cap)
{
    memset(o, 0, sizeof *o);
    if (strcmp(name, "stderr") == 0 || strcmp(name, "stdout") == 0) {
        o->fd = name[3] == 'e' ? 2 : 1;
        return 0;
    }
    if (strcmp(name, "systemd/journal") == 0)
        return open_journal(o, why, why_cap);
    o->fd = open(name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (o->fd >= 0) {
        o->owned = true;
        return 0;
    }
    char e[128];
    go_errno_text(errno, e, sizeof e);
    snprintf(why, why_cap, "open sink \"%s\": open %s: %s", name, name, e);
    return ERR_LOG_OUTPUT;
}

static void close_outputs(struct output *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (out[i].owned)
            close(out[i].fd);
}

int log_open(bool zap, const char *const *outputs, size_t n, char *why,
             size_t why_cap)
{
    struct output out[LOG_OUTPUTS_MAX];
    if (n == 0 || n > LOG_OUTPUTS_MAX) {
        snprintf(why, why_cap, "%zu log outputs (1 to %d)", n, LOG_OUTPUTS_MAX);
        return ERR_LOG_OUTPUT;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = open_output(&out[i], outputs[i], why, why_cap);
        if (rc != 0) {
            close_outputs(out, i);
            return rc;
        }
    }
    pthread_mutex_lock(&L.mu);
    memcpy(L.out, out, sizeof out[0] * n);
    L.n_out = n;
    L.zap = zap;
    L.stop = L.done = false;
    L.running = pthread_create(&L.writer, NULL, writer_main, NULL) == 0;
    pthread_mutex_unlock(&L.mu);
    if (L.running) {
        thread_name_set(L.writer, "log");
        atexit(log_close);
    }
    return 0;
}

void log_close(void)
{
    pthread_mutex_lock(&L.mu);
    if (!L.running) {
        pthread_mutex_unlock(&L.mu);
        return;
    }
    L.stop = true;
    pthread_cond_signal(&L.more);
    /* An output stuck for 5 s (a pipe nobody reads) must not hold the
     * exit: the writer is then left to the process's end. */
    struct timespec until = thread_deadline_ms(CLOCK_REALTIME, 5000);
    while (!L.done)
        if (pthread_cond_timedwait(&L.idle, &L.mu, &until) != 0)
            break;
    bool done = L.done;
    L.running = false;
    pthread_mutex_unlock(&L.mu);
    if (!done)
        return;
    pthread_join(L.writer, NULL);
    /* Under mu: a late line (another thread, at exit) writes through
     * L.out synchronously; after this it goes to stderr or stdout. */
    pthread_mutex_lock(&L.mu);
    close_outputs(L.out, L.n_out);
    L.n_out = 0;
    pthread_mutex_unlock(&L.mu);
}
