"""The Lease service through raw gRPC stubs and python3-etcd3.

Goal: every Lease answer and error is etcd 3.4.23's, by gRPC status code
AND message (clients match on both): a client-chosen id, a duplicate id, a
too large TTL, revoke/put/txn with an unknown lease, TimeToLive of an
unknown lease (TTL -1, no error), LeaseLeases, LeaseKeepAlive (TTL 0 for an
unknown lease, several leases on one stream), and python3-etcd3's lease
objects (refresh, remaining_ttl, keys, revoke).

Method: a fresh single-member server per test (conftest `server`); every
expectation was checked against /usr/bin/etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
from conftest import grpc_error

NOT_FOUND = (grpc.StatusCode.NOT_FOUND,
             "etcdserver: requested lease not found")


@pytest.fixture
def lease(server):
    return rpc_pb2_grpc.LeaseStub(server.channel())


def grant(lease, ttl, id=0):
    return lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=ttl, ID=id),
                            timeout=10)


def test_grant_ids_and_errors(server, lease):
    r = grant(lease, 10)
    assert r.ID > 0 and r.TTL == 10 and r.error == ""
    assert r.header.revision == 1 and r.header.member_id != 0
    r = grant(lease, 5, id=0x1234)
    assert (r.ID, r.TTL) == (0x1234, 5)
    assert grpc_error(grant, lease, 5, id=0x1234) == \
        (grpc.StatusCode.FAILED_PRECONDITION,
         "etcdserver: lease already exists")
    assert grpc_error(grant, lease, 9000000001, id=7) == \
        (grpc.StatusCode.OUT_OF_RANGE, "etcdserver: too large lease TTL")
    assert grant(lease, 9000000000, id=8).TTL == 9000000000
    assert grant(lease, 0, id=9).TTL == 2  # the minimum TTL
    assert grant(lease, -5, id=10).TTL == 2
    assert grant(lease, 5, id=-3).ID == -3  # a client may choose it


def test_revoke_put_txn_unknown(server, lease):
    assert grpc_error(lease.LeaseRevoke,
                      rpc_pb2.LeaseRevokeRequest(ID=99), timeout=10) == \
        NOT_FOUND
    kv = server.kv()
    assert grpc_error(kv.Put, rpc_pb2.PutRequest(key=b"k", value=b"v",
                                                 lease=99), timeout=10) == \
        NOT_FOUND
    op = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
        key=b"k", value=b"v", lease=99))
    assert grpc_error(kv.Txn, rpc_pb2.TxnRequest(success=[op]),
                      timeout=10) == NOT_FOUND
    assert server.rev() == 1  # nothing written


def test_txn_put_with_lease(server, lease):
    grant(lease, 30, id=42)
    kv = server.kv()
    op = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
        key=b"t", value=b"v", lease=42))
    assert kv.Txn(rpc_pb2.TxnRequest(success=[op]), timeout=10).succeeded
    t = lease.LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(ID=42,
                                                             keys=True),
                              timeout=10)
    assert (t.ID, t.grantedTTL, list(t.keys)) == (42, 30, [b"t"])
    assert 29 <= t.TTL <= 30
    lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=42), timeout=10)
    assert kv.Range(rpc_pb2.RangeRequest(key=b"t"), timeout=10).count == 0


def test_time_to_live_unknown(server, lease):
    t = lease.LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(ID=5, keys=True),
                              timeout=10)
    assert (t.ID, t.TTL, t.grantedTTL, list(t.keys)) == (5, -1, 0, [])
    assert t.header.member_id != 0


def test_leases(server, lease):
    r = lease.LeaseLeases(rpc_pb2.LeaseLeasesRequest(), timeout=10)
    assert list(r.leases) == []
    grant(lease, 50, id=3)
    grant(lease, 20, id=4)
    r = lease.LeaseLeases(rpc_pb2.LeaseLeasesRequest(), timeout=10)
    assert [x.ID for x in r.leases] == [4, 3]  # by expiry


def test_keep_alive_stream(server, lease):
    grant(lease, 10, id=1)
    grant(lease, 20, id=2)
    reqs = [rpc_pb2.LeaseKeepAliveRequest(ID=i) for i in (1, 2, 77, 1)]
    got = list(lease.LeaseKeepAlive(iter(reqs), timeout=10))
    assert sorted((r.ID, r.TTL) for r in got) == \
        sorted([(1, 10), (2, 20), (77, 0), (1, 10)])
    assert all(r.header.member_id != 0 for r in got)


def test_python_etcd3_lease_refresh(server):
    c = server.client()
    lz = c.lease(10, lease_id=0x55)
    assert (lz.id, lz.granted_ttl) == (0x55, 10)
    c.put("pk", "v", lease=lz)
    c.put("pk2", "v", lease=lz)
    r = lz.refresh()[0]
    assert (r.ID, r.TTL) == (0x55, 10)
    assert 9 <= lz.remaining_ttl <= 10
    assert sorted(lz.keys) == [b"pk", b"pk2"]
    lz.revoke()
    assert c.get("pk") == (None, None)
    assert lz.remaining_ttl == -1
