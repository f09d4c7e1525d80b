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
etcdctl is read through the others, and all members converge.  (d) A
fourth member added with `etcdctl member add` and started with
--initial-cluster-state existing and the same peer TLS flags (auto-TLS,
and CA-signed with client cert auth) learns the cluster from the running
members over TLS and catches up: keys written before and after it came are
read through it (serializable), every member lists it as started, writes
through it reach the others.  (e) A joining member whose certificate is
not signed by the CA the cluster trusts is refused by every member: it
exits with an error naming each peer and the TLS reason, within seconds.
(f) The peer listener checks a client certificate's SANs against the
address it connects from as etcd 3.4's checkCertSAN, DNS SANs included: a
member whose certificate has only DNS:localhost (connecting from
127.0.0.1, which /etc/hosts names localhost) is accepted; one with only
DNS:nothere.invalid (RFC 6761: never resolves) is refused with etcd's
`tls: "127.0.0.1" does not match any of DNSNames ["nothere.invalid"]
(lookup nothere.invalid...)` and the other two commit without it; one with
IP:127.0.0.2 and DNS:nothere.invalid (listening on 127.0.0.2, dialling
from 127.0.0.1) is refused the same way unless every member runs with
--experimental-peer-skip-client-san-verification.

Method: the members of cluster.py, but without its proxy (the peer path
carries TLS here; each member advertises the https:// URL it listens on).
Certificates come from etcd's own fixtures (server.crt for 127.0.0.1 and
localhost, signed by ca.crt; CommonName-root.crt is another CA, with its
own key for (e)); for (f), a CA and certificates made with openssl in the
test's directory (etcd's fixtures have no CA key), a member on the name
localhost advertising https://localhost:<port>.  Runs against real etcd
3.4.23 with CETCD_TEST_AGAINST_ETCD=1.
"""

import os
import re
import shutil
import subprocess
import time

import pytest

import cluster as clusterlib
from common import servers
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
    extra flags replacing the cluster-wide tls_args; joining maps the name
    of a member added with `member add` to the ETCD_INITIAL_CLUSTER that
    etcdctl printed (it starts with --initial-cluster-state existing)."""

    def __init__(self, tls_args, per_member=None, **kw):
        super().__init__(**kw)
        self.tls_args = list(tls_args)
        self.per_member = per_member or {}
        self.joining = {}

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
        if m.name in self.joining:
            a[a.index("--initial-cluster") + 1] = self.joining[m.name]
            a[a.index("--initial-cluster-state") + 1] = "existing"
        return a + self.per_member.get(m.name, self.tls_args)


@pytest.fixture
def tls_cluster(cluster_capable):
    made = []

    def factory(tls_args, start=True, cls=TLSCluster, **kw):
        c = cls(tls_args, **kw)
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
    _, _, m3 = two_serve(c)
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


# -- joining a TLS cluster ------------------------------------------------------

STRANGER_CERT = os.path.join(FIXTURES, "CommonName-root.crt")
STRANGER_KEY = os.path.join(FIXTURES, "CommonName-root.key")


def member_add(c, m, timeout=30):
    """`etcdctl member add` for m at its https:// peer URL, retried while
    the strict reconfig check finds the cluster too young (etcd wants its
    peers connected for 5 s); returns (member id, ETCD_INITIAL_CLUSTER)."""
    env = dict(os.environ, ETCDCTL_API="3")
    eps = ",".join(x.endpoint for x in c.members)
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run([ETCDCTL, "--endpoints", eps, "member", "add",
                            m.name, "--peer-urls", c.peer_url(m)],
                           env=env, capture_output=True, text=True,
                           timeout=30)
        if "unhealthy cluster" not in r.stderr or \
                time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 0, (r.stdout, r.stderr)
    got = dict(re.findall(r'^(ETCD_\w+)="(.*)"$', r.stdout, re.M))
    assert got["ETCD_INITIAL_CLUSTER_STATE"] == "existing", r.stdout
    mid = int(re.search(r"Member\s+([0-9a-f]+) added", r.stdout).group(1), 16)
    return mid, got["ETCD_INITIAL_CLUSTER"]


