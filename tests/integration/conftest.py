"""Shared fixtures for the black-box integration suites.

Goal: start, stop, kill -9 and restart single-member servers (cetcd, or the
real etcd 3.4.23 that is the specification) on free 127.0.0.1 ports with a
fresh data directory, and give tests the three ways to talk to them: the real
etcdctl (ETCDCTL_API=3), python3-etcd3's client, and raw gRPC stubs.

Method: the binary under test is $CETCD_BIN (default <repo>/build/cetcd);
with CETCD_TEST_AGAINST_ETCD=1 it is /usr/bin/etcd instead, which is how the
suites are validated.  The server is started with etcd's own flags.  It is
ready when a linearizable Range answers over gRPC (we never parse log lines).
Each server's stdout+stderr goes to a log file in its tmp dir; when a test
fails, the tail of every live server's log is attached to the report.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
from common.servers import (  # noqa: E402  (tests/ is on the path now)
    ETCD_BIN, ClientAddress, against_etcd, free_port, log_tail,
    range_answers, server_bin)
from common import hangwatch  # noqa: E402
from common.hangwatch import hang_watch  # noqa: E402,F401 (autouse)

ETCDCTL_BIN = os.environ.get("ETCDCTL_BIN", "/usr/bin/etcdctl")
LOG_TAIL_LINES = 40

# Servers started and not yet stopped; their log tails go into failure
# reports (see pytest_runtest_makereport below).
# A shell that starts pytest in the background without job control makes
# it ignore SIGINT, and every process a test starts inherits that: etcdctl
# and cetcdctl would then outlive the SIGINT a test sends them (Ctrl-C
# tests).  Python's own handler instead: children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_LIVE = []


def pytest_configure(config):
    hangwatch.configure()


class Server(ClientAddress):
    """One single-member server process on its own data dir and ports.

    The ports and the data dir stay the same across stop/kill/restart, so a
    restart reopens the same member.
    """

    def __init__(self, binary=None, extra_args=(), name="m1", root=None):
        self.binary = binary or server_bin()
        self.extra_args = list(extra_args)
        self.name = name
        self.root = root or tempfile.mkdtemp(prefix="cetcd-it-")
        self.data_dir = os.path.join(self.root, "data")
        self.log_path = os.path.join(self.root, "server.log")
        self.client_port = free_port()
        self.peer_port = free_port()
        self.proc = None
        self._channel = None
        self.starts = 0

    # -- addresses (endpoint and client_url: ClientAddress) ----------------
    @property
    def peer_url(self):
        return "http://127.0.0.1:%d" % self.peer_port

    def args(self):
        return [
            self.binary,
            "--name", self.name,
            "--data-dir", self.data_dir,
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", "%s=%s" % (self.name, self.peer_url),
            "--initial-cluster-token", "cetcd-it",
            "--initial-cluster-state", "new",
        ] + self.extra_args

    # -- lifecycle --------------------------------------------------------
    def start(self, timeout=30.0):
        assert self.proc is None, "already running"
        if not os.path.exists(self.binary):
            pytest.fail("server binary %s does not exist (set CETCD_BIN, or "
                        "CETCD_TEST_AGAINST_ETCD=1)" % self.binary)
        log = open(self.log_path, "ab")
        self.starts += 1
        log.write(("\n===== start #%d: %s\n" % (
            self.starts, " ".join(self.args()))).encode())
        log.flush()
        self.proc = subprocess.Popen(self.args(), stdout=log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     cwd=self.root)
        log.close()
        _LIVE.append(self)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=30.0):
        """Poll with a real linearizable Range until the member answers."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %s during startup; log "
                                   "tail:\n%s" % (self.proc.returncode,
                                                  self.log_tail()))
            try:
                ch = self.probe_channel()
            except OSError as e:
                last = e
                time.sleep(0.02)
                continue
            last = range_answers(ch)
            if last is None:
                return
            time.sleep(0.05)
        raise RuntimeError("server not ready after %.0fs (last error %r); log "
                           "tail:\n%s" % (timeout, last, self.log_tail()))

    def probe_channel(self):
        """A fresh channel for one readiness probe; OSError while the
        member does not listen yet."""
        socket.create_connection(("127.0.0.1", self.client_port),
                                 timeout=0.5).close()
        return grpc.insecure_channel(self.endpoint)

    def _forget(self):
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self in _LIVE:
            _LIVE.remove(self)
        self.proc = None

    def stop(self, timeout=20.0):
        """Graceful stop (SIGTERM), then SIGKILL if it hangs."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self._forget()
        return rc

    def kill(self):
        """kill -9: no chance to flush anything that is not durable."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._forget()

    def restart(self, timeout=30.0):
        self.stop()
        return self.start(timeout)

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, n=LOG_TAIL_LINES):
        return log_tail(self.log_path, n)

    # -- clients ----------------------------------------------------------
    def channel(self):
        if self._channel is None:
            self._channel = grpc.insecure_channel(
                self.endpoint,
                options=[("grpc.max_send_message_length", 64 << 20),
                         ("grpc.max_receive_message_length", 64 << 20)])
        return self._channel

    def kv(self):
        return rpc_pb2_grpc.KVStub(self.channel())

    def maintenance(self):
        return rpc_pb2_grpc.MaintenanceStub(self.channel())

    def client(self, **kw):
        import etcd3
        return etcd3.client(host="127.0.0.1", port=self.client_port, **kw)

    def ctl(self, *args, input=None, check=True, timeout=30):
        return run_etcdctl(self.endpoint, *args, input=input, check=check,
                           timeout=timeout)

    def rev(self):
        """The current store revision (from a Range header)."""
        return self.kv().Range(rpc_pb2.RangeRequest(key=b"\0"),
                               timeout=10).header.revision


