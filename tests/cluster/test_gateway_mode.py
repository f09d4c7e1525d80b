"""`cetcd gateway start`: etcd's gateway mode, a TCP proxy in front of a
cluster's client endpoints.

Goal: what an etcd 3.4 user of `etcd gateway start` sees:
  - etcdctl put/get, a python-etcd3 watch, a 1 MiB value both ways and
    /health all work through the gateway on a 3-member cluster (etcd's
    e2e TestGateway is the first of these);
  - connections go round robin: new connections reach every member;
  - an endpoint that refuses a dial is deactivated and logged as etcd
    does ("deactivated endpoint" with its address, the interval in
    seconds and Go's dial error); the connection goes to the next
    endpoint, so no client fails while a member is down; after
    --retry-delay the endpoint is dialled in the background and logged
    "activated" once its member is back, and new connections reach it;
  - SIGTERM ends it by that signal, as the Go program;
  - memory stays flat under peers that do not read: 40 connections whose
    endpoint or client never reads grow it by about 32 KiB each at most
    (cetcd: ~630 KiB in all here; etcd 3.4.23: ~900 KiB).
Where cetcd's gateway does better than etcd 3.4.23 (cetcd only; each
checked to behave the other way on etcd when CETCD_TEST_AGAINST_ETCD=1
where that is quick to show):
  - with every endpoint inactive a connection still tries each one: a
    single-endpoint gateway serves again as soon as its member is back,
    not --retry-delay (here 60 s) later;
  - a dial has a 3 s limit: an endpoint that never answers a SYN (a
    listener whose backlog is full) costs a client 3 s, then the next
    endpoint serves it, instead of hanging for the kernel's ~2 min;
  - at the fd limit it pauses accepting (one log line) instead of
    spinning: 80 idle connections with `ulimit -n 32` cost under 0.3 s
    of CPU in 2 s, and once they are closed a new client is served.

Method: black box; a 3-member cluster (cluster.py), the gateway started
as `<bin> gateway start --endpoints=... --listen-addr=...`, its JSON log
on stderr in a file, ready once it logged "ready to proxy client
requests" (the line etcd's e2e suite waits for).  About 30 s.
"""

import json
import os
import resource
import signal
import socket
import subprocess
import tempfile
import time

import etcd3
import grpc
import pytest

from common.fakedns import FakeDNS, resolved_by
from common.servers import against_etcd, free_port, server_bin
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

ETCDCTL = os.environ.get("ETCDCTL_BIN", "/usr/bin/etcdctl")


class Gateway:
    def __init__(self, endpoints, retry_delay="1s", nofile=None, dns=None,
                 extra=()):
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        fd, self.log_path = tempfile.mkstemp(prefix="gateway-", suffix=".log")
        os.close(fd)
        args = [server_bin(), "gateway", "start",
                "--endpoints=" + ",".join(endpoints),
                "--listen-addr=" + self.addr, "--retry-delay=" + retry_delay]
        args += list(extra)
        if dns is not None:
            args = resolved_by(dns, args)

        def limits():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         preexec_fn=limits)
        self.wait_log("ready to proxy client requests")

    def lines(self):
        out = []
        with open(self.log_path) as f:
            for ln in f:
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    out.append({"msg": ln.rstrip()})
        return out

    def wait_log(self, msg, timeout=10.0, **fields):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ln in self.lines():
                if ln.get("msg") == msg and all(
                        ln.get(k) == v for k, v in fields.items()):
                    return ln
            assert self.proc.poll() is None, open(self.log_path).read()
            time.sleep(0.05)
        raise AssertionError("no %r %r in the gateway's log:\n%s" % (
            msg, fields, open(self.log_path).read()))

    def count(self, msg, **fields):
        return sum(1 for ln in self.lines() if ln.get("msg") == msg and all(
            ln.get(k) == v for k, v in fields.items()))

    def member_id(self, timeout=5.0):
        """The member a new connection through the gateway reaches (a
        channel of its own: gRPC shares connections between channels)."""
        with grpc.insecure_channel(
                self.addr, options=[("grpc.use_local_subchannel_pool", 1)]) \
                as ch:
            st = rpc_pb2_grpc.MaintenanceStub(ch).Status(
                rpc_pb2.StatusRequest(), timeout=timeout)
            return st.header.member_id

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        os.unlink(self.log_path)


@pytest.fixture
def gateways():
    made = []

    def make(*a, **kw):
        g = Gateway(*a, **kw)
        made.append(g)
        return g
    yield make
    for g in made:
        g.stop()


