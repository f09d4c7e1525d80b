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
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Request Entity Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
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
                          const char *extra, bool close)
{
    assert(buf != NULL && status >= 100 && status <= 999);
    char date[40];
    http_date(date, sizeof date);
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\n%s%s%s%sDate: %s\r\n"
                     "Content-Length: %zu\r\n%s\r\n",
                     status, http_reason(status), extra != NULL ? extra : "",
                     ctype != NULL ? "Content-Type: " : "",
                     ctype != NULL ? ctype : "", ctype != NULL ? "\r\n" : "",
                     date, body_n, close ? "Connection: close\r\n" : "");
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}
