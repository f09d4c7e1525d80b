"""Client and peer TLS, as etcd 3.4 does it.

Goal: a member started with etcd's TLS flags serves its client URLs over
TLS (etcdctl with --cacert/--cert/--key and python grpc work; plain text is
refused), verifies client certificates when a CA is trusted or
--client-cert-auth is on (no cert and a cert from another CA are refused; a
revoked one too with --client-crl-file), generates a self-signed
certificate with --auto-tls under <data-dir>/fixtures/client, and opens its
peer URLs with TLS (--peer-auto-tls, or peer cert files with
--peer-client-cert-auth).  libcetcd's own TLS (struct cetcd_tls) is driven
through tests/client/client_smoke.c with etcdctl's flags against the same
servers.

Method: a module fixture makes two CAs with openssl in a tmp dir (EC P-256
keys): ca (server cert for localhost/127.0.0.1, client cert) and other-ca
(a client cert nobody trusts); the CRL test uses etcd's own fixtures
(revoke.crl revokes server-revoked.crt).  Servers come from conftest's
Server, with https:// URLs and a TLS readiness probe.  Every expectation is
checked against the real etcd too (CETCD_TEST_AGAINST_ETCD=1).
"""

import os
import shutil
import socket
import ssl
import subprocess
import threading
import time

import grpc
import pytest

from conftest import Server, run_etcdctl
from common import servers
from common.servers import against_etcd
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

ETCD_FIXTURES = "/usr/share/gocode/src/go.etcd.io/etcd/integration/fixtures"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"


# -- certificates -----------------------------------------------------------

def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   capture_output=True)


def _make_ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-nodes", "-keyout", name + ".key",
             "-out", name + ".crt", "-days", "30", "-subj", "/CN=" + name,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _make_leaf(d, ca, name, cn, san, usage, subj=None):
    """A certificate of ca's; subj (e.g. "/O=x") in place of "/CN=cn"."""
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=%s\n" % usage)
        if san:
            f.write("subjectAltName=%s\n" % san)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
             "-subj", subj or "/CN=" + cn, cwd=d)
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt",
             "-CAkey", ca + ".key", "-CAcreateserial", "-out", name + ".crt",
             "-days", "30", "-extfile", ext, cwd=d)


class Certs:
    def __init__(self, d):
        self.dir = d
        _make_ca(d, "ca")
        _make_ca(d, "other-ca")
        _make_leaf(d, "ca", "server", "server",
                   "DNS:localhost,IP:127.0.0.1", "serverAuth,clientAuth")
        _make_leaf(d, "ca", "client", "client", None, "clientAuth")
        _make_leaf(d, "other-ca", "stranger", "client", None, "clientAuth")
        # Client certificates for the peer listener's SAN check.
        _make_leaf(d, "ca", "near", "near", "IP:127.0.0.1", "clientAuth")
        _make_leaf(d, "ca", "far", "far", "IP:10.0.0.1,IP:10.0.0.2",
                   "clientAuth")
        # A DNS SAN that resolves to nothing: the peer listener's SAN
        # check refuses it after the handshake, once its lookups failed.
        _make_leaf(d, "ca", "nowhere", "nowhere", "DNS:nothere.invalid",
                   "clientAuth")
        # A host name in the CN only: no SAN makes it valid for localhost.
        _make_leaf(d, "ca", "cnhost", "localhost", None, "clientAuth")

    def path(self, name):
        return os.path.join(self.dir, name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("certs")))


# -- servers with TLS ---------------------------------------------------------

class TLSServer(Server):
    """A Server whose client and/or peer URLs are https://.

    ready_creds: grpc channel credentials the readiness probe uses (a
    function, since --auto-tls creates its certificate at start-up).
    """

    def __init__(self, extra_args, client_tls=True, peer_tls=False,
                 ready_creds=None):
        super().__init__(extra_args=extra_args)
        self.client_tls = client_tls
        self.peer_tls = peer_tls
        self.ready_creds = ready_creds

    @property
    def client_url(self):
        return ("https://" if self.client_tls else "http://") + self.endpoint

    @property
    def peer_url(self):
        return ("https://" if self.peer_tls else "http://") + \
            "127.0.0.1:%d" % self.peer_port

    def probe_channel(self):
        if not self.client_tls:
            return super().probe_channel()
        # ready_creds raises OSError while an auto-TLS certificate is not
        # written yet.
        return grpc.secure_channel(self.endpoint, self.ready_creds())


def refused_at_start(s):
    """Runs s's command line in the foreground (s is not started), checks
    that it exits with an error and returns what it printed."""
    try:
        cp = subprocess.run(s.args(), capture_output=True, text=True,
                            timeout=30, cwd=s.root)
    finally:
        s.cleanup()
    assert cp.returncode != 0
    return cp.stdout + cp.stderr


def auto_tls_server():
    """A TLSServer with --auto-tls whose readiness probe trusts the
    certificate the server generates: etcdctl --insecure-skip-tls-verify
    has no python twin, and that certificate is its own issuer."""
    s = TLSServer(["--auto-tls"])

    def auto_creds():
        path = os.path.join(s.data_dir, "fixtures", "client", "cert.pem")
        with open(path, "rb") as fh:
            return grpc.ssl_channel_credentials(fh.read())

    s.ready_creds = auto_creds
    return s