def etcdctl(gw, *args, timeout=20):
    env = dict(os.environ, ETCDCTL_API="3")
    return subprocess.run([ETCDCTL, "--endpoints=" + gw.addr] + list(args),
                          capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_gateway_proxies_and_fails_over(make_cluster, gateways):
    c = make_cluster(3)
    c.learn_ids()
    ids = {m.name: m.id for m in c.members}
    dead = "127.0.0.1:%d" % free_port()
    gw = gateways([m.endpoint for m in c.members] + ["http://" + dead])
    ready = gw.wait_log("ready to proxy client requests")
    assert ready["endpoints"] == [m.endpoint for m in c.members] + [dead]
    assert isinstance(ready["ts"], float) and ready["level"] == "info"

    r = etcdctl(gw, "put", "foo", "bar")
    assert (r.returncode, r.stdout) == (0, "OK\n"), r.stderr
    r = etcdctl(gw, "get", "foo")
    assert r.stdout == "foo\nbar\n", r.stderr
    host, port = gw.addr.split(":")
    cli = etcd3.client(host=host, port=int(port))
    events, cancel = cli.watch_prefix("w/")
    big = os.urandom(1 << 20)
    cli.put("w/big", big)
    ev = next(events)
    assert ev.key == b"w/big" and ev.value == big
    cancel()
    assert cli.get("w/big")[0] == big
    health = subprocess.run(["curl", "-s", "http://%s/health" % gw.addr],
                            capture_output=True, text=True, timeout=10)
    assert json.loads(health.stdout) == {"health": "true"}

    # Round robin over the live members; the dead endpoint deactivated
    # (etcd's line and fields) without failing a client.
    seen = {gw.member_id() for _ in range(12)}
    assert seen == set(ids.values()), (seen, ids)
    warn = gw.wait_log("deactivated endpoint", address=dead)
    assert warn["level"] == "warn" and warn["interval"] == 1
    assert warn["error"] == \
        "dial tcp %s: connect: connection refused" % dead

    # A member killed: every new connection is still served, by the
    # others; back, it is activated and reached again.
    victim = c.members[0]
    vid = ids[victim.name]
    c.kill(victim)
    for _ in range(9):
        assert gw.member_id() != vid
    gw.wait_log("deactivated endpoint", address=victim.endpoint)
    c.restart(victim)
    gw.wait_log("activated", address=victim.endpoint, timeout=15)
    deadline = time.monotonic() + 10
    while gw.member_id() != vid:
        assert time.monotonic() < deadline, "the restarted member unreached"

    gw.proc.send_signal(signal.SIGTERM)
    assert gw.proc.wait(10) == -signal.SIGTERM


def test_gateway_single_endpoint_back_at_once(make_cluster, gateways):
    c = make_cluster(3)
    m = c.members[0]
    gw = gateways([m.endpoint], retry_delay="60s")
    mid = gw.member_id()
    c.kill(m)
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError):
        gw.member_id(timeout=3)
    assert time.monotonic() - t0 < 2.5, "a refused client was held"
    gw.wait_log("deactivated endpoint", address=m.endpoint)
    c.restart(m)
    # etcd 3.4.23 closes every connection for the 60 s --retry-delay here.
    if against_etcd():
        with pytest.raises(grpc.RpcError):
            gw.member_id(timeout=3)
        return
    assert gw.member_id() == mid
    gw.wait_log("activated", address=m.endpoint)


@pytest.mark.skipif(against_etcd(), reason="etcd 3.4.23 dials without a "
                    "limit: the client would wait ~2 min (see the docstring)")
def test_gateway_dial_time_limit(make_cluster, gateways):
    c = make_cluster(3)
    # A listener never accepting, its backlog full: SYNs go unanswered.
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(hole.getsockname())
        fillers.append(s)
    time.sleep(0.2)
    black = "127.0.0.1:%d" % hole.getsockname()[1]
    gw = gateways([black, c.members[1].endpoint])
    t0 = time.monotonic()
    gw.member_id(timeout=10)  # first pick: the black hole, then the member
    took = time.monotonic() - t0
    assert 2.5 <= took < 6, took
    warn = gw.wait_log("deactivated endpoint", address=black)
    assert warn["error"] == "dial tcp %s: i/o timeout" % black
    t0 = time.monotonic()
    gw.member_id()
    assert time.monotonic() - t0 < 1, "an inactive endpoint was dialled"
    for s in fillers + [hole]:
        s.close()


@pytest.mark.skipif(against_etcd(), reason="cetcd's fd-limit pause")
def test_gateway_at_fd_limit(make_cluster, gateways):
    c = make_cluster(3)
    gw = gateways([c.members[0].endpoint], nofile=32)
    idle = []
    for _ in range(80):
        s = socket.create_connection(("127.0.0.1", gw.port))
        idle.append(s)
    t = "/proc/%d/stat" % gw.proc.pid

    def cpu():
        f = open(t).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    c0 = cpu()
    time.sleep(2)
    used = cpu() - c0
    assert used < 0.3, "%.2f s of CPU in 2 s at the fd limit" % used
    assert 1 <= gw.count("pausing accepts (out of file descriptors)") <= 2
    for s in idle:
        s.close()
    time.sleep(0.5)
    assert gw.member_id(timeout=10)


