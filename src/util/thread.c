/*
 * thread.c - see thread.h.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <string.h>

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
