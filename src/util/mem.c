/* mem.c - allocation wrappers with one-shot fault injection for tests. */
#include "util/mem.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static _Atomic long fault_countdown;

static int should_fail(void)
{
    if (atomic_load_explicit(&fault_countdown, memory_order_relaxed) == 0)
        return 0;
    return atomic_fetch_sub(&fault_countdown, 1) == 1;
}

void *mem_malloc(size_t size)
{
    return should_fail() ? NULL : malloc(size);
}

void *mem_calloc(size_t nmemb, size_t size)
{
    return should_fail() ? NULL : calloc(nmemb, size);
}

void *mem_realloc(void *ptr, size_t size)
{
    return should_fail() ? NULL : realloc(ptr, size);
}

void mem_free(void *ptr)
{
    free(ptr);
}

void *mem_dup(const void *src, size_t len)
{
    void *p = mem_malloc(len ? len : 1);
    if (p != NULL && len > 0)
        memcpy(p, src, len);
    return p;
}

void *mem_grow(void *items, size_t *cap, size_t n, size_t size, size_t first)
{
    assert(cap != NULL && n <= *cap && size > 0 && first > 0);
    if (n < *cap)
        return items;
    size_t want = *cap ? *cap * 2 : first;
    if (want < *cap || want > SIZE_MAX / size)
        return NULL;
    void *p = mem_realloc(items, want * size);
    if (p != NULL)
        *cap = want;
    return p;
}

void mem_fault_set(long n)
{
    atomic_store(&fault_countdown, n);
}

static int statm_fd = -1;
static pthread_once_t statm_once = PTHREAD_ONCE_INIT;

static void statm_open(void)
{
    statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
}

size_t mem_rss_shared(void)
{
    char buf[128];
    pthread_once(&statm_once, statm_open);
    if (statm_fd < 0)
        return 0;
    ssize_t n = pread(statm_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long size, resident, shared;
    if (sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) != 3)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    return (size_t)shared * (size_t)(page > 0 ? page : 4096);
}
