/*
 * log.h - leveled logging in etcd 3.4's two formats: capnslog's text lines
 * (the default, as in etcd 3.4) or zap's JSON lines (--logger=zap).
 *
 * Two kinds of call:
 *   - log_info()/log_warn()/... (and log_msg()) take a printf format.  Under
 *     capnslog they print "<date> <L> | <module>: <text>"; under zap they
 *     print {"level":..,"ts":..,"caller":"<dir>/<file>.c:<line>","msg":
 *     "<text>"}, which is what etcd's own printf-style lines (raft's)
 *     look like under zap.
 *   - log_zap() writes one structured zap line with fields, and nothing
 *     under capnslog.  Events that etcd logs differently in its two
 *     loggers (etcd: `if lg != nil { lg.Info(..) } else { plog.Infof(..) }`)
 *     are written the same way here: `if (log_is_zap()) log_zap(..); else
 *     log_info(..);`, so that log-based alerts written for etcd's zap
 *     messages ("became leader", "published local member to cluster
 *     through raft", ...) keep working.
 *
 * Threads: log_open()/log_close() are called by main() only, before and
 * after the other threads run.  Every other function is thread-safe.
 * Before log_open() (and in programs that never call it: tools, unit
 * tests) lines are written to stderr synchronously in capnslog format.
 *
 * Never blocking a caller: after log_open(), a line is formatted on the
 * caller's stack (LOG_LINE_MAX bytes, longer lines are cut) and copied
 * into a bounded ring (LOG_RING_BYTES) that one writer thread drains to
 * the outputs.  When the outputs are slower than the callers and the ring
 * is full, the line is dropped and counted, and the writer reports the
 * count ("dropped N log lines") once it catches up: the raft and apply
 * threads never wait on a pipe, a terminal or a slow disk, and the log
 * never holds more than the ring.
 *
 * Secrets: no caller passes a password, token or key material (the auth
 * code logs nothing); tests/integration/test_logging.py checks both
 * formats after auth traffic.
 */
#ifndef CETCD_UTIL_LOG_H
#define CETCD_UTIL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* LOG_NOTICE is capnslog's "N" level (etcd 3.4 logs a few events so,
 * e.g. auto-compaction); it passes an "info" filter and is "info" in zap. */
enum log_level {
    LOG_DEBUG,
    LOG_INFO,
    LOG_NOTICE,
    LOG_WARN,
    LOG_ERROR,
    LOG_FATAL
};

/* One formatted line at most (longer ones are cut, JSON kept valid). */
#define LOG_LINE_MAX 4096
/* The ring between callers and the writer thread. */
#define LOG_RING_BYTES (256 * 1024)
/* At most this many --log-outputs. */
#define LOG_OUTPUTS_MAX 8

void log_set_level(enum log_level level);
/* log_set_stdout: capnslog lines go to stdout (true) or stderr (false,
 * the default); called once at start-up, before log_open(). */
void log_set_stdout(bool on);
/* log_set_zap_epoch_time: zap lines carry "ts" as epoch seconds, a number
 * (zap.NewProduction's encoder, which etcd's gateway logs with), instead
 * of the ISO8601 string of etcd's server logger; before log_open(). */
void log_set_zap_epoch_time(bool on);
/* log_level_parse maps "debug"/"info"/"warn"/"error"/"dpanic"/"panic"/
 * "fatal"; -1 if unknown. */
int log_level_parse(const char *s);

/* log_open switches to the writer thread and, with zap, to JSON lines
 * written to each of outputs[0..n) ("stderr", "stdout", "systemd/journal"
 * or a file path opened for appending, created 0666 & ~umask as zap
 * does).  "default" must have been mapped to "stderr" by the caller.
 * Returns 0, or ERR_LOG_OUTPUT with etcd's reason in why (`open sink
 * "<path>": open <path>: <errno text>`, `can't find journal (...)`);
 * nothing changes then.  The journal socket is
 * /run/systemd/journal/socket, or $CETCD_JOURNAL_SOCKET (tests). */
int log_open(bool zap, const char *const *outputs, size_t n, char *why,
             size_t why_cap);
/* log_close drains the ring, stops the writer and closes the files; lines
 * logged afterwards are written synchronously.  Also run at exit. */
void log_close(void);
/* log_is_zap: true after log_open(zap = true). */
bool log_is_zap(void);

