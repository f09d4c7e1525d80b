"""Request bodies that are streamed to the /v3 gateway, compared with etcd
3.4.23's.

Goal: a chunked HTTP/1.1 body (Transfer-Encoding: chunked) is taken by
every gateway call, with Go's framing errors as etcd's gateway answers
them; on /v3/watch and /v3/lease/keepalive the body may stay open and each
JSON request the client sends on it is handed to the stream as it comes:
a client adds and cancels watches, asks for progress, keeps a lease alive,
on one open request (HTTP/1.1 chunked, HTTP/2 DATA without END_STREAM),
and reads the answers as they are written.  Garbage gets etcd's error
body, never a crash; a body that never ends holds no thread and bounded
memory.

Method: curl as the real client (-T - from a pipe the test writes to:
chunked with "Expect: 100-continue" over HTTP/1.1, DATA frames over h2),
the same sequence sent to cetcd and to a real /usr/bin/etcd started by the
test, the lines compared once member/cluster ids and terms are
normalised.  etcd 3.4.23 streams both ways over HTTP/1.1 only when the
client sent Expect: 100-continue (as curl does); without it Go's server
reads the rest of the body before it writes the first line (net/http
issue 15527) and may discard requests: cetcd streams both ways for any
client (gwstream.py's raw client shows it), so that case is cetcd's only.
h2c: etcd 3.4 serves none on a plaintext port; cetcd's is checked alone.
"""
import json
import os
import select
import socket
import subprocess
import time

import pytest

from common.gwstream import GwStream
from test_gateway import TLSEtcd, curl, norm_stream, pair  # noqa: F401
from test_tls import TLSServer, certs, creds, server_args  # noqa: F401

LINE_WAIT = 10.0


