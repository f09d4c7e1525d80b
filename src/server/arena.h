/*
 * arena.h - a bump allocator for the memory of one request or one apply
 * batch: responses, copied keys and values.  Everything is freed at once by
 * arena_reset/arena_free.  Owned by one thread at a time; not thread-safe.
 */
#ifndef CETCD_SERVER_ARENA_H
#define CETCD_SERVER_ARENA_H

#include <stddef.h>

struct arena_block;

struct arena {
    struct arena_block *head; /* newest block, chained to older ones */
    size_t used;              /* bytes used in head */
    size_t cap;               /* capacity of head */
    size_t total;             /* bytes held in all blocks */
};

void arena_init(struct arena *a);
/* arena_alloc returns zeroed, 16-byte aligned memory, or NULL. */
void *arena_alloc(struct arena *a, size_t size);
/* arena_dup copies len bytes (NULL src with len 0 gives a valid pointer). */
void *arena_dup(struct arena *a, const void *src, size_t len);
/* arena_reset frees all but one block and forgets every allocation. */
void arena_reset(struct arena *a);
void arena_free(struct arena *a);

#endif
