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
 * when repeated, at most body_max.  Transfer-Encoding, as Go's net/http:
 * one coding, "chunked" (any case), on an HTTP/1.1 request (req.chunked;
 * its Content-Length is then ignored; the body is read with
 * http_chunked_decode), anything else 501 ("Unsupported transfer
 * encoding"); ignored on HTTP/1.0.
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
    size_t content_length; /* body bytes after the head (0 if chunked) */
    bool chunked;          /* the body is chunked (Transfer-Encoding) */
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

/* A chunked request body being decoded (RFC 9112 7.1, as Go's
 * net/http/internal chunkedReader reads it): size lines of hex digits
 * (at most 16) with optional ";extensions" and trailing blanks, ended by
 * CRLF or LF and shorter than HTTP_CHUNK_LINE_MAX; each chunk's data
 * followed by exactly CRLF; a 0 size, then trailer lines (skipped, at
 * most HTTP_HEAD_MAX bytes) up to an empty line.  Zero-initialise it
 * (or http_chunked_init) per body.  No allocation: the state is a few
 * counters, whatever the sizes announced. */
#define HTTP_CHUNK_LINE_MAX 4096
struct http_chunked {
    unsigned state;    /* where in the framing (parse.c's enum) */
    uint64_t left;     /* data bytes left of the current chunk */
    size_t line_n;     /* bytes of the current size or trailer line */
    size_t trailer_n;  /* trailer bytes so far */
    unsigned digits;   /* hex digits of the size line */
    bool blank;        /* a blank after them: only blanks may follow */
    bool ext;          /* inside a ";extension" */
    const char *bad;   /* the size line's error, told at its end */
    const char *err;   /* Go's text of the framing error, or NULL */
};

void http_chunked_init(struct http_chunked *st);

/* http_chunked_decode decodes the next bytes of a chunked body, in[0..n),
 * and writes its data bytes to out (at most n; out may be in: decoding in
 * place moves bytes only backwards), their count in *out_n.  Returns the
 * bytes of in taken: all n, or fewer once the body ended
 * (http_chunked_done: the rest is the next request's) or on a framing
 * error (st->err: "invalid byte in chunk length", "http chunk length too
 * large", "empty hex number for chunk length", "malformed chunked
 * encoding", "header line too long"; every later call takes nothing). */
size_t http_chunked_decode(struct http_chunked *st, const uint8_t *in,
                           size_t n, uint8_t *out, size_t *out_n);

/* http_chunked_done: the last chunk and the trailer are in. */
bool http_chunked_done(const struct http_chunked *st);

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
