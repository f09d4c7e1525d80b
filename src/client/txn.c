/*
 * txn.c - cetcd_txn(): builds a TxnRequest from the public compares and ops
 * (borrowing the caller's bytes), calls KV/Txn, and exposes the per-op
 * results through struct cetcd_op_result, pointing into the reply.
 */
#include <string.h>

#include "client/client_int.h"
#include "util/mem.h"

#define KV_TXN "/etcdserverpb.KV/Txn"
#define TXN_OPS_MAX 10000 /* far above any server's --max-txn-ops */

/* One op of the request and the sub-request it points at. */
struct op_slot {
    Etcdserverpb__RequestOp op; /* the oneof wrapper */
    union {
        Etcdserverpb__RangeRequest range;
        Etcdserverpb__PutRequest put;
        Etcdserverpb__DeleteRangeRequest del;
    } u; /* the request the wrapper points at */
};

/* Everything a TxnRequest borrows, in one allocation. */
struct txn_req {
    Etcdserverpb__TxnRequest req;  /* the message */
    Etcdserverpb__Compare *cmps;   /* n_compare compares */
    Etcdserverpb__Compare **cmpp;  /* pointers to them */
    struct op_slot *slots;         /* success ops, then failure ops */
    Etcdserverpb__RequestOp **opp; /* pointers to the slots' ops */
};

static ProtobufCBinaryData bin(const void *p, size_t len)
{
    ProtobufCBinaryData b = {len, (uint8_t *)p};
    return b;
}

static void cmp_fill(Etcdserverpb__Compare *m, const struct cetcd_compare *c)
{
    etcdserverpb__compare__init(m);
    m->result = (Etcdserverpb__Compare__CompareResult)c->result;
    m->target = (Etcdserverpb__Compare__CompareTarget)c->target;
    m->key = bin(c->key, c->key_len);
    m->range_end = bin(c->range_end, c->range_end_len);
    switch (c->target) {
    case CETCD_CMP_VERSION:
        m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
        m->version = c->number;
        break;
    case CETCD_CMP_CREATE:
        m->target_union_case =
            ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
        m->create_revision = c->number;
        break;
    case CETCD_CMP_MOD:
        m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        m->mod_revision = c->number;
        break;
    case CETCD_CMP_VALUE:
        m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
        m->value = bin(c->value, c->value_len);
        break;
    default:
        m->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
        m->lease = c->number;
        break;
    }
}

static void op_fill(struct op_slot *s, const struct cetcd_op *o)
{
    etcdserverpb__request_op__init(&s->op);
    switch (o->type) {
    case CETCD_OP_PUT:
        client__put_req_fill(&s->u.put, o->key, o->key_len, o->value,
                             o->value_len, &o->put);
        s->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        s->op.request_put = &s->u.put;
        break;
    case CETCD_OP_DELETE:
        client__delete_req_fill(&s->u.del, o->key, o->key_len, &o->delete);
        s->op.request_case =
            ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        s->op.request_delete_range = &s->u.del;
        break;
    default:
        client__range_req_fill(&s->u.range, o->key, o->key_len, &o->range);
        s->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
        s->op.request_range = &s->u.range;
        break;
    }
}

static int txn_req_build(struct txn_req *t, const struct cetcd_compare *cmps,
                         size_t nc, const struct cetcd_op *succ, size_t ns,
                         const struct cetcd_op *fail, size_t nf)
{
    size_t no = ns + nf;

    memset(t, 0, sizeof(*t));
    etcdserverpb__txn_request__init(&t->req);
    t->cmps = mem_calloc(nc + 1, sizeof(*t->cmps));
    t->cmpp = mem_calloc(nc + 1, sizeof(*t->cmpp));
    t->slots = mem_calloc(no + 1, sizeof(*t->slots));
    t->opp = mem_calloc(no + 1, sizeof(*t->opp));
    if (!t->cmps || !t->cmpp || !t->slots || !t->opp)
        return CETCD_RESOURCE_EXHAUSTED;
    for (size_t i = 0; i < nc; i++) {
        cmp_fill(&t->cmps[i], &cmps[i]);
        t->cmpp[i] = &t->cmps[i];
    }
    for (size_t i = 0; i < no; i++) {
        op_fill(&t->slots[i], i < ns ? &succ[i] : &fail[i - ns]);
        t->opp[i] = &t->slots[i].op;
    }
    t->req.n_compare = nc;
    t->req.compare = t->cmpp;
    t->req.n_success = ns;
    t->req.success = t->opp;
    t->req.n_failure = nf;
    t->req.failure = t->opp + ns;
    return 0;
}

