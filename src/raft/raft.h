/*
 * raft.h - the consensus core of cetcd, and its manual.
 *
 * PURPOSE
 * A Raft state machine modelled on etcd's raft library (RawNode): leader
 * election with randomized timeouts, PreVote, CheckQuorum with a leader lease,
 * log replication with flow control, snapshots, ReadIndex, learners, one-step
 * and joint-consensus membership changes, and leader transfer.
 *
 * It does no I/O, reads no clock, starts no thread, keeps no globals and draws
 * no randomness of its own.  The caller feeds it ticks (raft_tick), messages
 * from peers (raft_step), proposals (raft_propose...) and a seed, and takes
 * back Ready batches (raft_ready) which it must process and then acknowledge
 * (raft_advance).
 *
 * THREADS AND LIFETIME
 * A struct raft is owned by ONE thread (the server's raft thread).  Nothing
 * here is thread-safe.  The caller allocates raft_sizeof() bytes, calls
 * raft_init(), and releases internals with raft_close() before freeing.
 *
 * STORAGE MODEL
 * The whole log since the last compaction lives in memory inside struct raft
 * (like etcd's MemoryStorage + unstable log together).  Entries with index
 * <= "stabled" are those the caller has persisted ("stable log"); the rest
 * are the "unstable log" and are handed out in Ready.entries.  On restart the
 * caller passes what it persisted (HardState, snapshot, entries after the
 * snapshot) in struct raft_config.  The caller decides when to take a
 * state-machine snapshot (raft_snapshot_create) and to drop old entries
 * (raft_log_compact); a leader sends its latest snapshot to followers whose
 * needed entries are gone.
 *
 * THE READY CONTRACT
 *   while (raft_has_ready(r)) {
 *       struct raft_ready rd;
 *       raft_ready(r, &rd);
 *       1. persist rd.snapshot (if any), then rd.entries (an entry at index i
 *          replaces every persisted entry >= i), then rd.hard_state (if
 *          rd.has_hard_state); fsync once if rd.must_sync;
 *       2. send rd.msgs (ALL of them only after step 1 is durable: votes and
 *          append acknowledgements promise persisted state);
 *       3. apply rd.snapshot then rd.committed in order (for CONF_CHANGE*
 *          entries decode with raft_conf_change_decode and call
 *          raft_apply_conf_change);  serve rd.read_states once applied >=
 *          their index;
 *       4. raft_advance(r, &rd);
 *   }
 * Everything rd points to is owned by raft and stays valid until
 * raft_advance(); copy what you keep longer.  Between raft_ready() and
 * raft_advance() the only calls allowed are raft_apply_conf_change(),
 * raft_status() and the codecs; every other mutator returns ERR_BUSY.
 * The leader counts its own log toward commit only for entries acknowledged
 * through raft_advance(), so a commit never depends on unpersisted state.
 *
 * ERRORS
 * Functions return 0 or a negative ERR_* code from util/err.h.  Messages and
 * snapshots from the network are input: bad ones are rejected with an error
 * or ignored, never asserted on.  Out-of-memory inside a state transition
 * aborts the process (a half-applied transition cannot be rolled back).
 */
#ifndef CETCD_RAFT_RAFT_H
#define CETCD_RAFT_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t raft_id;    /* member id; 0 means "none" */
typedef uint64_t raft_term;  /* election term */
typedef uint64_t raft_index; /* log position, first entry is 1 */

/* Upper bound on distinct members (voters + learners, both halves of a joint
 * configuration).  etcd clusters have 1-7 voters plus a few learners. */
#define RAFT_MAX_MEMBERS 16

/* Upper bound on terms: raft_step refuses a message carrying a larger term
 * (ERR_INVAL), so that no input can make a term wrap around to 0 when a
 * member campaigns (found by fuzz_raft with a term of 2^64-1). */
#define RAFT_TERM_MAX (UINT64_MAX / 2)

/* Upper bound on log indexes, for the same reason: raft_step refuses a
 * message whose index, commit, reject hint, entries or snapshot go past
 * it (found by fuzz_raft: a snapshot at index 2^64-1 made index + 1 wrap
 * to 0 and the Ready loop never end). */
#define RAFT_INDEX_MAX (UINT64_MAX / 2)

/* Upper bound on read-index requests waiting for a heartbeat round. */
#define RAFT_MAX_PENDING_READS 4096

