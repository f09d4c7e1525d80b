/*
 * watch.c - the Watch service on gRPC: "/etcdserverpb.Watch/Watch", a
 * bidirectional stream, is svc's Watch handler (svc/watch.c) through the
 * stream adapter (stream.c).  Flow control is the adapter's: the send
 * queue of each stream holds RPC_DEFAULT_STREAM_QUEUE responses (etcd's
 * per-stream send buffer is 128 too); past that the hub is told "full".
 */
#include "api/api_int.h"

int api__watch_register(struct api *api)
{
    api->watch = (struct api_stream_method){
        .handler = &svc_watch_handler,
        .server = api->server,
        .queue_max = RPC_DEFAULT_STREAM_QUEUE,
        .background = true,
    };
    return api__stream_register(api->rpc, "/etcdserverpb.Watch/Watch",
                                &api->watch);
}
