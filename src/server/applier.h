/*
 * applier.h - the apply step as a chain of appliers (etcd 3.4's applierV3
 * and its wrappers in etcdserver/apply.go, apply_auth.go, corrupt.go are
 * the reference for what each does; this is our own code).
 *
 * One committed request is applied by server__apply_request (declared in
 * server_int.h): it finds the request's kind (its slot, enum applier_slot)
 * and hands it to the front of the member's active chain.  Each applier
 * has one handler per slot (struct applier_ops); a NULL handler means "not
 * mine": the request goes on to the applier behind it.  A handler that
 * answers may still ask the one behind it (server__applier_next) and
 * change its answer, as the quota applier does.
 *
 * The chain, front to back:
 *
 *   [corrupt]  while a CORRUPT alarm is active (applier_alarm.c): every
 *              KV and lease request is answered ERR_CLUSTER_CORRUPT and
 *              changes nothing, as etcd's applierV3Corrupt.  Alarms and
 *              membership pass, so that `etcdctl alarm disarm` works, and
 *              so do read-only txns (only Ranges in either branch), which
 *              etcd serves beside the log and cetcd through it.
 *   [capped]   while a NOSPACE alarm is active (applier_alarm.c): a Put, a
 *              Txn with puts (cost above 0) and a LeaseGrant are answered
 *              ERR_NO_SPACE and change nothing, as etcd's applierV3Capped.
 *   auth       (auth_apply.c) checks Range, Put, DeleteRange, Txn and
 *              LeaseRevoke (and a put's lease: write on every key of the
 *              lease) as the user the request names (etcd's
 *              authApplierV3: "user name is empty", "revision of auth
 *              store is old", "permission denied") and applies the auth
 *              requests (admin checks, the auth store, its bucket).
 *   quota      (quota.c) a Put, Txn or LeaseGrant that finds the store at
 *              its quota is applied all the same and answered
 *              ERR_NO_SPACE.
 *   store      (apply_kv.c) the mvcc one: answers every slot (leases
 *              through lease.c).  Requests this build does not serve
 *              (auth, an unknown kind) get ERR_UNSUPPORTED.
 *
 * The bracketed ones are in front only while their alarm is: the chain is
 * relinked from the alarm list by alarm.c, at each store open (start-up,
 * snapshot install: the stored alarms) and after every AlarmRequest it
 * applies or batch it reloads (server__appliers_link).  With both alarms
 * active the chain is corrupt -> capped -> auth -> quota -> store, and a
 * disarm of one keeps the other in front: etcd 3.4 builds that chain at
 * start-up (restoreAlarms) but at run time replaces its chain on every
 * first raise or last disarm, forgetting the other alarm; we always build
 * the start-up form.
 *
 * Threads: the chain is read and relinked only by the apply side, which is
 * whoever holds apply_mu (cetcd-apply, the raft-pass holder applying
 * inline, a snapshot install) or the start-up before the threads run.
 * apply_mu is the only lock: no applier takes another.  The appliers live
 * in struct server (server_appliers) and their ops tables are static
 * const, so applying allocates nothing.
 *
 * Lifetime: a call's request, arena and batch are borrowed for the call.
 * A response goes into the arena and stays valid until the apply batch's
 * arena is reset (apply.c, after its waiters are woken).
 */
#ifndef CETCD_SERVER_APPLIER_H
#define CETCD_SERVER_APPLIER_H

#include <stdbool.h>
#include <stddef.h>

#include "cetcdpb/internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"

struct server;
struct mvcc_batch;
struct arena;

