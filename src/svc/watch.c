/*
 * watch.c - the Watch service (etcd's v3rpc/watch.go) on a struct
 * svc_stream: each WatchRequest maps to the member's watch hub (server.h
 * "Watch"), each hub response becomes an Etcdserverpb__WatchResponse.
 *
 * etcd 3.4's answers, kept:
 * - create: an empty key means "\0"; the hub checks the range.  A create
 *   it refuses is answered {watch_id -1, created, canceled, cancel_reason}
 *   ("mvcc: watcher range is empty", "mvcc: duplicate watch ID provided
 *   on the WatchStream"), header revision = the current one.
 * - cancel: {watch_id, canceled} when the watcher existed, else nothing.
 * - progress_request: the hub's RequestProgress (watch.h).
 * - a request with no member set is ignored; half-close keeps the stream.
 * - metadata "hasleader: true" (WithRequireLeader): no leader at open, or
 *   for three election timeouts later, ends the stream with ERR_NO_LEADER
 *   (etcd's interceptor, v3rpc/interceptor.go).
 *
 * Flow control.  The hub's sink is the transport's send: a full transport
 * queue (ERR_FULL) is WATCH_SINK_FULL, the hub then catches the watcher up
 * from the store later, nothing blocks.  A fragment run must be taken
 * whole (watch.h): the fragments after the first may use the control
 * reserve (below); should the transport refuse a fragment inside a run the
 * stream is ended with ERR_TOO_MANY_REQUESTS rather than lose events (the
 * client reconnects and resumes).
 *
 * Control answers (created and the hub's other cancels, the refusals and
 * the cancel answers sent here; not a compaction cancel, which waits for
 * room like the events) are never dropped: they go through the
 * stream's send_ctrl, which may use a small reserve past the send queue
 * (SVC_STREAM_CTRL_RESERVE, etcd's ctrlStreamBufLen 16), in order with the
 * events.  A client that does not read and leaves more unread gets its
 * stream ended with ERR_WATCH_CTRL_UNREAD (Unavailable) instead: memory
 * stays bounded (etcd stops reading the client's requests instead).
 *
 * Threads.  recv and end run on the transport's thread for the stream, one
 * at a time; the sink runs on whichever thread drives the hub (apply,
 * cetcd-watch, raft when a tentative batch is published, recv's own)
 * under the hub lock: it only encodes and queues.
 */
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "svc/svc.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* One open Watch stream. */
struct wstream {
    struct server *s;        /* the member */
    struct svc_stream *st;   /* the transport's end (until release) */
    struct watch_stream *ws; /* the hub's stream; NULL once the hub closed
                                it (server.h) */
    bool in_run;             /* sink: inside a fragment run */
};

