"""What the integration and cluster suites share about server processes.

Goal: one definition of the binary under test (cetcd, or the real etcd
3.4.23 that is the specification), of a member's client addresses, and of
the readiness probe both suites use: a linearizable Range that answers.

Method: plain functions and a mixin; the suites keep their own process
handling (single servers in tests/integration/conftest.py, clusters behind
peer proxies in tests/cluster/cluster.py).
"""

import os
import re
import socket
import time

import grpc

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ETCD_BIN = "/usr/bin/etcd"


_handed_out = set()


def free_port():
    """A 127.0.0.1 port that was free a moment ago and that this process has
    not handed out before: two calls in a row may otherwise get the same
    port from the kernel (a member's client and peer URL then collide)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


# The long tier (docs/TESTING.md "Longer runs"): tests that repeat what CI
# already covers another way run only with CETCD_TEST_LONG=1.
LONG = bool(os.environ.get("CETCD_TEST_LONG"))
LONG_REASON = "long run: set CETCD_TEST_LONG=1 (docs/TESTING.md)"


def against_etcd():
    return os.environ.get("CETCD_TEST_AGAINST_ETCD") == "1"


def server_bin():
    """The server binary under test: $CETCD_BIN (default
    <repo>/build/cetcd), or etcd with CETCD_TEST_AGAINST_ETCD=1."""
    if against_etcd():
        return ETCD_BIN
    return os.environ.get("CETCD_BIN", os.path.join(REPO, "build", "cetcd"))


def bench_bin():
    """cetcd-bench of $CETCD_BUILD_DIR (else <repo>/build); None if not
    built."""
    for d in (os.environ.get("CETCD_BUILD_DIR", ""),
              os.path.join(REPO, "build")):
        p = os.path.join(d, "src", "bench", "cetcd-bench")
        if d and os.access(p, os.X_OK):
            return p
    return None


class ClientAddress:
    """endpoint and client_url of a member serving clients on 127.0.0.1 at
    self.client_port."""

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.client_port

    @property
    def client_url(self):
        return "http://" + self.endpoint


def log_tail(path, n):
    """The last n lines of the log file at path, or why there is none."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError as e:
        return "(no log: %s)" % e
    return "\n".join(lines[-n:])


def wait_log(path, pattern, timeout):
    """Waits until the log file at path matches the regular expression
    pattern; asserts it does within timeout seconds (the log's tail in
    the message)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(path, errors="replace") as f:
            log = f.read()
        if re.search(pattern, log):
            return
        assert time.monotonic() < deadline, (pattern, log[-3000:])
        time.sleep(0.2)


def range_answers(ch):
    """None when a linearizable Range answers on the channel ch within 1 s,
    else the grpc.RpcError; ch is closed either way.  Probes use a fresh
    channel per attempt: one that saw "connection refused" backs off for
    seconds before it dials again."""
    try:
        rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(key=b"health"),
                                      timeout=1.0)
        return None
    except grpc.RpcError as e:
        # with auth enabled the store answers a Range without a token so
        # (etcd too): the member is ready
        if (e.code() == grpc.StatusCode.INVALID_ARGUMENT and
                e.details() == "etcdserver: user name is empty"):
            return None
        return e
    finally:
        ch.close()
