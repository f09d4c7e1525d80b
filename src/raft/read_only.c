/*
 * read_only.c - ReadIndex requests waiting for a heartbeat round (the
 * ReadOnlySafe option).  Each request remembers the commit index when it
 * arrived; once a quorum acknowledged a heartbeat carrying its context, the
 * leader knows it was still leader at that moment, so the request and every
 * older one can be answered with their recorded index.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/mem.h"

void raft__ro_reset(struct raft_read_only *ro)
{
    for (size_t k = 0; k < ro->n; k++)
        mem_free(ro->q[k].ctx);
    mem_free(ro->q);
    memset(ro, 0, sizeof(*ro));
}

struct raft_read_req *raft__ro_find(struct raft_read_only *ro,
                                    const uint8_t *ctx, size_t len)
{
    for (size_t k = 0; k < ro->n; k++) {
        struct raft_read_req *q = &ro->q[k];
        if (q->ctx_len == len && (len == 0 || memcmp(q->ctx, ctx, len) == 0))
            return q;
    }
    return NULL;
}

/* Queues a request; false if the same context is already pending or the
 * queue is full (the caller then drops it). */
bool raft__ro_add(struct raft_read_only *ro, raft_index index, raft_id from,
                  const uint8_t *ctx, size_t len)
{
    if (raft__ro_find(ro, ctx, len) != NULL || ro->n >= RAFT_MAX_PENDING_READS)
        return false;
    if (ro->n == ro->cap) {
        ro->cap = ro->cap ? ro->cap * 2 : 8;
        ro->q = raft__xrealloc(ro->q, ro->cap * sizeof(*ro->q));
    }
    struct raft_read_req *q = &ro->q[ro->n++];
    memset(q, 0, sizeof(*q));
    q->index = index;
    q->from = from;
    q->ctx_len = len;
    q->ctx = raft__xmalloc(len);
    if (len > 0)
        memcpy(q->ctx, ctx, len);
    return true;
}

size_t raft__ro_pop_through(struct raft_read_only *ro,
                            struct raft_read_req *req,
                            struct raft_read_req **out)
{
    RAFT_ASSERT(req >= ro->q && req < ro->q + ro->n);
    size_t k = (size_t)(req - ro->q) + 1;
    *out = raft__xmalloc(k * sizeof(**out));
    memcpy(*out, ro->q, k * sizeof(**out));
    memmove(ro->q, ro->q + k, (ro->n - k) * sizeof(*ro->q));
    ro->n -= k;
    return k;
}

const struct raft_read_req *raft__ro_last(const struct raft_read_only *ro)
{
    return ro->n ? &ro->q[ro->n - 1] : NULL;
}
