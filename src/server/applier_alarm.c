/*
 * applier_alarm.c - the appliers an active alarm puts in front of the
 * chain (applier.h; alarm.c links them): capped for NOSPACE (etcd 3.4's
 * applierV3Capped) and corrupt for CORRUPT (its applierV3Corrupt).  Their
 * refusals change nothing: the request is answered, no mvcc txn is begun.
 */
#include "util/check.h"

#include "server/applier.h"
#include "server/server_int.h"
#include "util/err.h"

/* --- capped: NOSPACE --------------------------------------------------- */

static int no_space(const struct applier *self, struct applier_call *c)
{
    (void)self;
    (void)c;
    return ERR_NO_SPACE;
}

/* A txn without puts costs nothing and is served (deletes, reads). */
static int capped_txn(const struct applier *self, struct applier_call *c)
{
    CHECK(c->slot == APPLIER_TXN);
    if (server_txn_cost(c->req->txn) > 0)
        return ERR_NO_SPACE;
    return server__applier_next(self, c);
}

const struct applier_ops server__applier_capped_ops = {
    .name = "capped",
    .fn = {
        [APPLIER_PUT] = no_space,
        [APPLIER_TXN] = capped_txn,
        [APPLIER_LEASE_GRANT] = no_space,
    },
};

/* --- corrupt: CORRUPT -------------------------------------------------- */

static int corrupt(const struct applier *self, struct applier_call *c)
{
    (void)self;
    (void)c;
    return ERR_CLUSTER_CORRUPT;
}

static bool only_ranges(Etcdserverpb__RequestOp *const *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ops[i]->request_case !=
            ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
            return false;
    return true;
}

/* etcd serves a read-only txn (only Ranges in both branches, etcd's
 * isTxnReadonly) beside the log, through its base applier, so a CORRUPT
 * alarm never stops it; cetcd applies it through the log, so it passes
 * here.  Any other txn is refused. */
static int corrupt_txn(const struct applier *self, struct applier_call *c)
{
    CHECK(c->slot == APPLIER_TXN);
    const Etcdserverpb__TxnRequest *t = c->req->txn;
    if (!only_ranges(t->success, t->n_success) ||
        !only_ranges(t->failure, t->n_failure))
        return ERR_CLUSTER_CORRUPT;
    return server__applier_next(self, c);
}

const struct applier_ops server__applier_corrupt_ops = {
    .name = "corrupt",
    .fn = {
        [APPLIER_RANGE] = corrupt,
        [APPLIER_PUT] = corrupt,
        [APPLIER_DELETE_RANGE] = corrupt,
        [APPLIER_TXN] = corrupt_txn,
        [APPLIER_COMPACTION] = corrupt,
        [APPLIER_LEASE_GRANT] = corrupt,
        [APPLIER_LEASE_REVOKE] = corrupt,
    },
};
