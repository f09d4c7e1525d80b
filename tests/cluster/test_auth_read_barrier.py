"""A read's permission is checked after its linearizable barrier (issue
19), as etcd's EtcdServer.Range (linearizableReadNotify, then the check in
doSerialize): a permission granted, and acknowledged, before a read was
sent is seen by that read on a member that had not applied the grant yet.

Goal: a user without read on /g/ is granted it through the leader; the
grant is acknowledged; at once, a linearizable Range of /g/k with the
user's token goes to a follower whose peer links are slowed, so it has not
applied the grant yet.  The Range must return the key (etcd's answer); a
member that checks the permission before the ReadIndex wait answers
"permission denied" (cetcd did until this change).  A serializable Range
makes no barrier and, at once on the slow follower, is still denied (on
both servers), which shows the follower really lagged.

Method: a 3-member Cluster (cluster.py) behind the peer proxy, election
timeout 3 s; the follower's links to both other members are delayed by
0.5 s (so it keeps its leader); users are set up through the leader with
etcdctl; the token is the follower's own Authenticate (simple tokens live
on every member) taken before the delay.  Also run against etcd 3.4.23 with
CETCD_TEST_AGAINST_ETCD=1 (passes).

The second check, after the read (etcd's doSerialize): a permission
revoked while a read was being made voids it with "etcdserver: revision of
auth store is old", where a member without the check returns what it read
(cetcd did until this change).  The window is opened with cetcd's test
hook CETCD_TEST_READ_PAUSE_MS (a read checked against an enabled auth
store waits that long between its check and its read, on the follower's
read worker); etcd has no such hook, so that test runs against cetcd only.
"""

import os
import subprocess
import threading
import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc as pbg

pytestmark = pytest.mark.cluster

ETCDCTL = "/usr/bin/etcdctl"
ROOT_PW = "Barrier-root-pw"


def ctl(m, *args):
    env = dict(os.environ, ETCDCTL_API="3")
    subprocess.run([ETCDCTL, "--endpoints", m.endpoint] + list(args),
                   check=True, capture_output=True, env=env, timeout=60)


def read(m, token, serializable=False):
    try:
        r = pbg.KVStub(m.channel()).Range(
            pb.RangeRequest(key=b"/g/k", serializable=serializable),
            metadata=[("token", token)], timeout=20)
        return [kv.value for kv in r.kvs]
    except grpc.RpcError as e:
        return e.details()


ROOT = ("--user", "root:" + ROOT_PW)


def auth_setup(c):
    """Root, user g in role rg (no permission yet), auth on, /g/k = v, and
    a follower's own token for g: (leader, follower, token)."""
    lead, _ = c.wait_leader()
    c.learn_ids()
    slow = next(m for m in c.members if m is not lead)
    ctl(lead, "user", "add", "root:" + ROOT_PW)
    ctl(lead, "user", "grant-role", "root", "root")
    ctl(lead, "user", "add", "g:gpw")
    ctl(lead, "role", "add", "rg")
    ctl(lead, "user", "grant-role", "g", "rg")
    ctl(lead, "auth", "enable")
    ctl(lead, *ROOT, "put", "/g/k", "v")
    token = pbg.AuthStub(slow.channel()).Authenticate(
        pb.AuthenticateRequest(name="g", password="gpw"), timeout=20).token
    return lead, slow, token


def test_grant_seen_by_read_on_lagging_follower(make_cluster):
    c = make_cluster(3, election_ms=3000,
                     extra_args=["--bcrypt-cost", "4"])
    lead, slow, token = auth_setup(c)
    root = ROOT
    assert read(slow, token) == "etcdserver: permission denied"
    for m in c.members:
        if m is not slow:
            c.delay(m, slow, 0.5)
    time.sleep(0.3)  # the delay applies to what is sent from now on
    ctl(lead, *root, "role", "grant-permission", "rg", "read", "/g/",
        "--prefix")  # acknowledged by the leader: committed
    stale = read(slow, token, serializable=True)
    got = read(slow, token)
    assert got == [b"v"], (
        "a linearizable read on the lagging follower did not see the "
        "acknowledged grant: %r" % (got,))
    assert stale == "etcdserver: permission denied", (
        "the follower was not lagging (serializable read: %r)" % (stale,))


def timed_read(m, token, out):
    t0 = time.monotonic()
    out["got"] = read(m, token)
    out["took"] = time.monotonic() - t0


def test_permission_revoked_during_read_voids_it(make_cluster, monkeypatch):
    if os.environ.get("CETCD_TEST_AGAINST_ETCD") == "1":
        pytest.skip("needs cetcd's CETCD_TEST_READ_PAUSE_MS hook to hold "
                    "a read between its check and its read")
    monkeypatch.setenv("CETCD_TEST_READ_PAUSE_MS", "2000")
    c = make_cluster(3, extra_args=["--bcrypt-cost", "4"])
    lead, slow, token = auth_setup(c)
    ctl(lead, *ROOT, "role", "grant-permission", "rg", "read", "/g/",
        "--prefix")
    # With no auth change during it the paused read answers the key: the
    # pause alone voids nothing.
    out = {}
    timed_read(slow, token, out)
    assert out["got"] == [b"v"], out
    assert out["took"] >= 1.5, "the read did not pause: %r" % (out,)
    # The permission is revoked (acknowledged) while the read waits
    # between its check and its read: the read is void.
    out = {}
    t = threading.Thread(target=timed_read, args=(slow, token, out))
    t.start()
    time.sleep(0.5)
    ctl(lead, *ROOT, "role", "revoke-permission", "rg", "/g/", "--prefix")
    t.join(30)
    assert out["got"] == "etcdserver: revision of auth store is old", (
        "a read checked before a revoke returned data after it: %r" % (out,))
    assert read(slow, token) == "etcdserver: permission denied"
