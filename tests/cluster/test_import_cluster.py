"""A 3-member etcd 3.4.23 cluster moved to cetcd, the offline path (issue 21).

Goal: an operator replaces a running etcd cluster with cetcd by stopping
every etcd member and starting cetcd on each member's data dir with the
same name, peer URLs and flags, and loses no acknowledged write: after the
move every member holds every write etcd acknowledged (same value, same
revision), all three members hold the same store (revision, content,
HashKV), the history written before the load reads the same at old
revisions (and HashKV at that revision equals etcd's), leases and members
are etcd's, the cluster elects a leader and takes writes again.  Two ways
the etcd members stop: SIGTERM one after the other while the writers run
(a clean stop), and kill -9 of the leader in the middle of the load and
then of the two others (their last writes only in the WAL).  Rolling
replacement (one cetcd member among running etcd members) is not
supported: cetcd's peers do not speak etcd's raft HTTP transport; the
third test shows what happens then: the cetcd member stays out of the
cluster (it never reaches the etcd members, and they never reach it), the
two etcd members go on serving, and nothing the etcd cluster acknowledged
is lost when the rest is moved offline afterwards.

Method: tests/cluster/cluster.py starts /usr/bin/etcd as the members (free
ports, peer links through the test's proxy), common/etcdfill.py writes the
shared history, then writer threads put unique keys through all three
members and record each acknowledged put with its revision.  The members
are stopped, the cluster's binary is switched to cetcd, and each member is
started again on its own dir with the same arguments (the import of an
etcd data dir happens on that first start).
"""

import os
import signal
import threading
import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from common import etcdfill
from common.servers import ETCD_BIN, against_etcd, server_bin

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(against_etcd(), reason="moves etcd members to cetcd"),
    pytest.mark.skipif(not os.path.exists(ETCD_BIN),
                       reason="needs etcd 3.4.23 at " + ETCD_BIN),
]


class Writers:
    """Threads putting unique keys w/<thread>/<n> through the members in
    turn; acked holds (key, value, revision) of every acknowledged put."""

    def __init__(self, members, threads=4):
        self.members = members
        self.acked = []
        self.failed = 0
        self.mu = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,))
                        for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def run(self, i):
        chans = [grpc.insecure_channel(m.endpoint) for m in self.members]
        stubs = [rpc_pb2_grpc.KVStub(c) for c in chans]
        n, at = 0, i
        try:
            while not self.stop.is_set():
                key = b"w/%d/%06d" % (i, n)
                val = b"v%d" % n
                n += 1
                try:
                    r = stubs[at % len(stubs)].Put(
                        rpc_pb2.PutRequest(key=key, value=val), timeout=2)
                except grpc.RpcError:
                    with self.mu:
                        self.failed += 1
                    at += 1            # another member next time
                    time.sleep(0.02)
                    continue
                with self.mu:
                    self.acked.append((key, val, r.header.revision))
                at += 1
        finally:
            for c in chans:
                c.close()

    def count(self):
        with self.mu:
            return len(self.acked)

    def wait_acked(self, more, timeout=30):
        want = self.count() + more
        deadline = time.monotonic() + timeout
        while self.count() < want:
            assert time.monotonic() < deadline, \
                "writers stuck at %d acked (%d failed)" % (self.count(),
                                                          self.failed)
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)
        return self.acked


def stop(m, sig):
    """Stops m's process with sig and waits for it to exit."""
    if m.proc is None:
        return
    m.proc.send_signal(sig)
    try:
        m.proc.wait(timeout=30)
    except Exception:
        m.proc.kill()
        m.proc.wait()
        raise
    m.proc = None
    m.reset_channel()


def history(m, c_at):
    """What the shared history must read the same after the move: the
    store at revisions around the compaction, HashKV there, the leases."""
    ch = m.channel()
    kv = rpc_pb2_grpc.KVStub(ch)
    out = {}
    for rev in (c_at, c_at + 1, c_at + 30):
        r = kv.Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0",
                                          revision=rev), timeout=10)
        out["kvs@%d" % rev] = [(k.key, k.create_revision, k.mod_revision,
                                k.version, k.value, k.lease) for k in r.kvs]
    h = rpc_pb2_grpc.MaintenanceStub(ch).HashKV(
        rpc_pb2.HashKVRequest(revision=c_at + 30), timeout=30)
    out["hashkv@%d" % (c_at + 30)] = (h.hash, h.compact_revision)
    lease = rpc_pb2_grpc.LeaseStub(ch)
    out["leases"] = sorted(x.ID for x in lease.LeaseLeases(
        rpc_pb2.LeaseLeasesRequest(), timeout=10).leases)
    for lid in out["leases"]:
        t = lease.LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(
            ID=lid, keys=True), timeout=10)
        out["lease %x" % lid] = (t.grantedTTL, sorted(t.keys))
    return out


def members_of(m):
    r = rpc_pb2_grpc.ClusterStub(m.channel()).MemberList(
        rpc_pb2.MemberListRequest(), timeout=10)
    return sorted((x.ID, x.name, tuple(x.peerURLs), tuple(x.clientURLs))
                  for x in r.members)


