/*
 * ask.c - peer_ask: short unary calls to a peer's listener on a channel
 * kept per peer, completed on one shared thread (peer.h).
 *
 * peer_call (call.c) costs a thread and a fresh connection per call: right
 * for a promotion, too slow for renewals (about 80 a second through a
 * follower).  Here every call starts on the caller's thread on the
 * peer's kept channel with the shared completion queue and never blocks;
 * the thread cetcd-peer-ask (started by the first ask) takes the
 * completions, calls back and frees.  A call that finds the peer
 * unreachable (UNAVAILABLE) moves the peer's channel to its next URL, so
 * the caller's retry dials that one (etcd tries the leader's URLs in
 * turn).
 *
 * Bounds: PEER_ASKS_MAX calls in flight (ERR_BUSY past it), one channel
 * per peer slot (PEER_PEERS_MAX).  Locks: asks.mu is taken with no
 * transport lock held (peer__hold is let go before it); under it only the
 * transport's read lock (peer__known).  gRPC keeps a channel alive for the calls
 * on it, so a channel is destroyed (URL change, failover, close) while
 * calls may still run on it.
 */
#include <assert.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/time.h>

#include "dial/dial.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

/* One call in flight. */
struct peer__ask {
    struct peer__ask *prev, *next; /* asks.mu: the live list */
    struct peer_transport *t;
    raft_id to;
    grpc_channel *ch;              /* the channel it went on (compare only) */
    grpc_call *call;
    grpc_byte_buffer *send_bb;
    struct dial_reply reply;
    peer_call_fn fn;
    void *arg;
};

void peer__asks_init(struct peer_transport *t)
{
    memset(&t->asks, 0, sizeof t->asks);
    pthread_mutex_init(&t->asks.mu, NULL);
}

static void unlink_locked(struct peer__asks *as, struct peer__ask *a)
{
    if (a->prev != NULL)
        a->prev->next = a->next;
    else
        as->live = a->next;
    if (a->next != NULL)
        a->next->prev = a->prev;
    assert(as->n > 0);
    as->n--;
}

/* asks.mu held: the peer's channel slot, NULL when every slot is taken by
 * another peer (there are PEER_PEERS_MAX: only a table of removed peers
 * fills them; the oldest such is then reused). */
static struct peer__ask_ch *chan_slot(struct peer_transport *t, raft_id to)
{
    struct peer__ask_ch *free_slot = NULL;
    for (size_t i = 0; i < PEER_PEERS_MAX; i++) {
        struct peer__ask_ch *c = &t->asks.chans[i];
        if (c->to == to)
            return c;
        if (free_slot == NULL && (c->to == 0 || !peer__known(t, c->to)))
            free_slot = c;
    }
    if (free_slot != NULL && free_slot->ch != NULL) {
        grpc_channel_destroy(free_slot->ch);
        free_slot->ch = NULL;
    }
    if (free_slot != NULL) {
        memset(free_slot, 0, sizeof *free_slot);
        free_slot->to = to;
    }
    return free_slot;
}

/* A failed call: the next ask to that peer dials its next URL. */
static void failover(struct peer_transport *t, const struct peer__ask *a)
{
    pthread_mutex_lock(&t->asks.mu);
    for (size_t i = 0; i < PEER_PEERS_MAX; i++) {
        struct peer__ask_ch *c = &t->asks.chans[i];
        if (c->to == a->to && c->ch == a->ch && c->ch != NULL) {
            grpc_channel_destroy(c->ch);
            c->ch = NULL;
            c->url_i++;
        }
    }
    pthread_mutex_unlock(&t->asks.mu);
}

static void finish(struct peer_transport *t, struct peer__ask *a)
{
    pthread_mutex_lock(&t->asks.mu);
    unlink_locked(&t->asks, a);
    pthread_mutex_unlock(&t->asks.mu);
    const char *why = (const char *)GRPC_SLICE_START_PTR(a->reply.details);
    int err = peer__call_err(a->reply.status, why,
                             GRPC_SLICE_LENGTH(a->reply.details),
                             atomic_load(&t->closing));
    grpc_slice reply = grpc_empty_slice();
    grpc_byte_buffer_reader r;
    if (err == 0) {
        if (a->reply.msg != NULL &&
            grpc_byte_buffer_reader_init(&r, a->reply.msg)) {
            reply = grpc_byte_buffer_reader_readall(&r);
            grpc_byte_buffer_reader_destroy(&r);
        } else {
            err = ERR_IO;
        }
    }
    /* Unreachable: try its next URL.  (Not for the peer's own refusals,
     * which peer__call_err also makes ERR_IO.) */
    if (a->reply.status == GRPC_STATUS_UNAVAILABLE)
        failover(t, a);
    a->fn(a->arg, err, err == 0 ? GRPC_SLICE_START_PTR(reply) : NULL,
          err == 0 ? GRPC_SLICE_LENGTH(reply) : 0);
    grpc_slice_unref(reply);
    grpc_call_unref(a->call);
    grpc_byte_buffer_destroy(a->send_bb);
    dial_reply_release(&a->reply);
    mem_free(a);
}

static void *ask_main(void *arg)
{
    struct peer_transport *t = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(
            t->asks.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type == GRPC_OP_COMPLETE)
            finish(t, ev.tag);
    }
}

