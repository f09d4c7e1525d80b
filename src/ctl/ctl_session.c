/*
 * ctl_session.c - what etcdctl's lease keep-alive, lock and elect share
 * (ctl_session.h): clientv3's keep-alive loop, the concurrency session,
 * patient unary calls, watchers that survive a broken stream, waitDeletes
 * and display.Get, with SIGINT/SIGTERM as etcdctl's cancelled context.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl/ctl_session.h"
#include "ctl/print.h"

#define KA_RETRY_MS 500 /* clientv3's retryConnWait and send tick */
#define POLL_MS 100     /* how often waits look at the signal flag */

/* ------------------------------------------------------------------------
 * Signals and time
 * ---------------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

void ctl_sess_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

bool ctl_sess_interrupted(void) { return interrupted != 0; }

int64_t ctl_sess_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ctl_sess_sleep_ms(int ms)
{
    int64_t end = ctl_sess_now_ms() + ms;
    for (int64_t now = ctl_sess_now_ms(); now < end && !interrupted;
         now = ctl_sess_now_ms()) {
        int64_t step = end - now < 20 ? end - now : 20;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void canceled(struct ctl_sess_err *e)
{
    snprintf(e->text, sizeof e->text, "context canceled");
}

/* ------------------------------------------------------------------------
 * Keep-alive
 * ---------------------------------------------------------------------- */

/* One lease's keep-alive state (clientv3's keepAlive), owned by the
 * thread running the loop. */
struct ka {
    struct cetcd_client *c; /* the shared client */
    int64_t id;             /* the lease */
    int64_t deadline_ms;    /* past it without an answer: taken as gone */
    int64_t next_send_ms;   /* when the next request goes out */
    struct cetcd_stream *s; /* the LeaseKeepAlive call, or NULL */
    void (*on_resp)(void *, const Etcdserverpb__LeaseKeepAliveResponse *);
    void *arg; /* for on_resp */
};