@pytest.fixture
def make_tls_server():
    made = []

    def factory(extra_args, **kw):
        s = TLSServer(extra_args, **kw)
        made.append(s)
        s.start()
        return s

    yield factory
    for s in made:
        s.cleanup()


def creds(certs, client=True, ca="ca.crt", who="client"):
    return grpc.ssl_channel_credentials(
        root_certificates=certs.read(ca),
        private_key=certs.read(who + ".key") if client else None,
        certificate_chain=certs.read(who + ".crt") if client else None)


def server_args(certs, *more):
    return ["--cert-file", certs.path("server.crt"),
            "--key-file", certs.path("server.key")] + list(more)


def ctl(srv, *args, check=True, timeout=30):
    return run_etcdctl(srv.endpoint, "--dial-timeout", "2s",
                       "--command-timeout", "4s", *args, check=check,
                       timeout=timeout)


def tls_ctl_args(certs, who="client", ca="ca.crt"):
    args = ["--cacert", certs.path(ca)]
    if who:
        args += ["--cert", certs.path(who + ".crt"),
                 "--key", certs.path(who + ".key")]
    return args


def range_ok(srv, channel_creds):
    ch = grpc.secure_channel(srv.endpoint, channel_creds)
    try:
        rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(key=b"k"),
                                      timeout=3)
        return True
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.UNAVAILABLE,
                            grpc.StatusCode.DEADLINE_EXCEEDED), e
        return False
    finally:
        ch.close()


# -- client TLS -----------------------------------------------------------------

def test_tls_serves_etcdctl_and_grpc(make_tls_server, certs):
    """cert + key + trusted CA (etcd e2e's clientTLS config)."""
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt")),
        ready_creds=lambda: creds(certs))
    ctl(s, *tls_ctl_args(certs), "put", "tls-k", "v1")
    out = ctl(s, *tls_ctl_args(certs), "get", "tls-k").out
    assert out.splitlines() == ["tls-k", "v1"]
    ch = grpc.secure_channel(s.endpoint, creds(certs))
    resp = rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(key=b"tls-k"),
                                         timeout=5)
    ch.close()
    assert [(kv.key, kv.value) for kv in resp.kvs] == [(b"tls-k", b"v1")]
    # etcd's start-up line for a TLS listener (tools grep for it).
    with open(s.log_path) as f:
        assert "serving client requests on" in f.read()


def test_plaintext_refused_on_tls_port(make_tls_server, certs):
    s = make_tls_server(server_args(certs),
                        ready_creds=lambda: creds(certs, client=False))
    ch = grpc.insecure_channel(s.endpoint)
    with pytest.raises(grpc.RpcError) as ei:
        rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(key=b"k"),
                                      timeout=3)
    ch.close()
    assert ei.value.code() in (grpc.StatusCode.UNAVAILABLE,
                               grpc.StatusCode.DEADLINE_EXCEEDED)
    r = ctl(s, "get", "k", check=False)  # plain etcdctl
    assert r.rc != 0
    # Without a trusted CA nothing asks for a client certificate.
    assert ctl(s, *tls_ctl_args(certs, who=None), "put", "k", "v").rc == 0


def test_trusted_ca_requires_client_cert(make_tls_server, certs):
    """etcd 3.4 requires and verifies client certs as soon as
    --trusted-ca-file is set, even without --client-cert-auth."""
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt")),
        ready_creds=lambda: creds(certs))
    assert not range_ok(s, creds(certs, client=False))
    assert range_ok(s, creds(certs))


def test_client_cert_auth(make_tls_server, certs):
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt"),
                    "--client-cert-auth"),
        ready_creds=lambda: creds(certs))
    assert ctl(s, *tls_ctl_args(certs), "put", "cca", "1").rc == 0
    no_cert = ctl(s, *tls_ctl_args(certs, who=None), "get", "cca",
                  check=False)
    assert no_cert.rc != 0, no_cert
    stranger = ctl(s, *tls_ctl_args(certs, who="stranger"), "get", "cca",
                   check=False)
    assert stranger.rc != 0, stranger
    assert not range_ok(s, creds(certs, client=False))
    assert not range_ok(s, creds(certs, who="stranger"))
    assert range_ok(s, creds(certs))


def test_client_crl_refuses_revoked_cert(make_tls_server):
    f = lambda n: os.path.join(ETCD_FIXTURES, n)  # noqa: E731

    def fcreds(who):
        with open(f("ca.crt"), "rb") as ca, open(f(who + ".crt"), "rb") as c, \
                open(f(who + ".key.insecure"), "rb") as k:
            return grpc.ssl_channel_credentials(ca.read(), k.read(), c.read())

    s = make_tls_server(
        ["--cert-file", f("server.crt"), "--key-file",
         f("server.key.insecure"), "--trusted-ca-file", f("ca.crt"),
         "--client-cert-auth", "--client-crl-file", f("revoke.crl")],
        ready_creds=lambda: fcreds("server"))
    assert range_ok(s, fcreds("server"))
    assert not range_ok(s, fcreds("server-revoked"))


