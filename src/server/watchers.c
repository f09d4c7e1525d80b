/*
 * watchers.c - the member's watch hub (watch/watch.h): opened with the
 * store, pointed at the new store when a snapshot replaces it, closed at
 * stop; the store observer that hands it committed batches once they are
 * durable; the cetcd-watch thread that runs catch-up steps while watchers
 * are unsynced and periodic progress on the server clock; the wrappers of
 * server.h ("Watch").
 *
 * Durability.  A lone voter commits a tentative batch to LMDB before its
 * WAL fsync returned (apply.c, "Speculative apply").  Its events are
 * copied here (the observer runs inside mvcc_batch_commit) and given to
 * the hub only by server__watch_release, which apply.c calls where the
 * batch is published (waiters woken).  A batch that is not tentative was
 * durable before it was applied and goes to the hub at once.  watch.mu
 * orders the two: the hub sees the batches in revision order (a batch
 * after a tentative one is applied only after that one is published).
 * If copying fails (out of memory) the events are not lost: at release the
 * hub is re-synced from the store (watch_hub_restore on the same store).
 *
 * Lock order: apply_mu / store gate -> watch.rw -> watch.mu -> the hub's
 * locks -> sink locks.  The driver thread enters the store gate around
 * each sync step, so a store swap (gate closed, apply_mu held) never runs
 * beside one; the swap calls server__watch_store_opened with both held.
 */
#include <string.h>
#include <time.h>

#include "mvcc/mvcc.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#define WATCH_TICK_MS 100   /* periodic progress looks (etcd: 100 ms) */
#define WATCH_RETRY_MS 10   /* between sync steps while unsynced remain */
#define WATCH_GRPC_OVERHEAD (512 * 1024) /* etcd's grpcOverheadBytes */

static const uint8_t *dup_bytes(struct arena *a, const uint8_t *p, size_t n,
                                bool *ok)
{
    if (p == NULL)
        return NULL;
    const uint8_t *c = arena_dup(a, p, n > 0 ? n : 1);
    if (c == NULL)
        *ok = false;
    return c;
}

/* Copies a tentative batch's events (watch.mu held). */
static void hold(struct server *s, const struct mvcc_event *ev, size_t n,
                 mvcc_rev rev)
{
    struct server_watch *w = &s->watch;
    CHECK(w->n_held == 0 && !w->held_lost);
    w->held_rev = rev;
    if (n > w->held_cap) {
        struct mvcc_event *p = mem_realloc(w->held, n * sizeof *p);
        if (p == NULL) {
            w->held_lost = true;
            return;
        }
        w->held = p;
        w->held_cap = n;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        struct mvcc_event *c = &w->held[i];
        *c = ev[i];
        c->kv.key = dup_bytes(&w->held_arena, ev[i].kv.key, ev[i].kv.key_len,
                              &ok);
        c->kv.value = dup_bytes(&w->held_arena, ev[i].kv.value,
                                ev[i].kv.value_len, &ok);
        c->prev_kv.key = dup_bytes(&w->held_arena, ev[i].prev_kv.key,
                                   ev[i].prev_kv.key_len, &ok);
        c->prev_kv.value = dup_bytes(&w->held_arena, ev[i].prev_kv.value,
                                     ev[i].prev_kv.value_len, &ok);
    }
    if (!ok) {
        arena_reset(&w->held_arena);
        w->held_lost = true;
        return;
    }
    w->n_held = n;
}

/* kick wakes cetcd-watch at once. */
static void kick(struct server *s)
{
    pthread_mutex_lock(&s->watch.kmu);
    s->watch.kicked = true;
    pthread_cond_signal(&s->watch.kcv);
    pthread_mutex_unlock(&s->watch.kmu);
}

/* kick_if_work: after the hub observed a batch, when it left work for a
 * step (a batch past the observer's budget, a full sink: watch.h). */
static void kick_if_work(struct server *s)
{
    if (s->watch.hub != NULL && watch_hub_pending(s->watch.hub) > 0)
        kick(s);
}

/* The store's observer (apply thread, inside mvcc_batch_commit). */
static void observe(void *arg, const struct mvcc_event *ev, size_t n,
                    mvcc_rev rev)
{
    struct server *s = arg;
    struct server_watch *w = &s->watch;
    pthread_mutex_lock(&w->mu);
    bool given = !w->tentative && w->hub != NULL;
    if (w->tentative)
        hold(s, ev, n, rev);
    else if (given)
        watch_hub_observe(w->hub, ev, n, rev);
    pthread_mutex_unlock(&w->mu);
    if (given)
        kick_if_work(s);
}

