/*
 * watch_sync.c - catch-up of the unsynced group (watch_hub_sync_step).
 *
 * One step takes one store snapshot and walks the unsynced watchers round
 * robin.  For each it first sends what is pending (created, a compaction
 * cancel), then reads its history from its next revision with
 * mvcc_events_read, copying at most the step's remaining event and byte
 * budget (stopping only between revisions, so a revision is never split),
 * and sends it as one response.  The read runs without the hub lock (the
 * watcher is marked busy so a concurrent cancel only marks it dead), so the
 * apply thread's observer is never held up by LMDB reads.  A watcher is
 * moved back to synced once its next revision is past the hub revision;
 * the observer skips events below a watcher's next revision, so a
 * snapshot newer than the hub revision neither loses nor repeats events.
 */
#include <string.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "watch/watch_int.h"

/* The events one watcher's read copied. */
struct buf {
    struct mvcc_event *evs; /* n copies; their bytes in blobs[i] */
    void **blobs;           /* one allocation per event */
    size_t n, cap;          /* used and allocated entries */
    size_t bytes;           /* bytes copied */
    size_t ev_max;          /* budget: events */
    size_t bytes_max;       /* budget: bytes */
    const struct watch_watcher *w; /* for the filters */
    mvcc_rev last;          /* revision of the last event seen */
    mvcc_rev stop;          /* first revision not copied (0 = none) */
};

#define STOP 1 /* the callback's "budget reached" (not an ERR_*) */

static void buf_clear(struct buf *b)
{
    for (size_t i = 0; i < b->n; i++)
        mem_free(b->blobs[i]);
    b->n = 0;
    b->bytes = 0;
    b->last = 0;
    b->stop = 0;
}

static void buf_free(struct buf *b)
{
    buf_clear(b);
    mem_free(b->evs);
    mem_free(b->blobs);
}

static uint8_t *put(uint8_t *p, const uint8_t **dst, const uint8_t *src,
                    size_t n)
{
    if (src == NULL) {
        *dst = NULL;
        return p;
    }
    memcpy(p, src, n);
    *dst = p;
    return p + n;
}

static int copy_ev(void *arg, const struct mvcc_event *ev)
{
    struct buf *b = arg;
    if (ev->kv.mod_rev != b->last && b->n > 0 &&
        (b->n >= b->ev_max || b->bytes >= b->bytes_max)) {
        b->stop = ev->kv.mod_rev;
        return STOP;
    }
    b->last = ev->kv.mod_rev;
    if (!watch__filter_pass(b->w, ev))
        return 0;
    size_t sz = ev->kv.key_len + ev->kv.value_len + ev->prev_kv.key_len +
                ev->prev_kv.value_len;
    void *e = mem_grow(b->evs, &b->cap, b->n, sizeof *b->evs, 64);
    if (e == NULL)
        return ERR_NOMEM;
    b->evs = e;
    size_t bcap = b->cap;
    void *bl = mem_realloc(b->blobs, bcap * sizeof *b->blobs);
    if (bl == NULL)
        return ERR_NOMEM;
    b->blobs = bl;
    uint8_t *p = mem_malloc(sz ? sz : 1);
    if (p == NULL)
        return ERR_NOMEM;
    struct mvcc_event *c = &b->evs[b->n];
    *c = *ev;
    b->blobs[b->n++] = p;
    p = put(p, &c->kv.key, ev->kv.key, ev->kv.key_len);
    p = put(p, &c->kv.value, ev->kv.value, ev->kv.value_len);
    if (!b->w->prev_kv || ev->prev_kv.mod_rev == 0) {
        memset(&c->prev_kv, 0, sizeof c->prev_kv);
    } else {
        p = put(p, &c->prev_kv.key, ev->prev_kv.key, ev->prev_kv.key_len);
        (void)put(p, &c->prev_kv.value, ev->prev_kv.value,
                  ev->prev_kv.value_len);
    }
    b->bytes += sz + sizeof *c;
    return 0;
}

/* send_pending sends w's pending created / compaction cancel.  Returns
 * false if w cannot be read for now (sink full, or w is gone). */
