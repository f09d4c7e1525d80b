"""Corruption checks in clusters whose client API a member cannot use.

Goal (issue 20): the members ask each other for their hashes on the peer
listener, as etcd 3.4 asks a peer's /members/hashkv, so the checks compare
hashes (a) with auth enabled, where HashKV on the client API needs a root
token no member has, and (b) with --client-cert-auth on https:// client
URLs, where the client API wants a certificate of the client CA, and (c)
over peer TLS with --peer-client-cert-auth (the questions go where the
raft traffic goes, with the member's peer certificate).  In each:
a healthy cluster runs several periodic passes, every peer answers (no
"failed hash kv request" line) and no alarm is raised; a member whose store
was changed while it was down is caught: the CORRUPT alarm is raised
through raft and every member refuses writes "etcdserver: corrupt
cluster" (etcd's corrupt applier), reads still served.  With auth, the
initial check (on by default) also refuses to start a changed member.

Method: the members and the store change of test_corrupt_check.py (a
clean stop, the value's bytes rewritten in the member's LMDB file, a
restart).  Before the checks moved to the peer listener, (a) and (b) only
logged "failed hash kv request" and never raised the alarm.
"""
import os
import subprocess
import time

import grpc
import pytest

import cluster as clusterlib
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc as pbg
from test_corrupt_check import BAD, VALUE, corrupt, stop  # noqa: F401

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(clusterlib.against_etcd(),
                                 reason="cetcd's peer listener")]

ETCDCTL = "/usr/bin/etcdctl"
ROOT_PW = "Corrupt-check-pw"
FIXTURES = "/usr/share/gocode/src/go.etcd.io/etcd/integration/fixtures"
CA = os.path.join(FIXTURES, "ca.crt")
CERT = os.path.join(FIXTURES, "server.crt")
KEY = os.path.join(FIXTURES, "server.key.insecure")
CORRUPT = (grpc.StatusCode.DATA_LOSS, "etcdserver: corrupt cluster")
PERIODIC = ["--experimental-corrupt-check-time", "1s",
            # The periodic check is what this test watches: a changed
            # member must start so that it can be caught by it.
            "--experimental-initial-corrupt-check=false"]


