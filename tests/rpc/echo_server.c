/*
 * rpc_echo_server.c - a test server for the gRPC runtime (src/api/rpc.h),
 * driven by tests/integration/test_rpc_runtime.py.
 *
 * It serves /etcdserverpb.KV/Range with a fixed RangeResponse that echoes
 * the key (value "echo:<key>"), and /etcdserverpb.Watch/Watch with a toy
 * echo of create/cancel requests.  Keys select behaviours:
 *   "async/<ms>/..."  answered from another thread after <ms> ms
 *   "token"           value is the request's "token" metadata
 *   "deadline"        value is the remaining deadline in ms, or "none"
 *   "error"           FAILED_PRECONDITION "etcdserver: echo error"
 *   "big/<n>"         value is n bytes of 'b' (large replies)
 * Usage: rpc_echo_server [--listen URL]... [--threads N]
 *        [--max-request-bytes N] [--preface-timeout-ms N] [--max-streams N]
 * It prints "READY <port>" once serving and stops cleanly on SIGTERM,
 * SIGINT or end of stdin.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc.h"
#include "etcdserverpb/rpc.pb-c.h"

/* One call waiting for the delayer thread. */
struct pending {
    struct rpc_call *call;              /* answered by the delayer */
    Etcdserverpb__RangeRequest *req;    /* owned; freed after answering */
    int64_t due_ns;                     /* CLOCK_MONOTONIC */
    struct pending *next;               /* list link */
};

/* The delayer: one thread that answers calls when they are due. */
static struct {
    pthread_mutex_t mu;                 /* guards the fields below */
    pthread_cond_t cond;                /* signalled on push and stop */
    struct pending *head;               /* unsorted list */
    int stop;                           /* exit once the list is empty */
} delayer = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void answer(struct rpc_call *call, const Etcdserverpb__RangeRequest *req)
{
    Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    Etcdserverpb__RangeResponse resp = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT, *kvs[1] = {&kv};
    char val[512];
    size_t n = 0;
    const char *key = (const char *)req->key.data;
    int klen = (int)req->key.len;
    if (klen == 5 && memcmp(key, "token", 5) == 0) {
        const char *t = rpc_call_metadata(call, "token", &n);
        snprintf(val, sizeof(val), "%.*s", t ? (int)n : 0, t ? t : "");
    } else if (klen == 8 && memcmp(key, "deadline", 8) == 0) {
        int64_t d = rpc_call_deadline_ns(call);
        if (d == INT64_MAX)
            snprintf(val, sizeof(val), "none");
        else
            snprintf(val, sizeof(val), "%lld",
                     (long long)((d - now_ns()) / 1000000));
    } else {
        snprintf(val, sizeof(val), "echo:%.*s", klen < 400 ? klen : 400, key);
    }
    hdr.cluster_id = 1;
    hdr.member_id = 2;
    hdr.revision = 3;
    hdr.raft_term = 4;
    kv.key = req->key;
    kv.value.data = (uint8_t *)val;
    kv.value.len = strlen(val);
    uint8_t *big = NULL;
    if (klen > 4 && klen < 16 && memcmp(key, "big/", 4) == 0) {
        char num[16];
        memcpy(num, key + 4, (size_t)klen - 4);
        num[klen - 4] = '\0';
        size_t want = (size_t)strtoul(num, NULL, 10);
        big = malloc(want ? want : 1);
        if (big != NULL) {
            memset(big, 'b', want);
            kv.value.data = big;
            kv.value.len = want;
        }
    }
    kv.create_revision = kv.mod_revision = 3;
    kv.version = 1;
    resp.header = &hdr;
    resp.n_kvs = 1;
    resp.kvs = kvs;
    resp.count = 1;
    rpc_call_reply(call, &resp.base);
    free(big);
}

static void *delayer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&delayer.mu);
    for (;;) {
        struct pending **pp = &delayer.head, *due = NULL;
        for (; *pp != NULL; pp = &(*pp)->next)
            if ((*pp)->due_ns <= now_ns()) {
                due = *pp;
                *pp = due->next;
                break;
            }
        if (due != NULL) {
            pthread_mutex_unlock(&delayer.mu);
            answer(due->call, due->req);
            etcdserverpb__range_request__free_unpacked(due->req, NULL);
            free(due);
            pthread_mutex_lock(&delayer.mu);
            continue;
        }
        if (delayer.stop && delayer.head == NULL)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000; /* 1 ms tick is plenty for a test. */
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&delayer.cond, &delayer.mu, &ts);
    }
    pthread_mutex_unlock(&delayer.mu);
    return NULL;
}

static void range(struct rpc_call *call, const uint8_t *req, size_t len,
                  void *ctx)
{
    (void)ctx;
    Etcdserverpb__RangeRequest *r =
        etcdserverpb__range_request__unpack(NULL, len, req);
    if (r == NULL) {
        rpc_call_reply_error(call, GRPC_STATUS_INVALID_ARGUMENT,
                             "bad RangeRequest");
        return;
    }
    if (r->key.len == 5 && memcmp(r->key.data, "error", 5) == 0) {
        rpc_call_reply_error(call, GRPC_STATUS_FAILED_PRECONDITION,
                             "etcdserver: echo error");
    } else if (r->key.len > 6 && memcmp(r->key.data, "error:", 6) == 0) {
        char msg[256]; /* the rest of the key is the message */
        snprintf(msg, sizeof(msg), "%.*s", (int)(r->key.len - 6),
                 (const char *)r->key.data + 6);
        rpc_call_reply_error(call, GRPC_STATUS_FAILED_PRECONDITION, msg);
    } else if (r->key.len > 6 && memcmp(r->key.data, "async/", 6) == 0) {
        char ms[16];
        snprintf(ms, sizeof(ms), "%.*s", (int)(r->key.len - 6),
                 (const char *)r->key.data + 6);
        struct pending *p = calloc(1, sizeof(*p));
        p->call = call;
        p->req = r;
        p->due_ns = now_ns() + atol(ms) * 1000000;
        pthread_mutex_lock(&delayer.mu);
        p->next = delayer.head;
        delayer.head = p;
        pthread_cond_signal(&delayer.cond);
        pthread_mutex_unlock(&delayer.mu);
        return; /* The delayer owns call and r now. */
    } else {
        answer(call, r);
    }
    etcdserverpb__range_request__free_unpacked(r, NULL);
}

