/*
 * kv.c - the typed KV calls (Range, Put, DeleteRange, Compact) and
 * Maintenance.Status, as thin wrappers over cetcd_call_unary(): fill the
 * request from the caller's arguments without copying, call, and expose the
 * decoded reply through the public result structs, which point into it.
 * client__call_typed, shared with txn.c, runs the calls that return a public
 * result struct.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "client/client_int.h"
#include "util/mem.h"

#define KV_RANGE "/etcdserverpb.KV/Range"
#define KV_PUT "/etcdserverpb.KV/Put"
#define KV_DELETE "/etcdserverpb.KV/DeleteRange"
#define KV_COMPACT "/etcdserverpb.KV/Compact"
#define MAINT_STATUS "/etcdserverpb.Maintenance/Status"

static ProtobufCBinaryData bin(const void *p, size_t len)
{
    ProtobufCBinaryData b = {len, (uint8_t *)p};
    return b;
}

void client__header_copy(struct cetcd_header *h,
                         const Etcdserverpb__ResponseHeader *m)
{
    memset(h, 0, sizeof(*h));
    if (m == NULL)
        return;
    h->cluster_id = m->cluster_id;
    h->member_id = m->member_id;
    h->revision = m->revision;
    h->raft_term = m->raft_term;
}

void client__kv_copy(struct cetcd_kv *kv, const Mvccpb__KeyValue *m)
{
    kv->key = m->key.data;
    kv->key_len = m->key.len;
    kv->value = m->value.data;
    kv->value_len = m->value.len;
    kv->create_revision = m->create_revision;
    kv->mod_revision = m->mod_revision;
    kv->version = m->version;
    kv->lease = m->lease;
}

/* kvs_make returns n public pairs pointing into ms (NULL when n == 0). */
static int kvs_make(struct cetcd_kv **out, Mvccpb__KeyValue *const *ms,
                    size_t n)
{
    *out = NULL;
    if (n == 0)
        return 0;
    *out = mem_calloc(n, sizeof(**out));
    if (*out == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    for (size_t i = 0; i < n; i++)
        client__kv_copy(&(*out)[i], ms[i]);
    return 0;
}

void client__range_req_fill(Etcdserverpb__RangeRequest *req, const void *key,
                            size_t key_len, const struct cetcd_range_opts *o)
{
    etcdserverpb__range_request__init(req);
    req->key = bin(key, key_len);
    if (o == NULL)
        return;
    req->range_end = bin(o->range_end, o->range_end_len);
    req->limit = o->limit;
    req->revision = o->revision;
    req->sort_order = (Etcdserverpb__RangeRequest__SortOrder)o->sort_order;
    req->sort_target = (Etcdserverpb__RangeRequest__SortTarget)o->sort_target;
    req->serializable = o->serializable;
    req->keys_only = o->keys_only;
    req->count_only = o->count_only;
    req->min_mod_revision = o->min_mod_revision;
    req->max_mod_revision = o->max_mod_revision;
    req->min_create_revision = o->min_create_revision;
    req->max_create_revision = o->max_create_revision;
}

void client__put_req_fill(Etcdserverpb__PutRequest *req, const void *key,
                          size_t key_len, const void *value, size_t value_len,
                          const struct cetcd_put_opts *o)
{
    etcdserverpb__put_request__init(req);
    req->key = bin(key, key_len);
    req->value = bin(value, value_len);
    if (o == NULL)
        return;
    req->lease = o->lease;
    req->prev_kv = o->prev_kv;
    req->ignore_value = o->ignore_value;
    req->ignore_lease = o->ignore_lease;
}

void client__delete_req_fill(Etcdserverpb__DeleteRangeRequest *req,
                             const void *key, size_t key_len,
                             const struct cetcd_delete_opts *o)
{
    etcdserverpb__delete_range_request__init(req);
    req->key = bin(key, key_len);
    if (o == NULL)
        return;
    req->range_end = bin(o->range_end, o->range_end_len);
    req->prev_kv = o->prev_kv;
}

int client__range_fill(struct cetcd_range_result *r,
                       const Etcdserverpb__RangeResponse *resp)
{
    memset(r, 0, sizeof(*r));
    client__header_copy(&r->header, resp->header);
    r->more = resp->more;
    r->count = resp->count;
    r->kvs_len = resp->n_kvs;
    return kvs_make(&r->kvs, resp->kvs, resp->n_kvs);
}

int client__put_fill(struct cetcd_put_result *r,
                     const Etcdserverpb__PutResponse *resp)
{
    memset(r, 0, sizeof(*r));
    client__header_copy(&r->header, resp->header);
    if (resp->prev_kv == NULL)
        return 0;
    return kvs_make(&r->prev_kv, &resp->prev_kv, 1);
}

int client__delete_fill(struct cetcd_delete_result *r,
                        const Etcdserverpb__DeleteRangeResponse *resp)
{
    memset(r, 0, sizeof(*r));
    client__header_copy(&r->header, resp->header);
    r->deleted = resp->deleted;
    r->prev_kvs_len = resp->n_prev_kvs;
    return kvs_make(&r->prev_kvs, resp->prev_kvs, resp->n_prev_kvs);
}

void client__range_clear(struct cetcd_range_result *r)
{
    mem_free(r->kvs);
    r->kvs = NULL;
}

void client__put_clear(struct cetcd_put_result *r)
{
    mem_free(r->prev_kv);
    r->prev_kv = NULL;
}

void client__delete_clear(struct cetcd_delete_result *r)
{
    mem_free(r->prev_kvs);
    r->prev_kvs = NULL;
}

void client__result_free(void *r, void *reply)
{
    if (reply != NULL)
        protobuf_c_message_free_unpacked(reply, NULL);
    mem_free(r);
}

int client__call_typed(struct cetcd_client *c, const struct client__typed *t,
                       const ProtobufCMessage *req, void **result_out,
                       struct cetcd_status *st)
{
    ProtobufCMessage *resp;
    void *r;
    int rc;

    assert(t != NULL && t->fill != NULL);
    assert(t->internal_off + sizeof(void *) <= t->result_size);
    rc = cetcd_call_unary(c, t->method, req, t->reply, &resp, st);
    if (rc != 0 || result_out == NULL) {
        if (rc == 0)
            protobuf_c_message_free_unpacked(resp, NULL);
        return rc;
    }
    r = mem_calloc(1, t->result_size);
    rc = r != NULL ? t->fill(r, resp) : CETCD_RESOURCE_EXHAUSTED;
    if (rc != 0) {
        client__result_free(r, resp); /* a failed fill left nothing */
        return client__status_set(st, rc, "no memory");
    }
    /* The result's internal_ (a void *) keeps the reply it points into. */
    *(void **)((char *)r + t->internal_off) = resp;
    *result_out = r;
    return 0;
}

/* The fills of the typed KV calls, as struct client__typed takes them. */
static int range_fill(void *r, const ProtobufCMessage *resp)
{
    return client__range_fill(r, (const Etcdserverpb__RangeResponse *)resp);
}

static int put_fill(void *r, const ProtobufCMessage *resp)
{
    return client__put_fill(r, (const Etcdserverpb__PutResponse *)resp);
}

static int delete_fill(void *r, const ProtobufCMessage *resp)
{
    return client__delete_fill(
        r, (const Etcdserverpb__DeleteRangeResponse *)resp);
}

int cetcd_range(struct cetcd_client *c, const void *key, size_t key_len,
                const struct cetcd_range_opts *opts,
                struct cetcd_range_result **result_out,
                struct cetcd_status *st)
{
    static const struct client__typed range = {
        KV_RANGE, &etcdserverpb__range_response__descriptor,
        sizeof(struct cetcd_range_result),
        offsetof(struct cetcd_range_result, internal_), range_fill};
    Etcdserverpb__RangeRequest req;
    void *r = NULL;
    int rc;

    if (result_out == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no result");
    client__range_req_fill(&req, key, key_len, opts);
    rc = client__call_typed(c, &range, &req.base, &r, st);
    *result_out = r;
    return rc;
}

int cetcd_get(struct cetcd_client *c, const char *key,
              struct cetcd_range_result **result_out, struct cetcd_status *st)
{
    if (key == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no key");
    return cetcd_range(c, key, strlen(key), NULL, result_out, st);
}

void cetcd_range_result_free(struct cetcd_range_result *r)
{
    if (r == NULL)
        return;
    client__range_clear(r);
    client__result_free(r, r->internal_);
}

int cetcd_put(struct cetcd_client *c, const void *key, size_t key_len,
              const void *value, size_t value_len,
              const struct cetcd_put_opts *opts,
              struct cetcd_put_result **result_out, struct cetcd_status *st)
{
    static const struct client__typed put = {
        KV_PUT, &etcdserverpb__put_response__descriptor,
        sizeof(struct cetcd_put_result),
        offsetof(struct cetcd_put_result, internal_), put_fill};
    Etcdserverpb__PutRequest req;
    void *r = NULL;
    int rc;

    client__put_req_fill(&req, key, key_len, value, value_len, opts);
    rc = client__call_typed(c, &put, &req.base, result_out ? &r : NULL, st);
    if (result_out != NULL)
        *result_out = r;
    return rc;
}

void cetcd_put_result_free(struct cetcd_put_result *r)
{
    if (r == NULL)
        return;
    client__put_clear(r);
    client__result_free(r, r->internal_);
}

int cetcd_delete(struct cetcd_client *c, const void *key, size_t key_len,
                 const struct cetcd_delete_opts *opts,
                 struct cetcd_delete_result **result_out,
                 struct cetcd_status *st)
{
    static const struct client__typed del = {
        KV_DELETE, &etcdserverpb__delete_range_response__descriptor,
        sizeof(struct cetcd_delete_result),
        offsetof(struct cetcd_delete_result, internal_), delete_fill};
    Etcdserverpb__DeleteRangeRequest req;
    void *r = NULL;
    int rc;

    client__delete_req_fill(&req, key, key_len, opts);
    rc = client__call_typed(c, &del, &req.base, result_out ? &r : NULL, st);
    if (result_out != NULL)
        *result_out = r;
    return rc;
}

void cetcd_delete_result_free(struct cetcd_delete_result *r)
{
    if (r == NULL)
        return;
    client__delete_clear(r);
    client__result_free(r, r->internal_);
}

int cetcd_compact(struct cetcd_client *c, int64_t revision, bool physical,
                  struct cetcd_header *header_out, struct cetcd_status *st)
{
    Etcdserverpb__CompactionRequest req;
    ProtobufCMessage *resp;
    int rc;

    etcdserverpb__compaction_request__init(&req);
    req.revision = revision;
    req.physical = physical;
    rc = cetcd_call_unary(c, KV_COMPACT, &req.base,
                          &etcdserverpb__compaction_response__descriptor,
                          &resp, st);
    if (rc != 0)
        return rc;
    if (header_out != NULL)
        client__header_copy(
            header_out, ((Etcdserverpb__CompactionResponse *)resp)->header);
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

static void status_copy(struct cetcd_endpoint_status *s,
                        const Etcdserverpb__StatusResponse *m)
{
    memset(s, 0, sizeof(*s));
    client__header_copy(&s->header, m->header);
    if (m->version != NULL)
        snprintf(s->version, sizeof(s->version), "%s", m->version);
    s->db_size = m->dbsize;
    s->leader = m->leader;
    s->raft_index = m->raftindex;
    s->raft_term = m->raftterm;
    s->raft_applied_index = m->raftappliedindex;
    s->db_size_in_use = m->dbsizeinuse;
    s->is_learner = m->islearner;
}

int cetcd_endpoint_status(struct cetcd_client *c,
                          struct cetcd_endpoint_status *status_out,
                          struct cetcd_status *st)
{
    Etcdserverpb__StatusRequest req;
    ProtobufCMessage *resp;
    int rc;

    if (status_out == NULL)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "no result");
    etcdserverpb__status_request__init(&req);
    rc = cetcd_call_unary(c, MAINT_STATUS, &req.base,
                          &etcdserverpb__status_response__descriptor, &resp,
                          st);
    if (rc != 0)
        return rc;
    status_copy(status_out, (Etcdserverpb__StatusResponse *)resp);
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}
