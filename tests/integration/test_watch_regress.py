"""Watch regressions: one test per etcd watch bug.

Goal: cetcd does not have the watch bugs etcd found (most by its robustness
suite) after 3.4.23: a requested progress notification ahead of the events
it vouches for (#15220), a progress request on a new watcher never answered
(#17507), a txn's events delivered twice while a watcher moves between
catch-up and live delivery (#17247), events lost on a starved stream when
compaction overtakes its watchers (#17529), the delete at a compaction
revision missing from a watch there (#18089), also across a restart and
with the watch opened together with the compaction (#19179), progress
notifications older than a future watch's start revision (#20221), and one
catching-up watcher starving the rest of its stream of progress (#20242).

Method: raw gRPC streams (tests/common/watchstream.py) against one fresh
server per test; the recorded histories go through the guarantees checker
(tests/common/watchcheck.py) where a test's claim is one of its properties.
Each test was seen to fail on a build with the fix (or the mechanism it
tests) deliberately broken.  Against etcd 3.4.23 (CETCD_TEST_AGAINST_ETCD=1)
the tests of bugs 3.4.23 still has are marked xfail: strict where the bug
shows every time, not strict where it is a race.
"""

import threading
import time

import grpc
import pytest
from etcd3.etcdrpc import rpc_pb2 as pb

from common import watchcheck
from common.servers import against_etcd
from common.watchstream import WatchStream, record

ETCD = against_etcd()


def xfail_etcd(issue, strict=True):
    return pytest.mark.xfail(ETCD, strict=strict,
                             reason="etcd 3.4.23 has #%d" % issue)


def put(server, k, v):
    return server.kv().Put(pb.PutRequest(key=k, value=v),
                           timeout=10).header.revision


def delete(server, k, end=b""):
    return server.kv().DeleteRange(pb.DeleteRangeRequest(key=k,
                                                         range_end=end),
                                   timeout=10).header.revision


def txn(server, ops):
    """One txn of ("put", k, v) / ("delete", k, end) ops; its revision."""
    req = []
    for op in ops:
        if op[0] == "put":
            req.append(pb.RequestOp(request_put=pb.PutRequest(
                key=op[1], value=op[2])))
        else:
            req.append(pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(
                key=op[1], range_end=op[2])))
    return server.kv().Txn(pb.TxnRequest(success=req),
                           timeout=10).header.revision


def compact(server, rev, physical=True):
    server.kv().Compact(pb.CompactionRequest(revision=rev,
                                             physical=physical), timeout=10)


def wops(ops):
    """txn ops in the checker's write format."""
    out = []
    for op in ops:
        if op[0] == "put":
            out.append({"op": "put", "key": op[1], "value": op[2]})
        else:
            out.append({"op": "delete", "key": op[1],
                        "range_end": op[2] or None})
    return out


def read_until(w, done, timeout=30):
    """Responses of w until done(resps) holds (AssertionError on timeout).
    done is called after each response: it must look at the new one only
    (see Finished), or a long run costs n squared."""
    resps = []
    end = time.time() + timeout
    while not done(resps):
        left = end - time.time()
        assert left > 0, "timed out after %d responses" % len(resps)
        resps.append(w.next(timeout=left))
    return resps


class Finished:
    """done() for read_until: true once each of n watch ids got an event at
    revision last, or (with cancel_ends) was canceled."""

    def __init__(self, n, last, cancel_ends=False):
        self.left = set(range(n))
        self.last = last
        self.cancel_ends = cancel_ends

    def __call__(self, resps):
        if resps:
            r = resps[-1]
            if (self.cancel_ends and r.canceled) or any(
                    e.kv.mod_revision == self.last for e in r.events):
                self.left.discard(r.watch_id)
        return not self.left


def by_watch(resps, ids):
    """The recorded responses of each watch id; a watch_id -1 progress goes
    to every watcher (the client broadcasts it)."""
    out = {i: [] for i in ids}
    for r in resps:
        if r.watch_id == -1 and not r.created and not r.events:
            for i in ids:
                out[i].append(record(r))
        elif r.watch_id in out:
            out[r.watch_id].append(record(r))
    return out


