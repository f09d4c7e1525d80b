/*
 * watch_sync.c - catch-up of the unsynced group (watch_hub_sync_step).
 *
 * The unsynced watchers are caught up together, as etcd's unsynced
 * watcherGroup is: one step takes one store snapshot and, under the hub
 * lock, gathers the group (every unsynced watcher that the snapshot can
 * give something: its pending created / compaction cancel sent first, its
 * sink not full in this step).  Then, without the hub lock, it reads the
 * history once for all of them: one mvcc_events_scan from the group's
 * smallest next revision over the hull of their key ranges (the smallest
 * key to the largest end), copying whole revisions into one batch bounded
 * by the step's event and byte budget.  Each event of the batch is handed
 * to every group watcher whose range, filters and next revision it
 * matches, one response per watcher (a watcher that gets the whole tail of
 * the batch gets the batch's own events, so the sink's encode cache sees
 * the same events for all of them).  A watcher whose next revision is past
 * the hub revision moves to synced.  Watchers still behind the batch's end
 * (their sink was full, or they started later than the batch reached) stay
 * in the group for the next batch of the same step, read from the new
 * smallest next revision; a watcher whose sink is full leaves the group
 * until the next step.  So the number of history reads per step depends on
 * how far apart the watchers are, not on how many there are, and memory is
 * one batch plus the group's pointers.
 *
 * Bounds of one step: events copied (sync_events_max, plus the rest of one
 * revision), their bytes (sync_bytes_max, likewise) and history entries
 * walked (WALK_PER_EVENT times the event budget, stopping only between
 * revisions), so a narrow watcher over a long history of other keys holds
 * the step (and so the hub's sync lock) for a bounded time and resumes from
 * where the walk stopped.
 *
 * The group's watchers are marked busy while the hub lock is dropped: a
 * concurrent cancel or stream close only marks them dead and the step frees
 * them; their next revision changes only here.  The apply thread's
 * observer is never held up by LMDB reads; it skips events below a synced
 * watcher's next revision, so a snapshot newer than the hub revision
 * neither loses nor repeats events.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "watch/watch_int.h"

/* History entries a step may walk per event of its budget. */
#define WALK_PER_EVENT 16

/* One shared read of history: whole revisions, in revision order. */
struct batch {
    struct mvcc_event *evs; /* n copies; their bytes in blobs[i] */
    void **blobs;           /* one allocation per event */
    size_t n, cap;          /* used and allocated entries */
    size_t bytes;           /* bytes copied */
    size_t ev_max;          /* budget: events */
    size_t bytes_max;       /* budget: bytes */
    bool has_prev;          /* some event carries a prev_kv */
    mvcc_rev last;          /* revision of the last event seen */
    mvcc_rev stop;          /* first revision not copied (0 = none) */
};

/* The watchers one step serves (all marked busy). */
struct group {
    struct watch_watcher **ws; /* n of them */
    size_t n, cap;
    struct mvcc_event *out;    /* one watcher's response scratch */
    size_t out_cap;
    /* The last selection of the current batch (select_for), reused by the
     * next watcher with the same range, filters and prev_kv (the common
     * case: many watchers on one prefix).  What selects is copied (the
     * watcher may leave the group and be freed): key and end bytes in mk
     * (mk_cap allocated), their lengths, end_inf, filters, prev_kv.
     * memo_i0 is the batch index it selected from, memo_all whether it
     * took the batch's whole tail, else memo_n events in out. */
    bool memo;                 /* a selection is remembered */
    uint8_t *mk;
    size_t mk_cap, mkey_len, mend_len;
    bool mend_inf, mprev;
    unsigned mfilters;
    size_t memo_i0, memo_n;
    bool memo_all;
};

#define STOP 1 /* the callback's "budget reached" (not an ERR_*) */

static void batch_clear(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        mem_free(b->blobs[i]);
    b->n = 0;
    b->bytes = 0;
    b->has_prev = false;
    b->last = 0;
    b->stop = 0;
}