enum raft_role {
    RAFT_FOLLOWER = 0,
    RAFT_PRE_CANDIDATE = 1,
    RAFT_CANDIDATE = 2,
    RAFT_LEADER = 3,
};

enum raft_entry_type {
    RAFT_ENTRY_NORMAL = 0,
    RAFT_ENTRY_CONF_CHANGE = 1,    /* data: raft_conf_change_encode, v1 */
    RAFT_ENTRY_CONF_CHANGE_V2 = 2, /* data: raft_conf_change_encode, v2 */
};

/* One log entry; the WAL stores exactly (index, term, type, data). */
struct raft_entry {
    raft_term term;    /* term of the leader that created it */
    raft_index index;  /* position in the log */
    uint8_t type;      /* enum raft_entry_type */
    uint32_t len;      /* bytes of data */
    uint8_t *data;     /* payload; owner depends on where the entry sits */
};

struct raft_hard_state {
    raft_term term;    /* current term */
    raft_id vote;      /* who we voted for in term, 0 if nobody */
    raft_index commit; /* highest index known committed */
};

/* Membership as persisted in snapshots and returned by conf changes. */
struct raft_conf_state {
    uint32_t n_voters;               /* incoming (or only) voters */
    uint32_t n_voters_outgoing;      /* non-zero only while joint */
    uint32_t n_learners;             /* learners */
    uint32_t n_learners_next;        /* voters becoming learners on leave */
    raft_id voters[RAFT_MAX_MEMBERS];
    raft_id voters_outgoing[RAFT_MAX_MEMBERS];
    raft_id learners[RAFT_MAX_MEMBERS];
    raft_id learners_next[RAFT_MAX_MEMBERS];
    bool auto_leave;                 /* leave joint automatically */
};

struct raft_snapshot_meta {
    raft_index index;              /* last index covered */
    raft_term term;                /* term of that entry */
    struct raft_conf_state conf;   /* membership as of index */
};

struct raft_snapshot {
    struct raft_snapshot_meta meta; /* where the snapshot sits */
    uint8_t *data;                  /* state-machine image (opaque) */
    size_t len;                     /* bytes of data */
};

enum raft_msg_type {
    RAFT_MSG_PROP = 1,           /* proposal forwarded to the leader */
    RAFT_MSG_APP = 2,            /* append entries */
    RAFT_MSG_APP_RESP = 3,       /* append ack / reject with hint */
    RAFT_MSG_VOTE = 4,           /* request vote */
    RAFT_MSG_VOTE_RESP = 5,
    RAFT_MSG_PRE_VOTE = 6,       /* would you vote for me at term+1? */
    RAFT_MSG_PRE_VOTE_RESP = 7,
    RAFT_MSG_SNAP = 8,           /* install snapshot */
    RAFT_MSG_HEARTBEAT = 9,
    RAFT_MSG_HEARTBEAT_RESP = 10,
    RAFT_MSG_TRANSFER_LEADER = 11, /* from = transferee, to the leader */
    RAFT_MSG_TIMEOUT_NOW = 12,   /* campaign now (leader transfer) */
    RAFT_MSG_READ_INDEX = 13,    /* entries[0].data = request context */
    RAFT_MSG_READ_INDEX_RESP = 14,
    RAFT_MSG_TYPE_MAX = 14,
};

/* A message between members.  Messages passed to raft_step are borrowed for
 * the call.  Messages in a Ready are owned by raft until raft_advance. */
struct raft_msg {
    uint8_t type;              /* enum raft_msg_type */
    raft_id from;              /* sender */
    raft_id to;                /* receiver */
    raft_term term;            /* sender's term (0 for PROP / READ_INDEX) */
    raft_term log_term;        /* term at index (APP, votes, reject hint) */
    raft_index index;          /* prev index (APP), ack/reject index (RESP) */
    raft_index commit;         /* leader commit (APP, HEARTBEAT) */
    raft_index reject_hint;    /* follower's hint on APP_RESP reject */
    bool reject;               /* refusal (vote or append) */
    bool campaign_transfer;    /* vote caused by leader transfer */
    size_t n_entries;          /* number of entries */
    struct raft_entry *entries; /* APP / PROP / READ_INDEX(_RESP) payload */
    const struct raft_snapshot *snapshot; /* SNAP only */
    size_t ctx_len;            /* heartbeat read-index context */
    const uint8_t *ctx;
    void *owned_;              /* private: memory released with the msg */
};

