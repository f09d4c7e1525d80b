"""Corruption checks: a member whose data differs is caught.

Goal (etcd 3.4's etcdserver/corrupt.go):
  --experimental-corrupt-check-time  the leader compares, every interval,
      its HashKV with every member's at the same revision; with no
      corruption no alarm is ever raised; once a member's store holds a
      value the others do not, the CORRUPT alarm is raised through raft and
      every member refuses writes "etcdserver: corrupt cluster" (reads are
      still served), until `alarm disarm`.
  --experimental-initial-corrupt-check  a member whose store differs from
      its peers' refuses to start ("found data inconsistency with peers",
      exit 1); an intact member passes ("no corruption").
Method: a 3-member cluster; a key is written and replicated; one member is
stopped (SIGTERM: a clean shutdown) and one byte string of the value is
rewritten in its LMDB file (member/db/data.mdb: LMDB keeps no checksums,
so the store opens with the changed value, as silent disk corruption
would leave it); then it is restarted.  The periodic case passes against etcd 3.4.23 as
well (CETCD_TEST_AGAINST_ETCD=1: bbolt's member/snap/db, no checksums
either).
"""
import os
import signal
import time

import grpc
import pytest

import cluster as clusterlib
from etcd3.etcdrpc import rpc_pb2 as pb

pytestmark = pytest.mark.cluster

VALUE = b"corruption-check-value-AAAAAAAAAAAA"
BAD = b"corruption-check-value-BBBBBBBBBBBB"
CORRUPT = (grpc.StatusCode.DATA_LOSS, "etcdserver: corrupt cluster")


def db_file(m):
    if clusterlib.against_etcd():
        return os.path.join(m.data_dir, "member", "snap", "db")
    return os.path.join(m.data_dir, "member", "db", "data.mdb")


def stop(m):
    """A clean stop (SIGTERM), so the store is flushed and trusted."""
    m.proc.send_signal(signal.SIGTERM)
    m.proc.wait(30)
    m.proc = None
    m.reset_channel()


def data_regions(f):
    """(offset, length) of the file's data (an LMDB map file is sparse and
    may be gigabytes long)."""
    end = os.fstat(f.fileno()).st_size
    off = 0
    while off < end:
        try:
            start = os.lseek(f.fileno(), off, os.SEEK_DATA)
        except OSError:
            return
        stop_ = os.lseek(f.fileno(), start, os.SEEK_HOLE)
        yield start, stop_ - start
        off = stop_


def corrupt(m):
    path = db_file(m)
    found = 0
    with open(path, "r+b") as f:
        for start, length in list(data_regions(f)):
            for at in range(start, start + length, 1 << 20):
                f.seek(at)
                chunk = f.read((1 << 20) + len(VALUE))
                i = chunk.find(VALUE)
                while i >= 0:
                    f.seek(at + i)
                    f.write(BAD)
                    found += 1
                    i = chunk.find(VALUE, i + 1)
    assert found > 0, "the value is not in %s" % path


def alarms(m):
    r = m.maintenance().Alarm(pb.AlarmRequest(action=pb.AlarmRequest.GET),
                              timeout=10)
    return [(a.memberID, a.alarm) for a in r.alarms]


def put_error(m):
    try:
        m.kv().Put(pb.PutRequest(key=b"after", value=b"x"), timeout=10)
        return None
    except grpc.RpcError as e:
        return (e.code(), e.details())


def write_and_replicate(c):
    kv = c.members[0].kv()
    kv.Put(pb.PutRequest(key=b"victim", value=VALUE), timeout=10)
    for i in range(5):
        kv.Put(pb.PutRequest(key=b"k%d" % i, value=b"v"), timeout=10)
    c.wait_converged()


def test_periodic_check_raises_corrupt(make_cluster):
    # The initial check (on by default in cetcd) would refuse to restart
    # the changed member: this test watches the periodic one.
    c = make_cluster(3, extra_args=["--experimental-corrupt-check-time",
                                    "1s",
                                    "--experimental-initial-corrupt-check="
                                    "false"])
    write_and_replicate(c)
    # No corruption: several passes, no alarm, writes work.
    lm, _ = c.wait_leader()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and \
            open(lm.log_path).read().count("finished peer corruption "
                                           "check") < 2:
        time.sleep(0.2)
    assert open(lm.log_path).read().count(
        "finished peer corruption check") >= 2
    assert all(alarms(m) == [] for m in c.members)
    assert put_error(c.members[0]) is None
    c.wait_converged()
    # One member's store changes while it is down.
    victim = next(m for m in c.members if m is not lm)
    stop(victim)
    corrupt(victim)
    c.spawn(victim)
    c.wait_ready(victim)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and alarms(c.members[0]) == []:
        time.sleep(0.2)
    assert (0, pb.CORRUPT) in alarms(c.members[0])
    for m in c.members:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and put_error(m) != CORRUPT:
            time.sleep(0.2)
        assert put_error(m) == CORRUPT, m.name
        # Reads are still served.
        assert m.kv().Range(pb.RangeRequest(key=b"k0"),
                            timeout=10).count == 1
    # Disarmed, writes work again.
    c.members[0].maintenance().Alarm(pb.AlarmRequest(
        action=pb.AlarmRequest.DEACTIVATE, memberID=0, alarm=pb.CORRUPT),
        timeout=10)
    assert put_error(c.members[0]) is None


