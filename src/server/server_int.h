/*
 * server_int.h - the member's state, shared by the server's files.
 */
#ifndef CETCD_SERVER_INT_H
#define CETCD_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "auth/auth.h"
#include "backend/backend.h"
#include "raft/raft.h"
#include "server/alarm.h"
#include "server/applier.h"
#include "server/arena.h"
#include "server/lease.h"
#include "server/queue.h"
#include "server/server.h"
#include "server/wait.h"

struct wal;
struct backend;
struct mvcc_store;
struct raft;
struct raft_msg;

/* Bound on proposals queued for the raft thread (then
 * ERR_TOO_MANY_REQUESTS). */
#define SERVER_PROPOSALS_MAX 5000

/* Bound on the entries committed and not yet applied, etcd's
 * maxGapBetweenApplyAndCommitIndex: while the committed index is more than
 * this ahead of the applied index, server_propose refuses with
 * ERR_TOO_MANY_REQUESTS.  The committed queue (raft thread -> applier)
 * cannot refuse what raft has committed; this is what bounds it. */
#define SERVER_APPLY_GAP_MAX 5000

/* Bound on peer messages waiting for the raft thread, as etcd's raft
 * receive buffer (recvBufSize 4096): a message past it is dropped, which
 * raft treats as a lost message (appends are resent, votes retried). */
#define SERVER_INBOX_MAX 4096

/* Bound on linearizable reads waiting for a ReadIndex answer or for a
 * read worker (from server__read_enqueue until served): one past it is
 * answered ERR_TOO_MANY_REQUESTS at once. */
#define SERVER_READS_MAX 10000

/* Most members of a cluster (voters + learners). */
#define SERVER_MEMBERS_MAX 16

/* Something the transport tells raft (through the raft thread). */
enum {
    SERVER_REPORT_UNREACHABLE = 0, /* raft_report_unreachable */
    SERVER_REPORT_SNAP_OK = 1,     /* raft_report_snapshot(true) */
    SERVER_REPORT_SNAP_FAIL = 2,   /* raft_report_snapshot(false) */
};

struct server_report {
    uint64_t id; /* the member concerned */
    int kind;    /* SERVER_REPORT_* */
};

struct peer_transport;
struct rpc_server;

/* --- store snapshots (snapshot.c) --- */

/* Most store snapshots queued at once for the worker (received ones). */
#define SERVER_SNAP_RECV_MAX 4

/* A snapshot a peer sent us, staged by the worker, installed by the raft
 * thread (see snapshot.c). */
struct server_snap_recv;

/* A snapshot raft asked to send to a follower (raft thread only). */
struct server_snap_want {
    uint64_t to;        /* the follower; 0 = free slot */
    bool pending;       /* raft asked; not sent yet */
    uint64_t index;     /* raft's snapshot index: send a copy >= this */
    uint64_t term;      /* the MsgSnap's term */
    uint64_t sent_index; /* the last copy sent to `to` */
    uint64_t sent_ms;    /* when (server__clock_ms) */
};

/* State of snapshot.c and snap_pin.c.  The worker thread pins the store
 * (its durable points, snap_pin.c), copies it for a follower that needs
 * it (<member>/snap/export-<index>.db, one at a time, removed once sent)
 * and stages received snapshots; the raft thread sends, installs, records
 * raft snapshots and WAL markers and compacts. */
struct server_snap {
    bool inited;                  /* mutexes below are initialised */
    pthread_t thread;             /* the worker */
    bool started;                 /* thread running */
    pthread_mutex_t mu;           /* guards the worker fields below */
    pthread_cond_t cv;            /* wakes the worker */
    bool stop;                    /* under mu: worker must exit */
    uint64_t copy_want;           /* under mu: export at >= this (0: none) */
    bool copy_busy;               /* under mu: export asked, result not taken */
    uint64_t copy_done;           /* under mu: an export made at index */
    struct raft_conf_state copy_conf; /* under mu: copy_done's membership */
    bool copy_failed;             /* under mu: the asked export failed */
    uint64_t pin_want;            /* under mu: pin at >= this (0: none) */
    bool pin_busy;                /* under mu: pin asked, result not taken */
    uint64_t pin_done;            /* under mu: a durable pin at index */
    struct raft_conf_state pin_conf; /* under mu: pin_done's membership */
    bool pin_failed;              /* under mu: the asked pin failed */
    bool pin_raft;                /* under mu: it becomes raft's snapshot */
    uint64_t pin_fails;           /* under mu: failed pins not yet logged */
    uint64_t pin_fail_log_ms;     /* under mu: when one was last logged */
    struct server_snap_recv *recv_head;   /* under mu: to stage */
    struct server_snap_recv *staged_head; /* under mu: for the raft thread */
    size_t n_recv;                /* under mu: recv + staged */
    uint64_t staging_index;       /* under mu: being staged now (0: none) */
    /* The durable pin (snap_pin.c): written under mu by the worker inside
     * the store gate, or by whoever has the store to itself; pin_index
     * and pin_bytes are read under mu. */
    struct backend_pin pin;       /* its read txn and saved meta pages */
    uint64_t pin_index;           /* its consistent index (0: none) */
    uint64_t pin_bytes;           /* backend_file_bytes when it was taken */
    uint64_t pin_ms;              /* server__clock_ms when it became durable */
    uint64_t pin_in_use;          /* the store's pages in use (bytes) when
                                     it became durable: what the WAL's
                                     budget is measured against */
    uint64_t in_use_extent;       /* the extent when it was last counted */
    uint64_t in_use_pins;         /* pins since (promote; like pin) */
    struct backend_pin pin_next;  /* under mu: the one the worker makes */
    uint64_t pin_gen;             /* under mu: bumped by server__pin_drop */
    /* Raft's newest snapshot: the newest durable pin, as of its index.
     * Written by the raft thread under mu; read by it freely, by others
     * under mu. */
    uint64_t newest_index;        /* its index (0: none yet) */
    uint64_t newest_term;         /* its term */
    struct raft_conf_state newest_conf; /* its members, as of newest_index */
    /* The export file (what a leader sends), raft thread only. */
    uint64_t export_index;        /* its store's index (0: none) */
    uint64_t export_term;         /* that index's term */
    struct raft_conf_state export_conf; /* its members, as of its index */
    uint64_t export_ms;           /* made or last sent (server__clock_ms) */
    pthread_mutex_t export_mu;    /* one export made at a time */
    /* raft thread only */
    uint64_t copy_asked_at;       /* applied index at the last pin request */
    uint64_t pin_retry_ms;        /* a pin failed: no growth pin before */
    uint64_t freed_pin_txnid;     /* the pin whose held pages are counted */
    uint64_t freed_scanned;       /* freelist records read up to this txn */
    uint64_t freed_pages;         /* pages they hold (server__pin_grown) */
    uint64_t freed_ms;            /* when they were last counted */
    uint64_t wal_sized_at;        /* pin_in_use the WAL was last sized to */
    uint64_t stepped_index;       /* a received MsgSnap stepped into raft */
    uint64_t installed_index;     /* last snapshot installed from a peer */
    struct server_snap_want want[SERVER_MEMBERS_MAX]; /* pending sends */
    /* The store gate: readers of s->be / s->mvcc outside the apply path
     * enter it; swapping the store waits until none is inside. */
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    int gate_users;               /* under gate_mu: readers inside */
    bool gate_closed;             /* under gate_mu: a swap is waiting/on */
};