def request(key, end=None, start=0, prev_kv=False):
    return {"key": key, "range_end": end, "start_revision": start,
            "filters": [], "prev_kv": prev_kv}


def history_writes(n_txn, per, prefix, value):
    """n_txn txns of per puts under prefix: (ops list, checker writes)."""
    all_ops = []
    for t in range(n_txn):
        all_ops.append([("put", prefix + b"%03d" % i, value + b"%d" % t)
                        for i in range(per)])
    return all_ops


def write_history(server, n_txn=20, per=100, prefix=b"h/", value=b"v" * 64):
    writes = []
    for ops in history_writes(n_txn, per, prefix, value):
        writes.append({"rev": txn(server, ops), "ops": wops(ops)})
    return writes


# --- #15220 ------------------------------------------------------------------

@xfail_etcd(15220, strict=False)
def test_progress_request_after_catch_up_15220(server):
    """A progress request right after a watch from the past is answered
    only once that watcher got every event up to the progress revision."""
    writes = write_history(server)
    last = writes[-1]["rev"]
    w = WatchStream(server.channel())
    w.create(b"h/", range_end=b"h0", start_revision=2)
    w.progress()
    resps = read_until(w, lambda rs: bool(rs) and rs[-1].watch_id == -1 and
                       not rs[-1].created)
    w.close()
    got = by_watch(resps, [0])[0]
    prog = [r for r in got if r["progress"]][0]
    assert prog["header_rev"] == last
    watchcheck.assert_ok({"writes": writes, "watches": [
        {"request": request(b"h/", b"h0", 2), "responses": got}]})
    assert sum(len(r["events"]) for r in got) == 2000


# --- #17507 ------------------------------------------------------------------

def test_progress_request_new_watcher_17507(server):
    """A progress request on a stream whose only watcher is new and gets no
    events (from the past, or from now) is answered at the current
    revision.  Another stream's watchers catching up over a long history
    keep the new one waiting for its turn, so the request comes while it is
    not synced yet (the answer is deferred, then must come)."""
    writes = write_history(server)
    rev = writes[-1]["rev"]
    load = WatchStream(server.channel())
    for _ in range(40):
        load.create(b"h/", range_end=b"h0", start_revision=2)
    for start in (2, 0):
        w = WatchStream(server.channel())
        w.create(b"none", start_revision=start)
        w.progress()
        resps = read_until(w, lambda rs: bool(rs) and
                           rs[-1].watch_id == -1 and not rs[-1].created,
                           timeout=5)
        assert resps[0].created
        prog = [r for r in resps if r.watch_id == -1][0]
        assert prog.header.revision == rev and not prog.events
        w.close()
    load.close()


# --- #17247 ------------------------------------------------------------------

def test_txn_events_once_17247(server):
    """Multi-op txns (puts and deletes of several keys in one revision)
    written while watchers are created from past revisions, so that their
    catch-up meets the live delivery of those txns: every watcher gets each
    event once, every revision in one response."""
    writes, stop = [], threading.Event()

    def writer():
        i = 0
        while not stop.is_set() and i < 200:
            ops = [("put", b"t/a", b"%d" % i), ("put", b"t/b", b"%d" % i),
                   ("delete", b"t/c", b""), ("put", b"t/d%d" % (i % 7), b"x")]
            if i % 3 == 0:
                ops[2] = ("put", b"t/c", b"%d" % i)
            writes.append({"rev": txn(server, ops), "ops": wops(ops)})
            i += 1
    first = put(server, b"t/c", b"0")
    writes.append({"rev": first, "ops": wops([("put", b"t/c", b"0")])})
    t = threading.Thread(target=writer)
    t.start()
    w = WatchStream(server.channel())
    reqs = []
    for n in range(40):
        time.sleep(0.01)
        start = max(first, (writes[-1]["rev"] if writes else first) - n % 9)
        w.create(b"t/", range_end=b"t0", start_revision=start)
        reqs.append(request(b"t/", b"t0", start))
    t.join(60)
    stop.set()
    last = writes[-1]["rev"]
    resps = read_until(w, Finished(len(reqs), last))
    w.close()
    got = by_watch(resps, range(len(reqs)))
    watchcheck.assert_ok({"writes": writes, "watches": [
        {"request": reqs[i], "responses": got[i]}
        for i in range(len(reqs))]})


