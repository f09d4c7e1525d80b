"""Raft snapshots of the store: a follower too far behind catches up by
receiving the leader's database, and snapshots bound the WAL.

Goal (issue 4, "a follower restarted after the leader has truncated its
log catches up by snapshot"): (a) with --snapshot-count 100, a follower is
stopped while several thousand keys are written, so the leader's log is
truncated far past the follower's last index (raft keeps 5000 entries
behind a snapshot, as etcd's snapshot-catchup-entries); restarted, the
follower catches up through a snapshot (its log says so), every member
converges to the same revision and content, and replication continues
afterwards; (b) the same, but the follower is killed with -9 while it is
catching up and restarted: it still converges; (c) with --snapshot-count
1000 and 20k writes, WAL segments are released behind snapshots: the WAL
directory stays bounded and its first segments are gone (cetcd only: it
uses the test knob CETCD_TEST_WAL_SEGMENT_BYTES for 1 MB segments).

Method: clusters from cluster.py (peer links through the test's proxy),
writes over gRPC from a few threads, convergence checked with full
serializable ranges on every member.  Runs against real etcd 3.4.23 with
CETCD_TEST_AGAINST_ETCD=1 (except (c)).
"""

import os
import re
import threading
import time

import pytest

from etcd3.etcdrpc import rpc_pb2

from cluster import against_etcd

pytestmark = pytest.mark.cluster

# Raft keeps this many entries behind a snapshot (cetcd and etcd alike).
LOG_KEEP = 5000

# What the member that installed a snapshot logs: cetcd, etcd 3.4.
INSTALLED = re.compile(r"installed snapshot of the store|"
                       r"finished applying incoming snapshot|"
                       r"received and saved database snapshot")


def write_keys(m, prefix, n, threads=6, value_bytes=20, distinct=None):
    """Puts n keys prefix/<i % distinct> through member m from a few
    threads."""
    errors = []
    value = b"v" * value_bytes

    def worker(k):
        kv = m.kv()
        for i in range(k, n, threads):
            key = ("%s/%06d" % (prefix, i % (distinct or n))).encode()
            for attempt in range(5):
                try:
                    kv.Put(rpc_pb2.PutRequest(key=key, value=value),
                           timeout=10.0)
                    break
                except Exception as e:  # grpc.RpcError
                    if attempt == 4:
                        errors.append(e)
                    time.sleep(0.2)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]


def leader_and_follower(c):
    lead, _ = c.wait_leader()
    return lead, next(m for m in c.members if m is not lead)


