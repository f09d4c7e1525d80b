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
 * Refused with a message naming the flag, where etcd differs: the SRV
 * discovery flags (--discovery-srv, --discovery-srv-name,
 * --insecure-discovery, --trusted-ca-file: not built), a negative
 * --retry-delay (etcd's monitor then spins), and arguments after `start`
 * (etcd ignores them).
 */
#ifndef CETCD_CMD_GATEWAY_H
#define CETCD_CMD_GATEWAY_H

/* gateway_main runs `argv[0] gateway argv[2..]` and returns the exit
 * code (0: help printed); only returns after the proxy stopped. */
int gateway_main(int argc, char **argv);

#endif
