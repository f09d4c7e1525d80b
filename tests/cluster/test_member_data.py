"""A cluster whose members restart with other --initial-* flags after their
stores were rebuilt keeps its members, gets a leader and keeps its data.

Goal: once a member has data (a WAL), etcd ignores --initial-cluster,
--initial-cluster-token, --initial-cluster-state and what
--initial-advertise-peer-urls would make of the membership; cetcd must too,
also when a member's store is rebuilt from the WAL (the boot guard found it
left dirty by an earlier boot, or data.mdb is gone), which used to seed the
voters from the flags: the member then had other ids than its peers and the
cluster never got a leader.

Method: a 3-member cluster (cluster.py) takes writes and a membership-free
restart; then every member is stopped, two have their store forced to a
rebuild (boot guard state file "<another boot> dirty", data.mdb deleted),
and all restart with another token, an --initial-cluster of other URLs and
an advertised peer URL nobody listens on.  The cluster must elect a leader,
hold every key on every member, list the same members as before, and take
new writes.
"""
import os

import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from common.servers import against_etcd, free_port

pytestmark = pytest.mark.cluster


def member_list(m):
    cl = rpc_pb2_grpc.ClusterStub(m.channel())
    return sorted((x.ID, tuple(x.peerURLs), x.name) for x in cl.MemberList(
        rpc_pb2.MemberListRequest(), timeout=10).members)


def other_flags(c):
    """c.args with other --initial-* flags (the listen URLs stay)."""
    bogus = {m.name: "http://127.0.0.1:%d" % free_port() for m in c.members}
    cluster = ",".join("%s=%s" % (n, u) for n, u in sorted(bogus.items()))
    plain = c.args

    def args(m):
        a = plain(m)
        for flag, value in (("--initial-cluster-token", "another-token"),
                            ("--initial-cluster", cluster),
                            ("--initial-advertise-peer-urls", bogus[m.name])):
            a[a.index(flag) + 1] = value
        return a
    return args


def force_rebuilds(m1, m2):
    """m1's store as a dirty stop of an earlier boot left it (the boot
    guard's state file, src/server/boot_guard.c); m2's data.mdb gone."""
    with open(os.path.join(m1.data_dir, "member", "db.state"), "w") as f:
        f.write("an-earlier-boot dirty\n")
    os.unlink(os.path.join(m2.data_dir, "member", "db", "data.mdb"))


def test_rebuilt_cluster_ignores_initial_flags(make_cluster):
    c = make_cluster(3)
    lm, _ = c.wait_leader()
    for i in range(30):
        lm.kv().Put(rpc_pb2.PutRequest(key=b"cm/%02d" % i, value=b"v"),
                    timeout=10)
    before_rev, before = c.wait_converged()
    before_members = member_list(c.members[0])
    assert len(before) == 30 and len(before_members) == 3
    for m in c.members:
        m.proc.terminate()  # a clean stop: the store is marked clean
        m.proc.wait(20)
        m.proc = None
        m.reset_channel()
    m1, m2, _ = c.members
    rebuilt = not against_etcd()  # etcd has no such store to rebuild
    if rebuilt:
        force_rebuilds(m1, m2)
    c.args = other_flags(c)
    for m in c.members:
        c.spawn(m)
    for m in c.members:
        c.wait_ready(m, timeout=30)  # a linearizable Range: a leader
    lm, _ = c.wait_leader()
    rev, content = c.wait_converged()
    assert (rev, content) == (before_rev, before)
    for m in c.members:
        assert member_list(m) == before_members
    lm.kv().Put(rpc_pb2.PutRequest(key=b"cm/after", value=b"x"), timeout=10)
    rev, content = c.wait_converged()
    assert len(content) == 31
    # m1's store is restored to its pinned state (src/server/snap_pin.c),
    # m2's (deleted) starts empty from member/seed; both then replay the WAL.
    lines = {m1: "rebuilding the store from its state pinned at",
             m2: "the store is empty: it starts from the members in"}
    for m in (m1, m2) if rebuilt else ():
        with open(m.log_path, "rb") as f:
            log = f.read().decode("utf-8", "replace").split(
                "===== start #2")[1]
        assert lines[m] in log
