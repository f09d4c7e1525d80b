"""cetcdctl's lease commands (grant, revoke, timetolive, list, keep-alive)
against etcdctl 3.4.23.

Goal: for every command line below, cetcdctl prints what etcdctl prints
(stdout, stderr, exit code): each sub-command in every output format
(simple, json, protobuf, fields, and table's "not supported" error, which
etcdctl gives after the call), argument errors (counts, bad TTLs and ids,
Go's ParseInt texts, negative ids after "--"), and the server's errors
(unknown lease, too large TTL).

Method: differential (tests/common/ctldiff.py): a Pair gives each tool a
fresh server and every command runs once on each side, so both histories
stay equal.  What differs by nature is removed visibly: cluster and member
ids (Pair); lease ids, which each server draws itself (LeaseIds: learned
from `lease list` after every step that makes a lease, then replaced by
<Ln..> in hex and decimal); the seconds a lease has left in timetolive
(_no_remaining); clientv3's JSON warning line on stderr for failed calls
(_no_zap: time stamp and random client id; cetcdctl does not print it);
and in `-w protobuf` output the header ids, compared after decoding
(pb_same).  The long-running commands (keep-alive, and lock and elect in
test_ctl_lock.py) run side by side as Running processes.  Where cetcdctl
does better than etcdctl (a hang), the line is checked on cetcdctl alone.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctldiff import (  # noqa: E402
    ETCDCTL, Pair, Result, _replace_ids, both_plain, cetcdctl_as_etcdctl,
    cetcdctl_bin, clean_env, run)

pytestmark = pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                reason="cetcdctl not built")

FORMATS = ["simple", "json", "protobuf", "fields", "table"]


# ---------------------------------------------------------------------------
# What differs by nature
# ---------------------------------------------------------------------------

def _no_zap(data):
    """Drops clientv3's JSON log lines (time stamp, random client id)."""
    return re.sub(rb'\{"level":"warn","ts":.*\n', b"", data)


def _no_remaining(data):
    """The seconds a lease has left depend on when each tool ran."""
    data = re.sub(rb"remaining\(-?\d+s\)", b"remaining(<N>s)", data)
    data = re.sub(rb'"ttl":-?\d+', b'"ttl":<N>', data)
    return re.sub(rb'"TTL" : -?\d+', b'"TTL" : <N>', data)


def lease_ids(endpoint):
    r = run(ETCDCTL, ["lease", "list", "-w", "json"], endpoint=endpoint)
    return {x["id"] for x in json.loads(r.out).get("leases") or []}


class LeaseIds:
    """The leases each server made, paired in the order they appeared;
    subst() gives Pair.both's substitutions for them."""

    def __init__(self, pair):
        self.pair = pair
        self.known = (set(), set())
        self.pairs = []  # (id_a, id_b)

    def sync(self):
        new = []
        for side, s in enumerate((self.pair.a, self.pair.b)):
            ids = lease_ids(s.endpoint)
            new.append(sorted(ids - self.known[side]))
            self.known[side].update(ids)
        assert len(new[0]) == len(new[1]), new
        self.pairs += list(zip(new[0], new[1]))
        return [p[0] for p in zip(new[0], new[1])]

    def hex(self, side, n=-1):
        return "%016x" % self.pairs[n][side]

    def subst(self):
        out = []
        for i, (x, y) in enumerate(self.pairs, 1):
            for fmt, tag in (("%016x", "x"), ("%x", "x"), ("%d", "d")):
                out.append(((fmt % x).encode(), (fmt % y).encode(),
                            ("<L%d%s>" % (i, tag)).encode()))
        return out

    def side_subst(self, side):
        return [(t[side], t[2]) for t in self.subst()]


def _b64_fields(data, subst):
    """JSON keys and values are base64: decoded, lease ids replaced."""
    import base64

    def fix(m):
        raw = base64.b64decode(m.group(2))
        for old, new in subst:
            raw = raw.replace(old, new)
        return b'"%s":<b64 %r>' % (m.group(1), raw)
    return re.sub(rb'"(key|value)":"([A-Za-z0-9+/=]*)"', fix, data)


def _norm_side(r, leases, side, fix):
    """One side's result with its lease ids replaced (after Pair.both's own
    replacements), then fix applied."""
    for attr in ("out", "err"):
        v = _b64_fields(getattr(r, attr), leases.side_subst(side))
        for old, new in leases.side_subst(side):
            v = v.replace(old, new)
        setattr(r, attr, fix(v))


