/*
 * server.h - the member core: the proposal funnel, the log (WAL) loop, the
 * apply loop and the read path of one cetcd member.
 *
 * Write path (DESIGN.md "The write path"): an API thread calls
 * server_propose() with an InternalRequest.  The server stamps a request id,
 * registers a waiter, and queues the encoded request for the raft thread,
 * which proposes everything queued to raft (a follower's raft forwards to
 * the leader), writes each Ready's entries and HardState to the WAL with ONE
 * fdatasync (group commit), sends the messages, and hands committed entries
 * to the applier.  The applier runs a batch inside one LMDB write txn
 * (mvcc_batch_*) that also stores the consistent index, and only after that
 * commit wakes each waiter with its response.  Nothing is acknowledged
 * before it is committed by a quorum and applied.
 *
 * Read path: server_range() runs a ReadIndex round through raft (batched
 * with the reads arriving meanwhile) and waits until the applied index
 * reaches it, unless the request is serializable; then it reads in an LMDB
 * read txn; the response points into the map until server_read_end().
 *
 * Threads: server_propose/server_range_* and the other server_* calls are
 * safe from any thread; which thread runs what is below.
 *
 * Execution contexts and lock order
 * =================================
 * This section is the authoritative statement (docs/ARCHITECTURE.md points
 * here).  "Raft thread" in a comment means "whoever holds raft_mu", and
 * "apply thread" means "whoever holds apply_mu": on a lone voter both are
 * often another thread, by the fast paths below.
 *
 * Contexts (thread name: what it may run in src/server):
 * - cetcd-rpc, client listener (the API's event loops): server_propose,
 *   server_range_async, server_member_change, server_move_leader, status
 *   and headers.  Serves serializable and lone-leader reads inline (read.c
 *   serve, which may wait on applied_cv for the applier).  Through
 *   server__raft_poke it may run a whole raft pass (below), and so the WAL
 *   write and fdatasync, an inline apply and other requests' callbacks.
 * - cetcd-rpc, peer listener: server__raft_receive into the inbox, then
 *   server__raft_poke; the transport's reports (peers.c note_report); a
 *   received snapshot file (server__snap_received).
 * - cetcd-raft (raft_node.c server__raft_main): ticks (on the server's
 *   clock, server_clock) and raft passes under raft_mu: the inbox, reports,
 *   proposals, membership jobs, ReadIndex rounds (read_index.c), snapshot
 *   chores (snap_raft.c), the Ready (raft_ready.c).
 * - cetcd-apply (apply.c server__apply_main): pops the committed queue and
 *   applies under apply_mu, wakes waiters; applies conf changes to the
 *   members table and the transport (members.c).
 * - cetcd-read (read.c): serves answered linearizable reads.
 * - cetcd-house (house.c): holds house_mu for its whole loop; trims the
 *   map inside the store gate; publishes this member (a proposal: it may
 *   run an inline raft pass under house_mu); fails timed-out requests
 *   (timeout.c: their callbacks run under house_mu).
 * - cetcd-snap (snap_worker.c): pins (apply_mu held a few microseconds,
 *   then the store gate), exports and staging inside the gate; snap.mu.
 * - cetcd-task (task.c): posted tasks (server_task_post, "Tasks" below),
 *   holding no server lock: like an API thread it may propose, read and
 *   watch, and so run an inline raft pass.
 * - cetcd-slow (task.c): tasks posted with server_task_post_slow (Hash,
 *   HashKV, bcrypt), same rules as cetcd-task.
 * - cetcd-peer-call (peer/call.c): a forwarded promotion's answer
 *   (member_forward.c: re-queues its job, answers its waiter).
 * - cetcd-defrag (defrag.c, one per Defragment run, joined by
 *   server_stop): apply_mu a moment to start the journal, the store gate
 *   during the copy and catch-up, then export_mu, raft_mu, apply_mu and
 *   the closed gate for the switch-over; answers its waiters holding
 *   nothing.
 * - main: server_start before any server thread, server_stop after
 *   joining them.
 *
 * The lone-voter fast paths (measured, docs/BENCHMARKS.md):
 * - Inline raft pass: server__raft_poke, called with no server lock held
 *   (or house_mu, by the publish), runs raft_pass on the calling thread
 *   when this member is the only voter, the raft thread waits for an
 *   event (raft_asleep) and pthread_mutex_trylock(raft_mu) succeeds; else
 *   it kicks the raft thread.  So an event loop can block on a WAL fsync;
 *   raft and the WAL belong to the raft_mu holder, not to cetcd-raft.
 *   Off with CETCD_NO_INLINE_RAFT=1 (server_config.no_inline_raft).
 * - Apply hand-off: server__apply_handoff (raft-pass holder) try-locks
 *   apply_mu and, when nothing is queued, applies the committed entries
 *   itself, callbacks included (under raft_mu and apply_mu); else it
 *   queues them for cetcd-apply.  The LMDB write txn is held by whoever
 *   holds apply_mu.
 * - Speculative apply: server__spec_begin (raft-pass holder, after the
 *   WAL write, before its fsync) try-locks apply_mu to see that nobody
 *   applies and nothing is queued, then queues the entries as tentative
 *   for cetcd-apply; reads stay pinned to the state before them, and
 *   their waiters are woken by whichever of cetcd-apply and the raft-pass
 *   holder (server__spec_durable, after the fsync) finishes last.  Off
 *   with CETCD_NO_SPECULATIVE_APPLY=1 (server_config.no_speculation).
 *
 * Lock order, outermost first.  A thread holding one may take only those
 * below it; the leaves never hold another server mutex.
 *   1. house_mu: the house thread, for its whole loop; server_stop takes
 *      it alone to wake it.
 *   2. raft_mu (s->node): held by whoever runs a raft pass: cetcd-raft, or
 *      a thread in server__raft_poke (a trylock, holding no server lock,
 *      or house_mu for the publish proposal).
 *   3. apply_mu: held by whoever applies: cetcd-apply, or the raft-pass
 *      holder (server__apply_handoff and server__spec_begin try-lock it
 *      under raft_mu); server__snap_install (snap_raft.c) takes it
 *      blocking under raft_mu; the snap worker's pin takes it alone; the
 *      house thread takes it (under house_mu) to trim the store map
 *      between apply batches only with a write map (house.c house_unmap;
 *      the member's pwrite store is trimmed inside the gate instead).
 *   3a. snap.export_mu (snap_worker.c, one export at a time): taken with
 *      no other server lock held; under it the gate and applied_mu.  The
 *      defrag switch-over (defrag.c) takes it first, then raft_mu and
 *      apply_mu (nobody holding those waits for export_mu).
 *   4. the store gate (snap.gate_mu + gate_cv, store.c): closed only by
 *      server__snap_install and the defrag switch-over, both with raft_mu
 *      and apply_mu held; it waits until no reader is inside.  Readers enter holding nothing, or raft_mu or
 *      apply_mu (callbacks that fill a header, the pin), which is safe
 *      because the closer holds both.
 *   5. leaves: node.ev_mu (inbox, open read batch, reports), reads.ready_mu
 *      (read workers' queue), applied_mu (with applied_cv), spec.mu,
 *      snap.mu, ms->mu (members table and job queue; it
 *      also writes the members buckets in the apply txn), leases.mu (the
 *      lease table, lease.h; nobody proposes while holding it), the two
 *      server_queue.mu (proposals, committed), the server_wait shard
 *      mutexes, server__copy_file's buffer mutex (snap_files.c), a
 *      server_range's on-stack sync_read.mu.
 * Outside src/server: mvcc's read-txn pool_mu and LMDB's writer lock are
 * taken under apply_mu or inside the gate.  The peer transport's locks
 * are taken by server code holding raft_mu (peer_send), apply_mu
 * (members.c transport_follow: peer_add/update/remove when a conf change
 * is applied; peer_remove waits up to ~100 ms for the peer's threads) or
 * house_mu (timeout.c peer_stats), never ms->mu.  The API runtime's reply
 * path takes no lock (a CAS push and an eventfd write).
 *
 * Callbacks (server_done_fn, server_read_fn, server_member_fn,
 * server_leader_fn) run under whatever their caller holds: apply_mu (and
 * raft_mu when applied inline) from apply.c publish, raft_mu from a
 * refused proposal (raft_node.c fail_waiter), a speculative batch's
 * publish or a membership job, house_mu from the timeouts, nothing on a
 * read worker or inline refusals.  They must not block and must not take
 * raft_mu or apply_mu other than by trylock.
 *
 * Bounds: every queue that takes network input refuses when full, with
 * ERR_TOO_MANY_REQUESTS to a client (etcd's "etcdserver: too many
 * requests"): proposals (SERVER_PROPOSALS_MAX), the commit-apply gap
 * (SERVER_APPLY_GAP_MAX, which bounds the committed queue), waiters
 * (SERVER_WAIT_MAX), linearizable reads (SERVER_READS_MAX), membership
 * jobs (SERVER_MS_JOBS_MAX); peer messages beyond SERVER_INBOX_MAX are
 * dropped (ERR_FULL, as etcd's receive buffer); transport reports and
 * received snapshots have fixed slots (server_int.h).
 */
