/*
 * queue.h - the bounded multi-producer, single-consumer queue of log entries
 * between the server's threads (API threads -> raft thread, raft thread ->
 * apply thread).  The consumer takes everything queued at once, which is
 * what turns concurrent proposals into one WAL batch (group commit).
 */
#ifndef CETCD_SERVER_QUEUE_H
#define CETCD_SERVER_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* server_entry: one request on its way through the log.  Allocated by
 * server_propose (or by WAL replay) as one block with its data; owned by
 * whichever queue or thread holds it; freed by the apply thread. */
struct server_entry {
    struct server_entry *next; /* queue link */
    uint64_t index;            /* log index, set by the raft thread */
    uint64_t id;               /* request id (waiter key); 0 = no waiter */
    size_t len;                /* bytes of data */
    bool tentative;            /* not durable yet: see apply.c */
    uint8_t data[];            /* encoded cetcdpb.InternalRequest */
};

struct server_queue {
    pthread_mutex_t mu;         /* guards everything below */
    pthread_cond_t cv;          /* signalled on push and close */
    struct server_entry *head;  /* oldest */
    struct server_entry *tail;  /* newest */
    size_t count;               /* entries queued */
    size_t max;                 /* push refuses beyond this */
    bool closed;                /* no more pushes; pop drains then ends */
};

void server_queue_init(struct server_queue *q, size_t max);
void server_queue_destroy(struct server_queue *q);
/* push: 0, ERR_FULL (count == max and !force) or ERR_STOPPED (closed). */
int server_queue_push(struct server_queue *q, struct server_entry *e,
                      bool force);
/* push_list appends a whole chain (never refused unless closed). */
int server_queue_push_list(struct server_queue *q, struct server_entry *head,
                           struct server_entry *tail, size_t n);
/* push_front puts a chain back before everything queued (the applier's
 * entries that a full disk refused: they stay first in line).  Never
 * refused, also when closed.  Returns 0. */
int server_queue_push_front(struct server_queue *q, struct server_entry *head,
                            struct server_entry *tail, size_t n);
/* pop_all blocks until something is queued or the queue is closed; returns
 * the chain (oldest first) and its length in *n_out, or NULL when closed
 * and empty. */
struct server_entry *server_queue_pop_all(struct server_queue *q,
                                          size_t *n_out);
void server_queue_close(struct server_queue *q);
/* try_pop_all: like pop_all without blocking (NULL when empty). */
struct server_entry *server_queue_try_pop_all(struct server_queue *q,
                                              size_t *n_out);
/* wait_nonempty blocks until something is queued (true) or the queue is
 * closed and empty (false); it takes nothing. */
bool server_queue_wait_nonempty(struct server_queue *q);
/* wait_nonempty_ms is wait_nonempty for at most ms milliseconds: 1 when
 * something is queued, 0 when the time passed first, -1 when the queue is
 * closed and empty. */
int server_queue_wait_nonempty_ms(struct server_queue *q, uint32_t ms);
/* is_empty: nothing queued right now. */
bool server_queue_is_empty(struct server_queue *q);

#endif
