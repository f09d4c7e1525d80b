/*
 * kv_range.c - etcd 3.4's Range post-processing: min/max revision filters,
 * sort (ascending by default when the target is not KEY), limit with
 * `more`, and `count` = keys in the range before filters and limit.
 */
#include "server/kv_range.h"

#include "util/check.h"
#include <string.h>

#include "util/mem.h"

typedef Etcdserverpb__RangeRequest range_req;

static bool needs_all(const range_req *r)
{
    return r->sort_order != ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE ||
           r->min_mod_revision != 0 || r->max_mod_revision != 0 ||
           r->min_create_revision != 0 || r->max_create_revision != 0;
}

int64_t kv_range_fetch_limit(const range_req *r)
{
    if (needs_all(r) || r->limit <= 0)
        return 0;
    return r->limit + 1;
}

unsigned kv_range_fetch_flags(const range_req *r)
{
    unsigned f = 0;
    if (r->count_only)
        f |= MVCC_RANGE_COUNT_ONLY;
    /* Values are needed to sort by value; keys_only strips them after. */
    if (r->keys_only &&
        r->sort_target != ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VALUE)
        f |= MVCC_RANGE_KEYS_ONLY;
    return f;
}

static bool pruned(const range_req *r, const struct mvcc_kv *kv)
{
    if (r->max_mod_revision != 0 && kv->mod_rev > r->max_mod_revision)
        return true;
    if (r->min_mod_revision != 0 && kv->mod_rev < r->min_mod_revision)
        return true;
    if (r->max_create_revision != 0 &&
        kv->create_rev > r->max_create_revision)
        return true;
    if (r->min_create_revision != 0 &&
        kv->create_rev < r->min_create_revision)
        return true;
    return false;
}

static int bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

static int i64_cmp(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b ? 1 : 0;
}

static int kv_cmp(int target, const struct mvcc_kv *a, const struct mvcc_kv *b)
{
    switch (target) {
    case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VERSION:
        return i64_cmp(a->version, b->version);
    case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE:
        return i64_cmp(a->create_rev, b->create_rev);
    case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__MOD:
        return i64_cmp(a->mod_rev, b->mod_rev);
    case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VALUE:
        return bytes_cmp(a->value, a->value_len, b->value, b->value_len);
    default:
        return bytes_cmp(a->key, a->key_len, b->key, b->key_len);
    }
}

/* Stable merge sort: for short inputs it orders equal elements exactly as
 * Go's insertion sort does (etcd sorts with sort.Sort). */
static void merge_sort(struct mvcc_kv *v, struct mvcc_kv *tmp, size_t n,
                       int target, int dir)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(v, tmp, h, target, dir);
    merge_sort(v + h, tmp, n - h, target, dir);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        if (dir * kv_cmp(target, &v[j], &v[i]) < 0)
            tmp[k++] = v[j++];
        else
            tmp[k++] = v[i++];
    }
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static int sort_kvs(const range_req *r, struct mvcc_kv *kvs, size_t n,
                    struct arena *a)
{
    int order = r->sort_order;
    if (r->sort_target != ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY &&
        order == ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE)
        order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    if (order == ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE || n < 2)
        return 0;
    int dir = order == ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND ? -1
                                                                        : 1;
    if (order != ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND && dir == 1)
        return 0; /* unknown order: etcd 3.4 leaves the result unsorted */
    struct mvcc_kv *tmp = arena_alloc(a, n * sizeof *tmp);
    if (tmp == NULL)
        return -1;
    merge_sort(kvs, tmp, n, r->sort_target, dir);
    return 0;
}

void kv_to_pb(const struct mvcc_kv *kv, Mvccpb__KeyValue *out)
{
    mvccpb__key_value__init(out);
    out->key.data = (uint8_t *)kv->key;
    out->key.len = kv->key_len;
    out->value.data = (uint8_t *)kv->value;
    out->value.len = kv->value ? kv->value_len : 0;
    out->create_revision = kv->create_rev;
    out->mod_revision = kv->mod_rev;
    out->version = kv->version;
    out->lease = kv->lease;
}

static Etcdserverpb__RangeResponse *alloc_resp(struct arena *a, int64_t rev)
{
    Etcdserverpb__RangeResponse *resp = arena_alloc(a, sizeof *resp);
    Etcdserverpb__ResponseHeader *h = arena_alloc(a, sizeof *h);
    if (resp == NULL || h == NULL)
        return NULL;
    etcdserverpb__range_response__init(resp);
    etcdserverpb__response_header__init(h);
    h->revision = rev;
    resp->header = h;
    return resp;
}

Etcdserverpb__RangeResponse *kv_range_build(const range_req *r,
                                            struct mvcc_range_result *res,
                                            struct arena *a)
{
    Etcdserverpb__RangeResponse *resp = alloc_resp(a, res->rev);
    if (resp == NULL)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < res->n_kvs; i++)
        if (!pruned(r, &res->kvs[i]))
            res->kvs[n++] = res->kvs[i];
    if (sort_kvs(r, res->kvs, n, a) != 0)
        return NULL;
    if (r->limit > 0 && n > (size_t)r->limit) {
        n = (size_t)r->limit;
        resp->more = 1;
    }
    resp->count = res->count;
    if (n == 0)
        return resp;
    Mvccpb__KeyValue *kvs = arena_alloc(a, n * sizeof *kvs);
    resp->kvs = arena_alloc(a, n * sizeof *resp->kvs);
    if (kvs == NULL || resp->kvs == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        kv_to_pb(&res->kvs[i], &kvs[i]);
        if (r->keys_only) {
            kvs[i].value.data = NULL;
            kvs[i].value.len = 0;
        }
        resp->kvs[i] = &kvs[i];
    }
    resp->n_kvs = n;
    CHECK(resp->n_kvs <= res->n_kvs);
    return resp;
}