class CtlResult:
    def __init__(self, cp):
        self.rc = cp.returncode
        self.out = cp.stdout
        self.err = cp.stderr

    @property
    def error_line(self):
        """The `Error: ...` line etcdctl prints on stderr ('' if none)."""
        for line in self.err.splitlines():
            if line.startswith("Error: "):
                return line[len("Error: "):]
        return ""

    def __repr__(self):
        return "CtlResult(rc=%d, out=%r, err=%r)" % (self.rc, self.out,
                                                      self.err)


def run_etcdctl(endpoint, *args, input=None, check=True, timeout=30):
    env = dict(os.environ)
    env["ETCDCTL_API"] = "3"
    for k in list(env):
        if k.startswith("ETCDCTL_") and k != "ETCDCTL_API":
            del env[k]
    cmd = [ETCDCTL_BIN, "--endpoints", endpoint] + [str(a) for a in args]
    cp = subprocess.run(cmd, input=input, capture_output=True, text=True,
                        env=env, timeout=timeout)
    res = CtlResult(cp)
    if check and res.rc != 0:
        raise AssertionError("etcdctl %s failed: %r" % (args, res))
    return res


# -- pytest plumbing ------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for s in list(_LIVE):
            rep.sections.append(("server %s log tail (%s)" % (
                s.name, s.log_path), s.log_tail()))


@pytest.fixture
def make_server():
    """Factory: make_server(extra_args=[...], start=True) -> Server.

    Every server made here is stopped and its dir removed after the test.
    """
    made = []

    def factory(extra_args=(), start=True, binary=None, name="m1"):
        s = Server(binary=binary, extra_args=extra_args, name=name)
        made.append(s)
        if start:
            s.start()
        return s

    yield factory
    for s in made:
        s.cleanup()


@pytest.fixture
def server(make_server):
    """A fresh, started single-member server for one test."""
    return make_server()


@pytest.fixture(scope="module")
def module_server():
    """One server shared by a module (tests must use their own key prefix)."""
    s = Server()
    s.start()
    yield s
    s.cleanup()


def grpc_error(fn, *args, **kw):
    """Call fn expecting an RpcError; return (code, details)."""
    try:
        fn(*args, **kw)
    except grpc.RpcError as e:
        return e.code(), e.details()
    raise AssertionError("expected a gRPC error from %s" % fn)
