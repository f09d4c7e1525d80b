/*
 * watch.c - the hub and its streams: open/close, watcher create and cancel,
 * moves between the synced and unsynced groups, the sends every path
 * shares (created, events with fragmentation), RequestProgress and the
 * periodic progress tick.  The fan-out of observed batches is in
 * watch_notify.c, the catch-up in watch_sync.c.
 */
#include <string.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "watch/watch_int.h"

int watch_hub_open(struct mvcc_store *s, const struct watch_options *opts,
                   struct watch_hub **out)
{
    CHECK(s != NULL && out != NULL);
    struct watch_hub *h = mem_calloc(1, sizeof *h);
    if (h == NULL)
        return ERR_NOMEM;
    if (opts != NULL)
        h->o = *opts;
    if (h->o.watchers_max == 0)
        h->o.watchers_max = 1000000;
    if (h->o.stream_watchers_max == 0)
        h->o.stream_watchers_max = 100000;
    if (h->o.fragment_bytes == 0)
        h->o.fragment_bytes = 1536 * 1024;
    if (h->o.sync_events_max == 0)
        h->o.sync_events_max = 1000;
    if (h->o.sync_bytes_max == 0)
        h->o.sync_bytes_max = 4u << 20;
    if (h->o.fan_pairs_max == 0)
        h->o.fan_pairs_max = 4096;
    if (h->o.progress_interval_ms == 0)
        h->o.progress_interval_ms = 10 * 60 * 1000;
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->sync_mu, NULL);
    h->store = s;
    h->rev = mvcc_current_rev(s);
    h->rng = 2463534242u;
    *out = h;
    return 0;
}

void watch__free(struct watch_watcher *w)
{
    mem_free(w); /* key and end live inside it */
}

void watch_hub_close(struct watch_hub *h)
{
    if (h == NULL)
        return;
    while (h->streams != NULL) {
        struct watch_stream *st = h->streams;
        void (*cl)(void *) = st->sink.close;
        void *ctx = st->sink.ctx;
        watch_stream_close(st);
        if (cl != NULL)
            cl(ctx);
    }
    CHECK(h->n_watchers == 0 && h->n_unsynced == 0);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->sync_mu);
    mem_free(h->keys);
    mem_free(h->ids);
    mem_free(h->touched);
    mem_free(h->counts);
    mem_free(h->pairs);
    mem_free(h->order);
    mem_free(h->out);
    mem_free(h);
}

mvcc_rev watch_hub_rev(struct watch_hub *h)
{
    pthread_mutex_lock(&h->mu);
    mvcc_rev r = h->rev;
    pthread_mutex_unlock(&h->mu);
    return r;
}

size_t watch_hub_watchers(struct watch_hub *h)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->n_watchers;
    pthread_mutex_unlock(&h->mu);
    return n;
}

size_t watch_hub_unsynced(struct watch_hub *h)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->n_unsynced;
    pthread_mutex_unlock(&h->mu);
    return n;
}

size_t watch_hub_pending(struct watch_hub *h)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->n_unsynced + h->n_progress_pending;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* --- groups --------------------------------------------------------------- */

static void unsynced_link(struct watch_hub *h, struct watch_watcher *w)
{
    /* Insert at the tail of the circular list (round robin order). */
    if (h->unsynced == NULL) {
        w->unext = w->uprev = w;
        h->unsynced = w;
    } else {
        w->unext = h->unsynced;
        w->uprev = h->unsynced->uprev;
        w->uprev->unext = w;
        h->unsynced->uprev = w;
    }
    h->n_unsynced++;
    w->st->n_unsynced++;
}

static void unsynced_unlink(struct watch_hub *h, struct watch_watcher *w)
{
    CHECK(h->n_unsynced > 0 && w->unext != NULL);
    if (w->unext == w) {
        h->unsynced = NULL;
    } else {
        w->uprev->unext = w->unext;
        w->unext->uprev = w->uprev;
        if (h->unsynced == w)
            h->unsynced = w->unext;
    }
    w->unext = w->uprev = NULL;
    h->n_unsynced--;
    w->st->n_unsynced--;
}