# --- #17529 ------------------------------------------------------------------

@xfail_etcd(17529, strict=False)
def test_starved_stream_loses_nothing_17529(server):
    """Many watchers on one stream, a client that reads nothing while
    writes fill its queue and compactions overtake its watchers: each
    watcher then gets every event from its start to the last write, or is
    canceled with a compact revision above its next event (and nothing
    before the cancel is missing).  Without prev_kv: etcd 3.4 looks a
    prev_kv up when it sends the event, and drops it when a compaction came
    in between, which is not this bug."""
    n_watch, n_put = 60, 450
    # A catch-up response may carry megabytes (etcd's clients take up to
    # 2 GiB): past grpc-python's 4 MiB default the client would refuse it.
    ch = grpc.insecure_channel(server.endpoint, options=[
        ("grpc.max_receive_message_length", -1)])
    w = WatchStream(ch, read=False)
    reqs = []
    for i in range(n_watch):
        w.create(b"s/", range_end=b"s0")
        reqs.append(request(b"s/", b"s0", 0))
    time.sleep(0.5)
    writes = []
    value = b"y" * 1024
    for i in range(n_put):
        k = b"s/%d" % (i % 20)
        writes.append({"rev": put(server, k, value + b"%d" % i),
                       "ops": [{"op": "put", "key": k,
                                "value": value + b"%d" % i}]})
        if i % 100 == 99:
            compact(server, writes[-1]["rev"] - 20)
    last = writes[-1]["rev"]
    w.start_reading()
    resps = read_until(w, Finished(n_watch, last, cancel_ends=True))
    w.close()
    ch.close()
    got = by_watch(resps, range(n_watch))
    watchcheck.assert_ok({"writes": writes, "watches": [
        {"request": reqs[i], "responses": got[i]} for i in range(n_watch)]})
    assert any(r["canceled"] for i in range(n_watch) for r in got[i]), \
        "no compaction overtook a watcher: the test did not starve it"
    for i in range(n_watch):
        evs = [e for r in got[i] for e in r["events"]]
        cancel = [r for r in got[i] if r["canceled"]]
        if not cancel:
            assert evs and evs[-1]["mod_revision"] == last, i
            continue
        nxt = (evs[-1]["mod_revision"] + 1 if evs else
               got[i][0]["header_rev"] + 1)
        assert cancel[0]["compact_revision"] > nxt, (i, cancel[0], nxt)


# --- #18089, #19179 ------------------------------------------------------------

def compaction_on_delete(server):
    """etcd's reproduction: puts, a delete at r5, a put, compact at r5."""
    put(server, b"k", b"v2")
    put(server, b"k", b"v3")
    put(server, b"k", b"v4")
    d = delete(server, b"k")
    p = put(server, b"k", b"v6")
    return d, p


def assert_delete_then_put(server, d, p):
    w = WatchStream(server.channel())
    w.create(b"k", start_revision=d)
    resps = read_until(w, lambda rs: sum(len(r.events) for r in rs) >= 2,
                       timeout=5)
    w.close()
    evs = [(e.type, e.kv.mod_revision, e.kv.value)
           for r in resps for e in r.events]
    assert evs == [(1, d, b""), (0, p, b"v6")]


@xfail_etcd(18089)
def test_watch_at_compacted_delete_18089(server):
    """A watch from the compact revision, which is a delete, gets that
    delete, then the put after it."""
    d, p = compaction_on_delete(server)
    compact(server, d)
    assert_delete_then_put(server, d, p)