def test_https_url_needs_cert():
    """An https:// client URL without --cert-file/--key-file (or
    --auto-tls) is refused at start-up."""
    out = refused_at_start(TLSServer([]))
    assert "TLS key/cert (--cert-file, --key-file) must be provided" in out


def test_auto_tls(make_tls_server):
    s = auto_tls_server()
    try:
        s.start()
        base = ["--insecure-transport=false", "--insecure-skip-tls-verify"]
        assert ctl(s, *base, "put", "auto", "tls").rc == 0
        assert ctl(s, *base, "get", "auto").out.splitlines() == ["auto", "tls"]
        fixtures = os.path.join(s.data_dir, "fixtures", "client")
        cert = os.path.join(fixtures, "cert.pem")
        assert os.path.exists(os.path.join(fixtures, "key.pem"))
        assert os.stat(os.path.join(fixtures, "key.pem")).st_mode & 0o077 == 0
        text = subprocess.run(["openssl", "x509", "-in", cert, "-noout",
                               "-text"], capture_output=True, text=True,
                              check=True).stdout
        assert "IP Address:127.0.0.1" in text
        assert "TLS Web Server Authentication" in text
        assert "O = etcd" in text or "O=etcd" in text
        before = open(cert, "rb").read()
        # Plain text still gets nothing.
        r = ctl(s, "get", "auto", check=False)
        assert r.rc != 0
        # A restart reuses the generated files, as etcd does.
        s.restart()
        assert open(cert, "rb").read() == before
    finally:
        s.cleanup()


# -- libcetcd over TLS ------------------------------------------------------------

def _smoke_binary():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    for d in (os.environ.get("CETCD_BUILD_DIR", ""),
              os.path.join(root, "build"), os.path.join(root, "build-client")):
        p = os.path.join(d, "tests", "client_smoke")
        if d and os.access(p, os.X_OK):
            return p
    return None


SMOKE = _smoke_binary()


def smoke(endpoint, *tls_args, timeout=120):
    """tests/client/client_smoke.c (every typed call of libcetcd, failover,
    async) with etcdctl's TLS flags."""
    return subprocess.run([SMOKE] + list(tls_args) + [endpoint],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(SMOKE is None, reason="client_smoke not built")
def test_libcetcd_tls_client_cert(make_tls_server, certs):
    """libcetcd's cetcd_tls: CA, client certificate and key, against a
    server that verifies client certificates; https:// and bare
    endpoints (TLS because material is given) alike.  A certificate from
    another CA, or none, is refused: UNAVAILABLE, no hang."""
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt"),
                    "--client-cert-auth"),
        ready_creds=lambda: creds(certs))
    mine = tls_ctl_args(certs)
    p = smoke("https://" + s.endpoint, *mine)
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), \
        p.stdout + p.stderr
    p = smoke(s.endpoint, *mine)
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), \
        p.stdout + p.stderr
    for args in (tls_ctl_args(certs, who="stranger"),
                 tls_ctl_args(certs, who=None), []):
        t0 = time.monotonic()
        p = smoke("https://" + s.endpoint, *args, timeout=60)
        assert p.returncode == 1, (args, p.stdout, p.stderr)
        assert "first put: UNAVAILABLE" in p.stderr, (args, p.stderr)
        assert time.monotonic() - t0 < 30
    # The server's certificate must chain to the given CA.
    p = smoke("https://" + s.endpoint,
              *tls_ctl_args(certs, ca="other-ca.crt"), timeout=60)
    assert p.returncode == 1 and "UNAVAILABLE" in p.stderr, p.stderr


@pytest.mark.skipif(SMOKE is None, reason="client_smoke not built")
def test_libcetcd_tls_skip_verify(make_tls_server):
    """--auto-tls: a self-signed certificate nobody can verify; libcetcd
    with insecure_skip_verify still talks to it (encrypted), without it
    the unknown issuer is refused."""
    s = auto_tls_server()
    try:
        s.start()
        p = smoke("https://" + s.endpoint, "--insecure-skip-tls-verify")
        assert p.returncode == 0 and p.stdout.strip().endswith("OK"), \
            p.stdout + p.stderr
        p = smoke("https://" + s.endpoint, timeout=60)  # system CAs
        assert p.returncode == 1 and "first put: UNAVAILABLE" in p.stderr, \
            p.stdout + p.stderr
    finally:
        s.cleanup()


# -- peer listener --------------------------------------------------------------

def tls_handshake(port, cert=None, key=None):
    """A TLS 1.2 handshake with the peer port: "ok" or "refused: ...".

    TLS 1.2, because there the server's verdict on our certificate is part
    of the handshake (TLS 1.3 reports it later, and not always as an alert:
    the gRPC core just closes)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2"])
    if cert:
        ctx.load_cert_chain(cert, key)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw):
                return "ok"
        except (ssl.SSLError, OSError) as e:
            return "refused: %r" % e


def plain_grpc_fails(port):
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    try:
        ch.unary_unary(HEALTH_CHECK)(b"", timeout=2)
        return False
    except grpc.RpcError:
        return True
    finally:
        ch.close()


def test_peer_listener_plain(server):
    """Without TLS flags the peer URL is still opened (etcd listens on it
    from the start)."""
    socket.create_connection(("127.0.0.1", server.peer_port),
                             timeout=2).close()


def test_peer_auto_tls(make_tls_server):
    """etcd e2e's default config: https:// peer URL + --peer-auto-tls."""
    s = make_tls_server(["--peer-auto-tls"], client_tls=False, peer_tls=True)
    assert tls_handshake(s.peer_port) == "ok"
    assert plain_grpc_fails(s.peer_port)
    assert os.path.exists(os.path.join(s.data_dir, "fixtures", "peer",
                                       "cert.pem"))
    # The client port stays plain.
    assert s.ctl("put", "pk", "pv").rc == 0