int watch__to_synced(struct watch_hub *h, struct watch_watcher *w)
{
    CHECK(!w->synced && !w->created_pending && !w->cancel_pending);
    CHECK(w->next_rev > h->rev);
    unsynced_unlink(h, w); /* first: the index links share its union */
    int rc = watch__index_add(h, w);
    if (rc != 0) {
        unsynced_link(h, w); /* stays unsynced; a later step retries */
        return rc;
    }
    w->synced = true;
    watch__progress_try(w->st);
    return 0;
}

void watch__to_unsynced(struct watch_hub *h, struct watch_watcher *w)
{
    CHECK(w->synced);
    watch__index_del(h, w);
    w->synced = false;
    unsynced_link(h, w);
}

void watch__retire(struct watch_hub *h, struct watch_watcher *w)
{
    CHECK(!w->synced && !w->retired);
    unsynced_unlink(h, w);
    w->retired = true;
    w->cancel_pending = false;
    CHECK(w->st->n_unsynced <= w->st->n_watchers);
    watch__progress_try(w->st);
}

void watch__remove(struct watch_hub *h, struct watch_watcher *w)
{
    struct watch_stream *st = w->st;
    if (w->synced) {
        watch__index_del(h, w);
        w->synced = false;
    } else if (!w->retired) {
        unsynced_unlink(h, w);
    }
    watch__ids_del(h, w);
    if (w->sprev != NULL)
        w->sprev->snext = w->snext;
    else
        st->ws = w->snext;
    if (w->snext != NULL)
        w->snext->sprev = w->sprev;
    st->n_watchers--;
    h->n_watchers--;
    if (w->prev_kv && --h->n_prev_kv == 0)
        mvcc_store_set_prev_values(h->store, false);
    if (w->busy)
        w->dead = true; /* the sync step frees it */
    else
        watch__free(w);
    watch__progress_try(st);
}

/* --- sends ---------------------------------------------------------------- */

static size_t ev_size(const struct watch_hub *h, const struct mvcc_event *ev)
{
    if (h->o.event_size != NULL)
        return h->o.event_size(ev, h->o.size_arg);
    return ev->kv.key_len + ev->kv.value_len + ev->prev_kv.key_len +
           ev->prev_kv.value_len + 64;
}

static size_t base_size(const struct watch_hub *h,
                        const struct watch_response *r)
{
    if (h->o.base_size != NULL)
        return h->o.base_size(r, h->o.size_arg);
    return 64 + (r->fragment ? 2 : 0);
}

/* split_at: the end of the fragment that starts at evs[i] of n (etcd's
 * sendFragments): n when the whole response goes as one. */
static size_t split_at(const struct watch_hub *h,
                       const struct watch_watcher *w,
                       struct watch_response *r, const struct mvcc_event *evs,
                       size_t i, size_t n)
{
    size_t max = h->o.fragment_bytes;
    if (!w->fragment || n < 2)
        return n;
    if (i == 0) {
        r->fragment = false;
        size_t whole = base_size(h, r);
        for (size_t k = 0; k < n && whole < max; k++)
            whole += ev_size(h, &evs[k]);
        if (whole < max)
            return n;
    }
    r->fragment = true;
    size_t bytes = base_size(h, r) + ev_size(h, &evs[i]);
    size_t j = i + 1;
    while (j < n && bytes + ev_size(h, &evs[j]) < max)
        bytes += ev_size(h, &evs[j++]);
    return j;
}

