/*
 * ctl_wengine.c - the watch engine that cetcdctl's "watch" and
 * "make-mirror" share (ctl_watch.h): clientv3's watchers on one libcetcd
 * Watch stream in poll mode, with its reconnects, its handling of created,
 * canceled and progress responses, and its prefix range end.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl_watch.h"

#define BACKOFF_MAX_US 100000

static const char compacted_text[] =
    "etcdserver: mvcc: required revision has been compacted";

size_t ctl_wengine_prefix_end(const uint8_t *key, size_t key_len, uint8_t *out)
{
    for (size_t i = key_len; i > 0; i--) {
        if (key[i - 1] < 0xff) {
            memcpy(out, key, i);
            out[i - 1]++;
            return i;
        }
    }
    out[0] = 0; /* no key after the prefix: every key >= it */
    return 1;
}

bool ctl_wengine_is_progress(const struct cetcd_watch_response *r)
{
    return r->events_len == 0 && !r->canceled && !r->created &&
           r->compact_revision == 0 && r->header.revision != 0;
}

/* send_create asks the server for w on the current stream, from the
 * revision after the last one w delivered. */
static void send_create(struct ctl_wengine *e, struct ctl_watcher *w)
{
    struct cetcd_watch_opts o = {0};
    struct cetcd_status st;
    assert(e->stream != NULL);
    assert(w->key != NULL && w->next_rev >= 0);
    o.range_end = w->end;
    o.range_end_len = w->end ? w->end_len : 0;
    o.start_revision = w->next_rev;
    o.prev_kv = w->prev_kv;
    w->id = -1;
    int rc = cetcd_watch_create(e->stream, w->key, w->key_len, &o, &st);
    /* an ended stream shows at the next poll; anything else is local */
    if (rc != 0 && rc != CETCD_FAILED_PRECONDITION)
        ctl_exit(CTL_EXIT_ERROR, "%s", st.message);
}

/* stream_open opens a stream and creates every watcher on it. */
static int stream_open(struct ctl_wengine *e, struct cetcd_status *st)
{
    struct cetcd_watch_stream_opts o = {0};
    o.send_max = 2 * CTL_WATCHERS_MAX; /* every create, a few more */
    int rc = cetcd_watch_stream_open(e->client, &o, &e->stream, st);
    if (rc != 0) {
        e->stream = NULL;
        return rc;
    }
    e->ncanceled = 0;
    for (size_t i = 0; i < e->n; i++)
        send_create(e, e->w[i]);
    return 0;
}

static void stream_close(struct ctl_wengine *e)
{
    cetcd_watch_stream_close(e->stream);
    e->stream = NULL;
}

static void watcher_free(struct ctl_watcher *w)
{
    free(w->key);
    free(w->end);
    free(w);
}

/* watcher_close delivers w's close, frees it and, when it was the last,
 * ends the stream as clientv3 does. */
static void watcher_close(struct ctl_wengine *e, struct ctl_watcher *w,
                          const char *err)
{
    size_t i = 0;
    assert(e->n <= CTL_WATCHERS_MAX);
    while (i < e->n && e->w[i] != w)
        i++;
    assert(i < e->n); /* only live watchers are closed */
    memmove(e->w + i, e->w + i + 1, (e->n - i - 1) * sizeof e->w[0]);
    e->n--;
    e->fn(e->ctx, w, NULL, err);
    watcher_free(w);
    if (e->n == 0 && e->stream)
        stream_close(e);
}

struct ctl_watcher *ctl_wengine_add(struct ctl_wengine *e,
                                  const void *key, size_t key_len,
                                  const void *end, size_t end_len,
                                  int64_t rev, bool prev_kv, void *arg)
{
    assert(e->client != NULL && e->fn != NULL);
    assert(key != NULL || key_len == 0);
    if (e->n == CTL_WATCHERS_MAX)
        return NULL;
    struct ctl_watcher *w = calloc(1, sizeof *w);
    if (!w || !(w->key = malloc(key_len + 1)) ||
        (end && !(w->end = malloc(end_len + 1))))
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(w->key, key, key_len);
    w->key_len = key_len;
    if (end) {
        memcpy(w->end, end, end_len);
        w->end_len = end_len;
    }
    w->next_rev = rev;
    w->prev_kv = prev_kv;
    w->id = -1;
    w->arg = arg;
    e->w[e->n++] = w;
    if (e->stream)
        send_create(e, w); /* else the next step opens a stream */
    return w;
}

void ctl_wengine_progress(struct ctl_wengine *e)
{
    struct cetcd_status st;
    if (e->stream)
        (void)cetcd_watch_progress(e->stream, &st);
}

/* halt closes every watcher with err, as clientv3 does when its stream
 * stops for good. */
static void halt(struct ctl_wengine *e, const char *err)
{
    if (e->stream)
        stream_close(e);
    while (e->n > 0)
        watcher_close(e, e->w[0], err);
}

/* halt_text is what clientv3 reports for a stream's final status. */
static const char *halt_text(const struct cetcd_status *st, char *buf,
                             size_t cap)
{
    /* libcetcd reports a stream the server ended with OK as CANCELLED
     * with the code's name; Go's Recv gives io.EOF there */
    if (st->code == CETCD_CANCELLED && strcmp(st->message, "CANCELLED") == 0)
        return "EOF";
    return ctl_status_text(st, buf, cap);
}

/* reconnect waits for a connection before a new stream opens: libcetcd's
 * streams neither wait for one nor fail over, its unary calls do both
 * (gRPC-go's balancer does it under clientv3's stream).  A cheap
 * serializable count of one key does; its answer does not matter. */
