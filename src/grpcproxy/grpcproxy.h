/*
 * grpcproxy.h - `cetcd grpc-proxy start`: etcd 3.4's L7 gRPC proxy in
 * front of a cluster's client endpoints.  The command line (flags, help,
 * checks, messages) is cmd/grpc_proxy.c; this module is the proxy.
 *
 * The proxy serves etcd's whole gRPC API (KV, Watch, Lease, Cluster,
 * Maintenance, Auth, Election, Lock) on rpc/'s server runtime and sends
 * each call on to the cluster through libcetcd (client/), one upstream
 * call per client call, one upstream stream per client stream: request
 * and reply bytes are passed through as they are, with the caller's
 * "token" and "hasleader" metadata and its deadline, and the upstream's
 * status code and message come back unchanged.  As etcd's proxy:
 *   - KV: serializable Range replies are cached (cache.c, etcd's LRU of
 *     2048 requests); Put, DeleteRange, Txn and Compact through the proxy
 *     invalidate what they touch; a cached revision below the last
 *     compaction answers "mvcc: required revision has been compacted".
 *   - --namespace: every key, range end, lock and election name is
 *     prefixed going up and stripped coming back (ns.c).
 *   - Cluster: with an advertise address, MemberList answers the proxies
 *     registered under --resolver-prefix (or this proxy alone); the proxy
 *     registers itself there under a lease of --resolver-ttl seconds.
 *   - HTTP on the same port: /health (a Get of "a" upstream within 1 s)
 *     and /metrics.
 * Differences from etcd 3.4.23, each on purpose: watches and lease
 * keep-alives are not coalesced (each client stream has its own upstream
 * stream, so every etcd watch feature works through the proxy as on the
 * server); with --namespace, lock and election names are namespaced too
 * (etcd's proxy sends them raw, outside the namespace).
 *
 * Life cycle: grpcproxy_start ... grpcproxy_close, one owner thread.
 */
#ifndef CETCD_GRPCPROXY_GRPCPROXY_H
#define CETCD_GRPCPROXY_GRPCPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cetcd/cetcd.h"
#include "rpc/rpc.h"

/* What the proxy runs with; cmd/grpc_proxy.c fills it from the flags.
 * Everything is borrowed for grpcproxy_start only. */
struct grpcproxy_config {
    /* The listener: urls (one, "http(s)://<--listen-addr>"), TLS material
     * of --cert-file/--key-file/--trusted-ca-file/--auto-tls,
     * --listen-cipher-suites, --max-concurrent-streams.  The proxy adds
     * its handlers. */
    const struct rpc_server_config *server;
    /* The upstream client: --endpoints (or the SRV-discovered ones),
     * --cacert/--cert/--key/--insecure-skip-tls-verify, --max-recv-bytes,
     * a 5 s dial timeout. */
    const struct cetcd_client_opts *client;
    /* --max-send-bytes: an upstream request above this is refused with
     * grpc-go's RESOURCE_EXHAUSTED "trying to send message larger than
     * max (<n> vs. <max>)".  0: 1.5 MiB. */
    size_t max_send_bytes;
    const char *ns;               /* --namespace, "" = none */
    const char *advertise_url;    /* --advertise-client-url, "" = none */
    const char *resolver_prefix;  /* --resolver-prefix, "" = none */
    int resolver_ttl;             /* --resolver-ttl, seconds */
    const char *metrics_url;      /* --metrics-addr, "" = none */
};

struct grpcproxy;

/* grpcproxy_start opens the upstream client, starts serving and returns
 * the running proxy in *out.  Logs etcd's "listening for gRPC proxy
 * client requests" and "started gRPC proxy" lines.  Errors: negative
 * ERR_* (util/err.h) after logging why. */
int grpcproxy_start(const struct grpcproxy_config *cfg,
                    struct grpcproxy **out);

/* grpcproxy_close stops serving, ends every call and stream and frees the
 * proxy.  NULL is fine. */
void grpcproxy_close(struct grpcproxy *p);

#endif
