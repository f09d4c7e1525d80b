/*
 * lock.c - the v3lock Unlock (etcd's lockServer.Unlock: delete the key,
 * answer the delete's header).  Lock is the waiter stream in lock_wait.c.
 */
#include "svc/svc.h"

#include "svc/lock_int.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"
#include "v3lockpb/v3lock.pb-c.h"

/* On the apply thread (or inline on a refusal). */
static void on_deleted(void *ctx, int err, const ProtobufCMessage *reply)
{
    if (err != 0)
        return svc__done_take(ctx, err, NULL);
    const Etcdserverpb__DeleteRangeResponse *d = (const void *)reply;
    V3lockpb__UnlockResponse r = V3LOCKPB__UNLOCK_RESPONSE__INIT;
    r.header = d->header;
    svc__done_take(ctx, 0, &r.base);
}

void svc_lock_unlock(struct server *s, const V3lockpb__UnlockRequest *req,
                     struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    struct svc_done *held = svc__done_dup(done);
    if (held == NULL)
        return done.fn(done.ctx, ERR_NOMEM, NULL);
    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = req->key;
    svc_kv_delete_range(s, &d, (struct svc_done){on_deleted, held, svc__done_metadata});
}
