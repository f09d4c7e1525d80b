"""A checker for lock histories with fencing tokens.

A history is a list of Hold records, one per critical section a client
believed it held: the lock key's create revision (the fencing token: the
lock service grants in create-revision order), the client's monotonic
clock when the Lock answer arrived (acquired) and just before it sent
Unlock (released), and how the client gave the lock back (end).  A
client's observed section lies inside the section the lock really granted
(granted before the answer, held until the key's delete), so if the lock
is correct no two observed sections overlap, and in the order the
sections were held their tokens strictly increase.

How a hold ended (Hold.end): "unlock" (Unlock answered), "revoke" (Unlock
failed, the hold's lease was revoked and the revoke answered), "expire"
(neither answered: the key is left to its lease's TTL), None (the client
gave nothing back).  An "expire" is only a claim: the caller proves it by
looking for the lock's keys once every lease had time to expire and
passing the create revisions of the keys still there as `remaining`.

check(history, remaining=()) returns the violations as strings ([] =
correct):
- "duplicate token": two holds with the same token;
- "overlap": a hold acquired before the previous one (by acquire time)
  released;
- "token order": a later hold has a smaller token than an earlier one;
- "not released": a hold with no end (neither unlocked, revoked nor left
  to expire);
- "still held": a hold whose key is among `remaining` (neither released
  nor expired);
- "leftover key": a key among `remaining` that no hold saw (a waiter's or
  an unrecorded holder's key: also neither released nor expired).
"""

from dataclasses import dataclass

ENDS = ("unlock", "revoke", "expire")


@dataclass(frozen=True)
class Hold:
    client: str       # who held it
    token: int        # the lock key's create revision
    acquired: float   # monotonic time the Lock answer came
    released: float   # monotonic time before the Unlock was sent
    end: str = "unlock"   # how it was given back (ENDS), None if not


def check(history, remaining=()):
    bad = []
    seen = {}
    for h in history:
        if h.released < h.acquired:
            bad.append("bad hold %r: released before acquired" % (h,))
        if h.token in seen:
            bad.append("duplicate token %d: %r and %r" %
                       (h.token, seen[h.token], h))
        seen[h.token] = h
        if h.end not in ENDS:
            bad.append("not released: %r (neither unlocked, revoked nor "
                       "left to expire)" % (h,))
    order = sorted(history, key=lambda h: (h.acquired, h.released))
    for prev, nxt in zip(order, order[1:]):
        if nxt.acquired < prev.released:
            bad.append("overlap: %r acquired at %.6f before %r released at "
                       "%.6f" % (nxt, nxt.acquired, prev, prev.released))
        if nxt.token <= prev.token:
            bad.append("token order: %r after %r" % (nxt, prev))
    for rev in sorted(set(remaining)):
        if rev in seen:
            bad.append("still held: %r's key (create revision %d) is still "
                       "there" % (seen[rev], rev))
        else:
            bad.append("leftover key: a lock key with create revision %d "
                       "that no hold saw is still there" % rev)
    return bad
