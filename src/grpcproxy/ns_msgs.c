/*
 * ns_msgs.c - the --namespace rewrite of each message that carries keys
 * (ns.c is the driver and states the rules).  Requests get the prefix,
 * replies lose it:
 *   KV      Range, Put, DeleteRange (an empty key is refused, as
 *           clientv3/namespace's kvPrefix refuses it), Txn (compares and
 *           ops, nested txns too, with no empty-key check: etcd prefixes
 *           those as they are); replies: kvs, prev_kv(s), nested txns.
 *   Watch   a create request's key and range end; events' kv and prev_kv.
 *   Lease   TimeToLive's keys: those of the namespace stripped, others
 *           dropped (clientv3/namespace lease.go).
 *   Lock    Lock's name and reply key; Unlock's key.
 *   Election  names (Campaign, Leader, Observe, and the LeaderKey of
 *           Proclaim and Resign), LeaderKey keys, the leader's kv.
 * A lock or leader key that is empty stays empty: it is no key a lock or a
 * campaign handed out, and the upstream refuses it as it would without
 * --namespace (prefixed, it would name the key equal to the prefix).
 */
#include <grpc/status.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

/* rpctypes.ErrEmptyKey as it leaves etcd's proxy: an EtcdError has no
 * gRPC status, so grpc-go sends UNKNOWN with its text. */
static const char msg_empty_key[] = "etcdserver: key is not provided";

/* --- KV requests ---------------------------------------------------------- */

static void range_req(struct gp__ns *x, Etcdserverpb__RangeRequest *r)
{
    gp__ns_prefix(x, &r->key);
    gp__ns_prefix_end(x, &r->range_end);
}

static void put_req(struct gp__ns *x, Etcdserverpb__PutRequest *r)
{
    gp__ns_prefix(x, &r->key);
}

static void delete_req(struct gp__ns *x, Etcdserverpb__DeleteRangeRequest *r)
{
    gp__ns_prefix(x, &r->key);
    gp__ns_prefix_end(x, &r->range_end);
}

static void txn_req(struct gp__ns *x, Etcdserverpb__TxnRequest *t);

/* ops: a branch's ops (clientv3's prefixOps: no empty-key check). */
static void ops_req(struct gp__ns *x, Etcdserverpb__RequestOp **ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Etcdserverpb__RequestOp *op = ops[i];
        switch (op->request_case) {
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
            range_req(x, op->request_range);
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
            put_req(x, op->request_put);
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
            delete_req(x, op->request_delete_range);
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
            txn_req(x, op->request_txn); /* depth checked before decoding */
            break;
        default:
            break; /* an empty op: the upstream answers it */
        }
    }
}

/* txn_req: compares (key prefixed, range end as a range's) and ops. */
static void txn_req(struct gp__ns *x, Etcdserverpb__TxnRequest *t)
{
    for (size_t i = 0; i < t->n_compare; i++) {
        gp__ns_prefix(x, &t->compare[i]->key);
        gp__ns_prefix_end(x, &t->compare[i]->range_end);
    }
    ops_req(x, t->success, t->n_success);
    ops_req(x, t->failure, t->n_failure);
}

void gp__ns_range_req(struct gp__ns *x, ProtobufCMessage *m)
{
    Etcdserverpb__RangeRequest *r = (Etcdserverpb__RangeRequest *)m;
    if (r->key.len == 0)
        gp__ns_refuse(x, GRPC_STATUS_UNKNOWN, msg_empty_key);
    else
        range_req(x, r);
}

void gp__ns_put_req(struct gp__ns *x, ProtobufCMessage *m)
{
    Etcdserverpb__PutRequest *r = (Etcdserverpb__PutRequest *)m;
    if (r->key.len == 0)
        gp__ns_refuse(x, GRPC_STATUS_UNKNOWN, msg_empty_key);
    else
        put_req(x, r);
}

void gp__ns_delete_req(struct gp__ns *x, ProtobufCMessage *m)
{
    Etcdserverpb__DeleteRangeRequest *r = (Etcdserverpb__DeleteRangeRequest *)m;
    if (r->key.len == 0)
        gp__ns_refuse(x, GRPC_STATUS_UNKNOWN, msg_empty_key);
    else
        delete_req(x, r);
}

void gp__ns_txn_req(struct gp__ns *x, ProtobufCMessage *m)
{
    txn_req(x, (Etcdserverpb__TxnRequest *)m);
}

/* --- KV replies ------------------------------------------------------------
 */

static void range_resp(struct gp__ns *x, Etcdserverpb__RangeResponse *r)
{
    for (size_t i = 0; i < r->n_kvs; i++)
        gp__ns_strip_kv(x, r->kvs[i]);
}

static void delete_resp(struct gp__ns *x, Etcdserverpb__DeleteRangeResponse *r)
{
    for (size_t i = 0; i < r->n_prev_kvs; i++)
        gp__ns_strip_kv(x, r->prev_kvs[i]);
}

