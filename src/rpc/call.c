/*
 * call.c - unary calls: collecting the request, dispatch to handlers,
 * answers from any thread, and the UNIMPLEMENTED answers for methods
 * nobody registered.  The states are in rpc_int.h.
 *
 * An answer is written into the call (the reply with its 5-byte gRPC
 * prefix, or a status) by the answering thread, which then pushes the call
 * onto its loop's inbox.  The loop gives it to nghttp2: HEADERS, DATA and
 * the trailers (grpc-status) for a reply, one HEADERS frame with the
 * status (gRPC's trailers-only form) for an error.  Call objects are
 * recycled per loop with their buffers.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "rpc/rpc_int.h"
#include "http/http.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

#define FREE_LIST_MAX 1024     /* recycled call objects kept per loop */
#define KEEP_BUF_MAX 4096      /* larger buffers are not kept with them */

struct rpc_call *rpc__call_new(struct rpc__conn *c, int32_t stream_id)
{
    struct rpc__loop *l = c->loop;
    struct rpc_call *call = l->free_calls;
    if (call != NULL) {
        l->free_calls = call->next;
        l->free_n--;
    } else {
        call = mem_calloc(1, sizeof(*call));
        if (call == NULL)
            return NULL;
        call->item.kind = RPC__KIND_CALL;
    }
    call->state = RPC__CALL_READING;
    call->conn = c;
    call->stream_id = stream_id;
    call->gone = call->too_large = call->bad_encoding = false;
    call->over_budget = false;
    call->method = NULL;
    call->count_as = NULL;
    call->count_code = GRPC_STATUS_OK;
    call->cors_origin = NULL;
    call->deadline_ns = INT64_MAX;
    call->hdrs.n = 0;
    call->body_n = call->out_n = call->out_off = 0;
    call->code = GRPC_STATUS_OK;
    call->msg = NULL;
    call->grpc_ct = call->http = call->h1 = call->h1_close = false;
    call->bad_ct = call->body_open = call->body_ended = false;
    call->body_err = NULL;
    call->http_status = 0;
    call->http_ctype = NULL;
    call->http_flags = 0;
    call->h1_next = NULL;
    call->h1_stream = NULL;
    call->h1_v10 = false;
    call->http_slot = call->parked = false;
    call->prev = NULL;
    call->next = c->calls;
    if (c->calls != NULL)
        c->calls->prev = call;
    c->calls = call;
    c->refs++;
    return call;
}

static void buf_trim(uint8_t **p, size_t *cap)
{
    if (*cap > KEEP_BUF_MAX) {
        mem_free(*p);
        *p = NULL;
        *cap = 0;
    }
}

static void call_destroy(struct rpc_call *call)
{
    mem_free(call->body);
    mem_free(call->out);
    mem_free(call->hdrs.buf);
    mem_free(call);
}

/* rpc__call_free detaches call from its connection and recycles it. */
void rpc__call_free(struct rpc_call *call)
{
    struct rpc__conn *c = call->conn;
    struct rpc__loop *l = c->loop;
    /* A handler's call comes back through the inbox first. */
    assert(call->state != RPC__CALL_HANDLER);
    assert(c->refs > 1 || c->dead);
    if (call->prev != NULL)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next != NULL)
        call->next->prev = call->prev;
    rpc__guard_in_sub(c, call->body_n);
    call->body_n = 0;
    if (call->state == RPC__CALL_SUBMITTED && call->code == GRPC_STATUS_OK &&
        !call->h1)
        c->out_bytes -= call->out_n - call->out_off; /* reset unsent */
    mem_free(call->msg);
    call->msg = NULL;
    call->conn = NULL;
    if (l->free_n < FREE_LIST_MAX) {
        buf_trim(&call->body, &call->body_cap);
        buf_trim(&call->out, &call->out_cap);
        if (call->hdrs.cap > KEEP_BUF_MAX) {
            mem_free(call->hdrs.buf);
            call->hdrs.buf = NULL;
            call->hdrs.cap = 0;
        }
        call->next = l->free_calls;
        l->free_calls = call;
        l->free_n++;
    } else {
        call_destroy(call);
    }
    rpc__conn_unref(c);
}

void rpc__loop_free_calls(struct rpc__loop *l)
{
    while (l->free_calls != NULL) {
        struct rpc_call *call = l->free_calls;
        l->free_calls = call->next;
        call_destroy(call);
    }
    l->free_n = 0;
}

