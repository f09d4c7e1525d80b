"""The watch-guarantees checker (tests/common/watchcheck.py) itself, and the
watch hub's own output through it.

Goal: the checker accepts correct histories and rejects each kind of broken
one with the property it breaks, and only that one, so that a failure it
reports later against a live server points at the right guarantee.
Method: hand-made histories, no server: a small run of writes (puts, a txn
over two keys, a range delete, a re-creation) and the responses a correct
server gives four watchers (a key, a prefix with prev_kv, a watch from a
past revision with NODELETE, all keys with progress); then one copy per
property with a single fault spliced in.  Last, the unit test program
tests/test_watch (from $CETCD_BUILD_DIR or build/, skipped when absent)
dumps the history of its random model run (CETCD_WATCH_HISTORY): the
hub's responses to 40 watchers over thousands of revisions, with full
sinks and bounded catch-up; the checker must accept it, and reject it once
one event is dropped.
"""
import copy
import json
import os
import subprocess

import pytest

from common import watchcheck

# Revisions: 2 put a=1; 3 txn put p/x=1 p/y=1; 4 put a=2; 5 delete [p/, p0)
# (p/x, p/y); 6 put p/x=2 (a re-creation); 7 delete a.
WRITES = [
    {"rev": 2, "ops": [{"op": "put", "key": "a", "value": "1"}]},
    {"rev": 3, "ops": [{"op": "put", "key": "p/x", "value": "1"},
                       {"op": "put", "key": "p/y", "value": "1"}]},
    {"rev": 4, "ops": [{"op": "put", "key": "a", "value": "2"}]},
    {"rev": 5, "ops": [{"op": "delete", "key": "p/", "range_end": "p0"}]},
    {"rev": 6, "ops": [{"op": "put", "key": "p/x", "value": "2"}]},
    {"rev": 7, "ops": [{"op": "delete", "key": "a"}]},
]


def put(key, value, rev, create, version, prev=None):
    return {"type": "PUT", "key": key, "value": value, "mod_revision": rev,
            "create_revision": create, "version": version, "prev_kv": prev}


def delete(key, rev, prev=None):
    return {"type": "DELETE", "key": key, "value": None, "mod_revision": rev,
            "create_revision": 0, "version": 0, "prev_kv": prev}


def pkv(value, rev):
    return {"value": value, "mod_revision": rev}


def created(rev):
    return {"header_rev": rev, "created": True}


def events(rev, *evs, fragment=False):
    return {"header_rev": rev, "events": list(evs), "fragment": fragment}


def progress(rev):
    return {"header_rev": rev, "progress": True}


def good():
    """A correct history: four watchers, all opened at revision 1."""
    key_a = {"request": {"key": "a", "start_revision": 0},
             "responses": [created(1), events(2, put("a", "1", 2, 2, 1)),
                           events(4, put("a", "2", 4, 2, 2)),
                           events(7, delete("a", 7))]}
    prefix = {"request": {"key": "p/", "range_end": "p0", "start_revision": 0,
                          "prev_kv": True},
              "responses": [
                  created(1),
                  events(3, put("p/x", "1", 3, 3, 1),
                         put("p/y", "1", 3, 3, 1)),
                  events(5, delete("p/x", 5, pkv("1", 3)),
                         delete("p/y", 5, pkv("1", 3))),
                  events(6, put("p/x", "2", 6, 6, 1))]}
    past = {"request": {"key": "a", "range_end": "b", "start_revision": 3,
                        "filters": ["NODELETE"]},
            "responses": [created(7), events(7, put("a", "2", 4, 2, 2))]}
    allkeys = {"request": {"key": "\0", "range_end": "\0",
                           "start_revision": 0},
               "responses": [
                   created(1), events(2, put("a", "1", 2, 2, 1)),
                   progress(2),
                   events(3, put("p/x", "1", 3, 3, 1),
                          put("p/y", "1", 3, 3, 1), fragment=True),
                   events(4, put("a", "2", 4, 2, 2)),
                   events(6, delete("p/x", 5), delete("p/y", 5),
                          put("p/x", "2", 6, 6, 1)),
                   progress(6), events(7, delete("a", 7)), progress(7)]}
    return {"writes": copy.deepcopy(WRITES),
            "watches": [key_a, prefix, past, allkeys]}


def props(history):
    return {v.prop for v in watchcheck.check(history)}


def test_good_history_accepted():
    watchcheck.assert_ok(good())


def test_canceled_compacted_watch_accepted():
    h = good()
    h["watches"].append({
        "request": {"key": "a", "start_revision": 2},
        "responses": [created(7), {"header_rev": 7, "canceled": True,
                                   "compact_revision": 5}]})
    watchcheck.assert_ok(h)


def test_resumed_watch_accepted():
    # A watch restarted at last + 1 after seeing a@2 gets the continuation.
    h = good()
    h["watches"].append({
        "request": {"key": "a", "start_revision": 3},
        "responses": [created(7), events(7, put("a", "2", 4, 2, 2),
                                         delete("a", 7))]})
    watchcheck.assert_ok(h)


def broken(fn):
    h = good()
    fn(h["watches"])
    return h


