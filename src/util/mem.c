/* mem.c - allocation wrappers with one-shot fault injection for tests. */
#include "util/mem.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
