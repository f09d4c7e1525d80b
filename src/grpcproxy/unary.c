/*
 * unary.c - the proxy's unary calls: the KV cache in front, --namespace
 * around, the call sent on upstream as bytes with the caller's token,
 * "hasleader" and deadline, and the upstream's answer passed back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpcproxy/grpcproxy_int.h"
#include "util/mem.h"

/* The longest token the cache keys by (etcd's simple tokens are 16 bytes
 * and a sequence, JWTs a few hundred). */
#define GP_TOKEN_MAX 2048
/* The cache's caller for the ranges of a txn whose caller cannot key it:
 * its writes still invalidate; what it caches no caller finds. */
#define GP_NOBODY "\x01"

/* One call on its way up: its answer goes back to call. */
struct gp_call {
    struct grpcproxy *p;
    const struct gp_method *m;
    struct rpc_call *call;
    const uint8_t *req; /* the client's bytes: valid until answered */
    size_t len;
    bool cache;         /* who names the caller (caller() said) */
    char who[];         /* the caller's token, "" for none (the cache) */
};

/* caller: the call's "token" metadata as a string, in buf (cap bytes);
 * "" without one; NULL for one too long to key the cache by (its calls
 * skip the cache), holding a NUL or starting with a control character
 * (GP_NOBODY's mark: no caller is ever it). */
static const char *caller(struct rpc_call *call, char *buf, size_t cap)
{
    size_t len = 0;
    const char *t = rpc_call_metadata(call, "token", &len);

    if (t != NULL && (len >= cap || (len > 0 && (unsigned char)t[0] < 0x20) ||
                      memchr(t, '\0', len) != NULL))
        return NULL;
    if (t == NULL)
        len = 0;
    else
        memcpy(buf, t, len);
    buf[len] = '\0';
    return buf;
}

static const char *call_md(const void *obj, const char *key, size_t *len)
{
    return rpc_call_metadata(obj, key, len);
}

/* reply_up: the upstream's reply, back through the namespace and into
 * the cache, to the caller. */
static void reply_up(struct gp_call *c, const uint8_t *resp, size_t len)
{
    struct grpcproxy *p = c->p;
    uint8_t *out;
    int code = 0;
    const char *msg = NULL;

    if (!gp_ns_apply(p, c->m->path, true, &resp, &len, &out, &code, &msg)) {
        rpc_call_reply_error(c->call, (grpc_status_code)code, msg);
        return;
    }
    switch (c->cache ? c->m->kind : GP_PLAIN) {
    case GP_RANGE:
        gp_cache_range_done(p->cache, c->who, c->req, c->len, resp, len);
        break;
    case GP_TXN:
        gp_cache_txn_done(p->cache, c->who, c->req, c->len, resp, len);
        break;
    default:
        break;
    }
    if (c->m->kind == GP_COMPACT)
        gp_cache_compact_done(p->cache, c->req, c->len);
    if (c->m->kind == GP_TXN && !c->cache)
        gp_cache_txn_done(p->cache, GP_NOBODY, c->req, c->len, resp, len);
    rpc_call_reply_bytes(c->call, resp, len);
    free(out);
}

/* on_done runs on the upstream thread when the call came back. */
static void on_done(void *arg, const struct cetcd_status *st,
                    const uint8_t *resp, size_t len)
{
    struct gp_call *c = arg;

    if (st->code != 0)
        rpc_call_reply_error(c->call, (grpc_status_code)st->code,
                             st->message);
    else
        reply_up(c, resp, len);
    mem_free(c);
}

/* forward sends the call on upstream. */
static void forward(struct grpcproxy *p, const struct gp_method *m,
                    struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct cetcd_md md[CETCD_RAW_MD_MAX];
    struct cetcd_raw_opts o;
    char mdbuf[4096], msg[128], whobuf[GP_TOKEN_MAX];
    const char *who;
    uint8_t *out;
    const uint8_t *up = req;
    size_t up_len = len;
    int code = 0;
    const char *nmsg = NULL;
    struct gp_call *c;

    if (!gp_ns_apply(p, m->path, false, &up, &up_len, &out, &code, &nmsg)) {
        rpc_call_reply_error(call, (grpc_status_code)code, nmsg);
        return;
    }
    if (gp_too_big(p, up_len, msg, sizeof msg)) {
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        free(out);
        return;
    }
    who = caller(call, whobuf, sizeof whobuf);
    c = mem_calloc(1, sizeof *c + (who != NULL ? strlen(who) : 0) + 1);
    if (c == NULL) {
        rpc_call_reply_error(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                             "grpc-proxy: out of memory");
        free(out);
        return;
    }
    c->p = p;
    c->m = m;
    c->call = call;
    c->req = req;
    c->len = len;
    c->cache = who != NULL;
    if (who != NULL)
        memcpy(c->who, who, strlen(who) + 1);
    memset(&o, 0, sizeof o);
    o.md = md;
    o.md_n = gp_md_fill(call_md, call, md, mdbuf, sizeof mdbuf);
    o.deadline_mono_ns = rpc_call_deadline_ns(call);
    if (cetcd_async_call_raw(p->cli, p->q, m->path, up, up_len, &o, on_done,
                             c) != 0) {
        rpc_call_reply_error(call, GRPC_STATUS_UNAVAILABLE,
                             "grpc-proxy: cannot start the upstream call");
        mem_free(c);
    }
    free(out);
}

void gp_unary(struct rpc_call *call, const uint8_t *req, size_t len,
              void *ctx)
{
    const struct gp_route *r = ctx;
    struct grpcproxy *p = r->p;
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    char whobuf[GP_TOKEN_MAX];
    const char *who = caller(call, whobuf, sizeof whobuf);

    switch (r->m->kind) {
    case GP_RANGE:
        if (who == NULL)
            break;
        switch (gp_cache_range_lookup(p->cache, who, req, len, &resp,
                                      &resp_len)) {
        case GP_CACHE_HIT:
            rpc_call_reply_bytes(call, resp, resp_len);
            free(resp);
            return;
        case GP_CACHE_COMPACTED:
            rpc_call_reply_error(call, GRPC_STATUS_OUT_OF_RANGE,
                                 "etcdserver: mvcc: required revision has "
                                 "been compacted");
            return;
        case GP_CACHE_NONE:
        case GP_CACHE_MISS:
            break;
        }
        break;
    case GP_PUT:
        gp_cache_put(p->cache, req, len);
        break;
    case GP_DELETE:
        gp_cache_delete(p->cache, req, len);
        break;
    case GP_MEMBER_LIST:
        if (gp_member_list(p, call))
            return;
        break;
    case GP_MEMBER_PROMOTE:
        /* etcd 3.4's proxy: errors.New("not implemented"), which
         * grpc-go sends as UNKNOWN. */
        rpc_call_reply_error(call, GRPC_STATUS_UNKNOWN, "not implemented");
        return;
    default:
        break;
    }
    forward(p, r->m, call, req, len);
}
