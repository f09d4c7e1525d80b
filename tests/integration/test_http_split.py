"""--listen-client-http-urls (etcd 3.5): HTTP on listeners of its own, gRPC
only on the client URLs.

Goal: with the flag set, the HTTP listener answers /health, /version,
/livez, /metrics and the /v3 JSON gateway (its calls counted in the gRPC
listener's grpc_server_* series, as etcd's gateway dials that listener),
plaintext and over TLS (the client TLS, https:// URLs; HTTP/1.1 and h2),
while etcdctl works on --listen-client-urls.  The split behaves as etcd
3.5's (embed/serve.go: cmux with only the HTTP/1 matcher on the HTTP
listener, a bare grpc-go server on the client URLs):
  - HTTP/1.1 on the gRPC listener: the server's HTTP/2 SETTINGS, then the
    connection closes at the bad preface (curl: "Received HTTP/0.9");
  - an HTTP/2 request that is not application/grpc on the gRPC listener
    (curl --http2-prior-knowledge, or --http2 over TLS): grpc-go's 415
    with grpc-status 3 and "invalid gRPC request content-type ...";
  - gRPC on the plaintext HTTP listener: the connection closes unanswered
    (no h2c there); over TLS (ALPN h2) it is an HTTP request: 404;
  - a URL in both lists, and an https:// HTTP URL without a certificate,
    are refused at start with etcd 3.5's messages.
Also the config-file key.

Method: black box with curl, etcdctl and the python gRPC stubs.  etcd
3.4.23 (the reference binary here) has no such flag and there is no etcd
3.5 binary on this machine: the expectations come from etcd 3.5's code
(server/embed/etcd.go configureClientListeners, serve.go) and grpc-go's
server transport, not from a run of etcd 3.5.
"""

import os
import subprocess

import grpc
import pytest

from common import h2raw
from common.servers import free_port
from conftest import Server, run_etcdctl
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc
from test_http import check_endpoints, curl
from test_tls import TLSServer, certs, creds, refused_at_start  # noqa: F401

pytestmark = pytest.mark.skipif(
    os.environ.get("CETCD_TEST_AGAINST_ETCD") == "1",
    reason="etcd 3.4.23 has no --listen-client-http-urls (etcd 3.5's)")


def curl_fails(url, *args):
    """curl's exit code and stderr for a request that must fail."""
    cp = subprocess.run(["curl", "-sS", "-m", "5"] + list(args) + [url],
                        capture_output=True, text=True, timeout=20)
    return cp.returncode, cp.stderr


def handled(text, method):
    for line in text.splitlines():
        if line.startswith("grpc_server_handled_total{") and \
                'grpc_method="%s"' % method in line and \
                'grpc_code="OK"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


class SplitServer(Server):
    """A member with --listen-client-http-urls on a port of its own."""

    def __init__(self, extra=(), tls=False):
        super().__init__(extra_args=list(extra))
        self.http_port = free_port()
        self.tls = tls
        self.creds = None

    @property
    def client_url(self):
        return ("https://" if self.tls else "http://") + self.endpoint

    @property
    def http_url(self):
        return ("https://localhost:%d" if self.tls else
                "http://127.0.0.1:%d") % self.http_port

    def args(self):
        return super().args() + ["--listen-client-http-urls", self.http_url]

    def probe_channel(self):
        if not self.tls:
            return super().probe_channel()
        return grpc.secure_channel(self.endpoint, self.creds)


