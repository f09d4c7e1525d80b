/*
 * client_raw.c - libcetcd's raw calls and streams (cetcd_async_call_raw,
 * cetcd_raw_stream_*) against a live cetcd or etcd.
 *
 * Goal: what a gRPC proxy relies on: request and reply bytes passed
 * through (Put/Range round trip, an empty request), the server's errors
 * with code and message unchanged, the caller's metadata instead of the
 * client's token, the caller's deadline, endpoint failover (a dead first
 * endpoint; a mutation cut off by a dying server is not sent again), and
 * callback-mode streams: Watch (created, then events), pause (no on_msg
 * while paused, all in order after the resume, also with a pause from
 * inside on_msg, toggled while events flow, on a call that ended while
 * paused, on a server-streaming call, and closed while paused), close
 * from inside on_msg, from another thread and with nobody running the
 * queue, LeaseKeepAlive, a server-streaming Snapshot, the bounds, and the
 * end a killed server gives.  Every stream's on_close must run exactly
 * once and the queue's pending count must drop to 0 (run under ASan:
 * nothing leaks).
 * Method: one case per run, named on the command line; a thread runs the
 * async queue ("the runner") unless the case says otherwise, the main
 * thread waits on a condition variable for what the callbacks record;
 * keys under a prefix unique to this run; every wait at most 10 s.  The
 * Python side (tests/integration/test_client_raw.py) starts the servers,
 * enables auth, kills servers on "READY" and checks the snapshot's
 * SHA-256 trailer.
 * Usage: client_raw <endpoints> <case> [args]; cases: unary, errors,
 * auth <user> <password>, deadline, failover, noresend (prints READY: kill
 * the first endpoint's server), watch, pause, pause-end,
 * close-inside, close-thread, close-idle, keepalive, bounds,
 * snapshot <out-file>, killed (prints READY: kill the server).  Exit 0
 * and "OK" = all checks passed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cetcd/cetcd.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

#define RANGE "/etcdserverpb.KV/Range"
#define PUT "/etcdserverpb.KV/Put"
#define WATCH "/etcdserverpb.Watch/Watch"
#define KEEPALIVE "/etcdserverpb.Lease/LeaseKeepAlive"
#define SNAPSHOT "/etcdserverpb.Maintenance/Snapshot"
#define LOCK "/v3lockpb.Lock/Lock"
#define WAIT_MS 10000

static int failures;
static char pfx[64]; /* "cr<pid>/" */

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                   \
        }                                                                 \
    } while (0)

static struct cetcd_client *cli;
static struct cetcd_async_queue *q;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static atomic_bool stop_runner;
static pthread_t runner;
static bool runner_on;

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *runner_run(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_runner))
        cetcd_async_queue_run(q, 20);
    return NULL;
}

static void runner_start(void)
{
    atomic_store(&stop_runner, false);
    CHECK(pthread_create(&runner, NULL, runner_run, NULL) == 0);
    runner_on = true;
}

static void runner_stop(void)
{
    if (!runner_on)
        return;
    atomic_store(&stop_runner, true);
    pthread_join(runner, NULL);
    runner_on = false;
}

/* wait_for waits (mu held) until *flag is true or ms passed. */
static bool wait_for(volatile bool *flag, int ms)
{
    struct timespec dl;

    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    while (!*flag)
        if (pthread_cond_timedwait(&cv, &mu, &dl) != 0)
            break;
    return *flag;
}

/* drain waits until no call or stream is pending on the queue. */
static void drain(void)
{
    int64_t end = now_ns() + (int64_t)WAIT_MS * 1000000;

    while (cetcd_async_queue_pending(q) > 0 && now_ns() < end) {
        if (runner_on)
            usleep(10 * 1000);
        else
            cetcd_async_queue_run(q, 20);
    }
    CHECK(cetcd_async_queue_pending(q) == 0);
}

/* ------------------------------------------------------------------------
 * Raw unary calls, waited for
 * ---------------------------------------------------------------------- */

/* One raw unary call's outcome. */
struct result {
    volatile bool done;      /* the callback ran */
    int calls;               /* how often it ran */
    struct cetcd_status st;  /* its status */
    uint8_t *bytes;          /* the reply bytes (malloc), or NULL */
    size_t len;              /* their length */
    bool resp_null;          /* resp was NULL */
};

