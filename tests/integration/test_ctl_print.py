"""cetcdctl's printers (src/ctl/print.h) against etcdctl 3.4.23's, byte for byte.

Goal: for the same response, the printers write exactly what etcdctl
writes with -w json, -w protobuf, -w fields, -w table and the default
(simple) format, including the error texts of unsupported pairings.

Method: one real etcd 3.4.23 (/usr/bin/etcd, whatever CETCD_BIN says: the
printers are under test, not the server), a member name with spaces so the
member table wraps, a second (learner, never started) member, keys with
binary, UTF-8 and <>& bytes, a key under a lease, users and roles.  For a
read-only command, etcdctl -w protobuf gives the raw response, which the
driver tests/ctl/print_probe prints in each format; etcdctl prints the same
command in that format and the two must be equal.  Nothing writes between
the two runs, so the revision and raft term are the same.  Where etcdctl's
protobuf output is not the whole response (lease timetolive and list, whose
clientv3 structs marshal only their header; endpoint hashkv; watch) the raw
response comes from a gRPC call instead.  snapshot status is compared on
the formats derived from its numbers.  endpoint status and health are left
out: they change between two runs.

The driver is $CETCD_BUILD_DIR/tests/print_probe (else
<repo>/build/tests/print_probe); the test is skipped when it is not built.
"""

import json
import os
import subprocess
import tempfile
import threading
import time

import pytest

from common.servers import ETCD_BIN
from conftest import Server
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ETCDCTL = os.environ.get("ETCDCTL_BIN", "/usr/bin/etcdctl")
NAME = "print probe member with a long name and spaces"


def probe_bin():
    for d in (os.environ.get("CETCD_BUILD_DIR", ""),
              os.path.join(REPO, "build")):
        p = os.path.join(d, "tests", "print_probe")
        if d and os.access(p, os.X_OK):
            return p
    return None


PROBE = probe_bin()
pytestmark = pytest.mark.skipif(
    PROBE is None, reason="tests/print_probe not built (set CETCD_BUILD_DIR)")


class Ctl:
    """etcdctl against one endpoint, raw bytes in and out."""

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def run(self, *args, input=None, check=True, timeout=30):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("ETCDCTL_")}
        env["ETCDCTL_API"] = "3"
        cp = subprocess.run([ETCDCTL, "--endpoints", self.endpoint] +
                            [str(a) for a in args], input=input,
                            capture_output=True, env=env, timeout=timeout)
        if check:
            assert cp.returncode == 0, (args, cp)
        return cp


def probe(typ, fmt, data=b"", *extra, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([PROBE, typ, fmt] + [str(a) for a in extra],
                          input=data, capture_output=True, env=env,
                          timeout=30)


def error_line(stderr):
    """The `Error: ...` line of a stderr (etcdctl logs warnings there)."""
    for line in stderr.splitlines():
        if line.startswith(b"Error: "):
            return line
    return b""


@pytest.fixture(scope="module")
def env():
    srv = Server(binary=ETCD_BIN, name=NAME)
    srv.start()
    try:
        ctl = Ctl(srv.endpoint)
        populate(srv, ctl)
        yield srv, ctl
    finally:
        srv.cleanup()


def populate(srv, ctl):
    kv = srv.kv()
    lease = rpc_pb2_grpc.LeaseStub(srv.channel())
    for k, v in [(b"a", b"1"), (b"<tag>&amp;", "h\u00e9llo \u2028 \u65e5\u672c".encode()),
                 (b"\x00bin\xff", b"\x01\x02\x7f\xfe"), (b"k", b""),
                 (b"quote\"back\\slash\ttab", b"line\nbreak"),
                 (b"a", b"2")]:
        kv.Put(rpc_pb2.PutRequest(key=k, value=v), timeout=10)
    lid = lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=3000),
                           timeout=10).ID
    kv.Put(rpc_pb2.PutRequest(key=b"leased", value=b"v", lease=lid),
           timeout=10)
    lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=4000), timeout=10)
    ctl.run("txn", input=b'value("a") = "2"\n\nput t1 "in txn"\ndel k\n\n'
            b'get a\n\n')
    ctl.run("member", "add", "learner", "--learner",
            "--peer-urls=http://127.0.0.1:1,http://127.0.0.1:2")
    ctl.run("user", "add", "alice:pw", "--interactive=false")
    ctl.run("user", "add", "bob:pw", "--interactive=false")
    ctl.run("role", "add", "r1")
    ctl.run("role", "add", "r\u00e9<2>")
    ctl.run("role", "grant-permission", "r1", "readwrite", "/a", "/b")
    ctl.run("role", "grant-permission", "r1", "read", "k<&>", "--prefix")
    ctl.run("role", "grant-permission", "r1", "write", "x", "--from-key")
    ctl.run("user", "grant-role", "alice", "r1")
    ctl.run("user", "grant-role", "alice", "r\u00e9<2>")