def test_early_answer_resets_a_request_still_sending(make_server):
    """A request answered before its body ended (here: not gRPC on the
    gRPC-only listener) gets its whole answer, END_STREAM, then RST_STREAM
    NO_ERROR (RFC 9113 8.1: stop sending), as grpc-go's earlyAbortStream;
    without the reset a client that stopped sending waits forever."""
    s = SplitServer()
    try:
        s.start()
        c = h2raw.Conn(s.client_port)
        block = c.enc.encode([
            (":method", "POST"), (":scheme", "http"),
            (":path", "/v3/kv/range"), (":authority", "test"),
            ("content-type", "application/json")])
        c.send(h2raw.frame(h2raw.HEADERS, h2raw.END_HEADERS, 1, block))
        c.next_id = 3
        got = []
        while not got or got[-1][0] != h2raw.RST_STREAM:
            f = c.read_frame(timeout=5)
            assert f is not None, got
            if f[2] == 1:
                got.append(f)
        (t0, fl0, _, hb), (t1, _, _, rst) = got
        assert t0 == h2raw.HEADERS and fl0 & h2raw.END_STREAM
        hd = c.decode_headers(hb)
        assert hd[b":status"] == b"415" and hd[b"grpc-status"] == b"3"
        assert rst == b"\0\0\0\0"  # NO_ERROR
        # the connection serves on: a gRPC call on a new stream
        sid, out = c.request("/etcdserverpb.KV/Range",
                             h2raw.pb_bytes_field(1, b"foo"))
        c.send(out)
        while True:
            f = c.read_frame(timeout=5)
            assert f is not None
            if f[2] == sid and f[0] == h2raw.HEADERS and \
                    f[1] & h2raw.END_STREAM:
                assert c.decode_headers(f[3])[b"grpc-status"] == b"0"
                break
        c.close()
    finally:
        s.cleanup()


def test_http_on_its_own_listener(make_server):
    s = SplitServer()
    try:
        s.start()
        h = s.http_url
        # every endpoint, HTTP/1.1 (no h2c on this listener: below)
        check_endpoints(h, ["--http1.1"])
        st, _, metrics0 = curl(h + "/metrics")
        assert st == 200 and "etcd_server_has_leader 1" in metrics0
        st, _, body = curl(h + "/v3/kv/put", "-d",
                           '{"key":"Zm9v","value":"YmFy"}')
        assert st == 200 and '"revision":"2"' in body
        # gRPC (etcdctl) on the client URL sees the gateway's put
        got = run_etcdctl(s.endpoint, "get", "foo", "--print-value-only")
        assert got.out.strip() == "bar"
        run_etcdctl(s.endpoint, "put", "k2", "v2")
        st, _, body = curl(h + "/v3/kv/range", "-d", '{"key":"azI="}')
        assert st == 200 and '"value":"djI="' in body
        # the gateway's calls count in the gRPC listener's series
        metrics1 = curl(h + "/metrics")[2]
        assert handled(metrics1, "Range") >= handled(metrics0, "Range") + 1
        assert handled(metrics1, "Put") >= handled(metrics0, "Put") + 2

        # HTTP/1.1 on the gRPC-only listener: SETTINGS bytes, then closed
        rc, err = curl_fails(s.client_url + "/health")
        assert rc != 0 and "HTTP/0.9" in err, err
        # a non-gRPC HTTP/2 request there: grpc-go's 415
        st, hd, body = curl(s.client_url + "/health",
                            "--http2-prior-knowledge")
        assert st == 415 and body == ""
        assert hd["content-type"] == "application/grpc"
        assert hd["grpc-status"] == "3"
        assert hd["grpc-message"] == 'invalid gRPC request content-type ""'
        # (no body: curl 7.88 stops sending at an early answer and then
        # either waits or, on grpc-go's RST_STREAM NO_ERROR, fails: a race
        # on when the answer comes; the body case is checked frame by frame
        # in test_early_answer_resets_a_request_still_sending)
        st, hd, _ = curl(s.client_url + "/v3/kv/range",
                         "--http2-prior-knowledge", "-X", "POST", "-H",
                         "Content-Type: application/json")
        assert st == 415
        assert hd["grpc-message"] == \
            'invalid gRPC request content-type "application/json"'
        # gRPC on the plaintext HTTP listener: closed, unanswered
        ch = grpc.insecure_channel("127.0.0.1:%d" % s.http_port)
        with pytest.raises(grpc.RpcError) as e:
            rpc_pb2_grpc.KVStub(ch).Range(pb.RangeRequest(key=b"foo"),
                                          timeout=3)
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED)
        ch.close()
        rc, _ = curl_fails(h + "/health", "--http2-prior-knowledge")
        assert rc != 0
        # still serving both after all that
        assert curl(h + "/health")[0] == 200
        assert s.kv().Range(pb.RangeRequest(key=b"foo")).count == 1
    finally:
        s.cleanup()


