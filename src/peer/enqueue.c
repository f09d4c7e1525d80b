/*
 * enqueue.c - peer_send and peer_send_snapshot: the raft thread's side.
 *
 * Both only encode and hand over; the network is touched by the peer's
 * threads.  A peer that is down (its last connection attempt failed)
 * gets its messages dropped here at once: queueing them would only
 * deliver stale heartbeats and appends after the reconnect, and raft
 * resends what matters once it hears from the peer again.
 */
#include <assert.h>
#include <string.h>

#include "peer/peer_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

/* The reports one peer_send call owes, made after it dropped t->lock so
 * that a callback may call back into the transport. */
struct reports {
    raft_id unreachable[PEER_PEERS_MAX]; /* distinct ids, once each */
    size_t n_unreachable;
    raft_id snap_failed[PEER_PEERS_MAX]; /* MsgSnap given to peer_send */
    size_t n_snap_failed;
};

static void note(raft_id *ids, size_t *n, raft_id id)
{
    for (size_t i = 0; i < *n; i++)
        if (ids[i] == id)
            return;
    if (*n < PEER_PEERS_MAX)
        ids[(*n)++] = id;
}

static void reports_deliver(struct peer_transport *t, const struct reports *r)
{
    for (size_t i = 0; i < r->n_unreachable; i++)
        if (t->cb.on_unreachable != NULL)
            t->cb.on_unreachable(t->cb.arg, r->unreachable[i]);
    for (size_t i = 0; i < r->n_snap_failed; i++)
        if (t->cb.on_snapshot_status != NULL)
            t->cb.on_snapshot_status(t->cb.arg, r->snap_failed[i], false);
}

/* enqueue_one encodes m and queues it on p (under p->mu).  Returns 0,
 * ERR_FULL/ERR_STOPPED (dropped: report) or ERR_NOMEM. */
static int enqueue_one(struct peer__peer *p, const struct raft_msg *m)
{
    struct peer__buf b;
    b.len = raft_msg_encoded_size(m);
    b.data = mem_malloc(b.len > 0 ? b.len : 1);
    if (b.data == NULL)
        return ERR_NOMEM;
    size_t written = 0;
    int rv = raft_msg_encode(m, b.data, b.len, &written);
    assert(rv == 0 && written == b.len);
    pthread_mutex_lock(&p->mu);
    if (p->down)
        rv = ERR_STOPPED;
    else
        rv = peer__queue_push(&p->q, &b);
    if (rv == 0) {
        if (m->type == RAFT_MSG_HEARTBEAT && p->hb_sent_ns == 0)
            p->hb_sent_ns = metrics_now_ns();
        if (!peer__write_lent_locked(p))
            pthread_cond_signal(&p->cond);
    } else {
        p->stats.dropped_msgs++;
    }
    pthread_mutex_unlock(&p->mu);
    if (rv != 0)
        mem_free(b.data);
    return rv;
}

int peer_send(struct peer_transport *t, const struct raft_msg *msgs, size_t n)
{
    struct reports rep;
    int first_err = 0;

    assert(t != NULL && (n == 0 || msgs != NULL));
    memset(&rep, 0, sizeof(rep));
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        const struct raft_msg *m = &msgs[i];
        if (m->to == t->self)
            continue;
        struct peer__peer *p = peer__find(t, m->to);
        if (p == NULL)
            continue; /* Removed or not yet added: nobody to tell. */
        if (m->type == RAFT_MSG_SNAP) {
            log_warn("peer", "MsgSnap to %016llx needs peer_send_snapshot",
                     (unsigned long long)m->to);
            note(rep.snap_failed, &rep.n_snap_failed, m->to);
            continue;
        }
        int rv = enqueue_one(p, m);
        if (rv == ERR_NOMEM && first_err == 0)
            first_err = rv;
        if (rv != 0)
            note(rep.unreachable, &rep.n_unreachable, m->to);
    }
    pthread_rwlock_unlock(&t->lock);
    reports_deliver(t, &rep);
    return first_err;
}

int peer_send_snapshot(struct peer_transport *t, raft_id to,
                       const struct raft_msg *snap_msg, int fd, uint64_t size)
{
    assert(t != NULL && snap_msg != NULL);
    if (snap_msg->type != RAFT_MSG_SNAP || snap_msg->to != to || fd < 0)
        return ERR_INVAL;
    size_t len = raft_msg_encoded_size(snap_msg);
    uint8_t *buf = mem_malloc(len);
    if (buf == NULL)
        return ERR_NOMEM;
    size_t written = 0;
    int rv = raft_msg_encode(snap_msg, buf, len, &written);
    assert(rv == 0 && written == len);
    pthread_rwlock_rdlock(&t->lock);
    struct peer__peer *p = peer__find(t, to);
    if (p == NULL)
        rv = ERR_NOTFOUND;
    else
        rv = peer__snap_start(p, buf, len, fd, size);
    pthread_rwlock_unlock(&t->lock);
    if (rv != 0)
        mem_free(buf);
    return rv;
}
