/*
 * fuzz_api_cluster.c - goal: the requests of the cluster work never crash,
 * leak or leave a call unanswered, whatever their bytes: the Cluster
 * service (MemberList/Add/Remove/Update/Promote) and Maintenance
 * (Status, MoveLeader, HashKV, Hash) of src/api, the peer listener's Join,
 * Promote and HashKV services, and, for a MemberPromote asked of a
 * follower, the leader's answer to the forwarded call as the follower
 * reads it; for the peer HashKV, the reply bytes as a corruption check
 * reads a peer's answer (server__peer_hash_decode).
 *
 * Method: the real handlers run, with the real members store checks
 * behind them.  api__cluster_register, api__maintenance_register and
 * api_peer_register are called once; the link wraps (--wrap, see
 * fuzz/CMakeLists.txt) what needs a gRPC runtime or a raft thread:
 *   rpc_server_register_unary   records each path's handler;
 *   rpc_call_reply(_error)      check the answer (exactly once; a reply
 *                               packs and unpacks; an error has a status
 *                               and a message); rpc_call_deadline_ns;
 *   server_header_fill, server_status_get, server_hash_kv,
 *   server_hash_kv_compacted, server_hash,
 *   server_barrier_async        (they read raft and LMDB);
 *   server_task_post_slow       runs the task at once (Hash, HashKV);
 *   rpc_call_peer_cn            no certificate CN (no TLS);
 *   peer_call                   records the forwarded call, whose reply
 *                               (status, details, bytes) comes from the
 *                               input.
 * The struct server is built here with only what membership changes use:
 * a members table (3 members, one a learner, one removed id), the wait
 * registry and the jobs list.  server_member_change and
 * server_move_leader are the real ones; this file then plays the raft
 * thread: it checks that a queued conf change's context decodes to the
 * MemberChange asked for and that every URL of an accepted Add/Update is
 * one the peer transport can dial, answers the job (or, for a promotion
 * on a follower, runs the real server__promote_forward and delivers the
 * reply through the real peer__call_err), until nothing is pending.
 *
 * Input: u8 method, u8 flags, u16 LE request length, the request, then
 * for a forwarded promotion u8 gRPC status, u8 details length, the
 * details and the reply bytes.  Flags: bits 0-1 the conf change outcome,
 * 2-3 the leader (none, us, member 2, member 3), 4-5 the transfer
 * outcome, 6 peer_call refused (busy) and MemberList's barrier timed out,
 * 7 the server is stopping.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "auth/auth.h"
#include "cetcdpb/internal.pb-c.h"
#include "peer/peer_int.h"
#include "server/members.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

static void check(int cond)
{
    if (!cond)
        abort();
}

/* --- the handlers, as registered ----------------------------------------- */

static const char *const paths[] = {
    "/etcdserverpb.Cluster/MemberList",
    "/etcdserverpb.Cluster/MemberAdd",
    "/etcdserverpb.Cluster/MemberRemove",
    "/etcdserverpb.Cluster/MemberUpdate",
    "/etcdserverpb.Cluster/MemberPromote",
    "/etcdserverpb.Maintenance/Status",
    "/etcdserverpb.Maintenance/MoveLeader",
    "/cetcdpb.Join/Members",
    "/cetcdpb.Cluster/Promote",
    "/etcdserverpb.Maintenance/HashKV",
    "/etcdserverpb.Maintenance/Hash",
    "/cetcdpb.Maintenance/HashKV",
};
#define PEER_HASH_KV 11 /* its index: the reply bytes are decoded too */
#define N_PATHS (sizeof paths / sizeof paths[0])

static struct {
    rpc_unary_fn fn;
    void *ctx;
} handlers[N_PATHS];

int __wrap_rpc_server_register_unary(struct rpc_server *srv, const char *path,
                                     rpc_unary_fn fn, void *ctx)
{
    (void)srv;
    for (size_t i = 0; i < N_PATHS; i++) {
        if (strcmp(paths[i], path) == 0) {
            handlers[i].fn = fn;
            handlers[i].ctx = ctx;
        }
    }
    return 0;
}

/* --- the call ------------------------------------------------------------ */

/* What the handler was given and what it answered. */
struct fake_call {
    int answers;           /* rpc_call_reply* calls */
    int64_t deadline_ns;   /* what rpc_call_deadline_ns gives */
};

