"""`grpc-proxy start`: its HTTP side (/health, /metrics) and auth through
it, compared with etcd 3.4.23's proxy.

Goal: what etcd's proxy answers, cetcd's answers too:
  - /health on the proxy's port: 200 {"health":"true"} while a Get of
    "a" through it succeeds (or is refused for permission); once the
    server is stopped, 503 {"health":"false"} after the Get's 1 s limit;
    200 again after the server is back.  With auth enabled it stays 503:
    the proxy's own Get has no user ("user name is empty");
  - /metrics on the proxy's port is the server's /metrics, fetched from
    the first endpoint (the same metric families; "text/plain;
    version=0.0.4"); 500 "Internal server error" when the server is down;
    other paths 404, POST /health 405;
  - while the server is down, cached serializable reads and member list
    (which the proxy answers itself) still work, a linearizable read
    waits until the client's deadline;
  - auth through the proxy: user and role commands, auth enable, puts and
    gets with --user (the caller's token goes to the server), the errors
    of a missing user, a wrong password, a denied read, put, watch and
    user list.  As everything through etcd's proxy's KV client, a denied
    KV call arrives with code Unknown; Auth calls keep theirs.
One etcd behaviour is only recorded, on etcd's pair (a security hole that
cetcd's proxy need not copy): its cache serves a serializable read that
one user made to any other caller, even an unauthenticated one.

Method: tests/common/grpcproxy.py: a pair per kind (server and proxy of
the kind), the same requests to both, answers compared after masking
what differs by nature; fresh servers for the health test (it stops
them) and for the auth tests (auth stays enabled).
GRPC_PROXY_CETCD_AS_ETCD=1 makes the "cetcd" pair an etcd pair: that
switch exists only to check these tests themselves.
"""

import http.client
import os
import re
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctlproc import CtlProc  # noqa: E402
from common.grpcproxy import (  # noqa: E402
    Result, both, cetcd_as_etcd, cetcd_only, close_pairs, each, ok,
    require_cetcd_proxy, same, start_pairs, zap_error)
from conftest import Server  # noqa: E402


def fetch(endpoint, path, method="GET"):
    """(status, Content-Type, Allow, body, seconds taken) of one request."""
    host, port = endpoint.split(":")
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        body = r.read().decode()
        return (r.status, r.getheader("Content-Type"), r.getheader("Allow"),
                body, time.monotonic() - t0)
    finally:
        conn.close()


def families(text):
    """The metric family names of a Prometheus text page."""
    return sorted(re.findall(r"^# TYPE (\S+) ", text, re.M))


@pytest.fixture
def fresh_pairs():
    require_cetcd_proxy()
    made = start_pairs(lambda binary: Server(binary=binary).start())
    yield made
    close_pairs(made)


