"""A follower whose WAL disk is full stays up and catches up later.

Goal: when the disk under a follower's WAL fills up (the next segment
cannot be pre-created and the current one is written past its size until
no block is left), the follower does not stop: it keeps the Ready it
could not write and takes no part in raft meanwhile (no vote, no
acknowledgement), says so once in its log, and the other two members go
on committing writes.  Once space is freed it writes the held entries,
says so, catches up and serves every acknowledged write.  Before, the
write failed midway, the WAL was broken and the member aborted ("raft
loop failed"); etcd 3.4 exits with a fatal error too.

Method: 3 members with 8 MB WAL segments; m3's --wal-dir is a 24 MB
tmpfs holding a 6 MB filler (the space an operator frees later).  If m3
leads, leadership is moved away first.  10 kB puts go to the leader
until m3 logs the held write, then 100 more; the filler is deleted and m3
must converge with the others.  Not run against etcd (it exits).
"""

import os
import subprocess
import time

import pytest

import cluster as clusterlib
from etcd3.etcdrpc import rpc_pb2

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(clusterlib.against_etcd(),
                       reason="etcd 3.4 exits on a WAL write error"),
]

VALUE = b"w" * 10240
HELD = "no space left to write the raft log"
ROOM = "the raft log has room again"


@pytest.fixture
def wal_tmpfs(tmp_path):
    path = str(tmp_path / "m3-wal")
    os.makedirs(path, mode=0o700)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700",
                        "tmpfs", path], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % p.stderr.strip())
    yield path
    if subprocess.run(["umount", path]).returncode != 0:
        subprocess.run(["umount", "-l", path])


def log_of(m):
    with open(m.log_path, errors="replace") as f:
        return f.read()


def keys_at(m):
    """(revision, keys) served by m alone (a full Range is too large
    for the client's 4 MB message limit)."""
    r = m.kv().Range(rpc_pb2.RangeRequest(key=b"k", range_end=b"l",
                                          keys_only=True, serializable=True),
                     timeout=10)
    return r.header.revision, [x.key for x in r.kvs]


# wal_tmpfs first: it is unmounted after the cluster is closed.
def test_follower_wal_full_holds_then_catches_up(wal_tmpfs, make_cluster,
                                                 monkeypatch):
    monkeypatch.setenv("CETCD_TEST_WAL_SEGMENT_BYTES", str(8 << 20))
    wal = os.path.join(wal_tmpfs, "wal")
    filler = os.path.join(wal_tmpfs, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    os.posix_fallocate(fd, 0, 6 << 20)
    os.close(fd)
    c = make_cluster(3, start=False,
                     extra_args=["--snapshot-count", "1000000"])
    m3 = c.member("m3")
    plain_args = c.args
    c.args = lambda m: plain_args(m) + (["--wal-dir", wal] if m is m3
                                        else [])
    c.start()
    lead, _ = c.wait_leader()
    if lead is m3:
        other = c.member("m1")
        lead.maintenance().MoveLeader(
            rpc_pb2.MoveLeaderRequest(targetID=other.id), timeout=10)
        lead, _ = c.wait_leader(exclude=(m3,))
    kv = lead.kv()
    acked = []
    deadline = time.monotonic() + 240
    while HELD not in log_of(m3):
        assert time.monotonic() < deadline, "m3's WAL never filled up"
        assert m3.running, "m3 died:\n" + m3.log_tail()
        key = b"k%06d" % len(acked)
        kv.Put(rpc_pb2.PutRequest(key=key, value=VALUE), timeout=30)
        acked.append(key)
    assert len(acked) > 1000  # about 16 MB of WAL went in first
    # The others commit without m3.
    for _ in range(100):
        key = b"k%06d" % len(acked)
        kv.Put(rpc_pb2.PutRequest(key=key, value=VALUE), timeout=30)
        acked.append(key)
    assert m3.running, "m3 died:\n" + m3.log_tail()
    assert log_of(m3).count(HELD) == 1
    assert ROOM not in log_of(m3)
    os.unlink(filler)
    deadline = time.monotonic() + 60
    while ROOM not in log_of(m3):
        assert time.monotonic() < deadline, "m3 never wrote again"
        assert m3.running, "m3 died:\n" + m3.log_tail()
        time.sleep(0.1)
    want = keys_at(lead)
    assert want[1] == acked
    deadline = time.monotonic() + 60
    while keys_at(m3) != want:
        assert time.monotonic() < deadline, "m3 did not catch up"
        assert m3.running, "m3 died:\n" + m3.log_tail()
        time.sleep(0.2)
    assert "raft loop failed" not in log_of(m3)
