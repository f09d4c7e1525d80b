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

/* mem_grow makes room for item n of an array of items of size bytes with
 * *cap slots: it returns items as is while n < *cap, else the array
 * reallocated to twice *cap slots (first when *cap is 0) with *cap
 * updated, or NULL (items and *cap untouched) when out of memory.
 * The caller stores the result back in place of items. */
void *mem_grow(void *items, size_t *cap, size_t n, size_t size, size_t first);

/* mem_rss_shared returns the bytes of this process's resident pages that
 * are file-backed or shared (/proc/self/statm, third field): mapped files
 * such as the store's map and the binaries.  0 if it cannot be read. */
size_t mem_rss_shared(void);

/* mem_fault_set arms a one-shot failure of the n-th next allocation; 0
 * disarms. */
void mem_fault_set(long n);

#endif
