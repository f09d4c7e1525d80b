"""A checker of etcd's watch guarantees over a recorded history.

Goal: given the writes a run made (each with the revision it got) and the
responses every watcher received, say whether the watch API kept the
guarantees etcd documents (https://etcd.io/docs/v3.6/learning/api_guarantees/
#watch-apis) and that etcd's robustness suite checks
(tests/robustness/validate/watch.go): Ordered, Unique, Atomic, Reliable,
Resumable, Bookmarkable, plus the event contents: PrevKV, IsCreate and
Filter.  Every violation names its property.

Method: the writes are replayed over a model key space (empty store at
revision 1) into the true event log, each event with the key's previous
version and its create revision and version.  Each watcher's events are then
compared with the log entries its request selects.  The properties are cut
so that one fault breaks one of them:
- Ordered: event revisions never go back.
- Unique: no (revision, key) twice.
- Atomic: a response never starts with the revision the previous one
  ended with, unless that one was a fragment (fragment=True).
- Filter: every event is inside the watched range and passes the filters.
- Reliable: from the watcher's first event to its last, exactly the log's
  selected events arrive (no gap, nothing invented, same contents).
- Resumable: the first event is the log's first selected event at or after
  the start revision (start_revision, or the created header + 1 for a watch
  "from now"); with Reliable this is "no gap from the start revision to the
  last event", and a watch restarted at last + 1 sees the continuation.
- Bookmarkable: a progress response at revision R comes only once every
  selected event <= R was delivered, and no later event has revision <= R.
- PrevKV: with prev_kv, an event carries the key's previous version (value
  and mod revision), or none if the key did not exist; without, none.
- IsCreate: a PUT's create_revision and version say whether it created the
  key (create_revision == mod_revision, version 1) as the log does.

History format (plain dicts, keys and values as str or bytes, one kind):
    {"writes": [{"rev": 2, "ops": [{"op": "put", "key": "a", "value": "1"},
                                   {"op": "delete", "key": "b",
                                    "range_end": "c"}]}, ...],
     "watches": [{"request": {"key": "a", "range_end": None,
                              "start_revision": 0, "filters": [],
                              "prev_kv": False},
                  "responses": [{"header_rev": 1, "created": True}, ...]}]}
A response has header_rev and optional created, canceled, compact_revision,
fragment, progress (True for a progress notification: no events, not
created/canceled) and events: [{"type": "PUT"|"DELETE", "key", "value",
"mod_revision", "create_revision", "version", "prev_kv": None or
{"value", "mod_revision"}}].  A write that changes nothing has no revision
and is left out.  A stream-wide progress response is recorded in the
responses of each watcher of its stream.
"""

PROPERTIES = ("Ordered", "Unique", "Atomic", "Filter", "Reliable",
              "Resumable", "Bookmarkable", "PrevKV", "IsCreate")


class Violation:
    """One broken guarantee: prop (one of PROPERTIES) and a message."""

    def __init__(self, prop, watch, msg):
        assert prop in PROPERTIES
        self.prop = prop
        self.watch = watch
        self.msg = msg

    def __str__(self):
        return "%s (watch %d): %s" % (self.prop, self.watch, self.msg)

    __repr__ = __str__


class WatchGuaranteeError(AssertionError):
    """Raised by assert_ok with every violation in its message."""


# --- the true event log ---------------------------------------------------

def in_range(key, start, end):
    """etcd's range rules: no end = the key; "\\0" = keys >= start."""
    if not end:
        return key == start
    if end in ("\0", b"\0"):
        return key >= start
    return start <= key < end


def replay(writes):
    """The event log of writes: a list of dicts with rev, type, key, value,
    create_revision, version and prev (None or {value, mod_revision})."""
    state = {}  # key -> dict(value, create_revision, mod_revision, version)
    log = []
    last = 1
    for w in writes:
        rev = w["rev"]
        if rev <= last:
            raise ValueError("write revisions must increase: %d after %d"
                             % (rev, last))
        n = len(log)
        for op in w["ops"]:
            if op["op"] == "put":
                _put(state, log, rev, op["key"], op["value"])
            elif op["op"] == "delete":
                keys = sorted(k for k in state
                              if in_range(k, op["key"], op.get("range_end")))
                for k in keys:
                    prev = state.pop(k)
                    log.append({"rev": rev, "type": "DELETE", "key": k,
                                "value": None, "create_revision": 0,
                                "version": 0, "prev": _prev(prev)})
            else:
                raise ValueError("unknown op %r" % op["op"])
        if len(log) == n:
            raise ValueError("write at rev %d changed nothing" % rev)
        last = rev
    return log


