/*
 * snap_send.c - sending one snapshot: a thread per transfer, one transfer
 * per peer at a time.
 *
 * The snapshot gets its own channel and call (/cetcdpb.Peer/Snapshot), so
 * a 1 GiB database does not hold up the heartbeats on the peer's stream.
 * The file is read with pread in chunk_bytes pieces, each sent as one
 * SnapshotChunk once the previous one was taken by gRPC (flow control);
 * the last chunk carries the SHA-256 of all data and half-closes the
 * call.  The receiver answers with its status after verifying and
 * fsyncing; only an OK status with SnapshotDone.ok counts as success.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/time.h>
#include <openssl/evp.h>

#include "dial/dial.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

/* One transfer.  Owned by its snapshot thread. */
struct snap_out {
    struct peer__peer *p;       /* the destination */
    int fd;                     /* the file; closed by the thread */
    uint64_t size;              /* bytes to send */
    uint8_t *msg;               /* encoded MsgSnap */
    size_t msg_len;             /* its length */
    char url[PEER_URL_LEN_MAX + 1]; /* the peer's first URL */
    uint8_t *buf;               /* one chunk of file data */
    grpc_completion_queue *cq;  /* a "next" queue of this thread */
    grpc_call *call;            /* the Snapshot call */
    bool cancelled;             /* grpc_call_cancel was called */
    bool send_busy, send_ok;    /* a SEND_MESSAGE in flight; its result */
    bool status_busy;           /* RECV_STATUS pending */
    grpc_byte_buffer *send_bb;  /* the chunk in flight */
    struct dial_reply done;     /* SnapshotDone, status and metadata */
    char send_tag, status_tag;  /* completion tags (addresses) */
};

static bool stopping(struct peer__peer *p)
{
    pthread_mutex_lock(&p->mu);
    bool stop = p->stop;
    pthread_mutex_unlock(&p->mu);
    return stop;
}

/* wait_for waits until *busy is false, cancelling the call when the peer
 * stops or nothing completes within timeout_ms. */
