/*
 * snapshot.c - Maintenance.Snapshot as etcd 3.4 streams it
 * (v3rpc/maintenance.go): the store as a bbolt database (server.h
 * server_snapshot_etcd), in SnapshotResponse chunks of 32 KiB (the last
 * one shorter) whose remaining_bytes counts down the database bytes not
 * yet sent, then one more response {remaining_bytes 0, blob = the
 * SHA-256 of the database}, which `etcdctl snapshot save` appends to the
 * file and `etcdctl snapshot restore` checks.
 *
 * The export runs on its own thread ("cetcd-snapshot", one per stream, at
 * most SVC_SNAPSHOTS_MAX at once: more are refused with "too many
 * requests"), never on an event loop: it holds one store read txn for the
 * whole transfer while the member goes on serving.  Flow control: the
 * transport's send queue holds SVC_SNAPSHOT_QUEUE chunks at most; when it
 * is full the thread naps (SVC_SNAPSHOT_NAP_MS) and tries again, so a
 * slow client holds at most that much of the member's memory, and a
 * client that goes away ends the thread at its next send.
 *
 * Lifetime: the state has two holders, the transport (until end) and the
 * thread (once the request came); the last one frees.  The thread
 * releases the stream when it is done; a stream whose request never came
 * is released at end.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "server/server.h"
#include "svc/svc.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

struct snap_stream {
    struct server *s;          /* the member */
    struct svc_stream *st;     /* the transport's end (until release) */
    atomic_int refs;           /* transport until end, thread while it runs */
    atomic_bool ended;         /* end ran */
    bool started;              /* the request came (transport thread) */
    EVP_MD_CTX *sha;           /* SHA-256 of the bytes sent */
    uint64_t total;            /* database bytes (begin) */
    uint64_t sent;             /* of them sent */
    size_t fill;               /* bytes in chunk */
    uint8_t chunk[SVC_SNAPSHOT_CHUNK]; /* the response being filled */
};

static atomic_int active; /* streams with a thread, process-wide */

static void unref(struct snap_stream *x)
{
    int left = atomic_fetch_sub(&x->refs, 1) - 1;
    CHECK(left >= 0);
    if (left > 0)
        return;
    EVP_MD_CTX_free(x->sha);
    mem_free(x);
}

/* Sends m, napping while the transport's queue is full. */
static int send_wait(struct snap_stream *x, const ProtobufCMessage *m)
{
    for (;;) {
        int rc = x->st->send(x->st->ctx, m);
        if (rc != ERR_FULL)
            return rc;
        if (atomic_load(&x->ended))
            return ERR_CLOSED;
        struct timespec nap = {0, SVC_SNAPSHOT_NAP_MS * 1000000L};
        nanosleep(&nap, NULL);
    }
}

static int send_blob(struct snap_stream *x, const uint8_t *p, size_t len,
                     uint64_t remaining)
{
    Etcdserverpb__SnapshotResponse r = ETCDSERVERPB__SNAPSHOT_RESPONSE__INIT;
    r.remaining_bytes = remaining;
    r.blob.data = (uint8_t *)p;
    r.blob.len = len;
    return send_wait(x, &r.base);
}

static int flush(struct snap_stream *x)
{
    if (x->fill == 0)
        return 0;
    if (EVP_DigestUpdate(x->sha, x->chunk, x->fill) != 1)
        return ERR_NOMEM;
    x->sent += x->fill;
    CHECK(x->sent <= x->total);
    int rc = send_blob(x, x->chunk, x->fill, x->total - x->sent);
    x->fill = 0;
    return rc;
}

static int on_begin(void *ctx, uint64_t total)
{
    struct snap_stream *x = ctx;
    x->total = total;
    log_info("etcdserver", "sending database snapshot to client [%llu bytes]",
             (unsigned long long)total);
    return 0;
}

