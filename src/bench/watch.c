/*
 * watch.c - the watch and watch-latency subcommands: --streams Watch
 * streams of --watch-per-stream watchers each, then --put-total (watch) or
 * --total (watch-latency) puts, at --put-rate per second (0: as fast as
 * --clients puts in flight allow), and the delivery latency of every
 * (put, watcher) event: each put's value starts with its send time
 * (CLOCK_MONOTONIC ns, 8 bytes little-endian), read back from the event.
 *
 * Keys are "wb/" and a zero-padded index, --key-size bytes in all (longer
 * when the index needs it).  Watcher j watches key j mod --key-space-size,
 * or with --prefix the whole "wb/" range, so a put reaches every watcher.
 *
 * Threads: --threads threads each run one async queue; stream i is bound to
 * queue i mod threads and connection i mod --conns, and its callbacks count
 * and time what arrives (per-thread recorders, merged at the end).  The
 * main thread paces the puts and starts them on the queues.  When more
 * than WATCH_SAMPLES_MAX events are expected, only every n-th event's
 * latency is kept (the counts stay exact), which bounds the memory.
 *
 * --watch-hold (ours) idles between creation and puts, so a script can read
 * the server's memory with every watcher in place.
 *
 * Reports (etcd benchmark's layout, one RESULT line each): watch prints
 * the creation (op=watch-create), the puts (op=watch-put) and the events
 * (op=watch-events, errors = events still missing --watch-wait seconds
 * after the last put); watch-latency prints the puts and the events as
 * op=watch-latency.
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "util/mem.h"

#define KV_PUT "/etcdserverpb.KV/Put"
#define WATCH_PREFIX "wb/"
#define WATCH_KEY_MAX 256
#define WATCH_SAMPLES_MAX 2000000L
#define WATCH_CREATE_WAIT_S 120
#define WATCH_WATCHERS_MAX 10000000L

struct wthread;

/* State every thread reads; counters are atomic. */
struct wshared {
    const struct bench_cfg *cfg;   /* the command line */
    struct cetcd_client **conns;   /* cfg->conns connections */
    struct wthread *threads;       /* n_threads threads */
    int n_threads;                 /* >= 1 */
    long n_watchers;               /* streams * watch_per_stream */
    long sample_every;             /* keep 1 event latency in this many */
    atomic_long created;           /* created responses */
    atomic_long create_errors;     /* canceled creates */
    atomic_long events;            /* events received */
    atomic_long inflight;          /* puts started, not completed */
    atomic_bool stop;              /* threads end once idle */
    atomic_llong last_event_ns;    /* when the latest event arrived */
};

/* One thread, its queue and recorders (touched by it only). */
struct wthread {
    struct wshared *sh;          /* shared state */
    pthread_t id;                /* the thread */
    struct cetcd_async_queue *q; /* its queue */
    struct cetcd_latency create; /* create -> created */
    struct cetcd_latency put;    /* put latencies */
    struct cetcd_latency event;  /* put sent -> event received */
    long seen;                   /* events seen, for sampling */
    char first_error[256];       /* first failure */
};

/* One stream; its callbacks run on its thread. */
struct wstream {
    struct wthread *t;              /* owner */
    struct cetcd_watch_stream *s;   /* the stream */
    double *create_start;           /* send time of each create */
    long n_created;                 /* created responses so far */
};

