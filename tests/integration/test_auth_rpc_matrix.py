"""Auth (issue 19): the RBAC matrix over every service, against etcd 3.4.23.

Goal: for every RPC group (KV, Watch, Lease, Cluster, Maintenance, Auth,
Election, Lock, the /v3 JSON gateway) and for each caller: no token, root,
a user with READ, WRITE, READWRITE on the prefix /m/, a user with no role,
a deleted user's token, a user whose role was revoked, an expired token:
cetcd's outcome (gRPC code and message, or the answer's content without
revisions and ids) equals etcd 3.4.23's, and no key outside /m/ is changed
by anyone but root.

Method: the same setup (etcdctl, as an operator does it) and then the same
sequence of raw gRPC and HTTP calls, caller by caller, on a fresh cetcd and
a fresh etcd in the same test.  Leases use client-chosen IDs and every
write happens in the same order on both, so the two key spaces stay equal
and so do the revisions.  Tokens are simple tokens with --auth-token-ttl 4:
each caller authenticates just before its calls (a use renews the TTL);
the expired caller's token was taken at setup and left unused for longer
than the TTL; the deleted user's was taken before the deletion.

MoveLeader: etcd 3.4.23 lets any caller move leadership; cetcd needs
root (asserted on both sides, outside the matrix).  Left out, deliberate
differences asserted elsewhere: LeaseTimeToLive (cetcd
needs read on the lease's keys, as etcd 3.5.8+: test_auth_lease.py) and
Txn puts with a lease or prev_kv (test_auth.py, test_auth_lease.py).
"""

import base64
import json
import time
import urllib.error
import urllib.request

import grpc
import pytest
from etcd3.etcdrpc import auth_pb2
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc as pbg

from common import lockpb
from common.servers import ETCD_BIN, against_etcd

ROOT_PW = "Mx-r00t-pw"
TTL = 4  # --auth-token-ttl, seconds
ARGS = ["--bcrypt-cost", "4", "--auth-token-ttl", str(TTL)]
USERS = ("ur", "uw", "urw", "unone", "udel", "urev", "uexp")
SETUP = [
    ("user", "add", "root:" + ROOT_PW),
    ("user", "grant-role", "root", "root"),
] + [("user", "add", "%s:pw-%s" % (u, u)) for u in USERS] + [
    ("role", "add", "rr"), ("role", "add", "rwo"), ("role", "add", "rrw"),
    ("role", "grant-permission", "rr", "read", "/m/", "--prefix"),
    ("role", "grant-permission", "rwo", "write", "/m/", "--prefix"),
    ("role", "grant-permission", "rrw", "readwrite", "/m/", "--prefix"),
    ("user", "grant-role", "ur", "rr"),
    ("user", "grant-role", "uw", "rwo"),
    ("user", "grant-role", "urw", "rrw"),
    ("user", "grant-role", "udel", "rrw"),
    ("user", "grant-role", "urev", "rrw"),
    ("user", "grant-role", "uexp", "rrw"),
    ("put", "/m/a", "1"), ("put", "/o/a", "1"),
    ("auth", "enable"),
]
# caller name -> user (None: no token)
CALLERS = [("none", None), ("root", "root"), ("ur", "ur"), ("uw", "uw"),
           ("urw", "urw"), ("unone", "unone"), ("udel", "udel"),
           ("urev", "urev"), ("uexp", "uexp")]
T = 10  # seconds, every call


def password(user):
    return ROOT_PW if user == "root" else "pw-" + user


class Member:
    """One server under test and its stubs."""

    def __init__(self, srv):
        self.srv = srv
        ch = srv.channel()
        self.kv = pbg.KVStub(ch)
        self.watch = pbg.WatchStub(ch)
        self.lease = pbg.LeaseStub(ch)
        self.cluster = pbg.ClusterStub(ch)
        self.maint = pbg.MaintenanceStub(ch)
        self.auth = pbg.AuthStub(ch)
        self.election = lockpb.ElectionStub(ch)
        self.lock = lockpb.LockStub(ch)
        self.root = None

    def token(self, user):
        return self.auth.Authenticate(pb.AuthenticateRequest(
            name=user, password=password(user)), timeout=T).token

    def as_root(self):
        self.root = self.token("root")
        return [("token", self.root)]


def outcome(fn):
    """("ok", what the answer says) or ("err", code name, message)."""
    try:
        return ("ok", fn())
    except grpc.RpcError as e:
        return ("err", e.code().name, e.details())


def kvs(resp):
    return sorted((kv.key, kv.value) for kv in resp.kvs)


