"""A linearizability checker for key-value histories recorded against etcd.

Goal: decide whether a concurrent history of get / put / compare-and-swap
operations on a few keys could have come from one atomic register per key,
with indeterminate operations (timeouts, "unavailable", "etcdserver: request
timed out") allowed to take effect at any moment after their invocation, or
never.  The answer is True, False, or "unknown" when the search is cut off by
its time or step budget (it never hangs).

Method: Wing & Gong's search over linearization orders with Lowe's
just-in-time linearization and memoization of (set of linearized ops, model
state), as in Knossos and porcupine (whose code we do not copy).  Events are
call and return entries in time order in a doubly linked list; the search
repeatedly tries to linearize a pending call, lifting it (and its return) out
of the list, and backtracks when it meets a return whose call it could not
place.  An indeterminate op has no return entry, so nothing forces it in: it
may be linearized at any later point or never.  The history is split by key
first (P-compositionality: each op touches one key and the registers are
independent), and each key is searched separately.

Model (matches etcd 3.4 semantics for the workload in test_faults.py):

  get(key)                 -> value, or None when the key does not exist.
                              A linearizable Range.
  put(key, value)          -> "ok".  A Put.
  cas(key, expected, new)  -> (True, None) when the compare held and the put
                              ran, else (False, current) where current is the
                              value the txn's failure branch read (None if
                              absent).  The etcd Txn is
                                compare: value(key) == expected
                                         (version(key) == 0 when expected is
                                          None, i.e. "key absent")
                                success: put(key, new)
                                failure: range(key)
                              Note etcd fails a VALUE compare on a missing
                              key, which is why "absent" uses VERSION.

Operations are dicts (or objects with the same attributes):
  client    any hashable, for reports
  op        "get" | "put" | "cas"
  key       the key
  args      None for get, value for put, (expected, new) for cas
  invoke    float, when the client sent it (monotonic clock)
  complete  float when the answer arrived, or None when indeterminate
  result    as above; ignored when complete is None

Pruning that keeps the answer exact: an indeterminate get has no effect and
is dropped.  An indeterminate write whose value no op ever observes (no get
returned it, no failed cas read it, no successful cas expected it) is dropped
too: in any linearization containing it, nothing between it and the next
write looks at the register, so removing it leaves a linearization.
"""

import time

UNKNOWN = "unknown"


def _field(op, name):
    if isinstance(op, dict):
        return op.get(name)
    return getattr(op, name)


class Op:
    """One operation, normalized.  id is the index in the input history."""

    __slots__ = ("id", "client", "op", "key", "args", "invoke", "complete",
                 "result")

    def __init__(self, idx, raw):
        self.id = idx
        self.client = _field(raw, "client")
        self.op = _field(raw, "op")
        self.key = _field(raw, "key")
        self.args = _field(raw, "args")
        self.invoke = _field(raw, "invoke")
        self.complete = _field(raw, "complete")
        self.result = _field(raw, "result")
        if self.op not in ("get", "put", "cas"):
            raise ValueError("op %d: unknown op %r" % (idx, self.op))
        if self.invoke is None:
            raise ValueError("op %d: no invoke time" % idx)
        if self.complete is not None and self.complete < self.invoke:
            raise ValueError("op %d: completes before it is invoked" % idx)
        if self.op == "cas" and self.complete is not None:
            ok, _cur = self.result
            if ok not in (True, False):
                raise ValueError("op %d: cas result %r" % (idx, self.result))

    @property
    def indeterminate(self):
        return self.complete is None

    def written(self):
        """The value this op writes if it takes effect (None for get)."""
        if self.op == "put":
            return self.args
        if self.op == "cas":
            return self.args[1]
        return None

    def __repr__(self):
        return "#%d %s %s(%r%s) [%.4f, %s] -> %s" % (
            self.id, self.client, self.op, self.key,
            "" if self.args is None else ", %r" % (self.args,),
            self.invoke,
            "?" if self.complete is None else "%.4f" % self.complete,
            "?" if self.complete is None else repr(self.result))


def step(state, op):
    """The register model: (legal, next state) for op applied at state."""
    kind = op.op
    if kind == "get":
        return op.result == state, state
    if kind == "put":
        return True, op.args
    expected, new = op.args
    holds = state is not None and state == expected if expected is not None \
        else state is None
    if op.complete is None:
        # Indeterminate: if the compare fails the txn changes nothing, which
        # is the same as never linearizing it, so only the effectful branch
        # needs exploring.
        return holds, (new if holds else state)
    ok, current = op.result
    if holds:
        return ok is True, new
    return ok is False and current == state, state


class _Entry:
    __slots__ = ("op", "is_call", "match", "prev", "next", "time")

    def __init__(self, op, is_call, t):
        self.op = op
        self.is_call = is_call
        self.time = t
        self.match = None
        self.prev = None
        self.next = None


def _build_list(ops):
    """Call/return entries sorted by time; calls sort before returns at the
    same instant so that touching intervals count as concurrent."""
    entries = []
    for op in ops:
        call = _Entry(op, True, op.invoke)
        entries.append(call)
        if op.complete is not None:
            ret = _Entry(op, False, op.complete)
            call.match = ret
            entries.append(ret)
    entries.sort(key=lambda e: (e.time, 0 if e.is_call else 1, e.op.id))
    head = _Entry(None, False, float("-inf"))
    prev = head
    for e in entries:
        prev.next = e
        e.prev = prev
        prev = e
    return head


