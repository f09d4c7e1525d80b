"""cetcdctl's `watch` and `make-mirror` against etcdctl 3.4.23.

Goal: every command line below makes cetcdctl print what etcdctl prints
(stdout, stderr, exit code): watch in every output format (simple with
and without --hex, json, protobuf, fields, and table's "not supported"
exit), --prefix, ranges, --rev replays, --prev-kv, the command run after
"--" for every event (its ETCD_WATCH_* variables and its failures),
ETCDCTL_WATCH_KEY / ETCDCTL_WATCH_RANGE_END, interactive mode (-i) with
its progress requests and its refused and fatal lines, the argument
errors, a watch the server cancels (compacted revision, empty range), a
server that goes away and comes back, Ctrl-C; and make-mirror's copy and
follow with its prefixes, its argument and TLS-file errors.

Method: differential (tests/common/ctldiff.py).  Each tool gets its own
fresh server (a Pair); a watch runs as a live process on each side while
the same writes go to both servers (through the real etcdctl), so both
histories and revisions are equal.  Watches start at --rev=<current+1>
where the moment the watcher is registered would otherwise matter.  The
outputs are read until both stop growing, then the processes are stopped
(or run to their own exit) and compared.  What cannot be equal is removed
visibly: the cluster and member ids (ctldiff's text replacement, and the
header's id varints in `-w protobuf` output: _pb_no_ids).  Where etcdctl
has a plain bug cetcdctl does better; those lines are checked on cetcdctl
alone (test_*_better_than_etcdctl), next to what etcdctl does.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctldiff import pb_enc_varint as _enc_varint  # noqa: E402
from common.ctldiff import pb_varint as _varint  # noqa: E402
from common.ctldiff import LONG, LONG_REASON  # noqa: E402
from common.ctldiff import (  # noqa: E402
    ETCDCTL, Pair, both_plain, cetcdctl_as_etcdctl, cetcdctl_bin,
    clean_env, run, _replace_ids)

pytestmark = pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                reason="cetcdctl not built")

FORMATS = ["simple", "json", "protobuf", "fields", "table"]


# ---------------------------------------------------------------------------
# Live processes on both sides
# ---------------------------------------------------------------------------

class Live:
    """One running etcdctl or cetcdctl; threads collect its output."""

    def __init__(self, binary, endpoint, args, env=None, stdin=False):
        argv = [binary, "--endpoints", endpoint] + [str(a) for a in args]
        self.p = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=clean_env(env))
        self.out, self.err = [b""], [b""]
        self.threads = [threading.Thread(target=self._read, args=(pipe, buf),
                                         daemon=True)
                        for pipe, buf in ((self.p.stdout, self.out),
                                          (self.p.stderr, self.err))]
        for t in self.threads:
            t.start()

    @staticmethod
    def _read(pipe, buf):
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            buf[0] += chunk

    def size(self):
        return len(self.out[0]) + len(self.err[0])

    def send(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def finish(self, sig=None, timeout=10):
        """Stops the process (sig; None: wait for its own exit), returns
        (rc, out, err)."""
        if sig is not None and self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        for t in self.threads:
            t.join(timeout=5)
        return self.p.returncode, self.out[0], self.err[0]


def start(pair, args, env=None, stdin=False):
    """The watch args on both sides: (etcdctl on a, cetcdctl on b)."""
    return (Live(ETCDCTL, pair.a.endpoint, args, env, stdin),
            Live(cetcdctl_as_etcdctl(), pair.b.endpoint, args, env, stdin))


def settle(lives, quiet=0.6, timeout=15):
    """Waits until the outputs of every process stopped growing (or all
    have exited) for `quiet` seconds."""
    end = time.time() + timeout
    last, since = None, time.time()
    while time.time() < end:
        now = tuple(x.size() for x in lives)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return
        time.sleep(0.05)


def wait_output(lives, want, timeout=30):
    """Waits until every process printed at least `want` (a reconnect
    waits for grpc-go's backoff, which can pass a second after a server
    came back, so quiet output does not mean it is done)."""
    end = time.time() + timeout
    while time.time() < end and not all(
            x.out[0].startswith(want) for x in lives):
        time.sleep(0.05)


def first_output(lives, timeout=15):
    """Waits until every process printed something: the watcher is
    registered, so that later writes are not caught up with in one
    batch on one side only."""
    end = time.time() + timeout
    while time.time() < end and not all(x.size() for x in lives):
        time.sleep(0.05)


def write(pair, *args, input=None):
    """The same write on both servers, by the real etcdctl."""
    for ep in (pair.a.endpoint, pair.b.endpoint):
        r = run(ETCDCTL, args, endpoint=ep, input=input)
        assert r.rc == 0, (args, r)



def _pb_field(b, i):
    key, j = _varint(b, i)
    wt = key & 7
    if wt == 0:
        k = _varint(b, j)[1]
    elif wt == 2:
        n, j2 = _varint(b, j)
        k = j2 + n
    else:
        raise ValueError("unexpected wire type %d" % wt)
    return key >> 3, b[i:j], b[j:k], k


def _pb_no_ids(b):
    """WatchResponses' bytes with each header's cluster_id and member_id
    (fields 1 and 2 of field 1) dropped and the header re-encoded."""
    out, i = b"", 0
    while i < len(b):
        num, key, raw, i = _pb_field(b, i)
        if num == 1:
            n, j = _varint(raw, 0)
            payload, hdr, k = raw[j:j + n], b"", 0
            while k < len(payload):
                hn, hk, hraw, k = _pb_field(payload, k)
                hdr += b"" if hn in (1, 2) else hk + hraw
            raw = _enc_varint(len(hdr)) + hdr
        out += key + raw
    return out


def compare(pair, a, b, sig=signal.SIGKILL, pb=False, timeout=10):
    """Stops both (or waits for their exit with sig None) and asserts the
    same (rc, out, err); returns etcdctl's."""
    ra, rb = a.finish(sig, timeout), b.finish(sig, timeout)
    res = []
    for (rc, out, err), ids, side in ((ra, pair.ids_a, 0),
                                      (rb, pair.ids_b, 1)):
        if pb:
            out = _pb_no_ids(out)
        res.append((rc, _replace_ids(out, ids, side),
                    _replace_ids(err, ids, side)))
    assert res[1] == res[0], ("cetcdctl differs from etcdctl:\n etcdctl:  "
                              "%r\n cetcdctl: %r" % (res[0], res[1]))
    return res[0]