def first_of_stream(it):
    """The first message of a server stream (None: it ended without one)."""
    for msg in it:
        it.cancel()
        return msg
    return None


def watch_first(m, md, key, end):
    req = pb.WatchRequest(create_request=pb.WatchCreateRequest(
        key=key, range_end=end))
    it = m.watch.Watch(iter([req]), metadata=md, timeout=T)
    r = first_of_stream(it)
    return None if r is None else (r.created, r.canceled, r.cancel_reason)


def keepalive_once(m, md, lid):
    it = m.lease.LeaseKeepAlive(iter([pb.LeaseKeepAliveRequest(ID=lid)]),
                                metadata=md, timeout=T)
    r = first_of_stream(it)
    return None if r is None else (r.ID, r.TTL > 0)


def gateway(m, md, path, body):
    """POST to the /v3 gateway with the token as the Authorization header;
    (status, body without its header)."""
    req = urllib.request.Request(
        "http://%s%s" % (m.srv.endpoint, path),
        data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    for k, v in md:
        req.add_header("Authorization", v)
    try:
        with urllib.request.urlopen(req, timeout=T) as r:
            status, data = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, data = e.code, e.read()
    doc = json.loads(data)
    doc.pop("header", None)
    return status, doc


def b64(s):
    return base64.b64encode(s).decode()


def calls(m, md, i, member_id, peer_urls):
    """Every call of one caller (number i, metadata md): [(name, outcome)].
    Root prepared lease 2000+i (holding /m/l-i), lease 3000+i (election)
    and 4000+i (lock) before."""
    tag = b"%d" % i
    lid = 1000 + i
    el_name = b"/m/e-" + tag
    ops = [
        # KV
        ("range /m/a", lambda: kvs(m.kv.Range(
            pb.RangeRequest(key=b"/m/a"), metadata=md, timeout=T))),
        ("range /o/a", lambda: kvs(m.kv.Range(
            pb.RangeRequest(key=b"/o/a"), metadata=md, timeout=T))),
        ("range /m/ prefix", lambda: kvs(m.kv.Range(
            pb.RangeRequest(key=b"/m/", range_end=b"/m0"), metadata=md,
            timeout=T))),
        ("range all", lambda: kvs(m.kv.Range(
            pb.RangeRequest(key=b"\0", range_end=b"\0"), metadata=md,
            timeout=T))),
        ("put /m/p", lambda: m.kv.Put(pb.PutRequest(
            key=b"/m/p-" + tag, value=b"v"), metadata=md,
            timeout=T).HasField("header")),
        ("put /o/p", lambda: m.kv.Put(pb.PutRequest(
            key=b"/o/p-" + tag, value=b"v"), metadata=md,
            timeout=T).HasField("header")),
        ("delete /m/p prev_kv", lambda: kvs(type("R", (), {
            "kvs": m.kv.DeleteRange(pb.DeleteRangeRequest(
                key=b"/m/p-" + tag, prev_kv=True), metadata=md,
                timeout=T).prev_kvs})())),
        ("delete /o/ prefix", lambda: m.kv.DeleteRange(
            pb.DeleteRangeRequest(key=b"/o/", range_end=b"/o0"),
            metadata=md, timeout=T).deleted),
        ("txn /m/", lambda: m.kv.Txn(pb.TxnRequest(
            compare=[pb.Compare(key=b"/m/a", target=pb.Compare.VALUE,
                                result=pb.Compare.EQUAL, value=b"1")],
            success=[pb.RequestOp(request_put=pb.PutRequest(
                key=b"/m/t", value=tag))]), metadata=md,
            timeout=T).succeeded),
        ("txn reads /o/", lambda: m.kv.Txn(pb.TxnRequest(
            success=[pb.RequestOp(request_range=pb.RangeRequest(
                key=b"/o/a"))]), metadata=md, timeout=T).succeeded),
        ("compact 1", lambda: m.kv.Compact(pb.CompactionRequest(
            revision=1), metadata=md, timeout=T).HasField("header")),
        # Watch
        ("watch /m/", lambda: watch_first(m, md, b"/m/", b"/m0")),
        ("watch /o/a", lambda: watch_first(m, md, b"/o/a", b"")),
        # Lease
        ("lease grant", lambda: m.lease.LeaseGrant(pb.LeaseGrantRequest(
            ID=lid, TTL=300), metadata=md, timeout=T).ID),
        ("lease revoke (holds /m/l)", lambda: m.lease.LeaseRevoke(
            pb.LeaseRevokeRequest(ID=2000 + i), metadata=md,
            timeout=T).HasField("header")),
        ("lease leases", lambda: sorted(
            x.ID for x in m.lease.LeaseLeases(pb.LeaseLeasesRequest(),
                                              metadata=md, timeout=T).leases)),
        ("lease keepalive", lambda: keepalive_once(m, md, 3000 + i)),
        # Cluster
        ("member list", lambda: len(m.cluster.MemberList(
            pb.MemberListRequest(), metadata=md, timeout=T).members)),
        ("member update self", lambda: m.cluster.MemberUpdate(
            pb.MemberUpdateRequest(ID=member_id, peerURLs=peer_urls),
            metadata=md, timeout=T).HasField("header")),
        ("member remove unknown", lambda: m.cluster.MemberRemove(
            pb.MemberRemoveRequest(ID=12345), metadata=md,
            timeout=T).HasField("header")),
        # Maintenance
        ("status", lambda: m.maint.Status(
            pb.StatusRequest(), metadata=md, timeout=T).version != ""),
        ("hash", lambda: m.maint.Hash(
            pb.HashRequest(), metadata=md, timeout=T).HasField("header")),
        ("hashkv", lambda: m.maint.HashKV(
            pb.HashKVRequest(), metadata=md, timeout=T).HasField("header")),
        ("alarm get", lambda: len(m.maint.Alarm(pb.AlarmRequest(
            action=pb.AlarmRequest.GET), metadata=md, timeout=T).alarms)),
        ("alarm deactivate", lambda: len(m.maint.Alarm(pb.AlarmRequest(
            action=pb.AlarmRequest.DEACTIVATE, memberID=member_id,
            alarm=pb.NOSPACE), metadata=md, timeout=T).alarms)),
        ("defragment", lambda: m.maint.Defragment(
            pb.DefragmentRequest(), metadata=md,
            timeout=T).HasField("header")),
        ("snapshot", lambda: first_of_stream(m.maint.Snapshot(
            pb.SnapshotRequest(), metadata=md, timeout=T)) is not None),
        # Auth
        ("user list", lambda: list(m.auth.UserList(
            pb.AuthUserListRequest(), metadata=md, timeout=T).users)),
        ("user get ur", lambda: list(m.auth.UserGet(
            pb.AuthUserGetRequest(name="ur"), metadata=md,
            timeout=T).roles)),
        ("role list", lambda: list(m.auth.RoleList(
            pb.AuthRoleListRequest(), metadata=md, timeout=T).roles)),
        ("user add", lambda: m.auth.UserAdd(pb.AuthUserAddRequest(
            name="n-%d" % i, password="x"), metadata=md,
            timeout=T).HasField("header")),
        ("role grant /o/", lambda: m.auth.RoleGrantPermission(
            pb.AuthRoleGrantPermissionRequest(
                name="rr", perm=auth_pb2.Permission(
                    permType=auth_pb2.Permission.READ, key=b"/x/" + tag)),
            metadata=md, timeout=T).HasField("header")),
        # Election (lease 3000+i)
        ("campaign /m/e", lambda: m.election.Campaign(
            lockpb.CampaignRequest(name=el_name, lease=3000 + i,
                                   value=b"c"),
            metadata=md, timeout=T).leader.name),
        ("campaign /o/e", lambda: m.election.Campaign(
            lockpb.CampaignRequest(name=b"/o/e-" + tag, lease=3000 + i,
                                   value=b"c"),
            metadata=md, timeout=T).leader.name),
        ("leader /m/e", lambda: m.election.Leader(
            lockpb.LeaderRequest(name=el_name), metadata=md,
            timeout=T).kv.value),
        ("observe /m/obs", lambda: (lambda r: None if r is None else
                                    r.kv.value)(first_of_stream(
            m.election.Observe(lockpb.LeaderRequest(name=b"/m/obs"),
                               metadata=md, timeout=T)))),
        # Lock (lease 4000+i)
        ("lock /m/lk", lambda: m.lock.Lock(lockpb.LockRequest(
            name=b"/m/lk-" + tag, lease=4000 + i), metadata=md,
            timeout=T).key.startswith(b"/m/lk-" + tag + b"/")),
        ("lock /o/lk", lambda: m.lock.Lock(lockpb.LockRequest(
            name=b"/o/lk-" + tag, lease=4000 + i), metadata=md,
            timeout=T).key.startswith(b"/o/lk-" + tag + b"/")),
        # the /v3 JSON gateway
        ("gw range /m/a", lambda: gateway(m, md, "/v3/kv/range",
                                          {"key": b64(b"/m/a")})),
        ("gw range /o/a", lambda: gateway(m, md, "/v3/kv/range",
                                          {"key": b64(b"/o/a")})),
        ("gw put /o/g", lambda: gateway(m, md, "/v3/kv/put", {
            "key": b64(b"/o/g-" + tag), "value": b64(b"g")})),
        ("gw user list", lambda: gateway(m, md, "/v3/auth/user/list", {})),
    ]
    return [(name, outcome(fn)) for name, fn in ops]


def prepare(m, i):
    """Root's part before caller i: a lease holding /m/l-i to revoke, and
    the leases the caller's campaign and lock use."""
    md = m.as_root()
    for lid in (2000 + i, 3000 + i, 4000 + i):
        m.lease.LeaseGrant(pb.LeaseGrantRequest(ID=lid, TTL=300),
                           metadata=md, timeout=T)
    m.kv.Put(pb.PutRequest(key=b"/m/l-%d" % i, value=b"l", lease=2000 + i),
             metadata=md, timeout=T)


def run_matrix(srv):
    """Setup, then every caller's calls; {caller: [(call, outcome)]} and
    the keys outside /m/ at the end."""
    for args in SETUP:
        srv.ctl(*args)
    m = Member(srv)
    md = m.as_root()
    me = m.cluster.MemberList(pb.MemberListRequest(), metadata=md,
                              timeout=T).members[0]
    member_id, peer_urls = me.ID, list(me.peerURLs)
    # an election with a leader for Observe, kept by a long lease
    m.lease.LeaseGrant(pb.LeaseGrantRequest(ID=999, TTL=600), metadata=md,
                       timeout=T)
    m.election.Campaign(lockpb.CampaignRequest(name=b"/m/obs", lease=999,
                                               value=b"obs-leader"),
                        metadata=md, timeout=T)
    kept = {u: m.token(u) for u in ("udel", "uexp")}
    m.auth.UserDelete(pb.AuthUserDeleteRequest(name="udel"), metadata=md,
                      timeout=T)
    m.auth.UserRevokeRole(pb.AuthUserRevokeRoleRequest(name="urev",
                                                       role="rrw"),
                          metadata=md, timeout=T)
    time.sleep(TTL + 2.5)  # uexp's token, unused, expires
    out = {}
    # MoveLeader (to this member itself) as a READ user: etcd 3.4.23 checks
    # nothing; cetcd needs root (a deliberate difference, asserted below)
    move = outcome(lambda: m.maint.MoveLeader(
        pb.MoveLeaderRequest(targetID=member_id),
        metadata=[("token", m.token("ur"))], timeout=T).HasField("header"))
    for i, (caller, user) in enumerate(CALLERS):
        prepare(m, i)
        if user is None:
            cmd = []
        elif user in kept:
            cmd = [("token", kept[user])]
        else:
            cmd = [("token", m.token(user))]
        out[caller] = calls(m, cmd, i, member_id, peer_urls)
    md = m.as_root()
    outside = kvs(m.kv.Range(pb.RangeRequest(key=b"/o/", range_end=b"/o0"),
                             metadata=md, timeout=T))
    return out, outside, move


def test_rbac_matrix_every_service(make_server):
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    mine, mine_outside, mine_move = run_matrix(make_server(extra_args=ARGS))
    theirs, theirs_outside, theirs_move = run_matrix(
        make_server(extra_args=ARGS, binary=ETCD_BIN, name="ref"))
    diffs = []
    for caller, _ in CALLERS:
        for (call, got), (_, want) in zip(mine[caller], theirs[caller]):
            if got != want:
                diffs.append("%s %s: cetcd %r, etcd %r" % (caller, call, got,
                                                           want))
    assert not diffs, "\n".join(diffs)
    assert mine_move == ("err", "UNKNOWN", "auth: permission denied")
    assert "permission" not in repr(theirs_move), theirs_move
    assert mine_outside == theirs_outside
    # root's writes only (root is caller 1: its keys are /o/<what>-1...;
    # root's prefix delete removed /o/a and the keys before it)
    assert mine_outside and all(k.split(b"/")[2].endswith(b"-1")
                                for k, _ in mine_outside), mine_outside
    # the matrix says something: every caller but root was refused
    # something for its rights, root never was, and a reader was answered
    for caller, _ in CALLERS:
        denied = [c for c, o in mine[caller] if o[0] == "err" and o[2] in (
            "etcdserver: permission denied", "etcdserver: user name is empty",
            "etcdserver: invalid auth token")]
        assert bool(denied) == (caller != "root"), (caller, denied)
    assert dict(mine["ur"])["range /m/a"] == ("ok", [(b"/m/a", b"1")])
