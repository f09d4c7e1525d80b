/* queue.c - mutex + condition variable queue; the consumer grabs the whole
 * chain in O(1). */
#include "server/queue.h"

#include "util/check.h"

#include <time.h>

#include "util/err.h"

void server_queue_init(struct server_queue *q, size_t max)
{
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* wait_nonempty_ms */
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    q->head = q->tail = NULL;
    q->count = 0;
    q->max = max;
    q->closed = false;
}

void server_queue_destroy(struct server_queue *q)
{
    CHECK(q->head == NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

static void append(struct server_queue *q, struct server_entry *head,
                   struct server_entry *tail, size_t n)
{
    tail->next = NULL;
    if (q->tail != NULL)
        q->tail->next = head;
    else
        q->head = head;
    q->tail = tail;
    q->count += n;
}

int server_queue_push(struct server_queue *q, struct server_entry *e,
                      bool force)
{
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    if (q->closed)
        rc = ERR_STOPPED;
    else if (!force && q->count >= q->max)
        rc = ERR_FULL;
    else
        append(q, e, e, 1);
    if (rc == 0 && q->count == 1)
        pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int server_queue_push_list(struct server_queue *q, struct server_entry *head,
                           struct server_entry *tail, size_t n)
{
    CHECK(head != NULL && tail != NULL && n > 0);
    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return ERR_STOPPED;
    }
    append(q, head, tail, n);
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

struct server_entry *server_queue_pop_all(struct server_queue *q,
                                          size_t *n_out)
{
    pthread_mutex_lock(&q->mu);
    while (q->head == NULL && !q->closed)
        pthread_cond_wait(&q->cv, &q->mu);
    struct server_entry *h = q->head;
    *n_out = q->count;
    q->head = q->tail = NULL;
    q->count = 0;
    pthread_mutex_unlock(&q->mu);
    return h;
}

void server_queue_close(struct server_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

bool server_queue_wait_nonempty(struct server_queue *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->head == NULL && !q->closed)
        pthread_cond_wait(&q->cv, &q->mu);
    bool some = q->head != NULL;
    pthread_mutex_unlock(&q->mu);
    return some;
}

int server_queue_wait_nonempty_ms(struct server_queue *q, uint32_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000u;
    until.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    while (q->head == NULL && !q->closed && rc == 0)
        rc = pthread_cond_timedwait(&q->cv, &q->mu, &until);
    int some = q->head != NULL ? 1 : q->closed ? -1 : 0;
    pthread_mutex_unlock(&q->mu);
    return some;
}

bool server_queue_is_empty(struct server_queue *q)
{
    pthread_mutex_lock(&q->mu);
    bool empty = q->head == NULL;
    pthread_mutex_unlock(&q->mu);
    return empty;
}

struct server_entry *server_queue_try_pop_all(struct server_queue *q,
                                              size_t *n_out)
{
    pthread_mutex_lock(&q->mu);
    struct server_entry *h = q->head;
    *n_out = q->count;
    q->head = q->tail = NULL;
    q->count = 0;
    pthread_mutex_unlock(&q->mu);
    return h;
}

int server_queue_push_front(struct server_queue *q, struct server_entry *head,
                            struct server_entry *tail, size_t n)
{
    CHECK(head != NULL && tail != NULL && n > 0);
    pthread_mutex_lock(&q->mu);
    tail->next = q->head;
    q->head = head;
    if (q->tail == NULL)
        q->tail = tail;
    q->count += n;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}
