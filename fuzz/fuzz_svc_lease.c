/*
 * fuzz_svc_lease.c - goal: the Lease service (svc/lease.c,
 * svc/lease_keepalive.c) and the lease bucket decoder
 * (server__lease_decode) take any bytes without crashing, hanging or
 * leaking: whatever Lease requests decode (grants with any id and TTL,
 * revokes, time-to-live with keys, lists, puts with a lease) are served
 * by a real member, keep-alive requests go to one in-process stream
 * (svc_mem_stream, 4 deep, so the stream also meets a full queue), and
 * every answer is the message the service promises.  Method: one server
 * on a temporary data dir, started once.  The input is a list of records:
 * one byte op, a length byte and that many bytes; op % 6 picks 0 grant,
 * 1 revoke, 2 time-to-live, 3 keep-alive (recv on the stream), 4 a put of
 * key "l" with the bytes as a PutRequest's lease, 5 the bucket decoder on
 * the bytes split at their middle (then a list).  The stream is drained
 * and ended at the end.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/lease.h"
#include "server/server.h"
#include "svc/svc.h"
#include "util/err.h"

static struct server *srv;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char dir[] = "/tmp/cetcd-fuzz-lease-XXXXXX";
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
    for (int i = 0; i < 500 && !server_published(srv); i++) {
        struct timespec t = {0, 10 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    return 0;
}

/* One answer awaited, and the reply type it must have. */
struct box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    const ProtobufCMessageDescriptor *want;
};

static void on_done(void *ctx, int err, const ProtobufCMessage *reply)
{
    struct box *b = ctx;
    if ((err == 0) != (reply != NULL) ||
        (reply != NULL && reply->descriptor != b->want))
        abort(); /* svc.h: a reply of the promised type, or an error */
    pthread_mutex_lock(&b->mu);
    b->done = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

typedef void (*call_fn)(struct server *s, const ProtobufCMessage *req,
                        struct svc_done done);

static void call(call_fn fn, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *want)
{
    struct box b = {.done = false, .want = want};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    fn(srv, req, (struct svc_done){on_done, &b});
    pthread_mutex_lock(&b.mu);
    while (!b.done)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
}

/* The services, with the request's type erased for call(). */
#define ADAPT(name, svc_fn, type)                                            \
    static void name(struct server *s, const ProtobufCMessage *r,           \
                     struct svc_done d)                                     \
    {                                                                        \
        svc_fn(s, (const type *)r, d);                                       \
    }
ADAPT(do_grant, svc_lease_grant, Etcdserverpb__LeaseGrantRequest)
ADAPT(do_revoke, svc_lease_revoke, Etcdserverpb__LeaseRevokeRequest)
ADAPT(do_ttl, svc_lease_time_to_live, Etcdserverpb__LeaseTimeToLiveRequest)
ADAPT(do_leases, svc_lease_leases, Etcdserverpb__LeaseLeasesRequest)
ADAPT(do_put, svc_kv_put, Etcdserverpb__PutRequest)

static void unary(const ProtobufCMessageDescriptor *in, call_fn fn,
                  const ProtobufCMessageDescriptor *out, const uint8_t *p,
                  size_t n)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(in, NULL, n, p);
    if (m == NULL)
        return;
    call(fn, m, out);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void put_with_lease(const uint8_t *p, size_t n)
{
    int64_t lease = 0;
    memcpy(&lease, p, n < sizeof lease ? n : sizeof lease);
    Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
    r.key = (ProtobufCBinaryData){1, (uint8_t *)"l"};
    r.lease = lease;
    call(do_put, &r.base, &etcdserverpb__put_response__descriptor);
}

static void decode(const uint8_t *p, size_t n)
{
    struct server_lease l;
    if (server__lease_decode(p, n / 2, p + n / 2, n - n / 2, &l) == 0 &&
        (l.id == 0 || l.ttl < 1))
        abort(); /* decode promised a storable lease */
    Etcdserverpb__LeaseLeasesRequest r = ETCDSERVERPB__LEASE_LEASES_REQUEST__INIT;
    call(do_leases, &r.base, &etcdserverpb__lease_leases_response__descriptor);
}

static bool take(struct svc_mem_stream *ms, int ms_wait)
{
    ProtobufCMessage *m = NULL;
    int rc = svc_mem_stream_take(
        ms, &etcdserverpb__lease_keep_alive_response__descriptor, ms_wait, &m);
    if (rc == ERR_TIMEOUT)
        return false;
    if (rc != 0)
        abort(); /* not a LeaseKeepAliveResponse */
    protobuf_c_message_free_unpacked(m, NULL);
    return true;
}

static void one(const struct svc_stream_handler *h, void *st, uint8_t op,
                const uint8_t *p, size_t n)
{
    switch (op % 6) {
    case 0:
        unary(&etcdserverpb__lease_grant_request__descriptor, do_grant,
              &etcdserverpb__lease_grant_response__descriptor, p, n);
        break;
    case 1:
        unary(&etcdserverpb__lease_revoke_request__descriptor, do_revoke,
              &etcdserverpb__lease_revoke_response__descriptor, p, n);
        break;
    case 2:
        unary(&etcdserverpb__lease_time_to_live_request__descriptor, do_ttl,
              &etcdserverpb__lease_time_to_live_response__descriptor, p, n);
        break;
    case 3: {
        ProtobufCMessage *m = protobuf_c_message_unpack(h->request, NULL, n, p);
        if (m != NULL) {
            h->recv(st, m);
            protobuf_c_message_free_unpacked(m, NULL);
        }
        break;
    }
    case 4:
        put_with_lease(p, n);
        break;
    default:
        decode(p, n);
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct svc_stream_handler *h = &svc_lease_keepalive_handler;
    struct svc_mem_stream *ms;
    if (svc_mem_stream_create(4, &ms) != 0)
        abort();
    void *st;
    if (h->open(srv, svc_mem_stream_get(ms), &st) != 0)
        abort();
    size_t i = 0;
    int calls = 0;
    while (i + 1 < size && calls++ < 32) {
        uint8_t op = data[i++];
        size_t n = data[i++];
        if (n > size - i)
            n = size - i;
        one(h, st, op, data + i, n);
        i += n;
        (void)take(ms, 0);
    }
    while (take(ms, 20))
        ;
    h->end(st, true);
    while (!svc_mem_stream_released(ms)) { /* answers still on their way */
        struct timespec t = {0, 1000 * 1000};
        nanosleep(&t, NULL);
    }
    svc_mem_stream_destroy(ms);
    return 0;
}
