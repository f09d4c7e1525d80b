/*
 * transport.c - the transport object: configuration, the peer set (add,
 * update, remove, close, stats) and the channel every peer thread dials
 * with.  The raft thread's entry points are in enqueue.c.
 */
#include <assert.h>
#include <string.h>

#include <grpc/grpc_security.h>

#include "util/absl.h"
#include "util/thread.h"
#include "rpc/rpc.h"
#include "dial/dial.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

static void limits_fill(struct peer_limits *l)
{
#define DEF(f, v)                                                            \
    if (l->f == 0)                                                           \
    l->f = (v)
    DEF(queue_msgs_max, PEER_DEFAULT_QUEUE_MSGS);
    DEF(queue_bytes_max, PEER_DEFAULT_QUEUE_BYTES);
    DEF(batch_bytes_max, PEER_DEFAULT_BATCH_BYTES);
    DEF(backoff_min_ms, PEER_DEFAULT_BACKOFF_MIN_MS);
    DEF(backoff_max_ms, PEER_DEFAULT_BACKOFF_MAX_MS);
    DEF(send_timeout_ms, PEER_DEFAULT_SEND_TIMEOUT_MS);
    DEF(connect_timeout_ms, PEER_DEFAULT_CONNECT_TIMEOUT_MS);
    DEF(chunk_bytes, PEER_DEFAULT_CHUNK_BYTES);
    DEF(snapshot_bytes_max, PEER_DEFAULT_SNAPSHOT_BYTES);
    DEF(snapshot_timeout_ms, PEER_DEFAULT_SNAPSHOT_TIMEOUT_MS);
    DEF(snapshots_in_max, PEER_DEFAULT_SNAPSHOTS_IN);
#undef DEF
    if (l->backoff_max_ms < l->backoff_min_ms)
        l->backoff_max_ms = l->backoff_min_ms;
}

/* creds_open makes the credentials for each scheme; grpc_init is held. */
static int creds_open(struct peer_transport *t, const struct dial_tls *tls)
{
    t->plain = dial_creds_create(NULL);
    if (t->plain == NULL)
        return ERR_NOMEM;
    if (tls == NULL)
        return 0;
    t->tls = dial_creds_create(tls);
    if (t->tls == NULL)
        return ERR_INVAL;
    if (tls->allowed_cn == NULL && tls->allowed_hostname == NULL)
        return 0;
    t->tls_named = dial_tls_copy(tls);
    return t->tls_named != NULL ? 0 : ERR_NOMEM;
}

static void creds_close(struct peer_transport *t)
{
    if (t->tls != NULL)
        grpc_channel_credentials_release(t->tls);
    if (t->plain != NULL)
        grpc_channel_credentials_release(t->plain);
    t->tls = t->plain = NULL;
    mem_free(t->tls_named);
    t->tls_named = NULL;
}

static bool config_valid(const struct peer_config *cfg)
{
    if (cfg->self == 0 || cfg->cluster_id == 0)
        return false;
    if (cfg->snap_dir != NULL && strlen(cfg->snap_dir) > 4000)
        return false;
    return cfg->tls == NULL ||
           (cfg->tls->cert_pem == NULL) == (cfg->tls->key_pem == NULL);
}