def start_as_cetcd(c, members):
    """Each member started again as cetcd on its own (etcd) data dir."""
    c.binary = server_bin()
    for m in members:
        c.spawn(m)
    for m in members:
        c.wait_ready(m, timeout=60)
    for m in members:
        log = open(m.log_path, "rb").read().decode("utf-8", "replace")
        assert "imported the etcd data dir" in log, m.log_tail()
        line = log[log.index("imported the etcd data dir"):].splitlines()[0]
        print(m.name, line[line.index("raft:"):line.index("; etcd's")])
        assert os.path.isdir(os.path.join(m.data_dir, "member.etcd"))


def check_moved(c, acked, before, c_at, etcd_members):
    """Everything the move must keep, on every member."""
    leader, _ = c.wait_leader(timeout=30)
    rev, content = c.wait_converged(timeout=60)
    have = {k: (v, mod) for k, v, _, mod, _ in content}
    lost = [(k, v, r) for k, v, r in acked if have.get(k) != (v, r)]
    assert not lost, "%d of %d acknowledged writes lost or changed, e.g. " \
        "%r (have %r)" % (len(lost), len(acked), lost[0],
                          have.get(lost[0][0]))
    assert rev >= max(r for _, _, r in acked)
    hashes = set()
    for m in c.members:
        h = m.maintenance().HashKV(rpc_pb2.HashKVRequest(revision=rev),
                                   timeout=30)
        hashes.add((h.hash, h.compact_revision, h.header.revision >= rev))
        assert history(m, c_at) == before, m.name
        assert members_of(m) == etcd_members, m.name
    assert len(hashes) == 1, hashes
    # writes work, through a follower too, and every member sees them
    follower = next(m for m in c.members if m is not leader)
    r = follower.kv().Put(rpc_pb2.PutRequest(key=b"after-move", value=b"ok"),
                          timeout=10)
    assert r.header.revision == rev + 1
    for m in c.members:
        g = m.kv().Range(rpc_pb2.RangeRequest(key=b"after-move"), timeout=10)
        assert [(k.value, k.mod_revision) for k in g.kvs] == \
            [(b"ok", rev + 1)], m.name
    return rev


def filled_etcd(make_cluster):
    c = make_cluster(3, binary=ETCD_BIN)
    c_at = etcdfill.fill(c.members[0])
    before = history(c.members[0], c_at)
    etcd_members = members_of(c.members[0])
    assert len(etcd_members) == 3
    return c, c_at, before, etcd_members


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_offline_replacement_loses_no_acked_write(make_cluster, how):
    c, c_at, before, etcd_members = filled_etcd(make_cluster)
    w = Writers(c.members).start()
    try:
        w.wait_acked(150)
        if how == "sigterm":
            # one after the other, the writers running: the last member
            # stops without a quorum (its puts fail, none is acked)
            stop(c.members[0], signal.SIGTERM)
            w.wait_acked(50)     # the two others go on
            for m in c.members[1:]:
                stop(m, signal.SIGTERM)
        else:
            leader, _ = c.wait_leader()
            stop(leader, signal.SIGKILL)
            w.wait_acked(100)    # the two others elect and go on
            for m in c.members:
                stop(m, signal.SIGKILL)
    finally:
        acked = w.finish()
    assert len(acked) >= 150
    print("%s: %d puts acknowledged (%d failed) up to revision %d" % (
        how, len(acked), w.failed, max(r for _, _, r in acked)))
    start_as_cetcd(c, c.members)
    check_moved(c, acked, before, c_at, etcd_members)


def test_rolling_replacement_not_supported(make_cluster):
    """One member moved while the two others still run etcd: it cannot
    join them (no common peer transport), the etcd pair keeps serving; the
    offline move of the pair afterwards brings the third in with every
    acknowledged write."""
    c, c_at, before, etcd_members = filled_etcd(make_cluster)
    w = Writers(c.members[:2]).start()
    try:
        m3 = c.members[2]
        stop(m3, signal.SIGTERM)
        c.binary = server_bin()
        c.spawn(m3)
        w.wait_acked(100)
        time.sleep(3)                 # several election timeouts
        st = c.status(m3, timeout=2)
        # cetcd on m3: no leader; its peer calls find no cetcd peer
        # service at the etcd members' peer URLs
        assert m3.running, m3.log_tail()
        assert st is None or st.leader == 0, st
        log = open(m3.log_path, "rb").read().decode("utf-8", "replace")
        assert "unreachable" in log[log.index("imported the etcd"):], \
            m3.log_tail()
        # the etcd pair: still a leader among them, m3 never heard of
        lead, _ = c.wait_leader(among=c.members[:2], timeout=30)
        assert lead in c.members[:2]
        w.wait_acked(50)
        for m in c.members[:2]:
            stop(m, signal.SIGTERM)
    finally:
        acked = w.finish()
    # the offline path for the rest: m1 and m2 as cetcd on their dirs
    start_as_cetcd(c, c.members[:2])
    check_moved(c, acked, before, c_at, etcd_members)
