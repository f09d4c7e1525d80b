/*
 * log.h - leveled logging to stderr (or stdout), shaped like etcd's capnslog/zap lines.
 *
 * log_set_level() is called once at start-up; log_*() are thread-safe.  The
 * raft module does not use this (it logs through a callback, see raft.h).
 */
#ifndef CETCD_UTIL_LOG_H
#define CETCD_UTIL_LOG_H

#include <stdbool.h>

/* LOG_NOTICE is capnslog's "N" level (etcd 3.4 logs a few events so,
 * e.g. auto-compaction); it passes an "info" filter. */
enum log_level {
    LOG_DEBUG,
    LOG_INFO,
    LOG_NOTICE,
    LOG_WARN,
    LOG_ERROR,
    LOG_FATAL
};

void log_set_level(enum log_level level);
/* log_set_stdout: lines go to stdout (true) or stderr (false, the
 * default); called once at start-up (--log-outputs). */
void log_set_stdout(bool on);
/* log_level_parse maps "debug"/"info"/"warn"/"error"/"panic"/"fatal"; -1 if
 * unknown. */
int log_level_parse(const char *s);
void log_msg(enum log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(m, ...) log_msg(LOG_DEBUG, m, __VA_ARGS__)
#define log_info(m, ...) log_msg(LOG_INFO, m, __VA_ARGS__)
#define log_notice(m, ...) log_msg(LOG_NOTICE, m, __VA_ARGS__)
#define log_warn(m, ...) log_msg(LOG_WARN, m, __VA_ARGS__)
#define log_error(m, ...) log_msg(LOG_ERROR, m, __VA_ARGS__)

#endif
