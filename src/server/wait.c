/* wait.c - sharded chained hash of waiters. */
#include "server/wait.h"

#include "util/check.h"
#include <string.h>

#include "util/err.h"
#include "util/mem.h"

struct server_waiter {
    struct server_waiter *next; /* bucket chain */
    uint64_t id;                /* request id */
    server_done_fn done;        /* result callback */
    void *arg;                  /* its argument */
    uint64_t start_ms;          /* when the request started */
    uint64_t deadline_ms;       /* failed with a timeout after this */
};

static struct server_wait_shard *shard_of(struct server_wait *w, uint64_t id)
{
    return &w->shards[id % SERVER_WAIT_SHARDS];
}

static struct server_waiter **bucket_of(struct server_wait_shard *s,
                                        uint64_t id)
{
    return &s->buckets[(id / SERVER_WAIT_SHARDS) % SERVER_WAIT_BUCKETS];
}

void server_wait_init(struct server_wait *w)
{
    memset(w, 0, sizeof *w);
    for (int i = 0; i < SERVER_WAIT_SHARDS; i++)
        pthread_mutex_init(&w->shards[i].mu, NULL);
}

int server_wait_register(struct server_wait *w, uint64_t id,
                         server_done_fn done, void *arg, uint64_t start_ms,
                         uint64_t deadline_ms)
{
    CHECK(id != 0 && done != NULL);
    CHECK(start_ms <= deadline_ms);
    struct server_waiter *x = mem_malloc(sizeof *x);
    if (x == NULL)
        return ERR_NOMEM;
    x->id = id;
    x->done = done;
    x->arg = arg;
    x->start_ms = start_ms;
    x->deadline_ms = deadline_ms;
    struct server_wait_shard *s = shard_of(w, id);
    pthread_mutex_lock(&s->mu);
    if (s->n >= SERVER_WAIT_MAX / SERVER_WAIT_SHARDS) {
        pthread_mutex_unlock(&s->mu);
        mem_free(x);
        return ERR_FULL;
    }
    s->n++;
    struct server_waiter **b = bucket_of(s, id);
    x->next = *b;
    *b = x;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

bool server_wait_take(struct server_wait *w, uint64_t id,
                      server_done_fn *done_out, void **arg_out)
{
    struct server_wait_shard *s = shard_of(w, id);
    struct server_waiter *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (struct server_waiter **p = bucket_of(s, id); *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            found = *p;
            *p = found->next;
            CHECK(s->n > 0);
            s->n--;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (found == NULL)
        return false;
    *done_out = found->done;
    *arg_out = found->arg;
    mem_free(found);
    return true;
}

void server_wait_fail_all(struct server_wait *w, int err)
{
    struct server_response r = {.err = err, .msg = NULL};
    for (int i = 0; i < SERVER_WAIT_SHARDS; i++) {
        struct server_wait_shard *s = &w->shards[i];
        for (int b = 0; b < SERVER_WAIT_BUCKETS; b++) {
            pthread_mutex_lock(&s->mu);
            struct server_waiter *x = s->buckets[b];
            s->buckets[b] = NULL;
            for (struct server_waiter *y = x; y != NULL; y = y->next)
                s->n--;
            pthread_mutex_unlock(&s->mu);
            while (x != NULL) {
                struct server_waiter *n = x->next;
                x->done(x->arg, &r);
                mem_free(x);
                x = n;
            }
        }
    }
}

void server_wait_destroy(struct server_wait *w)
{
    for (int i = 0; i < SERVER_WAIT_SHARDS; i++)
        pthread_mutex_destroy(&w->shards[i].mu);
}

/* Unlinks the expired waiters of one bucket into *out (under the lock);
 * returns how many. */
static size_t take_expired(struct server_waiter **b, uint64_t now_ms,
                           struct server_waiter **out)
{
    size_t n = 0;
    while (*b != NULL) {
        struct server_waiter *x = *b;
        if (x->deadline_ms >= now_ms) {
            b = &x->next;
            continue;
        }
        *b = x->next;
        x->next = *out;
        *out = x;
        n++;
    }
    return n;
}

size_t server_wait_count(struct server_wait *w)
{
    size_t n = 0;
    for (int i = 0; i < SERVER_WAIT_SHARDS; i++) {
        pthread_mutex_lock(&w->shards[i].mu);
        n += w->shards[i].n;
        pthread_mutex_unlock(&w->shards[i].mu);
    }
    return n;
}

void server_wait_expire(struct server_wait *w, uint64_t now_ms,
                        server_wait_why_fn why, void *ctx)
{
    CHECK(why != NULL);
    for (int i = 0; i < SERVER_WAIT_SHARDS; i++) {
        struct server_wait_shard *s = &w->shards[i];
        struct server_waiter *expired = NULL;
        pthread_mutex_lock(&s->mu);
        for (int b = 0; b < SERVER_WAIT_BUCKETS; b++)
            if (s->buckets[b] != NULL)
                s->n -= take_expired(&s->buckets[b], now_ms, &expired);
        pthread_mutex_unlock(&s->mu);
        while (expired != NULL) {
            struct server_waiter *n = expired->next;
            struct server_response r = {.err = why(ctx, expired->start_ms),
                                        .msg = NULL};
            CHECK(r.err < 0);
            expired->done(expired->arg, &r);
            mem_free(expired);
            expired = n;
        }
    }
}
