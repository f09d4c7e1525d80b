"""The member flags that issue 15 found marked built but read by no code.

Goal: each is built as etcd 3.4.23 does it, or refused with a message that
names it, never accepted and ignored (given on the command line or as its
ETCD_* variable):
  --max-wals          WAL segments beyond the newest N that replay no longer
                      needs are deleted; 0 keeps them all; needed ones never
                      go, so a restart still replays.
  --experimental-warning-apply-duration
                      an apply that takes longer logs etcd's "request ...
                      took too long (...) to execute" warning.
  --initial-election-tick-advance
                      a cluster member fast-forwards its election ticks once
                      its peers are connected (etcd's log line); =false
                      does not.
  --enable-grpc-gateway
                      the /v3 gateway (default on, as etcd): =false turns
                      it off (Go's 404), =true or no flag serves it.
Method: members started from conftest's Server with the flags under test,
their logs and their WAL dir read from outside; small WAL segments come
from CETCD_TEST_WAL_SEGMENT_BYTES (cetcd only).  The cases etcd shares also
run against etcd 3.4.23 (CETCD_TEST_AGAINST_ETCD=1).
"""
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import Server, against_etcd
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc as pb_grpc


def run(make_server, *flags, env=None):
    s = make_server(start=False)
    s.extra_args = list(flags)
    try:
        return subprocess.run(s.args(), capture_output=True, text=True,
                              timeout=30, cwd=s.root,
                              env=dict(os.environ, **(env or {})))
    finally:
        s.cleanup()


def log_of(s):
    with open(s.log_path) as f:
        return f.read()


# -- --enable-grpc-gateway ------------------------------------------------

def gw_range(s):
    """POST /v3/kv/range on s's client URL: (status, body)."""
    cp = subprocess.run(["curl", "-sS", "-m", "10", "-w", "\n%{http_code}",
                         "-d", '{"key":"aw=="}',
                         s.client_url + "/v3/kv/range"],
                        capture_output=True, text=True, timeout=20)
    assert cp.returncode == 0, cp.stderr
    body, status = cp.stdout.rsplit("\n", 1)
    return int(status), body


@pytest.mark.parametrize("flags, env, on", [
    ((), None, True),                                     # etcd's default
    (("--enable-grpc-gateway",), None, True),
    (("--enable-grpc-gateway=false",), None, False),
    ((), {"ETCD_ENABLE_GRPC_GATEWAY": "false"}, False),
])
def test_grpc_gateway_flag(make_server, monkeypatch, flags, env, on):
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    s = make_server(extra_args=list(flags))
    s.kv().Put(pb.PutRequest(key=b"k", value=b"v"), timeout=10)
    status, body = gw_range(s)
    if on:
        assert status == 200, body
        assert '"kvs":[{"key":"aw==",' in body
    else:
        assert (status, body) == (404, "404 page not found\n")


# -- --experimental-warning-apply-duration ---------------------------------

def test_warning_apply_duration(make_server, monkeypatch):
    """1ns: every apply is slow, and etcd's line names the request (the
    value by its size) and the result's size; 1h: none is."""
    s = make_server(extra_args=["--experimental-warning-apply-duration",
                                "1ns"])
    s.kv().Put(pb.PutRequest(key=b"slow-key", value=b"abc"), timeout=10)
    time.sleep(0.2)
    text = log_of(s)
    assert ('put:<key:\\"slow-key\\" value_size:3 >" with result "size:'
            in text), text
    assert "took too long (" in text and ") to execute" in text
    quiet = make_server(extra_args=["--experimental-warning-apply-duration",
                                    "1h"])
    quiet.kv().Put(pb.PutRequest(key=b"slow-key", value=b"abc"), timeout=10)
    time.sleep(0.2)
    assert "took too long" not in log_of(quiet)
    monkeypatch.setenv("ETCD_EXPERIMENTAL_WARNING_APPLY_DURATION", "1ns")
    env = make_server()
    env.kv().Put(pb.PutRequest(key=b"env-key", value=b"abcd"), timeout=10)
    time.sleep(0.2)
    assert 'put:<key:\\"env-key\\" value_size:4 >' in log_of(env)


@pytest.mark.parametrize("value", ["10", "1.5", "5x", ".s", "1s2", "s",
                                   "", "1 s", "--1s"])
def test_warning_apply_duration_bad_value(make_server, value):
    """Go's time.ParseDuration refuses these (flag exit status 2)."""
    cp = run(make_server, "--experimental-warning-apply-duration=" + value,
             "--version")
    assert cp.returncode == 2, cp
    assert ('invalid value "%s" for flag '
            '-experimental-warning-apply-duration' % value in cp.stderr), \
        cp.stderr


@pytest.mark.parametrize("value", ["0", "-1s", "+2ms", "1.5s", "1h2m3.5s",
                                   "100\u00b5s", "100us", "3.ns", ".5m"])
