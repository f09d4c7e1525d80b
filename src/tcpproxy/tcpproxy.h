/*
 * tcpproxy.h - the TCP proxy behind `cetcd gateway start`: etcd's gateway
 * mode, which hands each client connection to one of a cluster's client
 * endpoints and relays its bytes both ways, unread (TLS, HTTP/2 and gRPC
 * pass through untouched, so the client talks to the member itself).
 *
 * What etcd 3.4's gateway does, and cetcd's does too:
 *   - endpoints are taken one per accepted connection: among the active
 *     ones of the best (lowest) SRV priority, by weight at random when
 *     they have weights (RFC 2782), else round robin (all of them, when
 *     given by --endpoints);
 *   - an endpoint whose dial fails is "deactivated" (logged with the dial's
 *     error) and skipped, and the connection tries the next one; after
 *     retry_delay_ms it is dialled again in the background and "activated"
 *     when that dial connects, else left inactive for another interval;
 *   - the connection is closed when it cannot be given to any endpoint;
 *   - TCP_NODELAY and Go's TCP keepalive (15 s) on both sockets, as Go's
 *     net package sets them on every connection it dials or accepts.
 * Where cetcd's does better (etcd 3.4.23's behaviour in brackets):
 *   - a dial has a time limit, connect_timeout_ms [none: a black-holed
 *     endpoint holds the client for the kernel's ~2 min];
 *   - when every endpoint is inactive the connection still tries each once
 *     before it is closed [closed at once: with one endpoint, a restart of
 *     that member turns every client away for retry_delay_ms, 1 min by
 *     default];
 *   - the best SRV priority is kept to when its records have no weight
 *     [round robin over every endpoint then];
 *   - IPv6 endpoints are dialled as [addr]:port [printed and dialled as
 *     addr:port, which fails];
 *   - a half-close is passed on (shutdown of the other side's write end)
 *     and the pair is closed once both directions ended [the first EOF
 *     closes both sides];
 *   - at the process's fd limit accepting pauses for 100 ms (logged at
 *     most once per 10 s) instead of failing the accept loop [the Go
 *     listener retries with back-off too].
 *
 * Memory: bytes are read into one scratch buffer of TCPPROXY_CHUNK bytes
 * and written on at once; only what the destination does not take is
 * kept, per direction, and that direction reads nothing more until it is
 * written.  So a connection holds at most 2 x TCPPROXY_CHUNK bytes
 * whatever its peers do, and none while both sides keep up.
 *
 * Threads: tcpproxy_run serves on the calling thread (one epoll loop).
 * tcpproxy_stop may be called from any thread or a signal handler.
 * create, run and destroy are called by one thread, in that order.
 */
#ifndef CETCD_TCPPROXY_TCPPROXY_H
#define CETCD_TCPPROXY_TCPPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Bytes read at once, and kept at most per direction of a connection. */
#define TCPPROXY_CHUNK (32 * 1024)
/* Endpoints a proxy takes at most. */
#define TCPPROXY_ENDPOINTS_MAX 64

/* One endpoint: "host:port" ("[v6]:port" for an IPv6 literal), resolved
 * by tcpproxy_create, once; with its DNS SRV priority and weight (0 and 0
 * for an endpoint given by --endpoints). */
struct tcpproxy_endpoint {
    const char *addr;
    uint16_t priority, weight;
};

struct tcpproxy_options {
    int listen_fd; /* bound and listening TCP socket; the proxy owns it
                      from tcpproxy_create on (closed by destroy, or by
                      create when it fails) */
    const struct tcpproxy_endpoint *endpoints;
    size_t n_endpoints;
    int64_t retry_delay_ms;  /* > 0: how long a deactivated endpoint waits
                                before its next dial */
    int connect_timeout_ms;  /* > 0: one dial's limit */
};

struct tcpproxy;

/* tcpproxy_split_host_port: Go's net.SplitHostPort of ep ("host:port",
 * "[v6]:port") with a decimal port of at most 65535; false if ep is not
 * that.  host and port are NUL-terminated (false if they do not fit). */
bool tcpproxy_split_host_port(const char *ep, char *host, size_t host_cap,
                              char *port, size_t port_cap);

/* tcpproxy_addr_string writes the address sa (len bytes) with port as Go's
 * net package names a dialled address: "ip:port", "[v6]:port". */
void tcpproxy_addr_string(const struct sockaddr *sa, socklen_t len,
                          const char *port, char *buf, size_t cap);

/* tcpproxy_errno_text writes strerror(err) as Go's syscall errors read:
 * "connection refused", not "Connection refused". */
void tcpproxy_errno_text(int err, char *buf, size_t cap);

/* tcpproxy_create resolves the endpoints and makes the loop's epoll and
 * wake-up descriptors.  On success *out owns o->listen_fd.  Errors:
 * ERR_INVAL (no endpoint, more than TCPPROXY_ENDPOINTS_MAX, a bad
 * "host:port", a non-positive delay or timeout), ERR_NOTFOUND (a host did
 * not resolve; why names it), ERR_NOMEM, or the errno of epoll/eventfd.
 * why (why_cap bytes) gets a one-line reason on error. */
int tcpproxy_create(const struct tcpproxy_options *o, struct tcpproxy **out,
                    char *why, size_t why_cap);

/* tcpproxy_run logs "ready to proxy client requests" with the endpoints,
 * then serves until tcpproxy_stop.  Returns 0, or the errno of a failed
 * epoll_wait. */
int tcpproxy_run(struct tcpproxy *p);

/* tcpproxy_stop makes tcpproxy_run return soon; async-signal-safe. */
void tcpproxy_stop(struct tcpproxy *p);

/* tcpproxy_destroy closes every connection, the listener and the loop's
 * descriptors, and frees p (NULL is a no-op).  Not while run runs. */
void tcpproxy_destroy(struct tcpproxy *p);

#endif
