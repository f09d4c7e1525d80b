/*
 * test_watch.c - goal: the watch hub delivers to every watcher exactly the
 * events etcd would (range rules, start revisions past and future,
 * filters, prev_kv), each once, in order, every revision whole, through
 * full sinks, catch-up, compaction, cancel and a store swap (restore),
 * and answers progress only
 * when it is true.  Method: a real backend + mvcc store in a temporary
 * directory with the hub as its observer; recording sinks that can be made
 * full; targeted cases per behaviour, then a seeded random run
 * (CETCD_TEST_SEED replays it) of puts, deletes and multi-op txns in
 * multi-revision batches over many watchers with random full sinks and
 * bounded sync steps, checked against an in-test model of the event log.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "util/err.h"
#include "util/mem.h"
#include "watch/watch.h"

/* --- a recording sink ----------------------------------------------------- */

struct rev_ev {                 /* one received event, copied */
    int type;                   /* MVCC_EVENT_* */
    char key[32], value[64];    /* NUL-terminated copies */
    mvcc_rev mod_rev, create_rev;
    int64_t version;
    bool has_prev;              /* prev_kv.mod_rev != 0 */
    mvcc_rev prev_mod_rev;      /* its mod revision */
    char prev_value[64];        /* its value */
    size_t resp;                /* index of the response it came in */
};

/* One response as the client saw it (for the history dump). */
struct resp_log {
    char kind;                  /* 'C'reated, 'X' canceled, 'P'rogress,
                                   'E'vents */
    mvcc_rev header_rev;        /* its header revision */
    mvcc_rev compact_rev;       /* canceled by compaction */
    size_t from, to;            /* 'E': its events in rec.evs */
    bool fragment;              /* more fragments follow */
};

struct rec {                    /* what one watcher received */
    int64_t id;
    struct resp_log *log;       /* every response, in order */
    size_t n_log, log_cap;
    bool created, canceled;
    mvcc_rev compact_rev;
    mvcc_rev created_rev;
    struct rev_ev *evs;
    size_t n, cap;
    size_t n_progress;          /* progress responses with its id */
    mvcc_rev progress_rev;      /* the last one's revision */
};

struct sink {
    bool full;                  /* answer WATCH_SINK_FULL */
    long room;                  /* >= 0: take this many more, then full */
    struct rec recs[1024];      /* by watch id (ids < 1024 in tests) */
    size_t n_resp;              /* responses taken */
    size_t n_stream_progress;   /* watch_id -1 responses */
    mvcc_rev stream_progress_rev; /* the last one's revision */
    size_t n_fragments;         /* responses with fragment set */
    int64_t neg_created[4];     /* ids of created answers with an id < 0 */
    size_t n_neg_created;       /* of neg_created */
    bool closed;                /* close was called */
    unsigned flaky;             /* > 0: full for bursts of calls */
    unsigned calls;             /* send calls (for flaky) */
};

static void copy_str(char *dst, size_t cap, const uint8_t *p, size_t n)
{
    assert_true(n < cap);
    if (n > 0)
        memcpy(dst, p, n);
    dst[n] = 0;
}

static void rec_event(struct sink *k, struct rec *r, const struct mvcc_event *e)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->evs = realloc(r->evs, r->cap * sizeof *r->evs);
    }
    struct rev_ev *x = &r->evs[r->n++];
    memset(x, 0, sizeof *x);
    x->type = e->type;
    copy_str(x->key, sizeof x->key, e->kv.key, e->kv.key_len);
    copy_str(x->value, sizeof x->value, e->kv.value, e->kv.value_len);
    x->mod_rev = e->kv.mod_rev;
    x->create_rev = e->kv.create_rev;
    x->version = e->kv.version;
    x->has_prev = e->prev_kv.mod_rev != 0;
    x->prev_mod_rev = e->prev_kv.mod_rev;
    if (x->has_prev)
        copy_str(x->prev_value, sizeof x->prev_value, e->prev_kv.value,
                 e->prev_kv.value_len);
    x->resp = k->n_resp;
    /* Ordered and unique within the watcher. */
    if (r->n > 1)
        assert_true(r->evs[r->n - 2].mod_rev <= x->mod_rev);
}

static void log_resp(struct rec *r, char kind,
                     const struct watch_response *resp, size_t from)
{
    if (r->n_log == r->log_cap) {
        r->log_cap = r->log_cap ? r->log_cap * 2 : 16;
        r->log = realloc(r->log, r->log_cap * sizeof *r->log);
    }
    r->log[r->n_log++] = (struct resp_log){kind, resp->header_rev,
                                           resp->compact_rev, from, r->n,
                                           resp->fragment};
}

static int sink_send(void *ctx, const struct watch_response *resp)
{
    struct sink *k = ctx;
    if (k->full || k->room == 0)
        return WATCH_SINK_FULL;
    if (k->flaky > 0 && (k->calls++ / k->flaky) % 3 == 0)
        return WATCH_SINK_FULL;
    if (k->room > 0)
        k->room--;
    k->n_resp++;
    if (resp->fragment)
        k->n_fragments++;
    if (resp->watch_id < 0 && resp->created) {
        /* A negative id of the client's (test_create_errors). */
        assert_true(k->n_neg_created < 4);
        k->neg_created[k->n_neg_created++] = resp->watch_id;
        return 0;
    }
    if (resp->watch_id == WATCH_ID_NONE) {
        assert_int_equal(resp->n_events, 0);
        assert_true(resp->header_rev >= k->stream_progress_rev);
        k->n_stream_progress++;
        k->stream_progress_rev = resp->header_rev;
        for (size_t i = 0; i < 1024; i++) /* the client broadcasts it */
            if (k->recs[i].created && !k->recs[i].canceled)
                log_resp(&k->recs[i], 'P', resp, 0);
        return 0;
    }
    assert_true(resp->watch_id >= 0 && resp->watch_id < 1024);
    struct rec *r = &k->recs[resp->watch_id];
    assert_false(r->canceled); /* nothing after a cancel */
    r->id = resp->watch_id;
    if (resp->created) {
        assert_false(r->created);
        r->created = true;
        r->created_rev = resp->header_rev;
        log_resp(r, 'C', resp, 0);
        return 0;
    }
    assert_true(r->created); /* created comes first */
    if (resp->canceled) {
        r->canceled = true;
        r->compact_rev = resp->compact_rev;
        log_resp(r, 'X', resp, 0);
        return 0;
    }
    if (resp->n_events == 0) {
        /* Progress: never behind what was sent (Bookmarkable). */
        if (r->n > 0)
            assert_true(resp->header_rev >= r->evs[r->n - 1].mod_rev);
        r->n_progress++;
        r->progress_rev = resp->header_rev;
        log_resp(r, 'P', resp, 0);
        return 0;
    }
    size_t from = r->n;
    for (size_t i = 0; i < resp->n_events; i++) {
        rec_event(k, r, &resp->events[i]);
        assert_true(resp->events[i].kv.mod_rev <= resp->header_rev);
        assert_true(resp->events[i].kv.mod_rev > r->progress_rev);
    }
    log_resp(r, 'E', resp, from);
    return 0;
}

static void sink_close(void *ctx)
{
    ((struct sink *)ctx)->closed = true;
}

static void sink_reset(struct sink *k)
{
    for (size_t i = 0; i < 1024; i++) {
        free(k->recs[i].evs);
        free(k->recs[i].log);
    }
    memset(k, 0, sizeof *k);
    k->room = -1;
}

/* --- fixture -------------------------------------------------------------- */

struct fixture {
    char dir[64];
    struct backend *be;
    struct mvcc_store *s;
    struct watch_hub *h;
    struct sink k;           /* the default stream's sink */
    struct watch_stream *st; /* the default stream */
};

static uint64_t next_ci = 1;

static void fx_hub(struct fixture *f, const struct watch_options *o)
{
    if (f->h != NULL) {
        watch_stream_close(f->st);
        watch_hub_close(f->h);
        sink_reset(&f->k);
    }
    assert_int_equal(watch_hub_open(f->s, o, &f->h), 0);
    mvcc_store_set_observer(f->s, watch_hub_observe, f->h);
    struct watch_sink ws = {sink_send, sink_close, &f->k};
    assert_int_equal(watch_stream_open(f->h, &ws, &f->st), 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/cetcd-test-watch-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(backend_open(f->dir, NULL, &f->be), 0);
    assert_int_equal(mvcc_store_open(f->be, NULL, &f->s), 0);
    f->k.room = -1;
    fx_hub(f, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];
    watch_stream_close(f->st);
    watch_hub_close(f->h);
    sink_reset(&f->k);
    mvcc_store_set_observer(f->s, NULL, NULL);
    mvcc_store_close(f->s);
    backend_close(f->be);
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* --- store helpers -------------------------------------------------------- */

static mvcc_rev put(struct fixture *f, const char *k, const char *v)
{
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(
        mvcc_txn_put(t, k, strlen(k), v, strlen(v), 0, 0, NULL), 0);
    mvcc_rev rev = mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    return rev;
}

static mvcc_rev del(struct fixture *f, const char *k, const char *end)
{
    struct mvcc_batch *b;
    int64_t n;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_delete_range(t, k, strlen(k), end,
                                           end ? strlen(end) : 0, &n, NULL),
                     0);
    mvcc_rev rev = mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    return rev;
}

/* txn3 puts three keys in one revision. */
static mvcc_rev txn3(struct fixture *f, const char *a, const char *b2,
                     const char *c, const char *v)
{
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    const char *ks[3] = {a, b2, c};
    for (int i = 0; i < 3; i++)
        assert_int_equal(mvcc_txn_put(t, ks[i], strlen(ks[i]), v, strlen(v),
                                      0, 0, NULL),
                         0);
    mvcc_rev rev = mvcc_txn_end(t);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    return rev;
}

static void compact(struct fixture *f, mvcc_rev c)
{
    struct mvcc_batch *b;
    bool more = true;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, c), 0);
    while (more)
        assert_int_equal(mvcc_compact_step(b, 1000, &more), 0);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
}

