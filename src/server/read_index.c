/*
 * read_index.c - the ReadIndex batches of linearizable reads.  A read that
 * must see everything committed before it arrived joins the open batch
 * (server__read_enqueue, any thread, under ev_mu); the raft-pass holder
 * (raft_mu held, see server.h) asks raft for one ReadIndex per batch
 * (server__reads_take), matches the Ready's read states to its batches
 * (server__reads_answer) and hands the answered reads to the read workers
 * (read.c), which serve them once the applied index reaches the answer.
 * Rounds unanswered for READ_RETRY_TICKS are asked again, rounds past the
 * request timeout fail with ERR_TIMEOUT, and a leader change fails the
 * pending ones with ERR_LEADER_CHANGED.  At most SERVER_READS_MAX reads
 * wait at once (batches, in flight, or for a worker); one more is
 * refused with ERR_TOO_MANY_REQUESTS.
 */
#include <string.h>

#include "raft/raft.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/mem.h"

#define READ_RETRY_TICKS 20          /* re-ask an unanswered ReadIndex */

/* Hands every read of batch b to the read workers with index or err. */
static void read_batch_finish(struct server *s, struct server_read_batch *b,
                              uint64_t index, int err)
{
    for (struct server_read_waiter *w = b->waiters; w != NULL; w = w->next) {
        w->index = index;
        w->err = err;
    }
    if (b->waiters != NULL)
        server__reads_ready(s, b->waiters);
    mem_free(b);
}

void server__reads_answer(struct server *s, const struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_read_states; i++) {
        const struct raft_read_state *rs = &rd->read_states[i];
        uint64_t ctx[2];
        if (rs->ctx_len != sizeof ctx)
            continue;
        memcpy(ctx, rs->ctx, sizeof ctx);
        if (ctx[0] != s->member_id)
            continue;
        struct server_read_batch *found = NULL;
        for (struct server_read_batch **p = &s->reads.read_inflight; *p;
             p = &(*p)->next) {
            if ((*p)->ctx == ctx[1]) {
                found = *p;
                *p = found->next;
                break;
            }
        }
        if (found != NULL)
            read_batch_finish(s, found, rs->index, 0);
    }
}

/* Start ReadIndex rounds: the open batch, and in-flight ones unanswered
 * for a while (lost on a leader change); fail rounds past the request
 * timeout.  The in-flight list belongs to the raft thread. */
void server__reads_take(struct server *s)
{
    pthread_mutex_lock(&s->node.ev_mu);
    struct server_read_batch *b = s->reads.read_open;
    s->reads.read_open = NULL;
    pthread_mutex_unlock(&s->node.ev_mu);
    if (b != NULL) {
        b->next = s->reads.read_inflight;
        s->reads.read_inflight = b;
    }
    uint64_t now = server__clock_ms(s);
    for (struct server_read_batch **p = &s->reads.read_inflight; *p;) {
        b = *p;
        if (now > b->created_ms + server__request_timeout_ms(s)) {
            *p = b->next;
            read_batch_finish(s, b, 0, ERR_TIMEOUT);
            continue;
        }
        if (!b->requested ||
            s->node.ticks >= b->asked_tick + READ_RETRY_TICKS) {
            /* The leader keys pending reads by context: it must be unique
             * across members, not just here. */
            uint64_t ctx[2] = {s->member_id, b->ctx};
            b->requested = raft_read_index(s->node.raft, ctx, sizeof ctx) == 0;
            b->asked_tick = s->node.ticks;
        }
        p = &b->next;
    }
}

void server__reads_fail_inflight(struct server *s, int err)
{
    while (s->reads.read_inflight != NULL) {
        struct server_read_batch *b = s->reads.read_inflight;
        s->reads.read_inflight = b->next;
        read_batch_finish(s, b, 0, err);
    }
}

void server__reads_fail_all(struct server *s, int err)
{
    server__reads_fail_inflight(s, err);
    pthread_mutex_lock(&s->node.ev_mu);
    struct server_read_batch *b = s->reads.read_open;
    s->reads.read_open = NULL;
    pthread_mutex_unlock(&s->node.ev_mu);
    if (b != NULL)
        read_batch_finish(s, b, 0, err);
}

int server__read_enqueue(struct server *s, struct server_read_waiter *w)
{
    pthread_mutex_lock(&s->node.ev_mu);
    if (atomic_load(&s->stopping)) {
        pthread_mutex_unlock(&s->node.ev_mu);
        return ERR_STOPPED;
    }
    if (atomic_load(&s->reads.pending) >= SERVER_READS_MAX) {
        pthread_mutex_unlock(&s->node.ev_mu);
        return ERR_TOO_MANY_REQUESTS;
    }
    struct server_read_batch *b = s->reads.read_open;
    if (b == NULL) {
        b = mem_calloc(1, sizeof *b);
        if (b == NULL) {
            pthread_mutex_unlock(&s->node.ev_mu);
            return ERR_NOMEM;
        }
        b->ctx = ++s->reads.read_ctx;
        b->created_ms = server__clock_ms(s);
        s->reads.read_open = b;
    }
    atomic_fetch_add(&s->reads.pending, 1);
    w->next = b->waiters;
    b->waiters = w;
    s->node.ev = true;
    pthread_cond_signal(&s->node.ev_cv);
    pthread_mutex_unlock(&s->node.ev_mu);
    return 0;
}
