/*
 * server.c - the gRPC server object: configuration, listeners, method
 * registration, the event loops and shutdown.  See rpc_int.h for the
 * threads and object lives.
 */
#define _GNU_SOURCE /* accept4 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rpc/rpc_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#define RECV_SLACK_BYTES (512 * 1024) /* etcd's grpcOverheadBytes */
#define LISTEN_BACKLOG 1024
#define EVENTS_MAX 64


static int config_apply(struct rpc_server *srv,
                        const struct rpc_server_config *cfg)
{
    size_t max_req = cfg->max_request_bytes ? cfg->max_request_bytes
                                            : RPC_DEFAULT_MAX_REQUEST_BYTES;
    bool has_tls = cfg->tls_cert_pem != NULL && cfg->tls_key_pem != NULL;
    if ((cfg->tls_cert_pem != NULL) != (cfg->tls_key_pem != NULL) ||
        (cfg->tls_verify_clients && cfg->tls_ca_pem == NULL) ||
        (cfg->tls_check != NULL && !cfg->tls_verify_clients))
        return ERR_INVAL;
    if (cfg->urls_n == 0 || cfg->urls_n > RPC_URLS_MAX ||
        max_req > INT32_MAX - RECV_SLACK_BYTES || cfg->threads < 0 ||
        cfg->threads > RPC_THREADS_MAX || cfg->stream_queue < 0 ||
        cfg->preface_timeout_ms < 0 || cfg->keepalive.min_time_ms < 0 ||
        cfg->keepalive.interval_ms < 0 || cfg->keepalive.timeout_ms < 0)
        return ERR_INVAL;
    srv->max_recv_bytes = max_req + RECV_SLACK_BYTES;
    srv->threads_n = cfg->threads ? cfg->threads : RPC_DEFAULT_THREADS;
    srv->stream_queue =
        cfg->stream_queue ? cfg->stream_queue : RPC_DEFAULT_STREAM_QUEUE;
    srv->max_streams = cfg->max_concurrent_streams
                           ? cfg->max_concurrent_streams
                           : RPC_DEFAULT_MAX_STREAMS;
    srv->preface_timeout_ms = cfg->preface_timeout_ms
                                  ? cfg->preface_timeout_ms
                                  : RPC_DEFAULT_PREFACE_TIMEOUT_MS;
    srv->ka_min_time_ms = cfg->keepalive.min_time_ms
                              ? cfg->keepalive.min_time_ms
                              : RPC__KA_MIN_TIME_MS;
    srv->ka_interval_ms = cfg->keepalive.interval_ms
                              ? cfg->keepalive.interval_ms
                              : RPC__KA_INTERVAL_MS;
    srv->ka_timeout_ms = cfg->keepalive.timeout_ms
                             ? cfg->keepalive.timeout_ms
                             : RPC__KA_TIMEOUT_MS;
    /* A connection may always hold two of the largest requests. */
    srv->conn_in_max = 2 * srv->max_recv_bytes > RPC__CONN_BYTES_MIN
                           ? 2 * srv->max_recv_bytes
                           : RPC__CONN_BYTES_MIN;
    srv->conn_out_max = RPC__CONN_BYTES_MIN;
    srv->tls_check = cfg->tls_check;
    srv->tls_check_ctx = cfg->tls_check_ctx;
    if (srv->tls_check != NULL) {
        srv->san_hub = rpc__san_hub_new();
        if (srv->san_hub == NULL)
            return ERR_NOMEM;
    }
    srv->tls_cn_identity = cfg->tls_cn_identity && cfg->tls_verify_clients;
    srv->tls_files = cfg->tls_files;
    if (srv->tls_files != NULL)
        rpc_tls_stamps_init(srv->tls_files, srv->tls_stamps);
    srv->tls_min_version = cfg->tls_min_version;
    srv->tls_max_version = cfg->tls_max_version;
    if (cfg->tls_ciphers != NULL && *cfg->tls_ciphers != '\0') {
        srv->tls_ciphers =
            mem_dup(cfg->tls_ciphers, strlen(cfg->tls_ciphers) + 1);
        if (srv->tls_ciphers == NULL)
            return ERR_NOMEM;
    }
    for (size_t i = 0; i < cfg->urls_n; i++) {
        const char *u = cfg->urls[i];
        bool tcp = strncmp(u, "http://", 7) == 0;
        bool unix_sock = strncmp(u, "unix://", 7) == 0;
        bool secure = strncmp(u, "https://", 8) == 0 ||
                      strncmp(u, "unixs://", 8) == 0;
        if (!tcp && !unix_sock && !secure)
            return ERR_INVAL;
        const char *rest = u + (secure ? 8 : 7);
        if (secure ? u[0] == 'h' : tcp) {
            size_t n = strcspn(rest, "/");
            if (n == 0 || memchr(rest, ':', n) == NULL)
                return ERR_INVAL;
        } else if (*rest == '\0') {
            return ERR_INVAL;
        }
        if (secure && !has_tls)
            return ERR_INVAL;
        srv->urls[i] = mem_dup(u, strlen(u) + 1);
        if (srv->urls[i] == NULL)
            return ERR_NOMEM;
        srv->secure[i] = secure;
        srv->urls_n = i + 1;
    }
    return 0;
}