int peer_transport_create(const struct peer_config *cfg,
                          struct peer_transport **t_out)
{
    assert(cfg != NULL && t_out != NULL);
    *t_out = NULL;
    if (!config_valid(cfg))
        return ERR_INVAL;
    struct peer_transport *t = mem_calloc(1, sizeof(*t));
    if (t == NULL)
        return ERR_NOMEM;
    if (cfg->snap_dir != NULL) {
        t->snap_dir = mem_dup(cfg->snap_dir, strlen(cfg->snap_dir) + 1);
        if (t->snap_dir == NULL) {
            mem_free(t);
            return ERR_NOMEM;
        }
    }
    absl_deadlock_detection_off(); /* see util/absl.h */
    grpc_init(); /* Balanced in close: channels outlive no init. */
    int rv = creds_open(t, cfg->tls);
    if (rv != 0) {
        creds_close(t);
        grpc_shutdown_blocking();
        mem_free(t->snap_dir);
        mem_free(t);
        return rv;
    }
    t->self = cfg->self;
    t->cluster_id = cfg->cluster_id;
    t->cb = cfg->cb;
    t->lim = cfg->limits;
    limits_fill(&t->lim);
    pthread_rwlock_init(&t->lock, NULL);
    pthread_mutex_init(&t->in_mu, NULL);
    pthread_mutex_init(&t->calls_mu, NULL);
    peer__asks_init(t);
    atomic_init(&t->closing, false);
    for (size_t i = 0; i < PEER_CALLS_MAX; i++)
        atomic_init(&t->calls[i].done, false);
    atomic_init(&t->snapshots_in, 0);
    atomic_init(&t->snap_seq, 0);
    atomic_init(&t->test_corrupt, false);
    *t_out = t;
    return 0;
}

int peer_transport_register(struct peer_transport *t, struct rpc_server *srv)
{
    assert(t != NULL && srv != NULL);
    int rv = rpc_server_register_stream(srv, PEER__STREAM_PATH,
                                        &peer__stream_ops, t);
    if (rv != 0)
        return rv;
    return rpc_server_register_stream(srv, PEER__SNAPSHOT_PATH,
                                      &peer__snapshot_ops, t);
}

struct peer__peer *peer__find(struct peer_transport *t, raft_id id)
{
    for (size_t i = 0; i < t->peers_n; i++)
        if (t->peers[i]->id == id)
            return t->peers[i];
    return NULL;
}

struct peer__peer *peer__hold(struct peer_transport *t, raft_id id)
{
    pthread_rwlock_rdlock(&t->lock);
    struct peer__peer *p = peer__find(t, id);
    if (p == NULL) {
        pthread_rwlock_unlock(&t->lock);
        return NULL;
    }
    pthread_mutex_lock(&p->mu);
    return p;
}

void peer__unhold(struct peer_transport *t, struct peer__peer *p)
{
    assert(p != NULL);
    pthread_mutex_unlock(&p->mu);
    pthread_rwlock_unlock(&t->lock);
}

bool peer__known(struct peer_transport *t, raft_id id)
{
    pthread_rwlock_rdlock(&t->lock);
    bool known = peer__find(t, id) != NULL;
    pthread_rwlock_unlock(&t->lock);
    return known;
}

enum peer__sender peer__sender_of(struct peer_transport *t, raft_id from)
{
    assert(t != NULL && from != 0);
    if (peer__known(t, from))
        return PEER__SENDER_PEER;
    if (t->cb.is_removed != NULL && t->cb.is_removed(t->cb.arg, from))
        return PEER__SENDER_REMOVED;
    return PEER__SENDER_UNKNOWN;
}

/* urls_check validates urls[0..n) without keeping anything: the secure
 * schemes need a transport with TLS. */
static int urls_check(const struct peer_transport *t, const char *const *urls,
                      size_t n)
{
    char target[PEER_URL_LEN_MAX + 8];
    bool tls;
    if (urls == NULL || n == 0 || n > PEER_URLS_MAX)
        return ERR_INVAL;
    for (size_t i = 0; i < n; i++) {
        int rv = t->tls != NULL
                     ? peer__url_parse(urls[i], target, sizeof(target), &tls)
                     : peer__url_target(urls[i], target, sizeof(target));
        if (rv != 0)
            return rv;
    }
    return 0;
}

/* urls_set copies urls into p (the caller holds p->mu or owns p). */
static void urls_set(struct peer__peer *p, const char *const *urls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(urls[i]);
        assert(len <= PEER_URL_LEN_MAX);
        memcpy(p->urls[i], urls[i], len + 1);
    }
    p->urls_n = n;
    p->urls_gen++;
}

static void peer_free(struct peer__peer *p)
{
    peer__queue_close(&p->q);
    mem_free(p->st.take);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mu);
    mem_free(p);
}