def _ordered(ws):
    r = ws[0]["responses"]
    r[2], r[3] = r[3], r[2]  # a@7 before a@4


def _unique(ws):
    r = ws[0]["responses"][1]
    r["events"].append(copy.deepcopy(r["events"][0]))


def _atomic(ws):
    r = ws[1]["responses"]
    second = r[1]["events"].pop()
    r.insert(2, events(3, second))


def _atomic_fragment_ok(ws):
    r = ws[1]["responses"]
    second = r[1]["events"].pop()
    r[1]["fragment"] = True
    r.insert(2, events(3, second))


def _reliable(ws):
    del ws[0]["responses"][2]  # a@4 lost between a@2 and a@7


def _reliable_value(ws):
    ws[0]["responses"][2]["events"][0]["value"] = "X"


def _resumable(ws):
    ws[2]["request"]["start_revision"] = 2  # a@2 is missing at the start


def _resumable_future(ws):
    # etcd #20221: a watch at a future revision receiving old events.
    ws[0]["request"]["start_revision"] = 5
    del ws[0]["responses"][1:3]
    ws[0]["responses"].insert(1, events(4, put("a", "2", 4, 2, 2)))


def _bookmarkable(ws):
    # etcd #15220: progress at 4 sent before the events of 3 and 4.
    r = ws[3]["responses"]
    r.insert(3, progress(4))


def _prev_kv(ws):
    ws[1]["responses"][2]["events"][0]["prev_kv"] = pkv("0", 2)


def _prev_kv_unasked(ws):
    ws[0]["responses"][2]["events"][0]["prev_kv"] = pkv("1", 2)


def _is_create(ws):
    ws[1]["responses"][3]["events"][0]["version"] = 2  # p/x was re-created


def _filter(ws):
    ws[2]["responses"].append(events(7, delete("a", 7)))  # NODELETE


def _filter_range(ws):
    ws[0]["responses"][1]["events"].append(put("p/x", "1", 3, 3, 1))


@pytest.mark.parametrize("fault, prop", [
    (_ordered, "Ordered"),
    (_unique, "Unique"),
    (_atomic, "Atomic"),
    (_reliable, "Reliable"),
    (_reliable_value, "Reliable"),
    (_resumable, "Resumable"),
    (_resumable_future, "Resumable"),
    (_bookmarkable, "Bookmarkable"),
    (_prev_kv, "PrevKV"),
    (_prev_kv_unasked, "PrevKV"),
    (_is_create, "IsCreate"),
    (_filter, "Filter"),
    (_filter_range, "Filter"),
])
def test_broken_history_rejected(fault, prop):
    h = broken(fault)
    assert props(h) == {prop}, watchcheck.check(h)
    with pytest.raises(watchcheck.WatchGuaranteeError, match=prop):
        watchcheck.assert_ok(h)


def test_fragmented_revision_accepted():
    watchcheck.assert_ok(broken(_atomic_fragment_ok))


def test_every_property_has_a_broken_case():
    covered = {"Ordered", "Unique", "Atomic", "Reliable", "Resumable",
               "Bookmarkable", "PrevKV", "IsCreate", "Filter"}
    assert covered == set(watchcheck.PROPERTIES)


def test_bad_writes_refused():
    with pytest.raises(ValueError):
        watchcheck.replay([{"rev": 2, "ops": [{"op": "delete",
                                                "key": "nope"}]}])
    with pytest.raises(ValueError):
        watchcheck.replay([{"rev": 3, "ops": [{"op": "put", "key": "a",
                                                "value": "1"}]},
                           {"rev": 3, "ops": [{"op": "put", "key": "a",
                                                "value": "2"}]}])


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def find_test_watch():
    for d in (os.environ.get("CETCD_BUILD_DIR", ""),
              os.path.join(ROOT, "build")):
        path = os.path.join(d, "tests", "test_watch")
        if d and os.access(path, os.X_OK):
            return path
    return None


@pytest.mark.parametrize("seed", [1, 2])
def test_hub_history_checked(tmp_path, seed):
    prog = find_test_watch()
    if prog is None:
        pytest.skip("tests/test_watch not built (set CETCD_BUILD_DIR)")
    out = tmp_path / "history.json"
    env = dict(os.environ, CETCD_WATCH_HISTORY=str(out),
               CETCD_TEST_SEED=str(seed))
    subprocess.run([prog], env=env, check=True, timeout=300,
                   stdout=subprocess.DEVNULL)
    h = json.loads(out.read_text())
    assert len(h["watches"]) > 10 and len(h["writes"]) > 1000
    watchcheck.assert_ok(h)
    # The same history with one event dropped from the busiest watcher.
    w = max(h["watches"], key=lambda w: sum(len(r.get("events", ()))
                                            for r in w["responses"]))
    rs = [r for r in w["responses"] if len(r.get("events", ())) > 0]
    victim = rs[len(rs) // 2]
    rev = victim["events"][0]["mod_revision"]
    victim["events"] = [e for e in victim["events"]
                        if e["mod_revision"] != rev]
    broken_props = props(h)
    assert "Reliable" in broken_props or "Bookmarkable" in broken_props
