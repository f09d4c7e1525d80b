/*
 * observe.c - the v3election Observe stream, as etcd 3.4's
 * Election.observe: the leader (the first key of name/ by create
 * revision) now, then each of its PUTs, in order; when it is deleted, the
 * next leader; with none, the first PUT on name/ is the leader.  Each
 * answer is a LeaderResponse {header, kv}.
 *
 * Steps run on cetcd-task (server.h "Tasks"): the Range (its completion
 * sends the leader it found), then a watch on the member's hub: on the
 * leader's key from the Range's revision + 1, or on name/ from the
 * Range's revision while there is no leader.  The sink (under the hub
 * lock) sends the leader's PUTs itself and posts the task at a DELETE or
 * at the first leader.  Memory is bounded by the transport's queue: a
 * full queue makes the sink answer WATCH_SINK_FULL and the hub delivers
 * again later from the store (sent_rev skips what went out already).
 * The stream ends when the client cancels it (or the member stops:
 * ERR_STOPPED).  Lifetime as lock_wait.c: only the task frees.
 *
 * Auth: the Range and each watch run as the caller (its token or client
 * certificate CN, copied at open: lock__ident), as etcd's in-process
 * client carries the stream's context; a refusal (no read on name/ or on
 * the leader's key, a bad token, ...) ends the stream with status OK and
 * no message, as etcd's Observe does.
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

enum omode {
    O_IDLE,   /* no request yet */
    O_START,  /* the request came */
    O_RANGE,  /* the leader's Range in flight */
    O_FIRST,  /* no leader: watching name/ for the first PUT */
    O_LEADER, /* watching the leader's key */
    O_SWITCH, /* the sink saw a change of leader: the task moves on */
    O_DONE,   /* over */
};

/* One Observe stream.  Owned by the task; fields under mu. */
struct ob {
    struct server *s;        /* the member */
    struct svc_stream *st;   /* the transport's end (until release) */
    struct server_task task; /* runs o_step() */
    pthread_mutex_t mu;      /* guards what follows */
    int refs;                /* the stream until end, the Range, ws */
    bool posted;             /* a task run is due */
    enum omode mode;         /* see above */
    bool ready;              /* the Range has its outcome */
    int err;                 /* its error */
    bool ended;              /* end ran */
    bool hub_closed;         /* the hub ended the watch (stopping) */
    bool ws_ref;             /* refs holds one for ws */
    bool from_first;         /* O_SWITCH came from O_FIRST (a new leader) */
    struct watch_stream *ws; /* the watch, or NULL */
    bool have_req;           /* the request came */
    uint8_t *pfx;            /* name/ then name0 (2 * pfx_len bytes) */
    size_t pfx_len;          /* name length + 1 */
    uint8_t *leader;         /* the leader's key (mem_malloc'd) or NULL */
    size_t leader_len;
    mvcc_rev rev;            /* the Range's revision, or the first PUT's */
    mvcc_rev sent_rev;       /* the newest mod revision sent */
    struct lock_ident who;   /* the caller (copied at open): the Range and
                              * the watches run as it */
};

/* The Range's and the watch checks' metadata: the caller's identity. */
static const char *o_metadata(void *ctx, const char *key, size_t *len)
{
    struct ob *o = ctx;
    return lock__ident_metadata(&o->who, key, len);
}

/* An auth refusal of the caller (etcd's ErrUserEmpty, ErrAuthOldRevision,
 * ErrInvalidAuthToken, ErrPermissionDenied, ...). */
static bool auth_refused(int err)
{
    switch (err) {
    case ERR_AUTH_USER_EMPTY:
    case ERR_AUTH_OLD_REVISION:
    case ERR_AUTH_INVALID_TOKEN:
    case ERR_AUTH_PERMISSION_DENIED:
    case ERR_AUTH_USER_NOT_FOUND:
        return true;
    default:
        return false;
    }
}

static bool post_locked(struct ob *o)
{
    if (o->posted)
        return false;
    o->posted = true;
    return true;
}

static void post(struct ob *o, bool need)
{
    if (need)
        server_task_post(o->s, &o->task);
}

