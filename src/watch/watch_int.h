/*
 * watch_int.h - the hub's private structures, shared by watch.c (hub,
 * streams, create/cancel, progress), watch_index.c (the synced group's
 * key hash and range treap, the id table), watch_notify.c (fan-out of
 * observed batches) and watch_sync.c (catch-up of unsynced watchers).
 */
#ifndef CETCD_WATCH_WATCH_INT_H
#define CETCD_WATCH_WATCH_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "watch/watch.h"

/* One watcher, one allocation with its key and end bytes after it.  Owned
 * by the hub; every field is guarded by the hub mutex except key/end,
 * which never change after creation (the sync step reads them unlocked
 * while `busy`).  A watcher is in exactly one of the key hash, the range
 * treap and the unsynced list, so their links share a union. */
struct watch_watcher {
    struct watch_stream *st;   /* its stream (invalid once dead) */
    int64_t id;                /* watch id, unique on st */
    uint8_t *key;              /* range start, key_len bytes (in bytes) */
    size_t key_len;            /* >= 1 */
    uint8_t *end;              /* range end (in bytes) or NULL */
    size_t end_len;            /* 0: single key (end NULL) */
    bool end_inf;              /* end was "\0": every key >= key */
    mvcc_rev next_rev;         /* first revision not yet sent; a synced
                                  watcher is at max(next_rev, hub rev+1) */
    unsigned filters;          /* WATCH_FILTER_* */
    bool prev_kv;              /* wants prev_kv */
    bool progress_notify;      /* wants periodic progress */
    bool fragment;             /* may be fragmented */
    bool synced;               /* in the synced index (else unsynced list) */
    bool created_pending;      /* `created` not yet taken by the sink */
    bool cancel_pending;       /* compaction cancel not yet taken */
    bool sent;                 /* got events since the last tick */
    bool busy;                 /* the sync step reads for it unlocked */
    bool dead;                 /* removed while busy; the step frees it */
    bool gmember;              /* synced, chained behind a head of the same
                                  range (not in the hash table or treap) */
    bool retired;              /* canceled by compaction: in no group, its
                                  id kept until the client cancels it or
                                  the stream closes (etcd 3.4 keeps it) */
    mvcc_rev compact_rev;      /* for the pending compaction cancel */
    mvcc_rev created_rev;      /* hub revision at creation (its header) */
    uint64_t mark;             /* fan-out: batch sequence it was touched in */
    size_t touch;              /* fan-out: its slot among touched watchers */
    union {
        struct {
            struct watch_watcher *hnext, *hprev; /* key hash chain, both
                                                    ways: a delete is O(1)
                                                    however many watch the
                                                    same key (synced single) */
        };
        struct {
            struct watch_watcher *left, *right; /* treap children */
            struct watch_watcher *maxw; /* node with the largest end below */
        };                              /* (synced ranges) */
        struct {
            struct watch_watcher *unext, *uprev; /* the unsynced list */
        };
        struct watch_watcher *gprev; /* a synced group member: the one
                                        before it (head or member) */
    };
    struct watch_watcher *gnext; /* synced: the next watcher of the same
                                    range (the index holds one head per
                                    range, its members chained here) */
    uint32_t prio;             /* treap heap priority */
    uint32_t sel_hash;         /* hash of what selects its events (range,
                                  end_inf, filters, prev_kv): the catch-up
                                  sorts alike watchers together by it */
    struct watch_watcher *inext; /* id table chain */
    struct watch_watcher *snext, *sprev; /* the stream's watcher list */
    uint8_t bytes[];           /* key_len + end_len bytes: key, then end */
};

/* A stream.  Guarded by the hub mutex. */
struct watch_stream {
    struct watch_hub *h;        /* its hub */
    struct watch_sink sink;     /* the owner's callbacks */
    struct watch_watcher *ws;   /* its watchers (list head) */
    size_t n_watchers;          /* length of ws */
    size_t n_unsynced;          /* of them, not in the synced group */
    int64_t next_id;            /* next automatic id candidate */
    bool progress_pending;      /* a RequestProgress waits */
    uint64_t full_step;         /* sync step in which the sink was full */
    unsigned marks;             /* the owner's (watch_stream_mark) */
    struct watch_stream *next, *prev; /* the hub's stream list */
};

/* A (touched watcher, event) pair of one observed batch. */
struct watch_pair {
    size_t touch; /* index into touched */
    size_t ev;    /* index into the batch's events */
};

/* The hub.  mu guards everything; sync_mu serializes sync steps (taken
 * before mu, never inside it). */