static int peer_new(struct peer_transport *t, raft_id id,
                    const char *const *urls, size_t n,
                    struct peer__peer **p_out)
{
    struct peer__peer *p = mem_calloc(1, sizeof(*p));
    if (p == NULL)
        return ERR_NOMEM;
    p->t = t;
    p->id = id;
    p->rtt = (struct metrics_hist)METRICS_HIST_INIT(peer_rtt_bounds);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    int rv = peer__queue_init(&p->q, t->lim.queue_msgs_max,
                              t->lim.queue_bytes_max);
    p->st.take_max = t->lim.queue_msgs_max < PEER_BATCH_MSGS_MAX
                         ? t->lim.queue_msgs_max
                         : PEER_BATCH_MSGS_MAX;
    p->st.take = mem_calloc(p->st.take_max, sizeof(*p->st.take));
    if (rv == 0 && p->st.take == NULL)
        rv = ERR_NOMEM;
    if (rv != 0) {
        peer_free(p);
        return rv;
    }
    urls_set(p, urls, n);
    if (pthread_create(&p->thread, NULL, peer__sender_main, p) != 0) {
        peer_free(p);
        return ERR_IO;
    }
    thread_name_set(p->thread, "cetcd-peer");
    *p_out = p;
    return 0;
}

int peer_add(struct peer_transport *t, raft_id id, const char *const *urls,
             size_t n)
{
    assert(t != NULL);
    if (id == 0 || id == t->self)
        return ERR_INVAL;
    int rv = urls_check(t, urls, n);
    if (rv != 0)
        return rv;
    pthread_rwlock_wrlock(&t->lock);
    struct peer__peer *p = NULL;
    if (peer__find(t, id) != NULL)
        rv = ERR_EXIST;
    else if (t->peers_n == PEER_PEERS_MAX)
        rv = ERR_FULL;
    else
        rv = peer_new(t, id, urls, n, &p);
    if (rv == 0)
        t->peers[t->peers_n++] = p;
    pthread_rwlock_unlock(&t->lock);
    if (rv == 0)
        log_info("peer", "added peer %016llx at %s", (unsigned long long)id,
                 urls[0]);
    return rv;
}

int peer_update(struct peer_transport *t, raft_id id, const char *const *urls,
                size_t n)
{
    assert(t != NULL);
    int rv = urls_check(t, urls, n);
    if (rv != 0)
        return rv;
    struct peer__peer *p = peer__hold(t, id);
    if (p == NULL)
        return ERR_NOTFOUND;
    urls_set(p, urls, n);
    pthread_cond_signal(&p->cond);
    peer__unhold(t, p);
    return 0;
}

/* peer_stop stops p's threads and frees p; p is already unlinked. */
static void peer_stop(struct peer__peer *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    peer__snap_join(p);
    peer_free(p);
}

int peer_remove(struct peer_transport *t, raft_id id)
{
    assert(t != NULL);
    struct peer__peer *p = NULL;
    pthread_rwlock_wrlock(&t->lock);
    for (size_t i = 0; i < t->peers_n; i++) {
        if (t->peers[i]->id != id)
            continue;
        p = t->peers[i];
        t->peers[i] = t->peers[--t->peers_n];
        t->peers[t->peers_n] = NULL;
        break;
    }
    pthread_rwlock_unlock(&t->lock);
    if (p == NULL)
        return ERR_NOTFOUND;
    peer_stop(p);
    /* Now unknown: its open streams get what a new one would. */
    peer__in_refuse_from(t, id);
    log_info("peer", "removed peer %016llx", (unsigned long long)id);
    return 0;
}