static void result_done(void *arg, const struct cetcd_status *st,
                        const uint8_t *resp, size_t len)
{
    struct result *r = arg;

    pthread_mutex_lock(&mu);
    r->calls++;
    r->st = *st;
    r->resp_null = resp == NULL;
    r->bytes = malloc(len + 1);
    if (r->bytes != NULL && len > 0)
        memcpy(r->bytes, resp, len);
    r->len = len;
    r->done = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* raw_call sends len bytes to method with o and waits for the outcome;
 * returns its code (-1: not started or no answer).  The caller frees
 * r->bytes. */
static int raw_call(const char *method, const uint8_t *req, size_t len,
                    const struct cetcd_raw_opts *o, struct result *r)
{
    bool ok;

    memset(r, 0, sizeof(*r));
    if (cetcd_async_call_raw(cli, q, method, req, len, o, result_done, r) !=
        0) {
        fprintf(stderr, "cannot start %s\n", method);
        return -1;
    }
    pthread_mutex_lock(&mu);
    ok = wait_for(&r->done, WAIT_MS);
    pthread_mutex_unlock(&mu);
    CHECK(ok);
    if (!ok)
        return -1;
    CHECK(r->calls == 1);
    CHECK((r->st.code == 0) == !r->resp_null);
    if (r->st.code != 0)
        fprintf(stderr, "%s: %s \"%s\"\n", method, cetcd_code_name(r->st.code),
                r->st.message);
    return r->st.code;
}

/* pb_call packs req, calls method and decodes the reply with desc;
 * returns the reply (NULL on error, *code_out the code). */
static void *pb_call(const char *method, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *desc,
                     const struct cetcd_raw_opts *o, int *code_out,
                     struct cetcd_status *st_out)
{
    size_t len = protobuf_c_message_get_packed_size(req);
    uint8_t *buf = malloc(len + 1);
    struct result r;
    void *resp = NULL;
    int code;

    protobuf_c_message_pack(req, buf);
    code = raw_call(method, buf, len, o, &r);
    free(buf);
    if (code == 0) {
        resp = protobuf_c_message_unpack(desc, NULL, r.len, r.bytes);
        CHECK(resp != NULL);
    }
    if (code_out != NULL)
        *code_out = code;
    if (st_out != NULL)
        *st_out = r.st;
    free(r.bytes);
    return resp;
}

static void put(const char *key, const void *val, size_t len)
{
    struct cetcd_status st;

    if (cetcd_put(cli, key, strlen(key), val, len, NULL, NULL, &st) != 0)
        fprintf(stderr, "put %s: %s\n", key, st.message);
}

static int64_t lease_grant(int64_t ttl)
{
    Etcdserverpb__LeaseGrantRequest req =
        ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    Etcdserverpb__LeaseGrantResponse *r;
    int64_t id = 0;

    req.ttl = ttl;
    r = pb_call("/etcdserverpb.Lease/LeaseGrant", &req.base,
                &etcdserverpb__lease_grant_response__descriptor, NULL, NULL,
                NULL);
    if (r != NULL)
        id = r->id;
    CHECK(id != 0);
    if (r != NULL)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    return id;
}

static void lease_revoke(int64_t id)
{
    Etcdserverpb__LeaseRevokeRequest req =
        ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    ProtobufCMessage *r;

    req.id = id;
    r = pb_call("/etcdserverpb.Lease/LeaseRevoke", &req.base,
                &etcdserverpb__lease_revoke_response__descriptor, NULL, NULL,
                NULL);
    if (r != NULL)
        protobuf_c_message_free_unpacked(r, NULL);
}

/* range_code makes a raw Range of key with o; returns the code. */
static int range_code(const char *key, const struct cetcd_raw_opts *o,
                      struct cetcd_status *st)
{
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ProtobufCMessage *r;
    int code = -1;

    req.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
    r = pb_call(RANGE, &req.base, &etcdserverpb__range_response__descriptor,
                o, &code, st);
    if (r != NULL)
        protobuf_c_message_free_unpacked(r, NULL);
    return code;
}

/* ------------------------------------------------------------------------
 * Raw streams: what the callbacks record
 * ---------------------------------------------------------------------- */

enum kind { K_WATCH, K_KA, K_SNAP };

/* One stream's record; fields under mu. */
struct rec {
    struct cetcd_raw_stream *s; /* the stream */
    enum kind kind;             /* how to decode its messages */
    int msgs;                   /* on_msg calls */
    int closes;                 /* on_close calls */
    int msgs_after_close;       /* on_msg calls after on_close */
    volatile bool closed;       /* on_close ran */
    struct cetcd_status final;  /* its status */
    bool created, canceled;     /* K_WATCH: a created / canceled reply */
    char cancel_reason[128];    /* K_WATCH: its reason */
    int events;                 /* K_WATCH: events seen */
    int64_t last_rev;           /* K_WATCH: last event's mod_revision */
    bool out_of_order;          /* K_WATCH: an event went backwards */
    int64_t ka_id, ka_ttl;      /* K_KA: the last answer */
    uint8_t *blob;              /* K_SNAP: the snapshot so far (malloc) */
    size_t blob_len;            /* its length */
    size_t blob_cap;            /* its allocated size */
    uint64_t remaining;         /* K_SNAP: the last remaining_bytes */
    bool pause_in_msg;          /* pause at the next on_msg */
    bool close_in_msg;          /* close at the next on_msg */
    volatile bool want;         /* a waiter's predicate (set by on_msg) */
    int want_events;            /* K_WATCH: want once this many events */
    int want_msgs;              /* want once this many messages */
};

static void watch_msg(struct rec *r, const uint8_t *msg, size_t len)
{
    Etcdserverpb__WatchResponse *w =
        etcdserverpb__watch_response__unpack(NULL, len, msg);

    CHECK(w != NULL);
    if (w == NULL)
        return;
    r->created |= w->created;
    if (w->canceled) {
        r->canceled = true;
        snprintf(r->cancel_reason, sizeof(r->cancel_reason), "%s",
                 w->cancel_reason ? w->cancel_reason : "");
    }
    for (size_t i = 0; i < w->n_events; i++) {
        int64_t rev = w->events[i]->kv->mod_revision;

        if (rev <= r->last_rev)
            r->out_of_order = true;
        r->last_rev = rev;
        r->events++;
    }
    etcdserverpb__watch_response__free_unpacked(w, NULL);
}

static void ka_msg(struct rec *r, const uint8_t *msg, size_t len)
{
    Etcdserverpb__LeaseKeepAliveResponse *k =
        etcdserverpb__lease_keep_alive_response__unpack(NULL, len, msg);

    CHECK(k != NULL);
    if (k == NULL)
        return;
    r->ka_id = k->id;
    r->ka_ttl = k->ttl;
    etcdserverpb__lease_keep_alive_response__free_unpacked(k, NULL);
}

static void snap_msg(struct rec *r, const uint8_t *msg, size_t len)
{
    Etcdserverpb__SnapshotResponse *m =
        etcdserverpb__snapshot_response__unpack(NULL, len, msg);
    uint8_t *nb;

    CHECK(m != NULL);
    if (m == NULL)
        return;
    if (r->blob_len + m->blob.len + 1 > r->blob_cap) {
        size_t cap = 2 * (r->blob_len + m->blob.len + 1);

        nb = realloc(r->blob, cap);
        CHECK(nb != NULL);
        if (nb != NULL) {
            r->blob = nb;
            r->blob_cap = cap;
        }
    }
    if (r->blob_len + m->blob.len < r->blob_cap) {
        memcpy(r->blob + r->blob_len, m->blob.data, m->blob.len);
        r->blob_len += m->blob.len;
    }
    r->remaining = m->remaining_bytes;
    etcdserverpb__snapshot_response__free_unpacked(m, NULL);
}

static void on_msg(void *arg, const uint8_t *msg, size_t len)
{
    struct rec *r = arg;
    struct cetcd_raw_stream *close_it = NULL;

    pthread_mutex_lock(&mu);
    r->msgs++;
    if (r->closed)
        r->msgs_after_close++;
    if (r->kind == K_WATCH)
        watch_msg(r, msg, len);
    else if (r->kind == K_KA)
        ka_msg(r, msg, len);
    else
        snap_msg(r, msg, len);
    if (r->pause_in_msg) {
        r->pause_in_msg = false;
        cetcd_raw_stream_pause(r->s, true);
    }
    if (r->close_in_msg) {
        r->close_in_msg = false;
        close_it = r->s;
    }
    if ((r->want_events > 0 && r->events >= r->want_events) ||
        (r->want_msgs > 0 && r->msgs >= r->want_msgs))
        r->want = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (close_it != NULL)
        cetcd_raw_stream_close(close_it);
}

static void on_close(void *arg, const struct cetcd_status *st)
{
    struct rec *r = arg;

    pthread_mutex_lock(&mu);
    r->closes++;
    r->final = *st;
    r->closed = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* open_rec opens method with r as the callbacks' argument; md/md_n and
 * deadline as given (md NULL: the client's). */
static bool open_rec(struct rec *r, enum kind kind, const char *method,
                     const struct cetcd_md *md, size_t md_n,
                     int64_t deadline, size_t send_max)
{
    struct cetcd_raw_stream_opts o = {
        .queue = q, .md = md, .md_n = md_n, .deadline_mono_ns = deadline,
        .on_msg = on_msg, .on_close = on_close, .arg = r,
        .send_max = send_max};
    struct cetcd_status st;
    int rc;

    memset(r, 0, sizeof(*r));
    r->kind = kind;
    pthread_mutex_lock(&mu); /* the callbacks must see r->s */
    rc = cetcd_raw_stream_open(cli, method, &o, &r->s, &st);
    pthread_mutex_unlock(&mu);
    if (rc != 0)
        fprintf(stderr, "open %s: %s %s\n", method, cetcd_code_name(rc),
                st.message);
    CHECK(rc == 0 && r->s != NULL);
    return rc == 0;
}

/* send_pb packs m and sends it on r's stream; returns the code. */
static int send_pb(struct rec *r, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len + 1);
    struct cetcd_status st;
    int rc;

    protobuf_c_message_pack(m, buf);
    rc = cetcd_raw_stream_send(r->s, buf, len, &st);
    free(buf);
    return rc;
}

/* watch_create asks r's Watch stream for every key under pfx + sub. */
static int watch_create(struct rec *r, const char *sub)
{
    Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
    Etcdserverpb__WatchCreateRequest cr =
        ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    char key[128], end[128];

    snprintf(key, sizeof(key), "%s%s", pfx, sub);
    snprintf(end, sizeof(end), "%s%s", pfx, sub);
    end[strlen(end) - 1]++;
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    cr.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
    cr.range_end = (ProtobufCBinaryData){strlen(end), (uint8_t *)end};
    return send_pb(r, &req.base);
}

/* wait_want waits until on_msg set r->want (then clears it). */
static bool wait_want(struct rec *r)
{
    bool ok;

    pthread_mutex_lock(&mu);
    ok = wait_for(&r->want, WAIT_MS);
    r->want = false;
    r->want_events = r->want_msgs = 0;
    pthread_mutex_unlock(&mu);
    return ok;
}

static void wait_closed(struct rec *r, int code);

/* watch_open opens a Watch stream on pfx + sub and waits for created;
 * on failure the stream is closed (and its end awaited). */
static bool watch_open(struct rec *r, const char *sub)
{
    bool ok;

    if (!open_rec(r, K_WATCH, WATCH, NULL, 0, 0, 0))
        return false;
    pthread_mutex_lock(&mu);
    r->want_msgs = 1;
    pthread_mutex_unlock(&mu);
    CHECK(watch_create(r, sub) == 0);
    CHECK(wait_want(r));
    pthread_mutex_lock(&mu);
    ok = r->created && !r->canceled;
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "watch not created; ended: %d %s \"%s\"\n",
                r->closed, cetcd_code_name(r->final.code), r->final.message);
    pthread_mutex_unlock(&mu);
    if (!ok) {
        cetcd_raw_stream_close(r->s);
        wait_closed(r, -1);
    }
    return ok;
}

/* wait_closed waits for r's on_close; then checks it ran once with code
 * (-1: any). */
static void wait_closed(struct rec *r, int code)
{
    pthread_mutex_lock(&mu);
    CHECK(wait_for(&r->closed, WAIT_MS));
    CHECK(r->closes == 1);
    CHECK(r->msgs_after_close == 0);
    if (code >= 0 && r->final.code != code)
        fprintf(stderr, "on_close: %s \"%s\", want %s\n",
                cetcd_code_name(r->final.code), r->final.message,
                cetcd_code_name(code));
    CHECK(code < 0 || r->final.code == code);
    pthread_mutex_unlock(&mu);
}

/* puts writes n keys pfx + sub + i with values of len bytes. */
static void puts_n(const char *sub, int from, int n, size_t len)
{
    char key[128];
    char *val = malloc(len + 1);

    memset(val, 'v', len);
    for (int i = from; i < from + n; i++) {
        snprintf(key, sizeof(key), "%s%s%04d", pfx, sub, i);
        put(key, val, len);
    }
    free(val);
}

/* ------------------------------------------------------------------------
 * Cases: raw unary calls
 * ---------------------------------------------------------------------- */

/* Put and Range as bytes (a value with NUL and 0xff bytes), an empty
 * request (StatusRequest), a missing key, an unknown method. */
static void case_unary(void)
{
    Etcdserverpb__PutRequest pr = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__PutResponse *pu;
    Etcdserverpb__RangeResponse *ra;
    Etcdserverpb__StatusResponse *su;
    static const uint8_t val[] = {0, 1, 0xff, 'x', 0};
    char key[128];
    struct result r;
    int code;

    snprintf(key, sizeof(key), "%su/k", pfx);
    pr.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
    pr.value = (ProtobufCBinaryData){sizeof(val), (uint8_t *)val};
    pu = pb_call(PUT, &pr.base, &etcdserverpb__put_response__descriptor,
                 NULL, &code, NULL);
    CHECK(code == 0 && pu != NULL && pu->header != NULL &&
          pu->header->revision > 0);
    rr.key = pr.key;
    ra = pb_call(RANGE, &rr.base, &etcdserverpb__range_response__descriptor,
                 NULL, &code, NULL);
    CHECK(code == 0 && ra != NULL && ra->n_kvs == 1 && ra->count == 1);
    if (ra != NULL && ra->n_kvs == 1 && pu != NULL && pu->header != NULL) {
        CHECK(ra->kvs[0]->value.len == sizeof(val) &&
              memcmp(ra->kvs[0]->value.data, val, sizeof(val)) == 0);
        CHECK(ra->kvs[0]->mod_revision == pu->header->revision);
    }
    if (pu != NULL)
        protobuf_c_message_free_unpacked(&pu->base, NULL);
    if (ra != NULL)
        protobuf_c_message_free_unpacked(&ra->base, NULL);
    /* an empty request: StatusRequest has no fields */
    CHECK(raw_call("/etcdserverpb.Maintenance/Status", NULL, 0, NULL, &r) ==
          0);
    su = etcdserverpb__status_response__unpack(NULL, r.len, r.bytes);
    CHECK(su != NULL && su->version != NULL && su->version[0] != '\0');
    if (su != NULL)
        etcdserverpb__status_response__free_unpacked(su, NULL);
    free(r.bytes);
    snprintf(key, sizeof(key), "%su/missing", pfx);
    CHECK(range_code(key, NULL, NULL) == 0);
    CHECK(raw_call("/etcdserverpb.KV/NoSuchMethod", NULL, 0, NULL, &r) ==
          CETCD_UNIMPLEMENTED);
    free(r.bytes);
    CHECK(cetcd_async_queue_pending(q) == 0);
}

/* The server's errors pass through with code and message unchanged. */
static void case_errors(void)
{
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__PutRequest pr = ETCDSERVERPB__PUT_REQUEST__INIT;
    struct cetcd_status st;
    char key[128];
    int code;

    snprintf(key, sizeof(key), "%se/k", pfx);
    rr.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
    rr.revision = (int64_t)1 << 40;
    CHECK(pb_call(RANGE, &rr.base, &etcdserverpb__range_response__descriptor,
                  NULL, &code, &st) == NULL);
    CHECK(code == CETCD_OUT_OF_RANGE);
    CHECK(strcmp(st.message, "etcdserver: mvcc: required revision is a "
                             "future revision") == 0);
    CHECK(pb_call(PUT, &pr.base, &etcdserverpb__put_response__descriptor,
                  NULL, &code, &st) == NULL);
    CHECK(code == CETCD_INVALID_ARGUMENT);
    CHECK(strcmp(st.message, "etcdserver: key is not provided") == 0);
    pr.key = rr.key;
    pr.lease = 0x7777;
    CHECK(pb_call(PUT, &pr.base, &etcdserverpb__put_response__descriptor,
                  NULL, &code, &st) == NULL);
    CHECK(code == CETCD_NOT_FOUND);
    CHECK(strcmp(st.message, "etcdserver: requested lease not found") == 0);
}

/* authenticate returns a token for user (malloc), or NULL. */
static char *authenticate(const char *user, const char *pw)
{
    Etcdserverpb__AuthenticateRequest ar =
        ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    Etcdserverpb__AuthenticateResponse *au;
    char *tok = NULL;

    ar.name = (char *)user;
    ar.password = (char *)pw;
    au = pb_call("/etcdserverpb.Auth/Authenticate", &ar.base,
                 &etcdserverpb__authenticate_response__descriptor, NULL, NULL,
                 NULL);
    CHECK(au != NULL && au->token != NULL && au->token[0] != '\0');
    if (au != NULL && au->token != NULL)
        tok = strdup(au->token);
    if (au != NULL)
        protobuf_c_message_free_unpacked(&au->base, NULL);
    return tok;
}

/* auth_watch opens a Watch stream on "a/" with md[0..md_n) and says
 * whether the server accepted the watcher (else it must be refused for
 * the missing user); then closes it. */
static bool auth_watch(const struct cetcd_md *md, size_t md_n)
{
    struct rec r;
    bool ok;

    if (!open_rec(&r, K_WATCH, WATCH, md, md_n, 0, 0))
        return false;
    pthread_mutex_lock(&mu);
    r.want_msgs = 1;
    pthread_mutex_unlock(&mu);
    CHECK(watch_create(&r, "a/") == 0 && wait_want(&r));
    pthread_mutex_lock(&mu);
    ok = r.created && !r.canceled;
    if (!ok)
        CHECK(strstr(r.cancel_reason, "user name is empty") != NULL);
    pthread_mutex_unlock(&mu);
    cetcd_raw_stream_close(r.s);
    wait_closed(&r, CETCD_CANCELLED);
    return ok;
}

/* md replaces the client's token (auth is enabled by the test). */
static void case_auth(const char *endpoints, const char *user,
                      const char *pw)
{
    struct cetcd_client_opts co = {.endpoints = endpoints};
    struct cetcd_client *plain = cli, *with = NULL;
    struct cetcd_md md[1] = {{"token", NULL}};
    struct cetcd_raw_opts o = {.md = md, .md_n = 1};
    struct cetcd_raw_opts none = {.md = md, .md_n = 0};
    struct cetcd_status st;
    char key[128], *tok = authenticate(user, pw);

    if (tok == NULL)
        return;
    md[0].value = tok;
    snprintf(key, sizeof(key), "%sa/k", pfx);
    /* the client has no token: md's works, none fails as the server says */
    CHECK(range_code(key, &o, NULL) == 0);
    CHECK(range_code(key, NULL, &st) == CETCD_INVALID_ARGUMENT);
    CHECK(strcmp(st.message, "etcdserver: user name is empty") == 0);
    md[0].value = "not-a-token";
    CHECK(range_code(key, &o, &st) == CETCD_UNAUTHENTICATED);
    CHECK(strcmp(st.message, "etcdserver: invalid auth token") == 0);
    md[0].value = tok;
    /* streams alike */
    CHECK(auth_watch(md, 1));
    CHECK(!auth_watch(NULL, 0));
    /* a client with the token: md_n 0 sends none at all */
    co.token = tok;
    CHECK(cetcd_client_open(&co, &with, &st) == 0);
    if (with != NULL) {
        cli = with;
        CHECK(range_code(key, NULL, NULL) == 0);
        CHECK(range_code(key, &none, &st) == CETCD_INVALID_ARGUMENT);
        CHECK(strcmp(st.message, "etcdserver: user name is empty") == 0);
        CHECK(auth_watch(NULL, 0));
        CHECK(!auth_watch(md, 0));
        drain();
        cli = plain;
        cetcd_client_close(with);
    }
    free(tok);
}

static int lock_code(const char *name, int64_t lease,
                     const struct cetcd_raw_opts *o)
{
    V3lockpb__LockRequest lr = V3LOCKPB__LOCK_REQUEST__INIT;
    ProtobufCMessage *resp;
    int code = -1;

    lr.name = (ProtobufCBinaryData){strlen(name), (uint8_t *)name};
    lr.lease = lease;
    resp = pb_call(LOCK, &lr.base, &v3lockpb__lock_response__descriptor, o,
                   &code, NULL);
    if (resp != NULL)
        protobuf_c_message_free_unpacked(resp, NULL);
    return code;
}

/* The caller's deadline: a Lock waiting on a held lock, a Watch stream,
 * a deadline already past. */
static void case_deadline(void)
{
    int64_t l1 = lease_grant(60), l2 = lease_grant(60), t0, ms;
    struct cetcd_raw_opts o = {0};
    struct rec r;
    char name[128];

    snprintf(name, sizeof(name), "%sdl", pfx);
    CHECK(lock_code(name, l1, NULL) == 0);
    t0 = now_ns();
    o.deadline_mono_ns = t0 + 300 * 1000000LL;
    CHECK(lock_code(name, l2, &o) == CETCD_DEADLINE_EXCEEDED);
    ms = (now_ns() - t0) / 1000000;
    fprintf(stderr, "lock deadline after %lld ms\n", (long long)ms);
    CHECK(ms >= 290 && ms < 3000);
    o.deadline_mono_ns = now_ns() - 1000000;
    CHECK(range_code(name, &o, NULL) == CETCD_DEADLINE_EXCEEDED);
    o.deadline_mono_ns = INT64_MAX;
    CHECK(range_code(name, &o, NULL) == 0);
    /* a stream's deadline */
    t0 = now_ns();
    CHECK(open_rec(&r, K_WATCH, WATCH, NULL, 0, t0 + 400 * 1000000LL, 0));
    CHECK(watch_create(&r, "dl/") == 0);
    wait_closed(&r, CETCD_DEADLINE_EXCEEDED);
    ms = (now_ns() - t0) / 1000000;
    fprintf(stderr, "stream deadline after %lld ms\n", (long long)ms);
    CHECK(ms >= 390 && ms < 3000);
    CHECK(r.created);
    cetcd_raw_stream_close(r.s);
    lease_revoke(l1);
    lease_revoke(l2);
}

/* dead_port returns a 127.0.0.1 port nothing listens on (it was free a
 * moment ago). */
static int dead_port(void);

/* Failover: the client's first endpoint is a closed port (argv), a Range
 * and a Put go to the second; all endpoints dead: UNAVAILABLE. */
static void case_failover(const char *endpoints)
{
    struct cetcd_client_opts co = {.dial_timeout_ms = 2000};
    struct cetcd_client *first = cli, *dead = NULL;
    const char *second = strchr(endpoints, ',') + 1;
    struct cetcd_status st;
    char key[128], eps[128];
    struct result r;
    struct cetcd_client *again = NULL;
    Etcdserverpb__PutRequest pr = ETCDSERVERPB__PUT_REQUEST__INIT;
    ProtobufCMessage *pu;
    int code;

    snprintf(key, sizeof(key), "%sf/k", pfx);
    CHECK(strcmp(cetcd_client_endpoint(cli), second) != 0);
    CHECK(range_code(key, NULL, NULL) == 0);
    CHECK(strcmp(cetcd_client_endpoint(cli), second) == 0);
    /* a mutation that never left may go to the next endpoint */
    co.endpoints = endpoints;
    CHECK(cetcd_client_open(&co, &again, &st) == 0);
    cli = again;
    pr.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
    pu = pb_call(PUT, &pr.base, &etcdserverpb__put_response__descriptor,
                 NULL, &code, NULL);
    CHECK(code == 0 && pu != NULL);
    if (pu != NULL)
        protobuf_c_message_free_unpacked(pu, NULL);
    CHECK(strcmp(cetcd_client_endpoint(cli), second) == 0);
    cetcd_client_close(again);
    /* nothing answers */
    snprintf(eps, sizeof(eps), "127.0.0.1:%d,127.0.0.1:%d", dead_port(),
             dead_port());
    co.endpoints = eps;
    CHECK(cetcd_client_open(&co, &dead, &st) == 0);
    cli = dead;
    CHECK(raw_call(RANGE, NULL, 0, NULL, &r) == CETCD_UNAVAILABLE);
    free(r.bytes);
    CHECK(raw_call(PUT, NULL, 0, NULL, &r) == CETCD_UNAVAILABLE);
    free(r.bytes);
    cli = first;
    cetcd_client_close(dead);
}

/* A Lock waits on the first endpoint's server; the test kills it after
 * READY: the call ends UNAVAILABLE, is not sent to the second endpoint
 * (whose server would answer it: NOT_FOUND for the unknown lease), and
 * the client moves on to the second. */
static void case_noresend(const char *endpoints)
{
    const char *second = strchr(endpoints, ',') + 1;
    int64_t l1 = lease_grant(60), l2 = lease_grant(60);
    V3lockpb__LockRequest lr = V3LOCKPB__LOCK_REQUEST__INIT;
    uint8_t buf[256];
    size_t len;
    char name[128];
    struct result r = {0};
    bool ok;

    snprintf(name, sizeof(name), "%snr", pfx);
    CHECK(lock_code(name, l1, NULL) == 0);
    lr.name = (ProtobufCBinaryData){strlen(name), (uint8_t *)name};
    lr.lease = l2;
    len = protobuf_c_message_pack(&lr.base, buf);
    CHECK(cetcd_async_call_raw(cli, q, LOCK, buf, len, NULL, result_done,
                               &r) == 0);
    usleep(300 * 1000);
    printf("READY\n");
    fflush(stdout);
    pthread_mutex_lock(&mu);
    ok = wait_for(&r.done, 2 * WAIT_MS);
    pthread_mutex_unlock(&mu);
    CHECK(ok);
    fprintf(stderr, "lock: %s \"%s\"\n", cetcd_code_name(r.st.code),
            r.st.message);
    CHECK(r.st.code == CETCD_UNAVAILABLE && r.calls == 1);
    free(r.bytes);
    CHECK(strcmp(cetcd_client_endpoint(cli), second) == 0);
    CHECK(range_code(name, NULL, NULL) == 0);
}

/* ------------------------------------------------------------------------
 * Cases: raw streams
 * ---------------------------------------------------------------------- */

/* A Watch stream: created, the events of three puts, close. */
static void case_watch(void)
{
    struct rec r;

    if (!watch_open(&r, "w/"))
        return;
    pthread_mutex_lock(&mu);
    r.want_events = 3;
    pthread_mutex_unlock(&mu);
    puts_n("w/", 0, 3, 10);
    CHECK(wait_want(&r));
    pthread_mutex_lock(&mu);
    CHECK(r.events == 3 && !r.out_of_order);
    pthread_mutex_unlock(&mu);
    cetcd_raw_stream_close(r.s);
    wait_closed(&r, CETCD_CANCELLED);
}

/* msgs_now returns r's on_msg count. */
static int msgs_now(struct rec *r)
{
    int n;

    pthread_mutex_lock(&mu);
    n = r->msgs;
    pthread_mutex_unlock(&mu);
    return n;
}

/* want_events_resume asks for n events in all, resumes and waits. */
static void want_events_resume(struct rec *r, int n)
{
    pthread_mutex_lock(&mu);
    r->want_events = n;
    r->want = r->events >= n;
    pthread_mutex_unlock(&mu);
    cetcd_raw_stream_pause(r->s, false);
    CHECK(wait_want(r));
    pthread_mutex_lock(&mu);
    if (r->events != n)
        fprintf(stderr, "events %d, want %d\n", r->events, n);
    CHECK(r->events == n && !r->out_of_order);
    pthread_mutex_unlock(&mu);
}

/* Puts while toggling pause, for races: every event arrives, in order. */
struct toggler {
    int n;          /* puts to make */
    atomic_bool done; /* they are made */
};

static void *toggle_puts(void *arg)
{
    struct toggler *t = arg;

    puts_n("p/t", 0, t->n, 64);
    atomic_store(&t->done, true);
    return NULL;
}

/* Pause from another thread while 4 MB of events wait, from inside
 * on_msg, and toggled while events flow. */
static void case_pause(void)
{
    struct toggler t = {.n = 200};
    pthread_t th;
    struct rec r;
    int m;

    if (!watch_open(&r, "p/"))
        return;
    cetcd_raw_stream_pause(r.s, true);
    m = msgs_now(&r);
    puts_n("p/", 0, 40, 100 * 1024);
    usleep(1500 * 1000);
    CHECK(msgs_now(&r) == m);
    want_events_resume(&r, 40);
    /* pause inside on_msg */
    pthread_mutex_lock(&mu);
    r.pause_in_msg = true;
    r.want_msgs = r.msgs + 1;
    pthread_mutex_unlock(&mu);
    puts_n("p/", 40, 1, 10);
    CHECK(wait_want(&r));
    m = msgs_now(&r);
    puts_n("p/", 41, 20, 1000);
    usleep(1000 * 1000);
    CHECK(msgs_now(&r) == m);
    want_events_resume(&r, 61);
    /* toggled from here while another thread puts */
    atomic_init(&t.done, false);
    CHECK(pthread_create(&th, NULL, toggle_puts, &t) == 0);
    while (!atomic_load(&t.done)) {
        cetcd_raw_stream_pause(r.s, true);
        usleep(300);
        cetcd_raw_stream_pause(r.s, false);
        usleep(200);
    }
    pthread_join(th, NULL);
    cetcd_raw_stream_pause(r.s, true);
    want_events_resume(&r, 61 + t.n);
    /* closed while paused with an event held: dropped, CANCELLED */
    cetcd_raw_stream_pause(r.s, true);
    m = msgs_now(&r);
    puts_n("p/", 61, 3, 10);
    usleep(300 * 1000);
    cetcd_raw_stream_close(r.s);
    wait_closed(&r, CETCD_CANCELLED);
    CHECK(msgs_now(&r) == m);
}

/* ka_request packs a LeaseKeepAliveRequest for id into buf. */
static size_t ka_request(uint8_t *buf, int64_t id)
{
    Etcdserverpb__LeaseKeepAliveRequest req =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;

    req.id = id;
    return protobuf_c_message_pack(&req.base, buf);
}

/* A paused stream whose call ended holds its message and its on_close:
 * a resume delivers both, in order; a close drops the message and still
 * reports the end.  A Snapshot paused from inside on_msg resumes to its
 * end. */
static void case_pause_end(void)
{
    int64_t id = lease_grant(60), t0;
    struct cetcd_status st;
    uint8_t buf[64];
    size_t len = ka_request(buf, id);
    struct rec r;

    for (int close_it = 0; close_it < 2; close_it++) {
        if (!open_rec(&r, K_KA, KEEPALIVE, NULL, 0, 0, 0))
            return;
        cetcd_raw_stream_pause(r.s, true);
        CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) == 0);
        CHECK(cetcd_raw_stream_close_send(r.s, &st) == 0);
        usleep(1000 * 1000);
        pthread_mutex_lock(&mu);
        CHECK(r.msgs == 0 && !r.closed);
        pthread_mutex_unlock(&mu);
        if (close_it) {
            /* the call ended (OK) a second ago: close reports that */
            cetcd_raw_stream_close(r.s);
            wait_closed(&r, 0);
            CHECK(r.msgs == 0);
            continue;
        }
        cetcd_raw_stream_pause(r.s, false);
        wait_closed(&r, 0);
        CHECK(r.msgs == 1 && r.ka_id == id && r.ka_ttl > 0);
        cetcd_raw_stream_close(r.s);
    }
    lease_revoke(id);
    /* a server-streaming call paused inside its first message */
    if (!open_rec(&r, K_SNAP, SNAPSHOT, NULL, 0, 0, 0))
        return;
    pthread_mutex_lock(&mu);
    r.pause_in_msg = true;
    r.want_msgs = 1;
    pthread_mutex_unlock(&mu);
    CHECK(cetcd_raw_stream_send(r.s, NULL, 0, &st) == 0);
    CHECK(cetcd_raw_stream_close_send(r.s, &st) == 0);
    CHECK(wait_want(&r));
    usleep(1000 * 1000);
    pthread_mutex_lock(&mu);
    CHECK(r.msgs == 1 && !r.closed);
    pthread_mutex_unlock(&mu);
    t0 = now_ns();
    cetcd_raw_stream_pause(r.s, false);
    wait_closed(&r, 0);
    fprintf(stderr, "snapshot of %zu bytes after the resume: %lld ms\n",
            r.blob_len, (long long)((now_ns() - t0) / 1000000));
    CHECK(r.msgs >= 2 && r.remaining == 0 && r.blob_len > 32);
    cetcd_raw_stream_close(r.s);
    drain(); /* no callback runs any more: the blob can go */
    free(r.blob);
}