#ifndef CETCD_SERVER_H
#define CETCD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/metrics.h"

struct rpc_server;
struct dial_tls;

#include "cetcdpb/internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "watch/watch.h"

/* server_clock: where the server reads the time (milliseconds that only
 * go forward, as CLOCK_MONOTONIC).  now_ms NULL: the real CLOCK_MONOTONIC
 * (the daemon).  A test may drive it (see tests/unit/test_server_clock.c):
 * request timeouts, ReadIndex round timeouts, raft ticks and the house
 * thread's chores then follow the test's clock, not the wall.  now_ms
 * runs on any server thread and must be thread-safe and cheap (it is read
 * on the put path).  Timed waits (condition variables) still sleep real
 * time: with a clock that does not move a thread wakes, sees no time has
 * passed, and waits again.  Times that come from outside the server (the
 * peer transport's link times, server_move_leader's deadline) are
 * CLOCK_MONOTONIC, so a driven clock should start at the real
 * CLOCK_MONOTONIC time and only move forward. */
struct server_clock {
    uint64_t (*now_ms)(void *ctx); /* the time; NULL: CLOCK_MONOTONIC */
    void *ctx;                     /* its argument (borrowed) */
};

/* server_config: everything the daemon's flags decide.  Strings are
 * borrowed for the life of the server. */
enum {
    SERVER_COMPACT_OFF = 0,
    SERVER_COMPACT_PERIODIC = 1,
    SERVER_COMPACT_REVISION = 2,
};
/* The etcd version a member reports by default (Status.version, the
 * startup log, --version): 3.4.31, the 3.4 release with the watch
 * progress fixes cetcd has (#15220, #17507), which Kubernetes requires
 * before it sends RequestProgress (docs/ARCHITECTURE.md "Reported
 * version"). */
#define SERVER_REPORTED_VERSION_DEFAULT "3.4.31"

