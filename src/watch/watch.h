/*
 * watch.h - the watch hub: etcd v3 watchers over one mvcc store.
 *
 * A hub serves every watcher of one store.  Watchers live on streams (one
 * stream = one gRPC Watch call, later); each stream has one sink, the
 * owner's bounded send queue.  The hub hands the sink whole responses
 * (struct watch_response: events of whole revisions, or a control
 * response) and never blocks: a sink that is full says so and the hub
 * moves the watchers that could not be served aside.  Nothing here knows
 * protobuf or gRPC; the API layer encodes the responses.
 *
 * Semantics (etcd 3.4's mvcc/watchable_store.go and v3rpc/watch.go, with
 * the fixes etcd made later, see docs/ARCHITECTURE.md "watch"):
 * - range rules as mvcc_range: end_len 0 -> the single key; end "\0" ->
 *   every key >= key; key "\0" + end "\0" -> every key; otherwise [key,
 *   end), bytewise.  A prefix watch is the client's range_end.  An end
 *   <= key (other than those) is ERR_INVAL (etcd's "mvcc: watcher range
 *   is empty", the API maps it).
 * - start_rev 0 = the next revision; a past one replays history from the
 *   store; a future one delivers nothing before it (etcd #20221).
 * - Every watcher gets, in order, `created` (header = the hub revision at
 *   creation), then each event from its start revision exactly once, in
 *   revision order, every revision's events in one response (or in one
 *   run of fragments: fragment = true on all but the last).  Responses
 *   may carry several whole revisions.
 * - A watcher whose next revision has been compacted gets one response
 *   with canceled = true and compact_rev = the store's compact revision,
 *   and gets nothing more (etcd: created, then canceled with
 *   compact_revision); as in etcd 3.4 its id stays taken until the client
 *   cancels it (watch_cancel then succeeds) or the stream closes.
 *   One still at or above the compact revision keeps every event.
 * - Groups: a *synced* watcher is at the hub's revision and receives
 *   events from the store's observer (watch_hub_observe) on the apply
 *   thread.  Synced watchers are indexed (a hash table of single keys, an
 *   interval treap of ranges) so an event costs a lookup, not a scan.  An
 *   *unsynced* watcher (new with a past start, or whose sink was full) is
 *   caught up by watch_hub_sync_step from the store, in bounded batches,
 *   and moved back to synced when it reaches the hub's revision.
 * - Progress: watch_stream_progress (RequestProgress) answers with a
 *   progress response (watch_id -1, no events, header = the hub revision)
 *   only when every watcher of the stream is synced and the hub has
 *   reached every one's start revision - 1; otherwise the request is
 *   deferred and answered by the sync step that finds it true (etcd's
 *   fixed behaviour: 3.4.31/3.5.13 for synced, #15220 and #17507; the
 *   start revision as etcd #20229, backported to 3.4 and 3.5).  Meanwhile each
 *   synced watcher of the stream (at or past its start revision) gets a
 *   progress response of its own (watch_id = its id), so one slow
 *   watcher does not starve the rest of its stream (etcd #20242's
 *   proposal).  watch_hub_tick
 *   sends periodic progress (watch_id = the watcher's) to synced watchers
 *   that asked for it, got no events since the last tick and have reached
 *   their start revision - 1 (etcd #20221).  A progress
 *   revision is therefore never ahead of what the watcher was sent.
 *
 * Threads and locks:
 * - One hub mutex guards everything.  It is a leaf below the store: the
 *   hub calls mvcc (a read snapshot) without holding it, and the store
 *   calls watch_hub_observe (on the apply thread) which takes it.  The
 *   sink callbacks run under it: they must not block and must not call
 *   back into the hub, and a lock a sink takes (its queue's) must never
 *   be held by a caller of a hub function (the hub lock comes first).
 *   Order: sync step lock -> (mvcc read) -> hub lock -> sink locks.
 * - watch_hub_observe: one caller at a time, batches in revision order
 *   (the mvcc observer on the apply thread, or an owner that defers a
 *   batch until it is durable and calls it from another thread, serialized
 *   with the observer: server/watchers.c).
 * - Everything else: any thread.  watch_hub_sync_step and watch_hub_tick
 *   are driven by the owner (a thread or timer of its choice; the hub
 *   starts no thread, reads no clock and never sleeps).
 *
 * Memory and bounds: watchers per hub and per stream are limited (options).
 * A sink bounds its own queue.  A sync step copies at most about
 * sync_bytes_max bytes of events (plus one revision) and max_events
 * events (plus one revision's worth).  The observer delivers at most
 * fan_pairs_max (watcher, event) pairs itself; its fan-out scratch is
 * proportional to the pairs the batch reaches.
 *
 * Errors: 0 or a negative ERR_* (util/err.h).
 */
#ifndef CETCD_WATCH_WATCH_H
#define CETCD_WATCH_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mvcc/mvcc.h"

struct watch_hub;    /* one per store; owned by the server */
struct watch_stream; /* a set of watchers sharing one sink */

/* The watch id of a stream-wide progress response (etcd's
 * clientv3.InvalidWatchID). */
