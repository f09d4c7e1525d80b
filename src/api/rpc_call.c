/*
 * rpc_call.c - unary calls: request slots, dispatch to handlers, answers,
 * and the UNIMPLEMENTED answers for methods nobody registered.
 *
 * A struct api_call is its own request slot.  Life of one object:
 *   POSTED   (worker posted it; the core fills call, deadline, md, payload)
 *   HANDLER  (request arrived; the worker posted a fresh slot in its place
 *             and called the handler, which now owns the call)
 *   ANSWERED (one batch sends status [+ message] and RECV_CLOSE_ON_SERVER)
 * The request arrives on the worker's queue; the answer's batch completes
 * on the server's callback queue (done_cq), whose callback call_done runs
 * on the answering thread as grpc_call_start_batch returns (or on a core
 * thread if the send could not finish at once).  call_done releases the
 * call and pushes the object onto its worker's return stack, which the
 * worker takes when its free list runs dry: no worker is woken per answer,
 * and steady-state serving allocates no slot objects.  The metadata array
 * keeps its capacity across reuses.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>

#include "api/rpc_int.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

#define FREE_LIST_MAX 4096 /* recycled call objects kept per worker */

static void call_done(grpc_completion_queue_functor *f, int ok);

/* take_returned moves the calls answered since the last look from the
 * worker's atomic return stack to its own free list. */
static void take_returned(struct api__worker *w)
{
    struct api_call *c = atomic_exchange(&w->returned, NULL);
    while (c != NULL) {
        struct api_call *next = c->next_free;
        if (w->free_n < FREE_LIST_MAX) {
            c->next_free = w->free_list;
            w->free_list = c;
            w->free_n++;
        } else {
            grpc_metadata_array_destroy(&c->md);
            grpc_call_details_destroy(&c->details);
            mem_free(c);
            w->calls_n--;
        }
        c = next;
    }
}

static struct api_call *call_get(struct api__worker *w)
{
    if (w->free_list == NULL)
        take_returned(w);
    struct api_call *c = w->free_list;
    if (c != NULL) {
        w->free_list = c->next_free;
        w->free_n--;
        c->next_free = NULL;
        return c;
    }
    c = mem_calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->worker = w;
    grpc_metadata_array_init(&c->md);
    grpc_call_details_init(&c->details);
    c->flat = grpc_empty_slice();
    c->status_msg = grpc_empty_slice();
    c->done.functor_run = call_done;
    c->done.inlineable = 1;
    w->calls_n++;
    return c;
}

/* call_release drops what one call held; any thread that owns c. */
static void call_release(struct api_call *c)
{
    if (c->payload != NULL)
        grpc_byte_buffer_destroy(c->payload);
    if (c->resp != NULL)
        grpc_byte_buffer_destroy(c->resp);
    grpc_slice_unref(c->flat);
    grpc_slice_unref(c->status_msg);
    if (c->call != NULL)
        grpc_call_unref(c->call);
    c->payload = c->resp = NULL;
    c->call = NULL;
    c->flat = c->status_msg = grpc_empty_slice();
    c->md.count = 0; /* Keeps the array; the core appends from count. */
    grpc_call_details_destroy(&c->details);
    grpc_call_details_init(&c->details);
}

/* call_put releases a call that never reached a handler and recycles the
 * object; the worker only. */
static void call_put(struct api__worker *w, struct api_call *c)
{
    assert(c->worker == w && c->state == API__CALL_POSTED);
    call_release(c);
    if (w->free_n < FREE_LIST_MAX) {
        c->next_free = w->free_list;
        w->free_list = c;
        w->free_n++;
        return;
    }
    grpc_metadata_array_destroy(&c->md);
    grpc_call_details_destroy(&c->details);
    mem_free(c);
    w->calls_n--;
}

/* call_done runs when an answer's batch completed: on the thread that
 * answered when the core finished the batch inside grpc_call_start_batch
 * (the usual case), else on whichever core thread finished it.  No queue
 * wake-up: the object goes back to its worker through the return stack. */
static void call_done(grpc_completion_queue_functor *f, int ok)
{
    struct api_call *c = api__container_of(f, struct api_call, done);
    struct api__worker *w = c->worker;
    (void)ok; /* A failed send is the client's loss; nothing to undo. */
    assert(c->state == API__CALL_ANSWERED);
    call_release(c);
    c->state = API__CALL_POSTED;
    struct api_call *head = atomic_load(&w->returned);
    do
        c->next_free = head;
    while (!atomic_compare_exchange_weak(&w->returned, &head, c));
    /* Last: once the count is zero the owner may free everything. */
    atomic_fetch_sub(&w->active_n, 1);
}

