/*
 * lock_wait.c - Lock (v3lock) and Campaign (v3election): the waiters.
 * etcd 3.4 serves both through clientv3/concurrency (Mutex.Lock,
 * Election.Campaign), here the same steps run on the member:
 *
 *   1. lease 0: grant one of 60 s (concurrency.NewSession's default TTL);
 *   2. Txn: If create_revision(key) == 0 Then put key (value, the lease)
 *      [Lock: and the first key of the prefix by create revision]
 *      Else get key [and the first]; key = name/<lease hex>.  My revision
 *      is the txn's, or the create revision of the key already there.
 *      Lock: when no key of the prefix is older, the lock is held.
 *      Campaign: a different value is proclaimed (Txn If create == mine
 *      Then put), "election: not leader" if that fails.
 *   3. wait for deletes: Range the prefix with max_create_revision = mine,
 *      newest first, limit 2.  My key first and nothing older: done (the
 *      answer).  Otherwise watch my key and my predecessor (the second
 *      key) from the Range's revision + 1 (the member's watch hub) and, at
 *      the first DELETE of either, range again.  etcd 3.4.23 watches only
 *      the predecessor and would answer
 *      "locked" even when the waiter's own key expired meanwhile (two
 *      holders: fixed in etcd 3.5 with ErrSessionExpired); here a waiter
 *      whose key is gone is answered ERR_SESSION_EXPIRED ("mutex: session
 *      is expired", etcd 3.5's text), so a lease that expires while it
 *      waits ends the wait.
 *
 * Threads.  Each step is started by the task (server.h "Tasks") on
 * cetcd-task; its completion (apply thread, read worker, inline) or the
 * watch sink (under the hub lock) only copies the outcome into the waiter
 * and posts the task.  Nothing waits on a server thread.
 *
 * Transport.  Lock and Campaign are unary on the wire, served as streams
 * (svc.h) so that a client that goes away ends the stream: end() posts
 * the task, which deletes the key if this waiter put it (etcd's Unlock on
 * a failed wait; Resign for a campaign) and releases the waiter.
 *
 * Lifetime.  refs counts the holders other than the task: the stream
 * until end, a step in flight, the hub stream.  Only the task frees, when
 * refs is 0 and no run is posted (posted, under mu).
 */
#include <pthread.h>
#include <string.h>

#include "server/server.h"
#include "svc/lock_int.h"
#include "svc/svc.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

/* The step whose outcome the next task run takes. */
enum step {
    S_IDLE,      /* nothing in flight */
    S_START,     /* the request came: grant or txn */
    S_GRANT,     /* the lease grant is in flight */
    S_TXN,       /* the first txn is in flight */
    S_PROCLAIM,  /* a campaign's proclaim txn is in flight */
    S_RANGE,     /* the wait's range is in flight */
    S_WATCH,     /* watching the prefix for a DELETE */
    S_DONE,      /* answered or failed */
};

/* One Lock or Campaign request.  Owned by the task; fields under mu. */
struct lwait {
    struct server *s;       /* the member */
    struct svc_stream *st;  /* the transport's end (until release) */
    struct server_task task; /* runs step() */
    pthread_mutex_t mu;     /* guards what follows */
    bool campaign;          /* Campaign, else Lock */
    int refs;               /* holders but the task (see above) */
    bool posted;            /* a task run is due */
    enum step step;         /* in flight, or what happened */
    bool ready;             /* the step in flight has its outcome */
    int err;                /* its error */
    bool ended;             /* the stream is over (end ran) */
    bool hub_closed;        /* the hub ended the watch (stopping) */
    bool ws_ref;            /* refs holds one for ws */
    bool deleted;           /* the watch saw a DELETE */
    struct watch_stream *ws; /* the prefix watch, or NULL */
    /* the request */
    uint8_t *name, *value;  /* mem_malloc'd copies */
    size_t name_len, value_len;
    int64_t lease;          /* the session's lease */
    bool have_req;          /* the request came */
    uint8_t *key;           /* name/<lease hex> (mem_malloc'd) */
    size_t key_len;
    uint8_t *pfx_end;       /* the end of the prefix name/ */
    /* outcomes */
    int64_t my_rev;         /* my key's create revision (0: not yet) */
    int64_t owner_rev;      /* the oldest key's (Lock's first txn) */
    bool other_value;       /* campaign: the key held another value */
    bool txn_ok;            /* the last txn's succeeded */
    struct lock_hdr txn_hdr; /* the first txn's header */
    struct lock_hdr hdr;    /* the last range's header */
    int found;              /* keys the last range found (0..2) */
    int64_t first_rev;      /* its first key's create revision */
    uint8_t *pred;          /* its second key: the one I wait for */
    size_t pred_len;        /* (mem_malloc'd; NULL: none or no memory) */
    struct lock_ident who;  /* the client's token / certificate CN
                             * (copied at open): its KV steps run as it */
};

