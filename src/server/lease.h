/*
 * lease.h - the member's leases (etcd 3.4's lessor, lease/lessor.go, is
 * the reference for what happens; this is our own code).
 *
 * A lease is (id, granted TTL, checkpointed remaining TTL).  Every member
 * holds the same table: LeaseGrant, LeaseRevoke and LeaseCheckpoint are
 * raft entries applied by every member into the store's "lease" bucket and
 * the in-memory table, in the apply batch's LMDB txn (so the leases are in
 * every store snapshot and survive a restart; each store open reads them
 * again).  Keys attach to a lease through mvcc (the `lkey` bucket); a
 * revoke deletes them in one revision (mvcc_txn_delete_lease).
 *
 * Time is the leader's alone (the "primary" lessor).  Only the leader
 * gives leases an expiry (server clock, server__clock_ms); on a follower
 * a lease never expires.  When this member becomes leader (each new
 * leadership epoch, s->lead_epoch) it is promoted at the first lessor
 * tick or keep-alive once it has applied its term's first entry
 * (s->lead_index): a lease with a record (a checkpoint) expires its
 * remaining TTL from the time this member applied the record, or read it
 * (start-up, snapshot, reload): its anchor, rec_ms; one with none, its
 * granted TTL from then.  Renewals (LeaseKeepAlive)
 * are local to the leader and not logged, like etcd; the leader then
 * proposes LeaseRevoke for expired leases, at most SERVER_LEASE_REVOKE_RATE
 * a second (a proposal that fails is retried after
 * SERVER_LEASE_RETRY_MS), and checkpoints each lease's remaining TTL on
 * its own cadence: a lease is due once its checkpoint period
 * (server__lease_cp_period_ms: half its TTL, at least
 * SERVER_LEASE_CHECKPOINT_MIN_MS, at most the checkpoint interval,
 * --experimental-lease-checkpoint-interval, default 5 min) has passed
 * since its grant, renewal or last checkpoint here.  A new leader records
 * at once the leases it started with no record, and never those it
 * started from a record it applied (inherited: an anchored record does
 * not age); those it started from a record only read, P later.  A lease
 * renewed more often than every half TTL (etcd's clients renew every
 * third) so costs no checkpoint; one left alone gets one about every
 * half TTL.  The due leases go SERVER_LEASE_CHECKPOINT_BATCH per entry,
 * at most SERVER_LEASE_CHECKPOINT_RATE a second, round robin over the
 * table.
 *
 * The bound (docs/ARCHITECTURE.md "Leases" derives it): a lease not kept
 * alive expires no earlier than its TTL after its last acknowledged
 * keep-alive, and no later than TTL + P + e + 2 s (2 lessor ticks and
 * the rounding up of a record) + 3 apply lags (+ the revoking tick) after
 * it, for any number of leader changes, where P is its checkpoint
 * period and e the first election after the keep-alive; given the checkpoint rate, every later leader
 * having applied the lease's last record when it committed (a member
 * that restarted or lagged since anchors it later: the lease lives
 * longer, never shorter), and the first new leader living until its
 * promotion records commit.  Monotonic clocks are assumed to run at the
 * same rate.  For the lower bound, a renewal of a lease with a checkpoint
 * on record, or one proposed and not applied yet (cp_sent), is
 * acknowledged only once a checkpoint clearing that record (and its
 * anchor) is applied (etcd proposes the same one without waiting), and a
 * new leader is promoted only after applying it.
 *
 * Threads and locks.  leases.mu is a leaf (server.h "Lock order"): the
 * apply side (apply_mu holder) changes the table under it; API threads
 * (renew, time-to-live, list) and the house thread (the lessor tick) read
 * and set expiries under it.  Nobody proposes while holding it: the tick
 * copies what to propose, unlocks, then proposes.
 *
 * On disk: bucket "lease", one entry per lease.  Key: the id, 8 bytes,
 * big-endian.  Value: 16 bytes, the granted TTL then the remaining TTL
 * (0: none), each i64 little-endian, in seconds.  Any other length, id 0,
 * a TTL < 1 or a TTL or remaining TTL above SERVER_LEASE_TTL_MAX is
 * ERR_CORRUPT (server__lease_decode).
 */
