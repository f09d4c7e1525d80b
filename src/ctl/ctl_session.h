/*
 * ctl_session.h - clientv3's lease keep-alive and its concurrency recipes
 * as etcdctl's lease keep-alive, lock and elect use them: the keep-alive
 * loop, the session (a lease kept alive by a thread), waiting on a watch,
 * waiting for the deletion of the keys created before one's own
 * (concurrency.waitDeletes), SIGINT/SIGTERM as etcdctl's cancelled
 * context, and etcdctl's display.Get of a Range answer.
 *
 * PURPOSE
 *   lock and elect are etcd's concurrency recipes run against any etcd v3
 *   server with KV, Lease and Watch calls only (not the v3lock/v3election
 *   services), so that cetcdctl lock and etcdctl lock exclude each other
 *   on the same server.  This module is what they share; ctl_lock.c and
 *   ctl_elect.c hold the recipes themselves.
 *
 * THREADS
 *   The command runs on the main thread.  A session adds one thread, the
 *   keep-alive loop, which only touches its own stream and the session's
 *   atomic flags.  The libcetcd client is shared (it is thread-safe).
 *
 * ERRORS
 *   Calls that can fail return 0, CTL_SESS_CANCELED (SIGINT or SIGTERM
 *   arrived while catching them: etcdctl's "context canceled") or
 *   CTL_SESS_FAILED with the text etcdctl prints in a struct ctl_sess_err.
 */
#ifndef CETCD_CTL_SESSION_H
#define CETCD_CTL_SESSION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctl/ctl.h"
#include "etcdserverpb/rpc.pb-c.h"

enum { CTL_SESS_OK = 0, CTL_SESS_CANCELED = 1, CTL_SESS_FAILED = 2 };

/* Why a call failed, as etcdctl words it. */
struct ctl_sess_err {
    char text[512]; /* "context canceled", "etcdserver: ..." */
};

/* ---- Signals ---- */

/* ctl_sess_catch_signals makes SIGINT and SIGTERM set the interrupted
 * flag instead of ending the process (etcdctl's signal.Notify). */
void ctl_sess_catch_signals(void);

/* ctl_sess_interrupted says whether a caught signal arrived. */
bool ctl_sess_interrupted(void);

/* ctl_sess_sleep_ms sleeps up to ms, less if a signal arrives. */
void ctl_sess_sleep_ms(int ms);

/* ctl_sess_now_ms is a monotonic clock in milliseconds. */
int64_t ctl_sess_now_ms(void);

/* ---- Keep-alive (clientv3's lessor for one lease) ---- */

/* Why a keep-alive loop ended. */
enum ctl_ka_end {
    CTL_KA_EXPIRED, /* the server answered TTL <= 0 (revoked, expired or
                       never there), or no answer came before the lease
                       would have expired */
    CTL_KA_STOPPED, /* *stop was set */
};

/* ctl_keepalive_run keeps lease id alive on the calling thread as
 * clientv3's KeepAlive does: a LeaseKeepAlive stream (reopened 500 ms
 * after it breaks), a request at once and then TTL/3 after each answer
 * (every 500 ms while none comes), on_resp (may be NULL) for each answer
 * with TTL > 0; it ends when the lease is gone, when first_timeout_ms
 * pass without a first answer or TTL seconds without a later one, or when
 * *stop becomes true (polled every 100 ms).  The answers are borrowed for
 * the callback. */
enum ctl_ka_end ctl_keepalive_run(
    struct cetcd_client *c, int64_t id, int first_timeout_ms,
    void (*on_resp)(void *arg, const Etcdserverpb__LeaseKeepAliveResponse *r),
    void *arg, const atomic_bool *stop);

/* ctl_keepalive_first_timeout_ms is clientv3's first keep-alive timeout
 * for etcdctl's client: --dial-timeout + 1 s (5 s if that is 1 s). */
int ctl_keepalive_first_timeout_ms(void);

/* ---- Calls ---- */

/* ctl_sess_call makes a unary call on ctl_client().  patient: the call
 * is retried while the server cannot be reached or does not answer (as
 * clientv3 does under a context without deadline), until a caught signal
 * arrives (CTL_SESS_CANCELED); not patient: one try within
 * --command-timeout.  Every recipe step that uses it is safe to repeat.
 * *resp_out (free with protobuf_c_message_free_unpacked) on success. */
