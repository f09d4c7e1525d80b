/*
 * fuzz_json_stream.c - goal: the body of a /v3 gateway stream
 * (api/gw_stream.c: /v3/watch and /v3/lease/keepalive take a sequence of
 * JSON requests, concatenated or newline-delimited; the other stream
 * routes one) read with json_pb_decode_next takes any bytes without
 * crashing, hanging, leaking or reading past them: every step makes
 * progress within what is left, ends at the end (ERR_NOTFOUND) or at a
 * refusal with a message, and each accepted request encodes and reads
 * back.
 *
 * Method: the first input byte picks the request type (the stream
 * routes' types); the rest is the body, read as gw_stream.c reads it.
 * Seeds: fuzz/corpus/json_stream (bodies sent to etcd 3.4.23's gateway
 * streams in tests/integration/test_gateway.py, type byte first).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "json/json.h"
#include "util/err.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

static const ProtobufCMessageDescriptor *const types[] = {
    &etcdserverpb__watch_request__descriptor,
    &etcdserverpb__lease_keep_alive_request__descriptor,
    &v3electionpb__leader_request__descriptor,
    &etcdserverpb__snapshot_request__descriptor,
    &v3lockpb__lock_request__descriptor,
    &v3electionpb__campaign_request__descriptor,
};
#define NTYPES (sizeof types / sizeof types[0])

/* check: m encodes, and the text reads back as the same type. */
static void check(const ProtobufCMessageDescriptor *d,
                  const ProtobufCMessage *m)
{
    struct json_buf b = {0};
    if (json_pb_encode(m, &b) != 0 || b.nomem) {
        mem_free(b.p);
        return; /* out of memory only */
    }
    ProtobufCMessage *again = NULL;
    char err[JSON_PB_ERR_MAX];
    if (json_pb_decode(d, b.p, b.n, &again, NULL, err, sizeof err) != 0)
        abort();
    protobuf_c_message_free_unpacked(again, NULL);
    mem_free(b.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *d = types[data[0] % NTYPES];
    size_t n = size - 1;
    /* a copy of exactly the body, so ASan sees any read past it */
    char *body = malloc(n ? n : 1);
    memcpy(body, data + 1, n);
    size_t off = 0;
    for (;;) {
        ProtobufCMessage *m = NULL;
        char err[JSON_PB_ERR_MAX];
        size_t used = 0;
        int rc = json_pb_decode_next(d, body + off, n - off, &used, &m, err,
                                     sizeof err);
        if (rc == ERR_NOTFOUND || rc == ERR_NOMEM)
            break;
        if (rc != 0) {
            if (m != NULL || err[0] == '\0' || strlen(err) >= sizeof err)
                abort();
            break;
        }
        if (used == 0 || used > n - off)
            abort(); /* no progress, or past the body */
        off += used;
        check(d, m);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    free(body);
    return 0;
}