/* The KV steps' metadata: the client's identity only. */
static const char *w_metadata(void *ctx, const char *key, size_t *len)
{
    struct lwait *w = ctx;
    return lock__ident_metadata(&w->who, key, len);
}

static void step(struct server_task *t, bool stopping);

/* post_locked notes that a run is due; the caller posts after unlocking
 * when it returns true. */
static bool post_locked(struct lwait *w)
{
    if (w->posted)
        return false;
    w->posted = true;
    return true;
}

static void post(struct lwait *w, bool need)
{
    if (need)
        server_task_post(w->s, &w->task);
}

/* --- completions: copy the outcome, post the task --------------------- */

static void on_grant(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct lwait *w = ctx;
    pthread_mutex_lock(&w->mu);
    CHECK(w->step == S_GRANT && !w->ready);
    w->err = err;
    if (err == 0)
        w->lease = ((const Etcdserverpb__LeaseGrantResponse *)reply)->id;
    w->ready = true;
    w->refs--;
    bool need = post_locked(w);
    pthread_mutex_unlock(&w->mu);
    post(w, need);
}

/* The create revision of the first kv of range response i, or 0. */
static int64_t first_create(const Etcdserverpb__TxnResponse *r, size_t i)
{
    if (i >= r->n_responses || r->responses[i]->response_case !=
                                   ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE)
        return 0;
    const Etcdserverpb__RangeResponse *rr = r->responses[i]->response_range;
    return rr->n_kvs > 0 ? rr->kvs[0]->create_revision : 0;
}

static void on_txn(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct lwait *w = ctx;
    pthread_mutex_lock(&w->mu);
    CHECK((w->step == S_TXN || w->step == S_PROCLAIM) && !w->ready);
    w->err = err;
    if (err == 0) {
        const Etcdserverpb__TxnResponse *r = (const void *)reply;
        w->txn_ok = r->succeeded;
        if (w->step == S_TXN) {
            lock__hdr_copy(&w->txn_hdr, r->header);
            w->my_rev = r->succeeded ? w->txn_hdr.revision : first_create(r, 0);
            w->owner_rev = first_create(r, 1);
            const Etcdserverpb__RangeResponse *rr =
                r->n_responses > 0 && r->responses[0]->response_case ==
                    ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE
                    ? r->responses[0]->response_range : NULL;
            w->other_value =
                !r->succeeded && rr != NULL && rr->n_kvs > 0 &&
                (rr->kvs[0]->value.len != w->value_len ||
                 (w->value_len > 0 &&
                  memcmp(rr->kvs[0]->value.data, w->value, w->value_len) != 0));
        }
    }
    w->ready = true;
    w->refs--;
    bool need = post_locked(w);
    pthread_mutex_unlock(&w->mu);
    post(w, need);
}