struct server_config {
    const char *version;          /* --experimental-reported-version;
                                     NULL = SERVER_REPORTED_VERSION_DEFAULT */
    const char *name;             /* --name */
    const char *data_dir;         /* --data-dir */
    const char *wal_dir;          /* --wal-dir; NULL = <data-dir>/member/wal */
    const char *peer_urls;        /* --initial-advertise-peer-urls (comma list) */
    const char *client_urls;      /* --advertise-client-urls (comma list) */
    const char *cluster_token;    /* --initial-cluster-token */
    const char *initial_cluster;  /* --initial-cluster: name=url,... */
    uint64_t heartbeat_ms;        /* --heartbeat-interval (raft tick) */
    uint64_t election_ms;         /* --election-timeout */
    bool pre_vote;                /* --pre-vote */
    /* The peer listener (a gRPC server created but NOT yet started); the
     * peer transport registers its services on it.  The caller starts it
     * after server_start and closes it BEFORE server_stop.  NULL: no peers
     * (a single member only). */
    struct rpc_server *peer_listener;
    /* TLS for dialling https:// and unixs:// peers (borrowed; see
     * peer/peer.h and dial/dial.h), or NULL: such peers are refused. */
    const struct dial_tls *peer_tls;
    uint64_t snapshot_count;      /* --snapshot-count */
    /* The least time between a pin becoming durable and the next one
     * asked for the pages it holds (snap_pin.c: pins are asked by the
     * volume freed since, not by time; 0: no least time).  Not a flag:
     * tests that need one pin held set it high. */
    uint64_t pin_interval_ms;
    uint32_t max_snapshots;       /* --max-snapshots: snap files kept (0 = all) */
    int64_t quota_backend_bytes;  /* --quota-backend-bytes (0 = 2 GiB,
                                   * negative: no quota) */
    uint64_t max_request_bytes;   /* --max-request-bytes */
    uint32_t max_txn_ops;         /* --max-txn-ops */
    /* --experimental-compaction-batch-limit: revisions a compaction deletes
     * per apply batch (0: 1000, etcd's default). */
    uint32_t compaction_batch_limit;
    bool unsafe_no_fsync;         /* --unsafe-no-fsync */
    /* --max-wals as the WAL takes it (wal_options.segments_keep): WAL
     * segments kept besides the needed ones; 0 = none (a released segment
     * is deleted at once), UINT64_MAX = all (etcd's --max-wals=0). */
    uint64_t wal_segments_keep;
    /* --experimental-warning-apply-duration: an apply that takes longer
     * logs etcd's "took too long" warning; 0 = 100 ms (etcd's default). */
    uint64_t warn_apply_ns;
    /* --experimental-watch-progress-notify-interval: periodic progress of
     * watchers that asked for it; 0 = 10 minutes (etcd's default). */
    uint64_t watch_progress_ms;
    /* --auto-compaction-mode / --auto-compaction-retention (compactor.c,
     * etcd 3.4's v3compactor): SERVER_COMPACT_OFF (retention 0), _PERIODIC
     * (auto_compact_retention in ms: keep that much history), _REVISION
     * (in revisions).  auto_compact_rev_interval_ms: how often the
     * revision mode looks (0: etcd's fixed 5 minutes; tests shorten it). */
    int auto_compact_mode;
    uint64_t auto_compact_retention;
    uint64_t auto_compact_rev_interval_ms;
    /* --experimental-lease-checkpoint-interval: how often the leader
     * checkpoints its leases' remaining TTLs (lease.h); 0 = 5 minutes. */
    uint64_t lease_checkpoint_ms;
    /* --auth-token-ttl in ms (simple tokens; 0 = 300 s) and --bcrypt-cost
     * (0 = 10). */
    uint64_t auth_token_ttl_ms;
    int bcrypt_cost;
    /* --auth-token jwt,...: the JWT options (auth.h; borrowed, they must
     * outlive the server); NULL: simple tokens. */
    const struct auth_jwt_config *auth_jwt;
    /* --initial-election-tick-advance=false: a member of a cluster does not
     * fast-forward its election ticks once its peers are connected. */
    bool no_tick_advance;
    bool strict_reconfig_check;   /* --strict-reconfig-check */
    /* --force-new-cluster: a member restarting from its data becomes a
     * one-member cluster (force_new.c); ignored without data, as etcd. */
    bool force_new_cluster;
    bool no_speculation;          /* CETCD_NO_SPECULATIVE_APPLY=1: a lone
                                   * voter applies after its fsync, not
                                   * during it (for comparisons, tests) */
    bool no_inline_raft;          /* CETCD_NO_INLINE_RAFT=1: only the raft
                                   * thread runs raft passes, see
                                   * server__raft_poke (for comparisons) */
    /* Tests only (CETCD_TEST_READ_PAUSE_MS): a Range checked against an
     * enabled auth store waits this long between its check and its read,
     * so a test can change the auth store in between (read.c). */
    uint32_t test_read_pause_ms;
    /* Joining a running cluster (--initial-cluster-state=existing, no WAL
     * yet): what a running member said (cmd learns it through the peer
     * listener's Join service).  NULL: bootstrap a new cluster from
     * --initial-cluster, or restart from the data dir. */
    const struct server_join *join;
    /* The clock the server's timers read (zero: the real one). */
    struct server_clock clock;
};

/* server_join: the cluster a new member joins.  Borrowed for
 * server_start only. */
struct server_join {
    uint64_t cluster_id;                       /* the running cluster's */
    uint64_t member_id;                        /* ours, as MemberAdd chose */
    const Etcdserverpb__Member *const *members; /* current members */
    size_t n_members;
};

struct server;

/* server_response: what a waiter gets.  `err` is 0 or a negative ERR_* code
 * (api maps it to etcd's gRPC error); on success `msg` is the response
 * message (PutResponse, DeleteRangeResponse, TxnResponse, CompactionResponse)
 * whose memory stays valid only during the callback. */
struct server_response {
    int err;                        /* 0 or ERR_* */
    const ProtobufCMessage *msg;    /* response on success, else NULL */
};

typedef void (*server_done_fn)(void *arg, const struct server_response *r);

/* server_start opens (or creates) the member's data dir, replays the WAL
 * above the consistent index, and starts the log and apply threads.
 * Errors: ERR_IO, ERR_CORRUPT (refuses to start; logged), ERR_NOMEM. */
int server_start(const struct server_config *cfg, struct server **server_out);

/* server_stop stops accepting proposals, fails queued ones with ERR_STOPPED,
 * joins the threads and closes the stores.  NULL is fine. */
void server_stop(struct server *s);