/* close inside on_msg (the first event), and inside on_close. */
static void case_close_inside(void)
{
    int64_t id = lease_grant(60);
    struct cetcd_status st;
    uint8_t buf[64];
    size_t len = ka_request(buf, id);
    struct rec r;

    if (!watch_open(&r, "ci/"))
        return;
    pthread_mutex_lock(&mu);
    r.close_in_msg = true;
    pthread_mutex_unlock(&mu);
    puts_n("ci/", 0, 5, 10);
    wait_closed(&r, CETCD_CANCELLED);
    usleep(200 * 1000);
    CHECK(msgs_now(&r) == 2);
    /* a stream that ends by itself, closed by its on_close */
    if (!open_rec(&r, K_KA, KEEPALIVE, NULL, 0, 0, 0))
        return;
    CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) == 0);
    CHECK(cetcd_raw_stream_close_send(r.s, &st) == 0);
    wait_closed(&r, 0);
    cetcd_raw_stream_close(r.s); /* after on_close, from this thread */
    lease_revoke(id);
}

static void *put_loop(void *arg)
{
    atomic_bool *stop = arg;
    int i = 0;

    while (!atomic_load(stop))
        puts_n("ct/", i++ % 50, 1, 100);
    return NULL;
}

/* close from another thread than the queue's, while events flow. */
static void case_close_thread(void)
{
    atomic_bool stop;
    pthread_t th;
    struct rec r;

    atomic_init(&stop, false);
    CHECK(pthread_create(&th, NULL, put_loop, &stop) == 0);
    for (int i = 0; i < 30; i++) {
        if (i % 3 == 0) { /* not even created yet */
            if (!open_rec(&r, K_WATCH, WATCH, NULL, 0, 0, 0))
                break;
            CHECK(watch_create(&r, "ct/") == 0);
        } else if (!watch_open(&r, "ct/")) {
            break;
        }
        usleep((useconds_t)(i % 7) * 3000);
        cetcd_raw_stream_close(r.s);
        wait_closed(&r, CETCD_CANCELLED);
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
}

/* close with nobody running the queue: on_close waits for the queue. */
static void case_close_idle(void)
{
    struct rec r;

    if (!open_rec(&r, K_WATCH, WATCH, NULL, 0, 0, 0))
        return;
    CHECK(watch_create(&r, "cz/") == 0);
    cetcd_raw_stream_close(r.s);
    CHECK(!r.closed && cetcd_async_queue_pending(q) == 1);
    drain();
    wait_closed(&r, CETCD_CANCELLED);
}

/* LeaseKeepAlive: three answers, then OK after a half-close. */
static void case_keepalive(void)
{
    int64_t id = lease_grant(60);
    struct cetcd_status st;
    uint8_t buf[64];
    size_t len = ka_request(buf, id);
    struct rec r;

    if (!open_rec(&r, K_KA, KEEPALIVE, NULL, 0, 0, 0))
        return;
    for (int i = 1; i <= 3; i++) {
        pthread_mutex_lock(&mu);
        r.want_msgs = i;
        pthread_mutex_unlock(&mu);
        CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) == 0);
        CHECK(wait_want(&r));
        pthread_mutex_lock(&mu);
        CHECK(r.ka_id == id && r.ka_ttl > 0 && r.ka_ttl <= 60);
        pthread_mutex_unlock(&mu);
    }
    CHECK(cetcd_raw_stream_close_send(r.s, &st) == 0);
    CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) ==
          CETCD_FAILED_PRECONDITION);
    wait_closed(&r, 0);
    CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) ==
          CETCD_FAILED_PRECONDITION);
    cetcd_raw_stream_close(r.s);
    lease_revoke(id);
}

