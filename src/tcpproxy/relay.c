/*
 * relay.c - one client connection: the dial of its endpoint (failing over
 * to the next), then its bytes both ways with at most TCPPROXY_CHUNK kept
 * per direction, half-closes passed on, closed once both directions ended
 * or either side failed.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcpproxy/tcpproxy_int.h"
#include "util/mem.h"

static void dialing_unlink(struct tcpproxy *p, struct pair *c)
{
    if (c->dial_prev != NULL)
        c->dial_prev->dial_next = c->dial_next;
    else if (p->dialing == c)
        p->dialing = c->dial_next;
    if (c->dial_next != NULL)
        c->dial_next->dial_prev = c->dial_prev;
    c->dial_prev = c->dial_next = NULL;
}

static void half_clear(struct half *h)
{
    mem_free(h->pend);
    h->pend = NULL;
    h->off = h->len = 0;
}

void tcpproxy__pair_close(struct tcpproxy *p, struct pair *c)
{
    if (c->dead)
        return;
    c->dead = true;
    tcpproxy__watch(p, c->cfd, &c->client_tag, &c->c_events, 0);
    close(c->cfd);
    if (c->ufd >= 0) {
        tcpproxy__watch(p, c->ufd, &c->upstream_tag, &c->u_events, 0);
        close(c->ufd);
    }
    half_clear(&c->up);
    half_clear(&c->down);
    if (c->connecting)
        dialing_unlink(p, c);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        p->pairs = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    /* Freed after the round: later events of this round may name it. */
    c->next = p->graveyard;
    p->graveyard = c;
}

void tcpproxy__graveyard_free(struct tcpproxy *p)
{
    while (p->graveyard != NULL) {
        struct pair *c = p->graveyard;
        p->graveyard = c->next;
        mem_free(c);
    }
}

/* The epoll interest that follows from c's state. */
static void update(struct tcpproxy *p, struct pair *c)
{
    if (c->dead)
        return;
    uint32_t ce = 0, ue = 0;
    if (!c->up.eof && c->up.len == 0)
        ce |= EPOLLIN;
    if (c->down.len > 0)
        ce |= EPOLLOUT;
    if (c->connecting) {
        ue = EPOLLOUT;
    } else {
        if (!c->down.eof && c->down.len == 0)
            ue |= EPOLLIN;
        if (c->up.len > 0)
            ue |= EPOLLOUT;
    }
    tcpproxy__watch(p, c->cfd, &c->client_tag, &c->c_events, ce);
    if (c->ufd >= 0)
        tcpproxy__watch(p, c->ufd, &c->upstream_tag, &c->u_events, ue);
}

/* Passes h's end on once its bytes are written; closes the pair once both
 * directions ended.  false: the pair is closed. */
static bool pass_eof(struct tcpproxy *p, struct pair *c, struct half *h,
                     int dst)
{
    if (h->eof && !h->shut && h->len == 0) {
        (void)shutdown(dst, SHUT_WR);
        h->shut = true;
    }
    if (c->up.shut && c->down.shut) {
        tcpproxy__pair_close(p, c);
        return false;
    }
    return true;
}

