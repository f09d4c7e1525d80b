"""test_client_raw.py - libcetcd's raw calls and streams (a proxy's).

Goal: cetcd_async_call_raw and cetcd_raw_stream_* (include/cetcd/cetcd.h)
give a gRPC proxy what it forwards: request and reply bytes unchanged, the
server's status code and message unchanged, the caller's metadata instead
of the client's token, the caller's deadline, endpoint failover for unary
calls (never resending a mutation that may have reached a dying server),
and callback-mode streams with pause, close from any thread or callback,
and the end a killed server gives.  The behaviour asked of the server is
etcd 3.4's, so the suite passes against /usr/bin/etcd too.
Method: start members (conftest: cetcd from $CETCD_BIN, or /usr/bin/etcd
with CETCD_TEST_AGAINST_ETCD=1) and run the C driver
tests/client/client_raw.c once per case; it asserts the behaviour itself
and prints OK.  Cases that need a server killed mid-way print READY first;
the snapshot case writes the blob it received, whose SHA-256 trailer is
checked here; the auth case enables auth with etcdctl first.  The driver is
$CETCD_RAW_DRIVER, else tests/client_raw under $CETCD_BUILD_DIR, build/ or
build-client/; run the suite once with an ASan build's driver
(ASAN_OPTIONS=detect_leaks=1 is set for it) to check that nothing leaks.
"""
import hashlib
import os
import subprocess

import pytest

from common.servers import free_port  # tests/ is on sys.path (conftest.py)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def find_driver():
    if os.environ.get("CETCD_RAW_DRIVER"):
        return os.environ["CETCD_RAW_DRIVER"]
    dirs = [os.environ.get("CETCD_BUILD_DIR", "")] + [
        os.path.join(ROOT, d) for d in ("build", "build-client")]
    for d in dirs:
        p = os.path.join(d, "tests", "client_raw")
        if d and os.access(p, os.X_OK):
            return p
    return None


DRIVER = find_driver()
pytestmark = pytest.mark.skipif(DRIVER is None, reason="client_raw not built")


def env():
    e = dict(os.environ)
    e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "detect_leaks=1")
    return e


def check(out, err, rc):
    assert rc == 0, out + err
    assert out.strip().endswith("OK"), out + err
    assert "Sanitizer" not in err, err


def drive(endpoints, *args, timeout=120):
    p = subprocess.run([DRIVER, endpoints] + list(args), env=env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    check(p.stdout, p.stderr, p.returncode)
    return p.stdout


def drive_kill(endpoints, case, victim, timeout=60):
    """Runs case, kills victim (kill -9) once the driver says READY."""
    p = subprocess.Popen([DRIVER, endpoints, case], env=env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline().strip()
        assert line == "READY", line + p.stderr.read()
        victim.kill()
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(out, err, p.returncode)


@pytest.mark.parametrize("case", [
    "unary", "errors", "deadline", "watch", "pause", "pause-end",
    "close-inside", "close-thread", "close-idle", "keepalive", "bounds"])
def test_raw_case(module_server, case):
    drive(module_server.endpoint, case)


def test_raw_failover(module_server):
    # The first endpoint: a port nothing listens on.
    eps = "127.0.0.1:%d,%s" % (free_port(), module_server.endpoint)
    drive(eps, "failover")


def test_raw_snapshot(module_server, tmp_path):
    out = tmp_path / "snap.db"
    stdout = drive(module_server.endpoint, "snapshot", str(out))
    fields = dict(kv.split("=") for kv in
                  stdout.split("SNAPSHOT ", 1)[1].split("\n", 1)[0].split())
    blob = out.read_bytes()
    assert len(blob) == int(fields["total"]) and int(fields["chunks"]) >= 2
    # etcd appends the SHA-256 of the database as the last 32 bytes.
    assert hashlib.sha256(blob[:-32]).digest() == blob[-32:]


def test_raw_auth(server):
    server.ctl("user", "add", "root:pw")
    server.ctl("user", "grant-role", "root", "root")
    assert "Authentication Enabled" in server.ctl("auth", "enable").out
    drive(server.endpoint, "auth", "root", "pw")


def test_raw_stream_server_killed(server):
    drive_kill(server.endpoint, "killed", server)


def test_raw_no_resend(make_server):
    """A Lock waits on the first member; it is killed: the call fails
    UNAVAILABLE and is not sent to the second (separate) member, which
    would have answered it."""
    a = make_server(name="a")
    b = make_server(name="b")
    drive_kill("%s,%s" % (a.endpoint, b.endpoint), "noresend", a)