/* The bounds and the argument checks (nobody runs the queue). */
static void case_bounds(void)
{
    static const struct cetcd_md upper[1] = {{"Token", "x"}};
    static const struct cetcd_md grpc[1] = {{"grpc-timeout", "1S"}};
    static const struct cetcd_md badval[1] = {{"token", "a\nb"}};
    struct cetcd_md many[CETCD_RAW_MD_MAX + 1];
    struct cetcd_raw_stream_opts o = {.queue = q, .on_msg = on_msg};
    struct cetcd_raw_stream *s = NULL;
    struct cetcd_raw_opts ro = {0};
    struct cetcd_status st;
    uint8_t buf[64];
    size_t len = ka_request(buf, 1);
    struct rec r;

    for (size_t i = 0; i <= CETCD_RAW_MD_MAX; i++)
        many[i] = (struct cetcd_md){"k", "v"};
    if (open_rec(&r, K_KA, KEEPALIVE, NULL, 0, 0, 1)) {
        CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) == 0);
        CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) == 0);
        CHECK(cetcd_raw_stream_send(r.s, buf, len, &st) ==
              CETCD_RESOURCE_EXHAUSTED);
        CHECK(cetcd_raw_stream_send(r.s, NULL, 3, &st) ==
              CETCD_INVALID_ARGUMENT);
        cetcd_raw_stream_close(r.s);
        drain();
        wait_closed(&r, CETCD_CANCELLED);
    }
    CHECK(cetcd_raw_stream_open(cli, "x", &o, &s, &st) ==
          CETCD_INVALID_ARGUMENT && s == NULL);
    CHECK(cetcd_raw_stream_open(cli, WATCH, NULL, &s, &st) ==
          CETCD_INVALID_ARGUMENT);
    o.on_msg = NULL;
    CHECK(cetcd_raw_stream_open(cli, WATCH, &o, &s, &st) ==
          CETCD_INVALID_ARGUMENT);
    o.on_msg = on_msg;
    o.md = many;
    o.md_n = CETCD_RAW_MD_MAX + 1;
    CHECK(cetcd_raw_stream_open(cli, WATCH, &o, &s, &st) ==
          CETCD_INVALID_ARGUMENT);
    o.md_n = 1;
    o.md = upper;
    CHECK(cetcd_raw_stream_open(cli, WATCH, &o, &s, &st) ==
          CETCD_INVALID_ARGUMENT);
    ro.md = grpc;
    ro.md_n = 1;
    CHECK(cetcd_async_call_raw(cli, q, RANGE, NULL, 0, &ro, result_done,
                               NULL) == CETCD_INVALID_ARGUMENT);
    ro.md = badval;
    CHECK(cetcd_async_call_raw(cli, q, RANGE, NULL, 0, &ro, result_done,
                               NULL) == CETCD_INVALID_ARGUMENT);
    CHECK(cetcd_async_call_raw(cli, q, RANGE, NULL, 3, NULL, result_done,
                               NULL) == CETCD_INVALID_ARGUMENT);
    CHECK(cetcd_async_call_raw(cli, q, "Range", NULL, 0, NULL, result_done,
                               NULL) == CETCD_INVALID_ARGUMENT);
    CHECK(cetcd_async_call_raw(cli, q, RANGE, NULL, 0, NULL, NULL, NULL) ==
          CETCD_INVALID_ARGUMENT);
    CHECK(cetcd_async_queue_pending(q) == 0);
}