static int sink_send(void *ctx, const struct watch_response *r)
{
    struct wstream *w = ctx;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_watch_header(w->s, &h, r->header_rev);
    Etcdserverpb__WatchResponse m = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    m.header = &h;
    m.watch_id = r->watch_id;
    m.created = r->created;
    m.canceled = r->canceled;
    m.compact_revision = r->compact_rev;
    m.fragment = r->fragment;
    struct svc__ev_pb *evs = NULL;
    Mvccpb__Event **ptrs = NULL;
    ProtobufCMessageUnknownField *uf = NULL;
    if (r->n_events > 0 &&
        svc__watch_events_shared(r->events, r->n_events, &uf) == 0) {
        /* The events, encoded once for every watcher that gets them. */
        m.base.n_unknown_fields = (unsigned)r->n_events;
        m.base.unknown_fields = uf;
    } else if (r->n_events > 0) {
        evs = mem_malloc(r->n_events * sizeof *evs);
        ptrs = mem_malloc(r->n_events * sizeof *ptrs);
        if (evs == NULL || ptrs == NULL) {
            mem_free(evs);
            mem_free(ptrs);
            if (!w->in_run)
                return WATCH_SINK_FULL; /* retried from the store */
            w->st->close(w->st->ctx, ERR_NOMEM);
            w->in_run = r->fragment;
            return 0;
        }
        for (size_t i = 0; i < r->n_events; i++) {
            svc__watch_ev_fill(&r->events[i], &evs[i]);
            ptrs[i] = &evs[i].ev;
        }
        m.n_events = r->n_events;
        m.events = ptrs;
    }
    /* The rest of a fragment run may use the control reserve too: a run
     * whose first fragment took the queue's last slot goes on. */
    /* A compaction cancel is not a control answer: as in etcd (it goes on
     * the watcher's event channel there) it waits for room like events,
     * and the hub sends it again later (watch_sync.c send_pending). */
    bool compaction = r->canceled && r->compact_rev != 0;
    bool ctrl = (r->created || r->canceled) && !compaction;
    int rc = ctrl || w->in_run ? w->st->send_ctrl(w->st->ctx, &m.base)
                               : w->st->send(w->st->ctx, &m.base);
    mem_free(evs);
    mem_free(ptrs);
    if (ctrl && rc == ERR_FULL) {
        /* The reserve is used up: the client does not read. */
        w->st->close(w->st->ctx, ERR_WATCH_CTRL_UNREAD);
    } else if (rc == ERR_FULL || rc == ERR_NOMEM) {
        if (!w->in_run)
            return WATCH_SINK_FULL; /* nothing taken: retried later */
        /* Inside a fragment run the rest must be taken: end the stream
         * instead of losing part of a revision. */
        w->st->close(w->st->ctx, ERR_TOO_MANY_REQUESTS);
    }
    w->in_run = r->fragment;
    return 0; /* taken (or the stream is over: nothing more to do) */
}

static void sink_close(void *ctx)
{
    struct wstream *w = ctx;
    w->ws = NULL; /* the hub is gone (server stopping) */
    w->st->close(w->st->ctx, ERR_STOPPED);
}

/* sink_end: the member asks the stream to end (no leader, see w_open). */
static void sink_end(void *ctx, int err)
{
    struct wstream *w = ctx;
    (void)w->st->close(w->st->ctx, err); /* ERR_CLOSED: ending already */
}

/* require_leader: the client asked for etcd's WithRequireLeader (metadata
 * "hasleader: true"): its stream is refused, or ended, with "etcdserver:
 * no leader" while the member has none (server.h "Watch"). */
static bool require_leader(struct svc_stream *st)
{
    size_t n = 0;
    const char *v = st->metadata(st->ctx, "hasleader", &n);
    return v != NULL && n == 4 && memcmp(v, "true", 4) == 0;
}

static int w_open(struct server *s, struct svc_stream *st, void **state_out)
{
    struct wstream *w = mem_calloc(1, sizeof *w);
    if (w == NULL)
        return ERR_NOMEM;
    w->s = s;
    w->st = st;
    struct watch_sink sink = {sink_send, sink_close, w, sink_end};
    int rc = server_watch_open(s, &sink, require_leader(st), &w->ws);
    if (rc != 0) {
        mem_free(w);
        return rc;
    }
    *state_out = w;
    return 0;
}

/* A control answer sent past the hub (header = the current revision),
 * never dropped: when it cannot be queued the stream ends (see top). */
static void send_ctrl(struct wstream *w, int64_t id, bool created,
                      const char *reason)
{
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_header_fill(w->s, &h);
    Etcdserverpb__WatchResponse m = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    m.header = &h;
    m.watch_id = id;
    m.created = created;
    m.canceled = true;
    m.cancel_reason = (char *)(reason != NULL ? reason : "");
    int rc = w->st->send_ctrl(w->st->ctx, &m.base);
    if (rc == ERR_FULL || rc == ERR_NOMEM)
        w->st->close(w->st->ctx,
                     rc == ERR_FULL ? ERR_WATCH_CTRL_UNREAD : ERR_NOMEM);
}

