/*
 * fuzz_svc_watch.c - goal: the Watch service (svc/watch.c) takes any
 * sequence of client messages on a stream without crashing, leaking or
 * breaking the hub: whatever WatchRequests decode (creates with any key,
 * range, start revision, id, filters; cancels; progress requests) are
 * handed to its recv, interleaved with puts, and every response it sends
 * is a WatchResponse.  Method: one real server on a temporary data dir,
 * started once; per input one in-process stream (svc_mem_stream, 4 deep,
 * so the hub also meets a full sink).  The input is a list of records:
 * one byte op, then for op & 3 == 0 a length byte and that many bytes (a
 * WatchRequest, if it decodes); op & 3 == 1 a put of key "k<op>"; == 2 a
 * take of one response (0 ms); == 3 a half-close.  The stream is drained
 * and ended at the end.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "svc/svc.h"
#include "util/err.h"

static struct server *srv;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char dir[] = "/tmp/cetcd-fuzz-watch-XXXXXX";
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
    bool done;
};

static void on_put(void *ctx, int err, const ProtobufCMessage *reply)
{
    (void)err;
    (void)reply;
    struct box *b = ctx;
    pthread_mutex_lock(&b->mu);
    b->done = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void put(uint8_t op)
{
    char key[8];
    snprintf(key, sizeof key, "k%u", (unsigned)(op >> 2) % 8);
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){strlen(key), (uint8_t *)key};
    p.value = (ProtobufCBinaryData){1, (uint8_t *)"v"};
    struct box b = {.done = false};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    svc_kv_put(srv, &p, (struct svc_done){on_put, &b});
    pthread_mutex_lock(&b.mu);
    while (!b.done)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
}

/* take one response if there is one within ms; false if none. */
static bool take(struct svc_mem_stream *ms, int ms_wait)
{
    ProtobufCMessage *m = NULL;
    int rc = svc_mem_stream_take(ms, &etcdserverpb__watch_response__descriptor,
                                 ms_wait, &m);
    if (rc == ERR_TIMEOUT)
        return false;
    if (rc != 0)
        abort(); /* not a WatchResponse */
    protobuf_c_message_free_unpacked(m, NULL);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct svc_stream_handler *h = &svc_watch_handler;
    struct svc_mem_stream *ms;
    if (svc_mem_stream_create(4, &ms) != 0)
        abort();
    void *st;
    if (h->open(srv, svc_mem_stream_get(ms), &st) != 0)
        abort();
    size_t i = 0;
    int puts = 0;
    while (i < size) {
        uint8_t op = data[i++];
        switch (op & 3) {
        case 0: {
            if (i >= size)
                break;
            size_t n = data[i++];
            if (n > size - i)
                n = size - i;
            ProtobufCMessage *m = protobuf_c_message_unpack(
                h->request, NULL, n, data + i);
            i += n;
            if (m != NULL) {
                h->recv(st, m);
                protobuf_c_message_free_unpacked(m, NULL);
            }
            break;
        }
        case 1:
            if (puts++ < 16)
                put(op);
            break;
        case 2:
            (void)take(ms, 0);
            break;
        default:
            h->recv(st, NULL);
            break;
        }
    }
    while (take(ms, 20))
        ;
    h->end(st, true);
    if (!svc_mem_stream_released(ms))
        abort();
    svc_mem_stream_destroy(ms);
    return 0;
}
