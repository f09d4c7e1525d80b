/*
 * watch_notify.c - fan-out of one committed batch to the synced group, on
 * the apply thread (watch_hub_observe, the store's observer).
 *
 * Method: for each event, stab the index with its key and record a
 * (watcher, event) pair for each watcher that takes it (at or past its
 * next revision, through its filters).  A counting sort groups the pairs
 * by watcher, keeping revision order, and each touched watcher gets one
 * response holding all its events of the batch (whole revisions, as the
 * batch holds whole revisions).  A watcher whose sink is full is moved to
 * the unsynced group at the batch's first revision; the sync step replays
 * the batch to it from the store, so the apply thread never waits.
 *
 * Bounded work: the responses go out in the touched order until they hold
 * fan_pairs_max pairs; the watchers after that are moved to the unsynced
 * group the same way, unsent (the stab and the moves are cheap, building
 * and queuing a response per watcher is not).  The sync step reads the
 * batch back once for all of them (watch_sync.c), on its own thread.
 */
#include <string.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "watch/watch_int.h"

/* Per-batch state of the fan-out. */
struct fan {
    struct watch_hub *h;           /* the hub */
    const struct mvcc_event *evs;  /* the batch */
    size_t ev;                     /* the event being stabbed */
    size_t n_touched;              /* watchers touched so far */
    size_t n_pairs;                /* pairs recorded so far */
    int err;                       /* ERR_NOMEM while recording */
};

static int visit(void *arg, struct watch_watcher *w)
{
    struct fan *f = arg;
    struct watch_hub *h = f->h;
    const struct mvcc_event *ev = &f->evs[f->ev];
    if (ev->kv.mod_rev < w->next_rev || !watch__filter_pass(w, ev))
        return 0;
    if (w->mark != h->batch_seq) {
        void *t = mem_grow(h->touched, &h->touched_cap, f->n_touched,
                           sizeof *h->touched, 64);
        void *c = t == NULL ? NULL
                            : mem_grow(h->counts, &h->counts_cap,
                                       f->n_touched, sizeof *h->counts, 64);
        if (t != NULL)
            h->touched = t;
        if (c == NULL)
            return f->err = ERR_NOMEM;
        h->counts = c;
        w->mark = h->batch_seq;
        w->touch = f->n_touched;
        h->touched[f->n_touched] = w;
        h->counts[f->n_touched++] = 0;
    }
    void *p = mem_grow(h->pairs, &h->pairs_cap, f->n_pairs, sizeof *h->pairs,
                       256);
    if (p == NULL)
        return f->err = ERR_NOMEM;
    h->pairs = p;
    h->pairs[f->n_pairs++] = (struct watch_pair){w->touch, f->ev};
    h->counts[w->touch]++;
    return 0;
}

/* group sorts the pairs by watcher into h->order; counts become the
 * start offsets.  Returns ERR_NOMEM or 0. */
static int group(struct watch_hub *h, const struct fan *f)
{
    if (f->n_pairs > h->order_cap) {
        size_t *o = mem_realloc(h->order, f->n_pairs * sizeof *o);
        if (o == NULL)
            return ERR_NOMEM;
        h->order = o;
        h->order_cap = f->n_pairs;
    }
    size_t off = 0;
    for (size_t t = 0; t < f->n_touched; t++) {
        size_t c = h->counts[t];
        h->counts[t] = off;
        off += c;
    }
    CHECK(off == f->n_pairs);
    for (size_t i = 0; i < f->n_pairs; i++)
        h->order[h->counts[h->pairs[i].touch]++] = h->pairs[i].ev;
    /* counts[t] is now the end of t's run; its start is the previous end. */
    return 0;
}

/* replay_later moves synced w to the unsynced group from the batch's first
 * revision: the sync step hands it the batch from the store. */
static void replay_later(struct watch_hub *h, struct watch_watcher *w,
                         mvcc_rev first_rev)
{
    if (w->next_rev < first_rev)
        w->next_rev = first_rev;
    watch__to_unsynced(h, w);
}

/* deliver sends touched watcher t its events [from, to) of order. */
static void deliver(struct watch_hub *h, const struct mvcc_event *evs,
                    struct watch_watcher *w, size_t from, size_t to,
                    mvcc_rev first_rev, mvcc_rev rev)
{
    size_t n = to - from;
    bool replay = false;
    CHECK(n > 0 && n <= h->out_cap);
    for (size_t i = 0; i < n; i++) {
        h->out[i] = evs[h->order[from + i]];
        if (!w->prev_kv)
            memset(&h->out[i].prev_kv, 0, sizeof h->out[i].prev_kv);
        else if (h->out[i].prev_no_value)
            replay = true; /* begun before w asked for values */
        h->out[i].prev_no_value = false;
    }
    if (!replay && watch__send_events(h, w, h->out, n, rev) == 0)
        return;
    /* Full, or prev values missing: everything from the batch's first
     * revision is replayed from the store. */
    replay_later(h, w, first_rev);
}

