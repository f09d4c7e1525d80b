/*
 * apply_kv.c - the store applier, the last link of the apply chain
 * (applier.h): runs one committed request (Put, DeleteRange, Txn,
 * Compaction, Range) against the open mvcc batch, hands lease requests
 * to lease.c, with etcd 3.4's
 * semantics (etcdserver/apply.go's applierV3backend is the reference for
 * what happens; this is our own code), and hands Alarm and membership
 * requests to alarm.c and members.c.  Responses are built in the batch
 * arena; only the outer header is filled by the caller.
 */
#include "util/check.h"
#include <string.h>

#include "mvcc/mvcc.h"
#include "server/applier.h"
#include "server/kv_range.h"
#include "server/server_int.h"
#include "util/err.h"

typedef Etcdserverpb__TxnRequest txn_req;
typedef Etcdserverpb__RequestOp req_op;

#define NEW(a, T, init)                                                      \
    ({                                                                       \
        T *p_ = arena_alloc((a), sizeof(T));                                 \
        if (p_ != NULL)                                                      \
            init(p_);                                                        \
        p_;                                                                  \
    })

static Etcdserverpb__ResponseHeader *new_header(struct arena *a, int64_t rev)
{
    Etcdserverpb__ResponseHeader *h =
        NEW(a, Etcdserverpb__ResponseHeader, etcdserverpb__response_header__init);
    if (h != NULL)
        h->revision = rev;
    return h;
}

/* A put's lease must be held (etcd's applier checks it before the write;
 * a put that ignores the lease keeps the key's own). */
static int lease_check(struct server *s, const Etcdserverpb__PutRequest *p)
{
    if (p->lease == 0 || p->ignore_lease)
        return 0;
    return server__lease_exists(s, p->lease) ? 0 : ERR_LEASE_NOT_FOUND;
}

static Mvccpb__KeyValue *kv_copy_pb(struct arena *a, const struct mvcc_kv *kv)
{
    Mvccpb__KeyValue *m = arena_alloc(a, sizeof *m);
    if (m != NULL)
        kv_to_pb(kv, m);
    return m;
}

/* One request being applied: the mvcc txn and what etcd's write txn tracks
 * (whether anything changed yet, which decides the revisions it reports). */
struct kv_txn {
    struct mvcc_txn *t; /* the request's mvcc txn */
    bool changed;       /* a write of this request changed the store */
    struct arena *a;    /* where responses go */
    struct mvcc_store *store; /* for the compact revision */
    bool compacted_at_zero;   /* server's: see do_compact */
    struct server *s;         /* the member (its leases) */
};

/* The revision etcd's write txn reports for reads and no-op deletes: the
 * new one once something changed, else the current one. */
static mvcc_rev view_rev(const struct kv_txn *k)
{
    return k->changed ? mvcc_txn_rev(k->t) : mvcc_txn_rev(k->t) - 1;
}

static int do_put(struct kv_txn *k, const Etcdserverpb__PutRequest *p,
                  Etcdserverpb__PutResponse **out)
{
    int rc = lease_check(k->s, p);
    if (rc != 0)
        return rc;
    unsigned flags = (p->ignore_value ? MVCC_PUT_IGNORE_VALUE : 0) |
                     (p->ignore_lease ? MVCC_PUT_IGNORE_LEASE : 0);
    if (p->prev_kv || p->ignore_value || p->ignore_lease)
        mvcc_txn_note_range(k->t); /* etcd's applyPut ranges first */
    struct mvcc_kv prev;
    memset(&prev, 0, sizeof prev);
    /* prev only when asked: its value is a read of the revision log */
    rc = mvcc_txn_put(k->t, p->key.data, p->key.len, p->value.data,
                      p->value.len, p->lease, flags, p->prev_kv ? &prev : NULL);
    if (rc != 0)
        return rc;
    k->changed = true;
    Etcdserverpb__PutResponse *r =
        NEW(k->a, Etcdserverpb__PutResponse, etcdserverpb__put_response__init);
    if (r == NULL || (r->header = new_header(k->a, mvcc_txn_rev(k->t))) == NULL)
        return ERR_NOMEM;
    if (p->prev_kv && prev.mod_rev != 0 &&
        (r->prev_kv = kv_copy_pb(k->a, &prev)) == NULL)
        return ERR_NOMEM;
    *out = r;
    return 0;
}