void rpc__call_ready(struct rpc_call *call)
{
    struct rpc__loop *l = call->conn->loop;
    assert(call->state == RPC__CALL_READING);
    call->state = RPC__CALL_READY;
    call->ready_next = NULL;
    if (l->ready_tail != NULL)
        l->ready_tail->ready_next = call;
    else
        l->ready = call;
    l->ready_tail = call;
}

bool rpc__http_open_path(const struct rpc_server *srv,
                         const struct rpc_call *call)
{
    size_t n = 0;
    const char *t = rpc__hdrs_find(&call->hdrs, ":path", &n);
    if (srv->http_open_paths == NULL || t == NULL)
        return false;
    n = http_path_len(t, n);
    for (const char *const *p = srv->http_open_paths; *p != NULL; p++)
        if (strlen(*p) == n && memcmp(*p, t, n) == 0)
            return true;
    return false;
}

bool rpc_call_http_body_open(const struct rpc_call *call)
{
    assert(call != NULL && call->http);
    return call->body_open && !call->body_ended;
}

const char *rpc_call_http_body_error(const struct rpc_call *call)
{
    assert(call != NULL && call->http);
    return call->body_err;
}

bool rpc__http_body_more(struct rpc_call *call, const uint8_t *p, size_t n,
                         bool end, const char *err)
{
    assert(call->body_open && !call->body_ended);
    /* (an HTTP/2 call that became a stream gets no more DATA: nghttp2
     * hands them to the stream, rpc__stream_data) */
    struct rpc_stream *s = call->h1 ? call->h1_stream : NULL;
    if (s != NULL) { /* became a stream: its owner reads on */
        if (s->http_on_body != NULL && !s->http_body_ended &&
            !s->close_told) {
            s->http_body_ended = end;
            s->http_on_body(s, p, n, end, err, s->http_ctx);
        }
        call->body_ended = end;
        return true;
    }
    if (call->state != RPC__CALL_READY && call->state != RPC__CALL_PARKED) {
        call->body_ended = end;
        return true; /* answered without a stream: dropped */
    }
    /* waits for its handler: kept as the body it is given */
    size_t max = call->conn->loop->srv->max_recv_bytes;
    if (call->body_n + n > max || !rpc__guard_in_add(call->conn, n))
        return false;
    uint8_t *b = rpc__buf_grow(call->body, &call->body_cap,
                               call->body_n + n, 1024);
    if (b == NULL) {
        rpc__guard_in_sub(call->conn, n);
        return false;
    }
    call->body = b;
    if (n > 0)
        memcpy(call->body + call->body_n, p, n);
    call->body_n += n;
    call->body_ended = end;
    if (end)
        call->body_err = err;
    return true;
}

void rpc__call_data(struct rpc_call *call, const uint8_t *p, size_t n)
{
    if (call->body_open && !call->body_ended &&
        (call->state == RPC__CALL_READY || call->state == RPC__CALL_PARKED)) {
        if (!rpc__http_body_more(call, p, n, false, NULL))
            nghttp2_submit_rst_stream(call->conn->ng, NGHTTP2_FLAG_NONE,
                                      call->stream_id,
                                      NGHTTP2_ENHANCE_YOUR_CALM);
        return;
    }
    if (call->state != RPC__CALL_READING)
        return; /* answered early (too large, unknown method) */
    size_t max = call->conn->loop->srv->max_recv_bytes;
    size_t need = call->body_n + n;
    if (call->http && need > max) {
        call->http_status = 413; /* an HTTP body: no gRPC framing */
        rpc__call_ready(call);
        return;
    }
    if (call->http)
        goto keep;
    if (call->body_n < RPC__PREFIX && need >= RPC__PREFIX) {
        uint8_t pre[RPC__PREFIX];
        size_t have = call->body_n;
        if (have > 0)
            memcpy(pre, call->body, have);
        memcpy(pre + have, p, RPC__PREFIX - have);
        if (rpc__prefix_len(pre) > max) {
            /* Refused now, as grpc-go does, without reading the rest. */
            call->too_large = true;
            call->big_n = rpc__prefix_len(pre);
            rpc__call_ready(call);
            return;
        }
    }
    if (need > max + RPC__PREFIX) {
        /* More than one message: refused before it is all buffered. */
        call->too_large = true;
        call->big_n = need - RPC__PREFIX;
        rpc__call_ready(call);
        return;
    }
keep:
    if (!rpc__guard_in_add(call->conn, n)) {
        call->over_budget = true; /* refused; its bytes are not kept */
        rpc__call_ready(call);
        return;
    }
    uint8_t *b = rpc__buf_grow(call->body, &call->body_cap, need, 1024);
    if (b == NULL) {
        rpc__guard_in_sub(call->conn, n);
        call->too_large = true; /* refused as if too large */
        call->big_n = need - RPC__PREFIX;
        rpc__call_ready(call);
        return;
    }
    call->body = b;
    memcpy(call->body + call->body_n, p, n);
    call->body_n = need;
}

