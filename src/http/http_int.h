/*
 * http_int.h - what the HTTP module's files share (not its manual: that is
 * http.h).
 */
#ifndef CETCD_HTTP_HTTP_INT_H
#define CETCD_HTTP_HTTP_INT_H

/* http__hex: the value of one hex digit (either case), or -1. */
static inline int http__hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
