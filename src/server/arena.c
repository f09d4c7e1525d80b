/* arena.c - bump allocation in growing blocks; reset keeps the newest block
 * so a steady workload allocates nothing from malloc after warm-up. */
#include "server/arena.h"

#include "util/check.h"
#include <stdint.h>
#include <string.h>

#include "util/mem.h"

#define ARENA_BLOCK_MIN (64 * 1024)

struct arena_block {
    struct arena_block *next; /* older block */
    size_t cap;               /* usable bytes after the header */
    _Alignas(16) unsigned char data[];
};

void arena_init(struct arena *a)
{
    memset(a, 0, sizeof *a);
}

static int grow(struct arena *a, size_t need)
{
    size_t cap = a->cap * 2;
    if (cap < ARENA_BLOCK_MIN)
        cap = ARENA_BLOCK_MIN;
    if (cap < need)
        cap = need;
    struct arena_block *b = mem_malloc(sizeof *b + cap);
    if (b == NULL)
        return -1;
    b->next = a->head;
    b->cap = cap;
    a->head = b;
    a->used = 0;
    a->cap = cap;
    a->total += cap;
    return 0;
}

void *arena_alloc(struct arena *a, size_t size)
{
    size_t need = (size + 15) & ~(size_t)15;
    if (need < size)
        return NULL;
    if (a->head == NULL || a->cap - a->used < need) {
        if (grow(a, need) != 0)
            return NULL;
    }
    void *p = a->head->data + a->used;
    a->used += need;
    CHECK(a->used <= a->cap);
    memset(p, 0, size);
    return p;
}

void *arena_dup(struct arena *a, const void *src, size_t len)
{
    void *p = arena_alloc(a, len ? len : 1);
    if (p != NULL && len > 0)
        memcpy(p, src, len);
    return p;
}

void arena_reset(struct arena *a)
{
    if (a->head == NULL)
        return;
    struct arena_block *b = a->head->next;
    while (b != NULL) {
        struct arena_block *n = b->next;
        mem_free(b);
        b = n;
    }
    a->head->next = NULL;
    a->total = a->head->cap;
    a->used = 0;
}

void arena_free(struct arena *a)
{
    arena_reset(a);
    mem_free(a->head);
    arena_init(a);
}