/* send_kv sends {header at rev, kv}.  Errors: those of st->send. */
static int send_kv(struct ob *o, const Etcdserverpb__ResponseHeader *h,
                   Mvccpb__KeyValue *kv)
{
    V3electionpb__LeaderResponse r = V3ELECTIONPB__LEADER_RESPONSE__INIT;
    r.header = (Etcdserverpb__ResponseHeader *)h;
    r.kv = kv;
    return o->st->send(o->st->ctx, &r.base);
}

/* set_leader copies key as the leader's (under mu).  Errors: ERR_NOMEM. */
static int set_leader(struct ob *o, const void *key, size_t len)
{
    uint8_t *k = mem_malloc(len > 0 ? len : 1);
    if (k == NULL)
        return ERR_NOMEM;
    memcpy(k, key, len);
    mem_free(o->leader);
    o->leader = k;
    o->leader_len = len;
    return 0;
}

/* On the caller's thread or a read worker: the leader now. */
static void on_range(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct ob *o = ctx;
    pthread_mutex_lock(&o->mu);
    CHECK(o->mode == O_RANGE && !o->ready);
    if (err == 0) {
        const Etcdserverpb__RangeResponse *g = (const void *)reply;
        o->rev = g->header != NULL ? g->header->revision : 0;
        mem_free(o->leader);
        o->leader = NULL;
        if (g->n_kvs > 0) {
            err = set_leader(o, g->kvs[0]->key.data, g->kvs[0]->key.len);
            /* A new leader epoch: sent whatever its revision (sent_rev
             * only filters a watcher's redeliveries). */
            if (err == 0) {
                err = send_kv(o, g->header, g->kvs[0]);
                o->sent_rev = g->kvs[0]->mod_revision;
            }
            if (err == ERR_FULL)
                err = ERR_TOO_MANY_REQUESTS;
        }
    }
    o->err = err == ERR_CLOSED ? 0 : err;
    o->ready = true;
    o->refs--;
    bool need = post_locked(o);
    pthread_mutex_unlock(&o->mu);
    post(o, need);
}

static void kv_pb(const struct mvcc_kv *kv, Mvccpb__KeyValue *pb)
{
    mvccpb__key_value__init(pb);
    pb->key = (ProtobufCBinaryData){kv->key_len, (uint8_t *)kv->key};
    pb->value = (ProtobufCBinaryData){kv->value != NULL ? kv->value_len : 0,
                                      (uint8_t *)kv->value};
    pb->create_revision = kv->create_rev;
    pb->mod_revision = kv->mod_rev;
    pb->version = kv->version;
    pb->lease = kv->lease;
}

/* sink_event: one event in O_FIRST or O_LEADER; false: stop here
 * (switching, or the queue is full: *full_out). */
static bool sink_event(struct ob *o, const struct mvcc_event *e,
                       mvcc_rev header_rev, bool *full_out)
{
    if (e->type == MVCC_EVENT_DELETE) {
        if (o->mode == O_FIRST)
            return true; /* only PUTs make a leader */
        o->mode = O_SWITCH;
        o->from_first = false;
        return false;
    }
    if (e->kv.mod_rev <= o->sent_rev)
        return true; /* delivered again after a full queue: sent already */
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_watch_header(o->s, &h, o->mode == O_FIRST ? e->kv.mod_rev
                                                     : header_rev);
    Mvccpb__KeyValue kv;
    kv_pb(&e->kv, &kv);
    int rc = send_kv(o, &h, &kv);
    if (rc == ERR_FULL || rc == ERR_NOMEM) {
        *full_out = true;
        return false;
    }
    o->sent_rev = e->kv.mod_rev;
    if (o->mode == O_FIRST) {
        o->mode = set_leader(o, e->kv.key, e->kv.key_len) == 0 ? O_SWITCH
                                                               : O_DONE;
        if (o->mode == O_DONE)
            o->st->close(o->st->ctx, ERR_NOMEM); /* any thread (svc.h) */
        o->from_first = true;
        o->rev = e->kv.mod_rev;
        return false;
    }
    return true;
}

