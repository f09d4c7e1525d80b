/*
 * maintenance.c - the Maintenance service: Status (etcdctl endpoint
 * status, client version checks), MoveLeader (leader transfer) and Alarm
 * (etcdctl alarm list/disarm: every action goes through raft, as in etcd
 * 3.4), Hash and HashKV (server_hash, server_hash_kv).  Defragment and
 * Snapshot come with their issues.
 */
#include "svc/svc.h"

#include <time.h>

#include "auth/auth.h"
#include "server/server.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* Longest Status error: an alarm's "memberID:<20 digits> alarm:CORRUPT ". */
#define STATUS_ERROR_BYTES 64

/* status_errors fills errs (at most SERVER_ALARMS_MAX + 1 strings, in
 * bufs) as etcd 3.4's Status does: "etcdserver: no leader" when there is
 * no leader, then one per active alarm, the AlarmMember in the protobuf
 * compact text form (fields at their zero value left out, each followed
 * by a space), e.g. "memberID:1234 alarm:NOSPACE ".  Returns the count. */
static size_t status_errors(struct server *s, bool no_leader,
                            char bufs[][STATUS_ERROR_BYTES], char **errs)
{
    struct server_alarm al[SERVER_ALARMS_MAX];
    size_t n = server_alarms_list(s, al, SERVER_ALARMS_MAX);
    size_t k = 0;
    if (no_leader)
        errs[k++] = "etcdserver: no leader";
    for (size_t i = 0; i < n; i++) {
        server_alarm_text(&al[i], bufs[i], STATUS_ERROR_BYTES);
        errs[k++] = bufs[i];
    }
    CHECK(k <= SERVER_ALARMS_MAX + 1);
    return k;
}

void svc_maint_status(struct server *s, const Etcdserverpb__StatusRequest *req,
                      struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    struct server_status st;
    int rc = server_status_get(s, &st);
    if (rc != 0) {
        done.fn(done.ctx, rc, NULL);
        return;
    }
    Etcdserverpb__StatusResponse r = ETCDSERVERPB__STATUS_RESPONSE__INIT;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(s, &h);
    r.header = &h;
    r.version = (char *)st.version;
    r.dbsize = (int64_t)st.db_size;
    r.dbsizeinuse = (int64_t)st.db_in_use;
    r.leader = st.leader;
    r.raftindex = st.raft_index;
    r.raftterm = st.raft_term;
    r.raftappliedindex = st.applied_index;
    r.islearner = st.is_learner;
    char bufs[SERVER_ALARMS_MAX][STATUS_ERROR_BYTES];
    char *errs[SERVER_ALARMS_MAX + 1];
    r.n_errors = status_errors(s, st.leader == 0, bufs, errs);
    r.errors = r.n_errors > 0 ? errs : NULL;
    done.fn(done.ctx, 0, &r.base);
}

/* A MoveLeader waiting for the leader to change. */
struct move {
    struct svc_done done; /* the caller's completion */
    struct server *s;     /* the member (borrowed) */
};

/* Runs on the raft thread (or inline on an early error). */
static void on_moved(void *arg, int err)
{
    struct move *mv = arg;
    struct svc_done done = mv->done;
    struct server *s = mv->s;
    mem_free(mv);
    if (err != 0) {
        done.fn(done.ctx, err, NULL);
        return;
    }
    Etcdserverpb__MoveLeaderResponse r =
        ETCDSERVERPB__MOVE_LEADER_RESPONSE__INIT;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(s, &h);
    r.header = &h;
    done.fn(done.ctx, 0, &r.base);
}

/* etcd: only the leader moves leadership, to a voter, and the call waits
 * (until the client's deadline) for the new leader. */