static void wait_for(struct snap_out *so, const bool *busy, int64_t timeout_ms)
{
    int64_t start = peer__now_ms();
    while (*busy) {
        gpr_timespec dl = gpr_time_add(
            gpr_now(GPR_CLOCK_MONOTONIC),
            gpr_time_from_millis(PEER__POLL_MS, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(so->cq, dl, NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.tag == &so->send_tag) {
            so->send_busy = false;
            so->send_ok = ev.success != 0;
        } else if (ev.type == GRPC_OP_COMPLETE) {
            assert(ev.tag == &so->status_tag);
            so->status_busy = false;
        } else if (!so->cancelled &&
                   (stopping(so->p) ||
                    peer__now_ms() - start > timeout_ms)) {
            so->cancelled = true;
            grpc_call_cancel(so->call, NULL);
        }
    }
}

static void start(struct snap_out *so, grpc_op *ops, size_t n, void *tag)
{
    grpc_call_error e = grpc_call_start_batch(so->call, ops, n, tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

/* call_open creates the call and starts the status receive. */
static int call_open(struct snap_out *so, grpc_channel *ch)
{
    grpc_slice method = grpc_slice_from_static_string(PEER__SNAPSHOT_PATH);
    so->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS,
                                        so->cq, method, NULL,
                                        gpr_inf_future(GPR_CLOCK_REALTIME),
                                        NULL);
    if (so->call == NULL)
        return ERR_IO;
    grpc_op ops[DIAL_REPLY_OPS];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    so->send_busy = true;
    start(so, ops, 1, &so->send_tag);
    wait_for(so, &so->send_busy, so->p->t->lim.snapshot_timeout_ms);
    dial_reply_ops(ops, &so->done);
    so->status_busy = true;
    start(so, ops, DIAL_REPLY_OPS, &so->status_tag);
    return so->send_ok ? 0 : ERR_IO;
}

/* chunk_send sends one chunk of n bytes (in so->buf) and waits until gRPC
 * took it. */
static int chunk_send(struct snap_out *so, uint64_t off, size_t n,
                      const uint8_t *sha)
{
    struct peer_transport *t = so->p->t;
    Cetcdpb__SnapshotChunk c = CETCDPB__SNAPSHOT_CHUNK__INIT;
    c.cluster_id = t->cluster_id;
    c.from = t->self;
    c.to = so->p->id;
    if (off == 0) {
        c.msg.data = so->msg;
        c.msg.len = so->msg_len;
        c.size = so->size;
    }
    c.data.data = so->buf;
    c.data.len = n;
    c.last = sha != NULL;
    if (sha != NULL) {
        c.sha256.data = (uint8_t *)sha;
        c.sha256.len = PEER__SHA256_LEN;
    }
    size_t len = cetcdpb__snapshot_chunk__get_packed_size(&c);
    grpc_slice slice = grpc_slice_malloc(len);
    cetcdpb__snapshot_chunk__pack(&c, GRPC_SLICE_START_PTR(slice));
    so->send_bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_MESSAGE;
    ops[0].data.send_message.send_message = so->send_bb;
    ops[1].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    so->send_busy = true;
    start(so, ops, sha != NULL ? 2 : 1, &so->send_tag);
    wait_for(so, &so->send_busy, t->lim.snapshot_timeout_ms);
    grpc_byte_buffer_destroy(so->send_bb);
    so->send_bb = NULL;
    if (so->send_ok) { /* p lives until this transfer ends */
        pthread_mutex_lock(&so->p->mu);
        so->p->stats.sent_bytes += len;
        pthread_mutex_unlock(&so->p->mu);
    }
    return so->send_ok ? 0 : ERR_IO;
}

/* stream_file sends the whole file, hashing as it goes. */
static int stream_file(struct snap_out *so)
{
    struct peer_transport *t = so->p->t;
    uint8_t sha[EVP_MAX_MD_SIZE];
    unsigned sha_len = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return ERR_NOMEM;
    }
    uint64_t off = 0;
    int rv = 0;
    do {
        uint64_t left = so->size - off;
        size_t n = left < t->lim.chunk_bytes ? (size_t)left
                                              : t->lim.chunk_bytes;
        rv = fs_pread_all(so->fd, so->buf, n, off);
        if (rv != 0)
            break;
        EVP_DigestUpdate(md, so->buf, n);
        bool last = off + n == so->size;
        if (last)
            EVP_DigestFinal_ex(md, sha, &sha_len);
        if (off == 0 && n > 0 && atomic_load(&t->test_corrupt))
            so->buf[0] ^= 1; /* After hashing: the receiver must notice. */
        rv = chunk_send(so, off, n, last ? sha : NULL);
        off += n;
    } while (rv == 0 && off < so->size);
    EVP_MD_CTX_free(md);
    assert(rv != 0 || off == so->size);
    return rv;
}

/* outcome waits for the receiver's answer; true only for an OK status
 * with SnapshotDone.ok. */
static bool outcome(struct snap_out *so, int rv)
{
    struct peer_transport *t = so->p->t;
    if (rv != 0 && !so->cancelled) {
        so->cancelled = true;
        grpc_call_cancel(so->call, NULL);
    }
    wait_for(so, &so->status_busy, t->lim.snapshot_timeout_ms);
    const struct dial_reply *done = &so->done;
    bool ok = rv == 0 && done->status == GRPC_STATUS_OK && done->msg != NULL;
    if (ok) {
        grpc_byte_buffer_reader r;
        grpc_slice s = grpc_empty_slice();
        if (grpc_byte_buffer_reader_init(&r, done->msg)) {
            s = grpc_byte_buffer_reader_readall(&r);
            grpc_byte_buffer_reader_destroy(&r);
        }
        Cetcdpb__SnapshotDone *d = cetcdpb__snapshot_done__unpack(
            NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
        ok = d != NULL && d->ok;
        if (d != NULL)
            cetcdpb__snapshot_done__free_unpacked(d, NULL);
        grpc_slice_unref(s);
    }
    if (!ok)
        log_warn("peer", "snapshot to %016llx failed (%s; status %d: %.*s)",
                 (unsigned long long)so->p->id, rv != 0 ? err_str(rv) : "ok",
                 (int)done->status, (int)GRPC_SLICE_LENGTH(done->details),
                 (const char *)GRPC_SLICE_START_PTR(done->details));
    if (!ok && t->cb.on_removed != NULL &&
        peer__status_removed(
            done->status, (const char *)GRPC_SLICE_START_PTR(done->details),
            GRPC_SLICE_LENGTH(done->details)))
        t->cb.on_removed(t->cb.arg, so->p->id);
    return ok;
}

/* transfer runs the call on its own channel and queue; true on success. */
static bool transfer(struct snap_out *so)
{
    grpc_channel *ch = peer__channel_create(so->p->t, so->url);
    if (ch == NULL)
        return false;
    so->cq = grpc_completion_queue_create_for_next(NULL);
    dial_reply_init(&so->done);
    int rv = call_open(so, ch);
    bool ok = false;
    if (so->call != NULL) {
        if (rv == 0)
            rv = stream_file(so);
        ok = outcome(so, rv);
        assert(!so->send_busy && !so->status_busy);
        grpc_call_unref(so->call);
    }
    dial_reply_release(&so->done);
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(so->cq);
    gpr_timespec forever = gpr_inf_future(GPR_CLOCK_REALTIME);
    while (grpc_completion_queue_next(so->cq, forever, NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(so->cq);
    return ok;
}

static void *snap_main(void *arg)
{
    struct snap_out *so = arg;
    struct peer__peer *p = so->p;
    int64_t t0 = peer__now_ms();
    bool ok = transfer(so);
    if (ok)
        log_info("peer", "sent snapshot of %llu bytes to %016llx in %lld ms",
                 (unsigned long long)so->size, (unsigned long long)p->id,
                 (long long)(peer__now_ms() - t0));
    close(so->fd);
    mem_free(so->buf);
    mem_free(so->msg);
    mem_free(so);
    if (p->t->cb.on_snapshot_status != NULL)
        p->t->cb.on_snapshot_status(p->t->cb.arg, p->id, ok);
    pthread_mutex_lock(&p->mu);
    p->snap_busy = false;
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void peer__snap_join(struct peer__peer *p)
{
    if (!p->snap_joinable)
        return;
    pthread_join(p->snap_thread, NULL);
    p->snap_joinable = false;
}

int peer__snap_start(struct peer__peer *p, uint8_t *msg, size_t msg_len,
                     int fd, uint64_t size)
{
    assert(p != NULL && msg != NULL && fd >= 0);
    struct snap_out *so = mem_calloc(1, sizeof(*so));
    uint8_t *buf = mem_malloc(p->t->lim.chunk_bytes);
    if (so == NULL || buf == NULL) {
        mem_free(so);
        mem_free(buf);
        return ERR_NOMEM;
    }
    pthread_mutex_lock(&p->mu);
    bool busy = p->snap_busy || p->stop;
    if (!busy)
        p->snap_busy = true;
    pthread_mutex_unlock(&p->mu);
    if (busy) {
        mem_free(so);
        mem_free(buf);
        return ERR_BUSY;
    }
    peer__snap_join(p); /* The previous transfer has finished. */
    *so = (struct snap_out){.p = p, .fd = fd, .size = size, .msg = msg,
                            .msg_len = msg_len, .buf = buf};
    pthread_mutex_lock(&p->mu);
    memcpy(so->url, p->urls[0], sizeof(so->url));
    pthread_mutex_unlock(&p->mu);
    if (pthread_create(&p->snap_thread, NULL, snap_main, so) != 0) {
        pthread_mutex_lock(&p->mu);
        p->snap_busy = false;
        pthread_mutex_unlock(&p->mu);
        mem_free(so);
        mem_free(buf);
        return ERR_IO;
    }
    p->snap_joinable = true;
    return 0;
}