def test_warning_apply_duration_good_value(make_server, value):
    """...and takes these (parsed, then --version exits 0)."""
    cp = run(make_server, "--experimental-warning-apply-duration=" + value,
             "--version")
    assert cp.returncode == 0, cp


# -- --initial-election-tick-advance ---------------------------------------

def start_cluster(extra):
    """Three members started together (each waits for a quorum)."""
    ms = [Server(name="m%d" % i) for i in (1, 2, 3)]
    cluster = ",".join("%s=%s" % (m.name, m.peer_url) for m in ms)
    for m in ms:
        m.extra_args = ["--initial-cluster", cluster,
                        "--heartbeat-interval", "100",
                        "--election-timeout", "3000"] + list(extra)
    errs = []

    def start(m):
        try:
            m.start(timeout=60)
        except Exception as e:  # reported below, after the others
            errs.append(e)
    ts = [threading.Thread(target=start, args=(m,)) for m in ms]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return ms, errs


@pytest.mark.parametrize("advance", [True, False])
def test_initial_election_tick_advance(advance):
    ms, errs = start_cluster(
        ["--initial-election-tick-advance=%s" % str(advance).lower()])
    try:
        assert not errs, errs
        ms[0].kv().Put(pb.PutRequest(key=b"k", value=b"v"), timeout=10)
        logs = [log_of(m) for m in ms]
        line = ("initialized peer connection; fast-forwarding 28 ticks "
                "(election ticks 30) with 2 active peer(s)")
        if advance:
            assert any(line in t for t in logs), logs
        else:
            assert not any(line in t for t in logs), logs
            if not against_etcd():  # etcd's capnslog says nothing
                assert all("skipping initial election tick advance" in t
                           for t in logs), logs
    finally:
        for m in ms:
            m.cleanup()


def test_status_errors_no_leader():
    """Maintenance.Status's errors (etcdctl endpoint status -w json): none
    with a leader; "etcdserver: no leader" on a member left alone of three,
    as etcd 3.4's Status."""
    ms, errs = start_cluster([])
    try:
        assert not errs, errs

        def errors(m):
            st = json.loads(m.ctl("endpoint", "status", "-w", "json").out)
            return st[0]["Status"].get("errors", [])
        assert errors(ms[0]) == []
        ms[1].stop()
        ms[2].stop()
        deadline = time.monotonic() + 30
        while errors(ms[0]) == [] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert errors(ms[0]) == ["etcdserver: no leader"]
    finally:
        for m in ms:
            m.cleanup()


# -- --max-wals ------------------------------------------------------------

SEG_BYTES = 16384
SNAP_COUNT = 500
# cetcd keeps 5000 entries behind a snapshot (src/server/snapshot.c), and
# a snapshot is taken (pinned, in the background) some --snapshot-count
# entries behind the last: a segment holding one of the last
# NEEDED_ENTRIES entries may still be needed.
NEEDED_ENTRIES = 5000 + 4 * SNAP_COUNT


def segments(s):
    """(first index, name) of each WAL segment, oldest first."""
    d = os.path.join(s.data_dir, "member", "wal")
    names = sorted(n for n in os.listdir(d) if n.endswith(".wal"))
    return [(int(n[17:33], 16), n) for n in names]


def needed_bound(segs, last_index):
    """How many segments hold one of the last NEEDED_ENTRIES entries: an
    upper bound of what replay needs."""
    lo = last_index - NEEDED_ENTRIES
    return sum(1 for i, _ in enumerate(segs)
               if i + 1 == len(segs) or segs[i + 1][0] - 1 >= lo)


def in_use(s):
    """Status.dbSizeInUse (etcdctl: the Python client's proto predates
    it)."""
    st = json.loads(s.ctl("endpoint", "status", "-w", "json").out)[0]
    return int(st["Status"]["dbSizeInUse"])


def put_many(s, n, check=None):
    kv = s.kv()
    last = 0
    for i in range(n):
        r = kv.Put(pb.PutRequest(key=b"k%05d" % i, value=b"v" * 64),
                   timeout=10)
        last = r.header.revision
        if check is not None and i % 100 == 0:
            check()
    return last