/* One member of the initial cluster. */
struct server_member {
    uint64_t id;             /* member id (raft id) */
    char name[64];           /* --name */
    char peer_urls[1024];    /* comma-separated */
};

/* A linearizable read waiting for its ReadIndex round, then for the
 * applied index to reach it; served by a read worker. */
struct server_read_waiter {
    struct server_read_waiter *next;   /* batch or ready-queue link */
    Etcdserverpb__RangeRequest *req;   /* owned (protobuf-c unpacked) */
    server_read_check_fn check;        /* at the consistency point, or NULL */
    server_read_fn fn;                 /* answer */
    void *arg;                         /* check's and fn's */
    uint64_t index;                    /* read at applied >= index */
    int err;                           /* or fail with this */
};

/* A ReadIndex round shared by every linearizable read that arrived while
 * it was open (batching): one raft_read_index for all of them. */
struct server_read_batch {
    struct server_read_batch *next;    /* raft thread's in-flight list */
    uint64_t ctx;                      /* request context (unique) */
    bool requested;                    /* raft_read_index accepted it */
    uint64_t asked_tick;               /* tick of the last request */
    uint64_t created_ms;               /* for the request timeout */
    struct server_read_waiter *waiters; /* the reads it serves */
};

/* The raft node: the consensus state machine, the inbox that feeds it and
 * the way out to peers (raft_node.c, raft_ready.c, raft_open.c, peers.c).
 * "Raft thread" fields belong to whoever holds raft_mu (see server.h,
 * "Execution contexts and lock order"). */
struct server_raft_node {
    struct raft *raft;          /* the consensus state machine */
    uint64_t ticks;             /* ticks since start */
    uint64_t applied_raft;      /* last index handed to the applier */
    uint64_t snap_index;        /* last raft snapshot (log compaction) */
    bool is_leader;             /* raft thread: this member leads */
    /* Held by whoever runs a raft pass: the raft thread, or a thread that
     * queued work while the raft thread slept (server__raft_poke).  Every
     * "raft thread" field is guarded by it. */
    pthread_mutex_t raft_mu;
    bool raft_live;             /* under raft_mu: the raft thread runs */
    _Atomic bool raft_asleep;   /* the raft thread waits for an event */
    struct server_wal_buf {     /* under raft_mu: one Ready's WAL entries */
        struct wal_entry *v;    /* (a reused buffer) */
        size_t cap;
    } raft_wb;
    pthread_mutex_t ev_mu;      /* guards the inbox, reads, ev flag */
    pthread_cond_t ev_cv;       /* wakes the raft thread */
    bool ev;                    /* something arrived */
    struct server_inbox_msg *inbox_head, *inbox_tail; /* peer messages */
    size_t inbox_n;             /* their count (<= SERVER_INBOX_MAX) */
    uint64_t inbox_dropped;     /* messages dropped on a full inbox */
    /* The transport: sends one message to its destination without
     * blocking; NULL for a single member. */
    void (*send_fn)(void *arg, const struct raft_msg *m);
    void *send_arg;
    struct server_report reports[SERVER_MEMBERS_MAX * 3]; /* under ev_mu */
    size_t n_reports;
    /* A Ready whose WAL write found no room on a full disk (raft_ready.c
     * "Held"): kept and written again on later passes; until then raft
     * takes nothing else (no tick, step or proposal). */
    struct server_held_ready {
        bool held;
        struct raft_ready rd;   /* raft's, valid until raft_advance */
        bool early;             /* its messages went out already */
        bool apply_first;       /* its committed entries too */
        bool new_lead;
        uint64_t retry_ms;      /* the next try */
    } held;
};

