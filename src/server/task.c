/*
 * task.c - cetcd-task and cetcd-slow, the runners of posted tasks
 * (server.h "Tasks"): each an intrusive FIFO under a leaf mutex, one
 * thread that pops a task and runs it with no lock held.  A queue is
 * bounded by construction: a task is queued at most once, and each lives
 * inside a request its service bounds.
 */
#include <stdlib.h>

#include "server/server.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/thread.h"

/* pop takes the oldest task, or NULL; under q->mu. */
static struct server_task *pop(struct server_tasks *q)
{
    struct server_task *t = q->head;
    if (t == NULL)
        return NULL;
    q->head = t->next;
    if (q->head == NULL)
        q->tail = NULL;
    t->next = NULL;
    CHECK(t->queued);
    t->queued = false;
    return t;
}

static void *task_main(void *arg)
{
    struct server_tasks *q = arg;
    pthread_mutex_lock(&q->mu);
    while (!q->stop) {
        struct server_task *t = pop(q);
        if (t == NULL) {
            pthread_cond_wait(&q->cv, &q->mu);
            continue;
        }
        pthread_mutex_unlock(&q->mu);
        t->fn(t, false);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void post(struct server_tasks *q, struct server_task *t)
{
    CHECK(t != NULL && t->fn != NULL);
    pthread_mutex_lock(&q->mu);
    if (!t->queued) {
        t->queued = true;
        t->next = NULL;
        if (q->tail != NULL)
            q->tail->next = t;
        else
            q->head = t;
        q->tail = t;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
}

void server_task_post(struct server *s, struct server_task *t)
{
    CHECK(s != NULL);
    post(&s->tasks, t);
}

void server_task_post_slow(struct server *s, struct server_task *t)
{
    CHECK(s != NULL);
    post(&s->slow, t);
}

static int start(struct server_tasks *q, const char *name)
{
    pthread_mutex_init(&q->mu, NULL);
    q->inited = true;
    pthread_cond_init(&q->cv, NULL);
    q->head = q->tail = NULL;
    q->stop = false;
    if (pthread_create(&q->thread, NULL, task_main, q) != 0)
        return ERR_NOMEM;
    thread_name_set(q->thread, name);
    q->started = true;
    return 0;
}

int server__tasks_start(struct server *s)
{
    int rc = start(&s->tasks, "cetcd-task");
    return rc != 0 ? rc : start(&s->slow, "cetcd-slow");
}

static void stop(struct server_tasks *q)
{
    if (!q->started)
        return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    q->started = false;
}

void server__tasks_stop(struct server *s)
{
    stop(&s->tasks);
    stop(&s->slow);
}

static void drain(struct server_tasks *q)
{
    if (!q->inited)
        return;
    CHECK(!q->started);
    /* What is left runs with stopping (a task may post again: drain). */
    for (;;) {
        pthread_mutex_lock(&q->mu);
        struct server_task *t = pop(q);
        pthread_mutex_unlock(&q->mu);
        if (t == NULL)
            break;
        t->fn(t, true);
    }
    CHECK(q->head == NULL && q->tail == NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    q->inited = false;
}

void server__tasks_drain(struct server *s)
{
    drain(&s->tasks);
    drain(&s->slow);
}