# Argument lists whose output etcd 3.4.23 and cetcd must print alike
# (stdout, stderr, exit code): help, cobra/pflag errors, etcd's checks.
SAME_AS_ETCD = [
    ["gateway"], ["gateway", "-h"], ["gateway", "other"],
    ["gateway", "start", "-h"], ["gateway", "start", "--help"],
    ["gateway", "start", "--foo"], ["gateway", "start", "-x"],
    ["gateway", "start", "-endpoints=x"],
    ["gateway", "start", "--listen-addr"],
    ["gateway", "start", "--listen-addr", "nope"],
    ["gateway", "start", "--listen-addr=:23797"],
    ["gateway", "start", "--retry-delay", "x"],
    ["gateway", "start", "--retry-delay=5"],
    ["gateway", "start", "--insecure-discovery=maybe"],
    ["gateway", "start", "--endpoints="],
    ["gateway", "start", "--endpoints=127.0.0.1"],
    ["gateway", "start", "--endpoints=a:1,,b:2"],
    ["gateway", "start", "--endpoints=nosuchhost.invalid:2379",
     "--listen-addr=127.0.0.1:1"],
    ["gateway", "start", "--listen-addr=127.0.0.1:2379",
     "--endpoints=localhost:2379"],
    ["gateway", "start", "--listen-addr=127.0.0.1:2379",
     "--endpoints=http://localhost:2379/x"],
]


@pytest.mark.skipif(against_etcd(), reason="compares cetcd with etcd")
@pytest.mark.parametrize("args", SAME_AS_ETCD, ids=" ".join)
def test_gateway_flags_as_etcd(args):
    def run(binary):
        p = subprocess.run([binary] + args, capture_output=True, timeout=10)
        return p.returncode, p.stdout, p.stderr
    assert run(server_bin()) == run("/usr/bin/etcd")