/* A server-streaming Snapshot: one empty request, close_send, the chunks
 * to the end (written to path), then OK. */
static void case_snapshot(const char *path)
{
    struct cetcd_status st;
    struct rec r;
    FILE *f;

    if (!open_rec(&r, K_SNAP, SNAPSHOT, NULL, 0, 0, 0))
        return;
    CHECK(cetcd_raw_stream_send(r.s, NULL, 0, &st) == 0);
    CHECK(cetcd_raw_stream_close_send(r.s, &st) == 0);
    wait_closed(&r, 0);
    CHECK(r.remaining == 0 && r.blob_len > 32);
    cetcd_raw_stream_close(r.s);
    drain(); /* no callback runs any more */
    printf("SNAPSHOT total=%zu chunks=%d\n", r.blob_len, r.msgs);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f != NULL) {
        CHECK(fwrite(r.blob, 1, r.blob_len, f) == r.blob_len);
        fclose(f);
    }
    free(r.blob);
}

/* The server is killed after READY: the stream ends UNAVAILABLE. */
static void case_killed(void)
{
    struct result res;
    struct rec r;

    if (!watch_open(&r, "k/"))
        return;
    printf("READY\n");
    fflush(stdout);
    wait_closed(&r, CETCD_UNAVAILABLE);
    cetcd_raw_stream_close(r.s);
    CHECK(raw_call(RANGE, NULL, 0, NULL, &res) == CETCD_UNAVAILABLE);
    free(res.bytes);
}

