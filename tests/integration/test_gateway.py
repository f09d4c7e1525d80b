"""etcd's /v3 JSON gateway, compared with etcd 3.4.23's.

Goal: the same sequence of gateway requests, sent with curl (a real HTTP
client) to cetcd and to a real /usr/bin/etcd started by the test, gets the
same HTTP statuses and the same bodies once member/cluster ids, terms,
sizes and hashes are normalised: every unary method of KV, Lease (and its
/v3/kv/lease/ aliases), Cluster, Maintenance, Lock and Election, the
/v3beta/ prefix, and the errors (bad JSON, a bad field, an unknown path, a
wrong method, an empty key, a compacted revision, unknown lease and
member).  Over TLS and HTTP/2 (curl --http2 on https) a range answers the
same JSON.

Method: two single members from conftest's Server (one on cetcd's binary,
one on /usr/bin/etcd), fresh data dirs, so revisions match; each step's
body is a template filled from earlier answers of the same server (the
ids of a learner it added).  Known difference, normalised: the text of a
JSON syntax error (Go's decoder messages against json-c's); both are code
3, status 400, error == message.

Streams (api/gw_stream.c): /v3/watch, /v3/lease/keepalive,
/v3/election/observe, /v3/maintenance/snapshot and the waits
/v3/lock/lock, /v3/election/campaign sent with curl -N to both (a time
limit ends the ones that stay open): statuses and lines equal once ids,
leases, lock keys and snapshot bytes are normalised (etcd's trailer after
a waiting call's error is not compared).  With a raw client
(tests/common/gwstream.py): a client that drops its connection frees its
watchers (the watcher gauge) and its waiting Lock's key; a client that
does not read holds bounded memory and later gets every event once.
Request bodies that stay open (a watch fed on an open body):
test_gateway_body.py.
"""
import base64
import concurrent.futures
import json
import os
import re
import subprocess
import time

import pytest
from etcd3.etcdrpc import rpc_pb2 as pb

from common.gwstream import GwStream
from common.servers import ETCD_BIN, LONG, LONG_REASON, free_port
from conftest import Server
from test_tls import TLSServer, certs, creds, server_args  # noqa: F401

IDS = {"cluster_id", "member_id", "raft_term", "leader", "raftIndex",
       "raftTerm", "raftAppliedIndex", "dbSize", "dbSizeInUse", "version",
       "hash", "ID", "clientURLs", "peerURLs"}


def curl(url, method="POST", body=None, *extra):
    args = ["curl", "-sS", "-m", "10", "-X", method, "-w", "\n%{http_code}"]
    args += list(extra)
    if body is not None:
        args += ["--data-binary", body]
    cp = subprocess.run(args + [url], capture_output=True, text=True,
                        timeout=20)
    assert cp.returncode == 0, cp.stderr
    text, status = cp.stdout.rsplit("\n", 1)
    return int(status), text


def norm(v, key=None):
    if isinstance(v, dict):
        return {k: norm(x, k) for k, x in v.items()}
    if isinstance(v, list):
        out = [norm(x, key) for x in v]
        if key == "members":  # member ids are random: order by the rest
            out.sort(key=lambda m: json.dumps(m, sort_keys=True))
        return out
    if key in IDS:
        return "<%s>" % key
    return v


def normalised(status, text, path=""):
    try:
        body = json.loads(text)
    except ValueError:
        return status, text
    if isinstance(body, dict) and "error" in body and body.get("code") == 3 \
            and body["error"].startswith(("invalid character", "unexpected",
                                          "json-c", "object", "array",
                                          "unexpected end", "quoted",
                                          "string", "number", "literal",
                                          "expected")):
        # a JSON syntax error: the texts differ (Go's decoder vs json-c)
        assert body["error"] == body["message"]
        body = {"error": "<syntax>", "message": "<syntax>", "code": 3}
    if path.endswith("timetolive") and isinstance(body, dict) and \
            int(body.get("TTL", "0")) > 0:
        body["TTL"] = "<remaining>"  # seconds left: timing
    if path.endswith("member/update") and isinstance(body, dict) and \
            "members" in body:
        # etcd 3.4's MemberUpdate drops isLearner from the member it
        # updates (its RaftAttributes are replaced whole; fixed in 3.5):
        # cetcd keeps it
        for m in body["members"]:
            m.pop("isLearner", None)
    return status, norm(body)


