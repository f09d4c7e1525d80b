"""Cluster membership and leader transfer, driven by the real etcdctl.

Goal: show that a running cluster of the server under test can list,
add (as voter or learner), start, promote, update and remove members,
move its leadership, and report every member through `endpoint status
--cluster` / `endpoint health --cluster`, as etcd 3.4.23 does, and that
KV keeps working through every member afterwards.

Method: a 3-member Cluster (cluster.py, peer links through the proxy);
etcdctl (ETCDCTL_API=3) for the operator's view, raw gRPC where etcdctl
itself refuses before asking (MoveLeader to a follower).  A member added
with `member add` is started with the ETCD_INITIAL_CLUSTER and
ETCD_INITIAL_CLUSTER_STATE that etcdctl printed.  The same tests pass
against etcd (CETCD_TEST_AGAINST_ETCD=1) except where marked.
"""

import json
import os
import re
import subprocess
import time

import grpc
import pytest

import cluster as clusterlib
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

pytestmark = pytest.mark.cluster

ETCDCTL = "/usr/bin/etcdctl"


def ctl(endpoints, *args, check=True, timeout=30):
    if not isinstance(endpoints, str):
        endpoints = ",".join(m.endpoint for m in endpoints)
    env = dict(os.environ, ETCDCTL_API="3")
    p = subprocess.run([ETCDCTL, "--endpoints", endpoints] + list(args),
                       capture_output=True, text=True, env=env,
                       timeout=timeout)
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def reconfig(endpoints, *args, check=True, timeout=20.0):
    """A membership change; retried while the strict reconfig check says
    the peers have not been connected long enough (etcd wants 5 s)."""
    deadline = time.monotonic() + timeout
    while True:
        p = ctl(endpoints, *args, check=False)
        if "unhealthy cluster" not in p.stderr or \
                time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def member_list(m):
    out = ctl(m.endpoint, "member", "list", "-w", "json").stdout
    return json.loads(out)


