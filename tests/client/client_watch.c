/*
 * client_watch.c - libcetcd's Watch streams against a live cetcd or etcd.
 *
 * Goal: watchers created through cetcd_watch_* see what etcd 3.4 sends:
 * created confirmations, put/delete events with prev_kv, filters, history
 * from a start revision, cancel, progress notifications, the compacted
 * start revision; the bounds hold (poll buffer, send ring) and both
 * receiving modes (poll, callback on an async queue) work; an unreachable
 * endpoint ends the stream with UNAVAILABLE.  Method: keys under a prefix
 * unique to this run, each check on a fresh stream, every response read
 * with a 5 s timeout.
 * Usage: client_watch <endpoint>; exit 0 = all checks passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cetcd/cetcd.h"

static int failures;
static char pfx[64]; /* "cw<pid>/" */

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                   \
        }                                                                 \
    } while (0)

static const char *key(const char *k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", pfx, k);
    return buf;
}

static int64_t put(struct cetcd_client *c, const char *k, const char *v)
{
    struct cetcd_put_result *r = NULL;
    struct cetcd_status st;
    char b[128];
    int64_t rev = 0;

    key(k, b, sizeof(b));
    if (cetcd_put(c, b, strlen(b), v, strlen(v), NULL, &r, &st) != 0)
        fprintf(stderr, "put %s: %s\n", b, st.message);
    if (r != NULL)
        rev = r->header.revision;
    cetcd_put_result_free(r);
    return rev;
}

/* next polls one response (5 s), NULL on failure. */
static struct cetcd_watch_response *next(struct cetcd_watch_stream *s)
{
    struct cetcd_watch_response *r = NULL;
    struct cetcd_status st;
    int rc = cetcd_watch_poll(s, 5000, &r, &st);

    if (rc != 0)
        fprintf(stderr, "poll: %s %s\n", cetcd_code_name(rc), st.message);
    return r;
}

static bool kv_is(const struct cetcd_kv *kv, const char *k, const char *v)
{
    char b[128];

    key(k, b, sizeof(b));
    return kv->key_len == strlen(b) && memcmp(kv->key, b, kv->key_len) == 0 &&
           kv->value_len == strlen(v) &&
           (kv->value_len == 0 || memcmp(kv->value, v, kv->value_len) == 0);
}

static struct cetcd_watch_stream *open_poll(struct cetcd_client *c,
                                            size_t buffer_max,
                                            size_t send_max)
{
    struct cetcd_watch_stream_opts o = {.buffer_max = buffer_max,
                                        .send_max = send_max};
    struct cetcd_watch_stream *s = NULL;
    struct cetcd_status st;

    CHECK(cetcd_watch_stream_open(c, &o, &s, &st) == 0);
    return s;
}

/* create makes a watcher on the prefix range and returns its id. */
static int64_t create(struct cetcd_watch_stream *s,
                      struct cetcd_watch_opts *o, const char *k)
{
    struct cetcd_watch_response *r;
    struct cetcd_status st;
    char b[128], end[128];
    int64_t id = -1;

    key(k, b, sizeof(b));
    snprintf(end, sizeof(end), "%s", b);
    end[strlen(end) - 1]++; /* "...x/" -> "...x0": the prefix's end */
    o->range_end = end;
    o->range_end_len = strlen(end);
    CHECK(cetcd_watch_create(s, b, strlen(b), o, &st) == 0);
    r = next(s);
    CHECK(r && r->created && !r->canceled && r->events_len == 0);
    if (r != NULL)
        id = r->watch_id;
    cetcd_watch_response_free(r);
    return id;
}