static const char *create_reason(int err)
{
    switch (err) {
    case ERR_EXIST:
        return "mvcc: duplicate watch ID provided on the WatchStream";
    case ERR_INVAL:
        return "mvcc: watcher range is empty";
    default:
        return err_str(err);
    }
}

/* etcd's isWatchPermitted: the watched range must be readable by the
 * stream's user; refused creates are canceled with grpc-go's text of the
 * error.  The check takes range_end "\0" as every key from key on (etcd
 * 3.4.23 turns it into an empty end first and so checks the key alone,
 * which lets a user watch keys it cannot read: cetcd does not). */
static const char *watch_auth_refusal(struct wstream *w,
                                      const Etcdserverpb__WatchCreateRequest *c)
{
    struct svc_done who = {NULL, w->st->ctx, w->st->metadata};
    switch (svc_auth_check_read(w->s, who, c->key, c->range_end, NULL)) {
    case 0:
        return NULL;
    case ERR_AUTH_INVALID_TOKEN:
        return "rpc error: code = Unauthenticated desc = etcdserver: "
               "invalid auth token";
    case ERR_AUTH_OLD_REVISION:
        return "rpc error: code = InvalidArgument desc = etcdserver: "
               "revision of auth store is old";
    case ERR_AUTH_USER_EMPTY:
        return "rpc error: code = InvalidArgument desc = etcdserver: "
               "user name is empty";
    default:
        return "rpc error: code = PermissionDenied desc = etcdserver: "
               "permission denied";
    }
}

static void do_create(struct wstream *w,
                      const Etcdserverpb__WatchCreateRequest *c)
{
    const char *refused = watch_auth_refusal(w, c);
    if (refused != NULL) {
        send_ctrl(w, WATCH_ID_NONE, true, refused);
        return;
    }
    static const uint8_t zero = 0;
    struct watch_create req = {
        .watch_id = c->watch_id,
        .key = c->key.len > 0 ? c->key.data : &zero,
        .key_len = c->key.len > 0 ? c->key.len : 1,
        .end = c->range_end.data,
        .end_len = c->range_end.len,
        .start_rev = c->start_revision > 0 ? c->start_revision : 0,
        .prev_kv = c->prev_kv,
        .progress_notify = c->progress_notify,
        .fragment = c->fragment,
    };
    for (size_t i = 0; i < c->n_filters; i++) {
        if (c->filters[i] == ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT)
            req.filters |= WATCH_FILTER_NOPUT;
        else if (c->filters[i] ==
                 ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NODELETE)
            req.filters |= WATCH_FILTER_NODELETE;
    }
    int64_t id;
    int rc = server_watch_create(w->s, &w->ws, &req, &id);
    if (rc == ERR_STOPPED)
        return; /* the stream is ending */
    if (rc != 0)
        send_ctrl(w, WATCH_ID_NONE, true, create_reason(rc));
}

static void w_recv(void *state, const ProtobufCMessage *msg)
{
    struct wstream *w = state;
    if (msg == NULL)
        return; /* half-closed: etcd keeps sending */
    const Etcdserverpb__WatchRequest *m =
        (const Etcdserverpb__WatchRequest *)msg;
    switch (m->request_union_case) {
    case ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST:
        if (m->create_request != NULL)
            do_create(w, m->create_request);
        break;
    case ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST:
        if (m->cancel_request != NULL &&
            server_watch_cancel(w->s, &w->ws, m->cancel_request->watch_id) == 0)
            send_ctrl(w, m->cancel_request->watch_id, false, NULL);
        break;
    case ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST:
        server_watch_progress(w->s, &w->ws);
        break;
    default:
        break; /* etcd ignores an unknown request */
    }
}

static void w_end(void *state, bool cancelled)
{
    (void)cancelled;
    struct wstream *w = state;
    server_watch_close(w->s, &w->ws); /* the sink is not called again */
    w->st->release(w->st->ctx);
    mem_free(w);
}

const struct svc_stream_handler svc_watch_handler = {
    &etcdserverpb__watch_request__descriptor, w_open, w_recv, w_end,
};