/* server_propose queues `req` (borrowed; encoded before return).  `done` is
 * called exactly once, by whoever applies it (see "Execution contexts and
 * lock order"), or inline with an error before return when the request is
 * refused: ERR_REQUEST_TOO_LARGE, ERR_STOPPED, ERR_NOMEM,
 * ERR_TOO_MANY_REQUESTS (the committed index is more than
 * SERVER_APPLY_GAP_MAX ahead of the applied one, SERVER_PROPOSALS_MAX
 * proposals are queued, or SERVER_WAIT_MAX requests wait).  A request not
 * applied within the request timeout (on the server's clock) gets
 * ERR_TIMEOUT, ERR_TIMEOUT_LEADER_FAIL or ERR_TIMEOUT_CONN_LOST (see
 * timeout.h) on the house thread.  Returns 0, or the error also given to
 * `done` inline. */
int server_propose(struct server *s, Cetcdpb__InternalRequest *req,
                   server_done_fn done, void *arg);

/* server_read: a read txn with the response it produced (opaque). */
struct server_read;

/* server_range runs a Range (linearizable unless req->serializable) and
 * stores the response in *resp_out; it and everything it points to stays
 * valid until server_read_end(*read_out).  Errors: ERR_COMPACTED,
 * ERR_FUTURE_REV, ERR_STOPPED, ERR_NOMEM. */
int server_range(struct server *s, const Etcdserverpb__RangeRequest *req,
                 Etcdserverpb__RangeResponse **resp_out,
                 struct server_read **read_out);


void server_read_end(struct server_read *read);

/* A Range's answer: err 0 and resp (valid during the call only), or an
 * ERR_*.  Runs on the caller's thread (served at once) or a read worker. */
typedef void (*server_read_fn)(void *arg, int err,
                               const Etcdserverpb__RangeResponse *resp);

/* server_range_async serves req without blocking the caller on raft: a
 * serializable read (or one on a lone leading voter) is served at once;
 * a linearizable one joins the next ReadIndex round and is served by a
 * read worker once the applied index reaches the round's answer.  Takes
 * ownership of req (an unpacked message; freed after fn).  fn is called
 * exactly once.  Errors given to fn: as server_range, plus ERR_TIMEOUT
 * (no ReadIndex answer within the request timeout) and ERR_LEADER_CHANGED
 * (the member saw a new leader while its ReadIndex round was pending; a
 * retry may succeed), and ERR_TOO_MANY_REQUESTS (SERVER_READS_MAX
 * linearizable reads wait already). */
void server_range_async(struct server *s, Etcdserverpb__RangeRequest *req,
                        server_read_fn fn, void *arg);

/* A check a Range must pass at its consistency point: once the applied
 * index has reached the read's (after the ReadIndex round of a
 * linearizable read), just before the store is read.  etcd checks a
 * read's permission there (EtcdServer.Range: linearizableReadNotify, then
 * doSerialize), so a grant committed before the read arrived is seen even
 * on a member that had not applied it yet.  Returns 0, or the ERR_* given
 * to fn instead of a response.  Runs on the thread fn runs on, with arg
 * (fn's), before fn; req is the read's (borrowed for the call).
 *
 * *auth_rev_out (0 before the call) is the auth store's revision the
 * check's answer depended on, 0 for none.  When it is not 0 and the auth
 * store's revision is another once the store has been read, the read is
 * void and fn gets ERR_AUTH_OLD_REVISION (etcd's doSerialize: a
 * permission changed while the read was made, so the check may not hold
 * for what was read; the client retries). */
typedef int (*server_read_check_fn)(struct server *s,
                                    const Etcdserverpb__RangeRequest *req,
                                    void *arg, uint64_t *auth_rev_out);

/* server_range_async_checked: server_range_async with check (NULL: none)
 * made at the read's consistency point (above).  fn gets check's error
 * when it refuses. */
void server_range_async_checked(struct server *s,
                                Etcdserverpb__RangeRequest *req,
                                server_read_check_fn check, server_read_fn fn,
                                void *arg);

/* server_barrier_async calls fn(arg, err) once this member's applied
 * index has reached the cluster's commit index as of the call: a
 * linearizable barrier for answers built from applied state other than
 * the key space (MemberList).  It joins the ReadIndex round of the
 * linearizable Ranges (served at once on a lone leading voter).  fn runs
 * on the caller's thread or a read worker, exactly once; errors as
 * server_range_async's (ERR_TIMEOUT with no leader answering).  With err
 * 0, fn runs inside the store gate of the barrier's probe: it must not
 * enter the gate again (a snapshot install closing it would deadlock). */
typedef void (*server_barrier_fn)(void *arg, int err);
void server_barrier_async(struct server *s, server_barrier_fn fn, void *arg);

/* server_has_leader: this member knows a leader now (raft's view). */
bool server_has_leader(struct server *s);

/* server_header fills a response header with the ids, the current revision
 * and the raft term. */
void server_header_fill(struct server *s, Etcdserverpb__ResponseHeader *h);

/* Limits the API enforces before proposing. */
uint64_t server_max_request_bytes(const struct server *s);
uint32_t server_max_txn_ops(const struct server *s);

/* The backend quota (quota.c): what a request costs against it (0: it
 * writes nothing the quota counts), and whether the API may propose a
 * write of that cost (else etcd's ErrNoSpace): not while a NOSPACE alarm
 * is active, and not when it would take the store to the quota or the
 * store's disk is full, which also raise the NOSPACE alarm (alarm.h).
 * API threads only (it may propose the alarm). */
uint64_t server_put_cost(const Etcdserverpb__PutRequest *p);
uint64_t server_txn_cost(const Etcdserverpb__TxnRequest *t);
uint64_t server_lease_grant_cost(const Etcdserverpb__LeaseGrantRequest *g);
bool server_quota_allows(struct server *s, uint64_t cost);

/* server_stats: counters for tests, metrics and benchmarks. */
struct server_stats {
    uint64_t proposals;     /* proposals accepted */
    uint64_t wal_syncs;     /* fdatasyncs of the WAL */
    uint64_t apply_batches; /* LMDB write txns committed by the apply loop */
    uint64_t applied_index; /* last applied log index */
};
void server_stats_get(struct server *s, struct server_stats *out);

