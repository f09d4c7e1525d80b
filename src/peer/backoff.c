/*
 * backoff.c - the reconnect schedule of a sender thread.
 *
 * Exponential without jitter: min, 2*min, 4*min ... capped at max.  Jitter
 * buys nothing here because each member has one stream per peer, not a
 * crowd of clients reconnecting to one server at once.
 */
#include <assert.h>

#include "peer/peer_int.h"

uint32_t peer__backoff_ms(uint32_t failures, uint32_t min_ms, uint32_t max_ms)
{
    assert(min_ms > 0 && min_ms <= max_ms);
    if (failures == 0)
        return 0;
    uint64_t d = min_ms;
    for (uint32_t i = 1; i < failures && d < max_ms; i++)
        d *= 2;
    uint32_t r = d > max_ms ? max_ms : (uint32_t)d;
    assert(r >= min_ms && r <= max_ms);
    return r;
}
