"""Leases travel in store snapshots (lease.h: the "lease" bucket).

Goal: a follower that catches up by installing the leader's store copy
holds the leases granted meanwhile and not those revoked meanwhile, as if
it had applied every entry: its LeaseLeases (answered from its own table)
lists them, and a put with such a lease proposed through it is accepted
(each member checks the lease at apply time, so a follower that missed
the grant would answer "requested lease not found").

Method: a 3-member cluster with --snapshot-count 100 (as
test_watch_snapshot.py); lease 0x50 granted before the follower is
isolated; while it is cut off lease 0x50 is revoked, lease 0x51 granted
with a key, and LOG_KEEP + 1500 puts move the leader's log past what it
keeps; the links healed, the follower must log the install.  Runs against
real etcd 3.4.23 with CETCD_TEST_AGAINST_ETCD=1.
"""

import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from test_snapshot import INSTALLED, LOG_KEEP, log_text, start_log_offset
from test_watch_snapshot import put_all

pytestmark = pytest.mark.cluster


def lease_stub(m):
    return rpc_pb2_grpc.LeaseStub(m.channel())


def settled(fn, timeout=60.0):
    """fn(), again while the member still applies what it installed
    (etcd answers "too many requests" while its apply lags)."""
    deadline = time.time() + timeout
    while True:
        try:
            return fn()
        except grpc.RpcError as e:
            if "too many requests" not in (e.details() or "") or \
                    time.time() > deadline:
                raise
            time.sleep(0.2)


def test_follower_installing_snapshot_has_the_leases(make_cluster):
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, _ = c.wait_leader()
    f = next(m for m in c.members if m is not lead)
    lease_stub(lead).LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=600, ID=0x50),
                                timeout=10)
    c.wait_converged(timeout=60.0)
    mark = start_log_offset(f)
    c.isolate(f)
    lead, _ = c.wait_leader(exclude=(f,))
    lease_stub(lead).LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=0x50),
                                 timeout=10)
    lease_stub(lead).LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=600, ID=0x51),
                                timeout=10)
    lead.kv().Put(rpc_pb2.PutRequest(key=b"lk", value=b"v", lease=0x51),
                  timeout=10)
    put_all(c, "s/", LOG_KEEP + 1500, [])
    c.heal()
    deadline = time.time() + 90
    while not INSTALLED.search(log_text(f)[mark:]) and time.time() < deadline:
        time.sleep(0.5)
    assert INSTALLED.search(log_text(f)[mark:]), "no snapshot install"
    c.wait_converged(timeout=60.0)
    ids = [x.ID for x in settled(lambda: lease_stub(f).LeaseLeases(
        rpc_pb2.LeaseLeasesRequest(), timeout=10)).leases]
    assert ids == [0x51], ids
    settled(lambda: f.kv().Put(rpc_pb2.PutRequest(key=b"lk2", value=b"v",
                                                  lease=0x51), timeout=10))
    t = settled(lambda: lease_stub(f).LeaseTimeToLive(
        rpc_pb2.LeaseTimeToLiveRequest(ID=0x51, keys=True), timeout=10))
    assert sorted(t.keys) == [b"lk", b"lk2"], t
