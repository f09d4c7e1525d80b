"""HashKV as etcd 3.4 computes it, and Hash.

Goal: a cetcd member and an etcd 3.4.23 member that applied the same
history answer the same HashKV (hash, compact_revision, header revision)
at every revision, before and after compactions, with etcd's errors for
a compacted or future revision; Hash answers.  Before, both answered
UNIMPLEMENTED.

Method: the differential test's random KV sequence (test_differential.py
Gen: puts, deletes, txns, compactions, keys longer than LMDB's limit) is
sent to both servers; every 20 ops and after each compaction both are
asked HashKV at revision 0, at a random past revision and at one that is
compacted or in the future, and the answers (or gRPC code and message)
must be equal.  Compactions are physical so that etcd's answer does not
depend on how far its background compaction got (etcd hashes what its
bucket holds below the compact revision when no key is live).  The
sequence is checked to have hashed at compacted states and hit both
errors.  CETCD_HASHKV_SEEDS / CETCD_HASHKV_OPS raise the run.
"""

import os

import grpc
import pytest

from common.servers import against_etcd
from common.watchstream import top_fields
from etcd3.etcdrpc import rpc_pb2
from test_differential import Gen, pair, step  # noqa: F401 (pair: fixture)

SEEDS = int(os.environ.get("CETCD_HASHKV_SEEDS", "3"))
OPS = int(os.environ.get("CETCD_HASHKV_OPS", "600"))


def hash_kv(maint, rev):
    try:
        r = maint.HashKV(rpc_pb2.HashKVRequest(revision=rev), timeout=15)
    except grpc.RpcError as e:
        return ("error", e.code(), e.details())
    return ("ok", r.hash, r.compact_revision, r.header.revision)


@pytest.mark.parametrize("seed", range(1, SEEDS + 1))
def test_hashkv_matches_etcd(pair, seed):  # noqa: F811
    under, ref = pair()
    u_kv, r_kv = under.kv(), ref.kv()
    u_m, r_m = under.maintenance(), ref.maintenance()
    gen = Gen(1000 + seed)
    seen = {"ok": 0, "compacted_state": 0, "errors": set()}

    def compare(what):
        for rev in (0, gen.past_rev(), gen.past_rev()):
            want, got = hash_kv(r_m, rev), hash_kv(u_m, rev)
            assert got == want, "%s, HashKV at %d: etcd %r, cetcd %r" % (
                what, rev, want, got)
            if want[0] == "ok":
                seen["ok"] += 1
                seen["compacted_state"] += want[2] > 0
            else:
                seen["errors"].add(want[2])

    for i in range(OPS):
        method, req = gen.next()
        if method == "Compact":
            req.physical = True
        step(gen, method, req, r_kv, u_kv,
             "seed %d op #%d %s" % (seed, i, method))
        if method == "Compact" or i % 20 == 19:
            compare("seed %d after op #%d %s" % (seed, i, method))
    assert seen["ok"] > 20 and seen["compacted_state"] > 5, seen
    assert seen["errors"] >= {
        "etcdserver: mvcc: required revision has been compacted",
        "etcdserver: mvcc: required revision is a future revision"}, seen


def test_hashkv_fresh_store_and_hash(server):
    m = server.maintenance()
    r = m.HashKV(rpc_pb2.HashKVRequest(), timeout=10)
    # CRC32C of the bucket name "key" alone, as etcd 3.4.23 answers.
    assert (r.hash, r.compact_revision, r.header.revision) == (
        1084519789, -1, 1)
    h = m.Hash(rpc_pb2.HashRequest(), timeout=10)
    assert h.header.revision == 1
    server.kv().Put(rpc_pb2.PutRequest(key=b"a", value=b"1"), timeout=10)
    assert m.Hash(rpc_pb2.HashRequest(), timeout=10).hash != h.hash


@pytest.mark.skipif(against_etcd(), reason="hash_revision is etcd 3.5's")
def test_hashkv_hash_revision(server):
    """etcd 3.5's HashKVResponse.hash_revision (field 4): the revision the
    hash was computed up to: the request's, or the current one for 0."""
    for i in range(5):
        server.kv().Put(rpc_pb2.PutRequest(key=b"k%d" % i, value=b"v"),
                        timeout=10)
    call = server.channel().unary_unary(
        "/etcdserverpb.Maintenance/HashKV",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=lambda b: b)
    for rev, want in ((0, 6), (3, 3), (6, 6)):
        raw = call(rpc_pb2.HashKVRequest(revision=rev), timeout=10)
        f = top_fields(raw)
        assert f.get(4) == [want], (rev, f)
        typed = rpc_pb2.HashKVResponse.FromString(raw)
        assert f[2] == [typed.hash] and typed.header.revision == 6
