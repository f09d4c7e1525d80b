"""One store history written over gRPC, shared by the etcd snapshot,
import and offline-replacement tests (issue 21).

Goal: a history that exercises what a move between etcd and cetcd must
keep: keys written over many revisions, a txn of several puts (one
revision, several sub-revisions), deletions (tombstones), leases with
explicit ids (one past 2^62) and keys attached, a physical compaction in
the middle, and writes after it (so Range at old revisions, below and above
the compaction, and HashKV have something to tell apart), one value of
20 KiB.  The same calls give the same revisions on etcd and on cetcd.

Method: plain etcdserverpb calls on whatever `srv.channel()` gives (an
integration Server, a cluster Member: anything with channel()).  The caller
adds what only it needs (users and roles, a writer load) after fill().
"""

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

# Lease ids granted by fill(), both with TTL 900 s.
LEASES = (0x1234, 0x7000000000000001)


def revision(kv):
    """The store's current revision (a Range of an absent key)."""
    return kv.Range(rpc_pb2.RangeRequest(key=b"\0"), timeout=10
                    ).header.revision


def fill(srv, leased_more=False):
    """Writes the history through srv; returns the revision compacted at.
    leased_more: one more key on LEASES[0] before the compaction (the
    import test's variant: a lease with two keys)."""
    ch = srv.channel()
    kv = rpc_pb2_grpc.KVStub(ch)
    lease = rpc_pb2_grpc.LeaseStub(ch)
    for lid in LEASES:
        lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=900, ID=lid),
                         timeout=10)
    for i in range(300):
        kv.Put(rpc_pb2.PutRequest(key=b"k%03d" % (i % 40),
                                  value=b"v%d" % i), timeout=10)
    kv.Txn(rpc_pb2.TxnRequest(success=[
        rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
            key=b"t%d" % j, value=b"x" * (j * 700))) for j in range(5)]),
        timeout=10)
    for i in range(0, 40, 3):
        kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"k%03d" % i),
                       timeout=10)
    for j, lid in enumerate(LEASES):
        kv.Put(rpc_pb2.PutRequest(key=b"leased%d" % j, value=b"l",
                                  lease=lid), timeout=10)
    if leased_more:
        kv.Put(rpc_pb2.PutRequest(key=b"leased-more", value=b"m",
                                  lease=LEASES[0]), timeout=10)
    compact_at = revision(kv) - 20
    kv.Compact(rpc_pb2.CompactionRequest(revision=compact_at, physical=True),
               timeout=30)
    for i in range(50):
        kv.Put(rpc_pb2.PutRequest(key=b"k%03d" % (i % 7), value=b"after"),
               timeout=10)
    kv.Put(rpc_pb2.PutRequest(key=b"big", value=bytes(range(256)) * 80),
           timeout=10)
    kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"k001"), timeout=10)
    return compact_at
