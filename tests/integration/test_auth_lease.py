"""Lease permission checks with auth on (issue 19): LeaseRevoke, a Put and
a Txn put with a lease, LeaseTimeToLive, LeaseLeases, LeaseKeepAlive and
LeaseGrant as users with and without permission on the lease's keys; no
key outside a user's permission is deleted through a lease revoke.

Method: the same etcdctl steps run against cetcd and etcd 3.4.23 in the
same test (lease ids and remaining TTLs are replaced by placeholders before
comparing); each outcome must be equal, except the three places cetcd is
deliberately stricter than 3.4.23, asserted on both sides so a change on
either shows:
- a Txn put with a lease checks the lease's keys like a plain Put (3.4.23
  and 3.5 check only the put's key: a user may then attach its key to
  another user's lease, and that user can no longer revoke the lease:
  test_txn_put_lease_blocks_owner shows it against etcd);
- LeaseTimeToLive needs read permission on every key of the lease, and a
  user (etcd 3.5.8+/3.4.26+ checkLeaseTimeToLive; 3.4.23 lists the keys of
  any lease to anyone).
Then, through gRPC: a bad token on LeaseGrant/LeaseRevoke is refused as
etcd does; and the lessor's revoke of an expired lease still deletes its
keys with auth on (etcd revokes as root).
"""

import re
import time

import grpc
import pytest

from common.servers import ETCD_BIN, against_etcd
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

ROOT = ("--user", "root:rootpw")
A = ("--user", "a:apw")
B = ("--user", "b:bpw")
FAST = ("--bcrypt-cost", "4")

SETUP = [
    ("user", "add", "root:rootpw"), ("user", "grant-role", "root", "root"),
    ("user", "add", "a:apw"), ("user", "add", "b:bpw"),
    ("role", "add", "ra"), ("role", "add", "rb"),
    ("role", "grant-permission", "ra", "readwrite", "/a/", "--prefix"),
    ("role", "grant-permission", "rb", "readwrite", "/b/", "--prefix"),
    ("user", "grant-role", "a", "ra"), ("user", "grant-role", "b", "rb"),
    ("auth", "enable"),
]


def auth_setup(srv):
    for args in SETUP:
        srv.ctl(*args)


def grant(srv, user, ttl=300):
    out = srv.ctl(*(user + ("lease", "grant", str(ttl)))).out
    m = re.match(r"lease ([0-9a-f]+) granted", out)
    assert m, out
    return m.group(1)


class Run:
    """Runs steps on one server; its lease ids become L1, L2, ..."""

    def __init__(self, srv):
        self.srv = srv
        self.names = {}

    def lease(self, name, hexid):
        self.names[hexid] = name

    def norm(self, text):
        for hexid, name in self.names.items():
            text = text.replace(hexid, name)
        return re.sub(r"remaining\(-?\d+s\)", "remaining(Ns)", text)

    def step(self, args, input=None):
        args = [self.names_inv().get(a, a) for a in args]
        r = self.srv.ctl(*args, input=input, check=False)
        return (r.rc, self.norm(r.out), self.norm(r.error_line))

    def names_inv(self):
        return {v: k for k, v in self.names.items()}

    def exists(self, key):
        return self.srv.ctl(*(ROOT + ("get", key))).out != ""


def txn_put_with_lease(key, lease):
    return "\nput %s v --lease=%s\n\n\n" % (key, lease)


@pytest.fixture
def pair(make_server):
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    runs = [Run(make_server(extra_args=FAST)),
            Run(make_server(extra_args=FAST, binary=ETCD_BIN, name="ref"))]
    for r in runs:
        auth_setup(r.srv)
        r.lease("LA", grant(r.srv, A))
        r.srv.ctl(*(A + ("put", "/a/k", "v", "--lease", r.names_inv()["LA"])))
        r.lease("LB", grant(r.srv, B))
        r.srv.ctl(*(B + ("put", "/b/x", "v", "--lease", r.names_inv()["LB"])))
    return runs


SAME_STEPS = [
    B + ("lease", "revoke", "LA"),                  # b cannot write /a/k
    ("lease", "revoke", "LA"),                      # no user
    B + ("put", "/b/k", "v", "--lease", "LA"),     # LA holds /a/k
    A + ("put", "/a/y", "v", "--lease", "LB"),     # LB holds /b/x
    A + ("put", "/b/z", "v", "--lease", "LA"),     # its own key first
    A + ("lease", "timetolive", "LA", "--keys"),
    ROOT + ("lease", "timetolive", "LB", "--keys"),
    A + ("lease", "timetolive", "LA"),
    A + ("lease", "list"),
    ("lease", "list"),
    ("lease", "keep-alive", "--once", "LA"),
    B + ("lease", "keep-alive", "--once", "LA"),
    ("lease", "grant", "100"),
    ROOT + ("lease", "revoke", "ffff"),             # not found
    B + ("lease", "revoke", "ffff"),
    A + ("put", "/a/q", "v", "--lease", "ffff"),
    A + ("lease", "revoke", "LA"),                 # its own keys: allowed
    ROOT + ("lease", "revoke", "LB"),
]


