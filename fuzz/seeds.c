/*
 * seeds.c - writes the seed corpora of the cluster work's fuzz targets
 * (fuzz/corpus/{api_cluster,peer_recv,server_members,server_members_apply,
 * cmd_join}), so that
 * each starts from valid inputs that reach deep into the code instead of
 * discovering protobuf and the input layout byte by byte.  Each file is
 * one input in its target's layout (see the target's header comment),
 * built with the same encoders the product uses.  Deterministic.
 *
 * Usage (from a -DCETCD_FUZZ=ON build):  build-fuzz/fuzz/fuzz_seeds fuzz/corpus
 * Files that crashed a target once are kept in the corpus by hand, under
 * names starting with "crash-"; this program leaves them alone.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/status.h>
#include <openssl/sha.h>

#include "cetcdpb/internal.pb-c.h"
#include "cetcdpb/peer.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "peer/peer.h"
#include "raft/raft.h"
#include "util/err.h"

static const char *root;

/* One input being built. */
static uint8_t buf[1 << 16];
static size_t n_buf;

static void put(const void *p, size_t n)
{
    assert(n_buf + n <= sizeof buf);
    if (n > 0)
        memcpy(buf + n_buf, p, n);
    n_buf += n;
}

static void put_u8(unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(&b, 1);
}

static void put_u16(size_t v)
{
    assert(v <= 0xffff);
    put_u8(v & 0xff);
    put_u8(v >> 8);
}

/* put_msg appends msg packed, after its u16 length when framed. */
static void put_msg(const ProtobufCMessage *msg, bool framed)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    assert(n_buf + 2 + n <= sizeof buf);
    if (framed)
        put_u16(n);
    protobuf_c_message_pack(msg, buf + n_buf);
    n_buf += n;
}

static void save(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, n_buf, f) != n_buf || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    n_buf = 0;
}

/* --- fuzz_api_cluster --------------------------------------------------- */

enum { M_LIST, M_ADD, M_REMOVE, M_UPDATE, M_PROMOTE, M_STATUS, M_MOVE,
       M_JOIN, M_PEER_PROMOTE, M_HASH_KV, M_HASH, M_PEER_HASH_KV };
enum { LEAD_NONE = 0, LEAD_US = 1 << 2, LEAD_2 = 2 << 2, LEAD_3 = 3 << 2 };

static void api_req(int method, unsigned flags, const ProtobufCMessage *req)
{
    put_u8((unsigned)method);
    put_u8(flags);
    put_msg(req, true);
}

/* api_seed saves the api_cluster seed `name`: the request alone. */
static void api_seed(const char *name, int method, unsigned flags,
                     const ProtobufCMessage *req)
{
    api_req(method, flags, req);
    save("api_cluster", name);
}

static Etcdserverpb__Member *member(Etcdserverpb__Member *m, uint64_t id,
                                    char *name, char **purls, size_t n,
                                    bool learner)
{
    etcdserverpb__member__init(m);
    m->id = id;
    m->name = name;
    m->peerurls = purls;
    m->n_peerurls = n;
    m->islearner = learner;
    return m;
}

/* A MemberPromote on a follower, and the leader's answer. */
static void api_promote(const char *name, grpc_status_code status,
                        const char *details, int error, bool members)
{
    Etcdserverpb__MemberPromoteRequest r =
        ETCDSERVERPB__MEMBER_PROMOTE_REQUEST__INIT;
    r.id = 3;
    api_req(M_PROMOTE, LEAD_2, &r.base);
    put_u8((unsigned)status);
    put_u8(strlen(details));
    put(details, strlen(details));
    char *u1[] = {"http://127.0.0.1:2380"}, *u3[] = {"https://[::1]:2380"};
    Etcdserverpb__Member m[2], *pm[2] = {
        member(&m[0], 1, "m1", u1, 1, false),
        member(&m[1], 3, "m3", u3, 1, false)};
    Cetcdpb__PromoteResponse a = CETCDPB__PROMOTE_RESPONSE__INIT;
    a.error = error;
    if (members) {
        a.members = pm;
        a.n_members = 2;
    }
    put_msg(&a.base, false);
    save("api_cluster", name);
}

