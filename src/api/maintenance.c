/*
 * maintenance.c - the etcdserverpb.Maintenance service.  Status for now
 * (etcdctl endpoint status, client version checks); Alarm, Defragment,
 * Hash/HashKV, Snapshot and MoveLeader come with their issues and answer
 * UNIMPLEMENTED until then.
 */
#include "api/api_int.h"
#include "server/server.h"

/* The etcd version cetcd reports (the API it matches). */
#define API_ETCD_VERSION "3.4.23"

static void status(struct api_call *call, const uint8_t *req, size_t len,
                   void *ctx)
{
    struct api *api = ctx;
    (void)req;
    (void)len;
    struct server_status st;
    int rc = server_status_get(api->server, &st);
    if (rc != 0) {
        const char *msg;
        grpc_status_code code = api_error(rc, &msg);
        api_call_reply_error(call, code, msg);
        return;
    }
    Etcdserverpb__StatusResponse r = ETCDSERVERPB__STATUS_RESPONSE__INIT;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(api->server, &h);
    r.header = &h;
    r.version = API_ETCD_VERSION;
    r.dbsize = (int64_t)st.db_size;
    r.dbsizeinuse = (int64_t)st.db_in_use;
    r.leader = st.leader;
    r.raftindex = st.raft_index;
    r.raftterm = st.raft_term;
    r.raftappliedindex = st.applied_index;
    r.islearner = st.is_learner;
    api_call_reply(call, &r.base);
}

int api__maintenance_register(struct api *api)
{
    return api_server_register_unary(api->rpc,
                                     "/etcdserverpb.Maintenance/Status",
                                     status, api);
}