def compare(ctl, typ, args, fmts, stdin=None, env_extra=None):
    """etcdctl <args> -w protobuf through the probe, against etcdctl <args>
    -w <fmt>, for each fmt ("simple": no -w)."""
    raw = ctl.run(*args, "-w", "protobuf", input=stdin).stdout
    for fmt in fmts:
        want = ctl.run(*args, *([] if fmt == "simple" else ["-w", fmt]),
                       input=stdin)
        got = probe(typ, fmt, raw, env_extra=env_extra)
        assert got.returncode == 0, (fmt, got)
        assert want.stdout or fmt != "json", (args, fmt)
        assert got.stdout == want.stdout, (args, fmt)


GETS = [
    ["get", "", "--prefix"],
    ["get", "a"],
    ["get", "nothing"],
    ["get", "", "--prefix", "--keys-only"],
    ["get", "", "--prefix", "--limit", "2"],
    ["get", "a", "--rev", "2"],
    ["get", "", "--prefix", "--sort-by", "MODIFY", "--order", "DESCEND"],
    ["get", "", "--from-key", "--rev", "3"],
    ["get", "<", "--from-key", "--consistency", "s"],
]


@pytest.mark.parametrize("args", GETS, ids=lambda a: " ".join(a[1:]))
def test_get(env, args):
    _, ctl = env
    compare(ctl, "etcdserverpb.RangeResponse", args,
            ["json", "fields", "protobuf", "simple"])
    raw = ctl.run(*args, "-w", "protobuf").stdout
    hexed = probe("etcdserverpb.RangeResponse", "simple", raw,
                  env_extra={"PROBE_HEX": "1"})
    assert hexed.stdout == ctl.run(*args, "--hex").stdout


def test_txn_read_only(env):
    _, ctl = env
    for txn in (b'value("a") = "2"\nversion("k") = "0"\n\nget a\n'
                b'get "" --prefix --limit 3\n\nget t1\n\n',
                b'mod("a") < "2"\n\nget a\n\nget "<tag>&amp;"\nget nothing\n\n'):
        compare(ctl, "etcdserverpb.TxnResponse", ["txn"],
                ["json", "fields", "protobuf"], stdin=txn)


def test_member_list(env):
    _, ctl = env
    compare(ctl, "etcdserverpb.MemberListResponse", ["member", "list"],
            ["json", "fields", "table", "protobuf", "simple"])
    table = ctl.run("member", "list", "-w", "table").stdout
    assert b"|   learner" not in table  # the learner never started
    assert b"unstarted" in table and b"spaces |" in table  # wrapped name


