"""Promotion through a follower, and a removed member stopping by itself.

Goal: show, as etcd 3.4.23 does, that
(1) MemberPromote sent to a follower is decided by the leader, which alone
    knows the learner's progress: refused with "etcdserver: can only
    promote a learner member which is in sync with leader" while the
    learner lags (never started, or stopped while the cluster wrote on),
    accepted once it has caught up (the follower answers with the
    members, the learner now a voter), and answered "etcdserver: no
    leader" once the follower's request timeout passes without a leader;
(2) a member removed while it runs, or removed while it was down and
    started again later, stops by itself with "the member has been
    permanently removed from the cluster", well under 5 s after the
    removal was applied (its peers refuse it as removed; no waiting for
    heuristics).

Method: 3-member Clusters (cluster.py) and the etcdctl helpers of
test_membership.py.  MemberPromote goes over raw gRPC to one chosen
member's client URL, because python3-etcd3's protos predate it: the
request {ID = 1} is encoded by hand and the reply is decoded as a
MemberListResponse, whose fields {header = 1, members = 2} are those of
MemberPromoteResponse.  Times are taken from the client's side: the
removal's reply (sent once the leader has applied it) to the process's
exit.  Every test passes against etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import re
import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2

from test_membership import (ctl, new_member, reconfig, spawn_joining,
                             wait_member, wait_serving)

pytestmark = pytest.mark.cluster

IN_SYNC = ("etcdserver: can only promote a learner member which is in sync "
           "with leader")
REMOVED = "the member has been permanently removed from the cluster"


def promote_request(member_id):
    out = bytearray(b"\x08")  # field 1 (ID), varint
    while member_id >= 0x80:
        out.append((member_id & 0x7F) | 0x80)
        member_id >>= 7
    out.append(member_id)
    return bytes(out)


def promote_via(m, member_id, timeout=20.0):
    """MemberPromote on m; the reply as a MemberListResponse."""
    ch = grpc.insecure_channel(m.endpoint)
    try:
        call = ch.unary_unary("/etcdserverpb.Cluster/MemberPromote")
        raw = call(promote_request(member_id), timeout=timeout)
        return rpc_pb2.MemberListResponse.FromString(raw)
    finally:
        ch.close()


def _varint(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i


def is_learner(member):
    """Member.isLearner (field 5), which python3-etcd3's protos lack: read
    from the encoded message (unknown fields are kept)."""
    b, i, learner = member.SerializeToString(), 0, False
    while i < len(b):
        key, i = _varint(b, i)
        if key & 7 == 0:
            v, i = _varint(b, i)
            if key >> 3 == 5:
                learner = v != 0
        elif key & 7 == 2:
            n, i = _varint(b, i)
            i += n
        else:
            raise AssertionError("unexpected wire type in Member: %d" % key)
    return learner


def promote_error(m, member_id, timeout=20.0):
    with pytest.raises(grpc.RpcError) as e:
        promote_via(m, member_id, timeout)
    return e.value.code(), e.value.details()


def add_learner(c, name):
    """member add --learner (not started); returns (member, its env)."""
    m = new_member(c, name)
    out = reconfig(c.members, "member", "add", name, "--peer-urls",
                   m.advertised_peer_url, "--learner").stdout
    m.id = int(re.search(r"Member\s+([0-9a-f]+) added", out).group(1), 16)
    env = dict(re.findall(r'^(ETCD_\w+)="(.*)"$', out, re.M))
    return m, env


def put_many(m, prefix, n):
    kv = m.kv()
    for i in range(n):
        kv.Put(rpc_pb2.PutRequest(key=b"%s%d" % (prefix, i), value=b"v"),
               timeout=5)


def wait_caught_up(c, learner, lead, timeout=20.0):
    """Until the learner knows everything the leader committed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        want, got = c.status(lead), c.status(learner)
        if want and got and got.raftIndex >= want.raftIndex:
            return
        time.sleep(0.1)
    raise AssertionError("%s did not catch up:\n%s" % (
        learner.name, learner.log_tail()))


def wait_exit(m, timeout):
    """Seconds until m's process exited (fails after timeout)."""
    t0 = time.monotonic()
    while m.proc.poll() is None:
        assert time.monotonic() - t0 < timeout, \
            "%s still running %.0f s later:\n%s" % (m.name, timeout,
                                                     m.log_tail())
        time.sleep(0.02)
    return time.monotonic() - t0


