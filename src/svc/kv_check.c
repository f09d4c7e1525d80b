/*
 * kv_check.c - request validation and the txn duplicate-key rules.
 *
 * Duplicate keys (etcd's checkIntervals): within one branch, a key may be
 * put at most once and may not be put when a delete of the same branch (or
 * of a nested txn in it) covers it.  A nested txn's then- and else-puts of
 * the same key are fine (only one branch runs).  A delete interval is
 * [key, range_end), a single key when range_end is empty; an interval whose
 * end sorts before its start (e.g. range_end "\0") covers nothing here,
 * exactly as in etcd 3.4.
 */
#include "svc/kv_check.h"

#include <stdbool.h>
#include <string.h>

#include "util/err.h"
#include "util/mem.h"

typedef Etcdserverpb__RequestOp req_op;

int kv_check_range(const Etcdserverpb__RangeRequest *r)
{
    return r->key.len == 0 ? ERR_EMPTY_KEY : 0;
}

int kv_check_put(const Etcdserverpb__PutRequest *r)
{
    if (r->key.len == 0)
        return ERR_EMPTY_KEY;
    if (r->ignore_value && r->value.len != 0)
        return ERR_VALUE_PROVIDED;
    if (r->ignore_lease && r->lease != 0)
        return ERR_LEASE_PROVIDED;
    return 0;
}

int kv_check_delete(const Etcdserverpb__DeleteRangeRequest *r)
{
    return r->key.len == 0 ? ERR_EMPTY_KEY : 0;
}

static int check_op(const req_op *u, int64_t max_ops);