def test_http_split_tls(certs):  # noqa: F811
    s = SplitServer(["--cert-file", certs.path("server.crt"),
                     "--key-file", certs.path("server.key")], tls=True)
    s.creds = creds(certs, False)
    ca = ["--cacert", certs.path("ca.crt")]
    try:
        s.start()
        # every endpoint on the HTTP listener, ALPN http/1.1 and h2
        check_endpoints(s.http_url, ["--http1.1", "--http2"], *ca)
        for proto in ("--http1.1", "--http2"):
            st, _, body = curl(s.http_url + "/v3/kv/put", proto, *ca, "-d",
                               '{"key":"Zm9v","value":"YmFy"}')
            assert st == 200, body
        got = run_etcdctl(s.endpoint, "--cacert", certs.path("ca.crt"),
                          "get", "foo", "--print-value-only")
        assert got.out.strip() == "bar"
        # h2 (ALPN) to the gRPC-only listener: grpc-go's 415
        st, hd, _ = curl("https://localhost:%d/health" % s.client_port,
                         "--http2", *ca)
        assert st == 415 and hd["grpc-status"] == "3"
        # HTTP/1.1 over TLS there: Go lets an http/1.1 client in without
        # ALPN, then grpc-go closes at the bad preface
        rc, err = curl_fails("https://localhost:%d/health" % s.client_port,
                             "--http1.1", "-v", *ca)
        assert rc != 0
        assert "server did not agree" in err, err  # no ALPN, as Go's
        # gRPC over TLS to the HTTP listener: an HTTP request there, 404
        ch = grpc.secure_channel("localhost:%d" % s.http_port, s.creds)
        with pytest.raises(grpc.RpcError) as e:
            rpc_pb2_grpc.KVStub(ch).Range(pb.RangeRequest(key=b"foo"),
                                          timeout=3)
        assert "404" in str(e.value.details()), e.value
        ch.close()
    finally:
        s.cleanup()


def test_same_url_in_both_lists_refused():
    s = Server()
    s.extra_args = ["--listen-client-http-urls", s.client_url]
    out = refused_at_start(s)
    assert ("cannot bind both --client-listen-urls and "
            "--client-listen-http-urls on the same url %s" % s.client_url) \
        in out, out


def test_https_http_url_needs_cert():
    s = Server()
    url = "https://127.0.0.1:%d" % free_port()
    s.extra_args = ["--listen-client-http-urls", url]
    out = refused_at_start(s)
    assert ("TLS key/cert (--cert-file, --key-file) must be provided for "
            "client url %s with HTTPS scheme" % url) in out, out


def test_config_file_key():
    s = SplitServer()
    conf = os.path.join(s.root, "etcd.conf.yml")
    with open(conf, "w") as f:
        f.write("name: m1\ndata-dir: %s\nlisten-client-urls: %s\n"
                "advertise-client-urls: %s\nlisten-peer-urls: %s\n"
                "initial-advertise-peer-urls: %s\n"
                "initial-cluster: m1=%s\n"
                "listen-client-http-urls: %s\n"
                % (s.data_dir, s.client_url, s.client_url, s.peer_url,
                   s.peer_url, s.peer_url, s.http_url))
    s.args = lambda: [s.binary, "--config-file", conf]
    try:
        s.start()
        st, _, body = curl(s.http_url + "/health")
        assert (st, body) == (200, '{"health":"true"}')
        rc, err = curl_fails(s.client_url + "/health")
        assert rc != 0 and "HTTP/0.9" in err
    finally:
        s.cleanup()


def test_env_variable(monkeypatch):
    """ETCD_LISTEN_CLIENT_HTTP_URLS sets the flag, as every ETCD_* does."""
    s = Server()
    port = free_port()
    monkeypatch.setenv("ETCD_LISTEN_CLIENT_HTTP_URLS",
                       "http://127.0.0.1:%d" % port)
    try:
        s.start()
        st, _, body = curl("http://127.0.0.1:%d/health" % port)
        assert (st, body) == (200, '{"health":"true"}')
        rc, _ = curl_fails(s.client_url + "/version")
        assert rc != 0
    finally:
        s.cleanup()
