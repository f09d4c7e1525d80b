/*
 * async.c - many unary calls in flight on one completion queue.
 *
 * Each started call is one heap object holding its batch; the object's
 * address is the completion tag.  Every tag on a queue starts with a
 * struct client__tag, whose handler the run loop calls, so watch streams
 * (watch.c) complete their operations on the same queues.  The queue's
 * owner thread drains completions in cetcd_async_queue_run() and runs the
 * callbacks, which may start further calls on the same queue (that is how
 * cetcd-bench keeps its clients busy).
 */
#include <assert.h>
#include <stdatomic.h>

#include "util/absl.h"
#include "client/client_int.h"
#include "util/mem.h"

/* The queue.  Owned by its run thread; pending is shared with starters. */
struct cetcd_async_queue {
    grpc_completion_queue *cq; /* a "next" queue */
    atomic_size_t pending;     /* started calls whose callback has not run */
};

/* One call in flight; freed after its callback. */
struct async_call {
    struct client__tag tag;                  /* first: the completion tag */
    struct cetcd_async_queue *q;             /* the queue it runs on */
    struct client__call call;                /* the batch */
    const ProtobufCMessageDescriptor *desc;  /* reply type, NULL = skip */
    struct cetcd_async_done done;            /* the callback */
};

int cetcd_async_queue_open(struct cetcd_async_queue **queue_out)
{
    struct cetcd_async_queue *q;

    assert(queue_out != NULL);
    *queue_out = NULL;
    q = mem_calloc(1, sizeof(*q));
    if (q == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    absl_deadlock_detection_off(); /* see util/absl.h */
    grpc_init();
    q->cq = grpc_completion_queue_create_for_next(NULL);
    if (q->cq == NULL) {
        grpc_shutdown();
        mem_free(q);
        return CETCD_RESOURCE_EXHAUSTED;
    }
    atomic_init(&q->pending, 0);
    *queue_out = q;
    return 0;
}

void cetcd_async_queue_close(struct cetcd_async_queue *q)
{
    grpc_event ev;

    if (q == NULL)
        return;
    assert(atomic_load(&q->pending) == 0);
    grpc_completion_queue_shutdown(q->cq);
    do {
        ev = grpc_completion_queue_next(
            q->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    } while (ev.type != GRPC_QUEUE_SHUTDOWN);
    grpc_completion_queue_destroy(q->cq);
    mem_free(q);
    grpc_shutdown();
}

static void complete(struct client__tag *tag, int ok);

int cetcd_async_call(struct cetcd_client *c, struct cetcd_async_queue *q,
                     const char *method_path, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc,
                     const struct cetcd_async_done *done)
{
    struct async_call *ac;
    size_t ep;
    int rc;

    if (c == NULL || q == NULL || method_path == NULL || req == NULL ||
        done == NULL || done->fn == NULL)
        return CETCD_INVALID_ARGUMENT;
    ac = mem_malloc(sizeof(*ac));
    if (ac == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    ac->tag.complete = complete;
    ac->q = q;
    ac->desc = resp_desc;
    ac->done = *done;
    ep = atomic_load(&c->cur);
    assert(ep < c->n_eps);
    atomic_fetch_add(&q->pending, 1);
    rc = client__call_start(c, ep, q->cq, method_path, req, ac, &ac->call);
    if (rc != 0) {
        atomic_fetch_sub(&q->pending, 1);
        mem_free(ac);
    }
    return rc;
}

static void complete(struct client__tag *tag, int ok)
{
    struct async_call *ac = (struct async_call *)tag;
    struct cetcd_async_queue *q = ac->q;
    struct cetcd_status st;
    ProtobufCMessage *resp = NULL;

    st.message[0] = '\0';
    client__call_finish(&ac->call, ok, ac->desc,
                        ac->desc != NULL ? &resp : NULL, &st);
    assert(atomic_load(&q->pending) > 0);
    atomic_fetch_sub(&q->pending, 1);
    ac->done.fn(ac->done.arg, &st, resp);
    mem_free(ac);
}

int cetcd_async_queue_run(struct cetcd_async_queue *q, int timeout_ms)
{
    gpr_timespec deadline = timeout_ms < 0
                                ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                                : client__deadline(timeout_ms);
    grpc_event ev;
    int n = 0;

    assert(q != NULL && q->cq != NULL);
    if (timeout_ms == 0)
        deadline = gpr_now(GPR_CLOCK_MONOTONIC);
    for (;;) {
        ev = grpc_completion_queue_next(q->cq, deadline, NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        ((struct client__tag *)ev.tag)->complete(ev.tag, ev.success);
        n++;
        if (atomic_load(&q->pending) == 0)
            return n;
    }
    assert(ev.type == GRPC_QUEUE_TIMEOUT);
    return n;
}

size_t cetcd_async_queue_pending(const struct cetcd_async_queue *q)
{
    assert(q != NULL);
    return atomic_load(&((struct cetcd_async_queue *)q)->pending);
}

grpc_completion_queue *client__queue_cq(struct cetcd_async_queue *q)
{
    assert(q != NULL && q->cq != NULL);
    return q->cq;
}

void client__queue_hold(struct cetcd_async_queue *q)
{
    assert(q != NULL);
    atomic_fetch_add(&q->pending, 1);
}

void client__queue_release(struct cetcd_async_queue *q)
{
    assert(q != NULL && atomic_load(&q->pending) > 0);
    atomic_fetch_sub(&q->pending, 1);
}
