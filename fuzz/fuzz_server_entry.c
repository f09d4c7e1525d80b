/*
 * fuzz_server_entry.c - goal: the look into a raft entry that keeps
 * Compactions out of the speculative apply (server__entry_compacts, a walk
 * over an encoded cetcdpb.InternalRequest's top-level fields) takes any
 * bytes without reading past them, and never misses a Compaction that
 * protobuf-c's decoder finds (it may answer true for more: bytes that do
 * not parse, a field 6 a later oneof member replaced).  Method: the input
 * is one entry's data.
 */
#include <stdint.h>
#include <stdlib.h>

#include "server/server_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool compacts = server__entry_compacts(data, size);
    Cetcdpb__InternalRequest *r =
        cetcdpb__internal_request__unpack(NULL, size, data);
    if (r == NULL)
        return 0;
    if (r->request_case == CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION &&
        !compacts)
        abort();
    cetcdpb__internal_request__free_unpacked(r, NULL);
    return 0;
}
