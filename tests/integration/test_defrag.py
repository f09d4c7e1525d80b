"""Online defragmentation (Maintenance.Defragment, etcdctl defrag).

Goal: a defragmentation returns the store's free pages to the file system
(the file's allocated blocks and Status.dbSize shrink, as etcd's do), while
reads and writes go on: no request fails during it, nothing written during
the copy is lost (the copy is caught up from the backend's journal), and a
kill -9 at any step of it restarts into a store holding every acknowledged
write.  etcdctl's messages are etcd's.

Method: black box.  etcdctl defrag (single member, and --cluster on three)
is compared with etcd 3.4.23's output; sizes are read with du-style
st_blocks and Status; writer threads put/overwrite/delete with a ledger of
acknowledged writes while defragmentations run (CETCD_TEST_DEFRAG_PAUSE_MS
holds the copy open so that writes pile up in the journal of a small
store); the crash test sets CETCD_TEST_CRASH_AT=<step> (the server
SIGKILLs itself there, server/defrag.c) for every named step, plus kills
at random times from outside, restarting on the same data dir each time.
"""

import json
import os
import random
import re
import subprocess
import sys
import threading
import time

import grpc
import pytest

from common.servers import ETCD_BIN
from conftest import Server, run_etcdctl
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cluster"))

MiB = 1 << 20


def db_file(srv):
    return os.path.join(srv.data_dir, "member", "db", "data.mdb")


def allocated(path):
    """What du counts: the file's blocks (it is sparse)."""
    return os.stat(path).st_blocks * 512


class Sizes:
    """dbSize and dbSizeInUse as etcdctl reads them (the python stubs'
    StatusResponse predates dbSizeInUse)."""

    def __init__(self, st):
        self.dbSize = st["dbSize"]
        self.dbSizeInUse = st["dbSizeInUse"]


def status(srv):
    out = srv.ctl("endpoint", "status", "-w", "json").out
    return Sizes(json.loads(out)[0]["Status"])


def defrag(srv, timeout=60):
    return srv.maintenance().Defragment(rpc_pb2.DefragmentRequest(),
                                        timeout=timeout)


