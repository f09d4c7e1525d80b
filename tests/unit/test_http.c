/*
 * test_http.c - goal: the HTTP/1.x request parser (src/http/parse.c)
 * finds heads split across reads, reads request lines, headers and the
 * framing headers as http.h says, and answers each kind of bad input with
 * its status.  Method: byte strings in, fields and statuses compared.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "http/http.h"

static int parse(const char *s, struct http_request *r)
{
    size_t scan = 0, n = strlen(s);
    size_t head = http_head_len((const uint8_t *)s, n, &scan);
    if (head == 0)
        return -1;
    return http_request_parse((const uint8_t *)s, head, 100, r);
}

static void test_head_len_split(void **state)
{
    (void)state;
    const char *s = "GET / HTTP/1.1\r\nHost: a\r\n\r\nrest";
    size_t scan = 0, head = 0, n = strlen(s), i;
    for (i = 1; i <= n && head == 0; i++)
        head = http_head_len((const uint8_t *)s, i, &scan);
    assert_int_equal(head, n - 4);
    assert_int_equal(i - 1, n - 4); /* found as soon as it was complete */
    scan = 0;
    assert_int_equal(http_head_len((const uint8_t *)"GET / HTTP/1.1\n\n", 16,
                                   &scan),
                     16);
}

static void test_request_line(void **state)
{
    (void)state;
    static struct http_request r;
    assert_int_equal(parse("GET /health?x=1 HTTP/1.1\r\n\r\n", &r), 0);
    assert_int_equal(r.method_n, 3);
    assert_memory_equal(r.method, "GET", 3);
    assert_int_equal(r.target_n, 11);
    assert_int_equal(http_path_len(r.target, r.target_n), 7);
    assert_int_equal(r.minor, 1);
    assert_true(r.keep_alive);
    assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", &r), 0);
    assert_false(r.keep_alive);
    assert_int_equal(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
                           &r),
                     0);
    assert_true(r.keep_alive);
    assert_int_equal(parse("GET / HTTP/1.1\r\nConnection: x, close\r\n\r\n",
                           &r),
                     0);
    assert_false(r.keep_alive);
}

static void test_headers(void **state)
{
    (void)state;
    static struct http_request r;
    assert_int_equal(parse("POST /a HTTP/1.1\r\nHost:  h1 \r\n"
                           "Content-Length: 12\r\n\r\n",
                           &r),
                     0);
    size_t n;
    const char *v = http_request_header(&r, "host", &n);
    assert_non_null(v);
    assert_int_equal(n, 2);
    assert_memory_equal(v, "h1", 2);
    assert_int_equal(r.content_length, 12);
    assert_int_equal(parse("GET / HTTP/1.1\r\nContent-Length: 3\r\n"
                           "Content-Length: 3\r\n\r\n",
                           &r),
                     0);
}

static void test_errors(void **state)
{
    (void)state;
    static struct http_request r;
    assert_int_equal(parse("GARBAGE\r\n\r\n", &r), 400);
    assert_int_equal(parse("GET health HTTP/1.1\r\n\r\n", &r), 400);
    assert_int_equal(parse("GET / HTTP/2.0\r\n\r\n", &r), 505);
    assert_int_equal(parse("GET / HTTP/1.1\r\n folded\r\n\r\n", &r), 400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nbad name: x\r\n\r\n", &r), 400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nContent-Length: 1\r\n"
                           "Content-Length: 2\r\n\r\n",
                           &r),
                     400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nContent-Length: 101\r\n\r\n",
                           &r),
                     413);
    assert_int_equal(parse("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                           &r),
                     400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nTransfer-Encoding: gzip"
                           "\r\n\r\n",
                           &r),
                     501);
    assert_int_equal(parse("GET / HTTP/1.1\r\nTransfer-Encoding: gzip, "
                           "chunked\r\n\r\n",
                           &r),
                     501);
    assert_int_equal(parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked"
                           "\r\nTransfer-Encoding: chunked\r\n\r\n",
                           &r),
                     501);
    char many[HTTP_HEADERS_MAX * 8 + 64];
    size_t o = (size_t)snprintf(many, sizeof many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i <= HTTP_HEADERS_MAX; i++)
        o += (size_t)snprintf(many + o, sizeof many - o, "a: b\r\n");
    snprintf(many + o, sizeof many - o, "\r\n");
    assert_int_equal(parse(many, &r), 431);
}

/* Transfer-Encoding: chunked, as Go takes it. */
static void test_chunked_framing(void **state)
{
    (void)state;
    struct http_request r;
    assert_int_equal(parse("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked"
                           "\r\nContent-Length: 999\r\n\r\n",
                           &r),
                     0);
    assert_true(r.chunked);
    assert_int_equal(r.content_length, 0); /* the CL is dropped */
    /* HTTP/1.0 ignores it: the Content-Length frames the body */
    assert_int_equal(parse("POST / HTTP/1.0\r\nTransfer-Encoding: gzip"
                           "\r\nContent-Length: 2\r\n\r\n",
                           &r),
                     0);
    assert_false(r.chunked);
    assert_int_equal(r.content_length, 2);
}

/* decode feeds s in pieces of step bytes (0: all at once) into a fresh
 * decoder; returns the data in out (NUL-ended) and the bytes taken, or
 * -1 with *err set. */
