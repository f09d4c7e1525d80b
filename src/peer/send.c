/*
 * send.c - the sender thread of one peer.
 *
 * The thread keeps one client stream /cetcdpb.Peer/Stream open to the
 * peer.  A stream starts with three batches: the initial metadata plus an
 * empty "hello" PeerBatch, the receive of the receiver's one PeerAck (it
 * tells the stream is accepted: the peer is up and of our cluster), and
 * the receive of the final status (it tells the stream ended).  Then the
 * thread writes one PeerBatch at a time, each holding everything queued
 * up to batch_bytes_max: while a write is in flight the queue fills, so
 * batches grow with load by themselves.
 *
 * Any end of the stream is a failure (it is meant to last): the thread
 * cancels the call, waits for its batches, drops the queue, marks the
 * peer down (peer_send then drops at once), reports it unreachable and
 * retries after an exponential back-off.  A write not taken by gRPC
 * within send_timeout_ms (a stalled peer whose windows are full) breaks
 * the stream the same way.
 *
 * The thread blocks either on its completion queue (a write in flight or
 * a call being torn down) or on the peer's condition variable (idle),
 * never longer than PEER__POLL_MS, so stop and URL changes are seen soon.
 */
#include <assert.h>
#include <string.h>

#include <grpc/support/time.h>

#include "peer/peer_int.h"
#include "util/err.h"
#include "util/thread.h"
#include "util/log.h"
#include "util/mem.h"

/* deadline_in returns now + ms for grpc_completion_queue_next.  0 gives
 * gpr_inf_past: the core rounds deadlines up to whole milliseconds, so
 * "now" would block up to 1 ms and add that to every message's latency. */
