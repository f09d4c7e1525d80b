"""HTTP on the client port, beside gRPC, as etcd serves it.

Goal: the client listener answers HTTP/1.1 (curl) and non-gRPC HTTP/2
requests with etcd's endpoints while gRPC keeps working on the same port:
/health (3.4: {"health":"true"} 200; {"health":"false"} 503 under an alarm,
?exclude= lifts it, 3.5's ?serializable=true, 405 for other methods),
/version, Go's 404; /livez and /readyz as etcd 3.6, with their per-check
sub-paths (/readyz/<check>; cetcd only: 3.4 has neither and answers 404);
/metrics in Prometheus text that python3-prometheus-client's parser takes,
with etcd's types; each of /health, /livez, /readyz, /version and /metrics
over plaintext HTTP/1.1, h2c (prior knowledge), TLS with ALPN http/1.1 and
TLS with ALPN h2 (check_endpoints); keep-alive and pipelined requests
answered in order; a garbage client gets 400 and a closed connection, a
slow one is cut off and neither stops other clients; --listen-metrics-urls
(http:// and https://, the latter with the client TLS, HTTP/1.1 and h2)
serves /metrics and /health only.

Method: black box, curl and raw sockets against a live member; every
expectation that etcd 3.4.23 shares is also checked against it
(CETCD_TEST_AGAINST_ETCD=1).  Where the two differ on purpose the test says
so: etcd 3.4 closes a plaintext HTTP/2 request that is not gRPC (cmux
matches HTTP/2 only by its grpc content-type) and keeps a slow client
forever; cetcd answers the first and cuts the second off after 10 s.
"""

import json
import os
import socket
import subprocess
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from common.servers import against_etcd, free_port
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc
from test_alarm_corrupt import activate
from test_quota import QUOTA, fill
from test_tls import TLSServer, certs, creds, server_args  # noqa: F401

# The version the server reports: etcd 3.4.23 its own, cetcd 3.4.31 by
# default (--experimental-reported-version, docs/ARCHITECTURE.md).
VERSION = "3.4.23" if against_etcd() else "3.4.31"

TEXT = "text/plain; charset=utf-8"


def curl(url, *args):
    """Runs curl -si; returns (status, headers (lower-case names), body)."""
    cp = subprocess.run(["curl", "-sS", "-i", "-m", "10"] + list(args) +
                        [url], capture_output=True, timeout=20)
    assert cp.returncode == 0, cp.stderr
    raw = cp.stdout
    # A 100-continue or the h2c upgrade's 101 may come first.
    while raw.startswith(b"HTTP/1.1 1"):
        raw = raw.split(b"\r\n\r\n", 1)[1]
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body.decode()


def test_health_version_and_404(server):
    url = server.client_url
    st, h, body = curl(url + "/health")
    assert (st, json.loads(body)) == (200, {"health": "true"})
    assert h["content-type"] == TEXT
    assert h["access-control-allow-origin"] == "*"
    st, h, body = curl(url + "/version")
    assert st == 200 and h["content-type"] == "application/json"
    assert body == '{"etcdserver":"%s","etcdcluster":"3.4.0"}' % VERSION
    st, h, body = curl(url + "/no/such/path")
    assert (st, body) == (404, "404 page not found\n")
    assert h["x-content-type-options"] == "nosniff"
    st, h, body = curl(url + "/health", "-X", "POST")
    assert (st, body, h["allow"]) == (405, "Method Not Allowed\n", "GET")
    # etcd 3.5's ?serializable=true (a local read, no leader check; etcd
    # 3.4 ignores it): the same answer on a healthy member; any other
    # value is the default linearizable check.
    for q in ("?serializable=true", "?serializable=false",
              "?serializable=yes"):
        st, h, body = curl(url + "/health" + q)
        assert (st, body) == (200, '{"health":"true"}'), q
        assert h["content-type"] == TEXT
    # gRPC still works on the same port.
    server.kv().Put(pb.PutRequest(key=b"http-k", value=b"v"))
    assert server.kv().Range(pb.RangeRequest(key=b"http-k")).count == 1


