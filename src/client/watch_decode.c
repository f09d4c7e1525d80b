/*
 * watch_decode.c - a WatchResponse's bytes to the public struct
 * cetcd_watch_response: protobuf-c unpacks the message, then the public
 * struct points into it (events, keys, values), as the KV results do.
 * Pure computation, no gRPC: the fuzz target fuzz/fuzz_client_watch.c
 * drives it with arbitrary bytes.  The message may lack any field (an
 * event without kv, a missing header): those read as zeros.
 */
#include <assert.h>
#include <string.h>

#include "client/client_int.h"
#include "util/mem.h"

static void event_copy(struct cetcd_watch_event *e, const Mvccpb__Event *m)
{
    memset(e, 0, sizeof(*e));
    e->type = (int)m->type;
    if (m->kv != NULL)
        client__kv_copy(&e->kv, m->kv);
    if (m->prev_kv != NULL) {
        client__kv_copy(&e->prev_kv, m->prev_kv);
        e->has_prev_kv = true;
    }
}

/* response_fill sets the zeroed r from m, which stays alive while r does. */
static int response_fill(struct cetcd_watch_response *r,
                         const Etcdserverpb__WatchResponse *m)
{
    client__header_copy(&r->header, m->header);
    r->watch_id = m->watch_id;
    r->created = m->created;
    r->canceled = m->canceled;
    r->fragment = m->fragment;
    r->compact_revision = m->compact_revision;
    r->cancel_reason = m->cancel_reason != NULL ? m->cancel_reason : "";
    if (m->n_events == 0)
        return 0;
    r->events = mem_calloc(m->n_events, sizeof(*r->events));
    if (r->events == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    for (size_t i = 0; i < m->n_events; i++) {
        if (m->events[i] != NULL)
            event_copy(&r->events[i], m->events[i]);
    }
    r->events_len = m->n_events;
    return 0;
}

int client__watch_response_decode(const uint8_t *data, size_t len,
                                  struct cetcd_watch_response **resp_out)
{
    Etcdserverpb__WatchResponse *m;
    struct cetcd_watch_response *r;

    assert(resp_out != NULL);
    assert(data != NULL || len == 0);
    *resp_out = NULL;
    m = etcdserverpb__watch_response__unpack(NULL, len, data);
    if (m == NULL)
        return CETCD_INTERNAL;
    r = mem_calloc(1, sizeof(*r));
    if (r == NULL || response_fill(r, m) != 0) {
        mem_free(r);
        etcdserverpb__watch_response__free_unpacked(m, NULL);
        return CETCD_RESOURCE_EXHAUSTED;
    }
    r->internal_ = m;
    *resp_out = r;
    return 0;
}

void cetcd_watch_response_free(struct cetcd_watch_response *r)
{
    if (r == NULL)
        return;
    mem_free(r->events);
    if (r->internal_ != NULL)
        etcdserverpb__watch_response__free_unpacked(r->internal_, NULL);
    mem_free(r);
}

bool cetcd_watch_response_is_progress(const struct cetcd_watch_response *r)
{
    assert(r != NULL);
    return r->events_len == 0 && !r->created && !r->canceled;
}
