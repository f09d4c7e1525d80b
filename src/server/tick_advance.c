/*
 * tick_advance.c - etcd's --initial-election-tick-advance
 * (EtcdServer.adjustTicks): a member of a cluster that boots fast-forwards
 * its election clock, so that it campaigns (no leader yet) or hears from
 * the leader (a rejoining member) within a couple of ticks instead of a
 * whole election timeout.  As etcd: for up to 5 s after the start
 * (rafthttp.ConnReadTimeout), once more than one remote peer's stream is
 * up, raft is ticked election ticks - 2 times, once; with fewer active
 * peers nothing happens.  With the flag false it never happens and the
 * member waits the full timeout.  A lone voter needs none of this: it
 * campaigns at once when it opens (raft_open.c), as etcd's single-node
 * fast-forward makes it do.  A member that is already leader is not
 * ticked (its ticks would only send heartbeats).  Raft thread, raft_mu
 * held.
 */
#include "peer/peer.h"
#include "raft/raft.h"
#include "server/members.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/log.h"

/* etcd's rafthttp.ConnReadTimeout: how long after the start peers are
 * waited for. */
#define ADVANCE_WAIT_MS 5000

/* active_peers counts the other members whose peer stream is up. */
static int active_peers(struct server *s)
{
    int n = 0;
    struct peer_stats st;
    pthread_mutex_lock(&s->ms->mu);
    for (size_t i = 0; i < s->ms->n; i++)
        if (s->ms->m[i].id != s->member_id && s->transport != NULL &&
            peer_stats(s->transport, s->ms->m[i].id, &st) == 0 && st.active)
            n++;
    pthread_mutex_unlock(&s->ms->mu);
    return n;
}

uint64_t server__tick_advance(struct server *s, uint64_t until_ms)
{
    CHECK(s != NULL && s->node.raft != NULL);
    if (until_ms == UINT64_MAX) { /* the first call: decide */
        if (atomic_load(&s->lone_voter) || s->transport == NULL)
            return 0;
        int ticks = (int)(s->cfg.election_ms / s->cfg.heartbeat_ms);
        if (s->cfg.no_tick_advance) {
            log_info("etcdserver", "skipping initial election tick advance "
                     "(election ticks %d)", ticks);
            return 0;
        }
        return server__clock_ms(s) + ADVANCE_WAIT_MS;
    }
    if (until_ms == 0 || server__clock_ms(s) > until_ms)
        return 0;
    int peers = active_peers(s);
    if (peers <= 1)
        return until_ms; /* not yet: try again on the next pass */
    struct raft_status st;
    raft_status(s->node.raft, &st);
    if (st.role == RAFT_LEADER)
        return 0;
    int ticks = (int)(s->cfg.election_ms / s->cfg.heartbeat_ms);
    if (log_is_zap())
        log_zap(LOG_INFO, "initialized peer connections; fast-forwarding "
                "election ticks", LOG_ID("local-member-id", s->member_id),
                LOG_INT("forward-ticks", ticks - 2),
                LOG_DUR_MS("forward-duration",
                           (uint64_t)(ticks - 2) * s->cfg.heartbeat_ms),
                LOG_INT("election-ticks", ticks),
                LOG_DUR_MS("election-timeout",
                           (uint64_t)ticks * s->cfg.heartbeat_ms),
                LOG_INT("active-remote-members", peers));
    else
        log_info("etcdserver", "%llx initialized peer connection; "
             "fast-forwarding %d ticks (election ticks %d) with %d active "
             "peer(s)", (unsigned long long)s->member_id, ticks - 2, ticks,
             peers);
    for (int i = 0; i < ticks - 2; i++)
        CHECK(raft_tick(s->node.raft) == 0);
    return 0;
}
