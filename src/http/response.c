/*
 * response.c - response heads of HTTP/1.1 answers, in the order and words
 * Go's net/http writes them (etcd's endpoints are served by it).
 */
#include <assert.h>
#include <stdio.h>
#include <time.h>

#include "http/http.h"

const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 412: return "Precondition Failed";
    case 413: return "Request Entity Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

size_t http_date(char *buf, size_t cap)
{
    assert(cap >= 30);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    return strftime(buf, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

size_t http_response_head(char *buf, size_t cap, int status,
                          const char *ctype, size_t body_n,
                          const char *extra, unsigned flags)
{
    assert(buf != NULL && status >= 100 && status <= 999);
    char date[40], len[48];
    bool v10 = (flags & HTTP_HEAD_V10) != 0;
    bool close = (flags & HTTP_HEAD_CLOSE) != 0;
    http_date(date, sizeof date);
    if (body_n == HTTP_BODY_CHUNKED)
        snprintf(len, sizeof len, "Transfer-Encoding: chunked\r\n");
    else if (body_n == HTTP_BODY_UNTIL_CLOSE)
        len[0] = '\0';
    else
        snprintf(len, sizeof len, "Content-Length: %zu\r\n", body_n);
    const char *conn = v10 ? (close ? "" : "Connection: keep-alive\r\n")
                           : (close ? "Connection: close\r\n" : "");
    int n = snprintf(buf, cap,
                     "HTTP/1.%d %d %s\r\n%s%s%s%sDate: %s\r\n"
                     "%s%s\r\n",
                     v10 ? 0 : 1, status, http_reason(status),
                     extra != NULL ? extra : "",
                     ctype != NULL ? "Content-Type: " : "",
                     ctype != NULL ? ctype : "", ctype != NULL ? "\r\n" : "",
                     date, len, conn);
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}

size_t http_chunk_head(char *buf, size_t cap, size_t n)
{
    assert(buf != NULL && cap >= 20 && n > 0);
    int k = snprintf(buf, cap, "%zx\r\n", n);
    assert(k > 0 && (size_t)k < cap);
    return (size_t)k;
}
