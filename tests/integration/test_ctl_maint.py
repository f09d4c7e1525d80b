"""cetcdctl's maintenance commands against the real etcdctl 3.4.23:
defrag, snapshot save / status / restore, check perf / datascale, migrate.

Goal: each command line answers as etcdctl's does: the same stdout, stderr
and exit code, and the same files (a snapshot, a restored data dir).
Method: differential, through tests/common/ctldiff.py: etcdctl runs
against one fresh server and cetcdctl against another with the same
history.  What differs by nature is replaced visibly, and only that: the
servers' ids and endpoints (ctldiff), the timestamps and durations of the
zap log lines ("ts", "took"), the paths of files each side writes, and in
the lines grpc-go's interceptors log inside etcdctl, the client's random
UUID, a dial error's text and a stream error's Go stack trace (see
grpc_logs).  Files are compared by their bytes
(WAL, .snap, a snapshot saved twice from one server) or, for bbolt files
whose page layout is the writer's own, by `snapshot status` (the CRC of
every bucket's keys and values) and by the project's bbolt dump.  A
restored data dir is also served by the real etcd.  Where cetcdctl does
better than etcdctl on purpose (a crash, a hang, a half-made dir left
behind), the test says so and checks cetcdctl's answer alone.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctldiff import LONG, LONG_REASON  # noqa: E402
from common.ctldiff import (  # noqa: E402
    ETCDCTL, Pair, both_plain, cetcdctl_as_etcdctl, cetcdctl_bin, run)
from common.servers import ETCD_BIN, REPO  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                reason="cetcdctl not built")

BUILD = os.environ.get("CETCD_BUILD_DIR", os.path.join(REPO, "build"))
BBOLT_TOOL = os.path.join(BUILD, "tests", "test_bbolt")
CTL = cetcdctl_as_etcdctl()


# -- normalising, visibly ----------------------------------------------------

def grpc_logs(err):
    """The lines grpc-go's interceptors log inside etcdctl, made
    comparable: a failed stream's error line with its Go stack trace is
    dropped (cetcdctl does not fake one); a dial failure's text names the
    dial error, which libcetcd does not give, so it becomes the deadline
    it is; the client's random UUID is masked."""
    err = b"".join(l for l in err.splitlines(keepends=True)
                   if b'"caller":"clientv3/retry_interceptor.go:129' not in l)
    err = re.sub(rb'desc = latest balancer error: (?:[^"\\]|\\.)*',
                 b"desc = context deadline exceeded", err)
    return re.sub(rb'endpoint://client-[0-9a-f-]+/', b"endpoint://client-"
                  b"<UUID>/", err)


def zap_times(err):
    """The zap lines' timestamps and the download's duration."""
    err = re.sub(rb'"ts":"[^"]*"', b'"ts":"<TS>"', err)
    err = re.sub(rb'"ts":[0-9.e+]+', b'"ts":<TS>', err)
    return re.sub(rb'"took":[0-9.e+-]+', b'"took":<TOOK>', err)


def same(a, b, fix=lambda s: s):
    """Asserts the two results equal after grpc_logs, zap_times and fix
    (applied to both)."""
    ta = (a.rc, fix(a.out), fix(zap_times(grpc_logs(a.err))))
    tb = (b.rc, fix(b.out), fix(zap_times(grpc_logs(b.err))))
    assert tb == ta, "etcdctl:  %r\ncetcdctl: %r" % (ta, tb)


def sides(pair, make_args, fix=lambda s: s, **kw):
    """Runs make_args("a") with etcdctl on server a and make_args("b") with
    cetcdctl on server b (each side its own files); returns both results
    with the side's tag replaced by <SIDE>."""
    ra = run(ETCDCTL, make_args("a"), endpoint=pair.a.endpoint, **kw)
    rb = run(CTL, make_args("b"), endpoint=pair.b.endpoint, **kw)
    for r, tag, ep in ((ra, b"side-a", pair.a.endpoint),
                       (rb, b"side-b", pair.b.endpoint)):
        for f in ("out", "err"):
            v = getattr(r, f).replace(tag, b"<SIDE>")
            setattr(r, f, fix(v.replace(ep.encode(), b"<EP>")))
    return ra, rb


def on_both(pair, *args):
    """Sets both servers up the same way with the real etcdctl."""
    for s in (pair.a, pair.b):
        r = run(ETCDCTL, list(args), endpoint=s.endpoint)
        assert r.rc == 0, r