def test_peer_tls_files_client_cert_auth(make_tls_server, certs):
    s = make_tls_server(
        ["--peer-cert-file", certs.path("server.crt"),
         "--peer-key-file", certs.path("server.key"),
         "--peer-trusted-ca-file", certs.path("ca.crt"),
         "--peer-client-cert-auth"], client_tls=False, peer_tls=True)
    assert tls_handshake(s.peer_port, certs.path("client.crt"),
                         certs.path("client.key")) == "ok"
    assert tls_handshake(s.peer_port).startswith("refused")
    assert tls_handshake(s.peer_port, certs.path("stranger.crt"),
                         certs.path("stranger.key")).startswith("refused")
    assert plain_grpc_fails(s.peer_port)


def test_https_peer_url_needs_cert():
    out = refused_at_start(TLSServer([], client_tls=False, peer_tls=True))
    assert "KeyFile and CertFile are not presented" in out


def test_peer_unixs_socket(make_server):
    """A unixs:// peer URL is a unix socket speaking TLS.  etcd wants the
    host:port form and names the socket file after it, in its working
    directory (the server's root here)."""
    s = make_server(start=False)
    s.extra_args = ["--listen-peer-urls", "unixs://peer.sock:1",
                    "--peer-auto-tls"]
    sock = os.path.join(s.root, "peer.sock:1")
    s.start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.settimeout(5)
    raw.connect(sock)
    with ctx.wrap_socket(raw) as tls:
        assert tls.version().startswith("TLS")


