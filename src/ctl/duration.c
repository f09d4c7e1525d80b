/*
 * duration.c - Go's time.Duration text: ParseDuration for the duration
 * flags and String for what etcdctl prints of one ("1.5s", "2m0s").
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl/ctl.h"

static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"ns", 1ULL},         {"us", 1000ULL},         {"\xc2\xb5s", 1000ULL},
    {"\xce\xbcs", 1000ULL}, {"ms", 1000000ULL},    {"s", 1000000000ULL},
    {"m", 60000000000ULL}, {"h", 3600000000000ULL},
};

int ctl_duration_parse(const char *s, int64_t *ns_out, char *err,
                       size_t cap)
{
    const char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (strcmp(p, "0") == 0) {
        *ns_out = 0;
        return 0;
    }
    if (*p == '\0')
        goto invalid;
    uint64_t total = 0;
    while (*p) {
        if (!(isdigit((unsigned char)*p) || *p == '.'))
            goto invalid;
        uint64_t whole = 0, frac = 0, scale = 1;
        bool digits = false, overflow = false;
        for (; isdigit((unsigned char)*p); p++) {
            digits = true;
            if (whole > (UINT64_C(1) << 63) / 10)
                overflow = true;
            whole = whole * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
            for (p++; isdigit((unsigned char)*p); p++) {
                digits = true;
                if (scale < UINT64_C(1000000000000000000)) {
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    scale *= 10;
                }
            }
        }
        if (!digits || overflow)
            goto invalid;
        const char *u = p;
        while (*p && !isdigit((unsigned char)*p) && *p != '.')
            p++;
        if (u == p) {
            snprintf(err, cap, "time: missing unit in duration \"%s\"", s);
            return -1;
        }
        size_t ul = (size_t)(p - u);
        uint64_t unit = 0;
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
            if (strlen(units[k].name) == ul &&
                memcmp(units[k].name, u, ul) == 0)
                unit = units[k].ns;
        if (unit == 0) {
            snprintf(err, cap, "time: unknown unit \"%.*s\" in duration "
                               "\"%s\"", (int)ul, u, s);
            return -1;
        }
        if (whole > (UINT64_C(1) << 63) / unit)
            goto invalid;
        uint64_t v = whole * unit;
        v += (uint64_t)((double)frac * ((double)unit / (double)scale));
        total += v;
        if (total > (UINT64_C(1) << 63))
            goto invalid;
    }
    if (!neg && total > (uint64_t)INT64_MAX)
        goto invalid;
    *ns_out = neg ? (int64_t)(0 - total) : (int64_t)total;
    return 0;
invalid:
    snprintf(err, cap, "time: invalid duration \"%s\"", s);
    return -1;
}

/* frac_print writes ".ddd" of frac / 10^prec without trailing zeros. */
static void frac_print(FILE *f, uint64_t frac, int prec)
{
    if (frac == 0)
        return;
    char d[16];
    snprintf(d, sizeof d, "%0*" PRIu64, prec, frac);
    size_t n = strlen(d);
    while (n > 0 && d[n - 1] == '0')
        n--;
    fprintf(f, ".%.*s", (int)n, d);
}

void ctl_duration_print(FILE *f, int64_t ns)
{
    uint64_t u = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        fputc('-', f);
    if (u == 0) {
        fputs("0s", f);
        return;
    }
    if (u < 1000000000ULL) {
        int prec = u < 1000 ? 0 : u < 1000000 ? 3 : 6;
        const char *unit = u < 1000 ? "ns" : u < 1000000 ? "\xc2\xb5s" : "ms";
        uint64_t p = prec == 0 ? 1 : prec == 3 ? 1000 : 1000000;
        fprintf(f, "%" PRIu64, u / p);
        frac_print(f, u % p, prec);
        fputs(unit, f);
        return;
    }
    uint64_t secs = u / 1000000000ULL;
    if (secs >= 3600)
        fprintf(f, "%" PRIu64 "h", secs / 3600);
    if (secs >= 60)
        fprintf(f, "%" PRIu64 "m", secs / 60 % 60);
    fprintf(f, "%" PRIu64, secs % 60);
    frac_print(f, u % 1000000000ULL, 9);
    fputc('s', f);
}
