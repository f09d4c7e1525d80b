/*
 * snap_recv.c - the receiving side of /cetcdpb.Peer/Snapshot.
 *
 * Runs on the api_server's event loops, one chunk per on_message (the next
 * chunk is read only after the previous one is on disk: that is the flow
 * control).  The data goes into a mkstemp file in snap_dir while a
 * SHA-256 runs over it; after the last chunk the size and the checksum
 * are compared with what the sender announced, the file is fsynced and
 * renamed to "<index %016x>.snap.db" (etcd's name for a received
 * database), the directory is fsynced, and on_snapshot takes it.  On any
 * error, or when the call ends early, the temp file is removed.
 *
 * Known cost: the writes and the final fsync run on the event loop, so a
 * peer server should run at least two event loops to keep raft messages
 * flowing while a large snapshot lands.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "rpc/rpc.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

/* One incoming snapshot.  Owned by its stream's event loop; freed in
 * on_close. */
struct snap_in {
    bool started;          /* the first chunk was accepted */
    bool counted;          /* holds one of t->snapshots_in */
    bool ended;            /* finished (either way); ignore the rest */
    struct peer__hdr hdr;  /* identity of the first chunk */
    uint64_t size;         /* announced data bytes */
    uint64_t received;     /* data bytes written */
    uint8_t *msg_buf;      /* copy of the encoded MsgSnap */
    struct raft_msg msg;   /* decoded from msg_buf */
    bool has_msg;          /* msg must be released */
    int fd;                /* temp file, or -1 */
    char tmp[4096 + 32];   /* its path, "" when none */
    EVP_MD_CTX *md;        /* running SHA-256 */
};

static void in_open(struct rpc_stream *stream, void *ctx)
{
    struct snap_in *si = peer__in_attach(stream, sizeof(*si));
    if (si != NULL)
        si->fd = -1;
}

/* discard closes and removes the temp file, if any. */
static void discard(struct snap_in *si)
{
    if (si->fd >= 0)
        close(si->fd);
    si->fd = -1;
    if (si->tmp[0] != '\0')
        unlink(si->tmp);
    si->tmp[0] = '\0';
}

static void fail(struct rpc_stream *stream, struct snap_in *si,
                 grpc_status_code code, const char *why)
{
    assert(code != GRPC_STATUS_OK && why != NULL);
    log_warn("peer", "refused snapshot from %016llx: %s",
             (unsigned long long)si->hdr.from, why);
    discard(si);
    si->ended = true;
    rpc_stream_finish(stream, code, why);
}

