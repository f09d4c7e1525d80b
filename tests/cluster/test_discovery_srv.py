"""--discovery-srv: a new cluster bootstrapped from DNS SRV records.

Goal: as etcd 3.4 bootstraps with `--discovery-srv <domain>`:
  - https peers (_etcd-server-ssl._tcp records, --peer-auto-tls): three
    members find each other; the member list (ids, names, peer URLs with
    the records' host names) is the one etcd 3.4.23 forms from the same
    records, and each member logs etcd's "got bootstrap from DNS for
    etcd-server at <name>=<url>" lines, itself by its --name, the others
    "0", "1";
  - http peers (_etcd-server._tcp records): three members bootstrap too.
    etcd 3.4.23 cannot (it keeps the http records only when their lookup
    failed, and fails on the missing https ones; etcd 3.5 fixed it): shown
    on etcd 3.4.23 in the same test;
  - a member with data restarts without asking for SRV records (here:
    gone) and keeps its cluster;
  - errors, with etcd's lines and exit code 1: no record at all ("error
    setting up initial cluster: error querying DNS SRV records for
    _etcd-server-ssl lookup ... no such host"), records that do not name
    this member ("cannot find local etcd member "x" in SRV records"),
    --discovery-srv with --initial-cluster (etcd's "multiple discovery or
    bootstrap flags are set" message, byte for byte after the time).

Method: tests/common/fakedns.py answers the SRV and A records on a
127.0.53.x address, made each member's only resolver by a private
/etc/resolv.conf in a mount namespace (root: CI runs as root).  Members
are started by hand (cluster.py names its members with
--initial-cluster).  About 30 s.
"""

import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from common.fakedns import FakeDNS, resolved_by
from common.servers import ETCD_BIN, against_etcd, free_port, server_bin

ETCDCTL = os.environ.get("ETCDCTL_BIN", "/usr/bin/etcdctl")


class SrvCluster:
    """Three members started with --discovery-srv example.test."""

    def __init__(self, binary, scheme, dns, root):
        self.binary, self.scheme, self.dns = binary, scheme, dns
        self.root = root
        self.peers = [free_port() for _ in range(3)]
        self.clients = [free_port() for _ in range(3)]
        self.procs = [None] * 3

    def args(self, i, extra=()):
        peer = "%s://127.0.0.1:%d" % (self.scheme, self.peers[i])
        client = "http://127.0.0.1:%d" % self.clients[i]
        a = [self.binary, "--name", "m%d" % (i + 1),
             "--data-dir", os.path.join(self.root, "m%d" % (i + 1)),
             "--initial-advertise-peer-urls", peer, "--listen-peer-urls", peer,
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--discovery-srv", "example.test",
             "--initial-cluster-token", "srv-test"] + list(extra)
        if self.scheme == "https":
            a.append("--peer-auto-tls")
        return a

    def log(self, i):
        return os.path.join(self.root, "m%d.log" % (i + 1))

    def start(self, i, extra=()):
        with open(self.log(i), "ab") as log:
            self.procs[i] = subprocess.Popen(
                resolved_by(self.dns, self.args(i, extra)), stdout=log,
                stderr=subprocess.STDOUT)

    def records(self, service):
        recs = {("_%s._tcp.example.test." % service, "SRV"): [
            (0, 0, self.peers[i], "m%d.example.test." % (i + 1))
            for i in range(3)]}
        for i in range(3):
            recs[("m%d.example.test." % (i + 1), "A")] = ["127.0.0.1"]
        return recs

    def member_list(self, timeout=20):
        eps = ",".join("127.0.0.1:%d" % c for c in self.clients)
        deadline = time.monotonic() + timeout
        while True:
            r = subprocess.run([ETCDCTL, "--endpoints", eps,
                                "--command-timeout=2s", "member", "list"],
                               capture_output=True, text=True, timeout=10,
                               env=dict(os.environ, ETCDCTL_API="3"))
            lines = sorted(r.stdout.splitlines())
            # Until a member publishes itself the others list it by its
            # bootstrap name ("0", "1") and without client URLs.
            if r.returncode == 0 and len(lines) == 3 and all(
                    re.search(r", started, m\d, \S+, http://", ln)
                    for ln in lines):
                return lines
            assert time.monotonic() < deadline, r.stdout + r.stderr
            time.sleep(0.3)

    def put_get(self, i, timeout=15):
        """A put through member i (retried while a leader is elected),
        read back from it."""
        env = dict(os.environ, ETCDCTL_API="3")
        ep = "127.0.0.1:%d" % self.clients[i]
        deadline = time.monotonic() + timeout
        while True:
            r = subprocess.run([ETCDCTL, "--endpoints", ep, "put", "k",
                                "v%d" % i], capture_output=True, text=True,
                               timeout=20, env=env)
            if r.stdout == "OK\n" or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert r.stdout == "OK\n", r.stderr
        r = subprocess.run([ETCDCTL, "--endpoints", ep, "get", "k",
                            "--print-value-only"], capture_output=True,
                           text=True, timeout=20, env=env)
        assert r.stdout == "v%d\n" % i, r.stderr

    def stop(self):
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.terminate()
        for p in self.procs:
            if p is not None:
                p.wait(20)


