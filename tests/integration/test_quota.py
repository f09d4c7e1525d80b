"""The backend quota (--quota-backend-bytes), as etcd 3.4.23 keeps it.

Goal: a Put, or a Txn with puts, whose cost (256 bytes plus key and value)
would take the store to the quota is refused with ResourceExhausted
"etcdserver: mvcc: database space exceeded" before anything is written;
the quota is checked before the request's own checks; reads, deletes and
txns without puts go on working; a negative quota turns the check off;
a bad value is refused at start.  Method: raw gRPC against a fresh server
with a 1 MB quota, filled with 20 kB values.  Runs against etcd as well
(CETCD_TEST_AGAINST_ETCD=1).  The refusal raises the NOSPACE alarm, as in
etcd: `etcdctl alarm list` shows it, and while it is active even a small
put that fits the quota is refused, until `etcdctl alarm disarm`.  A
LeaseGrant is charged too (etcd's 64 bytes) and refused the same way.
etcd compares its bbolt file's size (Status dbSize) with the quota, cetcd
its pages in use (Status dbSizeInUse; server/quota.c says why): a fresh
store fits the 13-page quota of etcd's TestCtlV3Alarm, and compaction,
defragmentation and a disarm make room again as in etcd.
"""

import json
import subprocess

import grpc

from conftest import against_etcd, grpc_error
from common.servers import server_bin
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc

QUOTA = 1000000
VALUE = b"x" * 20000
NOSPACE = (grpc.StatusCode.RESOURCE_EXHAUSTED,
           "etcdserver: mvcc: database space exceeded")


def measure(s):
    """What the quota compares, from etcdctl's JSON (the Python stubs
    predate dbSizeInUse): etcd's dbSize, cetcd's dbSizeInUse."""
    st = json.loads(s.ctl("endpoint", "status", "-w", "json").out)[0]
    st = st["Status"]
    return st["dbSize"] if against_etcd() else st["dbSizeInUse"]


def fill(kv):
    """Puts 20 kB values until the quota refuses one; returns the count."""
    for i in range(200):
        try:
            kv.Put(pb.PutRequest(key=b"k%03d" % i, value=VALUE))
        except grpc.RpcError as e:
            assert (e.code(), e.details()) == NOSPACE
            return i
    raise AssertionError("200 puts of 20 kB fit in a 1 MB quota")


def test_put_over_quota_refused(make_server):
    s = make_server(extra_args=["--quota-backend-bytes", str(QUOTA)])
    kv = s.kv()
    n = fill(kv)
    assert n >= 10
    if not against_etcd():  # etcd's size lags: its store commits each 100 ms
        assert n <= QUOTA // len(VALUE)
    assert measure(s) + 256 + 4 + len(VALUE) >= QUOTA
    # The refused put wrote nothing; the ones before it are all there.
    r = kv.Range(pb.RangeRequest(key=b"k", range_end=b"l", keys_only=True))
    assert [x.key for x in r.kvs] == [b"k%03d" % i for i in range(n)]
    assert r.header.revision == n + 1
    assert grpc_error(kv.Put, pb.PutRequest(key=b"big", value=VALUE)) == \
        NOSPACE
    # The quota comes before the request's own checks (an empty key).
    assert grpc_error(kv.Put, pb.PutRequest(key=b"", value=VALUE)) == \
        NOSPACE
    # A txn is charged its dearer branch, puts only.
    put = pb.RequestOp(request_put=pb.PutRequest(key=b"t", value=VALUE))
    get = pb.RequestOp(request_range=pb.RangeRequest(key=b"k000"))
    assert grpc_error(kv.Txn, pb.TxnRequest(success=[get],
                                            failure=[put])) == NOSPACE
    assert kv.Range(pb.RangeRequest(key=b"t")).count == 0
    # Reads, deletes and txns without puts still work.
    delete = pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(
        key=b"k001"))
    t = kv.Txn(pb.TxnRequest(success=[get, delete]))
    assert t.succeeded and t.responses[1].response_delete_range.deleted == 1
    assert kv.DeleteRange(pb.DeleteRangeRequest(key=b"k000")).deleted == 1
    assert kv.Range(pb.RangeRequest(key=b"k", range_end=b"l",
                                    count_only=True)).count == n - 2


def status_errors(s):
    """Status.errors, from etcdctl's JSON (the Python stubs predate the
    field; etcdctl leaves it out when empty)."""
    st = json.loads(s.ctl("endpoint", "status", "-w", "json").out)[0]
    return st["Status"].get("errors", [])