/* fallback: out of memory for the scratch arrays; every synced watcher
 * that would take an event of the batch is moved to the unsynced group
 * (the step replays the batch from the store), so nothing is lost. */
static int demote(void *arg, struct watch_watcher *w)
{
    struct fan *f = arg;
    const struct mvcc_event *ev = &f->evs[f->ev];
    if (w->mark == f->h->batch_seq || ev->kv.mod_rev < w->next_rev)
        return 0;
    w->mark = f->h->batch_seq;
    return 0;
}

static void demote_all(struct watch_hub *h, const struct mvcc_event *evs,
                       size_t n, mvcc_rev first_rev)
{
    struct fan f = {.h = h, .evs = evs};
    h->batch_seq++;
    for (f.ev = 0; f.ev < n; f.ev++)
        (void)watch__index_stab(h, evs[f.ev].kv.key, evs[f.ev].kv.key_len,
                                demote, &f);
    /* Marked watchers are moved after the walks (the index changes). */
    for (struct watch_stream *st = h->streams; st != NULL; st = st->next)
        for (struct watch_watcher *w = st->ws; w != NULL; w = w->snext)
            if (w->synced && w->mark == h->batch_seq)
                replay_later(h, w, first_rev);
}

static int fan_out(struct watch_hub *h, const struct mvcc_event *evs,
                   size_t n, mvcc_rev first_rev, mvcc_rev rev)
{
    struct fan f = {.h = h, .evs = evs};
    h->batch_seq++;
    for (f.ev = 0; f.ev < n && f.err == 0; f.ev++)
        (void)watch__index_stab(h, evs[f.ev].kv.key, evs[f.ev].kv.key_len,
                                visit, &f);
    if (f.err == 0 && f.n_touched > 0)
        f.err = group(h, &f);
    size_t most = 0;
    for (size_t t = 0; f.err == 0 && t < f.n_touched; t++) {
        size_t from = t == 0 ? 0 : h->counts[t - 1];
        if (h->counts[t] - from > most)
            most = h->counts[t] - from;
    }
    if (f.err == 0 && most > h->out_cap) {
        struct mvcc_event *o = mem_realloc(h->out, most * sizeof *o);
        if (o == NULL)
            return ERR_NOMEM;
        h->out = o;
        h->out_cap = most;
    }
    if (f.err != 0)
        return f.err;
    for (size_t t = 0; t < f.n_touched; t++) {
        size_t from = t == 0 ? 0 : h->counts[t - 1];
        if (from < h->o.fan_pairs_max)
            deliver(h, evs, h->touched[t], from, h->counts[t], first_rev, rev);
        else /* past the budget: the sync step's */
            replay_later(h, h->touched[t], first_rev);
    }
    return 0;
}

void watch_hub_observe(void *hub, const struct mvcc_event *events, size_t n,
                       mvcc_rev rev)
{
    struct watch_hub *h = hub;
    CHECK(h != NULL && (n == 0 || events != NULL));
    atomic_fetch_add(&h->observe_waiting, 1); /* watch_sync.c hub_lock */
    pthread_mutex_lock(&h->mu);
    atomic_fetch_sub(&h->observe_waiting, 1);
    CHECK(rev >= h->rev);
    mvcc_rev first_rev = h->rev + 1;
    if (n > 0 && fan_out(h, events, n, first_rev, rev) != 0)
        demote_all(h, events, n, first_rev);
    h->rev = rev;
    pthread_mutex_unlock(&h->mu);
}

void watch_hub_restore(struct watch_hub *h, struct mvcc_store *s)
{
    CHECK(h != NULL && s != NULL);
    pthread_mutex_lock(&h->sync_mu);
    pthread_mutex_lock(&h->mu);
    mvcc_rev first_rev = h->rev + 1;
    h->store = s;
    h->rev = mvcc_current_rev(s);
    mvcc_store_set_prev_values(s, h->n_prev_kv > 0);
    /* etcd's watchableStore.Restore: every synced watcher goes back to the
     * unsynced group and is caught up from the new store (or canceled
     * with compact_revision when what it needs was compacted there). */
    for (struct watch_stream *st = h->streams; st != NULL; st = st->next)
        for (struct watch_watcher *w = st->ws; w != NULL; w = w->snext)
            if (w->synced) {
                if (w->next_rev < first_rev)
                    w->next_rev = first_rev;
                watch__to_unsynced(h, w);
            }
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_unlock(&h->sync_mu);
}