/* The kinds of request an applier handles: one handler slot each. */
enum applier_slot {
    APPLIER_NONE = 0,     /* no request, or a kind this build does not know */
    APPLIER_RANGE,        /* a Range through the log */
    APPLIER_PUT,
    APPLIER_DELETE_RANGE,
    APPLIER_TXN,
    APPLIER_COMPACTION,
    APPLIER_LEASE_GRANT,  /* leases (lease.c) */
    APPLIER_LEASE_REVOKE,
    APPLIER_LEASE_CHECKPOINT, /* the leader's remaining TTLs (lease.h) */
    APPLIER_ALARM,        /* AlarmRequest (alarm.c) */
    APPLIER_MEMBERS,      /* MemberAttr, MemberChange (members.c) */
    /* etcd's auth requests (auth_apply.c) */
    APPLIER_AUTHENTICATE,
    APPLIER_AUTH_ENABLE,
    APPLIER_AUTH_DISABLE,
    APPLIER_USER_ADD,
    APPLIER_USER_DELETE,
    APPLIER_USER_CHANGE_PASSWORD,
    APPLIER_USER_GRANT_ROLE,
    APPLIER_USER_GET,
    APPLIER_USER_REVOKE_ROLE,
    APPLIER_USER_LIST,
    APPLIER_ROLE_ADD,
    APPLIER_ROLE_GRANT_PERMISSION,
    APPLIER_ROLE_GET,
    APPLIER_ROLE_REVOKE_PERMISSION,
    APPLIER_ROLE_DELETE,
    APPLIER_ROLE_LIST,
    APPLIER_SLOTS         /* the count */
};

/* One request being applied (on the applier's stack; nothing owned). */
struct applier_call {
    struct server *s;                    /* the member */
    struct mvcc_batch *b;                /* the open batch */
    const Cetcdpb__InternalRequest *req; /* the request (borrowed) */
    struct arena *a;                     /* where the response goes */
    ProtobufCMessage **msg_out;          /* the response (or left NULL) */
    enum applier_slot slot;              /* req's kind */
};

struct applier;

/* A handler: 0 and *c->msg_out, or an ERR_* (see server__apply_request).
 * self is the applier it belongs to (for server__applier_next). */
typedef int (*applier_fn)(const struct applier *self, struct applier_call *c);

/* An applier's handlers (static const in its file). */
struct applier_ops {
    const char *name;             /* "store", "quota", ... (logs, tests) */
    applier_fn fn[APPLIER_SLOTS]; /* by slot; NULL: the next one answers */
};

/* One link of the chain. */
struct applier {
    const struct applier_ops *ops; /* its handlers */
    const struct applier *next;    /* the one it wraps (NULL: the store) */
};

/* Part of struct server (server_int.h); the apply side's (see Threads). */
struct server_appliers {
    struct applier corrupt; /* in front while a CORRUPT alarm is active */
    struct applier capped;  /* in front while a NOSPACE alarm is active */
    struct applier auth;    /* permission checks, auth requests */
    struct applier quota;   /* the quota at apply time */
    struct applier store;   /* the mvcc applier, last */
    const struct applier *front; /* where a request enters (NULL: unlinked) */
};

/* The ops tables: store in apply_kv.c, quota in quota.c, auth in
 * auth_apply.c, capped and corrupt in applier_alarm.c. */
extern const struct applier_ops server__applier_store_ops;
extern const struct applier_ops server__applier_quota_ops;
extern const struct applier_ops server__applier_auth_ops;
extern const struct applier_ops server__applier_capped_ops;
extern const struct applier_ops server__applier_corrupt_ops;

/* server__appliers_link (apply side) relinks s's chain for the alarms that
 * are active: auth -> quota -> store, with capped in front while nospace,
 * and corrupt in front of that while corrupt. */
void server__appliers_link(struct server *s, bool nospace, bool corrupt);

/* server__applier_slot: the slot of req's kind (APPLIER_NONE for none). */
enum applier_slot server__applier_slot(const Cetcdpb__InternalRequest *req);

/* server__applier_next passes c on to the first applier behind self with
 * a handler for c->slot, and returns its answer.  The store has one for
 * every slot, so there always is one. */
int server__applier_next(const struct applier *self, struct applier_call *c);

/* Tests and logs (any thread but one holding apply_mu: takes it).
 * server__applier_answering: the name of the applier that answers slot now
 * (the first in the chain with a handler for it).  server__applier_chain:
 * the chain's names, front to back, into names_out[0..max); returns their
 * count. */
const char *server__applier_answering(struct server *s,
                                      enum applier_slot slot);
size_t server__applier_chain(struct server *s, const char **names_out,
                             size_t max);

#endif