static void test_events(struct cetcd_client *c)
{
    struct cetcd_watch_opts o = {.prev_kv = true};
    struct cetcd_watch_stream *s = open_poll(c, 0, 0);
    struct cetcd_watch_response *r;
    struct cetcd_status st;
    int64_t rev1, rev2;
    char b[128];
    size_t seen = 0;

    create(s, &o, "ev/");
    rev1 = put(c, "ev/a", "1");
    rev2 = put(c, "ev/a", "2");
    key("ev/a", b, sizeof(b));
    CHECK(cetcd_delete(c, b, strlen(b), NULL, NULL, &st) == 0);
    while (seen < 3 && (r = next(s)) != NULL) {
        for (size_t i = 0; i < r->events_len; i++, seen++) {
            const struct cetcd_watch_event *e = &r->events[i];
            if (seen == 0)
                CHECK(e->type == CETCD_EVENT_PUT && kv_is(&e->kv, "ev/a", "1")
                      && e->kv.mod_revision == rev1 && !e->has_prev_kv);
            if (seen == 1)
                CHECK(e->type == CETCD_EVENT_PUT && e->has_prev_kv &&
                      kv_is(&e->prev_kv, "ev/a", "1") &&
                      e->kv.version == 2 && e->kv.mod_revision == rev2);
            if (seen == 2)
                CHECK(e->type == CETCD_EVENT_DELETE &&
                      kv_is(&e->kv, "ev/a", "") &&
                      kv_is(&e->prev_kv, "ev/a", "2"));
        }
        CHECK(r->events_len > 0 &&
              r->header.revision >=
                  r->events[r->events_len - 1].kv.mod_revision);
        cetcd_watch_response_free(r);
    }
    CHECK(seen == 3);
    cetcd_watch_stream_close(s);
}

static void test_filter_history_cancel(struct cetcd_client *c)
{
    struct cetcd_watch_stream *s = open_poll(c, 0, 0);
    struct cetcd_watch_opts nop = {.no_put = true};
    struct cetcd_watch_opts hist = {0};
    struct cetcd_watch_response *r;
    struct cetcd_status st;
    int64_t rev, id_nop, id_hist;
    char b[128];

    rev = put(c, "fh/x", "old");
    put(c, "fh/x", "new");
    id_nop = create(s, &nop, "fh/");
    hist.start_revision = rev;
    id_hist = create(s, &hist, "fh/");
    CHECK(id_nop != id_hist && id_nop >= 0 && id_hist >= 0);
    /* History: both puts, from the start revision. */
    r = next(s);
    CHECK(r && r->watch_id == id_hist && r->events_len == 2);
    CHECK(r && r->events_len == 2 && kv_is(&r->events[0].kv, "fh/x", "old") &&
          kv_is(&r->events[1].kv, "fh/x", "new"));
    cetcd_watch_response_free(r);
    /* The no-put watcher sees only the delete. */
    key("fh/x", b, sizeof(b));
    CHECK(cetcd_delete(c, b, strlen(b), NULL, NULL, &st) == 0);
    for (int i = 0; i < 2; i++) {
        r = next(s);
        CHECK(r && r->events_len == 1 &&
              r->events[0].type == CETCD_EVENT_DELETE);
        cetcd_watch_response_free(r);
    }
    CHECK(cetcd_watch_cancel(s, id_nop, &st) == 0);
    r = next(s);
    CHECK(r && r->canceled && r->watch_id == id_nop);
    cetcd_watch_response_free(r);
    CHECK(cetcd_watch_progress(s, &st) == 0);
    r = next(s);
    CHECK(r && cetcd_watch_response_is_progress(r) && r->watch_id == -1);
    CHECK(r && r->header.revision > rev);
    cetcd_watch_response_free(r);
    cetcd_watch_stream_close(s);
}

static void test_compacted(struct cetcd_client *c)
{
    struct cetcd_watch_stream *s = open_poll(c, 0, 0);
    struct cetcd_watch_opts o = {.start_revision = 1};
    struct cetcd_watch_response *r;
    struct cetcd_status st;
    int64_t rev = put(c, "cp/a", "1");
    char b[128];

    CHECK(cetcd_compact(c, rev, false, NULL, &st) == 0 ||
          st.code == CETCD_OUT_OF_RANGE);
    key("cp/", b, sizeof(b));
    CHECK(cetcd_watch_create(s, b, strlen(b), &o, &st) == 0);
    r = next(s);
    /* etcd 3.4: created, then canceled with the compact revision. */
    if (r && r->created && !r->canceled) {
        cetcd_watch_response_free(r);
        r = next(s);
    }
    CHECK(r && r->canceled && r->compact_revision >= rev);
    cetcd_watch_response_free(r);
    cetcd_watch_stream_close(s);
}

/* The poll buffer holds at most 2 responses; the stream stops reading,
 * then resumes as poll takes them, and nothing is lost. */