enum raft_read_only_option {
    RAFT_READ_ONLY_SAFE = 0,        /* heartbeat round confirms leadership */
    RAFT_READ_ONLY_LEASE_BASED = 1, /* trust the lease (needs check_quorum) */
};

/* Log callback: level 0 debug, 1 info, 2 warn, 3 error. */
typedef void (*raft_log_fn)(void *arg, int level, const char *line);

struct raft_config {
    raft_id id;                    /* this member; non-zero */
    int election_tick;             /* ticks; timeout is in [e, 2e) */
    int heartbeat_tick;            /* ticks; < election_tick */
    bool pre_vote;                 /* on in etcd >= 3.5 */
    bool check_quorum;             /* leader steps down w/o quorum; lease */
    uint64_t max_size_per_msg;     /* bytes of entries per APP (>= 1 entry) */
    uint32_t max_inflight_msgs;    /* APPs in flight per follower (>= 1) */
    int read_only;                 /* enum raft_read_only_option */
    bool disable_proposal_forwarding; /* followers drop proposals */
    uint64_t seed;                 /* PRNG seed for election timeouts */
    raft_log_fn logger;            /* NULL: silent */
    void *logger_arg;
    /* Restored state (all zero for a brand-new member).  conf describes the
     * membership: for a new cluster list the initial voters/learners; on a
     * restart give the snapshot's conf state (conf changes in entries past
     * applied are re-applied by the caller when they are re-delivered). */
    struct raft_conf_state conf;
    struct raft_hard_state hard_state;
    struct raft_snapshot snapshot;     /* meta.index 0 = none; data copied */
    const struct raft_entry *entries;  /* persisted entries after snapshot */
    size_t n_entries;                  /* (copied) */
    raft_index applied;                /* already applied; >= snapshot */
    /* Test-only fault seeding (RAFT_MUTATE_* bits): deliberately broken
     * Raft rules, used to prove the simulator catches them.  Honoured only
     * by the test library cetcd_raft_mutant (built with RAFT_MUTATIONS);
     * the product library refuses a non-zero value with ERR_INVAL. */
    uint32_t test_mutations;
};

/* Mutations (tests/raft/CMakeLists.txt, raft.mutation.*). */
#define RAFT_MUTATE_COMMIT_PRIOR_TERM (1u << 0) /* count replicas of any
                                                   term (Raft Figure 8) */
#define RAFT_MUTATE_VOTE_ANY_LOG (1u << 1)      /* no up-to-date check */
#define RAFT_MUTATE_NO_TRUNCATE (1u << 2)       /* keep conflicting entries */
#define RAFT_MUTATE_VOTE_TWICE (1u << 3)        /* forget our vote */
#define RAFT_MUTATE_HEARTBEAT_COMMIT (1u << 4)  /* heartbeat commit not
                                                   capped at match */
#define RAFT_MUTATE_ALL 0x1fu

struct raft_soft_state {
    raft_id lead;   /* current leader, 0 if unknown */
    int role;       /* enum raft_role */
};

struct raft_read_state {
    raft_index index;    /* serve once applied >= index */
    size_t ctx_len;      /* the caller's request context */
    uint8_t *ctx;
};

struct raft_ready {
    bool has_soft_state;              /* soft_state changed */
    struct raft_soft_state soft_state;
    bool has_hard_state;              /* hard_state must be persisted */
    struct raft_hard_state hard_state;
    const struct raft_snapshot *snapshot; /* to persist+apply, or NULL */
    size_t n_entries;                 /* entries to persist */
    const struct raft_entry *entries;
    size_t n_committed;               /* entries to apply, in order */
    const struct raft_entry *committed;
    size_t n_msgs;                    /* send after persisting */
    struct raft_msg *msgs;
    size_t n_read_states;             /* ReadIndex answers */
    struct raft_read_state *read_states;
    bool must_sync;                   /* fsync needed before sending */
};

enum raft_progress_state {
    RAFT_PROGRESS_PROBE = 0,
    RAFT_PROGRESS_REPLICATE = 1,
    RAFT_PROGRESS_SNAPSHOT = 2,
};

struct raft_progress_status {
    raft_id id;            /* member */
    raft_index match;      /* highest index known replicated */
    raft_index next;       /* next index to send */
    int state;             /* enum raft_progress_state */
    bool is_learner;       /* non-voting */
    bool recent_active;    /* heard from within election timeout */
    bool paused;           /* sending is paused */
    uint32_t inflight;     /* APPs in flight */
    raft_index pending_snapshot; /* index of snapshot in flight */
};