class CurlStream:
    """curl -N -T . (stdin read without blocking, so curl reads the
    answer meanwhile) on url: the test writes the request body as it goes
    and reads the answer's lines as curl prints them."""

    def __init__(self, url, *extra):
        self.p = subprocess.Popen(
            ["curl", "-sS", "-N", "-i", "-X", "POST", "-T", ".",
             "-H", "Content-Type: application/json"] + list(extra) + [url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        self.buf = b""
        self.status = None
        self.headers = {}

    def send(self, text):
        self.p.stdin.write(text.encode())
        self.p.stdin.flush()

    def end_body(self):
        self.p.stdin.close()

    def _line(self, timeout):
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            b = os.read(self.p.stdout.fileno(), 65536)
            if not b:
                return None
            self.buf += b
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().rstrip("\r")

    def head(self, timeout=LINE_WAIT):
        """Reads the answer's head (after any 100 Continue)."""
        while self.status is None or self.status < 200:
            line = self._line(timeout)
            assert line is not None, "no answer head"
            self.status = int(line.split()[1])
            self.headers = {}
            while True:
                line = self._line(timeout)
                if not line:
                    break
                k, v = line.split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
        return self.status

    def json(self, timeout=LINE_WAIT):
        if self.status is None:
            self.head(timeout)
        line = self._line(timeout)
        while line == "":
            line = self._line(timeout)
        return None if line is None else norm_stream(json.loads(line))

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def put(url, key_b64, val_b64, *extra):
    st, text = curl(url + "/v3/kv/put", "POST",
                    '{"key":"%s","value":"%s"}' % (key_b64, val_b64), *extra)
    assert st == 200, text


def watch_sequence(url, *extra):
    """One open /v3/watch: create, a put, a second create and a cancel on
    the same body, a put, a progress request, a request split in two
    writes, garbage (ends the reading, not the watch), a put after it."""
    out = []
    w = CurlStream(url + "/v3/watch", *extra)
    try:
        w.send('{"create_request":{"key":"Zm9v"}}\n')
        out.append(w.json())
        out.append((w.status, w.headers.get("content-type")))
        put(url, "Zm9v", "MQ==", *extra)
        out.append(w.json())
        w.send('{"create_request":{"key":"YmFy","prev_kv":true}}\n'
               '{"cancel_request":{"watch_id":"0"}}\n')
        out.append(w.json())
        out.append(w.json())
        put(url, "Zm9v", "Mg==", *extra)  # watch 0 is gone: no event
        put(url, "YmFy", "Mw==", *extra)
        out.append(w.json())
        w.send('{"progress_request":{}}')
        out.append(w.json())
        w.send('{"create_request":{"key":"YmF6",')
        time.sleep(0.3)
        w.send('"start_revision":"1"}}')
        out.append(w.json())
        w.send("xx")
        time.sleep(0.3)
        put(url, "YmFy", "NA==", *extra)
        out.append(w.json())
        out.append(w.json(timeout=1.0))  # nothing more
    finally:
        w.close()
    return out


def keepalive_sequence(url, *extra):
    st, text = curl(url + "/v3/lease/grant", "POST", '{"TTL":"60"}', *extra)
    assert st == 200, text
    lease = json.loads(text)["ID"]
    out = []
    k = CurlStream(url + "/v3/lease/keepalive", *extra)
    try:
        for _ in range(3):
            k.send('{"ID":"%s"}' % lease)
            out.append(k.json())
        k.send('{"ID":"12345"}')
        out.append(k.json())
        k.end_body()  # the half-close ends a keep-alive stream
        out.append(k.json(timeout=3.0))
        k.p.wait(timeout=10)
        out.append(k.p.returncode)
    finally:
        k.close()
    return out


def compare(want, got):
    diffs = ["step %d\n  etcd:  %s\n  cetcd: %s" % (i, w, g)
             for i, (w, g) in enumerate(zip(want, got)) if w != g]
    assert not diffs and len(want) == len(got), "\n".join(diffs)


def test_watch_open_body_same_as_etcd(pair):  # noqa: F811
    ours, etcd = pair
    want = watch_sequence(etcd.client_url)
    got = watch_sequence(ours.client_url)
    compare(want, got)
    # not two servers equally broken
    assert want[0]["result"]["created"] and want[5]["result"]["events"]
    assert want[4]["result"]["canceled"] and want[-1] is None


def test_keepalive_open_body_same_as_etcd(pair):  # noqa: F811
    ours, etcd = pair
    want = keepalive_sequence(etcd.client_url)
    got = keepalive_sequence(ours.client_url)
    compare(want, got)
    assert want[0]["result"]["TTL"] == "60" and want[-2] is None


def test_open_body_http2_same_as_etcd(certs):  # noqa: F811
    """The same sequences over TLS with ALPN h2: the body is DATA frames
    without END_STREAM until the client closes its side."""
    ready = lambda: creds(certs, False)  # noqa: E731
    etcd = TLSEtcd(server_args(certs), ready_creds=ready)
    ours = TLSServer(server_args(certs), ready_creds=ready)
    extra = ("--http2", "--cacert", certs.path("ca.crt"))
    url = "https://localhost:%d"
    try:
        etcd.start()
        ours.start()
        want = watch_sequence(url % etcd.client_port, *extra)
        got = watch_sequence(url % ours.client_port, *extra)
        compare(want, got)
        want = keepalive_sequence(url % etcd.client_port, *extra)
        got = keepalive_sequence(url % ours.client_port, *extra)
        compare(want, got)
    finally:
        etcd.cleanup()
        ours.cleanup()


def test_open_body_h2c(make_server):
    """cetcd only (etcd 3.4 serves no h2c): the watch sequence over
    plaintext HTTP/2 with prior knowledge gives the lines it gives over
    HTTP/1.1 on a twin member."""
    a = make_server()
    b = make_server()
    want = watch_sequence(a.client_url)
    got = watch_sequence(b.client_url, "--http2-prior-knowledge")
    compare(want[:1] + want[2:], got[:1] + got[2:])  # (status line form)


def test_open_body_without_expect(make_server):
    """A client that does not ask Expect: 100-continue (python's raw
    socket here) gets each answer as its request arrives too (etcd
    3.4.23 waits for the end of the body: see the module doc)."""
    s = make_server()
    w = GwStream(s.client_port, "/v3/watch",
                 '{"create_request":{"key":"Zm9v"}}', chunked=True)
    try:
        assert w.next_json()["result"]["created"]
        assert w.headers["connection"] == "close"
        put(s.client_url, "Zm9v", "MQ==")
        assert w.next_json()["result"]["events"][0]["kv"]["value"] == "MQ=="
        w.send('{"create_req')  # a request split across chunks
        w.send('uest":{"key":"YmFy"}}')
        assert w.next_json()["result"]["watch_id"] == "1"
        w.end_body()  # the watch stays open after the body's end
        put(s.client_url, "YmFy", "Mg==")
        assert w.next_json()["result"]["watch_id"] == "1"
    finally:
        w.close()


# -- chunked bodies of unary calls, and garbage --------------------------

HEAD = (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")

# (path, raw body after the head, what it shows)
RAW_STEPS = [
    ("/v3/kv/put", b'7\r\n{"key":\r\n17\r\n"Zm9v","value":"YmFy"}\r\n0\r\n\r\n',
     "a put in two chunks"),
    ("/v3/kv/range", b'3;ext=1\r\n{"k\r\nb\r\ney":"Zm9v"}\r\n0\r\nX-T: 1\r\n\r\n',
     "extensions and a trailer"),
    ("/v3/kv/range", b"zz\r\n{}\r\n0\r\n\r\n", "a bad size: 400"),
    ("/v3/kv/range", b"ffffffffffffffffff\r\n{}\r\n", "too large a size"),
    ("/v3/kv/range", b'2\r\n{}XX0\r\n\r\n',
     "bad framing after a whole request: the request is served"),
    ("/v3/kv/range", b'4\r\n{"ke\r\nXX\r\n',
     "bad framing inside the request"),
    ("/v3/watch", b"zz\r\n", "a watch whose body breaks first: 500, code 2"),
    # (etcd answers only once the body ended: Go's server reads the rest
    # of the body before it writes an answer to a client that did not
    # ask Expect: 100-continue)
    ("/v3/lease/keepalive", b"5\r\nxxxxx\r\n0\r\n\r\n",
     "garbage first: 500, code 2"),
    ("/v3/watch", b'5\r\n{"cre\r\n3\r\nxyz\r\n0\r\n\r\n',
     "garbage inside the first request: 500, code 2"),
]


def raw(port, data, wait=3.0):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(data)
    s.settimeout(wait)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
            if out.endswith(b"}") or out.endswith(b"\r\n0\r\n\r\n") or \
                    b"\r\n\r\n{" in out and out.rstrip().endswith(b"}"):
                s.settimeout(0.5)
    except socket.timeout:
        pass
    s.close()
    return out


def answer(out):
    """(status, Connection header, normalised JSON body) of a raw answer
    (a chunked one de-chunked; a trailer dropped)."""
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {ln.split(":", 1)[0].lower(): ln.split(":", 1)[1].strip()
            for ln in lines[1:]}
    if hdrs.get("transfer-encoding") == "chunked":
        data = b""
        while body:
            size, _, rest = body.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            data += rest[:n]
            body = rest[n + 2:]
        body = data
    try:
        parsed = norm_stream(json.loads(body))
    except ValueError:
        parsed = body.decode()
    return status, parsed


def raw_steps(port):
    return [((path, data, what), answer(raw(port, HEAD % path.encode() + data)))
            for path, data, what in RAW_STEPS]


def test_chunked_bodies_same_as_etcd(pair):  # noqa: F811
    ours, etcd = pair
    want = raw_steps(etcd.client_port)
    got = raw_steps(ours.client_port)
    diffs = ["%s %r (%s)\n  etcd:  %s\n  cetcd: %s" % (w[0] + (w[1], g[1]))
             for w, g in zip(want, got) if w[1] != g[1]]
    assert not diffs, "\n".join(diffs)
    assert want[0][1][0] == 200 and want[2][1][0] == 400
    # curl's own chunked upload of a unary call
    for s in (ours, etcd):
        st, text = curl(s.client_url + "/v3/kv/range", "POST",
                        '{"key":"Zm9v"}', "-H", "Transfer-Encoding: chunked")
        assert st == 200 and json.loads(text)["count"] == "1"


def test_unsupported_transfer_encoding(server):
    out = raw(server.client_port,
              b"POST /v3/kv/range HTTP/1.1\r\nHost: x\r\n"
              b"Transfer-Encoding: gzip\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 501 Not Implemented\r\n")
    assert out.endswith(b"\r\n\r\nUnsupported transfer encoding")


def test_unfinished_bodies_bounded(make_server):
    """A unary call whose chunked body never ends is cut off with the
    other slow clients (10 s), holding no thread; an open watch body that
    announces a 2^63-byte chunk holds a counter, not a buffer; a request
    larger than the receive limit on an open body ends the reading; the
    member serves others meanwhile."""
    s = make_server(["--max-request-bytes", "1000"])
    slow = socket.create_connection(("127.0.0.1", s.client_port))
    slow.sendall(HEAD % b"/v3/kv/range" + b"2\r\n{}\r\n")
    silent = socket.create_connection(("127.0.0.1", s.client_port))
    silent.sendall(HEAD % b"/v3/kv/range")  # a head, then nothing
    big = GwStream(s.client_port, "/v3/watch",
                   '{"create_request":{"key":"Zm9v"}}', chunked=True)
    try:
        assert big.next_json()["result"]["created"]
        big.send_raw(b"7fffffffffffffff\r\n" + b" " * 100000)
        huge = GwStream(s.client_port, "/v3/watch", "", chunked=True)
        huge.send('{"create_request":{"key":"' + "A" * 4000 + '"')
        for _ in range(200):
            huge.send(" " * 10000)  # past 1000 + 512 KiB: reading ends
        st, text = curl(s.client_url + "/v3/kv/range", "POST", '{"key":"eA=="}')
        assert st == 200, text
        # the huge request was refused as the gateway's first: 500
        huge_line = huge.rest(10)
        assert huge.status == 500 and b'"code":2' in huge_line
        put(s.client_url, "Zm9v", "MQ==")
        assert big.next_json()["result"]["events"]
        for sock in (slow, silent):
            sock.settimeout(15)
            try:
                assert sock.recv(4096) == b""  # cut off, unanswered
            except ConnectionResetError:
                pass
    finally:
        slow.close()
        silent.close()
        big.close()
