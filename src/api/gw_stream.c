/*
 * gw_stream.c - the /v3 gateway's streams and waits, as etcd 3.4's
 * grpc-gateway serves them over HTTP/1.x (rpc.h "HTTP answers that stay
 * open"): a struct svc_stream (svc.h) on an HTTP answer, so the same
 * services as on gRPC (Watch, LeaseKeepAlive, Observe, Snapshot, Lock,
 * Campaign) run behind it with the same bounds.
 *
 * What etcd's gateway does, and this does the same (compared byte for
 * byte after normalising ids in tests/integration/test_gateway.py):
 *   - /v3/watch, /v3/lease/keepalive (bidirectional): the body is a
 *     sequence of JSON requests (concatenated or newline-delimited).  The
 *     first one that does not decode, when it is the first, is answered
 *     500 {"error","message","code":2} (the gateway's error before the
 *     stream exists); a later one ends the reading silently (Go's decoder
 *     loop breaks and half-closes).  The end of the body is a half-close:
 *     the Watch stays open, LeaseKeepAlive ends.
 *   - /v3/election/observe, /v3/maintenance/snapshot (server streams): the
 *     body is one request, decoded as a unary one (400, code 3).
 *   - Each response is a line {"result":<message>}\n in a chunked 200
 *     answer with the gateway's headers; the head goes out with the first
 *     line (Go writes it at the first Write), so an Observe with no leader
 *     answers nothing at all until there is one.  An error ending the
 *     stream is {"error":{"grpc_code","http_code","message",
 *     "http_status"}} without a newline (grpc-gateway's streamChunk), with
 *     the HTTP status of its code when nothing was written before.
 *   - /v3/lock/lock, /v3/election/campaign (unary, but they wait): one
 *     answer with Content-Length once the lock is held or the campaign
 *     won; an error is the unary error body (code 2 as etcd's v3lock
 *     passes errors on, api_stream_method.errors_unknown).
 * A client that closes its connection cancels the service's stream
 * (on_close(cancelled)): the watchers are freed, a waiting Lock deletes
 * its key.  Over HTTP/2 (curl --http2) and HTTP/1.0 the same, as the
 * runtime writes those answers (rpc.h).
 *
 * Threads: opened and fed on the request's loop inside the handler; the
 * services send and close from any thread; on_close runs on the loop.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/api_int.h"
#include "http/http.h"
#include "json/json.h"
#include "server/server.h"
#include "svc/svc.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define JSON_CT "application/json"

enum gw_kind {
    GW_BIDI,   /* a sequence of requests in, a stream out */
    GW_SERVER, /* one request in, a stream out */
    GW_WAIT,   /* one request in, one answer out, when it comes */
};

/* A stream route: etcd's path (after /v3) and its service. */
struct gw_route {
    const char *path;                         /* "/watch" */
    const struct svc_stream_handler *handler; /* the service */
    enum gw_kind kind;                        /* see enum gw_kind */
    size_t queue_max;                         /* the service's queue */
    bool errors_unknown;                      /* as api_stream_method's */
};

static const struct gw_route gw_routes[] = {
    {"/watch", &svc_watch_handler, GW_BIDI, RPC_DEFAULT_STREAM_QUEUE, false},
    {"/lease/keepalive", &svc_lease_keepalive_handler, GW_BIDI,
     RPC_DEFAULT_STREAM_QUEUE, false},
    {"/election/observe", &svc_observe_handler, GW_SERVER,
     RPC_DEFAULT_STREAM_QUEUE, true},
    {"/maintenance/snapshot", &svc_snapshot_handler, GW_SERVER,
     SVC_SNAPSHOT_QUEUE, false},
    {"/lock/lock", &svc_lock_handler, GW_WAIT, RPC_DEFAULT_STREAM_QUEUE,
     true},
    {"/election/campaign", &svc_campaign_handler, GW_WAIT,
     RPC_DEFAULT_STREAM_QUEUE, true},
};

/* One gateway stream.  Two holders, as api/stream.c's adapter: the
 * runtime (until on_close) and the service (from its open until its
 * release); the last one frees. */