def count_in_log(m, text):
    with open(m.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace").count(text)


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    assert pred(), what


# --- (a) auth ---------------------------------------------------------------

def ctl(m, *args):
    env = dict(os.environ, ETCDCTL_API="3")
    subprocess.run([ETCDCTL, "--endpoints", m.endpoint] + list(args),
                   check=True, capture_output=True, env=env, timeout=60)


def token(m):
    return pbg.AuthStub(m.channel()).Authenticate(pb.AuthenticateRequest(
        name="root", password=ROOT_PW), timeout=15).token


def auth_on(c):
    m1 = c.members[0]
    ctl(m1, "user", "add", "root:" + ROOT_PW)
    ctl(m1, "user", "grant-role", "root", "root")
    ctl(m1, "auth", "enable")


class Client:
    """Calls to one member with a root token (fetched again after the
    member restarts: a simple token lives in one member)."""

    def __init__(self, m):
        self.m = m

    def md(self):
        return [("token", token(self.m))]

    def alarms(self):
        r = self.m.maintenance().Alarm(
            pb.AlarmRequest(action=pb.AlarmRequest.GET), metadata=self.md(),
            timeout=10)
        return [(a.memberID, a.alarm) for a in r.alarms]

    def put_error(self):
        try:
            self.m.kv().Put(pb.PutRequest(key=b"after", value=b"x"),
                            metadata=self.md(), timeout=10)
            return None
        except grpc.RpcError as e:
            return (e.code(), e.details())

    def put(self, key, value):
        self.m.kv().Put(pb.PutRequest(key=key, value=value),
                        metadata=self.md(), timeout=10)

    def range_count(self, key, serializable=False):
        return self.m.kv().Range(pb.RangeRequest(
            key=key, serializable=serializable), metadata=self.md(),
            timeout=10).count


def wait_replicated(c, client, key):
    for m in c.members:
        wait_for(lambda: client(m).range_count(key, True) == 1, 20, m.name)


def healthy_then_caught(c, client):
    """The common part: passes with no alarm, then a changed member."""
    client(c.members[0]).put(b"victim", VALUE)
    for i in range(5):
        client(c.members[0]).put(b"k%d" % i, b"v")
    wait_replicated(c, client, b"k4")
    lm, _ = c.wait_leader()
    wait_for(lambda: count_in_log(lm, "finished peer corruption check") >= 3,
             60, "no periodic passes: " + lm.log_tail())
    assert count_in_log(lm, "failed hash kv request") == 0, lm.log_tail()
    assert all(client(m).alarms() == [] for m in c.members)
    assert client(c.members[0]).put_error() is None
    victim = next(m for m in c.members if m is not lm)
    stop(victim)
    corrupt(victim)
    c.spawn(victim)
    c.wait_ready(victim)
    wait_for(lambda: (0, pb.CORRUPT) in client(c.members[0]).alarms(), 60,
             "no CORRUPT alarm: " + lm.log_tail())
    for m in c.members:
        wait_for(lambda: client(m).put_error() == CORRUPT, 20, m.name)
        assert client(m).range_count(b"k0") == 1  # reads still served


def test_auth_cluster_periodic_check(make_cluster):
    c = make_cluster(3, extra_args=PERIODIC + ["--bcrypt-cost", "4"])
    auth_on(c)
    healthy_then_caught(c, Client)


def test_auth_cluster_initial_check(make_cluster):
    """On by default: an intact member restarts ("no corruption", having
    compared with both peers), a changed one refuses to start."""
    c = make_cluster(3, extra_args=["--bcrypt-cost", "4"])
    auth_on(c)
    Client(c.members[0]).put(b"victim", VALUE)
    wait_replicated(c, Client, b"victim")
    good, victim = c.members[1], c.members[2]
    stop(good)
    c.spawn(good)
    c.wait_ready(good)
    assert count_in_log(good, "succeeded on initial corruption checking: "
                        "no corruption") == 1
    assert count_in_log(good, "failed hash kv request") == 0, good.log_tail()
    stop(victim)
    corrupt(victim)
    c.spawn(victim)
    rc = victim.proc.wait(60)
    victim.proc = None
    assert rc != 0
    assert count_in_log(victim, "found data inconsistency with peers") == 1


# --- (b) client certificates -------------------------------------------------

class TLSMember(clusterlib.Member):
    @property
    def client_url(self):
        return "https://" + self.endpoint

    def channel(self):
        if self._channel is None:
            self._channel = secure_channel(self.endpoint)
        return self._channel


def secure_channel(endpoint):
    def read(p):
        with open(p, "rb") as f:
            return f.read()
    creds = grpc.ssl_channel_credentials(root_certificates=read(CA),
                                         private_key=read(KEY),
                                         certificate_chain=read(CERT))
    return grpc.secure_channel(endpoint, creds)


class ClientTLSCluster(clusterlib.Cluster):
    """https:// client URLs that demand a client certificate; the peers
    talk plain http through the proxy, as in cluster.py."""

    def __init__(self, **kw):
        super().__init__(**kw)
        for m in self.members:
            m.__class__ = TLSMember  # same fields, TLS client side

    def args(self, m):
        return super().args(m) + [
            "--cert-file", CERT, "--key-file", KEY, "--trusted-ca-file", CA,
            "--client-cert-auth"]

    def wait_ready(self, m, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not m.running:
                raise RuntimeError("%s exited: %s" % (m.name, m.log_tail()))
            if clusterlib.range_answers(secure_channel(m.endpoint)) is None:
                m.reset_channel()
                return
            time.sleep(0.05)
        raise RuntimeError("%s not ready: %s" % (m.name, m.log_tail()))


class PlainClient(Client):
    def md(self):
        return []


@pytest.fixture
def tls_cluster(cluster_capable):
    made = []

    def factory(**kw):
        c = ClientTLSCluster(**kw)
        made.append(c)
        c.start()
        return c
    yield factory
    for c in made:
        c.close()


def test_client_cert_cluster_periodic_check(tls_cluster):
    c = tls_cluster(extra_args=PERIODIC)
    healthy_then_caught(c, PlainClient)


# --- (c) peer TLS with client certificates on the peer listener ------------

def test_peer_tls_cluster_periodic_check(cluster_capable):
    """The hash questions travel as the raft traffic does: over peer TLS,
    each member presenting its certificate to a listener that demands one
    (--peer-client-cert-auth)."""
    from test_peer_tls import CA_TLS, TLSCluster
    c = TLSCluster(CA_TLS, extra_args=PERIODIC)
    try:
        c.start()
        healthy_then_caught(c, PlainClient)
    finally:
        c.close()
