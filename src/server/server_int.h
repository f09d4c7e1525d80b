/*
 * server_int.h - the member's state, shared by the server's files.
 */
#ifndef CETCD_SERVER_INT_H
#define CETCD_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/arena.h"
#include "server/queue.h"
#include "server/server.h"
#include "server/wait.h"

struct wal;
struct backend;
struct mvcc_store;

/* Bound on proposals queued but not yet in the WAL (then ERR_TOO_MANY_REQUESTS,
 * as etcd's committed - applied > 5000 rule). */
#define SERVER_PROPOSALS_MAX 5000

struct server {
    struct server_config cfg;   /* copy of the config (strings borrowed) */
    char member_dir[4096];      /* <data-dir>/member */
    uint64_t member_id;         /* from peer URLs + cluster token */
    uint64_t cluster_id;        /* from the member ids */
    _Atomic uint64_t term;      /* raft term (bumped at each start) */

    struct wal *wal;            /* owned by the log thread after start */
    struct backend *be;         /* LMDB environment */
    struct mvcc_store *mvcc;    /* the multi-version store */

    struct server_queue proposals; /* API threads -> log thread */
    struct server_queue committed; /* log thread -> apply thread */
    struct server_wait wait;       /* request id -> waiter */
    _Atomic uint64_t next_id;      /* request ids */

    pthread_t log_thread;       /* WAL appends + group fdatasync */
    pthread_t apply_thread;     /* LMDB apply loop */
    pthread_mutex_t apply_mu;   /* held by whoever applies (see apply.c) */
    pthread_t house_thread;     /* periodic chores (RSS trim) */
    pthread_mutex_t house_mu;   /* with house_cv: wakes it at stop */
    pthread_cond_t house_cv;
    bool threads_started;       /* both threads running */
    bool house_started;         /* house_thread running */

    uint64_t last_index;        /* log thread: last index written */
    _Atomic uint64_t committed_index; /* durable in the WAL */
    _Atomic uint64_t applied_index;   /* applied to LMDB (committed txn) */
    pthread_mutex_t applied_mu;       /* with applied_cv: readers wait */
    pthread_cond_t applied_cv;        /* broadcast after each apply batch */
    _Atomic bool stopping;            /* server_stop has begun */
    int fatal;                        /* log/apply thread hit an I/O error */

    bool compacted_at_zero;     /* apply thread: see do_compact */
    struct arena apply_arena;   /* apply thread: responses of one batch */

    _Atomic uint64_t stat_proposals;     /* see server_stats */
    _Atomic uint64_t stat_wal_syncs;
    _Atomic uint64_t stat_apply_batches;
};

/* log.c */
void *server__log_main(void *arg);
/* apply.c */
void *server__apply_main(void *arg);
/* apply_kv.c: apply one decoded request inside the open mvcc batch;
 * returns 0 and the response in *msg_out (arena memory), or an ERR_*. */
/* apply.c: applies a chain of n committed entries in one batch. */
int server__apply_entries(struct server *s, struct server_entry *head,
                          size_t n, bool wake_waiters);
/* apply.c: hand a durable batch over for applying: applied at once by the
 * calling (log) thread when nothing else is pending, else queued. */
void server__apply_handoff(struct server *s, struct server_entry *head,
                           struct server_entry *tail, size_t n);
struct mvcc_batch;
int server__apply_request(struct server *s, struct mvcc_batch *b,
                          const Cetcdpb__InternalRequest *req,
                          struct arena *a, ProtobufCMessage **msg_out);

#endif
