"""A checker for lock histories with fencing tokens.

A history is a list of Hold records, one per critical section a client
believed it held: the lock key's create revision (the fencing token: the
lock service grants in create-revision order), the client's monotonic
clock when the Lock answer arrived (acquired) and just before it sent
Unlock (released).  A client's observed section lies inside the section
the lock really granted (granted before the answer, held until the
delete), so if the lock is correct no two observed sections overlap, and
in the order the sections were held their tokens strictly increase.

check(history) returns the violations as strings ([] = correct):
- "duplicate token": two holds with the same token;
- "overlap": a hold acquired before the previous one (by acquire time)
  released;
- "token order": a later hold has a smaller token than an earlier one.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Hold:
    client: str       # who held it
    token: int        # the lock key's create revision
    acquired: float   # monotonic time the Lock answer came
    released: float   # monotonic time before the Unlock was sent


def check(history):
    bad = []
    seen = {}
    for h in history:
        if h.released < h.acquired:
            bad.append("bad hold %r: released before acquired" % (h,))
        if h.token in seen:
            bad.append("duplicate token %d: %r and %r" %
                       (h.token, seen[h.token], h))
        seen[h.token] = h
    order = sorted(history, key=lambda h: (h.acquired, h.released))
    for prev, nxt in zip(order, order[1:]):
        if nxt.acquired < prev.released:
            bad.append("overlap: %r acquired at %.6f before %r released at "
                       "%.6f" % (nxt, nxt.acquired, prev, prev.released))
        if nxt.token <= prev.token:
            bad.append("token order: %r after %r" % (nxt, prev))
    return bad