def plain(args, fix=lambda s: s):
    a, b = both_plain(args)
    same(a, b, fix)
    return a


@pytest.fixture
def pair(make_server):
    return Pair(make_server)


@pytest.fixture
def wd(tmp_path, monkeypatch):
    """Runs the test in its own directory (relative paths in messages)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fill(pair, n=5):
    for i in range(n):
        on_both(pair, "put", "k%d" % i, "v%d" % i)


# -- help and arguments -------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["defrag", "--help"], ["snapshot", "--help"], ["snapshot"],
    ["snapshot", "save", "-h"], ["snapshot", "status", "--help"],
    ["snapshot", "restore", "--help"], ["check"], ["check", "--help"],
    ["check", "perf", "--help"], ["check", "datascale", "-h"],
    ["migrate", "--help"], ["defrag", "--cluster=maybe"],
    ["snapshot", "restore", "--skip-hash-check=x", "f"],
])
def test_help_and_flag_errors(args):
    plain(args)


@pytest.mark.parametrize("args", [
    ["snapshot", "save"], ["snapshot", "save", "a", "b"],
    ["snapshot", "status"], ["snapshot", "status", "a", "b"],
    ["snapshot", "restore"], ["snapshot", "restore", "a", "b"],
    ["check", "perf", "--load", "huge"],
    ["check", "datascale", "--load=xxl"],
    ["snapshot", "status", "-w", "yaml", "x.db"],
])
def test_argument_errors(args, wd):
    plain(args)


# -- defrag -------------------------------------------------------------------

def test_defrag_one_and_cluster(pair):
    fill(pair)
    pair.assert_same(["defrag"])
    pair.assert_same(["defrag", "--cluster"])
    pair.assert_same(["defrag", "ignored", "args"])


def test_defrag_failures(pair):
    # One member answers, one endpoint is dead: a line each, exit code 1.
    a, b = sides(pair, lambda t: ["--endpoints", "127.0.0.1:1",
                                  "--command-timeout", "1s", "defrag"])
    same(a, b)
    assert a.rc == 1 and a.out == b"Finished defragmenting etcd member" \
        b"[<EP>]\n" and a.err.endswith(
            b"Failed to defragment etcd member[127.0.0.1:1] (context "
            b"deadline exceeded)\n")
    # --cluster on a dead endpoint: the member list fails.
    same(*both_plain(["--endpoints", "127.0.0.1:1", "--command-timeout",
                      "500ms", "defrag", "--cluster"]))


def test_defrag_server_error(pair):
    # A user without the root role may not defragment: the server's error.
    on_both(pair, "user", "add", "root:rootpw")
    on_both(pair, "user", "add", "u:upw")
    on_both(pair, "auth", "enable")
    for who in (["--user", "u:upw"], []):
        a, b = pair.both(who + ["defrag"])
        same(a, b)
        assert a.rc == 1 and b"Failed to defragment" in a.err
    a, b = pair.both(["--user", "u:bad", "defrag"])
    same(a, b)
    pair.assert_same(["--user", "root:rootpw", "defrag", "--cluster"])


def etcd_data_dir(path, src):
    """An etcd data dir, made by the real etcdctl's restore of src."""
    r = run(ETCDCTL, ["snapshot", "restore", src, "--data-dir", path])
    assert r.rc == 0, r
    return path


def status_json(path, tool=ETCDCTL):
    r = run(tool, ["snapshot", "status", path, "-w", "json"])
    assert r.rc == 0, r
    return json.loads(r.out)


def test_defrag_data_dir_of_etcd(pair, wd):
    """Offline defrag of an etcd (bbolt) data dir: both leave a db with
    the same buckets and entries (status hash over all of them)."""
    fill(pair, 50)
    on_both(pair, "del", "k", "--prefix")
    snap = str(wd / "s.db")
    assert run(ETCDCTL, ["snapshot", "save", snap],
               endpoint=pair.a.endpoint).rc == 0
    da, db = etcd_data_dir("da", snap), etcd_data_dir("db", snap)
    before = status_json(da + "/member/snap/db")
    a = run(ETCDCTL, ["defrag", "--data-dir", da])
    b = run(CTL, ["defrag", "--data-dir", db])
    same(a, b)
    assert a.rc == 0 and a.out == b"" and a.err == b""
    sa, sb = (status_json(d + "/member/snap/db") for d in (da, db))
    for k in ("hash", "revision", "totalKey"):
        assert sa[k] == sb[k] == before[k], (k, sa, sb, before)
    # the bbolt file cetcdctl wrote passes bbolt's own check (etcdctl)
    assert not os.path.exists(db + "/member/snap/db.tmp")


