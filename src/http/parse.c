/*
 * parse.c - the HTTP/1.x request head parser (http.h has the rules).  It
 * never reads past the bytes it is given and never allocates: a request
 * points into the caller's buffer.  Bad input gets an HTTP status, never
 * an assert.
 */
#include <assert.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"
#include "http/http_int.h"

/* tchar of RFC 9110: the bytes a method or header name may hold. */
static bool is_tchar(uint8_t c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
        (c >= 'A' && c <= 'Z'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

size_t http_head_len(const uint8_t *buf, size_t n, size_t *scan_io)
{
    assert(buf != NULL || n == 0);
    assert(scan_io != NULL && *scan_io <= n);
    /* The head ends at a LF followed by an empty line: "\n\n" or
     * "\n\r\n".  Resume one or two bytes back, so that a blank line split
     * between two reads is still seen. */
    size_t i = *scan_io >= 2 ? *scan_io - 2 : 0;
    for (; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < n && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    *scan_io = n;
    return 0;
}

/* line_end returns the end of the line at p (its CR or LF), within end. */
static const char *line_end(const char *p, const char *end, const char **next)
{
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    if (lf == NULL) {
        *next = end;
        return end;
    }
    *next = lf + 1;
    return lf > p && lf[-1] == '\r' ? lf - 1 : lf;
}

static int parse_request_line(const char *p, const char *e,
                              struct http_request *r)
{
    const char *sp1 = memchr(p, ' ', (size_t)(e - p));
    if (sp1 == NULL || sp1 == p)
        return 400;
    for (const char *q = p; q < sp1; q++)
        if (!is_tchar((uint8_t)*q))
            return 400;
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(e - t));
    if (sp2 == NULL || sp2 == t)
        return 400;
    for (const char *q = t; q < sp2; q++)
        if ((uint8_t)*q <= ' ' || (uint8_t)*q == 0x7f)
            return 400;
    if (t[0] != '/' && !(sp2 - t == 1 && t[0] == '*'))
        return 400;
    const char *v = sp2 + 1;
    if (e - v != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' ||
        v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9')
        return 400;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return 505;
    r->method = p;
    r->method_n = (size_t)(sp1 - p);
    r->target = t;
    r->target_n = (size_t)(sp2 - t);
    r->minor = v[7] - '0';
    return 0;
}

static int parse_header(const char *p, const char *e, struct http_request *r)
{
    const char *colon = memchr(p, ':', (size_t)(e - p));
    if (colon == NULL || colon == p)
        return 400; /* also a folded line: it starts with a blank */
    for (const char *q = p; q < colon; q++)
        if (!is_tchar((uint8_t)*q))
            return 400;
    const char *v = colon + 1, *ve = e;
    for (const char *q = v; q < ve; q++)
        if (*q == '\r' || *q == '\0')
            return 400;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    if (r->headers_n == HTTP_HEADERS_MAX)
        return 431;
    struct http_header *h = &r->headers[r->headers_n++];
    h->name = p;
    h->name_n = (size_t)(colon - p);
    h->value = v;
    h->value_n = (size_t)(ve - v);
    return 0;
}

static bool name_is(const struct http_header *h, const char *name)
{
    size_t n = strlen(name);
    return h->name_n == n && strncasecmp(h->name, name, n) == 0;
}

/* has_token: the comma-separated list v holds token tok. */
static bool has_token(const char *v, size_t n, const char *tok)
{
    size_t tn = strlen(tok), i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - s == tn && strncasecmp(v + s, tok, tn) == 0)
            return true;
    }
    return false;
}

static int content_length(const struct http_header *h, size_t body_max,
                          size_t *len_io, bool *seen_io)
{
    if (h->value_n == 0 || h->value_n > 19)
        return h->value_n == 0 ? 400 : 413;
    size_t x = 0;
    for (size_t i = 0; i < h->value_n; i++) {
        if (h->value[i] < '0' || h->value[i] > '9')
            return 400;
        x = x * 10 + (size_t)(h->value[i] - '0');
    }
    if (*seen_io && x != *len_io)
        return 400;
    if (x > body_max)
        return 413;
    *seen_io = true;
    *len_io = x;
    return 0;
}

/* framing reads the headers that say how the body is framed and whether
 * the connection stays open. */
static int framing(struct http_request *r, size_t body_max)
{
    bool seen = false, close = false, keep = false;
    size_t te_n = 0;
    for (size_t i = 0; i < r->headers_n; i++) {
        const struct http_header *h = &r->headers[i];
        if (!name_is(h, "transfer-encoding"))
            continue;
        /* Go: one coding, "chunked", on HTTP/1.1 (1.0 ignores it) */
        if (r->minor == 0)
            continue;
        if (++te_n > 1 || h->value_n != 7 ||
            strncasecmp(h->value, "chunked", 7) != 0)
            return 501;
        r->chunked = true;
    }
    for (size_t i = 0; i < r->headers_n; i++) {
        const struct http_header *h = &r->headers[i];
        int rv = 0;
        if (name_is(h, "content-length"))
            rv = content_length(h, r->chunked ? SIZE_MAX : body_max,
                                &r->content_length, &seen);
        else if (name_is(h, "connection")) {
            close |= has_token(h->value, h->value_n, "close");
            keep |= has_token(h->value, h->value_n, "keep-alive");
        }
        if (rv != 0)
            return rv;
    }
    r->keep_alive = !close && (r->minor == 1 || keep);
    if (r->chunked)
        r->content_length = 0; /* the chunks say it (Go drops the CL) */
    return 0;
}

int http_request_parse(const uint8_t *buf, size_t head_n, size_t body_max,
                       struct http_request *req_out)
{
    assert(buf != NULL && req_out != NULL);
    memset(req_out, 0, offsetof(struct http_request, headers));
    req_out->headers_n = 0;
    req_out->head_n = head_n;
    const char *p = (const char *)buf, *end = p + head_n, *next;
    /* RFC 9112 2.2: empty lines before the request line are ignored. */
    while (p < end && (*p == '\r' || *p == '\n'))
        p++;
    const char *e = line_end(p, end, &next);
    int rv = parse_request_line(p, e, req_out);
    if (rv != 0)
        return rv;
    for (p = next; p < end; p = next) {
        e = line_end(p, end, &next);
        if (e == p)
            break; /* the blank line */
        rv = parse_header(p, e, req_out);
        if (rv != 0)
            return rv;
    }
    rv = framing(req_out, body_max);
    assert(rv != 0 || req_out->content_length <= body_max);
    return rv;
}

const char *http_request_header(const struct http_request *req,
                                const char *name, size_t *len_out)
{
    assert(req != NULL && name != NULL);
    for (size_t i = 0; i < req->headers_n; i++) {
        if (name_is(&req->headers[i], name)) {
            if (len_out != NULL)
                *len_out = req->headers[i].value_n;
            return req->headers[i].value;
        }
    }
    return NULL;
}

size_t http_path_len(const char *target, size_t target_n)
{
    const char *q = memchr(target, '?', target_n);
    return q != NULL ? (size_t)(q - target) : target_n;
}


/* unescape decodes s[0..n) into out (cap >= 1), NUL-ended, truncated. */
static void unescape(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char c = s[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%' && i + 2 < n && http__hex((unsigned char)s[i + 1]) >= 0 &&
                   http__hex((unsigned char)s[i + 2]) >= 0) {
            c = (char)(http__hex((unsigned char)s[i + 1]) << 4 | http__hex((unsigned char)s[i + 2]));
            i += 2;
        }
        out[o++] = c;
    }
    out[o] = '\0';
}

bool http_query_next(const char *target, size_t target_n, size_t *pos_io,
                     char *key, size_t key_cap, char *val, size_t val_cap)
{
    assert(key_cap > 0 && val_cap > 0);
    size_t i = *pos_io;
    if (i == 0) {
        i = http_path_len(target, target_n);
        if (i < target_n)
            i++; /* the '?' */
    }
    while (i < target_n && (target[i] == '&' || target[i] == ';'))
        i++;
    if (i >= target_n) {
        *pos_io = target_n;
        return false;
    }
    size_t s = i;
    while (i < target_n && target[i] != '&' && target[i] != ';')
        i++;
    const char *eq = memchr(target + s, '=', i - s);
    size_t kn = eq != NULL ? (size_t)(eq - (target + s)) : i - s;
    unescape(target + s, kn, key, key_cap);
    if (eq != NULL)
        unescape(eq + 1, (size_t)(target + i - (eq + 1)), val, val_cap);
    else
        val[0] = '\0';
    *pos_io = i;
    return true;
}