static void txn_resp(struct gp__ns *x, Etcdserverpb__TxnResponse *t)
{
    for (size_t i = 0; i < t->n_responses; i++) {
        Etcdserverpb__ResponseOp *ro = t->responses[i];
        switch (ro->response_case) {
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE:
            range_resp(x, ro->response_range);
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT:
            gp__ns_strip_kv(x, ro->response_put->prev_kv);
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE:
            delete_resp(x, ro->response_delete_range);
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN:
            txn_resp(x, ro->response_txn); /* depth checked */
            break;
        default:
            break;
        }
    }
}

void gp__ns_range_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    range_resp(x, (Etcdserverpb__RangeResponse *)m);
}

void gp__ns_put_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    gp__ns_strip_kv(x, ((Etcdserverpb__PutResponse *)m)->prev_kv);
}

void gp__ns_delete_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    delete_resp(x, (Etcdserverpb__DeleteRangeResponse *)m);
}

void gp__ns_txn_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    txn_resp(x, (Etcdserverpb__TxnResponse *)m);
}

/* --- Watch, Lease ----------------------------------------------------------
 */

/* A create request's range as clientv3/namespace's watcher prefixes it
 * (no empty-key check); cancel and progress requests carry no key. */
void gp__ns_watch_req(struct gp__ns *x, ProtobufCMessage *m)
{
    Etcdserverpb__WatchRequest *r = (Etcdserverpb__WatchRequest *)m;
    if (r->request_union_case !=
        ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST)
        return;
    gp__ns_prefix(x, &r->create_request->key);
    gp__ns_prefix_end(x, &r->create_request->range_end);
}

void gp__ns_watch_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    Etcdserverpb__WatchResponse *r = (Etcdserverpb__WatchResponse *)m;
    for (size_t i = 0; i < r->n_events; i++) {
        gp__ns_strip_kv(x, r->events[i]->kv);
        gp__ns_strip_kv(x, r->events[i]->prev_kv);
    }
}

/* TimeToLive's keys (keys=true): the namespace's lose the prefix, the
 * others are dropped, in order. */
void gp__ns_ttl_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    Etcdserverpb__LeaseTimeToLiveResponse *r =
        (Etcdserverpb__LeaseTimeToLiveResponse *)m;
    size_t kept = 0;
    for (size_t i = 0; i < r->n_keys; i++) {
        if (gp__ns_strip(x, &r->keys[i])) {
            r->keys[kept++] = r->keys[i];
        } else {
            free(r->keys[i].data); /* protobuf-c's, by its allocator */
            x->changed = true;
        }
    }
    r->n_keys = kept;
}

/* --- Lock, Election --------------------------------------------------------
 */

/* lock_key: a key a lock or a campaign handed out (empty stays empty). */
static void lock_key(struct gp__ns *x, ProtobufCBinaryData *key)
{
    if (key->len > 0)
        gp__ns_prefix(x, key);
}

void gp__ns_lock_req(struct gp__ns *x, ProtobufCMessage *m)
{
    gp__ns_prefix(x, &((V3lockpb__LockRequest *)m)->name);
}

void gp__ns_lock_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    gp__ns_strip(x, &((V3lockpb__LockResponse *)m)->key);
}

void gp__ns_unlock_req(struct gp__ns *x, ProtobufCMessage *m)
{
    lock_key(x, &((V3lockpb__UnlockRequest *)m)->key);
}

void gp__ns_campaign_req(struct gp__ns *x, ProtobufCMessage *m)
{
    gp__ns_prefix(x, &((V3electionpb__CampaignRequest *)m)->name);
}

void gp__ns_campaign_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    V3electionpb__LeaderKey *l = ((V3electionpb__CampaignResponse *)m)->leader;
    if (l == NULL)
        return;
    gp__ns_strip(x, &l->name);
    gp__ns_strip(x, &l->key);
}

/* leader_key: a LeaderKey sent back by the client (Proclaim, Resign). */
static void leader_key(struct gp__ns *x, V3electionpb__LeaderKey *l)
{
    if (l == NULL)
        return; /* the upstream refuses it: "leader" field must be given */
    gp__ns_prefix(x, &l->name);
    lock_key(x, &l->key);
}

void gp__ns_proclaim_req(struct gp__ns *x, ProtobufCMessage *m)
{
    leader_key(x, ((V3electionpb__ProclaimRequest *)m)->leader);
}

void gp__ns_resign_req(struct gp__ns *x, ProtobufCMessage *m)
{
    leader_key(x, ((V3electionpb__ResignRequest *)m)->leader);
}

/* Leader and Observe: the election's name; the leader's kv back. */
void gp__ns_leader_req(struct gp__ns *x, ProtobufCMessage *m)
{
    gp__ns_prefix(x, &((V3electionpb__LeaderRequest *)m)->name);
}

void gp__ns_leader_resp(struct gp__ns *x, ProtobufCMessage *m)
{
    gp__ns_strip_kv(x, ((V3electionpb__LeaderResponse *)m)->kv);
}
