/*
 * read.c - serving Ranges.  A serializable Range, or any Range on a lone
 * leading voter (lone_leader: no other member could have a newer commit),
 * is served at once on the calling thread (an event loop): a linearizable
 * one first waits there until the applied index reaches the commit index
 * seen when it arrived.  Any other linearizable Range joins a ReadIndex
 * batch (read_index.c); once its round is answered, one of the read
 * workers here (cetcd-read) waits until the applied index reaches the
 * answer and serves it.  Every read runs in an LMDB read txn inside the
 * store gate, taking no lock the writer holds; the response borrows the
 * map until server_read_end.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/thread.h"
#include "auth/auth.h"
#include "mvcc/mvcc.h"
#include "server/kv_range.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

struct server_read {
    struct server *s;                /* inside its store gate */
    struct mvcc_read *snap;          /* the LMDB read txn */
    struct mvcc_range_result res;    /* kvs borrowed by the response */
    struct arena arena;              /* the response */
};

static int wait_applied(struct server *s, uint64_t index)
{
    if (atomic_load(&s->applied_index) >= index)
        return 0;
    pthread_mutex_lock(&s->applied_mu);
    while (atomic_load(&s->applied_index) < index &&
           !atomic_load(&s->stopping))
        pthread_cond_wait(&s->applied_cv, &s->applied_mu);
    pthread_mutex_unlock(&s->applied_mu);
    return atomic_load(&s->applied_index) >= index ? 0 : ERR_STOPPED;
}

/* Reads the local store (no consistency wait). */
static int range_local(struct server *s, const Etcdserverpb__RangeRequest *req,
                       Etcdserverpb__RangeResponse **resp_out,
                       struct server_read **read_out)
{
    struct server_read *r = mem_calloc(1, sizeof *r);
    if (r == NULL)
        return ERR_NOMEM;
    arena_init(&r->arena);
    /* The store may be replaced by a snapshot from the leader: the gate
     * holds that off until server_read_end. */
    server__store_enter(s);
    r->s = s;
    int rc = mvcc_read_begin(s->mvcc, &r->snap);
    if (rc != 0) {
        server__store_leave(s);
        mem_free(r);
        return rc;
    }
    rc = mvcc_range(r->snap, req->key.data, req->key.len, req->range_end.data,
                    req->range_end.len, req->revision,
                    kv_range_fetch_limit(req), kv_range_fetch_flags(req),
                    &r->res);
    Etcdserverpb__RangeResponse *resp = NULL;
    if (rc == 0) {
        resp = kv_range_build(req, &r->res, &r->arena);
        if (resp == NULL)
            rc = ERR_NOMEM;
    }
    if (rc != 0) {
        server_read_end(r);
        return rc;
    }
    /* The header carries the snapshot's current revision, even for a read
     * at a past revision (etcd's rule). */
    resp->header->revision = mvcc_read_rev(r->snap);
    server__header_fill(s, resp->header);
    *resp_out = resp;
    *read_out = r;
    return 0;
}

/* A lone voter that leads needs no heartbeat round to know it is still
 * the leader (raft answers its ReadIndex at once too): it reads at its
 * commit index without a trip through the raft thread.  lone_voter follows
 * raft's configuration (a member added later ends the shortcut). */
static bool lone_leader(struct server *s)
{
    return atomic_load(&s->lone_voter) &&
           atomic_load(&s->lead) == s->member_id;
}