static void on_range(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct lwait *w = ctx;
    pthread_mutex_lock(&w->mu);
    CHECK(w->step == S_RANGE && !w->ready);
    w->err = err;
    if (err == 0) {
        const Etcdserverpb__RangeResponse *r = (const void *)reply;
        lock__hdr_copy(&w->hdr, r->header);
        w->found = r->n_kvs > 2 ? 2 : (int)r->n_kvs;
        w->first_rev = r->n_kvs > 0 ? r->kvs[0]->create_revision : 0;
        mem_free(w->pred);
        w->pred = NULL;
        w->pred_len = 0;
        if (r->n_kvs > 1) {
            const ProtobufCBinaryData *k = &r->kvs[1]->key;
            w->pred = mem_malloc(k->len > 0 ? k->len : 1);
            if (w->pred == NULL)
                err = ERR_NOMEM;
            else if (k->len > 0)
                memcpy(w->pred, k->data, k->len);
            w->pred_len = k->len;
            w->err = err;
        }
    }
    w->ready = true;
    w->refs--;
    bool need = post_locked(w);
    pthread_mutex_unlock(&w->mu);
    post(w, need);
}

/* The hub's sink: under the hub lock, on whichever thread drives it. */
static int sink_send(void *ctx, const struct watch_response *r)
{
    struct lwait *w = ctx;
    bool del = r->canceled; /* compacted away: look again */
    for (size_t i = 0; i < r->n_events && !del; i++)
        del = r->events[i].type == MVCC_EVENT_DELETE;
    if (!del)
        return 0;
    pthread_mutex_lock(&w->mu);
    w->deleted = true;
    bool need = post_locked(w);
    pthread_mutex_unlock(&w->mu);
    post(w, need);
    return 0;
}

static void sink_close(void *ctx)
{
    struct lwait *w = ctx;
    pthread_mutex_lock(&w->mu);
    w->ws = NULL; /* the hub is gone (server stopping) */
    w->hub_closed = true;
    if (w->ws_ref) {
        w->ws_ref = false;
        w->refs--;
    }
    bool need = post_locked(w);
    pthread_mutex_unlock(&w->mu);
    post(w, need);
}

/* --- the steps (on cetcd-task, no lock held) --------------------------- */

/* start_op marks kind in flight (a ref for its completion). */
static void start_op(struct lwait *w, enum step kind)
{
    pthread_mutex_lock(&w->mu);
    w->step = kind;
    w->ready = false;
    w->refs++;
    pthread_mutex_unlock(&w->mu);
}

static void do_grant(struct lwait *w)
{
    start_op(w, S_GRANT);
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    g.ttl = SVC_LOCK_SESSION_TTL_S;
    svc_lease_grant(w->s, &g, (struct svc_done){on_grant, w, w_metadata});
}

static void do_txn(struct lwait *w)
{
    int rc = lock__key_make(w->name, w->name_len, w->lease, &w->key,
                            &w->key_len);
    if (rc != 0) {
        pthread_mutex_lock(&w->mu);
        w->step = S_TXN;
        w->err = rc;
        w->ready = true;
        bool need = post_locked(w);
        pthread_mutex_unlock(&w->mu);
        post(w, need);
        return;
    }
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){w->key_len, w->key};
    p.value = (ProtobufCBinaryData){w->value_len, w->value};
    p.lease = w->lease;
    Etcdserverpb__RangeRequest mine = ETCDSERVERPB__RANGE_REQUEST__INIT;
    mine.key = p.key;
    Etcdserverpb__RangeRequest first = ETCDSERVERPB__RANGE_REQUEST__INIT;
    first.key = (ProtobufCBinaryData){w->name_len + 1, w->key};
    first.range_end = (ProtobufCBinaryData){w->name_len + 1, w->pfx_end};
    first.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    first.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    first.limit = 1;
    Etcdserverpb__RequestOp put = ETCDSERVERPB__REQUEST_OP__INIT,
                            get = ETCDSERVERPB__REQUEST_OP__INIT,
                            owner = ETCDSERVERPB__REQUEST_OP__INIT;
    put.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    put.request_put = &p;
    get.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    get.request_range = &mine;
    owner.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    owner.request_range = &first;
    Etcdserverpb__RequestOp *then_ops[2] = {&put, &owner};
    Etcdserverpb__RequestOp *else_ops[2] = {&get, &owner};
    size_t n = w->campaign ? 1 : 2;
    start_op(w, S_TXN);
    lock__txn_if_created(w->s, w->key, w->key_len, 0, then_ops, n, else_ops,
                         n, (struct svc_done){on_txn, w, w_metadata});
}