static void server_free(struct rpc_server *srv)
{
    for (size_t i = 0; i < srv->urls_n; i++)
        mem_free(srv->urls[i]);
    for (size_t i = 0; i < srv->methods_n; i++) {
        mem_free(srv->methods[i].path);
        mem_free(srv->methods[i].stats);
    }
    mem_free(srv->methods);
    rpc__san_hub_free(srv->san_hub);
    if (srv->tls != NULL)
        SSL_CTX_free(srv->tls);
    mem_free(srv->tls_ciphers);
    pthread_mutex_destroy(&srv->tls_mu);
    pthread_mutex_destroy(&srv->park_mu);
    mem_free(srv);
}

int rpc_server_create(const struct rpc_server_config *cfg,
                      struct rpc_server **srv_out)
{
    assert(cfg != NULL && srv_out != NULL);
    struct rpc_server *srv = mem_calloc(1, sizeof(*srv));
    if (srv == NULL)
        return ERR_NOMEM;
    if (pthread_mutex_init(&srv->tls_mu, NULL) != 0) {
        mem_free(srv);
        return ERR_NOMEM;
    }
    if (pthread_mutex_init(&srv->park_mu, NULL) != 0) {
        pthread_mutex_destroy(&srv->tls_mu);
        mem_free(srv);
        return ERR_NOMEM;
    }
    atomic_init(&srv->stopping, false);
    atomic_init(&srv->exiting, false);
    atomic_init(&srv->active_n, 0);
    atomic_init(&srv->streams_n, 0);
    atomic_init(&srv->next_loop, 0);
    for (size_t i = 0; i < RPC__LISTENERS_MAX; i++)
        srv->lis[i].fd = -1;
    for (int i = 0; i < RPC_THREADS_MAX; i++)
        srv->loops[i].ep = srv->loops[i].evfd = -1;
    int rv = config_apply(srv, cfg);
    rpc__guard_init(srv);
    if (rv == 0 && cfg->tls_cert_pem != NULL) {
        srv->tls = rpc__tls_ctx(cfg);
        if (srv->tls == NULL)
            rv = ERR_INVAL; /* rpc__tls_ctx logged why */
        else
            SSL_CTX_set_app_data(srv->tls, srv); /* for its verify_cb */
    }
    if (rv == 0)
        rv = rpc_server_register_unary(srv, "/grpc.health.v1.Health/Check",
                                       rpc__health_check, NULL);
    if (rv != 0) {
        server_free(srv);
        return rv;
    }
    *srv_out = srv;
    return 0;
}

static int method_add(struct rpc_server *srv, const char *path,
                      enum rpc__method_kind kind, struct rpc__method **m_out)
{
    assert(srv != NULL && m_out != NULL);
    if (srv->started || path == NULL || path[0] != '/' ||
        strchr(path + 1, '/') == NULL)
        return ERR_INVAL;
    for (size_t i = 0; i < srv->methods_n; i++)
        if (strcmp(srv->methods[i].path, path) == 0)
            return ERR_EXIST;
    void *p = mem_grow(srv->methods, &srv->methods_cap, srv->methods_n,
                       sizeof(*srv->methods), 16);
    if (p == NULL)
        return ERR_NOMEM;
    srv->methods = p;
    struct rpc__method *m = &srv->methods[srv->methods_n];
    memset(m, 0, sizeof(*m));
    m->path_n = strlen(path);
    m->path = mem_dup(path, m->path_n + 1);
    m->stats = rpc__method_stats_new();
    if (m->path == NULL || m->stats == NULL) {
        mem_free(m->path);
        mem_free(m->stats);
        return ERR_NOMEM;
    }
    m->kind = kind;
    m->type = RPC_TYPE_UNARY;
    srv->methods_n++;
    *m_out = m;
    return 0;
}