def _lift(call):
    call.prev.next = call.next
    if call.next is not None:
        call.next.prev = call.prev
    ret = call.match
    if ret is not None:
        ret.prev.next = ret.next
        if ret.next is not None:
            ret.next.prev = ret.prev


def _unlift(call):
    ret = call.match
    if ret is not None:
        ret.prev.next = ret
        if ret.next is not None:
            ret.next.prev = ret
    call.prev.next = call
    if call.next is not None:
        call.next.prev = call


def prune(ops):
    """Drop ops that cannot change the answer (see the module docstring)."""
    observed = set()
    for op in ops:
        if op.complete is None:
            continue
        if op.op == "get":
            observed.add(op.result)
        elif op.op == "cas":
            ok, current = op.result
            observed.add(op.args[0] if ok else current)
    kept = []
    for op in ops:
        if op.complete is None:
            if op.op == "get":
                continue
            if op.written() not in observed:
                continue
        kept.append(op)
    return kept


def check_key(ops, init=None, deadline=None, max_steps=None):
    """Search one key's ops.  Returns a dict:
      valid       True | False | "unknown"
      steps       search steps taken
      linearized  (on False) the longest partial linearization found
      stuck       (on False) the op whose return could not be reached
    """
    ops = prune(ops)
    determinate = sum(1 for o in ops if o.complete is not None)
    head = _build_list(ops)
    cache = set()
    stack = []
    state = init
    linearized = 0
    depth = 0
    steps = 0
    best_depth = -1
    best = None
    entry = head.next
    while entry is not None:
        steps += 1
        if max_steps is not None and steps > max_steps:
            return {"valid": UNKNOWN, "steps": steps,
                    "why": "step limit %d" % max_steps}
        if steps & 1023 == 1 and deadline is not None and \
                time.monotonic() > deadline:
            return {"valid": UNKNOWN, "steps": steps, "why": "time limit"}
        if entry.is_call:
            op = entry.op
            legal, new_state = step(state, op)
            if legal:
                new_lin = linearized | (1 << op.id)
                memo = (new_lin, new_state)
                if memo not in cache:
                    cache.add(memo)
                    stack.append((entry, state))
                    state = new_state
                    linearized = new_lin
                    depth += 1
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
            continue
        # A return entry whose call is still in the list: the op it belongs
        # to cannot be placed before it ends, so undo the last choice.
        if depth > best_depth:
            best_depth = depth
            best = ([e.op for e, _s in stack], entry.op, state)
        if not stack:
            lin, stuck, st = best
            return {"valid": False, "steps": steps, "linearized": lin,
                    "stuck": stuck, "state": st,
                    "determinate": determinate}
        entry, state = stack.pop()
        linearized &= ~(1 << entry.op.id)
        depth -= 1
        _unlift(entry)
        entry = entry.next
    # Only calls of indeterminate ops can remain: every determinate op is in.
    return {"valid": True, "steps": steps}


def check(history, time_limit_s=30.0, max_steps=None, init=None):
    """Check a whole history, one key at a time.

    Returns {"valid": True|False|"unknown", "keys": {key: per-key result},
    "failed_key": key or None, "ops": number of ops}.  False wins over
    unknown (one bad key is enough); unknown wins over True.
    """
    ops = [Op(i, raw) for i, raw in enumerate(history)]
    by_key = {}
    for op in ops:
        by_key.setdefault(op.key, []).append(op)
    deadline = time.monotonic() + time_limit_s
    out = {"valid": True, "keys": {}, "failed_key": None, "ops": len(ops)}
    for key in sorted(by_key, key=repr):
        res = check_key(by_key[key], init=init, deadline=deadline,
                        max_steps=max_steps)
        out["keys"][key] = res
        if res["valid"] is False:
            out["valid"] = False
            out["failed_key"] = key
            return out
        if res["valid"] == UNKNOWN:
            out["valid"] = UNKNOWN
    return out


def explain(result, history=None, context=12):
    """A human-readable account of a failed check."""
    if result["valid"] is not False:
        return "valid=%r" % (result["valid"],)
    key = result["failed_key"]
    r = result["keys"][key]
    lines = ["not linearizable on key %r (%d search steps)" % (key,
                                                               r["steps"])]
    lin = r["linearized"]
    lines.append("longest linearization found: %d ops; its last ones:"
                 % len(lin))
    for op in lin[-context:]:
        lines.append("    %r" % op)
    lines.append("register value there: %r" % (r["state"],))
    lines.append("could not be linearized before it returned: %r"
                 % r["stuck"])
    return "\n".join(lines)


def _main(argv):
    """python3 lincheck.py HISTORY.json: check a saved history (a list of
    ops, or {"history": [...]} as test_faults.py writes with
    CETCD_HISTORY_OUT).  Exit 0 valid, 1 not linearizable, 2 unknown."""
    import json
    import sys
    with open(argv[1]) as f:
        data = json.load(f)
    hist = data["history"] if isinstance(data, dict) else data
    t0 = time.monotonic()
    res = check(hist, time_limit_s=float(argv[2]) if len(argv) > 2 else 60)
    print("%d ops, %.2fs: %s" % (res["ops"], time.monotonic() - t0,
                                 explain(res)))
    sys.exit({True: 0, False: 1}.get(res["valid"], 2))


if __name__ == "__main__":
    import sys as _sys
    _main(_sys.argv)