static void sync_all(struct fixture *f)
{
    bool more = true;
    for (int i = 0; more && i < 1000000; i++)
        assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    assert_false(more);
}

static int64_t watch_on(struct watch_stream *st, int64_t id, const char *k,
                        const char *end, size_t end_len, mvcc_rev start,
                        unsigned filters, bool prev)
{
    struct watch_create c = {.watch_id = id,
                             .key = k,
                             .key_len = strlen(k) ? strlen(k) : 1,
                             .end = end,
                             .end_len = end_len,
                             .start_rev = start,
                             .filters = filters,
                             .prev_kv = prev};
    int64_t out = -1;
    assert_int_equal(watch_create(st, &c, &out), 0);
    return out;
}

static int64_t watch_key(struct fixture *f, const char *k, mvcc_rev start)
{
    return watch_on(f->st, 0, k, NULL, 0, start, 0, false);
}

static struct rec *rec_of(struct fixture *f, int64_t id)
{
    return &f->k.recs[id];
}

/* --- targeted cases ------------------------------------------------------- */

static void test_single_key(void **state)
{
    struct fixture *f = *state;
    int64_t id = watch_key(f, "foo", 0);
    struct rec *r = rec_of(f, id);
    assert_true(r->created);
    assert_int_equal(r->created_rev, 1);
    put(f, "foo", "1");
    put(f, "bar", "1");
    put(f, "fo", "1");
    put(f, "fooo", "1");
    mvcc_rev d = del(f, "foo", NULL);
    assert_int_equal(r->n, 2);
    assert_string_equal(r->evs[0].key, "foo");
    assert_string_equal(r->evs[0].value, "1");
    assert_int_equal(r->evs[0].type, MVCC_EVENT_PUT);
    assert_int_equal(r->evs[0].mod_rev, 2);
    assert_int_equal(r->evs[0].version, 1);
    assert_int_equal(r->evs[1].type, MVCC_EVENT_DELETE);
    assert_int_equal(r->evs[1].mod_rev, d);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
}

static void test_range_prefix_all(void **state)
{
    struct fixture *f = *state;
    static const char zero[1] = {0};
    int64_t rg = watch_on(f->st, 0, "b", "d", 1, 0, 0, false);
    int64_t px = watch_on(f->st, 0, "p/", "p0", 2, 0, 0, false);
    int64_t all = watch_on(f->st, 0, "", zero, 1, 0, 0, false);
    int64_t ge = watch_on(f->st, 0, "m", zero, 1, 0, 0, false);
    const char *keys[] = {"a", "b", "bz", "c", "d", "m", "p", "p/", "p/x",
                          "p0", "z"};
    for (size_t i = 0; i < 11; i++)
        put(f, keys[i], "v");
    assert_int_equal(rec_of(f, rg)->n, 3); /* b bz c */
    assert_string_equal(rec_of(f, rg)->evs[2].key, "c");
    assert_int_equal(rec_of(f, px)->n, 2); /* p/ p/x */
    assert_int_equal(rec_of(f, all)->n, 11);
    assert_int_equal(rec_of(f, ge)->n, 6); /* m p p/ p/x p0 z */
    assert_string_equal(rec_of(f, ge)->evs[0].key, "m");
    /* A delete range reaches each watcher with its keys only. */
    del(f, "a", "p0");
    assert_int_equal(rec_of(f, rg)->n, 6);
    assert_int_equal(rec_of(f, px)->n, 4);
    assert_int_equal(rec_of(f, all)->n, 20);
    assert_true(rec_of(f, rg)->evs[3].resp == rec_of(f, rg)->evs[5].resp);
}

static void test_create_errors(void **state)
{
    struct fixture *f = *state;
    int64_t out;
    struct watch_create c = {.key = "b", .key_len = 1, .end = "a",
                             .end_len = 1};
    assert_int_equal(watch_create(f->st, &c, &out), ERR_INVAL);
    c.end = "b";
    assert_int_equal(watch_create(f->st, &c, &out), ERR_INVAL);
    c.end_len = 0;
    c.key_len = 0;
    assert_int_equal(watch_create(f->st, &c, &out), ERR_INVAL);
    c.key_len = 1;
    c.watch_id = 7;
    assert_int_equal(watch_create(f->st, &c, &out), 0);
    assert_int_equal(out, 7);
    assert_int_equal(watch_create(f->st, &c, &out), ERR_EXIST);
    /* Automatic ids skip the taken ones. */
    c.watch_id = 0;
    for (int i = 0; i < 9; i++)
        assert_int_equal(watch_create(f->st, &c, &out), 0);
    assert_int_equal(out, 9);
    assert_int_equal(watch_hub_watchers(f->h), 10);
    assert_int_equal(watch_cancel(f->st, 7), 0);
    assert_int_equal(watch_cancel(f->st, 7), ERR_NOTFOUND);
    /* A negative id is an id (etcd 3.4), -1 too. */
    c.watch_id = -3;
    assert_int_equal(watch_create(f->st, &c, &out), 0);
    assert_int_equal(out, -3);
    assert_int_equal(watch_create(f->st, &c, &out), ERR_EXIST);
    c.watch_id = WATCH_ID_NONE;
    assert_int_equal(watch_create(f->st, &c, &out), 0);
    assert_int_equal(out, WATCH_ID_NONE);
    assert_int_equal(f->k.n_neg_created, 2);
    assert_int_equal(f->k.neg_created[0], -3);
    assert_int_equal(f->k.neg_created[1], WATCH_ID_NONE);
    assert_int_equal(watch_cancel(f->st, -3), 0);
    assert_int_equal(watch_cancel(f->st, WATCH_ID_NONE), 0);
    c.watch_id = 0;
    struct watch_options o = {.stream_watchers_max = 2};
    fx_hub(f, &o);
    assert_int_equal(watch_create(f->st, &c, &out), 0);
    assert_int_equal(watch_create(f->st, &c, &out), 0);
    assert_int_equal(watch_create(f->st, &c, &out), ERR_TOO_MANY_REQUESTS);
}

static void test_start_rev_past_and_future(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++)
        put(f, "k", "v"); /* revs 2..6 */
    int64_t past = watch_key(f, "k", 3);
    int64_t fut = watch_key(f, "k", 9);
    assert_true(rec_of(f, past)->created);
    assert_int_equal(rec_of(f, past)->n, 0);
    assert_int_equal(watch_hub_unsynced(f->h), 1);
    sync_all(f);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    assert_int_equal(rec_of(f, past)->n, 4); /* 3..6 */
    assert_int_equal(rec_of(f, past)->evs[0].mod_rev, 3);
    for (int i = 0; i < 4; i++)
        put(f, "k", "w"); /* 7..10 */
    assert_int_equal(rec_of(f, past)->n, 8);
    assert_int_equal(rec_of(f, fut)->n, 2); /* 9, 10 only (etcd #20221) */
    assert_int_equal(rec_of(f, fut)->evs[0].mod_rev, 9);
}

static void test_filters_prev_kv(void **state)
{
    struct fixture *f = *state;
    int64_t noput = watch_on(f->st, 0, "k", NULL, 0, 0, WATCH_FILTER_NOPUT,
                             false);
    int64_t nodel = watch_on(f->st, 0, "k", NULL, 0, 0,
                             WATCH_FILTER_NODELETE, true);
    int64_t plain = watch_key(f, "k", 0);
    put(f, "k", "1");
    put(f, "k", "2");
    del(f, "k", NULL);
    assert_int_equal(rec_of(f, noput)->n, 1);
    assert_int_equal(rec_of(f, noput)->evs[0].type, MVCC_EVENT_DELETE);
    struct rec *r = rec_of(f, nodel);
    assert_int_equal(r->n, 2);
    assert_false(r->evs[0].has_prev);
    assert_true(r->evs[1].has_prev);
    assert_string_equal(r->evs[1].prev_value, "1");
    assert_int_equal(rec_of(f, plain)->n, 3);
    assert_false(rec_of(f, plain)->evs[1].has_prev);
    /* The same through catch-up. */
    int64_t late = watch_on(f->st, 0, "k", NULL, 0, 2, WATCH_FILTER_NODELETE,
                            true);
    sync_all(f);
    r = rec_of(f, late);
    assert_int_equal(r->n, 2);
    assert_true(r->evs[1].has_prev);
    assert_string_equal(r->evs[1].prev_value, "1");
}

