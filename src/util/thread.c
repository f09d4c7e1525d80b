/*
 * thread.c - see thread.h.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <string.h>

#include "util/thread.h"

void thread_name_set(pthread_t t, const char *name)
{
    char buf[16];

    strncpy(buf, name, sizeof(buf) - 1);
    buf[sizeof(buf) - 1] = '\0';
    (void)pthread_setname_np(t, buf);
}