def same(pair, leases, args, fix=lambda s: s, input=None, env=None):
    """args on both sides; the leases they made are learned, then both
    results normalised; asserts equal; returns etcdctl's."""
    a, b = pair.both(args, input=input, env=env)
    leases.sync()
    a.err = _no_zap(a.err)
    for side, r in enumerate((a, b)):
        _norm_side(r, leases, side, fix)
    assert b.triple() == a.triple(), (
        "cetcdctl differs from etcdctl for %r:\n etcdctl:  %r\n "
        "cetcdctl: %r" % (args, a, b))
    return a


def pb_same(pair, leases, args, msg):
    """-w protobuf: both outputs decode as msg (a protobuf class), are
    canonical, and are equal once the header ids and lease ids are
    replaced."""
    a, b = pair.both(args)
    leases.sync()
    a.err = _no_zap(a.err)
    assert (b.rc, b.err) == (a.rc, a.err), (args, a, b)
    if a.rc != 0:
        assert b.out == a.out
        return a
    texts = []
    for side, r in enumerate((a, b)):
        m = msg.FromString(r.out)
        assert m.SerializeToString() == r.out, (args, side, r.out)
        texts.append(_pb_text(m, leases.side_subst(side)))
    assert texts[1] == texts[0], (args, texts)
    return a


def _pb_text(m, subst):
    hdr = m if m.DESCRIPTOR.name == "ResponseHeader" else m.header
    hdr.cluster_id = hdr.member_id = 0
    text = str(m).encode()
    for old, new in subst:
        text = text.replace(old, new)
    return text


def rpc_pb2():
    from etcd3.etcdrpc import rpc_pb2 as m
    return m


# ---------------------------------------------------------------------------
# Long-running commands side by side
# ---------------------------------------------------------------------------

class Running:
    """One tool running a long command; stdout collected by a thread."""

    def __init__(self, binary, endpoint, args, env=None):
        argv = [binary] + (["--endpoints", endpoint] if endpoint else [])
        self.p = subprocess.Popen(argv + [str(x) for x in args],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE,
                                  env=clean_env(env))
        self.buf = bytearray()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        while True:
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return
            self.buf += chunk

    def wait_out(self, pred=lambda b: len(b) > 0, timeout=15):
        """Waits until pred(output so far) or the process ended."""
        end = time.time() + timeout
        while time.time() < end and not pred(bytes(self.buf)):
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        return pred(bytes(self.buf))

    def stop(self, sig=signal.SIGINT, timeout=15):
        if self.p.poll() is None and sig is not None:
            self.p.send_signal(sig)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError("did not end after signal %s" % sig)
        self.t.join(5)
        return Result(self.p.returncode, bytes(self.buf), self.p.stderr.read())


def start_both(pair, args, env=None):
    """(etcdctl on server a, cetcdctl on server b), running args."""
    return (Running(ETCDCTL, pair.a.endpoint, args, env),
            Running(cetcdctl_as_etcdctl(), pair.b.endpoint, args, env))


def _unhex(data):
    """--hex output: the escaped bytes back (they hold the lease ids)."""
    return re.sub(rb"\\x([0-9a-f]{2})",
                  lambda m: bytes([int(m.group(1), 16)]), data)


def finish_both(pair, leases, procs, sig=signal.SIGINT, fix=lambda s: s,
                unhex=False):
    """Signals both, normalises as Pair.both does (unhex: undoes --hex
    first); asserts equal."""
    res = [p.stop(sig) for p in procs]
    for side, r in enumerate(res):
        ids = pair.ids_a if side == 0 else pair.ids_b
        ep = (pair.a if side == 0 else pair.b).endpoint.encode()
        for attr in ("out", "err"):
            v = getattr(r, attr)
            v = _replace_ids(_unhex(v) if unhex else v, ids, side)
            setattr(r, attr, v.replace(ep, b"<EP>"))
        _norm_side(r, leases, side, fix)
    a, b = res
    a.err = _no_zap(a.err)
    assert b.triple() == a.triple(), (
        "cetcdctl differs from etcdctl:\n etcdctl:  %r\n cetcdctl: %r"
        % (a, b))
    return a


def on_each(pair, args_for_side):
    """Runs etcdctl on each server with side-specific args (setup)."""
    for side, s in enumerate((pair.a, pair.b)):
        r = run(ETCDCTL, args_for_side(side), endpoint=s.endpoint)
        assert r.rc == 0, r


