/*
 * fuzz_json_decode.c - goal: the proto3 JSON decoder (src/json) takes any
 * bytes as any request the /v3 gateway reads without crashing, hanging,
 * leaking or reading past them; what it accepts is a valid message that
 * the encoder writes, and that text reads back and is written again the
 * same from the second round on (the codec is stable), and the message packs as protobuf.
 *
 * Method: the first input byte picks the request type (the gateway's
 * routes' types, by index); the rest is the body.  Seeds:
 * fuzz/corpus/json_decode (bodies of etcd's gateway requests, with the
 * type byte first).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "json/json.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

static const ProtobufCMessageDescriptor *const types[] = {
    &etcdserverpb__range_request__descriptor,
    &etcdserverpb__put_request__descriptor,
    &etcdserverpb__delete_range_request__descriptor,
    &etcdserverpb__txn_request__descriptor,
    &etcdserverpb__compaction_request__descriptor,
    &etcdserverpb__watch_request__descriptor,
    &etcdserverpb__lease_grant_request__descriptor,
    &etcdserverpb__lease_revoke_request__descriptor,
    &etcdserverpb__lease_time_to_live_request__descriptor,
    &etcdserverpb__member_add_request__descriptor,
    &etcdserverpb__member_update_request__descriptor,
    &etcdserverpb__alarm_request__descriptor,
    &etcdserverpb__move_leader_request__descriptor,
    &v3lockpb__lock_request__descriptor,
    &v3electionpb__proclaim_request__descriptor,
    &etcdserverpb__status_response__descriptor,
};
#define NTYPES (sizeof types / sizeof types[0])

static char *encode(const ProtobufCMessage *m, size_t *n)
{
    struct json_buf b = {0};
    if (json_pb_encode(m, &b) != 0) {
        mem_free(b.p);
        return NULL;
    }
    *n = b.n;
    return b.p;
}

/* reread decodes text (which must decode) and encodes it again. */
static char *reread(const ProtobufCMessageDescriptor *d, const char *text,
                    size_t n, size_t *n_out)
{
    ProtobufCMessage *m = NULL;
    char err[JSON_PB_ERR_MAX];
    if (json_pb_decode(d, text, n, &m, NULL, err, sizeof err) != 0)
        abort();
    char *t = encode(m, n_out);
    protobuf_c_message_free_unpacked(m, NULL);
    if (t == NULL)
        abort();
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *d = types[data[0] % NTYPES];
    /* a copy of exactly the body, so ASan sees any read past it */
    char *body = malloc(size - 1 ? size - 1 : 1);
    memcpy(body, data + 1, size - 1);
    ProtobufCMessage *m = NULL;
    char err[JSON_PB_ERR_MAX];
    int rc = json_pb_decode(d, body, size - 1, &m, NULL, err, sizeof err);
    free(body);
    if (rc != 0) {
        if (m != NULL || strlen(err) >= sizeof err)
            abort();
        return 0;
    }
    size_t packed = protobuf_c_message_get_packed_size(m);
    uint8_t *pb = malloc(packed ? packed : 1);
    protobuf_c_message_pack(m, pb);
    free(pb);
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *t1 = encode(m, &n1);
    protobuf_c_message_free_unpacked(m, NULL);
    if (t1 == NULL)
        return 0; /* out of memory only */
    /* What we write, we read.  The first text may escape invalid UTF-8 as
     * \ufffd (Go's rule), which reads back as a real U+FFFD written
     * as it is: from the second text on, the text must not change. */
    char *t2 = reread(d, t1, n1, &n2);
    char *t3 = reread(d, t2, n2, &n3);
    if (n2 != n3 || memcmp(t2, t3, n2) != 0)
        abort();
    mem_free(t1);
    mem_free(t2);
    mem_free(t3);
    return 0;
}
