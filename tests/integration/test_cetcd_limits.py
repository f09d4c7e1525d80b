"""Where cetcd knowingly differs from etcd, and how it fails there.

Goal: (1) a txn whose ">= key" delete removes a key that a later
ignore_value put of the same txn needs is refused before its first write
(etcd 3.4 panics on it mid-txn); (2) the store's key-length limit (LMDB's key size: 494 bytes of user key;
etcd has none below --max-request-bytes) is refused cleanly and atomically:
a txn with one over-long key writes nothing at all.  Method: raw gRPC against
a fresh cetcd.  Skipped against etcd, which accepts such keys.
"""

import grpc
import pytest

from conftest import against_etcd
from etcd3.etcdrpc import rpc_pb2 as pb

pytestmark = pytest.mark.skipif(against_etcd(), reason="cetcd-only limit")

MSG = "etcdserver: key is too long for cetcd's store (max 494 bytes)"


def err(fn):
    with pytest.raises(grpc.RpcError) as e:
        fn()
    return e.value.code(), e.value.details()


def test_long_key_refused_atomically(server):
    kv = server.kv()
    ok = b"k" * 494
    kv.Put(pb.PutRequest(key=ok, value=b"v"))
    assert kv.Range(pb.RangeRequest(key=ok)).kvs[0].value == b"v"
    long = b"k" * 495
    assert err(lambda: kv.Put(pb.PutRequest(key=long, value=b"v"))) == \
        (grpc.StatusCode.INVALID_ARGUMENT, MSG)
    rev = kv.Range(pb.RangeRequest(key=b"a")).header.revision
    txn = pb.TxnRequest(success=[
        pb.RequestOp(request_put=pb.PutRequest(key=b"a", value=b"1")),
        pb.RequestOp(request_put=pb.PutRequest(key=long, value=b"1"))])
    assert err(lambda: kv.Txn(txn)) == (grpc.StatusCode.INVALID_ARGUMENT, MSG)
    after = kv.Range(pb.RangeRequest(key=b"a"))
    assert after.count == 0 and after.header.revision == rev


def test_txn_ignore_value_after_own_delete_refused_atomically(server):
    kv = server.kv()
    kv.Put(pb.PutRequest(key=b"x", value=b"1"))
    kv.Put(pb.PutRequest(key=b"y", value=b"1"))
    txn = pb.TxnRequest(success=[
        pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(
            key=b"x", range_end=b"\x00")),
        pb.RequestOp(request_put=pb.PutRequest(key=b"y", ignore_value=True))])
    assert err(lambda: kv.Txn(txn)) == \
        (grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key not found")
    r = kv.Range(pb.RangeRequest(key=b"\x00", range_end=b"\x00"))
    assert r.count == 2 and r.header.revision == 3
    # The same delete followed by a plain put of the key works.
    txn = pb.TxnRequest(success=[
        pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(
            key=b"x", range_end=b"\x00")),
        pb.RequestOp(request_put=pb.PutRequest(key=b"y", value=b"2"))])
    assert kv.Txn(txn).succeeded
    r = kv.Range(pb.RangeRequest(key=b"\x00", range_end=b"\x00"))
    assert [(x.key, x.value) for x in r.kvs] == [(b"y", b"2")]
