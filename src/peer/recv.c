/*
 * recv.c - the receiving side of /cetcdpb.Peer/Stream.
 *
 * Runs on the api_server's event loops.  Each batch is decoded and checked
 * (cluster, receiver, known sender, every message addressed as its batch)
 * before any of it reaches on_messages; a bad batch ends the stream with
 * a status and nothing of it is delivered.  A sender that is not a peer
 * is refused as unknown, or, when is_removed says so, as removed (etcd's
 * 410 Gone), which tells it to stop.  The first accepted batch is
 * answered with one PeerAck so the sender knows the stream is up.
 *
 * Every open stream is listed in the transport (t->ins) so that
 * peer_remove can end the streams of the member it removes at once: a
 * removed member may have nothing more to send, and would otherwise not
 * hear of its removal until its next batch.
 */
#include <assert.h>
#include <string.h>

#include "rpc/rpc.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

void *peer__in_attach(struct rpc_stream *stream, size_t size)
{
    assert(stream != NULL && size > 0);
    void *state = mem_calloc(1, size);
    rpc_stream_data_set(stream, state);
    if (state == NULL)
        rpc_stream_finish(stream, GRPC_STATUS_RESOURCE_EXHAUSTED,
                          "out of memory");
    return state;
}

void peer__in_detach(struct rpc_stream *stream)
{
    assert(stream != NULL);
    rpc_stream_data_set(stream, NULL);
    rpc_stream_release(stream);
}

static void in_open(struct rpc_stream *stream, void *ctx)
{
    struct peer_transport *t = ctx;
    struct peer__in *in = peer__in_attach(stream, sizeof(*in));
    if (in == NULL)
        return;
    in->stream = stream;
    pthread_mutex_lock(&t->in_mu);
    in->next = t->ins;
    t->ins = in;
    pthread_mutex_unlock(&t->in_mu);
}

/* refuse_locked ends in's stream with code/why once (t->in_mu held). */
static void refuse_locked(struct peer__in *in, grpc_status_code code,
                          const char *why, raft_id from)
{
    assert(code != GRPC_STATUS_OK && why != NULL);
    if (in->refused)
        return;
    log_warn("peer", "refused stream from %016llx: %s",
             (unsigned long long)from, why);
    in->refused = true;
    rpc_stream_finish(in->stream, code, why);
}

static void refuse(struct peer_transport *t, struct peer__in *in,
                   grpc_status_code code, const char *why, raft_id from)
{
    pthread_mutex_lock(&t->in_mu);
    refuse_locked(in, code, why, from);
    pthread_mutex_unlock(&t->in_mu);
}

/* check validates b against t and the stream so far; OK or a status. */
static grpc_status_code check(struct peer_transport *t, raft_id stream_from,
                              const struct peer__batch *b, const char **why)
{
    struct peer__hdr h = {b->pb->cluster_id, b->pb->from, b->pb->to};
    enum peer__sender sender =
        h.from != 0 ? peer__sender_of(t, h.from) : PEER__SENDER_UNKNOWN;
    grpc_status_code code =
        peer__hdr_check(&h, t->cluster_id, t->self, sender, why);
    if (code != GRPC_STATUS_OK)
        return code;
    if (stream_from != 0 && stream_from != h.from) {
        *why = "sender changed within a stream";
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    return peer__msgs_check(b->msgs, b->n, h.from, h.to, why);
}

/* accepted records the sender of an accepted batch; false when the stream
 * was refused meanwhile (peer_remove): the batch is then dropped. */
static bool accepted(struct peer_transport *t, struct peer__in *in,
                     raft_id from)
{
    pthread_mutex_lock(&t->in_mu);
    bool ok = !in->refused;
    in->from = from;
    pthread_mutex_unlock(&t->in_mu);
    return ok;
}

static void in_message(struct rpc_stream *stream, const uint8_t *msg,
                       size_t len, void *ctx)
{
    struct peer_transport *t = ctx;
    struct peer__in *in = rpc_stream_data_get(stream);
    if (in == NULL)
        return;
    pthread_mutex_lock(&t->in_mu);
    bool refused = in->refused;
    raft_id stream_from = in->from;
    pthread_mutex_unlock(&t->in_mu);
    if (refused)
        return;
    if (msg == NULL) { /* The sender closed its side: end cleanly. */
        rpc_stream_finish(stream, GRPC_STATUS_OK, NULL);
        return;
    }
    struct peer__batch b;
    int rv = peer__batch_decode(msg, len, &b);
    if (rv != 0) {
        refuse(t, in, rv == ERR_NOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED
                                      : GRPC_STATUS_INVALID_ARGUMENT,
               rv == ERR_NOMEM ? "out of memory" : "undecodable PeerBatch",
               stream_from);
        return;
    }
    const char *why = NULL;
    grpc_status_code code = check(t, stream_from, &b, &why);
    if (code != GRPC_STATUS_OK) {
        refuse(t, in, code, why, b.pb->from);
        peer__batch_free(&b);
        return;
    }
    raft_id from = b.pb->from;
    bool ok = accepted(t, in, from);
    if (ok && !in->acked) {
        Cetcdpb__PeerAck ack = CETCDPB__PEER_ACK__INIT;
        ack.member_id = t->self;
        in->acked = rpc_stream_send(stream, &ack.base) == 0;
    }
    if (ok && b.n > 0)
        peer__rtt_note(t, from, b.msgs, b.n);
    if (ok && b.n > 0)
        peer__bytes_note(t, from, 0, len);
    if (ok && b.n > 0 && t->cb.on_messages != NULL)
        t->cb.on_messages(t->cb.arg, from, b.msgs, b.n);
    peer__batch_free(&b);
}

void peer__in_refuse_from(struct peer_transport *t, raft_id from)
{
    assert(t != NULL && from != 0);
    /* Asked before taking in_mu: is_removed may take the caller's locks. */
    enum peer__sender sender = peer__sender_of(t, from);
    const char *why = NULL;
    struct peer__hdr h = {t->cluster_id, from, t->self};
    grpc_status_code code =
        peer__hdr_check(&h, t->cluster_id, t->self, sender, &why);
    if (code == GRPC_STATUS_OK)
        return; /* A peer again (added back meanwhile): keep its streams. */
    pthread_mutex_lock(&t->in_mu);
    for (struct peer__in *in = t->ins; in != NULL; in = in->next)
        if (in->from == from)
            refuse_locked(in, code, why, from);
    pthread_mutex_unlock(&t->in_mu);
}

static void in_close(struct rpc_stream *stream, bool cancelled, void *ctx)
{
    struct peer_transport *t = ctx;
    struct peer__in *in = rpc_stream_data_get(stream);
    (void)cancelled;
    if (in != NULL) {
        pthread_mutex_lock(&t->in_mu);
        struct peer__in **p = &t->ins;
        while (*p != NULL && *p != in)
            p = &(*p)->next;
        assert(*p == in);
        *p = in->next;
        pthread_mutex_unlock(&t->in_mu);
        mem_free(in);
    }
    peer__in_detach(stream);
}

const struct rpc_stream_ops peer__stream_ops = {
    .on_open = in_open,
    .on_message = in_message,
    .on_close = in_close,
};