/* Linearizable reads: the ReadIndex batches (read_index.c) and the read
 * workers that serve the answered ones (read.c). */
struct server_reads {
    struct server_read_batch *read_open;     /* under ev_mu: batch
                                              * accepting readers */
    struct server_read_batch *read_inflight; /* raft thread: asked */
    uint64_t read_ctx;          /* under ev_mu: last batch ctx */
    struct server_read_waiter *ready_head, *ready_tail; /* under ready_mu */
    pthread_mutex_t ready_mu;   /* the read workers' queue */
    pthread_cond_t ready_cv;
    pthread_t read_workers[2];  /* serve answered linearizable reads */
    int n_read_workers;
    bool readers_stop;          /* under ready_mu */
    /* Reads enqueued and not yet served (<= SERVER_READS_MAX): added to
     * under ev_mu, taken from by the read workers. */
    _Atomic size_t pending;
};

/* A task runner (task.c): an intrusive FIFO of posted tasks, run one at
 * a time on its thread holding no server lock.  A member has two:
 * cetcd-task (server_task_post) and cetcd-slow (server_task_post_slow). */
struct server_tasks {
    pthread_mutex_t mu;        /* a leaf: guards the fields below */
    pthread_cond_t cv;         /* signalled on post and stop */
    struct server_task *head;  /* oldest posted, run next */
    struct server_task *tail;  /* newest posted */
    bool stop;                 /* server_stop: the thread exits */
    bool started;              /* the thread runs (joined at stop) */
    bool inited;               /* mu and cv exist (destroyed by drain) */
    pthread_t thread;          /* cetcd-task or cetcd-slow */
};

/* task.c: both runners started in server_start.  server_stop stops the
 * threads first
 * (no task runs on a member being taken apart) and drains last, after the
 * waiters and the watch hub, whose callbacks may still post: what is left
 * then runs with stopping = true. */
int server__tasks_start(struct server *s);
void server__tasks_stop(struct server *s);
void server__tasks_drain(struct server *s);

/* The store's watch hub and its driver (watchers.c). */
struct server_watch {
    struct watch_hub *hub;      /* lives from boot to stop, across swaps */
    pthread_rwlock_t rw;        /* read: a hub call; write: closing it */
    pthread_mutex_t mu;         /* orders deliveries; guards held */
    bool tentative;             /* apply thread: the batch committing now
                                 * is tentative (apply.c) */
    struct mvcc_event *held;    /* a tentative batch's events, until it */
    size_t n_held, held_cap;    /* is durable (server__watch_release) */
    mvcc_rev held_rev;
    bool held_lost;             /* copying them failed: re-sync instead */
    struct arena held_arena;    /* their bytes */
    pthread_t thread;           /* cetcd-watch: sync steps and ticks */
    pthread_mutex_t kmu;        /* with kcv: wakes it */
    pthread_cond_t kcv;
    bool kicked, stop, started; /* under kmu */
    uint64_t leader_look_ms;    /* cetcd-watch: the next leader look */
    unsigned no_leader_looks;   /* cetcd-watch: looks in a row without */
};

/* watch_size.c: the hub's fragmentation sizes (watch_options), arg = the
 * server. */
size_t server__watch_event_size(const struct mvcc_event *ev, void *arg);
size_t server__watch_base_size(const struct watch_response *r, void *arg);

/* The hub mark of streams that require a leader (server_watch_open). */
#define SERVER__WATCH_MARK_LEADER 1u

struct server {
    struct server_config cfg;   /* copy of the config (strings borrowed) */
    char member_dir[4096];      /* <data-dir>/member */
    uint64_t member_id;         /* from peer URLs + cluster token */
    uint64_t cluster_id;        /* from the member ids */
    _Atomic uint64_t term;      /* raft term (bumped at each start) */

    struct wal *wal;            /* the raft_mu holder's after start */
    bool wal_existed;           /* server__wal_open found a WAL (restart) */
    bool wal_seg_fixed;         /* CETCD_TEST_WAL_SEGMENT_BYTES: segments of
                                   that size, not sized to the store */
    struct backend *be;         /* LMDB environment */
    struct mvcc_store *mvcc;    /* the multi-version store */

    struct server_queue proposals; /* API threads -> raft thread */
    struct server_queue committed; /* raft thread -> apply thread */
    struct server_wait wait;       /* request id -> waiter */
    _Atomic uint64_t next_id;      /* request ids */

    pthread_t log_thread;       /* the raft thread: ticks, Ready, WAL */
    pthread_t apply_thread;     /* LMDB apply loop */
    pthread_mutex_t apply_mu;   /* held by whoever applies (see apply.c) */
    pthread_t house_thread;     /* periodic chores (RSS trim) */
    pthread_mutex_t house_mu;   /* with house_cv: wakes it at stop */
    pthread_cond_t house_cv;
    bool threads_started;       /* both threads running */
    bool house_started;         /* house_thread running */

    _Atomic uint64_t committed_index; /* durable in the WAL */
    _Atomic uint64_t applied_index;   /* applied to LMDB (committed txn) */
    pthread_mutex_t applied_mu;       /* with applied_cv: readers wait */
    pthread_cond_t applied_cv;        /* broadcast after each apply batch */
    _Atomic bool stopping;            /* server_stop has begun */
    int fatal;                        /* log/apply thread hit an I/O error */

