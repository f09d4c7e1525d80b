/*
 * chunked.c - the decoder of chunked request bodies (http.h has the
 * rules).  A byte-at-a-time state machine over whatever the connection
 * read, so a body split anywhere (one byte per read, a size line across
 * two reads) decodes the same; it keeps counters only, never a buffer,
 * and never asserts on the bytes: bad framing gets Go's error text.
 */
#include <assert.h>
#include <string.h>

#include "http/http.h"
#include "http/http_int.h"

enum {
    CH_SIZE,    /* in a size line */
    CH_DATA,    /* in a chunk's data */
    CH_DATA_CR, /* the CR after the data */
    CH_DATA_LF, /* the LF after it */
    CH_TRAILER, /* in a trailer line (or the final empty line) */
    CH_DONE,    /* the body ended */
    CH_ERROR,   /* bad framing: st->err */
};

void http_chunked_init(struct http_chunked *st)
{
    assert(st != NULL);
    memset(st, 0, sizeof *st);
}

bool http_chunked_done(const struct http_chunked *st)
{
    return st->state == CH_DONE;
}


static void fail(struct http_chunked *st, const char *why)
{
    st->state = CH_ERROR;
    st->err = why;
}

/* size_byte takes one byte of a size line. */
static void size_byte(struct http_chunked *st, uint8_t c)
{
    if (++st->line_n >= HTTP_CHUNK_LINE_MAX) {
        fail(st, "header line too long");
        return;
    }
    if (c == '\n') {
        if (st->bad != NULL) /* Go reads the whole line, then parses it */
            fail(st, st->bad);
        else if (st->digits == 0)
            fail(st, "empty hex number for chunk length");
        else
            st->state = st->left == 0 ? CH_TRAILER : CH_DATA;
        st->line_n = 0;
        st->digits = 0;
        st->blank = st->ext = false;
        st->bad = NULL;
        return;
    }
    if (st->ext || st->bad != NULL)
        return; /* an extension: skipped, as Go does; or already bad */
    if (c == ' ' || c == '\t' || c == '\r') {
        st->blank = true; /* Go trims trailing blanks before parsing */
        return;
    }
    if (c == ';' && !st->blank) {
        st->ext = true;
        return;
    }
    int v = http__hex(c);
    if (v < 0 || st->blank) {
        st->bad = "invalid byte in chunk length";
        return;
    }
    if (++st->digits > 16) {
        st->bad = "http chunk length too large";
        return;
    }
    st->left = st->left << 4 | (uint64_t)v;
}

/* trailer_byte takes one byte of the trailer (lines up to an empty one). */
static void trailer_byte(struct http_chunked *st, uint8_t c)
{
    if (++st->trailer_n > HTTP_HEAD_MAX) {
        fail(st, "header line too long");
        return;
    }
    if (c == '\n') {
        if (st->line_n == 0)
            st->state = CH_DONE;
        st->line_n = 0;
        return;
    }
    if (c != '\r' || st->line_n > 0)
        st->line_n++;
}

size_t http_chunked_decode(struct http_chunked *st, const uint8_t *in,
                           size_t n, uint8_t *out, size_t *out_n)
{
    assert(st != NULL && (in != NULL || n == 0) && out_n != NULL);
    size_t i = 0, o = 0;
    while (i < n && st->state != CH_DONE && st->state != CH_ERROR) {
        switch (st->state) {
        case CH_SIZE:
            size_byte(st, in[i++]);
            break;
        case CH_DATA: {
            size_t k = n - i;
            if (st->left < k)
                k = (size_t)st->left;
            memmove(out + o, in + i, k); /* o <= i: in place is fine */
            o += k;
            i += k;
            st->left -= k;
            if (st->left == 0)
                st->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (in[i++] != '\r')
                fail(st, "malformed chunked encoding");
            else
                st->state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (in[i++] != '\n')
                fail(st, "malformed chunked encoding");
            else
                st->state = CH_SIZE;
            break;
        default: /* CH_TRAILER */
            trailer_byte(st, in[i++]);
            break;
        }
    }
    assert(o <= i && i <= n);
    *out_n = o;
    return i;
}
