/*
 * run.c - the load loop: --conns clients (one TCP connection each),
 * --clients workers spread over them, --threads threads each draining one
 * async queue.  A worker always has exactly one request in flight; its
 * callback records the latency and starts the worker's next request until
 * --total requests have been started.  A lease-put request is two calls:
 * the grant's callback starts the put with the granted lease (the latency
 * covers both).
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
#define KV_RANGE "/etcdserverpb.KV/Range"
#define KV_TXN "/etcdserverpb.KV/Txn"
#define LEASE_GRANT "/etcdserverpb.Lease/LeaseGrant"
#define LEASE_KEEPALIVE "/etcdserverpb.Lease/LeaseKeepAlive"

/* State shared by every thread; read-only except remaining. */
struct shared {
    const struct bench_cfg *cfg;      /* the command line */
    atomic_long remaining;            /* requests not started yet */
    uint8_t *value;                   /* the value every put writes */
    Etcdserverpb__RangeRequest range; /* the one range request */
};

struct thread;

/* One logical client.  Touched only by its thread. */
struct worker {
    struct thread *t;                  /* owner */
    struct cetcd_client *conn;         /* its connection */
    struct cetcd_async_done done;      /* callback + this worker */
    double start;                      /* when the request in flight began */
    uint8_t *keys;                     /* txn_ops keys of key_size bytes */
    Etcdserverpb__PutRequest *puts;    /* txn_ops puts (put uses [0]) */
    Etcdserverpb__RequestOp *ops;      /* txn_ops ops wrapping puts */
    Etcdserverpb__RequestOp **opp;     /* pointers to ops */
    Etcdserverpb__TxnRequest txn;      /* txn-put request */
    Etcdserverpb__LeaseKeepAliveRequest ka; /* lease-keepalive: its lease */
    Etcdserverpb__LeaseGrantRequest grant;  /* lease-put: its first step */
    long key_index;                    /* lease-put: the key of this request */
};

