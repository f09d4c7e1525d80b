/*
 * ns.c - --namespace: the proxy's rewriting of request and reply bytes, as
 * etcd 3.4's clientv3/namespace (kv.go, watch.go, lease.go, util.go) does
 * it behind `etcd grpc-proxy start --namespace`, plus Lock and Election
 * (see grpcproxy.h).  This file is the driver: the method table, the
 * decoding (checked), the re-encoding and the key helpers; ns_msgs.c has
 * the rewrite of each message.
 *
 * The rules of clientv3/namespace, which ns_msgs.c follows:
 *   - a key gets the prefix, an empty one too (a nested txn op's empty key
 *     becomes the prefix itself); only the top-level Range, Put and
 *     DeleteRange refuse an empty key, with rpctypes.ErrEmptyKey, which
 *     grpc-go sends from the proxy as UNKNOWN "etcdserver: key is not
 *     provided" (EtcdError carries no gRPC status; seen on the real
 *     binary);
 *   - a range end: empty stays empty; "\0" (every key from key on) becomes
 *     the prefix's end: the prefix with its last byte incremented, carrying
 *     over 0xff bytes without shortening it ("a\xff" gives "b\0"), or "\0"
 *     when every byte is 0xff; any other end gets the prefix;
 *   - reply keys lose the prefix.  Go slices it off blindly (and panics on
 *     a shorter key); we strip it only where it is there and leave other
 *     keys as they came (none can come from a correct upstream), except in
 *     LeaseTimeToLive's keys, where clientv3 drops the keys of other
 *     namespaces.
 *
 * Decoding: protobuf-c, after gp__pb_check: the txn nesting depth
 * (protobuf-c recurses without a limit: 8000 nested txns, 58 KiB of
 * request, exhaust an 8 MiB stack) and what protobuf-c would take but not
 * give back (field number 0).  Re-encoding keeps every field:
 * protobuf-c 1.4 keeps the unknown fields it meets and writes them back
 * after the known ones of the same message.  What can change is only the
 * byte layout of what is kept (field order, a repeated field split in
 * pieces joined, duplicates of a singular field reduced to the last, as
 * protobuf decoders read them anyway), and a string field holding a NUL
 * byte is cut there (protobuf-c keeps strings as C strings; of the
 * messages rewritten here only WatchResponse.cancel_reason is a string).
 */
#include <assert.h>
#include <grpc/status.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "util/err.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

/* What grpc-go says about a message it cannot decode: the server side of
 * a request, the client side of a reply. */
static const char msg_bad_request[] = "grpc: error unmarshalling request";
static const char msg_bad_reply[] =
    "grpc: failed to unmarshal the received message";
/* etcd's answer to a txn nested deeper than --max-txn-ops allows (each
 * level takes one op of its budget), what the member answers too. */
static const char msg_too_deep[] =
    "etcdserver: too many operations in txn request";
static const char msg_nomem[] = "grpc-proxy: out of memory";


/* One method with keys: its messages and their rewrites (NULL: the
 * direction has nothing to rewrite). */
struct ns_method {
    const char *path;
    const ProtobufCMessageDescriptor *req, *resp;
    gp__ns_fn *req_fn, *resp_fn;
};

static const struct ns_method methods[] = {
    {"/etcdserverpb.KV/Range", &etcdserverpb__range_request__descriptor,
     &etcdserverpb__range_response__descriptor, gp__ns_range_req,
     gp__ns_range_resp},
    {"/etcdserverpb.KV/Put", &etcdserverpb__put_request__descriptor,
     &etcdserverpb__put_response__descriptor, gp__ns_put_req, gp__ns_put_resp},
    {"/etcdserverpb.KV/DeleteRange",
     &etcdserverpb__delete_range_request__descriptor,
     &etcdserverpb__delete_range_response__descriptor, gp__ns_delete_req,
     gp__ns_delete_resp},
    {"/etcdserverpb.KV/Txn", &etcdserverpb__txn_request__descriptor,
     &etcdserverpb__txn_response__descriptor, gp__ns_txn_req, gp__ns_txn_resp},
    {"/etcdserverpb.Watch/Watch", &etcdserverpb__watch_request__descriptor,
     &etcdserverpb__watch_response__descriptor, gp__ns_watch_req,
     gp__ns_watch_resp},
    {"/etcdserverpb.Lease/LeaseTimeToLive",
     &etcdserverpb__lease_time_to_live_request__descriptor,
     &etcdserverpb__lease_time_to_live_response__descriptor, NULL,
     gp__ns_ttl_resp},
    {"/v3lockpb.Lock/Lock", &v3lockpb__lock_request__descriptor,
     &v3lockpb__lock_response__descriptor, gp__ns_lock_req, gp__ns_lock_resp},
    {"/v3lockpb.Lock/Unlock", &v3lockpb__unlock_request__descriptor,
     &v3lockpb__unlock_response__descriptor, gp__ns_unlock_req, NULL},
    {"/v3electionpb.Election/Campaign",
     &v3electionpb__campaign_request__descriptor,
     &v3electionpb__campaign_response__descriptor, gp__ns_campaign_req,
     gp__ns_campaign_resp},
    {"/v3electionpb.Election/Proclaim",
     &v3electionpb__proclaim_request__descriptor,
     &v3electionpb__proclaim_response__descriptor, gp__ns_proclaim_req, NULL},
    {"/v3electionpb.Election/Leader", &v3electionpb__leader_request__descriptor,
     &v3electionpb__leader_response__descriptor, gp__ns_leader_req,
     gp__ns_leader_resp},
    {"/v3electionpb.Election/Observe",
     &v3electionpb__leader_request__descriptor,
     &v3electionpb__leader_response__descriptor, gp__ns_leader_req,
     gp__ns_leader_resp},
    {"/v3electionpb.Election/Resign", &v3electionpb__resign_request__descriptor,
     &v3electionpb__resign_response__descriptor, gp__ns_resign_req, NULL},
};

