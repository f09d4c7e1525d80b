/* api_int.h - state shared by the API's service files. */
#ifndef CETCD_API_API_INT_H
#define CETCD_API_API_INT_H

#include "api/api.h"
#include "rpc/rpc.h"

struct api {
    struct server *server;  /* the member served (borrowed) */
    struct rpc_server *rpc; /* the gRPC runtime (owned) */
};

/* Service registration, one per service file. */
int api__kv_register(struct api *api);
int api__maintenance_register(struct api *api);
int api__cluster_register(struct api *api);

#endif
