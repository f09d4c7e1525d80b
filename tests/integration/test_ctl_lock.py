"""cetcdctl's lock and elect against etcdctl 3.4.23.

Goal: `lock` and `elect` behave as etcdctl's: the same output (the lock
key, the leader key and value, in every output format: simple with and
without --hex, json, protobuf, fields; table's error after the lock is
taken), the same exit codes and errors (argument errors, "context
canceled" for a waiter interrupted, "session expired" when the session's
lease is revoked under it, the exec errors of `lock NAME CMD`, a too large
--ttl), the same keys left on the server, and `elect -l`'s stream of
leaders, including etcdctl's quirks (the first leader printed without the
Range's count, later values of the same leader with it).

Method: differential, as test_ctl_lease.py (whose helpers this file
uses): each tool runs against its own fresh server, the long-running
commands side by side (Running), signalled together; the session leases
each server makes are learned from `lease list` and replaced by
placeholders, in hex (lock keys) and decimal (json/fields lease fields),
also inside the base64 keys of `-w json`.  Where cetcdctl does better
(-w table: it releases the lock it cannot print; a nested lock's
variables), that line is checked on its own with etcdctl's behaviour next
to it.
"""

import os
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from common.ctldiff import LONG, LONG_REASON  # noqa: E402
from test_ctl_lease import (  # noqa: E402
    ETCDCTL, LeaseIds, cetcdctl_as_etcdctl, cetcdctl_bin,
    finish_both, on_each, pair, rpc_pb2, run, same, start_both)

pytestmark = pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                reason="cetcdctl not built")
assert pair  # the fixture, imported


def keys(pair, side, prefix):
    s = (pair.a, pair.b)[side]
    r = run(ETCDCTL, ["get", "--prefix", prefix, "--keys-only"],
            endpoint=s.endpoint)
    return r.out.split()


def wait_lines(procs, n):
    for p in procs:
        assert p.wait_out(lambda b: b.count(b"\n") >= n), bytes(p.buf)


def test_argument_errors(pair):
    leases = LeaseIds(pair)
    for args in (["lock"], ["lock", "--ttl", "abc", "x"],
                 ["lock", "x", "sh", "-c", "true"],  # -c is a flag
                 ["elect"], ["elect", "a", "b", "c"], ["elect", "a"],
                 ["elect", "-l", "a", "b"], ["elect", "-l"],
                 ["-w", "yaml", "lock", "x"], ["-w", "yaml", "elect", "a"]):
        same(pair, leases, args)
    a = same(pair, leases, ["lock", "--ttl", "9000000001", "x"])
    assert a.err == b"Error: etcdserver: too large lease TTL\n"
    assert leases.pairs == []


def test_lock_every_format(pair):
    leases = LeaseIds(pair)
    for fmt in (["-w", "simple"], ["--hex"], ["-w", "json"], ["-w", "fields"],
                ["-w", "protobuf"]):
        name = "lk" + fmt[-1]
        procs = start_both(pair, fmt + ["lock", name])
        for p in procs:
            assert p.wait_out(), bytes(p.buf)
        leases.sync()
        if fmt[-1] == "protobuf":
            res = [p.stop() for p in procs]
            assert [r.rc for r in res] == [0, 0] and res[0].err == \
                res[1].err == b""
            texts = []
            for side, r in enumerate(res):
                m = rpc_pb2().RangeResponse.FromString(r.out)
                assert m.SerializeToString() == r.out
                m.header.cluster_id = m.header.member_id = 0
                t = str(m).encode()
                for old, new in leases.side_subst(side):
                    t = t.replace(old, new)
                texts.append(t)
            assert texts[0] == texts[1], texts
        else:
            a = finish_both(pair, leases, procs,
                            unhex=fmt[-1] == "--hex")
            assert a.rc == 0 and b"<L" in a.out
        assert keys(pair, 0, name) == keys(pair, 1, name) == []  # unlocked


