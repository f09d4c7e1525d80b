/*
 * raft_int.h - private declarations shared by the files of src/raft.
 *
 * Every struct here is owned by the thread that owns its struct raft.
 */
#ifndef CETCD_RAFT_RAFT_INT_H
#define CETCD_RAFT_RAFT_INT_H

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "raft/raft.h"
#include "util/err.h"

/* Asserts stay on in release builds of raft (STYLE). */
#define RAFT_ASSERT(c)                                                       \
    do {                                                                     \
        if (!(c)) {                                                          \
            fprintf(stderr, "raft: assertion failed: %s (%s:%d)\n", #c,      \
                    __FILE__, __LINE__);                                     \
            abort();                                                         \
        }                                                                    \
    } while (0)

/* RAFT_MUTANT(r, RAFT_MUTATE_X) is true when a test build asked for the
 * broken rule X (raft.h, test_mutations).  In the product library it is the
 * constant false, so the broken branches compile away. */
#ifdef RAFT_MUTATIONS
#define RAFT_MUTANT_BUILD true
#define RAFT_MUTANT(r, m) (((r)->mutations & (m)) != 0)
#else
#define RAFT_MUTANT_BUILD false
#define RAFT_MUTANT(r, m) ((void)(r), false)
#endif

/* Allocation failure inside a transition aborts (see raft.h ERRORS). */
void *raft__xmalloc(size_t n);
void *raft__xrealloc(void *p, size_t n);

/* ---- log.c: the in-memory log (stable prefix + unstable suffix) ---- */
struct raft_log {
    struct raft_entry *ents; /* ents[k].index == offset + 1 + k; data owned */
    size_t n;                /* number of entries */
    size_t cap;              /* allocated slots */
    raft_index offset;       /* index before ents[0] (compaction point) */
    raft_term offset_term;   /* term at offset */
    raft_index committed;    /* highest committed index */
    raft_index applied;      /* highest index handed out for applying */
    raft_index stabled;      /* highest index the caller persisted */
    struct raft_snapshot snap; /* latest snapshot (data owned), index 0 = none */
    bool snap_unstable;      /* snap received, not yet handed to caller */
};

void raft__log_init(struct raft_log *l);
void raft__log_free(struct raft_log *l);
raft_index raft__log_last(const struct raft_log *l);
raft_index raft__log_first(const struct raft_log *l);
raft_term raft__log_last_term(const struct raft_log *l);
int raft__log_term(const struct raft_log *l, raft_index i, raft_term *t);
raft_term raft__log_term_or0(const struct raft_log *l, raft_index i);
bool raft__log_match(const struct raft_log *l, raft_index i, raft_term t);
bool raft__log_up_to_date(const struct raft_log *l, raft_index i, raft_term t);
/* Appends copies of ents (contiguous), truncating any conflicting suffix. */
void raft__log_append(struct raft_log *l, const struct raft_entry *ents,
                      size_t n);
/* Appends one entry taking ownership of data. */
void raft__log_append_owned(struct raft_log *l, raft_term term, uint8_t type,
                            uint8_t *data, uint32_t len);
raft_index raft__log_find_conflict(const struct raft_log *l,
                                   const struct raft_entry *ents, size_t n);
raft_index raft__log_find_conflict_by_term(const struct raft_log *l,
                                           raft_index i, raft_term t,
                                           raft_term *t_out);
/* Returns the slice [lo, hi] capped to max_bytes (at least one entry);
 * ERR_RAFT_COMPACTED if lo is compacted. */
int raft__log_slice(const struct raft_log *l, raft_index lo, raft_index hi,
                    uint64_t max_bytes, const struct raft_entry **out,
                    size_t *n_out);
const struct raft_entry *raft__log_at(const struct raft_log *l, raft_index i);
void raft__log_commit_to(struct raft_log *l, raft_index i);
bool raft__log_maybe_commit(struct raft_log *l, raft_index i, raft_term t);
void raft__log_restore(struct raft_log *l, const struct raft_snapshot *s);
void raft__log_compact(struct raft_log *l, raft_index i);
void raft__log_set_snapshot(struct raft_log *l, const struct raft_snapshot_meta *m,
                            const void *data, size_t len);

/* ---- progress.c: per-follower replication state ---- */
struct raft_inflights {
    raft_index *ring;        /* last index of each APP in flight */
    uint32_t start;          /* ring head */
    uint32_t count;          /* entries used */
    uint32_t cap;            /* max_inflight_msgs */
};