@pytest.fixture
def pair(make_server):
    return Pair(make_server)


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_argument_errors(pair):
    leases = LeaseIds(pair)
    for args in (["lease", "grant"], ["lease", "grant", "1", "2"],
                 ["lease", "grant", "abc"], ["lease", "grant", "1_0"],
                 ["lease", "grant", "99999999999999999999"],
                 ["lease", "grant", "--", "+"],
                 ["lease", "grant", "-5"],
                 ["lease", "revoke"], ["lease", "revoke", "zz"],
                 ["lease", "revoke", "0x10"], ["lease", "revoke", ""],
                 ["lease", "revoke", "ffffffffffffffffff"],
                 ["lease", "revoke", "-1"],
                 ["lease", "timetolive"], ["lease", "timetolive", "a", "b"],
                 ["lease", "timetolive", "g"],
                 ["lease", "keep-alive"], ["lease", "keep-alive", "x"],
                 ["lease", "keep-alive", "--once"],
                 ["lease", "keep-alive", "--once", "1", "2"],
                 ["lease", "list", "--keys"],
                 ["-w", "yaml", "lease", "grant", "5"],
                 ["-w", "yaml", "lease", "grant", "x"],   # TTL first
                 ["-w", "yaml", "lease", "revoke", "x"],  # id first
                 ["-w", "yaml", "lease", "timetolive", "x"],  # client first
                 ["-w", "yaml", "lease", "list"],
                 ["lease"], ["lease", "nosuch"], ["lease", "grant", "-h"]):
        same(pair, leases, args)
    assert leases.sync() == []  # none of them made a lease


def test_grant_every_format(pair):
    leases = LeaseIds(pair)
    for f in FORMATS:
        args = ["-w", f, "lease", "grant", "30"]
        if f == "protobuf":
            pb_same(pair, leases, args, rpc_pb2().ResponseHeader)
        else:
            a = same(pair, leases, args)
            assert a.rc == (4 if f == "table" else 0)
        assert len(leases.pairs) == FORMATS.index(f) + 1  # table too
    for ttl in ("0", "1", "+7", "9223372036"):  # raised to the minimum...
        same(pair, leases, ["lease", "grant", ttl])
    same(pair, leases, ["lease", "list"])
    a = same(pair, leases, ["lease", "grant", "9000000001"])
    assert a.err == b"Error: failed to grant lease (etcdserver: too large " \
        b"lease TTL)\n"


def _granted(pair, leases, ttl="60"):
    """A lease on each side, learned; returns its index."""
    on_each(pair, lambda side: ["lease", "grant", ttl])
    assert len(leases.sync()) == 1
    return len(leases.pairs) - 1


def test_revoke_every_format(pair):
    leases = LeaseIds(pair)
    for f in FORMATS:
        _granted(pair, leases)
        # protobuf and table fail after the revoke, as etcdctl's printers do
        same_split(pair, leases, ["-w", f, "lease", "revoke", "{id}"])
        assert lease_ids(pair.a.endpoint) == lease_ids(pair.b.endpoint) \
            == set(), f
    a = same(pair, leases, ["lease", "revoke", "1234"])
    assert a.err == b"Error: failed to revoke lease (etcdserver: requested " \
        b"lease not found)\n"
    same(pair, leases, ["lease", "revoke", "--", "-1"])


def _side_args(leases, n, args):
    """Per-side argument lists with lease n's own id at "{id}"."""
    return [[a.replace("{id}", leases.hex(side, n)) for a in args]
            for side in (0, 1)]


def same_split(pair, leases, args, fix=lambda s: s):
    """Like same(), but args holds "{id}": each side gets its own lease."""
    argv = _side_args(leases, -1, args)
    res = []
    for side, (binary, s) in enumerate(
            ((ETCDCTL, pair.a), (cetcdctl_as_etcdctl(), pair.b))):
        r = run(binary, argv[side], endpoint=s.endpoint)
        for attr in ("out", "err"):
            setattr(r, attr, _replace_ids(getattr(r, attr),
                                          (pair.ids_a, pair.ids_b)[side],
                                          side))
        _norm_side(r, leases, side, fix)
        res.append(r)
    res[0].err = _no_zap(res[0].err)
    assert res[1].triple() == res[0].triple(), (args, res)
    return res[0]


def pb_split(pair, leases, args, msg):
    """pb_same with "{id}" in args."""
    argv = _side_args(leases, -1, args)
    texts, errs = [], []
    for side, (binary, s) in enumerate(
            ((ETCDCTL, pair.a), (cetcdctl_as_etcdctl(), pair.b))):
        r = run(binary, argv[side], endpoint=s.endpoint)
        errs.append((r.rc, _no_zap(r.err)))
        if r.rc == 0:
            m = msg.FromString(r.out)
            assert m.SerializeToString() == r.out
            texts.append(_pb_text(m, leases.side_subst(side)))
        else:
            texts.append(r.out)
    assert errs[1] == errs[0] and texts[1] == texts[0], (args, errs, texts)