static gpr_timespec deadline_in(int64_t ms)
{
    if (ms <= 0)
        return gpr_inf_past(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* batch_start starts ops on the stream's call with tag. */
static void batch_start(struct peer__stream *s, grpc_op *ops, size_t n,
                        void *tag)
{
    grpc_call_error e = grpc_call_start_batch(s->call, ops, n, tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
    s->pending++;
}

/* write_start starts a SEND_MESSAGE of msgs[0..n) (n may be 0: the hello),
 * with the initial metadata when first. */
static void write_start(struct peer__peer *p, const struct peer__buf *msgs,
                        size_t n, bool first)
{
    struct peer__stream *s = &p->st;
    struct peer__hdr h = {p->t->cluster_id, p->t->self, p->id};
    size_t len = peer__batch_size(&h, msgs, n);
    grpc_slice slice = grpc_slice_malloc(len);
    peer__batch_pack(&h, msgs, n, GRPC_SLICE_START_PTR(slice));
    s->send_bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    grpc_op ops[2];
    size_t k = 0;
    memset(ops, 0, sizeof(ops));
    if (first)
        ops[k++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[k].op = GRPC_OP_SEND_MESSAGE;
    ops[k++].data.send_message.send_message = s->send_bb;
    assert(!s->sending);
    s->sending = true;
    s->send_msgs = n;
    s->send_bytes = len;
    s->send_start_ms = peer__now_ms();
    batch_start(s, ops, k, &s->send_tag);
}

/* channel_ensure (re)creates the channel when the URLs changed or, after
 * a failure, to try the next URL.  False when no channel could be made. */
static bool channel_ensure(struct peer__peer *p)
{
    struct peer__stream *s = &p->st;
    char url[PEER_URL_LEN_MAX + 1];
    pthread_mutex_lock(&p->mu);
    size_t want = s->failures % p->urls_n;
    bool fresh = s->channel == NULL || s->urls_gen != p->urls_gen ||
                 s->url_i != want;
    if (fresh) {
        memcpy(url, p->urls[want], sizeof(url));
        s->urls_gen = p->urls_gen;
        s->url_i = want;
    }
    pthread_mutex_unlock(&p->mu);
    if (!fresh)
        return true;
    if (s->channel != NULL)
        grpc_channel_destroy(s->channel);
    s->channel = peer__channel_create(p->t, url);
    return s->channel != NULL;
}

/* stream_open starts a stream: hello, ack receive, status receive. */
static bool stream_open(struct peer__peer *p)
{
    struct peer__stream *s = &p->st;
    if (!channel_ensure(p))
        return false;
    grpc_slice method = grpc_slice_from_static_string(PEER__STREAM_PATH);
    s->call = grpc_channel_create_call(
        s->channel, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq, method, NULL,
        gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (s->call == NULL)
        return false;
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->details = grpc_empty_slice();
    s->status = GRPC_STATUS_OK;
    s->acked = false;
    s->failing = false;
    write_start(p, NULL, 0, true);
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &s->ack_bb;
    batch_start(s, ops, 2, &s->ack_tag);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &s->trail_md;
    ops[0].data.recv_status_on_client.status = &s->status;
    ops[0].data.recv_status_on_client.status_details = &s->details;
    batch_start(s, ops, 1, &s->status_tag);
    return true;
}

/* stream_fail cancels the call once; its batches then complete. */
static void stream_fail(struct peer__peer *p)
{
    struct peer__stream *s = &p->st;
    if (s->failing || s->call == NULL)
        return;
    s->failing = true;
    grpc_call_cancel(s->call, NULL);
}

/* down marks p down after a failed or ended attempt: queued messages are
 * dropped and the next attempt is scheduled.  Returns whether p stops. */
static bool down(struct peer__peer *p)
{
    struct peer__stream *s = &p->st;
    s->failures++;
    s->next_attempt_ms = peer__now_ms() +
                         peer__backoff_ms(s->failures, p->t->lim.backoff_min_ms,
                                          p->t->lim.backoff_max_ms);
    pthread_mutex_lock(&p->mu);
    bool stop = p->stop;
    bool was_active = p->stats.active;
    p->stats.dropped_msgs += peer__queue_clear(&p->q);
    p->stats.failures++;
    p->stats.active = false;
    p->stats.active_since_ms = 0;
    p->down = true;
    pthread_mutex_unlock(&p->mu);
    if (stop)
        return true;
    if (was_active || s->failures == 1)
        log_warn("peer", "peer %016llx unreachable (status %d: %.*s); "
                 "retrying with back-off", (unsigned long long)p->id,
                 (int)s->status, (int)GRPC_SLICE_LENGTH(s->details),
                 (const char *)GRPC_SLICE_START_PTR(s->details));
    if (p->t->cb.on_unreachable != NULL)
        p->t->cb.on_unreachable(p->t->cb.arg, p->id);
    return false;
}

/* stream_end frees the call once all its batches completed. */
static void stream_end(struct peer__peer *p)
{
    struct peer__stream *s = &p->st;
    assert(s->pending == 0 && s->call != NULL && !s->sending);
    down(p);
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    grpc_slice_unref(s->details);
    s->details = grpc_empty_slice();
    grpc_call_unref(s->call);
    s->call = NULL;
    s->acked = false;
    s->failing = false;
}

static void on_sent(struct peer__peer *p, bool ok)
{
    struct peer__stream *s = &p->st;
    grpc_byte_buffer_destroy(s->send_bb);
    s->send_bb = NULL;
    s->sending = false;
    pthread_mutex_lock(&p->mu);
    if (ok && s->send_msgs > 0) {
        p->stats.sent_msgs += s->send_msgs;
        p->stats.sent_batches++;
        p->stats.sent_bytes += s->send_bytes;
    } else if (!ok) {
        p->stats.dropped_msgs += s->send_msgs;
    }
    pthread_mutex_unlock(&p->mu);
    if (!ok)
        stream_fail(p);
}

static void on_acked(struct peer__peer *p, bool ok)
{
    struct peer__stream *s = &p->st;
    bool got = ok && s->ack_bb != NULL;
    if (s->ack_bb != NULL)
        grpc_byte_buffer_destroy(s->ack_bb);
    s->ack_bb = NULL;
    if (!got)
        return; /* The stream ended; the status tells why. */
    s->acked = true;
    if (s->failures > 0)
        log_info("peer", "peer %016llx reachable again",
                 (unsigned long long)p->id);
    s->failures = 0;
    pthread_mutex_lock(&p->mu);
    p->stats.connects++;
    p->stats.active = true;
    p->stats.active_since_ms = peer__now_ms();
    p->down = false;
    pthread_mutex_unlock(&p->mu);
}

static void on_status(struct peer__peer *p)
{
    struct peer__stream *s = &p->st;
    const struct peer_callbacks *cb = &p->t->cb;
    bool removed = peer__status_removed(
        s->status, (const char *)GRPC_SLICE_START_PTR(s->details),
        GRPC_SLICE_LENGTH(s->details));
    if (s->status == GRPC_STATUS_FAILED_PRECONDITION || removed) {
        pthread_mutex_lock(&p->mu);
        p->stats.refusals++;
        pthread_mutex_unlock(&p->mu);
    }
    /* The peer knows we were removed from the cluster (etcd: 410 Gone). */
    if (removed && cb->on_removed != NULL)
        cb->on_removed(cb->arg, p->id);
    stream_fail(p);
}

/* events_drain handles completions, waiting up to wait_ms for the first. */
static void events_drain(struct peer__peer *p, int64_t wait_ms)
{
    struct peer__stream *s = &p->st;
    gpr_timespec dl = deadline_in(wait_ms);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(s->cq, dl, NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        assert(s->pending > 0);
        s->pending--;
        if (ev.tag == &s->send_tag)
            on_sent(p, ev.success != 0);
        else if (ev.tag == &s->ack_tag)
            on_acked(p, ev.success != 0);
        else if (ev.tag == &s->status_tag)
            on_status(p);
        else
            assert(!"unknown tag");
        dl = gpr_inf_past(GPR_CLOCK_MONOTONIC);
    }
    if (s->call != NULL && s->pending == 0)
        stream_end(p);
}

/* take_locked moves up to one batch of queued messages into s->take and
 * returns their number (p->mu held). */
static size_t take_locked(struct peer__peer *p)
{
    struct peer__stream *s = &p->st;
    return peer__queue_take(&p->q, s->take, s->take_max,
                            p->t->lim.batch_bytes_max);
}

/* write_taken starts the write of the n > 0 messages take_locked took and
 * frees their bytes (write_start copied them). */
static void write_taken(struct peer__peer *p, size_t n)
{
    struct peer__stream *s = &p->st;
    assert(n > 0 && n <= s->take_max);
    write_start(p, s->take, n, false);
    for (size_t i = 0; i < n; i++)
        mem_free(s->take[i].data);
}

/* write_next starts a write of what is queued; false if nothing is. */
static bool write_next(struct peer__peer *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = take_locked(p);
    pthread_mutex_unlock(&p->mu);
    if (n == 0)
        return false;
    write_taken(p, n);
    return true;
}

/*
 * The stream is lent while the sender thread is parked in idle_wait with
 * an open, acknowledged stream and nothing in flight: then the thread that
 * queues a message (the raft thread) starts its write itself, so the bytes
 * leave without first waking the sender, and only then wakes the sender to
 * wait for the write's completion.  The parked sender touches none of its
 * stream state, and taking or returning the loan happens under p->mu.
 */
bool peer__write_lent_locked(struct peer__peer *p)
{
    if (!p->lent)
        return false;
    size_t n = take_locked(p);
    if (n == 0)
        return false;
    p->lent = false;
    write_taken(p, n);
    pthread_cond_signal(&p->cond);
    return true;
}

/* idle_wait sleeps on the condition variable up to ms, unless there is
 * something to do already; an idle open stream is lent meanwhile. */
static void idle_wait(struct peer__peer *p, int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = thread_deadline_ms(CLOCK_REALTIME, (uint64_t)ms);
    struct peer__stream *s = &p->st;
    pthread_mutex_lock(&p->mu);
    if (p->q.n == 0 && !p->stop && p->urls_gen == s->urls_gen) {
        p->lent = s->call != NULL && s->acked && !s->failing && !s->sending;
        pthread_cond_timedwait(&p->cond, &p->mu, &ts);
        p->lent = false;
    }
    pthread_mutex_unlock(&p->mu);
}

/* stream_step runs one round of an open stream. */
static void stream_step(struct peer__peer *p, bool stop, bool moved)
{
    struct peer__stream *s = &p->st;
    if ((stop || moved) && !s->failing)
        stream_fail(p);
    if (s->sending && !s->failing &&
        peer__now_ms() - s->send_start_ms > p->t->lim.send_timeout_ms) {
        log_warn("peer", "peer %016llx: write stalled for %u ms",
                 (unsigned long long)p->id, p->t->lim.send_timeout_ms);
        stream_fail(p);
    }
    events_drain(p, s->sending || s->failing ? PEER__POLL_MS : 0);
    if (s->call == NULL || s->sending || s->failing)
        return;
    if (!write_next(p))
        idle_wait(p, PEER__POLL_MS);
}

void *peer__sender_main(void *arg)
{
    struct peer__peer *p = arg;
    struct peer__stream *s = &p->st;
    s->cq = grpc_completion_queue_create_for_next(NULL);
    assert(s->cq != NULL);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool stop = p->stop;
        bool moved = p->urls_gen != s->urls_gen;
        pthread_mutex_unlock(&p->mu);
        if (s->call != NULL) {
            stream_step(p, stop, moved);
            continue;
        }
        if (stop)
            break;
        int64_t wait = s->next_attempt_ms - peer__now_ms();
        if (wait > 0 && !moved) {
            idle_wait(p, wait < PEER__POLL_MS ? wait : PEER__POLL_MS);
            continue;
        }
        if (!stream_open(p) && down(p))
            break;
    }
    assert(s->call == NULL && s->pending == 0);
    if (s->channel != NULL)
        grpc_channel_destroy(s->channel);
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                      NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(s->cq);
    return NULL;
}
