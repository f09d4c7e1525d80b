/*
 * channel.c - the channel arguments libcetcd and the peer transport share
 * (see dial.h).
 */
#include <assert.h>

#include "dial/dial.h"

grpc_channel *dial_channel_create(const char *target,
                                  grpc_channel_credentials *creds,
                                  const struct dial_channel_opts *o)
{
    assert(target != NULL && creds != NULL && o != NULL);
    assert(o->max_recv_bytes > 0 && o->backoff_min_ms > 0 &&
           o->backoff_max_ms >= o->backoff_min_ms);
    /* Our own connection per channel (cetcd-bench --conns, tests running
     * several members in one process), no core retries (callers retry and
     * fail over themselves), and a reconnect back-off on the caller's
     * scale, so that a restarted server is found again quickly. */
    static const char *const keys[] = {
        GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
        GRPC_ARG_ENABLE_RETRIES,
        GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
        GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
        GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
        GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
    };
    const int values[] = {1, 0, o->backoff_min_ms, o->backoff_min_ms,
                          o->backoff_max_ms, o->max_recv_bytes};
    _Static_assert(sizeof(keys) / sizeof(keys[0]) ==
                       sizeof(values) / sizeof(values[0]),
                   "one value per key");
    grpc_arg args[sizeof(keys) / sizeof(keys[0])];
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        args[i].type = GRPC_ARG_INTEGER;
        args[i].key = (char *)keys[i];
        args[i].value.integer = values[i];
    }
    grpc_channel_args cargs = {.num_args = sizeof(args) / sizeof(args[0]),
                               .args = args};
    return grpc_channel_create(target, creds, &cargs);
}
