/*
 * varint.h - protobuf's base-128 varints, for the places that write etcd's
 * wire and disk records by hand (the peer batch codec, etcd's KeyValue in
 * the HashKV walk and the bbolt export, the export's other buckets) or
 * size them (the watch fragment sizes).  Header only: every function is
 * a few instructions.
 */
#ifndef CETCD_UTIL_VARINT_H
#define CETCD_UTIL_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes a varint of 64 bits takes. */
#define VARINT_MAX 10

/* varint_len: the bytes of the varint holding v (1..VARINT_MAX). */
static inline size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* varint_put writes v at p (room for varint_len(v) bytes); returns the
 * bytes written. */
static inline size_t varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* varint_field_put writes field tag (< 16: a one-byte key) as a varint
 * with value v, nothing when v is 0 (proto3 leaves zeros out); returns the
 * bytes written (at most 1 + VARINT_MAX). */
static inline size_t varint_field_put(uint8_t *p, unsigned tag, int64_t v)
{
    if (v == 0)
        return 0;
    p[0] = (uint8_t)(tag << 3);
    return 1 + varint_put(p + 1, (uint64_t)v);
}

#endif
