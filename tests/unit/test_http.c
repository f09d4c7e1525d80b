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
    assert_int_equal(parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked"
                           "\r\n\r\n",
                           &r),
                     501);
    char many[HTTP_HEADERS_MAX * 8 + 64];
    size_t o = (size_t)snprintf(many, sizeof many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i <= HTTP_HEADERS_MAX; i++)
        o += (size_t)snprintf(many + o, sizeof many - o, "a: b\r\n");
    snprintf(many + o, sizeof many - o, "\r\n");
    assert_int_equal(parse(many, &r), 431);
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
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_response_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
