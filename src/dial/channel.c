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
           o->backoff_max_ms >= o->backoff_min_ms &&
           o->connect_timeout_ms > 0);
    /* Our own connection per channel (cetcd-bench --conns, tests running
     * several members in one process), no core retries (callers retry and
     * fail over themselves), and a reconnect back-off on the caller's
     * scale, so that a restarted server is found again quickly.
     * Despite its name, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is no back-off
     * in the C core: it is the subchannel's minimum connect timeout (each
     * attempt's deadline is the later of the next back-off time and now +
     * this).  The delay between attempts comes from the initial and max
     * back-off alone.  Setting it to the 100 ms back-off gave a TLS
     * handshake plus the server's SETTINGS 100-200 ms, which a loaded
     * machine misses ("Handshake timed out", "timed out before receiving
     * SETTINGS frame"): peer streams never came up and snapshot transfers,
     * made on a fresh channel, failed. */
    static const char *const keys[] = {
        GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
        GRPC_ARG_ENABLE_RETRIES,
        GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
        GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
        GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
        GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
    };
    const int values[] = {1, 0, o->backoff_min_ms, o->connect_timeout_ms,
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
