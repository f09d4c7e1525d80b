"""test_client_stream.py - libcetcd's generic streams against a live server.

Goal: cetcd_stream_* (include/cetcd/cetcd.h) carries the streaming calls
cetcdctl needs, as etcd 3.4 serves them: LeaseKeepAlive (bidirectional),
Maintenance/Snapshot and Election/Observe (server-streaming), with the
whole-call deadline, an unreachable endpoint, the bounds, close at any
stage, and the auth token.
Method: start a member (conftest: cetcd from $CETCD_BIN, or /usr/bin/etcd
with CETCD_TEST_AGAINST_ETCD=1) and run the C driver
tests/client/client_stream.c once per case; it asserts the behaviour
itself and prints OK.  The snapshot case also writes the blob it received,
whose SHA-256 trailer is checked here; the auth case enables auth with
etcdctl first.  The driver is $CETCD_STREAM_DRIVER, else tests/client_stream
under $CETCD_BUILD_DIR, build/ or build-client/; run the suite once with an
ASan build's driver (ASAN_OPTIONS=detect_leaks=1 is set for it) to check
that nothing leaks.
"""
import hashlib
import os
import subprocess

import pytest

from common.servers import free_port  # tests/ is on sys.path (conftest.py)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def find_driver():
    if os.environ.get("CETCD_STREAM_DRIVER"):
        return os.environ["CETCD_STREAM_DRIVER"]
    dirs = [os.environ.get("CETCD_BUILD_DIR", "")] + [
        os.path.join(ROOT, d) for d in ("build", "build-client")]
    for d in dirs:
        p = os.path.join(d, "tests", "client_stream")
        if d and os.access(p, os.X_OK):
            return p
    return None


DRIVER = find_driver()
pytestmark = pytest.mark.skipif(DRIVER is None,
                                reason="client_stream not built")


def drive(endpoint, *args, timeout=120):
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "detect_leaks=1")
    p = subprocess.run([DRIVER, endpoint] + list(args), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert p.stdout.strip().endswith("OK"), out
    assert "Sanitizer" not in p.stderr, out
    return p.stdout


@pytest.mark.parametrize("case", ["keepalive", "observe", "deadline",
                                  "close"])
def test_stream_case(module_server, case):
    drive(module_server.endpoint, case)


def test_snapshot_stream(module_server, tmp_path):
    out = tmp_path / "snap.db"
    stdout = drive(module_server.endpoint, "snapshot", str(out))
    fields = dict(kv.split("=") for kv in
                  stdout.split("SNAPSHOT ", 1)[1].split("\n", 1)[0].split())
    blob = out.read_bytes()
    assert len(blob) == int(fields["total"]) and int(fields["chunks"]) >= 3
    # etcd appends the SHA-256 of the database as the last 32 bytes.
    assert hashlib.sha256(blob[:-32]).digest() == blob[-32:]


def test_unreachable_stream():
    # Nothing listens on a port that was free a moment ago.
    drive("127.0.0.1:%d" % free_port(), "unreachable")


def test_auth_stream(server):
    server.ctl("user", "add", "root:pw")
    server.ctl("user", "grant-role", "root", "root")
    assert "Authentication Enabled" in server.ctl("auth", "enable").out
    drive(server.endpoint, "auth", "root", "pw")


@pytest.mark.parametrize("ka_ms", [1000, 0])
def test_keepalive_finds_a_frozen_server(make_server, ka_ms):
    """The client's keepalive (cetcd_client_opts.keepalive_time_ms, what
    cetcdctl's --keepalive-time sets) ends a stream on a server that stopped
    answering; without it the stream waits (a frozen server sends nothing).
    The server permits PINGs every 500 ms (--grpc-keepalive-min-time)."""
    import signal
    srv = make_server(extra_args=["--grpc-keepalive-min-time", "500ms"])
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "detect_leaks=1")
    p = subprocess.Popen([DRIVER, srv.endpoint, "keepalive-dead",
                          str(ka_ms)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        srv.proc.send_signal(signal.SIGSTOP)
        out, err = p.communicate(timeout=30)
    finally:
        srv.proc.send_signal(signal.SIGCONT)
    assert p.returncode == 0 and out.strip().endswith("OK"), out + err
