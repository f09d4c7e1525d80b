/*
 * http.h - HTTP/1.1 requests and responses as bytes: a parser for request
 * heads and the writer of response heads.  No sockets and no threads: the
 * gRPC runtime (rpc/) feeds it the bytes of an HTTP/1.x connection and
 * keeps the buffers; it is a layer of its own below rpc/ and includes only
 * util/ (docs/ARCHITECTURE.md).
 *
 * Parsing is in two steps, so that a client sending one byte at a time
 * costs one pass over its bytes, not one per byte:
 *   http_head_len(buf, n, &scan)  finds the end of the head (the blank
 *                                 line), resuming at scan;
 *   http_request_parse(buf, head_n, body_max, &req)
 *                                 reads the request line and headers once
 *                                 the head is complete.
 * The caller then waits for req.content_length more bytes (the body).
 *
 * What is accepted (RFC 9112, as Go's net/http serves etcd's endpoints):
 * a request line "METHOD SP target SP HTTP/1.x" with an origin-form target
 * ("/path?query") or "*"; header lines "name: value" (name a token, value
 * without CR, LF or NUL; surrounding blanks trimmed); lines ended by CRLF
 * or a bare LF; no line folding.  Content-Length must be digits, the same
 * when repeated, at most body_max.  A Transfer-Encoding (a chunked request
 * body) is refused with 501: no endpoint served takes one yet.
 *
 * Limits: HTTP_HEAD_MAX bytes of head, HTTP_HEADERS_MAX headers.  Every
 * error is an HTTP status for the answer (then the connection closes).
 *
 * Ownership: struct http_request points into the caller's buffer, which
 * must stay unchanged while the request is used.
 */
#ifndef CETCD_HTTP_HTTP_H
#define CETCD_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_HEAD_MAX (64 * 1024) /* request line + headers, bytes */
#define HTTP_HEADERS_MAX 64       /* header lines per request */

/* One header line, pointing into the request's buffer (not NUL-ended). */
struct http_header {
    const char *name;  /* token, as sent (compare case-insensitively) */
    size_t name_n;     /* its length */
    const char *value; /* blanks around it trimmed */
    size_t value_n;    /* its length */
};

/* A parsed request head. */
struct http_request {
    const char *method;    /* token, e.g. "GET" */
    size_t method_n;       /* its length */
    const char *target;    /* "/path?query" or "*" */
    size_t target_n;       /* its length */
    int minor;             /* 0 (HTTP/1.0) or 1 (HTTP/1.1) */
    bool keep_alive;       /* the connection stays open after the answer */
    size_t content_length; /* body bytes after the head */
    size_t head_n;         /* bytes of the head, blank line included */
    struct http_header headers[HTTP_HEADERS_MAX]; /* in arrival order */
    size_t headers_n;      /* used */
};

/* http_head_len returns the length of the head in buf[0..n) (through its
 * blank line), or 0 when it is not complete yet.  *scan_io is where the
 * previous call stopped looking (start with 0; reset it to 0 with each new
 * request); it is advanced so that no byte is looked at twice.  The caller
 * answers 431 when 0 comes back for n >= HTTP_HEAD_MAX. */
size_t http_head_len(const uint8_t *buf, size_t n, size_t *scan_io);

/* http_request_parse reads the complete head buf[0..head_n) into *req_out.
 * Returns 0, or the HTTP status to answer: 400 (malformed), 413 (a
 * Content-Length over body_max), 431 (too many headers), 501 (a
 * Transfer-Encoding), 505 (an HTTP version other than 1.0 and 1.1). */
int http_request_parse(const uint8_t *buf, size_t head_n, size_t body_max,
                       struct http_request *req_out);

/* http_request_header returns the value of the first header called name
 * (case-insensitive) and its length in *len_out, or NULL. */
const char *http_request_header(const struct http_request *req,
                                const char *name, size_t *len_out);

/* http_reason returns the reason phrase of status ("Not Found"), or
 * "Unknown" for statuses this module does not name. */
const char *http_reason(int status);

/* http_query_next walks the query of a target ("/p?a=1&b=2"): *pos_io
 * starts at 0; each call decodes the next key and value (percent escapes
 * and '+' undone) into key/val (NUL-ended, truncated to their caps) and
 * returns true, or false after the last one. */
bool http_query_next(const char *target, size_t target_n, size_t *pos_io,
                     char *key, size_t key_cap, char *val, size_t val_cap);

/* http_path_len returns the length of target's path (before any '?'). */
size_t http_path_len(const char *target, size_t target_n);

/* http_date writes the current time as an HTTP date ("Thu, 03 Dec 2026
 * 12:37:13 GMT") into buf (at least 30 bytes); returns its length. */
size_t http_date(char *buf, size_t cap);

/* A body_n for http_response_head: the body follows in chunks (an answer
 * that stays open); the caller writes each with http_chunk_head, then
 * HTTP_CHUNK_END. */
#define HTTP_BODY_CHUNKED SIZE_MAX
#define HTTP_CHUNK_END "0\r\n\r\n"

/* http_chunk_head writes the size line of an n-byte chunk ("1a\r\n") into
 * buf (at least 20 bytes); returns its length.  The chunk's bytes and a
 * CRLF follow it.  n must not be 0 (that is the end). */
size_t http_chunk_head(char *buf, size_t cap, size_t n);

/* A body_n for http_response_head: no length at all, the body ends when
 * the connection closes (a stream answering HTTP/1.0, which has no
 * chunks: Go's net/http does the same). */
#define HTTP_BODY_UNTIL_CLOSE (SIZE_MAX - 1)

/* Flags of http_response_head. */
#define HTTP_HEAD_CLOSE 1u /* the connection closes after this answer */
#define HTTP_HEAD_V10 2u   /* the request was HTTP/1.0 */

/* http_response_head writes a response head into buf[0..cap): status line,
 * Date, Content-Type (if ctype is not NULL), Content-Length (or
 * Transfer-Encoding: chunked for HTTP_BODY_CHUNKED, nothing for
 * HTTP_BODY_UNTIL_CLOSE), the extra header lines in extra (each ending in
 * CRLF, or NULL), the Connection header, and the blank line.  As Go's
 * net/http: an HTTP/1.1 answer says "Connection: close" when it closes;
 * an HTTP/1.0 one has an "HTTP/1.0" status line and says "Connection:
 * keep-alive" when it does not close (1.0 closes by default).  Returns
 * its length, or 0 when cap is too small. */
size_t http_response_head(char *buf, size_t cap, int status,
                          const char *ctype, size_t body_n,
                          const char *extra, unsigned flags);

#endif
