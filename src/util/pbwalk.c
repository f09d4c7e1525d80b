/*
 * pbwalk.c - the nesting check of protobuf bytes before decoding; see
 * pbwalk.h.
 */
#include "util/pbwalk.h"

#include <stdbool.h>

#include "util/err.h"

#define PB_FIELD_MAX 536870911u /* 2^29 - 1 */

/* varint reads one varint at *p (before end). */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;

    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if ((b & 0x80) == 0) {
            *v = r;
            return true;
        }
    }
    return false;
}

static int walk(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                const uint8_t *end, int depth, int max_depth)
{
    if (depth > max_depth)
        return ERR_TOO_LARGE;
    while (p < end) {
        uint64_t tag, n = 0;
        const ProtobufCFieldDescriptor *f;

        if (!varint(&p, end, &tag) || (tag >> 3) == 0 ||
            (tag >> 3) > PB_FIELD_MAX)
            return ERR_CORRUPT;
        switch (tag & 7) {
        case 0:
            if (!varint(&p, end, &n))
                return ERR_CORRUPT;
            continue;
        case 1:
            n = 8;
            break;
        case 5:
            n = 4;
            break;
        case 2:
            if (!varint(&p, end, &n))
                return ERR_CORRUPT;
            break;
        default:
            return ERR_CORRUPT; /* groups */
        }
        if (n > (uint64_t)(end - p))
            return ERR_CORRUPT;
        f = (tag & 7) == 2 ? protobuf_c_message_descriptor_get_field(
                                 d, (unsigned)(tag >> 3))
                           : NULL;
        if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
            int rc = walk(f->descriptor, p, p + n, depth + 1, max_depth);
            if (rc != 0)
                return rc;
        }
        p += n;
    }
    return 0;
}

int pb_walk_check(const ProtobufCMessageDescriptor *d, const uint8_t *b,
                  size_t len, int max_depth)
{
    if (len == 0)
        return 0;
    return walk(d, b, b + len, 1, max_depth);
}