/* asks.mu held: the thread and queue, started at the first ask. */
static int start_locked(struct peer_transport *t)
{
    struct peer__asks *as = &t->asks;
    if (as->started)
        return 0;
    as->cq = grpc_completion_queue_create_for_next(NULL);
    if (as->cq == NULL)
        return ERR_IO;
    if (pthread_create(&as->thread, NULL, ask_main, t) != 0) {
        grpc_completion_queue_destroy(as->cq);
        as->cq = NULL;
        return ERR_IO;
    }
    thread_name_set(as->thread, "cetcd-peer-ask");
    as->started = true;
    return 0;
}

/* asks.mu held: the peer's channel for its URLs of generation gen. */
static grpc_channel *channel_locked(struct peer_transport *t, raft_id to,
                                    uint64_t gen,
                                    char urls[][PEER_URL_LEN_MAX + 1],
                                    size_t urls_n)
{
    struct peer__ask_ch *c = chan_slot(t, to);
    if (c == NULL || urls_n == 0)
        return NULL;
    if (c->ch != NULL && c->urls_gen != gen) {
        grpc_channel_destroy(c->ch);
        c->ch = NULL;
        c->url_i = 0;
    }
    if (c->ch == NULL) {
        c->urls_gen = gen;
        c->ch = peer__channel_create(t, urls[c->url_i % urls_n]);
    }
    return c->ch;
}

/* asks.mu held: starts the call of a on ch. */
static int call_start_locked(struct peer_transport *t, struct peer__ask *a,
                             const char *method, uint32_t timeout_ms)
{
    gpr_timespec dl = gpr_time_add(
        gpr_now(GPR_CLOCK_MONOTONIC),
        gpr_time_from_millis((int64_t)timeout_ms, GPR_TIMESPAN));
    a->call = grpc_channel_create_call(a->ch, NULL, GRPC_PROPAGATE_DEFAULTS,
                                       t->asks.cq,
                                       grpc_slice_from_static_string(method),
                                       NULL, dl, NULL);
    if (a->call == NULL)
        return ERR_IO;
    grpc_op ops[DIAL_UNARY_OPS];
    dial_unary_ops(ops, NULL, 0, a->send_bb, &a->reply);
    if (grpc_call_start_batch(a->call, ops, DIAL_UNARY_OPS, a, NULL) !=
        GRPC_CALL_OK) {
        grpc_call_unref(a->call);
        return ERR_IO;
    }
    a->next = t->asks.live;
    a->prev = NULL;
    if (a->next != NULL)
        a->next->prev = a;
    t->asks.live = a;
    t->asks.n++;
    return 0;
}

int peer_ask(struct peer_transport *t, raft_id to, const char *method,
             const uint8_t *req, size_t len, uint32_t timeout_ms,
             peer_call_fn fn, void *arg)
{
    assert(t != NULL && fn != NULL);
    assert(req != NULL || len == 0);
    if (method == NULL || timeout_ms == 0)
        return ERR_INVAL;
    char urls[PEER_URLS_MAX][PEER_URL_LEN_MAX + 1];
    struct peer__peer *p = peer__hold(t, to);
    if (p == NULL)
        return ERR_NOTFOUND;
    size_t urls_n = p->urls_n;
    uint64_t gen = p->urls_gen;
    memcpy(urls, p->urls, sizeof urls);
    peer__unhold(t, p);
    struct peer__ask *a = mem_calloc(1, sizeof *a);
    if (a == NULL)
        return ERR_NOMEM;
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)req, len);
    a->send_bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    dial_reply_init(&a->reply);
    a->t = t;
    a->to = to;
    a->fn = fn;
    a->arg = arg;
    struct peer__asks *as = &t->asks;
    pthread_mutex_lock(&as->mu);
    int rv = 0;
    if (atomic_load(&t->closing))
        rv = ERR_STOPPED;
    else if (as->n >= PEER_ASKS_MAX)
        rv = ERR_BUSY;
    if (rv == 0)
        rv = start_locked(t);
    if (rv == 0 &&
        (a->ch = channel_locked(t, to, gen, urls, urls_n)) == NULL)
        rv = ERR_IO;
    if (rv == 0)
        rv = call_start_locked(t, a, method, timeout_ms);
    pthread_mutex_unlock(&as->mu);
    if (rv != 0) {
        grpc_byte_buffer_destroy(a->send_bb);
        dial_reply_release(&a->reply);
        mem_free(a);
    }
    return rv;
}

void peer__asks_close(struct peer_transport *t)
{
    struct peer__asks *as = &t->asks;
    assert(atomic_load(&t->closing));
    /* No ask starts once closing is set (checked under mu); the ones in
     * flight are cancelled and their callbacks run (ERR_STOPPED) before
     * the queue's shutdown event. */
    pthread_mutex_lock(&as->mu);
    bool started = as->started;
    for (struct peer__ask *a = as->live; a != NULL; a = a->next)
        grpc_call_cancel(a->call, NULL);
    if (started)
        grpc_completion_queue_shutdown(as->cq);
    pthread_mutex_unlock(&as->mu);
    if (started) {
        pthread_join(as->thread, NULL);
        grpc_completion_queue_destroy(as->cq);
    }
    assert(as->n == 0);
    for (size_t i = 0; i < PEER_PEERS_MAX; i++)
        if (as->chans[i].ch != NULL)
            grpc_channel_destroy(as->chans[i].ch);
    pthread_mutex_destroy(&as->mu);
}
