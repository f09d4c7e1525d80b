"""python-etcd3 (Debian python3-etcd3 0.12) with user and password (issue
19), as an application uses it: etcd3.client(..., ca_cert=, user=,
password=) authenticates once and sends the token as call credentials,
which grpc-python only sends over a TLS channel, so the member serves
clients over TLS.

Goal: every outcome of the same steps equals etcd 3.4.23's: put, get,
delete, a transaction, a watch and a lease as a user with readwrite on a
prefix; "permission denied" outside it; a wrong password refused at
Authenticate; the simple token expiring after --auth-token-ttl idle
seconds ("invalid auth token"), kept alive by use, and a new client (the
library's only way to refresh its token) working again.

Method: openssl makes a CA and a server certificate (test_tls.py's
helpers); cetcd and /usr/bin/etcd run with --cert-file/--key-file and
--auth-token-ttl 3; users are set up with etcdctl --cacert; the steps run
through python-etcd3 against each and their outcomes (values, or the gRPC
code and details of the error) are compared, with etcd's exact texts
asserted too.
"""

import concurrent.futures
import time

import grpc
import pytest

from common.servers import ETCD_BIN, against_etcd
from test_tls import TLSServer, _make_ca, _make_leaf, ctl

ROOT_PW = "R00t-py-pw"
TTL_S = 3


class Certs:
    def __init__(self, d):
        import os
        self.dir = d
        _make_ca(d, "ca")
        _make_leaf(d, "ca", "server", "server",
                   "DNS:localhost,IP:127.0.0.1", "serverAuth,clientAuth")
        self.path = lambda n: os.path.join(d, n)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("py-certs")))


@pytest.fixture
def servers(certs):
    """cetcd and etcd 3.4.23, TLS client port, auth set up."""
    made = []
    for binary in (None, ETCD_BIN):
        s = TLSServer(["--cert-file", certs.path("server.crt"),
                       "--key-file", certs.path("server.key"),
                       "--bcrypt-cost", "4",
                       "--auth-token-ttl", str(TTL_S)],
                      ready_creds=lambda: grpc.ssl_channel_credentials(
                          certs.read("ca.crt")))
        if binary:
            s.binary = binary
        made.append(s)
        s.start()
        for args in [("user", "add", "root:" + ROOT_PW),
                     ("user", "grant-role", "root", "root"),
                     ("user", "add", "alice:alicepw"), ("role", "add", "ra"),
                     ("role", "grant-permission", "ra", "readwrite", "/a/",
                      "--prefix"),
                     ("user", "grant-role", "alice", "ra"),
                     ("auth", "enable"),
                     ("--user", "root:" + ROOT_PW, "put", "/b/1", "root's")]:
            ctl(s, "--cacert", certs.path("ca.crt"), *args)
    yield made
    for s in made:
        s.cleanup()


def client(srv, certs, user="alice", password="alicepw"):
    import etcd3
    host, port = srv.endpoint.split(":")
    return etcd3.client(host=host, port=int(port),
                        ca_cert=certs.path("ca.crt"), user=user,
                        password=password, timeout=10)


def attempt(fn):
    """fn's value, or ("error", code name, details) of its gRPC error."""
    try:
        return fn()
    except grpc.RpcError as e:
        return ("error", e.code().name, e.details())


def steps(srv, certs):
    out = []
    c = client(srv, certs)
    out.append(attempt(lambda: c.put("/a/1", "v1") and "put"))
    out.append(attempt(lambda: c.get("/a/1")[0]))
    out.append(attempt(lambda: c.put("/b/2", "x") and "put"))
    out.append(attempt(lambda: c.get("/b/1")[0]))
    out.append(attempt(lambda: [v for v, _ in c.get_prefix("/a/")]))
    out.append(attempt(lambda: c.delete("/b/1")))
    ok = attempt(lambda: c.transaction(
        compare=[c.transactions.value("/a/1") == "v1"],
        success=[c.transactions.put("/a/2", "v2")], failure=[])[0])
    out.append(ok)
    out.append(attempt(lambda: c.transaction(
        compare=[c.transactions.value("/b/1") == "x"],
        success=[], failure=[])[0]))
    # a watch carries the token too (call credentials on the stream)
    events, cancel = c.watch("/a/w")
    c.put("/a/w", "seen")
    ev = next(events)
    cancel()
    out.append((type(ev).__name__, ev.key, ev.value))
    lease = attempt(lambda: c.lease(30))
    out.append(attempt(lambda: c.put("/a/l", "lv", lease=lease) and "put")
               if not isinstance(lease, tuple) else lease)
    # wrong password: refused at Authenticate (client construction)
    out.append(attempt(lambda: client(srv, certs, password="wrong")))
    # the token lives while used, within the TTL...
    for _ in range(2 * TTL_S + 2):
        time.sleep(0.5)
        assert c.get("/a/1")[0] == b"v1"
    # ...and expires after TTL idle seconds (etcd's simple token keeper
    # checks every second: wait well past it)
    time.sleep(TTL_S + 3)
    out.append(attempt(lambda: c.get("/a/1")[0]))
    # a new client authenticates again
    out.append(attempt(lambda: client(srv, certs).get("/a/1")[0]))
    c.close()
    return out


def test_python_etcd3_user_password_over_tls(servers, certs):
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    # both at once: each waits out its token's TTL
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        mine, theirs = list(ex.map(lambda s: steps(s, certs), servers))
    assert mine == theirs, "cetcd %r\netcd  %r" % (mine, theirs)
    denied = ("error", "PERMISSION_DENIED", "etcdserver: permission denied")
    assert mine[0] == "put"
    assert mine[1] == b"v1"
    assert mine[2] == mine[3] == mine[5] == mine[7] == denied
    assert mine[4] == [b"v1"]
    assert mine[6] is True
    assert mine[8] == ("PutEvent", b"/a/w", b"seen")
    assert mine[9] == "put"
    assert mine[10] == ("error", "INVALID_ARGUMENT", "etcdserver: "
                        "authentication failed, invalid user ID or password")
    assert mine[11] == ("error", "UNAUTHENTICATED",
                        "etcdserver: invalid auth token")
    assert mine[12] == b"v1"
