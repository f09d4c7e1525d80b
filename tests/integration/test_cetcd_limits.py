"""Where cetcd knowingly differs from etcd, and how it fails there.

Goal: the store's key-length limit (LMDB's key size: 494 bytes of user key;
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