@xfail_etcd(19179)
def test_watch_at_compaction_request_19179(server):
    """A watch opened on the revision of a compaction request (that
    revision deleting two keys in one txn) right as the request is made,
    and again after a restart, gets both deletes."""
    for i in range(50):
        txn(server, [("put", b"k", b"%d" % i), ("put", b"l", b"%d" % i)])
    d = txn(server, [("delete", b"k", b"m")])
    p = put(server, b"k", b"v6")
    w = WatchStream(server.channel())
    done = threading.Event()

    def compactor():
        compact(server, d, physical=False)
        done.set()
    t = threading.Thread(target=compactor)
    t.start()
    w.create(b"k", range_end=b"m", start_revision=d)
    t.join(10)
    assert done.is_set()
    resps = read_until(w, lambda rs: sum(len(r.events) for r in rs) >= 3,
                       timeout=5)
    w.close()
    evs = [(e.type, e.kv.key, e.kv.mod_revision)
           for r in resps for e in r.events]
    assert evs == [(1, b"k", d), (1, b"l", d), (0, b"k", p)]
    server.restart()
    assert_delete_then_put(server, d, p)


# --- #20221 ------------------------------------------------------------------

@xfail_etcd(20221)
def test_future_watch_no_old_progress_20221(make_server):
    """A progress_notify watch from a future revision S gets no periodic
    progress below S - 1 while the store is behind S, then its events."""
    server = make_server(extra_args=[
        "--experimental-watch-progress-notify-interval=100ms"])
    rev = put(server, b"other", b"0")
    start = rev + 3
    w = WatchStream(server.channel())
    w.create(b"f", start_revision=start, progress_notify=True)
    time.sleep(0.8)  # several progress intervals while behind S
    put(server, b"other", b"1")
    put(server, b"other", b"2")  # now at S - 1
    time.sleep(0.5)
    p = put(server, b"f", b"x")
    assert p == start
    resps = read_until(w, lambda rs: bool(rs) and bool(rs[-1].events),
                       timeout=5)
    w.close()
    assert resps[0].created
    prog = [r.header.revision for r in resps[1:] if not r.events]
    assert all(r >= start - 1 for r in prog), prog
    assert prog, "no progress once the store reached S - 1"
    got = [record(r) for r in resps]
    watchcheck.assert_ok({
        "writes": [{"rev": p, "ops": [{"op": "put", "key": b"f",
                                       "value": b"x"}]}],
        "watches": [{"request": request(b"f", None, start),
                     "responses": got}]})


# --- #20242 ------------------------------------------------------------------

@xfail_etcd(20242)
def test_slow_watcher_does_not_starve_progress_20242(server):
    """On a stream where many watchers catch up from the past, a synced
    watcher asking for progress gets a progress response of its own at the
    current revision before the catching-up ones are done (the stream-wide
    answer waits for them)."""
    writes = write_history(server, n_txn=20, per=100)
    last = writes[-1]["rev"]
    w = WatchStream(server.channel())
    w.create(b"a")  # id 0: synced, gets no events
    assert read_until(w, lambda rs: rs and rs[-1].created, timeout=5)
    for _ in range(40):
        w.create(b"h/", range_end=b"h0", start_revision=2)
    resps, own = [], None
    end = time.time() + 30
    while own is None and time.time() < end:
        w.progress()
        deadline = time.time() + 0.05
        while time.time() < deadline:
            try:
                r = w.next(timeout=max(0.001, deadline - time.time()))
            except Exception:
                break
            resps.append(r)
            if r.watch_id == 0 and not r.created and not r.events:
                own = r
                break
            assert r.watch_id != -1 or r.created, \
                "stream progress before the watcher's own: %r" % r
    assert own is not None, "watcher 0 got no progress of its own"
    assert own.header.revision == last
    # Some catching-up watcher had not finished when it came.
    finished = sum(1 for r in resps for e in r.events
                   if e.kv.mod_revision == last and e.kv.key == b"h/099")
    assert finished < 40
    w.close()