def wait_serving(m, timeout=30.0):
    """Until m answers Status and a serializable Range (learners refuse
    linearizable reads in etcd)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert m.running, "%s exited:\n%s" % (m.name, m.log_tail())
        ch = grpc.insecure_channel(m.endpoint)
        try:
            from etcd3.etcdrpc import rpc_pb2_grpc
            rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(
                key=b"x", serializable=True), timeout=1.0)
            return
        except grpc.RpcError:
            time.sleep(0.1)
        finally:
            ch.close()
    raise AssertionError("%s not serving:\n%s" % (m.name, m.log_tail()))


def new_member(c, name):
    m = clusterlib.Member(name, c.root)
    c.proxy.add_member(m.name, m.proxy_port, m.peer_port)
    return m


def spawn_joining(c, m, initial_cluster, state="existing", token=None):
    """Start m with the environment `member add` printed."""
    args = [c.binary, "--name", m.name, "--data-dir", m.data_dir,
            "--listen-client-urls", m.client_url,
            "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", "http://127.0.0.1:%d" % m.peer_port,
            "--initial-advertise-peer-urls", m.advertised_peer_url,
            "--initial-cluster", initial_cluster,
            "--initial-cluster-token", token or c.token,
            "--initial-cluster-state", state,
            "--heartbeat-interval", str(c.heartbeat_ms),
            "--election-timeout", str(c.election_ms)] + c.extra_args
    m.starts += 1
    with open(m.log_path, "ab") as log:
        log.write(("\n===== start #%d: %s\n" % (m.starts, " ".join(args)))
                  .encode())
        log.flush()
        m.proc = clusterlib.subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=c.root)


def add_and_start(c, name, learner=False):
    m = new_member(c, name)
    args = ["member", "add", name, "--peer-urls", m.advertised_peer_url]
    if learner:
        args.append("--learner")
    out = reconfig(c.members, *args).stdout
    assert re.search(r"Member\s+[0-9a-f]+ added to cluster\s+[0-9a-f]+", out), out
    env = dict(re.findall(r'^(ETCD_\w+)="(.*)"$', out, re.M))
    assert env["ETCD_NAME"] == name
    assert env["ETCD_INITIAL_CLUSTER_STATE"] == "existing"
    assert "%s=%s" % (name, m.advertised_peer_url) in \
        env["ETCD_INITIAL_CLUSTER"]
    m.id = int(re.search(r"Member\s+([0-9a-f]+) added", out).group(1), 16)
    c.members.append(m)
    spawn_joining(c, m, env["ETCD_INITIAL_CLUSTER"])
    wait_serving(m)
    return m


def wait_member(m, member_id, pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = [x for x in member_list(m)["members"] if x["ID"] == member_id]
        if last and pred(last[0]):
            return last[0]
        time.sleep(0.2)
    raise AssertionError("member %x on %s: %r" % (member_id, m.name, last))


def kv_everywhere(c, members, key):
    for i, m in enumerate(members):
        ctl(m.endpoint, "put", key, "v%d" % i)
        for n in members:
            got = ctl(n.endpoint, "get", key, "--print-value-only").stdout
            assert got.strip() == "v%d" % i, (m.name, n.name, got)


def test_member_list_formats(make_cluster):
    c = make_cluster(3)
    simple = ctl(c.members, "member", "list").stdout.strip().splitlines()
    assert len(simple) == 3
    for line in simple:
        mid, status, name, peers, clients, learner = line.split(", ")
        m = c.by_id(int(mid, 16))
        assert (status, name, peers, clients, learner) == (
            "started", m.name, m.advertised_peer_url, m.client_url, "false")
    js = member_list(c.members[0])
    assert js["header"]["member_id"] == c.members[0].id
    assert sorted(x["ID"] for x in js["members"]) == sorted(
        m.id for m in c.members)
    for x in js["members"]:
        m = c.by_id(x["ID"])
        assert x["name"] == m.name
        assert x["peerURLs"] == [m.advertised_peer_url]
        assert x["clientURLs"] == [m.client_url]
    cids = {member_list(m)["header"]["cluster_id"] for m in c.members}
    assert len(cids) == 1
    table = ctl(c.members, "member", "list", "-w", "table").stdout
    assert "| IS LEARNER |" in table and table.count("started") == 3
    hx = ctl(c.members, "member", "list", "--hex").stdout
    assert "%x" % c.members[0].id in hx


def test_endpoint_status_and_health_cluster(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    st = json.loads(ctl(c.members[0].endpoint, "endpoint", "status",
                        "--cluster", "-w", "json").stdout)
    assert sorted(e["Status"]["header"]["member_id"] for e in st) == sorted(
        m.id for m in c.members)
    for e in st:
        s = e["Status"]
        assert s["leader"] == lead.id
        assert s["raftTerm"] >= 1 and s["raftIndex"] >= 1
        assert s["raftAppliedIndex"] >= 1
        assert not s.get("isLearner", False)
    table = ctl(c.members[0].endpoint, "endpoint", "status", "--cluster",
                "-w", "table").stdout
    assert table.count("true") >= 1
    h = ctl(c.members[0].endpoint, "endpoint", "health", "--cluster")
    lines = (h.stdout + h.stderr).strip().splitlines()
    healthy = [ln for ln in lines if "is healthy" in ln]
    assert len(healthy) == 3, lines


def test_add_errors(make_cluster):
    c = make_cluster(3)
    p = reconfig(c.members, "member", "add", "x", "--peer-urls",
            c.members[1].advertised_peer_url, check=False)
    assert p.returncode != 0
    assert "etcdserver: Peer URLs already exists" in p.stderr
    p = reconfig(c.members, "member", "remove", "1234", check=False)
    assert "etcdserver: member not found" in p.stderr
    p = reconfig(c.members, "member", "promote", "%x" % c.members[1].id,
            check=False)
    assert "etcdserver: can only promote a learner member" in p.stderr
    p = reconfig(c.members, "member", "update", "1234", "--peer-urls",
            "http://127.0.0.1:1", check=False)
    assert "etcdserver: member not found" in p.stderr
    # URLs as etcd's types.NewURLs takes them: host:port for every scheme
    # (unix too), no path, the space around each trimmed and not kept.
    # Straight to the server: etcdctl checks them itself first.
    lead, _ = c.wait_leader()
    stub = rpc_pb2_grpc.ClusterStub(grpc.insecure_channel(lead.endpoint))
    for bad in ("unix://sock", "unixs://a/b.sock", "http://127.0.0.1:1/p",
                "http://127.0.0.1", "ftp://127.0.0.1:1", "http://a b:1"):
        with pytest.raises(grpc.RpcError) as e:
            stub.MemberAdd(rpc_pb2.MemberAddRequest(peerURLs=[bad]),
                           timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
        assert e.value.details() == \
            "etcdserver: given member URLs are invalid", bad
    # (A voter that never starts: 3 of 4 still make a quorum.  Retried
    # while the strict reconfig check finds the peers too new, as
    # reconfig does.)
    deadline = time.monotonic() + 20
    while True:
        try:
            r = stub.MemberAdd(rpc_pb2.MemberAddRequest(
                peerURLs=[" http://127.0.0.1:1\t"]), timeout=10)
            break
        except grpc.RpcError as e:
            if e.details() != "etcdserver: unhealthy cluster" or \
                    time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert list(r.member.peerURLs) == ["http://127.0.0.1:1"], r
    x = [m for m in member_list(lead)["members"] if m["ID"] == r.member.ID]
    assert x and x[0]["peerURLs"] == ["http://127.0.0.1:1"], x
    stub.MemberRemove(rpc_pb2.MemberRemoveRequest(ID=r.member.ID),
                      timeout=10)


def test_learner_add_promote_update(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    for i in range(50):
        ctl(lead.endpoint, "put", "k%d" % i, "v%d" % i)
    # A learner that has not started is behind: promotion refused.
    m4 = new_member(c, "m4")
    out = reconfig(c.members, "member", "add", "m4", "--peer-urls",
              m4.advertised_peer_url, "--learner").stdout
    m4.id = int(re.search(r"Member\s+([0-9a-f]+) added", out).group(1), 16)
    p = reconfig(lead.endpoint, "member", "promote", "%x" % m4.id, check=False)
    assert p.returncode != 0
    assert ("etcdserver: can only promote a learner member which is in "
            "sync with leader") in p.stderr
    # Only one learner at a time (etcd 3.4).
    p = reconfig(c.members, "member", "add", "m5", "--peer-urls",
            "http://127.0.0.1:1", "--learner", check=False)
    assert "etcdserver: too many learner members in cluster" in p.stderr
    x = [x for x in member_list(lead)["members"] if x["ID"] == m4.id][0]
    assert x.get("isLearner") and not x.get("name") and \
        not x.get("clientURLs")
    env = dict(re.findall(r'^(ETCD_\w+)="(.*)"$', out, re.M))
    c.members.append(m4)
    spawn_joining(c, m4, env["ETCD_INITIAL_CLUSTER"])
    wait_serving(m4)
    x = wait_member(lead, m4.id, lambda x: x.get("name") == "m4")
    assert x["clientURLs"] == [m4.client_url] and x["isLearner"]
    st = json.loads(ctl(m4.endpoint, "endpoint", "status", "-w",
                        "json").stdout)
    assert st[0]["Status"]["isLearner"]
    # A learner serves only Status and serializable Ranges (etcd 3.4's
    # interceptor): writes and linearizable reads are refused.
    kv = m4.kv()
    for call in (lambda: kv.Put(rpc_pb2.PutRequest(key=b"l", value=b"v"),
                                timeout=5),
                 lambda: kv.Range(rpc_pb2.RangeRequest(key=b"k49"),
                                  timeout=5)):
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert (e.value.code(), e.value.details()) == (
            grpc.StatusCode.UNAVAILABLE,
            "etcdserver: rpc not supported for learner")
    kv.Range(rpc_pb2.RangeRequest(key=b"k49", serializable=True), timeout=5)
    # Caught up: promotion accepted (retried while it catches up).
    deadline = time.monotonic() + 20
    while True:
        p = reconfig(lead.endpoint, "member", "promote", "%x" % m4.id,
                check=False)
        if p.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert p.returncode == 0, p.stderr
    assert re.search(r"Member\s+%x promoted in cluster" % m4.id, p.stdout)
    wait_member(lead, m4.id, lambda x: not x.get("isLearner"))
    assert ctl(m4.endpoint, "get", "k49", "--print-value-only").stdout \
        .strip() == "v49"
    # Update: peer URLs change in every member's list.
    extra = "http://127.0.0.1:%d" % clusterlib.free_port()
    reconfig(lead.endpoint, "member", "update", "%x" % m4.id, "--peer-urls",
        m4.advertised_peer_url + "," + extra)
    for m in c.members:
        wait_member(m, m4.id, lambda x: sorted(x["peerURLs"]) == sorted(
            [m4.advertised_peer_url, extra]))
    reconfig(lead.endpoint, "member", "update", "%x" % m4.id, "--peer-urls",
        m4.advertised_peer_url)
    kv_everywhere(c, c.members, "after-update")
    c.wait_converged()


def test_voter_add_remove_follower_and_leader(make_cluster):
    c = make_cluster(3)
    m4 = add_and_start(c, "m4")
    for m in c.members:
        wait_member(m, m4.id, lambda x: x.get("name") == "m4" and
                    not x.get("isLearner"))
    kv_everywhere(c, c.members, "four")
    # Remove a follower: it stops; the others serve on.
    lead, _ = c.wait_leader()
    follower = next(m for m in c.members if m is not lead and m is not m4)
    out = reconfig(lead.endpoint, "member", "remove", "%x" % follower.id).stdout
    assert re.search(r"Member\s+%x removed from cluster" % follower.id, out)
    c.members.remove(follower)
    deadline = time.monotonic() + 20
    while follower.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert follower.proc.poll() is not None, "removed member still running"
    follower.proc = None
    for m in c.members:
        ids = [x["ID"] for x in member_list(m)["members"]]
        assert follower.id not in ids and len(ids) == 3
    # Remove the leader through itself: a new leader takes over.
    lead, _ = c.wait_leader()
    reconfig(lead.endpoint, "member", "remove", "%x" % lead.id)
    c.members.remove(lead)
    newlead, _ = c.wait_leader(timeout=20)
    assert newlead is not lead
    if lead.proc is not None:
        lead.proc.kill()
        lead.proc.wait()
        lead.proc = None
    kv_everywhere(c, c.members, "two-left")
    c.wait_converged()
    # A removed member refuses to restart into the cluster.
    if not clusterlib.against_etcd():
        c.members.append(follower)
        c.spawn(follower)
        follower.proc.wait(timeout=20)
        c.members.remove(follower)
        follower.proc = None
        with open(follower.log_path) as f:
            assert "permanently removed from the cluster" in f.read()


def test_move_leader(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    target = next(m for m in c.members if m is not lead)
    out = ctl(lead.endpoint, "move-leader", "%x" % target.id).stdout
    assert re.search(r"Leadership transferred from\s+%x to\s+%x" % (
        lead.id, target.id), out), out
    nl, _ = c.wait_leader()
    assert nl is target
    # A follower refuses (etcdctl picks the leader itself, so use gRPC).
    other = next(m for m in c.members if m is not target)
    with pytest.raises(grpc.RpcError) as e:
        other.maintenance().MoveLeader(
            rpc_pb2.MoveLeaderRequest(targetID=other.id), timeout=5)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert e.value.details() == "etcdserver: not leader"
    with pytest.raises(grpc.RpcError) as e:
        target.maintenance().MoveLeader(
            rpc_pb2.MoveLeaderRequest(targetID=12345), timeout=5)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert e.value.details() == "etcdserver: bad leader transferee"
    kv_everywhere(c, c.members, "moved")


def test_join_with_other_token_takes_the_cluster(make_cluster):
    """As etcd 3.4: a joining member's --initial-cluster-token is not
    compared; it takes the running cluster's ids and serves its data (etcd's
    e2e TestIssue6361 joins a restored cluster with the default token)."""
    c = make_cluster(3)
    ctl(c.members[0].endpoint, "put", "tk", "v")
    m4 = new_member(c, "m4")
    out = reconfig(c.members, "member", "add", "m4", "--peer-urls",
                   m4.advertised_peer_url).stdout
    m4_id = int(re.search(r"Member\s+([0-9a-f]+) added", out).group(1), 16)
    ic = c.initial_cluster() + ",m4=" + m4.advertised_peer_url
    c.members.append(m4)  # the proxy forwards only known members' links
    spawn_joining(c, m4, ic, token="another-token")
    wait_serving(m4)
    st = json.loads(ctl(m4.endpoint, "endpoint", "status", "-w",
                        "json").stdout)[0]["Status"]["header"]
    st0 = json.loads(ctl(c.members[0].endpoint, "endpoint", "status", "-w",
                         "json").stdout)[0]["Status"]["header"]
    assert (st["cluster_id"], st["member_id"]) == (st0["cluster_id"], m4_id)
    assert ctl(m4.endpoint, "get", "tk", "--print-value-only").stdout \
        .strip() == "v"


def test_grown_single_member_reads_need_quorum(make_cluster):
    """A member started alone answers linearizable reads without a
    ReadIndex round while it is the only voter.  Once a second voter has
    joined, it must confirm its leadership again: with that voter paused,
    a linearizable read through it does not succeed (etcd 3.4.23 times
    out too), a serializable one still does."""
    c = make_cluster(1)
    a = c.members[0]
    m2 = add_and_start(c, "m2")
    wait_member(a, m2.id, lambda x: x.get("name") == "m2")
    ctl(a.endpoint, "put", "k", "v1")
    lead, _ = c.wait_leader()
    if lead is not a:  # only the original member had the shortcut
        ctl(a.endpoint, "move-leader", "%x" % a.id)
        deadline = time.monotonic() + 15
        while c.wait_leader()[0] is not a:
            assert time.monotonic() < deadline, "a did not take the lead"
            time.sleep(0.2)
    c.pause(m2)
    try:
        t0 = time.monotonic()
        p = ctl(a.endpoint, "get", "k", "--print-value-only",
                "--command-timeout=2s", check=False)
        assert p.returncode != 0, \
            "linearizable read answered without a quorum: %r after %.2fs" % (
                p.stdout, time.monotonic() - t0)
        p = ctl(a.endpoint, "get", "k", "--print-value-only",
                "--consistency=s")
        assert p.stdout.strip() == "v1"
    finally:
        c.resume(m2)
    deadline = time.monotonic() + 20
    while True:
        p = ctl(a.endpoint, "get", "k", "--print-value-only", check=False)
        if p.returncode == 0:
            assert p.stdout.strip() == "v1"
            break
        assert time.monotonic() < deadline, p.stderr
        time.sleep(0.3)
