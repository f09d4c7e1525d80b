/*
 * fuzz_http_parse.c - goal: the HTTP/1.x request parser (src/http/)
 * survives any bytes, never reads outside them, and gives a request whose
 * every field lies inside the head it was given.
 *
 * Method: the first input byte picks a read size (1..256); the rest is fed
 * to http_head_len in reads of that size, as a connection would, and must
 * find the same head length as one call over all of it.  A complete head
 * is parsed with a 64-byte body limit; on success the method, target and
 * headers must lie within the head, the content length within the limit,
 * and the query walk must end.  A chunked request's body (the bytes after
 * the head) goes through http_chunked_decode in place, in reads of the
 * same size and in one call: both must take the same bytes, give the same
 * data (never more than they took) and the same error.  Seeds:
 * fuzz/corpus/http_parse (chunked_* for the body decoder).
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

static void inside(const uint8_t *buf, size_t n, const char *p, size_t len)
{
    const char *b = (const char *)buf;
    if (len == 0)
        return;
    if (p < b || p + len > b + n)
        abort();
}

/* dechunk decodes body[0..n) in reads of step bytes, in place in a copy;
 * returns the bytes taken, the data in out (*out_n), the error in *err. */
static size_t dechunk(const uint8_t *body, size_t n, size_t step,
                      uint8_t *out, size_t *out_n, const char **err)
{
    uint8_t *work = malloc(n > 0 ? n : 1);
    if (work == NULL)
        abort();
    memcpy(work, body, n);
    struct http_chunked st;
    http_chunked_init(&st);
    size_t i = 0, o = 0;
    while (i < n && !http_chunked_done(&st) && st.err == NULL) {
        size_t k = n - i < step ? n - i : step;
        size_t got = 0;
        size_t used = http_chunked_decode(&st, work + i, k, work + i, &got);
        if (used > k || got > used)
            abort();
        memcpy(out + o, work + i, got);
        o += got;
        i += used;
        if (used < k && !http_chunked_done(&st) && st.err == NULL)
            abort(); /* stops early only at the end or an error */
    }
    free(work);
    *out_n = o;
    *err = st.err;
    return i;
}

static void check_body(const uint8_t *body, size_t n, size_t step)
{
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
    if (a == NULL || b == NULL)
        abort();
    size_t an, bn;
    const char *ae, *be;
    size_t at = dechunk(body, n, step, a, &an, &ae);
    size_t bt = dechunk(body, n, n > 0 ? n : 1, b, &bn, &be);
    if (at != bt || an != bn || memcmp(a, b, an) != 0 || ae != be ||
        an > at)
        abort();
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1;
    const uint8_t *buf = data + 1;
    size_t n = size - 1;
    size_t scan = 0, head = 0;
    for (size_t have = 0; have < n && head == 0;) {
        have = have + step < n ? have + step : n;
        head = http_head_len(buf, have, &scan);
    }
    size_t scan_all = 0;
    size_t once = http_head_len(buf, n, &scan_all);
    if (head != once || head > n)
        abort();
    if (head == 0)
        return 0;
    static struct http_request req;
    int rv = http_request_parse(buf, head, 64, &req);
    if (rv != 0) {
        if (rv != 400 && rv != 413 && rv != 431 && rv != 501 && rv != 505)
            abort();
        return 0;
    }
    inside(buf, head, req.method, req.method_n);
    inside(buf, head, req.target, req.target_n);
    if (req.content_length > 64 || req.headers_n > HTTP_HEADERS_MAX ||
        req.method_n == 0 || req.target_n == 0)
        abort();
    for (size_t i = 0; i < req.headers_n; i++) {
        inside(buf, head, req.headers[i].name, req.headers[i].name_n);
        inside(buf, head, req.headers[i].value, req.headers[i].value_n);
    }
    if (req.chunked)
        check_body(buf + head, n - head, step);
    char k[16], v[16];
    size_t pos = 0, walks = 0;
    while (http_query_next(req.target, req.target_n, &pos, k, sizeof k, v,
                           sizeof v))
        if (++walks > req.target_n)
            abort();
    return 0;
}
