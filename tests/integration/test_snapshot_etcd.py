"""Maintenance.Snapshot as etcd 3.4 streams it, checked with etcd's tools.

Goal: `etcdctl snapshot save` (the real 3.4.23) from cetcd writes a file
that `etcdctl snapshot status` and `etcdctl snapshot restore` accept; the
file holds what etcd's own snapshot of the same history holds (the `key`,
`lease`, `meta` compaction and `cluster` buckets entry for entry); a real
etcd started on the restored dir serves every key with its create/mod
revision, version and lease, the old revisions above the compaction and
the leases; a save does not block writes.

Method: the same history (puts over many revisions, a txn of several
puts, deletes, leases with explicit IDs and keys, a physical compaction,
more writes after it) is applied to cetcd and to /usr/bin/etcd; both are
saved with etcdctl; both files are dumped with the project's bbolt reader
(test_bbolt dump) and compared bucket by bucket (members and consistent
index differ by nature: other ids, other raft logs).  The cetcd file is
restored and served by /usr/bin/etcd, and compared key by key with the
cetcd member.  The writer alone is checked by etcdctl snapshot status on
a database made without a server (test_bbolt sample).  Latency: puts are
timed while a save of ~30 MB runs; the numbers are printed (the machine
is shared: noisy).
"""

import json
import os
import subprocess
import threading
import time

import pytest

from conftest import ETCDCTL_BIN, run_etcdctl
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
from common.etcdfill import LEASES, fill
from common.watchstream import replay
from common.servers import ETCD_BIN, REPO

BUILD = os.environ.get("CETCD_BUILD_DIR", os.path.join(REPO, "build"))
BBOLT_TOOL = os.path.join(BUILD, "tests", "test_bbolt")


def need_tool():
    if not os.path.exists(BBOLT_TOOL):
        pytest.skip("%s not built" % BBOLT_TOOL)


def ctl(*args, timeout=60):
    """etcdctl without an endpoint (snapshot status / restore)."""
    cp = subprocess.run([ETCDCTL_BIN] + list(args), capture_output=True,
                        text=True, timeout=timeout,
                        env=dict(os.environ, ETCDCTL_API="3"))
    assert cp.returncode == 0, "etcdctl %s: %s" % (" ".join(args), cp.stderr)
    return cp.stdout


def dump(path):
    """{bucket: [(key hex, value hex)]} from the project's bbolt reader."""
    cp = subprocess.run([BBOLT_TOOL, "dump", path], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    out = {}
    for line in cp.stdout.splitlines():
        parts = line.split(" ")
        if parts[0] == "bucket":
            out.setdefault(bytes.fromhex(parts[1]).decode(), [])
            continue
        bucket = parts[0].split("/")[0]
        out[bucket].append((parts[1], parts[2] if len(parts) > 2 else ""))
    return out


def status(path):
    return json.loads(ctl("snapshot", "status", path, "-w", "json"))


def save(srv, path):
    r = run_etcdctl(srv.endpoint, "snapshot", "save", path, timeout=120)
    assert r.rc == 0, r
    return path


def all_kvs(srv, rev=0):
    r = srv.kv().Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0",
                                            revision=rev), timeout=10)
    return [(k.key, k.create_revision, k.mod_revision, k.version, k.value,
             k.lease) for k in r.kvs], r.header.revision


def test_writer_alone_accepted_by_etcdctl(tmp_path):
    need_tool()
    path = str(tmp_path / "sample.db")
    subprocess.run([BBOLT_TOOL, "sample", path, "50000"], check=True,
                   timeout=60)
    st = status(path)
    # Two keys at revisions 2 and 3, then 50000 at 4..50003; plus
    # authEnabled, authRevision, clusterVersion, consistent_index.
    assert st["revision"] == 50003
    assert st["totalKey"] == 50002 + 4
    assert st["totalSize"] == os.path.getsize(path)


def test_snapshot_matches_etcd_and_restores(make_server, tmp_path):
    need_tool()
    src = make_server()
    ref = make_server(binary=ETCD_BIN)
    c_at = fill(src)
    assert fill(ref) == c_at
    time.sleep(1)  # etcd's compaction is physical already; margin anyway
    mine = save(src, str(tmp_path / "cetcd.db"))
    theirs = save(ref, str(tmp_path / "etcd.db"))

    # etcdctl snapshot status: bbolt's tx.Check passed, etcd's definitions.
    st = status(mine)
    assert st["revision"] == src.rev()
    d = dump(mine)
    assert st["totalKey"] == sum(len(v) for v in d.values())
    assert st["totalSize"] + 32 == os.path.getsize(mine)  # sha256 trailer

    # Entry for entry what etcd holds for the same history.
    e = dump(theirs)
    assert sorted(d) == sorted(e)
    for bucket in ("key", "lease", "cluster", "alarm", "auth", "authRoles",
                   "authUsers", "members_removed"):
        assert d[bucket] == e[bucket], bucket
    # The compaction records equal; the consistent index is each member's
    # own raft index (other logs: conf changes, publishes).
    ci = b"consistent_index".hex()
    meta, emeta = dict(d["meta"]), dict(e["meta"])
    assert int(meta.pop(ci), 16) > 300 and int(emeta.pop(ci), 16) > 300
    assert meta == emeta and len(meta) == 2
    assert len(d["members"]) == 1
    assert st["revision"] == status(theirs)["revision"]

    # Restore, and a real etcd serves it.
    dst = make_server(binary=ETCD_BIN, start=False, name="r1")
    ctl("snapshot", "restore", mine, "--data-dir", dst.data_dir,
        "--name", "r1", "--initial-cluster", "r1=%s" % dst.peer_url,
        "--initial-advertise-peer-urls", dst.peer_url)
    dst.start()
    want, want_rev = all_kvs(src)
    got, got_rev = all_kvs(dst)
    assert got == want
    assert got_rev == want_rev
    for rev in (c_at, c_at + 5, want_rev - 3):
        assert all_kvs(dst, rev)[0] == all_kvs(src, rev)[0], rev
    # HashKV and a watch from the compacted revision agree too.
    def hashkv(srv):
        h = srv.maintenance().HashKV(rpc_pb2.HashKVRequest(revision=0),
                                     timeout=10)
        return h.hash, h.compact_revision
    assert hashkv(dst) == hashkv(src)
    evs = replay(src.channel(), c_at, want_rev)
    assert len(evs) > 10
    assert replay(dst.channel(), c_at, want_rev) == evs
    # Leases: restored with their keys (etcd's lessor reads the bucket).
    lease = rpc_pb2_grpc.LeaseStub(dst.channel())
    ids = sorted(x.ID for x in lease.LeaseLeases(
        rpc_pb2.LeaseLeasesRequest(), timeout=10).leases)
    assert ids == sorted(LEASES)
    for j, lid in enumerate(LEASES):
        t = lease.LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(
            ID=lid, keys=True), timeout=10)
        assert t.keys == [b"leased%d" % j]
        assert 0 < t.TTL <= 900 and t.grantedTTL == 900