static void do_proclaim(struct lwait *w)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){w->key_len, w->key};
    p.value = (ProtobufCBinaryData){w->value_len, w->value};
    p.lease = w->lease;
    Etcdserverpb__RequestOp put = ETCDSERVERPB__REQUEST_OP__INIT;
    put.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    put.request_put = &p;
    Etcdserverpb__RequestOp *ops[1] = {&put};
    start_op(w, S_PROCLAIM);
    lock__txn_if_created(w->s, w->key, w->key_len, w->my_rev, ops, 1, NULL, 0,
                         (struct svc_done){on_txn, w, w_metadata});
}

static void do_range(struct lwait *w)
{
    start_op(w, S_RANGE);
    lock__range(w->s, w->key, w->name_len + 1, w->pfx_end, w->name_len + 1,
                ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND, 2, w->my_rev,
                (struct svc_done){on_range, w, w_metadata});
}

/* do_watch watches, from after the last range, for the DELETE of my key
 * (its lease expired, an Unlock) or of my predecessor's (the newest older
 * key): one hub stream, two single-key watchers, so a release wakes the
 * next waiter only, not every waiter of the prefix.  Errors: those of
 * server_watch_open / server_watch_create. */
static int do_watch(struct lwait *w)
{
    struct watch_sink sink = {sink_send, sink_close, w};
    pthread_mutex_lock(&w->mu);
    w->step = S_WATCH;
    w->deleted = false;
    w->ws_ref = true;
    w->refs++;
    pthread_mutex_unlock(&w->mu);
    int rc = server_watch_open(w->s, &sink, false, &w->ws);
    struct watch_create c = {
        .key = w->key,
        .key_len = w->key_len,
        .start_rev = w->hdr.revision + 1,
        .filters = WATCH_FILTER_NOPUT,
    };
    int64_t id;
    if (rc == 0)
        rc = server_watch_create(w->s, &w->ws, &c, &id);
    c.key = w->pred;
    c.key_len = w->pred_len;
    if (rc == 0)
        rc = server_watch_create(w->s, &w->ws, &c, &id);
    return rc;
}

/* unwatch closes the prefix watch (no lock held: the hub calls the sink
 * under its lock, and the sink takes mu). */
static void unwatch(struct lwait *w)
{
    server_watch_close(w->s, &w->ws);
    pthread_mutex_lock(&w->mu);
    if (w->ws_ref) {
        w->ws_ref = false;
        w->refs--;
    }
    pthread_mutex_unlock(&w->mu);
}

/* finish answers (err 0) or fails the request once. */
static void finish(struct lwait *w, int err)
{
    w->step = S_DONE;
    if (err != 0) {
        w->st->close(w->st->ctx, err);
        return;
    }
    Etcdserverpb__ResponseHeader h;
    int rc;
    if (w->campaign) {
        lock__hdr_pb(&w->txn_hdr, &h);
        V3electionpb__LeaderKey lk = V3ELECTIONPB__LEADER_KEY__INIT;
        lk.name = (ProtobufCBinaryData){w->name_len, w->name};
        lk.key = (ProtobufCBinaryData){w->key_len, w->key};
        lk.rev = w->my_rev;
        lk.lease = w->lease;
        V3electionpb__CampaignResponse r = V3ELECTIONPB__CAMPAIGN_RESPONSE__INIT;
        r.header = &h;
        r.leader = &lk;
        rc = w->st->send(w->st->ctx, &r.base);
    } else {
        /* Held at once: the txn's header; after a wait: the last range's
         * (etcd's Mutex keeps waitDeletes' header). */
        lock__hdr_pb(w->hdr.revision != 0 ? &w->hdr : &w->txn_hdr, &h);
        V3lockpb__LockResponse r = V3LOCKPB__LOCK_RESPONSE__INIT;
        r.header = &h;
        r.key = (ProtobufCBinaryData){w->key_len, w->key};
        rc = w->st->send(w->st->ctx, &r.base);
    }
    w->st->close(w->st->ctx, rc == ERR_CLOSED ? 0 : rc);
}

