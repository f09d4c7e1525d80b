/*
 * call.c - peer_call: one unary gRPC call to a peer's listener, for the
 * member's own services there (a promotion a follower forwards to the
 * leader, as etcd's follower POSTs /members/promote/<id> to it).
 *
 * Such calls are rare and may wait seconds for the answer (the leader
 * answers once the change is applied), so each runs on a thread of its
 * own, in one of PEER_CALLS_MAX slots, with a fresh channel per attempt
 * and the transport's credentials.  The thread tries the peer's URLs in
 * turn while they are unreachable, polls the transport's closing flag
 * every PEER__POLL_MS (then cancels its call), reports the outcome once
 * and marks its slot done; the next peer_call or the close joins it.
 */
#include <assert.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/time.h>

#include "dial/dial.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

/* The state of one attempt (one URL). */
struct attempt {
    grpc_completion_queue *cq;    /* "next" queue of the call */
    grpc_call *call;              /* the call */
    grpc_byte_buffer *send_bb;    /* the request */
    struct dial_reply reply;      /* the reply, status and metadata */
    bool cancelled;               /* cancelled because t is closing */
};

static gpr_timespec deadline_in(int64_t ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(ms > 0 ? ms : 0, GPR_TIMESPAN));
}

/* start begins the one batch of a unary call. */
static void start(struct attempt *a, const struct peer__call *c)
{
    grpc_slice req = grpc_slice_from_copied_buffer((const char *)c->req,
                                                   c->req_len);
    a->send_bb = grpc_raw_byte_buffer_create(&req, 1);
    grpc_slice_unref(req);
    grpc_op ops[DIAL_UNARY_OPS];
    dial_unary_ops(ops, NULL, 0, a->send_bb, &a->reply);
    grpc_call_error e =
        grpc_call_start_batch(a->call, ops, DIAL_UNARY_OPS, a, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

/* wait_done waits for the batch, cancelling the call if t closes. */
static void wait_done(struct attempt *a, struct peer_transport *t)
{
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(
            a->cq, deadline_in(PEER__POLL_MS), NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            assert(ev.tag == a);
            return;
        }
        if (!a->cancelled && atomic_load(&t->closing)) {
            a->cancelled = true;
            grpc_call_cancel(a->call, NULL);
        }
    }
}

/* reply_take copies the reply into *out; ERR_IO when there is none. */
static int reply_take(struct attempt *a, grpc_slice *out)
{
    grpc_byte_buffer_reader r;
    if (a->reply.msg == NULL ||
        !grpc_byte_buffer_reader_init(&r, a->reply.msg))
        return ERR_IO;
    *out = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return 0;
}

/* attempt_url makes the call at url; 0 and the reply in *out, or ERR_*. */
static int attempt_url(struct peer__call *c, const char *url, grpc_slice *out)
{
    struct peer_transport *t = c->t;
    grpc_channel *ch = peer__channel_create(t, url);
    if (ch == NULL)
        return ERR_IO;
    struct attempt a;
    memset(&a, 0, sizeof(a));
    a.cq = grpc_completion_queue_create_for_next(NULL);
    dial_reply_init(&a.reply);
    grpc_slice method = grpc_slice_from_static_string(c->method);
    a.call = grpc_channel_create_call(
        ch, NULL, GRPC_PROPAGATE_DEFAULTS, a.cq, method, NULL,
        deadline_in(c->deadline_ms - peer__now_ms()), NULL);
    int err = ERR_IO;
    if (a.call != NULL) {
        start(&a, c);
        wait_done(&a, t);
        err = peer__call_err(
            a.reply.status, (const char *)GRPC_SLICE_START_PTR(a.reply.details),
            GRPC_SLICE_LENGTH(a.reply.details), a.cancelled);
        if (err == 0)
            err = reply_take(&a, out);
        grpc_call_unref(a.call);
    }
    if (err != 0 && err != ERR_STOPPED)
        log_warn("peer", "call %s to %016llx at %s failed: %s (%.*s)",
                 c->method, (unsigned long long)c->to, url, err_str(err),
                 (int)GRPC_SLICE_LENGTH(a.reply.details),
                 (const char *)GRPC_SLICE_START_PTR(a.reply.details));
    if (a.send_bb != NULL)
        grpc_byte_buffer_destroy(a.send_bb);
    dial_reply_release(&a.reply);
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(a.cq);
    while (grpc_completion_queue_next(a.cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                      NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(a.cq);
    return err;
}

static void *call_main(void *arg)
{
    struct peer__call *c = arg;
    grpc_slice reply = grpc_empty_slice();
    int err = ERR_IO;
    for (size_t i = 0; i < c->urls_n; i++) {
        if (peer__now_ms() >= c->deadline_ms) {
            err = ERR_TIMEOUT;
            break;
        }
        err = attempt_url(c, c->urls[i], &reply);
        if (err != ERR_IO) /* Only an unreachable URL tries the next. */
            break;
    }
    assert(err != 0 || GRPC_SLICE_LENGTH(reply) == 0 ||
           GRPC_SLICE_START_PTR(reply) != NULL);
    c->fn(c->arg, err, err == 0 ? GRPC_SLICE_START_PTR(reply) : NULL,
          err == 0 ? GRPC_SLICE_LENGTH(reply) : 0);
    grpc_slice_unref(reply);
    atomic_store(&c->done, true);
    return NULL;
}

/* slot_free joins a slot's thread and frees the slot (the caller holds
 * calls_mu, or is the close, when no peer_call takes slots any more). */
static void slot_free(struct peer__call *c)
{
    assert(c->used);
    pthread_join(c->thread, NULL);
    mem_free(c->req);
    c->req = NULL;
    c->used = false;
    atomic_store(&c->done, false);
}

/* slot_take reaps finished calls and returns a free slot, or NULL. */
static struct peer__call *slot_take(struct peer_transport *t)
{
    struct peer__call *free_slot = NULL;
    for (size_t i = 0; i < PEER_CALLS_MAX; i++) {
        struct peer__call *c = &t->calls[i];
        if (c->used && atomic_load(&c->done))
            slot_free(c);
        if (!c->used && free_slot == NULL)
            free_slot = c;
    }
    return free_slot;
}

/* urls_copy copies the URLs of peer `to` into c; ERR_NOTFOUND. */
static int urls_copy(struct peer_transport *t, raft_id to,
                     struct peer__call *c)
{
    struct peer__peer *p = peer__hold(t, to);
    if (p == NULL)
        return ERR_NOTFOUND;
    memcpy(c->urls, p->urls, sizeof(c->urls));
    c->urls_n = p->urls_n;
    peer__unhold(t, p);
    return 0;
}

int peer_call(struct peer_transport *t, raft_id to, const char *method,
              const uint8_t *req, size_t len, uint32_t timeout_ms,
              peer_call_fn fn, void *arg)
{
    assert(t != NULL && fn != NULL);
    assert(req != NULL || len == 0);
    if (method == NULL || timeout_ms == 0)
        return ERR_INVAL;
    uint8_t *copy = mem_malloc(len > 0 ? len : 1);
    if (copy == NULL)
        return ERR_NOMEM;
    if (len > 0)
        memcpy(copy, req, len);
    pthread_mutex_lock(&t->calls_mu);
    struct peer__call *c = NULL;
    int rv = atomic_load(&t->closing) ? ERR_STOPPED : 0;
    if (rv == 0 && (c = slot_take(t)) == NULL)
        rv = ERR_BUSY;
    if (rv == 0)
        rv = urls_copy(t, to, c);
    if (rv == 0) {
        c->t = t;
        c->to = to;
        c->method = method;
        c->req = copy;
        c->req_len = len;
        c->deadline_ms = peer__now_ms() + timeout_ms;
        c->fn = fn;
        c->arg = arg;
        c->used = true;
        if (pthread_create(&c->thread, NULL, call_main, c) != 0) {
            c->used = false;
            c->req = NULL;
            rv = ERR_IO;
        } else {
            thread_name_set(c->thread, "cetcd-peer-call");
        }
    }
    pthread_mutex_unlock(&t->calls_mu);
    if (rv != 0)
        mem_free(copy);
    return rv;
}

void peer__calls_close(struct peer_transport *t)
{
    assert(atomic_load(&t->closing));
    /* No peer_call takes a slot once closing is set (one that began
     * before has started its thread once we get the lock); the threads
     * poll the flag and cancel their calls.  They are joined without the
     * lock, so a callback may still call peer_call (it gets ERR_STOPPED). */
    pthread_mutex_lock(&t->calls_mu);
    pthread_mutex_unlock(&t->calls_mu);
    for (size_t i = 0; i < PEER_CALLS_MAX; i++)
        if (t->calls[i].used)
            slot_free(&t->calls[i]);
}