#define WATCH_ID_NONE ((int64_t)-1)

/* One response to a sink.  Everything it points to is borrowed for the
 * duration of send() only; the sink copies or encodes what it keeps. */
struct watch_response {
    int64_t watch_id;    /* the watcher's id, WATCH_ID_NONE for a stream
                            progress response */
    mvcc_rev header_rev; /* the revision the response speaks for: the
                            newest revision the watcher is complete up to */
    bool created;        /* the creation confirmation */
    bool canceled;       /* the watcher is gone after this response */
    mvcc_rev compact_rev; /* > 0: canceled because of compaction */
    bool fragment;       /* more fragments of this response follow */
    const struct mvcc_event *events; /* n_events, in revision order; a
                            PUT's prev_kv has mod_rev 0 unless the watcher
                            asked for prev_kv and one exists */
    size_t n_events;     /* 0 for created/canceled/progress responses */
};

/* What a sink's send returns when its queue cannot take the response. */
#define WATCH_SINK_FULL 1

/* The owner's end of a stream.  send returns 0 (taken) or WATCH_SINK_FULL
 * (nothing taken; the hub retries later from the store).  Once send took a
 * response with fragment = true it must take the following fragments of
 * the same run (they come in the same call sequence): a sink reserves room
 * for one whole response beyond its bound.  close is called once, when the
 * hub ends the stream itself (watch_hub_close with the stream still open);
 * never after watch_stream_close.  end (may be NULL for a stream never
 * marked) is the owner's request, through watch_hub_end_marked, that the
 * stream end with err: the sink ends its transport; the stream stays the
 * owner's to watch_stream_close.  Both run under the hub lock (as send). */
struct watch_sink {
    int (*send)(void *ctx, const struct watch_response *resp);
    void (*close)(void *ctx);
    void *ctx; /* passed to all three */
    void (*end)(void *ctx, int err);
};

/* Filters of watch_create (etcd's WatchCreateRequest.filters). */
enum {
    WATCH_FILTER_NOPUT = 1u << 0,    /* drop PUT events */
    WATCH_FILTER_NODELETE = 1u << 1, /* drop DELETE events */
};

/* A watcher to create.  The key bytes are copied. */
struct watch_create {
    int64_t watch_id;      /* 0 = the stream picks the next free id; any
                              other value, negative ones included, is
                              the id (etcd 3.4: only 0 is AutoWatchID) */
    const void *key;       /* key_len >= 1 bytes */
    size_t key_len;        /* >= 1 */
    const void *end;       /* range end (see range rules); may be NULL */
    size_t end_len;        /* 0 = single key */
    mvcc_rev start_rev;    /* 0 = next revision */
    unsigned filters;      /* WATCH_FILTER_* */
    bool prev_kv;          /* fill prev_kv of events */
    bool progress_notify;  /* periodic progress (watch_hub_tick) */
    bool fragment;         /* split responses above fragment_bytes */
};

/* Options of watch_hub_open; NULL or 0 fields = defaults. */
struct watch_options {
    size_t watchers_max;          /* per hub; 0 = 1,000,000 */
    size_t stream_watchers_max;   /* per stream; 0 = 100,000 */
    size_t fragment_bytes;        /* split above this (fragment watchers);
                                     0 = 1.5 MiB (--max-request-bytes) */
    size_t sync_events_max;       /* events per sync step; 0 = 1000 */
    size_t sync_bytes_max;        /* event bytes per sync step; 0 = 4 MiB */
    size_t fan_pairs_max;         /* (watcher, event) pairs one observed
                                     batch delivers at once; 0 = 4096
                                     (watch_hub_observe) */
    uint64_t progress_interval_ms; /* periodic progress; 0 = 10 minutes */
    /* Fragmentation follows etcd's sendFragments (v3rpc/watch.go): a
     * response of a fragment watcher whose encoded size is >=
     * fragment_bytes and that has 2 events or more is split; each
     * fragment takes events while it stays below fragment_bytes (at
     * least one).  The sizes come from these, called under the hub lock
     * with size_arg: event_size is one event's encoded size inside a
     * response (its field tag and length included), base_size a
     * response's without its events (with its fragment flag).  NULL =
     * estimates (key + value + prev kv bytes + 64; 64 + the flag). */
    size_t (*event_size)(const struct mvcc_event *ev, void *size_arg);
    size_t (*base_size)(const struct watch_response *r, void *size_arg);
    void *size_arg;
};

/*
 * watch_hub_open makes a hub over s (the caller keeps s open longer than
 * the hub).  Its revision starts at mvcc_current_rev(s).  The owner
 * installs watch_hub_observe as the store's observer (or calls it from its
 * own) before the apply thread commits anything.  Errors: ERR_NOMEM.
 */
int watch_hub_open(struct mvcc_store *s, const struct watch_options *opts,
                   struct watch_hub **out);
/* watch_hub_close ends every open stream (their sink's close is called),
 * frees them and the hub.  No other hub call may run or follow. */
void watch_hub_close(struct watch_hub *h);