    _Atomic bool compacted_at_zero; /* apply thread writes: see do_compact */
    uint64_t compact_began_ns;  /* apply_mu: the pending compaction's start */
    struct arena apply_arena;   /* apply thread: responses of one batch */
    struct arena spec_arena;    /* responses of the tentative batch */
    struct {                    /* speculative apply, see apply.c */
        pthread_mutex_t mu;     /* guards the fields below */
        bool active;            /* a tentative batch is out */
        bool applied;           /* ... the applier has committed it */
        bool durable;           /* ... raft has committed it */
        uint64_t last;          /* ... its last index */
        struct {                /* ... its responses, once applied */
            void *ps;
            size_t n;
            uint64_t last;
        } done;
    } spec;
    bool spec_ok;               /* raft thread: threads run, may speculate */
    _Atomic bool lone_voter;    /* raft's config: this member, alone, votes
                                 * (written by the raft thread) */

    /* --- raft (raft thread unless noted) --- */
    struct server_member members[SERVER_MEMBERS_MAX]; /* initial cluster */
    size_t n_members;
    _Atomic uint64_t lead;      /* current leader (any thread reads) */
    /* When this member last became leader (server__clock_ms; 0: never);
     * kept after it steps down.  Written by the raft thread. */
    _Atomic uint64_t lead_elected_ms;
    struct server_raft_node node; /* raft, its inbox (raft_node.c) */
    struct server_reads reads;    /* ReadIndex rounds and read workers */
    struct peer_transport *transport; /* NULL for a single member */

    struct server_snap snap;    /* store snapshots (snapshot.c) */

    struct server_ms *ms;       /* membership (members.c) */

    _Atomic uint64_t stat_proposals;     /* see server_stats */
    _Atomic uint64_t stat_leader_changes; /* new leaders (server_metrics) */
    _Atomic uint64_t stat_proposals_failed; /* timed out (server_metrics) */
    _Atomic uint64_t stat_wal_syncs;
    _Atomic uint64_t stat_apply_batches;
    _Atomic uint64_t db_used;  /* the store's pages in use, the quota's
                                * measure (quota.c) */
    _Atomic bool disk_low;     /* backend_space_low after the last commit
                                * (quota.c) */
    bool apply_full;           /* under apply_mu: a full disk stopped the
                                * applier (apply.c: stall) */
    bool apply_tentative;      /* apply thread: the batch being applied is
                                * tentative (apply.c; apply_kv.c leaves a
                                * physical compaction to the next batch) */
    struct server_alarms alarms; /* alarm.c */
    /* --auto-compaction-*: the house thread's compactor (compactor.c). */
    struct server_compactor {
        uint64_t next_ms;          /* its next look (0: not started) */
        int64_t *revs;             /* periodic: revisions seen every
                                    * retry interval, oldest first */
        size_t n_revs;             /* (at most period / retry + 1) */
        uint64_t last_ok_ms;       /* periodic: last compaction done */
        uint64_t base_ms;          /* periodic: wait since last_ok_ms */
        int64_t prev;              /* revision: last revision compacted */
        int64_t target;            /* the compaction in flight, or 0 */
        uint64_t started_ms;       /* when target was proposed (log) */
        _Atomic int result;        /* its answer: 1 = pending, else ERR_* */
    } compactor;
    struct server_leases leases; /* lease.c, lease_primary.c */
    /* Bumped by the raft thread each time this member becomes leader:
     * the lessor is primary for one epoch at a time (lease.h). */
    _Atomic uint64_t lead_epoch;
    /* Written with it (before the bump): the raft log's last index when
     * this member became leader, its term's first entry or later.  The
     * lessor is promoted only once it has applied that far: everything
     * committed under earlier leaders is applied then (lease.h). */
    _Atomic uint64_t lead_index;
    _Atomic uint64_t lease_id_next; /* server_lease_id_next's counter */
    struct server_appliers appliers; /* the apply chain (applier.h) */
    /* The auth store and simple tokens (auth_apply.c); the store is
     * changed by the apply side only, read by any thread. */
    struct server_auth {
        backend_bucket bucket;       /* "auth" */
        struct auth_store *store;
        struct auth_tokens *tokens;
    } auth;
    struct server_watch watch;   /* the watch hub (watchers.c) */
    struct server_tasks tasks;   /* cetcd-task and its queue (task.c) */
    struct server_tasks slow;    /* cetcd-slow and its queue (task.c) */
    /* Online defragmentation (defrag.c): its thread and waiting requests. */
    struct server_defrag {
        pthread_mutex_t mu;        /* the fields below */
        pthread_t thread;          /* cetcd-defrag, while live */
        bool live;                 /* under mu: started, not joined */
        bool running;              /* under mu: the thread takes requests */
        bool swapping;             /* apply_mu held: the store is being
                                    * replaced by its defragmented copy
                                    * (same data: leases stay in memory) */
        struct mvcc_store *replaced; /* while swapping: the store the
                                    * copy replaces (its index entries in
                                    * memory are shared, mvcc.h) */
        struct server_defrag_waiter *next; /* under mu: answered after the
                                    * next defragmentation */
        size_t n_next;             /* under mu: their count */
        atomic_bool prev_linked;   /* db/prev.mdb, the replaced store's
                                    * file, exists until the new store's
                                    * pin is durable (defrag.c) */
        atomic_bool dir_unsynced;  /* under mu when set to false: db/ holds
                                    * a rename not yet fsynced */
    } defrag;
};

