/*
 * snapshot.c - Maintenance.Snapshot on gRPC: a server-streaming method
 * ("/etcdserverpb.Maintenance/Snapshot"), svc's Snapshot handler
 * (svc/snapshot.c) through the stream adapter (stream.c).  Its send queue
 * holds SVC_SNAPSHOT_QUEUE responses of 32 KiB: a snapshot to a slow
 * client holds about 512 KiB of the member's memory at most.
 */
#include "api/api_int.h"

int api__snapshot_register(struct api *api)
{
    api->snapshot = (struct api_stream_method){
        .handler = &svc_snapshot_handler,
        .server = api->server,
        .queue_max = SVC_SNAPSHOT_QUEUE,
        .wire_type = RPC_TYPE_SERVER_STREAM,
    };
    return api__stream_register(api->rpc,
                                "/etcdserverpb.Maintenance/Snapshot",
                                &api->snapshot);
}