def log_text(m):
    with open(m.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def start_log_offset(m):
    return os.path.getsize(m.log_path) if os.path.exists(m.log_path) else 0


def converge_and_check(c, min_keys):
    rev, content = c.wait_converged(timeout=60.0)
    assert len(content) >= min_keys
    return rev, content


def test_lagging_follower_catches_up_by_snapshot(make_cluster):
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, f = leader_and_follower(c)
    write_keys(lead, "before", 200)
    converge_and_check(c, 200)
    c.kill(f)
    n = LOG_KEEP + 1500
    write_keys(lead, "while-down", n)
    mark = start_log_offset(f)
    c.restart(f, timeout=60.0)
    rev, content = converge_and_check(c, 200 + n)
    assert INSTALLED.search(log_text(f)[mark:]), \
        "the follower did not log a snapshot install"
    # It keeps replicating after the install, through any member.
    write_keys(f, "after", 300)
    rev2, content2 = converge_and_check(c, 200 + n + 300)
    assert rev2 > rev
    assert any(k.startswith(b"after/") for k, *_ in content2)
    if not against_etcd():
        snaps = os.listdir(os.path.join(f.data_dir, "member", "snap"))
        assert any(s.endswith(".snap.db") for s in snaps), snaps


def test_follower_killed_during_catch_up_still_converges(make_cluster):
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, f = leader_and_follower(c)
    write_keys(lead, "a", 100)
    c.kill(f)
    write_keys(lead, "b", LOG_KEEP + 1500, value_bytes=200)
    # Kill it at a few points of its catch-up: right away, and a little
    # later (while the snapshot is sent, staged or installed).
    for delay in (0.3, 1.0, 2.0):
        c.spawn(f)
        time.sleep(delay)
        c.kill(f)
    c.restart(f, timeout=60.0)
    converge_and_check(c, 100 + LOG_KEEP + 1500)
    write_keys(lead, "c", 100)
    converge_and_check(c, 100 + LOG_KEEP + 1500 + 100)
    # And the restarted follower restarts again cleanly from its snapshot.
    c.restart(f, timeout=60.0)
    converge_and_check(c, 100 + LOG_KEEP + 1500 + 100)


@pytest.mark.skipif(against_etcd(), reason="uses cetcd's WAL segment knob")
def test_wal_released_behind_snapshots(make_cluster, monkeypatch):
    monkeypatch.setenv("CETCD_TEST_WAL_SEGMENT_BYTES", str(1 << 20))
    c = make_cluster(3, extra_args=["--snapshot-count", "1000"])
    lead, _ = c.wait_leader()
    # 20k writes (each a raft entry) over 2000 keys: a full range of the
    # content stays under the client's 4 MB message limit.
    write_keys(lead, "k", 20000, threads=8, value_bytes=500, distinct=2000)
    converge_and_check(c, 2000)
    time.sleep(1.0)  # the last copies and releases
    for m in c.members:
        wal = os.path.join(m.data_dir, "member", "wal")
        segs = sorted(s for s in os.listdir(wal) if s.endswith(".wal"))
        first_seq = int(segs[0].split("-")[0], 16)
        last_seq = int(segs[-1].split("-")[0], 16)
        # ~12 MB of entries went through 1 MB segments; what is kept is
        # 5000 entries behind the newest snapshot, up to 1000 more per
        # snapshot period and the segment being written: about 4-6 MB.
        assert last_seq >= 9, (m.name, segs)
        assert len(segs) <= 8, (m.name, segs)
        assert first_seq >= 3, (m.name, segs)
        snaps = [s for s in os.listdir(os.path.join(m.data_dir, "member",
                                                    "snap"))
                 if s.endswith(".snap.db")]
        assert 1 <= len(snaps) <= 5, (m.name, snaps)
    # Restart one member: it replays from its snapshot marker.
    c.restart(c.members[0], timeout=60.0)
    converge_and_check(c, 2000)


@pytest.mark.skipif(against_etcd(), reason="cetcd's boot guard")
def test_store_rebuilt_from_snapshot_after_reboot_crash(make_cluster,
                                                        monkeypatch):
    """A member killed, then started as if after a machine reboot (its
    store's state file names another boot and says dirty): the store is
    set aside and rebuilt from the newest snap file plus the WAL after it,
    although the WAL no longer starts at index 1."""
    monkeypatch.setenv("CETCD_TEST_WAL_SEGMENT_BYTES", str(256 << 10))
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, f = leader_and_follower(c)
    write_keys(lead, "r", LOG_KEEP + 2000, value_bytes=200)
    rev, content = converge_and_check(c, LOG_KEEP + 2000)
    c.kill(f)
    wal = os.path.join(f.data_dir, "member", "wal")
    assert not sorted(os.listdir(wal))[0].startswith("0000000000000000-"), \
        "the WAL still starts at index 1: nothing tests the snapshot path"
    with open(os.path.join(f.data_dir, "member", "db.state"), "w") as st:
        st.write("another-boot-id dirty\n")
    mark = start_log_offset(f)
    c.restart(f, timeout=60.0)
    assert "rebuilding the store from" in log_text(f)[mark:]
    write_keys(lead, "after", 50)
    converge_and_check(c, LOG_KEEP + 2000 + 50)