def test_defrag_data_dir_refusals(make_server, wd):
    """A cetcd data dir is LMDB: refused, naming the flag (etcdctl would
    make a new empty bbolt file in it).  A missing dir: etcdctl panics;
    cetcdctl says what is missing."""
    s = make_server()
    s.stop()
    b = run(CTL, ["defrag", "--data-dir", s.data_dir])
    assert b.rc == 4 and b.out == b""
    assert b.err.startswith(b"Error: --data-dir %s is a cetcd data dir" %
                            s.data_dir.encode()), b.err
    assert not os.path.exists(os.path.join(s.data_dir, "member", "snap", "db"))
    b = run(CTL, ["defrag", "--data-dir", "nowhere"])
    assert (b.rc, b.out, b.err) == (
        1, b"", b"Failed to defragment etcd data[nowhere] (open "
        b"nowhere/member/snap/db: no such file or directory)\n")
    a = run(ETCDCTL, ["defrag", "--data-dir", "nowhere"])
    assert a.rc == 2 and b"panic: cannot open database" in a.err


# -- snapshot save ------------------------------------------------------------

def test_snapshot_save(pair, wd):
    fill(pair, 20)
    a, b = sides(pair, lambda t: ["snapshot", "save", "side-%s.db" % t],
                 fix=zap_times)
    same(a, b)
    assert a.out == b"Snapshot saved at <SIDE>.db\n" and a.rc == 0
    assert not os.path.exists("side-b.db.part")
    # The same history: the same revision and keys (the member and
    # cluster ids in them differ).
    sa, sb = status_json("side-a.db"), status_json("side-b.db")
    assert (sa["revision"], sa["totalKey"]) == (sb["revision"],
                                                sb["totalKey"])
    # One server saved by both tools: the same bytes.
    assert run(ETCDCTL, ["snapshot", "save", "b2.db"],
               endpoint=pair.b.endpoint).rc == 0
    assert bytes_of("side-b.db") == bytes_of("b2.db")
    assert os.stat("side-b.db").st_mode & 0o777 == 0o600
    # Over an existing file.
    same(*pair.both(["snapshot", "save", "b2.db"]), zap_times)


def test_snapshot_save_errors(pair, wd):
    two = ["--endpoints", "127.0.0.1:1,127.0.0.1:2"]
    same(*both_plain(two + ["snapshot", "save", "x.db"]))
    same(*both_plain(two + ["--endpoints", "127.0.0.1:3", "snapshot",
                            "save", "x.db"]))
    a, b = pair.both(["snapshot", "save", "/nonexistent/x.db"])
    same(a, b)
    assert a.rc == 5
    # A dead endpoint within --command-timeout: the .part file is made,
    # then removed, and the error is the deadline.
    a, b = both_plain(["--endpoints", "127.0.0.1:1", "--command-timeout",
                       "1s", "snapshot", "save", "x.db"])
    same(a, b, zap_times)
    assert a.rc == 5 and not os.path.exists("x.db.part")
    # The server refuses (auth on, no user): logged by clientv3, exit 5.
    on_both(pair, "user", "add", "root:rootpw")
    on_both(pair, "auth", "enable")
    a, b = pair.both(["snapshot", "save", "x.db"])
    # etcdctl's clientv3 logs the failure from its reading goroutine,
    # which races the main goroutine's "fetching snapshot" line: the
    # lines are compared in sorted order
    same(a, b, lambda s: b"".join(sorted(s.splitlines(keepends=True))))
    assert a.rc == 5 and b"failed to receive from snapshot stream" in a.err
    assert not os.path.exists("x.db") and not os.path.exists("x.db.part")
    a, b = sides(pair, lambda t: ["--user", "root:rootpw", "snapshot",
                                  "save", "side-%s.db" % t], fix=zap_times)
    same(a, b)
    assert a.rc == 0


# -- snapshot status ----------------------------------------------------------

@pytest.fixture
def saved(pair, wd):
    """A snapshot of the same history on each side: a.db and b.db."""
    fill(pair, 30)
    on_both(pair, "compaction", "10")
    on_both(pair, "del", "k1")
    for t, s in (("a", pair.a), ("b", pair.b)):
        r = run(ETCDCTL, ["snapshot", "save", "%s.db" % t],
                endpoint=s.endpoint)
        assert r.rc == 0, r
    return pair