/* ------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------- */

static int dead_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* run_case runs the case named argv[2]; false: unknown. */
static bool run_case(int argc, char **argv)
{
    const char *c = argv[2];

    if (strcmp(c, "unary") == 0)
        case_unary();
    else if (strcmp(c, "errors") == 0)
        case_errors();
    else if (strcmp(c, "auth") == 0 && argc == 5)
        case_auth(argv[1], argv[3], argv[4]);
    else if (strcmp(c, "deadline") == 0)
        case_deadline();
    else if (strcmp(c, "failover") == 0 && strchr(argv[1], ','))
        case_failover(argv[1]);
    else if (strcmp(c, "noresend") == 0 && strchr(argv[1], ','))
        case_noresend(argv[1]);
    else if (strcmp(c, "watch") == 0)
        case_watch();
    else if (strcmp(c, "pause") == 0)
        case_pause();
    else if (strcmp(c, "pause-end") == 0)
        case_pause_end();
    else if (strcmp(c, "close-inside") == 0)
        case_close_inside();
    else if (strcmp(c, "close-thread") == 0)
        case_close_thread();
    else if (strcmp(c, "close-idle") == 0)
        case_close_idle();
    else if (strcmp(c, "keepalive") == 0)
        case_keepalive();
    else if (strcmp(c, "bounds") == 0)
        case_bounds();
    else if (strcmp(c, "snapshot") == 0 && argc == 4)
        case_snapshot(argv[3]);
    else if (strcmp(c, "killed") == 0)
        case_killed();
    else
        return false;
    return true;
}

int main(int argc, char **argv)
{
    struct cetcd_client_opts co = {.dial_timeout_ms = 2000};
    struct cetcd_status st;
    bool idle;

    if (argc < 3) {
        fprintf(stderr, "usage: client_raw <endpoints> <case> [args]\n");
        return 2;
    }
    snprintf(pfx, sizeof(pfx), "cr%d/", (int)getpid());
    co.endpoints = argv[1];
    if (cetcd_client_open(&co, &cli, &st) != 0) {
        fprintf(stderr, "open: %s\n", st.message);
        return 1;
    }
    CHECK(cetcd_async_queue_open(&q) == 0);
    idle = strcmp(argv[2], "close-idle") == 0 ||
           strcmp(argv[2], "bounds") == 0;
    if (!idle)
        runner_start();
    if (!run_case(argc, argv)) {
        fprintf(stderr, "unknown case or arguments: %s\n", argv[2]);
        failures++;
    }
    drain();
    runner_stop();
    cetcd_async_queue_close(q);
    cetcd_client_close(cli);
    if (failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
