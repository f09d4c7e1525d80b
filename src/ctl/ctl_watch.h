/*
 * ctl_watch.h - the watch engine that cetcdctl's `watch` and `make-mirror`
 * share (ctl_wengine.c): watchers on one libcetcd Watch stream (poll mode)
 * that behave as etcd clientv3 3.4's watchers do, which is what etcdctl's
 * output follows.  At the end, the private declarations that the files of
 * the `watch` command share (ctl_watch.c, ctl_watch_print.c,
 * ctl_watch_interactive.c); make-mirror uses none of them.
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
#include "ctl/ctl.h"

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

/* ========================================================================
 * Private to the `watch` command's files.  Single-threaded, as the engine.
 * ====================================================================== */

/* What the watch command's engine callback needs (its ctx). */
struct ctl_watch_run {
    enum ctl_output out; /* the output format */
    bool closed;         /* a watcher closed (ends a plain watch) */
};

/* A list of argument strings, borrowed; the array v is the list's own
 * (free(v)). */
struct ctl_watch_args {
    char **v; /* the strings */
    int n;    /* how many */
};

/* The watch of a command line: what to watch and what to run. */
struct ctl_watch_req {
    struct ctl_watch_args watch; /* key [range_end] ... (watchArgs) */
    struct ctl_watch_args exec;  /* the command after "--" (execArgs) */
};

/* ctl_watch__args_push appends s (borrowed) to a, growing a->v; exits
 * cetcdctl when out of memory.  (ctl_watch.c) */
void ctl_watch__args_push(struct ctl_watch_args *a, char *s);

/* ctl_watch__parse_line is parseWatchArgs for an interactive "watch ..."
 * line (its words after "watch"); errors end cetcdctl as they end
 * etcdctl.  It resets the watch flags to their defaults and sets them from
 * the line's.  q's lists borrow from words, env_key and env_range; the
 * caller frees q->watch.v and q->exec.v.  (ctl_watch.c) */
void ctl_watch__parse_line(struct ctl_watch_req *q,
                           const struct ctl_watch_args *words,
                           const char *env_key, const char *env_range);

/* ctl_watch__add_watch starts the watch of q on e with the current flags
 * (--prefix, --rev, --prev-kv); the watcher's arg is a copy of q's
 * command.  Returns NULL, or getWatchChan's error as static text.
 * (ctl_watch.c) */
const char *ctl_watch__add_watch(struct ctl_wengine *e,
                                 struct ctl_watch_req *q);

/* ctl_watch__on_watch is the watch command's ctl_wengine_fn, etcdctl's
 * printWatchCh: ctx is a struct ctl_watch_run, whose closed it sets when a
 * watcher's channel closes.  It prints the cancel and progress lines and
 * the response, then runs the watcher's command for every event (a failed
 * one exits 1), and frees that command when the channel closes.
 * (ctl_watch.c) */
void ctl_watch__on_watch(void *ctx, struct ctl_watcher *w,
                         const struct cetcd_watch_response *r,
                         const char *err);

/* ctl_watch__go_errno writes Go's syscall.Errno text for err into buf
 * (cap bytes): glibc's with a lower-case first letter, which is how Go's
 * table reads for these.  (ctl_watch.c) */
void ctl_watch__go_errno(char *buf, size_t cap, int err);

/* ctl_watch__flush_out writes stdout out now (a watch streams); a reader
 * that went away ends cetcdctl by SIGPIPE as it ends etcdctl (gRPC may
 * have set the signal to be ignored).  (ctl_watch_print.c) */
void ctl_watch__flush_out(void);

/* ctl_watch__display is etcdctl's display.Watch: r in format out on
 * stdout, then flushed.  r NULL is the zero response with Canceled set
 * that clientv3 sends with a closing error.  r is borrowed for the call;
 * the table format exits with etcdctl's error.  (ctl_watch_print.c) */
void ctl_watch__display(enum ctl_output out,
                        const struct cetcd_watch_response *r);

/* ctl_watch__interactive is watchInteractiveFunc (-i): lines from stdin,
 * watchers on one stream with run as the callback's ctx.  Responses are
 * polled in short steps between reads of stdin.  It never returns: the
 * end of stdin or an error exits cetcdctl.  (ctl_watch_interactive.c) */
__attribute__((noreturn)) void
ctl_watch__interactive(struct ctl_watch_run *run, const char *env_key,
                       const char *env_range);

#endif /* CETCD_CTL_WATCH_H */