static void api_cluster(void)
{
    Etcdserverpb__MemberListRequest list =
        ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
    api_seed("list", M_LIST, 0, &list.base);

    char *one[] = {"http://10.0.0.4:2380"};
    char *many[] = {"http://10.0.0.5:2380", "unix://m5.sock",
                    "https://[fe80::1]:2380", "unixs://m5s.sock"};
    char *taken[] = {"http://127.0.0.2:2380"};
    Etcdserverpb__MemberAddRequest add = ETCDSERVERPB__MEMBER_ADD_REQUEST__INIT;
    add.peerurls = one;
    add.n_peerurls = 1;
    api_seed("add", M_ADD, 0, &add.base);
    add.islearner = true;
    api_seed("add-learner", M_ADD, 1, &add.base);
    add.islearner = false;
    add.peerurls = many;
    add.n_peerurls = 4;
    api_seed("add-many-urls", M_ADD, 2, &add.base);
    add.peerurls = taken;
    add.n_peerurls = 1;
    api_seed("add-taken", M_ADD, 0, &add.base);
    char longest[PEER_URL_LEN_MAX], *lp[] = {longest};
    memset(longest, 's', sizeof longest - 1);
    memcpy(longest, "unix://", 7);
    longest[sizeof longest - 1] = '\0';
    add.peerurls = lp;
    api_seed("add-longest-url", M_ADD, 0, &add.base);

    Etcdserverpb__MemberRemoveRequest rm =
        ETCDSERVERPB__MEMBER_REMOVE_REQUEST__INIT;
    rm.id = 2;
    api_seed("remove", M_REMOVE, 0, &rm.base);
    rm.id = 7;
    api_seed("remove-unknown-stopping", M_REMOVE, 0x80, &rm.base);

    Etcdserverpb__MemberUpdateRequest up =
        ETCDSERVERPB__MEMBER_UPDATE_REQUEST__INIT;
    up.id = 2;
    up.peerurls = many;
    up.n_peerurls = 2;
    api_seed("update", M_UPDATE, 0, &up.base);

    Etcdserverpb__MemberPromoteRequest pr =
        ETCDSERVERPB__MEMBER_PROMOTE_REQUEST__INIT;
    pr.id = 3;
    api_seed("promote-leader", M_PROMOTE, LEAD_US, &pr.base);
    api_seed("promote-no-leader", M_PROMOTE, LEAD_NONE, &pr.base);
    api_seed("promote-busy", M_PROMOTE, LEAD_3 | 0x40, &pr.base);
    api_promote("promote-forwarded", GRPC_STATUS_OK, "", 0, true);
    api_promote("promote-not-ready", GRPC_STATUS_OK, "",
                ERR_LEARNER_NOT_READY, false);
    api_promote("promote-leader-moved", GRPC_STATUS_OK, "", ERR_NOT_LEADER,
                false);
    api_promote("promote-removed", GRPC_STATUS_PERMISSION_DENIED,
                PEER_REMOVED_MSG, 0, false);
    api_promote("promote-unreachable", GRPC_STATUS_UNAVAILABLE, "refused", 0,
                false);

    Etcdserverpb__StatusRequest st = ETCDSERVERPB__STATUS_REQUEST__INIT;
    api_seed("status", M_STATUS, 0, &st.base);
    Etcdserverpb__MoveLeaderRequest mv =
        ETCDSERVERPB__MOVE_LEADER_REQUEST__INIT;
    mv.targetid = 2;
    api_seed("move-leader", M_MOVE, 0, &mv.base);
    api_seed("move-leader-refused", M_MOVE, 1 | 2 << 4, &mv.base);

    Cetcdpb__JoinRequest join = CETCDPB__JOIN_REQUEST__INIT;
    join.cluster_token = "fuzz-token";
    api_seed("join", M_JOIN, 0, &join.base);
    join.cluster_token = "other";
    api_seed("join-other-token", M_JOIN, 0, &join.base);

    Cetcdpb__PromoteRequest fw = CETCDPB__PROMOTE_REQUEST__INIT;
    fw.cluster_id = 0xc1;
    fw.from = 2;
    fw.member_id = 3;
    api_seed("peer-promote", M_PEER_PROMOTE, LEAD_US, &fw.base);
    fw.cluster_id = 0xc2;
    api_seed("peer-promote-other-cluster", M_PEER_PROMOTE, LEAD_US, &fw.base);

    /* A peer's corruption check, and the answer a checker decodes. */
    Cetcdpb__PeerHashRequest ph = CETCDPB__PEER_HASH_REQUEST__INIT;
    ph.cluster_id = 0xc1;
    ph.from = 2;
    api_seed("peer-hash-kv", M_PEER_HASH_KV, 0, &ph.base);
    ph.revision = 20;
    api_seed("peer-hash-kv-future", M_PEER_HASH_KV, 0, &ph.base);
    ph.revision = 5;
    ph.compacted = true;
    api_seed("peer-hash-kv-compacted", M_PEER_HASH_KV, 0, &ph.base);
    ph.cluster_id = 0xc2;
    api_seed("peer-hash-kv-other-cluster", M_PEER_HASH_KV, 0, &ph.base);
    ph.cluster_id = 0xc1;
    Cetcdpb__PeerHashResponse pa = CETCDPB__PEER_HASH_RESPONSE__INIT;
    pa.member_id = 2;
    pa.hash = 77;
    pa.revision = 10;
    pa.compact_revision = 5;
    api_req(M_PEER_HASH_KV, 0, &ph.base);
    put_u8(0);
    put_u8(0);
    put_msg(&pa.base, false);
    save("api_cluster", "peer-hash-kv-answer");
}