/* A watcher that wants prev_kv, created while a batch that reads no prev
 * values is open (the store reads them only while such a watcher exists,
 * mvcc_store_set_prev_values): that batch's events reach it from the
 * store, with the values; later batches read them at once.  The values
 * go when the last such watcher does. */
static void test_prev_values_switched_on_mid_batch(void **state)
{
    struct fixture *f = *state;
    int64_t plain = watch_key(f, "k", 0);
    put(f, "k", "1");
    put(f, "j", "a");
    struct mvcc_batch *b;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    struct mvcc_txn *t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "k", 1, "2", 1, 0, 0, NULL), 0);
    int64_t n;
    assert_int_equal(mvcc_txn_delete_range(t, "j", 1, NULL, 0, &n, NULL), 0);
    mvcc_txn_end(t);
    int64_t pw = watch_on(f->st, 0, "j", "l", 1, 0, 0, true);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    struct rec *r = rec_of(f, pw);
    assert_int_equal(r->n, 0); /* sent back to the store */
    assert_int_equal(rec_of(f, plain)->n, 2); /* the others are not */
    assert_false(rec_of(f, plain)->evs[1].has_prev);
    sync_all(f);
    assert_int_equal(r->n, 2);
    assert_true(r->evs[0].has_prev && r->evs[1].has_prev);
    assert_string_equal(r->evs[0].prev_value, "1");
    assert_string_equal(r->evs[1].prev_value, "a");
    put(f, "k", "3"); /* now read at once, delivered synced */
    assert_int_equal(r->n, 3);
    assert_string_equal(r->evs[2].prev_value, "2");
    assert_int_equal(watch_hub_pending(f->h), 0);
    /* with pw gone, a batch reads no prev values again: one begun now
     * sends a new prev_kv watcher to the store as above */
    watch_cancel(f->st, pw);
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    t = mvcc_txn_begin(b);
    assert_int_equal(mvcc_txn_put(t, "k", 1, "4", 1, 0, 0, NULL), 0);
    mvcc_txn_end(t);
    int64_t pw2 = watch_on(f->st, 0, "k", NULL, 0, 0, 0, true);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    assert_int_equal(rec_of(f, pw2)->n, 0);
    assert_int_equal(watch_hub_pending(f->h), 1);
    sync_all(f);
    assert_int_equal(rec_of(f, pw2)->n, 1);
    assert_string_equal(rec_of(f, pw2)->evs[0].prev_value, "3");
    assert_int_equal(rec_of(f, plain)->n, 4);
}

static void test_txn_atomic(void **state)
{
    struct fixture *f = *state;
    int64_t id = watch_on(f->st, 0, "p/", "p0", 2, 0, 0, false);
    mvcc_rev rev = txn3(f, "p/a", "p/b", "p/c", "1");
    struct rec *r = rec_of(f, id);
    assert_int_equal(r->n, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(r->evs[i].mod_rev, rev);
    assert_true(r->evs[0].resp == r->evs[2].resp);
    /* Catch-up with a budget of one event still keeps revisions whole. */
    struct watch_options o = {.sync_events_max = 1};
    fx_hub(f, &o);
    txn3(f, "p/a", "p/b", "p/c", "2");
    id = watch_on(f->st, 0, "p/", "p0", 2, 2, 0, false);
    bool more;
    assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    r = rec_of(f, id);
    assert_int_equal(r->n, 3); /* one whole revision per step */
    assert_true(more);
    sync_all(f);
    assert_int_equal(r->n, 6);
    assert_true(r->evs[3].resp == r->evs[5].resp);
    assert_true(r->evs[2].resp != r->evs[3].resp);
}

static void test_full_sink_catch_up(void **state)
{
    struct fixture *f = *state;
    int64_t id = watch_key(f, "k", 0);
    int64_t other = watch_key(f, "j", 0);
    put(f, "k", "0");
    f->k.full = true;
    for (int i = 1; i <= 5; i++)
        put(f, "k", "x");
    assert_int_equal(watch_hub_unsynced(f->h), 1);
    bool more;
    assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    assert_true(more);
    f->k.full = false;
    put(f, "j", "1"); /* the synced watcher of the same stream goes on */
    assert_int_equal(rec_of(f, other)->n, 1);
    put(f, "k", "y"); /* still unsynced: not delivered live */
    assert_int_equal(rec_of(f, id)->n, 1);
    sync_all(f);
    put(f, "k", "z");
    struct rec *r = rec_of(f, id);
    assert_int_equal(r->n, 8);
    for (size_t i = 1; i < r->n; i++)
        assert_true(r->evs[i].mod_rev > r->evs[i - 1].mod_rev);
    assert_string_equal(r->evs[7].value, "z");
    assert_int_equal(watch_hub_unsynced(f->h), 0);
}

/* The observer's budget (fan_pairs_max): it sends responses holding that
 * many (watcher, event) pairs and moves the batch's other watchers to the
 * unsynced group, unsent; a sync step then gives them the batch from the
 * store, each event once and in order, and they are synced again. */
static void test_fan_budget(void **state)
{
    struct fixture *f = *state;
    struct watch_options o = {.fan_pairs_max = 5};
    fx_hub(f, &o);
    int64_t ids[8];
    for (int i = 0; i < 8; i++)
        ids[i] = i < 6 ? watch_on(f->st, 0, "p/", "p0", 2, 0, 0, false)
                       : watch_key(f, "p/b", 0);
    put(f, "p/a", "1"); /* 6 watchers, 1 pair each */
    size_t got = 0;
    for (int i = 0; i < 8; i++)
        got += rec_of(f, ids[i])->n;
    assert_int_equal(got, 5);
    assert_int_equal(watch_hub_unsynced(f->h), 1);
    assert_true(watch_hub_pending(f->h) > 0);
    sync_all(f);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    /* 3 events to the prefix watchers, 1 to each "p/b" one: 20 pairs in
     * one revision; whole revisions go out, so the budget is crossed
     * after the second watcher. */
    mvcc_rev r3 = txn3(f, "p/b", "p/c", "p/d", "2");
    assert_true(watch_hub_unsynced(f->h) >= 5);
    put(f, "p/b", "3"); /* while they are unsynced: after the catch-up */
    sync_all(f);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    for (int i = 0; i < 8; i++) {
        struct rec *r = rec_of(f, ids[i]);
        size_t want = i < 6 ? 5 : 2;
        assert_int_equal(r->n, want);
        for (size_t j = 1; j < r->n; j++)
            assert_true(r->evs[j].mod_rev > r->evs[j - 1].mod_rev ||
                        (r->evs[j].mod_rev == r3 &&
                         r->evs[j - 1].mod_rev == r3));
        /* The txn's events in one response (atomic). */
        for (size_t j = 0; j < r->n_log; j++) {
            size_t in_r3 = 0;
            for (size_t e = r->log[j].from; r->log[j].kind == 'E' &&
                                            e < r->log[j].to; e++)
                in_r3 += r->evs[e].mod_rev == r3;
            assert_true(in_r3 == 0 || in_r3 == (i < 6 ? 3u : 1u));
        }
        assert_int_equal(r->evs[r->n - 1].mod_rev, r3 + 1);
    }
    /* Again: the synced watchers take part in the next batch. */
    put(f, "p/z", "4"); /* the 6 prefix watchers: 6 pairs, 5 sent */
    assert_int_equal(watch_hub_unsynced(f->h), 1);
    sync_all(f);
    assert_int_equal(rec_of(f, ids[0])->n + rec_of(f, ids[5])->n, 12);
    /* Within the budget everything goes out at once. */
    o.fan_pairs_max = 100;
    fx_hub(f, &o);
    for (int i = 0; i < 8; i++)
        watch_on(f->st, 0, "p/", "p0", 2, 0, 0, false);
    put(f, "p/b", "6");
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    assert_int_equal(watch_hub_pending(f->h), 0);
    got = 0;
    for (int i = 0; i < 1024; i++)
        got += rec_of(f, i)->n;
    assert_int_equal(got, 8);
}

/* A snapshot behind the hub (tentative batches, mvcc_visible_hold): the
 * catch-up stops at what the snapshot has and finishes after release. */
static void test_snapshot_behind_hub(void **state)
{
    struct fixture *f = *state;
    put(f, "k", "1"); /* 2 */
    int64_t id = watch_key(f, "k", 2);
    mvcc_visible_hold(f->s);
    put(f, "k", "2"); /* 3: observed, not yet visible to reads */
    assert_int_equal(watch_hub_rev(f->h), 3);
    bool more;
    for (int i = 0; i < 5; i++)
        assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    assert_true(more);
    struct rec *r = rec_of(f, id);
    assert_int_equal(r->n, 1); /* rev 2 only */
    assert_int_equal(watch_hub_unsynced(f->h), 1);
    mvcc_visible_release(f->s);
    sync_all(f);
    put(f, "k", "3"); /* 4 */
    assert_int_equal(r->n, 3);
    assert_int_equal(r->evs[1].mod_rev, 3);
    assert_int_equal(r->evs[2].mod_rev, 4);
}

static void test_compaction_cancel(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 6; i++)
        put(f, "k", "v"); /* 2..7 */
    int64_t old = watch_on(f->st, 7, "k", NULL, 0, 2, 0, false);
    int64_t at = watch_key(f, "k", 5);
    compact(f, 5);
    sync_all(f);
    struct rec *r = rec_of(f, old);
    assert_true(r->created && r->canceled);
    assert_int_equal(r->compact_rev, 5);
    assert_int_equal(r->n, 0);
    r = rec_of(f, at);
    assert_false(r->canceled);
    assert_int_equal(r->n, 3); /* 5, 6, 7 */
    /* etcd 3.4 keeps a compaction-canceled id until the client cancels
     * it: a create with it is a duplicate, the cancel succeeds once. */
    assert_int_equal(watch_hub_watchers(f->h), 2);
    struct watch_create dup = {.watch_id = old, .key = "k", .key_len = 1};
    int64_t out;
    assert_int_equal(watch_create(f->st, &dup, &out), ERR_EXIST);
    put(f, "k", "w"); /* 8: nothing more for the canceled one */
    assert_int_equal(rec_of(f, old)->n, 0);
    assert_int_equal(watch_cancel(f->st, old), 0);
    assert_int_equal(watch_cancel(f->st, old), ERR_NOTFOUND);
    assert_int_equal(watch_hub_watchers(f->h), 1);
    /* A full sink when compaction lands: canceled once the sink frees. */
    int64_t slow = watch_key(f, "k", 0);
    f->k.full = true;
    put(f, "k", "a"); /* 9 */
    put(f, "k", "b"); /* 10 */
    compact(f, 10);
    bool more;
    assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    f->k.full = false;
    sync_all(f);
    assert_true(rec_of(f, slow)->canceled);
    assert_int_equal(rec_of(f, slow)->compact_rev, 10);
}

