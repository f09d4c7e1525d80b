/*
 * grpc_proxy.h - `cetcd grpc-proxy ...`: etcd 3.4's grpc-proxy command
 * (its help, flags, checks and messages) in front of grpcproxy/ (the L7
 * gRPC proxy itself, grpcproxy.h).
 *
 * As etcd's (cobra and pflag): `grpc-proxy` alone, with an argument other
 * than `start`, or with -h prints the command's help and exits 0, and a
 * bad flag before `start` prints cobra's error with that help, exit 1;
 * `grpc-proxy start -h` prints the start command's help.  `start` takes
 * every flag of etcd 3.4.23 with etcd's defaults and messages (an unknown
 * flag, a missing or bad value: cobra's "Error: ..." with the usage on
 * stderr, then the message again, exit 1), etcd's checkArgs ("invalid
 * resolver-ttl 0", "invalid resolver-prefix \"\"", "invalid
 * advertise-client-url \"\"", exit 1), Go's net.Listen errors for an
 * address that cannot be bound ("listen tcp 127.0.0.1:23790: bind:
 * address already in use", exit 1), and etcd's client TLS errors ("open
 * <file>: no such file or directory", "KeyFile and CertFile must both be
 * present[...]", "cert has non empty Common Name (<cn>)", ...).
 *
 * Logs are the zap JSON lines of etcd's logutil.DefaultZapLoggerConfig
 * (ISO8601 "ts") on stderr, --debug lowers the level to debug.  Once the
 * proxy serves, READY=1 goes to $NOTIFY_SOCKET; SIGINT/SIGTERM close the
 * proxy and the process then dies of that signal, as the Go program does.
 *
 * Refused with a message naming the flag (exit 1), where cetcd differs:
 * --enable-pprof=true, --experimental-serializable-ordering=true and a
 * non-empty --experimental-leasing-prefix (features not built);
 * arguments after `start` (etcd ignores them: `start --debug false` runs
 * with debug on); --listen-cipher-suites without --cert-file, --key-file
 * or --trusted-ca-file (etcd 3.4.23 dies of a nil pointer dereference).
 */
#ifndef CETCD_CMD_GRPC_PROXY_H
#define CETCD_CMD_GRPC_PROXY_H

/* grpc_proxy_main runs `argv[0] grpc-proxy argv[2..]` and returns the exit
 * code (0: help printed); returns only after the proxy stopped, unless a
 * signal stopped it: the process then dies of that signal.  Called once,
 * from main(), before any other thread exists. */
int grpc_proxy_main(int argc, char **argv);

#endif
