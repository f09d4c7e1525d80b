"""Patroni, the PostgreSQL high-availability manager, keeps a two-node
PostgreSQL cluster on a 3-member cluster with auth on: bootstrap, a
replica, a lost etcd leader, and a failover after its primary is killed.

Goal: an application people run on etcd works unchanged.  Debian's
Patroni 3.0.2 speaks to etcd through the /v3 JSON gateway (its etcd3
module: /version to pick the API prefix, /v3/cluster/member/list to find
every member, /v3/auth/authenticate and the token header, /v3/kv/range,
put, txn with compares on create and mod revisions, deleterange,
/v3/lease/grant and keepalive for the leader key's TTL, and a long
/v3/watch stream that feeds its cache of the cluster's keys).  The test
checks what a Patroni user relies on:
  1. the first node bootstraps PostgreSQL and takes the leader key; the
     second follows it as a streaming replica and gets its rows;
  2. kill -9 of the etcd leader (the member Patroni may be talking to)
     costs Patroni nothing: the same primary keeps the leader key on the
     same timeline while the other members elect a new leader;
  3. kill -9 of the primary's Patroni and PostgreSQL: its leader key's
     lease expires (TTL 10 s) and the replica takes the key, is promoted
     on a new timeline, holds every row the old primary committed
     (synchronous_commit to the replica) and takes writes;
  4. the keys Patroni wrote (leader, members, config, initialize,
     history) are where Patroni's layout puts them, and the leader key is
     attached to a live lease.
Against etcd 3.4.23 (CETCD_TEST_AGAINST_ETCD=1) the same test passes.

Method: tests/cluster/cluster.py's 3 members with auth enabled through
etcdctl (root user); Patroni and PostgreSQL run as the `postgres` user
(PostgreSQL refuses root) in a directory of their own; each node's own
view is its REST API's GET /patroni, the cluster's view GET /cluster;
SQL through psql.  About 40 s.
"""

import json
import os
import pwd
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

from common.servers import against_etcd, free_port
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

PATRONI = "/usr/bin/patroni"
PG_BIN = "/usr/lib/postgresql/15/bin"
ETCDCTL = "/usr/bin/etcdctl"
ROOT_PW = "Patroni-pw"
SCOPE = "demo"
TTL = 10