static void test_bounds(struct cetcd_client *c)
{
    struct cetcd_watch_stream *s = open_poll(c, 2, 1);
    struct cetcd_watch_opts o = {0};
    struct cetcd_watch_response *r;
    struct cetcd_status st;
    char b[128];
    int events = 0;

    create(s, &o, "bd/");
    for (int i = 0; i < 20; i++)
        put(c, "bd/k", "v");
    while (events < 20 && (r = next(s)) != NULL) {
        CHECK(cetcd_watch_stream_buffered(s) <= 2);
        events += (int)r->events_len;
        cetcd_watch_response_free(r);
    }
    CHECK(events == 20);
    /* Poll mode sends only inside poll: one request in flight, one in
     * the ring (send_max 1), the third is refused. */
    key("bd/", b, sizeof(b));
    CHECK(cetcd_watch_create(s, b, strlen(b), NULL, &st) == 0);
    CHECK(cetcd_watch_create(s, b, strlen(b), NULL, &st) == 0);
    CHECK(cetcd_watch_create(s, b, strlen(b), NULL, &st) ==
          CETCD_RESOURCE_EXHAUSTED);
    for (int i = 0; i < 2; i++) {
        r = next(s);
        CHECK(r && r->created);
        cetcd_watch_response_free(r);
    }
    cetcd_watch_stream_close(s);
}

/* Callback mode: what the queue's thread sees. */
struct cb_state {
    int created, events, closed, close_code;
};

static void on_resp(void *arg, struct cetcd_watch_response *r)
{
    struct cb_state *cs = arg;

    cs->created += r->created;
    cs->events += (int)r->events_len;
    cetcd_watch_response_free(r);
}

static void on_close(void *arg, const struct cetcd_status *st)
{
    struct cb_state *cs = arg;

    cs->closed++;
    cs->close_code = st->code;
}

static void test_callback(struct cetcd_client *c)
{
    struct cb_state cs = {0};
    struct cetcd_async_queue *q = NULL;
    struct cetcd_watch_stream_opts o = {.on_response = on_resp,
                                        .on_close = on_close, .arg = &cs};
    struct cetcd_watch_stream *s = NULL;
    struct cetcd_status st;
    char b[128];

    CHECK(cetcd_async_queue_open(&q) == 0);
    o.queue = q;
    CHECK(cetcd_watch_stream_open(c, &o, &s, &st) == 0);
    CHECK(cetcd_async_queue_pending(q) == 1);
    key("cb/k", b, sizeof(b));
    CHECK(cetcd_watch_create(s, b, strlen(b), NULL, &st) == 0);
    for (int i = 0; i < 50 && cs.created == 0; i++)
        cetcd_async_queue_run(q, 100);
    CHECK(cs.created == 1);
    for (int i = 0; i < 5; i++)
        put(c, "cb/k", "v");
    for (int i = 0; i < 50 && cs.events < 5; i++)
        cetcd_async_queue_run(q, 100);
    CHECK(cs.events == 5 && cs.closed == 0);
    cetcd_watch_stream_close(s);
    for (int i = 0; i < 50 && cetcd_async_queue_pending(q) > 0; i++)
        cetcd_async_queue_run(q, 100);
    CHECK(cetcd_async_queue_pending(q) == 0);
    CHECK(cs.closed == 1 && cs.close_code == CETCD_CANCELLED);
    cetcd_async_queue_close(q);
}

static void test_unreachable(void)
{
    struct cetcd_client_opts co = {.endpoints = "127.0.0.1:1",
                                   .dial_timeout_ms = 1000};
    struct cetcd_client *c = NULL;
    struct cetcd_watch_stream *s;
    struct cetcd_watch_response *r = NULL;
    struct cetcd_status st;

    CHECK(cetcd_client_open(&co, &c, &st) == 0);
    s = open_poll(c, 0, 0);
    CHECK(cetcd_watch_poll(s, 5000, &r, &st) == CETCD_UNAVAILABLE);
    CHECK(r == NULL);
    CHECK(cetcd_watch_create(s, "k", 1, NULL, &st) ==
          CETCD_FAILED_PRECONDITION);
    cetcd_watch_stream_close(s);
    cetcd_client_close(c);
}

int main(int argc, char **argv)
{
    struct cetcd_client_opts co = {0};
    struct cetcd_client *c = NULL;
    struct cetcd_status st;

    if (argc != 2) {
        fprintf(stderr, "usage: client_watch <endpoint>\n");
        return 2;
    }
    snprintf(pfx, sizeof(pfx), "cw%d/", (int)getpid());
    co.endpoints = argv[1];
    if (cetcd_client_open(&co, &c, &st) != 0) {
        fprintf(stderr, "open: %s\n", st.message);
        return 1;
    }
    test_events(c);
    test_filter_history_cancel(c);
    test_compacted(c);
    test_bounds(c);
    test_callback(c);
    cetcd_client_close(c);
    test_unreachable();
    if (failures > 0) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