/* watch_hub_restore (a snapshot replaced the store): the hub takes the
 * store's revision and every synced watcher is caught up from the store
 * from its next revision, once each; one whose next revision the store has
 * compacted is canceled with compact_rev.  The store advancing with no
 * observer stands for the installed store. */
static void test_restore(void **state)
{
    struct fixture *f = *state;
    put(f, "k", "1"); /* 2 */
    int64_t a = watch_key(f, "k", 0);
    int64_t b = watch_key(f, "j", 0);
    mvcc_store_set_observer(f->s, NULL, NULL);
    put(f, "k", "2"); /* 3 */
    put(f, "j", "x"); /* 4 */
    put(f, "k", "3"); /* 5 */
    watch_hub_restore(f->h, f->s);
    mvcc_store_set_observer(f->s, watch_hub_observe, f->h);
    assert_int_equal(watch_hub_rev(f->h), 5);
    assert_int_equal(watch_hub_unsynced(f->h), 2);
    sync_all(f);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    struct rec *r = rec_of(f, a);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->evs[0].mod_rev, 3);
    assert_int_equal(r->evs[1].mod_rev, 5);
    assert_int_equal(rec_of(f, b)->n, 1);
    assert_int_equal(rec_of(f, b)->evs[0].mod_rev, 4);
    put(f, "k", "4"); /* 6: synced again, straight from the observer */
    assert_int_equal(r->n, 3);
    assert_int_equal(r->evs[2].mod_rev, 6);
    int64_t c = watch_key(f, "j", 0);
    mvcc_store_set_observer(f->s, NULL, NULL);
    put(f, "j", "y"); /* 7 */
    put(f, "j", "z"); /* 8 */
    compact(f, 8);
    watch_hub_restore(f->h, f->s);
    mvcc_store_set_observer(f->s, watch_hub_observe, f->h);
    sync_all(f);
    assert_true(rec_of(f, c)->canceled);
    assert_int_equal(rec_of(f, c)->compact_rev, 8);
    assert_int_equal(rec_of(f, c)->n, 0);
}

/* etcd #18089: a watch opened at the compaction revision, when that
 * revision is a delete, gets the delete (mvcc keeps the tombstone at the
 * compact revision until the next compaction). */
static void test_compaction_on_delete(void **state)
{
    struct fixture *f = *state;
    put(f, "k", "2");
    put(f, "k", "3");
    put(f, "k", "4");
    mvcc_rev d = del(f, "k", NULL); /* 5 */
    put(f, "k", "6");
    compact(f, d);
    int64_t id = watch_key(f, "k", d);
    sync_all(f);
    struct rec *r = rec_of(f, id);
    assert_false(r->canceled);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->evs[0].type, MVCC_EVENT_DELETE);
    assert_int_equal(r->evs[0].mod_rev, d);
    assert_string_equal(r->evs[0].key, "k");
    assert_int_equal(r->evs[1].type, MVCC_EVENT_PUT);
    assert_int_equal(r->evs[1].mod_rev, d + 1);
}

/* compact_steps schedules compaction at c and runs n steps of one
 * revision each in their own batch (the server's pace); returns whether
 * work remains. */
static bool compact_steps(struct fixture *f, mvcc_rev c, int n)
{
    struct mvcc_batch *b;
    bool more = true;
    assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
    assert_int_equal(mvcc_compact(b, c), 0);
    assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    for (int i = 0; i < n && more; i++) {
        assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
        assert_int_equal(mvcc_compact_step(b, 1, &more), 0);
        assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    }
    return more;
}

/* finish_compaction runs the pending compaction to its end. */
static void finish_compaction(struct fixture *f)
{
    struct mvcc_batch *b;
    bool more = true;
    while (more) {
        assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
        assert_int_equal(mvcc_compact_step(b, 1, &more), 0);
        assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
    }
    assert_false(mvcc_compact_pending(f->s));
}

/* etcd #19179: a watch opened at the revision of a compaction request,
 * that revision deleting several keys: whether it was opened before the
 * request (its catch-up not begun when it lands), while the physical
 * compaction runs, or after it finished, it gets every delete of that
 * revision, then what followed. */
static void test_watch_at_compaction_request(void **state)
{
    struct fixture *f = *state;
    txn3(f, "a", "b", "c", "1");   /* 2 */
    txn3(f, "a", "b", "c", "2");   /* 3 */
    mvcc_rev d = del(f, "a", "c"); /* 4: a and b */
    put(f, "c", "5");              /* 5 */
    int64_t ids[3];
    ids[0] = watch_on(f->st, 0, "a", "d", 1, d, 0, false);
    assert_true(compact_steps(f, d, 2)); /* requested, running */
    ids[1] = watch_on(f->st, 0, "a", "d", 1, d, 0, false);
    sync_all(f);
    finish_compaction(f);
    ids[2] = watch_on(f->st, 0, "a", "d", 1, d, 0, false);
    sync_all(f);
    for (int i = 0; i < 3; i++) {
        struct rec *r = rec_of(f, ids[i]);
        assert_false(r->canceled);
        assert_int_equal(r->n, 3);
        assert_int_equal(r->evs[0].type, MVCC_EVENT_DELETE);
        assert_string_equal(r->evs[0].key, "a");
        assert_int_equal(r->evs[0].mod_rev, d);
        assert_int_equal(r->evs[1].type, MVCC_EVENT_DELETE);
        assert_string_equal(r->evs[1].key, "b");
        assert_int_equal(r->evs[1].mod_rev, d);
        assert_int_equal(r->evs[2].type, MVCC_EVENT_PUT);
        assert_int_equal(r->evs[2].mod_rev, d + 1);
    }
}

static void test_progress(void **state)
{
    struct fixture *f = *state;
    /* No watchers: answered at once. */
    watch_stream_progress(f->st);
    assert_int_equal(f->k.n_stream_progress, 1);
    assert_int_equal(f->k.stream_progress_rev, 1);
    for (int i = 0; i < 3; i++)
        put(f, "k", "v"); /* 2..4 */
    watch_key(f, "k", 0);
    watch_stream_progress(f->st);
    assert_int_equal(f->k.n_stream_progress, 2);
    assert_int_equal(f->k.stream_progress_rev, 4);
    /* An unsynced watcher defers it until synced. */
    int64_t past = watch_key(f, "k", 2);
    watch_stream_progress(f->st);
    watch_stream_progress(f->st); /* one answer for both */
    assert_int_equal(f->k.n_stream_progress, 2);
    sync_all(f);
    assert_int_equal(f->k.n_stream_progress, 3);
    assert_int_equal(f->k.stream_progress_rev, 4);
    assert_int_equal(rec_of(f, past)->n, 3);
    /* etcd #20242: the synced watchers are not starved meanwhile. */
    int64_t synced = watch_key(f, "k", 0);
    struct rec *rs = rec_of(f, synced);
    int64_t slow = watch_key(f, "k", 3);
    watch_stream_progress(f->st);
    assert_int_equal(f->k.n_stream_progress, 3);
    assert_int_equal(rs->n_progress, 1);
    assert_int_equal(rs->progress_rev, 4);
    assert_int_equal(rec_of(f, slow)->n_progress, 0);
    sync_all(f);
    assert_int_equal(f->k.n_stream_progress, 4);
    assert_int_equal(watch_cancel(f->st, slow), 0);
    /* etcd #17507: a new watcher that gets no events still answers. */
    watch_key(f, "none", 2);
    watch_stream_progress(f->st);
    assert_int_equal(f->k.n_stream_progress, 4);
    sync_all(f);
    assert_int_equal(f->k.n_stream_progress, 5);
    /* A full sink defers it; the step retries. */
    f->k.full = true;
    watch_stream_progress(f->st);
    f->k.full = false;
    assert_int_equal(f->k.n_stream_progress, 5);
    sync_all(f);
    assert_int_equal(f->k.n_stream_progress, 6);
}