/* rpc__call_closed: the HTTP/2 stream closed (client reset, or the
 * connection died) or, once answered, finished.  Frees the call unless
 * someone still holds it. */
void rpc__call_closed(struct rpc_call *call)
{
    switch (call->state) {
    case RPC__CALL_READING:
    case RPC__CALL_SUBMITTED:
        rpc__call_free(call);
        break;
    case RPC__CALL_PARKED:
        if (!rpc__call_parked_closed(call))
            call->gone = true;
        break;
    default: /* READY, HANDLER, ANSWERED: freed where they are taken */
        call->gone = true;
        break;
    }
}

/* Every proto service we know, so that unregistered methods get grpc-go's
 * exact UNIMPLEMENTED texts. */
static const ProtobufCServiceDescriptor *const known_services[] = {
    &etcdserverpb__kv__descriptor,      &etcdserverpb__watch__descriptor,
    &etcdserverpb__lease__descriptor,   &etcdserverpb__cluster__descriptor,
    &etcdserverpb__maintenance__descriptor,
    &etcdserverpb__auth__descriptor,    &v3electionpb__election__descriptor,
    &v3lockpb__lock__descriptor,
};

/* service_state: 0 unknown service, 1 known service without that method,
 * 2 a method of our protos that nobody registered. */
static int service_state(const struct rpc_server *srv, const char *svc,
                         size_t svc_n, const char *m)
{
    int state = 0;
    for (size_t i = 0; i < sizeof(known_services) / sizeof(*known_services);
         i++) {
        const ProtobufCServiceDescriptor *d = known_services[i];
        if (strlen(d->name) != svc_n || memcmp(d->name, svc, svc_n) != 0)
            continue;
        for (unsigned k = 0; k < d->n_methods; k++)
            if (strcmp(d->methods[k].name, m) == 0)
                return 2;
        state = 1;
    }
    for (size_t i = 0; i < srv->methods_n && state == 0; i++) {
        const char *p = srv->methods[i].path;
        if (strncmp(p + 1, svc, svc_n) == 0 && p[1 + svc_n] == '/')
            state = 1;
    }
    return state;
}

static void unimplemented_msg(const struct rpc_server *srv, const char *path,
                              char *buf, size_t cap)
{
    char full[256];
    snprintf(full, sizeof(full), "%s", path != NULL ? path : "");
    char *slash = full[0] == '/' ? strchr(full + 1, '/') : NULL;
    if (slash == NULL) {
        snprintf(buf, cap, "malformed method name: \"%s\"", full);
        return;
    }
    const char *svc = full + 1, *m = slash + 1;
    size_t svc_n = (size_t)(slash - svc);
    switch (service_state(srv, svc, svc_n, m)) {
    case 0:
        snprintf(buf, cap, "unknown service %.*s", (int)svc_n, svc);
        break;
    case 1:
        snprintf(buf, cap, "unknown method %s for service %.*s", m,
                 (int)svc_n, svc);
        break;
    default:
        snprintf(buf, cap, "method %s not implemented", m);
        break;
    }
}

/* http_refuse answers a request the runtime refused itself, with Go's
 * plain-text body ("400 Bad Request"). */
static void http_refuse(struct rpc_call *call, int status)
{
    char body[64];
    /* the parser's only 501 is a Transfer-Encoding Go does not take */
    int n = status == 501
                ? snprintf(body, sizeof body, "Unsupported transfer encoding")
                : snprintf(body, sizeof body, "%d %s", status,
                           http_reason(status));
    rpc_call_reply_http(call, status, "text/plain; charset=utf-8", 0, body,
                        (size_t)n);
}