def as_postgres():
    """The argv prefix that runs a command as `postgres` (we may be root)."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", "postgres", "--"]


class Node:
    """One Patroni node: its config, its processes, its REST API."""

    def __init__(self, name, root, etcd_hosts):
        self.name = name
        self.root = root
        self.api_port = free_port()
        self.pg_port = free_port()
        self.data_dir = os.path.join(root, name + "-data")
        self.log_path = os.path.join(root, name + ".log")
        self.config = os.path.join(root, name + ".yml")
        self.proc = None
        self.last_error = ""
        with open(self.config, "w") as f:
            f.write(CONFIG % dict(
                name=name, scope=SCOPE, api_port=self.api_port,
                pg_port=self.pg_port, hosts=etcd_hosts, pw=ROOT_PW, ttl=TTL,
                data_dir=self.data_dir, root=root, pg_bin=PG_BIN))

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            as_postgres() + [PATRONI, self.config], stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.root,
            start_new_session=True)
        log.close()

    def kill(self):
        """kill -9 of Patroni and of every PostgreSQL process of this node
        (Patroni runs PostgreSQL in a process group of its own)."""
        subprocess.run(["pkill", "-9", "-f", self.config])
        subprocess.run(["pkill", "-9", "-f", "-D " + self.data_dir])
        if self.proc is not None:
            self.proc.wait(timeout=10)
            self.proc = None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def get(self, path):
        """GET of the REST API as JSON, or None while it does not answer."""
        try:
            with urllib.request.urlopen(
                    "http://127.0.0.1:%d%s" % (self.api_port, path),
                    timeout=2) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:     # 503: not the primary
            return json.loads(e.read())
        except (OSError, ValueError):
            return None

    def sql(self, statement):
        out = self.try_sql(statement, timeout=30)
        assert out is not None, "%s: %s" % (statement, self.last_error)
        return out

    def try_sql(self, statement, timeout=5):
        """The statement's output, or None (self.last_error says why)."""
        try:
            out = subprocess.run(
                as_postgres() + [
                    os.path.join(PG_BIN, "psql"), "-h", "127.0.0.1", "-p",
                    str(self.pg_port), "-U", "postgres", "-d",
                    "dbname=postgres connect_timeout=2", "-At", "-c",
                    statement],
                capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.last_error = "timed out"
            return None
        if out.returncode != 0:
            self.last_error = out.stderr
            return None
        return out.stdout.strip()

    def log_tail(self, n=40):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


CONFIG = """\
scope: %(scope)s
name: %(name)s
restapi:
  listen: 127.0.0.1:%(api_port)d
  connect_address: 127.0.0.1:%(api_port)d
etcd3:
  hosts: %(hosts)s
  username: root
  password: %(pw)s
bootstrap:
  dcs:
    ttl: %(ttl)d
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      parameters:
        synchronous_commit: "on"
  initdb:
  - encoding: UTF8
  pg_hba:
  - host replication repl 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%(pg_port)d
  connect_address: 127.0.0.1:%(pg_port)d
  data_dir: %(data_dir)s
  bin_dir: %(pg_bin)s
  pgpass: %(root)s/%(name)s.pgpass
  authentication:
    replication:
      username: repl
      password: x
    superuser:
      username: postgres
      password: x
  parameters:
    unix_socket_directories: %(root)s
    fsync: "off"
"""


def wait_for(what, check, timeout, nodes):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError("%s not seen in %.0f s (last %r)\n%s" % (
        what, timeout, last, "\n".join(
            "--- %s ---\n%s" % (n.name, n.log_tail()) for n in nodes)))


def own_state(node):
    s = node.get("/patroni") or {}
    return s.get("role"), s.get("state"), s.get("timeline")


def is_primary(node):
    role, state, tl = own_state(node)
    return tl if role in ("master", "primary") and state == "running" \
        else None


def is_streaming_replica(node, leader):
    role, state, _ = own_state(node)
    if role != "replica" or state != "running":
        return False
    rows = leader.sql("SELECT count(*) FROM pg_stat_replication "
                      "WHERE application_name = '%s' AND state = 'streaming'"
                      % node.name)
    return rows == "1"


def leader_key(view):
    """The leader named in a GET /cluster answer."""
    for m in (view or {}).get("members", []):
        if m.get("role") == "leader":
            return m["name"]
    return None


def patroni_member(c, node):
    """The member a node's Patroni last chose ("Selected new etcd server
    http://127.0.0.1:PORT" in its log)."""
    ports = re.findall(r"Selected new etcd server http://127\.0\.0\.1:(\d+)",
                       node.log_tail(10 ** 6))
    assert ports, node.log_tail()
    return next(m for m in c.members if m.client_port == int(ports[-1]))


def ctl(m, *args):
    env = dict(os.environ, ETCDCTL_API="3")
    out = subprocess.run([ETCDCTL, "--endpoints", m.endpoint] + list(args),
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, "etcdctl %s: %s" % (args, out.stderr)
    return out.stdout


def patroni_nodes(c, workdir):
    """Auth on (root) through the first member; two Patroni nodes that
    know every member."""
    m1 = c.members[0]
    ctl(m1, "user", "add", "root:" + ROOT_PW)
    ctl(m1, "role", "add", "root")
    ctl(m1, "user", "grant-role", "root", "root")
    ctl(m1, "auth", "enable")
    hosts = ",".join("127.0.0.1:%d" % m.client_port for m in c.members)
    return Node("n1", workdir, hosts), Node("n2", workdir, hosts)


def start_pair(n1, n2):
    """n1 bootstraps and leads, n2 streams from it as the synchronous
    standby; returns n1's timeline."""
    nodes = [n1, n2]
    n1.start()
    tl1 = wait_for("n1 running as primary", lambda: is_primary(n1), 60,
                   nodes)
    n2.start()
    wait_for("n2 streaming from n1",
             lambda: is_streaming_replica(n2, n1), 60, nodes)
    wait_for("n2 listed as the synchronous standby",
             lambda: any(m.get("role") == "sync_standby" and
                         m["name"] == "n2" for m in
                         (n1.get("/cluster") or {}).get("members", [])),
             30, nodes)
    return tl1


@pytest.fixture
def workdir():
    """A directory the `postgres` user owns (pytest's tmp_path is 0700 of
    the user running the tests)."""
    d = tempfile.mkdtemp(prefix="cetcd-patroni-")
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(d, pw.pw_uid, pw.pw_gid)
    yield d
    if os.environ.get("CETCD_KEEP_PATRONI"):
        print("kept", d)
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.cluster
def test_patroni_failover_on_cluster_with_auth(make_cluster, workdir):
    for path in (PATRONI, os.path.join(PG_BIN, "postgres")):
        assert os.path.exists(path), "%s missing: run scripts/setup.sh" % path
    c = make_cluster(3)
    m1 = c.members[0]
    n1, n2 = nodes = patroni_nodes(c, workdir)
    try:
        # 1. Bootstrap, then a streaming replica with the primary's rows.
        tl1 = start_pair(n1, n2)
        n1.sql("CREATE TABLE t (i int)")
        n1.sql("INSERT INTO t SELECT generate_series(1, 100)")
        wait_for("the rows on n2",
                 lambda: n2.sql("SELECT count(*) FROM t") == "100", 20, nodes)

        for n in nodes:     # the watch behind Patroni's cache held
            errors = [ln for ln in n.log_tail(10 ** 6).splitlines()
                      if "ERROR" in ln or "Traceback" in ln]
            assert not errors, "%s: %s" % (n.name, errors[:5])

        # 2. The etcd member the primary's Patroni talks to, made the
        # leader first, dies: Patroni moves to another member and keeps
        # its primary.
        lead = patroni_member(c, n1)
        now, _ = c.wait_leader()
        if now is not lead:
            ctl(now, "--user", "root:" + ROOT_PW, "move-leader",
                "%x" % lead.id)
            assert c.wait_leader()[0] is lead
        c.kill(lead)
        deadline = time.monotonic() + TTL + 5
        while time.monotonic() < deadline:
            view = n2.get("/cluster")
            assert is_primary(n1) == tl1, \
                "n1 lost its primary role after the etcd leader %s died:" \
                " %r\n%s" % (lead.name, own_state(n1), n1.log_tail())
            assert view is None or leader_key(view) in ("n1", None), view
            time.sleep(0.5)
        assert leader_key(n2.get("/cluster")) == "n1"
        assert patroni_member(c, n1) is not lead
        n1.sql("INSERT INTO t SELECT generate_series(101, 200)")
        c.restart(lead)

        # 3. The primary dies: the replica takes over on a new timeline
        # with every committed row.
        n1.kill()
        killed = time.monotonic()
        tl2 = wait_for("n2 promoted", lambda: is_primary(n2), TTL + 30,
                       nodes)
        took = time.monotonic() - killed
        assert tl2 > tl1, (tl1, tl2)
        assert took >= TTL - 2, \
            "n2 took the leader key %.1f s after n1 died, before n1's" \
            " %d s lease could expire" % (took, TTL)
        assert n2.sql("SELECT count(*), sum(i) FROM t") == "200|20100"
        n2.sql("INSERT INTO t VALUES (201)")
        assert n2.sql("SELECT count(*) FROM t") == "201"

        # 4. The keys Patroni keeps, and the leader key's lease.
        prefix = "/service/%s/" % SCOPE
        tok = rpc_pb2_grpc.AuthStub(m1.channel()).Authenticate(
            rpc_pb2.AuthenticateRequest(name="root", password=ROOT_PW),
            timeout=10).token
        md = [("token", tok)]
        kv = rpc_pb2_grpc.KVStub(m1.channel())

        def patroni_keys():
            resp = kv.Range(rpc_pb2.RangeRequest(
                key=prefix.encode(), range_end=prefix[:-1].encode() + b"0"),
                metadata=md, timeout=10)
            return {k.key.decode(): k for k in resp.kvs}
        # The new primary writes the timeline history once its promotion's
        # checkpoint is done, a few of its loops after the promotion.
        keys = wait_for("the history key", lambda: (
            lambda ks: ks if prefix + "history" in ks else None)(
                patroni_keys()), 30, nodes)
        for name in ("leader", "config", "initialize", "history",
                     "members/n2", "status"):
            assert prefix + name in keys, (name, sorted(keys))
        leader = keys[prefix + "leader"]
        assert leader.value == b"n2"
        assert leader.lease != 0
        ttl = rpc_pb2_grpc.LeaseStub(m1.channel()).LeaseTimeToLive(
            rpc_pb2.LeaseTimeToLiveRequest(ID=leader.lease), metadata=md,
            timeout=10)
        assert ttl.grantedTTL == TTL and 0 < ttl.TTL <= TTL, ttl
        history = json.loads(keys[prefix + "history"].value)
        assert [h[0] for h in history] == list(range(1, tl2)), history
    finally:
        for n in nodes:
            n.stop()
        if not against_etcd():
            for m in c.members:
                assert m.running, "%s died:\n%s" % (m.name, m.log_tail())


# Long tier only (CETCD_TEST_LONG=1; not collected otherwise): Patroni on
# 3 members while a nemesis works on the members for
# CETCD_PATRONI_FAULT_SECONDS (default 120).
LONG = os.environ.get("CETCD_TEST_LONG") == "1"


def patroni_under_etcd_faults(make_cluster, workdir):
    """Patroni keeps one primary, and every row it acknowledged, while
    the etcd members are killed, paused and cut off one at a time.

    A writer inserts a numbered row into the primary every 100 ms
    (synchronous_commit to the standby); a monitor asks both PostgreSQL
    servers every 200 ms whether they are in recovery.  A nemesis picks an
    etcd member every 2-4 s (the leader every other time): kill -9 and
    restart after 1 s, SIGSTOP for 2 s, or its peer links cut for 3 s.
    Afterwards: never two primaries at once, every acknowledged row on the
    final primary, and how often the primary changed (a quorum was always
    up, so a change is Patroni losing its key: reported beside etcd's)."""
    c = make_cluster(3)
    n1, n2 = nodes = patroni_nodes(c, workdir)
    rng = random.Random(int(os.environ.get("CETCD_PATRONI_FAULT_SEED", "3")))
    stop = threading.Event()
    acked, both, roles, faults = [], [], [], []
    try:
        start_pair(n1, n2)
        n1.sql("CREATE TABLE w (i int PRIMARY KEY)")

        def writer():
            i = 0
            while not stop.is_set():
                for n in nodes:
                    i += 1
                    out = n.try_sql("INSERT INTO w VALUES (%d)" % i,
                                    timeout=3)
                    if out is not None:
                        acked.append(i)
                        break
                time.sleep(0.1)

        def monitor():
            last = None
            while not stop.is_set():
                rec = [n.try_sql("SELECT pg_is_in_recovery()", timeout=3)
                       for n in nodes]
                primaries = [n.name for n, r in zip(nodes, rec) if r == "f"]
                if len(primaries) > 1:
                    both.append(time.monotonic())
                if len(primaries) == 1 and primaries[0] != last:
                    roles.append(primaries[0])
                    last = primaries[0]
                time.sleep(0.2)

        threads = [threading.Thread(target=f, daemon=True)
                   for f in (writer, monitor)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + float(os.environ.get(
            "CETCD_PATRONI_FAULT_SECONDS", "120"))
        n = 0
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(2.0, 4.0))
            lead = c.leader()
            m = lead if (n % 2 == 0 and lead is not None) else \
                rng.choice(c.members)
            n += 1
            what = rng.random()
            if what < 0.45:
                c.kill(m)
                time.sleep(1.0)
                c.restart(m)
                faults.append("kill " + m.name)
            elif what < 0.75:
                c.pause(m)
                time.sleep(2.0)
                c.resume(m)
                faults.append("pause " + m.name)
            else:
                c.isolate(m)
                time.sleep(3.0)
                c.heal()
                faults.append("isolate " + m.name)
        time.sleep(TTL + 5)               # settle with every member up
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert not both, "two primaries at once (%d samples)" % len(both)
        primary = wait_for("a primary", lambda: next(
            (n for n in nodes if is_primary(n)), None), 60, nodes)
        have = set(int(x) for x in
                   primary.sql("SELECT i FROM w").split())
        lost = [i for i in acked if i not in have]
        assert not lost, "acknowledged rows lost: %s" % lost[:20]
        print("faults %s; %d rows acknowledged; primaries in turn %s" % (
            faults, len(acked), roles))
    finally:
        stop.set()
        for n in nodes:
            n.stop()


if LONG:
    test_patroni_under_etcd_faults = pytest.mark.cluster(
        patroni_under_etcd_faults)