/* etcd #20229 (backported to 3.4 and 3.5; 3.4.31/3.5.13 answered at the
 * current revision): RequestProgress on a stream with a watcher whose
 * start revision is ahead is deferred until the hub reaches start - 1
 * (the bound of the periodic progress), then answered by a sync step;
 * the other synced watchers get their own progress meanwhile. */
static void test_progress_future_watcher(void **state)
{
    struct fixture *f = *state;
    mvcc_rev r0 = put(f, "k", "v"); /* 2 */
    int64_t now = watch_key(f, "k", 0);
    int64_t fut = watch_key(f, "f", r0 + 3); /* 5 */
    assert_int_equal(watch_hub_unsynced(f->h), 0); /* synced, ahead */
    watch_stream_progress(f->st);
    assert_int_equal(f->k.n_stream_progress, 0);
    assert_int_equal(rec_of(f, now)->n_progress, 1);
    assert_int_equal(rec_of(f, fut)->n_progress, 0);
    assert_true(watch_hub_pending(f->h) > 0); /* the owner keeps stepping */
    bool more;
    assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    assert_true(more);
    put(f, "k", "v"); /* 3: still two before 5 */
    assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    assert_int_equal(f->k.n_stream_progress, 0);
    put(f, "k", "v"); /* 4 = start - 1 */
    sync_all(f);
    assert_int_equal(f->k.n_stream_progress, 1);
    assert_int_equal(f->k.stream_progress_rev, r0 + 2);
    assert_int_equal(watch_hub_pending(f->h), 0);
    /* A deferred request is answered once the future watcher is gone. */
    int64_t far = watch_key(f, "g", 100);
    watch_stream_progress(f->st);
    assert_int_equal(f->k.n_stream_progress, 1);
    assert_int_equal(watch_cancel(f->st, far), 0);
    sync_all(f);
    assert_int_equal(f->k.n_stream_progress, 2);
    /* Without a future watcher: at once, as before. */
    watch_stream_progress(f->st);
    assert_int_equal(f->k.n_stream_progress, 3);
    assert_int_equal(rec_of(f, fut)->n, 0);
    put(f, "f", "x"); /* 5 */
    assert_int_equal(rec_of(f, fut)->n, 1);
}

/* Catch-up reads history once per group of unsynced watchers (etcd's
 * unsynced watcherGroup), not once per watcher: the store reads of a
 * round do not grow with the number of watchers.  The per-watcher
 * catch-up this replaced made one read per watcher (300 here). */
static size_t reads_to_sync(struct fixture *f)
{
    uint64_t r0 = watch_hub_sync_reads(f->h);
    sync_all(f);
    return (size_t)(watch_hub_sync_reads(f->h) - r0);
}

static void test_shared_catch_up(void **state)
{
    struct fixture *f = *state;
    struct watch_options o = {.sync_events_max = 10};
    fx_hub(f, &o);
    char k[16];
    for (int i = 0; i < 50; i++) { /* 2..51 */
        snprintf(k, sizeof k, "p/%02d", i % 7);
        put(f, k, i % 2 ? "odd" : "even");
    }
    put(f, "q", "other"); /* 52: outside every watcher */
    watch_on(f->st, 0, "p/", "p0", 2, 2, 0, false);
    size_t one = reads_to_sync(f);
    assert_int_equal(one, 5); /* 50 events, 10 per batch */
    /* 300 watchers from the same revision: prefix, single keys, with
     * prev_kv or a filter; the same reads. */
    int64_t ids[300];
    for (int i = 0; i < 300; i++) {
        snprintf(k, sizeof k, "p/%02d", i % 7);
        if (i % 3 == 0)
            ids[i] = watch_on(f->st, 0, "p/", "p0", 2, 2, 0, i % 2);
        else
            ids[i] = watch_on(f->st, 0, k, NULL, 0, 2,
                              i % 5 == 0 ? WATCH_FILTER_NOPUT : 0, true);
    }
    assert_int_equal(watch_hub_unsynced(f->h), 300);
    size_t many = reads_to_sync(f);
    assert_int_equal(many, one);
    for (int i = 0; i < 300; i++) {
        struct rec *r = rec_of(f, ids[i]);
        if (i % 3 == 0) {
            assert_int_equal(r->n, 50);
            assert_int_equal(r->evs[7].has_prev, i % 2 == 1);
            continue;
        }
        size_t want = i % 5 == 0 ? 0 : (50 - (size_t)(i % 7) + 6) / 7;
        assert_int_equal(r->n, want);
        for (size_t j = 0; j < r->n; j++) {
            assert_int_equal((r->evs[j].mod_rev - 2) % 7, i % 7);
            assert_int_equal(r->evs[j].has_prev, r->evs[j].mod_rev >= 9);
        }
    }
    /* Spread start revisions: one batch per stretch of history, still
     * not one per watcher. */
    for (int i = 0; i < 300; i++)
        watch_on(f->st, 0, "p/", "p0", 2, 2 + (i % 3) * 20, 0, false);
    size_t spread = reads_to_sync(f);
    assert_true(spread <= 5 + 2);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    /* Watchers alike (one key, same filters) from spread start revisions
     * and interleaved in creation with unlike ones: each takes the tail of
     * the selection made for the one before it (select_for's reuse), and
     * still gets exactly its own events. */
    int64_t same[200];
    for (int i = 0; i < 200; i++) {
        mvcc_rev start = 2 + (i * 7) % 45;
        same[i] = watch_on(f->st, 0, "p/03", NULL, 0, start,
                           i % 4 == 0 ? WATCH_FILTER_NOPUT : 0, i % 2);
        watch_on(f->st, 0, i % 3 ? "p/04" : "p/", i % 3 ? NULL : "p0",
                 i % 3 ? 0 : 2, start, 0, false);
    }
    sync_all(f);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    for (int i = 0; i < 200; i++) {
        struct rec *r = rec_of(f, same[i]);
        mvcc_rev start = 2 + (i * 7) % 45;
        size_t want = 0;
        for (mvcc_rev rev = start; rev <= 51; rev++)
            want += (rev - 2) % 7 == 3 && i % 4 != 0;
        assert_int_equal(r->n, want);
        for (size_t j = 0; j < r->n; j++) {
            assert_true(r->evs[j].mod_rev >= start);
            assert_int_equal((r->evs[j].mod_rev - 2) % 7, 3);
            assert_int_equal(r->evs[j].has_prev,
                             i % 2 == 1 && r->evs[j].mod_rev >= 9);
            if (j > 0)
                assert_true(r->evs[j].mod_rev > r->evs[j - 1].mod_rev);
        }
    }
}

/* A batch of a few hundred events of which a watcher takes only some
 * (its copies are made in the step's scratch, which must hold them all):
 * every event once, in order. */
static void test_catch_up_large_batch(void **state)
{
    struct fixture *f = *state;
    mvcc_rev first = put(f, "x", "0");
    for (int i = 1; i < 600; i++)
        put(f, i % 2 ? "y" : "x", "v");
    int64_t xs = watch_key(f, "x", first);
    int64_t all = watch_on(f->st, 0, "x", "z", 1, first, 0, false);
    sync_all(f);
    struct rec *r = rec_of(f, xs);
    assert_int_equal(r->n, 300);
    for (size_t i = 0; i < r->n; i++)
        assert_int_equal(r->evs[i].mod_rev, first + 2 * (mvcc_rev)i);
    assert_int_equal(rec_of(f, all)->n, 600);
}

/* A narrow watcher over a long history of other keys: one step walks a
 * bounded number of history entries (16 per event of the budget) and the
 * next resumes where it stopped; the catch-up still ends with exactly the
 * watcher's events. */
static void test_walk_bound(void **state)
{
    struct fixture *f = *state;
    struct watch_options o = {.sync_events_max = 4};
    fx_hub(f, &o);
    mvcc_rev first = put(f, "z", "0");
    for (int i = 0; i < 640; i++)
        put(f, "other", "x");
    mvcc_rev last = put(f, "z", "1");
    int64_t id = watch_key(f, "z", first);
    bool more;
    assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
    assert_true(more); /* 64 entries walked, not 642 */
    struct rec *r = rec_of(f, id);
    assert_int_equal(r->n, 1);
    int steps = 1;
    while (more) {
        assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
        steps++;
    }
    assert_true(steps >= 642 / 64);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->evs[1].mod_rev, last);
    put(f, "z", "2"); /* synced again */
    assert_int_equal(r->n, 3);
}