struct gws {
    struct svc_stream st;        /* what the service is given */
    struct rpc_stream *rs;       /* the HTTP answer */
    const struct gw_route *r;    /* the route */
    void *state;                 /* the service's */
    bool opened;                 /* the service's open succeeded */
    atomic_bool wrote;           /* a result line was queued */
    atomic_int refs;             /* holders left */
    /* A bidi route's request body that stays open (loop only): */
    const ProtobufCMessageDescriptor *d; /* its requests' type */
    struct json_pb_reader *rd;   /* the sequence read so far */
    size_t value_max;            /* bytes one request may take */
    bool first_pending;          /* no request decoded yet */
    bool reading_done;           /* the rest of the body is ignored */
};

static void unref(struct gws *g)
{
    int left = atomic_fetch_sub(&g->refs, 1) - 1;
    CHECK(left >= 0);
    if (left == 0) {
        json_pb_reader_free(g->rd);
        mem_free(g);
    }
}

static const struct rpc_http_head stream_head = {
    200, JSON_CT, RPC_HTTP_GRPC_META, false};

/* plain returns m, or, when m carries fields the JSON writer does not
 * see (the Watch service's events, encoded once for every watcher as
 * unknown fields: svc/watch.c), a copy unpacked from m's bytes in
 * *copy_out (to be freed). */
static int plain(const ProtobufCMessage *m, ProtobufCMessage **copy_out,
                 const ProtobufCMessage **out)
{
    *copy_out = NULL;
    *out = m;
    if (m->n_unknown_fields == 0)
        return 0;
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = mem_malloc(n > 0 ? n : 1);
    if (p == NULL)
        return ERR_NOMEM;
    protobuf_c_message_pack(m, p);
    *copy_out = protobuf_c_message_unpack(m->descriptor, NULL, n, p);
    mem_free(p);
    if (*copy_out == NULL)
        return ERR_NOMEM;
    *out = *copy_out;
    return 0;
}

static int st_send_any(void *ctx, const ProtobufCMessage *msg, bool ctrl)
{
    struct gws *g = ctx;
    struct json_buf b = {0};
    bool wait = g->r->kind == GW_WAIT;
    ProtobufCMessage *copy;
    const ProtobufCMessage *m;
    int rc = plain(msg, &copy, &m);
    if (rc != 0)
        return rc;
    if (!wait)
        json_buf_str(&b, "{\"result\":");
    rc = json_pb_encode(m, &b);
    if (copy != NULL)
        protobuf_c_message_free_unpacked(copy, NULL);
    if (!wait)
        json_buf_str(&b, "}\n");
    if (rc == 0 && b.nomem)
        rc = ERR_NOMEM;
    if (rc == 0) {
        struct rpc_http_head h = stream_head;
        h.whole = wait;
        rc = rpc_stream_send_http(g->rs, &h, b.p, b.n, ctrl);
    }
    if (rc == 0) {
        atomic_store(&g->wrote, true);
        rpc_stream_count_msg(g->rs, true);
    }
    mem_free(b.p);
    return rc;
}

static int st_send(void *ctx, const ProtobufCMessage *m)
{
    return st_send_any(ctx, m, false);
}

static int st_send_ctrl(void *ctx, const ProtobufCMessage *m)
{
    return st_send_any(ctx, m, true);
}

/* The request's metadata as grpc-gateway forwards it (gateway.c's
 * gw_metadata, on the stream): the Authorization header, and
 * Grpc-Metadata-<Key> as <key>. */
static const char *st_metadata(void *ctx, const char *key, size_t *len_out)
{
    struct gws *g = ctx;
    if (strcmp(key, "authorization") == 0)
        return rpc_stream_metadata(g->rs, key, len_out);
    char name[64];
    int n = snprintf(name, sizeof name, "grpc-metadata-%s", key);
    if (n < 0 || (size_t)n >= sizeof name)
        return NULL;
    return rpc_stream_metadata(g->rs, name, len_out);
}

/* error_body writes the error that ends g's answer: the unary body for a
 * wait, grpc-gateway's stream chunk for a stream. */