@pytest.mark.skipif(clusterlib.against_etcd(), reason="not validated "
                    "against etcd: in this harness etcd 3.4's corrupted "
                    "member did not exit within 60 s (not investigated)")
def test_initial_check_refuses_corrupt_member(make_cluster):
    c = make_cluster(3, extra_args=["--experimental-initial-corrupt-check"])
    write_and_replicate(c)
    victim, good = c.members[2], c.members[1]
    # An intact member restarts and passes the check against its peers.
    stop(good)
    c.spawn(good)
    c.wait_ready(good)
    assert "succeeded on initial corruption checking: no corruption" in \
        open(good.log_path).read()
    stop(victim)
    corrupt(victim)
    c.spawn(victim)
    rc = victim.proc.wait(60)
    victim.proc = None
    assert rc != 0
    assert "found data inconsistency with peers" in \
        open(victim.log_path).read()
    # The others still serve writes: no alarm is raised by the check (a
    # new leader may be elected first: the victim may have led).
    c.wait_leader(among=[c.members[0], good])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and put_error(c.members[0]) is not None:
        time.sleep(0.2)
    assert put_error(c.members[0]) is None
    assert alarms(c.members[0]) == []


def count_in_log(m, text):
    with open(m.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace").count(text)


def compact_now(m):
    kv = m.kv()
    rev = kv.Range(pb.RangeRequest(key=b"k0"), timeout=10).header.revision
    kv.Compact(pb.CompactionRequest(revision=rev, physical=True), timeout=10)
    return rev


@pytest.mark.skipif(clusterlib.against_etcd(), reason="etcd 3.5's flags: "
                    "3.4.23 has no compaction-time hash check")
def test_compaction_check_raises_corrupt(make_cluster):
    """etcd 3.5's --experimental-compact-hash-check-enabled: the leader
    compares every member's hash at the compaction revision; a member whose
    store changed while it was down is caught at the next compaction."""
    c = make_cluster(3, extra_args=[
        "--experimental-compact-hash-check-enabled",
        "--experimental-compact-hash-check-time", "1s",
        "--experimental-initial-corrupt-check=false",
        "--experimental-corrupt-check-time", "0s"])
    write_and_replicate(c)
    lm, _ = c.wait_leader()
    # No corruption: the compaction revision is checked on every peer, no
    # alarm, and plain HashKV at it still answers "compacted" (etcd 3.4).
    compact_now(lm)
    ok = "successfully checked hash on whole cluster (2 peers)"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and count_in_log(lm, ok) < 1:
        time.sleep(0.2)
    assert count_in_log(lm, ok) == 1, lm.log_tail()
    assert all(alarms(m) == [] for m in c.members)
    with pytest.raises(grpc.RpcError) as ei:
        rev = lm.kv().Range(pb.RangeRequest(key=b"k0"),
                            timeout=10).header.revision
        lm.maintenance().HashKV(pb.HashKVRequest(revision=rev), timeout=10)
    assert ei.value.details() == \
        "etcdserver: mvcc: required revision has been compacted"
    # Several passes later the same revision was not asked again.
    time.sleep(3)
    assert count_in_log(lm, "starting compact hash check") == 1
    # One member's store changes while it is down.
    victim = next(m for m in c.members if m is not lm)
    stop(victim)
    corrupt(victim)
    c.spawn(victim)
    c.wait_ready(victim)
    assert alarms(c.members[0]) == []
    lm, _ = c.wait_leader()
    r = lm.kv().Put(pb.PutRequest(key=b"k9", value=b"v"), timeout=10)
    # Caught up (the contents differ: that is the corruption).
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and c.contents(victim)[0] < \
            r.header.revision:
        time.sleep(0.1)
    compact_now(lm)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and alarms(c.members[0]) == []:
        time.sleep(0.2)
    assert (0, pb.CORRUPT) in alarms(c.members[0])
    assert count_in_log(lm, "failed compaction hash check") >= 1
    for m in c.members:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and put_error(m) != CORRUPT:
            time.sleep(0.2)
        assert put_error(m) == CORRUPT, m.name


def test_compact_hash_check_time_must_be_positive(tmp_path):
    import subprocess
    p = subprocess.run([clusterlib.server_bin(), "--data-dir",
                        str(tmp_path / "d"),
                        "--experimental-compact-hash-check-time", "0s"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert ("--experimental-compact-hash-check-time must be >0 (set to: "
            "0s)" in p.stderr), p.stderr