void server__watch_release(struct server *s)
{
    struct server_watch *w = &s->watch;
    pthread_mutex_lock(&w->mu);
    if (w->hub != NULL && w->held_lost) {
        log_warn("etcdserver", "out of memory holding watch events; "
                 "re-syncing watchers from the store");
        watch_hub_restore(w->hub, s->mvcc);
    } else if (w->hub != NULL && w->n_held > 0) {
        watch_hub_observe(w->hub, w->held, w->n_held, w->held_rev);
    }
    w->n_held = 0;
    w->held_lost = false;
    arena_reset(&w->held_arena);
    pthread_mutex_unlock(&w->mu);
    kick_if_work(s);
}

int server__watch_store_opened(struct server *s)
{
    struct server_watch *w = &s->watch;
    if (w->hub == NULL) {
        pthread_rwlock_init(&w->rw, NULL);
        pthread_mutex_init(&w->mu, NULL);
        pthread_mutex_init(&w->kmu, NULL);
        pthread_cond_init(&w->kcv, NULL);
        arena_init(&w->held_arena);
        struct watch_options o = {
            .progress_interval_ms = s->cfg.watch_progress_ms,
            /* etcd's watch server: --max-request-bytes + its gRPC
             * overhead allowance (grpcOverheadBytes, 512 KiB). */
            .fragment_bytes = s->cfg.max_request_bytes + WATCH_GRPC_OVERHEAD,
            .event_size = server__watch_event_size,
            .base_size = server__watch_base_size,
            .size_arg = s,
        };
        int rc = watch_hub_open(s->mvcc, &o, &w->hub);
        if (rc != 0)
            return rc;
    } else {
        watch_hub_restore(w->hub, s->mvcc);
    }
    mvcc_store_set_observer(s->mvcc, observe, s);
    return 0;
}

/* leader_look: once per election timeout, etcd's monitorLeader: after
 * SERVER_WATCH_NO_LEADER_LOOKS looks in a row without a leader, the
 * streams that require one end with ERR_NO_LEADER (cetcd-watch). */
static void leader_look(struct server *s, uint64_t now)
{
    struct server_watch *w = &s->watch;
    if (now < w->leader_look_ms)
        return;
    w->leader_look_ms = now + s->cfg.election_ms;
    if (server_has_leader(s)) {
        w->no_leader_looks = 0;
        return;
    }
    if (++w->no_leader_looks >= SERVER_WATCH_NO_LEADER_LOOKS)
        watch_hub_end_marked(w->hub, SERVER__WATCH_MARK_LEADER,
                             ERR_NO_LEADER);
}

/* The driver: sync steps while watchers are unsynced, ticks. */
static void *watch_main(void *arg)
{
    struct server *s = arg;
    struct server_watch *w = &s->watch;
    uint64_t next_tick = 0;
    pthread_mutex_lock(&w->kmu);
    while (!w->stop) {
        pthread_mutex_unlock(&w->kmu);
        bool more = false;
        if (watch_hub_pending(w->hub) > 0) {
            server__store_enter(s);
            /* NULL: a failed swap left no store (the member is stopping) */
            int rc = s->mvcc != NULL ? watch_hub_sync_step(w->hub, &more)
                                     : ERR_BUSY;
            server__store_leave(s);
            if (rc != 0 && rc != ERR_BUSY && rc != ERR_NOMEM && rc != ERR_IO)
                log_warn("etcdserver", "watch catch-up failed: %s",
                         err_str(rc));
        }
        uint64_t now = server__clock_ms(s);
        if (now >= next_tick) {
            watch_hub_tick(w->hub, now);
            leader_look(s, now);
            next_tick = now + WATCH_TICK_MS;
        }
        pthread_mutex_lock(&w->kmu);
        if (!w->kicked && !w->stop) {
            uint64_t ms = more || watch_hub_pending(w->hub) > 0
                              ? WATCH_RETRY_MS : WATCH_TICK_MS;
            struct timespec ts = thread_deadline_ms(CLOCK_REALTIME, ms);
            pthread_cond_timedwait(&w->kcv, &w->kmu, &ts);
        }
        w->kicked = false;
    }
    pthread_mutex_unlock(&w->kmu);
    return NULL;
}