static bool send_pending(struct watch_hub *h, struct watch_watcher *w,
                         mvcc_rev compact)
{
    if (w->created_pending && !watch__send_created(h, w)) {
        w->st->full_step = h->step_seq;
        return false;
    }
    if (!w->cancel_pending && w->next_rev >= compact)
        return true;
    if (!w->cancel_pending) {
        w->cancel_pending = true;
        w->compact_rev = compact;
    }
    /* etcd's compaction cancel carries no revision (syncWatchers sends
     * a WatchResponse with CompactRevision only): header revision 0. */
    struct watch_response r = {.watch_id = w->id,
                               .header_rev = 0,
                               .canceled = true,
                               .compact_rev = w->compact_rev};
    if (w->st->sink.send(w->st->sink.ctx, &r) != 0)
        w->st->full_step = h->step_seq;
    else
        watch__retire(h, w); /* etcd keeps the id until a cancel */
    return false;
}

/* read_one reads w's history from r into b (hub lock not held). */
static int read_one(struct mvcc_read *r, struct watch_watcher *w,
                    struct buf *b, mvcc_rev from, mvcc_rev *next_out)
{
    const void *end = w->end;
    size_t end_len = w->end_len;
    static const uint8_t zero = 0;
    if (w->end_inf) {
        end = &zero;
        end_len = 1;
    }
    int rc = mvcc_events_read(r, from, w->key, w->key_len, end, end_len, 0,
                              w->prev_kv, copy_ev, b, next_out);
    if (rc == STOP) {
        *next_out = b->stop;
        rc = 0;
    }
    return rc;
}

/* catch_up handles one unsynced watcher (hub lock held on entry and exit;
 * dropped around the read).  Returns 0 or a read error. */
static int catch_up(struct watch_hub *h, struct mvcc_read *r,
                    struct watch_watcher *w, struct buf *b)
{
    mvcc_rev from = w->next_rev, next = 0;
    w->busy = true;
    pthread_mutex_unlock(&h->mu);
    int rc = read_one(r, w, b, from, &next);
    pthread_mutex_lock(&h->mu);
    w->busy = false;
    if (w->dead) {
        watch__free(w);
        return 0;
    }
    CHECK(w->next_rev == from && !w->synced);
    if (rc == ERR_COMPACTED) {
        w->next_rev = 0; /* below any compact revision: canceled next */
        (void)send_pending(h, w, mvcc_read_compact_rev(r));
        return 0;
    }
    if (rc != 0)
        return rc;
    CHECK(next > from || (next == from && b->n == 0));
    if (b->n > 0 &&
        watch__send_events(h, w, b->evs, b->n, next - 1) != 0) {
        w->st->full_step = h->step_seq;
        return 0;
    }
    w->next_rev = next;
    if (next > h->rev)
        (void)watch__to_synced(h, w); /* ERR_NOMEM: retried next step */
    return 0;
}

static void retry_progress(struct watch_hub *h)
{
    if (h->n_progress_pending == 0)
        return;
    for (struct watch_stream *st = h->streams; st != NULL; st = st->next)
        watch__progress_try(st);
}

int watch_hub_sync_step(struct watch_hub *h, bool *more_out)
{
    CHECK(h != NULL && more_out != NULL);
    struct mvcc_read *r;
    pthread_mutex_lock(&h->sync_mu);
    int rc = mvcc_read_begin(h->store, &r);
    if (rc != 0) {
        pthread_mutex_unlock(&h->sync_mu);
        *more_out = true;
        return rc;
    }
    mvcc_rev snap = mvcc_read_rev(r), compact = mvcc_read_compact_rev(r);
    struct buf b = {.ev_max = h->o.sync_events_max,
                    .bytes_max = h->o.sync_bytes_max};
    pthread_mutex_lock(&h->mu);
    h->step_seq++;
    retry_progress(h);
    size_t todo = h->n_unsynced;
    for (; rc == 0 && todo > 0 && h->unsynced != NULL; todo--) {
        struct watch_watcher *w = h->unsynced;
        h->unsynced = w->unext; /* w is now the tail: round robin */
        if (w->st->full_step == h->step_seq || !send_pending(h, w, compact))
            continue;
        if (w->next_rev > snap) { /* nothing this snapshot can give */
            if (w->next_rev > h->rev)
                (void)watch__to_synced(h, w);
            continue;
        }
        if (b.ev_max == 0 || b.bytes_max == 0)
            break; /* budget spent */
        b.w = w;
        rc = catch_up(h, r, w, &b);
        b.ev_max -= b.n < b.ev_max ? b.n : b.ev_max;
        b.bytes_max -= b.bytes < b.bytes_max ? b.bytes : b.bytes_max;
        buf_clear(&b);
    }
    *more_out = h->n_unsynced > 0 || h->n_progress_pending > 0;
    pthread_mutex_unlock(&h->mu);
    buf_free(&b);
    mvcc_read_end(r);
    pthread_mutex_unlock(&h->sync_mu);
    return rc;
}