/* One thread and its queue. */
struct thread {
    struct shared *sh;              /* shared state */
    pthread_t id;                   /* the thread */
    struct cetcd_async_queue *q;    /* its completion queue */
    struct cetcd_latency lat;       /* its latencies */
    double last_done;               /* time of its last completion */
    char first_error[512];          /* first failure message */
    uint64_t rng;                   /* xorshift state for random keys */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* key_write puts n as a zig-zag varint at the start of a key_size key, as
 * etcd's benchmark does (binary.PutVarint); the rest stays zero. */
static void key_write(uint8_t *k, int size, long n)
{
    uint64_t u = ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
    uint8_t tmp[10];
    int len = 0;

    do {
        tmp[len] = (uint8_t)(u & 0x7f);
        u >>= 7;
        if (u != 0)
            tmp[len] |= 0x80;
        len++;
    } while (u != 0);
    memset(k, 0, (size_t)size);
    memcpy(k, tmp, (size_t)(len < size ? len : size));
}

static void on_done(void *arg, const struct cetcd_status *st,
                    ProtobufCMessage *resp);

static void call_failed(struct thread *t, int rc)
{
    t->lat.errors++;
    if (t->first_error[0] == '\0')
        snprintf(t->first_error, sizeof(t->first_error),
                 "cannot start call: %s", cetcd_code_name(rc));
}

/* issue starts the worker's next request, if any are left. */
static void issue(struct worker *w)
{
    struct thread *t = w->t;
    const struct bench_cfg *cfg = t->sh->cfg;
    long left = atomic_fetch_sub(&t->sh->remaining, 1);
    long i = cfg->total - left, ks = cfg->key_space_size;
    const ProtobufCMessage *msg = &w->txn.base;
    const char *method = KV_TXN;
    int rc;

    if (left <= 0)
        return;
    if (cfg->op == BENCH_RANGE) {
        msg = &t->sh->range.base;
        method = KV_RANGE;
    } else if (cfg->op == BENCH_LEASE_KEEPALIVE) {
        /* A bidi stream called as a unary call: one request, the client's
         * half-close, one answer (clientv3's KeepAliveOnce). */
        msg = &w->ka.base;
        method = LEASE_KEEPALIVE;
    } else if (cfg->op == BENCH_LEASE_PUT) {
        w->key_index = i;
        w->start = now_s();
        rc = cetcd_async_call(w->conn, t->q, LEASE_GRANT, &w->grant.base,
                              &etcdserverpb__lease_grant_response__descriptor,
                              &w->done);
        if (rc != 0)
            call_failed(t, rc);
        return;
    } else if (cfg->op == BENCH_PUT) {
        long k = cfg->sequential_keys ? i % ks : (long)(rng_next(&t->rng) % ks);
        key_write(w->keys, cfg->key_size, k);
        msg = &w->puts[0].base;
        method = KV_PUT;
    } else {
        for (int j = 0; j < cfg->txn_ops; j++)
            key_write(w->keys + (size_t)j * cfg->key_size, cfg->key_size,
                      (i * cfg->txn_ops + j) % ks);
    }
    w->start = now_s();
    rc = cetcd_async_call(w->conn, t->q, method, msg, NULL, &w->done);
    if (rc != 0)
        call_failed(t, rc);
}

/* lease_put_second starts the put of a lease-put request once its grant
 * answered (resp, freed here); false when the put could not start. */
static bool lease_put_second(struct worker *w, ProtobufCMessage *resp)
{
    struct thread *t = w->t;
    const struct bench_cfg *cfg = t->sh->cfg;
    w->puts[0].lease = ((Etcdserverpb__LeaseGrantResponse *)resp)->id;
    protobuf_c_message_free_unpacked(resp, NULL);
    key_write(w->keys, cfg->key_size, w->key_index);
    int rc = cetcd_async_call(w->conn, t->q, KV_PUT, &w->puts[0].base, NULL,
                              &w->done);
    if (rc != 0) {
        call_failed(t, rc);
        return false;
    }
    return true;
}

static void on_done(void *arg, const struct cetcd_status *st,
                    ProtobufCMessage *resp)
{
    struct worker *w = arg;
    struct thread *t = w->t;
    double end = now_s();

    if (st->code == 0 && resp != NULL) {
        /* The grant of a lease-put: its put is on its way, or could not
         * start (counted as an error). */
        if (!lease_put_second(w, resp))
            issue(w);
        return;
    }
    assert(resp == NULL);
    t->last_done = end;
    if (st->code == 0) {
        if (cetcd_latency_add(&t->lat, end - w->start) != 0)
            t->lat.errors++;
    } else {
        t->lat.errors++;
        if (t->first_error[0] == '\0')
            snprintf(t->first_error, sizeof(t->first_error), "%.64s: %.255s",
                     cetcd_code_name(st->code), st->message);
    }
    issue(w);
}

/* lease_grant grants w's lease (etcd benchmark's Grant(ctx, 100): TTL
 * --lease-ttl). */
static int lease_grant(struct worker *w)
{
    Etcdserverpb__LeaseGrantRequest q =
        ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    q.ttl = w->t->sh->cfg->lease_ttl;
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st;
    int rc = cetcd_call_unary(w->conn, LEASE_GRANT, &q.base,
                              &etcdserverpb__lease_grant_response__descriptor,
                              &resp, &st);
    if (rc != 0) {
        fprintf(stderr, "cetcd-bench: lease grant: %s: %s\n",
                cetcd_code_name(rc), st.message);
        return rc;
    }
    w->ka.id = ((Etcdserverpb__LeaseGrantResponse *)resp)->id;
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

/* worker_init prepares w's reusable request messages (pointing at its own
 * key buffer and the shared value). */
static int worker_init(struct worker *w, struct thread *t,
                       struct cetcd_client *conn)
{
    const struct bench_cfg *cfg = t->sh->cfg;
    int n = cfg->txn_ops;

    w->t = t;
    w->conn = conn;
    w->done.fn = on_done;
    w->done.arg = w;
    w->keys = mem_calloc((size_t)n, (size_t)cfg->key_size);
    w->puts = mem_calloc((size_t)n, sizeof(*w->puts));
    w->ops = mem_calloc((size_t)n, sizeof(*w->ops));
    w->opp = mem_calloc((size_t)n, sizeof(*w->opp));
    if (!w->keys || !w->puts || !w->ops || !w->opp)
        return CETCD_RESOURCE_EXHAUSTED;
    for (int j = 0; j < n; j++) {
        etcdserverpb__put_request__init(&w->puts[j]);
        w->puts[j].key.data = w->keys + (size_t)j * cfg->key_size;
        w->puts[j].key.len = (size_t)cfg->key_size;
        w->puts[j].value.data = t->sh->value;
        w->puts[j].value.len = (size_t)cfg->val_size;
        etcdserverpb__request_op__init(&w->ops[j]);
        w->ops[j].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        w->ops[j].request_put = &w->puts[j];
        w->opp[j] = &w->ops[j];
    }
    etcdserverpb__txn_request__init(&w->txn);
    w->txn.n_success = (size_t)n;
    w->txn.success = w->opp;
    etcdserverpb__lease_keep_alive_request__init(&w->ka);
    etcdserverpb__lease_grant_request__init(&w->grant);
    w->grant.ttl = cfg->lease_ttl;
    return cfg->op == BENCH_LEASE_KEEPALIVE ? lease_grant(w) : 0;
}

static void worker_free(struct worker *w)
{
    mem_free(w->keys);
    mem_free(w->puts);
    mem_free(w->ops);
    mem_free(w->opp);
}

/* Everything one run owns. */
struct run {
    struct shared sh;             /* shared state */
    struct cetcd_client **conns;  /* cfg->conns connections */
    struct thread *threads;       /* cfg->threads threads */
    struct worker *workers;       /* cfg->clients workers */
};

static void *thread_main(void *arg)
{
    struct thread *t = arg;
    struct run *r = (struct run *)t->sh; /* sh is the first member */
    const struct bench_cfg *cfg = t->sh->cfg;
    int ti = (int)(t - r->threads);

    for (int i = ti; i < cfg->clients; i += cfg->threads)
        issue(&r->workers[i]);
    while (cetcd_async_queue_pending(t->q) > 0)
        cetcd_async_queue_run(t->q, 100);
    return NULL;
}

/* conn_open dials connection i to endpoint i mod n (as etcd's benchmark
 * spreads its connections) and waits until it answers Status. */
static int conn_open(const struct bench_cfg *cfg, int i,
                     struct cetcd_client **out, struct bench_result *res)
{
    char eps[1024], *tok, *save = NULL;
    struct cetcd_client_opts o = {.dial_timeout_ms = cfg->dial_timeout_ms,
                                  .token = cfg->token};
    struct cetcd_endpoint_status es;
    struct cetcd_status st;
    int n = 1, rc;

    for (const char *p = cfg->endpoints; *p; p++)
        n += *p == ',';
    snprintf(eps, sizeof(eps), "%s", cfg->endpoints);
    tok = strtok_r(eps, ",", &save);
    for (int j = 0; tok != NULL && j < i % n; j++)
        tok = strtok_r(NULL, ",", &save);
    o.endpoints = tok ? tok : cfg->endpoints;
    rc = cetcd_client_open(&o, out, &st);
    if (rc == 0)
        rc = cetcd_endpoint_status(*out, &es, &st);
    /* A server without Maintenance still proves the connection is up. */
    if (rc == CETCD_UNIMPLEMENTED)
        rc = 0;
    if (rc != 0)
        snprintf(res->first_error, sizeof(res->first_error), "%.64s: %.255s",
                 o.endpoints, st.message);
    return rc;
}

static int run_setup(struct run *r, const struct bench_cfg *cfg,
                     struct bench_result *res)
{
    int rc = CETCD_RESOURCE_EXHAUSTED;

    r->sh.cfg = cfg;
    r->sh.value = mem_malloc((size_t)cfg->val_size + 1);
    r->conns = mem_calloc((size_t)cfg->conns, sizeof(*r->conns));
    r->threads = mem_calloc((size_t)cfg->threads, sizeof(*r->threads));
    r->workers = mem_calloc((size_t)cfg->clients, sizeof(*r->workers));
    if (!r->sh.value || !r->conns || !r->threads || !r->workers)
        return rc;
    for (int i = 0; i < cfg->val_size; i++)
        r->sh.value[i] = (uint8_t)('a' + (i * 7 + 3) % 26);
    for (int i = 0; i < cfg->conns; i++)
        if ((rc = conn_open(cfg, i, &r->conns[i], res)) != 0)
            return rc;
    for (int i = 0; i < cfg->threads; i++) {
        struct thread *t = &r->threads[i];
        t->sh = &r->sh;
        t->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        if (cetcd_async_queue_open(&t->q) != 0 ||
            cetcd_latency_init(&t->lat, (size_t)(cfg->total / cfg->threads +
                                                 16)) != 0)
            return CETCD_RESOURCE_EXHAUSTED;
    }
    for (int i = 0; i < cfg->clients; i++)
        if (worker_init(&r->workers[i], &r->threads[i % cfg->threads],
                        r->conns[i % cfg->conns]) != 0)
            return CETCD_RESOURCE_EXHAUSTED;
    return 0;
}

static void run_teardown(struct run *r, const struct bench_cfg *cfg)
{
    for (int i = 0; r->workers && i < cfg->clients; i++)
        worker_free(&r->workers[i]);
    for (int i = 0; r->threads && i < cfg->threads; i++) {
        cetcd_async_queue_close(r->threads[i].q);
        cetcd_latency_close(&r->threads[i].lat);
    }
    for (int i = 0; r->conns && i < cfg->conns; i++)
        cetcd_client_close(r->conns[i]);
    mem_free(r->workers);
    mem_free(r->threads);
    mem_free(r->conns);
    mem_free(r->sh.value);
}

static void range_init(struct shared *sh, const struct bench_cfg *cfg)
{
    etcdserverpb__range_request__init(&sh->range);
    if (cfg->op != BENCH_RANGE)
        return;
    sh->range.key.data = (uint8_t *)cfg->range_key;
    sh->range.key.len = strlen(cfg->range_key);
    if (cfg->range_end != NULL) {
        sh->range.range_end.data = (uint8_t *)cfg->range_end;
        sh->range.range_end.len = strlen(cfg->range_end);
    }
    sh->range.serializable = cfg->serializable;
    sh->range.limit = cfg->limit;
    sh->range.count_only = cfg->count_only;
}

int bench_run(const struct bench_cfg *cfg, struct bench_result *res)
{
    struct run r;
    double start, end = 0;
    int rc;

    assert(cfg->clients >= cfg->threads && cfg->clients >= cfg->conns);
    memset(&r, 0, sizeof(r));
    memset(res, 0, sizeof(*res));
    atomic_init(&r.sh.remaining, cfg->total);
    range_init(&r.sh, cfg);
    rc = run_setup(&r, cfg, res);
    if (rc == 0)
        rc = cetcd_latency_init(&res->lat, (size_t)cfg->total);
    start = now_s();
    for (int i = 0; rc == 0 && i < cfg->threads; i++)
        pthread_create(&r.threads[i].id, NULL, thread_main, &r.threads[i]);
    for (int i = 0; rc == 0 && i < cfg->threads; i++) {
        struct thread *t = &r.threads[i];
        pthread_join(t->id, NULL);
        end = t->last_done > end ? t->last_done : end;
        cetcd_latency_merge(&res->lat, &t->lat);
        if (res->first_error[0] == '\0')
            memcpy(res->first_error, t->first_error, sizeof(t->first_error));
    }
    res->total_s = end > start ? end - start : 0;
    run_teardown(&r, cfg);
    return rc;
}
