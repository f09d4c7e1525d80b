/*
 * fuzz_peer_recv.c - goal: the receiving side of the peer listener's two
 * services survives any sequence of messages on a stream, with no crash,
 * leak or sanitizer report, and keeps its promises:
 *   /cetcdpb.Peer/Stream (src/peer/recv.c): raft messages reach
 *   on_messages only from a peer, addressed from it to us, never a
 *   MsgSnap, never after the stream was refused; the first accepted batch
 *   (the sender's "hello") is answered with one PeerAck naming us;
 *   /cetcdpb.Peer/Snapshot (src/peer/snap_recv.c): a snapshot is handed
 *   to on_snapshot only complete and verified, at most once, and the
 *   stream then ends OK with SnapshotDone; every other ending is an error
 *   status; no temporary file is left behind and the transfer's slot
 *   among snapshots_in is given back.
 * (Decoding one PeerBatch or SnapshotChunk alone is fuzz_peer.c's.)
 *
 * Method: a real transport (peer_transport_create, member 1 of cluster
 * 0xc1, snapshots into a temporary directory, at most 1 MiB) whose peer
 * table holds member 2; member 3 is removed (is_removed), others unknown.
 * The real stream callbacks, peer__stream_ops and peer__snapshot_ops, get
 * the messages as the gRPC runtime delivers them (each in a buffer of its
 * own size; after a finish too, as the runtime keeps reading); the stream
 * itself is a fake: the link wraps (--wrap, see fuzz/CMakeLists.txt)
 * rpc_stream_data_set/get, _send, _finish and _release, which record what
 * the handler did.
 *
 * Input: u8 flags, then messages, each u16 LE length and the bytes (a
 * PeerBatch, or a SnapshotChunk).  Flags: bit 7 the Snapshot service
 * (else Stream), bit 0 the sender half-closes after the last message,
 * bit 1 on_snapshot refuses the file, bit 2 every snapshot slot is taken
 * by other transfers.  Seeds: fuzz/seeds.c (hellos, batches, valid
 * transfers in one and in several chunks, a bad checksum, wrong senders,
 * a short transfer).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/rpc.h"
#include "fuzz_dir.h"
#include "peer/peer_int.h"
#include "util/err.h"
#include "util/log.h"

static void check(int cond)
{
    if (!cond)
        abort();
}

/* --- the stream --------------------------------------------------------- */

/* What the handler did with its stream. */
struct fake_stream {
    void *data;             /* rpc_stream_data_set */
    int finishes;           /* rpc_stream_finish calls */
    grpc_status_code code;  /* the first one's status */
    int sends;              /* messages sent before the finish */
    bool sent_ok;           /* the last was SnapshotDone{ok} */
    int releases;           /* rpc_stream_release calls */
};

void __wrap_rpc_stream_data_set(struct rpc_stream *s, void *data)
{
    ((struct fake_stream *)s)->data = data;
}

void *__wrap_rpc_stream_data_get(const struct rpc_stream *s)
{
    return ((const struct fake_stream *)s)->data;
}

int __wrap_rpc_stream_send(struct rpc_stream *s, const ProtobufCMessage *msg)
{
    struct fake_stream *fs = (struct fake_stream *)s;
    if (fs->finishes > 0)
        return ERR_CLOSED;
    fs->sends++;
    if (msg->descriptor == &cetcdpb__peer_ack__descriptor) {
        check(((const Cetcdpb__PeerAck *)msg)->member_id == 1);
    } else {
        check(msg->descriptor == &cetcdpb__snapshot_done__descriptor);
        fs->sent_ok = ((const Cetcdpb__SnapshotDone *)msg)->ok;
    }
    return 0;
}

int __wrap_rpc_stream_finish(struct rpc_stream *s, grpc_status_code code,
                             const char *msg)
{
    struct fake_stream *fs = (struct fake_stream *)s;
    if (fs->finishes++ > 0)
        return ERR_CLOSED; /* as the runtime: the first status wins */
    check(code == GRPC_STATUS_OK || (msg != NULL && msg[0] != '\0'));
    fs->code = code;
    return 0;
}

void __wrap_rpc_stream_release(struct rpc_stream *s)
{
    ((struct fake_stream *)s)->releases++;
}

/* --- the transport ------------------------------------------------------ */

static struct peer_transport *tr;
static char dir[128];
static struct peer__peer known; /* member 2: only its id is read */

/* What the callbacks saw during one input. */
static struct fake_stream *cur;
static int batches, taken;
static bool refuse; /* on_snapshot refuses */