/* Writes what h keeps to dst.  false: the pair is closed. */
static bool flush(struct tcpproxy *p, struct pair *c, struct half *h, int dst)
{
    while (h->off < h->len) {
        ssize_t k = send(dst, h->pend + h->off, h->len - h->off,
                         MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (k < 0) {
            tcpproxy__pair_close(p, c);
            return false;
        }
        h->off += (uint32_t)k;
    }
    half_clear(h);
    return pass_eof(p, c, h, dst);
}

/* Reads once from src into h and writes it on to dst when dst is
 * connected; keeps what dst does not take.  false: the pair is closed. */
static bool pump(struct tcpproxy *p, struct pair *c, struct half *h, int src,
                 int dst, bool dst_ready)
{
    ssize_t n = recv(src, p->scratch, sizeof p->scratch, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return true;
    if (n < 0) {
        tcpproxy__pair_close(p, c);
        return false;
    }
    if (n == 0) {
        h->eof = true;
        return !dst_ready || pass_eof(p, c, h, dst);
    }
    size_t w = 0;
    if (dst_ready) {
        ssize_t k = send(dst, p->scratch, (size_t)n, MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
            errno != EINTR) {
            tcpproxy__pair_close(p, c);
            return false;
        }
        w = k > 0 ? (size_t)k : 0;
    }
    if (w < (size_t)n) {
        h->pend = mem_dup(p->scratch + w, (size_t)n - w);
        if (h->pend == NULL) {
            tcpproxy__pair_close(p, c);
            return false;
        }
        h->off = 0;
        h->len = (uint32_t)((size_t)n - w);
    }
    return true;
}

static void dial_next(struct tcpproxy *p, struct pair *c);

static void connected(struct tcpproxy *p, struct pair *c)
{
    if (c->connecting) {
        dialing_unlink(p, c);
        c->connecting = false;
    }
    /* A dial that reached an inactive endpoint (all were) activates it. */
    tcpproxy__activate(p, &p->remotes[c->remote]);
    if (!flush(p, c, &c->up, c->ufd))
        return;
    update(p, c);
}

static void dial_failed(struct tcpproxy *p, struct pair *c, int err,
                        bool timed_out)
{
    dialing_unlink(p, c);
    c->connecting = false;
    tcpproxy__watch(p, c->ufd, &c->upstream_tag, &c->u_events, 0);
    close(c->ufd);
    c->ufd = -1;
    tcpproxy__deactivate(p, &p->remotes[c->remote], err, timed_out);
    dial_next(p, c);
}

static void dial_next(struct tcpproxy *p, struct pair *c)
{
    for (;;) {
        long k = tcpproxy__pick(p, c);
        if (k < 0) {
            tcpproxy__pair_close(p, c); /* no endpoint takes it */
            return;
        }
        c->tried |= 1ull << k;
        c->remote = (size_t)k;
        int err = 0;
        bool done;
        int fd = tcpproxy__dial(&p->remotes[k], &err, &done);
        if (fd < 0 && (err == EMFILE || err == ENFILE || err == ENOBUFS ||
                       err == ENOMEM)) {
            /* Out of descriptors, not the endpoint's fault: this client
             * goes, and accepting pauses. */
            tcpproxy__pair_close(p, c);
            tcpproxy__accept_pause(p, err);
            return;
        }
        if (fd < 0) {
            tcpproxy__deactivate(p, &p->remotes[k], err, false);
            continue;
        }
        c->ufd = fd;
        c->u_events = 0;
        if (done) {
            connected(p, c);
            return;
        }
        c->connecting = true;
        c->deadline_ms = tcpproxy__now_ms() + p->connect_timeout_ms;
        c->dial_prev = NULL;
        c->dial_next = p->dialing;
        if (p->dialing != NULL)
            p->dialing->dial_prev = c;
        p->dialing = c;
        update(p, c);
        return;
    }
}

void tcpproxy__pair_open(struct tcpproxy *p, int cfd)
{
    tcpproxy__tune(cfd);
    struct pair *c = mem_calloc(1, sizeof *c);
    if (c == NULL) {
        close(cfd);
        return;
    }
    c->client_tag.kind = TAG_CLIENT;
    c->upstream_tag.kind = TAG_UPSTREAM;
    c->cfd = cfd;
    c->ufd = -1;
    c->next = p->pairs;
    if (p->pairs != NULL)
        p->pairs->prev = c;
    p->pairs = c;
    dial_next(p, c);
}

void tcpproxy__pair_event(struct tcpproxy *p, struct pair *c, bool upstream,
                          uint32_t events)
{
    if (c->dead)
        return;
    if (upstream && c->connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err != 0)
            dial_failed(p, c, err, false);
        else
            connected(p, c);
        return;
    }
    if (events & EPOLLERR) {
        tcpproxy__pair_close(p, c);
        return;
    }
    int fd = upstream ? c->ufd : c->cfd;
    int other = upstream ? c->cfd : c->ufd;
    struct half *in = upstream ? &c->down : &c->up;  /* read from fd */
    struct half *out = upstream ? &c->up : &c->down; /* written to fd */
    bool other_ready = upstream || (c->ufd >= 0 && !c->connecting);
    if ((events & EPOLLOUT) && out->len > 0 && !flush(p, c, out, fd))
        return;
    if ((events & (EPOLLIN | EPOLLHUP)) && !in->eof && in->len == 0) {
        if (!pump(p, c, in, fd, other, other_ready))
            return;
    } else if (events & EPOLLHUP) {
        /* Both directions of fd are shut: nothing more moves through it. */
        tcpproxy__pair_close(p, c);
        return;
    }
    update(p, c);
}

int64_t tcpproxy__dials_expire(struct tcpproxy *p, int64_t now)
{
    /* dial_failed may put c back at the head of the list (a new dial):
     * the walk goes on from the next one it saved. */
    for (struct pair *c = p->dialing, *next; c != NULL; c = next) {
        next = c->dial_next;
        if (now >= c->deadline_ms)
            dial_failed(p, c, ETIMEDOUT, true);
    }
    int64_t first = INT64_MAX;
    for (struct pair *c = p->dialing; c != NULL; c = c->dial_next) {
        if (c->deadline_ms < first)
            first = c->deadline_ms;
    }
    return first;
}