def _client_ctx(cert, key, version):
    """A client context of exactly TLS version with this certificate,
    offering h2, trusting any server."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = version
    ctx.set_alpn_protocols(["h2"])
    ctx.load_cert_chain(cert, key)
    return ctx


def tls_accepts(port, cert, key):
    """True when the peer port keeps a TLS 1.2 connection with this client
    certificate: etcd refuses a disallowed one in the handshake, cetcd
    (the core's post-handshake verifier) closes right after it."""
    if tls_handshake(port, cert, key) != "ok":
        return False
    ctx = _client_ctx(cert, key, ssl.TLSVersion.TLSv1_2)
    return _session_try(ctx, port, wait=1.0)[0]


@pytest.mark.parametrize("flag,value,ok", [
    ("--peer-cert-allowed-cn", "example.com", True),
    ("--peer-cert-allowed-cn", "other.com", False),
    ("--peer-cert-allowed-hostname", "localhost", True),
    ("--peer-cert-allowed-hostname", "nothere.example", False),
])
def test_peer_cert_allowed_names(make_tls_server, flag, value, ok):
    f = lambda n: os.path.join(ETCD_FIXTURES, n)  # noqa: E731
    s = make_tls_server(
        ["--peer-cert-file", f("server.crt"),
         "--peer-key-file", f("server.key.insecure"),
         "--peer-trusted-ca-file", f("ca.crt"), "--peer-client-cert-auth",
         flag, value], client_tls=False, peer_tls=True)
    # server.crt: CN example.com, SANs localhost and 127.0.0.1.
    assert tls_accepts(s.peer_port, f("server.crt"),
                       f("server.key.insecure")) == ok


def peer_ca_args(certs, *more):
    return ["--peer-cert-file", certs.path("server.crt"),
            "--peer-key-file", certs.path("server.key"),
            "--peer-trusted-ca-file", certs.path("ca.crt"),
            "--peer-client-cert-auth"] + list(more)


def wait_log(s, pattern, timeout=10):
    servers.wait_log(s.log_path, pattern, timeout)


@pytest.mark.parametrize("who,skip,ok", [
    ("client", False, True),  # no SANs: nothing to compare
    ("near", False, True),    # IP SAN 127.0.0.1, the address it comes from
    ("far", False, False),    # IP SANs 10.0.0.1, 10.0.0.2 only
    ("far", True, True),      # the check switched off
])
def test_peer_client_cert_san(make_tls_server, certs, who, skip, ok):
    """The peer listener refuses a client certificate whose IP SANs do not
    include the address the client connects from (etcd 3.4's checkSAN,
    after its handshake), unless
    --experimental-peer-skip-client-san-verification; the refusal is
    logged with Go's words."""
    more = ["--experimental-peer-skip-client-san-verification"] if skip \
        else []
    s = make_tls_server(peer_ca_args(certs, *more), client_tls=False,
                        peer_tls=True)
    assert tls_accepts(s.peer_port, certs.path(who + ".crt"),
                       certs.path(who + ".key")) == ok
    if not ok:
        wait_log(s, r'rejected connection from "127\.0\.0\.1:\d+" \(error '
                 r'"x509: certificate is valid for 10\.0\.0\.1, 10\.0\.0\.2, '
                 r'not 127\.0\.0\.1", ServerName ""')


def _session_ctx(certs, who, version):
    return _client_ctx(certs.path(who + ".crt"), certs.path(who + ".key"),
                       version)


def _session_try(ctx, port, session=None, wait=2.0):
    """One TLS connection made with ctx: (kept open for wait seconds, the
    session for a resumption, whether this one was resumed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw, session=session) as tls:
                tls.settimeout(wait)
                try:
                    kept = tls.recv(64) != b""  # TLS 1.3 tickets come here
                except socket.timeout:
                    kept = True  # still open: accepted
                except (ssl.SSLError, OSError):
                    kept = False
                return kept, tls.session, tls.session_reused
        except (ssl.SSLError, OSError):
            return False, None, False


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2,
                                     ssl.TLSVersion.TLSv1_3])
def test_refused_certificate_cannot_resume(make_tls_server, certs, version):
    """A client certificate the peer listener refuses after its handshake
    (DNS SANs that do not resolve to the client's address) is refused
    again when the client resumes the TLS session it got: every handshake
    is checked, as etcd checks every connection.  cetcd offers no session
    resumption at all (a resumed handshake would skip the certificate
    checks); a certificate it accepts is not resumed either."""
    s = make_tls_server(peer_ca_args(certs), client_tls=False, peer_tls=True)
    ctx = _session_ctx(certs, "nowhere", version)
    kept, sess, _ = _session_try(ctx, s.peer_port)
    assert not kept
    if sess is not None:
        kept, _, _ = _session_try(ctx, s.peer_port, session=sess)
        assert not kept
    ctx = _session_ctx(certs, "near", version)
    kept, sess, _ = _session_try(ctx, s.peer_port)
    assert kept
    if not against_etcd() and sess is not None:
        kept, _, reused = _session_try(ctx, s.peer_port, session=sess)
        assert kept and not reused


def test_client_listener_no_san_check(make_tls_server, certs):
    """The client listener makes no SAN check (etcd's client listeners are
    not made by transport.NewListener): the same certificate is served."""
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt"),
                    "--client-cert-auth"),
        ready_creds=lambda: creds(certs))
    assert tls_accepts(s.client_port, certs.path("far.crt"),
                       certs.path("far.key"))


@pytest.mark.parametrize("value,near_ok", [("localhost", False),
                                           ("127.0.0.1", True)])
def test_client_cert_allowed_hostname(make_tls_server, certs, value,
                                      near_ok):
    """--client-cert-allowed-hostname (etcd 3.4.23 has it): the client
    listener accepts only client certificates valid for that hostname, by
    their SANs (server.crt: DNS localhost and IP 127.0.0.1; near.crt: IP
    127.0.0.1; client.crt: none)."""
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt"),
                    "--client-cert-auth",
                    "--client-cert-allowed-hostname", value),
        ready_creds=lambda: creds(certs, who="server"))
    assert range_ok(s, creds(certs, who="server"))
    assert tls_accepts(s.client_port, certs.path("near.crt"),
                       certs.path("near.key")) == near_ok
    assert not tls_accepts(s.client_port, certs.path("client.crt"),
                           certs.path("client.key"))
    wait_log(s, r'rejected connection from "127\.0\.0\.1:\d+" \(error '
             r'"client certificate authentication failed"')


def test_allowed_hostname_never_from_cn(make_tls_server, certs):
    """--client-cert-allowed-hostname is checked against the SANs only, as
    Go's VerifyHostname (Go 1.15 and later, which etcd 3.4.23 is built
    with): a certificate whose CN is the allowed host but which has no SAN
    is refused (OpenSSL's host check would fall back to the CN)."""
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt"),
                    "--client-cert-auth",
                    "--client-cert-allowed-hostname", "localhost"),
        ready_creds=lambda: creds(certs, who="server"))
    assert range_ok(s, creds(certs, who="server"))
    assert not tls_accepts(s.client_port, certs.path("cnhost.crt"),
                           certs.path("cnhost.key"))
    wait_log(s, r'rejected connection from "127\.0\.0\.1:\d+" \(error '
             r'"client certificate authentication failed"')


@pytest.mark.parametrize("who,ok", [
    ("client", True),  # no SANs: nothing to compare
    ("near", True),    # IP SAN 127.0.0.1, the address it comes from
    ("far", False),    # IP SANs 10.0.0.1, 10.0.0.2 only
])
def test_metrics_listener_san_check(make_tls_server, certs, who, ok):
    """An https --listen-metrics-urls listener serves with the client TLS
    material and, unlike the client listener, checks a client
    certificate's SANs against the address it comes from (etcd 3.4 makes
    it with transport.NewListener, whose checkSAN the peer listener has
    too)."""
    port = servers.free_port()
    s = make_tls_server(
        server_args(certs, "--trusted-ca-file", certs.path("ca.crt"),
                    "--client-cert-auth", "--listen-metrics-urls",
                    "https://127.0.0.1:%d" % port),
        ready_creds=lambda: creds(certs))
    assert tls_accepts(port, certs.path(who + ".crt"),
                       certs.path(who + ".key")) == ok
    if not ok:
        wait_log(s, r'rejected connection from "127\.0\.0\.1:\d+" \(error '
                 r'"x509: certificate is valid for 10\.0\.0\.1, 10\.0\.0\.2,'
                 r' not 127\.0\.0\.1"')