def _prev(kv):
    return {"value": kv["value"], "mod_revision": kv["mod_revision"]}


def _put(state, log, rev, key, value):
    old = state.get(key)
    kv = {"value": value, "mod_revision": rev,
          "create_revision": old["create_revision"] if old else rev,
          "version": old["version"] + 1 if old else 1}
    state[key] = kv
    log.append({"rev": rev, "type": "PUT", "key": key, "value": value,
                "create_revision": kv["create_revision"],
                "version": kv["version"],
                "prev": _prev(old) if old else None})


# --- per watch ----------------------------------------------------------------

def selects(req, ev):
    """Whether request req selects event ev (range and filters)."""
    if not in_range(ev["key"], req["key"], req.get("range_end")):
        return False
    filters = req.get("filters") or ()
    if ev["type"] == "PUT" and "NOPUT" in filters:
        return False
    return not (ev["type"] == "DELETE" and "NODELETE" in filters)


def _start(w):
    """The first revision the watch asked for, or None if unknown."""
    req = w["request"]
    if req.get("start_revision", 0) > 0:
        return req["start_revision"]
    for r in w["responses"]:
        if r.get("created"):
            return r["header_rev"] + 1
    return None


def _same(got, want):
    return (got["key"] == want["key"] and got["type"] == want["type"] and
            got["mod_revision"] == want["rev"] and
            (want["type"] == "DELETE" or got.get("value") == want["value"]))


def _desc(ev):
    return "%s %r@%d" % (ev["type"], ev["key"],
                         ev.get("mod_revision", ev.get("rev")))


def _events(w):
    """(response index, event) of every event the watch received."""
    return [(i, e) for i, r in enumerate(w["responses"])
            for e in r.get("events", ())]


def check_order(n, w, out):
    last = None
    seen = set()
    for _, e in _events(w):
        rev = e["mod_revision"]
        if last is not None and rev < last:
            out.append(Violation("Ordered", n, "%s after revision %d"
                                 % (_desc(e), last)))
        last = rev if last is None else max(last, rev)
        if (rev, e["key"]) in seen:
            out.append(Violation("Unique", n, "%s twice" % _desc(e)))
        seen.add((rev, e["key"]))


def check_atomic(n, w, out):
    last, frag = None, False
    for r in w["responses"]:
        evs = r.get("events") or ()
        if not evs:
            continue
        if last is not None and evs[0]["mod_revision"] == last and not frag:
            out.append(Violation(
                "Atomic", n, "revision %d split over two responses" % last))
        last, frag = evs[-1]["mod_revision"], bool(r.get("fragment"))


def check_filter(n, w, out):
    req = w["request"]
    for _, e in _events(w):
        ev = dict(e, rev=e["mod_revision"])
        if not selects(req, ev):
            out.append(Violation("Filter", n, "%s is not selected by the "
                                 "request" % _desc(e)))


def _selected_received(w):
    req = w["request"]
    return [(i, e) for i, e in _events(w)
            if selects(req, dict(e, rev=e["mod_revision"]))]


def check_reliable(n, w, log, out):
    got = _selected_received(w)
    if not got:
        return
    revs = [e["mod_revision"] for _, e in got]
    first, last = min(revs), max(revs)
    want = [x for x in log if first <= x["rev"] <= last and
            selects(w["request"], x)]
    # Compare as sets keyed by (rev, key): order and repeats belong to
    # Ordered and Unique.
    have = {(e["mod_revision"], e["key"]): e for _, e in got}
    for x in want:
        e = have.pop((x["rev"], x["key"]), None)
        if e is None:
            out.append(Violation("Reliable", n, "missing %s" % _desc(x)))
        elif not _same(e, x):
            out.append(Violation("Reliable", n, "%s differs from the "
                                 "write (%r)" % (_desc(e), x["value"])))
    for e in have.values():
        out.append(Violation("Reliable", n, "%s was never written"
                             % _desc(e)))


