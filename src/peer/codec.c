/*
 * codec.c - PeerBatch and SnapshotChunk on the wire, and the checks every
 * receiver applies to them.
 *
 * A PeerBatch is packed by hand instead of through protobuf-c: that needs
 * no array of ProtobufCBinaryData per batch and copies each encoded
 * message once, straight into the gRPC slice.  The encoding is plain
 * proto3 (fields 1-3 as varints, omitted when 0; field 4 repeated,
 * length-delimited), so protobuf-c unpacks it; test_peer checks that.
 * Decoding goes through protobuf-c, which bounds-checks everything; each
 * message is then decoded with raft_msg_decode, which does the same.
 */
#include <assert.h>
#include <string.h>
#include <time.h>

#include "dial/dial.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/varint.h"

/* field_size: a varint field (tag byte + value), 0 when omitted. */
static size_t field_size(uint64_t v)
{
    return v == 0 ? 0 : 1 + varint_len(v);
}

size_t peer__batch_size(const struct peer__hdr *h, const struct peer__buf *msgs,
                        size_t n)
{
    size_t total = field_size(h->cluster_id) + field_size(h->from) +
                   field_size(h->to);
    for (size_t i = 0; i < n; i++)
        total += 1 + varint_len(msgs[i].len) + msgs[i].len;
    return total;
}

size_t peer__batch_pack(const struct peer__hdr *h,
                        const struct peer__buf *msgs, size_t n, uint8_t *out)
{
    const uint64_t ids[3] = {h->cluster_id, h->from, h->to};
    uint8_t *p = out;

    assert(h != NULL && out != NULL);
    for (int f = 0; f < 3; f++) {
        if (ids[f] == 0)
            continue;
        *p++ = (uint8_t)(((f + 1) << 3) | 0); /* field f+1, varint */
        p += varint_put(p, ids[f]);
    }
    for (size_t i = 0; i < n; i++) {
        *p++ = (4 << 3) | 2; /* field 4, length-delimited */
        p += varint_put(p, msgs[i].len);
        if (msgs[i].len > 0)
            memcpy(p, msgs[i].data, msgs[i].len);
        p += msgs[i].len;
    }
    assert((size_t)(p - out) == peer__batch_size(h, msgs, n));
    return (size_t)(p - out);
}

void peer__batch_free(struct peer__batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        raft_msg_release(&b->msgs[i]);
    mem_free(b->msgs);
    if (b->pb != NULL)
        cetcdpb__peer_batch__free_unpacked(b->pb, NULL);
    memset(b, 0, sizeof(*b));
}