int ctl_sess_call(const char *path, const ProtobufCMessage *req,
                  const ProtobufCMessageDescriptor *desc, bool patient,
                  ProtobufCMessage **resp_out, struct ctl_sess_err *e);

/* ---- Session ---- */

struct ctl_session; /* opaque; owned by the main thread */

/* ctl_session_open grants a lease of ttl_s seconds (patiently: before
 * the signals are caught, SIGINT ends the process as it ends etcdctl) and
 * starts the thread that keeps it alive.  Exits with etcdctl's error line
 * (CTL_EXIT_ERROR) when the grant fails. */
struct ctl_session *ctl_session_open(int64_t ttl_s);

/* ctl_session_lease is the session's lease id. */
int64_t ctl_session_lease(const struct ctl_session *s);

/* ctl_session_done says whether the keep-alive ended (session.Done()). */
bool ctl_session_done(const struct ctl_session *s);

/* ctl_session_close stops the keep-alive thread and frees the session.
 * The lease is left to expire, as etcdctl leaves it (it never calls
 * Session.Close). */
void ctl_session_close(struct ctl_session *s);

/* ---- Watching ---- */

/* One watcher on its own Watch stream, reopened from the revision after
 * the last event seen when the stream breaks (clientv3's watcher). */
struct ctl_watch {
    struct cetcd_stream *stream; /* the Watch call, or NULL between tries */
    char *key;                   /* the watched key (owned) */
    size_t key_len;              /* its length */
    bool prefix;                 /* watch every key under key */
    int64_t next_rev;            /* where a reopened stream starts */
};

/* ctl_watch_open starts watching key (or the prefix) from rev. */
void ctl_watch_open(struct ctl_watch *w, const char *key, bool prefix,
                    int64_t rev);

/* ctl_watch_next waits for the next answer that carries events and sets
 * *resp_out (free with protobuf_c_message_free_unpacked).  A cancelled
 * watcher fails with clientv3's text (compacted, future revision or the
 * server's reason). */
int ctl_watch_next(struct ctl_watch *w, Etcdserverpb__WatchResponse **resp_out,
                   struct ctl_sess_err *e);

/* ctl_watch_close ends the watch. */
void ctl_watch_close(struct ctl_watch *w);

/* ctl_sess_wait_deletes waits until no key under pfx has a create
 * revision at or below max_create_rev (concurrency.waitDeletes): the
 * last-created one's deletion is awaited, again and again.  *resp_out is
 * the final, empty Range answer (its header is the one etcdctl reports;
 * free with protobuf_c_message_free_unpacked). */
int ctl_sess_wait_deletes(const char *pfx, int64_t max_create_rev,
                          Etcdserverpb__RangeResponse **resp_out,
                          struct ctl_sess_err *e);

/* ctl_sess_range_first gets the key under pfx with the lowest (ascend)
 * or highest create revision, limit 1 (clientv3's WithFirstCreate /
 * WithLastCreate), optionally at or below max_create_rev (0: any). */
int ctl_sess_range_first(const char *pfx, bool ascend, int64_t max_create_rev,
                         Etcdserverpb__RangeResponse **resp_out,
                         struct ctl_sess_err *e);

/* ctl_sess_prefix_end is clientv3's getPrefix: the key after every key
 * that starts with key[0..n), in a buffer the caller frees; "\0" (length
 * 1) when there is none. */
uint8_t *ctl_sess_prefix_end(const char *key, size_t n, size_t *len_out);

/* ---- Output ---- */

/* ctl_sess_display_get prints a Range answer as etcdctl's display.Get in
 * the --write-out format (and --hex for simple) and flushes stdout.
 * Returns 0, or CTL_EXIT_BAD_FEATURE for -w table (which etcdctl cannot
 * print: the caller cleans up, then exits with ctl_sess_display_exit). */
int ctl_sess_display_get(const Etcdserverpb__RangeResponse *r);

/* ctl_sess_display_exit exits as etcdctl's table printer does for Get. */
__attribute__((noreturn)) void ctl_sess_display_exit(void);

#endif /* CETCD_CTL_SESSION_H */