static int do_delete(struct kv_txn *k, const Etcdserverpb__DeleteRangeRequest *d,
                     Etcdserverpb__DeleteRangeResponse **out)
{
    int64_t deleted = 0;
    struct mvcc_kv *prevs = NULL;
    int rc = mvcc_txn_delete_range(k->t, d->key.data, d->key.len,
                                   d->range_end.data, d->range_end.len,
                                   &deleted, d->prev_kv ? &prevs : NULL);
    if (rc != 0)
        return rc;
    if (deleted > 0)
        k->changed = true;
    Etcdserverpb__DeleteRangeResponse *r =
        NEW(k->a, Etcdserverpb__DeleteRangeResponse,
            etcdserverpb__delete_range_response__init);
    if (r == NULL || (r->header = new_header(k->a, view_rev(k))) == NULL)
        return ERR_NOMEM;
    r->deleted = deleted;
    if (d->prev_kv && deleted > 0) {
        r->prev_kvs = arena_alloc(k->a, (size_t)deleted * sizeof *r->prev_kvs);
        if (r->prev_kvs == NULL)
            return ERR_NOMEM;
        for (int64_t i = 0; i < deleted; i++)
            if ((r->prev_kvs[i] = kv_copy_pb(k->a, &prevs[i])) == NULL)
                return ERR_NOMEM;
        r->n_prev_kvs = (size_t)deleted;
    }
    *out = r;
    return 0;
}

static int do_range(struct kv_txn *k, const Etcdserverpb__RangeRequest *q,
                    Etcdserverpb__RangeResponse **out)
{
    struct mvcc_range_result res;
    memset(&res, 0, sizeof res);
    int rc = mvcc_txn_range(k->t, q->key.data, q->key.len, q->range_end.data,
                            q->range_end.len, q->revision,
                            kv_range_fetch_limit(q), kv_range_fetch_flags(q),
                            &res);
    if (rc == 0) {
        *out = kv_range_build(q, &res, k->a);
        if (*out == NULL)
            rc = ERR_NOMEM;
        else
            (*out)->header->revision = view_rev(k);
    }
    mvcc_range_result_close(&res);
    return rc;
}

/* --- Txn --------------------------------------------------------------- */

static bool cmp_result(int result, int c)
{
    switch (result) {
    case ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL:
        return c == 0;
    case ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL:
        return c != 0;
    case ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER:
        return c > 0;
    case ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS:
        return c < 0;
    default:
        return true;
    }
}

static int i64_cmp(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b ? 1 : 0;
}

/* The compared field of kv; a target_union of another kind compares
 * against zero (or the empty value), as in etcd. */
static int cmp_kv(const Etcdserverpb__Compare *c, const struct mvcc_kv *kv)
{
    int u = c->target_union_case;
    switch (c->target) {
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE: {
        const uint8_t *v = NULL;
        size_t vl = 0;
        if (u == ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE)
            v = c->value.data, vl = c->value.len;
        size_t n = kv->value_len < vl ? kv->value_len : vl;
        int r = n ? memcmp(kv->value, v, n) : 0;
        return r != 0 ? r : i64_cmp((int64_t)kv->value_len, (int64_t)vl);
    }
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE:
        return i64_cmp(kv->create_rev,
                       u == ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION
                           ? c->create_revision : 0);
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD:
        return i64_cmp(kv->mod_rev,
                       u == ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION
                           ? c->mod_revision : 0);
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION:
        return i64_cmp(kv->version,
                       u == ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION
                           ? c->version : 0);
    case ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE:
        return i64_cmp(kv->lease, u == ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE
                                      ? c->lease : 0);
    default:
        return 0; /* unknown target: etcd's result stays 0 */
    }
}

static int compare_one(struct kv_txn *k, const Etcdserverpb__Compare *c,
                       bool *ok)
{
    struct mvcc_range_result res;
    memset(&res, 0, sizeof res);
    int rc = mvcc_txn_range(k->t, c->key.data, c->key.len, c->range_end.data,
                            c->range_end.len, 0, 0, 0, &res);
    if (rc != 0) {
        mvcc_range_result_close(&res);
        *ok = false; /* etcd: a failed range fails the compare */
        return rc == ERR_NOMEM ? rc : 0;
    }
    if (res.n_kvs == 0) {
        struct mvcc_kv zero;
        memset(&zero, 0, sizeof zero);
        *ok = c->target != ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE &&
              cmp_result(c->result, cmp_kv(c, &zero));
    } else {
        *ok = true;
        for (size_t i = 0; i < res.n_kvs && *ok; i++)
            *ok = cmp_result(c->result, cmp_kv(c, &res.kvs[i]));
    }
    mvcc_range_result_close(&res);
    return 0;
}

