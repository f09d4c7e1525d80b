"""`cetcd grpc-proxy start`: what a client that does not read can make the
proxy hold.

Goal: a slow client holds the server back, not the proxy's memory.  Each
client stream has one upstream stream; when the client's send queue is
full (rpc/'s per-stream bound: 128 messages, 1 MiB for a Watch) the proxy
holds the refused message, pauses its upstream stream (HTTP/2 flow control
then stops the server) and resumes it when the client's queue drained
(src/grpcproxy/stream.c).  Method: a raw HTTP/2 client (tests/common/
h2raw.py) with stream windows of 0 opens a Watch and a Snapshot through
the proxy; 40 MiB of events are written on the server; the proxy's VmRSS
may grow by a few MiB, not by what was written; then the client opens its
window and the snapshot arrives whole and the events in order (the
first READ_EVENTS of them: a slow watcher's catch-up takes its time, on
etcd's server too).  cetcd's
proxy only (etcd's proxy buffers a slow watcher's events in its broadcast:
not measured here).
"""
import os
import socket
import struct
import sys
import time

import grpc
import pytest
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common import h2raw  # noqa: E402
from common.grpcproxy import GrpcProxy, kind_binary  # noqa: E402
from common.servers import against_etcd  # noqa: E402

pytestmark = pytest.mark.skipif(against_etcd(),
                                reason="cetcd's proxy's flow control")

VALUE = 1 << 20
EVENTS = 40
READ_EVENTS = EVENTS


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def asan(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def watch_create(prefix):
    end = prefix[:-1] + bytes([prefix[-1] + 1])
    create = h2raw.pb_bytes_field(1, prefix) + h2raw.pb_bytes_field(2, end)
    return h2raw.pb_bytes_field(1, create)  # WatchRequest.create_request


@pytest.fixture
def proxied(make_server):
    s = make_server(extra_args=["--quota-backend-bytes", str(4 << 30)])
    p = GrpcProxy(kind_binary("cetcd"), [s.endpoint])
    p.start()
    yield s, p
    p.close()


def read_all(c, want, timeout=60):
    """Reads frames until want(data) says done (the windows were opened
    wide before; want is asked every 256 frames and when the proxy is
    quiet); returns {sid: bytearray}."""
    data = {}
    deadline = time.time() + timeout
    frames = 0
    while time.time() < deadline:
        try:
            f = c.read_frame(timeout=min(0.5, max(0.01,
                                                  deadline - time.time())))
        except socket.timeout:
            if want(data):
                break
            continue
        assert f is not None, "the proxy closed the connection"
        ftype, _, sid, p = f
        if ftype == h2raw.DATA and p:
            data.setdefault(sid, bytearray()).extend(p)
        frames += 1
        if frames % 256 == 0 and want(data):
            break
    return data


def grpc_messages(b):
    out, at = [], 0
    while len(b) - at >= 5:
        n = struct.unpack(">I", b[at + 1:at + 5])[0]
        if len(b) - at < 5 + n:
            break
        out.append(bytes(b[at + 5:at + 5 + n]))
        at += 5 + n
    return out


def test_slow_watch_and_snapshot_hold_the_server_back(proxied):
    server, proxy = proxied
    c = h2raw.Conn(proxy.port, settings=[(h2raw.SETTINGS_INITIAL_WINDOW_SIZE,
                                          0)])
    # A Watch whose requests stay open, and a Snapshot; neither is read.
    wsid = c.next_id
    c.next_id += 2
    c.send(c.headers(wsid, "/etcdserverpb.Watch/Watch") +
           h2raw.frame(h2raw.DATA, 0, wsid,
                       h2raw.grpc_message(watch_create(b"w/"))))
    time.sleep(0.5)  # the watcher is created upstream
    kv = rpc_pb2_grpc.KVStub(grpc.insecure_channel(server.endpoint))
    base = rss_kb(proxy.proc.pid)
    for i in range(EVENTS):
        kv.Put(rpc_pb2.PutRequest(key=b"w/%03d" % i,
                                  value=bytes([i]) * VALUE), timeout=30)
    ssid, req = c.request("/etcdserverpb.Maintenance/Snapshot", b"")
    c.send(req)
    time.sleep(2)
    grown_mb = (rss_kb(proxy.proc.pid) - base) / 1024
    # 40 MiB of events and a ~42 MiB snapshot wait upstream (without the
    # pause and the small upstream window the proxy grew by ~55 MiB)
    if not asan(proxy.proc.pid):  # ASan's quarantine keeps freed memory
        assert grown_mb < 12, grown_mb
    assert proxy.proc.poll() is None
    # The client reads now: every event, in order, and the whole snapshot.
    c.send(h2raw.frame(h2raw.SETTINGS, 0, 0, struct.pack(
        ">HI", h2raw.SETTINGS_INITIAL_WINDOW_SIZE, (1 << 31) - 1)) +
        h2raw.frame(h2raw.WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))
    resp = rpc_pb2.WatchResponse()
    snap = rpc_pb2.SnapshotResponse()

    def events(data):
        n = 0
        for m in grpc_messages(data.get(wsid, b"")):
            resp.ParseFromString(m)
            n += len(resp.events)
        return n

    def snapshot_done(data):
        msgs = grpc_messages(data.get(ssid, b""))
        if not msgs:
            return False
        snap.ParseFromString(msgs[-1])
        return snap.remaining_bytes == 0

    data = read_all(c, lambda d: events(d) >= READ_EVENTS and
                    snapshot_done(d))
    keys = []
    for m in grpc_messages(data.get(wsid, b"")):
        resp.ParseFromString(m)
        for ev in resp.events:
            assert ev.kv.value == bytes([int(ev.kv.key[2:])]) * VALUE
            keys.append(ev.kv.key)
    assert len(keys) >= READ_EVENTS
    assert keys == [b"w/%03d" % i for i in range(len(keys))]
    assert snapshot_done(data)
    size = sum(len(rpc_pb2.SnapshotResponse.FromString(m).blob)
               for m in grpc_messages(data[ssid]))
    assert size > EVENTS * VALUE, size
    c.close()
