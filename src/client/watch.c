/*
 * watch.c - a Watch stream: the streaming-call engine of stream.c (one
 * bidirectional call, a bounded send ring, a bounded poll buffer or
 * callbacks on an async queue) carrying WatchRequests, with the
 * WatchResponses decoded into struct cetcd_watch_response
 * (watch_decode.c).  This file checks the options, builds the requests,
 * relays the callbacks and words the errors.
 */
#include <assert.h>
#include <string.h>

#include "client/client_int.h"
#include "util/mem.h"

#define WATCH_METHOD "/etcdserverpb.Watch/Watch"

/* The public handle: the engine and the caller's options, which the
 * engine's hooks read (callbacks, arg).  Allocated by open, freed by the
 * engine's release hook, after its last callback. */
struct cetcd_watch_stream {
    struct cetcd_stream *s;           /* the engine; NULL until open */
    struct cetcd_watch_stream_opts o; /* callbacks, arg, bounds */
};

static int decode(const void *ctx, const uint8_t *data, size_t len,
                  void **obj_out)
{
    struct cetcd_watch_response *r = NULL;
    int rc = client__watch_response_decode(data, len, &r);

    (void)ctx;
    assert(rc == 0 || r == NULL);
    *obj_out = r;
    return rc;
}

static void obj_free(void *obj)
{
    cetcd_watch_response_free(obj);
}

static void on_msg(void *ctx, void *obj)
{
    struct cetcd_watch_stream *w = ctx;

    w->o.on_response(w->o.arg, obj);
}

static void on_close(void *ctx, const struct cetcd_status *st)
{
    struct cetcd_watch_stream *w = ctx;

    if (w->o.on_close != NULL)
        w->o.on_close(w->o.arg, st);
}

static void release(void *ctx)
{
    mem_free(ctx);
}

static const struct client__stream_hooks watch_hooks = {
    .decode = decode,
    .obj_free = obj_free,
    .on_msg = on_msg,
    .on_close = on_close,
    .release = release,
};

static int opts_check(const struct cetcd_watch_stream_opts *o)
{
    if (o == NULL)
        return 0;
    if ((o->queue == NULL) != (o->on_response == NULL))
        return CETCD_INVALID_ARGUMENT;
    if (o->queue == NULL && o->on_close != NULL)
        return CETCD_INVALID_ARGUMENT;
    return 0;
}

int cetcd_watch_stream_open(struct cetcd_client *c,
                            const struct cetcd_watch_stream_opts *opts,
                            struct cetcd_watch_stream **stream_out,
                            struct cetcd_status *st)
{
    struct client__stream_cfg cfg = {.method = WATCH_METHOD,
                                     .what = "WatchResponse",
                                     .hooks = &watch_hooks,
                                     .ok_is_cancelled = true};
    struct cetcd_watch_stream *w;
    int rc;

    if (c == NULL || stream_out == NULL || opts_check(opts) != 0)
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "bad watch stream arguments");
    *stream_out = NULL;
    w = mem_calloc(1, sizeof(*w));
    if (w == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    if (opts != NULL)
        w->o = *opts;
    if (w->o.buffer_max == 0)
        w->o.buffer_max = CETCD_WATCH_BUFFER_DEFAULT;
    if (w->o.send_max == 0)
        w->o.send_max = CETCD_WATCH_SEND_DEFAULT;
    cfg.ctx = w;
    cfg.queue = w->o.queue;
    cfg.buffer_max = w->o.buffer_max;
    cfg.send_max = w->o.send_max;
    /* the extra pair too: "hasleader" = "true" is how etcd's clients ask
     * for a Watch that ends when the member loses its leader */
    cfg.md_extra = true;
    /* From here on the engine owns w (release frees it). */
    rc = client__stream_open(c, &cfg, &w->s);
    if (rc == CETCD_RESOURCE_EXHAUSTED)
        return client__status_set(st, rc, "no memory");
    if (rc != 0)
        return client__status_set(st, rc, "cannot start the Watch call");
    *stream_out = w;
    return client__status_set(st, 0, "%s", "");
}

void cetcd_watch_stream_close(struct cetcd_watch_stream *w)
{
    if (w == NULL)
        return;
    assert(w->s != NULL);
    client__stream_close(w->s); /* frees w too, now or later */
}