/* Watch echo: created/canceled answers and one PUT event per create. */
static void watch_open(struct rpc_stream *s, void *ctx)
{
    (void)ctx;
    rpc_stream_data_set(s, (void *)0);
}

static void watch_create(struct rpc_stream *s, Etcdserverpb__WatchRequest *w)
{
    Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    Etcdserverpb__WatchResponse resp = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    Mvccpb__Event ev = MVCCPB__EVENT__INIT, *evs[1] = {&ev};
    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT;
    intptr_t id = (intptr_t)rpc_stream_data_get(s);
    rpc_stream_data_set(s, (void *)(id + 1));
    hdr.revision = 3;
    resp.header = &hdr;
    resp.watch_id = id;
    resp.created = 1;
    rpc_stream_send(s, &resp.base);
    kv.key = w->create_request->key;
    kv.value.data = (uint8_t *)"v";
    kv.value.len = 1;
    kv.mod_revision = kv.create_revision = 4;
    kv.version = 1;
    ev.kv = &kv;
    resp.created = 0;
    resp.n_events = 1;
    resp.events = evs;
    rpc_stream_send(s, &resp.base);
}

static void watch_message(struct rpc_stream *s, const uint8_t *msg,
                          size_t len, void *ctx)
{
    (void)ctx;
    if (msg == NULL) {
        rpc_stream_finish(s, GRPC_STATUS_OK, NULL);
        return;
    }
    Etcdserverpb__WatchRequest *w =
        etcdserverpb__watch_request__unpack(NULL, len, msg);
    if (w == NULL) {
        rpc_stream_finish(s, GRPC_STATUS_INVALID_ARGUMENT, "bad request");
        return;
    }
    if (w->request_union_case ==
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST) {
        watch_create(s, w);
    } else if (w->request_union_case ==
               ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST) {
        Etcdserverpb__WatchResponse resp = ETCDSERVERPB__WATCH_RESPONSE__INIT;
        resp.watch_id = w->cancel_request->watch_id;
        resp.canceled = 1;
        rpc_stream_send(s, &resp.base);
    }
    etcdserverpb__watch_request__free_unpacked(w, NULL);
}

static void watch_close(struct rpc_stream *s, bool cancelled, void *ctx)
{
    (void)cancelled;
    (void)ctx;
    rpc_stream_release(s);
}

static const struct rpc_stream_ops watch_ops = {
    .on_open = watch_open,
    .on_message = watch_message,
    .on_close = watch_close,
};

static void *stdin_main(void *arg)
{
    char buf[256];
    (void)arg;
    while (read(0, buf, sizeof(buf)) > 0) {
    }
    kill(getpid(), SIGTERM);
    return NULL;
}

int main(int argc, char **argv)
{
    struct rpc_server_config cfg = {0};
    struct rpc_server *srv;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--listen") == 0 && cfg.urls_n < RPC_URLS_MAX)
            cfg.urls[cfg.urls_n++] = argv[i + 1];
        else if (strcmp(argv[i], "--threads") == 0)
            cfg.threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--max-request-bytes") == 0)
            cfg.max_request_bytes = (size_t)atol(argv[i + 1]);
        else if (strcmp(argv[i], "--preface-timeout-ms") == 0)
            cfg.preface_timeout_ms = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--max-streams") == 0)
            cfg.max_concurrent_streams = (uint32_t)atol(argv[i + 1]);
    }
    if (cfg.urls_n == 0)
        cfg.urls[cfg.urls_n++] = "http://127.0.0.1:0";
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t delayer_thread, stdin_thread;
    pthread_create(&delayer_thread, NULL, delayer_main, NULL);
    int rv = rpc_server_create(&cfg, &srv);
    if (rv == 0)
        rv = rpc_server_register_unary(srv, "/etcdserverpb.KV/Range", range,
                                       NULL);
    if (rv == 0)
        rv = rpc_server_register_stream(srv, "/etcdserverpb.Watch/Watch",
                                        &watch_ops, NULL);
    if (rv == 0 && (rv = rpc_server_start(srv)) != 0)
        rpc_server_close(srv);
    if (rv != 0) {
        fprintf(stderr, "rpc_echo_server: start failed: %d\n", rv);
        return 1;
    }
    printf("READY %d\n", rpc_server_port(srv, 0));
    fflush(stdout);
    pthread_create(&stdin_thread, NULL, stdin_main, NULL);
    pthread_detach(stdin_thread);
    int sig;
    sigwait(&set, &sig);
    rpc_server_close(srv); /* The delayer keeps answering meanwhile. */
    pthread_mutex_lock(&delayer.mu);
    delayer.stop = 1;
    pthread_cond_signal(&delayer.cond);
    pthread_mutex_unlock(&delayer.mu);
    pthread_join(delayer_thread, NULL);
    fprintf(stderr, "rpc_echo_server: clean exit\n");
    return 0;
}
