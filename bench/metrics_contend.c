/*
 * metrics_contend.c - what an atomic add costs when another core writes
 * the same cache line (the /metrics counters both event loops add to),
 * against adds on lines of their own.  Two threads, 20 M relaxed adds
 * each; prints ns per add per thread.  Built and run by
 * bench/metrics_ir.sh (docs/BENCHMARKS.md, session 23).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define ADDS 20000000L

static _Atomic uint64_t shared_line[8] __attribute__((aligned(64)));
static _Atomic uint64_t own_line[2][8] __attribute__((aligned(64)));
static int shared;

static void *adder(void *arg)
{
    long id = (long)arg;
    _Atomic uint64_t *c = shared ? &shared_line[0] : &own_line[id][0];
    for (long i = 0; i < ADDS; i++)
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
    for (shared = 0; shared < 2; shared++) {
        pthread_t t[2];
        double t0 = now_s();
        for (long i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, adder, (void *)i);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        printf("%s: %.1f ns per add per thread\n",
               shared ? "one shared line" : "a line each",
               (now_s() - t0) * 1e9 / ADDS);
    }
    return 0;
}
