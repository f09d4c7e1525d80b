/*
 * grpc_proxy_go.c - Go's texts that `cetcd grpc-proxy` (grpc_proxy.h)
 * reproduces for pflag's parsing and etcd's messages: strconv's Quote
 * (%q) of a string and of a rune, ParseBool, ParseUint and ParseInt with
 * base 0, and encoding/csv's fields (pflag's stringSlice).  Pure
 * functions of their arguments.  See grpc_proxy_int.h.
 */
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cmd/grpc_proxy_int.h"

/* The length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
               : s[0] >= 0xe0 && s[0] <= 0xef ? 3
               : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                                              : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* Go's strconv.Quote (%q) of s into buf (cap bytes, cut if short). */
const char *grpc_proxy__go_quote(const char *s, char *buf, size_t cap)
{
    static const char esc[] = "\a\b\f\n\r\t\v", name[] = "abfnrtv";
    size_t w = 0;
    assert(s != NULL && cap >= 16);
    buf[w++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && w + 8 < cap;
         p++) {
        const char *e = *p ? strchr(esc, *p) : NULL;
        size_t u = *p >= 0x80 ? utf8_len(p) : 0;
        if (*p == '"' || *p == '\\') {
            buf[w++] = '\\';
            buf[w++] = (char)*p;
        } else if (e != NULL) {
            buf[w++] = '\\';
            buf[w++] = name[e - esc];
        } else if (*p < 0x20 || *p == 0x7f || (*p >= 0x80 && u == 0)) {
            w += (size_t)snprintf(buf + w, cap - w, "\\x%02x", *p);
        } else if (u > 0) {
            memcpy(buf + w, p, u);
            w += u;
            p += u - 1;
        } else {
            buf[w++] = (char)*p;
        }
    }
    buf[w++] = '"';
    buf[w] = '\0';
    assert(w < cap);
    return buf;
}

/* strconv.ParseBool. */
bool grpc_proxy__go_parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(v, yes[i]) == 0 || strcmp(v, no[i]) == 0) {
            *out = strcmp(v, yes[i]) == 0;
            return true;
        }
    }
    return false;
}

/* strconv's underscoreOK: '_' only between digits or after a base
 * prefix. */
static bool go_underscores_ok(const char *s)
{
    char saw = '^';
    bool hex = false;
    size_t i = 0;
    if (*s == '+' || *s == '-')
        s++;
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '0' && strchr("bBoOxX", s[1]) != NULL) {
        i = 2;
        saw = '0';
        hex = (s[1] | 0x20) == 'x';
    }
    for (; i < n; i++) {
        char l = (char)(s[i] | 0x20);
        if ((s[i] >= '0' && s[i] <= '9') || (hex && l >= 'a' && l <= 'f')) {
            saw = '0';
        } else if (s[i] == '_') {
            if (saw != '0')
                return false;
            saw = '_';
        } else {
            if (saw == '_')
                return false;
            saw = '!';
        }
    }
    return saw != '_';
}

/* strconv.ParseUint(s, 0, bits): Go's base prefixes and underscores. */
enum grpc_proxy_go_num grpc_proxy__go_parse_uint(const char *s, int bits,
                                                 uint64_t *out)
{
    const char *s0 = s;
    size_t n = strlen(s);
    unsigned base = 10;
    bool underscores = false;
    uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    *out = 0;
    if (n == 0)
        return GRPC_PROXY_GO_SYNTAX;
    if (s[0] == '0') {
        char l = (char)(s[1] | 0x20);
        base = n >= 3 && l == 'b' ? 2 : n >= 3 && l == 'x' ? 16 : 8;
        s += n >= 3 && (l == 'b' || l == 'o' || l == 'x') ? 2 : 1;
    }
    uint64_t v = 0, cutoff = UINT64_MAX / base + 1;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s, l = c | 0x20;
        unsigned d;
        if (c == '_') {
            underscores = true;
            continue;
        }
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (l >= 'a' && l <= 'z')
            d = l - 'a' + 10u;
        else
            return GRPC_PROXY_GO_SYNTAX;
        if (d >= base)
            return GRPC_PROXY_GO_SYNTAX;
        if (v >= cutoff || v * base + d < v * base || v * base + d > max) {
            *out = max;
            return GRPC_PROXY_GO_RANGE;
        }
        v = v * base + d;
    }
    if (underscores && !go_underscores_ok(s0))
        return GRPC_PROXY_GO_SYNTAX;
    *out = v;
    return GRPC_PROXY_GO_OK;
}

/* strconv.ParseInt(s, 0, 64). */
enum grpc_proxy_go_num grpc_proxy__go_parse_int(const char *s, int64_t *out)
{
    const char *p = s + (*s == '+' || *s == '-');
    uint64_t un, cutoff = UINT64_C(1) << 63;
    *out = 0;
    if (*s == '\0' ||
        grpc_proxy__go_parse_uint(p, 64, &un) == GRPC_PROXY_GO_SYNTAX)
        return GRPC_PROXY_GO_SYNTAX;
    if ((*s != '-' && un >= cutoff) || (*s == '-' && un > cutoff))
        return GRPC_PROXY_GO_RANGE;
    *out = *s == '-' ? (int64_t)(0 - un) : (int64_t)un;
    return GRPC_PROXY_GO_OK;
}

/* The end of an unquoted csv field at p (',', a line end, or NUL). */
static bool csv_field_end(const char *p)
{
    return *p == '\0' || *p == ',' || *p == '\n' ||
           (p[0] == '\r' && p[1] == '\n');
}

/* encoding/csv's error at byte col (1-based) of the record. */
static int csv_error(char *why, size_t cap, size_t col, bool bare)
{
    snprintf(why, cap, "parse error on line 1, column %zu: %s", col,
             bare ? "bare \" in non-quoted-field"
                  : "extraneous or missing \" in quoted-field");
    return -1;
}

/* One csv field of v at *p into field (n_out bytes; field has room for
 * all of v), *p left at its end.  0, or -1 with csv's error in why. */
int grpc_proxy__csv_field(const char *v, const char **p, char *field,
                          size_t *n_out, char *why, size_t cap)
{
    const char *c = *p;
    size_t n = 0;
    if (*c == '"') {
        for (c++; !(c[0] == '"' && c[1] != '"'); c++) {
            if (*c == '\0')
                return csv_error(why, cap, (size_t)(c - v) + 1, false);
            c += c[0] == '"'; /* "" is one quote */
            field[n++] = *c;
        }
        if (!csv_field_end(++c)) /* the column of the closing quote */
            return csv_error(why, cap, (size_t)(c - v), false);
    } else {
        for (; !csv_field_end(c); c++) {
            if (*c == '"')
                return csv_error(why, cap, (size_t)(c - v) + 1, true);
            field[n++] = *c;
        }
    }
    assert(n <= strlen(v));
    *p = c;
    *n_out = n;
    return 0;
}

/* Go's %q of a byte (a rune below 256), as pflag names a shorthand. */
void grpc_proxy__go_quote_char(unsigned char c, char *buf, size_t cap)
{
    if (c == '\'' || c == '\\')
        snprintf(buf, cap, "'\\%c'", c);
    else if (c >= 0x20 && c < 0x7f)
        snprintf(buf, cap, "'%c'", c);
    else if (c < 0x20 || c == 0x7f)
        snprintf(buf, cap, "'\\x%02x'", c);
    else if (c <= 0xa0 || c == 0xad) /* not printable in Go */
        snprintf(buf, cap, "'\\u%04x'", c);
    else
        snprintf(buf, cap, "'%c%c'", 0xc0 | (c >> 6), 0x80 | (c & 0x3f));
}