int watch__send_events(struct watch_hub *h, struct watch_watcher *w,
                       const struct mvcc_event *evs, size_t n,
                       mvcc_rev header_rev)
{
    CHECK(n > 0 && !w->dead);
    struct watch_response r = {.watch_id = w->id, .header_rev = header_rev};
    size_t i = 0;
    bool first = true;
    while (i < n) {
        size_t j = split_at(h, w, &r, evs, i, n);
        CHECK(j > i && j <= n);
        r.events = evs + i;
        r.n_events = j - i;
        r.fragment = j < n;
        int rc = w->st->sink.send(w->st->sink.ctx, &r);
        /* A sink that took a first fragment takes the rest (watch.h). */
        CHECK(rc == 0 || (rc == WATCH_SINK_FULL && first));
        if (rc != 0)
            return rc;
        first = false;
        i = j;
    }
    w->sent = true;
    return 0;
}

bool watch__send_created(struct watch_hub *h, struct watch_watcher *w)
{
    CHECK(w->created_pending);
    struct watch_response r = {
        .watch_id = w->id, .header_rev = w->created_rev, .created = true};
    if (w->st->sink.send(w->st->sink.ctx, &r) != 0)
        return false;
    w->created_pending = false;
    return true;
}

bool watch__filter_pass(const struct watch_watcher *w,
                        const struct mvcc_event *ev)
{
    if (ev->type == MVCC_EVENT_PUT)
        return (w->filters & WATCH_FILTER_NOPUT) == 0;
    return (w->filters & WATCH_FILTER_NODELETE) == 0;
}

/* --- streams -------------------------------------------------------------- */

int watch_stream_open(struct watch_hub *h, const struct watch_sink *sink,
                      struct watch_stream **out)
{
    CHECK(h != NULL && sink != NULL && sink->send != NULL && out != NULL);
    struct watch_stream *st = mem_calloc(1, sizeof *st);
    if (st == NULL)
        return ERR_NOMEM;
    st->h = h;
    st->sink = *sink;
    pthread_mutex_lock(&h->mu);
    st->next = h->streams;
    if (h->streams != NULL)
        h->streams->prev = st;
    h->streams = st;
    pthread_mutex_unlock(&h->mu);
    *out = st;
    return 0;
}

void watch_stream_mark(struct watch_stream *st, unsigned marks)
{
    CHECK(st != NULL);
    pthread_mutex_lock(&st->h->mu);
    st->marks = marks;
    pthread_mutex_unlock(&st->h->mu);
}

void watch_hub_end_marked(struct watch_hub *h, unsigned marks, int err)
{
    CHECK(h != NULL && marks != 0);
    pthread_mutex_lock(&h->mu);
    for (struct watch_stream *st = h->streams; st != NULL; st = st->next) {
        if ((st->marks & marks) == 0)
            continue;
        CHECK(st->sink.end != NULL); /* a marked stream can be ended */
        st->sink.end(st->sink.ctx, err);
    }
    pthread_mutex_unlock(&h->mu);
}

void watch_stream_close(struct watch_stream *st)
{
    struct watch_hub *h = st->h;
    pthread_mutex_lock(&h->mu);
    if (st->progress_pending) { /* no answer once closed */
        st->progress_pending = false;
        h->n_progress_pending--;
    }
    while (st->ws != NULL)
        watch__remove(h, st->ws);
    CHECK(st->n_watchers == 0 && st->n_unsynced == 0);
    if (st->prev != NULL)
        st->prev->next = st->next;
    else
        h->streams = st->next;
    if (st->next != NULL)
        st->next->prev = st->prev;
    pthread_mutex_unlock(&h->mu);
    mem_free(st);
}

/* --- create / cancel ------------------------------------------------------ */

/* check_range validates a create request's range (etcd's rules). */
static int check_range(const struct watch_create *req, bool *inf_out)
{
    if (req->key == NULL || req->key_len == 0)
        return ERR_INVAL;
    *inf_out = req->end_len == 1 && ((const uint8_t *)req->end)[0] == 0;
    if (req->end_len > 0 && !*inf_out &&
        watch__cmp(req->key, req->key_len, req->end, req->end_len) >= 0)
        return ERR_INVAL; /* "mvcc: watcher range is empty" */
    return 0;
}

