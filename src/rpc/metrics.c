/*
 * metrics.c - what the runtime counts per registered method, for the
 * grpc_server_* series of /metrics (rpc.h "metrics"): grpc-go's Prometheus
 * interceptors are the model (started when the handler is reached, one
 * received message per unary call, sent messages, the final status code,
 * and the handling time).
 */
#include <assert.h>
#include <stdatomic.h>

#include "rpc/rpc_int.h"
#include "util/mem.h"

/* grpc_server_handling_seconds: Prometheus' default buckets, as
 * go-grpc-prometheus uses them. */
static const double handling_bounds[] = {0.005, 0.01, 0.025, 0.05,
                                         0.1,   0.25, 0.5,   1,
                                         2.5,   5,    10};

/* --metrics extensive (rpc_metrics_time_handling). */
static atomic_bool time_handling;

void rpc_metrics_time_handling(bool on)
{
    atomic_store(&time_handling, on);
}

int64_t rpc__handling_start(void)
{
    return atomic_load_explicit(&time_handling, memory_order_relaxed)
               ? metrics_now_ns()
               : 0;
}

void rpc_server_bytes(const struct rpc_server *srv, uint64_t *received_out,
                      uint64_t *sent_out)
{
    assert(srv != NULL && received_out != NULL && sent_out != NULL);
    *received_out = metrics_get(&srv->rx_bytes);
    *sent_out = metrics_get(&srv->tx_bytes);
}

struct rpc__method_stats *rpc__method_stats_new(void)
{
    struct rpc__method_stats *st = mem_calloc(1, sizeof(*st));
    if (st == NULL)
        return NULL;
    st->handling =
        (struct metrics_hist)METRICS_HIST_INIT(handling_bounds);
    return st;
}

void rpc__method_handled(const struct rpc__method *m, grpc_status_code code,
                         int64_t start_ns)
{
    assert(m != NULL && m->stats != NULL);
    if ((unsigned)code >= RPC_STATUS_CODES)
        code = GRPC_STATUS_UNKNOWN;
    metrics_inc(&m->stats->handled[code]);
    if (start_ns != 0) /* timed (rpc__handling_start) */
        metrics_since(&m->stats->handling, start_ns);
}

void rpc_server_metrics(const struct rpc_server *srv,
                        void (*fn)(const struct rpc_method_metrics *m,
                                   void *ctx),
                        void *ctx)
{
    assert(srv != NULL && fn != NULL);
    for (size_t i = 0; i < srv->methods_n; i++) {
        const struct rpc__method *m = &srv->methods[i];
        struct rpc__method_stats *st = m->stats;
        struct rpc_method_metrics out = {.path = m->path, .type = m->type};
        out.started = metrics_get(&st->started);
        for (int c = 0; c < RPC_STATUS_CODES; c++)
            out.handled[c] = metrics_get(&st->handled[c]);
        out.msg_received = metrics_get(&st->msg_received);
        out.msg_sent = metrics_get(&st->msg_sent);
        metrics_hist_read(&st->handling, &out.handling);
        fn(&out, ctx);
    }
}