def test_http2_requests(server):
    url = server.client_url
    # curl --http2 on plain text asks for an h2c upgrade, which etcd (Go)
    # ignores: an HTTP/1.1 answer.
    st, _, body = curl(url + "/health", "--http2")
    assert (st, json.loads(body)) == (200, {"health": "true"})
    cp = subprocess.run(["curl", "-sS", "-m", "5", "--http2-prior-knowledge",
                         "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                         url + "/version"], capture_output=True, text=True)
    if against_etcd():
        assert cp.returncode != 0  # etcd 3.4 closes it (cmux)
    else:
        assert cp.stdout == "200 2"
        st, h, body = curl(url + "/version", "--http2-prior-knowledge")
        assert st == 200 and json.loads(body)["etcdserver"] == VERSION
        st, _, body = curl(url + "/nope", "--http2-prior-knowledge")
        assert (st, body) == (404, "404 page not found\n")


def fetch(url, *args):
    """Runs curl; returns (HTTP version as curl names it: "1.1", "2";
    status, body)."""
    cp = subprocess.run(["curl", "-sS", "-m", "10", "-w",
                         "\n%{http_code} %{http_version}"] + list(args) +
                        [url], capture_output=True, text=True, timeout=20)
    assert cp.returncode == 0, (url, args, cp.stderr)
    body, _, tail = cp.stdout.rpartition("\n")
    code, version = tail.split()
    return version, int(code), body


def _version_ok(body):
    return json.loads(body) == {"etcdserver": VERSION, "etcdcluster": "3.4.0"}


# What a healthy member's endpoints answer with 200, by path.
SHAPES = {
    "/health": lambda b: json.loads(b) == {"health": "true"},
    "/livez": lambda b: b == "ok\n",
    "/readyz": lambda b: b == "ok\n",
    "/version": _version_ok,
    "/metrics": lambda b: "\netcd_server_has_leader 1\n" in b and
    "# TYPE etcd_server_has_leader gauge\n" in b,
}
# /livez and /readyz are etcd 3.6's: etcd 3.4 answers 404.
ENDPOINTS = [p for p in SHAPES
             if not (against_etcd() and p in ("/livez", "/readyz"))]
# The HTTP version each curl option must end up with.
PROTOS = {"--http1.1": "1.1", "--http2": "2",
          "--http2-prior-knowledge": "2"}


def check_endpoints(base, protos, *args, paths=ENDPOINTS):
    """Fetches every path in paths from base with each curl option in
    protos (and args); each must answer 200 over the HTTP version the
    option asks for, with the body SHAPES expects.  Collects every miss
    before failing, so one run shows the whole matrix."""
    bad = []
    for proto in protos:
        for path in paths:
            version, st, body = fetch(base + path, proto, *args)
            try:
                shape = SHAPES[path](body)
            except ValueError:  # not JSON
                shape = False
            if (version, st) != (PROTOS[proto], 200) or not shape:
                bad.append((proto, path, version, st, body[:120]))
    assert bad == []


def test_endpoints_plaintext(server):
    """Every endpoint over HTTP/1.1 and over h2c with prior knowledge (no
    upgrade) on the plaintext client listener.  etcd 3.4 closes the
    latter (cmux: test_http2_requests), so against it HTTP/1.1 only."""
    protos = ["--http1.1"] + ([] if against_etcd()
                              else ["--http2-prior-knowledge"])
    check_endpoints(server.client_url, protos)


def test_http_over_tls(certs):  # noqa: F811
    """Every endpoint over TLS on the client listener, ALPN http/1.1 and
    h2, while gRPC works on the same port."""
    s = TLSServer(server_args(certs), ready_creds=lambda: creds(certs, False))
    s.start()
    try:
        url = "https://localhost:%d" % s.client_port
        ca = ["--cacert", certs.path("ca.crt")]
        check_endpoints(url, ["--http1.1", "--http2"], *ca)
        st, _, body = curl(url + "/nope", "--http2", *ca)
        assert (st, body) == (404, "404 page not found\n")
        kv = rpc_pb2_grpc.KVStub(s.probe_channel())
        r = kv.Range(pb.RangeRequest(key=b"x"))  # gRPC over TLS too
        assert r.count == 0
    finally:
        s.cleanup()


def read_answers(sock, n, timeout=5):
    """Reads n HTTP/1.1 answers (Content-Length framed) from sock."""
    sock.settimeout(timeout)
    buf, out = b"", []
    while len(out) < n:
        while b"\r\n\r\n" not in buf:
            d = sock.recv(65536)
            assert d, "closed after %d answers" % len(out)
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        length = 0
        for ln in head.split(b"\r\n")[1:]:
            k, v = ln.split(b":", 1)
            if k.lower() == b"content-length":
                length = int(v)
        while len(buf) < length:
            d = sock.recv(65536)
            assert d
            buf += d
        out.append((int(head.split()[1]), buf[:length]))
        buf = buf[length:]
    return out, buf


def test_keep_alive_and_pipelining(server):
    s = socket.create_connection(("127.0.0.1", server.client_port))
    req = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n"
    # Three requests in one write: three answers, in order.
    s.sendall(req % b"/health" + req % b"/version" + req % b"/nope")
    answers, rest = read_answers(s, 3)
    assert [a[0] for a in answers] == [200, 200, 404]
    assert json.loads(answers[1][1])["etcdcluster"] == "3.4.0"
    assert rest == b""
    # The connection stayed open (keep-alive); a request split in two
    # writes is answered too; Connection: close ends it after the answer.
    s.sendall(b"GET /heal")
    time.sleep(0.2)
    s.sendall(b"th HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answers, rest = read_answers(s, 1)
    assert answers[0][0] == 200 and rest == b""
    s.settimeout(5)
    assert s.recv(100) == b""
    s.close()
    # A client that half-closes after its requests still gets every
    # answer, then the end of the stream.
    s = socket.create_connection(("127.0.0.1", server.client_port))
    s.sendall(req % b"/health" + req % b"/nope")
    s.shutdown(socket.SHUT_WR)
    answers, rest = read_answers(s, 2)
    assert [a[0] for a in answers] == [200, 404] and rest == b""
    assert s.recv(100) == b""
    s.close()


def test_many_pipelined_requests(server):
    """More requests than the runtime answers at once (16): all answered,
    in order, while the client writes them all before reading."""
    s = socket.create_connection(("127.0.0.1", server.client_port))
    n = 200
    s.sendall(b"".join(b"GET /no%d HTTP/1.1\r\nHost: x\r\n\r\n" % i
                       for i in range(n)))
    answers, _ = read_answers(s, n, timeout=10)
    assert [a[0] for a in answers] == [404] * n
    s.close()


def test_garbage_and_slow_clients(server):
    port = server.client_port
    bad = socket.create_connection(("127.0.0.1", port))
    bad.sendall(b"\x16\x03garbage that is no request\r\n\r\n")
    bad.settimeout(5)
    data = b""
    while True:
        d = bad.recv(4096)
        if not d:
            break
        data += d
    # etcd's cmux closes a connection that is neither HTTP/1 nor gRPC;
    # cetcd answers Go's 400 first, then closes.
    assert against_etcd() or data.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    bad.close()
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never ends
    silent = socket.create_connection(("127.0.0.1", port))
    # One that was served once, then stalls in its second request.
    later = socket.create_connection(("127.0.0.1", port))
    later.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_answers(later, 1)[0][0][0] == 200
    later.sendall(b"GET /version HTTP/1.1\r\n")
    t0 = time.monotonic()
    # Others keep working meanwhile, over HTTP and gRPC.
    st, _, body = curl(server.client_url + "/health")
    assert st == 200
    server.kv().Put(pb.PutRequest(key=b"slow", value=b"v"))
    assert time.monotonic() - t0 < 5
    if against_etcd():
        for c in (slow, silent, later):
            c.close()  # etcd 3.4 sets no read timeout: they would wait
        return
    for c in (slow, silent, later):
        c.settimeout(15)
        assert c.recv(100) == b""  # cut off after the 10 s limit
        c.close()
    assert 9 < time.monotonic() - t0 < 14


def test_head_too_large_is_refused(server):
    # Go refuses heads over 1 MiB; cetcd over 64 KiB (http.h), so a head
    # over both is refused by both.
    s = socket.create_connection(("127.0.0.1", server.client_port))
    s.sendall(b"GET / HTTP/1.1\r\nX: " + b"a" * (1100 * 1024))
    s.settimeout(5)
    data = s.recv(4096)
    assert data.startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
    s.close()


def test_metrics_parse_and_types(server):
    server.kv().Put(pb.PutRequest(key=b"m", value=b"v"))
    st, h, body = curl(server.client_url + "/metrics")
    assert st == 200
    assert h["content-type"].startswith("text/plain; version=0.0.4")
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    want = {
        "etcd_server_has_leader": "gauge",
        "etcd_server_leader_changes_seen": "counter",
        "etcd_server_proposals_committed_total": "gauge",
        "etcd_server_proposals_applied_total": "gauge",
        "etcd_server_proposals_pending": "gauge",
        "etcd_server_proposals_failed": "counter",
        "etcd_mvcc_db_total_size_in_bytes": "gauge",
        "etcd_mvcc_db_total_size_in_use_in_bytes": "gauge",
        "etcd_server_quota_backend_bytes": "gauge",
        "process_resident_memory_bytes": "gauge",
        "process_cpu_seconds": "counter",
        "process_open_fds": "gauge",
    }
    for name, typ in want.items():
        assert fams[name].type == typ, name
    for name, label, v in (("etcd_server_version", "server_version",
                             VERSION),
                            ("etcd_cluster_version", "cluster_version", "3.4")):
        assert fams[name].type == "gauge"
        assert [(s.labels, s.value) for s in fams[name].samples] == \
            [({label: v}, 1)]
    value = {s.name: s.value for f in fams.values() for s in f.samples}
    assert value["etcd_server_is_leader"] == 1
    # A healthy check is counted (the parser names a counter's sample
    # with _total).
    assert fams["etcd_server_health_success"].type == "counter"
    assert fams["etcd_server_health_failures"].type == "counter"
    ok0 = value["etcd_server_health_success_total"]
    assert curl(server.client_url + "/health")[0] == 200
    fams = {f.name: f for f in text_string_to_metric_families(
        curl(server.client_url + "/metrics")[2])}
    assert fams["etcd_server_health_success"].samples[0].value == ok0 + 1
    assert fams["etcd_server_health_failures"].samples[0].value == 0
    assert value["etcd_server_is_learner"] == 0
    assert value["etcd_server_has_leader"] == 1
    assert value["etcd_server_leader_changes_seen_total"] >= 1
    assert value["etcd_server_proposals_applied_total"] >= 1
    assert value["etcd_server_quota_backend_bytes"] == 2 ** 31
    assert value["etcd_mvcc_db_total_size_in_bytes"] > 0
    assert value["process_resident_memory_bytes"] > 1e6
    assert value["process_open_fds"] > 3


def test_health_under_nospace_alarm(make_server):
    s = make_server(["--quota-backend-bytes", str(QUOTA)])
    fill(s.kv())  # raises the NOSPACE alarm
    st, h, body = curl(s.client_url + "/health")
    assert (st, body) == (503, '{"health":"false"}\n')
    assert h["x-content-type-options"] == "nosniff"
    st, _, body = curl(s.client_url + "/health?exclude=NOSPACE")
    assert (st, body) == (200, '{"health":"true"}')
    st, _, _ = curl(s.client_url + "/health?exclude=CORRUPT")
    assert st == 503
    # etcd 3.5's ?serializable=true skips the leader check and reads the
    # local store, not the alarms: they fail it as /health (etcd 3.4
    # ignores the option: the same answers).
    st, _, body = curl(s.client_url + "/health?serializable=true")
    assert (st, body) == (503, '{"health":"false"}\n')
    st, _, body = curl(s.client_url +
                       "/health?serializable=true&exclude=NOSPACE")
    assert (st, body) == (200, '{"health":"true"}')
    # etcd 3.4's log line names the alarm as its AlarmMember's text.
    mid = s.kv().Range(pb.RangeRequest(key=b"x")).header.member_id
    with open(s.log_path, errors="replace") as f:
        log = f.read()
    assert "/health error due to memberID:%d alarm:NOSPACE \n" % mid in log


@pytest.mark.skipif(against_etcd(), reason="/livez, /readyz are etcd 3.6's")
def test_livez_readyz(server):
    """etcd 3.6's root handlers: "ok\n"; under ?verbose a line per check
    run first (in etcd's map order, which varies: ours is fixed); an
    excluded check is neither run nor listed; an unknown exclusion is
    ignored."""
    url = server.client_url
    assert curl(url + "/livez")[::2] == (200, "ok\n")
    assert curl(url + "/readyz")[::2] == (200, "ok\n")
    st, _, body = curl(url + "/readyz?verbose")
    assert st == 200
    assert body == ("[+]data_corruption ok\n[+]serializable_read ok\n"
                    "[+]linearizable_read ok\nok\n")
    st, _, body = curl(url + "/livez?verbose&exclude=serializable_read")
    assert (st, body) == (200, "ok\n")
    st, _, body = curl(url + "/readyz?verbose&exclude=serializable_read"
                       "&exclude=nope")
    assert (st, body) == (200, "[+]data_corruption ok\n"
                          "[+]linearizable_read ok\nok\n")


@pytest.mark.skipif(against_etcd(), reason="/livez, /readyz are etcd 3.6's")
def test_livez_readyz_sub_paths(server):
    """etcd 3.6's per-check sub-paths: /readyz/<check> runs that check
    only, whatever ?exclude= says, and answers with its own handler's
    bodies ("ok\n"; the check's line first with ?verbose; a failure is
    http.Error's, the line and a newline); a name that is no check of that
    endpoint is Go's 404; other methods 405 (the roots' too)."""
    url = server.client_url
    for path in ("/livez/serializable_read", "/readyz/data_corruption",
                 "/readyz/serializable_read", "/readyz/linearizable_read"):
        st, h, body = curl(url + path)
        assert (st, body) == (200, "ok\n"), path
        assert h["content-type"] == TEXT
        assert h["x-content-type-options"] == "nosniff"
    st, _, body = curl(url + "/readyz/linearizable_read?verbose")
    assert (st, body) == (200, "[+]linearizable_read ok\nok\n")
    st, _, body = curl(url + "/livez/serializable_read?verbose"
                       "&exclude=serializable_read")
    assert (st, body) == (200, "[+]serializable_read ok\nok\n")
    for path in ("/readyz/nope", "/livez/linearizable_read",
                 "/livez/data_corruption", "/readyz/", "/livez/",
                 "/readyz/linearizable_read/", "/readyz/linearizable_readx"):
        assert curl(url + path)[::2] == (404, "404 page not found\n"), path
    for path in ("/readyz/linearizable_read", "/readyz", "/livez"):
        st, h, body = curl(url + path, "-X", "POST")
        assert (st, body, h["allow"]) == (405, "Method Not Allowed\n",
                                          "GET"), path
    # A CORRUPT alarm fails data_corruption alone.
    activate(server, pb.CORRUPT)
    st, h, body = curl(url + "/readyz/data_corruption?verbose")
    assert (st, body) == (503, "[-]data_corruption failed: alarm "
                          "activated: CORRUPT\n\n")
    assert h["content-type"] == TEXT
    st, _, body = curl(url + "/readyz/data_corruption")
    assert (st, body) == (503, "[-]data_corruption failed: alarm "
                          "activated: CORRUPT\n\n")
    assert curl(url + "/readyz/serializable_read")[::2] == (200, "ok\n")
    assert curl(url + "/readyz/linearizable_read")[::2] == (200, "ok\n")
    assert curl(url + "/livez/serializable_read")[::2] == (200, "ok\n")
    assert curl(url + "/readyz")[::2] == (503, "[-]data_corruption failed: "
                                          "alarm activated: CORRUPT\n[+]"
                                          "serializable_read ok\n[+]"
                                          "linearizable_read ok\n\n")
    assert curl(url + "/readyz?exclude=data_corruption")[::2] == (200,
                                                                  "ok\n")


def test_listen_metrics_urls(make_server):
    port = free_port()
    s = make_server(["--listen-metrics-urls", "http://127.0.0.1:%d" % port])
    url = "http://127.0.0.1:%d" % port
    st, _, body = curl(url + "/metrics")
    assert st == 200 and "etcd_server_has_leader 1" in body
    # HTTP/1.1 and h2c with prior knowledge, as on the client listener
    # (etcd 3.4's metrics listener is a plain net/http server: no h2c)
    check_endpoints(url, ["--http1.1"] + ([] if against_etcd()
                                          else ["--http2-prior-knowledge"]),
                    paths=["/metrics", "/health"])
    st, h, body = curl(url + "/health")
    assert (st, json.loads(body)) == (200, {"health": "true"})
    assert "access-control-allow-origin" not in h  # no CORS there
    assert curl(url + "/version")[0] == 404
    assert s.kv().Range(pb.RangeRequest(key=b"x")).count == 0


def test_listen_metrics_urls_https(certs):  # noqa: F811
    """An https:// --listen-metrics-urls URL is served with the client
    TLS configuration (etcd: the client's TLS info): /metrics and /health
    over TLS with the CA, ALPN http/1.1 and h2, nothing else; plaintext
    HTTP to that port is closed unanswered, as etcd 3.4 does."""
    port = free_port()
    s = TLSServer(server_args(certs, "--listen-metrics-urls",
                              "https://127.0.0.1:%d" % port),
                  ready_creds=lambda: creds(certs, False))
    s.start()
    try:
        url = "https://127.0.0.1:%d" % port
        ca = ["--cacert", certs.path("ca.crt")]
        check_endpoints(url, ["--http1.1", "--http2"], *ca,
                        paths=["/metrics", "/health"])
        st, _, body = curl(url + "/health?serializable=true", *ca)
        assert (st, body) == (200, '{"health":"true"}')
        assert curl(url + "/version", *ca)[0] == 404
        # a client that does not trust the CA is refused
        cp = subprocess.run(["curl", "-sS", "-m", "5", url + "/health"],
                            capture_output=True, text=True, timeout=20)
        assert cp.returncode == 60, cp.stderr  # peer certificate
        # plaintext HTTP to the TLS port
        cp = subprocess.run(["curl", "-sS", "-m", "5", "-o", "/dev/null",
                             "-w", "%{http_code}",
                             "http://127.0.0.1:%d/health" % port],
                            capture_output=True, text=True, timeout=20)
        # closed unanswered: etcd 3.4 with a FIN (curl 52, "Empty reply
        # from server"), cetcd with a reset (56, the request left unread)
        assert cp.stdout == "000" and cp.returncode in (52, 56), cp.stderr
        # the client port keeps serving
        st, _, body = curl(s.client_url + "/health", *ca)
        assert (st, body) == (200, '{"health":"true"}')
    finally:
        s.cleanup()


def test_expect_100_continue(server):
    """A client that asks "Expect: 100-continue" (curl, for a large body)
    gets the interim 100 Continue before it sends its body, then the
    answer.  etcd (Go) sends the 100 only when the handler reads the body,
    which its 404 handler does not: it answers at once instead."""
    s = socket.create_connection(("127.0.0.1", server.client_port))
    s.sendall(b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
              b"Expect: 100-continue\r\n\r\n")
    s.settimeout(5)
    first = s.recv(4096)
    if against_etcd():
        assert first.startswith(b"HTTP/1.1 404 Not Found\r\n")
        return
    assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
    s.sendall(b"hello")
    answers, rest = read_answers(s, 1)
    assert answers == [(404, b"404 page not found\n")] and rest == b""
    s.close()
