/*
 * members.h - the members store shared by members.c (store, apply,
 * publish) and member_change.c (proposing changes, leader transfer).
 * Private to src/server.
 */
#ifndef CETCD_SERVER_MEMBERS_H
#define CETCD_SERVER_MEMBERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "server/server_int.h"

/* Removed member ids remembered (etcd keeps them all; a cluster sees few). */
#define SERVER_REMOVED_MAX 256

/* A job for the raft thread (membership change or leader transfer). */
struct server_ms_job {
    struct server_ms_job *next;  /* list link */
    int kind;                    /* SERVER_MS_JOB_* */
    int op;                      /* enum server_member_op (conf change) */
    uint64_t id;                 /* member concerned / transfer target */
    uint64_t req_id;             /* waiter of a conf change */
    uint64_t deadline_ms;        /* transfer, promotion: give up then */
    server_leader_fn fn;         /* transfer: answer */
    void *arg;
    struct server *s;            /* promotion: the member (callbacks) */
    bool from_peer;              /* promotion forwarded to us by a peer */
    uint64_t retry_ms;           /* promotion to forward: not before */
    int fwd_err;                 /* promotion to forward: the error at
                                    the deadline (no leader, timeout) */
    size_t len;                  /* conf change: bytes of data */
    uint8_t data[];              /* conf change: packed InternalRequest */
};

enum {
    SERVER_MS_JOB_CONF = 0,     /* propose a conf change */
    SERVER_MS_JOB_TRANSFER = 1, /* leader transfer */
};

/* Most membership jobs (changes, leader transfers, forwarded promotions)
 * alive at once; a new one past it is refused with ERR_TOO_MANY_REQUESTS
 * (etcd has no such queue: its API threads propose and wait themselves). */
#define SERVER_MS_JOBS_MAX 64

/* The membership state of a member. */
struct server_ms {
    pthread_mutex_t mu;          /* guards the table and removed list */
    struct server_member_info m[SERVER_MEMBERS_MAX]; /* sorted by id */
    size_t n;                    /* members */
    uint64_t removed[SERVER_REMOVED_MAX]; /* removed ids */
    size_t n_removed;
    backend_bucket b_members;    /* "members": id (8 BE) -> Member pb */
    backend_bucket b_removed;    /* "members_removed": id (8 BE) -> "" */
    struct server_ms_job *jobs;  /* under mu: queued for the raft thread */
    struct server_ms_job *transfers; /* raft thread: transfers waiting */
    _Atomic size_t n_jobs;       /* jobs admitted and not yet freed (queued,
                                  * waiting as transfers, being forwarded):
                                  * <= SERVER_MS_JOBS_MAX */
    uint64_t active_id[SERVER_MEMBERS_MAX];    /* raft thread: peers seen */
    uint64_t active_since[SERVER_MEMBERS_MAX]; /* connected since (ms) */
    struct server_ms_effect *staged; /* apply thread: effects of the
                                  * member requests of the batch being
                                  * applied (server__members_batch_end) */
    size_t n_staged, staged_cap;
    _Atomic bool removed_self;   /* this member was removed */
    _Atomic bool published;      /* our attributes are applied */
    _Atomic unsigned publishing; /* publish proposals in flight */
    _Atomic uint64_t publish_at; /* next publish attempt (ms) */
};

/* member_forward.c: raft thread, this member does not lead: send the
 * promotion j to the leader (or keep it until there is one); j is then
 * answered and freed by the forwarding code. */
void server__promote_forward(struct server *s, struct server_ms_job *j);
/* member_change.c: frees a job that was admitted (counted in n_jobs). */
void server__ms_job_free(struct server *s, struct server_ms_job *j);
/* member_change.c: queue j for the raft thread's next pass (any thread);
 * kick: wake the raft thread now (else it runs at the next tick). */
void server__ms_job_push(struct server *s, struct server_ms_job *j,
                         bool kick);
/* member_change.c: answer the waiter of request req_id with err and, on
 * success, msg (a forwarded promotion: the leader's PromoteResponse). */
void server__ms_job_answer(struct server *s, uint64_t req_id, int err,
                           const ProtobufCMessage *msg);

/* members.c */
struct server_member_info *server__ms_find(struct server_ms *ms, uint64_t id);
bool server__ms_is_removed(const struct server_ms *ms, uint64_t id);
/* True if the member has data: its WAL exists (then the --initial-*
 * flags are ignored, as etcd does).  Any thread; reads the WAL dir. */
bool server__member_has_wal(const struct server *s);
/* Splits a comma list into at most cap pointers into buf. */
size_t server__urls_split(char *buf, const char **out, size_t cap);

/* --- shared by members.c and members_files.c ----------------------- */
/* 8 bytes big-endian at d. */
void server__be64_put(uint8_t *d, uint64_t v);
uint64_t server__be64_get(const uint8_t *d);
/* members.c, ms->mu held: id's slot in the table, added (sorted) when
 * absent; NULL when the table is full. */
struct server_member_info *server__ms_slot(struct server_ms *ms,
                                           uint64_t id);
/* members.c: m := the Member pb (its fields copied, truncated to fit). */
void server__ms_info_from_pb(struct server_member_info *m,
                             const Etcdserverpb__Member *pb);
/* members.c: m as an etcdserverpb.Member into buf (cap bytes), its length
 * in *len_out.  Errors: ERR_TOO_LARGE (does not fit in cap). */
int server__ms_member_pack(const struct server_member_info *m,
                           uint8_t *buf, size_t cap, size_t *len_out);
/* members_files.c, start-up: <member>/ids written from s->member_id and
 * s->cluster_id, or read into meta (member id, cluster id, 8 bytes BE
 * each).  Read errors: ERR_NOTFOUND (no file), ERR_CORRUPT. */
int server__ms_ids_write(struct server *s);
int server__ms_ids_read(struct server *s, uint8_t meta[16]);
/* members_files.c, start-up: <member>/seed written from the table, or
 * the table seeded from it.  Load errors: ERR_NOTFOUND (no file),
 * ERR_CORRUPT, ERR_NOMEM. */
int server__ms_seed_save(struct server *s);
int server__ms_seed_load(struct server *s);

#endif