def serializable_get(m, key):
    r = subprocess.run([ETCDCTL, "--endpoints", m.endpoint,
                        "--command-timeout", "3s", "get", key,
                        "--consistency=s", "--print-value-only"],
                       env=dict(os.environ, ETCDCTL_API="3"),
                       capture_output=True, text=True, timeout=15)
    return r.stdout.strip() if r.returncode == 0 else None


def wait_value(m, key, want, timeout=20):
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = serializable_get(m, key)
        if got == want:
            return
        time.sleep(0.1)
    raise AssertionError("%s: %s = %r, want %r" % (m.name, key, got, want))


def start_joining(c, m, ic):
    c.joining[m.name] = ic
    c.members.append(m)
    c.spawn(m)


@pytest.mark.parametrize("tls", ["auto", "ca"])
def test_join_tls_cluster(tls_cluster, tls):
    """A fourth member joins a running TLS cluster (member add, then
    --initial-cluster-state existing with the same peer TLS flags): it
    learns the cluster over TLS, catches up on what was written before it
    came and receives what is written after."""
    if tls == "ca" and not os.path.exists(CERT):
        pytest.skip("etcd's test fixtures are not installed")
    c = tls_cluster(AUTO_TLS if tls == "auto" else CA_TLS)
    c.wait_leader(timeout=20)
    etcdctl(c.members[0], "put", "before-join", "old")
    m4 = clusterlib.Member("m4", c.root)
    mid, ic = member_add(c, m4)
    assert "m4=%s" % c.peer_url(m4) in ic
    start_joining(c, m4, ic)
    c.wait_ready(m4, timeout=30)
    assert c.status(m4, timeout=5).header.member_id == mid
    etcdctl(c.members[1], "put", "after-join", "new")
    wait_value(m4, "before-join", "old")
    wait_value(m4, "after-join", "new")
    # Every member lists m4 as started (it published its name).
    for m in c.members:
        out = etcdctl(m, "member", "list")
        line = next((ln for ln in out.splitlines()
                     if ln.startswith("%x," % mid)), None)
        assert line is not None, (m.name, out)
        assert ", started, m4, %s," % c.peer_url(m4) in line, line
    c.learn_ids()
    c.wait_converged()
    # Writes through the new member reach the others over its TLS links.
    etcdctl(m4, "put", "via-m4", "yes")
    for m in c.members:
        wait_value(m, "via-m4", "yes")


def join_refused(c, m4_args, reason):
    """Starts a joining m4 with m4_args on c (CA_TLS members): it must get
    the cluster from no member, exit with an error naming each member it
    asked with a message matching reason, within 45 s; the three others
    still serve writes."""
    c.per_member["m4"] = m4_args
    c.start()
    c.wait_leader(timeout=20)
    m4 = clusterlib.Member("m4", c.root)
    _, ic = member_add(c, m4)
    start_joining(c, m4, ic)
    t0 = time.monotonic()
    try:
        rc = m4.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("joining member still running after 60 s:\n" +
                    m4.log_tail())
    took = time.monotonic() - t0
    m4.proc = None
    assert rc not in (0, None) and rc > 0, (rc, m4.log_tail())  # no signal
    with open(m4.log_path) as f:
        log = f.read()
    assert "could not retrieve cluster information from the given URLs" \
        in log, log[-3000:]
    for m in c.members[:3]:
        assert re.search(r"could not get cluster response from %s: .*%s"
                         % (re.escape(c.peer_url(m)), reason),
                         log, re.I), log[-3000:]
    assert took < 45, took
    c.members.remove(m4)
    etcdctl(c.members[0], "put", "still", "fine")
    wait_value(c.members[2], "still", "fine")


def test_join_with_untrusted_cert_refused(tls_cluster):
    """A joining member whose certificate is not signed by the CA the
    cluster trusts cannot get the cluster from any member (they refuse its
    client certificate; etcd: "remote error: tls: bad certificate"): it
    exits with an error and a message instead of hanging or crashing, and
    the cluster carries on."""
    if not os.path.exists(CERT) or not os.path.exists(STRANGER_KEY):
        pytest.skip("etcd's test fixtures are not installed")
    stranger = ["--peer-cert-file", STRANGER_CERT,
                "--peer-key-file", STRANGER_KEY,
                "--peer-trusted-ca-file", CA, "--peer-client-cert-auth"]
    join_refused(tls_cluster(CA_TLS, start=False), stranger,
                 r"tls.*certificate")