int server__watch_start(struct server *s)
{
    struct server_watch *w = &s->watch;
    CHECK(w->hub != NULL && !w->started);
    if (pthread_create(&w->thread, NULL, watch_main, s) != 0)
        return ERR_NOMEM;
    thread_name_set(w->thread, "cetcd-watch");
    w->started = true;
    return 0;
}

void server__watch_stop(struct server *s)
{
    struct server_watch *w = &s->watch;
    if (!w->started)
        return;
    pthread_mutex_lock(&w->kmu);
    w->stop = true;
    pthread_cond_signal(&w->kcv);
    pthread_mutex_unlock(&w->kmu);
    pthread_join(w->thread, NULL);
    w->started = false;
}

void server__watch_close(struct server *s)
{
    struct server_watch *w = &s->watch;
    if (w->hub == NULL)
        return;
    server__watch_stop(s);
    if (s->mvcc != NULL)
        mvcc_store_set_observer(s->mvcc, NULL, NULL);
    pthread_rwlock_wrlock(&w->rw);
    watch_hub_close(w->hub); /* open streams: their sinks' close */
    w->hub = NULL;
    pthread_rwlock_unlock(&w->rw);
    mem_free(w->held);
    arena_free(&w->held_arena);
    pthread_cond_destroy(&w->kcv);
    pthread_mutex_destroy(&w->kmu);
    pthread_mutex_destroy(&w->mu);
    pthread_rwlock_destroy(&w->rw);
}

/* --- server.h wrappers --------------------------------------------------- */

int server_watch_open(struct server *s, const struct watch_sink *sink,
                      bool require_leader, struct watch_stream **st_out)
{
    CHECK(s != NULL && sink != NULL && st_out != NULL);
    CHECK(!require_leader || sink->end != NULL);
    if (require_leader && !server_has_leader(s))
        return ERR_NO_LEADER;
    pthread_rwlock_rdlock(&s->watch.rw);
    int rc = s->watch.hub == NULL || atomic_load(&s->stopping)
                 ? ERR_STOPPED
                 : watch_stream_open(s->watch.hub, sink, st_out);
    if (rc == 0 && require_leader)
        watch_stream_mark(*st_out, SERVER__WATCH_MARK_LEADER);
    pthread_rwlock_unlock(&s->watch.rw);
    return rc;
}

int server_watch_create(struct server *s, struct watch_stream **st,
                        const struct watch_create *req, int64_t *id_out)
{
    CHECK(s != NULL && st != NULL && req != NULL && id_out != NULL);
    pthread_rwlock_rdlock(&s->watch.rw);
    int rc = s->watch.hub == NULL || *st == NULL
                 ? ERR_STOPPED
                 : watch_create(*st, req, id_out);
    pthread_rwlock_unlock(&s->watch.rw);
    if (rc == 0)
        kick(s); /* its created, and its catch-up if it starts behind */
    return rc;
}

int server_watch_cancel(struct server *s, struct watch_stream **st,
                        int64_t id)
{
    CHECK(s != NULL && st != NULL);
    pthread_rwlock_rdlock(&s->watch.rw);
    int rc = s->watch.hub == NULL || *st == NULL ? ERR_STOPPED
                                                 : watch_cancel(*st, id);
    pthread_rwlock_unlock(&s->watch.rw);
    return rc;
}

void server_watch_progress(struct server *s, struct watch_stream **st)
{
    CHECK(s != NULL && st != NULL);
    pthread_rwlock_rdlock(&s->watch.rw);
    bool ok = s->watch.hub != NULL && *st != NULL;
    if (ok)
        watch_stream_progress(*st);
    pthread_rwlock_unlock(&s->watch.rw);
    if (ok)
        kick(s);
}

void server_watch_close(struct server *s, struct watch_stream **st)
{
    CHECK(s != NULL && st != NULL);
    pthread_rwlock_rdlock(&s->watch.rw);
    if (s->watch.hub != NULL && *st != NULL)
        watch_stream_close(*st);
    *st = NULL;
    pthread_rwlock_unlock(&s->watch.rw);
}

void server_watch_header(struct server *s, Etcdserverpb__ResponseHeader *h,
                         mvcc_rev rev)
{
    h->cluster_id = s->cluster_id;
    h->member_id = s->member_id;
    h->raft_term = atomic_load(&s->term);
    h->revision = rev;
}
