"""Watch with WithRequireLeader (gRPC metadata "hasleader: true").

Goal: as etcd 3.4.23's stream interceptor (v3rpc/interceptor.go): a Watch
stream that requires a leader ends with Unavailable "etcdserver: no
leader" once its member has had no leader for 3 looks in a row, one look
per election timeout; a stream without the metadata stays open, with its
watcher; a new stream that requires a leader is refused at once with the
same error while there is none, one without the metadata is served.

Method: a 3-member cluster (election 1000 ms); on m3, one stream with the
metadata and one without, each with a confirmed watcher; m1 and m2 are
killed; the first stream must end within 10 s, the second must still be
open 2 s later (a new watcher on it is confirmed).  Runs against real etcd
3.4.23 with CETCD_TEST_AGAINST_ETCD=1.
"""

import time

import grpc
import pytest

from common.watchstream import WatchStream

pytestmark = pytest.mark.cluster

HASLEADER = [("hasleader", "true")]


def test_watch_require_leader_ends_without_leader(make_cluster):
    c = make_cluster(3)
    c.wait_leader()
    m1, m2, m3 = c.members
    ch = grpc.insecure_channel(m3.endpoint)
    req = WatchStream(ch, metadata=HASLEADER)
    req.create(b"k")
    assert req.next().created
    plain = WatchStream(ch)
    plain.create(b"k")
    assert plain.next().created

    c.kill(m1)
    c.kill(m2)
    t0 = time.monotonic()
    e = req.ended(timeout=15)
    took = time.monotonic() - t0
    print("ended after %.2f s" % took)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert e.details() == "etcdserver: no leader"
    # etcd: 3 looks without a leader, one per election timeout (1 s), the
    # first one after m3 has noticed the loss (an election timeout).
    assert 2.0 <= took <= 10.0, took

    assert plain.none_within(2.0)
    plain.create(b"k2")
    assert plain.next().created

    late = WatchStream(ch, metadata=HASLEADER)
    late.create(b"k")
    e = late.ended(timeout=5)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert e.details() == "etcdserver: no leader"
    other = WatchStream(ch)
    other.create(b"k")
    assert other.next().created
    for w in (plain, other):
        w.close()
    ch.close()
