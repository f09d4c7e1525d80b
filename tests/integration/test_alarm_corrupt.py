"""The CORRUPT alarm, as etcd 3.4.23 keeps it.

Goal: while a CORRUPT alarm is active, every write (Put, DeleteRange, a Txn
that is not read-only, Compact) is answered DataLoss "etcdserver: corrupt
cluster" and changes nothing; reads and read-only txns are served; the
alarm survives a restart; `etcdctl alarm disarm` ends it and writes work
again.  Method: etcd 3.4's etcdctl cannot raise an alarm, so the test
raises it with a raw Maintenance.Alarm ACTIVATE (as any gRPC client can)
against a fresh single member, then drives it with raw gRPC and etcdctl.
Runs against etcd as well (CETCD_TEST_AGAINST_ETCD=1).
"""

import grpc

from conftest import grpc_error
from etcd3.etcdrpc import rpc_pb2 as pb

CORRUPT = (grpc.StatusCode.DATA_LOSS, "etcdserver: corrupt cluster")


def member_id(s):
    return s.maintenance().Status(pb.StatusRequest()).header.member_id


def activate(s, alarm):
    r = s.maintenance().Alarm(pb.AlarmRequest(
        action=pb.AlarmRequest.ACTIVATE, memberID=member_id(s), alarm=alarm))
    assert [(a.memberID, a.alarm) for a in r.alarms] == \
        [(member_id(s), alarm)]


def check_refused(s):
    kv = s.kv()
    assert grpc_error(kv.Put, pb.PutRequest(key=b"b", value=b"v")) == CORRUPT
    assert grpc_error(kv.DeleteRange,
                      pb.DeleteRangeRequest(key=b"a")) == CORRUPT
    put = pb.RequestOp(request_put=pb.PutRequest(key=b"b", value=b"v"))
    get = pb.RequestOp(request_range=pb.RangeRequest(key=b"a"))
    assert grpc_error(kv.Txn, pb.TxnRequest(success=[get],
                                            failure=[put])) == CORRUPT
    rev = kv.Range(pb.RangeRequest(key=b"a")).header.revision
    assert grpc_error(kv.Compact,
                      pb.CompactionRequest(revision=rev)) == CORRUPT
    r = s.ctl("put", "c", "v", check=False)
    assert r.rc != 0 and r.error_line == CORRUPT[1]
    # Nothing changed, and reads and read-only txns are served.
    r = kv.Range(pb.RangeRequest(key=b"a", range_end=b"d"))
    assert [(x.key, x.value) for x in r.kvs] == [(b"a", b"1")]
    assert r.header.revision == 2
    r = kv.Range(pb.RangeRequest(key=b"a", serializable=True))
    assert r.count == 1
    t = kv.Txn(pb.TxnRequest(success=[get]))
    assert t.succeeded
    assert t.responses[0].response_range.kvs[0].value == b"1"
    assert s.ctl("get", "a").out == "a\n1\n"


def test_corrupt_alarm_refuses_writes(make_server):
    s = make_server()
    s.kv().Put(pb.PutRequest(key=b"a", value=b"1"))
    activate(s, pb.CORRUPT)
    line = "memberID:%d alarm:CORRUPT \n" % member_id(s)
    assert s.ctl("alarm", "list").out == line
    check_refused(s)
    # The alarm is kept in the store.
    s.restart()
    assert s.ctl("alarm", "list").out == line
    check_refused(s)
    assert s.ctl("alarm", "disarm").out == line
    assert s.ctl("alarm", "list").out == ""
    assert s.ctl("put", "b", "2").out == "OK\n"
    assert s.ctl("del", "a").out == "1\n"
    assert s.kv().Range(pb.RangeRequest(key=b"b")).kvs[0].value == b"2"