struct raft_status {
    raft_id id;
    int role;              /* enum raft_role */
    bool is_learner;
    raft_term term;
    raft_id vote;
    raft_id lead;
    raft_index commit;
    raft_index applied;
    raft_index last_index;
    raft_index first_index;
    raft_id lead_transferee;
    struct raft_conf_state conf;
    uint32_t n_progress;   /* filled on the leader only */
    struct raft_progress_status progress[RAFT_MAX_MEMBERS];
};

/* Conf changes. */
enum raft_cc_type {
    RAFT_CC_ADD_NODE = 0,     /* add (or promote to) voter */
    RAFT_CC_REMOVE_NODE = 1,
    RAFT_CC_UPDATE_NODE = 2,  /* no membership effect; context only */
    RAFT_CC_ADD_LEARNER = 3,  /* add learner (or demote) */
};

enum raft_cc_transition {
    RAFT_CC_TRANSITION_AUTO = 0,     /* simple if possible, else joint+auto */
    RAFT_CC_TRANSITION_IMPLICIT = 1, /* joint, leave automatically */
    RAFT_CC_TRANSITION_EXPLICIT = 2, /* joint, leave with an empty v2 */
};

struct raft_cc_single {
    uint8_t type;      /* enum raft_cc_type */
    raft_id node_id;   /* member affected */
};

/* A v1 change has exactly one element in changes and transition AUTO.  A v2
 * change with no changes and transition AUTO means "leave joint". */
struct raft_conf_change {
    uint8_t transition;                     /* enum raft_cc_transition */
    uint32_t n_changes;
    struct raft_cc_single changes[RAFT_MAX_MEMBERS];
    size_t ctx_len;                         /* opaque (etcd: member JSON) */
    const uint8_t *ctx;                     /* borrowed */
};

struct raft;

/* raft_sizeof returns how many bytes the caller allocates for a raft. */
size_t raft_sizeof(void);

/* raft_init sets up r from cfg.  Data in cfg is copied.
 * Errors: ERR_INVAL (bad config: id 0, ticks, inconsistent restored state,
 * invalid conf state), ERR_NOMEM. */
int raft_init(struct raft *r, const struct raft_config *cfg);

/* raft_close frees everything r owns (r itself is the caller's). */
void raft_close(struct raft *r);

/* raft_tick advances the logical clock by one tick.  ERR_BUSY inside a
 * Ready. */
int raft_tick(struct raft *r);

/* raft_campaign starts an election now (PreVote first if enabled); no-op on
 * a leader or a member that cannot vote. */
int raft_campaign(struct raft *r);

/* raft_step feeds one message from a peer (borrowed for the call).  Local
 * message types are refused.  Errors: ERR_INVAL (malformed or local type,
 * nothing changed), ERR_PROPOSAL_DROPPED (a forwarded proposal or read was
 * dropped), ERR_BUSY.  Stale or unknown-sender messages are ignored (0). */
int raft_step(struct raft *r, const struct raft_msg *m);

/* raft_propose proposes data (copied).  On a follower it is forwarded to
 * the leader unless forwarding is disabled.  Errors: ERR_PROPOSAL_DROPPED
 * (no leader, forwarding disabled, leader transfer in progress, removed),
 * ERR_TOO_LARGE, ERR_NOMEM, ERR_BUSY. */
int raft_propose(struct raft *r, const void *data, size_t len);

/* raft_propose_conf_change proposes cc as a v1 (single change, entry type
 * CONF_CHANGE) or v2 (CONF_CHANGE_V2) entry.  As in etcd, a leader that
 * cannot accept it now (another change pending, joint state mismatch)
 * appends an empty normal entry instead.  Errors as raft_propose plus
 * ERR_INVAL (v1 with n_changes != 1, bad types). */
int raft_propose_conf_change(struct raft *r, const struct raft_conf_change *cc,
                             bool v2);

/* raft_apply_conf_change applies a committed conf change to the progress
 * tracker and returns the new membership in cs_out.  A leader removed or
 * demoted by it steps down.  Allowed inside a Ready.  Errors: ERR_INVAL
 * (the change is invalid in the current configuration; nothing changed). */