void api__worker_free_calls(struct api__worker *w)
{
    take_returned(w);
    while (w->free_list != NULL) {
        struct api_call *c = w->free_list;
        w->free_list = c->next_free;
        grpc_metadata_array_destroy(&c->md);
        grpc_call_details_destroy(&c->details);
        mem_free(c);
        w->free_n--;
        w->calls_n--;
    }
    assert(w->free_n == 0);
    assert(w->calls_n == 0); /* Every call was answered and completed. */
}

void api__call_post(struct api__worker *w, const struct api__method *m)
{
    assert(m->kind == API__METHOD_UNARY);
    struct api_call *c = call_get(w);
    if (c == NULL) {
        log_warn("api", "out of memory: one request slot fewer for %s",
                 m->path);
        return;
    }
    c->tag.kind = API__TAG_UNARY;
    c->state = API__CALL_POSTED;
    c->method = m;
    grpc_call_error e = grpc_server_request_registered_call(
        w->srv->server, m->handle, &c->call, &c->deadline, &c->md,
        &c->payload, w->srv->done_cq, w->cq, &c->tag);
    if (e != GRPC_CALL_OK) {
        log_warn("api", "request_registered_call: %d", (int)e);
        call_put(w, c);
    }
}

void api__generic_post(struct api__worker *w)
{
    struct api_call *c = call_get(w);
    if (c == NULL)
        return;
    c->tag.kind = API__TAG_GENERIC;
    c->state = API__CALL_POSTED;
    c->method = NULL;
    grpc_call_error e =
        grpc_server_request_call(w->srv->server, &c->call, &c->details,
                                 &c->md, w->srv->done_cq, w->cq, &c->tag);
    if (e != GRPC_CALL_OK) {
        log_warn("api", "request_call: %d", (int)e);
        call_put(w, c);
    }
}