static void dispatch_http(struct rpc_server *srv, struct rpc_call *call)
{
    if (call->http_status != 0) {
        http_refuse(call, call->http_status);
        return;
    }
    if (call->over_budget || call->too_large) {
        http_refuse(call, 413);
        return;
    }
    char host[256];
    if (!rpc__http_host_allowed(srv, call, host, sizeof host)) {
        rpc__http_refuse_host(call, host);
        return;
    }
    call->cors_origin = rpc__http_cors_origin(srv, &call->hdrs);
    if (!rpc__http_slot_take(call))
        return; /* parked: rpc__call_redispatch brings it back */
    srv->http(call, call->body, call->body_n, srv->http_ctx);
}

void rpc__call_redispatch(struct rpc_call *call)
{
    struct rpc_server *srv = call->conn->loop->srv;
    assert(call->state == RPC__CALL_PARKED && call->http_slot);
    call->state = RPC__CALL_HANDLER;
    if (call->gone || call->conn->dead) {
        call->http_slot = false;
        rpc__http_slot_give(srv);
        atomic_fetch_sub(&srv->active_n, 1);
        call->state = RPC__CALL_SUBMITTED;
        rpc__call_free(call);
        return;
    }
    dispatch_http(srv, call);
}

/* bad_ct_msg: grpc-go's words for a request that is not gRPC, the
 * content-type quoted as Go's %q does for printable text. */
static void bad_ct_msg(const struct rpc_call *call, char *buf, size_t cap)
{
    size_t n = 0;
    const char *ct = rpc__hdrs_find(&call->hdrs, "content-type", &n);
    size_t o = (size_t)snprintf(buf, cap, "invalid gRPC request "
                                "content-type \"");
    for (size_t i = 0; ct != NULL && i < n && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)ct[i];
        if (ch == '"' || ch == '\\')
            buf[o++] = '\\';
        if (ch < 0x20 || ch >= 0x7f)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
        else
            buf[o++] = (char)ch;
    }
    snprintf(buf + o, cap - o, "\"");
}

/* dispatch_one checks a complete request and hands it to its handler. */
static void dispatch_one(struct rpc_server *srv, struct rpc_call *call)
{
    char msg[400];
    call->state = RPC__CALL_HANDLER;
    atomic_fetch_add(&srv->active_n, 1);
    rpc__conn_bg_foreground(call->conn); /* its reply: stream.c budget */
    if (call->http) {
        dispatch_http(srv, call);
        return;
    }
    if (call->bad_ct) {
        bad_ct_msg(call, msg, sizeof msg);
        rpc_call_reply_error(call, GRPC_STATUS_INVALID_ARGUMENT, msg);
        return;
    }
    if (call->method != NULL) {
        call->start_ns = rpc__handling_start();
        metrics_inc(&call->method->stats->started);
        metrics_inc(&call->method->stats->msg_received);
    }
    if (call->method == NULL) {
        unimplemented_msg(srv, rpc__hdrs_find(&call->hdrs, ":path", NULL),
                          msg, sizeof(msg));
        rpc_call_reply_error(call, GRPC_STATUS_UNIMPLEMENTED, msg);
        return;
    }
    if (call->too_large) {
        rpc__too_large_msg(msg, sizeof msg, call->big_n, srv->max_recv_bytes);
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        return;
    }
    if (call->over_budget || rpc__guard_out_full(call->conn)) {
        if (call->over_budget)
            rpc__over_budget_msg(msg, sizeof msg, call->conn);
        else
            rpc__not_reading_msg(msg, sizeof msg, call->conn);
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        return;
    }
    if (call->deadline_ns != INT64_MAX && call->deadline_ns <= rpc__now_ns()) {
        /* Expired on arrival (grpc-timeout: 0n): etcd answers this. */
        rpc_call_reply_error(call, GRPC_STATUS_DEADLINE_EXCEEDED,
                             "context deadline exceeded");
        return;
    }
    if (call->bad_encoding) {
        snprintf(msg, sizeof msg,
                 "grpc: Decompressor is not installed for grpc-encoding "
                 "\"%s\"",
                 rpc__hdrs_find(&call->hdrs, "grpc-encoding", NULL));
        rpc_call_reply_error(call, GRPC_STATUS_UNIMPLEMENTED, msg);
        return;
    }
    if (call->body_n < RPC__PREFIX || call->body[0] != 0 ||
        rpc__prefix_len(call->body) != call->body_n - RPC__PREFIX) {
        /* No message, a compressed one, or more than one. */
        rpc_call_reply_error(call, GRPC_STATUS_INTERNAL,
                             "grpc: error while reading request");
        return;
    }
    const uint8_t *req = call->body + RPC__PREFIX;
    size_t len = call->body_n - RPC__PREFIX;
    metrics_add(&srv->rx_bytes, len);
    grpc_status_code code;
    const char *why;
    if (srv->gate != NULL &&
        !srv->gate(srv->gate_ctx, call->method->path, req, len, &code,
                   &why)) {
        rpc_call_reply_error(call, code, why);
        return;
    }
    call->method->unary(call, req, len, call->method->ctx);
}