struct watch_hub {
    pthread_mutex_t mu;            /* the hub lock (a leaf below mvcc) */
    pthread_mutex_t sync_mu;       /* one sync step at a time */
    struct mvcc_store *store;      /* the watched store (borrowed) */
    struct watch_options o;        /* options with defaults applied */
    mvcc_rev rev;                  /* last observed store revision */
    size_t n_watchers;             /* all live watchers */
    size_t n_prev_kv;              /* of them, those with prev_kv: while
                                      any, the store's events carry prev
                                      values (mvcc_store_set_prev_values) */
    size_t n_unsynced;             /* length of the unsynced list */
    struct watch_watcher *unsynced; /* unsynced list head (round robin) */
    struct watch_watcher **keys;   /* key hash buckets (synced, single) */
    size_t n_keys_buckets;         /* power of two */
    size_t n_keys;                 /* heads in keys (one per key) */
    struct watch_watcher *ranges;  /* treap root (synced ranges) */
    struct watch_watcher **ids;    /* id table buckets */
    size_t n_ids_buckets;          /* power of two */
    struct watch_stream *streams;  /* open streams */
    size_t n_progress_pending;     /* streams with progress_pending */
    uint32_t rng;                  /* treap priorities (xorshift) */
    uint64_t batch_seq;            /* fan-out sequence for marks */
    uint64_t step_seq;             /* sync step sequence */
    uint64_t sync_reads;           /* history reads of the sync steps
                                      (guarded by sync_mu) */
    atomic_int observe_waiting;    /* observers waiting for mu: the sync
                                      step lets them have it first */
    uint64_t last_tick_ms;         /* last periodic progress round */
    bool ticked;                   /* last_tick_ms is set */
    struct watch_watcher **touched; /* fan-out scratch */
    size_t touched_cap;            /* its capacity */
    size_t *counts;                /* fan-out scratch, per touched */
    size_t counts_cap;             /* its capacity */
    struct watch_pair *pairs;      /* fan-out scratch */
    size_t pairs_cap;              /* its capacity */
    size_t *order;                 /* fan-out scratch: events by watcher */
    size_t order_cap;              /* its capacity */
    struct mvcc_event *out;        /* response events scratch */
    size_t out_cap;                /* its capacity */
};

/* --- watch_index.c ---------------------------------------------------- */

/* Bytewise compare (Go bytes.Compare). */
int watch__cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);
/* Whether key k is inside w's range. */
bool watch__contains(const struct watch_watcher *w, const uint8_t *k,
                     size_t kl);
/* Add / remove a synced watcher to / from the key hash or range treap. */
int watch__index_add(struct watch_hub *h, struct watch_watcher *w);
void watch__index_del(struct watch_hub *h, struct watch_watcher *w);
/* Call fn for every indexed watcher whose range holds key k. */
typedef int (*watch__visit_fn)(void *arg, struct watch_watcher *w);
int watch__index_stab(struct watch_hub *h, const uint8_t *k, size_t kl,
                      watch__visit_fn fn, void *arg);
/* The id table. */
int watch__ids_add(struct watch_hub *h, struct watch_watcher *w);
void watch__ids_del(struct watch_hub *h, struct watch_watcher *w);
struct watch_watcher *watch__ids_find(struct watch_hub *h,
                                      const struct watch_stream *st,
                                      int64_t id);

/* --- watch.c ---------------------------------------------------------- */

/* Move w between the groups (index + lists + counters). */
int watch__to_synced(struct watch_hub *h, struct watch_watcher *w);
void watch__to_unsynced(struct watch_hub *h, struct watch_watcher *w);
/* watch__retire takes an unsynced w out of its group after its compaction
 * cancel was sent; it keeps its id (watch_cancel finds it, a create with
 * it is a duplicate) and its place in the limits. */
void watch__retire(struct watch_hub *h, struct watch_watcher *w);
/* Remove w from everything and free it (or mark it dead if busy). */
void watch__remove(struct watch_hub *h, struct watch_watcher *w);
void watch__free(struct watch_watcher *w);
/* Answer st's deferred progress request if it can be answered now. */
void watch__progress_try(struct watch_stream *st);
/* Send events (whole revisions) to w, fragmenting if it asked: 0 or
 * WATCH_SINK_FULL (nothing taken). */
int watch__send_events(struct watch_hub *h, struct watch_watcher *w,
                       const struct mvcc_event *evs, size_t n,
                       mvcc_rev header_rev);
/* Send w's pending created; false if the sink was full. */
bool watch__send_created(struct watch_hub *h, struct watch_watcher *w);
/* Whether ev passes w's filters. */
bool watch__filter_pass(const struct watch_watcher *w,
                        const struct mvcc_event *ev);

#endif
