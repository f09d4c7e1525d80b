/*
 * metrics.h - counters and histograms for the Prometheus series of
 * /metrics (api/metrics.c renders them with etcd's names).
 *
 * A module that measures something owns its metric as a process-wide
 * object (etcd's are process-wide too: several members in one process
 * share them) and declares it in its own header; recording is one or a
 * few relaxed atomic adds, so any thread records at any time without a
 * lock, and a scrape reads each field once (a scrape may see a count
 * and a sum from slightly different moments, as Prometheus' Go client
 * may).
 *
 * Histograms have fixed upper bounds in seconds (a static const array
 * given at definition; the +Inf bucket is implicit) and keep the sum in
 * nanoseconds.  Buckets are not cumulative in memory: metrics_hist_read
 * returns the cumulative counts Prometheus expects.
 *
 * Nothing here allocates; definitions are static initialisers:
 *
 *     static const double wal_fsync_bounds[] = {0.001, 0.002, ...};
 *     struct metrics_hist wal_fsync_hist =
 *         METRICS_HIST_INIT(wal_fsync_bounds);
 */
#ifndef CETCD_UTIL_METRICS_H
#define CETCD_UTIL_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The most buckets a histogram may have (etcd's have 14 or 11). */
#define METRICS_BUCKETS_MAX 16

struct metrics_counter {
    _Atomic uint64_t v; /* the count */
};

struct metrics_hist {
    const double *bounds;  /* upper bounds in seconds, ascending */
    size_t n;              /* number of bounds (<= METRICS_BUCKETS_MAX) */
    _Atomic uint64_t counts[METRICS_BUCKETS_MAX + 1]; /* per bucket; the
                                                         last is +Inf */
    _Atomic uint64_t sum_ns; /* sum of the observed durations */
};

#define METRICS_HIST_INIT(bounds_array)                                     \
    {                                                                       \
        .bounds = (bounds_array),                                           \
        .n = sizeof(bounds_array) / sizeof((bounds_array)[0]),              \
    }

/* What a scrape reads of a histogram: cumulative counts per bound (cum[i]
 * is the number of observations <= bounds[i]), the total and the sum. */
struct metrics_hist_snap {
    uint64_t cum[METRICS_BUCKETS_MAX];
    uint64_t count;
    double sum_seconds;
};

/*
 * CETCD_METRICS_OFF (CMake option of the same name) turns every recording
 * below into nothing: a build only for measuring what counting costs
 * (bench/metrics_cost.sh); its /metrics reads zeros.  Never a release.
 */
#ifdef CETCD_METRICS_OFF
#define METRICS_RECORDING 0
#else
#define METRICS_RECORDING 1
#endif

static inline void metrics_inc(struct metrics_counter *c)
{
    if (METRICS_RECORDING)
        atomic_fetch_add_explicit(&c->v, 1, memory_order_relaxed);
}

static inline void metrics_add(struct metrics_counter *c, uint64_t n)
{
    if (METRICS_RECORDING)
        atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}

static inline uint64_t metrics_get(const struct metrics_counter *c)
{
    return atomic_load_explicit(&c->v, memory_order_relaxed);
}

/* metrics_now_ns: CLOCK_MONOTONIC in nanoseconds, for timing what a
 * histogram observes. */
int64_t metrics_now_ns(void);

/* metrics_observe_ns records one duration (negative counts as 0). */
void metrics_observe_ns(struct metrics_hist *h, int64_t ns);

/* metrics_since records metrics_now_ns() - start_ns. */
static inline void metrics_since(struct metrics_hist *h, int64_t start_ns)
{
    if (METRICS_RECORDING)
        metrics_observe_ns(h, metrics_now_ns() - start_ns);
}

/* metrics_hist_read fills out from h. */
void metrics_hist_read(const struct metrics_hist *h,
                       struct metrics_hist_snap *out);

#endif