def test_timetolive_every_format(pair):
    leases = LeaseIds(pair)
    _granted(pair, leases, "300")
    # one key: etcd lists a lease's keys in its map's (random) order
    on_each(pair, lambda side: ["put", "--lease", leases.hex(side),
                                "a key", "v"])
    for keys in ([], ["--keys"]):
        for f in FORMATS:
            args = ["-w", f, "lease", "timetolive"] + keys + ["{id}"]
            if f == "protobuf":
                pb_split(pair, leases, args, rpc_pb2().ResponseHeader)
            else:
                same_split(pair, leases, args, fix=_no_remaining)
    # unknown and negative ids: "already expired", Go's %016x of them
    for f in FORMATS:
        if f != "protobuf":
            same(pair, leases, ["-w", f, "lease", "timetolive", "1234"])
    same(pair, leases, ["lease", "timetolive", "--keys", "--", "-1"])
    same(pair, leases, ["lease", "timetolive", "--", "-8000000000000000"])
    same(pair, leases, ["lease", "timetolive", "0"])


def test_list_every_format(pair):
    leases = LeaseIds(pair)
    same(pair, leases, ["lease", "list"])
    _granted(pair, leases, "100")
    _granted(pair, leases, "50")
    for f in FORMATS:
        if f == "protobuf":
            pb_same(pair, leases, ["-w", f, "lease", "list"],
                    rpc_pb2().ResponseHeader)
        else:
            same(pair, leases, ["-w", f, "lease", "list", "ignored", "args"])


def test_keep_alive_once(pair):
    leases = LeaseIds(pair)
    _granted(pair, leases, "20")
    for f in FORMATS:
        args = ["-w", f, "lease", "keep-alive", "--once", "{id}"]
        if f == "protobuf":
            pb_split(pair, leases, args, rpc_pb2().ResponseHeader)
        else:
            same_split(pair, leases, args)
    a = same(pair, leases, ["lease", "keep-alive", "--once", "1234"])
    assert a.rc == 2 and a.err == \
        b"Error: etcdserver: requested lease not found\n"
    same(pair, leases, ["-w", "json", "lease", "keep-alive", "--once",
                        "1234"])
    same(pair, leases, ["lease", "keep-alive", "--once", "--", "-1"])


def test_keep_alive_unknown_lease(pair):
    # the server answers TTL 0 at once: the loop ends, simple says so
    leases = LeaseIds(pair)
    for f in FORMATS:
        same(pair, leases, ["-w", f, "lease", "keep-alive", "1234"])


def _collapse(data):
    """Repeated keep-alive lines: how many depends on timing."""
    out = []
    for line in data.splitlines(keepends=True):
        if not out or out[-1] != line:
            out.append(line)
    return b"".join(out)


def test_keep_alive_until_revoked(pair):
    leases = LeaseIds(pair)
    for f in ("simple", "json", "fields"):
        n = _granted(pair, leases, "3")
        argv = _side_args(leases, n, ["-w", f, "lease", "keep-alive",
                                      "{id}"])
        procs = (Running(ETCDCTL, pair.a.endpoint, argv[0]),
                 Running(cetcdctl_as_etcdctl(), pair.b.endpoint, argv[1]))
        for p in procs:
            assert p.wait_out(lambda b: b.count(b"\n") >= 2, timeout=10)
        on_each(pair, lambda side: ["lease", "revoke", leases.hex(side, n)])
        for p in procs:
            p.p.wait(timeout=10)
        a = finish_both(pair, leases, procs, sig=None, fix=_collapse)
        assert a.rc == 0


def test_keep_alive_unreachable():
    # no answer within --dial-timeout + 1 s: the lease is taken as gone
    a, b = both_plain(["--endpoints", "127.0.0.1:1", "--dial-timeout", "1s",
                       "lease", "keep-alive", "abc"])
    assert b.triple() == a.triple() == (
        0, b"lease 0000000000000abc expired or revoked.\n", b"")


def test_better_than_etcdctl_no_hang():
    # etcdctl's timetolive, list and keep-alive --once ask under
    # context.TODO() and wait forever for an unreachable server; cetcdctl
    # gives up after --command-timeout with the command's exit code.
    dead = ["--endpoints", "127.0.0.1:1", "--command-timeout", "1s"]
    for args, rc in ((["lease", "timetolive", "1"], 2),
                     (["lease", "list"], 2),
                     (["lease", "keep-alive", "--once", "1"], 2)):
        t0 = time.time()
        r = run(cetcdctl_as_etcdctl(), dead + args, timeout=20)
        assert (r.rc, r.out, r.err) == (
            rc, b"", b"Error: context deadline exceeded\n"), (args, r)
        assert time.time() - t0 < 8
    p = subprocess.Popen([ETCDCTL] + dead + ["lease", "list"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    assert p.poll() is None  # etcdctl still waits
    p.kill()
    p.wait()
