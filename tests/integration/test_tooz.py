"""OpenStack's coordination library tooz, and the etcd3gw client it uses,
work unchanged on the server.

tooz (Debian's python3-tooz 3.1.0) is what OpenStack services (Cinder,
Ironic, Designate, ...) take their distributed locks and service groups
from; its `etcd3+http` driver talks to etcd through the /v3 JSON gateway
with etcd3gw (python3-etcd3gw 2.0.0), its `etcd3` driver through gRPC with
python3-etcd3.

Goal, for both drivers:
  - locks: 4 coordinators x 8 critical sections, each reading a counter
    key, pausing, writing it + 1 with a plain put (no txn): the counter
    ends exact and no two holders were ever inside at once; a lock held
    by a coordinator whose heart beats stays held past twice its TTL, and
    its group membership too; a crashed coordinator's (its heart stopped)
    lock is free again and its membership gone after their TTL, not
    before;
  - groups: create (twice: GroupAlreadyExist), join with capabilities
    (twice: MemberAlreadyExist), members and capabilities as written,
    update, leave (twice: MemberNotJoined), delete of a group with
    members (GroupNotEmpty) and without, a deleted group's members
    (GroupNotCreated); with the etcd3 driver also the join and leave
    callbacks of run_watchers.
And etcd3gw's own client on the gateway: create/replace/put/get/
get_prefix/get_all with sorting, delete_prefix, transactions, leases
(ttl, keys, refresh, revoke), its lock, status and members, and its
watch: etcd3gw reads each HTTP chunk of the /v3/watch response as one
JSON message, so a server that put two watch responses in one chunk, or
split one over two, would fail it; 300 puts and a txn of two puts and a
delete are watched in revision order with their values and prev_kv, and
a watch from an old revision replays them.

tooz's etcd3gw driver needs `api_version=v3` in its URL with etcd 3.4: its
default /v3alpha/ prefix is gone from etcd 3.4's gateway (404 on etcd
3.4.23 and on cetcd alike).  In Debian, tooz 3.1.0 calls
`etcd3gw.client(..., api_path=...)`, which etcd3gw 2.0.0's helper does not
take (its Etcd3Client class does): the test gives the helper that
argument (_tooz_gateway_helper), a packaging mismatch and nothing of the
server's.  Likewise python3-etcd3 0.12's contended acquire() breaks inside
the library with Debian's tenacity 8 (its wait() signature), whatever the
server: with the etcd3 driver a blocking acquire is a loop of non-blocking
ones (take()), which still asks the server's create-revision txn each time.

Method: black box against one fresh member, also against etcd 3.4.23
(CETCD_TEST_AGAINST_ETCD=1).  About 16 s.
"""

import threading
import time
import warnings

import etcd3gw
import pytest
from etcd3gw.client import Etcd3Client
from tooz import coordination

DRIVERS = ["etcd3+http", "etcd3"]
LOCK_TTL = 2
MEMBER_TTL = 2


@pytest.fixture(autouse=True)
def _tooz_gateway_helper(monkeypatch):
    monkeypatch.setattr(etcd3gw, "client",
                        lambda **kw: Etcd3Client(**kw))
    warnings.filterwarnings("ignore", message="The etcd3 tooz driver")


def coordinator(server, driver, member, start_heart=True):
    opts = "timeout=10&lock_timeout=%d&membership_timeout=%d" % (
        LOCK_TTL, MEMBER_TTL)
    if driver == "etcd3+http":
        opts += "&api_version=v3"
    url = "%s://%s?%s" % (driver, server.endpoint, opts)
    c = coordination.get_coordinator(url, member)
    c.start(start_heart=start_heart)
    return c


def gateway(server):
    host, port = server.endpoint.split(":")
    return Etcd3Client(host=host, port=int(port), api_path="/v3/",
                       timeout=10)


def take(lock, driver, timeout):
    """lock.acquire(blocking=timeout), or for the etcd3 driver a loop of
    non-blocking acquires (see the module's docstring)."""
    if driver != "etcd3":
        return lock.acquire(blocking=timeout)
    deadline = time.monotonic() + timeout
    while not lock.acquire(blocking=False):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out: " + what
        time.sleep(0.05)