/* request_send packs and sends (or queues) req. */
static int request_send(struct cetcd_watch_stream *w,
                        const Etcdserverpb__WatchRequest *req,
                        struct cetcd_status *st)
{
    grpc_byte_buffer *buf;
    int rc;

    if (w == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no stream");
    buf = client__pack(&req->base);
    if (buf == NULL)
        return client__status_set(st, CETCD_RESOURCE_EXHAUSTED, "no memory");
    rc = client__stream_send(w->s, buf);
    if (rc == CETCD_FAILED_PRECONDITION)
        return client__status_set(st, rc, "watch stream has ended");
    if (rc == CETCD_RESOURCE_EXHAUSTED)
        return client__status_set(st, rc, "%zu watch requests waiting",
                                  w->o.send_max);
    if (rc != 0)
        return client__status_set(st, rc, "cannot send WatchRequest");
    return client__status_set(st, 0, "%s", "");
}

int cetcd_watch_create(struct cetcd_watch_stream *s, const void *key,
                       size_t key_len, const struct cetcd_watch_opts *o,
                       struct cetcd_status *st)
{
    Etcdserverpb__WatchRequest req;
    Etcdserverpb__WatchCreateRequest cr;
    Etcdserverpb__WatchCreateRequest__FilterType filters[2];

    etcdserverpb__watch_request__init(&req);
    etcdserverpb__watch_create_request__init(&cr);
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    cr.key = (ProtobufCBinaryData){key_len, (uint8_t *)key};
    if (o != NULL) {
        cr.range_end = (ProtobufCBinaryData){o->range_end_len,
                                             (uint8_t *)o->range_end};
        cr.start_revision = o->start_revision;
        cr.prev_kv = o->prev_kv;
        cr.progress_notify = o->progress_notify;
        cr.fragment = o->fragment;
        cr.watch_id = o->watch_id;
        if (o->no_put)
            filters[cr.n_filters++] =
                ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT;
        if (o->no_delete)
            filters[cr.n_filters++] =
                ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NODELETE;
        cr.filters = filters;
    }
    return request_send(s, &req, st);
}

int cetcd_watch_cancel(struct cetcd_watch_stream *s, int64_t watch_id,
                       struct cetcd_status *st)
{
    Etcdserverpb__WatchRequest req;
    Etcdserverpb__WatchCancelRequest cr;

    etcdserverpb__watch_request__init(&req);
    etcdserverpb__watch_cancel_request__init(&cr);
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
    req.cancel_request = &cr;
    cr.watch_id = watch_id;
    return request_send(s, &req, st);
}

int cetcd_watch_progress(struct cetcd_watch_stream *s,
                         struct cetcd_status *st)
{
    Etcdserverpb__WatchRequest req;
    Etcdserverpb__WatchProgressRequest pr;

    etcdserverpb__watch_request__init(&req);
    etcdserverpb__watch_progress_request__init(&pr);
    req.request_union_case =
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
    req.progress_request = &pr;
    return request_send(s, &req, st);
}

int cetcd_watch_poll(struct cetcd_watch_stream *w, int timeout_ms,
                     struct cetcd_watch_response **resp_out,
                     struct cetcd_status *st)
{
    struct cetcd_status final;
    void *obj = NULL;

    if (w == NULL || resp_out == NULL || w->o.queue != NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT,
                                  "not a poll-mode watch stream");
    *resp_out = NULL;
    switch (client__stream_poll(w->s, timeout_ms, &obj, &final)) {
    case CLIENT_STREAM_MSG:
        *resp_out = obj;
        return client__status_set(st, 0, "%s", "");
    case CLIENT_STREAM_END:
        assert(final.code != 0); /* ok_is_cancelled */
        return client__status_set(st, final.code, "%s", final.message);
    default:
        return client__status_set(st, CETCD_DEADLINE_EXCEEDED,
                                  "no watch response within %d ms",
                                  timeout_ms);
    }
}

size_t cetcd_watch_stream_buffered(const struct cetcd_watch_stream *w)
{
    assert(w != NULL);
    return client__stream_buffered(w->s);
}
