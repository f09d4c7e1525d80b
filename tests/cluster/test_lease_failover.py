"""Leases across a leader failure (lease.h, docs/ARCHITECTURE.md "Leases").

Goal: (a) a lease that a client keeps alive through a follower (which
forwards each renewal to the leader) survives kill -9 of the leader: the
lease and its key are still there after several TTLs; (b) a lease that is
no longer kept alive expires within the documented bound across a leader
failure: no earlier than its TTL after the last acknowledged keep-alive and
no later than the remaining TTL of the last checkpoint before the kill
after the new leader took over (+ the lessor tick and the polling, 1.5 s
here), so not a full TTL after it: the new leader continues the lease
from the last checkpoint;
(c) a burst of renewals on one stream to a follower is answered in full
and in order; (d) LeaseTimeToLive never answers a nonsense TTL around a
leader change (etcd #17642): asked through both survivors every 50 ms
while the leader is killed and a new one elected, each answer is an error
or a TTL in (0, granted TTL], and once the new leader is up it answers a
TTL > 0 (the lease, renewed just before the kill, lives); (e) a lease
shorter than the checkpoint interval expires within a bound independent
of the number of leader kills (issue 17: records anchored where they are
applied; test_expiry_bound_across_a_chain_of_leader_kills has its method
and numbers).

Method: 3-member clusters (cluster.py, election timeout 1 s).  (a) one
keep-alive a second on a raw LeaseKeepAlive stream to a follower, each
failure retried at once (the election may fail a few), for 3 TTLs after
the kill.  (b) --experimental-lease-checkpoint-interval=2s, a TTL of 12 s,
one keep-alive on the leader, the leader killed 6 s later, the key polled
on a survivor every 100 ms.  The last checkpoint before the kill is at
most 2.5 s old (the interval on the lessor's 0.5 s tick) and rounds up to
whole seconds, so it leaves at most 12 - (6 - 2.5) + 1 = 9.5 s: the key
must go within 9.5 + 1.5 s of the new leader's election (measured: the time a
survivor first reports a leader; an election takes 1-2 election timeouts,
more after a split vote, 2.4 s in one CI run).  Without checkpoints it
would go 12 s after the election, past the bound.  (d) a 10 s lease
renewed on the leader, one poller thread per survivor (1 s deadline a
call), the leader killed 0.5 s later, polling until each survivor has
answered 5 TTLs after a new leader was seen (at most 20 s); passes on
etcd 3.4.23 too (CETCD_TEST_AGAINST_ETCD=1).  Bounds: (a)
~25 s, (b) ~20 s, (d) ~5 s.
"""

import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

import cluster as clusterlib

pytestmark = pytest.mark.cluster


def lease_stub(m):
    return rpc_pb2_grpc.LeaseStub(m.channel())


def keep_alive_once(m, lid):
    """One renewal on a fresh stream; its TTL (0: unknown lease)."""
    it = lease_stub(m).LeaseKeepAlive(
        iter([rpc_pb2.LeaseKeepAliveRequest(ID=lid)]), timeout=10)
    return next(it).TTL


def key_kept_alive(lead, ttl, lid, key):
    """Grants lease lid of ttl seconds on lead, puts key with it and keeps
    it alive once; returns the lease's id and when that keep-alive was
    acknowledged (time.monotonic)."""
    lid = lease_stub(lead).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=ttl, ID=lid), timeout=10).ID
    lead.kv().Put(rpc_pb2.PutRequest(key=key, value=b"v", lease=lid),
                  timeout=10)
    assert keep_alive_once(lead, lid) == ttl
    return lid, time.monotonic()


def get(m, key):
    return m.kv().Range(rpc_pb2.RangeRequest(key=key), timeout=5)


def followers(c, lead):
    return [m for m in c.members if m is not lead and m.running]