static long decode(const char *s, size_t step, char *out, const char **err)
{
    struct http_chunked st;
    http_chunked_init(&st);
    size_t n = strlen(s), i = 0, o = 0;
    char buf[512];
    while (i < n && !http_chunked_done(&st)) {
        size_t k = step == 0 || n - i < step ? n - i : step;
        memcpy(buf, s + i, k); /* a private copy: decoded in place */
        size_t got = 0;
        size_t used = http_chunked_decode(&st, (uint8_t *)buf, k,
                                          (uint8_t *)buf, &got);
        assert_true(used <= k && got <= used);
        memcpy(out + o, buf, got);
        o += got;
        i += used;
        if (st.err != NULL) {
            *err = st.err;
            out[o] = '\0';
            return -1;
        }
        if (used < k)
            break;
    }
    out[o] = '\0';
    *err = NULL;
    return http_chunked_done(&st) ? (long)i : -2;
}

static void test_chunked_decode(void **state)
{
    (void)state;
    char out[512];
    const char *err;
    const char *body = "5\r\n{\"key\r\n9;ext=1\r\n\":\"YQ==\"}\r\n"
                       "0\r\nX-Trailer: 1\r\n\r\nGET /next";
    for (size_t step = 0; step <= 7; step++) { /* split anywhere */
        long used = decode(body, step, out, &err);
        assert_int_equal(used, (long)strlen(body) - 9);
        assert_string_equal(out, "{\"key\":\"YQ==\"}");
    }
    assert_int_equal(decode("A \r\n0123456789\r\n0\n\n", 0, out, &err),
                     19);
    assert_string_equal(out, "0123456789");
    assert_int_equal(decode("2\r\n{}\r\n", 1, out, &err), -2);
    assert_string_equal(out, "{}"); /* not done yet: more to come */
    static const struct {
        const char *in, *err;
    } bad[] = {
        {"zz\r\n{}\r\n0\r\n\r\n", "invalid byte in chunk length"},
        {"2 ;x\r\n{}\r\n", "invalid byte in chunk length"},
        {"\r\n", "empty hex number for chunk length"},
        {"ffffffffffffffffff\r\n", "http chunk length too large"},
        {"2\r\n{}XX0\r\n\r\n", "malformed chunked encoding"},
        {"2\r\n{}\rX", "malformed chunked encoding"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(decode(bad[i].in, 1, out, &err), -1);
        assert_string_equal(err, bad[i].err);
    }
    assert_string_equal(out, "{}"); /* the data before the bad framing */
    /* a size line past 4096 bytes (extensions) */
    static char longline[HTTP_CHUNK_LINE_MAX + 16];
    memset(longline, ';', sizeof longline - 1);
    longline[0] = '1';
    longline[sizeof longline - 1] = '\0';
    struct http_chunked st;
    http_chunked_init(&st);
    size_t got;
    static char copy[sizeof longline];
    memcpy(copy, longline, sizeof longline);
    http_chunked_decode(&st, (uint8_t *)copy, strlen(copy), (uint8_t *)copy,
                        &got);
    assert_string_equal(st.err, "header line too long");
    /* a huge announced size holds no memory: only a counter */
    http_chunked_init(&st);
    char big[] = "7fffffffffffffff\r\nabc";
    size_t used = http_chunked_decode(&st, (uint8_t *)big, strlen(big),
                                      (uint8_t *)big, &got);
    assert_int_equal(used, strlen(big));
    assert_int_equal(got, 3);
    assert_null(st.err);
}

static void test_query(void **state)
{
    (void)state;
    const char *t = "/livez?verbose&exclude=a%2Cb&exclude=c+d";
    size_t pos = 0;
    char k[32], v[32];
    assert_true(http_query_next(t, strlen(t), &pos, k, sizeof k, v, sizeof v));
    assert_string_equal(k, "verbose");
    assert_string_equal(v, "");
    assert_true(http_query_next(t, strlen(t), &pos, k, sizeof k, v, sizeof v));
    assert_string_equal(v, "a,b");
    assert_true(http_query_next(t, strlen(t), &pos, k, sizeof k, v, sizeof v));
    assert_string_equal(v, "c d");
    assert_false(http_query_next(t, strlen(t), &pos, k, sizeof k, v,
                                 sizeof v));
}

static void test_response_head(void **state)
{
    (void)state;
    char buf[512];
    size_t n = http_response_head(buf, sizeof buf, 404, "text/plain", 19,
                                  "X-A: b\r\n", true);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "HTTP/1.1 404 Not Found\r\n"));
    assert_non_null(strstr(buf, "Content-Length: 19\r\n"));
    assert_non_null(strstr(buf, "Connection: close\r\n\r\n"));
    assert_int_equal(http_response_head(buf, 10, 200, NULL, 0, NULL, false),
                     0);
    /* Go's answers to HTTP/1.0: a 1.0 status line, no Connection header
     * when it closes, keep-alive said when it does not; a stream's body
     * without length or chunks. */
    n = http_response_head(buf, sizeof buf, 200, "application/json",
                           HTTP_BODY_UNTIL_CLOSE, NULL,
                           HTTP_HEAD_V10 | HTTP_HEAD_CLOSE);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "HTTP/1.0 200 OK\r\n"));
    assert_null(strstr(buf, "Connection"));
    assert_null(strstr(buf, "Content-Length"));
    assert_null(strstr(buf, "Transfer-Encoding"));
    assert_non_null(strstr(buf, "GMT\r\n\r\n"));
    n = http_response_head(buf, sizeof buf, 200, NULL, 3, NULL,
                           HTTP_HEAD_V10);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "Content-Length: 3\r\n"
                                "Connection: keep-alive\r\n\r\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_len_split),
        cmocka_unit_test(test_request_line),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_chunked_framing),
        cmocka_unit_test(test_chunked_decode),
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_response_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
