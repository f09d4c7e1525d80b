/*
 * election.c - the v3election unary calls, as etcd 3.4's electionServer
 * over clientv3/concurrency:
 * - Proclaim: Txn(If create_revision(leader.key) == leader.rev Then put
 *   leader.key = value with leader.lease); not succeeded -> "election: not
 *   leader" (ERR_ELECTION_NOT_LEADER).
 * - Leader: the first key of name/ by create revision (linearizable);
 *   none -> "election: no leader" (ERR_ELECTION_NO_LEADER).
 * - Resign: Txn(If create_revision(leader.key) == leader.rev Then delete
 *   it); answered with the txn's header whether it deleted or not.
 * Proclaim and Resign without a leader: ERR_LEADER_KEY_MISSING.  The
 * lease is not checked up front: etcd's session creation does not fail
 * on it, only the put does (ERR_LEASE_NOT_FOUND).  Campaign is the waiter
 * stream in lock_wait.c, Observe the stream in observe.c.
 */
#include "svc/svc.h"

#include <string.h>

#include "svc/lock_int.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"

/* On the apply thread (or inline on a refusal). */
static void on_proclaimed(void *ctx, int err, const ProtobufCMessage *reply)
{
    if (err != 0)
        return svc__done_take(ctx, err, NULL);
    const Etcdserverpb__TxnResponse *t = (const void *)reply;
    if (!t->succeeded)
        return svc__done_take(ctx, ERR_ELECTION_NOT_LEADER, NULL);
    V3electionpb__ProclaimResponse r = V3ELECTIONPB__PROCLAIM_RESPONSE__INIT;
    r.header = t->header;
    svc__done_take(ctx, 0, &r.base);
}

void svc_election_proclaim(struct server *s,
                           const V3electionpb__ProclaimRequest *req,
                           struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    if (req->leader == NULL)
        return done.fn(done.ctx, ERR_LEADER_KEY_MISSING, NULL);
    struct svc_done *held = svc__done_dup(done);
    if (held == NULL)
        return done.fn(done.ctx, ERR_NOMEM, NULL);
    const V3electionpb__LeaderKey *lk = req->leader;
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = lk->key;
    p.value = req->value;
    p.lease = lk->lease;
    Etcdserverpb__RequestOp put = ETCDSERVERPB__REQUEST_OP__INIT;
    put.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    put.request_put = &p;
    Etcdserverpb__RequestOp *ops[1] = {&put};
    lock__txn_if_created(s, lk->key.data, lk->key.len, lk->rev, ops, 1, NULL,
                         0, (struct svc_done){on_proclaimed, held, svc__done_metadata});
}

static void on_resigned(void *ctx, int err, const ProtobufCMessage *reply)
{
    if (err != 0)
        return svc__done_take(ctx, err, NULL);
    const Etcdserverpb__TxnResponse *t = (const void *)reply;
    V3electionpb__ResignResponse r = V3ELECTIONPB__RESIGN_RESPONSE__INIT;
    r.header = t->header;
    svc__done_take(ctx, 0, &r.base);
}

void svc_election_resign(struct server *s,
                         const V3electionpb__ResignRequest *req,
                         struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    if (req->leader == NULL)
        return done.fn(done.ctx, ERR_LEADER_KEY_MISSING, NULL);
    struct svc_done *held = svc__done_dup(done);
    if (held == NULL)
        return done.fn(done.ctx, ERR_NOMEM, NULL);
    const V3electionpb__LeaderKey *lk = req->leader;
    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = lk->key;
    Etcdserverpb__RequestOp del = ETCDSERVERPB__REQUEST_OP__INIT;
    del.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    del.request_delete_range = &d;
    Etcdserverpb__RequestOp *ops[1] = {&del};
    lock__txn_if_created(s, lk->key.data, lk->key.len, lk->rev, ops, 1, NULL,
                         0, (struct svc_done){on_resigned, held, svc__done_metadata});
}

/* On the caller's thread or a read worker. */
static void on_leader(void *ctx, int err, const ProtobufCMessage *reply)
{
    if (err != 0)
        return svc__done_take(ctx, err, NULL);
    const Etcdserverpb__RangeResponse *g = (const void *)reply;
    if (g->n_kvs == 0)
        return svc__done_take(ctx, ERR_ELECTION_NO_LEADER, NULL);
    V3electionpb__LeaderResponse r = V3ELECTIONPB__LEADER_RESPONSE__INIT;
    r.header = g->header;
    r.kv = g->kvs[0];
    svc__done_take(ctx, 0, &r.base);
}

void svc_election_leader(struct server *s,
                         const V3electionpb__LeaderRequest *req,
                         struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    size_t n = req->name.len;
    uint8_t *pfx = mem_malloc(2 * (n + 1));
    struct svc_done *held = pfx != NULL ? svc__done_dup(done) : NULL;
    if (held == NULL) {
        mem_free(pfx);
        return done.fn(done.ctx, ERR_NOMEM, NULL);
    }
    for (int i = 0; i < 2; i++) {
        if (n > 0)
            memcpy(pfx + i * (n + 1), req->name.data, n);
        pfx[i * (n + 1) + n] = i == 0 ? '/' : '0';
    }
    lock__range(s, pfx, n + 1, pfx + n + 1, n + 1,
                ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND, 1, 0,
                (struct svc_done){on_leader, held, svc__done_metadata});
    mem_free(pfx); /* lock__range keeps its own copy */
}