def log_text(m):
    with open(m.log_path, errors="replace") as f:
        return f.read()


def test_promote_through_follower(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    put_many(lead, b"a", 100)
    m4, env = add_learner(c, "m4")
    follower = next(m for m in c.members if m is not lead)
    # Never started: far behind, and only the leader can tell.
    assert promote_error(follower, m4.id) == (
        grpc.StatusCode.FAILED_PRECONDITION, IN_SYNC)
    c.members.append(m4)
    spawn_joining(c, m4, env["ETCD_INITIAL_CLUSTER"])
    wait_serving(m4)
    wait_caught_up(c, m4, lead)
    # Stopped while the cluster writes on: behind again.
    c.kill(m4)
    put_many(lead, b"b", 150)
    assert promote_error(follower, m4.id) == (
        grpc.StatusCode.FAILED_PRECONDITION, IN_SYNC)
    # Back and caught up: the follower's promotion goes through (retried
    # while the learner catches up, as an operator would).
    spawn_joining(c, m4, env["ETCD_INITIAL_CLUSTER"])
    wait_serving(m4)
    deadline = time.monotonic() + 20
    while True:
        try:
            resp = promote_via(follower, m4.id)
            break
        except grpc.RpcError as e:
            assert e.details() == IN_SYNC, e
            assert time.monotonic() < deadline, "never in sync"
            time.sleep(0.3)
    assert resp.header.member_id == follower.id
    listed = {x.ID: x for x in resp.members}
    assert sorted(listed) == sorted(m.id for m in c.members)
    assert not is_learner(listed[m4.id])
    # Promoting it again: a voter is no learner.
    assert promote_error(follower, m4.id) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "etcdserver: can only promote a learner member")
    assert promote_error(follower, 0x1234) == (
        grpc.StatusCode.NOT_FOUND, "etcdserver: member not found")
    for m in c.members:
        wait_member(m, m4.id, lambda x: not x.get("isLearner"))
    ctl(m4.endpoint, "put", "after-promote", "yes")
    assert ctl(m4.endpoint, "get", "after-promote",
               "--print-value-only").stdout.strip() == "yes"


def test_promote_through_follower_without_leader(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    m4, _ = add_learner(c, "m4")
    follower = next(m for m in c.members if m is not lead)
    for m in c.members:
        if m is not follower:
            c.kill(m)
    deadline = time.monotonic() + 15
    while True:  # until the follower's election timeout forgot the leader
        st = c.status(follower)
        if st is not None and st.leader == 0:
            break
        assert time.monotonic() < deadline, "follower still has a leader"
        time.sleep(0.1)
    t0 = time.monotonic()
    assert promote_error(follower, m4.id, timeout=30) == (
        grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader")
    waited = time.monotonic() - t0
    print("no leader: answered after %.2f s" % waited)
    # etcd waits for a leader up to its request timeout, 5 s + 2
    # election timeouts (7 s here).
    assert 6.0 < waited < 10.0, waited


def test_removed_while_running_stops_promptly(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    victim = next(m for m in c.members if m is not lead)
    out = reconfig(lead.endpoint, "member", "remove",
                   "%x" % victim.id).stdout
    assert re.search(r"Member\s+%x removed from cluster" % victim.id, out)
    took = wait_exit(victim, 10.0)
    print("removed member exited %.2f s after its removal" % took)
    assert took < 3.0, "stopped %.1f s after its removal" % took
    assert REMOVED in log_text(victim)
    c.members.remove(victim)
    victim.proc = None
    ctl(c.members, "put", "after-remove", "ok")
    for m in c.members:
        assert ctl(m.endpoint, "get", "after-remove",
                   "--print-value-only").stdout.strip() == "ok"


def test_removed_while_down_stops_at_restart(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    victim = next(m for m in c.members if m is not lead)
    c.kill(victim)
    reconfig(lead.endpoint, "member", "remove", "%x" % victim.id)
    put_many(lead, b"r", 20)
    c.spawn(victim)  # its data dir knows nothing of the removal
    took = wait_exit(victim, 10.0)
    print("removed member exited %.2f s after its restart" % took)
    assert took < 4.0, "ran %.1f s after its restart" % took
    assert REMOVED in log_text(victim).split("===== start #2")[-1]
    c.members.remove(victim)
    victim.proc = None
    ctl(c.members, "put", "after-restart", "ok")
