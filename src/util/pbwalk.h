/*
 * pbwalk.h - a look at protobuf bytes before protobuf-c decodes them.
 *
 * protobuf-c's decoder recurses once per nested message with no limit of
 * its own: a TxnRequest nested 8000 deep (58 KiB, far below
 * --max-request-bytes) overflows an 8 MiB thread stack.  pb_walk_check
 * walks the wire bytes of a message of type d with its descriptors,
 * iteratively for the bytes and with recursion bounded by max_depth, and
 * says whether unpacking them is safe:
 *   0              the nesting is at most max_depth messages deep (the
 *                  message itself is depth 1) and every field is whole
 *   ERR_TOO_LARGE  nested deeper than max_depth
 *   ERR_CORRUPT    a field cut short, a group, a field number 0 or above
 *                  2^29-1 (Go refuses them; protobuf-c takes some and
 *                  cannot re-encode them)
 * Only the fields d's descriptors name as messages are entered; unknown
 * fields are skipped whole.  Allocates nothing; reentrant.
 */
#ifndef CETCD_UTIL_PBWALK_H
#define CETCD_UTIL_PBWALK_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

int pb_walk_check(const ProtobufCMessageDescriptor *d, const uint8_t *b,
                  size_t len, int max_depth);

#endif