def check_resumable(n, w, log, out):
    got = _selected_received(w)
    start = _start(w)
    if not got or start is None:
        return
    want = [x for x in log if x["rev"] >= start and selects(w["request"], x)]
    e = got[0][1]
    if not want or (want[0]["rev"], want[0]["key"]) != (e["mod_revision"],
                                                       e["key"]):
        exp = _desc(want[0]) if want else "nothing"
        out.append(Violation("Resumable", n, "first event %s from start "
                             "revision %d, expected %s"
                             % (_desc(e), start, exp)))


def _is_progress(r):
    return (r.get("progress") or
            (not r.get("events") and not r.get("created") and
             not r.get("canceled")))


def check_bookmarkable(n, w, log, out):
    start = _start(w)
    sel = [] if start is None else [
        x for x in log if x["rev"] >= start and selects(w["request"], x)]
    delivered = set()
    mark, ptr = None, 0
    for r in w["responses"]:
        for e in r.get("events") or ():
            delivered.add((e["mod_revision"], e["key"]))
            if mark is not None and e["mod_revision"] <= mark:
                out.append(Violation(
                    "Bookmarkable", n, "%s after progress at revision %d"
                    % (_desc(e), mark)))
        if not _is_progress(r):
            continue
        mark = r["header_rev"]
        # Every selected event <= mark must be delivered by now; the
        # delivered set only grows, so each is checked once.
        while ptr < len(sel) and sel[ptr]["rev"] <= mark:
            x = sel[ptr]
            ptr += 1
            if (x["rev"], x["key"]) not in delivered:
                out.append(Violation(
                    "Bookmarkable", n, "progress at revision %d before %s "
                    "was delivered" % (mark, _desc(x))))
                break


def check_contents(n, w, log, out):
    want_prev = bool(w["request"].get("prev_kv"))
    truth = {(x["rev"], x["key"]): x for x in log}
    for _, e in _events(w):
        x = truth.get((e["mod_revision"], e["key"]))
        if x is None:
            continue  # Reliable reports it
        p = e.get("prev_kv")
        if not want_prev and p is not None:
            out.append(Violation("PrevKV", n, "%s has prev_kv without "
                                 "prev_kv in the request" % _desc(e)))
        elif want_prev and (p is None) != (x["prev"] is None):
            out.append(Violation("PrevKV", n, "%s prev_kv %r, expected %r"
                                 % (_desc(e), p, x["prev"])))
        elif want_prev and p is not None and (
                p.get("value") != x["prev"]["value"] or
                p.get("mod_revision") != x["prev"]["mod_revision"]):
            out.append(Violation("PrevKV", n, "%s prev_kv %r, expected %r"
                                 % (_desc(e), p, x["prev"])))
        if e["type"] == "PUT" and (
                e.get("create_revision") != x["create_revision"] or
                e.get("version") != x["version"]):
            out.append(Violation(
                "IsCreate", n, "%s create_revision %r version %r, expected "
                "%d %d" % (_desc(e), e.get("create_revision"),
                           e.get("version"), x["create_revision"],
                           x["version"])))


def check(history):
    """All violations of history, in watch order (empty = it holds)."""
    log = replay(history["writes"])
    out = []
    for n, w in enumerate(history["watches"]):
        check_order(n, w, out)
        check_atomic(n, w, out)
        check_filter(n, w, out)
        check_reliable(n, w, log, out)
        check_resumable(n, w, log, out)
        check_bookmarkable(n, w, log, out)
        check_contents(n, w, log, out)
    return out


def assert_ok(history):
    """Raise WatchGuaranteeError naming every broken guarantee."""
    v = check(history)
    if v:
        raise WatchGuaranteeError("watch guarantees broken:\n" +
                                  "\n".join(str(x) for x in v))
