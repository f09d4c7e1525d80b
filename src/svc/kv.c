/*
 * kv.c - the KV service: etcd's checks, then Range on the read path and
 * Put/DeleteRange/Txn/Compact through the proposal funnel.  Answers to
 * proposals come from the apply thread (svc.h "Completions").
 */
#include "svc/svc.h"

#include "auth/auth.h"
#include "server/server.h"
#include "svc/kv_check.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"

/* Runs on the apply thread (or inline when the proposal is refused). */
static void on_written(void *arg, const struct server_response *r)
{
    svc__done_take(arg, r->err, r->err == 0 ? r->msg : NULL);
}

/* Runs on the caller's thread (served at once) or a read worker. */
static void on_range(void *arg, int err, const Etcdserverpb__RangeResponse *r)
{
    svc__done_take(arg, err, err == 0 ? &r->base : NULL);
}

/* The read's permission, at its consistency point (server.h
 * server_read_check_fn): as etcd, after the ReadIndex wait, so a grant
 * committed before the read came is seen (and a token checked then);
 * the read is void if the auth store changed while it was made (the
 * revision given back, server.h).  arg: the held completion; its metadata
 * is valid until it is taken. */
static int range_permitted(struct server *s,
                           const Etcdserverpb__RangeRequest *req, void *arg,
                           uint64_t *auth_rev_out)
{
    const struct svc_done *held = arg;
    return svc_auth_check_read(s, *held, req->key, req->range_end,
                               auth_rev_out);
}

void svc_kv_range(struct server *s, Etcdserverpb__RangeRequest *req,
                  struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    int rc = kv_check_range(req);
    struct svc_done *held = rc == 0 ? svc__done_dup(done) : NULL;
    if (rc == 0 && held == NULL)
        rc = ERR_NOMEM;
    if (rc != 0) {
        etcdserverpb__range_request__free_unpacked(req, NULL);
        done.fn(done.ctx, rc, NULL);
        return;
    }
    /* A linearizable read waits for raft without holding this thread;
     * etcd checks reads at the read path, not in raft. */
    server_range_async_checked(s, req, range_permitted, on_range, held);
}

/* A write method: etcd's checks of its request, its cost against the
 * backend quota, and the kind of internal request that carries it through
 * raft. */
struct write_method {
    Cetcdpb__InternalRequest__RequestCase kind; /* InternalRequest case */
    /* etcd's request checks (NULL: none); 0 or the ERR_* to answer */
    int (*check)(struct server *s, const ProtobufCMessage *m);
    /* its cost against the backend quota (NULL: none), checked first */
    uint64_t (*cost)(const ProtobufCMessage *m);
};

static uint64_t put_cost(const ProtobufCMessage *m)
{
    return server_put_cost((const Etcdserverpb__PutRequest *)m);
}

static uint64_t txn_cost(const ProtobufCMessage *m)
{
    return server_txn_cost((const Etcdserverpb__TxnRequest *)m);
}

static int check_put(struct server *s, const ProtobufCMessage *m)
{
    (void)s;
    return kv_check_put((const Etcdserverpb__PutRequest *)m);
}

static int check_delete(struct server *s, const ProtobufCMessage *m)
{
    (void)s;
    return kv_check_delete((const Etcdserverpb__DeleteRangeRequest *)m);
}

/* Read-only txns also go through raft for now: linearizable and correct,
 * one log entry more than etcd's read path. */
static int check_txn(struct server *s, const ProtobufCMessage *m)
{
    return kv_check_txn((const Etcdserverpb__TxnRequest *)m,
                        server_max_txn_ops(s));
}

static const struct write_method put_method = {
    CETCDPB__INTERNAL_REQUEST__REQUEST_PUT, check_put, put_cost};
static const struct write_method delete_method = {
    CETCDPB__INTERNAL_REQUEST__REQUEST_DELETE_RANGE, check_delete, NULL};
static const struct write_method txn_method = {
    CETCDPB__INTERNAL_REQUEST__REQUEST_TXN, check_txn, txn_cost};
static const struct write_method compact_method = {
    CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION, NULL, NULL};

/* propose_write checks m (the quota first, as etcd's quota wrapper runs
 * before the KV server's own checks) and proposes it; the answer comes
 * from the apply thread.  m is packed into the proposal before server_propose
 * returns, so it is only borrowed. */
static void propose_write(struct server *s, const struct write_method *wm,
                  const ProtobufCMessage *m, struct svc_done done)
{
    CHECK(s != NULL && m != NULL && done.fn != NULL);
    int rc = 0;
    if (wm->cost && !server_quota_allows(s, wm->cost(m)))
        rc = ERR_NO_SPACE;
    if (rc == 0 && wm->check)
        rc = wm->check(s, m);
    struct svc_done *held = rc == 0 ? svc__done_dup(done) : NULL;
    if (rc == 0 && held == NULL)
        rc = ERR_NOMEM;
    if (rc != 0) {
        done.fn(done.ctx, rc, NULL);
        return;
    }
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    char user[AUTH_NAME_MAX + 1];
    rc = svc__auth_stamp(s, done, &ir, user, sizeof user);
    if (rc != 0) {
        svc__done_take(held, rc, NULL);
        return;
    }
    ir.request_case = wm->kind;
    /* Every member of the request oneof is a message pointer: storing
     * through one of them sets the one the case names. */
    ir.put = (Etcdserverpb__PutRequest *)m;
    server_propose(s, &ir, on_written, held);
}

void svc_kv_put(struct server *s, const Etcdserverpb__PutRequest *req,
                struct svc_done done)
{
    propose_write(s, &put_method, &req->base, done);
}

void svc_kv_delete_range(struct server *s,
                         const Etcdserverpb__DeleteRangeRequest *req,
                         struct svc_done done)
{
    propose_write(s, &delete_method, &req->base, done);
}

void svc_kv_txn(struct server *s, const Etcdserverpb__TxnRequest *req,
                struct svc_done done)
{
    propose_write(s, &txn_method, &req->base, done);
}

void svc_kv_compact(struct server *s,
                    const Etcdserverpb__CompactionRequest *req,
                    struct svc_done done)
{
    propose_write(s, &compact_method, &req->base, done);
}
