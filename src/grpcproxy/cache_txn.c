/*
 * cache_txn.c - what a Txn through the proxy does to its KV cache
 * (cache.c), as etcd 3.4's kv.go does it: after the upstream answered,
 * every compare's range is dropped (whichever branch ran), then the ops
 * of the branch that ran, in order: puts and deletes drop what they
 * write, ranges are cached with the response in the same position (a
 * range after a put of its key caches what the put wrote; one before it
 * is dropped by it).  Nested txns: etcd does not look into them (and
 * serves stale replies after their writes); we drop what any op in any of
 * their branches writes, and cache none of their ranges.  Responses that
 * do not pair with the ops (fewer, or of another kind) are not cached
 * from; the writes are dropped all the same.  Bytes that do not decode,
 * or txns nested deeper than GP_TXN_DEPTH_MAX, empty the cache.
 */
#include <assert.h>
#include <stdlib.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "util/mem.h"

/* invalidate_op drops what op writes: a put's key, a delete's range, and
 * for a nested txn what any op of either branch writes (etcd does not
 * look into nested txns).  Under c->mu; the nesting is bounded by the
 * check before decoding (GP_TXN_DEPTH_MAX). */
static void invalidate_op(struct gp_cache *c, const Etcdserverpb__RequestOp *op)
{
    static const ProtobufCBinaryData none = {0, NULL};
    const Etcdserverpb__TxnRequest *t = op->request_txn;
    switch (op->request_case) {
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
        gp__cache_invalidate(c, &op->request_put->key, &none);
        break;
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
        gp__cache_invalidate(c, &op->request_delete_range->key,
                             &op->request_delete_range->range_end);
        break;
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
        for (size_t i = 0; i < t->n_success; i++)
            invalidate_op(c, t->success[i]);
        for (size_t i = 0; i < t->n_failure; i++)
            invalidate_op(c, t->failure[i]);
        break;
    default:
        break;
    }
}

/* txn_entries builds, outside the lock, the entries of the branch's
 * ranges paired by index with range responses (kv.go's txnToCache);
 * NULL slots elsewhere.  Returns the array (mem_free) or NULL when out of
 * memory or there is nothing to pair. */
static struct gp__cache_entry **
txn_entries(const char *who, Etcdserverpb__RequestOp **ops, size_t n,
            const Etcdserverpb__TxnResponse *resp)
{
    size_t m = n < resp->n_responses ? n : resp->n_responses;
    struct gp__cache_entry **es = m > 0 ? mem_calloc(m, sizeof *es) : NULL;
    for (size_t i = 0; es != NULL && i < m; i++) {
        Etcdserverpb__ResponseOp *ro = resp->responses[i];
        if (ops[i]->request_case !=
                ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE ||
            ro->response_case !=
                ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE)
            continue;
        ProtobufCMessage *msg = &ro->response_range->base;
        size_t len = protobuf_c_message_get_packed_size(msg);
        uint8_t *b = mem_malloc(len ? len : 1);
        if (b == NULL)
            continue; /* not cached: nothing stale */
        protobuf_c_message_pack(msg, b);
        es[i] = gp__cache_range_entry(ops[i]->request_range, who, b, len);
        mem_free(b);
    }
    return es;
}

/* txn_apply is the txn's effect under c->mu: the compares invalidated,
 * then the taken branch's ops in order, writes invalidating and ranges
 * caching (in order: a range after a put of its key caches the new value,
 * one before it is dropped by it).  Takes the entries es[0..m). */
static void txn_apply(struct gp_cache *c, const Etcdserverpb__TxnRequest *t,
                      const Etcdserverpb__TxnResponse *r,
                      struct gp__cache_entry **es)
{
    Etcdserverpb__RequestOp **ops = r->succeeded ? t->success : t->failure;
    size_t n = r->succeeded ? t->n_success : t->n_failure;
    size_t m = n < r->n_responses ? n : r->n_responses;
    /* "txn may claim an outdated key is updated; be safe and invalidate"
     * (kv.go): every compare, whichever branch ran. */
    for (size_t i = 0; i < t->n_compare; i++)
        gp__cache_invalidate(c, &t->compare[i]->key, &t->compare[i]->range_end);
    for (size_t i = 0; i < n; i++) {
        if (i < m && es != NULL && es[i] != NULL)
            gp__cache_add(c, es[i]);
        else
            invalidate_op(c, ops[i]);
    }
}

void gp_cache_txn_done(struct gp_cache *c, const char *who,
                       const uint8_t *req, size_t req_len,
                       const uint8_t *resp, size_t resp_len)
{
    assert(c != NULL);
    Etcdserverpb__TxnRequest *t = NULL;
    Etcdserverpb__TxnResponse *r = NULL;
    struct gp__cache_entry **es = NULL;
    /* protobuf-c recurses into nested txns without a limit: check first. */
    if (gp__pb_check(&etcdserverpb__txn_request__descriptor, req, req_len) == 0)
        t = etcdserverpb__txn_request__unpack(NULL, req_len, req);
    if (t != NULL && gp__pb_check(&etcdserverpb__txn_response__descriptor, resp,
                                  resp_len) == 0)
        r = etcdserverpb__txn_response__unpack(NULL, resp_len, resp);
    if (r != NULL)
        es = r->succeeded ? txn_entries(who, t->success, t->n_success, r)
                          : txn_entries(who, t->failure, t->n_failure, r);
    gp__cache_lock(c);
    if (r != NULL)
        txn_apply(c, t, r, es);
    else
        gp__cache_clear(c); /* what it wrote is unknown here */
    gp__cache_unlock(c);
    mem_free(es);
    if (r != NULL)
        etcdserverpb__txn_response__free_unpacked(r, NULL);
    if (t != NULL)
        etcdserverpb__txn_request__free_unpacked(t, NULL);
}
