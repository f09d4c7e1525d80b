/*
 * thread.h - naming the daemon's threads so that top -H, perf and gdb show
 * which one is the raft loop, the applier, an RPC worker, ...
 */
#ifndef CETCD_UTIL_THREAD_H
#define CETCD_UTIL_THREAD_H

#include <pthread.h>

/* thread_name_set names thread t (Linux keeps the first 15 bytes).  Best
 * effort: a failure only loses the name, so nothing is returned. */
void thread_name_set(pthread_t t, const char *name);

#endif
