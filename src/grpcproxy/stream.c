/*
 * stream.c - the proxy's streams: each client stream (down) gets one
 * upstream stream of the same method (up); messages are passed each way
 * as bytes, through --namespace.  Watch, LeaseKeepAlive, Snapshot and
 * Observe, and Lock and Campaign: unary on the wire, but they may wait
 * for ever, so they are served as streams to learn when their client
 * leaves (the upstream call is then cancelled, as etcd's proxy cancels
 * its context).
 *
 * Flow control.  Upstream messages go down with rpc_stream_send_bytes;
 * when the client's queue is full the message is held and the upstream
 * paused, and the client's on_writable sends what is held and resumes it
 * (so a slow client holds back the server through HTTP/2, not the proxy's
 * memory).  Client messages go up through the upstream's bounded send
 * ring; a client that overfills it is ended RESOURCE_EXHAUSTED.
 *
 * Threads: down's callbacks run on its rpc loop, up's on the upstream
 * thread; gs->mu orders them.  The pair is freed when both sides ended.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpcproxy/grpcproxy_int.h"
#include "util/err.h"
#include "util/mem.h"

#define GP_STREAM_SEND_MAX 256

/* A message the client's queue refused, waiting for on_writable. */
struct held {
    struct held *next;
    size_t len;
    uint8_t bytes[];
};

struct gp_stream {
    struct grpcproxy *p;
    const struct gp_method *m;
    struct rpc_stream *down;
    struct cetcd_raw_stream *up; /* NULL until opened */
    pthread_mutex_t mu;          /* guards what follows */
    int refs;                    /* down until its on_close, up until its */
    bool down_gone;              /* down's on_close ran */
    bool up_closed;              /* cetcd_raw_stream_close was called */
    bool up_ended;               /* up's on_close ran */
    bool paused;                 /* up is paused for held messages */
    struct held *held, **held_tail;
    bool finish_held;            /* finish down once held is sent */
    int fin_code;
    char fin_msg[256];
};

static void gs_unref(struct gp_stream *gs, bool last)
{
    if (!last)
        return;
    for (struct held *h = gs->held, *n; h != NULL; h = n) {
        n = h->next;
        mem_free(h);
    }
    pthread_mutex_destroy(&gs->mu);
    mem_free(gs);
}

/* up_close_locked: ask for the upstream's close once; mu held.  Returns
 * the stream to close after unlocking, or NULL. */
static struct cetcd_raw_stream *up_close_locked(struct gp_stream *gs)
{
    if (gs->up == NULL || gs->up_closed)
        return NULL;
    gs->up_closed = true;
    return gs->up;
}

/* finish_down: end the client's stream with code/msg; mu held. */
static void finish_down(struct gp_stream *gs, int code, const char *msg)
{
    if (!gs->down_gone)
        rpc_stream_finish(gs->down, (grpc_status_code)code, msg);
}

/* send_down passes one upstream message on; mu held.  A refused message
 * is held and the upstream paused. */
static void send_down(struct gp_stream *gs, const uint8_t *b, size_t len)
{
    struct held *h;
    int rc;

    if (gs->held == NULL) {
        rc = rpc_stream_send_bytes(gs->down, b, len);
        if (rc != ERR_FULL) {
            if (rc == ERR_NOMEM)
                finish_down(gs, GRPC_STATUS_RESOURCE_EXHAUSTED,
                            "grpc-proxy: out of memory");
            return;
        }
    }
    h = mem_malloc(sizeof *h + len);
    if (h == NULL) {
        finish_down(gs, GRPC_STATUS_RESOURCE_EXHAUSTED,
                    "grpc-proxy: out of memory");
        return;
    }
    h->next = NULL;
    h->len = len;
    memcpy(h->bytes, b, len);
    *gs->held_tail = h;
    gs->held_tail = &h->next;
    if (!gs->paused && gs->up != NULL && !gs->up_closed) {
        gs->paused = true;
        cetcd_raw_stream_pause(gs->up, true);
    }
}