def rev(pair):
    ra, rb = pair.a.rev(), pair.b.rev()
    assert ra == rb
    return ra


@pytest.fixture
def pair(make_server):
    return Pair(make_server)


def same_plain(args, env=None, input=None):
    a, b = both_plain(args, env=env, input=input)
    assert b.triple() == a.triple(), (args, a, b)
    return a


# ---------------------------------------------------------------------------
# Arguments (no server needed: etcdctl's client does not dial at creation)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["watch"],
    ["watch", "--"],
    ["watch", "foo", "--"],
    ["watch", "foo", "bar", "--"],
    ["watch", "--rev", "1"],
    ["watch", "--", "echo"],
    ["watch", "a", "b", "--prefix"],
    ["watch", "--prefix", "a", "b", "--", "echo", "x"],
    ["watch", "--rev", "x", "foo"],
    ["watch", "-w", "xml", "foo"],
    ["watch", "--rev", "1", "-w", "xml"],
    ["watch", "--progress-notify", "foo"],  # not a flag of 3.4.23
    ["watch", "--help"],
    ["make-mirror"],
    ["make-mirror", "a:1", "b:2"],
    ["make-mirror", "--help"],
    ["make-mirror", "--max-txn-ops", "5", "x:1"],  # not in 3.4.23
    ["make-mirror", "--dest-cert", "/nonexistent.pem", "x:1"],
    ["make-mirror", "--dest-key", "/nonexistent.pem", "x:1"],
    ["make-mirror", "--dest-cert", "/nonexistent.pem", "--dest-key",
     "/nonexistent-key.pem", "x:1"],
    ["make-mirror", "--dest-cacert", "/nonexistent.pem", "x:1"],
    ["make-mirror", "-w", "xml", "x:1"],
])
def test_arguments(args):
    same_plain(args)


