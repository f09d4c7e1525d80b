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
 * The same body read in pieces with json_pb_reader (a body that stays
 * open, api/gw_stream.c open_more) gives the same requests, in the same
 * order, whatever the pieces' size, and stops where the whole read does.
 *
 * Method: the first input byte picks the request type (the stream
 * routes' types, its low 3 bits) and the pieces' size (1 + the rest);
 * the rest is the body, read as gw_stream.c reads it.
 * Seeds: fuzz/corpus/json_stream (bodies sent to etcd 3.4.23's gateway
 * streams in tests/integration/test_gateway.py, type byte first).
 */
#include <stdbool.h>
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

/* text: m as JSON (mem_free it), or NULL when out of memory. */
static char *text(const ProtobufCMessage *m, size_t *n)
{
    struct json_buf b = {0};
    if (json_pb_encode(m, &b) != 0 || b.nomem) {
        mem_free(b.p);
        return NULL;
    }
    *n = b.n;
    return b.p;
}

/* pieces reads body[0..n) with a json_pb_reader in pieces of step bytes;
 * returns how many requests it took, each compared with want[i]. */
static size_t pieces(const ProtobufCMessageDescriptor *d, const char *body,
                     size_t n, size_t step, char **want, size_t *want_n,
                     size_t wants)
{
    struct json_pb_reader *r;
    if (json_pb_reader_new(&r) != 0)
        return SIZE_MAX;
    size_t got = 0, off = 0;
    bool stop = false;
    while (!stop) {
        size_t k = n - off < step ? n - off : step;
        bool end = off + k == n;
        size_t used_total = 0;
        for (;;) {
            ProtobufCMessage *m = NULL;
            char err[JSON_PB_ERR_MAX];
            size_t used = 0;
            int rc = json_pb_reader_next(r, d, body + off + used_total,
                                         k - used_total, end, 1u << 20,
                                         &used, &m, err, sizeof err);
            if (rc == ERR_MORE)
                break;
            if (rc != 0) {
                if (rc == ERR_NOMEM)
                    got = SIZE_MAX;
                stop = true;
                break;
            }
            if (used > k - used_total)
                abort();
            used_total += used;
            size_t tn = 0;
            char *t = text(m, &tn);
            protobuf_c_message_free_unpacked(m, NULL);
            if (t == NULL || got >= wants) {
                if (t != NULL)
                    abort(); /* more than the whole read took */
                mem_free(t);
                json_pb_reader_free(r);
                return SIZE_MAX;
            }
            if (want[got] != NULL &&
                (tn != want_n[got] || memcmp(t, want[got], tn) != 0))
                abort(); /* another request than the whole read's */
            mem_free(t);
            got++;
        }
        off += k;
        if (end)
            stop = true;
    }
    json_pb_reader_free(r);
    return got;
}

#define WANT_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *d = types[(data[0] & 7) % NTYPES];
    size_t step = 1 + (data[0] >> 3);
    char *want[WANT_MAX];
    size_t want_n[WANT_MAX], wants = 0;
    bool nomem = false;
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
        if (wants < WANT_MAX) {
            want[wants] = text(m, &want_n[wants]);
            nomem |= want[wants] == NULL;
            wants++;
        }
        protobuf_c_message_free_unpacked(m, NULL);
    }
    if (wants < WANT_MAX && !nomem) {
        size_t got = pieces(d, body, n, step, want, want_n, wants);
        if (got != SIZE_MAX && got != wants)
            abort(); /* stopped elsewhere than the whole read */
    }
    for (size_t i = 0; i < wants; i++)
        mem_free(want[i]);
    free(body);
    return 0;
}