static int sink_send(void *ctx, const struct watch_response *r)
{
    struct ob *o = ctx;
    bool full = false, need = false;
    pthread_mutex_lock(&o->mu);
    if (r->canceled && (o->mode == O_FIRST || o->mode == O_LEADER)) {
        o->mode = O_SWITCH; /* compacted: look again */
        o->from_first = false;
    }
    for (size_t i = 0; i < r->n_events; i++) {
        if (o->mode != O_FIRST && o->mode != O_LEADER)
            break;
        if (!sink_event(o, &r->events[i], r->header_rev, &full))
            break;
    }
    if (o->mode == O_SWITCH || o->mode == O_DONE)
        need = post_locked(o);
    pthread_mutex_unlock(&o->mu);
    post(o, need);
    return full ? WATCH_SINK_FULL : 0;
}

static void sink_close(void *ctx)
{
    struct ob *o = ctx;
    pthread_mutex_lock(&o->mu);
    o->ws = NULL; /* the hub is gone (server stopping) */
    o->hub_closed = true;
    if (o->ws_ref) {
        o->ws_ref = false;
        o->refs--;
    }
    bool need = post_locked(o);
    pthread_mutex_unlock(&o->mu);
    post(o, need);
}

/* --- the steps (on cetcd-task) ----------------------------------------- */

static void do_range(struct ob *o)
{
    pthread_mutex_lock(&o->mu);
    o->mode = O_RANGE;
    o->ready = false;
    o->refs++;
    pthread_mutex_unlock(&o->mu);
    lock__range(o->s, o->pfx, o->pfx_len, o->pfx + o->pfx_len, o->pfx_len,
                ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND, 1, 0,
                (struct svc_done){on_range, o, o_metadata});
}

/* watch_permitted: may the caller read what c watches?  etcd creates
 * Observe's watches as the caller, and a refused create cancels them. */
static int watch_permitted(struct ob *o, const struct watch_create *c)
{
    ProtobufCBinaryData key = {c->key_len, (uint8_t *)c->key};
    ProtobufCBinaryData end = {c->end_len, (uint8_t *)c->end};
    struct svc_done who = {NULL, o, o_metadata};
    return svc_auth_check_read(o->s, who, key, end, NULL);
}

/* do_watch: the leader's key from rev + 1, or name/ from rev. */
static int do_watch(struct ob *o)
{
    struct watch_sink sink = {sink_send, sink_close, o};
    pthread_mutex_lock(&o->mu);
    bool first = o->leader == NULL;
    o->mode = first ? O_FIRST : O_LEADER;
    o->ws_ref = true;
    o->refs++;
    struct watch_create c = {
        .key = first ? o->pfx : o->leader,
        .key_len = first ? o->pfx_len : o->leader_len,
        .end = first ? o->pfx + o->pfx_len : NULL,
        .end_len = first ? o->pfx_len : 0,
        .start_rev = first ? o->rev : o->rev + 1,
    };
    pthread_mutex_unlock(&o->mu);
    int rc = watch_permitted(o, &c);
    if (rc == 0)
        rc = server_watch_open(o->s, &sink, false, &o->ws);
    int64_t id;
    if (rc == 0)
        rc = server_watch_create(o->s, &o->ws, &c, &id);
    return rc;
}

static void unwatch(struct ob *o)
{
    server_watch_close(o->s, &o->ws);
    pthread_mutex_lock(&o->mu);
    if (o->ws_ref) {
        o->ws_ref = false;
        o->refs--;
    }
    pthread_mutex_unlock(&o->mu);
}

/* fail ends the stream with err; an auth refusal ends it with status OK
 * and no further message, as etcd's Observe (its Election.observe closes
 * the channel when the Get or the watch fails, and Observe returns nil). */
static void fail(struct ob *o, int err)
{
    pthread_mutex_lock(&o->mu);
    o->mode = O_DONE;
    pthread_mutex_unlock(&o->mu);
    o->st->close(o->st->ctx, auth_refused(err) ? 0 : err);
}

static void o_free(struct ob *o)
{
    CHECK(o->refs == 0 && !o->posted && o->ws == NULL);
    o->st->release(o->st->ctx);
    pthread_mutex_destroy(&o->mu);
    mem_free(o->pfx);
    mem_free(o->leader);
    lock__ident_free(&o->who);
    mem_free(o);
    lock__waiters_put();
}