@pytest.mark.parametrize("env,args", [
    ({"ETCDCTL_WATCH_RANGE_END": "z"}, ["watch", "a"]),
    ({"ETCDCTL_WATCH_RANGE_END": "z"}, ["watch", "-i"]),
    ({"ETCDCTL_WATCH_KEY": "k"}, ["watch", "k"]),
    ({"ETCDCTL_WATCH_KEY": "k"}, ["watch", "k", "--", "echo"]),
    ({"ETCDCTL_WATCH_KEY": "k"}, ["watch", "--rev", "1", "k", "--",
                                  "echo", "1"]),
    ({"ETCDCTL_WATCH_KEY": "k", "ETCDCTL_WATCH_RANGE_END": "m"},
     ["watch", "--prefix", "-w", "xml"]),
])
def test_env_arguments(env, args):
    same_plain(args, env=env)


# ---------------------------------------------------------------------------
# Events in every format
# ---------------------------------------------------------------------------

def history(pair, a, b):
    """Puts, a delete, a txn of three events and a key with odd bytes."""
    write(pair, "put", "k1", "v1")
    first_output([a, b])
    write(pair, "put", "k2", "")
    write(pair, "put", "k1", "v1-new")
    write(pair, "del", "k2")
    write(pair, "txn", input="\nput k3 a\nput k4 b\ndel k1\n\n\n")
    write(pair, "put", "k\xe9\t\"q", "line1\nline2 \x01")


@pytest.mark.parametrize("fmt", ["simple", "json", "fields", "hex",
                                 "prev-kv", "prev-kv-json"])
def test_watch_formats(pair, fmt):
    extra = {"hex": ["--hex"], "prev-kv": ["--prev-kv"],
             "prev-kv-json": ["--prev-kv", "-w", "json"]}.get(
                 fmt, ["-w", fmt])
    a, b = start(pair, ["watch", "--prefix", "k", "--rev", rev(pair) + 1]
                 + extra)
    history(pair, a, b)
    settle([a, b])
    compare(pair, a, b)


def test_watch_protobuf(pair):
    a, b = start(pair, ["watch", "--prefix", "k", "-w", "protobuf",
                        "--prev-kv", "--rev", rev(pair) + 1])
    history(pair, a, b)
    settle([a, b])
    compare(pair, a, b, pb=True)


def test_watch_table_is_not_supported(pair):
    a, b = start(pair, ["watch", "k", "-w", "table", "--rev", rev(pair) + 1])
    write(pair, "put", "k", "v")
    rc, out, err = compare(pair, a, b, sig=None)
    assert (rc, err) == (4, b"Error: table not supported as output "
                            b"format\n")


def test_watch_range_and_replay(pair):
    for k in ("a", "b", "bb", "c", "d"):
        write(pair, "put", k, "v-" + k)
    a, b = start(pair, ["watch", "b", "d", "--rev", "2"])
    settle([a, b])
    write(pair, "put", "c", "again")
    write(pair, "put", "d", "out of range")
    settle([a, b])
    rc, out, err = compare(pair, a, b)
    assert out.count(b"PUT") == 4


def test_watch_key_and_empty_value_json(pair):
    a, b = start(pair, ["watch", "x", "-w", "json", "--rev", rev(pair) + 1])
    write(pair, "put", "x", "")
    first_output([a, b])
    write(pair, "del", "x")
    write(pair, "del", "x")  # no event: nothing was there
    write(pair, "put", "x", "1")
    settle([a, b])
    compare(pair, a, b)


# ---------------------------------------------------------------------------
# Watches that end
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_watch_compacted(pair, fmt):
    for i in range(4):
        write(pair, "put", "c", str(i))  # revisions 2..5
    write(pair, "compaction", "4")
    a, b = start(pair, ["watch", "c", "--rev", "2", "-w", fmt])
    rc, out, err = compare(pair, a, b, sig=None, pb=fmt == "protobuf")
    assert rc == (4 if fmt == "table" else 5)
    assert err.startswith(b"watch was canceled (etcdserver: mvcc: required "
                          b"revision has been compacted)\n")


@pytest.mark.parametrize("fmt", ["simple", "json", "protobuf", "fields"])
def test_watch_refused_range(pair, fmt):
    """A range that ends before its key: the server refuses the create."""
    a, b = start(pair, ["watch", "b", "a", "-w", fmt])
    rc, out, err = compare(pair, a, b, sig=None, pb=fmt == "protobuf")
    assert rc == 5 and b"watch was canceled (" in err