static void test_progress_notify_tick(void **state)
{
    struct fixture *f = *state;
    struct watch_options o = {.progress_interval_ms = 100};
    fx_hub(f, &o);
    struct watch_create c = {.key = "k", .key_len = 1,
                             .progress_notify = true};
    int64_t id, quiet;
    assert_int_equal(watch_create(f->st, &c, &id), 0);
    quiet = watch_key(f, "k", 0); /* did not ask */
    watch_hub_tick(f->h, 1000);
    watch_hub_tick(f->h, 1050);
    assert_int_equal(rec_of(f, id)->n_progress, 0);
    watch_hub_tick(f->h, 1100);
    assert_int_equal(rec_of(f, id)->n_progress, 1);
    put(f, "k", "v");
    watch_hub_tick(f->h, 1200); /* had events: no progress */
    assert_int_equal(rec_of(f, id)->n_progress, 1);
    watch_hub_tick(f->h, 1300);
    assert_int_equal(rec_of(f, id)->n_progress, 2);
    assert_int_equal(rec_of(f, id)->progress_rev, 2);
    assert_int_equal(rec_of(f, quiet)->n_progress, 0);
    /* etcd #20221: a watcher from a future revision S gets no periodic
     * progress while the hub is below S - 1 (it would vouch for a
     * revision before the watch's start), then gets it at S - 1. */
    struct watch_create fc = {.key = "f", .key_len = 1, .start_rev = 5,
                              .progress_notify = true};
    int64_t fut;
    assert_int_equal(watch_create(f->st, &fc, &fut), 0);
    sync_all(f);
    watch_hub_tick(f->h, 1400);
    watch_hub_tick(f->h, 1500);
    assert_int_equal(rec_of(f, fut)->n_progress, 0);
    put(f, "x", "3"); /* 3 */
    watch_hub_tick(f->h, 1600);
    assert_int_equal(rec_of(f, fut)->n_progress, 0);
    put(f, "x", "4"); /* 4 = S - 1 */
    watch_hub_tick(f->h, 1700);
    assert_int_equal(rec_of(f, fut)->n_progress, 1);
    assert_int_equal(rec_of(f, fut)->progress_rev, 4);
}

static void test_cancel_and_close(void **state)
{
    struct fixture *f = *state;
    int64_t a = watch_key(f, "k", 0);
    int64_t b = watch_on(f->st, 0, "a", "z", 1, 0, 0, false);
    put(f, "k", "1");
    assert_int_equal(watch_cancel(f->st, a), 0);
    assert_int_equal(watch_cancel(f->st, b), 0);
    put(f, "k", "2");
    assert_int_equal(rec_of(f, a)->n, 1);
    assert_int_equal(rec_of(f, b)->n, 1);
    assert_int_equal(watch_hub_watchers(f->h), 0);
    /* A second stream, left open, is closed by the hub. */
    struct sink *k2 = calloc(1, sizeof *k2);
    k2->room = -1;
    struct watch_sink ws = {sink_send, sink_close, k2};
    struct watch_stream *st2;
    assert_int_equal(watch_stream_open(f->h, &ws, &st2), 0);
    watch_on(st2, 0, "k", NULL, 0, 2, 0, false); /* unsynced */
    watch_hub_close(f->h);
    assert_true(k2->closed);
    assert_true(f->k.closed); /* every open stream is ended */
    f->h = NULL;
    sink_reset(k2);
    free(k2);
    sink_reset(&f->k);
    assert_int_equal(watch_hub_open(f->s, NULL, &f->h), 0);
    mvcc_store_set_observer(f->s, watch_hub_observe, f->h);
    struct watch_sink w1 = {sink_send, sink_close, &f->k};
    assert_int_equal(watch_stream_open(f->h, &w1, &f->st), 0);
}

static void test_fragment(void **state)
{
    struct fixture *f = *state;
    struct watch_options o = {.fragment_bytes = 200};
    fx_hub(f, &o);
    struct watch_create c = {.key = "p/", .key_len = 2, .end = "p0",
                             .end_len = 2, .fragment = true};
    int64_t id, whole;
    assert_int_equal(watch_create(f->st, &c, &id), 0);
    c.fragment = false;
    assert_int_equal(watch_create(f->st, &c, &whole), 0);
    char big[60];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    txn3(f, "p/a", "p/b", "p/c", big);
    assert_int_equal(rec_of(f, id)->n, 3);
    assert_int_equal(f->k.n_fragments, 2); /* 3 responses, 2 flagged */
    assert_true(rec_of(f, whole)->evs[0].resp == rec_of(f, whole)->evs[2].resp);
}

static void test_fanout_nomem(void **state)
{
    struct fixture *f = *state;
    int64_t id = watch_key(f, "k", 0);
    /* The store commits without the hub; the test then hands the hub the
     * batch with its first allocation failing. */
    mvcc_store_set_observer(f->s, NULL, NULL);
    mvcc_rev rev = put(f, "k", "1");
    struct mvcc_event ev = {
        .type = MVCC_EVENT_PUT,
        .kv = {.key = (const uint8_t *)"k", .key_len = 1,
               .value = (const uint8_t *)"1", .value_len = 1,
               .create_rev = rev, .mod_rev = rev, .version = 1}};
    mem_fault_set(1);
    watch_hub_observe(f->h, &ev, 1, rev);
    mem_fault_set(0);
    mvcc_store_set_observer(f->s, watch_hub_observe, f->h);
    struct rec *r = rec_of(f, id);
    assert_int_equal(r->n, 0);
    assert_int_equal(watch_hub_unsynced(f->h), 1); /* moved aside, not lost */
    sync_all(f);
    put(f, "k", "2");
    assert_int_equal(r->n, 2);
    assert_string_equal(r->evs[0].value, "1");
    assert_string_equal(r->evs[1].value, "2");
}

static void test_step_and_create_nomem(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++)
        put(f, "k", "v"); /* 2..6 */
    for (long n = 1; n < 40; n++) {
        struct watch_create c = {.key = "k", .key_len = 1, .start_rev = 2,
                                 .prev_kv = n % 2};
        int64_t id;
        mem_fault_set(n);
        int rc = watch_create(f->st, &c, &id);
        mem_fault_set(0);
        assert_true(rc == 0 || rc == ERR_NOMEM);
        if (rc != 0)
            continue;
        bool more;
        mem_fault_set(n);
        rc = watch_hub_sync_step(f->h, &more);
        mem_fault_set(0);
        assert_true(rc == 0 || rc == ERR_NOMEM);
        sync_all(f);
        struct rec *r = rec_of(f, id);
        assert_int_equal(r->n, 5);
        for (size_t i = 0; i < 5; i++)
            assert_int_equal(r->evs[i].mod_rev, (mvcc_rev)i + 2);
        assert_int_equal(watch_cancel(f->st, id), 0);
    }
}

/* in_range is the brute-force range rule the index must agree with. */
static bool in_range(const char *k, const char *key, const char *end,
                     bool inf)
{
    if (inf)
        return strcmp(k, key) >= 0;
    if (end == NULL)
        return strcmp(k, key) == 0;
    return strcmp(k, key) >= 0 && strcmp(k, end) < 0;
}

/* 300 watchers of one key share one hash chain (rehashed at 64, 128 and
 * 256 entries); cancelling them from the middle, every other one, keeps
 * the chain whole: the next put reaches exactly the others. */
static void test_same_key_cancel(void **state)
{
    struct fixture *f = *state;
    enum { N = 300 };
    int64_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = watch_key(f, "same", 0);
    for (int i = 1; i < N; i += 2)
        assert_int_equal(watch_cancel(f->st, ids[i]), 0);
    put(f, "same", "v");
    for (int i = 0; i < N; i++)
        assert_int_equal(rec_of(f, ids[i])->n, i % 2 == 0 ? 1 : 0);
    for (int i = N - 2; i >= 0; i -= 2)
        assert_int_equal(watch_cancel(f->st, ids[i]), 0);
    put(f, "same", "w");
    for (int i = 0; i < N; i += 2)
        assert_int_equal(rec_of(f, ids[i])->n, 1);
    assert_int_equal(watch_hub_watchers(f->h), 0);
}