/* --- fuzz_peer_recv ----------------------------------------------------- */

enum { SNAP = 0x80 }; /* the Snapshot service, else Stream */

/* A raft message of `type` from member `from` to member 1 in `term`, the
 * other fields zero. */
static struct raft_msg msg_to_1(uint8_t type, uint64_t from, uint64_t term)
{
    struct raft_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.from = from;
    m.to = 1;
    m.term = term;
    return m;
}

/* The MsgSnap of member `from` to member 1 (encoded). */
static uint8_t snap_msg[512];
static size_t snap_msg_len;

static void snap_msg_build(uint64_t from)
{
    struct raft_snapshot snap;
    memset(&snap, 0, sizeof snap);
    snap.meta.index = 777;
    snap.meta.term = 3;
    snap.meta.conf.n_voters = 3;
    for (int i = 0; i < 3; i++)
        snap.meta.conf.voters[i] = (raft_id)i + 1;
    struct raft_msg m = msg_to_1(RAFT_MSG_SNAP, from, 3);
    m.snapshot = &snap;
    size_t n = raft_msg_encoded_size(&m);
    assert(n <= sizeof snap_msg);
    int rv = raft_msg_encode(&m, snap_msg, sizeof snap_msg, &snap_msg_len);
    assert(rv == 0 && snap_msg_len == n);
    (void)rv;
}

/* One SnapshotChunk; the first carries the MsgSnap and the size, the last
 * the SHA-256 of all data (sha: that of data[0..total)). */
static void snap_chunk(uint64_t from, bool first, uint64_t size,
                       const uint8_t *data, size_t n, bool last,
                       const uint8_t *sha)
{
    Cetcdpb__SnapshotChunk c = CETCDPB__SNAPSHOT_CHUNK__INIT;
    c.cluster_id = 0xc1;
    c.from = from;
    c.to = 1;
    if (first) {
        c.msg.data = snap_msg;
        c.msg.len = snap_msg_len;
        c.size = size;
    }
    c.data.data = (uint8_t *)data;
    c.data.len = n;
    c.last = last;
    if (last) {
        c.sha256.data = (uint8_t *)sha;
        c.sha256.len = SHA256_DIGEST_LENGTH;
    }
    put_msg(&c.base, true);
}