/* --- upstream callbacks (the upstream thread) --- */

static void up_msg(void *arg, const uint8_t *msg, size_t len)
{
    struct gp_stream *gs = arg;
    struct grpcproxy *p = gs->p;
    uint8_t *out = NULL;
    int code = 0;
    const char *emsg = NULL;
    struct cetcd_raw_stream *close_up = NULL;

    pthread_mutex_lock(&gs->mu);
    if (gs->down_gone)
        goto out;
    if (!gp_ns_apply(p, gs->m->path, true, &msg, &len, &out, &code,
                     &emsg)) {
        finish_down(gs, code, emsg);
        close_up = up_close_locked(gs);
        goto out;
    }
    send_down(gs, msg, len);
out:
    pthread_mutex_unlock(&gs->mu);
    free(out);
    if (close_up != NULL)
        cetcd_raw_stream_close(close_up);
}

static void up_end(void *arg, const struct cetcd_status *st)
{
    struct gp_stream *gs = arg;
    struct cetcd_raw_stream *close_up;
    bool last;

    pthread_mutex_lock(&gs->mu);
    gs->up_ended = true;
    if (!gs->down_gone) {
        if (gs->held != NULL) {
            gs->finish_held = true;
            gs->fin_code = st->code;
            snprintf(gs->fin_msg, sizeof gs->fin_msg, "%s", st->message);
        } else {
            finish_down(gs, st->code, st->code != 0 ? st->message : NULL);
        }
    }
    close_up = up_close_locked(gs);
    last = --gs->refs == 0;
    pthread_mutex_unlock(&gs->mu);
    if (close_up != NULL)
        cetcd_raw_stream_close(close_up);
    gs_unref(gs, last);
}

/* --- client callbacks (its loop) --- */

static const char *stream_md(const void *obj, const char *key, size_t *len)
{
    return rpc_stream_metadata(obj, key, len);
}

static void down_open(struct rpc_stream *down, void *ctx)
{
    const struct gp_route *r = ctx;
    struct gp_stream *gs = mem_calloc(1, sizeof *gs);
    struct cetcd_md md[CETCD_RAW_MD_MAX];
    struct cetcd_raw_stream_opts o;
    struct cetcd_status st;
    char mdbuf[4096];

    if (gs == NULL) {
        rpc_stream_finish(down, GRPC_STATUS_RESOURCE_EXHAUSTED,
                          "grpc-proxy: out of memory");
        rpc_stream_data_set(down, NULL);
        return;
    }
    gs->p = r->p;
    gs->m = r->m;
    gs->down = down;
    gs->held_tail = &gs->held;
    gs->refs = 2; /* down, and up until its on_close */
    pthread_mutex_init(&gs->mu, NULL);
    rpc_stream_data_set(down, gs);
    if (strcmp(r->m->path, "/etcdserverpb.Watch/Watch") == 0)
        rpc_stream_background(down);
    memset(&o, 0, sizeof o);
    o.queue = r->p->q;
    o.md = md;
    o.md_n = gp_md_fill(stream_md, down, md, mdbuf, sizeof mdbuf);
    o.deadline_mono_ns = INT64_MAX;
    o.on_msg = up_msg;
    o.on_close = up_end;
    o.arg = gs;
    /* clientv3 keeps one watch create in flight per stream and a keep-alive
     * per lease per TTL/3: a client past this is not one of those. */
    o.send_max = GP_STREAM_SEND_MAX;
    pthread_mutex_lock(&gs->mu);
    if (cetcd_raw_stream_open(r->p->cli, r->m->path, &o, &gs->up, &st) !=
        0) {
        gs->up = NULL;
        gs->refs--; /* no upstream callbacks come */
        finish_down(gs, st.code != 0 ? st.code : GRPC_STATUS_UNAVAILABLE,
                    st.message);
    }
    pthread_mutex_unlock(&gs->mu);
}

