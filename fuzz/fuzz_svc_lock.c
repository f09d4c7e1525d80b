/*
 * fuzz_svc_lock.c - goal: the Lock and Election services (svc/lock.c,
 * lock_wait.c, election.c, observe.c) take any request bytes without
 * crashing, hanging, leaking or leaving a waiter behind: whatever
 * LockRequest, CampaignRequest and LeaderRequest decode is handed to the
 * Lock, Campaign and Observe streams (which are then cancelled, as a
 * client that goes away), and whatever UnlockRequest, ProclaimRequest,
 * LeaderRequest and ResignRequest decode goes to the unary calls, each
 * answered exactly once.  Method: one real server on a temporary data dir,
 * started once; the input is a list of records: one byte op, one length
 * byte, that many bytes (a request of the type op % 7 names, if it
 * decodes).  A stream is given up to 20 ms to answer, then ended
 * (cancelled): it must release its stream within 5 s.  At most 16 records
 * per input.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"
#include "svc/svc.h"
#include "util/err.h"

static struct server *srv;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char dir[] = "/tmp/cetcd-fuzz-lock-XXXXXX";
    if (mkdtemp(dir) == NULL)
        abort();
    struct server_config c = {
        .name = "default",
        .data_dir = dir,
        .peer_urls = "http://localhost:2380",
        .client_urls = "http://localhost:2379",
        .cluster_token = "etcd-cluster",
        .initial_cluster = "default=http://localhost:2380",
        .heartbeat_ms = 100,
        .election_ms = 1000,
        .snapshot_count = 100000,
        .max_request_bytes = 1572864,
        .max_txn_ops = 128,
    };
    if (server_start(&c, &srv) != 0)
        abort();
    return 0;
}

struct box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls; /* completions seen: exactly one is allowed */
};

static void on_done(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct box *b = ctx;
    if ((err == 0) != (reply != NULL))
        abort();
    pthread_mutex_lock(&b->mu);
    b->calls++;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

typedef void (*unary_fn)(struct server *, const void *, struct svc_done);

/* The unary services with one signature (no calls through a cast). */
static void unlock(struct server *s, const void *m, struct svc_done d)
{
    svc_lock_unlock(s, m, d);
}
static void proclaim(struct server *s, const void *m, struct svc_done d)
{
    svc_election_proclaim(s, m, d);
}
static void leader(struct server *s, const void *m, struct svc_done d)
{
    svc_election_leader(s, m, d);
}
static void resign(struct server *s, const void *m, struct svc_done d)
{
    svc_election_resign(s, m, d);
}

static void unary(const ProtobufCMessageDescriptor *d, unary_fn fn,
                  const uint8_t *data, size_t n)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n, data);
    if (m == NULL)
        return;
    struct box b = {.calls = 0};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    fn(srv, m, (struct svc_done){on_done, &b});
    protobuf_c_message_free_unpacked(m, NULL);
    pthread_mutex_lock(&b.mu);
    while (b.calls == 0)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    struct timespec ts = {0, 2000000}; /* a second completion would come */
    nanosleep(&ts, NULL);
    if (b.calls != 1)
        abort();
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
}

static void stream(const struct svc_stream_handler *h,
                   const ProtobufCMessageDescriptor *out, const uint8_t *data,
                   size_t n)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(h->request, NULL, n, data);
    if (m == NULL)
        return;
    struct svc_mem_stream *ms;
    if (svc_mem_stream_create(4, &ms) != 0)
        abort();
    void *st;
    if (h->open(srv, svc_mem_stream_get(ms), &st) != 0)
        abort();
    h->recv(st, m);
    protobuf_c_message_free_unpacked(m, NULL);
    h->recv(st, NULL);
    ProtobufCMessage *r = NULL;
    int rc = svc_mem_stream_take(ms, out, 20, &r);
    if (rc != 0 && rc != ERR_TIMEOUT)
        abort(); /* not the service's response type */
    if (r != NULL)
        protobuf_c_message_free_unpacked(r, NULL);
    h->end(st, true);
    for (int i = 0; i < 500 && !svc_mem_stream_released(ms); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (!svc_mem_stream_released(ms))
        abort(); /* the waiter stayed */
    svc_mem_stream_destroy(ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t i = 0;
    for (int rec = 0; rec < 16 && i + 2 <= size; rec++) {
        uint8_t op = data[i++];
        size_t n = data[i++];
        if (n > size - i)
            n = size - i;
        const uint8_t *p = data + i;
        i += n;
        switch (op % 7) {
        case 0:
            stream(&svc_lock_handler, &v3lockpb__lock_response__descriptor, p,
                   n);
            break;
        case 1:
            stream(&svc_campaign_handler,
                   &v3electionpb__campaign_response__descriptor, p, n);
            break;
        case 2:
            stream(&svc_observe_handler,
                   &v3electionpb__leader_response__descriptor, p, n);
            break;
        case 3:
            unary(&v3lockpb__unlock_request__descriptor,
                  unlock, p, n);
            break;
        case 4:
            unary(&v3electionpb__proclaim_request__descriptor,
                  proclaim, p, n);
            break;
        case 5:
            unary(&v3electionpb__leader_request__descriptor,
                  leader, p, n);
            break;
        default:
            unary(&v3electionpb__resign_request__descriptor,
                  resign, p, n);
            break;
        }
    }
    return 0;
}