/* The real clock: CLOCK_MONOTONIC in milliseconds.  Server code reads the
 * time through server__clock_ms (the seam tests drive); this one is for
 * the default clock and for code with no struct server at hand. */
static inline uint64_t server__now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline uint64_t server__now_ms(void)
{
    return server__now_ns() / 1000000u;
}

/* The server's clock (server.h, struct server_clock): cfg.clock when the
 * caller gave one, else the real clock.  Every timer of the server reads
 * it: request deadlines and their expiry, ReadIndex round timeouts, raft
 * ticks, the house thread's schedule, leader-election times, snapshot
 * resends and export lifetimes.  A branch and no lock: it is on the put
 * path (server_propose). */
static inline uint64_t server__clock_ms(const struct server *s)
{
    const struct server_clock *c = &s->cfg.clock;
    return c->now_ms != NULL ? c->now_ms(c->ctx) : server__now_ms();
}

/* etcd's request timeout: 5 s + 2 election timeouts. */
static inline uint64_t server__request_timeout_ms(const struct server *s)
{
    return 5000 + 2 * s->cfg.election_ms;
}

/* watchers.c: the watch hub.  server__watch_store_opened (after each
 * mvcc_store_open of the member's store: opens the hub, or points it at
 * the new store) installs the observer; server__watch_release delivers a
 * tentative batch's events once it is durable (apply.c); start/stop the
 * driver thread; server__watch_close at stop. */
int server__watch_store_opened(struct server *s);
/* auth_apply.c: the auth store's load at each store open, its reload after
 * an aborted batch, its end at stop. */
int server__auth_load(struct server *s);
void server__auth_reload(struct server *s);
void server__auth_close(struct server *s);

void server__watch_release(struct server *s);
int server__watch_start(struct server *s);
void server__watch_stop(struct server *s);
void server__watch_close(struct server *s);

/* house.c: the housekeeping thread (server_start starts it). */
void *server__house_main(void *arg);

/* timeout.c, house thread: fails the requests past their deadline with
 * the error etcd gives for their likely cause (see timeout.h). */
void server__timeouts_expire(struct server *s, uint64_t now_ms);

/* peer_hash.c: a PeerHashResponse's bytes into out (not out->err);
 * returns its error (0, ERR_COMPACTED, ERR_FUTURE_REV) or ERR_IO
 * (undecodable, or another error code). */
struct server_peer_hash;
int server__peer_hash_decode(const uint8_t *reply, size_t len,
                             struct server_peer_hash *out);

/* peers.c: the transport, on the peer listener srv (not started yet). */
int server__peers_open(struct server *s, struct rpc_server *srv);
void server__peers_close(struct server *s);

/* raft_node.c: the raft thread. */
void *server__raft_main(void *arg);
/* raft_node.c: wake the raft thread (new proposal, message, read). */
void server__kick(struct server *s);
/* raft_node.c: work was queued for raft (a proposal, peer messages): run
 * the raft pass on the calling thread when the raft thread sleeps and
 * nobody else runs one, else wake the raft thread.  The caller must hold
 * no lock of the server's (the pass takes them, and may call waiters'
 * callbacks). */
void server__raft_poke(struct server *s);
/* raft_node.c: server__raft_poke at the end of the calling thread's turn
 * (util/thread.h: an rpc loop, after every call it read this turn, so
 * their proposals share one pass and one fdatasync), or now on a thread
 * without one.  Nothing on a turn's thread may wait for the proposal. */
void server__raft_poke_turn(struct server *s);
/* raft_node.c: server__raft_receive queues a peer message (copied) for
 * the raft thread (any thread); the caller pokes raft (server__raft_poke)
 * once its batch is queued.  Errors: ERR_FULL (SERVER_INBOX_MAX messages
 * wait already: the message is dropped and counted), ERR_NOMEM, the
 * encoder's. */
int server__raft_receive(struct server *s, const struct raft_msg *m);
/* raft_open.c: opens or creates the WAL (s->wal); server_start. */
int server__wal_open(struct server *s);
/* raft_open.c: set up raft from the WAL (restart) or the initial cluster;
 * called by server_start before the threads run. */
int server__raft_open(struct server *s);
void server__raft_close(struct server *s);
/* force_new.c: --force-new-cluster on a restart (see its header).  Drops
 * the entries of ents (*n of them, above the applied index, data owned by
 * the caller) past hs->commit, freeing their data; writes to the WAL and
 * syncs the conf change entries that leave this member alone and a
 * HardState committing them; returns them in added (at least
 * SERVER_FORCE_ENTRIES_MAX slots; *n_added of them, data allocated, the
 * caller frees) and sets hs->commit to the last.  Errors: ERR_CORRUPT (a
 * conf change that does not decode), ERR_NOMEM, the WAL's. */
#define SERVER_FORCE_ENTRIES_MAX (2 * RAFT_MAX_MEMBERS + 1)
int server__force_new_cluster(struct server *s, struct raft_hard_state *hs,
                              struct raft_entry *ents, size_t *n,
                              struct raft_entry *added, size_t *n_added);
/* raft_ready.c, raft_mu held: handles every Ready raft has (see its
 * header); an ERR_* is fatal (WAL, store).  wb is the reused WAL buffer,
 * freed by server__wal_buf_free. */
int server__raft_ready(struct server *s, struct server_wal_buf *wb);
/* raft_ready.c, raft_mu held: a Ready waits for room in the WAL (raft
 * takes no tick, step or proposal meanwhile). */
