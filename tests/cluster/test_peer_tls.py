"""Clusters whose members talk to each other over TLS (https:// peer URLs).

Goal: show that the peer transport dials other members with TLS as etcd
3.4 does: (a) with --peer-auto-tls every member generates its own
self-signed certificate and the members still form a cluster (etcd does
not verify self-signed peer certificates); (b) with
--peer-cert-file/--peer-key-file/--peer-trusted-ca-file and
--peer-client-cert-auth, CA-signed certificates are presented and
verified in both directions; (c) a member that trusts another CA can
neither verify the others' certificates nor get its own accepted (its
listener checks their client certificates against that CA): it stays cut
off while the other two elect a leader and commit without it.  In (a) and
(b) a leader is elected, a key put through one member with the real
etcdctl is read through the others, and all members converge.

Method: the members of cluster.py, but without its proxy (the peer path
carries TLS here; each member advertises the https:// URL it listens on).
Certificates come from etcd's own fixtures (server.crt for 127.0.0.1 and
localhost, signed by ca.crt; CommonName-root.crt is another CA).  Runs
against real etcd 3.4.23 with CETCD_TEST_AGAINST_ETCD=1.
"""

import os
import subprocess
import time

import pytest

import cluster as clusterlib
from cluster import against_etcd

pytestmark = pytest.mark.cluster

ETCDCTL = "/usr/bin/etcdctl"
FIXTURES = "/usr/share/gocode/src/go.etcd.io/etcd/integration/fixtures"
CA = os.path.join(FIXTURES, "ca.crt")
OTHER_CA = os.path.join(FIXTURES, "CommonName-root.crt")
CERT = os.path.join(FIXTURES, "server.crt")
KEY = os.path.join(FIXTURES, "server.key.insecure")

AUTO_TLS = ["--peer-auto-tls"]
CA_TLS = ["--peer-cert-file", CERT, "--peer-key-file", KEY,
          "--peer-trusted-ca-file", CA, "--peer-client-cert-auth"]


class TLSCluster(clusterlib.Cluster):
    """Members listen for and advertise https://127.0.0.1:<peer port>;
    peer traffic bypasses the proxy.  per_member maps a member name to
    extra flags replacing the cluster-wide tls_args."""

    def __init__(self, tls_args, per_member=None, **kw):
        super().__init__(**kw)
        self.tls_args = list(tls_args)
        self.per_member = per_member or {}

    @staticmethod
    def peer_url(m):
        return "https://127.0.0.1:%d" % m.peer_port

    def initial_cluster(self):
        return ",".join("%s=%s" % (m.name, self.peer_url(m))
                        for m in self.members)

    def args(self, m):
        a = super().args(m)
        a[a.index("--listen-peer-urls") + 1] = self.peer_url(m)
        a[a.index("--initial-advertise-peer-urls") + 1] = self.peer_url(m)
        return a + self.per_member.get(m.name, self.tls_args)


@pytest.fixture
def tls_cluster(cluster_capable):
    made = []

    def factory(tls_args, start=True, **kw):
        c = TLSCluster(tls_args, **kw)
        made.append(c)
        if start:
            c.start()
        return c

    yield factory
    for c in made:
        c.close()


def etcdctl(m, *args, timeout=15):
    env = dict(os.environ, ETCDCTL_API="3")
    r = subprocess.run([ETCDCTL, "--endpoints", m.endpoint,
                        "--command-timeout", "5s"] + list(args),
                       env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, "etcdctl %s on %s: %s%s" % (
        " ".join(args), m.name, r.stdout, r.stderr)
    return r.stdout


def check_replicates(c):
    lm, took = c.wait_leader(timeout=20)
    others = [m for m in c.members if m is not lm]
    # Put through a follower (forwarded to the leader over the peer link),
    # read through every member, linearizable.
    etcdctl(others[0], "put", "tls-key", "over-tls")
    for m in c.members:
        out = etcdctl(m, "get", "tls-key", "--print-value-only")
        assert out.strip() == "over-tls", (m.name, out)
    etcdctl(lm, "put", "tls-key2", "from-leader")
    rev, content = c.wait_converged()
    assert (b"tls-key2", b"from-leader") in [(k, v) for k, v, *_ in content]
    return lm, took


def test_peer_auto_tls(tls_cluster):
    c = tls_cluster(AUTO_TLS)
    check_replicates(c)
    # Each member generated its own certificate: nobody could have
    # verified another's, so verification was indeed skipped.
    certs = set()
    for m in c.members:
        path = os.path.join(m.data_dir, "fixtures", "peer", "cert.pem")
        with open(path, "rb") as f:
            certs.add(f.read())
    assert len(certs) == len(c.members)


def test_peer_ca_tls_client_cert_auth(tls_cluster):
    if not os.path.exists(CERT):
        pytest.skip("etcd's test fixtures are not installed")
    c = tls_cluster(CA_TLS)
    check_replicates(c)


def test_peer_wrong_ca_is_cut_off(tls_cluster):
    if not os.path.exists(CERT):
        pytest.skip("etcd's test fixtures are not installed")
    wrong = list(CA_TLS)
    wrong[wrong.index("--peer-trusted-ca-file") + 1] = OTHER_CA
    c = tls_cluster(CA_TLS, start=False, per_member={"m3": wrong})
    for m in c.members:
        c.spawn(m)
    m1, m2, m3 = c.members
    for m in (m1, m2):
        c.wait_ready(m, timeout=30)
        m.id = c.status(m, timeout=5).header.member_id
    lm, _ = c.wait_leader(timeout=20, among=[m1, m2])
    etcdctl(m1, "put", "only-two", "yes")
    assert etcdctl(m2, "get", "only-two",
                   "--print-value-only").strip() == "yes"
    # m3 never heard from a leader and never received the entry.  (etcd
    # does not answer clients before it has a leader; cetcd answers after
    # a while, without the key.)
    time.sleep(2)
    assert m3.running, m3.log_tail()
    r = subprocess.run([ETCDCTL, "--endpoints", m3.endpoint,
                        "--command-timeout", "3s", "get", "only-two",
                        "--consistency=s", "--print-value-only"],
                       env=dict(os.environ, ETCDCTL_API="3"),
                       capture_output=True, text=True, timeout=15)
    assert "yes" not in r.stdout, r.stdout
    st = c.status(m3)
    assert st is None or st.leader == 0, st
