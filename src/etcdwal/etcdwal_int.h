/*
 * etcdwal_int.h - the protobuf field reader shared by reader.c and snap.c
 * (bounds-checked; never asserts on its input).
 */
#ifndef CETCD_ETCDWAL_ETCDWAL_INT_H
#define CETCD_ETCDWAL_ETCDWAL_INT_H

#include <stddef.h>
#include <stdint.h>

/* One field: number, wire type, varint value or bytes. */
struct etcdwal__field {
    uint64_t num;      /* field number (>= 1) */
    unsigned wt;       /* wire type: 0 varint, 1 fixed64, 2 bytes, 5 fixed32 */
    uint64_t v;        /* the value (0, 1, 5) or the length (2) */
    const uint8_t *b;  /* wire type 2: the bytes */
    size_t blen;       /* their length */
};

/* etcdwal__varint reads a varint at *pos of p[0, len); 0 or ERR_CORRUPT. */
int etcdwal__varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out);
/* etcdwal__next_field: the next field at *pos; 1 at the end, 0, or
 * ERR_CORRUPT. */
int etcdwal__next_field(const uint8_t *p, size_t len, size_t *pos,
                        struct etcdwal__field *f);

#endif