#ifndef CETCD_SERVER_LEASE_H
#define CETCD_SERVER_LEASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "etcdserverpb/rpc.pb-c.h"

/* Most leases held (a grant past it is ERR_TOO_MANY_REQUESTS, decided at
 * apply time, so every member agrees).  etcd has no bound. */
#define SERVER_LEASES_MAX (1u << 20)
#define SERVER_LEASE_TTL_MAX 9000000000LL    /* etcd's MaxLeaseTTL, s */
#define SERVER_LEASE_REVOKE_RATE 1000        /* revokes proposed a second */
#define SERVER_LEASE_RETRY_MS 3000           /* a revoke not applied: again */
#define SERVER_LEASE_CHECKPOINT_BATCH 1000   /* checkpoints per entry */
#define SERVER_LEASE_CHECKPOINT_RATE 1000    /* checkpoints a second */
#define SERVER_LEASE_TICK_MS 500             /* the lessor tick */
#define SERVER_LEASE_CHECKPOINT_MS (5u * 60u * 1000u) /* default interval */
#define SERVER_LEASE_CHECKPOINT_MIN_MS 1000u /* shortest period (unless the
                                              * interval is shorter) */
#define SERVER_LEASE_KEY_BYTES 8
#define SERVER_LEASE_VAL_BYTES 16

/* One lease (under leases.mu). */
struct server_lease {
    int64_t id;                /* not 0 (a client may choose < 0) */
    int64_t ttl;               /* granted TTL, s (>= the minimum TTL) */
    int64_t remaining;         /* checkpointed remaining TTL, s (0: none) */
    uint64_t rec_ms;           /* the record's anchor: when this member
                                * applied its entry (server__clock_ms), or
                                * read the table holding it (start-up,
                                * snapshot, reload); 0: no record */
    bool rec_live;             /* rec_ms is an apply time, not a read */
    uint64_t expiry_ms;        /* primary: expires then; 0: never */
    uint64_t retry_ms;         /* primary: revoke proposed, not again
                                * before this */
    uint64_t cp_ms;            /* primary: when what a next leader would
                                * start it from (its record, else its TTL)
                                * was last true here: grant, renewal,
                                * checkpoint taken or promotion */
    bool inherited;            /* primary: started from a record applied
                                * here (rec_live), which every member
                                * that applied it too starts from alike:
                                * no record is taken of it until renewed */
    bool cp_sent;              /* a checkpoint of it proposed here and not
                                * applied yet */
    uint32_t clears;           /* renewals proposed here waiting for their
                                * cleared record (none is taken for a
                                * checkpoint meanwhile) */
    struct server_lease *next; /* hash chain */
};

/* Part of struct server (server_int.h). */
struct server_leases {
    backend_bucket bucket;       /* the "lease" bucket */
    pthread_mutex_t mu;          /* leaf lock: everything below */
    bool inited;                 /* mu initialised */
    struct server_lease **tab;   /* hash table (power of two) */
    size_t cap;                  /* slots in tab */
    size_t n;                    /* leases held */
    uint64_t epoch;              /* primary for this lead epoch (0: not) */
    uint64_t tick_next_ms;       /* the next lessor tick */
    size_t cp_slot;              /* primary: where the next look for due
                                  * checkpoints starts (round robin) */
    uint64_t wake_ms;            /* primary: no lease expires, is retried
                                  * or falls due before this (a lower
                                  * bound; 0: look at the next tick) */
    _Atomic uint64_t looks;      /* ticks that looked at every lease (for
                                  * tests and measurements) */
    _Atomic bool cp_failed;      /* a checkpoint entry failed: every lease
                                  * is due again (any thread) */
    _Atomic uint64_t cp_total;   /* checkpoints proposed by the cadence
                                  * (leases, not entries; for tests and
                                  * measurements) */
    /* Forwards to the leader waiting to try again (lease_forward.c). */
    pthread_mutex_t fwd_mu;      /* leaf lock: the list below */
    struct server_lease_fwd *fwd_head, *fwd_tail;
    size_t fwd_n;
    bool fwd_closed;             /* stopping: no more waiting */
    _Atomic bool fwd_waiting;    /* fwd_n > 0 (read without fwd_mu) */
};

