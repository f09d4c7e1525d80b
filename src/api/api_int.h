/* api_int.h - state shared by the API's service files. */
#ifndef CETCD_API_API_INT_H
#define CETCD_API_API_INT_H

#include <stdatomic.h>

#include "api/api.h"
#include "rpc/rpc.h"
#include "svc/svc.h"


/* Service registration, one per service file. */
int api__kv_register(struct api *api);
int api__maintenance_register(struct api *api);
int api__snapshot_register(struct api *api); /* Maintenance.Snapshot */
int api__cluster_register(struct api *api);
int api__watch_register(struct api *api);
int api__lease_register(struct api *api);
int api__lock_register(struct api *api); /* Lock and Election (lock.c) */
int api__auth_register(struct api *api); /* Auth (auth.c) */
/* lease.c: the peer listener's Lease/Renew and Lease/TimeToLive. */
struct server;
int api__lease_peer_register(struct rpc_server *peer, struct server *s);
/* maintenance.c: the peer listener's HashKV for the corruption checks. */
int api__maintenance_peer_register(struct rpc_server *peer, struct server *s);

/* The adapters' shared pieces (done.c). */

/* api__bad_request answers a request that did not decode as grpc-go
 * does: INTERNAL "grpc: error unmarshalling request". */
void api__bad_request(struct rpc_call *call);

/* api__on_peer_done: the completion of a peer-listener request (a
 * promotion forwarded to the leader, a corruption check's HashKV):
 * ERR_INVAL (another cluster's member) answers FailedPrecondition
 * "cetcd: cluster ID mismatch", other errors as api__reply_err, else the
 * reply.  ctx is the struct rpc_call. */
void api__on_peer_done(void *ctx, int err, const ProtobufCMessage *reply);

/* api__reply_err answers err (an ERR_* code) mapped by api_error. */
void api__reply_err(struct rpc_call *call, int err);

/* api__done is the completion that answers call with the service's reply
 * (rpc_call_reply) or its error (api__reply_err), from whichever thread
 * the service completes on. */
struct svc_done api__done(struct rpc_call *call);

/* api__done_unknown: as api__done, but an error is answered with code
 * UNKNOWN and api_error's message (api_stream_method.errors_unknown). */
struct svc_done api__done_unknown(struct rpc_call *call);

/* A streaming service on gRPC (stream.c): the service's handler and the
 * member it serves.  Caller-owned; it must outlive the rpc server. */
struct api_stream_method {
    const struct svc_stream_handler *handler; /* the service (svc.h) */
    struct server *server;                    /* passed to its open */
    /* the runtime's send queue per stream (rpc_server_config's
     * stream_queue; RPC_DEFAULT_STREAM_QUEUE unless set) */
    size_t queue_max;
    /* errors end the stream with code UNKNOWN and api_error's message:
     * etcd's Lock and Election servers call the KV through clientv3,
     * which turns each status into a plain error (rpctypes.EtcdError) */
    bool errors_unknown;
    /* the method's kind on the wire, for its metrics (zero: bidi) */
    enum rpc_method_type wire_type;
    /* its messages yield the connection to the other calls on it
     * (rpc_stream_background: Watch, whose events would otherwise sit in
     * front of every unary reply on a connection the client reads slowly) */
    bool background;
};

/* The HTTP endpoints' context (http.c): one per listener that serves
 * them. */
/* /health's results (etcd_server_health_success / _failures), one pair
 * per member, shared by its listeners; any loop or read worker adds. */
struct api_health_stats {
    _Atomic uint64_t ok;     /* checks answered healthy */
    _Atomic uint64_t failed; /* checks answered unhealthy */
};

struct api_http {
    struct server *server;  /* the member served (borrowed) */
    const struct api *api;  /* the member's gRPC side (its rpc server and
                               the --metrics level), borrowed */
    bool metrics_only;      /* --listen-metrics-urls: /metrics, /health */
    struct api_health_stats *health; /* the member's (struct api's) */
    bool gateway;           /* serve /v3/... (gateway.c) */
};