void rpc_server_set_http(struct rpc_server *srv, rpc_http_fn fn, void *ctx,
                         const struct rpc_http_access *access)
{
    assert(srv != NULL && !srv->started);
    srv->http = fn;
    srv->http_ctx = ctx;
    srv->http_access = access != NULL ? *access : (struct rpc_http_access){0};
}

void rpc_server_set_http_only(struct rpc_server *srv)
{
    assert(srv != NULL && !srv->started && srv->http != NULL);
    srv->http_only = true;
}

void rpc_server_set_http_open_paths(struct rpc_server *srv,
                                    const char *const *paths)
{
    assert(srv != NULL && !srv->started);
    srv->http_open_paths = paths;
}

void rpc_server_set_count_in(struct rpc_server *srv,
                             const struct rpc_server *grpc)
{
    assert(srv != NULL && !srv->started && grpc != NULL);
    srv->count_in = grpc;
}

void rpc_server_set_gate(struct rpc_server *srv, rpc_unary_gate_fn gate,
                         void *ctx)
{
    assert(srv != NULL && !srv->started);
    srv->gate = gate;
    srv->gate_ctx = ctx;
}

int rpc_server_register_unary(struct rpc_server *srv, const char *path,
                              rpc_unary_fn fn, void *ctx)
{
    struct rpc__method *m;
    assert(fn != NULL);
    int rv = method_add(srv, path, RPC__METHOD_UNARY, &m);
    if (rv != 0)
        return rv;
    m->unary = fn;
    m->ctx = ctx;
    return 0;
}

int rpc_server_register_stream(struct rpc_server *srv, const char *path,
                               const struct rpc_stream_ops *ops, void *ctx)
{
    struct rpc__method *m;
    assert(ops != NULL && ops->on_open != NULL && ops->on_message != NULL &&
           ops->on_close != NULL);
    int rv = method_add(srv, path, RPC__METHOD_STREAM, &m);
    if (rv != 0)
        return rv;
    m->ops = ops;
    m->ctx = ctx;
    m->type = ops->wire_type;
    return 0;
}

/* --- listeners --- */

static int listener_add(struct rpc_server *srv, size_t url, int fd,
                        char *unix_path)
{
    if (srv->lis_n == RPC__LISTENERS_MAX) {
        close(fd);
        mem_free(unix_path);
        return ERR_INVAL;
    }
    struct rpc__listener *l = &srv->lis[srv->lis_n++];
    l->fd = fd;
    l->url = url;
    l->tls = srv->secure[url];
    l->unix_path = unix_path;
    return 0;
}

static int listen_unix(struct rpc_server *srv, size_t url, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return ERR_INVAL;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ERR_IO;
    unlink(path); /* as the gRPC core did: a stale socket file goes */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, LISTEN_BACKLOG) != 0) {
        close(fd);
        return ERR_IO;
    }
    char *copy = mem_dup(path, strlen(path) + 1);
    return listener_add(srv, url, fd, copy);
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* listen_tcp binds every address host resolves to (localhost: 127.0.0.1
 * and ::1); with port 0 the later ones take the first one's port. */