/* A PeerBatch of member `from` to member 1 holding n messages of it. */
static void peer_batch(uint64_t cluster_id, uint64_t from, size_t n,
                       uint8_t type)
{
    static uint8_t enc[4][256];
    ProtobufCBinaryData msgs[4];
    struct raft_entry e = {.term = 2, .index = 5, .data = (uint8_t *)"put",
                           .len = 3};
    assert(n <= 4);
    for (size_t i = 0; i < n; i++) {
        struct raft_msg m = msg_to_1(type, from, 2);
        m.log_term = 2;
        m.index = 4 + i;
        m.commit = 4;
        m.n_entries = type == RAFT_MSG_APP ? 1 : 0;
        m.entries = &e;
        struct raft_snapshot snap;
        memset(&snap, 0, sizeof snap);
        snap.meta.index = 3;
        snap.meta.term = 2;
        snap.meta.conf.n_voters = 1;
        snap.meta.conf.voters[0] = 1;
        if (type == RAFT_MSG_SNAP)
            m.snapshot = &snap;
        int rv = raft_msg_encode(&m, enc[i], sizeof enc[i], &msgs[i].len);
        assert(rv == 0);
        (void)rv;
        msgs[i].data = enc[i];
    }
    Cetcdpb__PeerBatch b = CETCDPB__PEER_BATCH__INIT;
    b.cluster_id = cluster_id;
    b.from = from;
    b.to = 1;
    b.msgs = msgs;
    b.n_msgs = n;
    put_msg(&b.base, true);
}

static void peer_stream(void)
{
    put_u8(1);
    peer_batch(0xc1, 2, 0, 0);
    save("peer_recv", "stream-hello-close");
    put_u8(0);
    peer_batch(0xc1, 2, 0, 0);
    peer_batch(0xc1, 2, 2, RAFT_MSG_APP);
    peer_batch(0xc1, 2, 1, RAFT_MSG_HEARTBEAT);
    save("peer_recv", "stream-batches");
    put_u8(0);
    peer_batch(0xc1, 2, 1, RAFT_MSG_APP);
    peer_batch(0xc1, 4, 1, RAFT_MSG_APP);
    save("peer_recv", "stream-sender-changes");
    put_u8(0);
    peer_batch(0xc1, 3, 0, 0);
    save("peer_recv", "stream-from-removed");
    put_u8(0);
    peer_batch(0xc1, 4, 0, 0);
    save("peer_recv", "stream-from-unknown");
    put_u8(0);
    peer_batch(0xc2, 2, 0, 0);
    save("peer_recv", "stream-other-cluster");
    put_u8(0);
    peer_batch(0xc1, 2, 1, RAFT_MSG_SNAP);
    peer_batch(0xc1, 2, 1, RAFT_MSG_APP);
    save("peer_recv", "stream-snap-in-batch");
}

static void peer_snap(void)
{
    static const uint8_t data[300] = "a snapshot file of a few bytes";
    uint8_t sha[SHA256_DIGEST_LENGTH], sha0[SHA256_DIGEST_LENGTH];
    uint8_t bad[SHA256_DIGEST_LENGTH];
    SHA256(data, sizeof data, sha);
    SHA256(data, 0, sha0);
    memcpy(bad, sha, sizeof bad);
    bad[0] ^= 1;
    snap_msg_build(2);

    put_u8(SNAP);
    snap_chunk(2, true, sizeof data, data, sizeof data, true, sha);
    save("peer_recv", "snap-one-chunk");
    put_u8(SNAP | 1);
    snap_chunk(2, true, sizeof data, NULL, 0, false, NULL);
    snap_chunk(2, false, 0, data, 100, false, NULL);
    snap_chunk(2, false, 0, data + 100, 200, true, sha);
    save("peer_recv", "snap-three-chunks-half-close");
    put_u8(SNAP);
    snap_chunk(2, true, 0, NULL, 0, true, sha0);
    save("peer_recv", "snap-empty");
    put_u8(SNAP | 2);
    snap_chunk(2, true, sizeof data, data, sizeof data, true, sha);
    save("peer_recv", "snap-refused-by-member");
    put_u8(SNAP | 4);
    snap_chunk(2, true, sizeof data, data, sizeof data, true, sha);
    save("peer_recv", "snap-too-many-in");
    put_u8(SNAP);
    snap_chunk(2, true, sizeof data, data, sizeof data, true, bad);
    save("peer_recv", "snap-bad-checksum");
    put_u8(SNAP | 1);
    snap_chunk(2, true, sizeof data, data, 100, false, NULL);
    save("peer_recv", "snap-short");
    put_u8(SNAP);
    snap_chunk(2, true, 100, data, sizeof data, true, sha);
    save("peer_recv", "snap-longer-than-announced");
    put_u8(SNAP);
    snap_chunk(2, true, sizeof data, data, 100, false, NULL);
    snap_chunk(4, false, 0, data + 100, 200, true, sha);
    save("peer_recv", "snap-sender-changes");
    put_u8(SNAP);
    snap_chunk(2, true, 2 << 20, data, sizeof data, true, sha);
    save("peer_recv", "snap-too-large");
    snap_msg_build(3);
    put_u8(SNAP);
    snap_chunk(3, true, sizeof data, data, sizeof data, true, sha);
    save("peer_recv", "snap-from-removed");
    snap_msg_build(4);
    put_u8(SNAP);
    snap_chunk(4, true, sizeof data, data, sizeof data, true, sha);
    save("peer_recv", "snap-from-unknown");
}

