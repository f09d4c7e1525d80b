"""v3lockpb.Lock on a 3-member cluster under faults, checked with fencing
tokens (tests/common/lockcheck.py).

Goal: clients taking and releasing one lock through different members
while members are paused (SIGSTOP), killed (-9, then restarted) and cut
off from their peers (isolated) never hold it at the same time: the
checker finds no overlap and the tokens (the lock keys' create revisions)
grow in holding order; and every acquired lock is released or expires:
each hold ended with an answered Unlock, an answered revoke of its lease,
or was left to its lease, and once every lease had time to expire no
lock key ("fence/<lease id in hex>") is left on any member.

Method: 6 client threads, two per member; each attempt grants a lease of
TTL = 10 s on its member (not kept alive), locks (client timeout 6 s),
reads its key's create revision as the token, holds 20 ms, unlocks.  The
lease is then revoked in every case (its key goes with it; through any
member that answers).  A hold counts only if it ended before the lease
could have expired (less than TTL after the grant was sent: a lessor
never expires a lease before its TTL, and a new leader continues or
extends it); it is recorded with how it ended (Unlock answered, else the
revoke answered, else left to expire).  A failed attempt moves the client
to the next member; clients skip members that are down, paused or
isolated, and calls in flight on a member that becomes so fail on their
timeouts.  Each client has its own channels (closed and redialled after a
failure).  The fault schedule: a follower paused 2 s, the leader killed
and restarted, another follower paused 2 s, a follower isolated 2 s
(every peer link cut by the proxy, cluster.py) and healed, then the
leader isolated until the others elect a new one, at least 2.5 s, and
healed; 18 s of
run in all.  Then, after the clients stop, the lock's prefix is read
(linearizable, through the leader) until it is empty, for at most TTL +
5 s (every lease's expiry: TTL after the last leader change, which is
during the run, plus the lessor's tick and an election), and every member
must serve it empty (serializable) once converged; what is left goes to
the checker as `remaining`.  About 25-30 s in all (must stay under 40 s).
The checker needs at least 10 holds.
"""

import threading
import time

import grpc
import pytest

from common import lockpb
from common.lockcheck import Hold, check
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

pytestmark = pytest.mark.cluster

RUN_S = 18.0
TTL = 10
PREFIX = b"fence/"


def usable(m, isolated):
    return m.running and not m.paused and m.name not in isolated


class Channels:
    """One client's own channels to the members: closing one after a
    failure never cuts a call of another client or of the test (the
    members' shared channels are left to the harness)."""

    def __init__(self):
        self.ch = {}

    def get(self, m):
        if m.name not in self.ch:
            self.ch[m.name] = grpc.insecure_channel(m.endpoint)
        return self.ch[m.name]

    def reset(self, m):
        ch = self.ch.pop(m.name, None)
        if ch is not None:
            ch.close()

    def close(self):
        for ch in self.ch.values():
            ch.close()
        self.ch.clear()


def revoke_anywhere(c, chans, lid, isolated):
    """True once some member answered the revoke (NotFound counts: the
    lease is gone already)."""
    for m in c.members:
        if not usable(m, isolated):
            continue
        try:
            rpc_pb2_grpc.LeaseStub(chans.get(m)).LeaseRevoke(
                rpc_pb2.LeaseRevokeRequest(ID=lid), timeout=3)
            return True
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return True
            chans.reset(m)
    return False


def attempt(c, chans, m, name, history, mu, isolated):
    """One lock/unlock through m; raises grpc.RpcError on a failure."""
    ch = chans.get(m)
    t_grant = time.monotonic()
    lid = rpc_pb2_grpc.LeaseStub(ch).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=TTL), timeout=3).ID
    held, end = None, None
    try:
        r = lockpb.LockStub(ch).Lock(
            lockpb.LockRequest(name=b"fence", lease=lid), timeout=6)
        t0 = time.monotonic()
        kv = rpc_pb2_grpc.KVStub(ch).Range(
            rpc_pb2.RangeRequest(key=r.key), timeout=2).kvs
        time.sleep(0.02)
        t1 = time.monotonic()
        # a hold whose key we saw (its token is known) and that ended
        # before the lease could expire
        if kv and t1 < t_grant + TTL:
            held = (kv[0].create_revision, t0, t1)
        lockpb.LockStub(ch).Unlock(
            lockpb.UnlockRequest(key=r.key), timeout=3)
        end = "unlock"
    finally:
        revoked = revoke_anywhere(c, chans, lid, isolated)
        if held is not None:
            end = end or ("revoke" if revoked else "expire")
            with mu:
                history.append(Hold(name, *held, end=end))