def test_kept_alive_through_follower_survives_leader_kill(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    f = followers(c, lead)[0]
    ttl = 5
    lid = lease_stub(f).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=ttl, ID=0x77), timeout=10).ID
    f.kv().Put(rpc_pb2.PutRequest(key=b"held", value=b"v", lease=lid),
               timeout=10)
    assert keep_alive_once(f, lid) == ttl  # forwarded to the leader
    c.kill(lead)
    end = time.monotonic() + 3 * ttl
    renewed, failures = 0, 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            assert keep_alive_once(f, lid) == ttl
            renewed += 1
        except grpc.RpcError:
            failures += 1
            f.reset_channel()
            continue
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    assert renewed >= 2 * ttl, (renewed, failures)
    c.wait_leader(exclude=(lead,))
    for m in followers(c, lead):
        t = lease_stub(m).LeaseTimeToLive(
            rpc_pb2.LeaseTimeToLiveRequest(ID=lid, keys=True), timeout=10)
        assert t.TTL > 0 and list(t.keys) == [b"held"], t
        assert get(m, b"held").count == 1


def test_expiry_bound_across_leader_kill(make_cluster):
    if clusterlib.against_etcd():
        pytest.skip("etcd 3.4.23 has no --experimental-lease-checkpoint-"
                    "interval (and checkpoints only when asked to)")
    interval, ttl = 2.0, 12
    c = make_cluster(3, extra_args=(
        "--experimental-lease-checkpoint-interval", "2s"))
    lead, _ = c.wait_leader()
    _, acked = key_kept_alive(lead, ttl, 0x99, b"gone")
    time.sleep(6.0)
    c.kill(lead)
    killed = time.monotonic() - acked
    c.wait_leader(exclude=(lead,))
    elected = time.monotonic() - acked
    survivor = followers(c, lead)[0]
    gone = None
    while time.monotonic() - acked < ttl + 15:
        try:
            if get(survivor, b"gone").count == 0:
                gone = time.monotonic() - acked
                break
        except grpc.RpcError:
            survivor.reset_channel()
        time.sleep(0.1)
    assert gone is not None, "the lease never expired"
    # At the last checkpoint before the kill, at most: checkpoints come
    # every interval on the lessor's tick (0.5 s) and round up to seconds.
    left = ttl - (killed - interval - 0.5) + 1.0
    assert ttl <= gone <= elected + left + 1.5, (gone, elected, left)