/* after_txn: the first txn's outcome (or a proclaim's). */
static void after_txn(struct lwait *w, enum step was)
{
    if (w->err != 0)
        return finish(w, w->err);
    if (was == S_PROCLAIM && !w->txn_ok)
        return finish(w, ERR_ELECTION_NOT_LEADER); /* key gone: no resign */
    if (was == S_TXN && w->my_rev == 0)
        return finish(w, ERR_SESSION_EXPIRED); /* deleted in between */
    if (was == S_TXN && w->campaign && w->other_value)
        return do_proclaim(w);
    if (was == S_TXN && !w->campaign &&
        (w->owner_rev == 0 || w->owner_rev == w->my_rev))
        return finish(w, 0); /* uncontended: one request */
    do_range(w);
}

/* after_range: mine first and nothing older: held. */
static void after_range(struct lwait *w)
{
    if (w->err != 0)
        return finish(w, w->err);
    if (w->found == 0 || w->first_rev != w->my_rev)
        return finish(w, ERR_SESSION_EXPIRED);
    if (w->found == 1)
        return finish(w, 0);
    int rc = do_watch(w);
    if (rc != 0) {
        unwatch(w);
        finish(w, rc);
    }
}

/* cleanup after the stream ended before the answer: take back the key
 * this waiter holds or waits with. */
static void cleanup(struct lwait *w)
{
    if (w->my_rev > 0 && w->key != NULL)
        lock__delete_if_created(w->s, w->key, w->key_len, w->my_rev, w,
                                w_metadata);
}

static void w_free(struct lwait *w)
{
    CHECK(w->refs == 0 && !w->posted && w->ws == NULL);
    w->st->release(w->st->ctx);
    pthread_mutex_destroy(&w->mu);
    mem_free(w->name);
    lock__ident_free(&w->who);
    mem_free(w->value);
    mem_free(w->key);
    mem_free(w->pfx_end);
    mem_free(w->pred);
    mem_free(w);
    lock__waiters_put();
}

/* advance takes the outcome that came, starts the next step. */
static void advance(struct lwait *w, enum step was, bool deleted,
                    bool hub_closed)
{
    switch (was) {
    case S_START:
        return w->lease == 0 ? do_grant(w) : do_txn(w);
    case S_GRANT:
        return w->err != 0 ? finish(w, w->err) : do_txn(w);
    case S_TXN:
    case S_PROCLAIM:
        return after_txn(w, was);
    case S_RANGE:
        return after_range(w);
    case S_WATCH:
        if (!deleted && !hub_closed)
            return; /* a spurious run */
        unwatch(w);
        return hub_closed ? finish(w, ERR_STOPPED) : do_range(w);
    default:
        return;
    }
}

static void step(struct server_task *t, bool stopping)
{
    struct lwait *w = t->arg;
    pthread_mutex_lock(&w->mu);
    w->posted = false;
    enum step was = w->step;
    bool ready = w->ready || was == S_START || was == S_WATCH;
    bool ended = w->ended, deleted = w->deleted, hub_closed = w->hub_closed;
    if (stopping && was != S_DONE && (ready || was == S_IDLE))
        w->step = S_DONE; /* no server call any more */
    pthread_mutex_unlock(&w->mu);
    if (!stopping && was != S_DONE && ready) {
        if (ended) {
            if (was == S_WATCH)
                unwatch(w);
            cleanup(w);
            w->step = S_DONE;
        } else {
            advance(w, was, deleted, hub_closed);
        }
    } else if (!stopping && was == S_IDLE && ended) {
        w->step = S_DONE;
    } else if (stopping && was != S_DONE && ready) {
        w->st->close(w->st->ctx, ERR_STOPPED);
    }
    pthread_mutex_lock(&w->mu);
    bool gone = w->ended && w->refs == 0 && !w->posted &&
                (w->step == S_DONE || w->step == S_IDLE);
    pthread_mutex_unlock(&w->mu);
    if (gone)
        w_free(w);
}

