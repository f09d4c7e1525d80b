/*
 * read.c - the read path: a linearizable Range waits until the applied index
 * reaches the commit index seen when it arrived (a single member's
 * ReadIndex); a serializable one reads at once.  Both read an LMDB snapshot
 * without taking any lock the writer holds; the response borrows the map
 * until server_read_end.
 */
#include <string.h>

#include "mvcc/mvcc.h"
#include "server/kv_range.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/mem.h"

struct server_read {
    struct mvcc_read *snap;          /* the LMDB read txn */
    struct mvcc_range_result res;    /* kvs borrowed by the response */
    struct arena arena;              /* the response */
};

static int wait_applied(struct server *s, uint64_t index)
{
    if (atomic_load(&s->applied_index) >= index)
        return 0;
    pthread_mutex_lock(&s->applied_mu);
    while (atomic_load(&s->applied_index) < index &&
           !atomic_load(&s->stopping))
        pthread_cond_wait(&s->applied_cv, &s->applied_mu);
    pthread_mutex_unlock(&s->applied_mu);
    return atomic_load(&s->applied_index) >= index ? 0 : ERR_STOPPED;
}

int server_range(struct server *s, const Etcdserverpb__RangeRequest *req,
                 Etcdserverpb__RangeResponse **resp_out,
                 struct server_read **read_out)
{
    if (!req->serializable) {
        uint64_t index;
        int rc = 0;
        /* A lone voter that leads needs no heartbeat round to know it is
         * still the leader (raft answers its ReadIndex at once too): read at
         * its commit index without a trip through the raft thread. */
        if (s->n_members == 1 && atomic_load(&s->lead) == s->member_id)
            index = atomic_load(&s->committed_index);
        else
            rc = server__read_index(s, server__request_timeout_ms(s), &index);
        if (rc == 0)
            rc = wait_applied(s, index);
        if (rc != 0)
            return rc;
    }
    struct server_read *r = mem_calloc(1, sizeof *r);
    if (r == NULL)
        return ERR_NOMEM;
    arena_init(&r->arena);
    int rc = mvcc_read_begin(s->mvcc, &r->snap);
    if (rc != 0) {
        mem_free(r);
        return rc;
    }
    rc = mvcc_range(r->snap, req->key.data, req->key.len, req->range_end.data,
                    req->range_end.len, req->revision,
                    kv_range_fetch_limit(req), kv_range_fetch_flags(req),
                    &r->res);
    Etcdserverpb__RangeResponse *resp = NULL;
    if (rc == 0) {
        resp = kv_range_build(req, &r->res, &r->arena);
        if (resp == NULL)
            rc = ERR_NOMEM;
    }
    if (rc != 0) {
        server_read_end(r);
        return rc;
    }
    /* The header carries the snapshot's current revision, even for a read
     * at a past revision (etcd's rule). */
    resp->header->revision = mvcc_read_rev(r->snap);
    server_header_fill(s, resp->header);
    *resp_out = resp;
    *read_out = r;
    return 0;
}

void server_read_end(struct server_read *r)
{
    if (r == NULL)
        return;
    mvcc_range_result_close(&r->res);
    mvcc_read_end(r->snap);
    arena_free(&r->arena);
    mem_free(r);
}