/* One put in flight. */
struct wput {
    struct wthread *t; /* the queue it runs on */
    double start;      /* when it was started */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts;

    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

static void error_note(struct wthread *t, const char *what, const char *msg)
{
    if (t->first_error[0] == '\0')
        snprintf(t->first_error, sizeof(t->first_error), "%s: %.200s", what,
                 msg);
}

/* key_make writes key index i into k (NUL-terminated), returns its length. */
static size_t key_make(char *k, int key_size, long i)
{
    int digits = key_size - (int)strlen(WATCH_PREFIX);
    int n;

    if (digits < 1)
        digits = 1;
    if (digits > WATCH_KEY_MAX - 8)
        digits = WATCH_KEY_MAX - 8;
    n = snprintf(k, WATCH_KEY_MAX, "%s%0*ld", WATCH_PREFIX, digits, i);
    return (size_t)n;
}

static void on_event(struct wthread *t, const struct cetcd_watch_event *e,
                     long long now)
{
    long long sent = 0;

    t->seen++;
    if (t->seen % t->sh->sample_every != 0)
        return;
    if (e->kv.value_len < 8) {
        t->event.errors++;
        return;
    }
    for (int b = 7; b >= 0; b--)
        sent = (sent << 8) | e->kv.value[b];
    if (cetcd_latency_add(&t->event, (double)(now - sent) / 1e9) != 0)
        t->event.errors++;
}

static void on_response(void *arg, struct cetcd_watch_response *r)
{
    struct wstream *ws = arg;
    struct wthread *t = ws->t;
    long long now = now_ns();
    double lat;

    if (r->created || r->canceled) {
        lat = now_s() - ws->create_start[ws->n_created %
                                         t->sh->cfg->watch_per_stream];
        ws->n_created++;
        if (r->canceled) {
            atomic_fetch_add(&t->sh->create_errors, 1);
            error_note(t, "watch canceled", r->cancel_reason);
        } else if (cetcd_latency_add(&t->create, lat) != 0) {
            t->create.errors++;
        }
        atomic_fetch_add(&t->sh->created, 1);
    }
    for (size_t i = 0; i < r->events_len; i++)
        on_event(t, &r->events[i], now);
    if (r->events_len > 0) {
        atomic_fetch_add(&t->sh->events, (long)r->events_len);
        atomic_store(&t->sh->last_event_ns, now);
    }
    cetcd_watch_response_free(r);
}

static void on_close(void *arg, const struct cetcd_status *st)
{
    struct wstream *ws = arg;

    if (st->code != CETCD_CANCELLED && !atomic_load(&ws->t->sh->stop))
        error_note(ws->t, "watch stream ended", st->message);
}

static void on_put(void *arg, const struct cetcd_status *st,
                   ProtobufCMessage *resp)
{
    struct wput *p = arg;
    struct wthread *t = p->t;

    assert(resp == NULL);
    (void)resp;
    if (st->code == 0) {
        if (cetcd_latency_add(&t->put, now_s() - p->start) != 0)
            t->put.errors++;
    } else {
        t->put.errors++;
        error_note(t, cetcd_code_name(st->code), st->message);
    }
    atomic_fetch_sub(&t->sh->inflight, 1);
    mem_free(p);
}

static void *thread_main(void *arg)
{
    struct wthread *t = arg;

    while (!atomic_load(&t->sh->stop) ||
           cetcd_async_queue_pending(t->q) > 0)
        cetcd_async_queue_run(t->q, 20);
    return NULL;
}

/* stream_start opens stream i and queues its creates. */
static int stream_start(struct wshared *sh, struct wstream *ws, long i)
{
    const struct bench_cfg *cfg = sh->cfg;
    struct cetcd_watch_stream_opts o = {
        .on_response = on_response, .on_close = on_close, .arg = ws,
        .send_max = (size_t)cfg->watch_per_stream};
    struct cetcd_watch_opts wo = {.range_end = WATCH_PREFIX,
                                  .range_end_len = strlen(WATCH_PREFIX)};
    struct cetcd_status st;
    char key[WATCH_KEY_MAX], end[] = WATCH_PREFIX;
    size_t len;
    int rc;

    ws->t = &sh->threads[i % sh->n_threads];
    o.queue = ws->t->q;
    ws->create_start = mem_calloc((size_t)cfg->watch_per_stream,
                                  sizeof(double));
    if (ws->create_start == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    rc = cetcd_watch_stream_open(sh->conns[i % cfg->conns], &o, &ws->s, &st);
    end[strlen(end) - 1]++; /* "wb/" -> "wb0" */
    wo.range_end = end;
    for (long w = 0; rc == 0 && w < cfg->watch_per_stream; w++) {
        long j = i * cfg->watch_per_stream + w;
        if (cfg->watch_prefix)
            len = (size_t)snprintf(key, sizeof(key), "%s", WATCH_PREFIX);
        else
            len = key_make(key, cfg->key_size, j % cfg->key_space_size);
        ws->create_start[w] = now_s();
        rc = cetcd_watch_create(ws->s, key, len,
                                cfg->watch_prefix ? &wo : NULL, &st);
    }
    if (rc != 0)
        fprintf(stderr, "cetcd-bench: watch stream %ld: %s\n", i, st.message);
    return rc;
}

/* expected_for returns how many watchers see a put to key index k. */
static long expected_for(const struct wshared *sh, long k)
{
    long ks = sh->cfg->key_space_size;

    if (sh->cfg->watch_prefix)
        return sh->n_watchers;
    if (k >= sh->n_watchers)
        return 0;
    return (sh->n_watchers - 1 - k) / ks + 1;
}

/* put_start starts put i on its queue; returns the events it will make. */
static long put_start(struct wshared *sh, long i, uint64_t *rng,
                      uint8_t *value)
{
    const struct bench_cfg *cfg = sh->cfg;
    struct wput *p = mem_malloc(sizeof(*p));
    struct cetcd_async_done done = {on_put, p};
    Etcdserverpb__PutRequest req;
    char key[WATCH_KEY_MAX];
    long long sent;
    long k;

    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    k = cfg->sequential_keys ? i % cfg->key_space_size
                             : (long)(*rng % (uint64_t)cfg->key_space_size);
    etcdserverpb__put_request__init(&req);
    req.key.len = key_make(key, cfg->key_size, k);
    req.key.data = (uint8_t *)key;
    req.value.len = (size_t)cfg->val_size;
    req.value.data = value;
    if (p == NULL)
        return 0;
    p->t = &sh->threads[i % sh->n_threads];
    p->start = now_s();
    sent = now_ns();
    for (int b = 0; b < 8; b++)
        value[b] = (uint8_t)(sent >> (8 * b));
    atomic_fetch_add(&sh->inflight, 1);
    if (cetcd_async_call(sh->conns[i % cfg->conns], p->t->q, KV_PUT,
                         &req.base, NULL, &done) != 0) {
        atomic_fetch_sub(&sh->inflight, 1);
        mem_free(p);
        return 0;
    }
    return expected_for(sh, k);
}

/* puts_run paces the puts and returns the events they should make. */
static long puts_run(struct wshared *sh, long total, double *start_out)
{
    const struct bench_cfg *cfg = sh->cfg;
    uint8_t *value = mem_calloc(1, (size_t)cfg->val_size);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    double start = now_s();
    long expected = 0;

    *start_out = start;
    if (value == NULL)
        return 0;
    for (int b = 8; b < cfg->val_size; b++)
        value[b] = (uint8_t)('a' + b % 26);
    for (long i = 0; i < total; i++) {
        if (cfg->put_rate > 0)
            sleep_s(start + (double)i / cfg->put_rate - now_s());
        while (atomic_load(&sh->inflight) >= cfg->clients)
            sleep_s(20e-6);
        expected += put_start(sh, i, &rng, value);
    }
    while (atomic_load(&sh->inflight) > 0)
        sleep_s(1e-3);
    mem_free(value);
    return expected;
}

/* wait_for waits until *counter reaches target or secs pass. */
static bool wait_for(atomic_long *counter, long target, double secs)
{
    double end = now_s() + secs;

    while (atomic_load(counter) < target) {
        if (now_s() > end)
            return false;
        sleep_s(1e-3);
    }
    return true;
}

/* merged returns the threads' recorders of one kind merged (offset is the
 * recorder's place in struct wthread). */
static int merge(struct wshared *sh, size_t off, struct cetcd_latency *out)
{
    int rc = cetcd_latency_init(out, 1024);

    for (int i = 0; rc == 0 && i < sh->n_threads; i++)
        rc = cetcd_latency_merge(
            out, (struct cetcd_latency *)((char *)&sh->threads[i] + off));
    return rc;
}

static const char *first_error(struct wshared *sh)
{
    for (int i = 0; i < sh->n_threads; i++)
        if (sh->threads[i].first_error[0] != '\0')
            return sh->threads[i].first_error;
    return "";
}

static void report(struct wshared *sh, size_t off, const char *op,
                   const char *title, double secs, uint64_t missing)
{
    struct cetcd_latency l;

    if (merge(sh, off, &l) == 0) {
        l.errors += missing;
        bench_report_named(sh->cfg, op, title, &l, secs, first_error(sh));
    }
    cetcd_latency_close(&l);
}

/* Everything one run owns. */
struct wrun {
    struct wshared sh;        /* shared state */
    struct wstream *streams;  /* cfg->streams streams */
};

static int conns_open(struct wshared *sh)
{
    const struct bench_cfg *cfg = sh->cfg;
    struct cetcd_client_opts o = {.endpoints = cfg->endpoints,
                                  .dial_timeout_ms = cfg->dial_timeout_ms,
                                  .token = cfg->token};
    struct cetcd_endpoint_status es;
    struct cetcd_status st;
    int rc = 0;

    for (int i = 0; rc == 0 && i < cfg->conns; i++) {
        rc = cetcd_client_open(&o, &sh->conns[i], &st);
        if (rc == 0)
            rc = cetcd_endpoint_status(sh->conns[i], &es, &st);
        if (rc == CETCD_UNIMPLEMENTED)
            rc = 0;
        if (rc != 0)
            fprintf(stderr, "cetcd-bench: %s: %s: %s\n", cetcd_code_name(rc),
                    cfg->endpoints, st.message);
    }
    return rc;
}

static int setup(struct wrun *r, const struct bench_cfg *cfg)
{
    struct wshared *sh = &r->sh;
    long expected;
    int rc;

    sh->cfg = cfg;
    sh->n_threads = cfg->threads > 0 ? cfg->threads : 1;
    sh->n_watchers = (long)cfg->streams * cfg->watch_per_stream;
    if (sh->n_watchers > WATCH_WATCHERS_MAX) {
        fprintf(stderr, "cetcd-bench: --streams x --watch-per-stream is "
                        "more than %ld watchers\n", WATCH_WATCHERS_MAX);
        return CETCD_INVALID_ARGUMENT;
    }
    expected = cfg->total * (cfg->watch_prefix ? sh->n_watchers
                                               : sh->n_watchers /
                                                     cfg->key_space_size + 1);
    sh->sample_every = expected / WATCH_SAMPLES_MAX + 1;
    sh->conns = mem_calloc((size_t)cfg->conns, sizeof(*sh->conns));
    sh->threads = mem_calloc((size_t)sh->n_threads, sizeof(*sh->threads));
    r->streams = mem_calloc((size_t)cfg->streams, sizeof(*r->streams));
    if (!sh->conns || !sh->threads || !r->streams)
        return CETCD_RESOURCE_EXHAUSTED;
    if ((rc = conns_open(sh)) != 0)
        return rc;
    for (int i = 0; i < sh->n_threads; i++) {
        struct wthread *t = &sh->threads[i];
        t->sh = sh;
        if (cetcd_async_queue_open(&t->q) != 0 ||
            cetcd_latency_init(&t->create, 1024) != 0 ||
            cetcd_latency_init(&t->put, 1024) != 0 ||
            cetcd_latency_init(&t->event, 1024) != 0)
            return CETCD_RESOURCE_EXHAUSTED;
    }
    return 0;
}

static void teardown(struct wrun *r, const struct bench_cfg *cfg)
{
    struct wshared *sh = &r->sh;

    for (int i = 0; r->streams && i < cfg->streams; i++)
        mem_free(r->streams[i].create_start);
    for (int i = 0; sh->threads && i < sh->n_threads; i++) {
        cetcd_async_queue_close(sh->threads[i].q);
        cetcd_latency_close(&sh->threads[i].create);
        cetcd_latency_close(&sh->threads[i].put);
        cetcd_latency_close(&sh->threads[i].event);
    }
    for (int i = 0; sh->conns && i < cfg->conns; i++)
        cetcd_client_close(sh->conns[i]);
    mem_free(r->streams);
    mem_free(sh->threads);
    mem_free(sh->conns);
}

/* measure creates the watchers, runs the puts and reports. */
static int measure(struct wrun *r, const struct bench_cfg *cfg)
{
    struct wshared *sh = &r->sh;
    double t0 = now_s(), t_created, put_start, put_end, ev_end;
    long expected, got;
    int rc = 0;

    for (int i = 0; rc == 0 && i < cfg->streams; i++)
        rc = stream_start(sh, &r->streams[i], i);
    if (rc == 0 && !wait_for(&sh->created, sh->n_watchers,
                             WATCH_CREATE_WAIT_S)) {
        fprintf(stderr, "cetcd-bench: %ld of %ld watchers created in %d s\n",
                atomic_load(&sh->created), sh->n_watchers,
                WATCH_CREATE_WAIT_S);
        rc = CETCD_DEADLINE_EXCEEDED;
    }
    t_created = now_s();
    if (rc != 0)
        return rc;
    if (cfg->watch_hold_s > 0) {
        printf("WATCHERS CREATED %ld\n", sh->n_watchers);
        fflush(stdout);
        sleep_s(cfg->watch_hold_s);
    }
    expected = puts_run(sh, cfg->total, &put_start);
    put_end = now_s();
    wait_for(&sh->events, expected, cfg->watch_wait_s);
    got = atomic_load(&sh->events);
    ev_end = (double)atomic_load(&sh->last_event_ns) / 1e9;
    if (ev_end < put_start)
        ev_end = put_end;
    /* The events report's ok counts the latencies kept: 1 event in
     * sample_every. */
    printf("watchers=%ld streams=%d puts=%ld events=%ld expected=%ld "
           "sample_every=%ld\n",
           sh->n_watchers, cfg->streams, cfg->total, got, expected,
           sh->sample_every);
    if (cfg->op == BENCH_WATCH)
        report(sh, offsetof(struct wthread, create), "watch-create",
               "Watch creation summary:", t_created - t0,
               (uint64_t)atomic_load(&sh->create_errors));
    report(sh, offsetof(struct wthread, put), "watch-put", "Put summary:",
           put_end - put_start, 0);
    report(sh, offsetof(struct wthread, event),
           cfg->op == BENCH_WATCH ? "watch-events" : "watch-latency",
           "Watch events summary:", ev_end - put_start,
           expected > got ? (uint64_t)(expected - got) : 0);
    return 0;
}

int bench_watch(const struct bench_cfg *cfg)
{
    struct wrun r;
    int rc;

    assert(cfg->op == BENCH_WATCH || cfg->op == BENCH_WATCH_LATENCY);
    memset(&r, 0, sizeof(r));
    atomic_init(&r.sh.stop, false);
    rc = setup(&r, cfg);
    for (int i = 0; rc == 0 && i < r.sh.n_threads; i++)
        pthread_create(&r.sh.threads[i].id, NULL, thread_main,
                       &r.sh.threads[i]);
    if (rc == 0)
        rc = measure(&r, cfg);
    atomic_store(&r.sh.stop, true);
    for (int i = 0; r.streams && i < cfg->streams; i++)
        cetcd_watch_stream_close(r.streams[i].s);
    for (int i = 0; r.sh.threads && i < r.sh.n_threads &&
                    r.sh.threads[i].id != 0; i++)
        pthread_join(r.sh.threads[i].id, NULL);
    teardown(&r, cfg);
    return rc;
}
