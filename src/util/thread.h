/*
 * thread.h - thread helpers: naming the daemon's threads so that top -H,
 * perf and gdb show which one is the raft loop, the applier, an RPC
 * worker, ...; and the deadline of a timed condition wait.
 */
#ifndef CETCD_UTIL_THREAD_H
#define CETCD_UTIL_THREAD_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* thread_name_set names thread t (Linux keeps the first 15 bytes).  Best
 * effort: a failure only loses the name, so nothing is returned. */
void thread_name_set(pthread_t t, const char *name);

/* thread_deadline_ms: the time ms milliseconds from now on clock (the
 * clock the condition variable waits on), for pthread_cond_timedwait. */
struct timespec thread_deadline_ms(clockid_t clock, uint64_t ms);

#endif