/* server_metrics: the member's series of /metrics (api/metrics.c), read
 * from atomics the member keeps anyway (plus the waiter count, one lock
 * per wait shard, and the store's size, server_status_get's).  Any
 * thread. */
struct server_metrics {
    bool has_leader;            /* etcd_server_has_leader */
    bool is_leader;             /* this member leads */
    bool is_learner;            /* this member is a learner */
    uint64_t member_id;         /* this member's id */
    uint64_t leader_changes;    /* new leaders seen (etcd's count) */
    uint64_t committed_index;   /* proposals_committed_total (an index) */
    uint64_t applied_index;     /* proposals_applied_total (an index) */
    uint64_t proposals_pending; /* proposals waiting for their apply */
    uint64_t proposals_failed;  /* proposals that timed out */
    uint64_t db_size;           /* backend file size */
    uint64_t db_in_use;         /* backend bytes in use */
    int64_t quota_bytes;        /* the backend quota (default filled in) */
    uint64_t watchers;          /* watchers on the member's hub */
    uint64_t slow_watchers;     /* of those, the unsynced (catching up) */
    int64_t keys;               /* live keys in the store (mvcc_keys) */
};
void server_metrics_get(struct server *s, struct server_metrics *out);

/* One peer's network series (etcd_network_*): server_peer_metrics calls
 * fn for each other member the transport knows, with the ms->mu lock
 * held (fn must not call back into the server).  Any thread. */
struct server_peer_metrics {
    uint64_t id;                  /* the peer's member id */
    bool active;                  /* its stream is up */
    uint64_t sent_failures;       /* messages that could not be sent */
    uint64_t sent_bytes;          /* raft traffic sent to it (peer.h) */
    uint64_t received_bytes;      /* ... received from it */
    struct metrics_hist_snap rtt; /* round trips (peer.h peer_rtt_bounds) */
};
void server_peer_metrics(struct server *s,
                         void (*fn)(const struct server_peer_metrics *p,
                                    void *ctx),
                         void *ctx);

/* server_alarms_active: which alarms are active now (any member's), as
 * the apply thread last set them.  Any thread. */
void server_alarms_active(struct server *s, bool *nospace_out,
                          bool *corrupt_out);

/* Most alarms kept (one per member and type is the most etcd has). */
#define SERVER_ALARMS_MAX 64

/* One active alarm (alarm.h). */
struct server_alarm {
    uint64_t member_id; /* who raised it */
    uint32_t type;      /* etcdserverpb.AlarmType (never NONE) */
};

/* server_alarms_list copies the active alarms (any member's, in the
 * store's key order: member id, then type) into out, at most max, and
 * returns how many it copied: the list as the apply side last loaded or
 * changed it (Maintenance.Status's errors).  Any thread. */
size_t server_alarms_list(struct server *s, struct server_alarm *out,
                          size_t max);
/* server_alarm_text writes a's text as etcd prints an AlarmMember (the
 * protobuf compact text: "memberID:1234 alarm:NOSPACE ", the member left
 * out when 0) into buf; returns buf. */
const char *server_alarm_text(const struct server_alarm *a, char *buf,
                              size_t cap);

/* Most Defragment requests waiting at once (server_defrag). */
#define SERVER_DEFRAG_WAITERS_MAX 64

/* A Defragment's answer: err 0 or an ERR_*. */
typedef void (*server_defrag_fn)(void *arg, int err);

/* server_defrag defragments this member's store online (defrag.c has the
 * design): the store's free pages go back to the file system while reads
 * and writes go on, with one pause of a few milliseconds at the
 * switch-over.  done runs once, on the defrag thread (or inline when
 * refused), holding no server lock.  Errors: ERR_DEFRAG_NO_DISK (not
 * enough free disk for the copy), ERR_DEFRAG_JOURNAL_FULL (too many
 * writes during the copy), ERR_DEFRAG_STORE_REPLACED (a snapshot was
 * installed meanwhile), ERR_TOO_MANY_REQUESTS (SERVER_DEFRAG_WAITERS_MAX
 * wait), ERR_STOPPED, ERR_NOMEM, ERR_NOSPC, ERR_IO. */
void server_defrag(struct server *s, server_defrag_fn done, void *arg);

/* server_status: what Maintenance.Status reports. */
struct server_status {
    uint64_t leader;        /* member id of the leader (0 = none) */
    uint64_t raft_index;    /* last committed log index */
    uint64_t raft_term;     /* current term */
    uint64_t applied_index; /* last applied log index */
    uint64_t db_size;       /* backend file size */
    uint64_t db_in_use;     /* backend bytes in use */
    bool is_learner;        /* this member is a learner */
    const char *version;    /* the reported etcd version (static or the
                               config's: valid while the server runs) */
};
/* server_reported_version: the etcd version this member reports (the
 * config's, or SERVER_REPORTED_VERSION_DEFAULT); static storage. */
const char *server_reported_version(const struct server *s);
/* server_status_get: 0, or ERR_BUSY/ERR_IO from the backend. */
int server_status_get(struct server *s, struct server_status *out);

/* The store's hashes (hash.c), of this member's store as it is now (no
 * barrier, as etcd).  rev: the store's current revision; compact_rev: its
 * compact revision, -1 if none (etcd's value). */
struct server_hash {
    uint32_t hash;
    int64_t rev;
    int64_t compact_rev;
};
/* server_hash_kv: HashKV as etcd 3.4 computes it at revision rev (0:
 * current; mvcc.h mvcc_hash_kv_etcd).  Errors: ERR_COMPACTED,
 * ERR_FUTURE_REV, ERR_BUSY, ERR_NOMEM, ERR_CORRUPT. */
