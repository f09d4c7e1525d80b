/*
 * metrics.c - histogram recording and reading (metrics.h).
 */
#include "util/metrics.h"

#include <assert.h>
#include <time.h>

int64_t metrics_now_ns(void)
{
    if (!METRICS_RECORDING)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void metrics_observe_ns(struct metrics_hist *h, int64_t ns)
{
    assert(h != NULL && h->n <= METRICS_BUCKETS_MAX);
    if (!METRICS_RECORDING)
        return;
    if (ns < 0)
        ns = 0;
    double s = (double)ns / 1e9;
    size_t i = 0;
    while (i < h->n && s > h->bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)ns, memory_order_relaxed);
}

void metrics_hist_read(const struct metrics_hist *h,
                       struct metrics_hist_snap *out)
{
    assert(h != NULL && out != NULL && h->n <= METRICS_BUCKETS_MAX);
    uint64_t cum = 0;
    for (size_t i = 0; i <= h->n; i++) {
        cum += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
        if (i < h->n)
            out->cum[i] = cum;
    }
    out->count = cum;
    out->sum_seconds =
        (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) /
        1e9;
}