def test_writes_not_blocked_during_save(make_server, tmp_path):
    srv = make_server(extra_args=["--quota-backend-bytes", str(1 << 30)])
    kv = srv.kv()
    blob = os.urandom(10000)
    for i in range(3000):  # ~30 MB
        kv.Put(rpc_pb2.PutRequest(key=b"fill%05d" % i, value=blob),
               timeout=10)
    done = threading.Event()
    lat = []

    def writer():
        ch_kv = srv.kv()
        i = 0
        while not done.is_set():
            t0 = time.monotonic()
            ch_kv.Put(rpc_pb2.PutRequest(key=b"during%d" % i, value=b"x"),
                      timeout=10)
            t1 = time.monotonic()
            lat.append((t1, t1 - t0))
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    path = save(srv, str(tmp_path / "big.db"))
    t1 = time.monotonic()
    done.set()
    t.join()
    inside = sorted(x for end, x in lat if t0 <= end <= t1)
    took = t1 - t0
    assert inside, "no put finished during the save"
    p50 = inside[len(inside) // 2]
    p99 = inside[max(0, int(len(inside) * 0.99) - 1)]
    print("snapshot of %d bytes took %.2f s (etcdctl included); %d puts "
          "meanwhile, p50 %.1f ms, p99 %.1f ms, max %.1f ms (shared "
          "machine: noisy)" % (os.path.getsize(path), took, len(inside),
                               1000 * p50, 1000 * p99, 1000 * inside[-1]))
    # Blocked writes would finish only after the save: few of them, each
    # about as long as it.  Generous margins: the machine is loaded.
    assert len(inside) >= 5
    assert p50 < took / 2
    assert status(path)["totalKey"] >= 3000


def test_etcd_wal_reader_and_import_of_a_restore(make_server, tmp_path):
    """The project's etcd WAL and snap readers read what `etcdctl snapshot
    restore` wrote, and cetcd starts on that dir (it imports it, keeping
    etcd's files untouched in member.etcd; tests/integration/
    test_import_etcd.py checks the data itself)."""
    need_tool()
    db = str(tmp_path / "sample.db")
    subprocess.run([BBOLT_TOOL, "sample", db], check=True, timeout=60)
    srv = make_server(start=False)
    if srv.binary == ETCD_BIN:
        pytest.skip("etcd starts on its own data dir")
    out = srv.data_dir
    ctl("snapshot", "restore", db, "--skip-hash-check", "--data-dir", out,
        "--name", srv.name, "--initial-cluster",
        "%s=%s" % (srv.name, srv.peer_url), "--initial-advertise-peer-urls",
        srv.peer_url)

    def tree(root):
        return sorted((os.path.relpath(os.path.join(d, f), root),
                       os.path.getsize(os.path.join(d, f)))
                      for d, _, fs in os.walk(root) for f in fs)

    before = tree(os.path.join(out, "member"))
    # The project's etcd WAL reader reads the WAL etcdctl wrote: the CRC
    # chain holds, metadata, one conf change entry, its commit, the
    # snapshot marker at index 1 (the piece an import starts from).
    wal_tool = os.path.join(BUILD, "tests", "test_etcdwal")
    cp = subprocess.run([wal_tool, "dump", os.path.join(out, "member",
                                                         "wal")],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert "metadata node" in cp.stdout
    assert "entry term 1 index 1 type 1" in cp.stdout
    assert "commit 1" in cp.stdout and "snapshot index 1 term 1" in cp.stdout
    snaps = [f for f in os.listdir(os.path.join(out, "member", "snap"))
             if f.endswith(".snap")]
    assert len(snaps) == 1
    cp = subprocess.run([wal_tool, "snap", os.path.join(
        out, "member", "snap", snaps[0])], capture_output=True, text=True,
        timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith("snap index 1 term 1 voters 1 learners 0")
    srv.start()
    assert "imported the etcd data dir" in open(srv.log_path).read()
    assert tree(os.path.join(out, "member.etcd")) == before