@pytest.mark.skipif(against_etcd(), reason="cetcd's refusals")
@pytest.mark.parametrize("args,msg", [
    (["--trusted-ca-file=/x"], "--trusted-ca-file is not supported"),
    (["--retry-delay=-1s"], 'invalid argument "-1s" for "--retry-delay" '
     'flag: must not be negative'),
    (["extra"], 'unknown command "extra" for "etcd gateway start"'),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_gateway_refuses_what_it_would_ignore(args, msg):
    p = subprocess.run([server_bin(), "gateway", "start",
                        "--listen-addr=127.0.0.1:%d" % free_port()] + args,
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and msg in p.stderr, (p.returncode, p.stderr)


def test_gateway_memory_bounded_by_slow_peers(gateways):
    """Bytes a side does not take are kept at most TCPPROXY_CHUNK (32 KiB)
    per direction: 20 connections pushing into an endpoint that never
    reads, and 20 fed by one whose client never reads, leave the gateway's
    memory flat."""
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(64)
    gw = gateways(["127.0.0.1:%d" % sink.getsockname()[1]])

    def rss_kib():
        for ln in open("/proc/%d/status" % gw.proc.pid):
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    before = rss_kib()
    chunk = b"x" * 65536
    clients, ends = [], []
    for i in range(40):
        s = socket.create_connection(("127.0.0.1", gw.port))
        e, _ = sink.accept()
        clients.append(s)
        ends.append(e)
        # Half push into a never-read endpoint, half are pushed to by the
        # endpoint while the client never reads: each until the kernel's
        # buffers and the gateway's are full.
        src = s if i % 2 == 0 else e
        src.setblocking(False)
        sent = 0
        while sent < 64 << 20:
            try:
                sent += src.send(chunk)
            except BlockingIOError:
                time.sleep(0.05)
                try:
                    sent += src.send(chunk)
                except BlockingIOError:
                    break
        assert sent < 64 << 20, "a never-read connection took 64 MiB"
    grown = rss_kib() - before
    assert grown < 40 * 2 * 32 + 4096, "gateway grew %d KiB" % grown
    for s in clients + ends + [sink]:
        s.close()


@pytest.fixture
def fake_dns():
    made = []

    def make(records):
        d = FakeDNS(records)
        made.append(d)
        return d
    yield make
    for d in made:
        d.close()


def srv_records(domain, http, https, hosts):
    """SRV records of the client services and A records of their hosts:
    http/https are [(priority, weight, port, host)]."""
    recs = {(h + ".", "A"): ["127.0.0.1"] for h in hosts}
    if http:
        recs[("_etcd-client._tcp.%s." % domain, "SRV")] = [
            (p, w, port, h + ".") for p, w, port, h in http]
    if https:
        recs[("_etcd-client-ssl._tcp.%s." % domain, "SRV")] = [
            (p, w, port, h + ".") for p, w, port, h in https]
    return recs


def test_gateway_discovery_srv(make_cluster, gateways, fake_dns):
    """--discovery-srv: the endpoints of _etcd-client-ssl._tcp and
    _etcd-client._tcp, logged as etcd logs them; without
    --insecure-discovery the http ones are dropped (and --endpoints
    used); the best SRV priority takes every connection while one of its
    endpoints is active (cetcd; etcd 3.4.23 round-robins over all of them
    when that priority's records have no weight)."""
    c = make_cluster(3)
    c.learn_ids()
    ports = [m.client_port for m in c.members]
    dead = free_port()
    d = fake_dns(srv_records(
        "example.test",
        http=[(0, 0, ports[0], "m1.example.test"),
              (10, 5, ports[1], "m2.example.test"),
              (10, 5, ports[2], "m3.example.test")],
        https=[(0, 0, dead, "m1.example.test")],
        hosts=["m1.example.test", "m2.example.test", "m3.example.test"]))
    gw = gateways([], dns=d, extra=["--discovery-srv=example.test",
                                    "--insecure-discovery"])
    found = gw.wait_log("discovered cluster from SRV")
    assert found["srv-server"] == "example.test"
    # https first, then http by priority (m2 and m3 in either order: their
    # weights shuffle them).
    assert found["endpoints"][:2] == [
        "https://m1.example.test.:%d" % dead,
        "http://m1.example.test.:%d" % ports[0]]
    assert set(found["endpoints"][2:]) == {
        "http://m2.example.test.:%d" % ports[1],
        "http://m3.example.test.:%d" % ports[2]}
    ready = gw.wait_log("ready to proxy client requests")
    assert ready["endpoints"][:2] == ["m1.example.test.:%d" % dead,
                                      "m1.example.test.:%d" % ports[0]]
    r = etcdctl(gw, "put", "srv", "v")
    assert r.stdout == "OK\n", r.stderr
    # Priority 0 (m1, live, and the dead https one) first: every
    # connection reaches m1 while it is up; then m2 and m3 (weights 5, 5).
    # etcd 3.4.23 ignores the priority when the best one's records have
    # no weight (its round robin walks every endpoint): cetcd only.
    first = {gw.member_id() for _ in range(6)}
    if not against_etcd():
        assert first == {c.members[0].id}, first
    warn = gw.wait_log("deactivated endpoint",
                       address="m1.example.test.:%d" % dead)
    assert warn["error"] == \
        "dial tcp 127.0.0.1:%d: connect: connection refused" % dead
    c.kill(c.members[0])
    seen = {gw.member_id() for _ in range(16)}
    assert seen == {c.members[1].id, c.members[2].id}, seen

    # Validated: the http records are insecure, the https one does not
    # dial: none left, so --endpoints serves.
    gw2 = gateways([c.members[1].endpoint], dns=d,
                   extra=["--discovery-srv=example.test"])
    gw2.wait_log("validating discovered SRV endpoints")
    bad = gw2.wait_log("failed to validate discovered endpoints")
    assert bad["endpoints"] == []
    assert ('"https://m1.example.test.:%d" failed to dial (dial tcp '
            '127.0.0.1:%d: connect: connection refused)' % (dead, dead)
            ) in bad["error"]
    assert '"http://m2.example.test.:%d" is insecure' % ports[1] in \
        bad["error"]
    ready = gw2.wait_log("ready to proxy client requests")
    assert ready["endpoints"] == [c.members[1].endpoint]
    assert gw2.member_id() == c.members[1].id


def test_gateway_discovery_srv_errors_as_etcd(fake_dns):
    """No SRV record at all, and a --discovery-srv-name: etcd's message and
    exit code, byte for byte (the nameserver is the fake one for both)."""
    d = fake_dns({("other.example.test.", "A"): ["127.0.0.1"]})
    args = ["gateway", "start", "--discovery-srv=example.test",
            "--discovery-srv-name=blue", "--listen-addr=127.0.0.1:%d"
            % free_port()]

    def run(binary):
        p = subprocess.run(resolved_by(d, [binary] + args),
                           capture_output=True, text=True, timeout=20)
        return p.returncode, p.stdout, p.stderr
    rc, out, err = run(server_bin())
    assert rc == 1 and err == (
        "dns lookup errors: lookup _etcd-client-ssl-blue._tcp.example.test "
        "on %s:53: no such host and lookup _etcd-client-blue._tcp."
        "example.test on %s:53: no such host\n" % (d.addr, d.addr)), err
    if not against_etcd():
        assert run("/usr/bin/etcd") == (rc, out, err)
