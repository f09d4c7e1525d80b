/*
 * kv_range.h - Range semantics shared by the read path and the apply loop
 * (Range requests, Range ops inside a Txn): etcd's limit/sort/filter/count
 * rules on top of an mvcc range result.
 */
#ifndef CETCD_SERVER_KV_RANGE_H
#define CETCD_SERVER_KV_RANGE_H

#include "etcdserverpb/rpc.pb-c.h"
#include "mvcc/mvcc.h"
#include "server/arena.h"

/* The mvcc limit and flags to fetch for req (sorting and filters fetch
 * everything; otherwise one more than the limit, to know `more`). */
int64_t kv_range_fetch_limit(const Etcdserverpb__RangeRequest *req);
unsigned kv_range_fetch_flags(const Etcdserverpb__RangeRequest *req);

/* kv_range_end maps etcd's ">= key" end ("\0") for mvcc, which already
 * understands it; kept as the one place that knows the rule. */

/*
 * kv_range_build filters, sorts and truncates res->kvs in place (it owns
 * that array) and builds the response in arena a: kvs point at the same
 * bytes as res (borrowed), header has only `revision` = res->rev.
 * Returns NULL on allocation failure.
 */
Etcdserverpb__RangeResponse *kv_range_build(const Etcdserverpb__RangeRequest *req,
                                            struct mvcc_range_result *res,
                                            struct arena *a);

/* kv_to_pb fills a KeyValue message from an mvcc kv (borrowing bytes). */
void kv_to_pb(const struct mvcc_kv *kv, Mvccpb__KeyValue *out);

#endif
