/*
 * api.h - the client-facing API of a member: the etcd v3 gRPC services on
 * the client URLs, backed by a running server.  Owns the gRPC runtime
 * (rpc.h).  The services themselves are svc/'s (svc.h); each file here
 * (kv.c, cluster.c, maintenance.c) is a thin adapter per method: decode
 * the request (a bad one gets INTERNAL "grpc: error unmarshalling
 * request"), call the svc function, answer with its reply or its error
 * (done.c).  stream.c puts svc's stream interface on rpc streams.  Only
 * this layer maps ERR_* codes to etcd's gRPC status codes and messages
 * (errors.c).
 *
 * Thread rules: api_start/api_stop from the daemon's main thread.  Handlers
 * run on the runtime's event loops; answers may come from any thread a
 * service completes on (svc.h "Completions").
 */
#ifndef CETCD_API_API_H
#define CETCD_API_API_H

#include <stdbool.h>

#include <grpc/status.h>

struct server;
struct api;
struct rpc_tls;
struct rpc_server;
struct rpc_keepalive;

/* api_start listens on the comma-separated listen_urls and serves s.
 * https:// and unixs:// URLs serve TLS with tls (see tls.h; borrowed, it
 * must stay valid until api_stop), plain ones stay plain, as in etcd.
 * max_streams bounds the concurrent streams of each client connection
 * (--max-concurrent-streams; 0: the runtime's default, see rpc.h).
 * ka: the client connections' keepalive (--grpc-keepalive-*, rpc.h
 * struct rpc_keepalive; copied), or NULL for grpc-go's defaults.
 * Errors: ERR_INVAL (bad URL, https without tls, bad TLS material),
 * ERR_IO (bind). */
int api_start(struct server *s, const char *listen_urls,
              const struct rpc_tls *tls, uint32_t max_streams,
              const struct rpc_keepalive *ka, struct api **api_out);

/* api_gateway_enable turns etcd's /v3 JSON gateway (--enable-grpc-gateway,
 * on by default as in etcd) on or off for the api_start calls after it;
 * main thread, before api_start. */
void api_gateway_enable(bool on);

/* api_client_http_split: etcd 3.5's --listen-client-http-urls is set, so
 * the client listeners of the api_start calls after it serve gRPC only
 * (no HTTP handler: rpc.h rpc_server_set_http_only has what each side
 * answers to the other's requests) and api_http_start serves the HTTP.
 * Main thread, before api_start. */
void api_client_http_split(bool on);

/* api_http_start serves HTTP only (the /v3 gateway, /health, /livez,
 * /readyz, /version, /metrics: what the client listeners serve beside
 * gRPC otherwise) on the comma-separated listen_urls, as etcd 3.5's
 * --listen-client-http-urls; https:// ones with tls (the client TLS, as
 * etcd), with --cors, --host-whitelist and the gateway's
 * --max-concurrent-streams bound as on the client listeners.  api_stop
 * closes it.  Errors: as api_start. */
int api_http_start(struct api *api, const char *listen_urls,
                   const struct rpc_tls *tls);

/* api_http_access sets etcd's --cors and --host-whitelist for the client
 * listeners of the api_start calls after it: comma-separated lists, split
 * as etcd's flag (no trimming); "*" in a list allows every origin/host
 * (rpc.h struct rpc_http_access).  Main thread, before api_start.
 * Errors: ERR_NOMEM. */
int api_http_access(const char *cors, const char *hosts);

/* api_peer_create builds the member's peer listener on the
 * comma-separated listen_peer_urls (http://, https://, unix://, unixs://),
 * TLS as for api_start, without starting it: the peer transport registers
 * its services first (server_start), then api_peer_serve binds and serves.
 * Errors: as api_start (ERR_IO from api_peer_serve when a URL cannot be
 * bound). */
int api_peer_create(const char *listen_peer_urls, const struct rpc_tls *tls,
                    struct rpc_server **peer_out);
int api_peer_serve(struct rpc_server *peer);

/* api_peer_register adds cetcd's member services (cluster.c: Join, and
 * the Promote a follower forwards to the leader; lease.c: the renewals
 * and TTLs a follower forwards; maintenance.c: the HashKV the corruption
 * checks of the other members ask) to the peer listener,
 * served by s: between server_start and api_peer_serve.  Errors: as
 * rpc_server_register_unary. */
int api_peer_register(struct rpc_server *peer, struct server *s);

/* api_peer_stop closes the peer listener (NULL is fine). */
void api_peer_stop(struct rpc_server *peer);

/* api_metrics_start serves /metrics and /health (HTTP only, as etcd's
 * --listen-metrics-urls) on the comma-separated listen_urls; https://
 * ones with tls (the client TLS, as etcd).  api_stop closes it.  Errors:
 * as api_start. */
int api_metrics_start(struct api *api, const char *listen_urls,
                      const struct rpc_tls *tls);

/* api_metrics_extensive turns the histograms of --metrics extensive on
 * (grpc_server_handling_seconds; etcd 3.4 registers them only then).
 * Before serving /metrics, from the thread that started api. */
void api_metrics_extensive(struct api *api, bool on);

/* api_stop stops serving, waits for every call to be answered, frees api.
 * The server must still be running (it answers pending proposals). */
void api_stop(struct api *api);

/* api_error maps an ERR_* code to etcd's gRPC status code and message
 * (static string). */
grpc_status_code api_error(int err, const char **msg_out);

#endif