/* The bucket codec (exposed for the fuzzer).  decode: 0 or ERR_CORRUPT,
 * never asserts on its input. */
void server__lease_encode(const struct server_lease *l,
                          uint8_t key[SERVER_LEASE_KEY_BYTES],
                          uint8_t val[SERVER_LEASE_VAL_BYTES]);
int server__lease_decode(const void *key, size_t key_len, const void *val,
                         size_t val_len, struct server_lease *out);

struct server;
struct mvcc_batch;
struct arena;

/* server__leases_load opens the bucket on s->be and reads the table (each
 * store open: start, snapshot install; the lessor is then not primary
 * until promoted again).  Errors: the backend's, ERR_CORRUPT, ERR_NOMEM. */
int server__leases_load(struct server *s);
/* server__leases_rebind opens the bucket on a new s->be whose leases are
 * the ones in memory (a defragmented copy of the store): the table, its
 * expiries and the primary's epoch stay as they are. */
int server__leases_rebind(struct server *s);
/* server__leases_reload reads the table again (an aborted batch). */
void server__leases_reload(struct server *s);
/* server__leases_close frees the table (server_stop). */
void server__leases_close(struct server *s);

/* The appliers (apply side, inside batch b): *msg_out a response in a.
 * Grant errors: ERR_LEASE_NOT_FOUND (id 0), ERR_LEASE_TTL_TOO_LARGE,
 * ERR_LEASE_EXIST, ERR_TOO_MANY_REQUESTS (SERVER_LEASES_MAX).  Revoke:
 * ERR_LEASE_NOT_FOUND.  Checkpoint: none of its own (unknown ids are
 * skipped).  All: ERR_NOMEM and the storage errors (which poison b). */
int server__lease_grant_apply(struct server *s, struct mvcc_batch *b,
                              const Etcdserverpb__LeaseGrantRequest *r,
                              struct arena *a, ProtobufCMessage **msg_out);
int server__lease_revoke_apply(struct server *s, struct mvcc_batch *b,
                               const Etcdserverpb__LeaseRevokeRequest *r,
                               struct arena *a, ProtobufCMessage **msg_out);
int server__lease_checkpoint_apply(
    struct server *s, struct mvcc_batch *b,
    const Etcdserverpb__LeaseCheckpointRequest *r, struct arena *a,
    ProtobufCMessage **msg_out);
/* Is lease id held?  (apply side: a Put's lease check) */
bool server__lease_exists(struct server *s, int64_t id);
/* The lease of id, or NULL (leases.mu held). */
struct server_lease *server__lease_find(struct server_leases *ls, int64_t id);
/* etcd's minimum TTL in seconds: 1.5 election timeouts, rounded up. */
int64_t server__lease_min_ttl(const struct server *s);
/* The checkpoint period of a lease of ttl_s seconds under checkpoint
 * interval interval_ms (> 0): min(interval, max(TTL / 2,
 * SERVER_LEASE_CHECKPOINT_MIN_MS)), in ms.  Pure. */
uint64_t server__lease_cp_period_ms(int64_t ttl_s, uint64_t interval_ms);

/* server__lease_wake (mu held, on the primary): lowers leases.wake_ms to
 * l's next event (its expiry, or when it falls due for a checkpoint); every
 * change of a lease that may bring its next event earlier calls it, so the
 * tick looks at the table only when something can happen. */
void server__lease_wake(struct server *s, const struct server_lease *l);

/* server__leases_tick: the lessor tick (house thread, no server lock but
 * house_mu): promotion, revokes of expired leases, checkpoints. */
void server__leases_tick(struct server *s, uint64_t now_ms);

/* lease_forward.c: the house thread tries again the forwards whose wait
 * is over (every pass; cheap when none waits); server__lease_forward_stop
 * fails those left with ERR_STOPPED and refuses more (server_stop, after
 * the transport closed). */
void server__lease_forward_house(struct server *s, uint64_t now_ms);
void server__lease_forward_stop(struct server *s);

#endif