@pytest.mark.parametrize("flag,value", [
    pytest.param("--peer-cert-allowed-cn", "other.example",
                 marks=pytest.mark.skipif(not servers.LONG,
                                          reason=servers.LONG_REASON)),
    ("--peer-cert-allowed-hostname", "nothere.example")])
def test_join_checks_allowed_names(tls_cluster, flag, value):
    """A joining member checks its --peer-cert-allowed-cn/-hostname on the
    certificates of the members it asks for the cluster, as etcd's peer
    TLS config does on both ends: the members' certificates (CN
    example.com, SANs localhost and 127.0.0.1) lack the allowed name, so
    it refuses every member ("client certificate authentication failed",
    Go's words) and exits."""
    if not os.path.exists(CERT):
        pytest.skip("etcd's test fixtures are not installed")
    join_refused(tls_cluster(CA_TLS, start=False), CA_TLS + [flag, value],
                 "client certificate authentication failed")


# -- certificate files re-read ------------------------------------------------


def test_peer_dialer_rereads_cert_files(tls_cluster, tmp_path):
    """m1's peer certificate files are replaced on disk by a certificate
    of a CA the others do not trust (key first, then certificate, as a
    rotation tool would); m2 is then restarted, so m1 must dial it anew:
    m2's listener refuses the new certificate, which shows that m1's
    dialer presented the files as they are now, not as they were at
    start-up (etcd reads them at every handshake too)."""
    if not os.path.exists(CERT):
        pytest.skip("etcd's test fixtures are not installed")
    cert, key = str(tmp_path / "m1.crt"), str(tmp_path / "m1.key")
    shutil.copyfile(CERT, cert)
    shutil.copyfile(KEY, key)
    m1_args = ["--peer-cert-file", cert, "--peer-key-file", key,
               "--peer-trusted-ca-file", CA, "--peer-client-cert-auth"]
    c = tls_cluster(CA_TLS, per_member={"m1": m1_args})
    check_replicates(c)
    m1, m2, _ = c.members
    for src, dst in ((STRANGER_KEY, key), (STRANGER_CERT, cert)):
        shutil.copyfile(src, dst + ".new")
        os.replace(dst + ".new", dst)
    time.sleep(3)  # cetcd's dialer looks at its files every second
    with open(m2.log_path, "rb") as f:
        before = len(f.read())
    c.restart(m2, wait=False)
    deadline = time.monotonic() + 30
    while True:
        with open(m2.log_path, "rb") as f:
            log = f.read()[before:].decode("utf-8", "replace")
        if re.search(r'rejected connection from "127\.0\.0\.1:\d+" \(error '
                     r'"tls: failed to verify client certificate', log):
            break
        assert time.monotonic() < deadline, log[-3000:]
        time.sleep(0.3)


# -- allowed CN on both ends; revoked peer certificates -------------------------

CERT2 = os.path.join(FIXTURES, "server2.crt")  # CN example2.com
KEY2 = os.path.join(FIXTURES, "server2.key.insecure")
REVOKED_CERT = os.path.join(FIXTURES, "server-revoked.crt")
REVOKED_KEY = os.path.join(FIXTURES, "server-revoked.key.insecure")
CRL = os.path.join(FIXTURES, "revoke.crl")  # revokes server-revoked.crt


def wait_log(m, pattern, timeout=30):
    servers.wait_log(m.log_path, pattern, timeout)


def two_serve(c):
    """Starts c's members; m1 and m2 elect a leader between them and
    commit a key."""
    for m in c.members:
        c.spawn(m)
    m1, m2, m3 = c.members
    for m in (m1, m2):
        c.wait_ready(m, timeout=30)
        m.id = c.status(m, timeout=5).header.member_id
    c.wait_leader(timeout=20, among=[m1, m2])
    etcdctl(m1, "put", "only-two", "yes")
    assert etcdctl(m2, "get", "only-two",
                   "--print-value-only").strip() == "yes"
    return m1, m2, m3


def two_serve_third_cut_off(c):
    """m1 and m2 elect a leader and commit; m3 runs but never receives the
    entry (no member accepts a connection to or from it)."""
    m1, m2, m3 = two_serve(c)
    time.sleep(2)
    assert m3.running, m3.log_tail()
    assert serializable_get(m3, "only-two") in (None, ""), m3.log_tail()
    return m1, m2, m3


