/* log.c - stderr (or stdout) logger with a timestamp, level and module per line. */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static enum log_level min_level = LOG_INFO;
static bool to_stdout; /* set once at start-up */

void log_set_stdout(bool on)
{
    to_stdout = on;
}

void log_set_level(enum log_level level)
{
    min_level = level;
}

int log_level_parse(const char *s)
{
    static const struct {
        const char *name;
        enum log_level level;
    } names[] = {{"debug", LOG_DEBUG}, {"info", LOG_INFO},
                 {"warn", LOG_WARN},   {"error", LOG_ERROR},
                 {"panic", LOG_FATAL}, {"fatal", LOG_FATAL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0)
            return (int)names[i].level;
    return -1;
}

void log_msg(enum log_level level, const char *module, const char *fmt, ...)
{
    static const char tag[] = "DINWEF";
    if (level < min_level)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char line[2048];
    int n = snprintf(line, sizeof line,
                     "%04d-%02d-%02d %02d:%02d:%02d.%06ld %c | %s: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, (long)tv.tv_usec, tag[level], module);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = sizeof line - 2;
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, to_stdout ? stdout : stderr);
    if (to_stdout)
        fflush(stdout); /* a pipe or file would hold lines otherwise */
}
