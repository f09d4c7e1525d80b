/*
 * bbolt_int.h - private helpers of the bbolt module: little-endian
 * integers (bbolt writes its structs in the machine's order, which is
 * little-endian wherever etcd runs) and the meta checksum.
 */
#ifndef CETCD_BBOLT_BBOLT_INT_H
#define CETCD_BBOLT_BBOLT_INT_H

#include <stddef.h>
#include <stdint.h>

static inline void bbolt__put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void bbolt__put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void bbolt__put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t bbolt__get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t bbolt__get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint64_t bbolt__get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* FNV-1a, 64 bits: bbolt's meta checksum (Go's hash/fnv New64a). */
static inline uint64_t bbolt__fnv64a(const uint8_t *p, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* bbolt__meta_image writes meta page `id` (0 or 1) into page (4096 bytes;
 * writer.c). */
void bbolt__meta_image(uint8_t *page, uint64_t id, uint64_t root,
                       uint64_t freelist, uint64_t pages, uint64_t txid);

#endif