int peer__batch_decode(const uint8_t *buf, size_t len, struct peer__batch *out)
{
    assert(out != NULL);
    memset(out, 0, sizeof(*out));
    out->pb = cetcdpb__peer_batch__unpack(NULL, len, buf);
    if (out->pb == NULL)
        return ERR_CORRUPT;
    if (out->pb->n_msgs > PEER_BATCH_MSGS_MAX) {
        peer__batch_free(out);
        return ERR_TOO_LARGE;
    }
    if (out->pb->n_msgs > 0) {
        out->msgs = mem_calloc(out->pb->n_msgs, sizeof(*out->msgs));
        if (out->msgs == NULL) {
            peer__batch_free(out);
            return ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < out->pb->n_msgs; i++) {
        const ProtobufCBinaryData *d = &out->pb->msgs[i];
        int rv = raft_msg_decode(d->data, d->len, &out->msgs[i]);
        if (rv != 0) {
            peer__batch_free(out);
            return rv;
        }
        out->n++;
    }
    assert(out->n == out->pb->n_msgs);
    return 0;
}

grpc_status_code peer__hdr_check(const struct peer__hdr *got,
                                 uint64_t cluster_id, raft_id self,
                                 enum peer__sender sender,
                                 const char **why_out)
{
    assert(got != NULL && why_out != NULL);
    assert(cluster_id != 0 && self != 0);
    *why_out = NULL;
    if (got->cluster_id != cluster_id) {
        *why_out = "cluster ID mismatch";
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    if (got->to != self) {
        *why_out = "member ID mismatch: not the receiver";
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    if (got->from == 0) {
        *why_out = "sender member ID missing";
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (sender == PEER__SENDER_REMOVED) {
        *why_out = PEER_REMOVED_MSG;
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    if (sender != PEER__SENDER_PEER) {
        *why_out = "member unknown: sender is not a member of this cluster";
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    return GRPC_STATUS_OK;
}

bool peer__status_removed(grpc_status_code code, const char *details,
                          size_t len)
{
    assert(details != NULL || len == 0);
    /* Both the code and the exact message: PERMISSION_DENIED alone could
     * come from something else on the path (a proxy, an interceptor). */
    return code == GRPC_STATUS_PERMISSION_DENIED &&
           len == sizeof(PEER_REMOVED_MSG) - 1 &&
           memcmp(details, PEER_REMOVED_MSG, len) == 0;
}

int peer__call_err(grpc_status_code code, const char *details, size_t len,
                   bool stopping)
{
    assert(details != NULL || len == 0);
    if (code == GRPC_STATUS_OK)
        return 0;
    if (stopping)
        return ERR_STOPPED;
    if (peer__status_removed(code, details, len))
        return ERR_MEMBER_REMOVED;
    switch (code) {
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        return ERR_TIMEOUT;
    case GRPC_STATUS_UNIMPLEMENTED:
        return ERR_UNSUPPORTED;
    default:
        return ERR_IO; /* unreachable, refused, or the peer failed */
    }
}

grpc_status_code peer__msgs_check(const struct raft_msg *msgs, size_t n,
                                  raft_id from, raft_id to,
                                  const char **why_out)
{
    assert(why_out != NULL);
    assert(n == 0 || msgs != NULL);
    *why_out = NULL;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].from != from || msgs[i].to != to) {
            *why_out = "raft message addressed differently from its batch";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        if (msgs[i].type == RAFT_MSG_SNAP) {
            *why_out = "snapshot message outside a Snapshot call";
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
    }
    return GRPC_STATUS_OK;
}

int peer__chunk_decode(const uint8_t *buf, size_t len,
                       Cetcdpb__SnapshotChunk **out, struct raft_msg *msg_out,
                       bool *has_msg_out)
{
    assert(out != NULL && msg_out != NULL && has_msg_out != NULL);
    *has_msg_out = false;
    *out = cetcdpb__snapshot_chunk__unpack(NULL, len, buf);
    if (*out == NULL)
        return ERR_CORRUPT;
    Cetcdpb__SnapshotChunk *c = *out;
    int rv = 0;
    if (c->last && c->sha256.len != PEER__SHA256_LEN)
        rv = ERR_CORRUPT;
    if (rv == 0 && c->msg.len > 0) {
        rv = raft_msg_decode(c->msg.data, c->msg.len, msg_out);
        if (rv == 0 && msg_out->type != RAFT_MSG_SNAP) {
            raft_msg_release(msg_out);
            rv = ERR_CORRUPT;
        }
        *has_msg_out = rv == 0;
    }
    if (rv != 0) {
        cetcdpb__snapshot_chunk__free_unpacked(c, NULL);
        *out = NULL;
    }
    return rv;
}

int peer__url_parse(const char *url, char *out, size_t cap, bool *tls_out)
{
    enum dial_security sec;
    assert(out != NULL && cap > 0 && tls_out != NULL);
    *tls_out = false;
    if (url == NULL || strlen(url) > PEER_URL_LEN_MAX)
        return ERR_INVAL;
    int rv = dial_url_parse(url, strlen(url), out, cap, &sec);
    if (rv == 0 && sec == DIAL_SECURITY_DEFAULT)
        rv = ERR_INVAL; /* a peer URL names its scheme */
    *tls_out = rv == 0 && sec == DIAL_SECURITY_TLS;
    return rv;
}

int peer__url_target(const char *url, char *out, size_t cap)
{
    bool tls;
    int rv = peer__url_parse(url, out, cap, &tls);
    assert(rv != 0 || out[0] != '\0');
    return rv == 0 && tls ? ERR_UNSUPPORTED : rv;
}

int64_t peer__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
