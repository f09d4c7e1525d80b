"""Frames for streams a client never opened: ignored, as etcd does.

Goal: a client that sends RST_STREAM or WINDOW_UPDATE for a stream id it
never opened (an idle stream) keeps its connection and its other calls,
on cetcd as on etcd 3.4.23 (grpc-go looks the stream up, finds nothing
and goes on).  gRPC's C core client does this when a call is cancelled
right after it started (grpc/grpc issues 19655, 38758): the stream has an
id, its HEADERS were never written, the RST_STREAM goes out alone.
nghttp2 answers it with GOAWAY PROTOCOL_ERROR "RST_STREAM: stream in
idle", so before rpc/h2_scan.c every call on the connection failed with
UNAVAILABLE "GOAWAY received" (the rare failure of test_client_raw.py's
close-thread case: a Watch cancelled at once beside puts).

Method: raw HTTP/2 (common/h2raw.py) against a fresh single member of
each kind: RST_STREAM on stream 1 and WINDOW_UPDATE on stream 3, neither
ever opened, then a Put on stream 5 must be answered (grpc-status 0) and
a Range on stream 7 must see it; then RST_STREAM on stream 9 before the
HEADERS of stream 9, whose Range is answered too (grpc-go ignored the
RST_STREAM, so the stream is new).  No GOAWAY may come.  Then grpc's C
core (python grpcio) cancelling 300 Range calls right after starting
them beside a stream of puts on the same channel: no put may fail.
"""

import struct
import threading

import grpc
import pytest

from common import h2raw
from common.servers import ETCD_BIN
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

PUT = "/etcdserverpb.KV/Put"
RANGE = "/etcdserverpb.KV/Range"


def put_body(key, value):
    return h2raw.pb_bytes_field(1, key) + h2raw.pb_bytes_field(2, value)


def answer(conn, sid):
    """Stream sid's headers and DATA; a GOAWAY or a close fails."""
    return conn.read_stream(sid, goaway_fails=True)


def unary(conn, sid, path, body):
    msg = h2raw.grpc_message(body)
    return (conn.headers(sid, path) +
            h2raw.frame(h2raw.DATA, h2raw.END_STREAM, sid, msg))


@pytest.fixture(params=["cetcd", "etcd"])
def member(request, make_server):
    if request.param == "etcd":
        return make_server(binary=ETCD_BIN)
    return make_server()


def test_frames_for_idle_streams_ignored(member):
    conn = h2raw.Conn(member.client_port)
    try:
        idle = (h2raw.frame(h2raw.RST_STREAM, 0, 1, struct.pack(">I", 8)) +
                h2raw.frame(h2raw.WINDOW_UPDATE, 0, 3,
                            struct.pack(">I", 1000)))
        conn.send(idle + unary(conn, 5, PUT, put_body(b"idle/k", b"v1")))
        hdrs, _ = answer(conn, 5)
        assert hdrs.get(b"grpc-status") == b"0", hdrs
        conn.send(unary(conn, 7, RANGE, h2raw.pb_bytes_field(1, b"idle/k")))
        hdrs, data = answer(conn, 7)
        assert hdrs.get(b"grpc-status") == b"0", hdrs
        assert b"v1" in data
        # A RST_STREAM ahead of its stream's HEADERS: grpc-go ignores it
        # and serves the stream that follows.
        conn.send(h2raw.frame(h2raw.RST_STREAM, 0, 9, struct.pack(">I", 8)) +
                  unary(conn, 9, RANGE, h2raw.pb_bytes_field(1, b"idle/k")))
        hdrs, data = answer(conn, 9)
        assert hdrs.get(b"grpc-status") == b"0", hdrs
        assert b"v1" in data
    finally:
        conn.close()


def test_grpc_core_cancel_at_once_keeps_the_channel(member):
    ch = grpc.insecure_channel(member.endpoint)
    try:
        kv = rpc_pb2_grpc.KVStub(ch)
        kv.Put(rpc_pb2.PutRequest(key=b"cx/0", value=b"v"), timeout=10)
        errors, stop = [], threading.Event()

        def putter():
            i = 0
            while not stop.is_set():
                try:
                    kv.Put(rpc_pb2.PutRequest(key=b"cx/%d" % (i % 20),
                                              value=b"v"), timeout=10)
                except grpc.RpcError as e:
                    errors.append("%s %s" % (e.code(), e.details()))
                i += 1

        t = threading.Thread(target=putter)
        t.start()
        try:
            for _ in range(300):
                kv.Range.future(rpc_pb2.RangeRequest(key=b"cx/0"),
                                timeout=10).cancel()
        finally:
            stop.set()
            t.join(30)
        assert errors == []
        assert kv.Range(rpc_pb2.RangeRequest(key=b"cx/0"),
                        timeout=10).count == 1
    finally:
        ch.close()
