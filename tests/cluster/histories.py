"""Histories for testing the checker: generated good ones, corrupted bad ones.

Goal: give test_lincheck.py and test_faults.py histories whose verdict is
known in advance.

Method: simulate() runs a simulated atomic register (each op takes effect
at a random point inside its interval, so the history is linearizable by
construction).  stale_read_corruption() finds a read that can be changed
into a provably stale one; never_written_corruption() a read that can be
changed to a value nobody wrote.  Both work on recorded etcd histories too.
"""

import random


def simulate(seed, n_ops=2000, clients=5, keys=("k0", "k1", "k2"),
             p_indeterminate=0.02, p_never=0.5):
    """A linearizable history from a simulated atomic register.

    Each client runs ops back to back with random think time; each op has a
    linearization point inside its interval.  Indeterminate writes take
    effect at their point or (with p_never) never; the client's next op
    starts a little later, as a client that timed out would.
    """
    rng = random.Random(seed)
    now = {c: rng.random() for c in range(clients)}
    ops = []
    seq = 0
    while len(ops) < n_ops:
        c = min(now, key=now.get)
        inv = now[c]
        lp = inv + rng.expovariate(1 / 0.004)
        cmp = lp + rng.expovariate(1 / 0.004)
        kind = rng.choice(("get", "get", "put", "cas"))
        key = rng.choice(keys)
        seq += 1
        op = dict(client=c, op=kind, key=key, invoke=inv, complete=cmp,
                  lp=lp, never=False)
        if kind == "put":
            op["args"] = "%d-%d" % (c, seq)
        elif kind == "cas":
            op["args"] = (None, "%d-%d" % (c, seq))  # expected filled later
        else:
            op["args"] = None
        if kind != "get" and rng.random() < p_indeterminate:
            op["complete"] = None
            op["never"] = rng.random() < p_never
            # A timed-out write may still apply long after the timeout.
            op["lp"] = inv + rng.expovariate(1 / 0.05)
            cmp = inv + 0.1
        ops.append(op)
        now[c] = cmp + rng.expovariate(1 / 0.002)
    # Apply in linearization-point order to compute results.  CAS expected
    # values are chosen as the client would: usually the current value
    # (which it just read), sometimes a stale or absent guess.
    state = {k: None for k in keys}
    recent = {k: [None] for k in keys}
    for op in sorted(ops, key=lambda o: o["lp"]):
        k = op["key"]
        if op["op"] == "cas":
            exp = state[k] if rng.random() < 0.7 else rng.choice(recent[k])
            op["args"] = (exp, op["args"][1])
        if op["never"]:
            op["result"] = None
            continue
        if op["op"] == "get":
            op["result"] = state[k]
        elif op["op"] == "put":
            state[k] = op["args"]
            recent[k].append(op["args"])
            op["result"] = "ok"
        else:
            exp, new = op["args"]
            if state[k] == exp:
                state[k] = new
                recent[k].append(new)
                op["result"] = (True, None)
            else:
                op["result"] = (False, state[k])
    for op in ops:
        del op["lp"], op["never"]
        if op["complete"] is None:
            op["result"] = None
    ops.sort(key=lambda o: o["invoke"])
    return ops


def stale_read_corruption(history, at=0.5):
    """Change one completed get to return a value two writes old.

    Picks a get G (the first suitable one from fraction `at` of the history
    on, wrapping around) and completed writes W1 < W2 < G in real time on
    G's key (W2 invoked after W1 returned, G invoked after W2 returned),
    with W1 the latest such write and W1's value written by no other op.
    G returning W1's value is then a stale read in every linearization, and
    the most recent stale value there is.  Returns (index, value) or None.
    """
    writers = {}
    for o in history:
        if o["op"] == "put":
            writers.setdefault(o["args"], []).append(o)
        elif o["op"] == "cas":
            writers.setdefault(o["args"][1], []).append(o)
    writes = [o for o in history if o["complete"] is not None and (
        o["op"] == "put" or (o["op"] == "cas" and o["result"][0]))]
    value = {id(o): (o["args"] if o["op"] == "put" else o["args"][1])
             for o in writes}
    n = len(history)
    first = int(n * at)
    for gi in list(range(first, n)) + list(range(0, first)):
        g = history[gi]
        if g["op"] != "get" or g["complete"] is None:
            continue
        before = sorted((w for w in writes if w["key"] == g["key"]
                         and w["complete"] < g["invoke"]),
                        key=lambda w: w["complete"])
        for w2 in reversed(before):
            older = [w1 for w1 in before if w1["complete"] < w2["invoke"]]
            if not older:
                continue
            w1 = older[-1]
            v = value[id(w1)]
            if v != g["result"] and len(writers[v]) == 1:
                return gi, v
            break
    return None


def never_written_corruption(history, value="never-written"):
    """Index of the last completed get, to be changed to return value."""
    for gi in range(len(history) - 1, -1, -1):
        g = history[gi]
        if g["op"] == "get" and g["complete"] is not None:
            return gi, value
    return None
