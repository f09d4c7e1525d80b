/* api_int.h - state shared by the API's service files. */
#ifndef CETCD_API_API_INT_H
#define CETCD_API_API_INT_H

#include "api/api.h"
#include "rpc/rpc.h"
#include "svc/svc.h"

struct api {
    struct server *server;  /* the member served (borrowed) */
    struct rpc_server *rpc; /* the gRPC runtime (owned) */
};

/* Service registration, one per service file. */
int api__kv_register(struct api *api);
int api__maintenance_register(struct api *api);
int api__cluster_register(struct api *api);

/* The adapters' shared pieces (done.c). */

/* api__bad_request answers a request that did not decode as grpc-go
 * does: INTERNAL "grpc: error unmarshalling request". */
void api__bad_request(struct rpc_call *call);

/* api__reply_err answers err (an ERR_* code) mapped by api_error. */
void api__reply_err(struct rpc_call *call, int err);

/* api__done is the completion that answers call with the service's reply
 * (rpc_call_reply) or its error (api__reply_err), from whichever thread
 * the service completes on. */
struct svc_done api__done(struct rpc_call *call);

#endif