# (method, path, body template): @name@ is replaced from ctx.
STEPS = [
    ("POST", "/v3/kv/put", '{"key":"Zm9v","value":"YmFy"}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v"}'),
    ("POST", "/v3/kv/put", '{"key":"Zm9vMg==","value":"YmF6","prev_kv":true}'),
    ("POST", "/v3/kv/put", '{"key":"Zm9vMg==","value":"eA==","prevKv":true}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v","range_end":"Zm9w",'
     '"sort_order":"DESCEND","sortTarget":"MOD","limit":"1"}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v","range_end":"Zm9w",'
     '"count_only":true}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v","range_end":"Zm9w",'
     '"keys_only":true,"revision":"2"}'),
    ("POST", "/v3beta/kv/range", '{"key":"Zm9v"}'),
    ("POST", "/v3/kv/txn", '{"compare":[{"key":"Zm9v","target":"VALUE",'
     '"result":"EQUAL","value":"YmFy"}],"success":[{"request_put":'
     '{"key":"Zm9v","value":"YmFyMg=="}},{"request_range":{"key":"Zm9v"}}],'
     '"failure":[{"request_range":{"key":"Zm9v"}}]}'),
    ("POST", "/v3/kv/txn", '{"compare":[{"key":"Zm9v","target":"CREATE",'
     '"result":"LESS","create_revision":"1"}],"success":[{"request_put":'
     '{"key":"eA==","value":"eA=="}}],"failure":[{"request_delete_range":'
     '{"key":"eg==","prev_kv":true}},{"request_txn":{}}]}'),
    ("POST", "/v3/kv/deleterange", '{"key":"Zm9vMg==","prev_kv":true}'),
    ("POST", "/v3/kv/deleterange", '{"key":"bm8="}'),
    ("POST", "/v3/kv/compaction", '{"revision":"3"}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v","revision":"2"}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v","revision":"99"}'),
    ("POST", "/v3/kv/compaction", '{"revision":"2"}'),
    ("POST", "/v3/lease/grant", '{"TTL":"60","ID":"7777"}'),
    ("POST", "/v3/lease/grant", '{"TTL":"60","ID":"7777"}'),
    ("POST", "/v3/kv/put", '{"key":"bA==","value":"dg==","lease":"7777"}'),
    ("POST", "/v3/lease/timetolive", '{"ID":"7777","keys":true}'),
    ("POST", "/v3/kv/lease/timetolive", '{"ID":"7777"}'),
    ("POST", "/v3/lease/timetolive", '{"ID":"1"}'),
    ("POST", "/v3/lease/leases", '{}'),
    ("POST", "/v3/kv/lease/leases", ''),
    ("POST", "/v3/kv/put", '{"key":"bA==","value":"dg==","lease":"1"}'),
    ("POST", "/v3/lease/revoke", '{"ID":"7777"}'),
    ("POST", "/v3/kv/lease/revoke", '{"ID":"7777"}'),
    ("POST", "/v3/kv/range", '{"key":"bA=="}'),
    ("POST", "/v3/cluster/member/list", '{}'),
    ("POST", "/v3/cluster/member/add",
     '{"peerURLs":["@peer@"],"isLearner":true}'),
    ("POST", "/v3/cluster/member/list", '{}'),
    ("POST", "/v3/cluster/member/promote", '{"ID":"@learner@"}'),
    ("POST", "/v3/cluster/member/update",
     '{"ID":"@learner@","peerURLs":["@peer@"]}'),
    ("POST", "/v3/cluster/member/remove", '{"ID":"@learner@"}'),
    ("POST", "/v3/cluster/member/remove", '{"ID":"12345"}'),
    ("POST", "/v3/cluster/member/update",
     '{"ID":"12345","peerURLs":["http://127.0.0.1:1"]}'),
    ("POST", "/v3/cluster/member/add", '{"peerURLs":["not a url"]}'),
    ("POST", "/v3/maintenance/status", '{}'),
    ("POST", "/v3/maintenance/alarm", '{}'),
    ("POST", "/v3/maintenance/alarm", '{"action":"GET"}'),
    ("POST", "/v3/maintenance/hash", '{}'),
    ("POST", "/v3/maintenance/defragment", '{}'),
    ("POST", "/v3beta/maintenance/defragment", '{}'),
    ("POST", "/v3/maintenance/transfer-leadership", '{"targetID":"12345"}'),
    ("POST", "/v3/election/leader", '{"name":"ZWw="}'),
    ("POST", "/v3/election/proclaim", '{"leader":{"name":"ZWw=",'
     '"key":"ZWwvMQ==","rev":"1","lease":"1"},"value":"dg=="}'),
    ("POST", "/v3/election/proclaim", '{"value":"dg=="}'),
    ("POST", "/v3/election/resign", '{"leader":{"name":"ZWw=",'
     '"key":"ZWwvMQ==","rev":"1","lease":"1"}}'),
    ("POST", "/v3/lock/unlock", '{"key":"bGsvMQ=="}'),
    # errors
    ("POST", "/v3/kv/range", '{bad'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v"'),
    ("POST", "/v3/kv/range", '[]'),
    ("POST", "/v3/kv/range", '{"key":"YQ"}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v","limit":5.5}'),
    ("POST", "/v3/kv/range", '{"key":"Zm9v","sort_order":"NOPE"}'),
    ("POST", "/v3/kv/range", '{"key":""}'),
    ("POST", "/v3/kv/put", '{"value":"eA=="}'),
    ("POST", "/v3/kv/range", ''),
    ("POST", "/v3/kv/nope", '{}'),
    ("POST", "/v3/nope", '{}'),
    ("POST", "/v3alpha/kv/range", '{"key":"Zm9v"}'),
    ("GET", "/v3/kv/range", None),
    ("PUT", "/v3/kv/put", '{"key":"Zm9v"}'),
    ("OPTIONS", "/v3/kv/range", None),
]


def run_steps(url):
    ctx = {"peer": "http://127.0.0.1:%d" % free_port(), "learner": "0"}
    out = []
    for method, path, tmpl in STEPS:
        body = tmpl
        for k, v in ctx.items():
            body = body.replace("@%s@" % k, v) if body else body
        status, text = curl(url + path, method, body)
        if path.endswith("member/add") and status == 200:
            for m in json.loads(text)["members"]:
                if m.get("isLearner"):
                    ctx["learner"] = m["ID"]
        out.append(((method, path, body), normalised(status, text, path)))
    return out


@pytest.fixture
def pair():
    etcd = Server(binary=ETCD_BIN, name="gw")
    ours = Server(name="gw")
    try:
        etcd.start()
        ours.start()
        yield ours, etcd
    finally:
        etcd.cleanup()
        ours.cleanup()


def test_gateway_same_as_etcd(pair):
    ours, etcd = pair
    want = run_steps(etcd.client_url)
    got = run_steps(ours.client_url)
    diffs = ["%s %s %s\n  etcd:  %s\n  cetcd: %s" % (w[0] + (w[1], g[1]))
             for w, g in zip(want, got) if w[1] != g[1]]
    assert not diffs, "\n".join(diffs)


def test_gateway_headers(pair):
    """etcd's answer headers: application/json and the gRPC content type
    passed on; text/plain for grpc-gateway's own 404/405."""
    ours, _ = pair
    cp = subprocess.run(["curl", "-sS", "-i", "-m", "10", "-d",
                         '{"key":"Zm9v"}', ours.client_url + "/v3/kv/range"],
                        capture_output=True, text=True, timeout=20)
    head = cp.stdout.split("\n\n", 1)[0].lower().split("\n")
    assert "content-type: application/json" in head
    assert "grpc-metadata-content-type: application/grpc" in head
    assert "access-control-allow-origin: *" in head


def test_gateway_tls_http2(certs):  # noqa: F811
    """Over TLS, with ALPN h2 and http/1.1, the same JSON; and over
    plaintext HTTP/2 (prior knowledge), which etcd 3.4 does not serve."""
    s = TLSServer(server_args(certs), ready_creds=lambda: creds(certs, False))
    s.start()
    try:
        url = "https://localhost:%d" % s.client_port
        ca = ("--cacert", certs.path("ca.crt"))
        for proto in ("--http2", "--http1.1"):
            st, text = curl(url + "/v3/kv/put", "POST",
                            '{"key":"dA==","value":"dg=="}', proto, *ca)
            assert st == 200, text
            st, text = curl(url + "/v3/kv/range", "POST", '{"key":"dA=="}',
                            proto, *ca)
            assert st == 200, text
            assert json.loads(text)["kvs"][0]["value"] == "dg=="
            st, text = curl(url + "/v3/kv/range", "POST", '{"key":""}',
                            proto, *ca)
            assert (st, json.loads(text)["code"]) == (400, 3)
        # A stream over TLS with HTTP/1.1: kept open, lines as in plain.
        st, lines, rest = curl_stream_args(
            url + "/v3/watch", '{"create_request":{"key":"dA==",'
            '"start_revision":"1"}}', 2, "--http1.1", *ca)
        assert st == 200 and rest == ""
        assert json.loads(lines[0])["result"]["created"]
        ev = json.loads(lines[1])["result"]["events"]
        assert ev[0]["kv"]["value"] == "dg==" and len(ev) == 2
    finally:
        s.cleanup()


def test_gateway_h2c(make_server):
    s = make_server()
    st, text = curl(s.client_url + "/v3/kv/range", "POST", '{"key":"dA=="}',
                    "--http2-prior-knowledge")
    assert st == 200, text
    assert "header" in json.loads(text)


AUTH_STEPS = [
    ("/v3/auth/user/add", '{"name":"root","password":"pw"}', None),
    ("/v3/auth/user/grant", '{"user":"root","role":"root"}', None),
    ("/v3/auth/role/add", '{"name":"r"}', None),
    ("/v3/auth/role/grant", '{"name":"r","perm":{"permType":"READWRITE",'
     '"key":"YS8=","range_end":"YTA="}}', None),
    ("/v3/auth/user/add", '{"name":"u","password":"upw"}', None),
    ("/v3/auth/user/grant", '{"user":"u","role":"r"}', None),
    ("/v3/auth/user/grant", '{"user":"u","role":"nope"}', None),
    ("/v3/auth/enable", '{}', None),
    ("/v3/kv/put", '{"key":"YS8x","value":"dg=="}', None),
    ("/v3/auth/authenticate", '{"name":"u","password":"bad"}', None),
    ("/v3/kv/put", '{"key":"YS8x","value":"dg=="}', "u"),
    ("/v3/kv/put", '{"key":"Yi8x","value":"dg=="}', "u"),
    ("/v3/kv/range", '{"key":"YS8x"}', "u"),
    ("/v3/kv/put", '{"key":"YS8x","value":"dg=="}', "bogus"),
    ("/v3/auth/user/list", '{}', "u"),
    ("/v3/auth/user/list", '{}', "root"),
    ("/v3/auth/role/get", '{"role":"r"}', "root"),
    ("/v3/auth/disable", '{}', "root"),
    ("/v3/kv/range", '{"key":"YS8x"}', None),
]
PASSWORDS = {"root": "pw", "u": "upw"}


def run_auth_steps(url):
    out = []
    for path, body, user in AUTH_STEPS:
        extra = []
        if user == "bogus":
            extra = ["-H", "Authorization: bogus"]
        elif user is not None:
            st, text = curl(url + "/v3/auth/authenticate", "POST",
                            json.dumps({"name": user,
                                        "password": PASSWORDS[user]}))
            assert st == 200, text
            extra = ["-H", "Authorization: " + json.loads(text)["token"]]
        status, text = curl(url + path, "POST", body, *extra)
        out.append(((path, body, user), normalised(status, text, path)))
    return out


def test_gateway_auth_same_as_etcd(pair):
    """The Auth routes and a gateway client's token in the Authorization
    header, as etcd's gateway forwards it: the same answers as etcd
    3.4.23's for users, roles, enable, authenticate and checked KV."""
    ours, etcd = pair
    want = run_auth_steps(etcd.client_url)
    got = run_auth_steps(ours.client_url)
    diffs = ["%s\n  etcd:  %s\n  cetcd: %s" % (w[0], w[1], g[1])
             for w, g in zip(want, got) if w[1] != g[1]]
    assert not diffs, "\n".join(diffs)
    # The checks did refuse and allow (not two servers equally broken).
    status = [w[1][0] for w in want]
    assert status[8] != 200 and status[10] == 200   # no token / u on a/
    assert status[11] == 403 and status[13] == 401  # u on b/, bogus


# --- streams (api/gw_stream.c) ------------------------------------------

def curl_stream(url, body, seconds):
    """POSTs body with curl -N and reads the answer for at most seconds
    (a watch never ends by itself): (status or None when no head came,
    [each newline-terminated line], the unterminated rest)."""
    return curl_stream_args(url, body, seconds)


def curl_stream_args(url, body, seconds, *extra):
    args = ["curl", "-sS", "-i", "-N", "-m", str(seconds), "--data-binary",
            body] + list(extra) + [url]
    cp = subprocess.run(args, capture_output=True, timeout=seconds + 20)
    assert cp.returncode in (0, 28), cp.stderr  # 28: our own time limit
    out = cp.stdout.decode()
    if not out:
        return None, [], ""
    head, _, text = out.partition("\r\n\r\n")
    # etcd's gateway sends a trailer after a waiting call's error (its
    # unary error path under a chunked answer); curl -i prints it after
    # the body.  cetcd answers with Content-Length and no trailer: only the
    # body is compared.
    text = re.sub(r"Grpc-Trailer-[^\r\n]*\r?\n?", "", text)
    status = int(head.split("\r\n")[0].split()[1])
    lines = text.split("\n")
    return status, lines[:-1], lines[-1]


STREAM_IDS = IDS | {"lease", "blob"}


def norm_stream(v, key=None):
    if isinstance(v, dict):
        return {k: norm_stream(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [norm_stream(x, key) for x in v]
    if key in STREAM_IDS:
        return "<%s>" % key
    if key == "key":  # a lock's or a candidate's key: name/<lease, %x>
        raw = base64.b64decode(v)
        if re.fullmatch(rb"[^/]*/[0-9a-f]{1,16}", raw):
            return "<name/lease>"
    if key in ("error", "message") and isinstance(v, str) and \
            v.startswith(("invalid character", "unexpected")):
        return "<JSON syntax error>"  # Go's texts against json-c's
    return v


def stream_normalised(status, lines, rest):
    return (status, [norm_stream(json.loads(x)) for x in lines],
            norm_stream(json.loads(rest)) if rest else "")


# (path, body, seconds, what it shows); @lease@ is a lease granted first.
STREAM_STEPS = [
    ("/v3/watch", '{"create_request":{"key":"Zm9v","start_revision":"1"}}',
     1.5, "history replayed from revision 1"),
    ("/v3/watch", '{"create_request":{"key":"Zm9v"}}{"create_request":'
     '{"key":"YmFy","prev_kv":true}}\n{"cancel_request":{"watch_id":"0"}}\n'
     '\n  {"progress_request":{}}', 1.5,
     "concatenated and newline-delimited requests: created, created, "
     "canceled, progress"),
    ("/v3/watch", '{"create_request":{"key":"Zm9v"}} xx '
     '{"create_request":{"key":"YmFy"}}', 1.5,
     "a bad request after the first one ends the reading, not the stream"),
    ("/v3/watch", '{"create_request":{"key":"Zm9v"}}\\n{"create_request":'
     '{"key":"YmFy"}}', 1.5, "a backslash-n between two requests: the same"),
    ("/v3/watch", 'xx', 1.5, "a bad first request: 500, code 2"),
    ("/v3/watch", '', 1.5, "an empty body: an open stream, no head yet"),
    ("/v3/watch", '{"create_request":{"key":""}}', 1.5, "an empty key"),
    ("/v3/watch", '{"create_request":{"key":"Zm9v","start_revision":"2"}}',
     1.5, "a compacted start revision: created, then canceled"),
    ("/v3beta/watch", '{"create_request":{"key":"Zm9v"}}', 1.5,
     "/v3beta"),
    ("/v3/lease/keepalive", '{"ID":"@lease@"}{"ID":"@lease@"}', 5,
     "two keep-alives, then the end of the body ends the stream"),
    ("/v3/lease/keepalive", '{"ID":"123"}', 5, "an unknown lease: TTL 0"),
    ("/v3/lease/keepalive", '', 5, "an empty body: an empty 200"),
    ("/v3/lease/keepalive", 'zz', 5, "a bad first request: 500, code 2"),
    ("/v3/election/observe", '{"name":"ZWw="}', 1.5,
     "no leader: nothing at all"),
    ("/v3/election/observe", '{"name":', 1.5,
     "a bad request of a server stream: 400, code 3"),
    ("/v3/election/campaign",
     '{"name":"ZWw=","lease":"@lease@","value":"djE="}', 5,
     "campaign: leader at once"),
    ("/v3/election/observe", '{"name":"ZWw="}', 1.5, "the leader"),
    ("/v3/lock/lock", '{"name":"bG9jaw==","lease":"@lease@"}', 5,
     "lock: held at once"),
    ("/v3/lock/lock", '{"name":"bG9jaw==","lease":"123"}', 5,
     "lock with an unknown lease: 500, code 2"),
    ("/v3/lock/lock", '{"name":', 5, "a bad request: 400, code 3"),
    ("/v3/maintenance/snapshot", '{}', 10, "a snapshot: blobs, then the "
     "hash"),
]


def run_stream_steps(url, *extra):
    """STREAM_STEPS against url, each curl with the extra arguments."""
    for v in ("YQ==", "Yg==", "Yw=="):
        st, text = curl(url + "/v3/kv/put", "POST",
                        '{"key":"Zm9v","value":"%s"}' % v, *extra)
        assert st == 200, text
    st, text = curl(url + "/v3/kv/compaction", "POST", '{"revision":"3"}',
                    *extra)
    assert st == 200, text
    st, text = curl(url + "/v3/lease/grant", "POST", '{"TTL":"60"}', *extra)
    assert st == 200, text
    lease = json.loads(text)["ID"]
    out = []
    for path, body, seconds, what in STREAM_STEPS:
        body = body.replace("@lease@", lease)
        got = stream_normalised(*curl_stream_args(url + path, body, seconds,
                                                  *extra))
        out.append(((path, body, what), got))
    return out


def steps_on_both(etcd_url, ours_url, *extra):
    """run_stream_steps on etcd and on cetcd at the same time (two
    threads: the steps mostly wait for their streams' windows), (want,
    got)."""
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        want = ex.submit(run_stream_steps, etcd_url, *extra)
        got = ex.submit(run_stream_steps, ours_url, *extra)
        return want.result(), got.result()


def test_gateway_streams_same_as_etcd(pair):
    """The gateway's streams and waits against etcd 3.4.23's: each step's
    status and lines equal once ids, leases and snapshot bytes are
    normalised (module docstring of gw_stream.c has the rules)."""
    ours, etcd = pair
    want, got = steps_on_both(etcd.client_url, ours.client_url)
    diffs = ["%s %r (%s)\n  etcd:  %s\n  cetcd: %s" % (w[0] + (w[1], g[1]))
             for w, g in zip(want, got) if w[1] != g[1]]
    assert not diffs, "\n".join(diffs)
    # Not two servers equally broken: the steps did stream.
    assert len(want[1][1][1]) == 4 and want[0][1][0] == 200
    assert want[4][1][0] == 500 and want[5][1][0] is None
    assert len(want[9][1][1]) == 2


class TLSEtcd(TLSServer):
    """A TLSServer running the real etcd 3.4.23."""

    def __init__(self, extra_args, **kw):
        super().__init__(extra_args, **kw)
        self.binary = ETCD_BIN


def test_gateway_streams_http2_same_as_etcd(certs):  # noqa: F811
    """The same stream steps over HTTP/2: curl --http2 on https (ALPN h2),
    which etcd 3.4.23 serves with Go's net/http, against cetcd's HTTP/2
    answers that stay open (rpc/h2_stream.c).  (etcd 3.4 serves no h2c on
    a plaintext port; cetcd does: test_gateway_h2c_streams.)"""
    ready = lambda: creds(certs, False)  # noqa: E731
    etcd = TLSEtcd(server_args(certs), ready_creds=ready)
    ours = TLSServer(server_args(certs), ready_creds=ready)
    try:
        etcd.start()
        ours.start()
        extra = ("--http2", "--cacert", certs.path("ca.crt"))
        url = "https://localhost:%d"
        want, got = steps_on_both(url % etcd.client_port,
                                  url % ours.client_port, *extra)
    finally:
        etcd.cleanup()
        ours.cleanup()
    diffs = ["%s %r (%s)\n  etcd:  %s\n  cetcd: %s" % (w[0] + (w[1], g[1]))
             for w, g in zip(want, got) if w[1] != g[1]]
    assert not diffs, "\n".join(diffs)
    assert len(want[1][1][1]) == 4 and want[0][1][0] == 200
    assert len(want[9][1][1]) == 2


@pytest.mark.skipif(not LONG, reason=LONG_REASON)  # 1.1 and h2 in CI
def test_gateway_streams_http10_same_as_etcd(pair):
    """The same stream steps over HTTP/1.0 (no chunks): Go's net/http
    writes a 1.0 status line and the lines as they come, with no length,
    and closes the connection at the end; cetcd's HTTP/1.0 answers are
    compared with etcd 3.4.23's (their unary answers are 1.0 too)."""
    ours, etcd = pair
    want, got = steps_on_both(etcd.client_url, ours.client_url,
                              "--http1.0")
    diffs = ["%s %r (%s)\n  etcd:  %s\n  cetcd: %s" % (w[0] + (w[1], g[1]))
             for w, g in zip(want, got) if w[1] != g[1]]
    assert not diffs, "\n".join(diffs)
    assert len(want[1][1][1]) == 4 and want[0][1][0] == 200
    assert len(want[9][1][1]) == 2
    cp = subprocess.run(["curl", "-sS", "-i", "--http1.0", "-d",
                         '{"key":"Zm9v"}', ours.client_url + "/v3/kv/range"],
                        capture_output=True, timeout=20)
    head = cp.stdout.decode().split("\r\n\r\n", 1)[0].split("\r\n")
    assert head[0] == "HTTP/1.0 200 OK"
    assert not any(h.lower().startswith("connection:") for h in head)


def test_gateway_h2c_streams(make_server):
    """Over plaintext HTTP/2 (prior knowledge) the streams are served as
    over TLS: a watch's lines, kept open until the client leaves."""
    s = make_server()
    st, text = curl(s.client_url + "/v3/kv/put", "POST",
                    '{"key":"dA==","value":"dg=="}')
    assert st == 200, text
    st, lines, rest = curl_stream_args(
        s.client_url + "/v3/watch", '{"create_request":{"key":"dA==",'
        '"start_revision":"1"}}', 2, "--http2-prior-knowledge")
    assert st == 200 and rest == ""
    assert json.loads(lines[0])["result"]["created"]
    assert json.loads(lines[1])["result"]["events"][0]["kv"]["value"] == \
        "dg=="
    assert wait_for(lambda: watchers(s), 0) == 0  # curl left: cancelled


def watchers(server):
    st, text = curl(server.client_url + "/metrics", "GET")
    assert st == 200
    m = re.search(r"^etcd_debugging_mvcc_watcher_total (\S+)$", text, re.M)
    return float(m.group(1))


def wait_for(fn, want, seconds=10.0):
    deadline = time.time() + seconds
    got = fn()
    while got != want and time.time() < deadline:
        time.sleep(0.1)
        got = fn()
    return got


def test_gateway_watch_client_gone(make_server):
    """A gateway client that drops its connection cancels its stream: its
    watchers leave the watcher gauge, and a Lock still waiting deletes
    its key (a waiter that went away never takes the lock)."""
    s = make_server()
    streams = [GwStream(s.client_port, "/v3/watch",
                        '{"create_request":{"key":"dw==","prev_kv":true}}'
                        '{"create_request":{"key":"eA=="}}')
               for _ in range(3)]
    for w in streams:
        assert w.next_json()["result"].get("created")
        assert w.next_json()["result"].get("created")
    assert wait_for(lambda: watchers(s), 6) == 6
    for w in streams[:2]:
        w.close()
    assert wait_for(lambda: watchers(s), 2) == 2
    # the one left still gets its events
    st, _ = curl(s.client_url + "/v3/kv/put", "POST", '{"key":"dw==","value":"dg=="}')
    assert st == 200
    ev = streams[2].next_json()["result"]["events"][0]
    assert ev["kv"]["key"] == "dw=="
    streams[2].close()
    assert wait_for(lambda: watchers(s), 0) == 0

    def lease():
        st, text = curl(s.client_url + "/v3/lease/grant", "POST", '{"TTL":"60"}')
        assert st == 200
        return json.loads(text)["ID"]

    def lock_keys():
        st, text = curl(s.client_url + "/v3/kv/range", "POST",
                        '{"key":"bC8=","range_end":"bDA=","count_only":true}')
        assert st == 200
        return int(json.loads(text).get("count", "0"))

    st, text = curl(s.client_url + "/v3/lock/lock", "POST",
                    '{"name":"bA==","lease":"%s"}' % lease())
    assert st == 200, text
    waiter = GwStream(s.client_port, "/v3/lock/lock",
                      '{"name":"bA==","lease":"%s"}' % lease())
    assert wait_for(lock_keys, 2) == 2
    assert waiter.next_json(timeout=0.5) is None  # it waits
    waiter.close()
    assert wait_for(lock_keys, 1) == 1


def rss_kb(pid):
    """The process's anonymous resident memory (its heap and stacks; not
    LMDB's file-backed map, which grows with the store either way)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon")


def asan(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def put_phase(s, prefix, value, n):
    """n puts of value under prefix; returns (their revisions, the RSS
    growth in MB seen while they ran)."""
    before = peak = rss_kb(s.proc.pid)
    revs = []
    for i in range(n):
        r = s.kv().Put(pb.PutRequest(key=prefix + b"%d" % (i % 20),
                                     value=value), timeout=10)
        revs.append(r.header.revision)
        if i % 5 == 0:
            peak = max(peak, rss_kb(s.proc.pid))
    peak = max(peak, rss_kb(s.proc.pid))
    return revs, (peak - before) / 1024


def test_gateway_watch_slow_reader(make_server):
    """A gateway watcher that does not read while 36 MB of values (48 MB
    of base64 in JSON, 30 puts of 1.2 MB; CETCD_GW_SLOW_PUTS for more)
    are put: the member's memory grows by about what the
    same puts cost with no watcher at all (the store's mmap grows either
    way), not by the events held for the client (the stream's bounded
    queue and the connection's 1 MiB of unsent bytes; the watch service
    takes the rest from the store later); once the client reads, it gets
    every event, once, in order."""
    s = make_server()
    value = b"v" * 1200000
    n = int(os.environ.get("CETCD_GW_SLOW_PUTS", "30"))
    _, control_mb = put_phase(s, b"t/", value, n)
    w = GwStream(s.client_port, "/v3/watch",
                 '{"create_request":{"key":"cy8=","range_end":"czA="}}',
                 rcvbuf=4096)
    assert w.next_json()["result"].get("created")
    revs, grew_mb = put_phase(s, b"s/", value, n)
    print("slow reader: RSS +%.1f MB, control +%.1f MB" % (grew_mb, control_mb))
    # Held for the client: at most the queue's 4 MiB (or one message: a
    # catch-up batch may be one ~6 MB response), 1 MiB unsent, socket
    # buffers.  Without the byte bound (a build with H1_STREAM_BYTES_MAX
    # 4000 MiB) it was +79 MB against +41 MB without a watcher.
    if not asan(s.proc.pid):  # ASan's quarantine keeps freed memory
        assert grew_mb < control_mb + 24, \
            "RSS grew by %.1f MB with a client not reading, %.1f MB " \
            "without a watcher" % (grew_mb, control_mb)
    seen = []
    while len(seen) < len(revs):
        line = w.next_json(timeout=30)
        assert line is not None, "stream stalled after %d events" % len(seen)
        for ev in line["result"].get("events", []):
            assert base64.b64decode(ev["kv"]["value"]) == value
            seen.append(int(ev["kv"]["mod_revision"]))
    assert seen == revs
    w.close()


@pytest.mark.parametrize("binary", [None, ETCD_BIN], ids=["cetcd", "etcd"])
def test_gateway_max_concurrent_streams(make_server, binary):
    """--max-concurrent-streams bounds the gateway's calls and streams
    together, as etcd's gateway is one gRPC connection to its own server:
    with 2 watches open a range waits (curl's time limit ends it), and
    goes through once a watch's client leaves.  (etcd's e2e
    TestV3Curl_MaxStreams_*; rpc/http_limit.c.)"""
    s = make_server(extra_args=["--max-concurrent-streams", "2"],
                    binary=binary)
    body = '{"create_request":{"key":"Zm9v"}}'
    ws = [GwStream(s.client_port, "/v3/watch", body) for _ in range(2)]
    for w in ws:
        assert w.next_json()["result"].get("created")
    cp = subprocess.run(["curl", "-sS", "-m", "2", "-d", '{"key":"Zm9v"}',
                         s.client_url + "/v3/kv/range"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 28, cp.stdout  # it waited: no slot
    # a waiting range whose client stays: served once a watch ends
    late = subprocess.Popen(["curl", "-sS", "-m", "20", "-d",
                             '{"key":"Zm9v"}', s.client_url + "/v3/kv/range"],
                            stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert late.poll() is None
    ws[0].close()
    out, _ = late.communicate(timeout=30)
    assert late.returncode == 0 and "revision" in out
    ws[1].close()
    # every slot is free again: three ranges in a row
    for _ in range(3):
        st, text = curl(s.client_url + "/v3/kv/range", "POST",
                        '{"key":"Zm9v"}')
        assert st == 200, text


def grpc_counts(server):
    """{(series, method, code): value} of grpc_server_* for KV/Lease."""
    status, text = curl(server.client_url + "/metrics", "GET")
    assert status == 200
    out = {}
    for line in text.splitlines():
        m = re.match(r'(grpc_server_(?:started|handled|msg_received|'
                     r'msg_sent)_total)\{(.*)\} (\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get("grpc_service") not in ("etcdserverpb.KV",
                                              "etcdserverpb.Lease",
                                              "etcdserverpb.Watch"):
            continue
        out[(m.group(1), labels["grpc_method"],
             labels.get("grpc_code", ""))] = float(m.group(3))
    return out


def gateway_calls(url):
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    curl(url + "/v3/kv/put", "POST",
         json.dumps({"key": b64("gw-m"), "value": b64("v")}))
    curl(url + "/v3/kv/range", "POST", json.dumps({"key": b64("gw-m")}))
    curl(url + "/v3/kv/range", "POST", json.dumps({"key": b64("gw-m")}))
    curl(url + "/v3/kv/put", "POST", json.dumps({"value": b64("v")}))  # no key
    curl(url + "/v3/kv/range", "POST", "{not json")  # the gateway refuses it
    curl(url + "/v3/lease/grant", "POST", json.dumps({"TTL": 60}))
    # streams: a keep-alive whose body ends (OK), a watch whose client
    # leaves after its created answer (Canceled)
    curl(url + "/v3/lease/keepalive", "POST", json.dumps({"ID": 1}))
    cp = subprocess.run(["curl", "-sS", "-m", "2", "-X", "POST", "--data-binary",
                         json.dumps({"create_request": {"key": b64("gw-m")}}),
                         url + "/v3/watch"], capture_output=True, text=True,
                        timeout=20)
    assert cp.returncode == 28 and '"created":true' in cp.stdout, cp
    time.sleep(0.5)  # the server sees the client go


def test_gateway_calls_in_grpc_metrics(pair):
    """etcd's gateway is a gRPC client of its own server: its unary calls
    and streams show in grpc_server_started/handled/msg_* with the gRPC
    method and code (a refused key: InvalidArgument; a watch whose client
    left: Canceled); a body the gateway cannot decode never reaches the
    server.  The same deltas on both."""
    deltas = []
    for server in pair:
        before = grpc_counts(server)
        gateway_calls(server.client_url)
        after = grpc_counts(server)
        deltas.append({k: v - before.get(k, 0) for k, v in after.items()
                       if v - before.get(k, 0) != 0})
    ours, etcd = deltas
    assert etcd[("grpc_server_started_total", "Range", "")] == 2
    assert etcd[("grpc_server_handled_total", "Watch", "Canceled")] == 1
    assert ours == etcd


def access_answer(url, path, *headers):
    """(status, the CORS headers, body) of a GET with headers."""
    args = ["curl", "-sS", "-m", "10", "-i"]
    for h in headers:
        args += ["-H", h]
    cp = subprocess.run(args + [url + path], capture_output=True, timeout=20)
    assert cp.returncode == 0, cp.stderr
    head, _, body = cp.stdout.decode().partition("\r\n\r\n")
    lines = head.split("\r\n")
    status = int(lines[0].split()[1])
    cors = sorted(line.lower() for line in lines[1:]
                  if line.lower().startswith("access-control-"))
    return status, cors, body


@pytest.mark.parametrize("cors, hosts", [
    ("http://a.example:8080,https://c.example:443", "*"),
    ("*", "good.example,127.0.0.2"),
])
def test_cors_and_host_whitelist_same_as_etcd(make_server, cors, hosts):
    """--cors: listed origins get the Access-Control-Allow-* headers with
    their origin, others none ("*": every answer, origin "*");
    --host-whitelist: a plaintext request for another host is refused 421
    with etcd's text (DNS rebinding), a listed host (port stripped) is
    served.  The same answers as etcd 3.4.23."""
    flags = ["--cors", cors, "--host-whitelist", hosts]
    got = {}
    for name, binary in (("cetcd", None), ("etcd", ETCD_BIN)):
        srv = make_server(binary=binary, extra_args=flags)
        url = srv.client_url
        got[name] = [
            access_answer(url, "/health", "Host: good.example:2379",
                          "Origin: http://a.example:8080"),
            access_answer(url, "/health", "Host: good.example",
                          "Origin: http://b.example:8080"),
            access_answer(url, "/health", "Host: 127.0.0.2:1",
                          "Origin: https://c.example:443"),
            access_answer(url, "/health", "Host: evil.example:80",
                          "Origin: http://a.example:8080"),
            access_answer(url, "/v3/kv/range", "Host: [::1]:5"),
        ]
        srv.stop()
    assert got["cetcd"] == got["etcd"]
    assert got["etcd"][0][1], "no CORS headers at all: the test is blind"
    if hosts != "*":
        status, _, body = got["etcd"][3]
        assert status == 421 and '--host-whitelist "evil.example"' in body


@pytest.mark.parametrize("cors", ["http://a.example", "ftp://a.example:1",
                                  "http://a.example:1/x", ""])
def test_bad_cors_refused_as_etcd(cors):
    """--cors takes URLs as etcd's flag does: its message, exit 2."""
    out = {}
    for name, binary in (("cetcd", os.environ.get("CETCD_BIN")),
                         ("etcd", ETCD_BIN)):
        cp = subprocess.run([binary, "--cors", cors], capture_output=True,
                            text=True, timeout=20)
        out[name] = (cp.returncode, cp.stderr.splitlines()[0])
    assert out["cetcd"] == out["etcd"]
    assert out["etcd"][0] == 2