void svc_maint_move_leader(struct server *s,
                           const Etcdserverpb__MoveLeaderRequest *req,
                           int64_t deadline_ns, struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    /* etcd 3.4.23 lets any caller move leadership (its auth wrapper passes
     * MoveLeader through unchecked); cetcd needs root, as for the other
     * maintenance methods, with their errors. */
    int arc = svc_auth_check_maint(s, done);
    if (arc != 0) {
        done.fn(done.ctx, arc, NULL);
        return;
    }
    struct move *mv = mem_malloc(sizeof *mv);
    if (mv == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    *mv = (struct move){done, s};
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t now = (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
    uint64_t deadline = now + SVC_MOVE_LEADER_TIMEOUT_MS;
    if (deadline_ns != INT64_MAX &&
        (uint64_t)(deadline_ns / 1000000) < deadline)
        deadline = deadline_ns > 0 ? (uint64_t)(deadline_ns / 1000000) : now;
    server_move_leader(s, req->targetid, deadline, on_moved, mv);
}

/* Runs on the apply thread, or inline when the proposal was refused. */
static void on_alarm(void *arg, const struct server_response *r)
{
    if (r->err != 0) {
        svc__done_take(arg, r->err, NULL);
        return;
    }
    /* etcd 3.4's applier answers an AlarmResponse without a header (its
     * apply fills none for alarms): so do we, on a copy (the applied
     * message keeps its header for the apply path's checks) */
    Etcdserverpb__AlarmResponse a = *(const Etcdserverpb__AlarmResponse *)
                                        r->msg;
    a.header = NULL;
    svc__done_take(arg, 0, &a.base);
}

void svc_maint_alarm(struct server *s, const Etcdserverpb__AlarmRequest *req,
                     struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    /* etcd checks the token of every request it proposes and its
     * maintenance server answers a bad one as it is (gRPC Unknown); any
     * user, and no token, may list and change alarms, as in etcd 3.4. */
    char user[AUTH_NAME_MAX + 1];
    uint64_t rev;
    int rc = svc_auth_who(s, done, user, sizeof user, &rev);
    if (rc != 0) {
        done.fn(done.ctx, svc__auth_raw(rc), NULL);
        return;
    }
    struct svc_done *held = svc__done_dup(done);
    if (held == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_ALARM;
    ir.alarm = (Etcdserverpb__AlarmRequest *)req;
    server_propose(s, &ir, on_alarm, held);
}

/* --- Hash and HashKV, on cetcd-slow ---------------------------------------
 * Hashing reads the whole store (a second or more at 1M keys): it runs on
 * the server's slow runner (server_task_post_slow), never on the event
 * loop that decoded the request, whose other connections would wait. */

enum hash_kind { HASH_STORE, HASH_KV, HASH_KV_COMPACTED };

struct hash_job {
    struct server_task task; /* on cetcd-slow */
    struct server *s;
    enum hash_kind kind;
    int64_t revision;        /* HashKV's */
    bool peer;               /* a peer's corruption check asks (the answer
                                is a Cetcdpb__PeerHashResponse) */
    struct svc_done *held;   /* the request's completion */
};

/* peer_answer: the hash (or why there is none) for a peer's corruption
 * check; refusals of the hash travel in the message (svc.h). */
static void peer_answer(struct hash_job *j, int rc,
                        const struct server_hash *hv)
{
    if (rc != 0 && rc != ERR_COMPACTED && rc != ERR_FUTURE_REV)
        return svc__done_take(j->held, rc, NULL);
    Cetcdpb__PeerHashResponse r = CETCDPB__PEER_HASH_RESPONSE__INIT;
    r.error = rc;
    r.member_id = server_member_id(j->s);
    if (rc == 0) {
        r.hash = hv->hash;
        r.revision = hv->rev;
        r.compact_revision = hv->compact_rev;
    }
    svc__done_take(j->held, 0, &r.base);
}

static void hash_answer(struct hash_job *j)
{
    struct server *s = j->s;
    struct server_hash hv;
    int rc = j->kind == HASH_STORE          ? server_hash(s, &hv)
             : j->kind == HASH_KV_COMPACTED ? server_hash_kv_compacted(
                                                  s, j->revision, &hv)
                                            : server_hash_kv(s, j->revision,
                                                             &hv);
    if (j->peer)
        return peer_answer(j, rc, &hv);
    if (rc != 0)
        return svc__done_take(j->held, rc, NULL);
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(s, &h);
    h.revision = hv.rev;
    if (j->kind == HASH_STORE) {
        Etcdserverpb__HashResponse r = ETCDSERVERPB__HASH_RESPONSE__INIT;
        r.header = &h;
        r.hash = hv.hash;
        return svc__done_take(j->held, 0, &r.base);
    }
    Etcdserverpb__HashKVResponse r = ETCDSERVERPB__HASH_KVRESPONSE__INIT;
    r.header = &h;
    r.hash = hv.hash;
    r.compact_revision = hv.compact_rev;
    /* etcd 3.5's field: the revision hashed up to (the request's, or the
     * store's current one for 0) */
    r.hash_revision = j->revision > 0 ? j->revision : hv.rev;
    svc__done_take(j->held, 0, &r.base);
}

/* On cetcd-slow; stopping: the member is going away, no server call. */
static void hash_run(struct server_task *t, bool stopping)
{
    struct hash_job *j = t->arg;
    if (stopping)
        svc__done_take(j->held, ERR_STOPPED, NULL);
    else
        hash_answer(j);
    mem_free(j);
}

static void hash_post(struct server *s, enum hash_kind kind, int64_t revision,
                      bool peer, struct svc_done done)
{
    CHECK(s != NULL && done.fn != NULL);
    /* A peer is a member (the peer listener's TLS says which), not a
     * client: no user to check. */
    int rc = peer ? 0 : svc_auth_check_maint(s, done);
    if (rc != 0)
        return done.fn(done.ctx, rc, NULL);
    struct hash_job *j = mem_calloc(1, sizeof(*j));
    struct svc_done *held = j != NULL ? svc__done_dup(done) : NULL;
    if (held == NULL) {
        mem_free(j);
        return done.fn(done.ctx, ERR_NOMEM, NULL);
    }
    *j = (struct hash_job){.task = {.fn = hash_run, .arg = j}, .s = s,
                           .kind = kind, .revision = revision, .peer = peer,
                           .held = held};
    server_task_post_slow(s, &j->task);
}

void svc_maint_hash_kv(struct server *s, const Etcdserverpb__HashKVRequest *req,
                       struct svc_done done)
{
    CHECK(req != NULL);
    hash_post(s, HASH_KV, req->revision, false, done);
}

void svc_peer_hash_kv(struct server *s, const Cetcdpb__PeerHashRequest *req,
                      struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    if (req->cluster_id != server_cluster_id(s))
        return done.fn(done.ctx, ERR_INVAL, NULL);
    hash_post(s, req->compacted ? HASH_KV_COMPACTED : HASH_KV, req->revision,
              true, done);
}

void svc_maint_hash(struct server *s, const Etcdserverpb__HashRequest *req,
                    struct svc_done done)
{
    CHECK(req != NULL);
    hash_post(s, HASH_STORE, 0, false, done);
}