def test_peer_allowed_cn_checked_by_dialer(tls_cluster):
    """Every member allows CN example.com; m3's certificate says
    example2.com.  m1 and m2 refuse m3's connections on their listeners
    and, as etcd's peer transport checks the allowed CN on the certificate
    of the member it dials too, refuse m3's listener when they dial it: m3
    gets nothing, not even the leader's appends (before, cetcd's dialers
    sent them and m3's listener accepted).  Logs as etcd 3.4.23 writes
    them: m1's listener "client certificate authentication failed", m3's
    listener "remote error: tls: bad certificate" (the dialers' alert)."""
    if not os.path.exists(CERT2):
        pytest.skip("etcd's test fixtures are not installed")
    allowed = CA_TLS + ["--peer-cert-allowed-cn", "example.com"]
    odd = list(allowed)
    odd[odd.index("--peer-cert-file") + 1] = CERT2
    odd[odd.index("--peer-key-file") + 1] = KEY2
    c = tls_cluster(allowed, start=False, per_member={"m3": odd})
    m1, _, m3 = two_serve_third_cut_off(c)
    wait_log(m1, r'rejected connection from "127\.0\.0\.1:\d+" \(error '
             r'"client certificate authentication failed"')
    wait_log(m3, r'rejected connection from "[0-9.:]*" \(error '
             r'"remote error: tls: bad certificate"')
    wait_log(m1, r"client certificate authentication failed")


def test_peer_crl_refuses_revoked_member(tls_cluster):
    """--peer-crl-file on every member; m3 presents the certificate the
    CRL revokes (etcd's fixtures): m1 and m2 refuse its connections
    ("transport: certificate serial ... revoked" in their logs, as etcd
    writes it) while they serve writes between them.  (m3's listener still
    accepts theirs: a CRL is checked on a listener's client certificates
    only, in etcd too, so what m3 receives is not asserted.)"""
    if not os.path.exists(REVOKED_CERT):
        pytest.skip("etcd's test fixtures are not installed")
    base = CA_TLS + ["--peer-crl-file", CRL]
    revoked = list(base)
    revoked[revoked.index("--peer-cert-file") + 1] = REVOKED_CERT
    revoked[revoked.index("--peer-key-file") + 1] = REVOKED_KEY
    c = tls_cluster(base, start=False, per_member={"m3": revoked})
    m1, m2, m3 = two_serve(c)
    wait_log(m1, r'rejected connection from "127\.0\.0\.1:\d+" \(error '
             r'"transport: certificate serial 4a3cf9f9dcc21a01b4a0efaef7546aae'
             r'e8fbd194 revoked"')
    etcdctl(m1, "put", "crl-key", "v")
    assert etcdctl(m2, "get", "crl-key",
                   "--print-value-only").strip() == "v"
    assert m3.running, m3.log_tail()


# -- the listener's SAN check with DNS SANs (etcd's checkCertSAN) --------------

SAN_REFUSED = (r'rejected connection from "127\.0\.0\.1:\d+" \(error "tls: '
               r'\\"127\.0\.0\.1\\" does not match any of DNSNames '
               r'\[\\"nothere\.invalid\\"\] \(lookup nothere\.invalid')


@pytest.fixture(scope="module")
def san_pki(tmp_path_factory):
    """A CA and, per name, a peer certificate (serverAuth and clientAuth)
    with those SANs: ip (IP:127.0.0.1), localhost (DNS:localhost only),
    invalid (DNS:nothere.invalid only), other_ip (IP:127.0.0.2 and
    DNS:nothere.invalid).  Returns name -> the member's peer TLS flags."""
    d = tmp_path_factory.mktemp("san-pki")
    ca, ca_key = str(d / "ca.crt"), str(d / "ca.key")

    def openssl(*args):
        subprocess.run(["openssl"] + list(args), check=True,
                       capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key,
            "-out", ca, "-days", "30", "-subj", "/CN=san-test-ca")
    sans = {"ip": "IP:127.0.0.1", "localhost": "DNS:localhost",
            "invalid": "DNS:nothere.invalid",
            "other_ip": "IP:127.0.0.2,DNS:nothere.invalid"}
    flags = {}
    for name, san in sans.items():
        key, csr, crt, ext = (str(d / (name + x))
                              for x in (".key", ".csr", ".crt", ".ext"))
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth,"
                    "clientAuth\n" % san)
        openssl("req", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", csr, "-subj", "/CN=" + name)
        openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
                "-CAcreateserial", "-out", crt, "-days", "30", "-extfile",
                ext)
        flags[name] = ["--peer-cert-file", crt, "--peer-key-file", key,
                       "--peer-trusted-ca-file", ca,
                       "--peer-client-cert-auth"]
    return flags