static void batch_free(struct batch *b)
{
    batch_clear(b);
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

/* copy_ev is the scan's callback: it copies ev into the batch, stopping
 * between revisions once the budget is spent. */
static int copy_ev(void *arg, const struct mvcc_event *ev)
{
    struct batch *b = arg;
    if (ev->kv.mod_rev != b->last && b->n > 0 &&
        (b->n >= b->ev_max || b->bytes >= b->bytes_max)) {
        b->stop = ev->kv.mod_rev;
        return STOP;
    }
    b->last = ev->kv.mod_rev;
    bool prev = ev->prev_kv.mod_rev != 0;
    size_t sz = ev->kv.key_len + ev->kv.value_len +
                (prev ? ev->prev_kv.key_len + ev->prev_kv.value_len : 0);
    void *e = mem_grow(b->evs, &b->cap, b->n, sizeof *b->evs, 64);
    if (e == NULL)
        return ERR_NOMEM;
    b->evs = e;
    void *bl = mem_realloc(b->blobs, b->cap * sizeof *b->blobs);
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
    if (!prev) {
        memset(&c->prev_kv, 0, sizeof c->prev_kv);
    } else {
        b->has_prev = true;
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

/* gather builds the step's group from the unsynced list (hub lock held):
 * the watchers the snapshot (at snap) has something for.  Others that are
 * past the hub revision move to synced.  ERR_NOMEM: the group is what was
 * gathered so far. */
static void gather(struct watch_hub *h, struct group *g, mvcc_rev snap,
                   mvcc_rev compact)
{
    size_t todo = h->n_unsynced;
    for (; todo > 0 && h->unsynced != NULL; todo--) {
        struct watch_watcher *w = h->unsynced;
        h->unsynced = w->unext; /* w is now the tail */
        if (w->busy) /* cannot be: one step at a time */
            continue;
        if (w->st->full_step == h->step_seq || !send_pending(h, w, compact))
            continue;
        if (w->next_rev > snap) { /* nothing this snapshot can give */
            if (w->next_rev > h->rev)
                (void)watch__to_synced(h, w);
            continue;
        }
        void *p = mem_grow(g->ws, &g->cap, g->n, sizeof *g->ws, 64);
        if (p == NULL)
            return; /* served later */
        g->ws = p;
        w->busy = true;
        g->ws[g->n++] = w;
    }
}

/* release ends w's membership of the step's group (hub lock held). */
static void release(struct watch_watcher *w)
{
    w->busy = false;
    if (w->dead)
        watch__free(w);
}

/* by_next orders the group by next revision (qsort; the step's own
 * field, read without the hub lock), then by selection hash. */
static int by_next(const void *a, const void *b)
{
    const struct watch_watcher *wa = *(struct watch_watcher *const *)a;
    const struct watch_watcher *wb = *(struct watch_watcher *const *)b;
    if (wa->next_rev != wb->next_rev)
        return (wa->next_rev > wb->next_rev) - (wa->next_rev < wb->next_rev);
    /* then by selection hash, so that alike watchers sit together
     * (select_for reuses a selection for the next watcher alike; a hash
     * collision only interleaves two kinds) */
    return (wa->sel_hash > wb->sel_hash) - (wa->sel_hash < wb->sel_hash);
}

/* range_inf: w's range has no end (every key >= its key). */
static bool range_inf(const struct watch_watcher *w)
{
    return w->end_inf;
}

/* end_cmp orders two watchers' range ends (exclusive; infinite last). */
static int end_cmp(const struct watch_watcher *a,
                   const struct watch_watcher *b)
{
    bool ai = range_inf(a), bi = range_inf(b);
    if (ai || bi)
        return ai == bi ? 0 : ai ? 1 : -1;
    const uint8_t *ak = a->end_len ? a->end : a->key;
    const uint8_t *bk = b->end_len ? b->end : b->key;
    size_t al = a->end_len ? a->end_len : a->key_len;
    size_t bl = b->end_len ? b->end_len : b->key_len;
    int c = watch__cmp(ak, al, bk, bl);
    if (c != 0)
        return c;
    /* k + "\0" (single key) vs an explicit end equal to k: longer. */
    return (a->end_len == 0) - (b->end_len == 0);
}

/* plan fills sc with the group's scan: from its smallest next revision,
 * over the hull of its ranges (the group is unchanged meanwhile: its
 * watchers are busy, their key bytes immutable).  end_buf holds a single
 * key's k + "\0" end. */
static void plan(const struct group *g, struct mvcc_scan *sc,
                 uint8_t **end_buf)
{
    const struct watch_watcher *lo = g->ws[0], *hi = g->ws[0];
    mvcc_rev from = g->ws[0]->next_rev;
    bool prev = false;
    for (size_t i = 0; i < g->n; i++) {
        const struct watch_watcher *w = g->ws[i];
        if (w->next_rev < from)
            from = w->next_rev;
        if (watch__cmp(w->key, w->key_len, lo->key, lo->key_len) < 0)
            lo = w;
        if (end_cmp(w, hi) > 0)
            hi = w;
        prev |= w->prev_kv;
    }
    static const uint8_t zero = 0;
    sc->start_rev = from;
    sc->key = lo->key;
    sc->key_len = lo->key_len;
    sc->want_prev = prev;
    if (range_inf(hi)) {
        sc->end = &zero;
        sc->end_len = 1;
    } else if (hi->end_len > 0) {
        sc->end = hi->end;
        sc->end_len = hi->end_len;
    } else if (*end_buf != NULL || (*end_buf = mem_malloc(
                                         hi->key_len + 1)) != NULL) {
        /* Only a single key: k + "\0" is the first key after it. */
        memcpy(*end_buf, hi->key, hi->key_len);
        (*end_buf)[hi->key_len] = 0;
        sc->end = *end_buf;
        sc->end_len = hi->key_len + 1;
    } else {
        sc->end = &zero; /* no memory for the bound: scan wider */
        sc->end_len = 1;
    }
}

/* same_selection: w picks the events the remembered selection picked
 * from any history (same range, filters and prev_kv). */
static bool same_selection(const struct group *g,
                           const struct watch_watcher *w)
{
    return g->memo && w->key_len == g->mkey_len &&
           w->end_len == g->mend_len && w->end_inf == g->mend_inf &&
           w->filters == g->mfilters && w->prev_kv == g->mprev &&
           memcmp(w->key, g->mk, w->key_len) == 0 &&
           (w->end_len == 0 ||
            memcmp(w->end, g->mk + w->key_len, w->end_len) == 0);
}

/* remember copies what makes w's selection (a failed copy remembers
 * nothing: the next watcher selects on its own). */
static void remember(struct group *g, const struct watch_watcher *w,
                     size_t i0, bool all, size_t n)
{
    size_t need = w->key_len + w->end_len;
    g->memo = false;
    if (g->mk_cap < need) {
        uint8_t *p = mem_realloc(g->mk, need);
        if (p == NULL)
            return;
        g->mk = p;
        g->mk_cap = need;
    }
    memcpy(g->mk, w->key, w->key_len);
    if (w->end_len > 0)
        memcpy(g->mk + w->key_len, w->end, w->end_len);
    g->mkey_len = w->key_len;
    g->mend_len = w->end_len;
    g->mend_inf = w->end_inf;
    g->mfilters = w->filters;
    g->mprev = w->prev_kv;
    g->memo_i0 = i0;
    g->memo_all = all;
    g->memo_n = n;
    g->memo = true;
}

/* first_at_in: index of the first of evs[0..n) at or after rev. */
static size_t first_at_in(const struct mvcc_event *evs, size_t n,
                          mvcc_rev rev)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (evs[mid].kv.mod_rev < rev)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool matches(const struct watch_watcher *w, const struct mvcc_event *ev)
{
    return watch__contains(w, ev->kv.key, ev->kv.key_len) &&
           watch__filter_pass(w, ev);
}

/* select_for picks w's events of the batch (hub lock not held): the
 * batch's own tail when w takes all of it as it is, else copies in
 * g->out.  The group is in next-revision order, so a watcher that selects
 * like the previous one (same_selection) starts at or after it and takes
 * the tail of the previous selection: no key is compared again (with 10k
 * watchers on one prefix the comparisons were a tenth of the catch-up's
 * CPU).  ERR_NOMEM. */
static int select_for(struct group *g, const struct batch *b,
                      const struct watch_watcher *w,
                      const struct mvcc_event **evs_out, size_t *n_out)
{
    size_t i0 = first_at_in(b->evs, b->n, w->next_rev), n = 0;
    if (i0 >= g->memo_i0 && same_selection(g, w)) {
        if (g->memo_all) {
            *evs_out = i0 == 0 ? b->evs : b->evs + i0;
            *n_out = b->n - i0;
        } else {
            size_t j = first_at_in(g->out, g->memo_n, w->next_rev);
            *evs_out = g->out + j;
            *n_out = g->memo_n - j;
        }
        return 0;
    }
    g->memo = false;
    bool all = w->prev_kv || !b->has_prev;
    for (size_t i = i0; all && i < b->n; i++)
        all = matches(w, &b->evs[i]);
    if (all) {
        /* an empty batch may have no array (NULL + 0 is undefined) */
        *evs_out = i0 == 0 ? b->evs : b->evs + i0;
        *n_out = b->n - i0;
        remember(g, w, i0, true, 0);
        return 0;
    }
    if (g->out_cap < b->n) { /* (mem_grow doubles once: not enough) */
        void *p = mem_realloc(g->out, b->n * sizeof *g->out);
        if (p == NULL)
            return ERR_NOMEM;
        g->out = p;
        g->out_cap = b->n;
    }
    for (size_t i = i0; i < b->n; i++) {
        if (!matches(w, &b->evs[i]))
            continue;
        g->out[n] = b->evs[i];
        if (!w->prev_kv)
            memset(&g->out[n].prev_kv, 0, sizeof g->out[n].prev_kv);
        n++;
    }
    *evs_out = g->out;
    *n_out = n;
    remember(g, w, i0, false, n);
    return 0;
}

/* hub_lock takes the hub lock for one watcher of the catch-up.  The step
 * takes and drops it once per watcher; a mutex is not fair, so an
 * observer (the apply thread) woken by one unlock would mostly find it
 * taken again and wait through the whole group: the step first lets a
 * waiting observer run (a bounded number of yields). */
static void hub_lock(struct watch_hub *h)
{
    for (int i = 0; i < 64 && atomic_load(&h->observe_waiting) > 0; i++)
        sched_yield();
    pthread_mutex_lock(&h->mu);
}

/* deliver hands the batch (history [.., next)) to every group watcher it
 * reaches, in the group's order (by next revision: the first takes the
 * longest tail, so the sink's encode cache serves the shorter tails that
 * follow); snap is the snapshot's revision.  Takes the hub lock per
 * watcher.  The watchers that leave the group are released, the others
 * keep their order. */
static void deliver(struct watch_hub *h, struct group *g,
                    const struct batch *b, mvcc_rev next, mvcc_rev snap)
{
    size_t keep = 0;
    g->memo = false; /* a new batch */
    for (size_t i = 0; i < g->n; i++) {
        struct watch_watcher *w = g->ws[i];
        const struct mvcc_event *evs = NULL;
        size_t n = 0;
        int rc = 0;
        if (w->next_rev < next) /* w stays allocated even if dead */
            rc = select_for(g, b, w, &evs, &n);
        hub_lock(h);
        bool out = w->dead || rc != 0 || w->st->full_step == h->step_seq;
        if (!out && w->next_rev < next) {
            CHECK(!w->synced && n <= b->n);
            if (n > 0 && watch__send_events(h, w, evs, n, next - 1) != 0) {
                w->st->full_step = h->step_seq;
                out = true;
            } else {
                w->next_rev = next;
                if (next > h->rev) /* ERR_NOMEM: retried next step */
                    (void)watch__to_synced(h, w);
                out = w->synced || next > snap;
            }
        }
        if (out)
            release(w);
        else
            g->ws[keep++] = w;
        pthread_mutex_unlock(&h->mu);
    }
    g->n = keep;
}

/* read_batch reads the group's next batch into b (hub lock not held).
 * ERR_COMPACTED cannot happen: gather sent every watcher below the
 * snapshot's compact revision its cancel. */
static int read_batch(struct watch_hub *h, struct mvcc_read *r,
                      struct group *g, struct batch *b, size_t walk_max,
                      uint8_t **end_buf, mvcc_rev *next_out, size_t *walked)
{
    struct mvcc_scan sc = {.max_walk = walk_max};
    plan(g, &sc, end_buf);
    int rc = mvcc_events_scan(r, &sc, copy_ev, b, next_out);
    h->sync_reads++;
    *walked = sc.walked;
    if (rc == STOP) {
        *next_out = b->stop;
        rc = 0;
    }
    CHECK(rc != 0 || *next_out >= sc.start_rev);
    return rc;
}

static void retry_progress(struct watch_hub *h)
{
    if (h->n_progress_pending == 0)
        return;
    for (struct watch_stream *st = h->streams; st != NULL; st = st->next)
        watch__progress_try(st);
}

/* catch_up reads and delivers batches to g until every watcher left the
 * group or the step's budget is spent. */
static int catch_up(struct watch_hub *h, struct mvcc_read *r,
                    struct group *g, mvcc_rev snap)
{
    struct batch b = {0};
    size_t ev_left = h->o.sync_events_max, bytes_left = h->o.sync_bytes_max;
    size_t walk_left = ev_left * WALK_PER_EVENT;
    uint8_t *end_buf = NULL;
    int rc = 0;
    while (rc == 0 && g->n > 0 && ev_left > 0 && bytes_left > 0 &&
           walk_left > 0) {
        mvcc_rev next = 0;
        size_t walked = 0;
        b.ev_max = ev_left;
        b.bytes_max = bytes_left;
        rc = read_batch(h, r, g, &b, walk_left, &end_buf, &next, &walked);
        if (rc == 0)
            deliver(h, g, &b, next, snap);
        ev_left -= b.n < ev_left ? b.n : ev_left;
        bytes_left -= b.bytes < bytes_left ? b.bytes : bytes_left;
        walk_left -= walked < walk_left ? walked : walk_left;
        batch_clear(&b);
        mem_free(end_buf);
        end_buf = NULL;
    }
    batch_free(&b);
    return rc;
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
    struct group g = {0};
    pthread_mutex_lock(&h->mu);
    h->step_seq++;
    retry_progress(h);
    gather(h, &g, snap, compact);
    pthread_mutex_unlock(&h->mu);
    if (g.n > 0) {
        qsort(g.ws, g.n, sizeof *g.ws, by_next);
        rc = catch_up(h, r, &g, snap);
    }
    pthread_mutex_lock(&h->mu);
    while (g.n > 0)
        release(g.ws[--g.n]);
    *more_out = h->n_unsynced > 0 || h->n_progress_pending > 0;
    pthread_mutex_unlock(&h->mu);
    mem_free(g.ws);
    mem_free(g.out);
    mem_free(g.mk);
    mvcc_read_end(r);
    pthread_mutex_unlock(&h->sync_mu);
    return rc;
}

uint64_t watch_hub_sync_reads(struct watch_hub *h)
{
    pthread_mutex_lock(&h->sync_mu);
    uint64_t n = h->sync_reads;
    pthread_mutex_unlock(&h->sync_mu);
    return n;
}
