"""--force-new-cluster: a member of a stopped 3-member cluster restarts from
its data as a one-member cluster, as etcd 3.4.23 does.

Goal: after a disaster (two of three members lost for good) the operator
restarts the survivor with --force-new-cluster.  It must serve every key
at the same revision with the same cluster id, list itself as the only
member, lead itself and take writes; a later restart without the flag must
keep the one-member cluster (the change is in the WAL and the store, not
only in memory); a fresh member added with `etcdctl member add` must join
it and get the data.

Method: a 3-member Cluster (cluster.py) takes writes, a compaction and a
delete; every member is stopped (clean stop); m1 alone is started again
with --force-new-cluster and checked through raw gRPC and etcdctl; then
restarted without the flag and checked again; then m4 is added with
`etcdctl member add` and started with the environment it printed
(test_membership.py's helpers).  m1 is also forced a second time while
alone (a no-op).  Also passes against etcd
(CETCD_TEST_AGAINST_ETCD=1).
"""
import re
import time

import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

import test_membership as tm

pytestmark = pytest.mark.cluster


def members_of(m):
    cl = rpc_pb2_grpc.ClusterStub(m.channel())
    r = cl.MemberList(rpc_pb2.MemberListRequest(), timeout=10)
    return r.header.cluster_id, sorted(
        (x.ID, x.name, tuple(x.peerURLs)) for x in r.members)


def stop_all(c):
    for m in c.members:
        m.proc.terminate()
        m.proc.wait(20)
        m.proc = None
        m.reset_channel()


def with_flag(c, flag):
    plain = c.args

    def args(m):
        return plain(m) + [flag]
    return args, plain


def wait_leads_itself(c, m, timeout=20.0):
    deadline = time.monotonic() + timeout
    st = None
    while time.monotonic() < deadline:
        st = c.status(m)
        if st is not None and st.leader == st.header.member_id != 0:
            return st
        time.sleep(0.1)
    raise AssertionError("%s does not lead itself: %r\n%s" % (
        m.name, st, m.log_tail()))


def check_alone(c, m1, cluster_id, me):
    cid, ms = members_of(m1)
    assert cid == cluster_id
    assert [x[0] for x in ms] == [m1.id], ms
    assert ms[0] == me, (ms, me)
    st = wait_leads_itself(c, m1)
    assert st.header.cluster_id == cluster_id
    out = tm.ctl(m1.endpoint, "member", "list").stdout.strip().splitlines()
    assert len(out) == 1, out
    assert re.match(r"^%x, started, m1, %s, %s, false$" % (
        m1.id, re.escape(m1.advertised_peer_url), re.escape(m1.client_url)),
        out[0]), out


def test_force_new_cluster(make_cluster):
    c = make_cluster(3)
    lm, _ = c.wait_leader()
    kv = lm.kv()
    for i in range(40):
        kv.Put(rpc_pb2.PutRequest(key=b"f/%02d" % i, value=b"v%d" % i),
               timeout=10)
    kv.Put(rpc_pb2.PutRequest(key=b"f/00", value=b"again"), timeout=10)
    rev = kv.Range(rpc_pb2.RangeRequest(key=b"f/00"), timeout=10).header.revision
    kv.Compact(rpc_pb2.CompactionRequest(revision=rev - 5, physical=True),
               timeout=10)
    kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"f/39"), timeout=10)
    before_rev, before = c.wait_converged()
    cluster_id, before_members = members_of(c.members[0])
    assert len(before_members) == 3
    m1, m2, m3 = c.members
    me = next(x for x in before_members if x[0] == m1.id)
    stop_all(c)

    # m1 alone, forced.
    c.members = [m1]
    c.args, plain = with_flag(c, "--force-new-cluster")
    c.spawn(m1)
    c.wait_ready(m1)
    assert c.contents(m1) == (before_rev, before)
    check_alone(c, m1, cluster_id, me)
    # etcd's log line (capnslog: "forcing restart of member <id> in cluster
    # <cid> at commit index <n>"; cetcd prints the ids in 16 hex digits).
    with open(m1.log_path, "rb") as f:
        log = f.read().decode("utf-8", "replace").split("===== start #2")[1]
    assert re.search(r"forcing restart of member 0*%x in cluster 0*%x at "
                     r"commit index \d+" % (m1.id, cluster_id), log), log[-3000:]
    kv = m1.kv()
    r = kv.Put(rpc_pb2.PutRequest(key=b"f/after", value=b"x"), timeout=10)
    assert r.header.revision == before_rev + 1
    # The old revisions are there (nothing but the membership changed).
    old = kv.Range(rpc_pb2.RangeRequest(key=b"f/00", revision=rev - 1),
                   timeout=10)
    assert [x.value for x in old.kvs] == [b"v0"]

    # Restarted without the flag: still alone, still leading, same data.
    c.args = plain
    c.restart(m1)
    check_alone(c, m1, cluster_id, me)
    after_rev, after = c.contents(m1)
    assert after_rev == before_rev + 1
    assert after == sorted(before + [(b"f/after", b"x", after_rev, after_rev,
                                      1)])
    # Forced again while alone: nothing to remove, nothing changes.
    c.args = with_flag(c, "--force-new-cluster")[0]
    c.restart(m1)
    check_alone(c, m1, cluster_id, me)
    assert c.contents(m1) == (after_rev, after)
    c.args = plain
    c.restart(m1)
    m1.kv().Put(rpc_pb2.PutRequest(key=b"f/again", value=b"y"), timeout=10)

    # A fresh member joins the one-member cluster and gets everything.
    m4 = tm.add_and_start(c, "m4")
    c.wait_ready(m4)
    rev4, content4 = c.wait_converged(members=[m1, m4])
    assert rev4 == after_rev + 1 and len(content4) == len(after) + 1
    cid, ms = members_of(m4)
    assert cid == cluster_id
    assert sorted(x[0] for x in ms) == sorted([m1.id, m4.id])
    tm.kv_everywhere(c, [m1, m4], "f/both")
    # The removed members stay out: m2's old data cannot rejoin.
    assert m2.proc is None and m3.proc is None


def test_force_new_cluster_drops_uncommitted(make_cluster):
    """A put the isolated leader wrote to its WAL but never committed is
    not in the forced one-member cluster (etcd discards the entries past
    the WAL's commit index)."""
    c = make_cluster(3)
    lm, _ = c.wait_leader()
    lm.kv().Put(rpc_pb2.PutRequest(key=b"u/committed", value=b"1"),
                timeout=10)
    c.wait_converged()
    c.isolate(lm)
    with pytest.raises(Exception):
        lm.kv().Put(rpc_pb2.PutRequest(key=b"u/lost", value=b"2"),
                    timeout=0.5)
    stop_all(c)
    c.heal()
    c.members = [lm]
    c.args, _ = with_flag(c, "--force-new-cluster")
    c.spawn(lm)
    c.wait_ready(lm)
    wait_leads_itself(c, lm)
    rev, content = c.contents(lm)
    assert [x[0] for x in content] == [b"u/committed"]
    assert lm.kv().Range(rpc_pb2.RangeRequest(key=b"u/lost"),
                         timeout=10).count == 0
    with open(lm.log_path, "rb") as f:
        log = f.read().decode("utf-8", "replace").split("===== start #2")[1]
    assert re.search(r"discarding \d+ uncommitted WAL entries", log), \
        log[-3000:]
    r = lm.kv().Put(rpc_pb2.PutRequest(key=b"u/new", value=b"3"), timeout=10)
    assert r.header.revision == rev + 1