static struct watch_watcher *watcher_new(const struct watch_create *req,
                                         bool inf)
{
    size_t end_len = req->end_len > 0 && !inf ? req->end_len : 0;
    struct watch_watcher *w =
        mem_calloc(1, sizeof *w + req->key_len + end_len);
    if (w == NULL)
        return NULL;
    w->key = w->bytes;
    w->key_len = req->key_len;
    memcpy(w->key, req->key, req->key_len);
    if (end_len > 0) {
        w->end = w->bytes + req->key_len;
        w->end_len = end_len;
        memcpy(w->end, req->end, end_len);
    }
    w->end_inf = inf;
    w->filters = req->filters;
    w->prev_kv = req->prev_kv;
    w->progress_notify = req->progress_notify;
    w->fragment = req->fragment;
    uint32_t x = 2166136261u; /* FNV-1a over key, end and flags */
    for (size_t i = 0; i < w->key_len + end_len; i++)
        x = (x ^ w->bytes[i]) * 16777619u;
    x = (x ^ (uint32_t)w->key_len) * 16777619u;
    x = (x ^ (w->filters | (unsigned)inf << 4 | (unsigned)w->prev_kv << 5)) *
        16777619u;
    w->sel_hash = x;
    return w;
}

/* pick_id chooses w's id on st (etcd: the next unused one for 0). */
static int pick_id(struct watch_hub *h, struct watch_stream *st,
                   int64_t want, int64_t *id_out)
{
    if (want != 0) {
        if (watch__ids_find(h, st, want) != NULL)
            return ERR_EXIST;
        *id_out = want;
        return 0;
    }
    while (watch__ids_find(h, st, st->next_id) != NULL)
        st->next_id++;
    *id_out = st->next_id++;
    return 0;
}

/* attach links w into st and the groups, and sends `created` if it can. */
static int attach(struct watch_hub *h, struct watch_stream *st,
                  struct watch_watcher *w, mvcc_rev start_rev)
{
    w->st = st;
    int rc = watch__ids_add(h, w);
    if (rc != 0)
        return rc;
    w->next_rev = start_rev > 0 ? start_rev : h->rev + 1;
    w->created_rev = h->rev; /* even if `created` goes out later */
    w->created_pending = true;
    h->n_watchers++;
    st->n_watchers++;
    /* Before w can be synced: a batch begun before this reads no prev
     * values, and its events then send w back to the store (deliver). */
    if (w->prev_kv && h->n_prev_kv++ == 0)
        mvcc_store_set_prev_values(h->store, true);
    w->snext = st->ws;
    if (st->ws != NULL)
        st->ws->sprev = w;
    st->ws = w;
    unsynced_link(h, w);
    if (watch__send_created(h, w) && w->next_rev > h->rev)
        (void)watch__to_synced(h, w); /* on ERR_NOMEM a step retries */
    return 0;
}

int watch_create(struct watch_stream *st, const struct watch_create *req,
                 int64_t *id_out)
{
    CHECK(st != NULL && req != NULL && id_out != NULL);
    struct watch_hub *h = st->h;
    bool inf;
    int rc = check_range(req, &inf);
    if (rc != 0)
        return rc;
    struct watch_watcher *w = watcher_new(req, inf);
    if (w == NULL)
        return ERR_NOMEM;
    pthread_mutex_lock(&h->mu);
    if (h->n_watchers >= h->o.watchers_max ||
        st->n_watchers >= h->o.stream_watchers_max)
        rc = ERR_TOO_MANY_REQUESTS;
    if (rc == 0)
        rc = pick_id(h, st, req->watch_id, &w->id);
    if (rc == 0)
        rc = attach(h, st, w, req->start_rev);
    if (rc == 0)
        *id_out = w->id;
    pthread_mutex_unlock(&h->mu);
    if (rc != 0)
        watch__free(w);
    return rc;
}