/* watch_hub_observe is an mvcc_observer_fn (arg = the hub): it delivers a
 * committed batch to the synced watchers.  One caller at a time (above).
 * Its work is bounded: past fan_pairs_max (watcher, event) pairs, the
 * batch's other watchers become unsynced at its first revision and the
 * next sync step hands it to them with one history read (the observer
 * runs on the apply path: 10 000 watchers on the written prefix must not
 * make each commit wait for 10 000 responses).  So after a call,
 * watch_hub_pending may be > 0: the owner steps at once. */
void watch_hub_observe(void *hub, const struct mvcc_event *events, size_t n,
                       mvcc_rev rev);

/*
 * watch_hub_sync_step does one bounded round of catch-up: it sends the
 * pending created/canceled responses, then catches the unsynced watchers
 * up together, as etcd's unsynced group: from a store snapshot it reads
 * the history once for all of them, from their smallest next revision
 * over the hull of their ranges, in batches of whole revisions (at most
 * sync_events_max events / sync_bytes_max bytes copied and 16 x
 * sync_events_max history entries walked per step, so the work of a
 * narrow watcher over a long history is bounded too), hands each event to
 * every watcher it matches, and moves the watchers that reached the hub
 * revision back to synced.  *more_out tells whether unsynced watchers
 * remain (call again; after a full sink, later).
 * Errors: ERR_BUSY/ERR_NOMEM/ERR_IO (snapshot; nothing lost, retry),
 * ERR_CORRUPT.
 */
int watch_hub_sync_step(struct watch_hub *h, bool *more_out);
/* History reads (store scans) the sync steps made so far: per step it
 * grows with how far apart the unsynced watchers are, not with how many
 * there are (for tests and metrics). */
uint64_t watch_hub_sync_reads(struct watch_hub *h);

/* watch_hub_restore points the hub at s, a store that replaced the one it
 * watched (a snapshot installed): its revision becomes s's, and every
 * synced watcher becomes unsynced, to be caught up from s from its next
 * revision (canceled with compact_rev if s compacted it), as etcd's
 * watchableStore.Restore.  No sync step, observer call or other use of
 * the old store may run meanwhile (the owner excludes them). */
void watch_hub_restore(struct watch_hub *h, struct mvcc_store *s);

/* watch_hub_tick sends periodic progress at now_ms (the owner's monotonic
 * clock): to each synced progress_notify watcher that got no events in the
 * last progress_interval_ms, unless its start revision is still more than
 * one ahead of the hub's.  Any thread. */
void watch_hub_tick(struct watch_hub *h, uint64_t now_ms);

/* The hub's revision (the last batch it observed). */
mvcc_rev watch_hub_rev(struct watch_hub *h);
/* Watchers in the hub, and how many are unsynced (for tests, metrics). */
size_t watch_hub_watchers(struct watch_hub *h);
size_t watch_hub_unsynced(struct watch_hub *h);
/* Work for watch_hub_sync_step: unsynced watchers plus deferred progress
 * requests (a deferred request is answered by a step once it is true, so
 * the owner keeps stepping while this is not 0). */
size_t watch_hub_pending(struct watch_hub *h);

/* watch_stream_open makes a stream delivering to sink (copied).
 * Errors: ERR_NOMEM. */
int watch_stream_open(struct watch_hub *h, const struct watch_sink *sink,
                      struct watch_stream **out);
/* watch_stream_mark sets the owner's marks of st (bits of its choosing, 0
 * at open), for watch_hub_end_marked.  Any thread. */
void watch_stream_mark(struct watch_stream *st, unsigned marks);
/* watch_hub_end_marked calls sink.end(ctx, err) of every open stream with
 * any of marks set (the member: streams that require a leader, when it has
 * none).  The streams stay open in the hub.  Any thread. */
void watch_hub_end_marked(struct watch_hub *h, unsigned marks, int err);
/* watch_stream_close cancels the stream's watchers (no responses) and
 * frees it; once it returns the sink is never called again. */
void watch_stream_close(struct watch_stream *st);

/*
 * watch_create adds a watcher to st and returns its id in *id_out.  The
 * `created` response goes through the sink before any event (queued if
 * the sink is full).  Errors: ERR_EXIST (watch_id in use on st: etcd's
 * "mvcc: duplicate watch ID provided on the WatchStream"), ERR_INVAL
 * (key_len 0, empty range), ERR_TOO_MANY_REQUESTS (a
 * watcher limit), ERR_NOMEM.
 */
int watch_create(struct watch_stream *st, const struct watch_create *req,
                 int64_t *id_out);
/* watch_cancel removes watcher id from st; no later response names it.
 * The caller answers the client (etcd sends canceled).  Errors:
 * ERR_NOTFOUND (no such watcher, e.g. already canceled by compaction). */
int watch_cancel(struct watch_stream *st, int64_t id);
/* watch_stream_progress is RequestProgress: answered now if every watcher
 * of st is synced, else once they are, with per-watcher progress for the
 * synced ones meanwhile (see above).  Never fails. */
void watch_stream_progress(struct watch_stream *st);

#endif