@pytest.mark.parametrize("driver", DRIVERS)
def test_tooz_lock_excludes(server, driver):
    gw = gateway(server)
    key = b"tooz-test/counter"
    gw.put(key, b"0")
    inside = [0]
    most = [0]
    errors = []
    guard = threading.Lock()

    def worker(i):
        c = coordinator(server, driver, b"w%d" % i)
        try:
            lock = c.get_lock(b"counter")
            for _ in range(8):
                assert take(lock, driver, 20), "lock not taken in 20 s"
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                n = int(gw.get(key)[0])
                time.sleep(0.01)
                gw.put(key, b"%d" % (n + 1))
                with guard:
                    inside[0] -= 1
                assert lock.release(), "release refused"
        except Exception as e:  # reported below, with the worker's number
            errors.append("worker %d: %r" % (i, e))
        finally:
            c.stop()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert not errors, errors
    assert most[0] == 1, "%d holders at once" % most[0]
    assert gw.get(key) == [b"32"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_tooz_heartbeat_and_expiry(server, driver):
    """A live coordinator's lock and membership outlast twice their TTL; a
    crashed one's (its heart stopped) go when its leases expire, not
    before."""
    alive = coordinator(server, driver, b"alive")
    dead = coordinator(server, driver, b"dead", start_heart=False)
    other = coordinator(server, driver, b"other")
    g = b"beat-" + driver.encode()
    try:
        alive.create_group(g).get()
        held = alive.get_lock(b"beat")
        lost = dead.get_lock(b"crash")
        assert held.acquire(blocking=False)
        assert lost.acquire(blocking=False)
        alive.join_group(g).get()
        dead.join_group(g).get()
        t0 = time.monotonic()
        assert other.get_members(g).get() == {b"alive", b"dead"}
        contender = other.get_lock(b"beat")
        waiter = other.get_lock(b"crash")
        freed = left = None
        while time.monotonic() < t0 + 2 * LOCK_TTL + 1:
            assert not contender.acquire(blocking=False), \
                "lock taken while its holder's heart beats"
            now = time.monotonic()
            if freed is None and waiter.acquire(blocking=False):
                freed = now - t0
            members = other.get_members(g).get()
            assert b"alive" in members, "a live member expired"
            if left is None and members == {b"alive"}:
                left = now - t0
            time.sleep(0.1)
        assert freed is not None, "lock of a stopped heart never freed"
        assert left is not None, "member of a stopped heart never left"
        assert freed >= LOCK_TTL - 0.5 and left >= MEMBER_TTL - 0.5, \
            "freed after %.2f s, left after %.2f s: TTL %d s" % (
                freed, left, LOCK_TTL)
        assert held.release() and waiter.release()
        assert contender.acquire(blocking=False) and contender.release()
    finally:
        alive.stop()
        other.stop()


@pytest.mark.parametrize("driver", DRIVERS)
def test_tooz_groups(server, driver):
    a = coordinator(server, driver, b"a")
    b = coordinator(server, driver, b"b")
    g = b"group-" + driver.encode()
    joined, left = [], []
    try:
        a.create_group(g).get()
        with pytest.raises(coordination.GroupAlreadyExist):
            b.create_group(g).get()
        if driver == "etcd3":
            a.watch_join_group(g, lambda ev: joined.append(ev.member_id))
            a.watch_leave_group(g, lambda ev: left.append(ev.member_id))
            a.run_watchers()
        a.join_group(g, b"cap-a").get()
        with pytest.raises(coordination.MemberAlreadyExist):
            a.join_group(g, b"again").get()
        b.join_group(g, b"cap-b").get()
        assert b.get_members(g).get() == {b"a", b"b"}
        assert a.get_member_capabilities(g, b"b").get() == b"cap-b"
        b.update_capabilities(g, b"cap-b2").get()
        assert a.get_member_capabilities(g, b"b").get() == b"cap-b2"
        if driver == "etcd3":
            a.run_watchers()
            assert sorted(joined) == [b"a", b"b"]
        b.leave_group(g).get()
        with pytest.raises(coordination.MemberNotJoined):
            b.leave_group(g).get()
        with pytest.raises(coordination.MemberNotJoined):
            a.get_member_capabilities(g, b"b").get()
        assert a.get_members(g).get() == {b"a"}
        if driver == "etcd3":
            a.run_watchers()
            assert left == [b"b"]
        with pytest.raises(coordination.GroupNotEmpty):
            b.delete_group(g).get()
        a.leave_group(g).get()
        b.delete_group(g).get()
        with pytest.raises(coordination.GroupNotCreated):
            a.get_members(g).get()
        with pytest.raises(coordination.GroupNotCreated):
            b.delete_group(g).get()
    finally:
        a.stop()
        b.stop()


def test_etcd3gw_client(server):
    gw = gateway(server)
    assert gw.create(b"gw/a", b"1")
    assert not gw.create(b"gw/a", b"2")
    assert gw.replace(b"gw/a", b"1", b"3")
    assert not gw.replace(b"gw/a", b"1", b"4")
    assert gw.get(b"gw/a") == [b"3"]
    for k, v in [(b"gw/c", b"x"), (b"gw/b", b"zz"), (b"gx", b"out")]:
        gw.put(k, v)
    got = gw.get_prefix(b"gw/", sort_order="descend", sort_target="key")
    assert [m["key"] for _, m in got] == [b"gw/c", b"gw/b", b"gw/a"]
    assert [v for v, _ in got] == [b"x", b"zz", b"3"]
    everything = [m["key"] for _, m in gw.get_all()]
    assert everything == [b"gw/a", b"gw/b", b"gw/c", b"gx"]
    txn = gw.transaction({
        "compare": [{"key": "Z3cvYQ==", "result": "EQUAL",
                     "target": "VALUE", "value": "Mw=="}],
        "success": [{"request_range": {"key": "Z3cvYg=="}}],
        "failure": []})
    assert txn["succeeded"] is True
    assert txn["responses"][0]["response_range"]["kvs"][0]["value"] == \
        "eno="
    assert gw.delete_prefix(b"gw/")
    assert gw.get_prefix(b"gw/") == []
    assert gw.get(b"gx") == [b"out"]

    lease = gw.lease(30)
    gw.put(b"leased/1", b"v", lease=lease)
    gw.put(b"leased/2", b"v", lease=lease)
    assert 25 <= lease.ttl() <= 30
    assert sorted(lease.keys()) == [b"leased/1", b"leased/2"]
    assert lease.refresh() == 30
    assert lease.revoke()
    assert gw.get_prefix(b"leased/") == []
    assert lease.refresh() == -1, "keepalive of a revoked lease"

    lock = gw.lock("gwlock", ttl=30)
    assert lock.acquire()
    assert lock.is_acquired()
    second = gw.lock("gwlock", ttl=30)
    assert not second.acquire()
    assert lock.refresh() == 30
    assert lock.release()
    assert not lock.is_acquired()
    assert second.acquire() and second.release()

    status = gw.status()
    assert status["header"]["member_id"] == status["leader"]
    assert len(gw.members()) == 1


def test_etcd3gw_watch(server):
    gw = gateway(server)
    start = int(gw.status()["header"]["revision"]) + 1
    events, cancel = gw.watch_prefix(b"w/", prev_kv=True)
    got = []
    done = threading.Event()

    def reader():
        for ev in events:
            got.append(ev)
            if len(got) == 303:
                done.set()
                return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    for i in range(300):
        gw.put(b"w/%03d" % (i % 7), b"v%d" % i)
    gw.transaction({"compare": [], "failure": [], "success": [
        {"request_put": {"key": "dy94", "value": "MQ=="}},
        {"request_put": {"key": "dy95", "value": "Mg=="}},
        {"request_delete_range": {"key": "dy8wMDA="}}]})
    assert done.wait(20), "%d of 303 events" % len(got)
    cancel()
    revs = [int(ev["kv"]["mod_revision"]) for ev in got[:300]]
    assert revs == list(range(start, start + 300)), "events out of order"
    for i, ev in enumerate(got[:300]):
        assert ev["kv"]["key"] == b"w/%03d" % (i % 7)
        assert ev["kv"]["value"] == b"v%d" % i
        if i >= 7:
            assert ev["prev_kv"]["value"] == "%s" % (
                etcd3gw.utils._encode(b"v%d" % (i - 7)))
    tail = got[300:]
    assert [ev["kv"]["key"] for ev in tail] == [b"w/x", b"w/y", b"w/000"]
    assert {int(ev["kv"]["mod_revision"]) for ev in tail} == {start + 300}
    assert tail[2].get("type") == "DELETE"

    # From an old revision: the history again, in order.
    ev = gw.watch_prefix_once(b"w/", timeout=10, start_revision=start)
    assert int(ev["kv"]["mod_revision"]) == start
    assert ev["kv"]["value"] == b"v0"