def test_expiry_bound_across_a_chain_of_leader_kills(make_cluster):
    """Issue 17: a lease not kept alive expires within a bound that does
    not grow with the number of leader changes (docs/ARCHITECTURE.md
    "Leases"): every member anchors a lease's record at the time it
    applied it, and a new leader starts the lease from that anchor, not
    from its promotion.

    Method: 7 members (so that 3 leaders can be killed with no restart: the
    4 left are a quorum, and every survivor was up when each record
    committed), a 12 s lease (period P = 6 s, the interval at its default
    of 5 min), one keep-alive on the leader, then the leader killed 2 s
    later (before its record is due) and each next leader 4 s after its
    election (before P: no leader lives to take a periodic record), 3
    times, the key polled on a survivor every 100 ms.  Expected: the first
    new leader starts the lease from its full TTL and records it at once
    (it has no record); the next leaders start from that record's anchor,
    so the key goes about TTL after the first election.

    Bounds asserted: no earlier than the TTL after the keep-alive; no
    later than the documented bound, TTL + P + e_1 (the first election,
    measured) + 2 s (2 lessor ticks, a record's rounding up) + the
    revoking tick, the apply lags and the polling (1 s), whatever the
    number of kills;
    and, for this run's timing, no later than the first election + TTL +
    1.5 s.  Before the anchors (each new leader started the lease at its
    promotion + its record, or its full TTL with none) it went about TTL
    after the LAST election: ~26 s after the keep-alive here, past both."""
    if clusterlib.against_etcd():
        pytest.skip("etcd 3.4.23 checkpoints only with "
                    "--experimental-enable-lease-checkpoint, and only "
                    "leases longer than the interval")
    ttl, period, first, term, n_kills = 12, 6.0, 2.0, 4.0, 3
    c = make_cluster(7)
    lead, _ = c.wait_leader()
    _, acked = key_kept_alive(lead, ttl, 0x17, b"chain")
    kills = []  # (killed, elected), seconds after the keep-alive
    next_kill, gone, dead = acked + first, None, [lead]
    watch = followers(c, lead)[0]
    while gone is None and time.monotonic() - acked < 60:
        if len(kills) < n_kills and time.monotonic() >= next_kill:
            c.kill(lead)
            killed = time.monotonic()
            lead, _ = c.wait_leader(exclude=tuple(dead))
            dead.append(lead)
            kills.append((killed - acked, time.monotonic() - acked))
            watch = followers(c, lead)[0]
            next_kill = acked + kills[-1][1] + term
            continue
        try:
            if get(watch, b"chain").count == 0:
                gone = time.monotonic() - acked
        except grpc.RpcError:
            watch.reset_channel()
        time.sleep(0.1)
    assert gone is not None, ("the lease never expired", kills)
    before = [k for k in kills if k[0] < gone]
    e1 = kills[0][1] - kills[0][0]
    bound = ttl + period + e1 + 2.0 + 1.0
    # No leader between a kill and the next election: nobody revokes.
    bound = max(bound, before[-1][1] + 1.0)
    expected = kills[0][1] + ttl + 1.5
    print("gone %.1f s after the keep-alive; kills (killed, elected) %s; "
          "bound %.1f s, expected by %.1f s" % (gone, kills, bound, expected))
    assert len(before) == n_kills, (gone, kills)
    assert ttl <= gone <= min(bound, max(expected, before[-1][1] + 1.0)), \
        (gone, bound, expected, kills)


def test_burst_of_renewals_through_follower(make_cluster):
    """clientv3 sends the renewals of all its due leases at once: a burst
    of 200 on one stream to a follower is answered, every one, in order
    (the follower forwards them one at a time)."""
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    f = followers(c, lead)[0]
    for lid in (1, 2):
        lease_stub(lead).LeaseGrant(
            rpc_pb2.LeaseGrantRequest(TTL=60, ID=lid), timeout=10)
    ids = [1 + i % 2 for i in range(200)]
    got = list(lease_stub(f).LeaseKeepAlive(
        iter([rpc_pb2.LeaseKeepAliveRequest(ID=i) for i in ids]),
        timeout=60))
    assert [(r.ID, r.TTL) for r in got] == [(i, 60) for i in ids]


class _Paced:
    """A request iterator for one LeaseKeepAlive stream that keeps at most
    `window` renewals unanswered (the server's per-stream queue is 128)."""

    def __init__(self, lid, n, window=64):
        import threading
        self.lid, self.n, self.sem = lid, n, threading.Semaphore(window)

    def __iter__(self):
        for _ in range(self.n):
            self.sem.acquire()
            yield rpc_pb2.LeaseKeepAliveRequest(ID=self.lid)

    def answered(self):
        self.sem.release()


def renewals_per_second(m, lid, n):
    paced = _Paced(lid, n)
    t0 = time.monotonic()
    got = 0
    for r in lease_stub(m).LeaseKeepAlive(iter(paced), timeout=120):
        assert r.ID == lid and r.TTL == 60, r
        got += 1
        paced.answered()
    assert got == n
    return n / (time.monotonic() - t0)


