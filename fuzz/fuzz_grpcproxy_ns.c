/*
 * fuzz_grpcproxy_ns.c - goal: the gRPC proxy's decoders of client and
 * upstream bytes take anything without crashing, leaking or answering out
 * of contract: --namespace's rewriting (grpcproxy/ns.c, ns_msgs.c) of
 * every method's requests and replies, and, since it decodes the same
 * bytes, the KV cache (cache.c, cache_ivl.c).
 *
 * Method.  Byte 0 chooses:
 *   - bit 7 clear: one namespace rewrite.  Bits 0-5 pick the method (of
 *     a list holding every rewritten method and a few passed-through
 *     ones), bit 6 the direction (reply when set).  Byte 1 gives the
 *     prefix's length (1 + byte % 8, as much as the input has), the
 *     prefix follows, the rest is the message.  Checked: SAME, NEW with
 *     bytes that decode as the method's message again (and, for a
 *     request, rewrite again without error), or ERROR with a known gRPC
 *     code and a message.
 *   - bit 7 set: a cache of at most 8 entries and 4 KiB, driven by the
 *     records that follow: one op byte (op % 6: lookup, range done, put,
 *     delete, txn done, compact), then for each message the op takes
 *     (two for range and txn done: request, reply) a 2-byte little-endian
 *     length and that many bytes.  Checked: the bounds, a hit's bytes
 *     being the reply just stored (until a compaction, after which an
 *     older entry may stay in place), and that a put or delete of everything
 *     leaves no revision-0 entry to hit.
 * Seeds: fuzz/corpus/grpcproxy_ns (valid messages of each method, made
 * with etcd's Python stubs, and cache scripts).
 */
#include <grpc/status.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

struct method {
    const char *path;
    const ProtobufCMessageDescriptor *req, *resp;
};

static const struct method methods[] = {
    {"/etcdserverpb.KV/Range", &etcdserverpb__range_request__descriptor,
     &etcdserverpb__range_response__descriptor},
    {"/etcdserverpb.KV/Put", &etcdserverpb__put_request__descriptor,
     &etcdserverpb__put_response__descriptor},
    {"/etcdserverpb.KV/DeleteRange",
     &etcdserverpb__delete_range_request__descriptor,
     &etcdserverpb__delete_range_response__descriptor},
    {"/etcdserverpb.KV/Txn", &etcdserverpb__txn_request__descriptor,
     &etcdserverpb__txn_response__descriptor},
    {"/etcdserverpb.Watch/Watch", &etcdserverpb__watch_request__descriptor,
     &etcdserverpb__watch_response__descriptor},
    {"/etcdserverpb.Lease/LeaseTimeToLive",
     &etcdserverpb__lease_time_to_live_request__descriptor,
     &etcdserverpb__lease_time_to_live_response__descriptor},
    {"/v3lockpb.Lock/Lock", &v3lockpb__lock_request__descriptor,
     &v3lockpb__lock_response__descriptor},
    {"/v3lockpb.Lock/Unlock", &v3lockpb__unlock_request__descriptor,
     &v3lockpb__unlock_response__descriptor},
    {"/v3electionpb.Election/Campaign",
     &v3electionpb__campaign_request__descriptor,
     &v3electionpb__campaign_response__descriptor},
    {"/v3electionpb.Election/Proclaim",
     &v3electionpb__proclaim_request__descriptor,
     &v3electionpb__proclaim_response__descriptor},
    {"/v3electionpb.Election/Leader", &v3electionpb__leader_request__descriptor,
     &v3electionpb__leader_response__descriptor},
    {"/v3electionpb.Election/Observe",
     &v3electionpb__leader_request__descriptor,
     &v3electionpb__leader_response__descriptor},
    {"/v3electionpb.Election/Resign", &v3electionpb__resign_request__descriptor,
     &v3electionpb__resign_response__descriptor},
    {"/etcdserverpb.KV/Compact", NULL, NULL},
    {"/etcdserverpb.Lease/LeaseLeases", NULL, NULL},
    {"/etcdserverpb.Maintenance/Status", NULL, NULL},
};
#define N_METHODS (sizeof methods / sizeof methods[0])

static bool known_code(int code)
{
    return code == GRPC_STATUS_UNKNOWN || code == GRPC_STATUS_INTERNAL ||
           code == GRPC_STATUS_INVALID_ARGUMENT ||
           code == GRPC_STATUS_RESOURCE_EXHAUSTED;
}