def test_watch_at_compact_revision_gets_the_rest(pair):
    for i in range(4):
        write(pair, "put", "c", str(i))
    write(pair, "compaction", "4")
    a, b = start(pair, ["watch", "c", "--rev", "4"])
    settle([a, b])
    rc, out, err = compare(pair, a, b)
    assert out == b"PUT\nc\n2\nPUT\nc\n3\n"


def test_watch_survives_server_restart(pair):
    """etcdctl's watch waits for a server that went away and goes on from
    where it was when the server is back."""
    a, b = start(pair, ["watch", "r", "--rev", rev(pair) + 1])
    write(pair, "put", "r", "before")
    settle([a, b])
    pair.a.stop()
    pair.b.stop()
    time.sleep(1.5)
    assert a.p.poll() is None and b.p.poll() is None
    pair.a.restart()
    pair.b.restart()
    write(pair, "put", "r", "after")
    wait_output([a, b], b"PUT\nr\nbefore\nPUT\nr\nafter\n")
    settle([a, b])
    rc, out, err = compare(pair, a, b)
    assert out == b"PUT\nr\nbefore\nPUT\nr\nafter\n"


def test_watch_unreachable_waits(make_server):
    """No server at all: both wait silently until stopped."""
    a = Live(ETCDCTL, "127.0.0.1:1", ["watch", "k"])
    b = Live(cetcdctl_as_etcdctl(), "127.0.0.1:1", ["watch", "k"])
    time.sleep(2)
    assert a.p.poll() is None and b.p.poll() is None
    assert a.finish(signal.SIGINT) == b.finish(signal.SIGINT)


def test_watch_ctrl_c(pair):
    a, b = start(pair, ["watch", "k", "--rev", rev(pair) + 1])
    write(pair, "put", "k", "v")
    settle([a, b])
    rc, out, err = compare(pair, a, b, sig=signal.SIGINT)
    assert rc == -signal.SIGINT and out == b"PUT\nk\nv\n"


# ---------------------------------------------------------------------------
# The command after "--"
# ---------------------------------------------------------------------------

SHOW_ENV = ("printf '%s|%s|%s|%s|%s\\n' \"$ETCD_WATCH_REVISION\" "
            "\"$ETCD_WATCH_EVENT_TYPE\" \"$ETCD_WATCH_KEY\" "
            "\"$ETCD_WATCH_VALUE\" \"$0\"; read x || echo stdin-empty")


def test_watch_exec(pair):
    a, b = start(pair, ["watch", "--prefix", "e", "--rev", rev(pair) + 1,
                        "--prev-kv", "--", "sh", "-c", SHOW_ENV])
    write(pair, "put", "e1", "hello world")
    first_output([a, b])
    write(pair, "put", "e\xe92", "q\"uote\n")
    write(pair, "del", "e1")
    write(pair, "txn", input="\nput e3 a\nput e4 b\n\n\n")
    settle([a, b])
    rc, out, err = compare(pair, a, b)
    assert b'|"PUT"|"e1"|"hello world"|sh' in out


def test_watch_exec_variables_replace_inherited(pair):
    env = {"ETCD_WATCH_KEY": "inherited"}
    a, b = start(pair, ["watch", "v", "--rev", rev(pair) + 1, "--", "sh",
                        "-c", "echo $ETCD_WATCH_KEY"], env=env)
    write(pair, "put", "v", "1")
    settle([a, b])
    rc, out, err = compare(pair, a, b)
    assert out.endswith(b'"v"\n')


@pytest.mark.parametrize("cmd", [
    ["sh", "-c", "exit 3"],
    ["sh", "-c", "kill -9 $$"],
    ["sh", "-c", "kill -TERM $$"],
    ["no-such-command-xyz", "a b"],
    ["./no-such-file", "a"],
    ["/tmp", "x"],
    [""],
])
def test_watch_exec_fails(pair, cmd):
    a, b = start(pair, ["watch", "f", "--rev", rev(pair) + 1, "--"] + cmd)
    write(pair, "put", "f", "1")
    rc, out, err = compare(pair, a, b, sig=None)
    assert rc == 1 and err.startswith(b"command [")