def test_lock_table_better_than_etcdctl(pair):
    # etcdctl cannot print -w table: it exits 4 once it holds the lock and
    # leaves its key to the session's lease; cetcdctl releases it first.
    leases = LeaseIds(pair)
    procs = start_both(pair, ["-w", "table", "lock", "tl"])
    a = finish_both(pair, leases, procs, sig=None)
    assert (a.rc, a.out, a.err) == (
        4, b"", b"Error: table not supported as output format\n")
    assert len(keys(pair, 0, "tl")) == 1 and keys(pair, 1, "tl") == []


def test_lock_contended(pair):
    leases = LeaseIds(pair)
    holder = start_both(pair, ["lock", "mylock"])
    wait_lines(holder, 2)
    leases.sync()
    waiter = start_both(pair, ["lock", "mylock"])
    time.sleep(1.5)
    leases.sync()
    assert all(p.buf == b"" for p in waiter)  # both wait
    assert len(keys(pair, 0, "mylock/")) == len(keys(pair, 1, "mylock/")) == 2
    # a waiter interrupted: "context canceled", its key removed
    a = finish_both(pair, leases, waiter)
    assert (a.rc, a.out, a.err) == (1, b"", b"Error: context canceled\n")
    assert len(keys(pair, 0, "mylock/")) == len(keys(pair, 1, "mylock/")) == 1
    second = start_both(pair, ["lock", "mylock"])
    time.sleep(1.0)
    leases.sync()
    a = finish_both(pair, leases, holder)  # unlocks: second takes it
    assert a.rc == 0
    wait_lines(second, 2)
    a = finish_both(pair, leases, second, sig=signal.SIGTERM)
    assert a.rc == 0 and a.out.startswith(b"mylock/<L3x>\n")
    assert keys(pair, 0, "mylock/") == keys(pair, 1, "mylock/") == []


def test_lock_session_expired(pair):
    leases = LeaseIds(pair)
    procs = start_both(pair, ["lock", "--ttl", "3", "sx"])
    wait_lines(procs, 2)
    leases.sync()
    # the session's lease revoked under it: the next keep-alive says so
    on_each(pair, lambda side: ["lease", "revoke", leases.hex(side)])
    for p in procs:
        p.p.wait(timeout=10)
    a = finish_both(pair, leases, procs, sig=None)
    assert (a.rc, a.err) == (1, b"Error: session expired\n")


def test_lock_exec(pair):
    leases = LeaseIds(pair)
    a = same(pair, leases, ["lock", "ex", "--", "sh", "-c",
                            'echo "$ETCD_LOCK_KEY $ETCD_LOCK_REV"'])
    assert a.rc == 0 and a.out == b"ex/<L1x> 2\n"
    # the command's stdin is /dev/null, its output ours; unlocked after
    same(pair, leases, ["lock", "ex", "--", "sh", "-c", "cat; echo done >&2"],
         input="not for the child")
    assert keys(pair, 0, "ex/") == keys(pair, 1, "ex/") == []
    for cmd in (["sh", "-c", "exit 3"], ["sh", "-c", "kill -9 $$"],
                ["sh", "-c", "kill -TERM $$"], ["nosuchcmd", "a"],
                ["/nonexistent/x"], ["/etc/passwd"], [""], ["/"]):
        a = same(pair, leases, ["lock", "ex", "--"] + cmd)
        assert a.rc == 1, cmd
    same(pair, leases, ["lock", "ex", "--", "sh", "-c", "true"],
         env={"PATH": "/usr/bin:/bin:"})
    same(pair, leases, ["lock", "ex", "--", "nosuch"], env={"PATH": ""})
    assert keys(pair, 0, "ex/") == keys(pair, 1, "ex/") == []


