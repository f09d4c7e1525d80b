/*
 * ctl_watch.h - the watch engine that cetcdctl's `watch` and `make-mirror`
 * share: watchers on one libcetcd Watch stream (poll mode) that behave as
 * etcd clientv3 3.4's watchers do, which is what etcdctl's output follows.
 *
 * WHAT CLIENTV3 DOES, AND SO THIS ENGINE
 *   - A created response is not shown to the caller; it gives the watcher
 *     its id.  A create the server refuses (created and canceled with a
 *     reason, or id -1) closes that watcher with the reason as its error.
 *   - A progress notification with watch id -1 (the answer to a progress
 *     request) goes to every created watcher; other responses go to the
 *     watcher of their id.  A response for an unknown id makes the engine
 *     cancel that id on the server (once).
 *   - A canceled response without a compact revision closes its watcher
 *     silently; one with a compact revision is delivered (its error is
 *     "etcdserver: mvcc: required revision has been compacted"), then the
 *     watcher closes.
 *   - When the stream breaks with UNAVAILABLE (but "etcdserver: no
 *     leader") or INTERNAL, the engine opens a new stream after a short
 *     backoff (1 ms growing by a quarter up to 100 ms, never reset) and
 *     creates every watcher again from the revision after the last one it
 *     delivered, forever: a dead server makes a watch wait, not fail.
 *     Any other end of the stream closes every watcher with that error
 *     (a stream the server ended with OK reads "EOF", as Go's io.EOF).
 *
 * THREADS: single-threaded; everything happens inside ctl_wengine_step().
 *
 * LIMITS: at most CTL_WATCHERS_MAX watchers (ctl_wengine_add refuses more).
 */
#ifndef CETCD_CTL_WATCH_H
#define CETCD_CTL_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cetcd/cetcd.h"

#define CTL_WATCHERS_MAX 1024

/* One watcher, as clientv3's watcherStream keeps it.  Owned by the
 * engine from ctl_wengine_add until its close is delivered. */
struct ctl_watcher {
    uint8_t *key;     /* the watched key (owned) */
    size_t key_len;   /* its length */
    uint8_t *end;     /* range end (owned), NULL for the single key */
    size_t end_len;   /* its length */
    bool prev_kv;     /* events carry the previous pair */
    int64_t next_rev; /* revision a (re)created watcher starts at; 0 =
                         the server's next one */
    int64_t id;       /* the server's watch id; -1 until created */
    void *arg;        /* the caller's, untouched */
};

/* ctl_wengine_fn receives what clientv3 puts on a watcher's channel:
 *   r != NULL: a response for w; err is its Err() text, or NULL.
 *   r == NULL: the channel is closed; err is the error clientv3 sends in
 *              a last Canceled response first, or NULL when it just
 *              closes.  w is freed after the call.
 * r is borrowed for the call. */
typedef void ctl_wengine_fn(void *ctx, struct ctl_watcher *w,
                          const struct cetcd_watch_response *r,
                          const char *err);

/* The engine.  Zero it, set client, fn and ctx, then add watchers. */
struct ctl_wengine {
    struct cetcd_client *client;        /* the client streams open on */
    ctl_wengine_fn *fn;                   /* where responses go */
    void *ctx;                          /* fn's first argument */
    struct cetcd_watch_stream *stream;  /* the current stream, or NULL */
    struct ctl_watcher *w[CTL_WATCHERS_MAX]; /* live watchers, in creation
                                                order */
    size_t n;                           /* how many */
    int64_t canceled[64];               /* unknown ids canceled on this
                                           stream */
    size_t ncanceled;                   /* how many */
    int backoff_us;                     /* reconnect backoff */
};

/* ctl_wengine_add starts a watcher on key (range_end NULL: the single key)
 * from revision rev (0: now), opening the stream if there is none.
 * Copies key and end.  Returns the watcher, or NULL when there are
 * CTL_WATCHERS_MAX already. */
struct ctl_watcher *ctl_wengine_add(struct ctl_wengine *e,
                                  const void *key, size_t key_len,
                                  const void *end, size_t end_len,
                                  int64_t rev, bool prev_kv, void *arg);

/* ctl_wengine_progress asks the server for a progress notification on the
 * stream (nothing when there is none). */
void ctl_wengine_progress(struct ctl_wengine *e);

/* ctl_wengine_step waits up to timeout_ms (<0: until something happens)
 * for the next response or end of the stream and hands it to fn. */
void ctl_wengine_step(struct ctl_wengine *e, int timeout_ms);

/* ctl_wengine_close closes the stream and frees the watchers left, without
 * calling fn. */
void ctl_wengine_close(struct ctl_wengine *e);

/* ctl_wengine_is_progress is clientv3's IsProgressNotify. */
bool ctl_wengine_is_progress(const struct cetcd_watch_response *r);

/* ctl_wengine_prefix_end writes the end of the range of keys with prefix key
 * (clientv3's GetPrefixRangeEnd: the last byte below 0xff incremented,
 * what follows dropped; "\0" when there is none) into out (room for
 * key_len, at least 1) and returns its length. */
size_t ctl_wengine_prefix_end(const uint8_t *key, size_t key_len, uint8_t *out);

#endif /* CETCD_CTL_WATCH_H */
