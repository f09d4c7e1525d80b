/*
 * fuzz_client_watch.c - goal: libcetcd's WatchResponse decoding
 * (client__watch_response_decode, the path every message of a Watch
 * stream takes) turns any bytes into either an error or a response whose
 * every pointer is readable and whose lengths match, and frees it without
 * a leak.  Method: decode the input; on success read every byte of every
 * event's key, value and prev_kv and the cancel reason, check the
 * progress predicate against the fields, then free.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "client/client_int.h"

static size_t touch(const struct cetcd_kv *kv)
{
    size_t sum = 0;

    for (size_t i = 0; i < kv->key_len; i++)
        sum += kv->key[i];
    for (size_t i = 0; i < kv->value_len; i++)
        sum += kv->value[i];
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cetcd_watch_response *r = NULL;
    volatile size_t sum = 0;
    int rc = client__watch_response_decode(data, size, &r);

    if (rc != 0) {
        assert(r == NULL);
        return 0;
    }
    assert(r != NULL && r->cancel_reason != NULL);
    assert((r->events == NULL) == (r->events_len == 0));
    sum += strlen(r->cancel_reason);
    for (size_t i = 0; i < r->events_len; i++) {
        sum += touch(&r->events[i].kv);
        if (r->events[i].has_prev_kv)
            sum += touch(&r->events[i].prev_kv);
    }
    assert(cetcd_watch_response_is_progress(r) ==
           (r->events_len == 0 && !r->created && !r->canceled));
    cetcd_watch_response_free(r);
    (void)sum;
    return 0;
}