int server_hash_kv(struct server *s, int64_t rev, struct server_hash *out);
/* server_hash_kv_compacted: the same hash at the store's compact revision
 * itself, which must be rev (mvcc.h mvcc_hash_kv_compacted): members that
 * compacted at rev answer the same until their next compaction.  For the
 * compaction-time hash check (cmd/corrupt.h); out->compact_rev = rev.
 * Errors: ERR_COMPACTED (compacted past rev), ERR_FUTURE_REV (not
 * compacted at rev yet), ERR_BUSY, ERR_NOMEM, ERR_CORRUPT. */
int server_hash_kv_compacted(struct server *s, int64_t rev,
                             struct server_hash *out);
/* server_compact_rev: the store's compact revision (0: never compacted),
 * cheap; any thread. */
int64_t server_compact_rev(struct server *s);
/* What a peer answered to server_peer_hash_kv.  err: 0 (the fields are
 * its answer, as HashKVResponse's: hash, header revision, compact
 * revision), the peer's refusal of the revision (ERR_COMPACTED,
 * ERR_FUTURE_REV), or no answer (ERR_TIMEOUT, ERR_IO: unreachable or
 * refused, ERR_UNSUPPORTED: an older cetcd, ERR_MEMBER_REMOVED,
 * ERR_NOTFOUND: not a peer, ERR_BUSY: peer_call's slots are taken,
 * ERR_STOPPED, ERR_NOMEM). */
struct server_peer_hash {
    int err;
    uint32_t hash;
    int64_t rev;
    int64_t compact_rev;
};
/* server_peer_hash_kv asks member id's peer listener for its HashKV at rev
 * (0: current), or with compacted its server_hash_kv_compacted at rev,
 * for the corruption checks (cmd/corrupt.h), as etcd 3.4 asks a peer's
 * /members/hashkv: no client credentials, the peer transport's URLs and
 * TLS.  Blocks up to timeout_ms (> 0); not on the raft or apply thread.
 * Fills *out and returns out->err. */
int server_peer_hash_kv(struct server *s, uint64_t id, int64_t rev,
                        bool compacted, uint32_t timeout_ms,
                        struct server_peer_hash *out);
/* server_hash: Maintenance.Hash: CRC32C over every version the store
 * holds (etcd hashes its bbolt file, which no other store can equal). */
int server_hash(struct server *s, struct server_hash *out);

/* --- Snapshot in etcd's format (snapshot_etcd.c) ---------------------------
 * server_snapshot_etcd writes the store as the bbolt database etcd 3.4
 * would hold for it (etcd's buckets and records; snapshot_etcd.c lists
 * them), from one read txn: a consistent point in time while the member
 * goes on applying and serving.  First sink->begin(ctx, total bytes),
 * exactly the bytes write will then be given, then write(ctx, buf, len)
 * with whole pages in file order (a write may block: the caller's flow
 * control; the store gate and the read txn stay held meanwhile, so a
 * snapshot install waits for it, and LMDB keeps the pages the txn sees).
 * Runs on the calling thread, which must hold no server lock: a long
 * task, for a worker thread.  Stops with ERR_STOPPED once server_stop
 * has begun (the caller must return before server_stop frees the store:
 * the API's streams are ended and released first).  Errors: the sink's,
 * ERR_CLOSED (cancelled), ERR_STOPPED, ERR_NOMEM, ERR_CORRUPT, the bbolt
 * writer's. */
struct server_snapshot_sink {
    int (*begin)(void *ctx, uint64_t total_bytes);
    int (*write)(void *ctx, const void *buf, size_t len);
    /* optional: polled every few hundred records (also in the first pass,
     * which writes nothing); true stops the export with ERR_CLOSED */
    bool (*cancelled)(void *ctx);
    void *ctx;
};
int server_snapshot_etcd(struct server *s,
                         const struct server_snapshot_sink *sink);

/* --- Starting on an etcd data dir (import_etcd.c) ---------------------------
 * server_import_etcd imports the etcd 3.4/3.5 data dir data_dir (its
 * member/snap/db, member/wal, member/snap/NNN.snap) into a cetcd member dir,
 * all or nothing: the new member dir is built in <data_dir>/member.import,
 * fsynced, then etcd's member dir is renamed <data_dir>/member.etcd (its
 * files untouched, kept until the operator removes them) and the new one
 * renamed member.  A crash between the two renames leaves member.etcd and
 * no member: the next start imports from member.etcd again.  A data dir
 * that holds no etcd member (or already a cetcd one) is left alone:
 * *imported_out false, 0.  Main thread, before server_start.  wal_dir:
 * --wal-dir (an etcd WAL elsewhere is refused: ERR_IMPORT_LAYOUT).
 * Errors (each logged with the file and offset or record): ERR_CORRUPT,
 * ERR_BBOLT_CORRUPT, ERR_IMPORT_UNSUPPORTED, ERR_IMPORT_LAYOUT, ERR_IO,
 * ERR_NOMEM; nothing of etcd's is changed then. */
int server_import_etcd(const char *data_dir, const char *wal_dir,
                       bool *imported_out);

/* server_is_learner: this member is a (non-voting) learner right now. */
bool server_is_learner(struct server *s);

uint64_t server_member_id(const struct server *s);

/* --- membership (members.c) ------------------------------------------ */

/* One member as the members store holds it (etcd's membership.Member). */
struct server_member_info {
    uint64_t id;            /* member id */
    char name[64];          /* "" until the member has published */
    char peer_urls[1024];   /* comma-separated */
    char client_urls[1024]; /* comma-separated; "" until published */
    bool is_learner;        /* non-voting */
};

/* server_members_list copies up to cap members, sorted by id, into out and
 * returns how many there are (may exceed cap).  Any thread. */
size_t server_members_list(struct server *s, struct server_member_info *out,
                           size_t cap);

enum server_member_op {
    SERVER_MEMBER_ADD = 0,     /* peer_urls, is_learner */
    SERVER_MEMBER_REMOVE = 1,  /* id */
    SERVER_MEMBER_UPDATE = 2,  /* id, peer_urls */
    SERVER_MEMBER_PROMOTE = 3, /* id */
};

