"""Watch over raw gRPC and python-etcd3: ids, cancel, progress, filters,
errors, a slow reader.

Goal: the Watch stream answers as etcd 3.4.23 does: automatic and chosen
watch ids, a duplicate id and an empty range refused (created + canceled
with etcd's cancel_reason, watch_id -1), cancel answered with canceled (an
unknown id: nothing), progress_request answered with watch_id -1 at the
current revision, NOPUT/NODELETE filters; a client that stops reading while
many writes happen gets every event afterwards, once and in order
(tests/common/watchcheck.py checks the recorded history), and every
control answer sent meanwhile (cancels, a create then a cancel: created
first); and
python-etcd3's watch, watch_prefix and add_watch_callback work.

Method: a fresh server per test; a WatchStream feeds requests from a queue
and collects responses on a thread.  Every expectation here was checked
against /usr/bin/etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import threading
import time

from etcd3.etcdrpc import rpc_pb2 as pb

from common import watchcheck
from common.watchstream import WatchStream, record

NOPUT = pb.WatchCreateRequest.NOPUT
NODELETE = pb.WatchCreateRequest.NODELETE


def put(server, k, v):
    return server.kv().Put(pb.PutRequest(key=k, value=v),
                           timeout=10).header.revision


def test_watch_ids_and_duplicates(server):
    w = WatchStream(server.channel())
    rev = server.rev()
    w.create(b"a")
    r = w.next()
    assert (r.created, r.watch_id, r.canceled) == (True, 0, False)
    assert r.header.revision == rev and r.header.cluster_id != 0
    assert r.header.member_id != 0 and r.header.raft_term >= 1
    w.create(b"a")
    assert w.next().watch_id == 1
    w.create(b"b", watch_id=7)
    r = w.next()
    assert (r.created, r.watch_id) == (True, 7)
    w.create(b"c", watch_id=7)
    r = w.next()
    assert (r.created, r.canceled, r.watch_id) == (True, True, -1)
    assert r.cancel_reason == \
        "mvcc: duplicate watch ID provided on the WatchStream"
    w.create(b"b", range_end=b"a")
    r = w.next()
    assert (r.created, r.canceled, r.watch_id) == (True, True, -1)
    assert r.cancel_reason == "mvcc: watcher range is empty"
    w.close()


def test_watch_negative_ids(server):
    # etcd 3.4 takes any client-chosen id but 0 (AutoWatchID): a negative
    # one, -1 (clientv3.InvalidWatchID) included, is the watcher's id.
    w = WatchStream(server.channel())
    w.create(b"n", watch_id=-5)
    r = w.next()
    assert (r.created, r.canceled, r.watch_id) == (True, False, -5)
    w.create(b"n", watch_id=-1)
    r = w.next()
    assert (r.created, r.canceled, r.watch_id) == (True, False, -1)
    w.create(b"n", watch_id=-5)
    r = w.next()
    assert (r.created, r.canceled, r.watch_id) == (True, True, -1)
    assert r.cancel_reason == \
        "mvcc: duplicate watch ID provided on the WatchStream"
    w.create(b"n")  # the automatic ids start at 0 still
    assert (w.next().watch_id) == 0
    rev = put(server, b"n", b"v")
    got = {}
    for _ in range(3):
        r = w.next()
        got[r.watch_id] = [(e.kv.key, e.kv.mod_revision) for e in r.events]
    assert got == {-5: [(b"n", rev)], -1: [(b"n", rev)], 0: [(b"n", rev)]}
    w.send(cancel_request=pb.WatchCancelRequest(watch_id=-5))
    r = w.next()
    assert (r.watch_id, r.canceled, r.created) == (-5, True, False)
    w.close()


def test_watch_cancel(server):
    w = WatchStream(server.channel())
    w.create(b"k")
    assert w.next().created
    w.send(cancel_request=pb.WatchCancelRequest(watch_id=0))
    r = w.next()
    assert (r.watch_id, r.canceled, r.created) == (0, True, False)
    w.send(cancel_request=pb.WatchCancelRequest(watch_id=42))
    put(server, b"k", b"v")
    assert w.none_within(0.5)
    w.close()


def test_watch_progress_request(server):
    w = WatchStream(server.channel())
    w.create(b"p")
    assert w.next().created
    put(server, b"other", b"v")
    rev = put(server, b"other", b"w")
    w.progress()
    r = w.next()
    assert (r.watch_id, r.created, r.canceled, len(r.events)) == \
        (-1, False, False, 0)
    assert r.header.revision == rev
    w.close()


def test_watch_filters(server):
    w = WatchStream(server.channel())
    w.create(b"f", filters=[NOPUT])
    assert w.next().created
    w.create(b"f", filters=[NODELETE], prev_kv=True)
    assert w.next().created
    put(server, b"f", b"1")
    server.kv().DeleteRange(pb.DeleteRangeRequest(key=b"f"), timeout=10)
    got = {}
    for _ in range(2):
        r = w.next()
        got[r.watch_id] = [(e.type, e.kv.key) for e in r.events]
    assert got == {0: [(1, b"f")], 1: [(0, b"f")]}  # DELETE = 1, PUT = 0
    w.close()


def test_watch_slow_reader_loses_nothing(server):
    n = 3000
    w = WatchStream(server.channel(), read=False)
    req = {"key": b"s/", "range_end": b"s0", "start_revision": 0,
           "filters": [], "prev_kv": True}
    w.create(b"s/", range_end=b"s0", prev_kv=True)
    time.sleep(0.3)
    writes = []
    value = b"x" * 2000
    for i in range(n):
        k = b"s/%d" % (i % 50)
        rev = put(server, k, value + b"%d" % i)
        writes.append({"rev": rev, "ops": [{"op": "put", "key": k,
                                            "value": value + b"%d" % i}]})
    last = writes[-1]["rev"]
    w.start_reading()
    resps = []
    seen = 0
    while seen < last:
        r = w.next(timeout=30)
        resps.append(record(r))
        if r.events:
            seen = r.events[-1].kv.mod_revision
    w.close()
    assert resps[0]["created"]
    total = sum(len(r["events"]) for r in resps)
    assert total == n
    watchcheck.assert_ok({"writes": writes,
                          "watches": [{"request": req, "responses": resps}]})


def test_watch_control_answers_on_a_stalled_stream(server):
    # A client that stops reading while a watcher floods its stream still
    # gets every control answer, in order: cancels of existing watchers,
    # and a create then an immediate cancel (created before canceled).
    w = WatchStream(server.channel(), read=False)
    w.create(b"s/", range_end=b"s0")
    for i in range(1, 11):
        w.create(b"b", watch_id=i)
    time.sleep(0.3)
    value = b"x" * 100000  # 40 MB: past the client's windows and buffers
    last = 0
    for i in range(400):
        last = put(server, b"s/%d" % (i % 50), value)
    for i in range(1, 11):
        w.send(cancel_request=pb.WatchCancelRequest(watch_id=i))
    w.create(b"c", watch_id=100)
    w.send(cancel_request=pb.WatchCancelRequest(watch_id=100))
    time.sleep(0.3)
    w.start_reading()
    seen, ctrl = 0, []
    while seen < last or len(ctrl) < 22:
        try:
            r = w.next(timeout=30)
        except Exception:
            raise AssertionError((seen, last, ctrl))
        if r.events:
            assert r.watch_id == 0
            seen = r.events[-1].kv.mod_revision
        elif r.watch_id != 0:
            ctrl.append((r.watch_id, r.created, r.canceled))
    w.close()
    created = [(i, True, False) for i in range(1, 11)]
    assert ctrl[:10] == created
    assert sorted(ctrl[10:]) == sorted(
        [(i, False, True) for i in range(1, 11)] +
        [(100, True, False), (100, False, True)])
    assert ctrl.index((100, True, False)) < ctrl.index((100, False, True))


def test_python_etcd3_watch(server):
    c = server.client()
    c.put("w/a", "0")
    events, cancel = c.watch("w/a")
    got = []

    def read():
        for e in events:
            got.append(e)
            if len(got) == 2:
                break
    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(0.3)
    c.put("w/a", "1")
    c.delete("w/a")
    t.join(10)
    cancel()
    assert [type(e).__name__ for e in got] == ["PutEvent", "DeleteEvent"]
    assert got[0].value == b"1"

    pevents, pcancel = c.watch_prefix("w/", start_revision=1)
    keys = []
    for e in pevents:
        keys.append(e.key)
        if len(keys) == 3:
            break
    pcancel()
    assert keys == [b"w/a", b"w/a", b"w/a"]

    seen = []
    done = threading.Event()

    def cb(resp):
        seen.extend(e.key for e in resp.events)
        done.set()
    wid = c.add_watch_callback("w/b", cb)
    time.sleep(0.3)
    c.put("w/b", "x")
    assert done.wait(10)
    c.cancel_watch(wid)
    assert seen == [b"w/b"]