/* one_ns runs one rewrite and checks its contract. */
static void one_ns(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    const struct method *m = &methods[(data[0] & 0x3f) % N_METHODS];
    bool reply = (data[0] & 0x40) != 0;
    size_t ns_len = 1 + data[1] % 8;
    if (ns_len > size - 2)
        return;
    const uint8_t *ns = data + 2, *msg = ns + ns_len;
    size_t len = size - 2 - ns_len;
    uint8_t *out = NULL, *again = NULL;
    size_t out_len = 0, again_len = 0;
    int code = -1;
    const char *err = NULL;
    enum gp_ns_result r = reply ? gp_ns_reply(ns, ns_len, m->path, msg, len,
                                              &out, &out_len, &code, &err)
                                : gp_ns_request(ns, ns_len, m->path, msg, len,
                                                &out, &out_len, &code, &err);
    if (r == GP_NS_ERROR && (!known_code(code) || err == NULL))
        abort();
    if (r != GP_NS_NEW) {
        if (out != NULL)
            abort();
        return;
    }
    const ProtobufCMessageDescriptor *d = reply ? m->resp : m->req;
    ProtobufCMessage *back = protobuf_c_message_unpack(d, NULL, out_len, out);
    if (d == NULL || back == NULL)
        abort();
    protobuf_c_message_free_unpacked(back, NULL);
    /* A rewritten request is a valid request: prefixing it again works
     * (its keys are no longer empty). */
    if (!reply &&
        gp_ns_request(ns, ns_len, m->path, out, out_len, &again, &again_len,
                      &code, &err) == GP_NS_ERROR &&
        code != GRPC_STATUS_RESOURCE_EXHAUSTED)
        abort();
    free(again);
    free(out);
}

/* take reads one length-prefixed message of the cache script. */
static bool take(const uint8_t **p, const uint8_t *end, const uint8_t **msg,
                 size_t *len)
{
    if (end - *p < 2)
        return false;
    size_t n = (size_t)(*p)[0] | (size_t)(*p)[1] << 8;
    *p += 2;
    if (n > (size_t)(end - *p))
        n = (size_t)(end - *p);
    *msg = *p;
    *len = n;
    *p += n;
    return true;
}

/* everything_gone: after a delete of every key, no revision-0 read of
 * key "a" hits. */
static void everything_gone(struct gp_cache *c)
{
    static const uint8_t del_all[] = {0x0a, 0x01, 0x00, 0x12, 0x01, 0x00};
    static const uint8_t get_a[] = {0x0a, 0x01, 'a', 0x38, 0x01};
    uint8_t *resp = NULL;
    size_t len = 0;
    gp_cache_delete(c, del_all, sizeof del_all);
    if (gp_cache_range_lookup(c, "", get_a, sizeof get_a, &resp, &len) ==
        GP_CACHE_HIT)
        abort();
}

/* cache_op runs one record; false at the end of the input.  *compacted:
 * a compaction was tried (an entry then may outlive a newer reply). */
static bool cache_op(struct gp_cache *c, const uint8_t **p, const uint8_t *end,
                     bool *compacted)
{
    const uint8_t *a, *b;
    size_t al, bl;
    uint8_t *resp = NULL;
    size_t len = 0;
    if (*p >= end)
        return false;
    int op = *(*p)++ % 6;
    if (!take(p, end, &a, &al))
        return false;
    switch (op) {
    case 0:
        if (gp_cache_range_lookup(c, "", a, al, &resp, &len) == GP_CACHE_HIT &&
            (resp == NULL && len > 0))
            abort();
        free(resp);
        break;
    case 1:
        if (!take(p, end, &b, &bl))
            return false;
        gp_cache_range_done(c, "", a, al, b, bl);
        /* Right after adding, a hit gives exactly these bytes. */
        if (gp_cache_range_lookup(c, "", a, al, &resp, &len) == GP_CACHE_HIT &&
            !*compacted && (len != bl || (bl > 0 && memcmp(resp, b, bl) != 0)))
            abort();
        free(resp);
        break;
    case 2:
        gp_cache_put(c, a, al);
        break;
    case 3:
        gp_cache_delete(c, a, al);
        break;
    case 4:
        if (!take(p, end, &b, &bl))
            return false;
        gp_cache_txn_done(c, "", a, al, b, bl);
        break;
    default:
        gp_cache_compact_done(c, a, al);
        *compacted = true;
        break;
    }
    struct gp_cache_stats st;
    gp_cache_stats(c, &st);
    if (st.keys > 8)
        abort();
    return true;
}

static void cache_script(const uint8_t *data, size_t size)
{
    struct gp_cache *c = NULL;
    if (gp_cache_open(8, 4096, &c) != 0)
        abort();
    const uint8_t *p = data, *end = data + size;
    bool compacted = false;
    for (int i = 0; i < 64 && cache_op(c, &p, end, &compacted); i++)
        ;
    everything_gone(c);
    gp_cache_close(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 0x80)
        cache_script(data + 1, size - 1);
    else
        one_ns(data, size);
    return 0;
}