def test_health_metrics_and_server_down(fresh_pairs):
    pairs = fresh_pairs
    res = {k: fetch(p.proxy.endpoint, "/health")[:4] for k, p in pairs.items()}
    assert same(res) == (200, "text/plain; charset=utf-8", None,
                         '{"health":"true"}')
    res = {k: fetch(p.proxy.endpoint, "/health", "POST")[:4]
           for k, p in pairs.items()}
    assert same(res) == (405, "text/plain; charset=utf-8", "GET",
                         "Method Not Allowed\n")
    res = {k: fetch(p.proxy.endpoint, "/v2/keys")[:4]
           for k, p in pairs.items()}
    assert same(res) == (404, "text/plain; charset=utf-8", None,
                         "404 page not found\n")
    # /metrics is the server's page, relayed
    res = {}
    for k, p in pairs.items():
        st, ctype, _, body, _ = fetch(p.proxy.endpoint, "/metrics")
        server = fetch(p.server.endpoint, "/metrics")[3]
        assert families(body) == families(server) != [], k
        res[k] = (st, ctype, "etcd_server_has_leader 1\n" in body)
    assert same(res) == (200, "text/plain; version=0.0.4", True)

    both(pairs, "put", "/down/a", "1")
    assert both(pairs, "get", "/down/a", "--consistency=s") == ok(
        "/down/a\n1\n")
    for p in pairs.values():
        p.server.stop()
    res = each(pairs, lambda p: fetch(p.proxy.endpoint, "/health"))
    for k, (st, ctype, _, body, took) in res.items():
        # etcd's Get waits out its 1 s limit; cetcd's proxy hears at once
        # that the endpoint refuses connections
        assert took < 3.0 and (k != "etcd" or took > 0.8), (k, took)
    assert same({k: r[:4] for k, r in res.items()}) == (
        503, "text/plain; charset=utf-8", None, '{"health":"false"}\n')
    res = {k: fetch(p.proxy.endpoint, "/metrics")[:4]
           for k, p in pairs.items()}
    assert same(res) == (500, "text/plain; charset=utf-8", None,
                         "Internal server error\n")
    # what the proxy answers itself
    assert both(pairs, "get", "/down/a", "--consistency=s") == ok(
        "/down/a\n1\n")
    assert both(pairs, "member", "list").rc == 0
    # a linearizable read waits for the server until the deadline; its
    # code on etcd's proxy is DeadlineExceeded or, when the proxy's
    # client saw the deadline first, Unknown
    res = each(pairs, lambda p: p.ctl("get", "/down/a",
                                      "--command-timeout=1s"))
    for k, r in res.items():
        if k == "cetcd" and not cetcd_as_etcd():
            # cetcd's proxy answers UNAVAILABLE at once (its upstream
            # refuses connections), which clientv3 retries until its
            # deadline: the same outcome for etcdctl
            assert r.rc == 1 and r.out == "" and r.err.endswith(
                "Error: context deadline exceeded\n"), r
            assert "code = Unavailable" in r.err, r
            continue
        assert r in (Result(1, "", zap_error(
            code, "context deadline exceeded",
            "context deadline exceeded" if code == "DeadlineExceeded" else
            "rpc error: code = Unknown desc = context deadline exceeded"))
            for code in ("DeadlineExceeded", "Unknown")), (k, r)

    def back(p):
        p.server.start()
        deadline = time.monotonic() + 15
        while fetch(p.proxy.endpoint, "/health")[0] != 200:
            assert time.monotonic() < deadline, p.proxy.log_tail()
            time.sleep(0.1)
    each(pairs, back)
    assert both(pairs, "get", "/down/a") == ok("/down/a\n1\n")


# -- auth ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def auth_pairs():
    """Pairs whose servers have root (password pw) and u1 (pw1, role r1:
    read /pub/) and auth enabled, all done through the proxies."""
    require_cetcd_proxy()
    pairs = start_pairs(lambda binary: Server(binary=binary).start())
    try:
        assert both(pairs, "user", "add", "root:pw") == ok(
            "User root created\n")
        assert both(pairs, "role", "add", "r1") == ok("Role r1 created\n")
        assert both(pairs, "role", "grant-permission", "r1", "read", "/pub/",
                    "--prefix=true") == ok("Role r1 updated\n")
        assert both(pairs, "user", "add", "u1:pw1") == ok(
            "User u1 created\n")
        assert both(pairs, "user", "grant-role", "u1", "r1") == ok(
            "Role r1 is granted to user u1\n")
        # etcdctl tries first, is told root has no root role, grants it
        assert both(pairs, "auth", "enable") == Result(
            0, "Authentication Enabled\n", zap_error(
                "FailedPrecondition", "etcdserver: root user does not have "
                "root role").split("Error: ")[0])
        yield pairs
    finally:
        close_pairs(pairs)


ROOT = "--user=root:pw"
U1 = "--user=u1:pw1"


