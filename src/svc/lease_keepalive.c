/*
 * lease_keepalive.c - LeaseKeepAlive (etcd 3.4's v3rpc/lease.go
 * leaseKeepAlive) on a struct svc_stream: each LeaseKeepAliveRequest is
 * a renewal (server_lease_renew: on the leader, or forwarded to it) and
 * gets one LeaseKeepAliveResponse {ID, TTL}, TTL 0 for a lease that is
 * unknown or expired.  As in etcd, the header is taken before the renewal
 * (its revision is no later than the renewal), another error of the
 * renewal ends the stream with that error, and a client's half-close ends
 * it OK (once the renewals under way are answered).
 *
 * etcd answers one request at a time; here renewals of one stream may be
 * under way together (most are answered inline on the leader), up to the
 * stream's queue_max: one more ends the stream with ERR_TOO_MANY_REQUESTS,
 * as does an answer the transport's full queue refuses.  Answers may so
 * come in another order than the requests (clients match them by ID).
 *
 * Threads.  recv and end run on the transport's thread for the stream;
 * answers on whichever thread the renewal completes (inline, a read
 * worker, the apply thread, a peer-call thread).  The stream's state lives
 * until both the transport's end and the last answer have come (mu).
 */
#include <pthread.h>

#include "server/server.h"
#include "svc/svc.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* One open LeaseKeepAlive stream. */
struct kstream {
    struct server *s;      /* the member */
    struct svc_stream *st; /* the transport's end (until release) */
    pthread_mutex_t mu;    /* guards the fields below */
    size_t inflight;       /* renewals not answered yet */
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

/* mu held: the last holder frees; true when k was freed. */
static bool settle(struct kstream *k)
{
    if (k->inflight > 0)
        return false;
    if (k->half_closed && !k->closing && !k->ended) {
        k->closing = true;
        k->st->close(k->st->ctx, 0);
    }
    if (!k->ended)
        return false;
    pthread_mutex_unlock(&k->mu);
    k->st->release(k->st->ctx);
    pthread_mutex_destroy(&k->mu);
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
    CHECK(k->inflight > 0);
    k->inflight--;
    if (!settle(k))
        pthread_mutex_unlock(&k->mu);
}

static int k_open(struct server *s, struct svc_stream *st, void **state_out)
{
    CHECK(s != NULL && st != NULL && state_out != NULL);
    struct kstream *k = mem_calloc(1, sizeof *k);
    if (k == NULL)
        return ERR_NOMEM;
    k->s = s;
    k->st = st;
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
    size_t max = k->st->queue_max ? k->st->queue_max : 128;
    if (k->closing || k->inflight >= max) {
        end_with(k, ERR_TOO_MANY_REQUESTS);
        pthread_mutex_unlock(&k->mu);
        return;
    }
    struct kreq *q = mem_malloc(sizeof *q);
    if (q == NULL) {
        end_with(k, ERR_NOMEM);
        pthread_mutex_unlock(&k->mu);
        return;
    }
    k->inflight++;
    pthread_mutex_unlock(&k->mu);
    const Etcdserverpb__LeaseKeepAliveRequest *r =
        (const Etcdserverpb__LeaseKeepAliveRequest *)m;
    q->k = k;
    q->id = r->id;
    etcdserverpb__response_header__init(&q->h);
    server_header_fill(k->s, &q->h);
    server_lease_renew(k->s, r->id, false, on_renewed, q);
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