bool server__raft_held(const struct server *s);
/* compactor.c, house thread: the auto-compaction clock (every pass);
 * server__compactor_free at stop. */
void server__compactor_house(struct server *s, uint64_t now_ms);
void server__compactor_free(struct server *s);
void server__wal_buf_free(struct server_wal_buf *wb);
/* raft_ready.c, raft_mu held: s->lone_voter := raft's configuration has
 * this member as its only voter (after start, a conf change, a snapshot
 * install). */
void server__lone_voter_update(struct server *s);
/* snapshot.c: server__snap_indexes lists the indexes of the files named
 * "<index as 16 lower-case hex digits><suffix>" in dir, ascending, into
 * *out (mem_free it; NULL when none).  A missing dir lists nothing.
 * Errors: ERR_NOMEM, the opendir errors. */
int server__snap_indexes(const char *dir, const char *suffix,
                         uint64_t **out, size_t *n_out);
/* read_index.c: queue a linearizable read for the next ReadIndex round
 * (batched with the reads arriving meanwhile; any thread).  0,
 * ERR_TOO_MANY_REQUESTS (SERVER_READS_MAX wait already),
 * ERR_STOPPED or ERR_NOMEM. */
int server__read_enqueue(struct server *s, struct server_read_waiter *w);
/* read_index.c, raft_mu held: start ReadIndex rounds (the open batch, and
 * re-asks), fail rounds past the request timeout. */
void server__reads_take(struct server *s);
struct raft_ready;
/* read_index.c, raft_mu held: hand the batches rd's read states answer to
 * the read workers. */
void server__reads_answer(struct server *s, const struct raft_ready *rd);
/* read_index.c, raft_mu held: fail the rounds asked of raft (a leader
 * change), or those and the open batch (stop), with err. */
void server__reads_fail_inflight(struct server *s, int err);
void server__reads_fail_all(struct server *s, int err);
/* read.c: answered reads go to the read workers. */
void server__reads_ready(struct server *s, struct server_read_waiter *w);
int server__read_workers_start(struct server *s);
void server__read_workers_stop(struct server *s);
/* apply.c */
void *server__apply_main(void *arg);
/* applier.c: apply one decoded request inside the open mvcc batch
 * through the apply chain (applier.h); returns 0 and the response in
 * *msg_out (arena memory), or an ERR_*. */
/* raft_ready.c: does the encoded cetcdpb.InternalRequest p[0..n) carry a
 * Compaction (field 6)?  A walk over its top-level fields, no decoding;
 * true also for bytes that do not parse (the applier decides what they
 * are).  Such entries are not applied speculatively. */
bool server__entry_compacts(const uint8_t *p, size_t n);
/* apply.c: applies a chain of n committed entries in one batch. */
int server__apply_entries(struct server *s, struct server_entry *head,
                          size_t n, bool wake_waiters);
/* apply.c: hand a durable batch over for applying: applied at once by the
 * calling (log) thread when nothing else is pending, else queued. */
void server__apply_handoff(struct server *s, struct server_entry *head,
                           struct server_entry *tail, size_t n);
/* apply.c, raft thread: speculative apply of a lone voter's entries that
 * are written to the WAL but not yet fsynced.  server__spec_begin queues
 * the chain as tentative if the applier is idle (false: not taken, the
 * caller keeps it); server__spec_last is the last index of the tentative
 * batch still out (0: none); server__spec_durable says raft has committed
 * it (its waiters are then woken by whoever finishes last). */
bool server__spec_begin(struct server *s, struct server_entry *head,
                        struct server_entry *tail, size_t n);
uint64_t server__spec_last(struct server *s);
void server__spec_durable(struct server *s);
struct mvcc_batch;
int server__apply_request(struct server *s, struct mvcc_batch *b,
                          const Cetcdpb__InternalRequest *req,
                          struct arena *a, ProtobufCMessage **msg_out);
/* tick_advance.c: --initial-election-tick-advance.  The raft loop calls
 * it after its ticks on each pass, first with until_ms = UINT64_MAX, then
 * with what the last call returned, until that is 0 (done).  Raft thread,
 * raft_mu held. */
uint64_t server__tick_advance(struct server *s, uint64_t until_ms);
/* slow_apply.c: logs etcd's "took too long" warning when took_ns is over
 * cfg.warn_apply_ns (--experimental-warning-apply-duration).  Apply
 * thread. */
void server__warn_slow_apply(const struct server *s,
                             const Cetcdpb__InternalRequest *req, int err,
                             const ProtobufCMessage *resp, uint64_t took_ns);

/* --- defrag.c: online defragmentation (see its header) ------------------ */
void server__defrag_init(struct server *s);
/* server_stop: waits for a running defragmentation (it gives up at its
 * next step) and refuses the waiting ones. */
void server__defrag_stop(struct server *s);
void server__defrag_free(struct server *s);
/* Start-up, before the store opens: removes a copy left by a
 * defragmentation that did not finish (and notes a db/prev.mdb left by
 * one that swapped but whose new store was not pinned yet). */
void server__defrag_cleanup(struct server *s);
/* snap_pin.c, before a pin file names the store's file: a defragmented
 * store renamed into db/ during the switch-over (no fsync while requests
 * waited) has its directory fsynced first, so that the pin's file is the
 * one db/data.mdb names after a power loss.  Errors: ERR_IO. */