void rpc__call_dispatch(struct rpc__loop *l)
{
    while (l->ready != NULL) {
        struct rpc_call *call = l->ready;
        l->ready = call->ready_next;
        if (l->ready == NULL)
            l->ready_tail = NULL;
        if (call->gone) {
            rpc__call_free(call);
            continue;
        }
        dispatch_one(l->srv, call);
    }
}

/* --- answers --- */

static ssize_t reply_read(nghttp2_session *ng, int32_t stream_id,
                          uint8_t *buf, size_t length, uint32_t *flags,
                          nghttp2_data_source *src, void *ud)
{
    struct rpc_call *call = src->ptr;
    (void)ud;
    size_t n = call->out_n - call->out_off;
    if (n > length)
        n = length;
    memcpy(buf, call->out + call->out_off, n);
    call->out_off += n;
    call->conn->out_bytes -= n;
    if (call->out_off == call->out_n) {
        static const nghttp2_nv ok[] = {
            {(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1,
             NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE},
        };
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (nghttp2_submit_trailer(ng, stream_id, ok, 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

const nghttp2_nv rpc__resp_headers[2] = {
    {(uint8_t *)":status", (uint8_t *)"200", 7, 3,
     NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE},
    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16,
     NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE},
};

/* rpc__call_inbox: the loop takes an answered call from its inbox. */
void rpc__call_inbox(struct rpc_call *call)
{
    struct rpc__conn *c = call->conn;
    if (call->state == RPC__CALL_PARKED) {
        rpc__call_redispatch(call); /* a slot came free for it */
        return;
    }
    assert(call->state == RPC__CALL_ANSWERED);
    atomic_fetch_sub(&c->loop->srv->active_n, 1);
    if (call->gone || c->dead) {
        rpc__call_free(call);
        return;
    }
    /* The request bytes are no longer needed once answered. */
    rpc__guard_in_sub(c, call->body_n);
    call->body_n = 0;
    if (call->h1) {
        rpc__h1_answered(call);
        return;
    }
    if (call->http) {
        rpc__http_submit(call);
        return;
    }
    if (call->code == GRPC_STATUS_OK && rpc__guard_out_full(c)) {
        /* The client reads nothing: this reply would pile up too. */
        char msg[160];
        rpc__not_reading_msg(msg, sizeof msg, c);
        call->code = GRPC_STATUS_RESOURCE_EXHAUSTED;
        call->msg = mem_dup(msg, strlen(msg) + 1);
        call->out_n = call->out_off = 0;
        buf_trim(&call->out, &call->out_cap);
    }
    int rv;
    call->state = RPC__CALL_SUBMITTED;
    if (call->code == GRPC_STATUS_OK) {
        c->out_bytes += call->out_n - call->out_off;
        nghttp2_data_provider prd = {.source.ptr = call,
                                     .read_callback = reply_read};
        rv = nghttp2_submit_response(c->ng, call->stream_id,
                                     rpc__resp_headers, 2, &prd);
    } else {
        static const nghttp2_nv st415 = {
            (uint8_t *)":status", (uint8_t *)"415", 7, 3,
            NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
        nghttp2_nv nv[4] = {call->bad_ct ? st415 : rpc__resp_headers[0],
                            rpc__resp_headers[1]};
        char code_buf[12], msg_buf[1024];
        size_t k = rpc__status_nv(nv + 2, call->code, call->msg, code_buf,
                                  msg_buf, sizeof(msg_buf));
        rv = nghttp2_submit_response(c->ng, call->stream_id, nv, 2 + k,
                                     NULL);
    }
    if (rv != 0) {
        log_warn("rpc", "submit_response: %s", nghttp2_strerror(rv));
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, call->stream_id,
                                  NGHTTP2_INTERNAL_ERROR);
    }
    rpc__conn_mark_dirty(c);
}

/* answer hands the call back to its loop; the caller lets go of it. */
static void answer(struct rpc_call *call)
{
    assert(call->state == RPC__CALL_HANDLER); /* exactly one answer */
    call->state = RPC__CALL_ANSWERED;
    if (call->http_slot) {
        call->http_slot = false;
        rpc__http_slot_give(call->conn->loop->srv);
    }
    if (call->method != NULL && !call->http) {
        if (call->code == GRPC_STATUS_OK) {
            metrics_inc(&call->method->stats->msg_sent);
            metrics_add(&call->conn->loop->srv->tx_bytes,
                        call->out_n - RPC__PREFIX);
        }
        rpc__method_handled(call->method, call->code, call->start_ns);
    }
    if (call->count_as != NULL) { /* an HTTP call counted as a method */
        if (call->count_code == GRPC_STATUS_OK)
            metrics_inc(&call->count_as->stats->msg_sent);
        rpc__method_handled(call->count_as, call->count_code,
                            call->start_ns);
    }
    rpc__loop_push(call->conn->loop, &call->item);
}

void rpc_call_count_as(struct rpc_call *call, const char *method_path)
{
    assert(call != NULL && call->http && method_path != NULL);
    assert(call->state == RPC__CALL_HANDLER && call->count_as == NULL);
    call->count_as = rpc__method_find(rpc__count_srv(call->conn->loop->srv),
                                      (const uint8_t *)method_path,
                                      strlen(method_path));
    if (call->count_as == NULL)
        return;
    call->start_ns = rpc__handling_start();
    metrics_inc(&call->count_as->stats->started);
    metrics_inc(&call->count_as->stats->msg_received);
}

void rpc_call_count_code(struct rpc_call *call, grpc_status_code code)
{
    assert(call != NULL && call->http);
    call->count_code = code;
}

static bool out_reserve(struct rpc_call *call, size_t n)
{
    uint8_t *p = rpc__buf_grow(call->out, &call->out_cap, n, 256);
    if (p == NULL)
        return false;
    call->out = p;
    return true;
}

static void out_prefix(struct rpc_call *call, size_t n)
{
    rpc__prefix_put(call->out, n);
    call->out_n = n + RPC__PREFIX;
    call->out_off = 0;
}

void rpc_call_reply(struct rpc_call *call, const ProtobufCMessage *resp)
{
    assert(call != NULL && resp != NULL);
    size_t n = protobuf_c_message_get_packed_size(resp);
    if (n > UINT32_MAX || !out_reserve(call, n + RPC__PREFIX)) {
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                             "out of memory");
        return;
    }
    size_t packed = protobuf_c_message_pack(resp, call->out + RPC__PREFIX);
    assert(packed == n);
    (void)packed;
    out_prefix(call, n);
    call->code = GRPC_STATUS_OK;
    answer(call);
}

void rpc_call_reply_bytes(struct rpc_call *call, const uint8_t *bytes,
                          size_t len)
{
    assert(call != NULL && (bytes != NULL || len == 0));
    if (len > UINT32_MAX || !out_reserve(call, len + RPC__PREFIX)) {
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                             "out of memory");
        return;
    }
    if (len > 0)
        memcpy(call->out + RPC__PREFIX, bytes, len);
    out_prefix(call, len);
    call->code = GRPC_STATUS_OK;
    answer(call);
}

void rpc_call_reply_error(struct rpc_call *call, grpc_status_code code,
                          const char *msg)
{
    assert(call != NULL && code != GRPC_STATUS_OK);
    call->code = code;
    call->msg = msg != NULL ? mem_dup(msg, strlen(msg) + 1) : NULL;
    answer(call);
}

const char *rpc_call_metadata(const struct rpc_call *call, const char *key,
                              size_t *len_out)
{
    assert(call != NULL && call->state == RPC__CALL_HANDLER);
    return rpc__hdrs_find(&call->hdrs, key, len_out);
}

const char *rpc_call_peer_cn(const struct rpc_call *call)
{
    assert(call != NULL && call->state == RPC__CALL_HANDLER);
    return call->conn->peer_cn; /* the call holds a ref on its conn */
}

const char *rpc_call_method(const struct rpc_call *call)
{
    assert(call != NULL && call->method != NULL);
    return call->method->path;
}

int64_t rpc_call_deadline_ns(const struct rpc_call *call)
{
    assert(call != NULL && call->state == RPC__CALL_HANDLER);
    return call->deadline_ns;
}

void rpc_call_reply_http(struct rpc_call *call, int status,
                         const char *ctype, unsigned flags, const void *body,
                         size_t len)
{
    assert(call != NULL && call->http);
    assert(status >= 100 && status <= 999 && (body != NULL || len == 0));
    call->out_n = call->out_off = 0;
    if (len > 0 && !out_reserve(call, len)) {
        status = 500;
        len = 0;
    }
    if (len > 0)
        memcpy(call->out, body, len);
    call->out_n = len;
    call->http_status = status;
    call->http_ctype = ctype;
    call->http_flags = flags;
    call->code = GRPC_STATUS_OK;
    answer(call);
}

static ssize_t http_read(nghttp2_session *ng, int32_t stream_id,
                         uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    struct rpc_call *call = src->ptr;
    (void)ng;
    (void)stream_id;
    (void)ud;
    size_t n = call->out_n - call->out_off;
    if (n > length)
        n = length;
    memcpy(buf, call->out + call->out_off, n);
    call->out_off += n;
    call->conn->out_bytes -= n;
    if (call->out_off == call->out_n)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define HNV(n, v)                                                           \
    ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v),    \
                  NGHTTP2_NV_FLAG_NONE})

