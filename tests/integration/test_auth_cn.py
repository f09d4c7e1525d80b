"""Identity from a client certificate's common name (issue 19): with
--client-cert-auth and no token, the CN of the verified client certificate
is the caller's user, as etcd's AuthInfoFromTLS; a token, when given, wins;
with only --trusted-ca-file (no --client-cert-auth) the CN names nobody.

Method: openssl makes a CA, a server certificate and client certificates
with CN root, alice and ghost (no such user) in a tmp dir; cetcd and etcd
3.4.23 run with the same TLS flags; the same etcdctl --cert/--key steps
run against both and every outcome (exit code, output, error line) must be
equal; some exact texts are asserted too, so that both being wrong the same
way cannot pass.
"""

import pytest

from common.servers import ETCD_BIN, against_etcd
from test_tls import (TLSServer, _make_ca, _make_leaf, creds, server_args,
                      tls_ctl_args, ctl)


def _make_leaf_without_cn(d, ca, name):
    """A client certificate whose subject has no CN (only O=name): Go's
    Subject.CommonName is "" for it."""
    import os
    import subprocess
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    for args in (["req", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                  name + ".key", "-out", name + ".csr", "-subj", "/O=" + name],
                 ["x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt",
                  "-CAkey", ca + ".key", "-CAcreateserial", "-out",
                  name + ".crt", "-days", "30", "-extfile", ext]):
        subprocess.run(["openssl"] + args, cwd=d, check=True,
                       capture_output=True)


class Certs:
    def __init__(self, d):
        import os
        self.dir = d
        _make_ca(d, "ca")
        _make_leaf(d, "ca", "server", "server",
                   "DNS:localhost,IP:127.0.0.1", "serverAuth,clientAuth")
        for cn in ("root", "alice", "ghost"):
            _make_leaf(d, "ca", cn, cn, None, "clientAuth")
        _make_leaf_without_cn(d, "ca", "nocn")
        self.path = lambda n: os.path.join(d, n)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("cn-certs")))


@pytest.fixture
def pair(certs):
    """Starts cetcd and etcd with the flags given; cleans them up."""
    made = []

    def start(*flags):
        out = []
        for binary in (None, ETCD_BIN):
            s = TLSServer(server_args(certs, "--bcrypt-cost", "4", *flags),
                          ready_creds=lambda: creds(certs, who="root"))
            if binary:
                s.binary = binary
            made.append(s)
            s.start()
            out.append(s)
        return out

    yield start
    for s in made:
        s.cleanup()


def as_cn(certs, cn):
    return tuple(tls_ctl_args(certs, who=cn))


def outcome(res):
    return (res.rc, res.out, res.error_line)


SETUP = [
    ("user", "add", "root:rootpw"), ("user", "grant-role", "root", "root"),
    ("user", "add", "alice:alicepw"), ("role", "add", "ra"),
    ("role", "grant-permission", "ra", "readwrite", "/a/", "--prefix"),
    ("user", "grant-role", "alice", "ra"), ("auth", "enable"),
]


def run(srv, certs, steps):
    got = []
    for cn, args in steps:
        r = ctl(srv, *(as_cn(certs, cn) + tuple(args)), check=False)
        got.append(outcome(r))
    return got


def test_cn_names_the_user(certs, pair):
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    mine, theirs = pair("--client-cert-auth", "--trusted-ca-file",
                        certs.path("ca.crt"))
    steps = [("root", s) for s in SETUP] + [
        ("alice", ("put", "/a/1", "v")),
        ("alice", ("put", "/b/1", "v")),
        ("alice", ("get", "/a/1")),
        ("alice", ("get", "/b/1")),
        ("alice", ("user", "list")),
        ("ghost", ("put", "/a/2", "v")),
        ("ghost", ("get", "/a/1")),
        ("root", ("put", "/b/1", "v")),
        ("root", ("user", "list")),
        ("alice", ("--user", "root:rootpw", "put", "/b/2", "v")),
        ("alice", ("--user", "root:wrong", "put", "/b/3", "v")),
        ("alice", ("lease", "revoke", "0")),
        ("root", ("get", "/", "--prefix", "--keys-only")),
    ]
    got = run(mine, certs, steps)
    want = run(theirs, certs, steps)
    for s, g, w in zip(steps, got, want):
        assert g == w, "step %r: cetcd %r, etcd %r" % (s, g, w)
    by = dict(zip([(cn, tuple(a)) for cn, a in steps], got))
    denied = "etcdserver: permission denied"
    assert by[("alice", ("put", "/a/1", "v"))] == (0, "OK\n", "")
    assert by[("alice", ("put", "/b/1", "v"))][2] == denied
    assert by[("alice", ("get", "/a/1"))] == (0, "/a/1\nv\n", "")
    assert by[("ghost", ("put", "/a/2", "v"))][2] == denied
    assert by[("root", ("user", "list"))] == (0, "alice\nroot\n", "")
    assert by[("alice", ("--user", "root:rootpw", "put", "/b/2", "v"))] == (
        0, "OK\n", "")
    assert by[("root", ("get", "/", "--prefix", "--keys-only"))][1] == \
        "/a/1\n\n/b/1\n\n/b/2\n\n"


def test_no_cn_identity_without_client_cert_auth(certs, pair):
    """--trusted-ca-file alone verifies client certificates but, as in
    etcd, their CN names nobody."""
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    mine, theirs = pair("--trusted-ca-file", certs.path("ca.crt"))
    steps = [("root", s) for s in SETUP] + [
        ("alice", ("put", "/a/1", "v")),
        ("root", ("user", "list")),
        ("alice", ("--user", "alice:alicepw", "put", "/a/1", "v")),
    ]
    got = run(mine, certs, steps)
    want = run(theirs, certs, steps)
    assert got == want
    assert got[-3][2] == "etcdserver: user name is empty"
    assert got[-2][2] == "etcdserver: user name is empty"
    assert got[-1] == (0, "OK\n", "")


