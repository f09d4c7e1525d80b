"""The v3lock and v3election services over raw gRPC.

Goal: each answer and error is etcd 3.4.23's (gRPC code and message):
Lock/Unlock, a second contender that waits until the first unlocks, a
waiter whose client goes away (its key is deleted, the next one gets the
lock), an unknown lease, lease 0 (a 60 s lease is granted), a lease that
expires while its holder waits; Campaign/Leader/Proclaim/Resign with
"election: no leader", "election: not leader" and a missing leader key;
Observe giving the leader now and at every change, in order.  A holder
whose lease expires (not kept alive) loses what it holds: a waiter on a
kept-alive lease gets the lock, a second campaigner becomes leader and
Observe reports it, within the TTL + a few seconds.

Method: a fresh single-member server per test (conftest `server`); the
stubs are tests/common/lockpb.py (no grpc_tools here).  The checks marked
"cetcd" differ from etcd 3.4.23 on purpose (see svc/lock_wait.c); the rest
pass against /usr/bin/etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import threading
import time

import grpc
import pytest

from common import lockpb
from common.servers import against_etcd
from conftest import grpc_error
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

UNKNOWN = grpc.StatusCode.UNKNOWN


def lease(server, ttl=30):
    ls = rpc_pb2_grpc.LeaseStub(server.channel())
    return ls.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=ttl), timeout=10).ID


class KeepAlive:
    """Keeps lease lid alive on one LeaseKeepAlive stream, a renewal every
    second, until stop(); ttls holds the answers."""

    def __init__(self, server, lid):
        self.lid = lid
        self.done = threading.Event()
        self.ttls = []
        stream = rpc_pb2_grpc.LeaseStub(server.channel()).LeaseKeepAlive(
            self._requests(), timeout=120)
        self.thread = threading.Thread(target=self._read, args=(stream,))
        self.thread.start()

    def _requests(self):
        while not self.done.is_set():
            yield rpc_pb2.LeaseKeepAliveRequest(ID=self.lid)
            self.done.wait(1.0)

    def _read(self, stream):
        try:
            for r in stream:
                self.ttls.append(r.TTL)
        except grpc.RpcError:
            pass  # ended by stop()

    def stop(self):
        self.done.set()
        self.thread.join(10)


def lock_stub(server):
    return lockpb.LockStub(server.channel())


def elect_stub(server):
    return lockpb.ElectionStub(server.channel())


def get(server, key):
    r = server.kv().Range(rpc_pb2.RangeRequest(key=key), timeout=10)
    return r.kvs[0] if r.kvs else None


def test_lock_unlock_and_contender(server):
    L = lock_stub(server)
    l1, l2 = lease(server), lease(server)
    r1 = L.Lock(lockpb.LockRequest(name=b"m", lease=l1), timeout=10)
    assert r1.key == b"m/%x" % l1
    kv = get(server, r1.key)
    assert kv.lease == l1 and kv.value == b""
    assert r1.header.revision == kv.create_revision
    # the same lease again: held already, same key
    again = L.Lock(lockpb.LockRequest(name=b"m", lease=l1), timeout=10)
    assert again.key == r1.key
    f = L.Lock.future(lockpb.LockRequest(name=b"m", lease=l2), timeout=20)
    time.sleep(0.7)
    assert not f.done()
    u = L.Unlock(lockpb.UnlockRequest(key=r1.key), timeout=10)
    assert u.header.revision == server.rev()
    r2 = f.result()
    assert r2.key == b"m/%x" % l2
    assert r2.header.revision >= u.header.revision
    assert get(server, r1.key) is None
    # unlock of a key that is not there: fine
    L.Unlock(lockpb.UnlockRequest(key=b"m/none"), timeout=10)


def test_lock_unknown_lease(server):
    L = lock_stub(server)
    assert grpc_error(L.Lock, lockpb.LockRequest(name=b"m", lease=12345),
                      timeout=10) == \
        (UNKNOWN, "etcdserver: requested lease not found")


def test_lock_lease_zero_gets_a_session_lease(server):
    r = lock_stub(server).Lock(lockpb.LockRequest(name=b"z"), timeout=10)
    kv = get(server, r.key)
    assert kv.lease != 0 and r.key == b"z/%x" % kv.lease
    ls = rpc_pb2_grpc.LeaseStub(server.channel())
    t = ls.LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(ID=kv.lease),
                           timeout=10)
    assert t.grantedTTL == 60


def test_waiter_that_goes_away_releases(server):
    L = lock_stub(server)
    l1, l2, l3 = lease(server), lease(server), lease(server)
    r1 = L.Lock(lockpb.LockRequest(name=b"c", lease=l1), timeout=10)
    f2 = L.Lock.future(lockpb.LockRequest(name=b"c", lease=l2), timeout=20)
    time.sleep(0.5)
    assert get(server, b"c/%x" % l2) is not None  # waiting with its key
    f2.cancel()
    deadline = time.time() + 5
    while get(server, b"c/%x" % l2) is not None and time.time() < deadline:
        time.sleep(0.05)
    assert get(server, b"c/%x" % l2) is None  # deleted when it went away
    f3 = L.Lock.future(lockpb.LockRequest(name=b"c", lease=l3), timeout=20)
    time.sleep(0.3)
    L.Unlock(lockpb.UnlockRequest(key=r1.key), timeout=10)
    assert f3.result().key == b"c/%x" % l3


@pytest.mark.skipif(against_etcd(), reason="cetcd: etcd 3.4.23 would "
                    "answer the waiter although its key is gone")
def test_lease_expiring_while_waiting_ends_the_wait(server):
    L = lock_stub(server)
    holder, short = lease(server, 60), lease(server, 2)
    L.Lock(lockpb.LockRequest(name=b"x", lease=holder), timeout=10)
    t0 = time.time()
    assert grpc_error(L.Lock, lockpb.LockRequest(name=b"x", lease=short),
                      timeout=20) == (UNKNOWN, "mutex: session is expired")
    assert time.time() - t0 < 10


def test_campaign_leader_proclaim_resign(server):
    E = elect_stub(server)
    l1, l2 = lease(server), lease(server)
    assert grpc_error(E.Leader, lockpb.LeaderRequest(name=b"e"),
                      timeout=10) == (UNKNOWN, "election: no leader")
    c = E.Campaign(lockpb.CampaignRequest(name=b"e", lease=l1, value=b"a"),
                   timeout=10)
    assert (c.leader.name, c.leader.key, c.leader.lease) == \
        (b"e", b"e/%x" % l1, l1)
    assert c.leader.rev == c.header.revision
    ld = E.Leader(lockpb.LeaderRequest(name=b"e"), timeout=10)
    assert (ld.kv.key, ld.kv.value, ld.kv.lease) == (c.leader.key, b"a", l1)
    p = E.Proclaim(lockpb.ProclaimRequest(leader=c.leader, value=b"b"),
                   timeout=10)
    assert p.header.revision == c.header.revision + 1
    assert E.Leader(lockpb.LeaderRequest(name=b"e"),
                    timeout=10).kv.value == b"b"
    f = E.Campaign.future(lockpb.CampaignRequest(name=b"e", lease=l2,
                                                 value=b"z"), timeout=20)
    time.sleep(0.5)
    assert not f.done()
    rs = E.Resign(lockpb.ResignRequest(leader=c.leader), timeout=10)
    assert rs.header.revision > p.header.revision
    c2 = f.result()
    assert c2.leader.key == b"e/%x" % l2
    # the old leader key: not leader any more
    assert grpc_error(E.Proclaim, lockpb.ProclaimRequest(
        leader=c.leader, value=b"x"), timeout=10) == \
        (UNKNOWN, "election: not leader")
    # resigning again is no error (nothing deleted)
    E.Resign(lockpb.ResignRequest(leader=c.leader), timeout=10)


def test_missing_leader_key(server):
    E = elect_stub(server)
    for fn, req in [(E.Proclaim, lockpb.ProclaimRequest(value=b"v")),
                    (E.Resign, lockpb.ResignRequest())]:
        assert grpc_error(fn, req, timeout=10) == \
            (UNKNOWN, '"leader" field must be provided')


def test_campaign_unknown_lease(server):
    assert grpc_error(elect_stub(server).Campaign, lockpb.CampaignRequest(
        name=b"e", lease=777, value=b"v"), timeout=10) == \
        (UNKNOWN, "etcdserver: requested lease not found")


def test_campaign_again_with_other_value_proclaims(server):
    E = elect_stub(server)
    l1 = lease(server)
    c = E.Campaign(lockpb.CampaignRequest(name=b"e", lease=l1, value=b"a"),
                   timeout=10)
    c2 = E.Campaign(lockpb.CampaignRequest(name=b"e", lease=l1, value=b"b"),
                    timeout=10)
    assert c2.leader.rev == c.leader.rev
    assert E.Leader(lockpb.LeaderRequest(name=b"e"),
                    timeout=10).kv.value == b"b"


def test_observe_in_order(server):
    E = elect_stub(server)
    l1, l2 = lease(server), lease(server)
    obs = E.Observe(lockpb.LeaderRequest(name=b"o"), timeout=20)
    time.sleep(0.3)  # observing with no leader yet
    c1 = E.Campaign(lockpb.CampaignRequest(name=b"o", lease=l1, value=b"1"),
                    timeout=10)
    f2 = E.Campaign.future(lockpb.CampaignRequest(name=b"o", lease=l2,
                                                  value=b"x"), timeout=20)
    for v in (b"2", b"3"):
        E.Proclaim(lockpb.ProclaimRequest(leader=c1.leader, value=v),
                   timeout=10)
    E.Resign(lockpb.ResignRequest(leader=c1.leader), timeout=10)
    c2 = f2.result()
    E.Proclaim(lockpb.ProclaimRequest(leader=c2.leader, value=b"y"),
               timeout=10)
    seen = []
    for m in obs:
        seen.append((m.kv.key, m.kv.value))
        assert m.header.revision >= m.kv.mod_revision
        if len(seen) == 5:
            break
    obs.cancel()
    k1, k2 = c1.leader.key, c2.leader.key
    assert seen == [(k1, b"1"), (k1, b"2"), (k1, b"3"), (k2, b"x"),
                    (k2, b"y")]
    # a new observer starts with the current leader
    o2 = E.Observe(lockpb.LeaderRequest(name=b"o"), timeout=10)
    assert next(o2).kv.value == b"y"
    o2.cancel()


def test_middle_waiter_goes_away(server):
    # c waits behind b, b behind a; b goes away: c now waits for a, and
    # gets the lock when a unlocks
    L = lock_stub(server)
    la, lb, lc = lease(server), lease(server), lease(server)
    ra = L.Lock(lockpb.LockRequest(name=b"w", lease=la), timeout=10)
    fb = L.Lock.future(lockpb.LockRequest(name=b"w", lease=lb), timeout=20)
    time.sleep(0.3)
    fc = L.Lock.future(lockpb.LockRequest(name=b"w", lease=lc), timeout=20)
    time.sleep(0.3)
    fb.cancel()
    time.sleep(0.5)
    assert not fc.done()  # a still holds it
    L.Unlock(lockpb.UnlockRequest(key=ra.key), timeout=10)
    assert fc.result().key == b"w/%x" % lc


def test_expired_holder_loses_the_lock(server):
    """The holder's lease (3 s, never renewed) expires: its key is deleted
    and the waiter, on a kept-alive lease, gets the lock then, not
    before."""
    L = lock_stub(server)
    ttl = 3
    t0 = time.monotonic()
    holder = lease(server, ttl)
    waiter = lease(server, 10)
    ka = KeepAlive(server, waiter)
    try:
        r1 = L.Lock(lockpb.LockRequest(name=b"exp", lease=holder),
                    timeout=10)
        f = L.Lock.future(lockpb.LockRequest(name=b"exp", lease=waiter),
                          timeout=30)
        time.sleep(1.0)
        assert not f.done()
        r2 = f.result()
        took = time.monotonic() - t0
        assert r2.key == b"exp/%x" % waiter
        assert ttl - 0.5 <= took <= ttl + 4.0, took
        assert get(server, r1.key) is None
        assert get(server, r2.key).lease == waiter
        assert ka.ttls and all(t == 10 for t in ka.ttls), ka.ttls
    finally:
        ka.stop()


def test_expired_leader_loses_the_election(server):
    """A Campaign leader on a 3 s lease, never renewed: at its expiry the
    second campaigner (kept alive) becomes leader, Leader names it, and an
    Observe stream opened before reports the first leader then the
    second."""
    E = elect_stub(server)
    ttl = 3
    obs = E.Observe(lockpb.LeaderRequest(name=b"ex"), timeout=30)
    time.sleep(0.3)  # observing with no leader yet
    t0 = time.monotonic()
    l1 = lease(server, ttl)
    l2 = lease(server, 10)
    ka = KeepAlive(server, l2)
    try:
        c1 = E.Campaign(lockpb.CampaignRequest(name=b"ex", lease=l1,
                                               value=b"a"), timeout=10)
        f2 = E.Campaign.future(lockpb.CampaignRequest(
            name=b"ex", lease=l2, value=b"b"), timeout=30)
        time.sleep(1.0)
        assert not f2.done()
        c2 = f2.result()
        took = time.monotonic() - t0
        assert c2.leader.key == b"ex/%x" % l2
        assert ttl - 0.5 <= took <= ttl + 4.0, took
        ld = E.Leader(lockpb.LeaderRequest(name=b"ex"), timeout=10)
        assert (ld.kv.key, ld.kv.value, ld.kv.lease) == \
            (c2.leader.key, b"b", l2)
        seen = []
        for m in obs:
            seen.append((m.kv.key, m.kv.value))
            if len(seen) == 2:
                break
        obs.cancel()
        assert seen == [(c1.leader.key, b"a"), (c2.leader.key, b"b")]
        # the expired leader is not leader any more
        assert grpc_error(E.Proclaim, lockpb.ProclaimRequest(
            leader=c1.leader, value=b"x"), timeout=10) == \
            (UNKNOWN, "election: not leader")
    finally:
        ka.stop()
