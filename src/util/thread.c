/*
 * thread.c - see thread.h.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <string.h>

#include "util/check.h"
#include "util/thread.h"

struct timespec thread_deadline_ms(clockid_t clock, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

void thread_name_set(pthread_t t, const char *name)
{
    char buf[16];

    strncpy(buf, name, sizeof(buf) - 1);
    buf[sizeof(buf) - 1] = '\0';
    (void)pthread_setname_np(t, buf);
}

/* --- turns --------------------------------------------------------------- */

struct turn_work {
    thread_turn_fn fn;
    void *arg;
};

/* work_queue_once queues (fn, arg) in q[*n] (cap entries) unless it is
 * among q[from..*n) already; false when q is full. */
static bool work_queue_once(struct turn_work *q, size_t cap, size_t from,
                            size_t *n, thread_turn_fn fn, void *arg)
{
    for (size_t i = from; i < *n; i++)
        if (q[i].fn == fn && q[i].arg == arg)
            return true;
    if (*n == cap)
        return false;
    q[(*n)++] = (struct turn_work){fn, arg};
    return true;
}

static __thread bool turn_open;
static __thread size_t turn_head, turn_n; /* [turn_head, turn_n) to run */
static __thread struct turn_work turn_q[THREAD_TURN_MAX];

void thread_turn_begin(void)
{
    CHECK(!turn_open && turn_n == 0);
    turn_open = true;
}

bool thread_turn_defer(thread_turn_fn fn, void *arg)
{
    return turn_open && work_queue_once(turn_q, THREAD_TURN_MAX, turn_head,
                                        &turn_n, fn, arg);
}

void thread_turn_end(void)
{
    CHECK(turn_open);
    /* The turn stays open while the work runs: work it defers is queued
     * behind it (and runs in this loop), not run nested.  Only work not
     * yet run is matched against a new (fn, arg). */
    while (turn_head < turn_n) {
        struct turn_work w = turn_q[turn_head++];
        w.fn(w.arg);
    }
    turn_head = turn_n = 0;
    turn_open = false;
}

/* --- held wake-ups ------------------------------------------------------- */

static __thread unsigned wakes_depth;
static __thread size_t wakes_n;
static __thread struct turn_work wakes_q[THREAD_WAKES_MAX];

void thread_wakes_hold(void)
{
    wakes_depth++;
}

bool thread_wake_defer(thread_turn_fn fn, void *arg)
{
    return wakes_depth > 0 && work_queue_once(wakes_q, THREAD_WAKES_MAX, 0,
                                              &wakes_n, fn, arg);
}

void thread_wakes_release(void)
{
    CHECK(wakes_depth > 0);
    if (--wakes_depth > 0)
        return;
    /* Nothing is deferred once the depth is 0: a wake-up never queues
     * another one. */
    size_t n = wakes_n;
    wakes_n = 0;
    for (size_t i = 0; i < n; i++)
        wakes_q[i].fn(wakes_q[i].arg);
}