def first_watch(srv, certs, cn, key, end=b""):
    """The first answer to a watch on [key, end) over a channel with cn's
    certificate (no token): (created, canceled, cancel_reason)."""
    import queue
    import grpc
    from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
    reqs = queue.Queue()
    reqs.put(rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
        key=key, range_end=end)))

    def gen():
        while True:
            r = reqs.get()
            if r is None:
                return
            yield r
    ch = grpc.secure_channel(srv.endpoint, creds(certs, who=cn))
    it = rpc_pb2_grpc.WatchStub(ch).Watch(gen(), timeout=10)
    try:
        r = next(it)
        return (r.created, r.canceled, r.cancel_reason)
    finally:
        reqs.put(None)
        it.cancel()
        ch.close()


def test_watch_as_the_cn(certs, pair):
    """A watch stream is checked as the certificate's user too."""
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    servers = pair("--client-cert-auth", "--trusted-ca-file",
                   certs.path("ca.crt"))
    results = []
    for srv in servers:
        run(srv, certs, [("root", s) for s in SETUP])
        results.append([first_watch(srv, certs, "alice", b"/a/", b"/a0"),
                        first_watch(srv, certs, "alice", b"/b/", b"/b0"),
                        first_watch(srv, certs, "ghost", b"/a/x")])
    mine, theirs = results
    assert mine == theirs
    assert mine[0] == (True, False, "")
    assert mine[1] == (True, True, "rpc error: code = PermissionDenied "
                       "desc = etcdserver: permission denied")
    assert mine[2][1] is True


def test_empty_cn_is_no_such_user(certs, pair):
    """A verified certificate without a CN names the user "" (Go's
    CommonName is empty), as etcd's AuthInfoFromTLS: KV requests and
    watches get "permission denied" (no such user), admin requests "user
    name is empty".  cetcd once took it as no identity at all and answered
    "user name is empty" everywhere."""
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    mine, theirs = pair("--client-cert-auth", "--trusted-ca-file",
                        certs.path("ca.crt"))
    steps = [("root", s) for s in SETUP] + [
        ("root", ("put", "/a/1", "v")),
        ("nocn", ("put", "/a/2", "v")),
        ("nocn", ("get", "/a/1")),
        ("nocn", ("get", "/a/1", "--consistency=s")),
        ("nocn", ("del", "/a/1")),
        ("nocn", ("user", "list")),
        ("nocn", ("role", "get", "ra")),
        ("nocn", ("--user", "alice:alicepw", "get", "/a/1")),
    ]
    results = []
    for srv in (mine, theirs):
        got = []
        for cn, args in steps:
            r = ctl(srv, *(as_cn(certs, cn) + tuple(args)), check=False)
            got.append(outcome(r))
        got.append(first_watch(srv, certs, "nocn", b"/a/", b"/a0"))
        results.append(got)
    got, want = results
    for s, g, w in zip(steps + [("nocn", "watch")], got, want):
        assert g == w, "step %r: cetcd %r, etcd %r" % (s, g, w)
    by = dict(zip([(cn, tuple(a)) for cn, a in steps], got))
    denied = "etcdserver: permission denied"
    assert by[("nocn", ("put", "/a/2", "v"))][2] == denied
    assert by[("nocn", ("get", "/a/1"))][2] == denied
    assert by[("nocn", ("get", "/a/1", "--consistency=s"))][2] == denied
    assert by[("nocn", ("user", "list"))][2] == (
        "etcdserver: user name is empty")
    assert by[("nocn", ("--user", "alice:alicepw", "get", "/a/1"))] == (
        0, "/a/1\nv\n", "")
    assert got[-1] == (True, True, "rpc error: code = PermissionDenied "
                       "desc = etcdserver: permission denied")


def lock_as(srv, certs, cn, name):
    """The Lock service (v3lockpb, not etcdctl's client-side lock) over a
    channel with cn's certificate: the key's prefix, or the error."""
    import grpc
    from common import lockpb
    from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
    ch = grpc.secure_channel(srv.endpoint, creds(certs, who=cn))
    try:
        lease = rpc_pb2_grpc.LeaseStub(ch).LeaseGrant(
            rpc_pb2.LeaseGrantRequest(TTL=30), timeout=10).ID
        r = lockpb.LockStub(ch).Lock(lockpb.LockRequest(name=name,
                                                        lease=lease),
                                     timeout=10)
        lockpb.LockStub(ch).Unlock(lockpb.UnlockRequest(key=r.key),
                                   timeout=10)
        return ("locked", r.key.startswith(name + b"/"))
    except grpc.RpcError as e:
        return ("error", e.code().name, e.details())
    finally:
        ch.close()


def test_lock_service_as_the_cn(certs, pair):
    """The Lock service runs its KV steps as the certificate's user
    (etcd's v3lock server works through the stream's context, whose peer
    carries the CN); cetcd once copied only a token into the waiter and
    so refused every Lock by certificate "user name is empty"."""
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    servers = pair("--client-cert-auth", "--trusted-ca-file",
                   certs.path("ca.crt"))
    results = []
    for srv in servers:
        run(srv, certs, [("root", s) for s in SETUP])
        results.append([lock_as(srv, certs, "alice", b"/a/lk"),
                        lock_as(srv, certs, "alice", b"/b/lk"),
                        lock_as(srv, certs, "ghost", b"/a/lk")])
    mine, theirs = results
    assert mine == theirs, "cetcd %r\netcd  %r" % (mine, theirs)
    assert mine[0] == ("locked", True)
    assert mine[1][2] == "etcdserver: permission denied"