@pytest.mark.skipif(against_etcd(), reason="cetcd's small test segments")
@pytest.mark.parametrize("max_wals", [2, 0, 80])
def test_max_wals(make_server, monkeypatch, max_wals):
    """--max-wals=2: the WAL dir never holds more than max(2, needed)
    segments and the oldest are deleted; 0: none is deleted; 80 (more than
    replay needs, fewer than were cut): --max-wals is a maximum, and the
    released segments kept also stay within a 16th of the store's pages in
    use (snap_raft.c wal_budget): about that many are kept, fewer than 80
    (before session 17: exactly 80).  A restart replays every write."""
    monkeypatch.setenv("CETCD_TEST_WAL_SEGMENT_BYTES", str(SEG_BYTES))
    s = make_server(extra_args=["--snapshot-count", str(SNAP_COUNT),
                                "--max-wals", str(max_wals),
                                "--unsafe-no-fsync"])
    most = [0]

    def check():
        segs = segments(s)
        most[0] = max(most[0], len(segs))
        if max_wals:
            # The revision stands in for the raft index: it lags it by
            # the few non-KV entries (member records, empty entries).
            bound = needed_bound(segs, s.rev() + 20)
            assert len(segs) <= max(max_wals, bound), (segs, bound)

    n = 9000
    put_many(s, n, check)
    check()
    segs = segments(s)
    if max_wals == 0:
        assert segs[0][0] == 1, segs  # the first segment is still there
        assert len(segs) == most[0]
    else:
        assert segs[0][0] > 1, segs  # the oldest ones were deleted
    if max_wals == 80:
        budget = in_use(s) // 16  # bytes of released segments kept
        assert budget // SEG_BYTES < 40, budget  # the byte rule bites
        # the segments kept beyond those replay needs fill the budget
        # (the in-use at the last pin may be a little below it now)
        needed = needed_bound(segs, s.rev() + 20)
        assert len(segs) <= needed + budget // SEG_BYTES + 1, (segs, budget)
        assert len(segs) >= budget * 3 // 4 // SEG_BYTES, (segs, budget)
        assert most[0] < 80, most
    s.restart()
    r = s.kv().Range(pb.RangeRequest(key=b"k", range_end=b"l",
                                     count_only=True), timeout=10)
    assert r.count == n
    got = s.kv().Range(pb.RangeRequest(key=b"k%05d" % (n - 1)), timeout=10)
    assert got.kvs[0].value == b"v" * 64


def pin_indexes(s):
    """The consistent index of each pin file (src/server/snap_pin.c)."""
    d = os.path.join(s.data_dir, "member", "snap")
    return sorted(int(n[:16], 16) for n in os.listdir(d)
                  if n.endswith(".pin"))


def test_unsafe_no_fsync_restarts(make_server):
    """--unsafe-no-fsync turns off the WAL's fsyncs and the store's pins'
    (snap_pin.c), as etcd turns off all of its own: pins are still taken
    (without their syncs), and the member restarts with every write after
    a clean stop and after a kill -9 (the page cache holds them)."""
    s = make_server(extra_args=["--unsafe-no-fsync"])
    kv = s.kv()
    first = None if against_etcd() else pin_indexes(s)
    for i in range(1500):  # overwrites: the freed pages ask for new pins
        kv.Put(pb.PutRequest(key=b"k%03d" % (i % 100), value=b"%05d" % i +
                             b"v" * 4096))
    if not against_etcd():
        deadline = time.monotonic() + 10
        while pin_indexes(s) == first and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pin_indexes(s) != first, first
        assert pin_indexes(s)[-1] > first[-1]

    def check():
        r = s.kv().Range(pb.RangeRequest(key=b"k", range_end=b"l"),
                         timeout=10)
        assert len(r.kvs) == 100
        assert all(x.value[:5] == b"%05d" % (1400 + i)
                   for i, x in enumerate(r.kvs))
    rc = s.stop()
    assert rc == 0 or against_etcd()  # etcd re-raises SIGTERM: -15
    s.start()
    check()
    s.kv().Put(pb.PutRequest(key=b"after", value=b"v"))
    s.kill()
    s.start()
    check()
    assert s.kv().Range(pb.RangeRequest(key=b"after")).count == 1


# -- lease checkpoints ---------------------------------------------------------

@pytest.mark.parametrize("flag", [
    pytest.param("--experimental-enable-lease-checkpoint", marks=(
        pytest.mark.skipif(against_etcd(), reason=(
            "etcd 3.4.23 panics at start with it (embed.Config.Validate "
            "warns through a nil zap logger under the capnslog default)")))),
    "--experimental-enable-lease-checkpoint=false"])
def test_lease_checkpoint_flag_accepted(make_server, flag):
    """etcd 3.4.23's flag; cetcd checkpoints either way (lease.h)."""
    s = make_server(extra_args=[flag])
    lease = pb_grpc.LeaseStub(s.channel())
    assert lease.LeaseGrant(pb.LeaseGrantRequest(TTL=5, ID=3),
                            timeout=10).ID == 3


@pytest.mark.skipif(against_etcd(), reason="etcd 3.5's flag, not 3.4's")
def test_lease_checkpoint_interval(make_server):
    s = make_server(extra_args=["--experimental-lease-checkpoint-interval",
                                "30s"])
    s.kv().Put(pb.PutRequest(key=b"k", value=b"v"), timeout=10)
    cp = run(make_server, "--experimental-lease-checkpoint-interval=5x",
             "--version")
    assert cp.returncode == 2, cp
    assert ('invalid value "5x" for flag '
            '-experimental-lease-checkpoint-interval' in cp.stderr), cp.stderr
