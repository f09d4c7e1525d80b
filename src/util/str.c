/* str.c - see str.h. */
#include "util/str.h"

#include <stdarg.h>
#include <stdio.h>

#include <assert.h>
#include <ctype.h>
#include <string.h>

void str_trim(const char **b, const char **e)
{
    assert(b != NULL && e != NULL && *b <= *e);
    while (*b < *e && isspace((unsigned char)**b))
        (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

void str_trim_inplace(char *s)
{
    assert(s != NULL);
    const char *b = s, *e = s + strlen(s);
    str_trim(&b, &e);
    memmove(s, b, (size_t)(e - b));
    s[e - b] = '\0';
}

/* Appends to buf[n..cap) as snprintf, never past cap; returns the new
 * length (at most cap - 1). */
static size_t app(char *buf, size_t cap, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t app(char *buf, size_t cap, size_t n, const char *fmt, ...)
{
    if (n + 1 >= cap)
        return n;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
    if (k < 0)
        return n;
    n += (size_t)k;
    return n < cap ? n : cap - 1;
}

/* Appends v / unit with its fraction, trailing zeros dropped. */
static size_t frac(char *buf, size_t cap, size_t n, unsigned long long v,
                   unsigned long long unit)
{
    n = app(buf, cap, n, "%llu", v / unit);
    unsigned long long f = v % unit;
    if (f == 0)
        return n;
    int digits = 0;
    for (unsigned long long u = unit; u > 1; u /= 10)
        digits++;
    while (f % 10 == 0) {
        f /= 10;
        digits--;
    }
    return app(buf, cap, n, ".%0*llu", digits, f);
}

char *str_go_duration(char *buf, size_t cap, unsigned long long ns)
{
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    size_t n = 0;
    if (ns == 0) {
        app(buf, cap, 0, "0s");
    } else if (ns < 1000) {
        app(buf, cap, 0, "%lluns", ns);
    } else if (ns < 1000000) {
        app(buf, cap, frac(buf, cap, 0, ns, 1000), "\xc2\xb5s");
    } else if (ns < 1000000000) {
        app(buf, cap, frac(buf, cap, 0, ns, 1000000), "ms");
    } else {
        unsigned long long h = ns / 3600000000000ull;
        unsigned long long m = ns / 60000000000ull % 60;
        if (h > 0)
            n = app(buf, cap, n, "%lluh", h);
        if (h > 0 || m > 0)
            n = app(buf, cap, n, "%llum", m);
        n = frac(buf, cap, n, ns % 60000000000ull, 1000000000);
        app(buf, cap, n, "s");
    }
    return buf;
}