@pytest.mark.skipif(bool(os.environ.get("CETCD_TEST_AGAINST_ETCD")),
                    reason="cetcd's handshake timeout (grpc-go: 120 s)")
def test_stalled_handshake_and_preface_closed(make_tls_server, certs):
    """A TLS connection that never sends its ClientHello, and one that
    completes the handshake but never sends the HTTP/2 preface, are closed
    by the member after its 10 s limit; a normal client is served meanwhile.
    """
    s = make_tls_server(server_args(certs),
                        ready_creds=lambda: creds(certs, client=False))
    t0 = time.monotonic()
    silent = socket.create_connection(("127.0.0.1", s.client_port))
    ctx = ssl.create_default_context(cafile=certs.path("ca.crt"))
    raw = socket.create_connection(("127.0.0.1", s.client_port))
    tls = ctx.wrap_socket(raw, server_hostname="localhost")  # handshake
    assert ctl(s, *tls_ctl_args(certs, who=None), "put", "k", "v").rc == 0
    for sock in (silent, tls):
        sock.settimeout(15)
        try:
            while sock.recv(4096):  # the server's SETTINGS, then EOF
                pass
        except (ConnectionResetError, ssl.SSLError):
            pass
        sock.close()
    took = time.monotonic() - t0
    assert 9 < took < 14, took


# -- cipher suites and protocol versions ----------------------------------------
#
# --cipher-suites takes Go's suite names (etcd 3.4 and 3.5); TLS 1.3 suites
# are not configurable (Go ignores them), so only TLS 1.2 clients are
# limited.  --tls-min-version / --tls-max-version are etcd 3.5's (3.4.23
# lacks them: those tests run against cetcd only).  The certificates here
# are EC P-256, so the ECDSA suites are the ones a handshake can use.

ECDSA_128 = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"  # ECDHE-ECDSA-AES128-GCM-SHA256


def s_client(port, *args):
    """openssl s_client against 127.0.0.1:port: True when the handshake
    completed (it sends nothing and quits at stdin's EOF)."""
    cp = subprocess.run(["openssl", "s_client", "-brief", "-connect",
                         "127.0.0.1:%d" % port] + list(args),
                        input=b"", capture_output=True, timeout=30)
    return cp.returncode == 0 and b"CONNECTION ESTABLISHED" in cp.stderr


def tls12_with(port, openssl_cipher):
    """A TLS 1.2 handshake offering just one suite: True when accepted."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(openssl_cipher)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw) as tls:
                return tls.cipher()[0] == openssl_cipher
        except (ssl.SSLError, OSError):
            return False


def test_cipher_suites_limit_tls12(make_tls_server, certs):
    s = make_tls_server(server_args(certs, "--cipher-suites",
                                    ECDSA_128 + ",TLS_AES_128_GCM_SHA256"),
                        ready_creds=lambda: creds(certs, client=False))
    assert tls12_with(s.client_port, "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert not tls12_with(s.client_port, "ECDHE-ECDSA-AES256-GCM-SHA384")
    assert not tls12_with(s.client_port, "ECDHE-ECDSA-CHACHA20-POLY1305")
    # TLS 1.3 keeps its own suites, as Go does.
    assert s_client(s.client_port, "-tls1_3")
    # The peer listener gets the same list (etcd applies it to both).
    assert ctl(s, *tls_ctl_args(certs, who=None), "put", "k", "v").rc == 0


def test_cipher_suites_default_accepts_all(make_tls_server, certs):
    """Without the flag, the suite the test above refuses is offered."""
    s = make_tls_server(server_args(certs),
                        ready_creds=lambda: creds(certs, client=False))
    assert tls12_with(s.client_port, "ECDHE-ECDSA-AES256-GCM-SHA384")


def test_cipher_suites_peer_listener(make_tls_server, certs):
    s = make_tls_server(
        ["--peer-cert-file", certs.path("server.crt"),
         "--peer-key-file", certs.path("server.key"),
         "--cipher-suites", ECDSA_128], client_tls=False, peer_tls=True)
    assert tls12_with(s.peer_port, "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert not tls12_with(s.peer_port, "ECDHE-ECDSA-AES256-GCM-SHA384")


@pytest.mark.parametrize("value,word", [
    ("FOO", "FOO"),
    (ECDSA_128 + ",TLS_ECDHE_RSA_WITH_AES_128_GCM", "TLS_ECDHE_RSA_WITH_AES_128_GCM"),
])
def test_cipher_suites_unknown_name(value, word):
    out = refused_at_start(TLSServer(["--cipher-suites", value],
                                     client_tls=False))
    assert 'unexpected TLS cipher suite "%s"' % word in out, out


@pytest.mark.skipif(against_etcd(), reason="etcd 3.5 flags (3.4.23 lacks)")
def test_tls_min_version(make_tls_server, certs):
    s = make_tls_server(server_args(certs, "--tls-min-version", "TLS1.3"),
                        ready_creds=lambda: creds(certs, client=False))
    assert not s_client(s.client_port, "-tls1_2")
    assert s_client(s.client_port, "-tls1_3")
    assert "tls: client offered only unsupported versions" in \
        open(s.log_path).read()


@pytest.mark.skipif(against_etcd(), reason="etcd 3.5 flags (3.4.23 lacks)")
def test_tls_max_version(make_tls_server, certs):
    s = make_tls_server(server_args(certs, "--tls-max-version", "TLS1.2"),
                        ready_creds=lambda: creds(certs, client=False))
    assert s_client(s.client_port, "-tls1_2")
    assert not s_client(s.client_port, "-tls1_3")
    # etcdctl (Go, TLS 1.2 and 1.3) still gets in.
    assert ctl(s, *tls_ctl_args(certs, who=None), "put", "k", "v").rc == 0


@pytest.mark.skipif(against_etcd(), reason="etcd 3.5 flags (3.4.23 lacks)")
def test_tls13_only_suites_refuse_tls12(make_tls_server, certs):
    """Only TLS 1.3 names: nothing is left for TLS 1.2 (Go fails those
    handshakes too); TLS 1.3 works."""
    s = make_tls_server(server_args(certs, "--cipher-suites",
                                    "TLS_AES_128_GCM_SHA256"),
                        ready_creds=lambda: creds(certs, client=False))
    assert not s_client(s.client_port, "-tls1_2")
    assert s_client(s.client_port, "-tls1_3")


@pytest.mark.skipif(against_etcd(), reason="etcd 3.5 flags (3.4.23 lacks)")
@pytest.mark.parametrize("args,msg", [
    (["--tls-min-version", "TLS1.1"],
     'unexpected TLS version "TLS1.1" (must be one of: TLS1.2, TLS1.3)'),
    (["--tls-max-version", "tls1.3"],
     'unexpected TLS version "tls1.3" (must be one of: TLS1.2, TLS1.3)'),
    (["--tls-min-version", "TLS1.3", "--tls-max-version", "TLS1.2"],
     "min version (TLS1.3) is greater than max version (TLS1.2)"),
    (["--tls-min-version", "TLS1.3", "--cipher-suites", ECDSA_128],
     "cipher suites cannot be configured when only TLS1.3 is enabled"),
])
def test_tls_version_flags_refused(args, msg):
    out = refused_at_start(TLSServer(args, client_tls=False))
    assert "error verifying flags, %s. See 'etcd --help'." % msg in out, out


# -- certificate files re-read when they change --------------------------------

def peer_cert_der(port):
    """The DER certificate a new TLS connection to port is shown."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)