static void reconnect(struct ctl_wengine *e)
{
    static const uint8_t key[1];
    struct cetcd_range_opts o = {0};
    struct cetcd_range_result *r = NULL;
    struct cetcd_status st;
    o.serializable = true;
    o.count_only = true;
    if (cetcd_range(e->client, key, 1, &o, &r, &st) == 0)
        cetcd_range_result_free(r);
}

/* stream_ended reconnects (clientv3 retries UNAVAILABLE and INTERNAL but
 * for "no leader") or halts. */
static void stream_ended(struct ctl_wengine *e,
                         const struct cetcd_status *st)
{
    bool no_leader = strcmp(st->message, "etcdserver: no leader") == 0;
    if ((st->code == CETCD_UNAVAILABLE && !no_leader) ||
        st->code == CETCD_INTERNAL) {
        stream_close(e);
        if (st->code == CETCD_UNAVAILABLE) {
            if (e->backoff_us < 1000)
                e->backoff_us = 1000;
            else if (e->backoff_us < BACKOFF_MAX_US)
                e->backoff_us += e->backoff_us / 4;
            if (e->backoff_us > BACKOFF_MAX_US)
                e->backoff_us = BACKOFF_MAX_US;
            usleep((useconds_t)e->backoff_us);
            reconnect(e);
        }
        return; /* the next step opens a new stream */
    }
    char buf[512];
    halt(e, halt_text(st, buf, sizeof buf));
}

static struct ctl_watcher *find(struct ctl_wengine *e, int64_t id)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->w[i]->id == id)
            return e->w[i];
    return NULL;
}

/* created gives the oldest watcher waiting for it its id, or closes it
 * with the server's reason. */
static void created(struct ctl_wengine *e,
                    const struct cetcd_watch_response *r)
{
    struct ctl_watcher *w = find(e, -1);
    if (!w)
        return; /* nothing asked for it */
    if (r->watch_id == -1 || (r->canceled && r->cancel_reason[0])) {
        watcher_close(e, w, r->cancel_reason);
        return;
    }
    w->id = r->watch_id;
    /* clientv3 resumes a watcher created at the store's revision R from R
     * itself, which sends the event at R again after a reconnect; R + 1 is
     * where it really starts. */
    if (w->next_rev == 0 && r->header.revision > 0)
        w->next_rev = r->header.revision + 1;
}

/* cancel_unknown cancels, once per stream, an id that has no watcher. */
static void cancel_unknown(struct ctl_wengine *e, int64_t id)
{
    struct cetcd_status st;
    assert(e->stream != NULL);
    if (id == -1)
        return; /* not a watcher's id: nothing to cancel */
    for (size_t i = 0; i < e->ncanceled; i++)
        if (e->canceled[i] == id)
            return;
    if (e->ncanceled < sizeof e->canceled / sizeof e->canceled[0])
        e->canceled[e->ncanceled++] = id;
    (void)cetcd_watch_cancel(e->stream, id, &st);
}

/* deliver hands r to w and moves w's resume revision past it (clientv3
 * resumes at the header revision itself; past it is exact). */
static void deliver(struct ctl_wengine *e, struct ctl_watcher *w,
                    const struct cetcd_watch_response *r)
{
    assert(w->id != -1 && r != NULL);
    if (r->events_len > 0)
        w->next_rev = r->events[r->events_len - 1].kv.mod_revision + 1;
    else if (r->header.revision > 0)
        w->next_rev = r->header.revision + 1;
    const char *err = r->compact_revision != 0 ? compacted_text : NULL;
    e->fn(e->ctx, w, r, err);
    if (err)
        watcher_close(e, w, NULL);
}

static void dispatch(struct ctl_wengine *e,
                     const struct cetcd_watch_response *r)
{
    if (r->created) {
        created(e, r);
        return;
    }
    if (r->canceled && r->compact_revision == 0) {
        struct ctl_watcher *w = find(e, r->watch_id);
        if (w && r->watch_id != -1)
            watcher_close(e, w, NULL);
        return;
    }
    if (ctl_wengine_is_progress(r) && r->watch_id == -1) {
        for (size_t i = 0; i < e->n; i++)
            if (e->w[i]->id != -1)
                deliver(e, e->w[i], r);
        return;
    }
    struct ctl_watcher *w = r->watch_id == -1 ? NULL : find(e, r->watch_id);
    if (w)
        deliver(e, w, r);
    else
        cancel_unknown(e, r->watch_id);
}

void ctl_wengine_step(struct ctl_wengine *e, int timeout_ms)
{
    struct cetcd_status st = {0};
    char buf[512];
    assert(e->client != NULL && e->fn != NULL);
    assert(e->n <= CTL_WATCHERS_MAX);
    if (!e->stream) {
        if (e->n == 0)
            return;
        if (stream_open(e, &st) != 0) {
            halt(e, ctl_status_text(&st, buf, sizeof buf));
            return;
        }
    }
    struct cetcd_watch_response *r = NULL;
    int rc = cetcd_watch_poll(e->stream, timeout_ms, &r, &st);
    if (rc == 0) {
        dispatch(e, r);
        cetcd_watch_response_free(r);
    } else if (rc != CETCD_DEADLINE_EXCEEDED) {
        stream_ended(e, &st);
    }
}

void ctl_wengine_close(struct ctl_wengine *e)
{
    if (e->stream)
        stream_close(e);
    for (size_t i = 0; i < e->n; i++)
        watcher_free(e->w[i]);
    e->n = 0;
}