def test_auth_through_the_proxy(auth_pairs):
    pairs = auth_pairs
    empty = "etcdserver: user name is empty"
    denied = "etcdserver: permission denied"
    assert both(pairs, "put", "/pub/a", "1") == Result(
        1, "", zap_error("Unknown", empty))
    assert both(pairs, "put", "/pub/a", "1", ROOT) == ok("OK\n")
    assert both(pairs, "put", "/priv/a", "s", ROOT) == ok("OK\n")
    assert both(pairs, "put", "/pub/a", "1", "--user=root:bad") == Result(
        2, "", zap_error("InvalidArgument", "etcdserver: authentication "
                         "failed, invalid user ID or password"))
    assert both(pairs, "get", "/pub/a", U1) == ok("/pub/a\n1\n")
    assert both(pairs, "get", "/pub/a", U1, "--consistency=s") == ok(
        "/pub/a\n1\n")
    assert both(pairs, "get", "/priv/a", U1) == Result(
        1, "", zap_error("Unknown", denied))
    assert both(pairs, "put", "/pub/a", "2", U1) == Result(
        1, "", zap_error("Unknown", denied))
    assert both(pairs, "get", "/pub/a", ROOT) == ok("/pub/a\n1\n")
    # the Auth service keeps the server's codes
    assert both(pairs, "user", "list", U1) == Result(
        1, "", zap_error("PermissionDenied", denied))
    assert both(pairs, "role", "add", "r2") == Result(
        1, "", zap_error("InvalidArgument", empty))
    assert both(pairs, "user", "list", ROOT) == ok("root\nu1\n")
    assert both(pairs, "role", "get", "r1", ROOT) == ok(
        "Role r1\nKV Read:\n\t[/pub/, /pub0) (prefix /pub/)\nKV Write:\n")
    # a watch of what u1 may not read
    res = {}
    for k, p in pairs.items():
        proc = CtlProc(p.proxy.endpoint, "watch", "/priv/a", U1)
        proc.p.wait(timeout=10)
        res[k] = proc.stop()
    # etcd's proxy re-words the server's cancel reason (its clientv3
    # watcher makes an error of it); cetcd's passes the server's on, so
    # etcdctl prints what it prints on the server itself
    assert res["etcd"] == (5, "watch was canceled (etcdserver: permission "
                           "denied)\nError: watch is canceled by the server\n")
    if not cetcd_as_etcd():
        assert res["cetcd"] == (
            5, "watch was canceled (rpc error: code = PermissionDenied desc "
            "= etcdserver: permission denied)\nError: watch is canceled by "
            "the server\n")
    # the watch u1 may do
    res = {}
    procs = {k: CtlProc(p.proxy.endpoint, "watch", "/pub/w", U1)
             for k, p in pairs.items()}
    try:
        time.sleep(0.4)
        both(pairs, "put", "/pub/w", "x", ROOT)
        assert same({k: [proc.line() for _ in range(3)]
                     for k, proc in procs.items()}) == ["PUT", "/pub/w", "x"]
    finally:
        for proc in procs.values():
            proc.stop(sig=signal.SIGINT)
    # the proxy's own health Get has no user: etcd's proxy stays unhealthy
    # for ever; cetcd's takes the server's "user name is empty" as an
    # answer (src/grpcproxy/http.c)
    res = {k: fetch(p.proxy.endpoint, "/health")[:4]
           for k, p in pairs.items()}
    assert res["etcd"] == (503, "text/plain; charset=utf-8", None,
                           '{"health":"false"}\n')
    if not cetcd_as_etcd():
        assert res["cetcd"] == (200, "text/plain; charset=utf-8", None,
                                '{"health":"true"}')


@cetcd_only
def test_auth_cache_keeps_callers_apart(auth_pairs):
    # cetcd's cache serves a reply only to the caller (token) whose read
    # cached it: etcd's serves root's to anyone (the test below)
    p = auth_pairs["cetcd"]
    assert p.ctl("put", "/priv/d", "secret", ROOT) == ok("OK\n")
    assert p.ctl("get", "/priv/d", ROOT, "--consistency=s") == ok(
        "/priv/d\nsecret\n")
    assert p.ctl("get", "/priv/d", ROOT, "--consistency=s") == ok(
        "/priv/d\nsecret\n")
    r = p.ctl("get", "/priv/d", U1, "--consistency=s")
    assert r.rc == 1 and "permission denied" in r.err, r
    r = p.ctl("get", "/priv/d", "--consistency=s")
    assert r.rc == 1 and "user name is empty" in r.err, r


def test_auth_cache_serves_other_users_etcd(auth_pairs):
    # recorded on etcd's pair only: its cache answers a serializable read
    # without looking at who asks
    p = auth_pairs["etcd"]
    assert p.ctl("put", "/priv/c", "secret", ROOT) == ok("OK\n")
    assert p.ctl("get", "/priv/c", U1, "--consistency=s").rc == 1
    assert p.ctl("get", "/priv/c", ROOT, "--consistency=s") == ok(
        "/priv/c\nsecret\n")
    assert p.ctl("get", "/priv/c", U1, "--consistency=s") == ok(
        "/priv/c\nsecret\n")
    assert p.ctl("get", "/priv/c", "--consistency=s") == ok(
        "/priv/c\nsecret\n")
    assert p.ctl("get", "/priv/c", U1).rc == 1  # linearizable: refused
