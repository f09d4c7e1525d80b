/*
 * mem.h - the allocator every module uses.
 *
 * Thin wrappers over malloc/calloc/realloc/free that tests can make fail:
 * mem_fault_set(n) makes the n-th allocation from now (1 = the next one) and
 * only that one return NULL.  Thread-safe; the fault counter is global and
 * meant for single-threaded unit tests.
 */
#ifndef CETCD_UTIL_MEM_H
#define CETCD_UTIL_MEM_H

#include <stddef.h>

void *mem_malloc(size_t size);
void *mem_calloc(size_t nmemb, size_t size);
void *mem_realloc(void *ptr, size_t size);
void mem_free(void *ptr);
/* mem_dup returns a malloc'd copy of len bytes of src (NULL if len == 0 and
 * src == NULL is fine), or NULL on failure. */
void *mem_dup(const void *src, size_t len);

/* mem_fault_set arms a one-shot failure of the n-th next allocation; 0
 * disarms. */
void mem_fault_set(long n);

#endif