def test_watch_env_key_and_range(pair):
    env = {"ETCDCTL_WATCH_KEY": "m", "ETCDCTL_WATCH_RANGE_END": "o"}
    a, b = start(pair, ["watch", "--rev", rev(pair) + 1, "--", "sh", "-c",
                        "echo got $ETCD_WATCH_KEY"], env=env)
    write(pair, "put", "m", "m")
    first_output([a, b])
    for k in ("l", "n", "o"):
        write(pair, "put", k, k)
    settle([a, b])
    rc, out, err = compare(pair, a, b)
    assert out.count(b"got ") == 2


def test_watch_exec_cut_better_than_etcdctl(pair):
    """`watch a -- echo echo`: etcdctl cuts its watch words at the last
    word equal to the command's first, so it watches the range [a, echo)
    and runs the command for "b" too; cetcdctl watches "a" only."""
    a, b = start(pair, ["watch", "a", "--rev", rev(pair) + 1, "--", "echo",
                        "echo"])
    write(pair, "put", "b", "1")
    first_output([a])
    write(pair, "put", "a", "2")
    settle([a, b])
    ra, rb = a.finish(signal.SIGKILL), b.finish(signal.SIGKILL)
    assert ra[1] == b"PUT\nb\n1\necho\nPUT\na\n2\necho\n"  # etcdctl
    assert rb[1] == b"PUT\na\n2\necho\n"


# ---------------------------------------------------------------------------
# Interactive mode
# ---------------------------------------------------------------------------

def lines_both(a, b, lines):
    for line in lines:
        a.send(line)
        b.send(line)


def test_interactive_session(pair):
    a, b = start(pair, ["watch", "-i"], stdin=True)
    r = rev(pair)
    lines_both(a, b, ["watch foo --rev %d" % (r + 1),
                      "watch a c --rev %d --prev-kv" % (r + 1),
                      "watch --prefix p --rev %d -- sh -c 'echo hi'"
                      % (r + 1)])
    time.sleep(0.5)
    write(pair, "put", "foo", "1")
    first_output([a, b])
    write(pair, "put", "b", "2")
    write(pair, "put", "b", "3")
    write(pair, "put", "p1", "4")
    settle([a, b])
    lines_both(a, b, ["progress", "", "cancel foo", "watch",
                      "watch a b --prefix", "watch \"x y\" --rev %d"
                      % (r + 1)])
    settle([a, b])
    write(pair, "put", "x y", "5")
    settle([a, b])
    a.p.stdin.close()
    b.p.stdin.close()
    rc, out, err = compare(pair, a, b, sig=None)
    assert rc == 3 and out.count(b"progress notify:") == 3
    assert err.endswith(b"Error: Error reading watch request line: EOF\n")


def test_interactive_progress_json(pair):
    """One watcher: etcdctl prints each watcher's channel on a goroutine of
    its own, so the lines of two watchers interleave as they happen to."""
    a, b = start(pair, ["watch", "-i", "-w", "json"], stdin=True)
    lines_both(a, b, ["watch k1"])
    time.sleep(0.5)
    write(pair, "put", "k1", "v")
    settle([a, b])
    lines_both(a, b, ["progress"])
    settle([a, b])
    compare(pair, a, b)


def test_interactive_compacted_goes_on(pair):
    for i in range(4):
        write(pair, "put", "c", str(i))
    write(pair, "compaction", "4")
    a, b = start(pair, ["watch", "-i"], stdin=True)
    r = rev(pair)
    lines_both(a, b, ["watch c --rev 2", "watch d --rev %d" % (r + 1)])
    settle([a, b])
    write(pair, "put", "d", "still here")
    settle([a, b])
    rc, out, err = compare(pair, a, b)
    assert out == b"PUT\nd\nstill here\n"


@pytest.mark.parametrize("line", [
    "watch --rev abc x",
    "watch x --",
    "watch --prefix",
    "watch --rev 3",
    "watch --hex x",
    "watch -h",
    "watch --prev-kv=maybe x",
    "watch \"\\q\"",
])
def test_interactive_fatal_lines(pair, line):
    a, b = start(pair, ["watch", "-i"], stdin=True)
    lines_both(a, b, [line])
    rc, out, err = compare(pair, a, b, sig=None)
    assert rc in (3, 128)


