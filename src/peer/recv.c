/*
 * recv.c - the receiving side of /cetcdpb.Peer/Stream.
 *
 * Runs on the api_server's CQ threads.  Each batch is decoded and checked
 * (cluster, receiver, known sender, every message addressed as its batch)
 * before any of it reaches on_messages; a bad batch ends the stream with
 * a status and nothing of it is delivered.  The first accepted batch is
 * answered with one PeerAck so the sender knows the stream is up.
 */
#include <assert.h>
#include <string.h>

#include "api/rpc.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

/* One incoming stream.  Owned by the stream's CQ thread (callbacks of one
 * stream never run concurrently); freed in on_close. */
struct in_stream {
    raft_id from;  /* sender named by the first batch, 0 before */
    bool refused;  /* finished with an error; ignore the rest */
    bool acked;    /* PeerAck sent */
};

static void in_open(struct api_stream *stream, void *ctx)
{
    struct in_stream *st = mem_calloc(1, sizeof(*st));
    api_stream_data_set(stream, st);
    if (st == NULL)
        api_stream_finish(stream, GRPC_STATUS_RESOURCE_EXHAUSTED,
                          "out of memory");
}

static void refuse(struct api_stream *stream, struct in_stream *st,
                   grpc_status_code code, const char *why, raft_id from)
{
    assert(code != GRPC_STATUS_OK && why != NULL);
    log_warn("peer", "refused stream from %016llx: %s",
             (unsigned long long)from, why);
    st->refused = true;
    api_stream_finish(stream, code, why);
}

/* check validates b against t and the stream so far; OK or a status. */
static grpc_status_code check(struct peer_transport *t, struct in_stream *st,
                              const struct peer__batch *b, const char **why)
{
    struct peer__hdr h = {b->pb->cluster_id, b->pb->from, b->pb->to};
    bool known = h.from != 0 && peer__known(t, h.from);
    grpc_status_code code =
        peer__hdr_check(&h, t->cluster_id, t->self, known, why);
    if (code != GRPC_STATUS_OK)
        return code;
    if (st->from != 0 && st->from != h.from) {
        *why = "sender changed within a stream";
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    return peer__msgs_check(b->msgs, b->n, h.from, h.to, why);
}

static void in_message(struct api_stream *stream, const uint8_t *msg,
                       size_t len, void *ctx)
{
    struct peer_transport *t = ctx;
    struct in_stream *st = api_stream_data_get(stream);
    if (st == NULL || st->refused)
        return;
    if (msg == NULL) { /* The sender closed its side: end cleanly. */
        api_stream_finish(stream, GRPC_STATUS_OK, NULL);
        return;
    }
    struct peer__batch b;
    int rv = peer__batch_decode(msg, len, &b);
    if (rv != 0) {
        refuse(stream, st, rv == ERR_NOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED
                                           : GRPC_STATUS_INVALID_ARGUMENT,
               rv == ERR_NOMEM ? "out of memory" : "undecodable PeerBatch",
               st->from);
        return;
    }
    const char *why = NULL;
    grpc_status_code code = check(t, st, &b, &why);
    if (code != GRPC_STATUS_OK) {
        refuse(stream, st, code, why, b.pb->from);
        peer__batch_free(&b);
        return;
    }
    st->from = b.pb->from;
    if (!st->acked) {
        Cetcdpb__PeerAck ack = CETCDPB__PEER_ACK__INIT;
        ack.member_id = t->self;
        st->acked = api_stream_send(stream, &ack.base) == 0;
    }
    if (b.n > 0 && t->cb.on_messages != NULL)
        t->cb.on_messages(t->cb.arg, st->from, b.msgs, b.n);
    peer__batch_free(&b);
}

static void in_close(struct api_stream *stream, bool cancelled, void *ctx)
{
    mem_free(api_stream_data_get(stream));
    api_stream_data_set(stream, NULL);
    api_stream_release(stream);
}

const struct api_stream_ops peer__stream_ops = {
    .on_open = in_open,
    .on_message = in_message,
    .on_close = in_close,
};