/* The txn path: one bool per (nested) txn taken, in depth-first order. */
struct txn_path {
    bool *v;    /* branch taken by each txn */
    size_t n;   /* used */
    size_t cap; /* allocated */
};

static int path_push(struct kv_txn *k, struct txn_path *p, bool b)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        bool *v = arena_alloc(k->a, cap);
        if (v == NULL)
            return ERR_NOMEM;
        if (p->n)
            memcpy(v, p->v, p->n);
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = b;
    return 0;
}

static int eval_path(struct kv_txn *k, const txn_req *r, struct txn_path *p)
{
    bool ok = true;
    for (size_t i = 0; i < r->n_compare && ok; i++) {
        int rc = compare_one(k, r->compare[i], &ok);
        if (rc != 0)
            return rc;
    }
    int rc = path_push(k, p, ok);
    size_t n = ok ? r->n_success : r->n_failure;
    req_op **ops = ok ? r->success : r->failure;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (ops[i]->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
            rc = eval_path(k, ops[i]->request_txn, p);
    return rc;
}

static req_op **branch(const txn_req *r, bool ok, size_t *n)
{
    *n = ok ? r->n_success : r->n_failure;
    return ok ? r->success : r->failure;
}

/* The oldest readable revision as etcd's read view reports it (its
 * compactMainRev): -1 before any compaction, 0 after one at revision 0
 * (see do_compact), so that a negative revision below it fails like
 * etcd's. */
static mvcc_rev first_rev(const struct kv_txn *k)
{
    mvcc_rev c = mvcc_compact_rev(k->store);
    return c > 0 ? c : k->compacted_at_zero ? 0 : -1;
}

/* The store keeps keys up to mvcc_key_max bytes (1 GiB: any key a request
 * can carry, long ones in its `kvl` bucket); a txn must fail before its
 * first write, not halfway, so every key is checked up front. */
static int check_key_len(struct kv_txn *k, const req_op *o)
{
    size_t len = 0;
    if (o->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
        len = o->request_put->key.len;
    else if (o->request_case ==
             ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE)
        len = o->request_delete_range->key.len;
    else if (o->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
        len = o->request_range->key.len;
    return len > mvcc_key_max(k->store) ? ERR_TOO_LARGE : 0;
}

/*
 * The txn's own writes, in execution order, as seen by the pre-check: an
 * ignore_value/ignore_lease put needs its key to exist when it runs, which
 * an earlier delete of the same txn can change.  etcd 3.4 checks against
 * the state before the txn and panics mid-txn when a ">= key" delete (which
 * its duplicate check ignores) removed the key; we refuse the txn before
 * its first write instead.
 */
struct sim_write {
    bool del;                 /* a DeleteRange (else a Put) */
    ProtobufCBinaryData key;  /* key (borrowed from the request) */
    ProtobufCBinaryData end;  /* range end of a delete */
};

struct txn_sim {
    struct sim_write *w; /* in execution order */
    size_t n, cap;       /* used, allocated */
};

static int bin_cmp(const ProtobufCBinaryData *a, const ProtobufCBinaryData *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->data, b->data, n) : 0;
    return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

/* Does the delete [w->key, w->end) cover k?  (end "" = the key alone,
 * "\0" = every key >= key; key "\0" + end "\0" = everything.) */
static bool sim_covers(const struct sim_write *w, const ProtobufCBinaryData *k)
{
    if (w->end.len == 0)
        return bin_cmp(&w->key, k) == 0;
    if (bin_cmp(&w->key, k) > 0)
        return false;
    if (w->end.len == 1 && w->end.data[0] == 0)
        return true;
    return bin_cmp(k, &w->end) < 0;
}

/* 1 exists, 0 does not, -1 the txn has not touched k (ask the store). */
static int sim_exists(const struct txn_sim *sim, const ProtobufCBinaryData *k)
{
    for (size_t i = sim->n; i-- > 0;) {
        const struct sim_write *w = &sim->w[i];
        if (w->del && sim_covers(w, k))
            return 0;
        if (!w->del && bin_cmp(&w->key, k) == 0)
            return 1;
    }
    return -1;
}

static int sim_add(struct kv_txn *k, struct txn_sim *sim, bool del,
                   ProtobufCBinaryData key, ProtobufCBinaryData end)
{
    if (sim->n == sim->cap) {
        size_t cap = sim->cap ? sim->cap * 2 : 16;
        struct sim_write *w = arena_alloc(k->a, cap * sizeof *w);
        if (w == NULL)
            return ERR_NOMEM;
        if (sim->n)
            memcpy(w, sim->w, sim->n * sizeof *w);
        sim->w = w;
        sim->cap = cap;
    }
    sim->w[sim->n++] = (struct sim_write){.del = del, .key = key, .end = end};
    return 0;
}

static int check_put(struct kv_txn *k, const Etcdserverpb__PutRequest *q,
                     struct txn_sim *sim)
{
    int rc = 0;
    int known = sim_exists(sim, &q->key);
    if ((q->ignore_value || q->ignore_lease) && known >= 0) {
        rc = known ? 0 : ERR_KEY_NOT_FOUND;
    } else if (q->ignore_value || q->ignore_lease) {
        struct mvcc_range_result res;
        memset(&res, 0, sizeof res);
        rc = mvcc_txn_range(k->t, q->key.data, q->key.len, NULL, 0, 0, 0,
                            MVCC_RANGE_COUNT_ONLY, &res);
        if (rc == 0 && res.count == 0)
            rc = ERR_KEY_NOT_FOUND;
        mvcc_range_result_close(&res);
    }
    if (rc == 0)
        rc = lease_check(k->s, q);
    if (rc == 0)
        rc = sim_add(k, sim, false, q->key, (ProtobufCBinaryData){0, NULL});
    return rc;
}

static int check_range(struct kv_txn *k, const Etcdserverpb__RangeRequest *q)
{
    mvcc_rev cur = mvcc_txn_rev(k->t) - 1;
    if (q->revision > cur)
        return ERR_FUTURE_REV;
    if (q->revision != 0 && q->revision < first_rev(k))
        return ERR_COMPACTED;
    return 0;
}

/* etcd's pre-checks, on the state before the txn writes anything: one pass
 * over the taken path for the puts, then one for the ranges (that order
 * decides which error wins). */
static int check_ops(struct kv_txn *k, const txn_req *r,
                     const struct txn_path *p, size_t *pos, bool puts,
                     struct txn_sim *sim)
{
    size_t n;
    req_op **ops = branch(r, p->v[(*pos)++], &n);
    for (size_t i = 0; i < n; i++) {
        const req_op *o = ops[i];
        int rc = 0;
        if (o->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
            rc = check_ops(k, o->request_txn, p, pos, puts, sim);
        else if (puts && (rc = check_key_len(k, o)) != 0)
            return rc;
        else if (puts &&
                 o->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
            rc = check_put(k, o->request_put, sim);
        else if (puts && o->request_case ==
                             ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE)
            rc = sim_add(k, sim, true, o->request_delete_range->key,
                         o->request_delete_range->range_end);
        else if (!puts && o->request_case ==
                              ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
            rc = check_range(k, o->request_range);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int run_txn(struct kv_txn *k, const txn_req *r,
                   const struct txn_path *p, size_t *pos,
                   Etcdserverpb__TxnResponse **out);

static int run_op(struct kv_txn *k, const req_op *o, const struct txn_path *p,
                  size_t *pos, Etcdserverpb__ResponseOp *ro)
{
    switch (o->request_case) {
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
        ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
        return do_range(k, o->request_range, &ro->response_range);
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
        ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
        return do_put(k, o->request_put, &ro->response_put);
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
        ro->response_case =
            ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE;
        return do_delete(k, o->request_delete_range,
                         &ro->response_delete_range);
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
        ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
        return run_txn(k, o->request_txn, p, pos, &ro->response_txn);
    default:
        return 0; /* empty op: an empty ResponseOp, as etcd */
    }
}

static int run_txn(struct kv_txn *k, const txn_req *r,
                   const struct txn_path *p, size_t *pos,
                   Etcdserverpb__TxnResponse **out)
{
    bool ok = p->v[(*pos)++];
    size_t n;
    req_op **ops = branch(r, ok, &n);
    Etcdserverpb__TxnResponse *t =
        NEW(k->a, Etcdserverpb__TxnResponse, etcdserverpb__txn_response__init);
    if (t == NULL || (t->header = new_header(k->a, 0)) == NULL)
        return ERR_NOMEM;
    t->succeeded = ok;
    if (n > 0 && (t->responses = arena_alloc(k->a, n * sizeof(void *))) == NULL)
        return ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        Etcdserverpb__ResponseOp *ro = NEW(k->a, Etcdserverpb__ResponseOp,
                                           etcdserverpb__response_op__init);
        if (ro == NULL)
            return ERR_NOMEM;
        int rc = run_op(k, ops[i], p, pos, ro);
        if (rc != 0)
            return rc;
        t->responses[i] = ro;
    }
    t->n_responses = n;
    *out = t;
    return 0;
}

static int do_txn(struct kv_txn *k, const txn_req *r,
                  Etcdserverpb__TxnResponse **out)
{
    struct txn_path p = {0};
    int rc = eval_path(k, r, &p);
    size_t pos = 0;
    struct txn_sim sim = {0};
    if (rc == 0)
        rc = check_ops(k, r, &p, &pos, true, &sim);
    pos = 0;
    if (rc == 0)
        rc = check_ops(k, r, &p, &pos, false, &sim);
    if (rc != 0)
        return rc;
    pos = 0;
    rc = run_txn(k, r, &p, &pos, out);
    CHECK(rc != 0 || pos == p.n);
    return rc;
}

static int do_compact(struct server *s, struct mvcc_batch *b,
                      const Etcdserverpb__CompactionRequest *c,
                      struct arena *a, Etcdserverpb__CompactionResponse **out)
{
    int rc;
    /* etcd starts at compact revision -1, so its first compaction at 0
     * succeeds (deleting nothing) and only later ones at 0 fail.  Our store
     * starts at 0; the difference is kept in memory (a restart forgets it). */
    if (c->revision == 0 && mvcc_compact_rev(s->mvcc) == 0 &&
        !s->compacted_at_zero) {
        s->compacted_at_zero = true;
        rc = 0;
    } else {
        rc = mvcc_compact(b, c->revision);
    }
    if (rc != 0)
        return rc;
    s->compact_began_ns = server__now_ns(); /* its finished line's "took" */
    /* etcd's applyCompaction reads the key "compaction" for the header's
     * revision: counted as etcd counts that Range (etcd_mvcc_range_total). */
    metrics_inc(&mvcc_metrics.range);
    /* physical: done in this batch, but not in a tentative one, whose
     * readers are pinned below this compaction (mvcc_visible_hold); the
     * next batch does it then (apply.c compact_more). */
    if (c->physical && !s->apply_tentative) {
        bool more = true;
        while (more && rc == 0)
            rc = server__compact_step(s, b, 10000, &more);
        /* ERR_FULL: a nearly full disk left this txn no room for more
         * (each step did what fit, mvcc_compact_step); the rest goes on a
         * step per batch once pins make the freed pages reusable, and the
         * request is answered now rather than stall the apply */
        if (rc != 0 && rc != ERR_FULL)
            return rc;
    }
    Etcdserverpb__CompactionResponse *r =
        NEW(a, Etcdserverpb__CompactionResponse,
            etcdserverpb__compaction_response__init);
    if (r == NULL || (r->header = new_header(a, 0)) == NULL)
        return ERR_NOMEM;
    *out = r;
    return 0;
}

/* --- the store applier's handlers ------------------------------------ */

static struct kv_txn kv_begin(struct applier_call *c)
{
    return (struct kv_txn){.t = mvcc_txn_begin(c->b), .changed = false,
                           .a = c->a, .store = c->s->mvcc,
                           .compacted_at_zero = c->s->compacted_at_zero,
                           .s = c->s};
}

static int store_put(const struct applier *self, struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_PUT);
    struct kv_txn k = kv_begin(c);
    int rc = do_put(&k, c->req->put, (Etcdserverpb__PutResponse **)c->msg_out);
    mvcc_txn_end(k.t);
    return rc;
}

static int store_delete(const struct applier *self, struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_DELETE_RANGE);
    struct kv_txn k = kv_begin(c);
    int rc = do_delete(&k, c->req->delete_range,
                       (Etcdserverpb__DeleteRangeResponse **)c->msg_out);
    mvcc_txn_end(k.t);
    return rc;
}

/* A txn reports the store's revision after it (bumped iff it wrote). */
static int store_txn(const struct applier *self, struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_TXN);
    struct kv_txn k = kv_begin(c);
    Etcdserverpb__TxnResponse **out = (Etcdserverpb__TxnResponse **)c->msg_out;
    int rc = do_txn(&k, c->req->txn, out);
    mvcc_rev end = mvcc_txn_end(k.t);
    if (rc == 0)
        (*out)->header->revision = end;
    return rc;
}

static int store_range(const struct applier *self, struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_RANGE);
    struct kv_txn k = kv_begin(c);
    int rc = do_range(&k, c->req->range,
                      (Etcdserverpb__RangeResponse **)c->msg_out);
    mvcc_txn_end(k.t);
    return rc;
}

static int store_compact(const struct applier *self, struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_COMPACTION);
    return do_compact(c->s, c->b, c->req->compaction, c->a,
                      (Etcdserverpb__CompactionResponse **)c->msg_out);
}

static int store_alarm(const struct applier *self, struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_ALARM);
    return server__alarm_apply(c->s, c->b, c->req->alarm, c->a,
                               c->msg_out); /* alarm.c: relinks the chain */
}

static int store_members(const struct applier *self, struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_MEMBERS);
    return server__members_apply(c->s, c->b, c->req); /* members.c */
}