void rpc__http_nv_make(struct rpc__http_nv *h, const char *cors,
                       int status, const char *ctype, unsigned flags,
                       long long len)
{
    size_t k = 0;
    snprintf(h->st, sizeof h->st, "%d", status);
    http_date(h->date, sizeof h->date);
    h->nv[k++] = HNV(":status", h->st);
    if (ctype != NULL)
        h->nv[k++] = HNV("content-type", ctype);
    if (len >= 0) {
        snprintf(h->len, sizeof h->len, "%lld", len);
        h->nv[k++] = HNV("content-length", h->len);
    }
    h->nv[k++] = HNV("date", h->date);
    if (cors != NULL) {
        h->nv[k++] = HNV("access-control-allow-headers",
                         "accept, content-type, authorization");
        h->nv[k++] = HNV("access-control-allow-methods",
                         "POST, GET, OPTIONS, PUT, DELETE");
        h->nv[k++] = HNV("access-control-allow-origin", cors);
    }
    if (flags & RPC_HTTP_NOSNIFF)
        h->nv[k++] = HNV("x-content-type-options", "nosniff");
    if (flags & RPC_HTTP_ALLOW_GET)
        h->nv[k++] = HNV("allow", "GET");
    if (flags & RPC_HTTP_GRPC_META)
        h->nv[k++] = HNV("grpc-metadata-content-type", "application/grpc");
    assert(k <= sizeof h->nv / sizeof *h->nv);
    h->n = k;
}

