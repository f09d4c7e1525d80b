/*
 * quota.c - the backend quota (--quota-backend-bytes), as etcd 3.4 keeps
 * it: a Put or a Txn with puts whose cost would take the store to the
 * quota or past it is refused with ErrNoSpace before it is proposed; one
 * that passed that check but finds the store full when it is applied is
 * applied all the same (every member applies the same log) and answered
 * ErrNoSpace.  The cost is etcd's estimate: 256 bytes of metadata plus the
 * key and value of each put (a txn: the dearer of its two branches, puts
 * at the top level only).  The size is the store's extent after the last
 * committed apply batch (what Status calls dbSize).
 *
 * A write the API refuses for the quota, or for a full disk (the store
 * found no more blocks: backend_space_low), raises the NOSPACE alarm as
 * etcd's quotaAlarmer does; while the alarm is active the API refuses
 * every write with a cost, and the capped applier refuses them when they
 * are applied (applier.h).
 *
 * The check at apply time is the quota applier (etcd's quotaApplierV3), a
 * link of the apply chain (applier.h) in front of the store.
 */
#include "util/check.h"

#include "server/applier.h"
#include "server/server_int.h"

#include "backend/backend.h"
#include "wal/wal.h"
#include "util/err.h"
#include "util/log.h"

#define QUOTA_DEFAULT_BYTES ((int64_t)2 << 30) /* --quota-backend-bytes 0 */
#define QUOTA_SUGGESTED_MAX ((int64_t)8 << 30) /* etcd warns above it */
#define KV_OVERHEAD 256                        /* etcd's per-put estimate */

uint64_t server_put_cost(const Etcdserverpb__PutRequest *p)
{
    return KV_OVERHEAD + p->key.len + p->value.len;
}

static uint64_t branch_cost(Etcdserverpb__RequestOp *const *ops, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i]->request_case ==
            ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
            c += server_put_cost(ops[i]->request_put);
    return c;
}

uint64_t server_txn_cost(const Etcdserverpb__TxnRequest *t)
{
    uint64_t ok = branch_cost(t->success, t->n_success);
    uint64_t fail = branch_cost(t->failure, t->n_failure);
    return ok > fail ? ok : fail;
}

int64_t server__quota_bytes(const struct server *s)
{
    int64_t q = s->cfg.quota_backend_bytes;
    return q == 0 ? QUOTA_DEFAULT_BYTES : q;
}

bool server__quota_room(struct server *s, uint64_t cost)
{
    int64_t q = s->cfg.quota_backend_bytes;
    if (cost == 0 || q < 0)
        return true;
    if (q == 0)
        q = QUOTA_DEFAULT_BYTES;
    return atomic_load(&s->db_used) + cost < (uint64_t)q;
}

bool server_quota_allows(struct server *s, uint64_t cost)
{
    if (cost == 0)
        return true;
    if (server__alarm_nospace(s))
        return false;
    if (server__quota_room(s, cost) && !atomic_load(&s->disk_low) &&
        (s->wal == NULL || !wal_space_low(s->wal)))
        return true;
    server__alarm_raise_nospace(s);
    return false;
}

/* etcd's zap lines (etcdserver/quota.go). */
static void quota_log_zap(int64_t q)
{
    if (q < 0) {
        log_zap(LOG_INFO, "disabled backend quota",
                LOG_STR("quota-name", "v3-applier"),
                LOG_INT("quota-size-bytes", q));
        return;
    }
    if (q == 0) {
        log_zap(LOG_INFO, "enabled backend quota with default value",
                LOG_STR("quota-name", "v3-applier"),
                LOG_INT("quota-size-bytes", QUOTA_DEFAULT_BYTES),
                LOG_SIZE("quota-size", QUOTA_DEFAULT_BYTES));
        return;
    }
    if (q > QUOTA_SUGGESTED_MAX)
        log_zap(LOG_WARN, "quota exceeds the maximum value",
                LOG_STR("quota-name", "v3-applier"),
                LOG_INT("quota-size-bytes", q), LOG_SIZE("quota-size", q),
                LOG_INT("quota-maximum-size-bytes", QUOTA_SUGGESTED_MAX),
                LOG_SIZE("quota-maximum-size", QUOTA_SUGGESTED_MAX));
    log_zap(LOG_INFO, "enabled backend quota",
            LOG_STR("quota-name", "v3-applier"),
            LOG_INT("quota-size-bytes", q), LOG_SIZE("quota-size", q));
}

void server__quota_log(const struct server *s)
{
    int64_t q = s->cfg.quota_backend_bytes;
    if (log_is_zap())
        quota_log_zap(q);
    else if (q < 0)
        log_info("etcdserver", "disabled backend quota (quota-size-bytes %lld)",
                 (long long)q);
    else if (q > QUOTA_SUGGESTED_MAX)
        log_warn("etcdserver", "backend quota %lld exceeds maximum recommended "
                 "quota %lld", (long long)q, (long long)QUOTA_SUGGESTED_MAX);
}

void server__quota_update(struct server *s)
{
    atomic_store(&s->db_used, backend_used_bytes(s->be));
    atomic_store(&s->disk_low, backend_space_low(s->be));
}

/* --- the quota applier ------------------------------------------------- */

/* The room is judged before the write (on the size after the last commit,
 * as etcd's), and a write without it is applied all the same: every
 * member applies the same log. */
static int quota_put(const struct applier *self, struct applier_call *c)
{
    CHECK(c->slot == APPLIER_PUT);
    bool room = server__quota_room(c->s, server_put_cost(c->req->put));
    int rc = server__applier_next(self, c);
    return rc == 0 && !room ? ERR_NO_SPACE : rc;
}

static int quota_txn(const struct applier *self, struct applier_call *c)
{
    CHECK(c->slot == APPLIER_TXN);
    bool room = server__quota_room(c->s, server_txn_cost(c->req->txn));
    int rc = server__applier_next(self, c);
    return rc == 0 && !room ? ERR_NO_SPACE : rc;
}

/* LeaseGrant is etcd's third charged request; leases are not built (the
 * store answers it ERR_UNSUPPORTED), so it passes. */
const struct applier_ops server__applier_quota_ops = {
    .name = "quota",
    .fn = {
        [APPLIER_PUT] = quota_put,
        [APPLIER_TXN] = quota_txn,
    },
};