static int64_t deadline_to_ns(gpr_timespec deadline)
{
    if (deadline.tv_sec == INT64_MAX)
        return INT64_MAX; /* The client set no deadline. */
    gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
    deadline = gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
    gpr_timespec left = gpr_time_sub(deadline, now);
    if (left.tv_sec > 1000000000)
        return INT64_MAX; /* Decades away: as good as none. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec +
           (int64_t)left.tv_sec * 1000000000 + left.tv_nsec;
}

/* request_bytes finds the request message as one contiguous range; it is
 * zero-copy when the core delivered a single uncompressed slice. */
static bool request_bytes(struct api_call *c, const uint8_t **p, size_t *n)
{
    grpc_byte_buffer *bb = c->payload;
    if (bb == NULL)
        return false;
    if (bb->type == GRPC_BB_RAW &&
        bb->data.raw.compression == GRPC_COMPRESS_NONE &&
        bb->data.raw.slice_buffer.count == 1) {
        /* A pointer, not a copy: small slices keep their bytes inline in
         * the grpc_slice struct itself. */
        grpc_slice *s = &bb->data.raw.slice_buffer.slices[0];
        *p = GRPC_SLICE_START_PTR(*s);
        *n = GRPC_SLICE_LENGTH(*s);
        return true;
    }
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return false;
    c->flat = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    *p = GRPC_SLICE_START_PTR(c->flat);
    *n = GRPC_SLICE_LENGTH(c->flat);
    return true;
}

/* arrived runs on the worker when a posted unary slot got a call. */
static void arrived(struct api__worker *w, struct api_call *c)
{
    const uint8_t *req = NULL;
    size_t len = 0;
    if (!atomic_load(&w->srv->shutting_down))
        api__call_post(w, c->method);
    c->deadline_ns = deadline_to_ns(c->deadline);
    c->state = API__CALL_HANDLER;
    atomic_fetch_add(&w->active_n, 1);
    if (!request_bytes(c, &req, &len)) {
        /* The client half-closed without a message, or it was too large
         * and the core already failed the call. */
        api_call_reply_error(c, GRPC_STATUS_INTERNAL,
                             "grpc: error while reading request");
        return;
    }
    if (len > w->srv->max_recv_bytes) {
        char msg[128];
        snprintf(msg, sizeof msg,
                 "grpc: received message larger than max (%zu vs. %zu)", len,
                 w->srv->max_recv_bytes);
        api_call_reply_error(c, GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        return;
    }
    grpc_status_code code;
    const char *msg;
    if (w->srv->gate != NULL &&
        !w->srv->gate(w->srv->gate_ctx, c->method->path, req, len, &code,
                      &msg)) {
        api_call_reply_error(c, code, msg);
        return;
    }
    c->method->unary(c, req, len, c->method->ctx);
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
static int service_state(const struct api_server *srv, const char *svc,
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

static void unimplemented_msg(const struct api_server *srv, grpc_slice path,
                              char *buf, size_t cap)
{
    char full[256];
    size_t n = GRPC_SLICE_LENGTH(path);
    if (n >= sizeof(full))
        n = sizeof(full) - 1;
    memcpy(full, GRPC_SLICE_START_PTR(path), n);
    full[n] = '\0';
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

/* recycled ends a posted slot that completed without a call (!ok: the
 * server is shutting down).  Otherwise c is a newly arrived call and
 * recycled returns false.  Answered calls end in call_done. */
static bool recycled(struct api__worker *w, struct api_call *c, bool ok)
{
    assert(c->state == API__CALL_POSTED);
    if (ok)
        return false;
    call_put(w, c);
    return true;
}

void api__generic_complete(struct api__worker *w, struct api_call *c,
                           bool ok)
{
    assert(c->tag.kind == API__TAG_GENERIC && c->worker == w);
    if (recycled(w, c, ok))
        return;
    if (!atomic_load(&w->srv->shutting_down))
        api__generic_post(w);
    char msg[400];
    unimplemented_msg(w->srv, c->details.method, msg, sizeof(msg));
    c->state = API__CALL_HANDLER;
    atomic_fetch_add(&w->active_n, 1);
    api_call_reply_error(c, GRPC_STATUS_UNIMPLEMENTED, msg);
}

void api__call_complete(struct api__worker *w, struct api_call *c, bool ok)
{
    assert(c->tag.kind == API__TAG_UNARY && c->worker == w);
    if (!recycled(w, c, ok))
        arrived(w, c);
}

/* answer starts the final batch; after it the caller must not touch c. */
static void answer(struct api_call *c, grpc_byte_buffer *bb,
                   grpc_status_code code, const char *msg)
{
    grpc_op ops[4];
    size_t n = 0;
    assert(c->state == API__CALL_HANDLER); /* Exactly one answer. */
    assert((bb != NULL) == (code == GRPC_STATUS_OK));
    memset(ops, 0, sizeof(ops));
    c->state = API__CALL_ANSWERED;
    c->resp = bb;
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (bb != NULL) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = bb;
    }
    if (msg != NULL)
        c->status_msg = grpc_slice_from_copied_string(msg);
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n++].data.send_status_from_server.status_details =
        msg != NULL ? &c->status_msg : NULL;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, &c->done, NULL);
    if (e != GRPC_CALL_OK)
        log_error("api", "start_batch %d", e);
    assert(e == GRPC_CALL_OK);
}

void api_call_reply(struct api_call *c, const ProtobufCMessage *resp)
{
    assert(c != NULL && resp != NULL);
    size_t n = protobuf_c_message_get_packed_size(resp);
    grpc_slice s = grpc_slice_malloc(n);
    size_t packed = protobuf_c_message_pack(resp, GRPC_SLICE_START_PTR(s));
    assert(packed == n);
    (void)packed;
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    answer(c, bb, GRPC_STATUS_OK, NULL);
}

void api_call_reply_bytes(struct api_call *c, const uint8_t *bytes,
                          size_t len)
{
    assert(c != NULL && (bytes != NULL || len == 0));
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)bytes, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    answer(c, bb, GRPC_STATUS_OK, NULL);
}

void api_call_reply_error(struct api_call *c, grpc_status_code code,
                          const char *msg)
{
    assert(c != NULL && code != GRPC_STATUS_OK);
    answer(c, NULL, code, msg);
}

const char *api__md_find(const grpc_metadata_array *md, const char *key,
                         size_t *len_out)
{
    assert(md != NULL && key != NULL);
    size_t klen = strlen(key);
    for (size_t i = 0; i < md->count; i++) {
        const grpc_metadata *e = &md->metadata[i];
        if (GRPC_SLICE_LENGTH(e->key) == klen &&
            memcmp(GRPC_SLICE_START_PTR(e->key), key, klen) == 0) {
            if (len_out != NULL)
                *len_out = GRPC_SLICE_LENGTH(e->value);
            return (const char *)GRPC_SLICE_START_PTR(e->value);
        }
    }
    return NULL;
}

const char *api_call_metadata(const struct api_call *c, const char *key,
                              size_t *len_out)
{
    assert(c != NULL && c->state == API__CALL_HANDLER);
    return api__md_find(&c->md, key, len_out);
}

const char *api_call_method(const struct api_call *c)
{
    assert(c != NULL && c->method != NULL);
    return c->method->path;
}

int64_t api_call_deadline_ns(const struct api_call *c)
{
    assert(c != NULL && c->state == API__CALL_HANDLER);
    return c->deadline_ns;
}

/* grpc.health.v1.HealthCheckResponse{status: SERVING}: field 1, varint 1.
 * The member's own health (alarms, leader) is the HTTP /health's job. */
void api__health_check(struct api_call *call, const uint8_t *req, size_t len,
                       void *ctx)
{
    static const uint8_t serving[] = {0x08, 0x01};
    (void)req;
    (void)len;
    (void)ctx;
    api_call_reply_bytes(call, serving, sizeof(serving));
}