@pytest.mark.parametrize("fmt", ["simple", "json", "table", "fields",
                                 "protobuf"])
def test_snapshot_status_formats(saved, fmt):
    for f in ("a.db", "b.db"):
        a = run(ETCDCTL, ["snapshot", "status", f, "-w", fmt])
        b = run(CTL, ["snapshot", "status", f, "-w", fmt])
        same(a, b)
    assert (a.rc == 4) == (fmt == "protobuf")


def test_snapshot_status_of_files(wd, saved):
    """bbolt's open errors, a data dir's db (no trailer), a directory."""
    open("empty.db", "wb").close()
    open("text.db", "wb").write(b"hello\n")
    open("rand.db", "wb").write(os.urandom(9000))
    data = open("a.db", "rb").read()
    open("bad-meta0.db", "wb").write(data[:16] + b"\0" * 4 + data[20:])
    open("version.db", "wb").write(data[:20] + b"\x07" + data[21:4096] +
                                   data[4096:4116] + b"\x07" +
                                   data[4117:])
    etcd_data_dir("dd", "a.db")
    for f in ("missing.db", "empty.db", "text.db", "rand.db", ".",
              "bad-meta0.db", "version.db", "dd/member/snap/db"):
        a = run(ETCDCTL, ["snapshot", "status", f])
        b = run(CTL, ["snapshot", "status", f])
        same(a, b)


def test_snapshot_status_corrupt_better(wd, saved):
    """A cut file: etcdctl dies of SIGBUS inside bbolt's check (exit 2);
    cetcdctl reports the damage (exit 1)."""
    open("cut.db", "wb").write(open("a.db", "rb").read()[:8192])
    b = run(CTL, ["snapshot", "status", "cut.db"])
    assert b.rc == 1 and b.out == b""
    assert b.err.startswith(b"Error: snapshot file integrity check failed."
                            b" 1 errors found.\n"), b.err


# -- snapshot restore ---------------------------------------------------------

def restore_both(args, src_a="a.db", src_b=None, fix=None):
    """etcdctl restores into side-a dirs, cetcdctl into side-b ones."""
    def mk(t, src):
        return ["snapshot", "restore", src] + [
            x.replace("SIDE", "side-" + t) for x in args]
    a = run(ETCDCTL, mk("a", src_a))
    b = run(CTL, mk("b", src_b or src_a))
    for r, t in ((a, b"side-a"), (b, b"side-b")):
        r.err = zap_times(r.err.replace(t, b"<SIDE>"))
    same(a, b)
    return a


def bytes_of(path):
    return open(path, "rb").read()


def check_restored(da, db, wal_a=None, wal_b=None):
    """The WAL and .snap files are etcd's bytes; the db has etcd's
    buckets and entries; the modes are etcd's."""
    wal_a = wal_a or os.path.join(da, "member", "wal")
    wal_b = wal_b or os.path.join(db, "member", "wal")
    assert sorted(os.listdir(wal_a)) == sorted(os.listdir(wal_b))
    for f in os.listdir(wal_a):
        assert bytes_of(os.path.join(wal_a, f)) == \
            bytes_of(os.path.join(wal_b, f)), f
        assert os.stat(os.path.join(wal_b, f)).st_mode & 0o777 == 0o600
    sa, sb = (os.path.join(d, "member", "snap") for d in (da, db))
    assert sorted(os.listdir(sa)) == sorted(os.listdir(sb))
    for f in os.listdir(sa):
        if f != "db":
            assert bytes_of(os.path.join(sa, f)) == \
                bytes_of(os.path.join(sb, f)), f
        assert os.stat(os.path.join(sa, f)).st_mode == \
            os.stat(os.path.join(sb, f)).st_mode, f
    assert status_json(sa + "/db") == status_json(sb + "/db")
    if os.path.exists(BBOLT_TOOL):
        dump = [subprocess.run([BBOLT_TOOL, "dump", d + "/db"],
                               capture_output=True).stdout for d in (sa, sb)]
        assert dump[0] == dump[1]
    for d in (da, db):
        assert os.stat(d).st_mode & 0o777 == 0o700


