"""v3lockpb.Lock on a 3-member cluster under faults, checked with fencing
tokens (tests/common/lockcheck.py).

Goal: clients taking and releasing one lock through different members
while members are paused (SIGSTOP) and killed (-9, then restarted) never
hold it at the same time: the checker finds no overlap and the tokens
(the lock keys' create revisions) grow in holding order.

Method: 6 client threads, two per member; each attempt grants a lease of
30 s on its member, locks (client timeout 8 s), reads its key's create
revision as the token, holds 20 ms, unlocks.  A failed attempt revokes
its lease (its key goes with it; through any member that answers) and the
client moves to the next member.  Meanwhile: a follower paused 2 s, the
leader killed and restarted, another follower paused 2 s.  About 20-30 s
in all (must stay under 40 s).  Only holds whose Lock answered count;
the checker needs at least 10.
"""

import threading
import time

import grpc
import pytest

from common import lockpb
from common.lockcheck import Hold, check
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

pytestmark = pytest.mark.cluster

RUN_S = 14.0


def revoke_anywhere(c, lid):
    for m in c.members:
        if not m.running or m.paused:
            continue
        try:
            rpc_pb2_grpc.LeaseStub(m.channel()).LeaseRevoke(
                rpc_pb2.LeaseRevokeRequest(ID=lid), timeout=3)
            return
        except (grpc.RpcError, ValueError):
            m.reset_channel()


def attempt(c, m, name, history, mu):
    """One lock/unlock through m; raises grpc.RpcError on a failure."""
    lid = rpc_pb2_grpc.LeaseStub(m.channel()).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=30), timeout=3).ID
    try:
        r = lockpb.LockStub(m.channel()).Lock(
            lockpb.LockRequest(name=b"fence", lease=lid), timeout=8)
        t0 = time.monotonic()
        kv = m.kv().Range(rpc_pb2.RangeRequest(key=r.key), timeout=3).kvs
        time.sleep(0.02)
        t1 = time.monotonic()
        lockpb.LockStub(m.channel()).Unlock(
            lockpb.UnlockRequest(key=r.key), timeout=3)
        if kv:  # a hold whose key we saw: its token is known
            with mu:
                history.append(Hold(name, kv[0].create_revision, t0, t1))
    finally:
        revoke_anywhere(c, lid)


def test_lock_under_faults(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    history, mu, stop = [], threading.Lock(), threading.Event()
    failures = []

    def client(i):
        k = i % 3
        while not stop.is_set():
            m = c.members[k]
            if not m.running or m.paused:
                k = (k + 1) % 3
                time.sleep(0.05)
                continue
            try:
                attempt(c, m, "c%d" % i, history, mu)
            except (grpc.RpcError, ValueError) as e:
                # ValueError: another client closed the shared channel
                # (reset_channel) under this call
                failures.append(getattr(e, "code", lambda: "closed")())
                m.reset_channel()
                k = (k + 1) % 3

    ts = [threading.Thread(target=client, args=(i,), daemon=True)
          for i in range(6)]
    t_start = time.monotonic()
    for t in ts:
        t.start()
    time.sleep(2)
    f1 = next(m for m in c.members if m is not lead)
    c.pause(f1)
    time.sleep(2)
    c.resume(f1)
    time.sleep(1)
    lead, _ = c.wait_leader()
    c.kill(lead)
    time.sleep(2)
    c.restart(lead)
    lead2, _ = c.wait_leader()
    f2 = next(m for m in c.members if m is not lead2)
    c.pause(f2)
    time.sleep(2)
    c.resume(f2)
    time.sleep(max(0.0, RUN_S - (time.monotonic() - t_start)))
    stop.set()
    for t in ts:
        t.join(15)
    print("holds %d, failed attempts %d" % (len(history), len(failures)))
    assert len(history) >= 10, (len(history), failures)
    assert check(history) == []