static void test_pause(uint32_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Serves a read whose consistency point is known: wait, check, read,
 * answer. */
static void serve(struct server *s, Etcdserverpb__RangeRequest *req,
                  uint64_t index, int err, server_read_check_fn check,
                  server_read_fn fn, void *arg)
{
    Etcdserverpb__RangeResponse *resp = NULL;
    struct server_read *rd = NULL;
    uint64_t auth_rev = 0;
    if (err == 0)
        err = wait_applied(s, index);
    if (err == 0 && check != NULL)
        err = check(s, req, arg, &auth_rev);
    if (err == 0 && auth_rev != 0 && s->cfg.test_read_pause_ms > 0)
        test_pause(s->cfg.test_read_pause_ms);
    if (err == 0)
        err = range_local(s, req, &resp, &rd);
    if (err == 0 && auth_rev != 0 &&
        auth_store_revision(server_auth_store(s)) != auth_rev) {
        server_read_end(rd); /* void: the permission may have changed */
        rd = NULL;
        resp = NULL;
        err = ERR_AUTH_OLD_REVISION;
    }
    fn(arg, err, resp);
    server_read_end(rd);
    etcdserverpb__range_request__free_unpacked(req, NULL);
}

void server_range_async_checked(struct server *s,
                                Etcdserverpb__RangeRequest *req,
                                server_read_check_fn check, server_read_fn fn,
                                void *arg)
{
    CHECK(s != NULL && req != NULL && fn != NULL);
    if (req->serializable || lone_leader(s)) {
        serve(s, req, req->serializable ? 0 : atomic_load(&s->committed_index),
              0, check, fn, arg);
        return;
    }
    struct server_read_waiter *w = mem_calloc(1, sizeof *w);
    int rc = w ? 0 : ERR_NOMEM;
    if (rc == 0) {
        *w = (struct server_read_waiter){
            .req = req, .check = check, .fn = fn, .arg = arg};
        rc = server__read_enqueue(s, w);
    }
    if (rc != 0) {
        mem_free(w);
        serve(s, req, 0, rc, check, fn, arg);
    }
}

void server_range_async(struct server *s, Etcdserverpb__RangeRequest *req,
                        server_read_fn fn, void *arg)
{
    server_range_async_checked(s, req, NULL, fn, arg);
}

/* The synchronous form, for callers that may block (tests, tools). */
struct sync_read {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int err;
    uint64_t index;
};

static void sync_done(void *arg, int err, const Etcdserverpb__RangeResponse *r)
{
    (void)r;
    struct sync_read *x = arg;
    pthread_mutex_lock(&x->mu);
    x->err = err;
    x->done = true;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

/* A Range that reads nothing worth having (a count of the single key
 * "\0"): the ReadIndex round it joins only tells that the store has
 * caught up.  NULL when out of memory. */
static Etcdserverpb__RangeRequest *probe_new(void)
{
    Etcdserverpb__RangeRequest *probe = mem_calloc(1, sizeof *probe);
    if (probe == NULL)
        return NULL;
    etcdserverpb__range_request__init(probe);
    probe->key.data = mem_dup("\0", 1);
    if (probe->key.data == NULL) {
        mem_free(probe);
        return NULL;
    }
    probe->key.len = 1;
    probe->count_only = 1;
    return probe;
}

struct barrier {
    server_barrier_fn fn;
    void *arg;
};

static void barrier_done(void *arg, int err,
                         const Etcdserverpb__RangeResponse *r)
{
    (void)r;
    struct barrier b = *(struct barrier *)arg;
    mem_free(arg);
    b.fn(b.arg, err);
}

void server_barrier_async(struct server *s, server_barrier_fn fn, void *arg)
{
    CHECK(s != NULL && fn != NULL);
    struct barrier *b = mem_malloc(sizeof *b);
    Etcdserverpb__RangeRequest *probe = b != NULL ? probe_new() : NULL;
    if (probe == NULL) {
        mem_free(b);
        fn(arg, ERR_NOMEM);
        return;
    }
    *b = (struct barrier){fn, arg};
    server_range_async(s, probe, barrier_done, b);
}

bool server_has_leader(struct server *s)
{
    return atomic_load(&s->lead) != 0;
}

int server_range(struct server *s, const Etcdserverpb__RangeRequest *req,
                 Etcdserverpb__RangeResponse **resp_out,
                 struct server_read **read_out)
{
    if (!req->serializable && !lone_leader(s)) {
        /* A ReadIndex round with an empty read, then read locally. */
        Etcdserverpb__RangeRequest *probe = probe_new();
        if (probe == NULL)
            return ERR_NOMEM;
        struct sync_read x = {PTHREAD_MUTEX_INITIALIZER,
                              PTHREAD_COND_INITIALIZER, false, 0, 0};
        server_range_async(s, probe, sync_done, &x);
        pthread_mutex_lock(&x.mu);
        while (!x.done)
            pthread_cond_wait(&x.cv, &x.mu);
        pthread_mutex_unlock(&x.mu);
        if (x.err != 0)
            return x.err;
    }
    return range_local(s, req, resp_out, read_out);
}

/* --- read workers ------------------------------------------------------ */

void server__reads_ready(struct server *s, struct server_read_waiter *w)
{
    struct server_read_waiter *tail = w;
    while (tail->next != NULL)
        tail = tail->next;
    pthread_mutex_lock(&s->reads.ready_mu);
    if (s->reads.ready_tail)
        s->reads.ready_tail->next = w;
    else
        s->reads.ready_head = w;
    s->reads.ready_tail = tail;
    pthread_cond_broadcast(&s->reads.ready_cv);
    pthread_mutex_unlock(&s->reads.ready_mu);
}

static void *read_worker(void *arg)
{
    struct server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->reads.ready_mu);
        while (s->reads.ready_head == NULL && !s->reads.readers_stop)
            pthread_cond_wait(&s->reads.ready_cv, &s->reads.ready_mu);
        struct server_read_waiter *w = s->reads.ready_head;
        if (w != NULL) {
            s->reads.ready_head = w->next;
            if (s->reads.ready_head == NULL)
                s->reads.ready_tail = NULL;
        }
        pthread_mutex_unlock(&s->reads.ready_mu);
        if (w == NULL)
            return NULL; /* stopping and drained */
        serve(s, w->req, w->index, w->err, w->check, w->fn, w->arg);
        mem_free(w);
        CHECK(atomic_load(&s->reads.pending) > 0);
        atomic_fetch_sub(&s->reads.pending, 1);
    }
}

int server__read_workers_start(struct server *s)
{
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&s->reads.read_workers[i], NULL, read_worker, s) != 0)
            return ERR_NOMEM;
        thread_name_set(s->reads.read_workers[i], "cetcd-read");
        s->reads.n_read_workers++;
    }
    return 0;
}

/* After the raft thread is gone (nothing more becomes ready): the workers
 * drain the queue (each read is answered; wait_applied gives ERR_STOPPED
 * once stopping) and exit. */
void server__read_workers_stop(struct server *s)
{
    pthread_mutex_lock(&s->reads.ready_mu);
    s->reads.readers_stop = true;
    pthread_cond_broadcast(&s->reads.ready_cv);
    pthread_mutex_unlock(&s->reads.ready_mu);
    pthread_mutex_lock(&s->applied_mu);
    pthread_cond_broadcast(&s->applied_cv);
    pthread_mutex_unlock(&s->applied_mu);
    for (int i = 0; i < s->reads.n_read_workers; i++)
        pthread_join(s->reads.read_workers[i], NULL);
    s->reads.n_read_workers = 0;
}

void server_read_end(struct server_read *r)
{
    if (r == NULL)
        return;
    mvcc_range_result_close(&r->res);
    mvcc_read_end(r->snap);
    server__store_leave(r->s);
    arena_free(&r->arena);
    mem_free(r);
}
