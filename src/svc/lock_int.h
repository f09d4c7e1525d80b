/* lock_int.h - what the Lock and Election files share (lock_wait.c,
 * lock_ops.c, lock.c, election.c, observe.c). */
#ifndef CETCD_SVC_LOCK_INT_H
#define CETCD_SVC_LOCK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc/svc.h"

/* The header fields of a response, copied out of a borrowed reply. */
struct lock_hdr {
    uint64_t cluster_id, member_id, raft_term; /* as the reply's */
    int64_t revision;                          /* as the reply's */
};
void lock__hdr_copy(struct lock_hdr *out, const Etcdserverpb__ResponseHeader *h);
/* lock__hdr_pb points pb (initialised here) at the copy's values. */
void lock__hdr_pb(const struct lock_hdr *h, Etcdserverpb__ResponseHeader *pb);

/* lock__key_make: name + "/" + the lease in lower-case hex as Go's %x of
 * an int64 ("-" first when negative), into a mem_malloc'd buffer
 * (*key_out, length *len_out).  Errors: ERR_NOMEM. */
int lock__key_make(const uint8_t *name, size_t name_len, int64_t lease,
                   uint8_t **key_out, size_t *len_out);

/* lock__range starts a linearizable Range of [key, end) (end_len 0: the
 * key alone) sorted by create revision (order: etcd's SortOrder), with
 * limit and max_create_revision (0: none), through svc_kv_range: done
 * gets an Etcdserverpb__RangeResponse. */
void lock__range(struct server *s, const uint8_t *key, size_t key_len,
                 const uint8_t *end, size_t end_len, int order,
                 int64_t limit, int64_t max_create_rev,
                 struct svc_done done);

/* lock__txn_if_created runs Txn(If create_revision(key) == rev Then
 * then_op Else else_op) through svc_kv_txn; an op NULL is absent.  done
 * gets an Etcdserverpb__TxnResponse. */
void lock__txn_if_created(struct server *s, const uint8_t *key,
                          size_t key_len, int64_t rev,
                          Etcdserverpb__RequestOp *then_ops[], size_t n_then,
                          Etcdserverpb__RequestOp *else_ops[], size_t n_else,
                          struct svc_done done);

/* lock__delete_if_created: delete key if its create revision is rev, and
 * forget the answer (a waiter that went away cleans up after itself, as
 * concurrency's Mutex.Unlock / Election.Resign do). */
void lock__delete_if_created(struct server *s, const uint8_t *key,
                             size_t key_len, int64_t rev, void *md_ctx,
                             const char *(*md)(void *ctx, const char *key,
                                               size_t *len));
/* (md, md_ctx: the waiter's metadata, read during the call only: the
 * delete runs as its user; NULL: none.) */

/* The caller's identity of a Lock, Campaign or Observe stream, copied at
 * its open: its KV steps run later, on cetcd-task and read workers, and
 * run as that caller (etcd's v3lock / v3election servers use the
 * stream's context, its token or its client certificate's CN). */
struct lock_ident {
    char *token;      /* the "token" (or "authorization") value, or NULL */
    size_t token_len;
    char *cn;         /* SVC_META_PEER_CN's value, or NULL: none */
    size_t cn_len;
};

/* lock__ident_copy fills id (zeroed by the caller) from st's metadata.
 * A token past 4096 bytes is dropped (no token of ours is that long).
 * Errors: ERR_NOMEM. */
int lock__ident_copy(struct lock_ident *id, const struct svc_stream *st);

/* lock__ident_free frees the copies (id may be zeroed or filled). */
void lock__ident_free(struct lock_ident *id);

/* lock__ident_metadata answers the services' metadata questions (svc.h
 * struct svc_done) from id: "token" and SVC_META_PEER_CN; NULL for any
 * other key. */
const char *lock__ident_metadata(const struct lock_ident *id, const char *key,
                                 size_t *len);

/* lock__waiters_take reserves one of SVC_LOCK_WAITERS_MAX waiter slots
 * (false: all taken); lock__waiters_put gives it back. */
bool lock__waiters_take(void);
void lock__waiters_put(void);

#endif