void __wrap_rpc_call_reply(struct rpc_call *call, const ProtobufCMessage *resp)
{
    struct fake_call *fc = (struct fake_call *)call;
    fc->answers++;
    check(fc->answers == 1);
    size_t n = protobuf_c_message_get_packed_size(resp);
    uint8_t *buf = malloc(n + 1);
    check(buf != NULL && protobuf_c_message_pack(resp, buf) == n);
    ProtobufCMessage *back =
        protobuf_c_message_unpack(resp->descriptor, NULL, n, buf);
    check(back != NULL);
    protobuf_c_message_free_unpacked(back, NULL);
    free(buf);
}

void __wrap_rpc_call_reply_error(struct rpc_call *call, grpc_status_code code,
                                 const char *msg)
{
    struct fake_call *fc = (struct fake_call *)call;
    fc->answers++;
    check(fc->answers == 1);
    check(code != GRPC_STATUS_OK && msg != NULL && msg[0] != '\0');
}

int64_t __wrap_rpc_call_deadline_ns(const struct rpc_call *call)
{
    return ((const struct fake_call *)call)->deadline_ns;
}

/* The fake call carries no metadata: no auth token (auth is off here). */
const char *__wrap_rpc_call_metadata(const struct rpc_call *call,
                                     const char *key, size_t *len_out)
{
    (void)call;
    (void)key;
    if (len_out != NULL)
        *len_out = 0;
    return NULL;
}

/* No TLS here: no client certificate names the caller. */
const char *__wrap_rpc_call_peer_cn(const struct rpc_call *call)
{
    (void)call;
    return NULL;
}

/* --- what needs raft or LMDB ---------------------------------------------- */

void __wrap_server_header_fill(struct server *s,
                               Etcdserverpb__ResponseHeader *h)
{
    h->cluster_id = s->cluster_id;
    h->member_id = s->member_id;
    h->raft_term = 2;
    h->revision = 1;
}

int __wrap_server_status_get(struct server *s, struct server_status *out)
{
    memset(out, 0, sizeof *out);
    out->leader = atomic_load(&s->lead);
    out->raft_index = out->raft_term = out->applied_index = 1;
    out->version = SERVER_REPORTED_VERSION_DEFAULT; /* the real one's */
    return 0;
}

/* MemberList's ReadIndex barrier: answered at once, failed (timeout) when
 * the input refuses peer calls (flag 6), as a leaderless round would. */
static int barrier_err;

void __wrap_server_barrier_async(struct server *s, server_barrier_fn fn,
                                 void *arg)
{
    (void)s;
    fn(arg, barrier_err);
}

/* The store's hashes: a store at revision 10 compacted at 5. */
int __wrap_server_hash_kv(struct server *s, int64_t rev,
                          struct server_hash *out)
{
    (void)s;
    if (rev > 10)
        return ERR_FUTURE_REV;
    if (rev > 0 && rev <= 5)
        return ERR_COMPACTED;
    *out = (struct server_hash){.hash = (uint32_t)rev, .rev = 10,
                                .compact_rev = 5};
    return 0;
}

/* At the compaction revision 5 only, as the real one. */
int __wrap_server_hash_kv_compacted(struct server *s, int64_t rev,
                                    struct server_hash *out)
{
    (void)s;
    if (rev > 5)
        return ERR_FUTURE_REV;
    if (rev < 5)
        return ERR_COMPACTED;
    *out = (struct server_hash){.hash = 5, .rev = 10, .compact_rev = 5};
    return 0;
}

int __wrap_server_hash(struct server *s, struct server_hash *out)
{
    (void)s;
    *out = (struct server_hash){.hash = 7, .rev = 10, .compact_rev = 5};
    return 0;
}

/* Hash and HashKV are posted to cetcd-slow: run at once, as that runner
 * would, with stopping when the input says the server is stopping (the
 * runner's drain at server_stop). */
void __wrap_server_task_post_slow(struct server *s, struct server_task *t)
{
    t->fn(t, atomic_load(&s->stopping));
}

/* The forwarded promotion in flight (one at most: a job is in one place). */
static struct {
    peer_call_fn fn;
    void *arg;
    int refuse; /* what peer_call returns (0: the call is made) */
} fwd;

