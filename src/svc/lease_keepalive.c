/*
 * lease_keepalive.c - LeaseKeepAlive (etcd 3.4's v3rpc/lease.go
 * leaseKeepAlive) on a struct svc_stream: each LeaseKeepAliveRequest is
 * a renewal (server_lease_renew: on the leader, or forwarded to it) and
 * gets one LeaseKeepAliveResponse {ID, TTL}, TTL 0 for a lease that is
 * unknown or expired.  As in etcd, the renewals of one stream run one at
 * a time, in order; the header is taken just before each renewal (its
 * revision is no later than the renewal); another error of the renewal
 * ends the stream with that error; a client's half-close ends it OK once
 * the requests received are answered.
 *
 * Bounds.  Requests wait in a queue of the stream's queue_max (the
 * transport's send queue, 128 on gRPC) while one is renewed; one more
 * ends the stream with ERR_TOO_MANY_REQUESTS, as does an answer the
 * transport's full queue refuses (nothing waits).  So a follower forwards
 * at most one renewal per stream at a time (server/lease_forward.c).
 *
 * Threads.  recv and end run on the transport's thread for the stream;
 * answers on whichever thread the renewal completes (inline, a read
 * worker, the apply thread, a peer-call thread), and the next renewal is
 * started there.  The stream's state lives until the transport's end has
 * come and no renewal is under way or being started (mu).
 */
#include <pthread.h>

#include "server/server.h"
#include "svc/svc.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

#define QUEUE_DEFAULT 128 /* a stream that gives no queue_max */

/* One open LeaseKeepAlive stream. */
struct kstream {
    struct server *s;      /* the member */
    struct svc_stream *st; /* the transport's end (until release) */
    pthread_mutex_t mu;    /* guards the fields below */
    int64_t *ids;          /* requests waiting: a ring of cap */
    size_t cap, head, n;   /* its size, first, count */
    bool busy;             /* a renewal is under way */
    bool pumping;          /* a thread is starting renewals (pump) */
    bool ended;            /* the transport's end ran */
    bool half_closed;      /* the client sent its last request */
    bool closing;          /* close was called */
};

/* One renewal under way. */
struct kreq {
    struct kstream *k;
    int64_t id;
    Etcdserverpb__ResponseHeader h; /* taken before the renewal */
};

/* mu held: closes on a finished half-close, frees k once nothing can
 * touch it any more; true when k was freed (mu with it). */
static bool settle(struct kstream *k)
{
    if (k->busy || k->pumping)
        return false;
    if (k->half_closed && k->n == 0 && !k->closing && !k->ended) {
        k->closing = true;
        k->st->close(k->st->ctx, 0);
    }
    if (!k->ended)
        return false;
    pthread_mutex_unlock(&k->mu);
    k->st->release(k->st->ctx);
    pthread_mutex_destroy(&k->mu);
    mem_free(k->ids);
    mem_free(k);
    return true;
}

static void end_with(struct kstream *k, int err)
{
    if (!k->closing) {
        k->closing = true;
        k->st->close(k->st->ctx, err);
    }
}

static void on_renewed(void *arg, int err, int64_t ttl);

/* mu held on entry, released (or k freed) on return: starts the waiting
 * renewals one after the other.  A renewal answered inline ends inside
 * server_lease_renew; its on_renewed sees pumping and leaves the next one
 * to this loop, so the stack does not grow with the queue. */
static void pump(struct kstream *k)
{
    if (k->pumping) {
        pthread_mutex_unlock(&k->mu);
        return;
    }
    k->pumping = true;
    while (!k->busy && k->n > 0 && !k->closing) {
        struct kreq *q = mem_malloc(sizeof *q);
        if (q == NULL) {
            end_with(k, ERR_NOMEM);
            break;
        }
        q->k = k;
        q->id = k->ids[k->head];
        k->head = (k->head + 1) % k->cap;
        k->n--;
        k->busy = true;
        pthread_mutex_unlock(&k->mu);
        etcdserverpb__response_header__init(&q->h);
        server_header_fill(k->s, &q->h);
        server_lease_renew(k->s, q->id, false, on_renewed, q);
        pthread_mutex_lock(&k->mu);
    }
    k->pumping = false;
    if (!settle(k))
        pthread_mutex_unlock(&k->mu);
}

static void on_renewed(void *arg, int err, int64_t ttl)
{
    struct kreq *q = arg;
    struct kstream *k = q->k;
    int rc = 0;
    if (err == 0 || err == ERR_LEASE_NOT_FOUND) {
        Etcdserverpb__LeaseKeepAliveResponse r =
            ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
        r.header = &q->h;
        r.id = q->id;
        r.ttl = err == 0 ? ttl : 0;
        rc = k->st->send(k->st->ctx, &r.base);
    }
    mem_free(q);
    pthread_mutex_lock(&k->mu);
    if (err != 0 && err != ERR_LEASE_NOT_FOUND)
        end_with(k, err);
    else if (rc == ERR_FULL)
        end_with(k, ERR_TOO_MANY_REQUESTS);
    CHECK(k->busy);
    k->busy = false;
    pump(k);
}

static int k_open(struct server *s, struct svc_stream *st, void **state_out)
{
    CHECK(s != NULL && st != NULL && state_out != NULL);
    struct kstream *k = mem_calloc(1, sizeof *k);
    size_t cap = st->queue_max ? st->queue_max : QUEUE_DEFAULT;
    int64_t *ids = mem_malloc(cap * sizeof *ids);
    if (k == NULL || ids == NULL) {
        mem_free(k);
        mem_free(ids);
        return ERR_NOMEM;
    }
    k->s = s;
    k->st = st;
    k->ids = ids;
    k->cap = cap;
    pthread_mutex_init(&k->mu, NULL);
    *state_out = k;
    return 0;
}

static void k_recv(void *state, const ProtobufCMessage *m)
{
    struct kstream *k = state;
    pthread_mutex_lock(&k->mu);
    if (m == NULL) {
        k->half_closed = true;
        if (!settle(k))
            pthread_mutex_unlock(&k->mu);
        return;
    }
    if (k->closing) { /* ending: nothing more is answered */
        pthread_mutex_unlock(&k->mu);
        return;
    }
    if (k->n == k->cap) {
        end_with(k, ERR_TOO_MANY_REQUESTS);
        pthread_mutex_unlock(&k->mu);
        return;
    }
    const Etcdserverpb__LeaseKeepAliveRequest *r =
        (const Etcdserverpb__LeaseKeepAliveRequest *)m;
    k->ids[(k->head + k->n) % k->cap] = r->id;
    k->n++;
    pump(k);
}

static void k_end(void *state, bool cancelled)
{
    (void)cancelled;
    struct kstream *k = state;
    pthread_mutex_lock(&k->mu);
    k->ended = true;
    if (!settle(k))
        pthread_mutex_unlock(&k->mu);
}

const struct svc_stream_handler svc_lease_keepalive_handler = {
    &etcdserverpb__lease_keep_alive_request__descriptor, k_open, k_recv,
    k_end,
};