def test_lease_steps_as_etcd(pair):
    mine, theirs = pair
    got = [mine.step(s) for s in SAME_STEPS]
    want = [theirs.step(s) for s in SAME_STEPS]
    for s, g, w in zip(SAME_STEPS, got, want):
        if s == ("lease", "grant", "100"):  # a fresh id each side
            g, w = g[0], w[0]
        assert g == w, "step %r: cetcd %r, etcd %r" % (s, g, w)
    by = dict(zip(SAME_STEPS, got))
    denied = "failed to revoke lease (etcdserver: permission denied)"
    assert by[B + ("lease", "revoke", "LA")][2] == denied
    assert by[("lease", "revoke", "LA")][2] == (
        "failed to revoke lease (etcdserver: user name is empty)")
    assert by[B + ("put", "/b/k", "v", "--lease", "LA")][2] == \
        "etcdserver: permission denied"
    assert by[A + ("put", "/a/y", "v", "--lease", "LB")][2] == \
        "etcdserver: permission denied"
    assert by[A + ("lease", "revoke", "LA")] == (0, "lease LA revoked\n", "")
    # nothing of a's was deleted by b's revoke: a's own revoke removed it
    for r in pair:
        assert not r.exists("/a/k") and not r.exists("/b/x")


def test_no_key_outside_permission_deleted(pair):
    """b holds write on /b/ only: no revoke of a's lease, direct or after
    attaching its own key (Txn or Put), deletes a's key."""
    mine, _ = pair
    steps = [
        B + ("lease", "revoke", "LA"),
        B + ("put", "/b/k", "v", "--lease", "LA"),
        B + ("lease", "revoke", "LA"),
    ]
    for s in steps:
        assert mine.step(s)[0] != 0
    res = mine.step(B + ("txn",), input=txn_put_with_lease(
        "/b/t", mine.names_inv()["LA"]))
    assert res[2] == "etcdserver: permission denied"
    assert mine.step(B + ("lease", "revoke", "LA"))[0] != 0
    assert mine.exists("/a/k")
    assert not mine.exists("/b/k") and not mine.exists("/b/t")


def test_txn_put_lease_blocks_owner(pair):
    """etcd 3.4.23 lets b attach /b/t to a's lease in a Txn; a can then not
    revoke its own lease.  cetcd refuses the Txn as it refuses the Put, so
    a keeps its revoke."""
    mine, theirs = pair
    outs = []
    for r in pair:
        txn = r.step(B + ("txn",), input=txn_put_with_lease(
            "/b/t", r.names_inv()["LA"]))
        revoke = r.step(A + ("lease", "revoke", "LA"))
        outs.append((txn, revoke))
    (m_txn, m_rev), (t_txn, t_rev) = outs
    assert t_txn == (0, "SUCCESS\n\nOK\n", "")
    assert t_rev[2] == "failed to revoke lease (etcdserver: permission denied)"
    assert m_txn[0] != 0 and m_txn[2] == "etcdserver: permission denied"
    assert m_rev == (0, "lease LA revoked\n", "")
    assert not mine.exists("/a/k")


def test_time_to_live_needs_read(pair):
    """etcd 3.4.23 answers TimeToLive with the keys to anyone; cetcd (as
    etcd 3.5.8+) wants a user who may read every key of the lease."""
    mine, theirs = pair
    steps = [B + ("lease", "timetolive", "LA", "--keys"),
             B + ("lease", "timetolive", "LA"),
             ("lease", "timetolive", "LA", "--keys"),
             B + ("lease", "timetolive", "LB", "--keys"),
             B + ("lease", "timetolive", "ffff")]
    got = [mine.step(s) for s in steps]
    want = [theirs.step(s) for s in steps]
    keys = "lease LA granted with TTL(300s), remaining(Ns), " \
        "attached keys([/a/k])\n"
    assert want[0] == (0, keys, "")
    assert want[2] == (0, keys, "")
    # etcdctl exits 2 (ExitBadConnection) on any TimeToLive error
    assert got[0] == (2, "", "etcdserver: permission denied")
    assert got[1] == (2, "", "etcdserver: permission denied")
    assert got[2] == (2, "", "etcdserver: user name is empty")
    # a lease whose keys b may read, and a missing one: as etcd
    assert got[3] == want[3]
    assert got[3][1].startswith("lease LB granted with TTL(300s)")
    assert got[4] == want[4] == (
        0, "lease 000000000000ffff already expired\n", "")


def lease_stub(r):
    return rpc_pb2_grpc.LeaseStub(r.srv.channel())


def call(fn):
    try:
        fn()
        return "OK"
    except grpc.RpcError as e:
        return (e.code(), e.details())


def test_bad_token_and_grpc(pair):
    outs = []
    for r in pair:
        st = lease_stub(r)
        la = int(r.names_inv()["LA"], 16)
        bad = [("token", "abcdefghijklmnop.9")]
        outs.append([
            call(lambda: st.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=60),
                                       metadata=bad, timeout=10)),
            call(lambda: st.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=la),
                                        metadata=bad, timeout=10)),
            call(lambda: st.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=77),
                                        metadata=bad, timeout=10)),
            call(lambda: st.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=77),
                                        timeout=10)),
            call(lambda: st.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=60),
                                       timeout=10)),
        ])
    mine, theirs = outs
    assert mine == theirs
    assert mine[0] == (grpc.StatusCode.UNAUTHENTICATED,
                       "etcdserver: invalid auth token")
    assert mine[3] == (grpc.StatusCode.NOT_FOUND,
                       "etcdserver: requested lease not found")
    assert mine[4] == "OK"
    for r in pair:
        assert r.exists("/a/k")


def test_expired_lease_revoked_with_auth(pair):
    """The lessor revokes an expired lease as root, whose keys are a's."""
    for r in pair:
        lid = grant(r.srv, A, ttl=2)
        r.srv.ctl(*(A + ("put", "/a/e", "v", "--lease", lid)))
    deadline = time.time() + 30
    left = list(pair)
    while left and time.time() < deadline:
        left = [r for r in left if r.exists("/a/e")]
        time.sleep(0.5)
    assert not left, "an expired lease's key survived on %s" % [
        r.srv.binary for r in left]