def test_auth_reads(env):
    _, ctl = env
    compare(ctl, "etcdserverpb.AuthUserGetResponse",
            ["user", "get", "alice"], ["json", "protobuf"])
    compare(ctl, "etcdserverpb.AuthUserListResponse", ["user", "list"],
            ["json", "protobuf"])
    for role in ("r1", "r\u00e9<2>"):
        compare(ctl, "etcdserverpb.AuthRoleGetResponse",
                ["role", "get", role], ["json", "fields", "protobuf"])
    compare(ctl, "etcdserverpb.AuthRoleListResponse", ["role", "list"],
            ["json", "fields", "protobuf"])
    # etcdctl's fields and table printers lack user get/list: same error.
    raw = ctl.run("user", "get", "alice", "-w", "protobuf").stdout
    for fmt in ("fields", "table"):
        want = ctl.run("user", "get", "alice", "-w", fmt, check=False)
        got = probe("etcdserverpb.AuthUserGetResponse", fmt, raw)
        assert (got.returncode, error_line(got.stderr)) == \
            (want.returncode, error_line(want.stderr)) == \
            (4, b"Error: " + fmt.encode() + b" not supported as output format")


def test_alarm_list(env):
    srv, ctl = env
    # etcd 3.4 answers alarm requests without a header, on which etcdctl's
    # fields printer crashes (ours prints zeros): no fields here.
    compare(ctl, "etcdserverpb.AlarmResponse", ["alarm", "list"],
            ["json", "protobuf", "simple"])
    assert ctl.run("alarm", "list", "-w", "fields", check=False)\
        .stderr.startswith(b"panic: runtime error")
    maint = srv.maintenance()
    member = json.loads(ctl.run("member", "list", "-w", "json").stdout)
    me = [m["ID"] for m in member["members"] if m.get("name") == NAME][0]
    req = rpc_pb2.AlarmRequest
    maint.Alarm(req(action=req.ACTIVATE, memberID=me, alarm=rpc_pb2.NOSPACE),
                timeout=10)
    try:
        compare(ctl, "etcdserverpb.AlarmResponse", ["alarm", "list"],
                ["json", "protobuf", "simple"])
        assert b"alarm:NOSPACE" in ctl.run("alarm", "list").stdout
    finally:
        maint.Alarm(req(action=req.DEACTIVATE, memberID=me,
                        alarm=rpc_pb2.NOSPACE), timeout=10)


def lease_stub(srv):
    return rpc_pb2_grpc.LeaseStub(srv.channel())


def test_lease_list(env):
    srv, ctl = env
    raw = lease_stub(srv).LeaseLeases(rpc_pb2.LeaseLeasesRequest(),
                                      timeout=10).SerializeToString()
    for fmt in ("json", "fields", "protobuf"):
        want = ctl.run("lease", "list", "-w", fmt).stdout
        assert probe("etcdserverpb.LeaseLeasesResponse", fmt, raw).stdout \
            == want, fmt


def test_lease_timetolive(env):
    srv, ctl = env
    lease = lease_stub(srv)
    ids = [le.ID for le in lease.LeaseLeases(rpc_pb2.LeaseLeasesRequest(),
                                             timeout=10).leases]
    assert len(ids) == 2
    for lid in ids:
        for keys in (True, False):
            args = ["lease", "timetolive", "%x" % lid] + \
                (["--keys"] if keys else [])
            req = rpc_pb2.LeaseTimeToLiveRequest(ID=lid, keys=keys)
            # The remaining TTL ticks: keep a round where it did not move.
            for _ in range(5):
                before = lease.LeaseTimeToLive(req, timeout=10)
                want = {fmt: ctl.run(*args, "-w", fmt).stdout
                        for fmt in ("json", "fields", "protobuf")}
                after = lease.LeaseTimeToLive(req, timeout=10)
                if before == after:
                    break
            else:
                pytest.fail("the TTL moved during every round")
            raw = before.SerializeToString()
            for fmt, out in want.items():
                got = probe("etcdserverpb.LeaseTimeToLiveResponse", fmt, raw)
                assert got.stdout == out, (args, fmt)


