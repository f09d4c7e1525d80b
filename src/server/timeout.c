/*
 * timeout.c - requests past their deadline (proposals and membership
 * changes whose entry never came back applied) are failed by the house
 * thread with the error etcd 3.4 would give: which one is decided by
 * server__timeout_err from a view of the member (leader, when this member
 * was elected, which peer links are up since when) taken once per pass.
 */
#include "server/timeout.h"

#include "util/check.h"
#include <stdbool.h>
#include <string.h>

#include "peer/peer.h"
#include "server/members.h"
#include "server/server_int.h"
#include "util/err.h"

_Static_assert(SERVER_MEMBERS_MAX <= SERVER_TIMEOUT_MEMBERS_MAX,
               "a timeout view holds every member");

/* etcd's isConnectedSince: the link to id came up before `since`. */
static bool linked_since(const struct server_timeout_view *v, uint64_t id,
                         uint64_t since_ms)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->id[i] == id)
            return v->active_since_ms[i] != 0 &&
                   v->active_since_ms[i] < since_ms;
    return false; /* not a member we know: no link */
}

/* etcd's isConnectedToQuorumSince: this member and the members linked to
 * it since before since_ms make a majority of the members. */
static bool quorum_since(const struct server_timeout_view *v,
                         uint64_t since_ms)
{
    size_t linked = 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->id[i] == v->self ||
            linked_since(v, v->id[i], since_ms))
            linked++;
    return linked >= v->n / 2 + 1;
}

int server__timeout_err(const struct server_timeout_view *v,
                        uint64_t start_ms)
{
    CHECK(v != NULL && v->election_ms > 0);
    CHECK(v->n <= SERVER_TIMEOUT_MEMBERS_MAX);
    uint64_t elected = v->lead_elected_ms;
    /* Started while the previous leader was failing: within 2 election
     * timeouts before this member was elected. */
    if (elected != 0 && start_ms < elected &&
        start_ms + 2 * v->election_ms > elected)
        return ERR_TIMEOUT_LEADER_FAIL;
    if (v->lead == 0)
        return ERR_TIMEOUT;
    if (v->lead == v->self)
        return quorum_since(v, start_ms) ? ERR_TIMEOUT : ERR_TIMEOUT_CONN_LOST;
    return linked_since(v, v->lead, start_ms) ? ERR_TIMEOUT
                                              : ERR_TIMEOUT_CONN_LOST;
}

/* The view of s now (house thread).  Member ids are copied under the
 * members lock, the transport is asked after it (no nesting). */
static void view_take(struct server *s, struct server_timeout_view *v)
{
    memset(v, 0, sizeof *v);
    v->self = s->member_id;
    v->lead = atomic_load(&s->lead);
    v->lead_elected_ms = atomic_load(&s->lead_elected_ms);
    v->election_ms = s->cfg.election_ms;
    if (s->ms != NULL) {
        pthread_mutex_lock(&s->ms->mu);
        for (size_t i = 0; i < s->ms->n; i++)
            v->id[v->n++] = s->ms->m[i].id;
        pthread_mutex_unlock(&s->ms->mu);
    } else {
        v->id[v->n++] = s->member_id;
    }
    for (size_t i = 0; i < v->n; i++) {
        struct peer_stats st;
        if (v->id[i] != v->self && s->transport != NULL &&
            peer_stats(s->transport, v->id[i], &st) == 0 && st.active &&
            st.active_since_ms > 0)
            v->active_since_ms[i] = (uint64_t)st.active_since_ms;
    }
    CHECK(v->n >= 1 && v->n <= SERVER_TIMEOUT_MEMBERS_MAX);
}

/* Context of one expiry pass: the view is taken on the first expired
 * request only (most passes expire nothing). */
struct why_ctx {
    struct server *s;               /* the member */
    bool taken;                     /* v is filled */
    struct server_timeout_view v;   /* the member's view */
};

static int why(void *arg, uint64_t start_ms)
{
    struct why_ctx *c = arg;
    atomic_fetch_add(&c->s->stat_proposals_failed, 1);
    if (!c->taken) {
        view_take(c->s, &c->v);
        c->taken = true;
    }
    return server__timeout_err(&c->v, start_ms);
}

void server__timeouts_expire(struct server *s, uint64_t now_ms)
{
    struct why_ctx c;
    c.s = s;
    c.taken = false;
    server_wait_expire(&s->wait, now_ms, why, &c);
}