static void error_body(const struct gws *g, grpc_status_code code,
                       const char *msg, struct json_buf *b)
{
    char num[64];
    if (g->r->kind == GW_WAIT) {
        json_buf_str(b, "{\"error\":");
        json_pb_string(b, msg, strlen(msg));
        json_buf_str(b, ",\"message\":");
        json_pb_string(b, msg, strlen(msg));
        snprintf(num, sizeof num, ",\"code\":%d}", (int)code);
        json_buf_str(b, num);
        return;
    }
    int status = api__gw_status(code);
    snprintf(num, sizeof num, "{\"error\":{\"grpc_code\":%d,\"http_code\":%d,",
             (int)code, status);
    json_buf_str(b, num);
    json_buf_str(b, "\"message\":");
    json_pb_string(b, msg, strlen(msg));
    json_buf_str(b, ",\"http_status\":");
    const char *text = http_reason(status);
    json_pb_string(b, text, strlen(text));
    json_buf_str(b, "}}");
}

static int st_close(void *ctx, int err)
{
    struct gws *g = ctx;
    if (err != 0) {
        const char *msg = "";
        grpc_status_code code = api_error(err, &msg);
        if (g->r->errors_unknown)
            code = GRPC_STATUS_UNKNOWN;
        rpc_stream_count_code(g->rs, code);
        struct json_buf b = {0};
        error_body(g, code, msg, &b);
        struct rpc_http_head h = {api__gw_status(code), JSON_CT, 0,
                                  g->r->kind == GW_WAIT};
        if (!b.nomem) /* the reserve: an error is never dropped */
            rpc_stream_send_http(g->rs, &h, b.p, b.n, true);
        mem_free(b.p);
    } else if (!atomic_load(&g->wrote)) {
        /* ended OK with nothing sent: an empty chunked 200, as etcd */
        rpc_stream_send_http(g->rs, &stream_head, NULL, 0, true);
    }
    return rpc_stream_finish(g->rs, GRPC_STATUS_OK, NULL);
}

static void st_release(void *ctx)
{
    struct gws *g = ctx;
    rpc_stream_release(g->rs);
    unref(g);
}

/* The runtime's on_close, on the loop: the answer is written
 * (cancelled false) or the client went away (true). */
static void on_close(struct rpc_stream *rs, bool cancelled, void *ctx)
{
    (void)rs;
    struct gws *g = ctx;
    if (g->opened)
        g->r->handler->end(g->state, cancelled);
    else
        rpc_stream_release(g->rs); /* nobody else holds it */
    unref(g);
}

static const struct gw_route *route_find(const char *path)
{
    for (size_t i = 0; i < sizeof gw_routes / sizeof gw_routes[0]; i++)
        if (strcmp(gw_routes[i].path, path) == 0)
            return &gw_routes[i];
    return NULL;
}

/* feed gives the service the requests of body from off on (a bidi
 * stream's rest), then the half-close. */
static void feed(struct gws *g, const ProtobufCMessageDescriptor *d,
                 const char *body, size_t n, size_t off)
{
    char why[JSON_PB_ERR_MAX];
    while (off < n) {
        ProtobufCMessage *m = NULL;
        size_t used = 0;
        int rc = json_pb_decode_next(d, body + off, n - off, &used, &m, why,
                                     sizeof why);
        if (rc != 0)
            break; /* the end, or Go's decoder loop gives up: half-close */
        off += used;
        rpc_stream_count_msg(g->rs, false);
        g->r->handler->recv(g->state, m);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    g->r->handler->recv(g->state, NULL);
}

/* blank: n bytes of JSON whitespace only. */
static bool blank(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] != ' ' && t[i] != '\t' && t[i] != '\r' && t[i] != '\n')
            return false;
    return true;
}

/* first_request decodes the request the stream opens with; false when
 * call was answered with the decoder's refusal.  *off_out: where the
 * rest of a bidi body starts. */
