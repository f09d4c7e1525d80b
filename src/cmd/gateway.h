/*
 * gateway.h - `cetcd gateway ...`: etcd 3.4's gateway command in front of
 * tcpproxy/ (the TCP proxy to a cluster's client endpoints).
 *
 * As etcd's (cobra and pflag): `gateway` alone, `gateway <other>` and
 * `gateway -h` print the command's help and exit 0; `gateway start`
 * takes --listen-addr (127.0.0.1:23790), --endpoints (127.0.0.1:2379;
 * comma separated, repeatable, a URL's scheme stripped), --retry-delay
 * (1m0s; 0 is 5 min as in etcd), and prints etcd's messages for a bad
 * flag, endpoint or listen address, an endpoint that resolves to the
 * listen address, and a failed listen.  Logs are zap.NewProduction's JSON
 * lines on stderr, as etcd's gateway writes them.  READY=1 goes to
 * $NOTIFY_SOCKET once listening.  SIGINT/SIGTERM stop it; it then dies of
 * that signal, as the Go program does.
 *
 * --discovery-srv (with --discovery-srv-name, --insecure-discovery):
 * the endpoints from DNS SRV records, as etcd (gateway_discover), ahead of
 * --endpoints, which are used when none is found.
 *
 * Refused with a message naming the flag, where etcd differs:
 * --trusted-ca-file (etcd takes it and dials the discovered endpoints
 * without TLS all the same: not built here), a negative --retry-delay
 * (etcd's monitor then spins), arguments after `start` (etcd ignores
 * them), and an endpoint port above 65535 ("error parsing endpoint", as
 * for a missing port; etcd wraps it: 127.0.0.1:99999 became
 * 127.0.0.1:0).
 */
#ifndef CETCD_CMD_GATEWAY_H
#define CETCD_CMD_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gateway_main runs `argv[0] gateway argv[2..]` and returns the exit
 * code (0: help printed); only returns after the proxy stopped. */
int gateway_main(int argc, char **argv);

/* An endpoint found by DNS: "<scheme>://<target>:<port>" (the target with
 * the SRV record's trailing dot, as etcd keeps it), its priority and
 * weight. */
struct gateway_endpoint {
    char url[300];
    uint16_t priority, weight;
};

/* gateway_discover (gateway_srv.c): etcd's discoverEndpoints for domain
 * dns: the https records first, then the http ones; unless insecure only
 * the https ones that take a TCP connection within 5 s are kept (etcd's
 * check).  Logs etcd's lines ("discovered cluster from SRV", ...).
 * Returns 0 with eps[0..*n_out) (*n_out may be 0), or 1 after printing
 * "dns lookup errors: ... and ..." when neither lookup answered. */
int gateway_discover(const char *dns, const char *service_name,
                     bool insecure, struct gateway_endpoint *eps, size_t cap,
                     size_t *n_out);

#endif