/* rpc__http_submit answers an HTTP request of an HTTP/2 stream: HEADERS
 * (status, type, length, date, the extra headers) and the body as DATA.
 * nghttp2 copies the header values at submit. */
void rpc__http_submit(struct rpc_call *call)
{
    struct rpc__conn *c = call->conn;
    const char *m = rpc__hdrs_find(&call->hdrs, ":method", NULL);
    if (m != NULL && strcmp(m, "HEAD") == 0)
        call->out_n = 0;
    struct rpc__http_nv h;
    rpc__http_nv_make(&h, call->cors_origin, call->http_status,
                      call->http_ctype, call->http_flags,
                      (long long)call->out_n);
    call->state = RPC__CALL_SUBMITTED;
    c->out_bytes += call->out_n;
    nghttp2_data_provider prd = {.source.ptr = call,
                                 .read_callback = http_read};
    int rv = nghttp2_submit_response(c->ng, call->stream_id, h.nv, h.n,
                                     call->out_n > 0 ? &prd : NULL);
    if (rv != 0) {
        log_warn("rpc", "submit_response: %s", nghttp2_strerror(rv));
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, call->stream_id,
                                  NGHTTP2_INTERNAL_ERROR);
    }
    rpc__conn_mark_dirty(c);
}

/* grpc.health.v1.HealthCheckResponse{status: SERVING}: field 1, varint 1.
 * The member's own health (alarms, leader) is the HTTP /health's job. */
void rpc__health_check(struct rpc_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    static const uint8_t serving[] = {0x08, 0x01};
    (void)req;
    (void)len;
    (void)ctx;
    rpc_call_reply_bytes(call, serving, sizeof(serving));
}
