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
    /* Keepalive, when asked for: PINGs only while a call is open (as
     * grpc-go's PermitWithoutStream false) and no cap on PINGs without
     * data (the C core stops after 2 by default, so a quiet Watch stream
     * would stop noticing a dead server; grpc-go has no such cap). */
    static const char *const ka_keys[] = {
        GRPC_ARG_KEEPALIVE_TIME_MS,
        GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
        GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
        GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA,
    };
    const int ka_values[] = {o->keepalive_time_ms,
                             o->keepalive_timeout_ms > 0
                                 ? o->keepalive_timeout_ms
                                 : 20000,
                             0, 0};
    enum { N = sizeof(keys) / sizeof(keys[0]),
           NKA = sizeof(ka_keys) / sizeof(ka_keys[0]) };
    grpc_arg args[N + NKA + 2];
    size_t n = 0;
    for (size_t i = 0; i < N; i++, n++) {
        args[n].type = GRPC_ARG_INTEGER;
        args[n].key = (char *)keys[i];
        args[n].value.integer = values[i];
    }
    for (size_t i = 0; o->keepalive_time_ms > 0 && i < NKA; i++, n++) {
        args[n].type = GRPC_ARG_INTEGER;
        args[n].key = (char *)ka_keys[i];
        args[n].value.integer = ka_values[i];
    }
    if (o->stream_window_bytes > 0) {
        args[n].type = GRPC_ARG_INTEGER;
        args[n].key = (char *)GRPC_ARG_HTTP2_BDP_PROBE;
        args[n++].value.integer = 0;
        args[n].type = GRPC_ARG_INTEGER;
        args[n].key = (char *)GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES;
        args[n++].value.integer = o->stream_window_bytes;
    }
    grpc_channel_args cargs = {.num_args = n, .args = args};
    return grpc_channel_create(target, creds, &cargs);
}