def test_refusal_raises_nospace_alarm(make_server):
    s = make_server(extra_args=["--quota-backend-bytes", str(QUOTA)])
    kv = s.kv()
    lease = rpc_pb2_grpc.LeaseStub(s.channel())
    lid = lease.LeaseGrant(pb.LeaseGrantRequest(TTL=600)).ID
    kv.Put(pb.PutRequest(key=b"leased", value=b"v", lease=lid))
    assert status_errors(s) == []
    n = fill(kv)
    member = s.maintenance().Status(pb.StatusRequest()).header.member_id
    line = "memberID:%d alarm:NOSPACE \n" % member
    assert s.ctl("alarm", "list").out == line
    # Status lists the active alarm in etcd's form (AlarmMember's String).
    assert status_errors(s) == ["memberID:%d alarm:NOSPACE " % member]
    # A lease revoke is allowed while the alarm is active (etcd's capped
    # applier refuses only puts and grants), and deletes the lease's keys.
    lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=lid))
    assert kv.Range(pb.RangeRequest(key=b"leased")).count == 0
    assert grpc_error(lease.LeaseGrant, pb.LeaseGrantRequest(TTL=600)) == \
        NOSPACE
    # Room is made, but the alarm caps writes: a small put is refused...
    kv.DeleteRange(pb.DeleteRangeRequest(key=b"k", range_end=b"l"))
    r = s.ctl("put", "small", "v", check=False)
    assert r.rc != 0 and r.error_line == NOSPACE[1]
    # ...and reads, deletes and txns without puts are not.
    assert kv.Range(pb.RangeRequest(key=b"k000")).count == 0
    assert s.ctl("del", "nothing").out == "0\n"
    assert s.ctl("alarm", "disarm").out == line
    assert s.ctl("alarm", "list").out == ""
    assert status_errors(s) == []
    # Disarmed, a put is checked against the quota again: the deletes left
    # tombstones and freed nothing (no compaction), so whether it fits
    # depends on how each store counts its size (etcd's bbolt file is
    # larger); one that does not fit raises the alarm again.
    r = s.ctl("put", "small", "v", check=False)
    if r.rc == 0:
        assert r.out == "OK\n"
    else:
        assert r.error_line == NOSPACE[1]
        assert s.ctl("alarm", "list").out == line
    assert n > 0


def test_lease_grant_over_quota_refused(make_server):
    """LeaseGrant is etcd's third charged request (leaseOverhead, 64
    bytes): refused while the NOSPACE alarm is active, and, with the alarm
    disarmed, once the leases granted take the store to the quota; that
    refusal raises the alarm again, and the refused lease does not exist."""
    s = make_server(extra_args=["--quota-backend-bytes", str(QUOTA)])
    lease = rpc_pb2_grpc.LeaseStub(s.channel())
    n = fill(s.kv())
    member = s.maintenance().Status(pb.StatusRequest()).header.member_id
    line = "memberID:%d alarm:NOSPACE \n" % member
    assert s.ctl("alarm", "list").out == line
    assert grpc_error(lease.LeaseGrant,
                      pb.LeaseGrantRequest(TTL=60, ID=1)) == NOSPACE
    assert s.ctl("alarm", "disarm").out == line
    assert s.ctl("alarm", "list").out == ""
    # The fill left less room than a 20 kB put: leases fill the rest.
    for i in range(2, 20000):
        try:
            lease.LeaseGrant(pb.LeaseGrantRequest(TTL=600, ID=i), timeout=10)
        except grpc.RpcError as e:
            assert (e.code(), e.details()) == NOSPACE
            break
    else:
        raise AssertionError("20000 leases fit in the room a put left")
    assert s.ctl("alarm", "list").out == line
    ids = {x.ID for x in lease.LeaseLeases(pb.LeaseLeasesRequest()).leases}
    assert i not in ids and 1 not in ids
    assert ids == set(range(2, i))
    assert n > 0


def test_smallest_quota(make_server):
    """TestCtlV3Alarm's quota, 13 pages: a fresh store is under it (cetcd's
    extent alone was 14 pages, the free pages its pins hold), 4 KiB puts
    fill it, and compact + defrag + disarm make room for a small put."""
    quota = 13 * 4096
    s = make_server(extra_args=["--quota-backend-bytes", str(quota)])
    assert measure(s) + 256 + 8 + 64 < quota
    assert s.ctl("put", "1st_test", "a" * 64).out == "OK\n"
    kv = s.kv()
    for i in range(12):
        try:
            kv.Put(pb.PutRequest(key=b"2nd_test", value=b"b" * 4096))
        except grpc.RpcError as e:
            assert (e.code(), e.details()) == NOSPACE
            break
    else:
        raise AssertionError("12 puts of 4 KiB fit in 13 pages")
    assert i >= 1
    member = s.maintenance().Status(pb.StatusRequest()).header.member_id
    assert s.ctl("alarm", "list").out == "memberID:%d alarm:NOSPACE \n" % member
    assert s.ctl("compact", str(s.rev()), "--physical").rc == 0
    assert s.ctl("defrag").rc == 0
    s.ctl("alarm", "disarm")
    assert s.ctl("put", "4th_test", "a" * 64).out == "OK\n"
    assert measure(s) < quota


def test_negative_quota_disables_it(make_server):
    s = make_server(extra_args=["--quota-backend-bytes", "-1"])
    kv = s.kv()
    for i in range(60):  # 1.2 MB: over the quota of the test above
        kv.Put(pb.PutRequest(key=b"k%03d" % i, value=VALUE))
    assert kv.Range(pb.RangeRequest(key=b"k", range_end=b"l",
                                    count_only=True)).count == 60


def test_bad_quota_value_refused():
    p = subprocess.run([server_bin(), "--quota-backend-bytes", "1x"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert 'invalid value "1x" for flag -quota-backend-bytes' in p.stderr