/* first_check validates the first chunk; OK or a status with *why. */
static grpc_status_code first_check(struct peer_transport *t,
                                    const Cetcdpb__SnapshotChunk *c,
                                    bool has_msg, const struct raft_msg *m,
                                    const char **why)
{
    struct peer__hdr h = {c->cluster_id, c->from, c->to};
    enum peer__sender sender =
        h.from != 0 ? peer__sender_of(t, h.from) : PEER__SENDER_UNKNOWN;
    grpc_status_code code =
        peer__hdr_check(&h, t->cluster_id, t->self, sender, why);
    if (code != GRPC_STATUS_OK)
        return code;
    if (!has_msg || m->from != h.from || m->to != h.to ||
        m->snapshot == NULL) {
        *why = "first snapshot chunk without a proper MsgSnap";
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    if (t->snap_dir == NULL) {
        *why = "this member takes no snapshots";
        return GRPC_STATUS_UNAVAILABLE;
    }
    if (c->size > t->lim.snapshot_bytes_max) {
        *why = "snapshot larger than this member accepts";
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    return GRPC_STATUS_OK;
}

/* begin sets si up from the accepted first chunk: the message copy, the
 * slot among snapshots_in, the temp file and the hash. */
static grpc_status_code begin(struct peer_transport *t, struct snap_in *si,
                              const Cetcdpb__SnapshotChunk *c,
                              const char **why)
{
    si->hdr = (struct peer__hdr){c->cluster_id, c->from, c->to};
    si->size = c->size;
    si->msg_buf = mem_dup(c->msg.data, c->msg.len);
    si->md = EVP_MD_CTX_new();
    if (si->msg_buf == NULL || si->md == NULL ||
        EVP_DigestInit_ex(si->md, EVP_sha256(), NULL) != 1 ||
        raft_msg_decode(si->msg_buf, c->msg.len, &si->msg) != 0) {
        *why = "out of memory";
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    si->has_msg = true;
    if (atomic_fetch_add(&t->snapshots_in, 1) >= t->lim.snapshots_in_max) {
        atomic_fetch_sub(&t->snapshots_in, 1);
        *why = "too many snapshots being received";
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    si->counted = true;
    snprintf(si->tmp, sizeof(si->tmp), "%s/.peer-snap-%016llx-XXXXXX",
             t->snap_dir, (unsigned long long)si->hdr.from);
    si->fd = mkstemp(si->tmp);
    if (si->fd < 0) {
        si->tmp[0] = '\0';
        *why = "cannot create the snapshot file";
        return GRPC_STATUS_UNAVAILABLE;
    }
    si->started = true;
    return GRPC_STATUS_OK;
}

/* fsync_dir makes the rename in dir durable. */
static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return err_from_errno(errno);
    int rv = fsync(fd) == 0 ? 0 : err_from_errno(errno);
    close(fd);
    return rv;
}

/* complete verifies and installs the file after the last chunk. */
static void complete(struct peer_transport *t, struct rpc_stream *stream,
                     struct snap_in *si, const Cetcdpb__SnapshotChunk *c)
{
    uint8_t sha[EVP_MAX_MD_SIZE];
    unsigned sha_len = 0;
    char path[sizeof(si->tmp)];
    if (si->received != si->size)
        return fail(stream, si, GRPC_STATUS_DATA_LOSS,
                    "snapshot shorter than announced");
    EVP_DigestFinal_ex(si->md, sha, &sha_len);
    assert(sha_len == PEER__SHA256_LEN && c->sha256.len == PEER__SHA256_LEN);
    if (CRYPTO_memcmp(sha, c->sha256.data, PEER__SHA256_LEN) != 0)
        return fail(stream, si, GRPC_STATUS_DATA_LOSS,
                    "snapshot checksum mismatch");
    snprintf(path, sizeof(path), "%s/%016llx.snap.db", t->snap_dir,
             (unsigned long long)si->msg.snapshot->meta.index);
    if (fsync(si->fd) != 0 || rename(si->tmp, path) != 0)
        return fail(stream, si, GRPC_STATUS_UNAVAILABLE,
                    "cannot store the snapshot file");
    close(si->fd);
    si->fd = -1;
    si->tmp[0] = '\0';
    int rv = fsync_dir(t->snap_dir);
    if (rv == 0 && t->cb.on_snapshot != NULL)
        rv = t->cb.on_snapshot(t->cb.arg, si->hdr.from, &si->msg, path);
    if (rv != 0 || t->cb.on_snapshot == NULL) {
        unlink(path);
        return fail(stream, si, GRPC_STATUS_UNAVAILABLE,
                    "snapshot not taken by this member");
    }
    si->ended = true;
    Cetcdpb__SnapshotDone done = CETCDPB__SNAPSHOT_DONE__INIT;
    done.ok = true;
    rpc_stream_send(stream, &done.base);
    rpc_stream_finish(stream, GRPC_STATUS_OK, NULL);
}

/* chunk handles one decoded chunk. */
static void chunk(struct peer_transport *t, struct rpc_stream *stream,
                  struct snap_in *si, const Cetcdpb__SnapshotChunk *c,
                  bool has_msg, const struct raft_msg *m)
{
    const char *why = NULL;
    grpc_status_code code = GRPC_STATUS_OK;
    if (!si->started) {
        si->hdr.from = c->from; /* For the log line if refused. */
        code = first_check(t, c, has_msg, m, &why);
        if (code == GRPC_STATUS_OK)
            code = begin(t, si, c, &why);
    } else if (c->cluster_id != si->hdr.cluster_id || c->from != si->hdr.from ||
               c->to != si->hdr.to || has_msg) {
        code = GRPC_STATUS_INVALID_ARGUMENT;
        why = "snapshot chunk does not belong to this transfer";
    }
    if (code != GRPC_STATUS_OK)
        return fail(stream, si, code, why);
    if (c->data.len > si->size - si->received)
        return fail(stream, si, GRPC_STATUS_DATA_LOSS,
                    "snapshot longer than announced");
    int rv = fs_write_all(si->fd, c->data.data, c->data.len);
    if (rv != 0)
        return fail(stream, si, GRPC_STATUS_UNAVAILABLE,
                    rv == ERR_NOSPC ? "no space for the snapshot"
                                    : "cannot write the snapshot");
    EVP_DigestUpdate(si->md, c->data.data, c->data.len);
    si->received += c->data.len;
    peer__bytes_note(t, si->hdr.from, 0, c->data.len);
    if (c->last)
        complete(t, stream, si, c);
}

static void in_message(struct rpc_stream *stream, const uint8_t *msg,
                       size_t len, void *ctx)
{
    struct peer_transport *t = ctx;
    struct snap_in *si = rpc_stream_data_get(stream);
    if (si == NULL || si->ended)
        return;
    if (msg == NULL)
        return fail(stream, si, GRPC_STATUS_DATA_LOSS,
                    "snapshot ended before its last chunk");
    Cetcdpb__SnapshotChunk *c = NULL;
    struct raft_msg m;
    bool has_msg = false;
    int rv = peer__chunk_decode(msg, len, &c, &m, &has_msg);
    if (rv != 0)
        return fail(stream, si, rv == ERR_NOMEM
                                    ? GRPC_STATUS_RESOURCE_EXHAUSTED
                                    : GRPC_STATUS_INVALID_ARGUMENT,
                    rv == ERR_NOMEM ? "out of memory"
                                    : "undecodable SnapshotChunk");
    chunk(t, stream, si, c, has_msg, &m);
    if (has_msg)
        raft_msg_release(&m);
    cetcdpb__snapshot_chunk__free_unpacked(c, NULL);
}

static void in_close(struct rpc_stream *stream, bool cancelled, void *ctx)
{
    struct peer_transport *t = ctx;
    struct snap_in *si = rpc_stream_data_get(stream);
    if (si != NULL) {
        discard(si); /* No-op once the file was handed over. */
        if (si->counted)
            atomic_fetch_sub(&t->snapshots_in, 1);
        if (si->has_msg)
            raft_msg_release(&si->msg);
        mem_free(si->msg_buf);
        EVP_MD_CTX_free(si->md);
        mem_free(si);
    }
    peer__in_detach(stream);
}

const struct rpc_stream_ops peer__snapshot_ops = {
    .on_open = in_open,
    .on_message = in_message,
    .on_close = in_close,
};