static int listen_tcp(struct rpc_server *srv, size_t url, const char *hp,
                      size_t hp_n)
{
    char host[256], port[16];
    const char *colon = NULL;
    for (size_t i = 0; i < hp_n; i++)
        if (hp[i] == ':')
            colon = hp + i;
    size_t host_n = (size_t)(colon - hp);
    size_t port_n = hp_n - host_n - 1;
    if (host_n >= sizeof(host) || port_n == 0 || port_n >= sizeof(port))
        return ERR_INVAL;
    memcpy(host, hp, host_n);
    host[host_n] = '\0';
    memcpy(port, colon + 1, port_n);
    port[port_n] = '\0';
    char *h = host;
    if (host_n >= 2 && host[0] == '[' && host[host_n - 1] == ']') {
        host[host_n - 1] = '\0';
        h = host + 1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res;
    if (getaddrinfo(h[0] != '\0' ? h : NULL, port, &hints, &res) != 0)
        return ERR_INVAL;
    int bound = 0, rv = 0;
    for (struct addrinfo *a = res; a != NULL && rv == 0; a = a->ai_next) {
        if (bound != 0) {
            if (a->ai_family == AF_INET)
                ((struct sockaddr_in *)a->ai_addr)->sin_port = htons(bound);
            else if (a->ai_family == AF_INET6)
                ((struct sockaddr_in6 *)a->ai_addr)->sin6_port =
                    htons(bound);
        }
        int fd = socket(a->ai_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue; /* e.g. no IPv6 here */
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (a->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 ||
            listen(fd, LISTEN_BACKLOG) != 0) {
            int e = errno;
            close(fd);
            /* ::1 may be missing where 127.0.0.1 is not. */
            if (bound != 0 && e == EADDRNOTAVAIL)
                continue;
            rv = ERR_IO;
            break;
        }
        if (bound == 0)
            bound = bound_port(fd);
        rv = listener_add(srv, url, fd, NULL);
    }
    freeaddrinfo(res);
    if (rv == 0 && bound == 0)
        rv = ERR_IO;
    srv->ports[url] = bound;
    return rv;
}

static int listen_url(struct rpc_server *srv, size_t i)
{
    const char *u = srv->urls[i];
    const char *rest = u + (srv->secure[i] ? 8 : 7);
    if (u[0] == 'u')
        return listen_unix(srv, i, rest);
    return listen_tcp(srv, i, rest, strcspn(rest, "/"));
}

/* --- loops --- */

/* The loop this thread runs, if it is a loop thread. */
static _Thread_local struct rpc__loop *this_loop;

static void loop_wake(struct rpc__loop *l)
{
    uint64_t one = 1;
    ssize_t w = write(l->evfd, &one, sizeof(one));
    (void)w; /* A full counter is a wake-up already pending. */
}

static void loop_wake_held(void *l)
{
    loop_wake(l);
}

/* rpc__loop_push wakes the loop when the inbox was empty, unless the
 * pusher is the loop itself: it looks at its inbox before it sleeps.  A
 * pusher holding its wake-ups (util/thread.h: the applier publishing a
 * batch) wakes the loop once, at the end of its burst. */
void rpc__loop_push(struct rpc__loop *l, struct rpc__item *it)
{
    assert(l != NULL && it != NULL);
    struct rpc__item *head = atomic_load(&l->inbox);
    do
        it->next = head;
    while (!atomic_compare_exchange_weak(&l->inbox, &head, it));
    if (head == NULL && l != this_loop && !thread_wake_defer(loop_wake_held, l))
        loop_wake(l);
}

/* accept_all takes every pending connection of a listener and hands each
 * to the next loop in turn.  TCP sockets get TCP_NODELAY: a reply written
 * after a small unacknowledged one would otherwise wait for the client's
 * delayed ACK (Nagle's algorithm), about 40 ms. */
static void accept_all(struct rpc__loop *l, const struct rpc__listener *lis)
{
    struct rpc_server *srv = l->srv;
    while (!l->accept_paused) {
        int fd = accept4(lis->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK &&
                !rpc__guard_accept_failed(l, errno))
                log_warn("rpc", "accept: %s", strerror(errno));
            return;
        }
        if (!rpc__guard_accept_ok(l, fd))
            return;
        if (lis->unix_path == NULL) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        unsigned k = atomic_fetch_add(&srv->next_loop, 1);
        struct rpc__loop *to = &srv->loops[k % (unsigned)srv->threads_n];
        struct rpc__conn *c = rpc__conn_new(to, fd, lis->tls);
        if (c == NULL) {
            close(fd);
            continue;
        }
        if (to == l)
            rpc__conn_attach(c);
        else
            rpc__loop_push(to, &c->item);
    }
}

/* take_inbox empties the inbox in the order the entries were pushed. */
static struct rpc__item *take_inbox(struct rpc__loop *l)
{
    struct rpc__item *it = atomic_exchange(&l->inbox, NULL), *rev = NULL;
    while (it != NULL) {
        struct rpc__item *next = it->next;
        it->next = rev;
        rev = it;
        it = next;
    }
    return rev;
}

static void run_inbox(struct rpc__loop *l)
{
    struct rpc__item *it = take_inbox(l);
    while (it != NULL) {
        struct rpc__item *next = it->next; /* before a re-push */
        switch (it->kind) {
        case RPC__KIND_CALL:
            rpc__call_inbox(rpc__container_of(it, struct rpc_call, item));
            break;
        case RPC__KIND_STREAM:
            rpc__stream_inbox(
                rpc__container_of(it, struct rpc_stream, item));
            break;
        case RPC__KIND_SAN_JOB:
            rpc__san_job_inbox(it); /* its struct is san_lookup.c's */
            break;
        case RPC__KIND_CONN: {
            struct rpc__conn *c =
                rpc__container_of(it, struct rpc__conn, item);
            c->refs++; /* attaching may kill it */
            rpc__conn_attach(c);
            if (atomic_load(&l->srv->stopping))
                rpc__conn_kill(c);
            rpc__conn_unref(c);
            break;
        }
        }
        it = next;
    }
}

static void flush_dirty(struct rpc__loop *l)
{
    while (l->dirty != NULL) {
        struct rpc__conn *c = l->dirty;
        l->dirty = c->dirty_next;
        c->dirty = false;
        rpc__conn_flush(c);
        rpc__conn_unref(c); /* the flush list's */
    }
}

/* stop_loop closes this loop's view of the listeners and every one of its
 * connections (GOAWAY first); calls still held by handlers are answered
 * into the void later. */
static void stop_loop(struct rpc__loop *l)
{
    struct rpc_server *srv = l->srv;
    l->stopped = true;
    for (size_t i = 0; i < srv->lis_n; i++)
        epoll_ctl(l->ep, EPOLL_CTL_DEL, srv->lis[i].fd, NULL);
    struct rpc__conn *c = l->conns;
    while (c != NULL) {
        struct rpc__conn *next = c->next;
        c->refs++; /* the flush may kill it */
        if (!c->dead && !c->handshaking) {
            nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
                                  nghttp2_session_get_last_proc_stream_id(
                                      c->ng),
                                  NGHTTP2_NO_ERROR, NULL, 0);
            rpc__conn_flush(c);
        }
        rpc__conn_kill(c);
        rpc__conn_unref(c);
        c = next;
    }
}