struct server_member_change {
    int op;                       /* enum server_member_op */
    uint64_t id;                  /* member (not for ADD) */
    const char *const *peer_urls; /* ADD, UPDATE (borrowed for the call) */
    size_t n_peer_urls;
    bool is_learner;              /* ADD */
    /* PROMOTE forwarded by a follower (the peer listener's Promote): this
     * member must lead; it never forwards it again (ERR_NOT_LEADER). */
    bool from_peer;
};

/* The outcome of a membership change. */
struct server_member_result {
    int err;     /* 0 or ERR_* */
    uint64_t id; /* the member changed (added: its new id); 0 on error */
    /* A promotion this follower forwarded to the leader: the members as
     * the leader lists them after the change (etcd answers with the
     * leader's list; this member may not have applied it yet), borrowed
     * for the callback.  NULL otherwise: the change is applied here, list
     * this member's store. */
    Etcdserverpb__Member *const *members;
    size_t n_members;
};

/* Outcome of a membership change.  Runs on the apply thread (after the
 * change is applied locally), the raft thread, a peer transport thread (a
 * forwarded promotion), or inline before server_member_change returns. */
typedef void (*server_member_fn)(void *arg,
                                 const struct server_member_result *r);

/* server_member_change checks c against the members store and proposes it
 * as a raft conf change (one step, as etcd 3.4); fn is called exactly
 * once.  A promotion needs the leader's view of the learner's progress:
 * on a follower it is forwarded to the leader (waiting up to the request
 * timeout for one), which checks and proposes it (etcd's PromoteMember).
 * Errors given to fn: ERR_MEMBER_BAD_URLS, ERR_PEER_URL_EXIST,
 * ERR_MEMBER_EXIST, ERR_MEMBER_NOT_FOUND, ERR_MEMBER_NOT_LEARNER,
 * ERR_TOO_MANY_LEARNERS, ERR_MEMBER_NOT_ENOUGH_STARTED, ERR_UNHEALTHY
 * (strict reconfig check), ERR_LEARNER_NOT_READY, ERR_NO_LEADER,
 * ERR_NOT_LEADER (from_peer on a follower), ERR_TIMEOUT (or
 * ERR_TIMEOUT_LEADER_FAIL, ERR_TIMEOUT_CONN_LOST, as server_propose),
 * ERR_TOO_MANY_REQUESTS (SERVER_MS_JOBS_MAX membership jobs are alive, or
 * SERVER_WAIT_MAX requests wait), ERR_STOPPED, ERR_NOMEM.  Any thread. */
void server_member_change(struct server *s,
                          const struct server_member_change *c,
                          server_member_fn fn, void *arg);

/* Outcome of a leader transfer: 0 once `target` leads, or ERR_*. */
typedef void (*server_leader_fn)(void *arg, int err);

/* server_move_leader asks raft (this member must lead) to hand leadership
 * to the voter target and answers once the leader has changed to it, or
 * at deadline_ms (the server's clock, server_clock: CLOCK_MONOTONIC unless
 * the config gives another) with ERR_LEADER_TRANSFER_TIMEOUT.
 * Other errors: ERR_NOT_LEADER, ERR_BAD_LEADER_TRANSFEREE, ERR_STOPPED,
 * ERR_TOO_MANY_REQUESTS (SERVER_MS_JOBS_MAX membership jobs are alive),
 * ERR_NOMEM.  fn runs on the raft thread or inline.  Any thread. */
void server_move_leader(struct server *s, uint64_t target,
                        uint64_t deadline_ms, server_leader_fn fn, void *arg);

/* server_published: this member's name and client URLs are applied in
 * the cluster (etcd's publish; it serves clients after that). */
bool server_published(struct server *s);

/* server_removed: this member was removed from the cluster (it stops
 * serving; the daemon exits). */
bool server_removed(struct server *s);

/* server_join_info answers a joining member (the peer listener's Join
 * service): the cluster id and up to cap members (count returned in
 * *n_out).  The joining member's cluster_token is not compared (as etcd:
 * a different one is logged).  Returns 0. */
int server_join_info(struct server *s, const char *cluster_token,
                     uint64_t *cluster_id_out, struct server_member_info *out,
                     size_t cap, size_t *n_out);
uint64_t server_cluster_id(const struct server *s);

/* --- Watch (watchers.c) ---------------------------------------------------
 *
 * The member's store has one watch hub (watch/watch.h) from start to stop.
 * It sees a batch's events only once the batch is durable (a lone voter's
 * tentative batch: once its fsync returned, apply.c), and a snapshot that
 * replaces the store re-syncs every watcher from the new store
 * (watch_hub_restore).  The cetcd-watch thread runs the catch-up steps and
 * periodic progress (on the server clock).  The wrappers below keep the
 * hub alive during the call; a stream pointer is passed by reference and
 * read under that guard, because stopping the server closes the hub, which
 * calls the sink's close: the owner sets its pointer to NULL there.  With
 * *st NULL (or the server stopping) they return ERR_STOPPED / do nothing.
 * Errors: those of the watch_* function wrapped, ERR_STOPPED.
 *
 * require_leader (etcd's WithRequireLeader, metadata "hasleader: true"):
 * the open is refused with ERR_NO_LEADER while the member knows no leader,
 * and the cetcd-watch thread, which looks once per election timeout, calls
 * the stream's sink.end(ctx, ERR_NO_LEADER) once the member has seen no
 * leader at SERVER_WATCH_NO_LEADER_LOOKS looks in a row (etcd's
 * monitorLeader and maxNoLeaderCnt); sink.end must then be set. */
#define SERVER_WATCH_NO_LEADER_LOOKS 3
int server_watch_open(struct server *s, const struct watch_sink *sink,
                      bool require_leader, struct watch_stream **st_out);
int server_watch_create(struct server *s, struct watch_stream **st,
                        const struct watch_create *req, int64_t *id_out);