class SANCluster(TLSCluster):
    """listen and advertise map a member's name to the host of its peer
    URL (default 127.0.0.1): m3 listens on 127.0.0.2, or advertises the
    name localhost, so that the others can verify its server
    certificate."""

    def __init__(self, tls_args, listen=None, advertise=None, **kw):
        super().__init__(tls_args, **kw)
        self.listen = listen or {}
        self.advertise = advertise or {}

    def peer_url(self, m):
        return "https://%s:%d" % (self.advertise.get(m.name, "127.0.0.1"),
                                  m.peer_port)

    def args(self, m):
        a = super().args(m)
        a[a.index("--listen-peer-urls") + 1] = "https://%s:%d" % (
            self.listen.get(m.name, "127.0.0.1"), m.peer_port)
        return a


def log_of(m):
    with open(m.log_path, errors="replace") as f:
        return f.read()


def test_peer_san_dns_localhost_accepted(tls_cluster, san_pki):
    """m3's certificate names only localhost; it dials from 127.0.0.1,
    whose reverse lookup (/etc/hosts) is localhost: the others' listeners
    accept it (before, cetcd let any DNS SAN pass unchecked; now it looks
    the names up as etcd does), and the cluster of three replicates."""
    c = tls_cluster(san_pki["ip"], cls=SANCluster,
                    per_member={"m3": san_pki["localhost"]},
                    advertise={"m3": "localhost"})
    check_replicates(c)
    for m in c.members[:2]:
        assert "does not match any of DNSNames" not in log_of(m), \
            m.log_tail()


def test_peer_san_dns_unresolvable_refused(tls_cluster, san_pki):
    """m3's certificate names only nothere.invalid: m1's and m2's
    listeners refuse its connections with etcd's words (the lookup error
    after them), and m1 and m2 commit without it.  (They cannot dial m3
    either: its server certificate is not valid for 127.0.0.1.)"""
    c = tls_cluster(san_pki["ip"], start=False, cls=SANCluster,
                    per_member={"m3": san_pki["invalid"]})
    m1, m2, _ = two_serve_third_cut_off(c)
    for m in (m1, m2):
        wait_log(m, SAN_REFUSED)
    # The whole line as etcd writes it: Go's resolver names its DNS
    # server, the refused certificate's SANs follow.  (cetcd's dialer
    # sends the IP as ServerName; Go sends none for an IP.)
    wait_log(m1, SAN_REFUSED + r' on [0-9a-f.:\[\]]+:53: no such host\)", '
             r'ServerName "[0-9.]*", IPAddresses \[\], DNSNames '
             r'\["nothere\.invalid"\]\)')


@pytest.mark.parametrize("skip", [False, True])
def test_peer_san_other_ip_and_dns(tls_cluster, san_pki, skip):
    """m3 listens on 127.0.0.2 with a certificate for IP:127.0.0.2 and
    DNS:nothere.invalid, and dials the others from 127.0.0.1: no IP SAN
    fits, so its DNS SAN is looked up, and m1 refuses it with the same
    words as above.  With --experimental-peer-skip-client-san-verification
    on every member nobody checks, and the three replicate."""
    extra = ["--experimental-peer-skip-client-san-verification"] \
        if skip else []
    c = tls_cluster(san_pki["ip"] + extra, start=False, cls=SANCluster,
                    per_member={"m3": san_pki["other_ip"] + extra},
                    listen={"m3": "127.0.0.2"},
                    advertise={"m3": "127.0.0.2"})
    if skip:
        c.start()
        check_replicates(c)
        for m in c.members:
            assert "does not match any of DNSNames" not in log_of(m), \
                m.log_tail()
        return
    m1, _, _ = two_serve(c)
    wait_log(m1, SAN_REFUSED + r'[^\n]*IPAddresses \["127\.0\.0\.2"\], '
             r'DNSNames \["nothere\.invalid"\]\)')