int __wrap_peer_call(struct peer_transport *t, raft_id to, const char *method,
                     const uint8_t *req, size_t len, uint32_t timeout_ms,
                     peer_call_fn fn, void *arg)
{
    (void)t;
    check(to != 0 && method != NULL && timeout_ms > 0 && fwd.fn == NULL);
    Cetcdpb__PromoteRequest *r =
        cetcdpb__promote_request__unpack(NULL, len, req);
    /* Any id, 0 too: a follower forwards every promotion unchecked, as
     * etcd's (the leader answers "member not found"). */
    check(r != NULL);
    cetcdpb__promote_request__free_unpacked(r, NULL);
    if (fwd.refuse != 0)
        return fwd.refuse;
    fwd.fn = fn;
    fwd.arg = arg;
    return 0;
}

/* --- the member --------------------------------------------------------- */

static struct server *srv;
static struct api the_api;
static int dummy_transport;

static void member_set(struct server_member_info *m, uint64_t id,
                       const char *name, const char *peer, const char *client,
                       bool learner)
{
    m->id = id;
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->peer_urls, sizeof m->peer_urls, "%s", peer);
    snprintf(m->client_urls, sizeof m->client_urls, "%s", client);
    m->is_learner = learner;
}

static void member_build(void)
{
    srv = calloc(1, sizeof *srv);
    check(srv != NULL);
    srv->cfg.cluster_token = "fuzz-token";
    srv->cfg.election_ms = 1000;
    srv->cfg.name = "m1";
    srv->cluster_id = 0xc1;
    srv->member_id = 1;
    srv->next_id = 1;
    srv->transport = (struct peer_transport *)&dummy_transport;
    /* The services ask the auth store who the caller is: a fresh one
     * (auth disabled) lets every request through, as a fresh member. */
    check(auth_store_create(&srv->auth.store) == 0);
    server_wait_init(&srv->wait);
    pthread_mutex_init(&srv->node.ev_mu, NULL);
    pthread_cond_init(&srv->node.ev_cv, NULL);
    struct server_ms *ms = calloc(1, sizeof *ms);
    check(ms != NULL);
    pthread_mutex_init(&ms->mu, NULL);
    member_set(&ms->m[0], 1, "m1", "http://127.0.0.1:2380",
               "http://127.0.0.1:2379", false);
    member_set(&ms->m[1], 2, "m2", "http://127.0.0.2:2380,unix://m2.sock",
               "http://127.0.0.2:2379", false);
    member_set(&ms->m[2], 3, "", "https://[::1]:2380", "", true);
    ms->n = 3;
    ms->removed[0] = 9;
    ms->n_removed = 1;
    srv->ms = ms;
    the_api.server = srv;
    the_api.rpc = (struct rpc_server *)&dummy_transport;
    check(api__cluster_register(&the_api) == 0);
    check(api__maintenance_register(&the_api) == 0);
    check(api_peer_register((struct rpc_server *)&dummy_transport, srv) == 0);
    for (size_t i = 0; i < N_PATHS; i++)
        check(handlers[i].fn != NULL);
}

/* --- the raft thread ---------------------------------------------------- */

/* The parsed input. */
struct input {
    uint8_t method, flags;
    const uint8_t *req;
    size_t req_len;
    grpc_status_code status; /* of the forwarded call */
    const char *details;
    size_t details_len;
    const uint8_t *reply;
    size_t reply_len;
};

static const int conf_errs[] = {0, ERR_TIMEOUT, ERR_NO_LEADER,
                                ERR_MEMBER_NOT_ENOUGH_STARTED};
static const int transfer_errs[] = {0, ERR_NOT_LEADER,
                                    ERR_BAD_LEADER_TRANSFEREE,
                                    ERR_LEADER_TRANSFER_TIMEOUT};

/* What raft would be asked to commit must say what was asked, and an
 * accepted URL must be one the transport can dial once it is applied. */
static void proposal_check(const struct server_ms_job *j)
{
    static const int kinds[] = {CETCDPB__MEMBER_CHANGE__KIND__ADD,
                                CETCDPB__MEMBER_CHANGE__KIND__REMOVE,
                                CETCDPB__MEMBER_CHANGE__KIND__UPDATE,
                                CETCDPB__MEMBER_CHANGE__KIND__PROMOTE};
    Cetcdpb__InternalRequest *r =
        cetcdpb__internal_request__unpack(NULL, j->len, j->data);
    check(r != NULL && r->member_change != NULL);
    const Cetcdpb__MemberChange *mc = r->member_change;
    check(mc->member != NULL && mc->member->id == j->id);
    check(j->op >= 0 && j->op < 4 && (int)mc->kind == kinds[j->op]);
    for (size_t i = 0; i < mc->member->n_peerurls; i++) {
        char target[PEER_URL_LEN_MAX + 8];
        bool tls;
        check(peer__url_parse(mc->member->peerurls[i], target,
                              sizeof target, &tls) == 0);
    }
    cetcdpb__internal_request__free_unpacked(r, NULL);
}

