/*
 * report.c - prints a run the way etcd's benchmark does (Summary,
 * Response time histogram, Latency distribution, Error distribution), then
 * one machine-readable line for bench/compare.sh:
 *   RESULT op=put clients=100 conns=10 total=N ok=N errors=0 secs=..
 *          qps=.. avg_ms=.. p50_ms=.. p90_ms=.. p99_ms=.. p999_ms=.. max_ms=..
 */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

static const char *op_name(enum bench_op op)
{
    switch (op) {
    case BENCH_PUT: return "put";
    case BENCH_RANGE: return "range";
    case BENCH_TXN_PUT: return "txn-put";
    case BENCH_WATCH: return "watch";
    case BENCH_LEASE_KEEPALIVE: return "lease-keepalive";
    case BENCH_LEASE_PUT: return "lease-put";
    default: return "watch-latency";
    }
}

/* secs prints a number of seconds in etcd's "%4.4f" (or "%g" when
 * --precise) style. */
static void num(bool precise, double v)
{
    printf(precise ? "%g" : "%4.4f", v);
}

static void summary(bool p, const struct cetcd_latency_summary *s)
{
    printf("\nSummary:\n  Total:\t");
    num(p, s->total_s);
    printf(" secs.\n  Slowest:\t");
    num(p, s->slowest_s);
    printf(" secs.\n  Fastest:\t");
    num(p, s->fastest_s);
    printf(" secs.\n  Average:\t");
    num(p, s->average_s);
    printf(" secs.\n  Stddev:\t");
    num(p, s->stddev_s);
    printf(" secs.\n  Requests/sec:\t");
    num(p, s->rps);
    printf("\n");
}

static void histogram(bool p, const struct cetcd_latency_summary *s)
{
    size_t max = 0;

    for (int i = 0; i < CETCD_LATENCY_BUCKETS; i++)
        max = s->bucket_n[i] > max ? s->bucket_n[i] : max;
    printf("\nResponse time histogram:\n");
    for (int i = 0; i < CETCD_LATENCY_BUCKETS; i++) {
        size_t bar = max ? s->bucket_n[i] * 40 / max : 0;
        printf("  ");
        num(p, s->bucket_s[i]);
        printf(" [%zu]\t|", s->bucket_n[i]);
        for (size_t j = 0; j < bar; j++)
            fputs("\xe2\x88\x8e", stdout); /* U+220E, etcd's bar */
        printf("\n");
    }
}

static void latencies(bool p, const struct cetcd_latency_summary *s)
{
    printf("\nLatency distribution:\n");
    for (int i = 0; i < CETCD_LATENCY_PCTLS; i++) {
        if (s->pctl_s[i] <= 0)
            continue;
        printf("  %g%% in ", cetcd_latency_pctls[i]);
        num(p, s->pctl_s[i]);
        printf(" secs.\n");
    }
}

void bench_report(const struct bench_cfg *cfg, struct bench_result *res)
{
    bench_report_named(cfg, op_name(cfg->op), NULL, &res->lat, res->total_s,
                       res->first_error);
}

void bench_report_named(const struct bench_cfg *cfg, const char *op,
                        const char *title, struct cetcd_latency *lat,
                        double total_s, const char *first_error)
{
    struct cetcd_latency_summary s;

    cetcd_latency_summarise(lat, total_s, &s);
    if (title != NULL)
        printf("\n%s", title);
    if (s.count > 0) {
        summary(cfg->precise, &s);
        histogram(cfg->precise, &s);
        latencies(cfg->precise, &s);
    }
    if (lat->errors > 0)
        printf("\nError distribution:\n  [%llu]\t%s (first error shown)\n",
               (unsigned long long)lat->errors, first_error);
    /* Percentile slots: 10 25 50 75 90 95 99 99.9. */
    printf("\nRESULT op=%s clients=%d conns=%d total=%ld ok=%zu errors=%llu "
           "secs=%.4f qps=%.1f avg_ms=%.3f p50_ms=%.3f p90_ms=%.3f "
           "p99_ms=%.3f p999_ms=%.3f max_ms=%.3f\n",
           op, cfg->clients, cfg->conns, cfg->total, s.count,
           (unsigned long long)lat->errors, s.total_s, s.rps,
           s.average_s * 1e3, s.pctl_s[2] * 1e3, s.pctl_s[4] * 1e3,
           s.pctl_s[6] * 1e3, s.pctl_s[7] * 1e3, s.slowest_s * 1e3);
    fflush(stdout);
}
