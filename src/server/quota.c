/*
 * quota.c - the backend quota (--quota-backend-bytes), as etcd 3.4 keeps
 * it: a Put, a Txn with puts or a LeaseGrant whose cost would take the
 * store to the quota or past it is refused with ErrNoSpace before it is
 * proposed; one that passed that check but finds the store full when it
 * is applied is applied all the same (every member applies the same log)
 * and answered ErrNoSpace.  The cost is etcd's estimate: 256 bytes of
 * metadata plus the key and value of each put (a txn: the dearer of its
 * two branches, puts at the top level only), and 64 bytes for a
 * LeaseGrant.
 *
 * The measure.  etcd adds the cost to its bbolt file's size (Status
 * dbSize: bbolt's high-water mark of pages, free ones included).  cetcd
 * adds it to the store's pages in use as the last committed apply batch
 * left them (Status dbSizeInUse: its trees' pages, LMDB's own counts,
 * taken in the batch's txn: backend_used_bytes), not to its extent
 * (Status dbSize).  The extent holds every page freed since the oldest
 * open read txn, and the pins (snap_pin.c) hold one until some MiB were
 * freed after it and the next pin's fsyncs ran, so it is the data plus
 * the copies of the last pins' writes, and follows the load and the
 * pins' timing (measured with session 16's pins, one per 250 ms): 14 pages on a fresh store (5 in
 * use; etcd: a 5-page file), 1491 to 1806 after 1000 small puts (48 in
 * use; etcd: 23).  A quota on the extent refused writes by timing, and a 13-page
 * quota (etcd's TestCtlV3Alarm) the first one.  The pages in use follow
 * the writes only, whatever reads, pins or defragmentations did.
 *
 * How it differs from etcd's for the same data (docs/ARCHITECTURE.md
 * "Quota and alarms" has the numbers; bench/quota_sizes.py measures):
 * - bbolt's free pages count in etcd: after a compaction its file keeps
 *   its size and the quota still refuses until a defragmentation.  cetcd
 *   counts what the compaction deleted as free once it is deleted (the
 *   steps run in the apply batches: see the compaction in ARCHITECTURE.md),
 *   so compaction alone makes room; a defragmentation changes the figure
 *   little (LMDB's compacting copy keeps the trees' pages).  The
 *   NOSPACE alarm stays latched until disarmed either way, as in etcd.
 * - cetcd stores more for the same keys: the revision index that etcd
 *   keeps in memory (the `rev` bucket), and versions ordered by key (a
 *   new version goes in the middle of the `kv` tree, whose pages split
 *   and stay about half full) where bbolt appends revisions to full
 *   pages: 1.4x to 2.1x etcd's file for 1000 small puts, 2.4x for 1000
 *   1 KB puts over 100 keys; the same quota holds less data.
 * - Like etcd's, the figure is this member's: it follows the member's own
 *   batches (a compaction steps once per batch), so members may differ by
 *   a few pages.  The API's check and the quota applier read the same
 *   figure, and every member applies the same log whatever it answers.
 *
 * The full disk (the store's blocks or the WAL's) is a second, separate
 * measure: backend_space_low, wal_space_low.
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
#define LEASE_OVERHEAD 64                      /* etcd's per-grant estimate */

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

/* etcd's leaseOverhead: the same for every grant, whatever its TTL or id
 * (the lease's keys are charged by their puts). */
uint64_t server_lease_grant_cost(const Etcdserverpb__LeaseGrantRequest *g)
{
    CHECK(g != NULL);
    return LEASE_OVERHEAD;
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

/* LeaseGrant is etcd's third charged request (quotaApplierV3.LeaseGrant):
 * without room the lease is granted all the same and the grant answered
 * ErrNoSpace, as a put. */
static int quota_lease_grant(const struct applier *self,
                             struct applier_call *c)
{
    CHECK(c->slot == APPLIER_LEASE_GRANT);
    bool room = server__quota_room(
        c->s, server_lease_grant_cost(c->req->lease_grant));
    int rc = server__applier_next(self, c);
    return rc == 0 && !room ? ERR_NO_SPACE : rc;
}

const struct applier_ops server__applier_quota_ops = {
    .name = "quota",
    .fn = {
        [APPLIER_PUT] = quota_put,
        [APPLIER_TXN] = quota_txn,
        [APPLIER_LEASE_GRANT] = quota_lease_grant,
    },
};