def test_lease_revoke_protobuf_error(env):
    srv, ctl = env
    lease = lease_stub(srv)
    # Revoking a lease without keys changes no revision: both answers
    # carry the same header.
    mine = lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=100), timeout=10).ID
    theirs = lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=100),
                              timeout=10).ID
    raw = lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=mine),
                            timeout=10).SerializeToString()
    want = ctl.run("lease", "revoke", "%x" % theirs, "-w", "protobuf",
                   check=False)
    got = probe("etcdserverpb.LeaseRevokeResponse", "protobuf", raw)
    assert want.returncode == got.returncode == 4
    assert error_line(got.stderr) == error_line(want.stderr)
    assert error_line(want.stderr).startswith(
        b"Error: marshal unsupported for type clientv3.LeaseRevokeResponse "
        b"({cluster_id:")


def test_endpoint_hashkv(env):
    srv, ctl = env
    maint = srv.maintenance()
    raw = maint.HashKV(rpc_pb2.HashKVRequest(), timeout=10)
    raw = raw.SerializeToString()
    for fmt in ("json", "fields", "table", "simple"):
        want = ctl.run("endpoint", "hashkv",
                       *([] if fmt == "simple" else ["-w", fmt])).stdout
        got = probe("hashkv", fmt, raw, srv.endpoint)
        assert got.stdout == want, fmt
    want = ctl.run("endpoint", "hashkv", "-w", "protobuf", check=False)
    got = probe("hashkv", "protobuf", raw, srv.endpoint)
    assert want.returncode == got.returncode == 4
    assert error_line(got.stderr) == error_line(want.stderr)


def test_snapshot_status(env):
    _, ctl = env
    with tempfile.TemporaryDirectory(prefix="cetcd-print-") as d:
        db = os.path.join(d, "snap.db")
        ctl.run("snapshot", "save", db)
        js = ctl.run("snapshot", "status", db, "-w", "json").stdout
        s = json.loads(js)
        nums = [s["hash"], s["revision"], s["totalKey"], s["totalSize"]]
        for fmt in ("json", "fields", "table", "simple"):
            want = ctl.run("snapshot", "status", db,
                           *([] if fmt == "simple" else ["-w", fmt])).stdout
            got = probe("dbstatus", fmt, b"", *nums)
            assert got.stdout == want, fmt


def first_events(srv):
    """The first Watch answer with events, for all keys from revision 1."""
    stub = rpc_pb2_grpc.WatchStub(srv.channel())
    create = rpc_pb2.WatchCreateRequest(key=b"\0", range_end=b"\0",
                                        start_revision=1, prev_kv=True)
    calls = stub.Watch(iter([rpc_pb2.WatchRequest(create_request=create)]),
                       timeout=10)
    try:
        for resp in calls:
            if resp.events:
                return resp
    finally:
        calls.cancel()
    raise AssertionError("no events")


def watch_output(ctl, fmt, size):
    """What `etcdctl watch` prints for its first answer: it never exits, so
    read until size bytes came (or 10 s passed), then a moment more for any
    excess, and stop it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    env["ETCDCTL_API"] = "3"
    p = subprocess.Popen([ETCDCTL, "--endpoints", ctl.endpoint, "watch",
                          "--rev", "1", "--prefix", "", "--prev-kv", "-w",
                          fmt], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    out = bytearray()

    def pump():
        for chunk in iter(lambda: p.stdout.read1(65536), b""):
            out.extend(chunk)

    reader = threading.Thread(target=pump)
    reader.start()
    deadline = time.time() + 10
    while len(out) < size and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    p.terminate()
    p.wait(timeout=10)
    reader.join(timeout=10)
    return bytes(out)


def test_watch(env):
    srv, ctl = env
    raw = first_events(srv).SerializeToString()
    for fmt in ("json", "fields", "protobuf"):
        got = probe("etcdserverpb.WatchResponse", fmt, raw)
        want = watch_output(ctl, fmt, len(got.stdout))
        assert got.stdout == want, fmt