static int store_lease_grant(const struct applier *self,
                             struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_LEASE_GRANT);
    return server__lease_grant_apply(c->s, c->b, c->req->lease_grant, c->a,
                                     c->msg_out);
}

static int store_lease_revoke(const struct applier *self,
                              struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_LEASE_REVOKE);
    return server__lease_revoke_apply(c->s, c->b, c->req->lease_revoke, c->a,
                                      c->msg_out);
}

static int store_lease_checkpoint(const struct applier *self,
                                  struct applier_call *c)
{
    (void)self;
    CHECK(c->slot == APPLIER_LEASE_CHECKPOINT);
    return server__lease_checkpoint_apply(c->s, c->b,
                                          c->req->lease_checkpoint, c->a,
                                          c->msg_out);
}

/* Auth and unknown kinds: not built; the answer is all. */
static int unsupported(const struct applier *self, struct applier_call *c)
{
    (void)self;
    (void)c;
    return ERR_UNSUPPORTED;
}

const struct applier_ops server__applier_store_ops = {
    .name = "store",
    .fn = {
        [APPLIER_NONE] = unsupported,
        [APPLIER_RANGE] = store_range,
        [APPLIER_PUT] = store_put,
        [APPLIER_DELETE_RANGE] = store_delete,
        [APPLIER_TXN] = store_txn,
        [APPLIER_COMPACTION] = store_compact,
        [APPLIER_LEASE_GRANT] = store_lease_grant,
        [APPLIER_LEASE_REVOKE] = store_lease_revoke,
        [APPLIER_LEASE_CHECKPOINT] = store_lease_checkpoint,
        [APPLIER_ALARM] = store_alarm,
        [APPLIER_MEMBERS] = store_members,
        /* auth (issue 19) */
        [APPLIER_AUTHENTICATE] = unsupported,
        [APPLIER_AUTH_ENABLE] = unsupported,
        [APPLIER_AUTH_DISABLE] = unsupported,
        [APPLIER_USER_ADD] = unsupported,
        [APPLIER_USER_DELETE] = unsupported,
        [APPLIER_USER_CHANGE_PASSWORD] = unsupported,
        [APPLIER_USER_GRANT_ROLE] = unsupported,
        [APPLIER_USER_GET] = unsupported,
        [APPLIER_USER_REVOKE_ROLE] = unsupported,
        [APPLIER_USER_LIST] = unsupported,
        [APPLIER_ROLE_ADD] = unsupported,
        [APPLIER_ROLE_GRANT_PERMISSION] = unsupported,
        [APPLIER_ROLE_GET] = unsupported,
        [APPLIER_ROLE_REVOKE_PERMISSION] = unsupported,
        [APPLIER_ROLE_DELETE] = unsupported,
        [APPLIER_ROLE_LIST] = unsupported,
    },
};