struct raft_progress {
    raft_id id;                   /* member */
    raft_index match;             /* highest index known replicated */
    raft_index next;              /* next index to send */
    int state;                    /* enum raft_progress_state */
    raft_index pending_snapshot;  /* snapshot index while in SNAPSHOT */
    bool recent_active;           /* heard from since last quorum check */
    bool probe_sent;              /* PROBE: one APP out, wait for answer */
    bool is_learner;              /* non-voting */
    struct raft_inflights infl;   /* REPLICATE flow control */
};

void raft__pr_init(struct raft_progress *p, raft_id id, raft_index next,
                   uint32_t max_inflight, bool learner);
void raft__pr_free(struct raft_progress *p);
void raft__pr_become_probe(struct raft_progress *p);
void raft__pr_become_replicate(struct raft_progress *p);
void raft__pr_become_snapshot(struct raft_progress *p, raft_index snapi);
bool raft__pr_maybe_update(struct raft_progress *p, raft_index n);
bool raft__pr_maybe_decr_to(struct raft_progress *p, raft_index rejected,
                            raft_index match_hint);
bool raft__pr_is_paused(const struct raft_progress *p);
void raft__pr_sent(struct raft_progress *p, size_t n_ents, raft_index last);
void raft__infl_free_le(struct raft_inflights *f, raft_index i);
void raft__infl_free_first(struct raft_inflights *f);
bool raft__infl_full(const struct raft_inflights *f);

/* ---- quorum.c: majority and joint quorums ---- */
struct raft_idset {
    uint32_t n;                   /* members */
    raft_id ids[RAFT_MAX_MEMBERS]; /* sorted ascending */
};

enum raft_vote_result { RAFT_VOTE_PENDING, RAFT_VOTE_LOST, RAFT_VOTE_WON };

bool raft__set_has(const struct raft_idset *s, raft_id id);
bool raft__set_add(struct raft_idset *s, raft_id id);
void raft__set_del(struct raft_idset *s, raft_id id);
/* look(arg, id, &index) returns false if id has no ack. */
typedef bool (*raft_ack_fn)(void *arg, raft_id id, raft_index *index);
raft_index raft__majority_committed(const struct raft_idset *s,
                                    raft_ack_fn look, void *arg);
/* vote(arg, id) returns 1 yes, 0 no, -1 missing. */
typedef int (*raft_vote_fn)(void *arg, raft_id id);
int raft__majority_vote(const struct raft_idset *s, raft_vote_fn f, void *arg);

/* ---- tracker (confchange.c): configuration + progress ---- */
struct raft_tracker_config {
    struct raft_idset voters[2];   /* [0] incoming, [1] outgoing (joint) */
    struct raft_idset learners;    /* learners */
    struct raft_idset learners_next; /* become learners on leave */
    bool auto_leave;               /* leave joint automatically */
};

struct raft_tracker {
    struct raft_tracker_config cfg; /* current membership */
    uint32_t n_prs;                 /* progress entries, sorted by id */
    struct raft_progress prs[RAFT_MAX_MEMBERS];
    uint32_t n_votes;               /* votes received this election */
    raft_id vote_ids[RAFT_MAX_MEMBERS];
    bool vote_granted[RAFT_MAX_MEMBERS];
};

struct raft_progress *raft__trk_get(struct raft_tracker *t, raft_id id);
bool raft__trk_is_voter(const struct raft_tracker *t, raft_id id);
bool raft__cfg_joint(const struct raft_tracker_config *c);
raft_index raft__trk_committed(struct raft_tracker *t);
int raft__trk_vote_result(struct raft_tracker *t);
void raft__trk_record_vote(struct raft_tracker *t, raft_id id, bool granted);
void raft__trk_reset_votes(struct raft_tracker *t);
bool raft__trk_quorum_active(struct raft_tracker *t, raft_id self);
void raft__trk_free(struct raft_tracker *t);
void raft__trk_conf_state(const struct raft_tracker *t,
                          struct raft_conf_state *cs);
int raft__conf_state_check(const struct raft_conf_state *cs);
/* Builds a tracker config from cs (validated). */
int raft__trk_restore(struct raft_tracker *t, const struct raft_conf_state *cs,
                      raft_index last, uint32_t max_inflight);
/* Applies cc; on error t is unchanged. */
int raft__trk_apply(struct raft_tracker *t, const struct raft_conf_change *cc,
                    raft_index last, uint32_t max_inflight);
bool raft__cc_is_leave_joint(const struct raft_conf_change *cc);
void raft__conf_state_fmt(const struct raft_conf_state *cs, char *buf,
                          size_t cap);

/* ---- read_only.c: pending ReadIndex requests ---- */
struct raft_read_req {
    raft_index index;     /* commit index when the request arrived */
    raft_id from;         /* requester (self for local requests) */
    uint8_t *ctx;         /* owned copy of the request context */
    size_t ctx_len;
    struct raft_idset acks; /* voters that confirmed leadership */
};

