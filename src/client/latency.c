/*
 * latency.c - latency samples and the summary etcd's benchmark prints:
 * fastest, slowest, mean, population stddev, requests/s, a histogram of 10
 * equal-width buckets plus one at the slowest sample, and percentiles by
 * etcd's rule (first sorted sample whose rank i*100/n reaches p).
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_int.h"
#include "util/mem.h"

const double cetcd_latency_pctls[CETCD_LATENCY_PCTLS] = {
    10, 25, 50, 75, 90, 95, 99, 99.9,
};

int cetcd_latency_init(struct cetcd_latency *l, size_t cap_hint)
{
    assert(l != NULL);
    memset(l, 0, sizeof(*l));
    if (cap_hint == 0)
        cap_hint = 16;
    l->lats = mem_malloc(cap_hint * sizeof(double));
    if (l->lats == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    l->cap = cap_hint;
    return 0;
}

void cetcd_latency_close(struct cetcd_latency *l)
{
    if (l == NULL)
        return;
    mem_free(l->lats);
    memset(l, 0, sizeof(*l));
}

static int reserve(struct cetcd_latency *l, size_t more)
{
    size_t cap = l->cap ? l->cap : 16;
    double *p;

    if (l->len + more <= l->cap)
        return 0;
    while (cap < l->len + more)
        cap *= 2;
    p = mem_realloc(l->lats, cap * sizeof(double));
    if (p == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    l->lats = p;
    l->cap = cap;
    return 0;
}

int cetcd_latency_add(struct cetcd_latency *l, double seconds)
{
    assert(l != NULL);
    assert(seconds >= 0);
    if (reserve(l, 1) != 0)
        return CETCD_RESOURCE_EXHAUSTED;
    l->lats[l->len++] = seconds;
    return 0;
}

int cetcd_latency_merge(struct cetcd_latency *dst,
                        const struct cetcd_latency *src)
{
    assert(dst != NULL && src != NULL && dst != src);
    if (src->len > 0 && reserve(dst, src->len) != 0)
        return CETCD_RESOURCE_EXHAUSTED;
    if (src->len > 0)
        memcpy(dst->lats + dst->len, src->lats, src->len * sizeof(double));
    dst->len += src->len;
    dst->errors += src->errors;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void percentiles(const double *s, size_t n, double *out)
{
    size_t j = 0;

    for (size_t i = 0; i < n && j < CETCD_LATENCY_PCTLS; i++) {
        double rank = (double)i * 100.0 / (double)n;
        /* One sample may satisfy several percentiles when n is small. */
        while (j < CETCD_LATENCY_PCTLS && rank >= cetcd_latency_pctls[j])
            out[j++] = s[i];
    }
}

static void histogram(const double *s, size_t n,
                      struct cetcd_latency_summary *out)
{
    const int bc = CETCD_LATENCY_BUCKETS - 1;
    double width = (out->slowest_s - out->fastest_s) / bc;
    size_t bi = 0;

    for (int i = 0; i < bc; i++)
        out->bucket_s[i] = out->fastest_s + width * i;
    out->bucket_s[bc] = out->slowest_s;
    for (size_t i = 0; i < n;) {
        if (s[i] <= out->bucket_s[bi]) {
            out->bucket_n[bi]++;
            i++;
        } else if (bi < (size_t)bc) {
            bi++;
        } else {
            out->bucket_n[bi]++; /* rounding: count in the last bucket */
            i++;
        }
    }
}

void cetcd_latency_summarise(struct cetcd_latency *l, double total_s,
                             struct cetcd_latency_summary *out)
{
    double sum = 0, dev = 0;

    assert(l != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    out->total_s = total_s;
    if (l->len == 0)
        return;
    qsort(l->lats, l->len, sizeof(double), cmp_double);
    for (size_t i = 0; i < l->len; i++)
        sum += l->lats[i];
    out->count = l->len;
    out->average_s = sum / (double)l->len;
    for (size_t i = 0; i < l->len; i++)
        dev += (l->lats[i] - out->average_s) * (l->lats[i] - out->average_s);
    out->stddev_s = sqrt(dev / (double)l->len);
    out->fastest_s = l->lats[0];
    out->slowest_s = l->lats[l->len - 1];
    out->rps = total_s > 0 ? (double)l->len / total_s : 0;
    percentiles(l->lats, l->len, out->pctl_s);
    histogram(l->lats, l->len, out);
    assert(out->fastest_s <= out->slowest_s);
}