def test_renewal_throughput_through_follower(make_cluster):
    """Renewals through a follower are forwarded on a kept channel to the
    leader (server/lease_forward.c, peer_ask): one round trip each, not a
    thread and a connection (80/s per stream before; etcd ~980/s).  The
    floor is far under what an idle machine gives (~2000/s through the
    test's Python peer proxy) for a loaded one.  Also: 8 streams at once
    (the old forwarder had 8 call slots in all)."""
    import threading
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    f = followers(c, lead)[0]
    lid = lease_stub(lead).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=60, ID=0x5150), timeout=10).ID
    renewals_per_second(f, lid, 200)  # warm the channels
    rate = renewals_per_second(f, lid, 3000)
    print("renewals per second through a follower: %.0f" % rate)
    assert rate > 300, rate
    rates, errs = [], []

    def one():
        try:
            rates.append(renewals_per_second(f, lid, 500))
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)
    ts = [threading.Thread(target=one) for _ in range(16)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs
    assert 16 * 500 / (time.monotonic() - t0) > 300, rates


def test_forwarded_renewal_waits_for_a_leader(make_cluster):
    """etcd's LeaseRenew waits for a leader (waitLeader) until the request
    timeout (5 s + 2 election timeouts): a renewal sent to a follower that
    knows no leader fails only then, with "etcdserver: no leader"; one
    sent while a leader is being elected is answered once there is one."""
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    f = followers(c, lead)[0]
    other = [m for m in c.members if m is not lead and m is not f][0]
    lid = lease_stub(lead).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=60, ID=0x5151), timeout=10).ID
    assert keep_alive_once(f, lid) == 60
    c.kill(lead)
    c.kill(other)
    time.sleep(2.5)  # f has lost its leader: a candidate now
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        keep_alive_once(f, lid)
    took = time.monotonic() - t0
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert e.value.details() == "etcdserver: no leader", e.value
    assert 5.0 <= took <= 9.5, took
    f.reset_channel()
    if clusterlib.against_etcd():
        return  # etcd 3.4.23 timed out the second half here ("request
        # timed out" after 7 s): its renewal loop keeps the leader it
        # found; cetcd asks again of the leader of the moment
    import threading
    out = {}

    def renew():
        t1 = time.monotonic()
        try:
            out["ttl"] = keep_alive_once(f, lid)
        except grpc.RpcError as err:
            out["err"] = err
        out["took"] = time.monotonic() - t1
    t = threading.Thread(target=renew)
    t.start()
    time.sleep(1.0)
    c.restart(other, wait=False)
    t.join(30)
    assert out.get("ttl") == 60, out
    assert out["took"] >= 0.9, out


def test_partitioned_minority_leader_cannot_expire_or_revoke(make_cluster):
    """A leader cut off from the others keeps lease time only for a
    cluster that cannot hear it: its revokes (of expired leases or asked
    by a client) never commit, so nothing is revoked by it; the majority
    elects a leader that expires the short leases within the documented
    bound (at most their full TTL from the new leader's promotion: gone
    no later than the isolation + an election + TTL + the lessor tick;
    their checkpoint, every half TTL, may make it sooner), and keeps the long
    one the old leader was asked to revoke.  After the heal the old leader
    holds what the majority decided."""
    ttl, long_ttl = 3, 120
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    ls = lease_stub(lead)
    short = [ls.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=ttl, ID=0x700 + i),
                           timeout=10).ID for i in range(3)]
    keep = ls.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=long_ttl, ID=0x7ff),
                         timeout=10).ID
    for i, lid in enumerate(short + [keep]):
        lead.kv().Put(rpc_pb2.PutRequest(key=b"k%d" % i, value=b"v",
                                         lease=lid), timeout=10)
    c.wait_converged()
    granted = time.monotonic()
    c.isolate(lead)
    isolated = time.monotonic()
    majority = followers(c, lead)
    # A client's revoke on the isolated leader cannot commit.
    with pytest.raises(grpc.RpcError):
        ls.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=keep), timeout=3)
    new, _ = c.wait_leader(among=majority, exclude=(lead,))
    # The short leases' keys go on the majority, within the bound.
    gone = None
    while time.monotonic() - isolated < ttl + 12:
        try:
            r = new.kv().Range(rpc_pb2.RangeRequest(
                key=b"k", range_end=b"l"), timeout=5)
            if [kv.key for kv in r.kvs] == [b"k3"]:
                gone = time.monotonic()
                break
        except grpc.RpcError:
            new.reset_channel()
        time.sleep(0.1)
    assert gone is not None, "the short leases never expired on the majority"
    assert gone - granted >= ttl, gone - granted
    assert gone - isolated <= ttl + c.election_ms / 1000.0 + 5.0, \
        gone - isolated
    # The isolated leader, well past the TTLs, revoked nothing: its own
    # store (a serializable read) still holds every key.
    time.sleep(max(0.0, granted + ttl + 2.0 - time.monotonic()))
    _, kvs = c.contents(lead)
    assert [kv[0] for kv in kvs] == [b"k0", b"k1", b"k2", b"k3"], kvs
    # The long lease is alive on the majority (the revoke did not commit).
    t = lease_stub(new).LeaseTimeToLive(
        rpc_pb2.LeaseTimeToLiveRequest(ID=keep, keys=True), timeout=10)
    assert t.TTL > 0 and list(t.keys) == [b"k3"], t
    c.heal()
    _, content = c.wait_converged(timeout=30)
    assert [kv[0] for kv in content] == [b"k3"], content
    lids = [x.ID for x in lease_stub(lead).LeaseLeases(
        rpc_pb2.LeaseLeasesRequest(), timeout=10).leases]
    assert lids == [keep], lids