def lock_keys(m, serializable):
    r = m.kv().Range(rpc_pb2.RangeRequest(
        key=PREFIX, range_end=PREFIX[:-1] + b"0",
        serializable=serializable), timeout=3)
    return [(kv.key, kv.create_revision) for kv in r.kvs]


def test_lock_under_faults(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    history, mu, stop = [], threading.Lock(), threading.Event()
    failures, isolated = [], set()

    def client(i):
        k, chans = i % 3, Channels()
        while not stop.is_set():
            m = c.members[k]
            if not usable(m, isolated):
                k = (k + 1) % 3
                time.sleep(0.05)
                continue
            try:
                attempt(c, chans, m, "c%d" % i, history, mu, isolated)
            except grpc.RpcError as e:
                failures.append((m.name, e.code().name,
                                 (e.details() or "")[:50]))
                chans.reset(m)
                k = (k + 1) % 3
                time.sleep(0.05)
        chans.close()

    log = []

    def note(what, m):
        log.append("%.1f %s %s" % (time.monotonic() - t_start, what, m.name))

    def isolate(m, seconds, new_leader=False):
        isolated.add(m.name)
        c.isolate(m)
        note("isolate", m)
        t = 0.0
        if new_leader:  # the others elect one
            _, t = c.wait_leader(exclude=(m,))
        time.sleep(max(0.0, seconds - t))
        c.heal()
        isolated.discard(m.name)
        note("heal", m)

    def pause(m, seconds):
        c.pause(m)
        note("pause", m)
        time.sleep(seconds)
        c.resume(m)
        note("resume", m)

    ts = [threading.Thread(target=client, args=(i,), daemon=True)
          for i in range(6)]
    t_start = time.monotonic()
    for t in ts:
        t.start()
    time.sleep(2)
    pause(next(m for m in c.members if m is not lead), 2)
    time.sleep(1)
    lead, _ = c.wait_leader()
    c.kill(lead)
    note("kill", lead)
    time.sleep(2)
    c.restart(lead)
    note("restarted", lead)
    lead, _ = c.wait_leader()
    pause(next(m for m in c.members if m is not lead), 2)
    time.sleep(0.5)
    lead, _ = c.wait_leader()
    isolate(next(m for m in reversed(c.members) if m is not lead), 2)
    time.sleep(1)
    lead, _ = c.wait_leader()
    isolate(lead, 2.5, new_leader=True)
    time.sleep(max(0.0, RUN_S - (time.monotonic() - t_start)))
    stop.set()
    for t in ts:
        t.join(15)
    t_stop = time.monotonic()
    print("faults: %s; run %.1f s, holds %d (%s), failed attempts %d (%s)"
          % (", ".join(log), t_stop - t_start, len(history),
             {e: sum(h.end == e for h in history)
              for e in ("unlock", "revoke", "expire")}, len(failures),
             {f: failures.count(f) for f in set(failures)}))

    # Every lock key released or expired: the prefix empties within the
    # leases' TTL (+ margin) on the leader, and every member agrees.
    left = None
    while time.monotonic() < t_stop + TTL + 5:
        try:
            lm, _ = c.wait_leader()
            left = lock_keys(lm, serializable=False)
            if not left:
                break
        except grpc.RpcError as e:
            left = e
        time.sleep(0.2)
    print("lock keys %.1f s after the clients stopped: %r" % (
        time.monotonic() - t_stop, left))
    assert isinstance(left, list), left
    if not left:
        c.wait_converged()
        left = [kv for m in c.members
                for kv in lock_keys(m, serializable=True)]
    assert len(history) >= 10, (len(history), failures)
    assert check(history, remaining=[rev for _, rev in left]) == []
