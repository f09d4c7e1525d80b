/*
 * defrag.c - Maintenance.Defragment (etcdctl defrag): this member's store
 * is defragmented online by server_defrag (src/server/defrag.c), and the
 * answer comes once it is done.  As etcd 3.4's, the response carries no
 * header (etcd's maintenance server returns an empty DefragmentResponse).
 */
#include "svc/svc.h"

#include "server/server.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"

/* Runs on the defrag thread, or inline when the request was refused. */
static void on_defragged(void *arg, int err)
{
    Etcdserverpb__DefragmentResponse r =
        ETCDSERVERPB__DEFRAGMENT_RESPONSE__INIT;
    svc__done_take(arg, err, err == 0 ? &r.base : NULL);
}

void svc_maint_defragment(struct server *s,
                          const Etcdserverpb__DefragmentRequest *req,
                          struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    int arc = svc_auth_check_maint(s, done); /* etcd's authMaintenanceServer */
    if (arc != 0) {
        done.fn(done.ctx, arc, NULL);
        return;
    }
    struct svc_done *held = svc__done_dup(done);
    if (held == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    server_defrag(s, on_defragged, held);
}