/* --- fuzz_server_members ------------------------------------------------ */

/* One record of a bucket (0: members, 1: members_removed). */
static void record(int bucket, const void *key, size_t klen,
                   const ProtobufCMessage *val)
{
    put_u8((unsigned)bucket);
    put_u8(klen);
    put(key, klen);
    if (val != NULL) {
        put_msg(val, true);
    } else {
        put_u16(0);
    }
}

static void key_be(uint8_t key[8], uint64_t id)
{
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)(id >> (56 - 8 * i));
}

/* members.c's record of a member: etcdserverpb.Member under its id. */
static void member_record(uint64_t id, char *name, char **purls,
                          size_t n_purls, char **curls, size_t n_curls,
                          bool learner)
{
    Etcdserverpb__Member m;
    uint8_t key[8];
    member(&m, id, name, purls, n_purls, learner);
    m.clienturls = curls;
    m.n_clienturls = n_curls;
    key_be(key, id);
    record(0, key, 8, &m.base);
}

static void ids(const char *line)
{
    put_u8(1);
    put_u8(strlen(line));
    put(line, strlen(line));
}

static void members_table(void)
{
    char *p1[] = {"http://127.0.0.1:2380"}, *c1[] = {"http://127.0.0.1:2379"};
    char *p2[] = {"http://127.0.0.2:2380", "unix://m2.sock"};
    char *c2[] = {"http://127.0.0.2:2379", "unix://c2.sock"};
    char *p3[] = {"https://[::1]:2380"};
    member_record(1, "m1", p1, 1, c1, 1, false);
    member_record(2, "m2", p2, 2, c2, 2, false);
    member_record(3, "", p3, 1, NULL, 0, true);
}

static void server_members(void)
{
    uint8_t key[8];
    put_u8(0);
    put_u8(0);
    save("server_members", "empty");
    ids("000000000000000100000000000000c1\n");
    members_table();
    save("server_members", "three-members");
    ids("000000000000000200000000000000c1\n");
    members_table();
    key_be(key, 9);
    record(1, key, 8, NULL);
    record(0, "meta", 4, NULL);
    save("server_members", "removed-and-meta");
    ids("000000000000000300000000000000c1\n");
    members_table();
    key_be(key, 3);
    record(1, key, 8, NULL);
    save("server_members", "self-removed");
    put_u8(0);
    put_u8(0);
    members_table();
    save("server_members", "no-ids");
}

/* --- fuzz_server_members_apply ------------------------------------------ */

/* One applied record: a MemberChange of kind on member id. */
static void change_rec(int kind, uint64_t id, char **purls, size_t n,
                       bool learner)
{
    Etcdserverpb__Member m;
    Cetcdpb__MemberChange c = CETCDPB__MEMBER_CHANGE__INIT;
    Cetcdpb__InternalRequest r = CETCDPB__INTERNAL_REQUEST__INIT;
    member(&m, id, "", purls, n, learner);
    c.kind = (Cetcdpb__MemberChange__Kind)kind;
    c.member = &m;
    r.id = id;
    r.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE;
    r.member_change = &c;
    put_msg(&r.base, true);
}