static void test_index_many(void **state)
{
    struct fixture *f = *state;
    enum { N = 1000, KEYS = 200, OPS = 300 };
    static const char zero[1] = {0};
    static char keys[N][8], ends[N][8];
    static bool inf[N], single[N], gone[N];
    static size_t want[N];
    unsigned seed = 7;
    for (int i = 0; i < N; i++) {
        int a = rand_r(&seed) % KEYS, b = a + 1 + rand_r(&seed) % 40;
        int kind = rand_r(&seed) % 6;
        snprintf(keys[i], 8, "k%03d", a);
        snprintf(ends[i], 8, "k%03d", b);
        single[i] = kind < 2;
        inf[i] = kind == 2;
        if (kind == 3) { /* a prefix: "k1" .. "k2" */
            snprintf(keys[i], 8, "k%d", a % 3);
            snprintf(ends[i], 8, "k%d", a % 3 + 1);
        }
        int64_t id = watch_on(f->st, 0, keys[i], single[i] ? NULL
                                                 : inf[i]  ? zero
                                                           : ends[i],
                              single[i] ? 0 : inf[i] ? 1 : strlen(ends[i]),
                              0, 0, false);
        assert_int_equal(id, i);
    }
    char k[8];
    for (int op = 0; op < OPS; op++) {
        if (op == OPS / 2)
            for (int i = 0; i < N; i += 2) {
                assert_int_equal(watch_cancel(f->st, i), 0);
                gone[i] = true;
            }
        snprintf(k, sizeof k, "k%03d", rand_r(&seed) % KEYS);
        put(f, k, "v");
        for (int i = 0; i < N; i++)
            if (!gone[i] && in_range(k, keys[i], single[i] ? NULL : ends[i],
                                     inf[i]))
                want[i]++;
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(rec_of(f, i)->n, want[i]);
}

/* --- random model check --------------------------------------------------- */

#define NKEYS 10
#define NW 40
#define NSTREAMS 4

struct mev {        /* one event of the model's log */
    mvcc_rev rev;
    int type;
    int key;        /* index */
    char value[16];
    bool has_prev;
    char prev[16];
};

struct model {
    bool live[NKEYS];
    char val[NKEYS][16];
    struct mev *log;
    size_t n, cap;
    mvcc_rev rev;
};

struct mw {         /* a model watcher */
    int stream;
    int64_t id;
    int lo, hi;     /* key index range [lo, hi) */
    mvcc_rev start; /* first revision it must see */
    unsigned filters;
    bool prev;
    bool canceled;  /* by the test */
    bool single;    /* a single-key watch (no range end) */
    bool now;       /* created with start_rev 0 */
};

static void key_name(int i, char *out)
{
    snprintf(out, 8, "k%02d", i);
}

static void mlog(struct model *m, int type, int key, const char *v)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->log = realloc(m->log, m->cap * sizeof *m->log);
    }
    struct mev *e = &m->log[m->n++];
    memset(e, 0, sizeof *e);
    e->rev = m->rev + 1;
    e->type = type;
    e->key = key;
    e->has_prev = m->live[key];
    if (e->has_prev)
        strcpy(e->prev, m->val[key]);
    if (type == MVCC_EVENT_PUT) {
        strcpy(e->value, v);
        strcpy(m->val[key], v);
        m->live[key] = true;
    } else {
        m->live[key] = false;
    }
}

/* rand_txn applies one random request to the store and the model. */
static void rand_txn(struct mvcc_batch *b, struct model *m, unsigned *seed)
{
    struct mvcc_txn *t = mvcc_txn_begin(b);
    bool used[NKEYS] = {0};
    int ops = 1 + rand_r(seed) % 3;
    size_t before = m->n;
    char k[8], v[16];
    for (int i = 0; i < ops; i++) {
        int key = rand_r(seed) % NKEYS;
        if (used[key])
            continue;
        used[key] = true;
        key_name(key, k);
        if (rand_r(seed) % 4 != 0) {
            snprintf(v, sizeof v, "v%d", rand_r(seed) % 1000);
            assert_int_equal(
                mvcc_txn_put(t, k, 3, v, strlen(v), 0, 0, NULL), 0);
            mlog(m, MVCC_EVENT_PUT, key, v);
        } else {
            int64_t n;
            assert_int_equal(mvcc_txn_delete_range(t, k, 3, NULL, 0, &n,
                                                   NULL),
                             0);
            assert_int_equal(n, m->live[key] ? 1 : 0);
            if (m->live[key])
                mlog(m, MVCC_EVENT_DELETE, key, NULL);
        }
    }
    mvcc_rev r = mvcc_txn_end(t);
    if (m->n > before)
        m->rev++;
    assert_int_equal(r, m->rev);
}

static size_t n_checked; /* events compared by check_watcher */

/* check_watcher compares what w received with the model's log; a
 * canceled watcher (w->canceled) may have stopped anywhere. */
static void check_watcher(const struct model *m, const struct mw *w,
                          const struct rec *r)
{
    size_t j = 0;
    if (w->canceled && !r->created)
        return; /* canceled before its created response went out */
    assert_true(r->created);
    assert_false(r->canceled);
    if (w->start == 0) /* "now": the created revision tells */
        ((struct mw *)w)->start = r->created_rev + 1;
    for (size_t i = 0; i < m->n; i++) {
        const struct mev *e = &m->log[i];
        if (e->rev < w->start || e->key < w->lo || e->key >= w->hi)
            continue;
        if (e->type == MVCC_EVENT_PUT && (w->filters & WATCH_FILTER_NOPUT))
            continue;
        if (e->type == MVCC_EVENT_DELETE &&
            (w->filters & WATCH_FILTER_NODELETE))
            continue;
        if (w->canceled && j == r->n) {
            n_checked += j;
            return;
        }
        assert_true(j < r->n);
        const struct rev_ev *x = &r->evs[j++];
        char k[8];
        key_name(e->key, k);
        assert_int_equal(x->mod_rev, e->rev);
        assert_int_equal(x->type, e->type);
        assert_string_equal(x->key, k);
        if (e->type == MVCC_EVENT_PUT)
            assert_string_equal(x->value, e->value);
        assert_int_equal(x->has_prev, w->prev && e->has_prev);
        if (x->has_prev)
            assert_string_equal(x->prev_value, e->prev);
        /* Atomic: a revision's events share a response. */
        if (j > 1 && r->evs[j - 2].mod_rev == x->mod_rev)
            assert_int_equal(r->evs[j - 2].resp, x->resp);
    }
    assert_int_equal(j, r->n);
    n_checked += j;
}

static void new_watcher(struct fixture *f, struct watch_stream **sts,
                        struct mw *w, int stream, struct model *m,
                        unsigned *seed)
{
    char k[8], e[8];
    memset(w, 0, sizeof *w);
    w->stream = stream;
    w->lo = rand_r(seed) % NKEYS;
    w->hi = rand_r(seed) % 2 ? w->lo + 1
                             : w->lo + 1 + rand_r(seed) % (NKEYS - w->lo);
    int kind = rand_r(seed) % 3; /* 0 = now, 1 = past, 2 = future */
    w->start = kind == 0   ? m->rev + 1
               : kind == 1 ? 1 + rand_r(seed) % m->rev
                           : m->rev + 1 + rand_r(seed) % 5;
    w->filters = rand_r(seed) % 5 == 0 ? (unsigned)(1 + rand_r(seed) % 2) : 0;
    w->prev = rand_r(seed) % 2;
    key_name(w->lo, k);
    key_name(w->hi, e);
    bool single = w->hi == w->lo + 1 && rand_r(seed) % 2;
    w->single = single;
    w->now = kind == 0;
    w->id = watch_on(sts[stream], 0, k, single ? NULL : e, single ? 0 : 3,
                     kind == 0 ? 0 : w->start, w->filters, w->prev);
}

/* --- history dump for tests/common/watchcheck.py ------------------------ */

static void dump_event(FILE *o, const struct rev_ev *x)
{
    fprintf(o, "{\"type\": \"%s\", \"key\": \"%s\", \"value\": ",
            x->type == MVCC_EVENT_PUT ? "PUT" : "DELETE", x->key);
    if (x->type == MVCC_EVENT_PUT)
        fprintf(o, "\"%s\"", x->value);
    else
        fprintf(o, "null");
    fprintf(o, ", \"mod_revision\": %ld, \"create_revision\": %ld, "
               "\"version\": %ld, \"prev_kv\": ",
            (long)x->mod_rev, (long)x->create_rev, (long)x->version);
    if (x->has_prev)
        fprintf(o, "{\"value\": \"%s\", \"mod_revision\": %ld}}",
                x->prev_value, (long)x->prev_mod_rev);
    else
        fprintf(o, "null}");
}

static void dump_watch(FILE *o, const struct mw *w, const struct rec *r,
                       bool now)
{
    char k[8], e[8];
    key_name(w->lo, k);
    key_name(w->hi, e);
    fprintf(o, "{\"request\": {\"key\": \"%s\", \"range_end\": ", k);
    if (w->single)
        fprintf(o, "null");
    else
        fprintf(o, "\"%s\"", e);
    fprintf(o, ", \"start_revision\": %ld, \"prev_kv\": %s, "
               "\"filters\": [%s]}, \"responses\": [",
            now ? 0L : (long)w->start, w->prev ? "true" : "false",
            w->filters & WATCH_FILTER_NOPUT     ? "\"NOPUT\""
            : w->filters & WATCH_FILTER_NODELETE ? "\"NODELETE\""
                                                 : "");
    for (size_t i = 0; i < r->n_log; i++) {
        const struct resp_log *l = &r->log[i];
        fprintf(o, "%s{\"header_rev\": %ld", i ? ", " : "",
                (long)l->header_rev);
        if (l->kind == 'C')
            fprintf(o, ", \"created\": true");
        if (l->kind == 'X')
            fprintf(o, ", \"canceled\": true, \"compact_revision\": %ld",
                    (long)l->compact_rev);
        if (l->kind == 'P')
            fprintf(o, ", \"progress\": true");
        if (l->kind == 'E') {
            fprintf(o, ", \"fragment\": %s, \"events\": [",
                    l->fragment ? "true" : "false");
            for (size_t j = l->from; j < l->to; j++) {
                fprintf(o, "%s", j > l->from ? ", " : "");
                dump_event(o, &r->evs[j]);
            }
            fprintf(o, "]");
        }
        fprintf(o, "}");
    }
    fprintf(o, "]}");
}

