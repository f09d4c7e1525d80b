/*
 * guard.c - the limits that keep one client (or many idle ones) from
 * taking the member down: file descriptors, connections that never speak
 * HTTP/2, and the bytes one connection may make the runtime hold.
 *
 * File descriptors.  The member needs descriptors of its own after start
 * (WAL segments, snapshot files, peer connections).  Accepted sockets stay
 * below the soft RLIMIT_NOFILE minus a reserve: a connection that lands
 * on a descriptor at or above that ceiling is closed at once.  At the
 * ceiling, or when accept4 fails for want of descriptors or memory, the
 * loop takes its listeners out of its epoll set for ACCEPT_PAUSE_MS: the
 * listeners are level-triggered, and a loop that kept them in would be
 * woken again at once, spinning without serving anyone.  Pending clients
 * wait in the backlog meanwhile.  One log line per LOG_EVERY_MS says how
 * many connections were refused.
 *
 * Idle and garbage connections.  A connection must complete its TLS
 * handshake and send the HTTP/2 preface followed by a valid frame within
 * preface_timeout_ms of its accept, or it is closed (grpc-go's server has
 * such a limit too, 120 s; ours is shorter because such a connection
 * holds a descriptor and gives nothing).  A connection past its preface
 * may stay idle: gRPC clients keep idle channels open, as etcd allows.
 *
 * Bytes per connection.  in_bytes counts the request bytes that the
 * connection's calls and streams hold (bodies being read, bodies handed
 * to handlers, partial stream messages); a request that would take it
 * past conn_in_max is refused with RESOURCE_EXHAUSTED before its bytes
 * are kept.  out_bytes counts reply bytes queued but not yet sent; while
 * it is above conn_out_max (a client that does not read), new calls on
 * the connection are refused the same way without running a handler.
 * With the limit on concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS)
 * this bounds what one connection can make the member hold.
 *
 * Everything here runs on the loop that owns the connection, except
 * rpc__guard_init (owner, before start).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_int.h"
#include "util/log.h"

#define FD_RESERVE_MAX 64      /* descriptors kept for the member */
#define ACCEPT_PAUSE_MS 100    /* listeners out of the epoll set */
#define SWEEP_MS 250           /* preface-timeout sweep period */
#define LOG_EVERY_MS 10000     /* one line about refusals per period */

int64_t rpc__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t rpc__now_ms(void)
{
    return rpc__now_ns() / 1000000;
}

void rpc__guard_init(struct rpc_server *srv)
{
    struct rlimit rl;
    long lim = 1024; /* what the kernel gives when it cannot say */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        lim = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)INT32_MAX
                  ? INT32_MAX
                  : (long)rl.rlim_cur;
    /* A quarter of a small limit, at most FD_RESERVE_MAX. */
    long reserve = lim / 4 < FD_RESERVE_MAX ? lim / 4 : FD_RESERVE_MAX;
    srv->fd_limit = (int)lim;
    srv->fd_ceiling = (int)(lim - reserve);
    assert(srv->fd_ceiling > 0);
    atomic_init(&srv->refused_n, 0);
    atomic_init(&srv->refuse_logged_ms, 0);
}

/* refused counts one refusal and logs at most once per LOG_EVERY_MS. */
static void refused(struct rpc_server *srv, const char *why)
{
    long long n = atomic_fetch_add(&srv->refused_n, 1) + 1;
    int64_t now = rpc__now_ms();
    long long last = atomic_load(&srv->refuse_logged_ms);
    if (last != 0 && now - last < LOG_EVERY_MS)
        return;
    if (!atomic_compare_exchange_strong(&srv->refuse_logged_ms, &last, now))
        return; /* another loop logs it */
    log_warn("rpc",
             "not accepting connections for now: %s (open file limit %d, "
             "descriptors from %d up are kept for the member); %lld "
             "connections refused so far",
             why, srv->fd_limit, srv->fd_ceiling, n);
}

static void listeners_set(struct rpc__loop *l, bool on)
{
    struct rpc_server *srv = l->srv;
    for (size_t i = 0; i < srv->lis_n; i++) {
        struct epoll_event ev = {
            .events = EPOLLIN | EPOLLEXCLUSIVE,
            .data.ptr = (void *)(uintptr_t)((i << 1) | RPC__TAG_LISTENER)};
        epoll_ctl(l->ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, srv->lis[i].fd,
                  on ? &ev : NULL);
    }
    l->accept_paused = !on;
}

static void pause_accepting(struct rpc__loop *l)
{
    if (!l->accept_paused)
        listeners_set(l, false);
    l->accept_resume_ms = rpc__now_ms() + ACCEPT_PAUSE_MS;
}

bool rpc__guard_accept_ok(struct rpc__loop *l, int fd)
{
    assert(fd >= 0);
    if (fd < l->srv->fd_ceiling)
        return true;
    close(fd);
    refused(l->srv, "too many open connections");
    pause_accepting(l);
    return false;
}

bool rpc__guard_accept_failed(struct rpc__loop *l, int e)
{
    switch (e) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
        refused(l->srv, strerror(e));
        pause_accepting(l);
        return true;
    default:
        return false;
    }
}

int rpc__guard_timeout_ms(const struct rpc__loop *l)
{
    if (l->accept_paused) {
        int64_t left = l->accept_resume_ms - rpc__now_ms();
        return left < 0 ? 0 : left > SWEEP_MS ? SWEEP_MS : (int)left;
    }
    /* Connections: the keepalive sweep looks at them every SWEEP_MS. */
    return l->unready_n > 0 || l->conns != NULL ? SWEEP_MS : -1;
}

