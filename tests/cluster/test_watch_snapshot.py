"""A watch on a follower that installs a snapshot (the store swap).

Goal: a follower cut off while the leader moves on by more than raft keeps
behind a snapshot catches up by installing the leader's store copy; a watch
open on it during the install keeps every guarantee (etcd's
watchableStore.Restore: the watchers are re-synced from the new store):
each event after its start arrives exactly once, in order, none invented
(tests/common/watchcheck.py over the recorded writes).

Method: a 3-member cluster with --snapshot-count 100; a prefix watch opened
on the follower, the follower isolated (peer links cut), LOG_KEEP + 1500
puts through the leader, the links healed; the follower must log the
install; more puts; the watch is read up to the last revision.  Runs against
real etcd 3.4.23 with CETCD_TEST_AGAINST_ETCD=1.
"""

import threading
import time

import pytest

from etcd3.etcdrpc import rpc_pb2

from common import watchcheck
from common.watchstream import WatchStream, record
from test_snapshot import INSTALLED, LOG_KEEP, log_text, start_log_offset

pytestmark = pytest.mark.cluster


def put_all(c, prefix, n, writes, threads=6):
    """n puts prefix<i> through whichever member leads, from a few
    threads; each acknowledged write's revision goes into writes."""
    lock = threading.Lock()
    errors = []

    def worker(k):
        for i in range(k, n, threads):
            key = ("%s%06d" % (prefix, i)).encode()
            for attempt in range(10):
                try:
                    lead, _ = c.wait_leader()
                    rev = lead.kv().Put(rpc_pb2.PutRequest(key=key, value=key),
                                        timeout=10.0).header.revision
                    with lock:
                        writes.append({"rev": rev, "ops": [
                            {"op": "put", "key": key, "value": key}]})
                    break
                except Exception as e:  # grpc.RpcError; an unknown outcome
                    if attempt == 9:   # is not retried blindly below
                        errors.append(e)
                    time.sleep(0.2)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]


def test_watch_on_follower_across_snapshot_install(make_cluster):
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, _ = c.wait_leader()
    f = next(m for m in c.members if m is not lead)
    writes = []
    put_all(c, "w/a", 200, writes)
    c.wait_converged(timeout=60.0)
    w = WatchStream(f.channel())
    w.create(b"w/", range_end=b"w0")
    created = w.next()
    assert created.created
    mark = start_log_offset(f)
    c.isolate(f)
    put_all(c, "w/b", LOG_KEEP + 1500, writes)
    c.heal()
    deadline = time.time() + 90
    while not INSTALLED.search(log_text(f)[mark:]) and time.time() < deadline:
        time.sleep(0.5)
    assert INSTALLED.search(log_text(f)[mark:]), "no snapshot install"
    put_all(c, "w/c", 100, writes)
    writes.sort(key=lambda x: x["rev"])
    last = writes[-1]["rev"]
    resps = [record(created)]
    seen = 0
    while seen < last:
        r = w.next(timeout=60)
        resps.append(record(r))
        if r.events:
            seen = r.events[-1].kv.mod_revision
    w.close()
    req = {"key": b"w/", "range_end": b"w0", "start_revision": 0,
           "filters": [], "prev_kv": False}
    watchcheck.assert_ok({"writes": writes,
                          "watches": [{"request": req, "responses": resps}]})
    got = sum(len(r["events"]) for r in resps)
    want = sum(1 for x in writes if x["rev"] > created.header.revision)
    assert got == want