struct raft_read_only {
    struct raft_read_req *q; /* FIFO of pending requests */
    size_t n;                /* queued */
    size_t cap;              /* allocated */
};

void raft__ro_reset(struct raft_read_only *ro);
bool raft__ro_add(struct raft_read_only *ro, raft_index index, raft_id from,
                  const uint8_t *ctx, size_t len);
struct raft_read_req *raft__ro_find(struct raft_read_only *ro,
                                    const uint8_t *ctx, size_t len);
/* Removes requests up to and including req; returns how many (moved to
 * out, the caller frees ctx). */
size_t raft__ro_pop_through(struct raft_read_only *ro,
                            struct raft_read_req *req,
                            struct raft_read_req **out);
const struct raft_read_req *raft__ro_last(const struct raft_read_only *ro);

/* ---- the raft struct ---- */
struct raft_pending_read {
    raft_id from;      /* requester */
    uint8_t *ctx;      /* owned */
    size_t ctx_len;
};

struct raft {
    raft_id id;                    /* this member */
    raft_term term;                /* current term */
    raft_id vote;                  /* vote in term */
    raft_id lead;                  /* known leader */
    int role;                      /* enum raft_role */
    bool is_learner;               /* we are a learner */
    struct raft_log log;           /* the log */
    struct raft_tracker trk;       /* membership and progress */
    struct raft_read_only ro;      /* ReadIndex requests in a round */
    struct raft_pending_read *pend_reads; /* reads before first commit */
    size_t n_pend_reads, cap_pend_reads;
    struct raft_msg *msgs;         /* outbox for the next Ready */
    size_t n_msgs, cap_msgs;
    struct raft_read_state *rs;    /* read answers for the next Ready */
    size_t n_rs, cap_rs;
    int election_elapsed;          /* ticks since reset (leader: check) */
    int heartbeat_elapsed;         /* leader: ticks since heartbeat */
    int randomized_timeout;        /* in [election, 2*election) */
    int election_tick;             /* config */
    int heartbeat_tick;            /* config */
    bool pre_vote, check_quorum;   /* config */
    int read_only;                 /* config */
    bool no_forward;               /* config: disable forwarding */
    uint64_t max_msg_size;         /* config */
    uint32_t max_inflight;         /* config */
    raft_id lead_transferee;       /* leader transfer target */
    raft_index pending_conf_index; /* leader: last conf change index */
    uint64_t prng;                 /* splitmix64 state */
    raft_log_fn logger;            /* log sink */
    void *logger_arg;
    struct raft_soft_state prev_ss; /* last soft state handed out */
    struct raft_hard_state prev_hs; /* last hard state handed out */
    bool in_ready;                 /* a Ready is outstanding */
    raft_index ready_last;         /* last entry index in that Ready */
    raft_index ready_applied;      /* last committed index in that Ready */
    bool ready_snap;               /* that Ready carried a snapshot */
    uint32_t mutations;            /* test builds: RAFT_MUTATE_* in force */
};

/* raft.c */
void raft__logf(struct raft *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void raft__send(struct raft *r, struct raft_msg *m);
void raft__become_follower(struct raft *r, raft_term term, raft_id lead);
void raft__become_leader(struct raft *r);
void raft__campaign(struct raft *r, bool pre, bool transfer);
void raft__hup(struct raft *r, bool transfer);
bool raft__promotable(struct raft *r);
int raft__step(struct raft *r, const struct raft_msg *m);
void raft__reset_timeout(struct raft *r);
void raft__read_state_add(struct raft *r, raft_index index,
                          const uint8_t *ctx, size_t len);
/* step_leader.c */
int raft__step_leader(struct raft *r, const struct raft_msg *m);
bool raft__maybe_send_append(struct raft *r, raft_id to, bool send_empty);
void raft__bcast_append(struct raft *r);
void raft__bcast_heartbeat(struct raft *r);
bool raft__maybe_commit(struct raft *r);
void raft__abort_transfer(struct raft *r);
void raft__release_pending_reads(struct raft *r);
void raft__append_proposal(struct raft *r, uint8_t type, const uint8_t *data,
                           uint32_t len);
/* step_follower.c */
int raft__step_follower(struct raft *r, const struct raft_msg *m);
int raft__step_candidate(struct raft *r, const struct raft_msg *m);
void raft__handle_append(struct raft *r, const struct raft_msg *m);
void raft__handle_heartbeat(struct raft *r, const struct raft_msg *m);
void raft__handle_snapshot(struct raft *r, const struct raft_msg *m);

#endif