int ctl_keepalive_first_timeout_ms(void)
{
    int64_t ms = ctl_g.dial_timeout_ns / 1000000 + 1000;
    if (ms == 1000)
        ms = 5000; /* clientv3: a zero dial timeout means the default */
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* ka_answer takes one answer; returns 1 when the lease is gone. */
static int ka_answer(struct ka *k,
                     const Etcdserverpb__LeaseKeepAliveResponse *r)
{
    if (r->id != k->id)
        return 0; /* clientv3 ignores answers about other leases */
    if (r->ttl <= 0)
        return 1;
    int64_t now = ctl_sess_now_ms();
    k->next_send_ms = now + r->ttl * 1000 / 3;
    k->deadline_ms = now + r->ttl * 1000;
    if (k->on_resp)
        k->on_resp(k->arg, r);
    return 0;
}

/* ka_step sends when due and waits a little for an answer: 0 go on,
 * 1 the lease is gone, -1 the stream ended. */
static int ka_step(struct ka *k)
{
    struct cetcd_status st = {0};
    int64_t now = ctl_sess_now_ms();
    if (now >= k->next_send_ms) {
        Etcdserverpb__LeaseKeepAliveRequest req =
            ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
        req.id = k->id;
        if (cetcd_stream_send(k->s, &req.base, &st) != 0)
            return -1;
        k->next_send_ms = now + KA_RETRY_MS; /* again if none answers */
    }
    int64_t wait = k->next_send_ms - now;
    wait = wait < 0 ? 0 : wait > POLL_MS ? POLL_MS : wait;
    ProtobufCMessage *m = NULL;
    int rc = cetcd_stream_recv(k->s, (int)wait, &m, &st);
    if (rc == CETCD_STREAM_WAIT_TIMEOUT)
        return 0;
    if (rc != 0 || !m)
        return -1;
    int gone = ka_answer(k, (Etcdserverpb__LeaseKeepAliveResponse *)m);
    protobuf_c_message_free_unpacked(m, NULL);
    return gone;
}

static void ka_open(struct ka *k)
{
    struct cetcd_status st = {0};
    if (cetcd_stream_open(k->c, "/etcdserverpb.Lease/LeaseKeepAlive",
                          &etcdserverpb__lease_keep_alive_response__descriptor,
                          NULL, &k->s, &st) != 0)
        k->s = NULL;
}

enum ctl_ka_end ctl_keepalive_run(
    struct cetcd_client *c, int64_t id, int first_timeout_ms,
    void (*on_resp)(void *arg, const Etcdserverpb__LeaseKeepAliveResponse *r),
    void *arg, const atomic_bool *stop)
{
    assert(c != NULL && stop != NULL);
    int64_t now = ctl_sess_now_ms();
    struct ka k = {c, id, now + first_timeout_ms, now, NULL, on_resp, arg};
    int64_t retry_ms = now;
    enum ctl_ka_end end = CTL_KA_STOPPED;
    while (!atomic_load(stop)) {
        now = ctl_sess_now_ms();
        if (now > k.deadline_ms) {
            end = CTL_KA_EXPIRED;
            break;
        }
        if (!k.s && now >= retry_ms) {
            ka_open(&k);
            retry_ms = now + KA_RETRY_MS; /* if this one fails */
        }
        if (!k.s) {
            struct timespec ts = {0, POLL_MS * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        int r = ka_step(&k);
        if (r > 0) {
            end = CTL_KA_EXPIRED;
            break;
        }
        if (r < 0) {
            cetcd_stream_close(k.s);
            k.s = NULL;
            retry_ms = ctl_sess_now_ms() + KA_RETRY_MS;
        }
    }
    cetcd_stream_close(k.s);
    assert(end == CTL_KA_EXPIRED || atomic_load(stop));
    return end;
}

/* ------------------------------------------------------------------------
 * Calls
 * ---------------------------------------------------------------------- */

/* retryable: the server was not reached or did not answer in time, the
 * failures clientv3 waits out under a context without deadline. */
static bool retryable(const struct cetcd_status *st)
{
    if (strncmp(st->message, "etcdserver: ", 12) == 0)
        return st->code == CETCD_UNAVAILABLE; /* no leader, timeouts */
    return st->code == CETCD_UNAVAILABLE ||
           st->code == CETCD_DEADLINE_EXCEEDED;
}

int ctl_sess_call(const char *path, const ProtobufCMessage *req,
                  const ProtobufCMessageDescriptor *desc, bool patient,
                  ProtobufCMessage **resp_out, struct ctl_sess_err *e)
{
    assert(path != NULL && req != NULL && desc != NULL);
    struct cetcd_client *c = ctl_client();
    for (;;) {
        struct cetcd_status st = {0};
        *resp_out = NULL;
        if (cetcd_call_unary(c, path, req, desc, resp_out, &st) == 0)
            return CTL_SESS_OK;
        if (!patient || !retryable(&st)) {
            ctl_status_text(&st, e->text, sizeof e->text);
            return CTL_SESS_FAILED;
        }
        ctl_sess_sleep_ms(KA_RETRY_MS);
        if (interrupted) {
            canceled(e);
            return CTL_SESS_CANCELED;
        }
    }
}

/* ------------------------------------------------------------------------
 * Session
 * ---------------------------------------------------------------------- */

struct ctl_session {
    int64_t lease;           /* the session's lease */
    struct cetcd_client *c;  /* the shared client */
    pthread_t thread;        /* runs the keep-alive loop */
    atomic_bool stop;        /* asks the thread to end */
    atomic_bool done;        /* the keep-alive ended (lease gone) */
};

static void *session_thread(void *arg)
{
    struct ctl_session *s = arg;
    (void)ctl_keepalive_run(s->c, s->lease, ctl_keepalive_first_timeout_ms(),
                            NULL, NULL, &s->stop);
    atomic_store(&s->done, true);
    return NULL;
}

struct ctl_session *ctl_session_open(int64_t ttl_s)
{
    Etcdserverpb__LeaseGrantRequest req =
        ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    req.ttl = ttl_s;
    ProtobufCMessage *m = NULL;
    struct ctl_sess_err e;
    if (ctl_sess_call("/etcdserverpb.Lease/LeaseGrant", &req.base,
                      &etcdserverpb__lease_grant_response__descriptor, true,
                      &m, &e) != CTL_SESS_OK)
        ctl_exit(CTL_EXIT_ERROR, "%s", e.text);
    struct ctl_session *s = calloc(1, sizeof *s);
    if (!s)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    s->lease = ((Etcdserverpb__LeaseGrantResponse *)m)->id;
    protobuf_c_message_free_unpacked(m, NULL);
    s->c = ctl_client();
    atomic_init(&s->stop, false);
    atomic_init(&s->done, false);
    if (pthread_create(&s->thread, NULL, session_thread, s) != 0)
        ctl_exit(CTL_EXIT_ERROR, "cannot start the keep-alive thread");
    return s;
}

int64_t ctl_session_lease(const struct ctl_session *s) { return s->lease; }

bool ctl_session_done(const struct ctl_session *s)
{
    return atomic_load(&s->done);
}

void ctl_session_close(struct ctl_session *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    free(s);
}

/* ------------------------------------------------------------------------
 * Watching
 * ---------------------------------------------------------------------- */

uint8_t *ctl_sess_prefix_end(const char *key, size_t n, size_t *len_out)
{
    uint8_t *end = malloc(n + 1);
    if (!end)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(end, key, n);
    for (size_t i = n; i > 0; i--) {
        if (end[i - 1] < 0xff) {
            end[i - 1]++;
            *len_out = i;
            return end;
        }
    }
    end[0] = 0;
    *len_out = 1;
    return end;
}

/* watch_start opens the stream and asks for the watcher; w->stream stays
 * NULL when that fails. */
static void watch_start(struct ctl_watch *w)
{
    struct cetcd_status st = {0};
    if (cetcd_stream_open(ctl_client(), "/etcdserverpb.Watch/Watch",
                          &etcdserverpb__watch_response__descriptor, NULL,
                          &w->stream, &st) != 0) {
        w->stream = NULL;
        return;
    }
    Etcdserverpb__WatchCreateRequest cr =
        ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    cr.key.data = (uint8_t *)w->key;
    cr.key.len = w->key_len;
    size_t end_len = 0;
    uint8_t *end =
        w->prefix ? ctl_sess_prefix_end(w->key, w->key_len, &end_len) : NULL;
    cr.range_end.data = end;
    cr.range_end.len = end_len;
    cr.start_revision = w->next_rev;
    Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    int rc = cetcd_stream_send(w->stream, &req.base, &st);
    free(end);
    if (rc != 0) {
        cetcd_stream_close(w->stream);
        w->stream = NULL;
    }
}

void ctl_watch_open(struct ctl_watch *w, const char *key, bool prefix,
                    int64_t rev)
{
    memset(w, 0, sizeof *w);
    w->key_len = strlen(key);
    w->key = strdup(key);
    if (!w->key)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    w->prefix = prefix;
    w->next_rev = rev;
    watch_start(w);
}

void ctl_watch_close(struct ctl_watch *w)
{
    cetcd_stream_close(w->stream);
    w->stream = NULL;
    free(w->key);
    w->key = NULL;
}

/* watch_canceled words a cancelled watcher as clientv3's wr.Err(). */
static void watch_canceled(const Etcdserverpb__WatchResponse *r,
                           struct ctl_sess_err *e)
{
    const char *why = r->cancel_reason ? r->cancel_reason : "";
    if (r->compact_revision != 0)
        snprintf(e->text, sizeof e->text,
                 "etcdserver: mvcc: required revision has been compacted");
    else if (strncmp(why, "etcdserver: ", 12) == 0)
        snprintf(e->text, sizeof e->text, "%s", why);
    else if (*why)
        snprintf(e->text, sizeof e->text,
                 "rpc error: code = FailedPrecondition desc = %s", why);
    else
        snprintf(e->text, sizeof e->text,
                 "etcdserver: mvcc: required revision is a future revision");
}

/* watch_take looks at one answer: 1 it carries events (kept), 0 skip it,
 * -1 the watcher was cancelled (e set). */
static int watch_take(struct ctl_watch *w, Etcdserverpb__WatchResponse *r,
                      struct ctl_sess_err *e)
{
    if (r->canceled) {
        watch_canceled(r, e);
        return -1;
    }
    if (r->n_events == 0)
        return 0;
    const Mvccpb__Event *last = r->events[r->n_events - 1];
    if (last->kv && last->kv->mod_revision >= w->next_rev)
        w->next_rev = last->kv->mod_revision + 1;
    return 1;
}

int ctl_watch_next(struct ctl_watch *w, Etcdserverpb__WatchResponse **resp_out,
                   struct ctl_sess_err *e)
{
    assert(w->key != NULL);
    for (;;) {
        if (interrupted) {
            canceled(e);
            return CTL_SESS_CANCELED;
        }
        if (!w->stream) {
            ctl_sess_sleep_ms(KA_RETRY_MS); /* a broken stream: retry */
            if (!interrupted)
                watch_start(w);
            continue;
        }
        ProtobufCMessage *m = NULL;
        struct cetcd_status st = {0};
        int rc = cetcd_stream_recv(w->stream, POLL_MS, &m, &st);
        if (rc == CETCD_STREAM_WAIT_TIMEOUT)
            continue;
        if (rc != 0 || !m) {
            cetcd_stream_close(w->stream);
            w->stream = NULL;
            continue;
        }
        int t = watch_take(w, (Etcdserverpb__WatchResponse *)m, e);
        if (t > 0) {
            *resp_out = (Etcdserverpb__WatchResponse *)m;
            return CTL_SESS_OK;
        }
        protobuf_c_message_free_unpacked(m, NULL);
        if (t < 0)
            return CTL_SESS_FAILED;
    }
}

/* ------------------------------------------------------------------------
 * waitDeletes
 * ---------------------------------------------------------------------- */

int ctl_sess_range_first(const char *pfx, bool ascend, int64_t max_create_rev,
                         Etcdserverpb__RangeResponse **resp_out,
                         struct ctl_sess_err *e)
{
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    size_t n = strlen(pfx), end_len = 0;
    uint8_t *end = ctl_sess_prefix_end(pfx, n, &end_len);
    req.key.data = (uint8_t *)pfx;
    req.key.len = n;
    req.range_end.data = end;
    req.range_end.len = end_len;
    req.limit = 1;
    req.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    req.sort_order = ascend ? ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND
                            : ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
    req.max_create_revision = max_create_rev;
    ProtobufCMessage *m = NULL;
    int rc = ctl_sess_call("/etcdserverpb.KV/Range", &req.base,
                           &etcdserverpb__range_response__descriptor, true,
                           &m, e);
    free(end);
    *resp_out = (Etcdserverpb__RangeResponse *)m;
    return rc;
}

/* wait_delete waits for a delete of key at or after rev
 * (concurrency.waitDelete). */
static int wait_delete(const char *key, int64_t rev, struct ctl_sess_err *e)
{
    struct ctl_watch w;
    ctl_watch_open(&w, key, false, rev);
    int rc;
    bool deleted = false;
    while (!deleted) {
        Etcdserverpb__WatchResponse *r = NULL;
        rc = ctl_watch_next(&w, &r, e);
        if (rc != CTL_SESS_OK)
            break;
        for (size_t i = 0; i < r->n_events; i++)
            if (r->events[i]->type == MVCCPB__EVENT__EVENT_TYPE__DELETE)
                deleted = true;
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    ctl_watch_close(&w);
    return deleted ? CTL_SESS_OK : rc;
}

int ctl_sess_wait_deletes(const char *pfx, int64_t max_create_rev,
                          Etcdserverpb__RangeResponse **resp_out,
                          struct ctl_sess_err *e)
{
    for (;;) {
        Etcdserverpb__RangeResponse *r = NULL;
        int rc = ctl_sess_range_first(pfx, false, max_create_rev, &r, e);
        if (rc != CTL_SESS_OK)
            return rc;
        if (r->n_kvs == 0) {
            *resp_out = r;
            return CTL_SESS_OK;
        }
        const ProtobufCBinaryData *k = &r->kvs[0]->key;
        char *last = strndup((const char *)k->data, k->len);
        int64_t rev = r->header ? r->header->revision : 0;
        protobuf_c_message_free_unpacked(&r->base, NULL);
        if (!last)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        rc = wait_delete(last, rev, e);
        free(last);
        if (rc != CTL_SESS_OK)
            return rc;
    }
}

/* ------------------------------------------------------------------------
 * Output
 * ---------------------------------------------------------------------- */

int ctl_sess_display_get(const Etcdserverpb__RangeResponse *r)
{
    switch (ctl_output_format()) {
    case CTL_OUT_SIMPLE:
        for (size_t i = 0; i < r->n_kvs; i++)
            ctl_simple_kv(stdout, ctl_g.hex, false, r->kvs[i]);
        break;
    case CTL_OUT_JSON:
        ctl_json_message(stdout, &r->base);
        break;
    case CTL_OUT_PROTOBUF:
        (void)ctl_pb_message(stdout, &r->base);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_range(stdout, r);
        break;
    case CTL_OUT_TABLE:
        return CTL_EXIT_BAD_FEATURE;
    }
    fflush(stdout);
    return 0;
}

void ctl_sess_display_exit(void)
{
    ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
}