/* dump_history writes the run as watchcheck.py's history format to the
 * file named by CETCD_WATCH_HISTORY (if set). */
static void dump_history(const struct model *m, const struct mw *ws, int nw,
                         const struct sink *ks)
{
    const char *path = getenv("CETCD_WATCH_HISTORY");
    if (path == NULL)
        return;
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fprintf(o, "{\"writes\": [");
    for (size_t i = 0; i < m->n; i++) {
        const struct mev *e = &m->log[i];
        bool first = i == 0 || m->log[i - 1].rev != e->rev;
        bool last = i + 1 == m->n || m->log[i + 1].rev != e->rev;
        char k[8];
        key_name(e->key, k);
        if (first)
            fprintf(o, "%s{\"rev\": %ld, \"ops\": [", i ? ", " : "",
                    (long)e->rev);
        else
            fprintf(o, ", ");
        if (e->type == MVCC_EVENT_PUT)
            fprintf(o, "{\"op\": \"put\", \"key\": \"%s\", "
                       "\"value\": \"%s\"}", k, e->value);
        else
            fprintf(o, "{\"op\": \"delete\", \"key\": \"%s\"}", k);
        if (last)
            fprintf(o, "]}");
    }
    fprintf(o, "], \"watches\": [");
    for (int i = 0; i < nw; i++) {
        fprintf(o, "%s", i ? ", " : "");
        dump_watch(o, &ws[i], &ks[ws[i].stream].recs[ws[i].id], ws[i].now);
    }
    fprintf(o, "]}\n");
    assert_int_equal(fclose(o), 0);
}

static void test_random_model(void **state)
{
    struct fixture *f = *state;
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("CETCD_TEST_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    printf("test_random_model seed %u (CETCD_TEST_SEED)\n", seed);
    struct watch_options o = {.sync_events_max = 1 + seed % 7,
                              .sync_bytes_max = 256 + seed % 4096,
                              .fan_pairs_max = 1 + seed % 64};
    fx_hub(f, &o);
    struct sink *ks = calloc(NSTREAMS, sizeof *ks);
    struct watch_stream *sts[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++) {
        ks[i].room = -1;
        struct watch_sink ws = {sink_send, sink_close, &ks[i]};
        assert_int_equal(watch_stream_open(f->h, &ws, &sts[i]), 0);
    }
    struct model m = {.rev = mvcc_current_rev(f->s)};
    struct mw ws[NW];
    int nw = 0;
    for (int round = 0; round < 3000; round++) {
        int what = rand_r(&seed) % 20;
        if (what < 10) {
            struct mvcc_batch *b;
            assert_int_equal(mvcc_batch_begin(f->s, &b), 0);
            int n = 1 + rand_r(&seed) % 3;
            for (int i = 0; i < n; i++)
                rand_txn(b, &m, &seed);
            assert_int_equal(mvcc_batch_commit(b, next_ci++), 0);
        } else if (what < 12 && nw < NW) {
            int s = rand_r(&seed) % NSTREAMS;
            new_watcher(f, sts, &ws[nw], s, &m, &seed);
            nw++;
        } else if (what < 15) {
            struct sink *k = &ks[rand_r(&seed) % NSTREAMS];
            k->full = !k->full;
            k->room = rand_r(&seed) % 3 == 0 ? rand_r(&seed) % 4 : -1;
        } else if (what < 19) {
            bool more;
            assert_int_equal(watch_hub_sync_step(f->h, &more), 0);
        } else {
            watch_stream_progress(sts[rand_r(&seed) % NSTREAMS]);
        }
    }
    for (int i = 0; i < NSTREAMS; i++) {
        ks[i].full = false;
        ks[i].room = -1;
    }
    sync_all(f);
    assert_int_equal(watch_hub_unsynced(f->h), 0);
    for (int i = 0; i < nw; i++)
        check_watcher(&m, &ws[i], &ks[ws[i].stream].recs[ws[i].id]);
    dump_history(&m, ws, nw, ks);
    printf("test_random_model: %d watchers, %zu events checked, rev %ld\n",
           nw, n_checked, (long)m.rev);
    for (int i = 0; i < NSTREAMS; i++) {
        watch_stream_close(sts[i]);
        sink_reset(&ks[i]);
    }
    free(ks);
    free(m.log);
}

/* --- threads: observer, sync step and create/cancel concurrently ---------- */

struct tctx {
    struct watch_hub *h;
    struct watch_stream **sts;
    struct mw ws[NW];      /* created by the churn thread */
    int nw;
    volatile int stop;     /* set by the main thread (read after join) */
    unsigned seed;
    int steps;             /* sync steps run */
};

static void *sync_thread(void *arg)
{
    struct tctx *t = arg;
    bool more;
    while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE)) {
        if (watch_hub_sync_step(t->h, &more) != 0)
            abort();
        t->steps++;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void *churn_thread(void *arg)
{
    struct tctx *t = arg;
    char k[8], e[8];
    while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE)) {
        unsigned r = rand_r(&t->seed) % 8;
        if (r < 3 && t->nw < NW) {
            struct mw *w = &t->ws[t->nw];
            memset(w, 0, sizeof *w);
            w->stream = rand_r(&t->seed) % NSTREAMS;
            w->lo = rand_r(&t->seed) % NKEYS;
            w->hi = w->lo + 1 + rand_r(&t->seed) % (NKEYS - w->lo);
            mvcc_rev now = watch_hub_rev(t->h);
            w->start = r == 0 ? 0 : 1 + rand_r(&t->seed) % now;
            w->prev = r == 2;
            key_name(w->lo, k);
            key_name(w->hi, e);
            struct watch_create c = {.key = k, .key_len = 3, .end = e,
                                     .end_len = 3, .start_rev = w->start,
                                     .prev_kv = w->prev};
            if (watch_create(t->sts[w->stream], &c, &w->id) != 0)
                abort();
            t->nw++;
        } else if (r == 3 && t->nw > 0 && rand_r(&t->seed) % 4 == 0) {
            struct mw *w = &t->ws[rand_r(&t->seed) % t->nw];
            if (!w->canceled && watch_cancel(t->sts[w->stream], w->id) != 0)
                abort();
            w->canceled = true;
        } else if (r == 4) {
            watch_stream_progress(t->sts[rand_r(&t->seed) % NSTREAMS]);
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct fixture *f = *state;
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("CETCD_TEST_SEED");
    if (env != NULL)
        seed = (unsigned)strtoul(env, NULL, 10);
    printf("test_threads seed %u (CETCD_TEST_SEED)\n", seed);
    struct watch_options o = {.sync_events_max = 4};
    fx_hub(f, &o);
    struct sink *ks = calloc(NSTREAMS, sizeof *ks);
    struct watch_stream *sts[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++) {
        ks[i].room = -1;
        ks[i].flaky = 2 + i;
        struct watch_sink ws = {sink_send, sink_close, &ks[i]};
        assert_int_equal(watch_stream_open(f->h, &ws, &sts[i]), 0);
    }
    struct tctx *t = calloc(1, sizeof *t);
    t->h = f->h;
    t->sts = sts;
    t->seed = seed * 7 + 1;
    struct model m = {.rev = mvcc_current_rev(f->s)};
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, sync_thread, t), 0);
    assert_int_equal(pthread_create(&b, NULL, churn_thread, t), 0);
    for (int round = 0; round < 1500; round++) {
        struct mvcc_batch *bt;
        assert_int_equal(mvcc_batch_begin(f->s, &bt), 0);
        int n = 1 + rand_r(&seed) % 3;
        for (int i = 0; i < n; i++)
            rand_txn(bt, &m, &seed);
        assert_int_equal(mvcc_batch_commit(bt, next_ci++), 0);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    __atomic_store_n(&t->stop, 1, __ATOMIC_RELEASE);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    for (int i = 0; i < NSTREAMS; i++)
        ks[i].flaky = 0;
    sync_all(f);
    n_checked = 0;
    for (int i = 0; i < t->nw; i++)
        check_watcher(&m, &t->ws[i], &ks[t->ws[i].stream].recs[t->ws[i].id]);
    printf("test_threads: %d watchers, %zu events checked, %d steps\n",
           t->nw, n_checked, t->steps);
    for (int i = 0; i < NSTREAMS; i++) {
        watch_stream_close(sts[i]);
        sink_reset(&ks[i]);
    }
    free(ks);
    free(t);
    free(m.log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_key_cancel, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_range_prefix_all, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_rev_past_and_future,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_filters_prev_kv, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_txn_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_sink_catch_up, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_behind_hub, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_compaction_cancel, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_on_delete, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_watch_at_compaction_request,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_future_watcher, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shared_catch_up, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_walk_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catch_up_large_batch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_progress_notify_tick, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel_and_close, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fragment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fanout_nomem, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fan_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_and_create_nomem, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_random_model, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_prev_values_switched_on_mid_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