static int on_write(void *ctx, const void *buf, size_t len)
{
    struct snap_stream *x = ctx;
    const uint8_t *p = buf;
    while (len > 0) {
        size_t n = sizeof x->chunk - x->fill;
        if (n > len)
            n = len;
        memcpy(x->chunk + x->fill, p, n);
        x->fill += n;
        p += n;
        len -= n;
        if (x->fill == sizeof x->chunk) {
            int rc = flush(x);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static bool on_cancelled(void *ctx)
{
    struct snap_stream *x = ctx;
    return atomic_load(&x->ended);
}

/* The export, then the digest. */
static int run(struct snap_stream *x)
{
    struct server_snapshot_sink sink = {on_begin, on_write, on_cancelled, x};
    if (EVP_DigestInit_ex(x->sha, EVP_sha256(), NULL) != 1)
        return ERR_NOMEM;
    int rc = server_snapshot_etcd(x->s, &sink);
    if (rc == 0)
        rc = flush(x);
    if (rc != 0)
        return rc;
    CHECK(x->sent == x->total);
    uint8_t sha[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (EVP_DigestFinal_ex(x->sha, sha, &len) != 1 || len != 32)
        return ERR_NOMEM;
    rc = send_blob(x, sha, len, 0);
    if (rc == 0)
        log_info("etcdserver",
                 "successfully sent database snapshot to client [%llu bytes]",
                 (unsigned long long)x->total);
    return rc;
}

static void *snap_main(void *arg)
{
    struct snap_stream *x = arg;
    thread_name_set(pthread_self(), "cetcd-snapshot");
    int rc = run(x);
    if (rc != 0 && rc != ERR_CLOSED)
        log_warn("etcdserver", "snapshot stream ended: %s", err_str(rc));
    x->st->close(x->st->ctx, rc == ERR_CLOSED ? 0 : rc);
    atomic_fetch_sub(&active, 1); /* before release: a slot is free once
                                     the stream is seen released */
    x->st->release(x->st->ctx);
    unref(x);
    return NULL;
}

static int s_open(struct server *s, struct svc_stream *st, void **state_out)
{
    CHECK(s != NULL && st != NULL && state_out != NULL);
    /* etcd's authMaintenanceServer: a snapshot needs the root role. */
    struct svc_done who = {NULL, st->ctx, st->metadata};
    int arc = svc_auth_check_maint(s, who);
    if (arc != 0)
        return arc;
    struct snap_stream *x = mem_malloc(sizeof *x);
    if (x == NULL)
        return ERR_NOMEM;
    memset(x, 0, offsetof(struct snap_stream, chunk));
    x->sha = EVP_MD_CTX_new();
    if (x->sha == NULL) {
        mem_free(x);
        return ERR_NOMEM;
    }
    x->s = s;
    x->st = st;
    atomic_init(&x->refs, 1);
    atomic_init(&x->ended, false);
    *state_out = x;
    return 0;
}

/* The one SnapshotRequest (it has no fields) starts the thread. */
static void s_recv(void *state, const ProtobufCMessage *m)
{
    struct snap_stream *x = state;
    if (m == NULL || x->started)
        return; /* half-close, or a second request: nothing to do */
    x->started = true;
    if (atomic_fetch_add(&active, 1) >= SVC_SNAPSHOTS_MAX) {
        atomic_fetch_sub(&active, 1);
        x->st->close(x->st->ctx, ERR_TOO_MANY_REQUESTS);
        x->st->release(x->st->ctx);
        return;
    }
    atomic_fetch_add(&x->refs, 1);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, snap_main, x);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_fetch_sub(&active, 1);
        atomic_fetch_sub(&x->refs, 1);
        x->st->close(x->st->ctx, ERR_NOMEM);
        x->st->release(x->st->ctx);
        return;
    }
}

static void s_end(void *state, bool cancelled)
{
    struct snap_stream *x = state;
    (void)cancelled;
    atomic_store(&x->ended, true);
    if (!x->started)
        x->st->release(x->st->ctx);
    unref(x);
}

const struct svc_stream_handler svc_snapshot_handler = {
    .request = &etcdserverpb__snapshot_request__descriptor,
    .open = s_open,
    .recv = s_recv,
    .end = s_end,
};