int server__defrag_dir_settle(struct server *s);
/* snap_pin.c, once a pin of the current store is durable and the older
 * pin files are gone: removes db/prev.mdb (the file the older pin
 * restored), which frees the replaced store's blocks. */
void server__defrag_pinned(struct server *s);
/* Tests: SIGKILL here when CETCD_TEST_CRASH_AT names step. */
void server__crash_point(const char *step);

/* --- store.c ---------------------------------------------------------- */
/* Opens the store in dir (s->be, s->mvcc) the way the member keeps it. */
int server__store_open(struct server *s, const char *dir);
/* server__compact_step (apply.c, apply_mu held): a step of the pending
 * compaction in b (mvcc_compact_step), logging etcd's "finished scheduled
 * compaction" line when it ends. */
int server__compact_step(struct server *s, struct mvcc_batch *b,
                         size_t max_revs, bool *more);
/* server__compact_log_restored (store.c): etcd's line for the compact
 * revision found in a store just opened, if any. */
void server__compact_log_restored(struct server *s);
/* Start-up: the boot guard's check (a distrusted store is set aside and
 * rebuilt, server__snap_rebuild), then server__store_open of <member>/db. */
int server__store_boot(struct server *s);
/* Closes the store; a clean stop (no fatal error, synced) marks it clean
 * for the boot guard. */
void server__store_close(struct server *s);

/* --- snapshot.c: store snapshots -------------------------------------
 * Threads: _open/_close/_recover/_rebuild before/after the threads run;
 * _tick, _want_send and _install on the raft thread; _received on a gRPC
 * thread; the gate from any thread. */
/* Creates <member>/snap and the worker state (not the thread). */
int server__snap_open(struct server *s);
/* Starts the worker thread (after the store is open). */
int server__snap_start(struct server *s);
/* Stops the worker and frees queued work (after the raft thread exits). */
void server__snap_close(struct server *s);
/* A store the boot guard distrusts was moved aside: rebuild db_dir from
 * the newest pin (the set-aside file with its pinned meta pages
 * restored), else from the newest received snap file, else start empty
 * (the whole WAL is replayed). */
int server__snap_rebuild(struct server *s, const char *db_dir);
/* Before raft starts: a store behind the WAL's newest snapshot marker (a
 * crash while a received snapshot was installed) is restored from the
 * marker's snap file; then the store is pinned (snap_pin.c) before
 * anything writes to it. */
int server__snap_recover(struct server *s);
/* Raft thread, each loop pass before the Ready: periodic pins (every
 * --snapshot-count entries, or once the store's file grew since the last
 * one), their results (raft snapshot, WAL marker, log compaction, WAL
 * release), exports and pending sends, staged received snapshots
 * (stepped into raft). */
void server__snap_tick(struct server *s);
/* The metadata (index, term, ConfState as of the index) of raft's newest
 * snapshot (the newest durable pin): 0, or ERR_NOTFOUND when there is
 * none yet.  Any thread. */
int server__snap_newest(struct server *s, struct raft_snapshot_meta *out);
/* Any thread but the raft thread (tests; the worker): a compacted copy of
 * the store at index >= target, as a leader sends it, at path (its
 * consistent index and members as of it in *index_out, *conf_out; the
 * file is the caller's).  Errors: ERR_TIMEOUT (target not applied in
 * 10 s), ERR_STOPPED, ERR_CORRUPT, and those of the copy. */
int server__snap_export(struct server *s, uint64_t target, const char *path,
                        uint64_t *index_out, struct raft_conf_state *conf_out);
/* Waits (up to 10 s) until the member applied (and published) index. */
bool server__snap_wait_applied(struct server *s, uint64_t index);
/* Any thread but the raft thread (tests): asks the worker for a pin at
 * >= the applied index and waits until raft's snapshot is at least there.
 * Errors: ERR_TIMEOUT. */
int server__snap_pin_now(struct server *s);

/* --- snap_pin.c: the store's durable points (see its header) --------- */
/* A pin file read back: meta is mem_malloc'd (the caller frees it). */
struct server_pin_file {
    uint64_t index;   /* the pinned state's consistent index */
    uint64_t txnid;   /* its LMDB txn id */
    uint64_t dev;     /* st_dev of the pinned data.mdb */
    uint64_t ino;     /* st_ino of it */
    uint8_t *meta;    /* its two meta pages */
    size_t meta_len;  /* bytes at meta */
};
/* Reads and checks one pin file.  Errors: ERR_CORRUPT, ERR_NOMEM, I/O. */
int server__pin_decode(const char *path, struct server_pin_file *out);
/* The newest valid pin file in <member>/snap.  Errors: ERR_NOTFOUND. */
int server__pin_file_read(const struct server *s,
                          struct server_pin_file *out);
/* Pins the store now, durably, with nobody else writing it (start-up, or
 * a store swap with apply_mu held and the gate closed). */
int server__pin_locked(struct server *s);
/* Worker thread: pins the store (apply_mu only while the pin is taken;
 * the sync runs beside the writer), waits until the pinned index is
 * applied, then writes the pin file and releases the previous pin.
 * *index_out, *conf_out: the pinned state's index and members.  Errors:
 * ERR_STOPPED (stopping, or the store was replaced meanwhile), those of
 * the backend and the file. */
int server__pin_worker(struct server *s, uint64_t *index_out,
                       struct raft_conf_state *conf_out);
/* Ends the pins' read txns (before the store is closed); their files stay
 * (a power loss before a new pin restores the file's pin). */