void log_msg_at(enum log_level level, const char *module, const char *file,
                int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define log_msg(l, m, ...) log_msg_at(l, m, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(m, ...) log_msg(LOG_DEBUG, m, __VA_ARGS__)
#define log_info(m, ...) log_msg(LOG_INFO, m, __VA_ARGS__)
#define log_notice(m, ...) log_msg(LOG_NOTICE, m, __VA_ARGS__)
#define log_warn(m, ...) log_msg(LOG_WARN, m, __VA_ARGS__)
#define log_error(m, ...) log_msg(LOG_ERROR, m, __VA_ARGS__)

/* One field of a zap line.  Build them with the LOG_* macros below; the
 * strings are borrowed for the duration of the call. */
enum log_kind {
    LOG_K_STR,  /* "k":"s" */
    LOG_K_INT,  /* "k":i */
    LOG_K_UINT, /* "k":u */
    LOG_K_BOOL, /* "k":true */
    LOG_K_ID,   /* "k":"<u in hex, no padding>" (etcd's types.ID) */
    LOG_K_DUR,  /* "k":"<i ns as a Go duration>" ("1.5s", "900ms") */
    LOG_K_CSV,  /* "k":["a","b"] from s = "a,b" ("" gives []) */
    LOG_K_SIZE, /* "k":"<u bytes as humanize.Bytes>" ("2.1 GB") */
    LOG_K_SECS  /* "k":<i ns as seconds, a number> (zap.NewProduction's
                   durations: 2, 0.1) */
};

struct log_field {
    const char *key; /* field name, etcd's spelling */
    enum log_kind kind;
    const char *s; /* LOG_K_STR, LOG_K_CSV */
    int64_t i;     /* LOG_K_INT, LOG_K_DUR (nanoseconds), LOG_K_BOOL */
    uint64_t u;    /* LOG_K_UINT, LOG_K_ID, LOG_K_SIZE */
};

#define LOG_STR(k, v) ((struct log_field){.key = (k), .kind = LOG_K_STR, .s = (v)})
#define LOG_INT(k, v) ((struct log_field){.key = (k), .kind = LOG_K_INT, .i = (int64_t)(v)})
#define LOG_UINT(k, v) ((struct log_field){.key = (k), .kind = LOG_K_UINT, .u = (uint64_t)(v)})
#define LOG_BOOL(k, v) ((struct log_field){.key = (k), .kind = LOG_K_BOOL, .i = (v) ? 1 : 0})
#define LOG_ID(k, v) ((struct log_field){.key = (k), .kind = LOG_K_ID, .u = (uint64_t)(v)})
#define LOG_DUR_NS(k, v) ((struct log_field){.key = (k), .kind = LOG_K_DUR, .i = (int64_t)(v)})
#define LOG_DUR_MS(k, v) LOG_DUR_NS(k, (int64_t)(v) * 1000000)
#define LOG_CSV(k, v) ((struct log_field){.key = (k), .kind = LOG_K_CSV, .s = (v)})
#define LOG_SECS_MS(k, v) ((struct log_field){.key = (k), .kind = LOG_K_SECS, .i = (int64_t)(v) * 1000000})
#define LOG_SIZE(k, v) ((struct log_field){.key = (k), .kind = LOG_K_SIZE, .u = (uint64_t)(v)})

void log_zap_at(enum log_level level, const char *file, int line,
                const char *msg, const struct log_field *fields, size_t n);

/* log_zap(level, msg, fields...): at least one field, as zap's call sites
 * carry them; use log_zap_at(.., NULL, 0) for none. */
#define log_zap(l, msg, ...)                                                 \
    do {                                                                     \
        const struct log_field log_f_[] = {__VA_ARGS__};                     \
        log_zap_at(l, __FILE__, __LINE__, msg, log_f_,                       \
                   sizeof log_f_ / sizeof log_f_[0]);                        \
    } while (0)

/* log_format_zap: the bytes of one zap line as log_zap_at writes it
 * (exposed for the unit test); returns its length, always < cap, ending
 * in '\n', valid JSON even when cut (the message or a string field is cut,
 * later fields are left out).  0 if cap < 512. */
size_t log_format_zap(char *buf, size_t cap, enum log_level level,
                      const char *file, int line, const char *msg,
                      const struct log_field *fields, size_t n);

/* log_go_duration formats ns as Go's time.Duration.String(). */
void log_go_duration(int64_t ns, char *buf, size_t cap);

#endif