def start_with_env(srv, env):
    """srv.start() with extra environment variables for the server."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        srv.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- etcdctl defrag ------------------------------------------------------------

def test_defrag_etcdctl_output_matches_etcd(make_server):
    outs = []
    for binary in (None, ETCD_BIN):
        srv = make_server(binary=binary)
        srv.ctl("put", "key", "val1")
        srv.ctl("put", "key", "val2")
        srv.ctl("compact", "2")
        cp = srv.ctl("defrag")
        assert cp.rc == 0
        outs.append(cp.out.replace(srv.endpoint, "EP"))
        assert srv.ctl("get", "key", "--print-value-only").out == "val2\n"
        srv.cleanup()
    assert outs[0] == outs[1] == "Finished defragmenting etcd member[EP]\n"


def test_defrag_answers_without_header_like_etcd(server):
    r = defrag(server)
    assert not r.HasField("header")  # etcd 3.4 returns DefragmentResponse{}


def test_defrag_cluster_three_members():
    from cluster import Cluster
    c = Cluster(size=3).start()
    try:
        eps = ",".join(m.endpoint for m in c.members)
        kv = c.members[0].kv()
        for i in range(50):
            kv.Put(rpc_pb2.PutRequest(key=b"k%d" % i, value=b"v" * 1000),
                   timeout=10)
        kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"k", range_end=b"l"),
                       timeout=10)
        cp = run_etcdctl(eps, "defrag", "--cluster")
        lines = cp.out.splitlines()
        assert sorted(lines) == sorted(
            "Finished defragmenting etcd member[%s]" % m.client_url
            for m in c.members), cp.out
        # The cluster goes on, with the same data on every member.
        kv.Put(rpc_pb2.PutRequest(key=b"after", value=b"x"), timeout=10)
        c.wait_converged()
        hashes = set()
        for m in c.members:
            r = m.maintenance().HashKV(rpc_pb2.HashKVRequest(), timeout=10)
            hashes.add((r.hash, r.header.revision))
        assert len(hashes) == 1, hashes
    finally:
        c.close()


# -- sizes ---------------------------------------------------------------------

def put_big(srv, n, size):
    """n values of size bytes under big/, from 4 threads (their WAL syncs
    are shared)."""
    def run(i0):
        kv = srv.kv()
        for i in range(i0, n, 4):
            kv.Put(rpc_pb2.PutRequest(key=b"big/%03d" % i, value=b"x" * size),
                   timeout=60)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def test_defrag_shrinks_file_and_db_size(make_server):
    server = make_server(extra_args=["--max-request-bytes", str(9 * MiB)])
    kv = server.kv()
    put_big(server, 6, 8 * MiB)
    kv.Put(rpc_pb2.PutRequest(key=b"keep", value=b"kept"), timeout=10)
    full = status(server)
    assert full.dbSize >= 48 * MiB
    assert full.dbSize >= full.dbSizeInUse >= 48 * MiB
    r = kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"big/",
                                                  range_end=b"big0"),
                       timeout=30)
    assert r.deleted == 6
    kv.Compact(rpc_pb2.CompactionRequest(revision=r.header.revision,
                                         physical=True), timeout=60)
    # A compaction applied in a speculative batch finishes in the next one.
    deadline = time.monotonic() + 20
    while True:
        kv.Put(rpc_pb2.PutRequest(key=b"tick", value=b"1"), timeout=10)
        compacted = status(server)
        if compacted.dbSizeInUse < 4 * MiB or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    # Like bbolt's: the file keeps its size, its pages are free.
    assert compacted.dbSize >= 48 * MiB
    assert compacted.dbSizeInUse < 4 * MiB
    blocks_before = allocated(db_file(server))
    defrag(server)
    after = status(server)
    blocks_after = allocated(db_file(server))
    assert after.dbSize < 4 * MiB
    assert after.dbSizeInUse <= after.dbSize
    # The blocks: the data, plus the room the store allocates ahead (at
    # most 64 MiB, backend.c AHEAD_BYTES; before, at least half of that
    # was left ahead of 48 MiB of pages).
    assert blocks_after < blocks_before - 12 * MiB, (blocks_before,
                                                      blocks_after)
    assert blocks_after < after.dbSize + 66 * MiB
    got = kv.Range(rpc_pb2.RangeRequest(key=b"keep"), timeout=10)
    assert got.kvs[0].value == b"kept"
    kv.Put(rpc_pb2.PutRequest(key=b"new", value=b"1"), timeout=10)
    # A restart opens the defragmented store.
    server.restart()
    got = server.kv().Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0"),
                            timeout=10)
    assert [k.key for k in got.kvs] == [b"keep", b"new", b"tick"]


# -- writes during a defragmentation ---------------------------------------------

class Ledger:
    """The acknowledged state of every key the writers touched."""

    def __init__(self):
        self.lock = threading.Lock()
        self.state = {}      # key -> value (None: deleted), acknowledged
        self.unsure = set()  # keys whose last write got no answer
        self.errors = []
        self.longest = 0.0


def writer(endpoint, wid, ledger, stop, mutate=True):
    """Puts new keys; when mutate, also overwrites and deletes its own
    earlier keys.  Stops at the first error (recorded)."""
    ch = grpc.insecure_channel(endpoint)
    kv = rpc_pb2_grpc.KVStub(ch)
    rnd = random.Random(wid)
    mine = []
    n = 0
    try:
        while not stop.is_set():
            op = rnd.random() if mutate and mine else 0.0
            if op > 0.85:
                key = rnd.choice(mine)
                req = rpc_pb2.DeleteRangeRequest(key=key)
                call, value = kv.DeleteRange, None
            elif op > 0.6:
                key = rnd.choice(mine)
                value = b"w%d-%d-over" % (wid, n)
                req = rpc_pb2.PutRequest(key=key, value=value)
                call = kv.Put
            else:
                key = b"/d/w%d/%07d" % (wid, n)
                value = b"w%d-%d" % (wid, n) + b"." * rnd.randrange(200)
                req = rpc_pb2.PutRequest(key=key, value=value)
                call = kv.Put
                mine.append(key)
            n += 1
            t0 = time.monotonic()
            try:
                call(req, timeout=10)
            except grpc.RpcError as e:
                with ledger.lock:
                    ledger.unsure.add(key)
                    ledger.errors.append(e)
                return
            dt = time.monotonic() - t0
            with ledger.lock:
                ledger.state[key] = value
                ledger.longest = max(ledger.longest, dt)
    finally:
        ch.close()


def check_ledger(srv, ledger):
    got = srv.kv().Range(rpc_pb2.RangeRequest(key=b"/d/", range_end=b"/d0"),
                         timeout=30)
    have = {k.key: k.value for k in got.kvs}
    missing = []
    for key, value in ledger.state.items():
        if key in ledger.unsure:
            continue
        if have.get(key) != value:
            missing.append((key, value, have.get(key)))
    assert not missing, missing[:5]
    return len(ledger.state)


def run_writers(srv, ledger, n, mutate=True):
    stop = threading.Event()
    ts = [threading.Thread(target=writer,
                           args=(srv.endpoint, i, ledger, stop, mutate))
          for i in range(n)]
    for t in ts:
        t.start()
    return stop, ts


def test_defrag_while_writing_loses_nothing(make_server):
    srv = make_server(start=False)
    start_with_env(srv, {"CETCD_TEST_DEFRAG_PAUSE_MS": "700"})
    ledger = Ledger()
    stop, ts = run_writers(srv, ledger, 6)
    try:
        time.sleep(0.5)
        for _ in range(3):
            defrag(srv)
            # Reads go on too.
            srv.kv().Range(rpc_pb2.RangeRequest(key=b"/d/", range_end=b"/d0",
                                                count_only=True), timeout=10)
        time.sleep(0.3)
    finally:
        stop.set()
        for t in ts:
            t.join()
    assert not ledger.errors, ledger.errors[:3]
    assert check_ledger(srv, ledger) > 100
    with open(srv.log_path) as f:
        caught = [int(m) for m in re.findall(
            r"(\d+) journal bytes caught up", f.read())]
    assert len(caught) == 3 and max(caught) > 0, caught
    # The revisions and versions the store kept are whole: a clean restart
    # reads the same keyspace back.
    before = srv.kv().Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0"),
                            timeout=30)
    srv.restart()
    after = srv.kv().Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0"),
                           timeout=30)
    assert before.kvs == after.kvs
    assert before.header.revision == after.header.revision


# -- crashes ------------------------------------------------------------------------

# The named steps (server/defrag.c), in their order.
STEPS = ["defrag-copy", "defrag-copied", "defrag-round0", "defrag-linked",
         "defrag-replayed", "defrag-swap", "defrag-renamed",
         "defrag-reopened", "defrag-swapped", "defrag-dir-synced",
         "defrag-pinned"]
RANDOM_KILLS = int(os.environ.get("CETCD_DEFRAG_RANDOM_KILLS", "11"))


def crash_round(srv, ledger, env, kill_after=None):
    """Starts srv with env, writes, defragments until the server dies (by
    its own hand at a named step, or kill -9 after kill_after s), restarts
    it and checks the ledger; the round ends with a kill -9 too (the next
    round starts from it)."""
    start_with_env(srv, env)
    stop, ts = run_writers(srv, ledger, 3, mutate=False)
    time.sleep(0.1)
    proc = srv.proc
    if kill_after is not None:
        threading.Timer(kill_after, proc.kill).start()
    try:
        for _ in range(1 if kill_after is None else 3):
            defrag(srv, timeout=20)
    except grpc.RpcError:
        pass
    if kill_after is None:
        assert proc.wait(20) == -9, "the server did not die at the step"
    proc.wait(20)
    stop.set()
    for t in ts:
        t.join()
    srv.kill()  # forget the dead process
    srv.start()
    check_ledger(srv, ledger)
    srv.kill()


def test_defrag_kill9_at_every_step_loses_nothing(make_server):
    srv = make_server(start=False)
    ledger = Ledger()
    # A store with some data and free pages, so the copy takes a while.
    srv.start()
    kv = srv.kv()
    for i in range(200):
        kv.Put(rpc_pb2.PutRequest(key=b"/pad/%d" % i, value=b"p" * 20000),
               timeout=10)
    kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"/pad/", range_end=b"/pad0"),
                   timeout=10)
    srv.stop()
    points = 0
    for step in STEPS:
        crash_round(srv, ledger, {"CETCD_TEST_CRASH_AT": step,
                                  "CETCD_TEST_DEFRAG_PAUSE_MS": "150"})
        points += 1
    rnd = random.Random(os.environ.get("CETCD_DEFRAG_SEED", "20"))
    for _ in range(RANDOM_KILLS):
        crash_round(srv, ledger, {"CETCD_TEST_DEFRAG_PAUSE_MS": "150"},
                    kill_after=rnd.uniform(0.0, 0.5))
        points += 1
    assert points >= 20
    # No copy is left behind, and the store still defragments.
    srv.start()
    assert not os.path.exists(os.path.join(srv.data_dir, "member",
                                           "db.defrag"))
    defrag(srv)
    check_ledger(srv, ledger)


def power_loss(srv):
    """What the boot guard sees after a reboot: the store was left dirty by
    an earlier boot (the page cache survives here, so nothing is torn:
    what this checks is which file the restart restores, from which pin,
    and that the WAL after that pin is still there)."""
    with open(os.path.join(srv.data_dir, "member", "db.state"), "w") as f:
        f.write("an-earlier-boot dirty\n")


# After the pause, the store's pin file still names the REPLACED store's
# file (db/prev.mdb) until the new store's pin is durable: a power loss
# there restores that file.  At "defrag-pinned" the new store's pin is it.
# At "defrag-dir-synced" either: the snap worker may have pinned the new
# store before the defrag thread got there (requests run again then).
POWER_STEPS = [("defrag-linked", ("data.mdb",)),
               ("defrag-renamed", ("prev.mdb",)),
               ("defrag-swapped", ("prev.mdb",)),
               ("defrag-dir-synced", ("prev.mdb", "data.mdb")),
               ("defrag-pinned", ("data.mdb",))]


@pytest.mark.parametrize("step,restored", POWER_STEPS)
def test_defrag_power_loss_restores_a_pinned_store(make_server, step,
                                                   restored):
    srv = make_server(start=False)
    ledger = Ledger()
    srv.start()
    kv = srv.kv()
    for i in range(100):
        kv.Put(rpc_pb2.PutRequest(key=b"/pad/%d" % i, value=b"p" * 20000),
               timeout=10)
    kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"/pad/", range_end=b"/pad0"),
                   timeout=10)
    srv.kill()
    crash_round_power(srv, ledger, step)
    log = open(srv.log_path, errors="replace").read()
    m = re.findall(r"rebuilding the store from its state pinned at index "
                   r"\d+ \(the file set aside as (\S+),", log)
    assert m and m[-1].rsplit("/", 1)[1] in restored, m
    # The restored store defragments again, and keeps everything.
    srv.start()
    defrag(srv)
    check_ledger(srv, ledger)
    assert not os.path.exists(os.path.join(srv.data_dir, "member", "db",
                                           "prev.mdb"))


def crash_round_power(srv, ledger, step):
    start_with_env(srv, {"CETCD_TEST_CRASH_AT": step,
                         "CETCD_TEST_DEFRAG_PAUSE_MS": "150"})
    stop, ts = run_writers(srv, ledger, 3, mutate=False)
    time.sleep(0.1)
    proc = srv.proc
    try:
        defrag(srv, timeout=20)
    except grpc.RpcError:
        pass
    assert proc.wait(20) == -9, "the server did not die at the step"
    stop.set()
    for t in ts:
        t.join()
    srv.kill()
    power_loss(srv)
    srv.start()
    check_ledger(srv, ledger)
    srv.kill()


def test_defrag_keeps_lease_deadlines(server):
    """The store's content is the same after a defragmentation: leases keep
    their deadlines (a reload would renew them, as a new leader does)."""
    out = server.ctl("lease", "grant", "6").out
    lease = out.split()[1]
    server.ctl("put", "--lease=%s" % lease, "leased", "v")
    time.sleep(3)
    defrag(server)
    ttl = server.ctl("lease", "timetolive", lease).out
    remaining = int(re.search(r"remaining\((-?\d+)s\)", ttl).group(1))
    assert remaining <= 3, ttl
    assert server.ctl("get", "leased", "--print-value-only").out == "v\n"
    time.sleep(remaining + 2)
    assert server.ctl("get", "leased").out == ""