static void txn_req_free(struct txn_req *t)
{
    mem_free(t->cmps);
    mem_free(t->cmpp);
    mem_free(t->slots);
    mem_free(t->opp);
}

static int op_result_fill(struct cetcd_op_result *r,
                          const Etcdserverpb__ResponseOp *m)
{
    memset(r, 0, sizeof(*r));
    switch (m->response_case) {
    case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE:
        r->type = CETCD_OP_RANGE;
        return client__range_fill(&r->range, m->response_range);
    case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT:
        r->type = CETCD_OP_PUT;
        return client__put_fill(&r->put, m->response_put);
    case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE:
        r->type = CETCD_OP_DELETE;
        return client__delete_fill(&r->delete, m->response_delete_range);
    default:
        r->type = CETCD_OP_TXN; /* nested txn: not exposed */
        return 0;
    }
}

/* responses_clear frees the op results of r (not the reply). */
static void responses_clear(struct cetcd_txn_result *r)
{
    for (size_t i = 0; i < r->responses_len; i++) {
        client__range_clear(&r->responses[i].range);
        client__put_clear(&r->responses[i].put);
        client__delete_clear(&r->responses[i].delete);
    }
    mem_free(r->responses);
    r->responses = NULL;
    r->responses_len = 0;
}

/* txn_fill is the txn call's fill (struct client__typed). */
static int txn_fill(void *p, const ProtobufCMessage *resp)
{
    const Etcdserverpb__TxnResponse *m = (Etcdserverpb__TxnResponse *)resp;
    struct cetcd_txn_result *r = p;
    int rc = 0;

    client__header_copy(&r->header, m->header);
    r->succeeded = m->succeeded;
    if (m->n_responses > 0)
        r->responses = mem_calloc(m->n_responses, sizeof(*r->responses));
    if (m->n_responses > 0 && r->responses == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    for (size_t i = 0; rc == 0 && i < m->n_responses; i++) {
        r->responses_len = i + 1;
        rc = op_result_fill(&r->responses[i], m->responses[i]);
    }
    if (rc != 0)
        responses_clear(r);
    return rc;
}

int cetcd_txn(struct cetcd_client *c, const struct cetcd_compare *cmps,
              size_t cmps_len, const struct cetcd_op *success_ops,
              size_t success_len, const struct cetcd_op *failure_ops,
              size_t failure_len, struct cetcd_txn_result **result_out,
              struct cetcd_status *st)
{
    static const struct client__typed txn = {
        KV_TXN, &etcdserverpb__txn_response__descriptor,
        sizeof(struct cetcd_txn_result),
        offsetof(struct cetcd_txn_result, internal_), txn_fill};
    struct txn_req t;
    void *r = NULL;
    int rc;

    if (result_out != NULL)
        *result_out = NULL;
    if ((cmps_len && !cmps) || (success_len && !success_ops) ||
        (failure_len && !failure_ops) ||
        cmps_len + success_len + failure_len > TXN_OPS_MAX)
        return client__status_set(st, CETCD_INVALID_ARGUMENT, "bad txn");
    rc = txn_req_build(&t, cmps, cmps_len, success_ops, success_len,
                       failure_ops, failure_len);
    if (rc == 0)
        rc = client__call_typed(c, &txn, &t.req.base,
                                result_out != NULL ? &r : NULL, st);
    else
        client__status_set(st, rc, "no memory");
    txn_req_free(&t);
    if (result_out != NULL)
        *result_out = r;
    return rc;
}

void cetcd_txn_result_free(struct cetcd_txn_result *r)
{
    if (r == NULL)
        return;
    responses_clear(r);
    client__result_free(r, r->internal_);
}