/* --- the stream handler -------------------------------------------------- */

static int w_open(struct server *s, struct svc_stream *st, void **state_out,
                  bool campaign)
{
    if (!lock__waiters_take())
        return ERR_TOO_MANY_REQUESTS;
    struct lwait *w = mem_calloc(1, sizeof *w);
    if (w == NULL) {
        lock__waiters_put();
        return ERR_NOMEM;
    }
    w->s = s;
    w->st = st;
    if (lock__ident_copy(&w->who, st) != 0) {
        mem_free(w);
        lock__waiters_put();
        return ERR_NOMEM;
    }
    w->campaign = campaign;
    w->task.fn = step;
    w->task.arg = w;
    w->step = S_IDLE;
    w->refs = 1; /* the stream, until end */
    pthread_mutex_init(&w->mu, NULL);
    *state_out = w;
    return 0;
}

static int lock_open(struct server *s, struct svc_stream *st, void **out)
{
    return w_open(s, st, out, false);
}

static int campaign_open(struct server *s, struct svc_stream *st, void **out)
{
    return w_open(s, st, out, true);
}

/* take_request copies the request (name, lease, value). */
static int take_request(struct lwait *w, const ProtobufCMessage *m)
{
    const ProtobufCBinaryData *name, *value = NULL;
    if (w->campaign) {
        const V3electionpb__CampaignRequest *r = (const void *)m;
        name = &r->name;
        value = &r->value;
        w->lease = r->lease;
    } else {
        const V3lockpb__LockRequest *r = (const void *)m;
        name = &r->name;
        w->lease = r->lease;
    }
    w->name = mem_malloc(name->len + 1);
    w->pfx_end = mem_malloc(name->len + 1);
    w->value = mem_malloc(value != NULL && value->len > 0 ? value->len : 1);
    if (w->name == NULL || w->pfx_end == NULL || w->value == NULL)
        return ERR_NOMEM;
    if (name->len > 0)
        memcpy(w->name, name->data, name->len);
    w->name_len = name->len;
    memcpy(w->pfx_end, w->name, name->len);
    w->pfx_end[name->len] = '0'; /* the prefix name/ ends before name0 */
    if (value != NULL && value->len > 0)
        memcpy(w->value, value->data, value->len);
    w->value_len = value != NULL ? value->len : 0;
    return 0;
}

/* recv: the one request (a second is ignored, as a unary server reads
 * one); the half-close that follows is nothing to act on. */
static void w_recv(void *state, const ProtobufCMessage *m)
{
    struct lwait *w = state;
    if (m == NULL || w->have_req)
        return;
    w->have_req = true;
    int rc = take_request(w, m);
    if (rc != 0) {
        w->st->close(w->st->ctx, rc);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->step = S_START;
    bool need = post_locked(w);
    pthread_mutex_unlock(&w->mu);
    post(w, need);
}

static void w_end(void *state, bool cancelled)
{
    struct lwait *w = state;
    (void)cancelled;
    pthread_mutex_lock(&w->mu);
    CHECK(!w->ended);
    w->ended = true;
    w->refs--;
    bool need = post_locked(w);
    pthread_mutex_unlock(&w->mu);
    post(w, need);
}

const struct svc_stream_handler svc_lock_handler = {
    .request = &v3lockpb__lock_request__descriptor,
    .open = lock_open,
    .recv = w_recv,
    .end = w_end,
};

const struct svc_stream_handler svc_campaign_handler = {
    .request = &v3electionpb__campaign_request__descriptor,
    .open = campaign_open,
    .recv = w_recv,
    .end = w_end,
};