static const struct ns_method *method_find(const char *path)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i].path, path) == 0)
            return &methods[i];
    return NULL;
}

/* --- keys ---------------------------------------------------------------- */

/* replace puts p (n bytes, mem_malloc'd) in place of b's bytes, which
 * are freed with free(): protobuf-c's default allocator made them, and
 * frees p with the message. */
static void replace(struct gp__ns *x, ProtobufCBinaryData *b, uint8_t *p,
                    size_t n)
{
    free(b->data);
    b->data = p;
    b->len = n;
    x->changed = true;
}

void gp__ns_prefix(struct gp__ns *x, ProtobufCBinaryData *key)
{
    assert(x != NULL && key != NULL && x->ns_len > 0);
    uint8_t *p = mem_malloc(x->ns_len + key->len);
    if (p == NULL) {
        x->err = ERR_NOMEM;
        return;
    }
    memcpy(p, x->ns, x->ns_len);
    if (key->len > 0)
        memcpy(p + x->ns_len, key->data, key->len);
    replace(x, key, p, x->ns_len + key->len);
    assert(key->len >= x->ns_len);
}

void gp__ns_prefix_end(struct gp__ns *x, ProtobufCBinaryData *end)
{
    assert(x != NULL && end != NULL);
    if (end->len == 0)
        return;
    if (end->len > 1 || end->data[0] != 0) {
        gp__ns_prefix(x, end);
        return;
    }
    /* "\0": the edge of the keyspace becomes the namespace's end. */
    uint8_t *p = mem_malloc(x->ns_len);
    if (p == NULL) {
        x->err = ERR_NOMEM;
        return;
    }
    memcpy(p, x->ns, x->ns_len);
    size_t n = 1; /* all 0xff: "\0" (p[0] is 0 then) */
    for (size_t i = x->ns_len; i-- > 0;) {
        if (++p[i] != 0) {
            n = x->ns_len;
            break;
        }
    }
    replace(x, end, p, n);
}

bool gp__ns_strip(struct gp__ns *x, ProtobufCBinaryData *key)
{
    assert(x != NULL && key != NULL);
    if (key->len < x->ns_len || memcmp(key->data, x->ns, x->ns_len) != 0)
        return false;
    memmove(key->data, key->data + x->ns_len, key->len - x->ns_len);
    key->len -= x->ns_len;
    x->changed = true;
    return true;
}

void gp__ns_strip_kv(struct gp__ns *x, Mvccpb__KeyValue *kv)
{
    if (kv != NULL)
        gp__ns_strip(x, &kv->key);
}

void gp__ns_refuse(struct gp__ns *x, int code, const char *msg)
{
    assert(msg != NULL);
    if (x->msg == NULL) {
        x->code = code;
        x->msg = msg;
    }
}

/* --- the check before decoding --------------------------------------- */

/* varint reads one base-128 varint at *p (below end); false if cut or
 * longer than 10 bytes. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0)
            return true;
    }
    return false;
}

static bool is_txn(const ProtobufCMessageDescriptor *d)
{
    return d == &etcdserverpb__txn_request__descriptor ||
           d == &etcdserverpb__txn_response__descriptor;
}

/* field_size reads the length of the field of wire type wt that starts
 * at *p into *n (a varint is skipped and *n is 0); false if malformed. */
static bool field_size(uint64_t wt, const uint8_t **p, const uint8_t *end,
                       uint64_t *n)
{
    switch (wt) {
    case 0:
        if (!varint(p, end, n))
            return false;
        *n = 0;
        return true;
    case 1:
        *n = 8;
        break;
    case 5:
        *n = 4;
        break;
    case 2:
        if (!varint(p, end, n))
            return false;
        break;
    default:
        return false; /* groups: neither etcd's protos nor protobuf-c */
    }
    return *n <= (uint64_t)(end - *p);
}