void rpc__loop_turn(struct rpc__loop *l)
{
    /* The handlers' deferred work (util/thread.h, turns), a lone voter's
     * raft pass, runs once after every call of the turn; its answers are
     * written below. */
    thread_turn_begin();
    rpc__call_dispatch(l);
    thread_turn_end();
    run_inbox(l);
    rpc__conn_lazy_due(l, false);
    flush_dirty(l);
}

static void *loop_main(void *arg)
{
    struct rpc__loop *l = arg;
    struct rpc_server *srv = l->srv;
    struct epoll_event evs[EVENTS_MAX];
    this_loop = l;
    /* OpenSSL writes to the socket with write(): a client gone would
     * raise SIGPIPE.  Blocked on this thread only, it stays pending here
     * and the write fails with EPIPE instead. */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    while (!atomic_load(&srv->exiting)) {
        /* Entries pushed by this thread woke nobody: do not sleep on
         * them.  Other threads' pushes onto an empty inbox wake it.  Nor
         * on requests made ready by the last turn (h1.c takes pipelined
         * HTTP/1.x requests as earlier ones are answered). */
        bool more = atomic_load(&l->inbox) != NULL || l->ready != NULL;
        int n = epoll_wait(l->ep, evs, EVENTS_MAX,
                           more ? 0
                                : rpc__conn_lazy_timeout_ms(
                                      l, rpc__guard_timeout_ms(l)));
        for (int i = 0; i < n; i++) {
            uintptr_t d = (uintptr_t)evs[i].data.ptr;
            if (d == RPC__TAG_EVFD) {
                uint64_t v;
                ssize_t r = read(l->evfd, &v, sizeof(v));
                (void)r;
            } else if ((d & RPC__TAG_LISTENER) != 0) {
                if (!l->stopped)
                    accept_all(l, &srv->lis[d >> 1]);
            } else {
                rpc__conn_io((struct rpc__conn *)d, evs[i].events);
            }
        }
        rpc__loop_turn(l);
        rpc__guard_tick(l);
        if (atomic_load(&srv->stopping) && !l->stopped)
            stop_loop(l);
    }
    /* Exiting: close sees no call or stream left, so every connection is
     * dead and unreferenced by now except ones never flushed. */
    run_inbox(l);
    rpc__conn_lazy_due(l, true);
    flush_dirty(l);
    while (l->conns != NULL)
        rpc__conn_kill(l->conns);
    rpc__loop_free_calls(l);
    return NULL;
}

