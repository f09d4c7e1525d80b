/*
 * thread.h - thread helpers: naming the daemon's threads so that top -H,
 * perf and gdb show which one is the raft loop, the applier, an RPC
 * worker, ...; the deadline of a timed condition wait; the turns of an
 * event loop thread (work deferred to the end of its turn); and held
 * wake-ups (a burst handed to other threads, each woken once).
 */
#ifndef CETCD_UTIL_THREAD_H
#define CETCD_UTIL_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* thread_name_set names thread t (Linux keeps the first 15 bytes).  Best
 * effort: a failure only loses the name, so nothing is returned. */
void thread_name_set(pthread_t t, const char *name);

/* thread_deadline_ms: the time ms milliseconds from now on clock (the
 * clock the condition variable waits on), for pthread_cond_timedwait. */
struct timespec thread_deadline_ms(clockid_t clock, uint64_t ms);

/*
 * Turns: an event loop thread (rpc/server.c) handles every call it read in
 * one go, then writes the answers.  Work that gains from being done once
 * for all of them, after the last (a lone voter's raft pass: one WAL
 * write and one fdatasync for every proposal of the turn instead of one
 * per call), is deferred to the end of the turn with thread_turn_defer.
 *
 * thread_turn_begin opens a turn on this thread (turns do not nest).
 * thread_turn_defer(fn, arg) queues fn(arg) for the end of this thread's
 * turn and returns true, or returns false when this thread has no turn
 * open or its queue (THREAD_TURN_MAX) is full: the caller then does the
 * work itself, now.  The same (fn, arg) queued twice runs once.  Deferred
 * work may not be waited for inside the turn (it has not run yet).
 * thread_turn_end runs the queued work in order (work queued while it
 * runs runs too) and closes the turn.
 */
#define THREAD_TURN_MAX 8
typedef void (*thread_turn_fn)(void *arg);
void thread_turn_begin(void);
bool thread_turn_defer(thread_turn_fn fn, void *arg);
void thread_turn_end(void);

/*
 * Held wake-ups: a thread that hands a burst of work to other threads'
 * queues (the applier publishing a batch: its waiters' answers and its
 * watch events, to the event loops) holds the wake-ups meanwhile, so that
 * each receiving thread is woken once with the whole burst in its queue,
 * instead of at the first item (it would then run on a part of the burst,
 * write, sleep, and be woken again for the rest).
 *
 * thread_wakes_hold and thread_wakes_release bracket the burst (they
 * nest: the outermost release runs the queued wake-ups).
 * thread_wake_defer(fn, arg) queues fn(arg) for that release and returns
 * true, or returns false when this thread holds nothing or
 * THREAD_WAKES_MAX distinct wake-ups are queued: the caller then wakes
 * now.  The same (fn, arg) queued twice runs once.  A held burst must
 * not wait for the threads it feeds, and should be short: a queue that
 * is no longer empty is not woken again by other pushers, so their items
 * wait for the release too.
 */
#define THREAD_WAKES_MAX 8
void thread_wakes_hold(void);
bool thread_wake_defer(thread_turn_fn fn, void *arg);
void thread_wakes_release(void);

#endif
