/*
 * fuzz_peer.c - libFuzzer target for what a member decodes from its peers:
 * PeerBatch (protobuf-c unpack, then raft_msg_decode of every message,
 * then the identity and addressing checks) and SnapshotChunk (unpack,
 * the MsgSnap inside, the SHA-256 field).  Nothing may crash, leak or
 * trip a sanitizer; bad input must come back as an error code.
 *
 * The first input byte picks the decoder.  A batch that decodes is
 * re-encoded (raft_msg_encode of each message, peer__batch_pack) and
 * decoded again: the second decode must succeed with the same messages,
 * which checks the encoders against the decoders on odd but valid input.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "peer/peer_int.h"
#include "util/err.h"
#include "util/mem.h"

static void reencode(const struct peer__batch *b)
{
    struct peer__buf *bufs = calloc(b->n + 1, sizeof(*bufs));
    assert(bufs != NULL);
    for (size_t i = 0; i < b->n; i++) {
        bufs[i].len = raft_msg_encoded_size(&b->msgs[i]);
        bufs[i].data = malloc(bufs[i].len);
        size_t w = 0;
        int rv = raft_msg_encode(&b->msgs[i], bufs[i].data, bufs[i].len, &w);
        assert(rv == 0 && w == bufs[i].len);
        (void)rv;
    }
    struct peer__hdr h = {b->pb->cluster_id, b->pb->from, b->pb->to};
    size_t len = peer__batch_size(&h, bufs, b->n);
    uint8_t *out = malloc(len + 1);
    assert(peer__batch_pack(&h, bufs, b->n, out) == len);
    struct peer__batch again;
    int rv = peer__batch_decode(out, len, &again);
    assert(rv == 0 && again.n == b->n);
    for (size_t i = 0; i < b->n; i++) {
        assert(again.msgs[i].type == b->msgs[i].type);
        assert(again.msgs[i].index == b->msgs[i].index);
        assert(again.msgs[i].n_entries == b->msgs[i].n_entries);
        free(bufs[i].data);
    }
    (void)rv;
    peer__batch_free(&again);
    free(out);
    free(bufs);
}

static void fuzz_batch(const uint8_t *p, size_t n)
{
    struct peer__batch b;
    if (peer__batch_decode(p, n, &b) != 0) {
        assert(b.pb == NULL && b.msgs == NULL);
        return;
    }
    struct peer__hdr h = {b.pb->cluster_id, b.pb->from, b.pb->to};
    const char *why = NULL;
    if (peer__hdr_check(&h, 7, 1, true, &why) != GRPC_STATUS_OK)
        assert(why != NULL);
    if (peer__msgs_check(b.msgs, b.n, h.from, h.to, &why) != GRPC_STATUS_OK)
        assert(why != NULL);
    reencode(&b);
    peer__batch_free(&b);
}

static void fuzz_chunk(const uint8_t *p, size_t n)
{
    Cetcdpb__SnapshotChunk *c = NULL;
    struct raft_msg m;
    bool has = false;
    if (peer__chunk_decode(p, n, &c, &m, &has) != 0) {
        assert(c == NULL && !has);
        return;
    }
    assert(!c->last || c->sha256.len == PEER__SHA256_LEN);
    if (has) {
        assert(m.type == RAFT_MSG_SNAP);
        raft_msg_release(&m);
    }
    cetcdpb__snapshot_chunk__free_unpacked(c, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzz_batch(data + 1, size - 1);
    else
        fuzz_chunk(data + 1, size - 1);
    return 0;
}
