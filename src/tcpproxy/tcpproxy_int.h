/*
 * tcpproxy_int.h - what the proxy's files share: the loop (tcpproxy.c),
 * the endpoints and their dials (remote.c), the connections' relay
 * (relay.c).  Everything here runs on the loop's thread.
 */
#ifndef CETCD_TCPPROXY_TCPPROXY_INT_H
#define CETCD_TCPPROXY_TCPPROXY_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tcpproxy/tcpproxy.h"

/* What an epoll event's data.ptr points at: the first member of each
 * watched object, so the loop can tell them apart. */
enum tag_kind { TAG_LISTEN, TAG_WAKE, TAG_CLIENT, TAG_UPSTREAM, TAG_PROBE };

struct tag {
    enum tag_kind kind;
};

struct remote {
    char addr[300]; /* as logged: host:port, [v6]:port */
    char dialled[80]; /* the address resolved, as Go's dial errors name it */
    uint16_t priority, weight; /* DNS SRV's (0, 0 for --endpoints) */
    struct sockaddr_storage sa;
    socklen_t sa_len;
    bool inactive;
    int64_t retry_at_ms; /* inactive: when the background dial starts */
    /* The background dial of an inactive endpoint (fd -1: none). */
    struct tag probe_tag; /* TAG_PROBE */
    int probe_fd;
    int64_t probe_deadline_ms;
};

/* One direction of a connection: bytes read from one side that the other
 * has not taken yet (at most TCPPROXY_CHUNK), and whether its source
 * ended (eof) and that end was passed on (shut). */
struct half {
    char *pend;
    uint32_t off, len;
    bool eof, shut;
};

struct pair {
    struct tag client_tag;   /* TAG_CLIENT, epoll data of cfd */
    struct tag upstream_tag; /* TAG_UPSTREAM, epoll data of ufd */
    int cfd, ufd;            /* ufd -1 before the first dial */
    uint32_t c_events, u_events; /* their current epoll interest */
    bool connecting, dead;
    size_t remote;     /* the endpoint dialled (connecting) or used */
    uint64_t tried;    /* endpoints this connection dialled, a bit each */
    int64_t deadline_ms; /* connecting: the dial's limit */
    struct half up;    /* client -> endpoint */
    struct half down;  /* endpoint -> client */
    struct pair *prev, *next;           /* p->pairs */
    struct pair *dial_prev, *dial_next; /* p->dialing, while connecting */
};

struct tcpproxy {
    int epfd, wakefd, lfd;
    bool listening;        /* lfd in the epoll set */
    int64_t accept_at_ms;  /* !listening: when accepting resumes */
    int64_t emfile_logged_ms;
    uint64_t emfile_count; /* accepts refused since the last log */
    volatile sig_atomic_t stop;
    struct tag listen_tag, wake_tag;
    struct remote *remotes;
    size_t n_remotes;
    size_t pick_count; /* round robin */
    int64_t retry_delay_ms;
    int connect_timeout_ms;
    struct pair *pairs;   /* every live connection */
    struct pair *dialing; /* those whose endpoint dial is pending */
    struct pair *graveyard; /* closed in this round, freed after it */
    char scratch[TCPPROXY_CHUNK];
};

int64_t tcpproxy__now_ms(void);
/* The process is out of descriptors (err): accepting pauses a while,
 * logged at most once per interval. */
void tcpproxy__accept_pause(struct tcpproxy *p, int err);
/* tcpproxy__watch sets fd's epoll interest (adding it when *cur is 0 and
 * events is not, removing it when events is 0); *cur tracks it. */
void tcpproxy__watch(struct tcpproxy *p, int fd, struct tag *tag,
                     uint32_t *cur, uint32_t events);
/* Go's text for a dial error: "dial tcp <addr>: connect: <errno text>",
 * or ": i/o timeout" when err is ETIMEDOUT from our own limit. */
void tcpproxy__dial_error(const struct remote *r, int err, bool timed_out,
                          char *buf, size_t cap);

/* remote.c */
/* Go's options on every TCP connection: TCP_NODELAY, keepalive 15 s. */
void tcpproxy__tune(int fd);
int tcpproxy__remotes_resolve(struct tcpproxy *p,
                              const struct tcpproxy_endpoint *eps, size_t n,
                              char *why, size_t why_cap);
/* tcpproxy__dial starts a non-blocking connect to r: the fd, or -1 with
 * *err_out set (the connect failed at once). *done_out: connected already. */
int tcpproxy__dial(const struct remote *r, int *err_out, bool *done_out);
/* Which endpoint the connection dials next: an active one it has not
 * dialled, of the best priority (by weight at random, or round robin),
 * then (none left) any it has not dialled; -1: none left. */
long tcpproxy__pick(struct tcpproxy *p, const struct pair *c);
void tcpproxy__deactivate(struct tcpproxy *p, struct remote *r, int err,
                          bool timed_out);
void tcpproxy__activate(struct tcpproxy *p, struct remote *r);
/* Background dials of inactive endpoints: start those due, finish those
 * answered (tag's event) or past their limit. */
void tcpproxy__probes_due(struct tcpproxy *p, int64_t now);
void tcpproxy__probe_event(struct tcpproxy *p, struct remote *r);
/* The earliest time a probe needs attention (INT64_MAX: none). */
int64_t tcpproxy__probes_next(const struct tcpproxy *p);
void tcpproxy__probes_close(struct tcpproxy *p);

/* relay.c */
void tcpproxy__pair_open(struct tcpproxy *p, int cfd);
void tcpproxy__pair_event(struct tcpproxy *p, struct pair *c, bool upstream,
                          uint32_t events);
/* Dials past their limit fail over; the earliest limit left, or
 * INT64_MAX. */
int64_t tcpproxy__dials_expire(struct tcpproxy *p, int64_t now);
void tcpproxy__pair_close(struct tcpproxy *p, struct pair *c);
void tcpproxy__graveyard_free(struct tcpproxy *p);

#endif