def test_snapshot_restore_default(saved):
    restore_both(["--data-dir", "SIDE"])
    check_restored("side-a", "side-b")
    # without --data-dir: <name>.etcd in the working directory
    a = run(ETCDCTL, ["snapshot", "restore", "a.db", "--name", "zza"])
    b = run(CTL, ["snapshot", "restore", "a.db", "--name", "zzb"])
    for r, t in ((a, b"zza"), (b, b"zzb")):
        r.err = zap_times(r.err.replace(t, b"<N>"))
    same(a, b)


def test_snapshot_restore_cluster(saved, tmp_path):
    """Three members, a token, two peer URLs for the local one, a separate
    WAL dir: the ids, the conf changes and the v2 store are etcd's."""
    args = ["--name", "n2", "--initial-cluster-token", "tok",
            "--initial-cluster",
            "n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380,"
            "n2=https://10.0.0.2:2381,n3=http://10.0.0.3:2380",
            "--initial-advertise-peer-urls",
            " https://10.0.0.2:2381,HTTP://10.0.0.2:2380",
            "--data-dir", "SIDE/data", "--wal-dir", "SIDE/wal"]
    restore_both(args)
    check_restored("side-a/data", "side-b/data", "side-a/wal", "side-b/wal")


@pytest.mark.skipif(not LONG, reason=LONG_REASON)
@pytest.mark.parametrize("args", [
    ["--initial-cluster", "default=localhost:2380"],
    ["--initial-cluster", "default=http://localhost"],
    ["--initial-cluster", "default=http://localhost:2380/x"],
    ["--initial-cluster", "other=http://localhost:2380"],
    ["--initial-cluster", "default=http://localhost:2380,"
                          "x=http://localhost:2380"],
    ["--initial-advertise-peer-urls", "http://localhost:2381"],
    ["--initial-advertise-peer-urls",
     "http://localhost:2380,http://localhost:2381"],
    ["--initial-advertise-peer-urls", "ftp://localhost:2380"],
    ["--name", "n x"],
    ["--initial-advertise-peer-urls", "http://127.0.0.1:2380"],
    ["--initial-cluster", "default=http://127.0.0.1:2380",
     "--initial-advertise-peer-urls", "http://127.0.0.2:2380"],
    ["--initial-cluster", "default=unix://a:1"],
    ["--initial-cluster", "default=http://[::1]:2380",
     "--initial-advertise-peer-urls", "http://[::1]:2380"],
])
def test_snapshot_restore_bad_config(saved, args):
    a = restore_both(args + ["--data-dir", "SIDE"])
    # config errors come before any directory is made
    assert os.path.exists("side-a") == os.path.exists("side-b") == \
        (a.rc == 0)


def test_snapshot_restore_file_errors(saved):
    data = bytes_of("a.db")
    open("nohash.db", "wb").write(data[:-32])
    open("extra.db", "wb").write(data + b"x")
    open("corrupt.db", "wb").write(b"\0" * 512 + data[512:])
    open("tiny.db", "wb").write(b"abc")
    os.mkdir("exists")
    cases = [(["missing.db"], "nohash"), (["tiny.db"], "tiny"),
             (["nohash.db"], "nohash"), (["extra.db"], "extra"),
             (["corrupt.db"], "corrupt"),
             (["a.db", "--data-dir", "exists"], None),
             (["a.db", "--wal-dir", "exists"], None)]
    for args, _ in cases:
        a = run(ETCDCTL, ["snapshot", "restore", "--data-dir", "out-a"] +
                args[:1] + args[1:])
        b = run(CTL, ["snapshot", "restore", "--data-dir", "out-b"] +
                args[:1] + args[1:])
        for r, t in ((a, b"out-a"), (b, b"out-b")):
            r.err = zap_times(r.err.replace(t, b"<OUT>"))
        same(a, b)
        assert a.rc == 1
        # etcdctl leaves what it made behind (the next try then fails
        # with "data-dir exists"); cetcdctl removes it.
        assert not os.path.exists("out-b")
        shutil.rmtree("out-a", ignore_errors=True)
    # A db copied from a data dir has no trailer: --skip-hash-check.
    etcd_data_dir("dd", "a.db")
    restore_both(["--skip-hash-check", "--data-dir", "SIDE"],
                 src_a="dd/member/snap/db")
    check_restored("side-a", "side-b")