static void run_job(struct server_ms_job *j, const struct input *in,
                    int round)
{
    if (j->kind == SERVER_MS_JOB_TRANSFER) {
        j->fn(j->arg, transfer_errs[(in->flags >> 4) & 3]);
        mem_free(j);
        return;
    }
    check(j->kind == SERVER_MS_JOB_CONF);
    proposal_check(j);
    if (j->op == SERVER_MEMBER_PROMOTE && !j->from_peer &&
        atomic_load(&srv->lead) != srv->member_id) {
        if (round > 0)
            j->deadline_ms = 0; /* time passes: the request times out */
        server__promote_forward(srv, j);
        return;
    }
    server__ms_job_answer(srv, j->req_id, conf_errs[in->flags & 3], NULL);
    mem_free(j);
}

/* drain runs the raft thread's side until nothing is pending. */
static void drain(const struct input *in)
{
    for (int round = 0; round < 4; round++) {
        pthread_mutex_lock(&srv->ms->mu);
        struct server_ms_job *j = srv->ms->jobs;
        srv->ms->jobs = NULL;
        pthread_mutex_unlock(&srv->ms->mu);
        if (j == NULL && fwd.fn == NULL)
            return;
        while (j != NULL) {
            struct server_ms_job *next = j->next;
            j->next = NULL;
            run_job(j, in, round);
            j = next;
        }
        if (fwd.fn != NULL) {
            peer_call_fn fn = fwd.fn;
            fwd.fn = NULL;
            int err = peer__call_err(in->status, in->details,
                                     in->details_len, false);
            fn(fwd.arg, err, err == 0 ? in->reply : NULL,
               err == 0 ? in->reply_len : 0);
        }
    }
    check(0); /* a job or a call that never settles */
}

static bool parse(const uint8_t *data, size_t size, struct input *in)
{
    static const char empty[1];
    if (size < 4)
        return false;
    memset(in, 0, sizeof *in);
    in->method = data[0] % N_PATHS;
    in->flags = data[1];
    in->req_len = (size_t)data[2] | (size_t)data[3] << 8;
    data += 4;
    size -= 4;
    if (in->req_len > size)
        in->req_len = size;
    in->req = data;
    data += in->req_len;
    size -= in->req_len;
    in->details = empty;
    if (size >= 2) {
        in->status = (grpc_status_code)(data[0] % 17);
        in->details_len = data[1] < size - 2 ? data[1] : size - 2;
        in->details = (const char *)data + 2;
        data += 2 + in->details_len;
        size -= 2 + in->details_len;
    }
    in->reply = data;
    in->reply_len = size;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t leads[] = {0, 1, 2, 3};
    if (srv == NULL) {
        log_set_level(LOG_FATAL);
        member_build();
    }
    struct input in;
    if (!parse(data, size, &in))
        return 0;
    atomic_store(&srv->lead, leads[(in.flags >> 2) & 3]);
    atomic_store(&srv->stopping, (in.flags & 0x80) != 0);
    fwd.refuse = (in.flags & 0x40) ? ERR_BUSY : 0;
    barrier_err = (in.flags & 0x40) ? ERR_TIMEOUT : 0;
    struct fake_call fc = {0, in.flags & 1 ? 1 : INT64_MAX};
    /* The runtime hands over a copy that lives until the answer. */
    uint8_t *req = malloc(in.req_len + 1);
    check(req != NULL);
    memcpy(req, in.req, in.req_len);
    handlers[in.method].fn((struct rpc_call *)&fc, req, in.req_len,
                           handlers[in.method].ctx);
    drain(&in);
    check(fc.answers == 1);
    free(req);
    if (in.method == PEER_HASH_KV) {
        struct server_peer_hash ph;
        int err = server__peer_hash_decode(in.reply, in.reply_len, &ph);
        check(err == 0 || err == ERR_COMPACTED || err == ERR_FUTURE_REV ||
              err == ERR_IO);
    }
    return 0;
}
