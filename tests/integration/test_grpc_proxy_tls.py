"""`grpc-proxy start` in front of a member that serves TLS: KV through it,
and its /metrics page fetched from that member over TLS.

Goal: etcd 3.4.23's proxy fetches the first endpoint's /metrics with an
HTTP client built from the proxy's client TLS flags: an https://
endpoint over TLS; with --cacert, --cert and --key the CA verifies the
member and the certificate is offered; with --insecure-skip-tls-verify
nothing is verified.  cetcd's proxy answered 500 for every TLS endpoint
before (not built); now it answers as etcd's, each case below run
against both proxies, each in front of a server of its own kind.  Two
differences on purpose (better), each asserted on cetcd with etcd's
answer recorded on etcd: a bare "host:port" endpoint is asked over TLS
when the client has TLS material, as the gRPC side dials it (etcd's
asks it in plain HTTP, whatever the flags: 500 from a TLS member, which
logs "first record does not look like a TLS handshake"; its code means
to use TLS when the /metrics request came over TLS, but its listener
does not tell); with --cacert but no --cert/--key etcd's checks the
member against the system's CAs, not the one given, and fails (500)
where its gRPC side succeeds; cetcd's uses the CA given (200).  Also: a
member whose certificate the CA does not sign is refused (500), the
proxy still serving.

Method: a CA, a server certificate for 127.0.0.1 and a client certificate
without a common name (etcd's proxy refuses one with a CN, see
test_grpc_proxy_cli.py) made by openssl; each member is started with
--client-cert-auth where the case has a client certificate.
"""

import os
import ssl
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.grpcproxy import (  # noqa: E402
    KINDS, GrpcProxy, cetcd_as_etcd, kind_binary, require_cetcd_proxy)
from test_tls import TLSServer, _make_ca, _make_leaf  # noqa: E402


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("gptls"))
    _make_ca(d, "ca")
    _make_ca(d, "other")
    _make_leaf(d, "ca", "server", "server", "IP:127.0.0.1",
               "serverAuth,clientAuth")
    _make_leaf(d, "other", "stranger", "server", "IP:127.0.0.1",
               "serverAuth")
    _make_leaf(d, "ca", "client", None, None, "clientAuth", subj="/O=proxy")
    return lambda name: os.path.join(d, name)


def tls_member(binary, pki, client_auth, server="server"):
    args = ["--cert-file", pki(server + ".crt"),
            "--key-file", pki(server + ".key")]
    if client_auth:
        args += ["--trusted-ca-file", pki("ca.crt"), "--client-cert-auth"]
    ca = pki("ca.crt" if server == "server" else "other.crt")

    def creds():
        import grpc
        with open(ca, "rb") as f:
            root = f.read()
        if not client_auth:
            return grpc.ssl_channel_credentials(root)
        with open(pki("client.key"), "rb") as k, \
                open(pki("client.crt"), "rb") as c:
            return grpc.ssl_channel_credentials(root, k.read(), c.read())

    s = TLSServer(args, ready_creds=creds)
    s.binary = binary
    s.start()
    return s


def get(url, context=None):
    """(status, body) of one GET; HTTP errors are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=15, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_health(url, context=None, timeout=15):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            st, body = get(url + "/health", context)
            if st == 200:
                return
            last = (st, body)
        except OSError as e:
            last = e
        time.sleep(0.1)
    raise AssertionError("proxy not healthy at %s: %r" % (url, last))


def run_case(kind, pki, client_auth, proxy_flags, scheme="https",
             proxy_tls=False, server="server"):
    """Starts a member and a proxy of kind; returns (status, has_leader)
    of the proxy's /metrics, after a KV round trip through the proxy."""
    binary = kind_binary(kind)
    m = tls_member(binary, pki, client_auth, server)
    ep = (scheme + "://" if scheme else "") + m.endpoint
    extra = list(proxy_flags)
    ctx = None
    if proxy_tls:
        extra += ["--cert-file", pki("server.crt"),
                  "--key-file", pki("server.key")]
        ctx = ssl.create_default_context(cafile=pki("ca.crt"))
    p = GrpcProxy(binary, [ep], extra)
    try:
        p.start(wait=False)
        url = ("https://" if proxy_tls else "http://") + p.endpoint
        wait_health(url, ctx)
        st, body = get(url + "/metrics", ctx)
        return st, "etcd_server_has_leader 1\n" in body
    finally:
        p.close()
        m.stop()
        m.cleanup()


def each_kind(fn):
    require_cetcd_proxy()
    return {k: fn(k) for k in KINDS}


def flags(pki, ca=True, cert=True, skip=False):
    f = []
    if ca:
        f.append("--cacert=" + pki("ca.crt"))
    if cert:
        f += ["--cert=" + pki("client.crt"), "--key=" + pki("client.key")]
    if skip:
        f.append("--insecure-skip-tls-verify")
    return f


def test_metrics_https_endpoint_with_client_cert(pki):
    res = each_kind(lambda k: run_case(k, pki, True, flags(pki)))
    assert res == {k: (200, True) for k in KINDS}


@pytest.mark.parametrize("proxy_tls", [False, True])
def test_metrics_bare_endpoint(pki, proxy_tls):
    """A bare endpoint with the client's TLS flags: etcd's proxy asks it
    in plain HTTP (500), also when the /metrics request came over TLS;
    cetcd's over TLS, as its gRPC side dials it."""
    res = each_kind(lambda k: run_case(k, pki, True, flags(pki), scheme="",
                                       proxy_tls=proxy_tls))
    assert res["etcd"] == (500, False)
    want = (500, False) if cetcd_as_etcd() else (200, True)
    assert res["cetcd"] == want


def test_metrics_insecure_skip_verify(pki):
    res = each_kind(lambda k: run_case(
        k, pki, False, flags(pki, ca=False, cert=False, skip=True)))
    assert res == {k: (200, True) for k in KINDS}


def test_metrics_ca_only(pki):
    """--cacert alone: etcd's proxy verifies /metrics against the system's
    CAs (500); cetcd's with the CA given, as its gRPC side does."""
    res = each_kind(lambda k: run_case(k, pki, False,
                                       flags(pki, cert=False)))
    assert res["etcd"] == (500, False)
    want = (500, False) if cetcd_as_etcd() else (200, True)
    assert res["cetcd"] == want


def test_metrics_member_not_trusted(pki):
    """The member's certificate is not the CA's: refused (500), and the
    proxy goes on serving (its /health says the member is unreachable)."""
    res = each_kind(lambda k: run_case_untrusted(k, pki))
    assert res == {k: (500, 503) for k in KINDS}


def run_case_untrusted(kind, pki):
    binary = kind_binary(kind)
    m = tls_member(binary, pki, False, server="stranger")
    p = GrpcProxy(binary, ["https://" + m.endpoint],
                  flags(pki, cert=False))
    try:
        p.start(wait=False)
        url = "http://" + p.endpoint
        end = time.monotonic() + 15
        while True:  # up: /health answers (503: the member is not trusted)
            try:
                st_h, _ = get(url + "/health")
                break
            except OSError:
                assert time.monotonic() < end, p.log_tail()
                time.sleep(0.1)
        st, _ = get(url + "/metrics")
        return st, st_h
    finally:
        p.close()
        m.stop()
        m.cleanup()
