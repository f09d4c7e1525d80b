/*
 * queue.c - the bounded per-peer queue of encoded raft messages.
 *
 * A ring of peer__buf bounded twice: by message count (a burst of tiny
 * heartbeats) and by bytes (a few large appends).  Overflow is refused,
 * never grown: the caller drops the message and reports the peer
 * unreachable, so a dead peer costs bounded memory.
 */
#include <assert.h>
#include <string.h>

#include "peer/peer_int.h"
#include "util/err.h"
#include "util/mem.h"

int peer__queue_init(struct peer__queue *q, size_t msgs_max, size_t bytes_max)
{
    assert(q != NULL);
    assert(msgs_max > 0 && bytes_max > 0);
    memset(q, 0, sizeof(*q));
    q->ring = mem_calloc(msgs_max, sizeof(*q->ring));
    if (q->ring == NULL)
        return ERR_NOMEM;
    q->msgs_max = msgs_max;
    q->bytes_max = bytes_max;
    return 0;
}

size_t peer__queue_clear(struct peer__queue *q)
{
    size_t n = q->n;
    while (q->n > 0) {
        mem_free(q->ring[q->head].data);
        q->head = (q->head + 1) % q->msgs_max;
        q->n--;
    }
    q->bytes = 0;
    return n;
}

void peer__queue_close(struct peer__queue *q)
{
    if (q->ring == NULL)
        return;
    peer__queue_clear(q);
    mem_free(q->ring);
    q->ring = NULL;
}

int peer__queue_push(struct peer__queue *q, const struct peer__buf *b)
{
    assert(q->ring != NULL && b != NULL);
    assert(q->n <= q->msgs_max && q->bytes <= q->bytes_max);
    if (q->n == q->msgs_max || b->len > q->bytes_max - q->bytes)
        return ERR_FULL;
    q->ring[(q->head + q->n) % q->msgs_max] = *b;
    q->n++;
    q->bytes += b->len;
    return 0;
}

size_t peer__queue_take(struct peer__queue *q, struct peer__buf *out,
                        size_t max_n, size_t max_bytes)
{
    size_t taken = 0, bytes = 0;

    assert(q->ring != NULL && out != NULL && max_n > 0);
    while (q->n > 0 && taken < max_n) {
        struct peer__buf *b = &q->ring[q->head];
        /* The first message always goes, even alone over max_bytes, so a
         * large append cannot wedge the queue. */
        if (taken > 0 && b->len > max_bytes - bytes)
            break;
        if (taken == 0 && b->len > max_bytes)
            max_bytes = b->len;
        out[taken++] = *b;
        bytes += b->len;
        memset(b, 0, sizeof(*b));
        q->head = (q->head + 1) % q->msgs_max;
        q->n--;
        q->bytes -= out[taken - 1].len;
    }
    assert(q->n == 0 || taken > 0 || max_n == 0);
    return taken;
}