void peer_transport_close(struct peer_transport *t)
{
    if (t == NULL)
        return;
    atomic_store(&t->closing, true);
    peer__calls_close(t);
    peer__asks_close(t);
    pthread_rwlock_wrlock(&t->lock);
    size_t n = t->peers_n;
    struct peer__peer *peers[PEER_PEERS_MAX];
    memcpy(peers, t->peers, sizeof(peers));
    t->peers_n = 0;
    pthread_rwlock_unlock(&t->lock);
    /* Stop all first, then join: the threads wind down in parallel. */
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&peers[i]->mu);
        peers[i]->stop = true;
        pthread_cond_broadcast(&peers[i]->cond);
        pthread_mutex_unlock(&peers[i]->mu);
    }
    for (size_t i = 0; i < n; i++)
        peer_stop(peers[i]);
    assert(atomic_load(&t->snapshots_in) == 0);
    /* The api_server was closed first: every stream is gone. */
    assert(t->ins == NULL);
    pthread_mutex_destroy(&t->calls_mu);
    pthread_mutex_destroy(&t->in_mu);
    pthread_rwlock_destroy(&t->lock);
    creds_close(t);
    mem_free(t->snap_dir);
    mem_free(t);
    grpc_shutdown_blocking();
}

/* etcd's buckets: prometheus.ExponentialBuckets(0.0001, 2, 14). */
const double peer_rtt_bounds[PEER_RTT_BUCKETS] = {
    0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064,
    0.0128, 0.0256, 0.0512, 0.1024, 0.2048, 0.4096, 0.8192};

void peer__rtt_note(struct peer_transport *t, raft_id from,
                    const struct raft_msg *msgs, size_t n)
{
    assert(t != NULL && msgs != NULL);
    bool resp = false;
    for (size_t i = 0; i < n && !resp; i++)
        resp = msgs[i].type == RAFT_MSG_HEARTBEAT_RESP;
    if (!resp)
        return;
    struct peer__peer *p = peer__hold(t, from);
    if (p == NULL)
        return;
    int64_t sent = p->hb_sent_ns; /* peer__hold locked p->mu */
    p->hb_sent_ns = 0;
    if (sent != 0)
        metrics_since(&p->rtt, sent);
    peer__unhold(t, p);
}

void peer__bytes_note(struct peer_transport *t, raft_id id, uint64_t sent,
                      uint64_t received)
{
    struct peer__peer *p = peer__hold(t, id);
    if (p == NULL)
        return;
    p->stats.sent_bytes += sent; /* peer__hold locked p->mu */
    p->stats.received_bytes += received;
    peer__unhold(t, p);
}

int peer_stats(struct peer_transport *t, raft_id id, struct peer_stats *out)
{
    assert(t != NULL && out != NULL);
    struct peer__peer *p = peer__hold(t, id);
    if (p == NULL)
        return ERR_NOTFOUND;
    *out = p->stats;
    out->queued_msgs = p->q.n;
    metrics_hist_read(&p->rtt, &out->rtt);
    peer__unhold(t, p);
    return 0;
}

void peer__test_corrupt(struct peer_transport *t, bool on)
{
    atomic_store(&t->test_corrupt, on);
}

grpc_channel *peer__channel_create(struct peer_transport *t, const char *url)
{
    char target[PEER_URL_LEN_MAX + 8];
    bool tls = false;
    int rv = peer__url_parse(url, target, sizeof(target), &tls);
    assert(rv == 0); /* URLs were checked by peer_add / peer_update. */
    assert(!tls || t->tls != NULL);
    if (rv != 0)
        return NULL;
    /* Reconnect back-off on the same scale as ours; the replies (acks,
     * snapshot statuses) are small.  The connect timeout is separate: a
     * TLS handshake on a loaded machine takes longer than the back-off. */
    const struct dial_channel_opts o = {
        .max_recv_bytes = 4 << 20,
        .backoff_min_ms = (int)t->lim.backoff_min_ms,
        .backoff_max_ms = (int)t->lim.backoff_max_ms,
        .connect_timeout_ms = (int)t->lim.connect_timeout_ms};
    if (!tls || t->tls_named == NULL)
        return dial_channel_create(target, tls ? t->tls : t->plain, &o);
    struct dial_tls named = *t->tls_named;
    named.alert_target = target;
    grpc_channel_credentials *creds = dial_creds_create(&named);
    if (creds == NULL)
        return NULL;
    grpc_channel *ch = dial_channel_create(target, creds, &o);
    grpc_channel_credentials_release(creds); /* the channel holds its own */
    return ch;
}