def test_lock_exec_env_better_than_etcdctl(pair):
    # etcdctl appends the environment after its two variables and Go keeps
    # the last of duplicates: inside another lock the child sees the outer
    # ETCD_LOCK_KEY.  cetcdctl's own values win.
    env = {"ETCD_LOCK_KEY": "outer/1", "ETCD_LOCK_REV": "1"}
    args = ["lock", "nest", "--", "sh", "-c",
            'echo "$ETCD_LOCK_KEY $ETCD_LOCK_REV"']
    a = run(ETCDCTL, args, endpoint=pair.a.endpoint, env=env)
    b = run(cetcdctl_as_etcdctl(), args, endpoint=pair.b.endpoint, env=env)
    assert a.out == b"outer/1 1\n"
    assert b.out.startswith(b"nest/") and b.out.endswith(b" 2\n")


def test_elect_every_format(pair):
    leases = LeaseIds(pair)
    for fmt in (["-w", "simple"], ["--hex"], ["-w", "json"],
                ["-w", "fields"]):
        name = "el" + fmt[-1]
        procs = start_both(pair, fmt + ["elect", name, "v a\nl"])
        for p in procs:
            assert p.wait_out(), bytes(p.buf)
        time.sleep(0.3)
        leases.sync()
        a = finish_both(pair, leases, procs, sig=signal.SIGTERM,
                        unhex=fmt[-1] == "--hex")
        assert a.rc == 0 and b"<L" in a.out
        assert keys(pair, 0, name) == keys(pair, 1, name) == []  # resigned
    procs = start_both(pair, ["-w", "table", "elect", "et", "v"])
    a = finish_both(pair, leases, procs, sig=None)
    assert (a.rc, a.err) == (4, b"Error: table not supported as output "
                                b"format\n")


@pytest.mark.skipif(not LONG, reason=LONG_REASON)
def test_elect_session_expired(pair):
    leases = LeaseIds(pair)
    procs = start_both(pair, ["elect", "se", "v"])
    wait_lines(procs, 2)
    leases.sync()
    on_each(pair, lambda side: ["lease", "revoke", leases.hex(side)])
    for p in procs:
        p.p.wait(timeout=30)  # the session's TTL is 60 s: a keep-alive
    a = finish_both(pair, leases, procs, sig=None)   # comes in 20 s
    assert (a.rc, a.err) == (1, b"Error: elect: session expired\n")


def _proclaim(pair, leases, n, value):
    """Puts a new value on each side's leader key (a Proclaim)."""
    on_each(pair, lambda side: ["put", "--ignore-lease",
                                "ob/" + "%x" % leases.pairs[n][side], value])


def test_elect_observe_and_takeover(pair):
    leases = LeaseIds(pair)
    obs1 = start_both(pair, ["elect", "-l", "ob"])  # before any leader
    time.sleep(1.0)
    leases.sync()  # <L1>: obs1's session
    alice = start_both(pair, ["elect", "ob", "alice"])
    wait_lines(alice, 2)
    leases.sync()  # <L2>
    wait_lines(obs1, 2)
    _proclaim(pair, leases, 1, "alice2")
    wait_lines(obs1, 4)
    bob = start_both(pair, ["elect", "ob", "bob"])
    time.sleep(1.0)
    leases.sync()  # <L3>
    obs2 = start_both(pair, ["-w", "json", "elect", "-l", "ob"])
    wait_lines(obs2, 1)  # the leader found by a Range
    leases.sync()  # <L4>
    _proclaim(pair, leases, 1, "alice3")
    wait_lines(obs2, 2)  # a new value: with the Range's count and more
    a = finish_both(pair, leases, alice)
    assert a.rc == 0 and a.out == b"ob/<L2x>\nalice\n"
    wait_lines(bob, 2)
    wait_lines(obs1, 8)
    wait_lines(obs2, 3)
    for procs in (bob, obs1, obs2):
        a = finish_both(pair, leases, procs)
        assert a.rc == 0
    assert a.out.count(b"\n") == 3 and b'"count":2' in a.out
    assert keys(pair, 0, "ob/") == keys(pair, 1, "ob/") == []