void server__pin_drop(struct server *s);
/* server__pin_drop and removes every pin file (the store is replaced). */
int server__pin_forget(struct server *s);
/* Raft thread: a new pin is due: the store has none (a defragmentation
 * swapped it in), the pages freed since the pin (which it holds back from
 * reuse) passed a budget proportional to the store, or its file grew
 * enough since the pin (snap_pin.c). */
bool server__pin_grown(struct server *s);
/* Rebuild: db_dir from the newest pin (see server__snap_rebuild).
 * ERR_NOTFOUND: no usable pin (logged when one was there). */
int server__pin_restore(struct server *s, const char *db_dir);

/* Raft thread: raft wants snapshot message m sent to m->to. */
void server__snap_want_send(struct server *s, const struct raft_msg *m);
struct raft_snapshot;
/* Raft thread, Ready step 1: install the snapshot raft accepted (WAL
 * marker, then the staged store replaces the store).  ERR_* is fatal. */
int server__snap_install(struct server *s, const struct raft_snapshot *snap);
/* Peer transport (gRPC thread): a verified snapshot file arrived. */
int server__snap_received(struct server *s, const struct raft_msg *m,
                          const char *path);
/* The store gate: enter before using s->be / s->mvcc outside the apply
 * path (readers), leave when done.  Never nest. */
void server__store_enter(struct server *s);
void server__store_leave(struct server *s);
/* server.c: server_header_fill without the gate (the caller is inside it
 * or holds apply_mu). */
void server__header_fill(struct server *s, Etcdserverpb__ResponseHeader *h);
/* apply.c: with apply_mu held, apply what the apply thread has queued. */
void server__apply_drain_locked(struct server *s);

/* members.c: the members store and membership changes. */
struct raft_conf_state;
struct raft_entry;
/* Opens the members buckets and loads them (seeding a new cluster from
 * --initial-cluster or the join answer), adopts the stored member and
 * cluster ids, refuses a removed member (ERR_MEMBER_REMOVED) and rewrites
 * s->members with the current members.  Start-up, before the threads. */
int server__members_open(struct server *s);
/* The store was replaced (a snapshot was installed or restored): re-open
 * the buckets on s->be and reload the table.  Call where opening buckets
 * is allowed (nobody else uses the new store yet).  At start-up
 * (starting: before the threads) s->members follows the new table; later
 * the peer transport does (members the snapshot added, changed or
 * removed). */
int server__members_reload(struct server *s, bool starting);
/* The membership stored in the store be (a snapshot copy that only the
 * caller uses): its voters and learners as raft's ConfState, which is the
 * one as of the store's consistent index.  Opens the "members" bucket on
 * be.  Errors: ERR_NOTFOUND (no voter stored: not a cetcd store),
 * ERR_CORRUPT (a record that does not decode, too many members), and
 * the backend's. */
struct backend;
int server__members_conf_read(struct backend *be,
                              struct raft_conf_state *cs_out);
/* Any thread: id is a learner in the members store. */
bool server__member_is_learner(struct server *s, uint64_t id);
/* After the threads stopped: fails what still waits, frees the state. */
void server__members_close(struct server *s);
/* raft thread: the membership as raft's initial configuration. */
void server__members_conf(struct server *s, struct raft_conf_state *cs);
/* raft thread, each loop pass: propose queued conf changes, start and
 * finish leader transfers. */
void server__members_raft_pass(struct server *s);
/* raft thread: a committed CONF_CHANGE entry e; applies it to raft and
 * points data and len at what the applier gets (the change's InternalRequest
 * context, borrowed from e; length 0 when there is nothing to apply). */
void server__conf_change_committed(struct server *s,
                                   const struct raft_entry *e,
                                   const uint8_t **data, size_t *len);
/* apply thread: a MemberAttr or MemberChange request inside batch b.
 * The table changes at once (later entries of the batch see it) and the
 * record is written in b; what the change does outside the store (its
 * log line, the peer transport, the published and removed flags) waits
 * for the batch's fate: server__members_batch_end.  Returns 0 or a
 * storage error. */
struct mvcc_batch;
int server__members_apply(struct server *s, struct mvcc_batch *b,
                          const Cetcdpb__InternalRequest *req);
/* apply thread, after each apply batch: committed, the staged effects of
 * its member changes run in order; aborted (a full disk: the batch is
 * retried), they are dropped and the table is reloaded from the store,
 * so a change takes effect once, when it is durable.  Cheap when the
 * batch had no member request. */
void server__members_batch_end(struct server *s, bool committed);
/* house thread: publish this member's name and client URLs until done. */
void server__members_house(struct server *s);
/* Any thread: id was removed from the cluster (the members store says). */
bool server__member_id_removed(struct server *s, uint64_t id);
/* Peer transport: member `by` refused us as removed; this member stops
 * (server_removed turns true; logged once). */
void server__member_removed_by(struct server *s, uint64_t by);

/* quota.c: server__quota_log says at start what the quota is if it is not
 * the default; server__quota_update reads the store's pages in use (at
 * each store open, and on the apply thread after each commit). */
void server__quota_log(const struct server *s);
void server__quota_update(struct server *s);
/* quota.c: the quota in bytes, the default filled in (negative: none). */
int64_t server__quota_bytes(const struct server *s);
/* quota.c: the quota alone, no alarm (the applier's check: it must not
 * propose). */
bool server__quota_room(struct server *s, uint64_t cost);

#endif