def test_time_to_live_sane_across_leader_kill(make_cluster):
    """etcd #17642: TimeToLive answered nonsense TTLs around a leader
    change.  Every answer through a survivor, while the leader dies and a
    new one is elected, is an error (no leader, timed out, unavailable)
    or 0 < TTL <= the granted TTL, never "lease not found" (TTL -1) or a
    TTL above the grant; after the election it is a TTL > 0."""
    import threading
    ttl = 10
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    lid = lease_stub(lead).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=ttl, ID=0x1764), timeout=10).ID
    survivors = followers(c, lead)
    stop = threading.Event()
    answers = {m.name: [] for m in survivors}  # (time, TTL, granted) or
    # (time, None, (code, details))

    def poll(m):
        stub = lease_stub(m)
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                r = stub.LeaseTimeToLive(
                    rpc_pb2.LeaseTimeToLiveRequest(ID=lid), timeout=1.0)
                answers[m.name].append((t0, r.TTL, r.grantedTTL))
            except grpc.RpcError as e:
                answers[m.name].append((t0, None, (e.code(), e.details())))
            time.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))
    ts = [threading.Thread(target=poll, args=(m,)) for m in survivors]
    for t in ts:
        t.start()
    try:
        assert keep_alive_once(lead, lid) == ttl
        time.sleep(0.5)
        c.kill(lead)
        killed = time.monotonic()
        c.wait_leader(exclude=(lead,))
        elected = time.monotonic()
        deadline = elected + 20.0
        while time.monotonic() < deadline:
            if all(sum(1 for a in answers[m.name]
                       if a[0] >= elected and a[1] is not None) >= 5
                   for m in survivors):
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for t in ts:
            t.join(10)
    for name, got in answers.items():
        oks = [a for a in got if a[1] is not None]
        errs = [a for a in got if a[1] is None]
        bad = [a for a in oks if not (0 < a[1] <= ttl and a[2] == ttl)]
        assert not bad, (name, bad, killed)
        # An error is fine (no leader, timed out, unavailable), but not
        # one saying the lease is gone.
        gone = [a for a in errs if a[2][0] == grpc.StatusCode.NOT_FOUND]
        assert not gone, (name, gone)
        after = [a for a in oks if a[0] >= elected]
        assert len(after) >= 5, (name, got[-10:])
        assert got[-1][1] is not None and got[-1][1] > 0, (name, got[-5:])
        assert any(a[0] < killed for a in oks), (name, got[:5])
        print("%s: %d answers, %d errors %s, TTLs after the election %s" % (
            name, len(got), len(errs),
            sorted({(a[2][0].name, a[2][1]) for a in errs}),
            [a[1] for a in after][:8]))