void rpc__keepalive_ping(struct rpc__conn *c)
{
    const struct rpc_server *srv = c->loop->srv;
    int64_t now = rpc__now_ms();
    int64_t last = c->client_ping_ms;
    c->client_ping_ms = now;
    if (c->reset_strikes) {
        c->reset_strikes = false;
        c->ping_strikes = 0;
        return;
    }
    bool idle = c->calls == NULL && c->streams == NULL;
    int64_t min = idle ? RPC__KA_IDLE_PING_MS : srv->ka_min_time_ms;
    if (last != 0 && now - last < min)
        c->ping_strikes++;
    if (c->ping_strikes <= RPC__KA_MAX_STRIKES || c->close_after_flush)
        return;
    /* grpc-go: GOAWAY ENHANCE_YOUR_CALM "too_many_pings", then close
     * (its transport's message, at its verbose level). */
    log_debug("rpc", "Got too many pings from the client, closing the "
              "connection (%d strikes, last two %lld ms apart)",
              c->ping_strikes, (long long)(now - last));
    static const char why[] = "too_many_pings";
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(c->ng),
                          NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)why,
                          sizeof why - 1);
    c->close_after_flush = true;
    rpc__conn_mark_dirty(c);
}

/* keepalive: PING a connection idle for the interval; close it when
 * nothing arrived within the timeout after that PING (grpc-go's
 * server keepalive). */
static void keepalive(struct rpc__loop *l, int64_t now)
{
    const struct rpc_server *srv = l->srv;
    struct rpc__conn *c = l->conns;
    while (c != NULL) {
        struct rpc__conn *next = c->next;
        if (c->dead || c->proto != RPC__PROTO_H2 || !c->preface_ok ||
            c->ng == NULL) {
            c = next;
            continue;
        }
        if (c->ka_ping_ms != 0 && c->last_read_ms > c->ka_ping_ms)
            c->ka_ping_ms = 0; /* the client answered (or spoke) */
        rpc__conn_bg_sweep(c); /* background streams' budget (stream.c) */
        if (c->ka_ping_ms != 0 && now - c->ka_ping_ms >= srv->ka_timeout_ms) {
            c->refs++;
            rpc__conn_kill(c);
            rpc__conn_unref(c);
        } else if (c->ka_ping_ms == 0 &&
                   now - c->last_read_ms >= srv->ka_interval_ms &&
                   nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, NULL) == 0) {
            c->ka_ping_ms = now;
            rpc__conn_mark_dirty(c);
        }
        c = next;
    }
}

/* sweep closes the connections still without a valid preface past their
 * deadline. */
static void sweep(struct rpc__loop *l, int64_t now)
{
    int64_t limit = l->srv->preface_timeout_ms;
    struct rpc__conn *c = l->conns;
    while (c != NULL) {
        struct rpc__conn *next = c->next;
        if (!c->preface_ok && now - c->born_ms >= limit) {
            log_debug("rpc", "closing a connection without a preface after "
                      "%lld ms (%s, %u preface bytes kept, last read %lld "
                      "ms after accept)", (long long)(now - c->born_ms),
                      c->proto == RPC__PROTO_SNIFF ? "sniffing"
                      : c->proto == RPC__PROTO_H2  ? "HTTP/2"
                                                   : "HTTP/1",
                      (unsigned)c->sniff_n,
                      (long long)(c->last_read_ms - c->born_ms));
            c->refs++;
            rpc__conn_kill(c);
            rpc__conn_unref(c);
        }
        c = next;
    }
}

void rpc__guard_tick(struct rpc__loop *l)
{
    if (l->stopped)
        return;
    int64_t now = rpc__now_ms();
    if (l->accept_paused && now >= l->accept_resume_ms)
        listeners_set(l, true);
    if (l->unready_n > 0 && now >= l->next_sweep_ms) {
        l->next_sweep_ms = now + SWEEP_MS;
        sweep(l, now);
    }
    if (l->conns != NULL && now >= l->next_ka_ms) {
        l->next_ka_ms = now + SWEEP_MS;
        keepalive(l, now);
    }
}

bool rpc__guard_in_add(struct rpc__conn *c, size_t n)
{
    size_t max = c->loop->srv->conn_in_max;
    if (c->in_bytes + n > max)
        return false;
    c->in_bytes += n;
    return true;
}

void rpc__guard_in_sub(struct rpc__conn *c, size_t n)
{
    assert(c->in_bytes >= n);
    c->in_bytes -= n;
}

void rpc__over_budget_msg(char *buf, size_t cap, const struct rpc__conn *c)
{
    snprintf(buf, cap,
             "grpc: connection holds too many request bytes (%zu, limit "
             "%zu)",
             c->in_bytes, c->loop->srv->conn_in_max);
}

void rpc__not_reading_msg(char *buf, size_t cap, const struct rpc__conn *c)
{
    snprintf(buf, cap,
             "grpc: client is not reading its replies (%zu bytes queued, "
             "limit %zu)",
             c->out_bytes, c->loop->srv->conn_out_max);
}

bool rpc__guard_out_full(const struct rpc__conn *c)
{
    return c->out_bytes > c->loop->srv->conn_out_max;
}