/* One Auth method's context (auth.c): the API and the request's type. */
struct api_auth_method {
    struct api *api;
    const ProtobufCMessageDescriptor *d;
};
#define API_AUTH_METHODS 16

struct api {
    struct server *server;  /* the member served (borrowed) */
    struct api_auth_method auth[API_AUTH_METHODS]; /* Auth (auth.c) */
    struct rpc_server *rpc; /* the gRPC runtime (owned) */
    struct api_http http;   /* the client listener's endpoints */
    struct api_http metrics_http; /* the metrics listener's */
    struct rpc_server *metrics; /* --listen-metrics-urls, or NULL */
    struct api_http split_http; /* the HTTP-only listener's endpoints */
    struct rpc_server *http_only; /* --listen-client-http-urls, or NULL */
    uint32_t max_streams;    /* api_start's, for the HTTP-only listener */
    struct api_health_stats health; /* both listeners' /health counts */
    bool metrics_extensive; /* --metrics extensive: the gRPC histograms */
    struct api_stream_method watch; /* the Watch stream (watch.c) */
    struct api_stream_method keepalive; /* LeaseKeepAlive (lease.c) */
    struct api_stream_method lock;      /* Lock (lock.c) */
    struct api_stream_method campaign;  /* Campaign (lock.c) */
    struct api_stream_method observe;   /* Observe (lock.c) */
    struct api_stream_method snapshot;  /* Maintenance.Snapshot (snapshot.c) */
};

/* api__stream_register routes path to m: each stream opened on it is
 * given to m->handler as a struct svc_stream whose send is
 * rpc_stream_send, whose close ends the stream with api_error's status
 * (OK for 0), and whose inbound messages are decoded as
 * m->handler->request (a message that does not decode ends the stream
 * with INTERNAL "grpc: error unmarshalling request").  A refused open ends
 * it with the refusal's status.  Before rpc_server_start.  Errors: as
 * rpc_server_register_stream. */
int api__stream_register(struct rpc_server *rpc, const char *path,
                         const struct api_stream_method *m);

/* http.c: the HTTP handler (rpc_http_fn) of a listener; ctx is its
 * struct api_http. */
void api__http_serve(struct rpc_call *call, const uint8_t *body,
                     size_t body_len, void *ctx);
/* gateway.c: the /v3 JSON gateway.  api__gw_serve answers call when the
 * path t (its first pn bytes, the query cut off) is under /v3/ or
 * /v3beta/ and returns true; false: not a gateway path.  m: the method.
 * api__gw_reply_msg answers 200 with m as JSON; api__gw_reply_error
 * answers grpc-gateway's error body for code and msg. */
bool api__gw_serve(struct server *s, struct rpc_call *call, const char *t,
                   size_t pn, const char *m, const uint8_t *body, size_t n);
void api__gw_reply_msg(struct rpc_call *call, const ProtobufCMessage *m);
void api__gw_reply_error(struct rpc_call *call, grpc_status_code code,
                         const char *msg);
/* api__gw_status: grpc-gateway's HTTPStatusFromCode. */
int api__gw_status(grpc_status_code c);
/* gw_stream.c: api__gw_stream serves the stream route path ("/watch")
 * whose request type is d: answers call (now, or through a stream that
 * stays open, counted in grpc_server_* as the gRPC method grpc) and
 * returns true; false: path is not a stream route. */
bool api__gw_stream(struct server *s, const char *path, const char *grpc,
                    const ProtobufCMessageDescriptor *d,
                    struct rpc_call *call, const uint8_t *body, size_t n);
/* metrics.c: /metrics.  api__metrics_text returns the exposition
 * (mem_free frees it) and its length in *len_out, or NULL when out of
 * memory. */
char *api__metrics_text(const struct api_http *h, size_t *len_out);
void api__metrics_serve(const struct api_http *h, struct rpc_call *call);

#endif