def test_snapshot_restore_served_by_etcd(make_server, saved):
    """The real etcd 3.4 starts on cetcdctl's restore and serves the keys
    at their revisions."""
    if not os.path.exists(ETCD_BIN):
        pytest.skip("no etcd")
    srv = make_server(binary=ETCD_BIN, start=False)
    r = run(CTL, ["snapshot", "restore", "b.db", "--data-dir",
                  srv.data_dir, "--name", srv.name, "--initial-cluster",
                  "%s=%s" % (srv.name, srv.peer_url),
                  "--initial-advertise-peer-urls", srv.peer_url])
    assert r.rc == 0, r
    srv.start()
    got = run(ETCDCTL, ["get", "k", "--prefix", "-w", "json"],
              endpoint=srv.endpoint)
    want = run(ETCDCTL, ["get", "k", "--prefix", "-w", "json"],
               endpoint=saved.b.endpoint)
    kvs = [json.loads(x.out)["kvs"] for x in (got, want)]
    assert kvs[0] == kvs[1] and len(kvs[0]) == 29


# -- check --------------------------------------------------------------------

def bar_lines(out):
    """The progress bar's refreshes (timing-dependent: how many, and each
    one's counters) become one line; the rest stays."""
    lines = []
    for line in out.split(b"\n"):
        parts = line.split(b"\r")
        if len(parts) > 1:
            assert re.fullmatch(rb" \d+ / \d+ +\d+\.\d\d%( \S+)?",
                                parts[-1]), parts[-1]
            line = parts[0] + b"<BAR>"
        lines.append(line)
    return b"\n".join(lines)


def test_check_prefix_has_keys(pair):
    on_both(pair, "put", "/etcdctl-check-perf/x", "1")
    on_both(pair, "put", "/p/q", "1")
    pair.assert_same(["check", "perf"])
    pair.assert_same(["check", "datascale", "--prefix", "/p/"])


@pytest.mark.skipif(not LONG, reason=LONG_REASON)
def test_check_datascale(pair):
    rev = [pair.a.rev(), pair.b.rev()]
    a, b = pair.both(["check", "datascale", "--auto-compact"], timeout=300)
    mem = re.compile(rb"Approximate system memory used : -?[0-9.]+ MB")
    fix = lambda s: mem.sub(b"MEM", bar_lines(s))  # noqa: E731
    same(a, b, fix)
    assert a.rc == 0 and b"Compacted with revision" in a.out
    assert pair.a.rev() - rev[0] == pair.b.rev() - rev[1] == 10001


@pytest.mark.skipif(not LONG, reason=LONG_REASON)
def test_check_perf(pair):
    """60 s of load on each side at once (two servers, one machine: the
    verdict lines are compared by shape; which pass is the machine's)."""
    res = {}

    def go(tag, tool, srv):
        res[tag] = run(tool, ["check", "perf", "--auto-defrag"],
                       endpoint=srv.endpoint, timeout=300)
    ts = [threading.Thread(target=go, args=a) for a in
          (("a", ETCDCTL, pair.a), ("b", CTL, pair.b))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    shape = re.compile(
        rb"(FAIL: Throughput too low|PASS: Throughput is) \d+ writes/s|"
        rb"(Slowest request took too long:|PASS: Slowest request took) "
        rb"[0-9.]+s|(Stddev too high:|PASS: Stddev is) [0-9.]+s|"
        rb"^(PASS|FAIL)$", re.M)
    for r, ep in ((res["a"], pair.a.endpoint), (res["b"], pair.b.endpoint)):
        out = bar_lines(r.out.replace(ep.encode(), b"<EP>"))
        rest = shape.sub(b"<V>", out)
        assert rest == (b"<BAR>\nDefragmenting \"<EP>\"\nDefragmented "
                        b"\"<EP>\"\n<V>\n<V>\n<V>\n<V>\n"), (r, rest)
        assert r.err == b"" and r.rc == (0 if out.endswith(b"PASS\n")
                                          else 1)
    for s in (pair.a, pair.b):
        r = run(ETCDCTL, ["get", "/etcdctl-check-perf/", "--prefix",
                          "--count-only", "-w", "json"], endpoint=s.endpoint)
        assert b'"count"' not in r.out


# -- migrate ------------------------------------------------------------------

def test_migrate_refused(wd):
    b = run(CTL, ["migrate", "--data-dir", "x"])
    assert (b.rc, b.out) == (4, b"")
    assert b.err.startswith(b"Error: migrate is not supported: cetcd has "
                            b"no v2 store"), b.err