def test_interactive_env_key(pair):
    env = {"ETCDCTL_WATCH_KEY": "ek"}
    a, b = start(pair, ["watch", "-i"], env=env, stdin=True)
    lines_both(a, b, ["watch", "watch --prev-kv", "watch other"])
    time.sleep(0.5)
    write(pair, "put", "ek", "1")
    write(pair, "put", "ek", "2")
    rc, out, err = compare(pair, a, b, sig=None)
    assert rc == 128


def test_interactive_single_quote_better_than_etcdctl(pair):
    """etcdctl strips a single-quoted word by the number of words on the
    line instead of the word's length: `watch 'ab'` watches the empty key
    there.  cetcdctl watches "ab"."""
    a, b = start(pair, ["watch", "-i"], stdin=True)
    lines_both(a, b, ["watch 'ab'", "watch 'c d'"])
    time.sleep(0.5)
    write(pair, "put", "ab", "1")
    write(pair, "put", "c d", "2")
    settle([a, b])
    ra, rb = a.finish(signal.SIGKILL), b.finish(signal.SIGKILL)
    assert ra[1] == b""  # etcdctl
    assert rb[1] == b"PUT\nab\n1\nPUT\nc d\n2\n"


# ---------------------------------------------------------------------------
# make-mirror
# ---------------------------------------------------------------------------

@pytest.fixture
def mirror(make_server):
    """A Pair of sources and one destination server per side."""
    p = Pair(make_server)
    p.da = make_server(name="m1")
    p.db = make_server(name="m1")
    return p


def dest_dump(mirror):
    """Every key of each destination (etcdctl get, simple)."""
    out = []
    for ep in (mirror.da.endpoint, mirror.db.endpoint):
        r = run(ETCDCTL, ["get", "", "--from-key"], endpoint=ep)
        assert r.rc == 0
        out.append(r.out)
    return out


def mirror_both(mirror, args):
    return (Live(ETCDCTL, mirror.a.endpoint,
                 ["make-mirror"] + args + [mirror.da.endpoint]),
            Live(cetcdctl_as_etcdctl(), mirror.b.endpoint,
                 ["make-mirror"] + args + [mirror.db.endpoint]))


def wait_same(mirror, want_keys, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        da, db = dest_dump(mirror)
        if da == db and da.count(b"\n") == 2 * want_keys:
            return da
        time.sleep(0.2)
    da, db = dest_dump(mirror)
    assert db == da
    return da


@pytest.mark.parametrize("flags,copied,want", [
    ([], 2, [b"a1", b"a2", b"b1", b"b2"]),
    (["--prefix", "a"], 1, [b"a1", b"a2"]),
    (["--prefix", "a", "--dest-prefix", "z/"], 1, [b"z/1", b"z/2"]),
    (["--prefix", "a", "--no-dest-prefix"], 1, [b"1", b"2"]),
])
def test_make_mirror(mirror, flags, copied, want):
    for k in ("a1", "b1"):
        write(mirror, "put", k, "v-" + k)
    a, b = mirror_both(mirror, flags)
    wait_same(mirror, copied)
    write(mirror, "put", "a2", "x")
    write(mirror, "put", "b2", "y")
    write(mirror, "txn", input="\nput a1 new\nput b1 new\n\n\n")
    write(mirror, "del", "a1")
    write(mirror, "put", "a1", "back")
    got = wait_same(mirror, len(want))
    assert got.split(b"\n")[0::2][:-1] == want
    compare(mirror, a, b)


def test_make_mirror_both_prefix_flags(mirror):
    a, b = mirror_both(mirror, ["--dest-prefix", "x", "--no-dest-prefix"])
    rc, out, err = compare(mirror, a, b, sig=None)
    assert rc == 128


@pytest.mark.skipif(not LONG, reason=LONG_REASON)
def test_make_mirror_counts_every_30s(mirror):
    """make-mirror prints the number of keys it copied every 30 s."""
    for k in ("a1", "a2", "a3"):
        write(mirror, "put", k, "v")
    a, b = mirror_both(mirror, [])
    wait_same(mirror, 3)
    write(mirror, "del", "a3")
    time.sleep(31)
    rc, out, err = compare(mirror, a, b)
    assert out == b"4\n"
