/*
 * etcdwal_int.h - the protobuf field reader shared by reader.c and snap.c
 * (bounds-checked; never asserts on its input).
 */
#ifndef CETCD_ETCDWAL_ETCDWAL_INT_H
#define CETCD_ETCDWAL_ETCDWAL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "etcdwal/etcdwal.h"

/* etcdwal__varint reads a varint at *pos of p[0, len); 0 or ERR_CORRUPT. */
int etcdwal__varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out);
#endif