static void on_messages(void *arg, raft_id from, const struct raft_msg *msgs,
                        size_t n)
{
    (void)arg;
    check(cur->finishes == 0 && from == 2 && n > 0);
    for (size_t i = 0; i < n; i++)
        check(msgs[i].from == 2 && msgs[i].to == 1 &&
              msgs[i].type != RAFT_MSG_SNAP);
    batches++;
}

static int on_snapshot(void *arg, raft_id from, const struct raft_msg *m,
                       const char *path)
{
    char want[128];
    (void)arg;
    check(from == 2 && m->type == RAFT_MSG_SNAP && m->snapshot != NULL);
    snprintf(want, sizeof want, "%s/%016llx.snap.db", dir,
             (unsigned long long)m->snapshot->meta.index);
    check(strcmp(path, want) == 0 && access(path, R_OK) == 0);
    if (refuse)
        return ERR_IO;
    taken++;
    unlink(path); /* the file is ours now */
    return 0;
}

static bool is_removed(void *arg, raft_id id)
{
    (void)arg;
    return id == 3;
}

static void transport_build(void)
{
    check(fuzz_dir_make("peer_recv", dir, sizeof dir));
    struct peer_config cfg = {
        .self = 1,
        .cluster_id = 0xc1,
        .snap_dir = dir,
        .cb = {.on_messages = on_messages, .on_snapshot = on_snapshot,
               .is_removed = is_removed},
        .limits = {.snapshot_bytes_max = 1 << 20, .snapshots_in_max = 2},
    };
    check(peer_transport_create(&cfg, &tr) == 0);
    /* A peer without its sender thread: nothing is sent to it. */
    known.id = 2;
    pthread_rwlock_wrlock(&tr->lock);
    tr->peers[0] = &known;
    tr->peers_n = 1;
    pthread_rwlock_unlock(&tr->lock);
}

/* dir_empty: nothing left in the snapshot directory. */
static bool dir_empty(void)
{
    DIR *d = opendir(dir);
    check(d != NULL);
    struct dirent *de;
    bool empty = true;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            empty = false;
    closedir(d);
    return empty;
}

/* run delivers the input's messages to ops on one stream and closes it. */
static void run(const struct rpc_stream_ops *ops, struct fake_stream *fs,
                const uint8_t *data, size_t size, bool half_close)
{
    struct rpc_stream *s = (struct rpc_stream *)fs;
    ops->on_open(s, tr);
    size_t off = 0;
    while (off + 2 <= size) {
        size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
        off += 2;
        if (len > size - off)
            len = size - off;
        /* The runtime's copy: only len bytes are readable. */
        uint8_t *msg = malloc(len + 1);
        check(msg != NULL);
        memcpy(msg, data + off, len);
        ops->on_message(s, msg, len, tr);
        free(msg);
        off += len;
    }
    if (half_close)
        ops->on_message(s, NULL, 0, tr);
    ops->on_close(s, fs->finishes == 0, tr);
    check(fs->releases == 1);
}

static void stream(const uint8_t *data, size_t size, uint8_t flags)
{
    struct fake_stream fs = {0};
    cur = &fs;
    batches = 0;
    run(&peer__stream_ops, &fs, data, size, flags & 1);
    /* A batch was delivered only after the hello was acknowledged. */
    check(batches == 0 || fs.sends == 1);
    check(fs.sends <= 1);
    check(tr->ins == NULL); /* on_close unlinked the stream */
}

static void snapshot(const uint8_t *data, size_t size, uint8_t flags)
{
    struct fake_stream fs = {0};
    cur = &fs;
    refuse = (flags & 2) != 0;
    taken = 0;
    int busy = (flags & 4) ? tr->lim.snapshots_in_max : 0;
    atomic_store(&tr->snapshots_in, busy);
    run(&peer__snapshot_ops, &fs, data, size, flags & 1);
    check(taken <= 1);
    /* Taken exactly when the stream said OK, with SnapshotDone{ok}. */
    bool ok = fs.finishes > 0 && fs.code == GRPC_STATUS_OK;
    check(ok == (taken == 1));
    check(ok == (fs.sends == 1 && fs.sent_ok));
    check(dir_empty());
    check(atomic_load(&tr->snapshots_in) == busy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (tr == NULL) {
        log_set_level(LOG_FATAL);
        transport_build();
    }
    if (size < 1)
        return 0;
    if (data[0] & 0x80)
        snapshot(data + 1, size - 1, data[0]);
    else
        stream(data + 1, size - 1, data[0]);
    return 0;
}