static bool first_request(const struct gw_route *r,
                          const ProtobufCMessageDescriptor *d,
                          struct rpc_call *call, const char *body, size_t n,
                          ProtobufCMessage **m_out, size_t *off_out)
{
    char why[JSON_PB_ERR_MAX];
    *m_out = NULL;
    *off_out = n;
    /* a chunked body that broke off: the request before the bad framing
     * is read, else the read's error is the answer (as Go's decoder) */
    const char *berr = rpc_call_http_body_error(call);
    if (r->kind != GW_BIDI) {
        int rc = json_pb_decode(d, body, n, m_out, NULL, why, sizeof why);
        if (rc == 0 && berr != NULL && blank(body, n)) {
            protobuf_c_message_free_unpacked(*m_out, NULL);
            *m_out = NULL;
            rc = ERR_INVAL;
        }
        if (rc == 0)
            return true;
        const char *msg = berr != NULL ? berr : why;
        grpc_status_code code = rc == ERR_INVAL
                                    ? GRPC_STATUS_INVALID_ARGUMENT
                                    : api_error(rc, &msg);
        api__gw_reply_error(call, code, msg);
        return false;
    }
    int rc = json_pb_decode_next(d, body, n, off_out, m_out, why, sizeof why);
    if (rc == 0 || (rc == ERR_NOTFOUND && berr == NULL))
        return true; /* an empty body: the stream opens, then half-closes */
    /* the gateway's error before the stream exists: not a gRPC status */
    api__gw_reply_error(call, GRPC_STATUS_UNKNOWN,
                        berr != NULL         ? berr
                        : rc == ERR_INVAL ? why
                                             : err_str(rc));
    return false;
}

/* first_fail answers an open bidi stream whose first request does not
 * decode as the gateway answers one before its stream exists: 500, code
 * 2, as one whole answer (nothing was written before it). */
static void first_fail(struct gws *g, const char *msg)
{
    struct json_buf b = {0};
    json_buf_str(&b, "{\"error\":");
    json_pb_string(&b, msg, strlen(msg));
    json_buf_str(&b, ",\"message\":");
    json_pb_string(&b, msg, strlen(msg));
    json_buf_str(&b, ",\"code\":2}");
    struct rpc_http_head h = {500, JSON_CT, 0, true};
    rpc_stream_count_code(g->rs, GRPC_STATUS_CANCELLED);
    if (!b.nomem)
        rpc_stream_send_http(g->rs, &h, b.p, b.n, true);
    mem_free(b.p);
    rpc_stream_finish(g->rs, GRPC_STATUS_OK, NULL);
}

/* open_more reads the requests in n more bytes of an open body (end: the
 * body ended; err: its framing broke) and hands each to the service as
 * it completes, as etcd's gateway's decoder loop sends each request on
 * its gRPC stream; the end (or a request that does not decode) is the
 * half-close, the first one failing is first_fail.  On the loop. */
static void open_more(struct gws *g, const uint8_t *p, size_t n, bool end,
                      const char *err)
{
    char why[JSON_PB_ERR_MAX];
    size_t off = 0;
    bool last = end || err != NULL;
    while (!g->reading_done) {
        ProtobufCMessage *m = NULL;
        size_t used = 0;
        int rc = json_pb_reader_next(g->rd, g->d, (const char *)p + off,
                                     n - off, last, g->value_max, &used,
                                     &m, why, sizeof why);
        if (rc == ERR_MORE)
            return; /* the rest of the request is still to come */
        if (rc == 0) {
            off += used;
            g->first_pending = false;
            rpc_stream_count_msg(g->rs, false);
            g->r->handler->recv(g->state, m);
            protobuf_c_message_free_unpacked(m, NULL);
            continue;
        }
        g->reading_done = true;
        if (g->first_pending && (rc != ERR_NOTFOUND || err != NULL))
            first_fail(g, err != NULL         ? err
                          : rc == ERR_INVAL ? why
                                            : err_str(rc));
        else
            g->r->handler->recv(g->state, NULL); /* the half-close */
    }
}

/* The runtime's rpc_http_body_fn: the rest of an open body. */
static void on_body(struct rpc_stream *rs, const uint8_t *p, size_t n,
                    bool end, const char *err, void *ctx)
{
    (void)rs;
    struct gws *g = ctx;
    if (g->opened)
        open_more(g, p, n, end, err);
}

