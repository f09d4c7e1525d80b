/*
 * kv_check.h - etcd's request validation before a KV request is proposed
 * (v3rpc/key.go behaviour): empty keys, ignore_* combinations, txn op
 * limits (with the nested budget), empty ops, and the duplicate-key rules
 * for puts and deletes inside one txn branch.  Pure functions.
 */
#ifndef CETCD_SVC_KV_CHECK_H
#define CETCD_SVC_KV_CHECK_H

#include <stdint.h>

#include "etcdserverpb/rpc.pb-c.h"

/* Each returns 0 or the ERR_* code etcd would answer with. */
int kv_check_range(const Etcdserverpb__RangeRequest *r);
int kv_check_put(const Etcdserverpb__PutRequest *r);
int kv_check_delete(const Etcdserverpb__DeleteRangeRequest *r);
/* kv_check_txn: op counts, keys and op shapes, then duplicate keys of the
 * success and failure branches.  ERR_NOMEM possible. */
int kv_check_txn(const Etcdserverpb__TxnRequest *r, int64_t max_txn_ops);
/* kv_txn_is_readonly: only ranges, at every level. */
int kv_txn_is_readonly(const Etcdserverpb__TxnRequest *r);

#endif
