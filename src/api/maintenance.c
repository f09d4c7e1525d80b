/*
 * maintenance.c - the etcdserverpb.Maintenance service: Status (etcdctl
 * endpoint status, client version checks) and MoveLeader (leader
 * transfer) and Alarm (etcdctl alarm list/disarm: every action goes
 * through raft, as in etcd 3.4); Defragment, Hash/HashKV and Snapshot come
 * with their issues and answer UNIMPLEMENTED until then.
 */
#include <stdint.h>
#include <time.h>

#include "api/api_int.h"
#include "server/server.h"
#include "util/mem.h"

/* A leader transfer without a client deadline gives up after this. */
#define MOVE_LEADER_TIMEOUT_MS 10000

/* The etcd version cetcd reports (the API it matches). */
#define API_ETCD_VERSION "3.4.23"

static void status(struct rpc_call *call, const uint8_t *req, size_t len,
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
        rpc_call_reply_error(call, code, msg);
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
    rpc_call_reply(call, &r.base);
}

/* A MoveLeader waiting for the leader to change. */
struct move {
    struct rpc_call *call;
    struct api *api;
};

/* Runs on the raft thread (or inline on an early error). */
static void on_moved(void *arg, int err)
{
    struct move *mv = arg;
    if (err != 0) {
        const char *msg;
        grpc_status_code code = api_error(err, &msg);
        rpc_call_reply_error(mv->call, code, msg);
    } else {
        Etcdserverpb__MoveLeaderResponse r =
            ETCDSERVERPB__MOVE_LEADER_RESPONSE__INIT;
        Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
        server_header_fill(mv->api->server, &h);
        r.header = &h;
        rpc_call_reply(mv->call, &r.base);
    }
    mem_free(mv);
}

/* etcd: only the leader moves leadership, to a voter, and the call waits
 * (until the client's deadline) for the new leader. */
static void move_leader(struct rpc_call *call, const uint8_t *req, size_t len,
                        void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__MoveLeaderRequest *r =
        etcdserverpb__move_leader_request__unpack(NULL, len, req);
    if (r == NULL) {
        rpc_call_reply_error(call, GRPC_STATUS_INTERNAL,
                             "grpc: error unmarshalling request");
        return;
    }
    uint64_t target = r->targetid;
    etcdserverpb__move_leader_request__free_unpacked(r, NULL);
    struct move *mv = mem_malloc(sizeof *mv);
    if (mv == NULL) {
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                             "out of memory");
        return;
    }
    *mv = (struct move){call, api};
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t now = (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
    uint64_t deadline = now + MOVE_LEADER_TIMEOUT_MS;
    int64_t client = rpc_call_deadline_ns(call);
    if (client != INT64_MAX && (uint64_t)(client / 1000000) < deadline)
        deadline = client > 0 ? (uint64_t)(client / 1000000) : now;
    server_move_leader(api->server, target, deadline, on_moved, mv);
}

/* Runs on the apply thread, or inline when the proposal was refused. */
static void on_alarm(void *arg, const struct server_response *r)
{
    struct rpc_call *call = arg;
    if (r->err != 0) {
        const char *msg;
        grpc_status_code code = api_error(r->err, &msg);
        rpc_call_reply_error(call, code, msg);
    } else {
        rpc_call_reply(call, r->msg);
    }
}

static void alarm(struct rpc_call *call, const uint8_t *req, size_t len,
                  void *ctx)
{
    struct api *api = ctx;
    Etcdserverpb__AlarmRequest *r =
        etcdserverpb__alarm_request__unpack(NULL, len, req);
    if (r == NULL) {
        rpc_call_reply_error(call, GRPC_STATUS_INTERNAL,
                             "grpc: error unmarshalling request");
        return;
    }
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_ALARM;
    ir.alarm = r;
    server_propose(api->server, &ir, on_alarm, call);
    etcdserverpb__alarm_request__free_unpacked(r, NULL);
}

int api__maintenance_register(struct api *api)
{
    int rc = rpc_server_register_unary(
        api->rpc, "/etcdserverpb.Maintenance/Status", status, api);
    if (rc == 0)
        rc = rpc_server_register_unary(
            api->rpc, "/etcdserverpb.Maintenance/MoveLeader", move_leader,
            api);
    if (rc == 0)
        rc = rpc_server_register_unary(
            api->rpc, "/etcdserverpb.Maintenance/Alarm", alarm, api);
    return rc;
}
