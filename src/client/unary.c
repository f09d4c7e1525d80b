/*
 * unary.c - synchronous unary calls with failover between endpoints.
 *
 * Each call gets its own pluck completion queue, so any number of threads
 * can call concurrently.  Before sending, the endpoint's channel must be
 * READY within the dial timeout; an endpoint that cannot be reached is
 * skipped (nothing was sent, so any call may move on).  A call that was
 * sent and failed with UNAVAILABLE makes the next endpoint current and is
 * retried only if it is read-only.
 */
#include <assert.h>

#include "client/client_int.h"

/* wait_ready returns 0 once ep's channel is READY, else UNAVAILABLE.
 * Unless this is the last endpoint left to try, a channel in
 * TRANSIENT_FAILURE is given up at once instead of waiting out the
 * reconnect backoff. */
static int wait_ready(struct cetcd_client *c, size_t ep,
                      grpc_completion_queue *cq, bool last)
{
    grpc_channel *ch = c->eps[ep].channel;
    gpr_timespec deadline = client__deadline(c->dial_timeout_ms);
    grpc_connectivity_state s = grpc_channel_check_connectivity_state(ch, 1);
    grpc_event ev;

    while (s != GRPC_CHANNEL_READY) {
        if (s == GRPC_CHANNEL_SHUTDOWN)
            return CETCD_UNAVAILABLE;
        if (s == GRPC_CHANNEL_TRANSIENT_FAILURE && !last)
            return CETCD_UNAVAILABLE;
        grpc_channel_watch_connectivity_state(ch, s, deadline, cq, (void *)ch);
        ev = grpc_completion_queue_pluck(
            cq, (void *)ch, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        assert(ev.type == GRPC_OP_COMPLETE);
        if (!ev.success)
            return CETCD_UNAVAILABLE; /* dial deadline passed */
        s = grpc_channel_check_connectivity_state(ch, 1);
    }
    return 0;
}

static int call_once(struct cetcd_client *c, size_t ep,
                     grpc_completion_queue *cq, const char *method,
                     const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc,
                     ProtobufCMessage **resp_out, struct cetcd_status *st)
{
    struct client__call call;
    grpc_event ev;
    int rc;

    rc = client__call_start(c, ep, cq, method, req, &call, &call);
    if (rc != 0)
        return client__status_set(st, rc, "cannot start call %s", method);
    ev = grpc_completion_queue_pluck(cq, &call,
                                     gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    assert(ev.type == GRPC_OP_COMPLETE && ev.tag == &call);
    return client__call_finish(&call, ev.success, resp_desc, resp_out, st);
}

/* try_endpoints runs the failover loop; see the file comment. */
static int try_endpoints(struct cetcd_client *c, grpc_completion_queue *cq,
                         const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_desc,
                         ProtobufCMessage **resp_out, struct cetcd_status *st)
{
    size_t cur = atomic_load(&c->cur);
    bool ro = client__method_is_readonly(method);
    int rc = CETCD_UNAVAILABLE;

    for (size_t i = 0; i < c->n_eps; i++) {
        size_t ep = client__failover_order(cur, c->n_eps, i);
        if (wait_ready(c, ep, cq, i + 1 == c->n_eps) != 0) {
            rc = client__status_set(st, CETCD_UNAVAILABLE,
                                    "cannot connect to %s within %d ms",
                                    c->eps[ep].target, c->dial_timeout_ms);
            continue;
        }
        rc = call_once(c, ep, cq, method, req, resp_desc, resp_out, st);
        if (rc != CETCD_UNAVAILABLE) {
            atomic_store(&c->cur, ep);
            return rc;
        }
        /* The connection broke under a sent call: move on. */
        atomic_store(&c->cur, client__failover_order(ep, c->n_eps, 1));
        if (!ro)
            return rc;
    }
    return rc;
}

int cetcd_call_unary(struct cetcd_client *c, const char *method_path,
                     const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc,
                     ProtobufCMessage **resp_out, struct cetcd_status *st)
{
    grpc_completion_queue *cq;
    grpc_event ev;
    int rc;

    if (resp_out != NULL)
        *resp_out = NULL;
    if (c == NULL || method_path == NULL || req == NULL || resp_desc == NULL ||
        resp_out == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "missing argument");
    assert(c->n_eps > 0);
    cq = grpc_completion_queue_create_for_pluck(NULL);
    if (cq == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    rc = try_endpoints(c, cq, method_path, req, resp_desc, resp_out, st);
    grpc_completion_queue_shutdown(cq);
    ev = grpc_completion_queue_pluck(cq, NULL,
                                     gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    assert(ev.type == GRPC_QUEUE_SHUTDOWN);
    (void)ev;
    grpc_completion_queue_destroy(cq);
    assert(rc != 0 || *resp_out != NULL);
    return rc;
}