int rpc__loop_init(struct rpc_server *srv, struct rpc__loop *l)
{
    l->srv = srv;
    atomic_init(&l->inbox, NULL);
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->ep < 0 || l->evfd < 0)
        return ERR_IO;
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.ptr = (void *)(uintptr_t)RPC__TAG_EVFD};
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->evfd, &ev) != 0)
        return ERR_IO;
    for (size_t i = 0; i < srv->lis_n; i++) {
        ev.events = EPOLLIN | EPOLLEXCLUSIVE;
        ev.data.ptr = (void *)(uintptr_t)((i << 1) | RPC__TAG_LISTENER);
        if (epoll_ctl(l->ep, EPOLL_CTL_ADD, srv->lis[i].fd, &ev) != 0)
            return ERR_IO;
    }
    return 0;
}

int rpc_server_start(struct rpc_server *srv)
{
    assert(srv != NULL && !srv->started);
    srv->started = true;
    for (size_t i = 0; i < srv->urls_n; i++) {
        int rv = listen_url(srv, i);
        if (rv != 0) {
            log_error("rpc", "cannot listen on %s: %s", srv->urls[i],
                      strerror(errno));
            return ERR_IO;
        }
    }
    for (int i = 0; i < srv->threads_n; i++) {
        if (rpc__loop_init(srv, &srv->loops[i]) != 0)
            return ERR_IO;
    }
    for (int i = 0; i < srv->threads_n; i++) {
        struct rpc__loop *l = &srv->loops[i];
        if (pthread_create(&l->thread, NULL, loop_main, l) != 0)
            abort(); /* No way to serve; nothing sane to unwind to. */
        thread_name_set(l->thread, "cetcd-rpc");
        l->started = true;
    }
    return 0;
}

int rpc_server_port(const struct rpc_server *srv, size_t i)
{
    assert(srv != NULL);
    if (i >= srv->urls_n || srv->urls[i][0] == 'u')
        return 0;
    return srv->ports[i];
}

static void wake_all(struct rpc_server *srv)
{
    for (int i = 0; i < srv->threads_n; i++)
        if (srv->loops[i].evfd >= 0)
            loop_wake(&srv->loops[i]);
}

void rpc_server_stop(struct rpc_server *srv)
{
    assert(srv != NULL);
    if (!srv->started || srv->stop_called)
        return;
    srv->stop_called = true;
    atomic_store(&srv->stopping, true);
    wake_all(srv);
}

/* The shutdown wait below polls: it runs once per server life. */
static void shutdown_tick(void)
{
    const struct timespec tick = {0, 1000000};
    nanosleep(&tick, NULL);
}

void rpc_server_close(struct rpc_server *srv)
{
    assert(srv != NULL);
    if (srv->started) {
        rpc_server_stop(srv);
        bool running = false;
        for (int i = 0; i < srv->threads_n; i++)
            running = running || srv->loops[i].started;
        /* Every call handed out answered, every stream released: their
         * answers need running loops. */
        while (running && (atomic_load(&srv->active_n) != 0 ||
                           atomic_load(&srv->streams_n) != 0))
            shutdown_tick();
        /* Lookup threads still running hand nothing back from now on;
         * what they handed back before is in the inboxes, which the
         * loops take once more as they exit. */
        rpc__san_hub_close(srv->san_hub);
        atomic_store(&srv->exiting, true);
        wake_all(srv);
    }
    for (int i = 0; i < srv->threads_n; i++) {
        struct rpc__loop *l = &srv->loops[i];
        if (l->started)
            pthread_join(l->thread, NULL);
        else
            rpc__loop_free_calls(l); /* a loop run by hand (tests) */
        if (l->ep >= 0)
            close(l->ep);
        if (l->evfd >= 0)
            close(l->evfd);
    }
    for (size_t i = 0; i < srv->lis_n; i++) {
        close(srv->lis[i].fd);
        if (srv->lis[i].unix_path != NULL) {
            unlink(srv->lis[i].unix_path);
            mem_free(srv->lis[i].unix_path);
        }
    }
    assert(atomic_load(&srv->streams_n) == 0);
    server_free(srv);
}