static int check_txn_shape(const Etcdserverpb__TxnRequest *r, int64_t max_ops)
{
    size_t opc = r->n_compare;
    if (opc < r->n_success)
        opc = r->n_success;
    if (opc < r->n_failure)
        opc = r->n_failure;
    if ((int64_t)opc > max_ops)
        return ERR_TOO_MANY_OPS;
    for (size_t i = 0; i < r->n_compare; i++)
        if (r->compare[i]->key.len == 0)
            return ERR_EMPTY_KEY;
    for (size_t i = 0; i < r->n_success; i++) {
        int rc = check_op(r->success[i], max_ops - (int64_t)opc);
        if (rc != 0)
            return rc;
    }
    for (size_t i = 0; i < r->n_failure; i++) {
        int rc = check_op(r->failure[i], max_ops - (int64_t)opc);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int check_op(const req_op *u, int64_t max_ops)
{
    switch (u->request_case) {
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
        return kv_check_range(u->request_range);
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
        return kv_check_put(u->request_put);
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
        return kv_check_delete(u->request_delete_range);
    case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
        return check_txn_shape(u->request_txn, max_ops);
    default:
        return ERR_KEY_NOT_FOUND; /* empty op */
    }
}

/* --- duplicate keys ---------------------------------------------------- */

struct bstr {
    const uint8_t *p; /* bytes (borrowed from the request) */
    size_t n;         /* length */
};

/* A delete interval [b, e), or the single key b when point. */
struct kiv {
    struct bstr b, e; /* begin, end (end "" = +infinity) */
    bool point;       /* range_end was empty */
};

/* A set of puts and delete intervals; small arrays, linear search: a
 * branch has at most max-txn-ops entries per level. */
struct kset {
    struct bstr *keys;  /* put keys */
    size_t nk, ck;      /* used, capacity */
    struct kiv *ivs;    /* delete intervals */
    size_t ni, ci;      /* used, capacity */
};

static int bcmp_(struct bstr a, struct bstr b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int c = n ? memcmp(a.p, b.p, n) : 0;
    return c ? c : (a.n < b.n ? -1 : a.n > b.n);
}

static bool has_key(const struct kset *s, struct bstr k)
{
    for (size_t i = 0; i < s->nk; i++)
        if (bcmp_(s->keys[i], k) == 0)
            return true;
    return false;
}

/* Does the interval meet the point k, i.e. [k, k+"\0")? */
static bool iv_has(const struct kiv *iv, struct bstr k)
{
    if (iv->point)
        return bcmp_(iv->b, k) == 0;
    /* b < k+"\0"  <=>  b <= k */
    if (bcmp_(iv->b, k) > 0)
        return false;
    return iv->e.n == 0 || bcmp_(k, iv->e) < 0;
}

static bool dels_hit(const struct kset *s, struct bstr k)
{
    for (size_t i = 0; i < s->ni; i++)
        if (iv_has(&s->ivs[i], k))
            return true;
    return false;
}

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 8;
    while (c < need)
        c *= 2;
    void *n = mem_realloc(*v, c * elem);
    if (n == NULL)
        return ERR_NOMEM;
    *v = n;
    *cap = c;
    return 0;
}

/* Puts are a set: a key allowed twice (then/else of a nested txn) is
 * recorded once. */
static int add_key(struct kset *s, struct bstr k)
{
    if (has_key(s, k))
        return 0;
    int rc = grow((void **)&s->keys, &s->ck, s->nk + 1, sizeof *s->keys);
    if (rc == 0)
        s->keys[s->nk++] = k;
    return rc;
}

static int add_iv(struct kset *s, struct kiv iv)
{
    int rc = grow((void **)&s->ivs, &s->ci, s->ni + 1, sizeof *s->ivs);
    if (rc == 0)
        s->ivs[s->ni++] = iv;
    return rc;
}

static void kset_free(struct kset *s)
{
    mem_free(s->keys);
    mem_free(s->ivs);
}

static int check_level(req_op **reqs, size_t n, struct kset *out);

static int merge_child(struct kset *s, const Etcdserverpb__TxnRequest *t)
{
    struct kset th = {0}, el = {0};
    int rc = check_level(t->success, t->n_success, &th);
    if (rc == 0)
        rc = check_level(t->failure, t->n_failure, &el);
    for (size_t i = 0; rc == 0 && i < th.nk; i++) {
        if (has_key(s, th.keys[i]) || dels_hit(s, th.keys[i]))
            rc = ERR_DUPLICATE_KEY;
        else
            rc = add_key(s, th.keys[i]);
    }
    for (size_t i = 0; rc == 0 && i < el.nk; i++) {
        if ((has_key(s, el.keys[i]) && !has_key(&th, el.keys[i])) ||
            dels_hit(s, el.keys[i]))
            rc = ERR_DUPLICATE_KEY;
        else
            rc = add_key(s, el.keys[i]);
    }
    for (size_t i = 0; rc == 0 && i < th.ni; i++)
        rc = add_iv(s, th.ivs[i]);
    for (size_t i = 0; rc == 0 && i < el.ni; i++)
        rc = add_iv(s, el.ivs[i]);
    kset_free(&th);
    kset_free(&el);
    return rc;
}

static int check_level(req_op **reqs, size_t n, struct kset *s)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (reqs[i]->request_case !=
            ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE)
            continue;
        const Etcdserverpb__DeleteRangeRequest *d = reqs[i]->request_delete_range;
        struct kiv iv = {.b = {d->key.data, d->key.len},
                         .e = {d->range_end.data, d->range_end.len},
                         .point = d->range_end.len == 0};
        rc = add_iv(s, iv);
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (reqs[i]->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
            rc = merge_child(s, reqs[i]->request_txn);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (reqs[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
            continue;
        struct bstr k = {reqs[i]->request_put->key.data,
                         reqs[i]->request_put->key.len};
        if (has_key(s, k) || dels_hit(s, k))
            rc = ERR_DUPLICATE_KEY;
        else
            rc = add_key(s, k);
    }
    return rc;
}

int kv_check_txn(const Etcdserverpb__TxnRequest *r, int64_t max_txn_ops)
{
    int rc = check_txn_shape(r, max_txn_ops);
    struct kset s = {0};
    if (rc == 0)
        rc = check_level(r->success, r->n_success, &s);
    kset_free(&s);
    memset(&s, 0, sizeof s);
    if (rc == 0)
        rc = check_level(r->failure, r->n_failure, &s);
    kset_free(&s);
    return rc;
}

int kv_txn_is_readonly(const Etcdserverpb__TxnRequest *r)
{
    for (int b = 0; b < 2; b++) {
        size_t n = b ? r->n_failure : r->n_success;
        req_op **ops = b ? r->failure : r->success;
        for (size_t i = 0; i < n; i++) {
            if (ops[i]->request_case !=
                ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
                return 0;
        }
    }
    return 1;
}