static void down_msg(struct rpc_stream *down, const uint8_t *msg,
                     size_t len, void *ctx)
{
    struct gp_stream *gs = rpc_stream_data_get(down);
    struct grpcproxy *p;
    struct cetcd_raw_stream *close_up = NULL;
    struct cetcd_status st;
    uint8_t *out = NULL;
    int code = 0;
    const char *emsg = NULL;
    char big[128];

    (void)ctx;
    if (gs == NULL)
        return;
    p = gs->p;
    pthread_mutex_lock(&gs->mu);
    if (gs->up == NULL || gs->up_closed || gs->up_ended)
        goto out;
    if (msg == NULL) {
        cetcd_raw_stream_close_send(gs->up, &st);
        goto out;
    }
    if (!gp_ns_apply(p, gs->m->path, false, &msg, &len, &out, &code,
                     &emsg)) {
        finish_down(gs, code, emsg);
        close_up = up_close_locked(gs);
        goto out;
    }
    if (gp_too_big(p, len, big, sizeof big)) {
        finish_down(gs, GRPC_STATUS_RESOURCE_EXHAUSTED, big);
        close_up = up_close_locked(gs);
        goto out;
    }
    if (cetcd_raw_stream_send(gs->up, msg, len, &st) != 0 &&
        st.code != CETCD_FAILED_PRECONDITION) {
        /* FAILED_PRECONDITION: the upstream ended; its on_close says how. */
        finish_down(gs, st.code, st.message);
        close_up = up_close_locked(gs);
    }
out:
    pthread_mutex_unlock(&gs->mu);
    free(out);
    if (close_up != NULL)
        cetcd_raw_stream_close(close_up);
}

static void down_writable(struct rpc_stream *down, void *ctx)
{
    struct gp_stream *gs = rpc_stream_data_get(down);

    (void)ctx;
    if (gs == NULL)
        return;
    pthread_mutex_lock(&gs->mu);
    while (gs->held != NULL && !gs->down_gone) {
        struct held *h = gs->held;
        int rc = rpc_stream_send_bytes(down, h->bytes, h->len);
        if (rc == ERR_FULL)
            break;
        gs->held = h->next;
        if (gs->held == NULL)
            gs->held_tail = &gs->held;
        mem_free(h);
    }
    if (gs->held == NULL) {
        if (gs->finish_held) {
            gs->finish_held = false;
            finish_down(gs, gs->fin_code,
                        gs->fin_code != 0 ? gs->fin_msg : NULL);
        } else if (gs->paused && gs->up != NULL && !gs->up_closed) {
            gs->paused = false;
            cetcd_raw_stream_pause(gs->up, false);
        }
    }
    pthread_mutex_unlock(&gs->mu);
}

static void down_close(struct rpc_stream *down, bool cancelled, void *ctx)
{
    struct gp_stream *gs = rpc_stream_data_get(down);
    struct cetcd_raw_stream *close_up;
    bool last;

    (void)cancelled;
    (void)ctx;
    if (gs == NULL) {
        rpc_stream_release(down);
        return;
    }
    pthread_mutex_lock(&gs->mu);
    gs->down_gone = true;
    close_up = up_close_locked(gs);
    last = --gs->refs == 0;
    pthread_mutex_unlock(&gs->mu);
    if (close_up != NULL)
        cetcd_raw_stream_close(close_up);
    rpc_stream_release(down);
    gs_unref(gs, last);
}

const struct rpc_stream_ops gp_stream_ops = {
    .on_open = down_open,
    .on_message = down_msg,
    .on_close = down_close,
    .on_writable = down_writable,
    .wire_type = RPC_TYPE_BIDI_STREAM,
};

const struct rpc_stream_ops gp_stream_ops_unary = {
    .on_open = down_open,
    .on_message = down_msg,
    .on_close = down_close,
    .on_writable = down_writable,
    .wire_type = RPC_TYPE_UNARY,
};

const struct rpc_stream_ops gp_stream_ops_server = {
    .on_open = down_open,
    .on_message = down_msg,
    .on_close = down_close,
    .on_writable = down_writable,
    .wire_type = RPC_TYPE_SERVER_STREAM,
};