def der_of(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def replace_file(src, dst):
    """Rotates dst to src's bytes the way tools do (write aside, rename)."""
    tmp = dst + ".new"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def test_cert_rotation_under_load(make_tls_server, certs, tmp_path):
    """The server certificate is replaced on disk while a client keeps
    putting on one connection and another opens a new connection per put:
    no put fails, the old connection goes on, and new connections are
    shown the new certificate.  The key is renamed before the certificate,
    so for a moment the pair does not match: the member keeps serving with
    the old pair then.  etcd 3.4 fails the handshakes of that moment ("tls:
    private key does not match public key"), so against it only the rest
    is checked."""
    _make_leaf(certs.dir, "ca", "rotated", "rotated",
               "DNS:localhost,IP:127.0.0.1", "serverAuth,clientAuth")
    cert, key = str(tmp_path / "live.crt"), str(tmp_path / "live.key")
    shutil.copyfile(certs.path("server.crt"), cert)
    shutil.copyfile(certs.path("server.key"), key)
    s = make_tls_server(["--cert-file", cert, "--key-file", key],
                        ready_creds=lambda: creds(certs, client=False))
    assert peer_cert_der(s.client_port) == der_of(certs.path("server.crt"))
    stop, errors, counts = threading.Event(), [], [0, 0]

    def loop(i, fresh):
        ch = None
        while not stop.is_set() and counts[i] < 100000:
            if ch is None or fresh:
                ch = grpc.secure_channel(s.endpoint,
                                         creds(certs, client=False))
            try:
                rpc_pb2_grpc.KVStub(ch).Put(
                    rpc_pb2.PutRequest(key=b"k%d" % i, value=b"v"),
                    timeout=10)
                counts[i] += 1
            except grpc.RpcError as e:
                errors.append("%d: %s %s" % (i, e.code(), e.details()))
            if fresh:
                ch.close()
        if ch is not None:
            ch.close()

    threads = [threading.Thread(target=loop, args=(i, i == 1))
               for i in (0, 1)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        before = list(counts)
        replace_file(certs.path("rotated.key"), key)
        time.sleep(0.5)  # handshakes meanwhile: a mismatched pair on disk
        replace_file(certs.path("rotated.crt"), cert)
        deadline = time.monotonic() + 10
        while peer_cert_der(s.client_port) != der_of(certs.path(
                "rotated.crt")):
            assert time.monotonic() < deadline, "new certificate not served"
            time.sleep(0.1)
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    if not against_etcd():
        assert errors == []
    else:
        assert all(e.startswith("1: ") for e in errors), errors
    assert counts[0] > before[0] and counts[1] > before[1], (before, counts)
    # etcdctl verifying the (new) certificate against the CA still works.
    assert ctl(s, *tls_ctl_args(certs, who=None), "put", "k", "v").rc == 0


@pytest.mark.skipif(against_etcd(), reason="etcd 3.4 loads its CA bundle "
                    "once (etcd #11555)")
def test_trusted_ca_bundle_reload(make_tls_server, certs, tmp_path):
    """A CA added to the trusted CA file is trusted by new connections."""
    bundle = str(tmp_path / "cas.crt")
    shutil.copyfile(certs.path("ca.crt"), bundle)
    s = make_tls_server(server_args(certs, "--trusted-ca-file", bundle),
                        ready_creds=lambda: creds(certs))
    assert not range_ok(s, creds(certs, who="stranger"))
    both = str(tmp_path / "both.crt")
    with open(both, "wb") as f:
        f.write(certs.read("ca.crt") + certs.read("other-ca.crt"))
    os.replace(both, bundle)
    assert range_ok(s, creds(certs, who="stranger"))
    assert range_ok(s, creds(certs))


@pytest.mark.skipif(against_etcd(), reason="cetcd's log line")
def test_bad_files_keep_old_certificate(make_tls_server, certs, tmp_path):
    """A certificate file that does not parse is logged and the previous
    certificate stays in use."""
    cert = str(tmp_path / "live.crt")
    shutil.copyfile(certs.path("server.crt"), cert)
    s = make_tls_server(["--cert-file", cert,
                         "--key-file", certs.path("server.key")],
                        ready_creds=lambda: creds(certs, client=False))
    with open(cert + ".new", "w") as f:
        f.write("not a certificate\n")
    os.replace(cert + ".new", cert)
    assert peer_cert_der(s.client_port) == der_of(certs.path("server.crt"))
    assert range_ok(s, creds(certs, client=False))
    assert "TLS files changed but do not load" in open(s.log_path).read()


def test_rejected_connection_logged(make_tls_server, certs):
    """A refused handshake is logged as etcd logs it."""
    s = make_tls_server(server_args(certs, "--client-cert-auth",
                                    "--trusted-ca-file", certs.path("ca.crt")),
                        ready_creds=lambda: creds(certs))
    assert not range_ok(s, creds(certs, who="stranger"))
    deadline = time.monotonic() + 10
    while True:
        log = open(s.log_path).read()
        if 'rejected connection from "127.0.0.1:' in log:
            break
        assert time.monotonic() < deadline, s.log_tail()
        time.sleep(0.2)


def fake_peer_handshakes(port, cipher, want=2, seconds=15):
    """A TLS 1.2 listener on port offering only cipher (OpenSSL name), with
    etcd's fixture certificate, as a member the server under test dials:
    returns the outcome of each handshake ("ok" or "fail ...")."""
    f = lambda n: os.path.join(ETCD_FIXTURES, n)  # noqa: E731
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(f("server.crt"), f("server.key.insecure"))
    ctx.set_ciphers(cipher)
    ctx.set_alpn_protocols(["h2"])
    out = []
    with socket.socket() as ls:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", port))
        ls.listen(8)
        ls.settimeout(1)
        end = time.monotonic() + seconds
        while time.monotonic() < end and len(out) < want:
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            c.settimeout(5)
            try:
                with ctx.wrap_socket(c, server_side=True):
                    out.append("ok")
            except (ssl.SSLError, OSError) as e:
                out.append("fail %s" % e)
    return out


@pytest.mark.parametrize("suites,accepted", [
    (None, True),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", False),
])
def test_cipher_suites_peer_dialer(suites, accepted, tmp_path):
    """The member dials its peers offering only --cipher-suites' TLS 1.2
    suites (etcd's peer transport does): a peer that takes nothing but
    ECDHE-RSA-AES256-GCM-SHA384 has no suite in common with it."""
    from common.servers import free_port, server_bin
    f = lambda n: os.path.join(ETCD_FIXTURES, n)  # noqa: E731
    me, peer, client = free_port(), free_port(), free_port()
    args = [server_bin(), "--name", "m1", "--data-dir", str(tmp_path / "d"),
            "--listen-client-urls", "http://127.0.0.1:%d" % client,
            "--advertise-client-urls", "http://127.0.0.1:%d" % client,
            "--listen-peer-urls", "https://127.0.0.1:%d" % me,
            "--initial-advertise-peer-urls", "https://127.0.0.1:%d" % me,
            "--initial-cluster", "m1=https://127.0.0.1:%d,m2=https://"
            "127.0.0.1:%d" % (me, peer),
            "--peer-cert-file", f("server.crt"),
            "--peer-key-file", f("server.key.insecure"),
            "--peer-trusted-ca-file", f("ca.crt"), "--peer-client-cert-auth"]
    if suites:
        args += ["--cipher-suites", suites]
    with open(str(tmp_path / "log"), "wb") as log:
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        out = fake_peer_handshakes(peer, "ECDHE-RSA-AES256-GCM-SHA384")
    finally:
        p.kill()
        p.wait()
    assert out, "the member never dialled its peer"
    if accepted:
        assert out[0] == "ok", out
    else:
        assert all("NO_SHARED_CIPHER" in o for o in out), out