int server_watch_cancel(struct server *s, struct watch_stream **st,
                        int64_t id);
void server_watch_progress(struct server *s, struct watch_stream **st);
/* server_watch_close closes *st (if not NULL) and sets it to NULL. */
void server_watch_close(struct server *s, struct watch_stream **st);
/* server_watch_header fills h for a watch response speaking for rev: the
 * ids and raft term, revision = rev.  No lock: sinks call it. */
void server_watch_header(struct server *s, Etcdserverpb__ResponseHeader *h,
                         mvcc_rev rev);

/* --- Leases (lease.c, lease_primary.c, lease_forward.c) -------------------
 *
 * Grants and revokes are raft proposals (server_propose with a
 * LeaseGrantRequest or LeaseRevokeRequest: replies LeaseGrantResponse,
 * LeaseRevokeResponse); expiry, renewals and remaining TTLs are the
 * leader's (lease.h has the design and the bound). */

/* server_lease_id_next: a fresh lease id for a grant without one (etcd's
 * idutil: this member's low 16 bits, then a time-seeded counter; > 0). */
int64_t server_lease_id_next(struct server *s);

/* server_lease_min_ttl: the shortest TTL a grant gets, in seconds. */
int64_t server_lease_min_ttl(const struct server *s);

/* A renewal's outcome: err 0 and the lease's granted TTL, or an ERR_*. */
typedef void (*server_renew_fn)(void *arg, int err, int64_t ttl);

/* server_lease_renew renews lease id on the leader (etcd's LeaseRenew):
 * on the leader once it has applied what is committed; a follower
 * forwards it to the leader (peer listener, /cetcdpb.Lease/Renew), asking
 * again until the request timeout.  fn is called exactly once, inline, on
 * a read worker, the apply thread or a peer-call thread.  Errors:
 * ERR_LEASE_NOT_FOUND (unknown or expired), ERR_NOT_LEADER (local_only
 * on a follower), ERR_TIMEOUT, ERR_NO_LEADER, ERR_STOPPED, ERR_NOMEM, and
 * the proposal errors of a checkpoint (server_propose). */
void server_lease_renew(struct server *s, int64_t id, bool local_only,
                        server_renew_fn fn, void *arg);

/* A lease's time to live (LeaseTimeToLive). */
struct server_lease_ttl {
    int64_t id;                /* the lease */
    int64_t ttl;               /* remaining, whole seconds */
    int64_t granted_ttl;       /* granted */
    ProtobufCBinaryData *keys; /* want_keys: its keys (owned by the
                                * server, valid during the callback) */
    size_t n_keys;
};
typedef void (*server_ttl_fn)(void *arg, int err,
                              const struct server_lease_ttl *t);

/* server_lease_time_to_live answers from the leader, as renew (a follower
 * forwards, /cetcdpb.Lease/TimeToLive).  Errors: ERR_LEASE_NOT_FOUND,
 * ERR_NOT_LEADER (local_only on a follower), ERR_TIMEOUT, ERR_NO_LEADER,
 * ERR_STOPPED, ERR_BUSY (the store), ERR_NOMEM. */
void server_lease_time_to_live(struct server *s, int64_t id, bool want_keys,
                               bool local_only, server_ttl_fn fn, void *arg);

/* server_lease_list: the ids of the leases this member holds (applied
 * state), by expiry on the leader, by id elsewhere, into *ids_out
 * (mem_free it).  Errors: ERR_NOMEM. */
int server_lease_list(struct server *s, int64_t **ids_out, size_t *n_out);

/* --- Tasks (task.c) ------------------------------------------------------
 *
 * A service whose request waits on several steps (svc/lock.c: a txn, a
 * read, a watch, another read...) cannot take the next step from a
 * completion: those run under the server's locks (above).  It posts a
 * task instead, and cetcd-task runs it holding no server lock, so the
 * task may call any server_* function (and so run an inline raft pass).
 *
 * struct server_task is the caller's (inside its request state): fn and
 * arg set once, the rest the runner's.  server_task_post queues t unless
 * it is already queued (then nothing: a task posted twice runs once), so
 * the queue never holds more tasks than the callers own, and posting
 * never fails or allocates.  Any thread, also from a completion or a
 * watch sink (the task mutex is a leaf).  Tasks run in post order, one at
 * a time; fn may post again (t included).  stopping is true for the tasks
 * still queued when the server stops (server_stop, after the waiters and
 * the watch hub are gone): fn must then only release what it holds and
 * call no server_* function.  The caller keeps t valid until its fn ran
 * with t no longer queued. */
struct server_task {
    void (*fn)(struct server_task *t, bool stopping); /* the step to run */
    void *arg;                /* the caller's */
    struct server_task *next; /* the runner's queue link */
    bool queued;              /* the runner's: posted, not yet run */
};
void server_task_post(struct server *s, struct server_task *t);

/* server_task_post_slow: the same on a second runner, cetcd-slow, for
 * work that holds a CPU for long (a HashKV over the whole store, bcrypt):
 * neither an event loop (all its connections would wait) nor the lock and
 * election steps of cetcd-task wait behind it.  Same rules as above. */
void server_task_post_slow(struct server *s, struct server_task *t);

/* --- Auth (auth_apply.c) ---------------------------------------------------
 * The member's auth store (auth/auth.h: any thread may read and check it;
 * only the apply side changes it, through raft), its bcrypt cost, and
 * its tokens: server_auth_token_user copies the user a token names into
 * user_out (cap bytes) and renews it (simple); a JWT also sets
 * *revision_out to the auth revision it carries (auth_tokens_info).  Errors:
 * ERR_AUTH_INVALID_TOKEN, ERR_TOO_LARGE. */
struct auth_store;
struct auth_store *server_auth_store(struct server *s);
int server_bcrypt_cost(const struct server *s);
int server_auth_token_user(struct server *s, const char *token, size_t len,
                           char *user_out, size_t cap, uint64_t *revision_out);

#endif
