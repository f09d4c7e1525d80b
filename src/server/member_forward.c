/*
 * member_forward.c - a promotion asked of a follower goes to the leader.
 *
 * Whether a learner is in sync (its match at least 90% of the leader's)
 * only the leader knows, so etcd 3.4's PromoteMember on a follower sends
 * the request to the leader's peer URL (POST /members/promote/<id>) and
 * answers with the leader's result.  cetcd does the same over the peer
 * listener: the raft thread packs a PromoteRequest and peer_call sends it
 * to the leader's /cetcdpb.Cluster/Promote (api/cluster.c), which checks
 * and proposes the change and answers once it is applied there, with its
 * error code or its list of the members.
 *
 * Until the request timeout (etcd's ReqTimeout) the follower keeps
 * trying: while there is no leader it waits for one, and when the leader
 * is unreachable or has just lost its leadership it asks again, the
 * leader of the moment, every FORWARD_RETRY_MS.  At the deadline the
 * answer is ERR_NO_LEADER when no leader was known last (etcd's
 * waitLeader), else ERR_TIMEOUT.  Any other answer of the leader (in
 * sync or not, not found, not a learner, the strict reconfig check) is
 * the follower's answer.
 *
 * Threads: server__promote_forward runs on the raft thread; the answer
 * arrives on a peer_call thread, which either answers the waiter or
 * queues the job again for the raft thread.  The job belongs to whoever
 * holds it: the jobs list, or the call in flight.
 */
#include "util/check.h"
#include <string.h>

#include "peer/peer.h"
#include "server/members.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define FORWARD_PATH "/cetcdpb.Cluster/Promote"
#define FORWARD_RETRY_MS 100 /* between attempts */

/* retry queues j again for the raft thread, after FORWARD_RETRY_MS or at
 * the next tick (no kick: nothing changes before). */
static void retry(struct server *s, struct server_ms_job *j, int fwd_err)
{
    j->fwd_err = fwd_err;
    j->retry_ms = server__clock_ms(s) + FORWARD_RETRY_MS;
    server__ms_job_push(s, j, false);
}

/* finish answers j's waiter and frees j. */
static void finish(struct server *s, struct server_ms_job *j, int err,
                   const Cetcdpb__PromoteResponse *resp)
{
    CHECK(err != 0 || resp != NULL);
    if (err != 0)
        log_warn("etcdserver", "failed to promote member %016llx through "
                 "the leader: %s", (unsigned long long)j->id, err_str(err));
    server__ms_job_answer(s, j->req_id, err, err == 0 ? &resp->base : NULL);
    server__ms_job_free(s, j);
}

/* The leader's errors that another leader may not give: ask again. */
static bool leader_error_passing(int err)
{
    return err == ERR_NOT_LEADER || err == ERR_NO_LEADER ||
           err == ERR_LEADER_CHANGED || err == ERR_PROPOSAL_DROPPED ||
           err == ERR_STOPPED;
}

/* The answer of a peer_call (a peer transport thread). */
static void answered(void *arg, int err, const uint8_t *reply, size_t len)
{
    struct server_ms_job *j = arg;
    struct server *s = j->s;
    if (err == ERR_STOPPED || err == ERR_TIMEOUT ||
        err == ERR_MEMBER_REMOVED) {
        finish(s, j, err, NULL);
        return;
    }
    Cetcdpb__PromoteResponse *r =
        err == 0 ? cetcdpb__promote_response__unpack(NULL, len, reply)
                 : NULL;
    if (r == NULL || r->error > 0) { /* unreachable, or unreadable */
        if (r != NULL)
            cetcdpb__promote_response__free_unpacked(r, NULL);
        retry(s, j, ERR_TIMEOUT);
        return;
    }
    if (leader_error_passing(r->error))
        retry(s, j, ERR_TIMEOUT);
    else
        finish(s, j, r->error, r);
    cetcdpb__promote_response__free_unpacked(r, NULL);
}

/* ask sends j to the leader; false when it could not be sent now. */
static bool ask(struct server *s, struct server_ms_job *j, uint64_t lead,
                uint64_t now)
{
    Cetcdpb__PromoteRequest req = CETCDPB__PROMOTE_REQUEST__INIT;
    req.cluster_id = s->cluster_id;
    req.from = s->member_id;
    req.member_id = j->id;
    uint8_t buf[64];
    size_t len = cetcdpb__promote_request__get_packed_size(&req);
    CHECK(len <= sizeof buf);
    cetcdpb__promote_request__pack(&req, buf);
    uint64_t left = j->deadline_ms - now;
    int rc = peer_call(s->transport, lead, FORWARD_PATH, buf, len,
                       left > UINT32_MAX ? UINT32_MAX : (uint32_t)left,
                       answered, j);
    if (rc == ERR_STOPPED) {
        finish(s, j, rc, NULL);
        return true;
    }
    return rc == 0;
}

void server__promote_forward(struct server *s, struct server_ms_job *j)
{
    CHECK(j->kind == SERVER_MS_JOB_CONF && j->op == SERVER_MEMBER_PROMOTE);
    CHECK(!j->from_peer && j->s == s);
    uint64_t now = server__clock_ms(s);
    if (now >= j->deadline_ms) {
        finish(s, j, j->fwd_err, NULL);
        return;
    }
    uint64_t lead = atomic_load(&s->lead);
    if (lead == 0) /* etcd's waitLeader: wait for an election */
        j->fwd_err = ERR_NO_LEADER;
    if (lead == 0 || lead == s->member_id || s->transport == NULL ||
        now < j->retry_ms) {
        server__ms_job_push(s, j, false);
        return;
    }
    if (!ask(s, j, lead, now))
        retry(s, j, ERR_TIMEOUT); /* the leader is no peer yet, or busy */
}
