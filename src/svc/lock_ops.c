/*
 * lock_ops.c - the KV requests Lock and Election are made of (etcd's
 * clientv3/concurrency does the same through a client): a Range by create
 * revision, a Txn guarded by a key's create revision, the clean-up delete;
 * the caller's identity the steps run as; and the waiter bound.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "svc/lock_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

void lock__hdr_copy(struct lock_hdr *out, const Etcdserverpb__ResponseHeader *h)
{
    CHECK(out != NULL);
    memset(out, 0, sizeof *out);
    if (h == NULL)
        return;
    out->cluster_id = h->cluster_id;
    out->member_id = h->member_id;
    out->raft_term = h->raft_term;
    out->revision = h->revision;
}

void lock__hdr_pb(const struct lock_hdr *h, Etcdserverpb__ResponseHeader *pb)
{
    CHECK(h != NULL && pb != NULL);
    etcdserverpb__response_header__init(pb);
    pb->cluster_id = h->cluster_id;
    pb->member_id = h->member_id;
    pb->raft_term = h->raft_term;
    pb->revision = h->revision;
}

int lock__key_make(const uint8_t *name, size_t name_len, int64_t lease,
                   uint8_t **key_out, size_t *len_out)
{
    CHECK(key_out != NULL && len_out != NULL);
    char hex[24];
    uint64_t mag = lease < 0 ? (uint64_t)0 - (uint64_t)lease : (uint64_t)lease;
    int n = snprintf(hex, sizeof hex, "%s%llx", lease < 0 ? "-" : "",
                     (unsigned long long)mag);
    CHECK(n > 0 && (size_t)n < sizeof hex);
    uint8_t *k = mem_malloc(name_len + 1 + (size_t)n);
    if (k == NULL)
        return ERR_NOMEM;
    if (name_len > 0)
        memcpy(k, name, name_len);
    k[name_len] = '/';
    memcpy(k + name_len + 1, hex, (size_t)n);
    *key_out = k;
    *len_out = name_len + 1 + (size_t)n;
    return 0;
}

void lock__range(struct server *s, const uint8_t *key, size_t key_len,
                 const uint8_t *end, size_t end_len, int order,
                 int64_t limit, int64_t max_create_rev,
                 struct svc_done done)
{
    CHECK(s != NULL && done.fn != NULL);
    Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
    r.key = (ProtobufCBinaryData){key_len, (uint8_t *)key};
    r.range_end = (ProtobufCBinaryData){end_len, (uint8_t *)end};
    r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    r.sort_order = order;
    r.limit = limit;
    r.max_create_revision = max_create_rev;
    /* svc_kv_range keeps an unpacked request (svc.h): make one. */
    size_t len = etcdserverpb__range_request__get_packed_size(&r);
    uint8_t *buf = mem_malloc(len > 0 ? len : 1);
    Etcdserverpb__RangeRequest *u = NULL;
    if (buf != NULL) {
        etcdserverpb__range_request__pack(&r, buf);
        u = etcdserverpb__range_request__unpack(NULL, len, buf);
        mem_free(buf);
    }
    if (u == NULL) {
        done.fn(done.ctx, ERR_NOMEM, NULL);
        return;
    }
    svc_kv_range(s, u, done); /* takes u */
}

void lock__txn_if_created(struct server *s, const uint8_t *key,
                          size_t key_len, int64_t rev,
                          Etcdserverpb__RequestOp *then_ops[], size_t n_then,
                          Etcdserverpb__RequestOp *else_ops[], size_t n_else,
                          struct svc_done done)
{
    CHECK(s != NULL && done.fn != NULL);
    Etcdserverpb__Compare c = ETCDSERVERPB__COMPARE__INIT;
    c.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    c.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    c.key = (ProtobufCBinaryData){key_len, (uint8_t *)key};
    c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    c.create_revision = rev;
    Etcdserverpb__Compare *cs[1] = {&c};
    Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
    t.n_compare = 1;
    t.compare = cs;
    t.n_success = n_then;
    t.success = then_ops;
    t.n_failure = n_else;
    t.failure = else_ops;
    svc_kv_txn(s, &t, done); /* borrowed for the call */
}

static void forget(void *ctx, int err, const ProtobufCMessage *reply)
    /* ctx: only the metadata's, read before the proposal returned */
{
    (void)ctx;
    (void)err;
    (void)reply;
}

void lock__delete_if_created(struct server *s, const uint8_t *key,
                             size_t key_len, int64_t rev, void *md_ctx,
                             const char *(*md)(void *ctx, const char *key,
                                               size_t *len))
{
    CHECK(s != NULL && rev > 0);
    Etcdserverpb__DeleteRangeRequest d =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    d.key = (ProtobufCBinaryData){key_len, (uint8_t *)key};
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    op.request_delete_range = &d;
    Etcdserverpb__RequestOp *ops[1] = {&op};
    lock__txn_if_created(s, key, key_len, rev, ops, 1, NULL, 0,
                         (struct svc_done){forget, md_ctx, md});
}

/* --- the caller's identity ------------------------------------------------ */

#define IDENT_TOKEN_MAX 4096

static int copy_md(const struct svc_stream *st, const char *key, char **out,
                   size_t *len_out)
{
    size_t n = 0;
    const char *v = st->metadata(st->ctx, key, &n);
    if (v == NULL)
        return 1; /* absent */
    *out = mem_malloc(n + 1);
    if (*out == NULL)
        return ERR_NOMEM;
    if (n > 0)
        memcpy(*out, v, n);
    (*out)[n] = '\0';
    *len_out = n;
    return 0;
}

int lock__ident_copy(struct lock_ident *id, const struct svc_stream *st)
{
    CHECK(id != NULL && id->token == NULL && id->cn == NULL);
    if (st->metadata == NULL)
        return 0;
    int rc = copy_md(st, "token", &id->token, &id->token_len);
    if (rc == 1)
        rc = copy_md(st, "authorization", &id->token, &id->token_len);
    if (rc == 0 && id->token_len > IDENT_TOKEN_MAX) {
        mem_free(id->token);
        id->token = NULL;
        id->token_len = 0;
    }
    if (rc >= 0)
        rc = copy_md(st, SVC_META_PEER_CN, &id->cn, &id->cn_len);
    if (rc < 0) {
        lock__ident_free(id);
        return rc;
    }
    return 0;
}

void lock__ident_free(struct lock_ident *id)
{
    mem_free(id->token);
    mem_free(id->cn);
    *id = (struct lock_ident){0};
}

const char *lock__ident_metadata(const struct lock_ident *id, const char *key,
                                 size_t *len)
{
    const char *v = NULL;
    size_t n = 0;
    if (strcmp(key, "token") == 0) {
        v = id->token;
        n = id->token_len;
    } else if (strcmp(key, SVC_META_PEER_CN) == 0) {
        v = id->cn;
        n = id->cn_len;
    }
    if (v != NULL && len != NULL)
        *len = n;
    return v;
}

/* The waiters of every member in the process (one member per process in
 * practice: a test harness running several shares the bound). */
static atomic_size_t waiters;

bool lock__waiters_take(void)
{
    size_t n = atomic_fetch_add(&waiters, 1);
    if (n < SVC_LOCK_WAITERS_MAX)
        return true;
    atomic_fetch_sub(&waiters, 1);
    return false;
}

void lock__waiters_put(void)
{
    size_t n = atomic_fetch_sub(&waiters, 1);
    CHECK(n > 0);
}