/* advance: take what happened in mode, start the next step. */
static void advance(struct ob *o, enum omode mode, bool ready, int err,
                    bool from_first)
{
    if (mode == O_START)
        return do_range(o);
    if (mode == O_RANGE && ready && err != 0)
        return fail(o, err);
    if (mode == O_SWITCH)
        unwatch(o);
    if ((mode == O_RANGE && ready) || (mode == O_SWITCH && from_first)) {
        int rc = do_watch(o);
        if (rc != 0) {
            unwatch(o);
            fail(o, rc);
        }
        return;
    }
    if (mode == O_SWITCH)
        do_range(o);
}

static void o_step(struct server_task *t, bool stopping)
{
    struct ob *o = t->arg;
    pthread_mutex_lock(&o->mu);
    o->posted = false;
    enum omode mode = o->mode;
    bool ready = o->ready, ended = o->ended, hub_closed = o->hub_closed;
    bool from_first = o->from_first;
    int err = o->err;
    bool busy = mode == O_RANGE && !ready; /* its completion is to come */
    if (stopping && !busy)
        o->mode = O_DONE;
    pthread_mutex_unlock(&o->mu);
    if (stopping || mode == O_DONE || busy) {
        if (stopping && !busy && mode != O_DONE)
            o->st->close(o->st->ctx, ERR_STOPPED);
    } else if (ended || hub_closed) {
        unwatch(o);
        fail(o, ERR_STOPPED); /* ERR_CLOSED when ended: nothing sent */
    } else {
        advance(o, mode, ready, err, from_first);
    }
    pthread_mutex_lock(&o->mu);
    bool gone = o->ended && o->refs == 0 && !o->posted &&
                (o->mode == O_DONE || o->mode == O_IDLE);
    pthread_mutex_unlock(&o->mu);
    if (gone)
        o_free(o);
}

/* --- the stream handler -------------------------------------------------- */

static int o_open(struct server *s, struct svc_stream *st, void **state_out)
{
    if (!lock__waiters_take())
        return ERR_TOO_MANY_REQUESTS;
    struct ob *o = mem_calloc(1, sizeof *o);
    if (o == NULL) {
        lock__waiters_put();
        return ERR_NOMEM;
    }
    o->s = s;
    o->st = st;
    if (lock__ident_copy(&o->who, st) != 0) {
        mem_free(o);
        lock__waiters_put();
        return ERR_NOMEM;
    }
    o->task.fn = o_step;
    o->task.arg = o;
    o->mode = O_IDLE;
    o->refs = 1; /* the stream, until end */
    pthread_mutex_init(&o->mu, NULL);
    *state_out = o;
    return 0;
}

static void o_recv(void *state, const ProtobufCMessage *m)
{
    struct ob *o = state;
    if (m == NULL || o->have_req)
        return;
    o->have_req = true;
    const V3electionpb__LeaderRequest *r = (const void *)m;
    size_t n = r->name.len;
    o->pfx = mem_malloc(2 * (n + 1));
    if (o->pfx == NULL) {
        o->st->close(o->st->ctx, ERR_NOMEM);
        return;
    }
    for (int i = 0; i < 2; i++) {
        if (n > 0)
            memcpy(o->pfx + i * (n + 1), r->name.data, n);
        o->pfx[i * (n + 1) + n] = i == 0 ? '/' : '0';
    }
    o->pfx_len = n + 1;
    pthread_mutex_lock(&o->mu);
    o->mode = O_START;
    bool need = post_locked(o);
    pthread_mutex_unlock(&o->mu);
    post(o, need);
}

static void o_end(void *state, bool cancelled)
{
    struct ob *o = state;
    (void)cancelled;
    pthread_mutex_lock(&o->mu);
    CHECK(!o->ended);
    o->ended = true;
    o->refs--;
    if (o->mode == O_IDLE)
        o->mode = O_DONE;
    bool need = post_locked(o);
    pthread_mutex_unlock(&o->mu);
    post(o, need);
}

const struct svc_stream_handler svc_observe_handler = {
    .request = &v3electionpb__leader_request__descriptor,
    .open = o_open,
    .recv = o_recv,
    .end = o_end,
};
