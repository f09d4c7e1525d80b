/*
 * tcpproxy.c - the proxy's loop: accepting (paused at the fd limit), the
 * epoll rounds, the timers of dials and background dials, stop.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcpproxy/tcpproxy_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

/* Accepting pauses this long when the process is out of descriptors. */
#define ACCEPT_PAUSE_MS 100
/* and says so at most once per this interval. */
#define EMFILE_LOG_MS 10000
/* Connections accepted per round at most (the others wait a round). */
#define ACCEPTS_PER_ROUND 64
#define EVENTS_PER_ROUND 256

int64_t tcpproxy__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tcpproxy__watch(struct tcpproxy *p, int fd, struct tag *tag,
                     uint32_t *cur, uint32_t events)
{
    if (*cur == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = tag};
    int op = *cur == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL :
             EPOLL_CTL_MOD;
    if (epoll_ctl(p->epfd, op, fd, &ev) == 0)
        *cur = events;
}

int tcpproxy_create(const struct tcpproxy_options *o, struct tcpproxy **out,
                    char *why, size_t why_cap)
{
    int rc;
    *out = NULL;
    if (o->retry_delay_ms <= 0 || o->connect_timeout_ms <= 0) {
        snprintf(why, why_cap, "retry delay and dial timeout must be > 0");
        close(o->listen_fd);
        return ERR_INVAL;
    }
    struct tcpproxy *p = mem_calloc(1, sizeof *p);
    if (p == NULL) {
        close(o->listen_fd);
        return ERR_NOMEM;
    }
    p->lfd = o->listen_fd;
    p->epfd = p->wakefd = -1;
    p->listen_tag.kind = TAG_LISTEN;
    p->wake_tag.kind = TAG_WAKE;
    p->retry_delay_ms = o->retry_delay_ms;
    p->connect_timeout_ms = o->connect_timeout_ms;
    rc = tcpproxy__remotes_resolve(p, o->endpoints, o->n_endpoints, why,
                                   why_cap);
    if (rc != 0)
        goto err_destroy;
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    p->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->epfd < 0 || p->wakefd < 0) {
        rc = err_from_errno(errno);
        snprintf(why, why_cap, "epoll: %s", strerror(errno));
        goto err_destroy;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->wake_tag};
    if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wakefd, &ev) != 0) {
        rc = err_from_errno(errno);
        snprintf(why, why_cap, "epoll: %s", strerror(errno));
        goto err_destroy;
    }
    *out = p;
    return 0;
err_destroy:
    tcpproxy_destroy(p);
    return rc;
}

static void listen_set(struct tcpproxy *p, bool on)
{
    if (p->listening == on)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->listen_tag};
    if (epoll_ctl(p->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, p->lfd,
                  &ev) == 0)
        p->listening = on;
}

void tcpproxy__accept_pause(struct tcpproxy *p, int err)
{
    /* The listener stays readable: without a pause the loop would spin on
     * it.  The clients wait in the backlog meanwhile. */
    int64_t now = tcpproxy__now_ms();
    p->emfile_count++;
    listen_set(p, false);
    p->accept_at_ms = now + ACCEPT_PAUSE_MS;
    if (p->emfile_logged_ms != 0 && now - p->emfile_logged_ms < EMFILE_LOG_MS)
        return;
    char e[128];
    snprintf(e, sizeof e, "%s", strerror(err));
    log_zap(LOG_WARN, "pausing accepts (out of file descriptors)",
            LOG_STR("error", e), LOG_SECS_MS("pause", ACCEPT_PAUSE_MS),
            LOG_UINT("refused-since-last-log", p->emfile_count));
    p->emfile_logged_ms = now;
    p->emfile_count = 0;
}

static void accept_some(struct tcpproxy *p)
{
    for (int i = 0; i < ACCEPTS_PER_ROUND && p->listening; i++) {
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            tcpproxy__pair_open(p, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM)
            tcpproxy__accept_pause(p, errno);
        return; /* EAGAIN, or paused */
    }
}

static void endpoints_csv(const struct tcpproxy *p, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < p->n_remotes && n + 1 < cap; i++) {
        int k = snprintf(buf + n, cap - n, "%s%s", i ? "," : "",
                         p->remotes[i].addr);
        if (k < 0 || (size_t)k >= cap - n)
            break;
        n += (size_t)k;
    }
}

int tcpproxy_run(struct tcpproxy *p)
{
    char eps[TCPPROXY_ENDPOINTS_MAX * 64];
    endpoints_csv(p, eps, sizeof eps);
    log_zap(LOG_INFO, "ready to proxy client requests",
            LOG_CSV("endpoints", eps));
    listen_set(p, true);
    struct epoll_event evs[EVENTS_PER_ROUND];
    while (!p->stop) {
        int64_t now = tcpproxy__now_ms();
        int64_t next = tcpproxy__dials_expire(p, now);
        tcpproxy__probes_due(p, now);
        int64_t t = tcpproxy__probes_next(p);
        if (t < next)
            next = t;
        if (!p->listening && p->accept_at_ms < next)
            next = p->accept_at_ms;
        tcpproxy__graveyard_free(p);
        int timeout = -1;
        if (next != INT64_MAX)
            timeout = next <= now ? 0 : next - now > 60000 ? 60000 :
                      (int)(next - now);
        int n = epoll_wait(p->epfd, evs, EVENTS_PER_ROUND, timeout);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        now = tcpproxy__now_ms();
        if (!p->listening && now >= p->accept_at_ms)
            listen_set(p, true);
        for (int i = 0; i < n; i++) {
            struct tag *tag = evs[i].data.ptr;
            switch (tag->kind) {
            case TAG_LISTEN:
                accept_some(p);
                break;
            case TAG_WAKE: {
                uint64_t v;
                (void)!read(p->wakefd, &v, sizeof v);
                break;
            }
            case TAG_CLIENT:
                tcpproxy__pair_event(
                    p, (struct pair *)((char *)tag -
                                       offsetof(struct pair, client_tag)),
                    false, evs[i].events);
                break;
            case TAG_UPSTREAM:
                tcpproxy__pair_event(
                    p, (struct pair *)((char *)tag -
                                       offsetof(struct pair, upstream_tag)),
                    true, evs[i].events);
                break;
            case TAG_PROBE:
                tcpproxy__probe_event(
                    p, (struct remote *)((char *)tag -
                                         offsetof(struct remote, probe_tag)));
                break;
            }
        }
        tcpproxy__graveyard_free(p);
    }
    return 0;
}

void tcpproxy_stop(struct tcpproxy *p)
{
    p->stop = 1;
    uint64_t one = 1;
    (void)!write(p->wakefd, &one, sizeof one);
}

void tcpproxy_destroy(struct tcpproxy *p)
{
    if (p == NULL)
        return;
    while (p->pairs != NULL)
        tcpproxy__pair_close(p, p->pairs);
    tcpproxy__graveyard_free(p);
    tcpproxy__probes_close(p);
    mem_free(p->remotes);
    if (p->lfd >= 0)
        close(p->lfd);
    if (p->wakefd >= 0)
        close(p->wakefd);
    if (p->epfd >= 0)
        close(p->epfd);
    mem_free(p);
}