int raft_apply_conf_change(struct raft *r, const struct raft_conf_change *cc,
                           struct raft_conf_state *cs_out);

/* raft_read_index requests a linearizable read point; the answer arrives
 * as a raft_read_state with the same ctx (copied) in a later Ready.
 * Followers forward to the leader.  Errors: ERR_PROPOSAL_DROPPED (no
 * leader), ERR_FULL, ERR_NOMEM, ERR_BUSY. */
int raft_read_index(struct raft *r, const void *ctx, size_t ctx_len);

/* raft_transfer_leader asks the leader to hand over to transferee. */
int raft_transfer_leader(struct raft *r, raft_id transferee);

/* raft_report_unreachable tells the leader a send to id failed. */
int raft_report_unreachable(struct raft *r, raft_id id);

/* raft_report_snapshot tells the leader whether a snapshot sent to id
 * arrived (ok) or failed. */
int raft_report_snapshot(struct raft *r, raft_id id, bool ok);

/* raft_snapshot_create records a state-machine snapshot at index (which
 * must be <= applied) with data (copied) and cs, the membership as of
 * index.  cs NULL means "the current membership", which is right only when
 * no conf change after index has been applied (index == applied, say): a
 * snapshot of a state behind applied must pass the membership of that
 * state, or a follower restoring it would count the later conf changes
 * twice (once in the snapshot, once from the log after it).  It becomes
 * what the leader sends to lagging followers.  Errors: ERR_INVAL (index >
 * applied, or cs invalid), ERR_RAFT_COMPACTED (index <= current snapshot),
 * ERR_BUSY, ERR_NOMEM. */
int raft_snapshot_create(struct raft *r, raft_index index,
                         const struct raft_conf_state *cs, const void *data,
                         size_t len);

/* raft_log_compact drops entries <= index from memory; index must be <= the
 * latest snapshot's index.  Errors: ERR_RAFT_COMPACTED (already),
 * ERR_INVAL (beyond the snapshot), ERR_BUSY. */
int raft_log_compact(struct raft *r, raft_index index);

/* raft_has_ready says whether raft_ready would return anything. */
bool raft_has_ready(const struct raft *r);

/* raft_ready fills rd (see THE READY CONTRACT).  ERR_BUSY if a Ready is
 * already outstanding. */
int raft_ready(struct raft *r, struct raft_ready *rd);

/* raft_advance acknowledges that rd was fully processed. */
int raft_advance(struct raft *r, struct raft_ready *rd);

/* raft_status copies a snapshot of r's state. */
void raft_status(const struct raft *r, struct raft_status *st);

/* raft_term_at returns the term of index in *term_out.  Errors:
 * ERR_RAFT_COMPACTED, ERR_RAFT_UNAVAILABLE. */
int raft_term_at(const struct raft *r, raft_index index, raft_term *term_out);

/* raft_role_name / raft_msg_type_name: static strings for logs. */
const char *raft_role_name(int role);
const char *raft_msg_type_name(int type);

/* ---- codecs (pure functions) ---- */

/* raft_msg_encoded_size returns the exact size raft_msg_encode needs. */
size_t raft_msg_encoded_size(const struct raft_msg *m);

/* raft_msg_encode writes m into buf (cap bytes).  Errors: ERR_FULL. */
int raft_msg_encode(const struct raft_msg *m, uint8_t *buf, size_t cap,
                    size_t *len_out);

/* raft_msg_decode parses buf into m.  Entry data, ctx and snapshot data
 * point INTO buf (which must outlive m); arrays are allocated and freed by
 * raft_msg_release.  Errors: ERR_CORRUPT (bad input), ERR_NOMEM. */
int raft_msg_decode(const uint8_t *buf, size_t len, struct raft_msg *m);

/* raft_msg_release frees what raft_msg_decode allocated (not buf). */
void raft_msg_release(struct raft_msg *m);

/* raft_conf_change_encoded_size / raft_conf_change_encode /
 * raft_conf_change_decode: the entry payload of conf changes.  decode
 * borrows ctx from data.  Errors: ERR_FULL, ERR_CORRUPT. */
size_t raft_conf_change_encoded_size(const struct raft_conf_change *cc);
int raft_conf_change_encode(const struct raft_conf_change *cc, uint8_t *buf,
                            size_t cap, size_t *len_out);
int raft_conf_change_decode(const uint8_t *data, size_t len,
                            struct raft_conf_change *cc);

#endif