@pytest.fixture
def srv_env():
    made = []

    def make(binary, scheme, service):
        root = tempfile.mkdtemp(prefix="cetcd-srv-")
        c = SrvCluster(binary, scheme, None, root)
        c.dns = FakeDNS(c.records(service))
        made.append(c)
        return c
    yield make
    for c in made:
        c.stop()
        c.dns.close()
        shutil.rmtree(c.root, ignore_errors=True)


def bootstrap_lines(c, i):
    with open(c.log(i)) as f:
        return re.findall(r"got bootstrap from DNS for etcd-server at (\S+)",
                          f.read())


def test_https_peers_as_etcd(srv_env):
    c = srv_env(server_bin(), "https", "etcd-server-ssl")
    for i in range(3):
        c.start(i)
    members = c.member_list()
    c.put_get(2)
    # Each member names itself, and the others "0", "1" in record order.
    for i in range(3):
        others = iter(("0", "1"))
        assert bootstrap_lines(c, i) == [
            "%s=https://m%d.example.test:%d" % (
                "m%d" % (j + 1) if j == i else next(others), j + 1,
                c.peers[j]) for j in range(3)]
    for ln in members:
        _id, _st, name, peer, _client, _learner = ln.split(", ")
        i = int(name[1:]) - 1
        assert peer == "https://m%d.example.test:%d" % (i + 1, c.peers[i])
    if against_etcd():
        return
    # The same records, etcd 3.4.23: the same member list, ids included.
    c.stop()
    e = SrvCluster(ETCD_BIN, "https", c.dns, tempfile.mkdtemp(
        prefix="etcd-srv-"))
    e.peers, e.clients = c.peers, c.clients
    try:
        for i in range(3):
            e.start(i)
        assert e.member_list() == members
    finally:
        e.stop()
        shutil.rmtree(e.root, ignore_errors=True)


def test_http_peers_and_restart_without_dns(srv_env):
    c = srv_env(server_bin(), "http", "etcd-server")
    if against_etcd():
        # etcd 3.4.23's bug: the https lookup's failure is fatal.
        c.start(0)
        assert c.procs[0].wait(20) == 1
        log = open(c.log(0)).read()
        assert "error setting up initial cluster: error querying DNS SRV " \
            "records for _etcd-server-ssl lookup " in log, log
        return
    for i in range(3):
        c.start(i)
    before = c.member_list()
    assert bootstrap_lines(c, 1) == [
        "0=http://m1.example.test:%d" % c.peers[0],
        "m2=http://m2.example.test:%d" % c.peers[1],
        "1=http://m3.example.test:%d" % c.peers[2]]
    c.put_get(0)
    # A member with data asks no DNS: here the SRV records are gone (the
    # A records stay: the peer URLs name those hosts).
    c.stop()
    del c.dns.records[("_etcd-server._tcp.example.test.", "SRV")]
    for i in range(3):
        c.start(i)
    assert c.member_list() == before
    c.put_get(1)
    assert len(bootstrap_lines(c, 0)) == 3  # from the first start only


def start_alone(c, extra=()):
    c.start(0, extra)
    assert c.procs[0].wait(20) == 1
    return open(c.log(0)).read()


def test_no_records(srv_env):
    c = srv_env(server_bin(), "https", "etcd-server-ssl")
    c.dns.records.clear()
    c.dns.records[("other.example.test.", "A")] = ["127.0.0.1"]
    log = start_alone(c)
    ns = c.dns.addr
    assert ("etcdmain: error setting up initial cluster: error querying DNS "
            "SRV records for _etcd-server-ssl lookup "
            "_etcd-server-ssl._tcp.example.test on %s:53: no such host"
            % ns) in log, log


def test_member_not_in_records(srv_env):
    c = srv_env(server_bin(), "https", "etcd-server-ssl")
    recs = c.dns.records[("_etcd-server-ssl._tcp.example.test.", "SRV")]
    del recs[0]  # m1's record
    log = start_alone(c)
    assert 'cannot find local etcd member "m1" in SRV records' in log, log


def test_conflicting_bootstrap_flags(srv_env):
    c = srv_env(server_bin(), "https", "etcd-server-ssl")
    log = start_alone(c, ["--initial-cluster",
                          "m1=https://127.0.0.1:%d" % c.peers[0]])
    assert ("etcdmain: error verifying flags, multiple discovery or bootstrap "
            "flags are set. Choose one of \"initial-cluster\", \"discovery\" "
            "or \"discovery-srv\". See 'etcd --help'.") in log, log
