/*
 * wait.h - the wait registry: request id -> (callback, argument) of the
 * client waiting for that request's result.  Any thread registers; the apply
 * thread triggers.  Sharded by id to keep lock hold times short.
 */
#ifndef CETCD_SERVER_WAIT_H
#define CETCD_SERVER_WAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/server.h"

#define SERVER_WAIT_SHARDS 64
#define SERVER_WAIT_BUCKETS 1024 /* per shard */
/* Most waiters registered at once, SERVER_WAIT_MAX / SERVER_WAIT_SHARDS
 * per shard (request ids are consecutive, so they spread evenly): a
 * register past it is refused with ERR_FULL (server_propose answers
 * ERR_TOO_MANY_REQUESTS).  Above what the proposals queue and the
 * commit-apply gap let through in a healthy member; it bounds a leader
 * that keeps accepting while it cannot commit. */
#define SERVER_WAIT_MAX 65536

struct server_waiter;

struct server_wait_shard {
    pthread_mutex_t mu;                               /* guards buckets */
    struct server_waiter *buckets[SERVER_WAIT_BUCKETS]; /* chains by id */
    size_t n;                                         /* under mu: waiters */
};

struct server_wait {
    struct server_wait_shard shards[SERVER_WAIT_SHARDS]; /* by id % shards */
};

/* Why a request that started at start_ms timed out: the ERR_* its waiter
 * is failed with (see server__timeout_err). */
typedef int (*server_wait_why_fn)(void *ctx, uint64_t start_ms);

void server_wait_init(struct server_wait *w);
/* server_wait_register: 0, ERR_FULL (id's shard holds its share of
 * SERVER_WAIT_MAX) or ERR_NOMEM.  The request started at start_ms;
 * its waiter is failed by server_wait_expire once deadline_ms has passed
 * (both CLOCK_MONOTONIC). */
int server_wait_register(struct server_wait *w, uint64_t id,
                         server_done_fn done, void *arg, uint64_t start_ms,
                         uint64_t deadline_ms);
/* server_wait_expire fails every waiter whose deadline is before now_ms (a
 * proposal lost with a leader, or stuck in a minority) with the error
 * why(ctx, its start_ms) returns.  why runs with no lock held. */
void server_wait_expire(struct server_wait *w, uint64_t now_ms,
                        server_wait_why_fn why, void *ctx);
/* server_wait_take removes id's waiter and returns true with its callback,
 * or false if nobody waits for id. */
bool server_wait_take(struct server_wait *w, uint64_t id,
                      server_done_fn *done_out, void **arg_out);
/* server_wait_fail_all calls every waiter with err and empties the registry
 * (shutdown). */
/* server_wait_count: waiters registered now (each shard's lock taken in
 * turn, so a moving count). */
size_t server_wait_count(struct server_wait *w);
void server_wait_fail_all(struct server_wait *w, int err);
void server_wait_destroy(struct server_wait *w);

#endif