/* gws_bind ties g to its route and its runtime stream rs: the service's
 * end of the stream, the metrics name (as etcd's gateway's gRPC stream),
 * the runtime's reference (until on_close). */
static void gws_bind(struct gws *g, const struct gw_route *r,
                     struct rpc_stream *rs, const char *grpc)
{
    g->st = (struct svc_stream){
        .send = st_send,
        .send_ctrl = st_send_ctrl,
        .close = st_close,
        .release = st_release,
        .metadata = st_metadata,
        .ctx = g,
        .queue_max = r->queue_max,
    };
    g->rs = rs;
    g->r = r;
    rpc_stream_count_as(rs, grpc);
    atomic_init(&g->refs, 1);
}

/* open_body serves a bidi route whose request body is still coming: the
 * stream opens now (etcd's gateway opens its gRPC stream before it reads
 * the body) and each request is handed on as it completes. */
static void open_body(struct server *s, const struct gw_route *r,
                      const char *grpc, const ProtobufCMessageDescriptor *d,
                      struct rpc_call *call, const uint8_t *body, size_t n)
{
    struct gws *g = mem_calloc(1, sizeof *g);
    struct rpc_stream *rs = NULL;
    int rc = g == NULL ? ERR_NOMEM : json_pb_reader_new(&g->rd);
    if (rc == 0)
        rc = rpc_call_http_stream(call, on_close, g, &rs);
    if (rc != 0) {
        if (g != NULL)
            json_pb_reader_free(g->rd);
        mem_free(g);
        api__gw_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                            err_str(rc));
        return;
    }
    gws_bind(g, r, rs, grpc);
    g->d = d;
    g->first_pending = true;
    /* one request may be as large as a gRPC message may */
    g->value_max = (size_t)server_max_request_bytes(s) + 512 * 1024;
    rpc_stream_http_body(rs, on_body);
    rc = r->handler->open(s, &g->st, &g->state);
    if (rc != 0) {
        g->reading_done = true;
        st_close(g, rc); /* the runtime's on_close releases rs */
        return;
    }
    g->opened = true;
    atomic_fetch_add(&g->refs, 1); /* the service's, until release */
    open_more(g, body, n, false, NULL);
}

bool api__gw_stream(struct server *s, const char *path, const char *grpc,
                    const ProtobufCMessageDescriptor *d,
                    struct rpc_call *call, const uint8_t *body, size_t n)
{
    const struct gw_route *r = route_find(path);
    if (r == NULL)
        return false;
    if (r->kind == GW_BIDI && rpc_call_http_body_open(call)) {
        open_body(s, r, grpc, d, call, body, n);
        return true;
    }
    ProtobufCMessage *first = NULL;
    size_t off = 0;
    if (!first_request(r, d, call, (const char *)body, n, &first, &off))
        return true;
    struct gws *g = mem_calloc(1, sizeof *g);
    struct rpc_stream *rs = NULL;
    int rc = g == NULL ? ERR_NOMEM : rpc_call_http_stream(call, on_close, g,
                                                          &rs);
    if (rc != 0) {
        mem_free(g);
        if (first != NULL)
            protobuf_c_message_free_unpacked(first, NULL);
        api__gw_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                            err_str(rc));
        return true;
    }
    /* call is gone: from here on everything goes through rs */
    gws_bind(g, r, rs, grpc);
    rc = r->handler->open(s, &g->st, &g->state);
    if (rc != 0) {
        st_close(g, rc); /* the runtime's on_close releases rs */
    } else {
        g->opened = true;
        atomic_fetch_add(&g->refs, 1); /* the service's, until release */
        if (first != NULL) {
            rpc_stream_count_msg(rs, false);
            r->handler->recv(g->state, first);
        }
        if (r->kind == GW_BIDI)
            feed(g, d, (const char *)body, n, off);
        else
            r->handler->recv(g->state, NULL);
    }
    if (first != NULL)
        protobuf_c_message_free_unpacked(first, NULL);
    return true;
}