/* wire_walk checks message p[0..len) of type d at txn depth depth. */
static int wire_walk(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                     size_t len, int depth)
{
    const uint8_t *end = p + len;
    uint64_t tag, n;
    if (is_txn(d) && ++depth > GP_TXN_DEPTH_MAX)
        return ERR_TOO_LARGE;
    while (p < end) {
        /* Field 0 is no field (Go refuses it; protobuf-c takes a
         * non-minimal "\x82\x00" as one and writes back what it refuses). */
        if (!varint(&p, end, &tag) || (tag >> 3) == 0 ||
            (tag >> 3) > GP__PB_FIELD_MAX)
            return ERR_CORRUPT;
        if (!field_size(tag & 7, &p, end, &n))
            return ERR_CORRUPT;
        const ProtobufCFieldDescriptor *f =
            (tag & 7) == 2 ? protobuf_c_message_descriptor_get_field(
                                 d, (unsigned)(tag >> 3))
                           : NULL;
        if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
            int rc = wire_walk(f->descriptor, p, (size_t)n, depth);
            if (rc != 0)
                return rc;
        }
        p += n;
    }
    return 0;
}

int gp__pb_check(const ProtobufCMessageDescriptor *d, const uint8_t *b,
                 size_t len)
{
    assert(d != NULL && (b != NULL || len == 0));
    return wire_walk(d, b, len, 0);
}

/* --- the driver ------------------------------------------------------------
 */

/* decode unpacks in as desc's message into *msg_out; on failure fills
 * the error (what grpc-go says of undecodable bytes, or of a txn nested
 * deeper than we decode) and returns false. */
static bool decode(const ProtobufCMessageDescriptor *desc, bool reply,
                   const uint8_t *in, size_t len, ProtobufCMessage **msg_out,
                   int *code_out, const char **msg_err)
{
    int rc = gp__pb_check(desc, in, len);
    *msg_out = rc == 0 ? protobuf_c_message_unpack(desc, NULL, len, in) : NULL;
    if (*msg_out != NULL)
        return true;
    *code_out = GRPC_STATUS_INTERNAL;
    *msg_err = reply ? msg_bad_reply : msg_bad_request;
    if (rc == ERR_TOO_LARGE && !reply) {
        *code_out = GRPC_STATUS_INVALID_ARGUMENT;
        *msg_err = msg_too_deep;
    }
    return false;
}

/* rewrite runs fn on in, decoded as desc's message, and encodes the
 * result when fn changed something. */
static enum gp_ns_result rewrite(const uint8_t *ns, size_t ns_len,
                                 const ProtobufCMessageDescriptor *desc,
                                 gp__ns_fn *fn, bool reply, const uint8_t *in,
                                 size_t len, uint8_t **out, size_t *out_len,
                                 int *code_out, const char **msg_out)
{
    ProtobufCMessage *m = NULL;
    struct gp__ns x = {.ns = ns, .ns_len = ns_len};
    enum gp_ns_result res = GP_NS_SAME;
    if (!decode(desc, reply, in, len, &m, code_out, msg_out))
        return GP_NS_ERROR;
    fn(&x, m);
    if (x.msg == NULL && x.err != 0)
        gp__ns_refuse(&x, GRPC_STATUS_RESOURCE_EXHAUSTED, msg_nomem);
    if (x.msg == NULL && x.changed) {
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t *b = mem_malloc(n ? n : 1);
        if (b != NULL) {
            protobuf_c_message_pack(m, b);
            *out = b;
            *out_len = n;
            res = GP_NS_NEW;
        } else {
            gp__ns_refuse(&x, GRPC_STATUS_RESOURCE_EXHAUSTED, msg_nomem);
        }
    }
    if (x.msg != NULL) {
        *code_out = x.code;
        *msg_out = x.msg;
        res = GP_NS_ERROR;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return res;
}

enum gp_ns_result gp_ns_request(const uint8_t *ns, size_t ns_len,
                                const char *method, const uint8_t *in,
                                size_t len, uint8_t **out, size_t *out_len,
                                int *code_out, const char **msg_out)
{
    assert(ns != NULL && ns_len > 0 && method != NULL);
    assert(out != NULL && out_len != NULL && code_out && msg_out);
    const struct ns_method *m = method_find(method);
    if (m == NULL || m->req_fn == NULL)
        return GP_NS_SAME;
    return rewrite(ns, ns_len, m->req, m->req_fn, false, in, len, out, out_len,
                   code_out, msg_out);
}

enum gp_ns_result gp_ns_reply(const uint8_t *ns, size_t ns_len,
                              const char *method, const uint8_t *in, size_t len,
                              uint8_t **out, size_t *out_len, int *code_out,
                              const char **msg_out)
{
    assert(ns != NULL && ns_len > 0 && method != NULL);
    assert(out != NULL && out_len != NULL && code_out && msg_out);
    const struct ns_method *m = method_find(method);
    if (m == NULL || m->resp_fn == NULL)
        return GP_NS_SAME;
    return rewrite(ns, ns_len, m->resp, m->resp_fn, true, in, len, out, out_len,
                   code_out, msg_out);
}