int watch_cancel(struct watch_stream *st, int64_t id)
{
    struct watch_hub *h = st->h;
    pthread_mutex_lock(&h->mu);
    struct watch_watcher *w = watch__ids_find(h, st, id);
    if (w != NULL)
        watch__remove(h, w);
    pthread_mutex_unlock(&h->mu);
    return w != NULL ? 0 : ERR_NOTFOUND;
}

/* --- progress ------------------------------------------------------------- */

/* stream_ahead: whether a watcher of st starts past the hub's next
 * revision.  etcd (#20229, in 3.4 and 3.5 after 3.4.31/3.5.13, which
 * answered at the current revision) does not answer RequestProgress while
 * a watcher of the stream is before its start revision: the answer would
 * vouch for revisions that watch does not cover.  The bound is the one of
 * the periodic progress (watch_hub_tick): the hub at start - 1 or later. */
static bool stream_ahead(const struct watch_stream *st)
{
    for (const struct watch_watcher *w = st->ws; w != NULL; w = w->snext)
        if (!w->retired && w->next_rev > st->h->rev + 1)
            return true;
    return false;
}

void watch__progress_try(struct watch_stream *st)
{
    struct watch_hub *h = st->h;
    if (!st->progress_pending || st->n_unsynced > 0 || stream_ahead(st))
        return;
    struct watch_response r = {.watch_id = WATCH_ID_NONE,
                               .header_rev = h->rev};
    if (st->sink.send(st->sink.ctx, &r) != 0)
        return; /* still pending; the sync step retries */
    st->progress_pending = false;
    CHECK(h->n_progress_pending > 0);
    h->n_progress_pending--;
}

/* progress_synced sends a watcher's own progress response to each synced
 * watcher of st that has reached its start revision, so one slow watcher
 * does not starve the others of progress (etcd #20242).  Best effort: a
 * full sink skips it (the deferred stream response still comes). */
static void progress_synced(struct watch_stream *st)
{
    struct watch_hub *h = st->h;
    for (struct watch_watcher *w = st->ws; w != NULL; w = w->snext) {
        if (!w->synced || w->next_rev > h->rev + 1)
            continue;
        struct watch_response r = {.watch_id = w->id, .header_rev = h->rev};
        if (st->sink.send(st->sink.ctx, &r) != 0)
            return;
    }
}

void watch_stream_progress(struct watch_stream *st)
{
    struct watch_hub *h = st->h;
    pthread_mutex_lock(&h->mu);
    if (!st->progress_pending) {
        st->progress_pending = true;
        h->n_progress_pending++;
    }
    watch__progress_try(st);
    if (st->progress_pending) /* unsynced or future watchers on st */
        progress_synced(st);
    pthread_mutex_unlock(&h->mu);
}

void watch_hub_tick(struct watch_hub *h, uint64_t now_ms)
{
    pthread_mutex_lock(&h->mu);
    if (!h->ticked) {
        h->ticked = true;
        h->last_tick_ms = now_ms;
    }
    if (now_ms - h->last_tick_ms < h->o.progress_interval_ms) {
        pthread_mutex_unlock(&h->mu);
        return;
    }
    h->last_tick_ms = now_ms;
    for (struct watch_stream *st = h->streams; st != NULL; st = st->next) {
        for (struct watch_watcher *w = st->ws; w != NULL; w = w->snext) {
            bool sent = w->sent;
            w->sent = false;
            /* A watcher from a future revision S is complete up to no
             * revision before S - 1: progress below it would vouch for a
             * revision the watch does not cover (etcd #20221). */
            if (!w->progress_notify || !w->synced || sent ||
                w->next_rev > h->rev + 1)
                continue;
            struct watch_response r = {.watch_id = w->id,
                                       .header_rev = h->rev};
            (void)st->sink.send(st->sink.ctx, &r); /* full: next round */
        }
    }
    pthread_mutex_unlock(&h->mu);
}