/* One published MemberAttr of member id. */
static void attr_rec(uint64_t id, char *name, char **curls, size_t n)
{
    Cetcdpb__MemberAttr a = CETCDPB__MEMBER_ATTR__INIT;
    Cetcdpb__InternalRequest r = CETCDPB__INTERNAL_REQUEST__INIT;
    a.member_id = id;
    a.name = name;
    a.client_urls = curls;
    a.n_client_urls = n;
    r.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_ATTR;
    r.member_attr = &a;
    put_msg(&r.base, true);
}

static void server_members_apply(void)
{
    char *p4[] = {"http://127.0.0.4:2380"}, *p4b[] = {"http://127.0.0.5:2380",
                                                      "unix://m4.sock:1"};
    char *c1[] = {"http://127.0.0.1:2379"};
    attr_rec(1, "m1", c1, 1);
    change_rec(CETCDPB__MEMBER_CHANGE__KIND__ADD, 4, p4, 1, true);
    change_rec(CETCDPB__MEMBER_CHANGE__KIND__PROMOTE, 4, NULL, 0, false);
    change_rec(CETCDPB__MEMBER_CHANGE__KIND__UPDATE, 4, p4b, 2, false);
    attr_rec(4, "m4", c1, 1);
    change_rec(CETCDPB__MEMBER_CHANGE__KIND__REMOVE, 2, NULL, 0, false);
    save("server_members_apply", "add-promote-update-remove");
    change_rec(CETCDPB__MEMBER_CHANGE__KIND__REMOVE, 1, NULL, 0, false);
    save("server_members_apply", "self-removed");
}

/* --- fuzz_cmd_join ------------------------------------------------------ */

/* Saves the cmd_join seed `name`: the answer of a running cluster, members
 * 1, 2 and the new member 4 (peer URLs self[0..n_self)), plus `extra`
 * learners without URLs. */
static void join_seed(const char *name, unsigned flags, uint64_t cluster_id,
                      char **self, size_t n_self, size_t extra)
{
    char *p1[] = {"http://127.0.0.1:2380"}, *c1[] = {"http://127.0.0.1:2379"};
    char *p2[] = {"http://127.0.0.2:2380", "unix://m2.sock"};
    Etcdserverpb__Member m[3 + 16], *pm[3 + 16];
    assert(extra <= 16);
    pm[0] = member(&m[0], 1, "m1", p1, 1, false);
    m[0].clienturls = c1;
    m[0].n_clienturls = 1;
    pm[1] = member(&m[1], 2, "m2", p2, 2, false);
    pm[2] = member(&m[2], 0x4444, "", self, n_self, true);
    for (size_t i = 0; i < extra; i++)
        pm[3 + i] = member(&m[3 + i], 100 + i, "", NULL, 0, true);
    Cetcdpb__JoinResponse r = CETCDPB__JOIN_RESPONSE__INIT;
    r.cluster_id = cluster_id;
    r.members = pm;
    r.n_members = 3 + extra;
    put_u8(flags);
    put_msg(&r.base, false);
    save("cmd_join", name);
}

static void cmd_join(void)
{
    char *one[] = {"http://127.0.0.4:2380"};
    char *two[] = {"unix://m4.sock", "http://127.0.0.4:2380"};
    char *other[] = {"http://127.0.0.5:2380"};
    join_seed("joined", 0, 0xc1, one, 1, 0);
    join_seed("joined-two-urls", 1, 0xc1, two, 2, 0);
    join_seed("joined-two-urls-reordered", 2, 0xc1, two, 2, 0);
    join_seed("joined-many-members", 0, 0xc1, one, 1, 14);
    join_seed("not-a-member", 0, 0xc1, other, 1, 0);
    join_seed("fewer-urls", 1, 0xc1, one, 1, 0);
    join_seed("one-unavailable", 1 << 2, 0xc1, one, 1, 0);
    join_seed("all-unavailable", 7 << 2, 0xc1, one, 1, 0);
    join_seed("other-token", 7 << 2 | 1 << 5, 0xc1, one, 1, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_ROOT\n", argv[0]);
        return 2;
    }
    root = argv[1];
    api_cluster();
    peer_stream();
    peer_snap();
    server_members();
    server_members_apply();
    cmd_join();
    return 0;
}
