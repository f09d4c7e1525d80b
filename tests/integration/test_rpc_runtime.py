"""The gRPC server runtime (src/rpc/) seen from real clients.

Goal: unary dispatch, replies from other threads, grpc-go's UNIMPLEMENTED
texts, the message-size limit, concurrency, client cancels, the health
service, streams and a clean (leak-free under ASan) shutdown.  Method: start
tests/rpc/echo_server.c (built as target rpc_echo_server) and drive it
with python grpcio using python-etcd3's generated stubs, and with the real
etcdctl.  Set RPC_ECHO_SERVER to pick a binary (e.g. the ASan build).
"""
import concurrent.futures
import os
import shutil
import subprocess
import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def echo_binary():
    if os.environ.get("RPC_ECHO_SERVER"):
        return os.environ["RPC_ECHO_SERVER"]
    bdir = os.environ.get("CETCD_BUILD_DIR")
    if not bdir and os.environ.get("CETCD_BIN"):
        bdir = os.path.dirname(os.environ["CETCD_BIN"])
    path = os.path.join(bdir or os.path.join(REPO, "build"),
                        "src", "rpc", "rpc_echo_server")
    if not os.path.exists(path):
        pytest.skip("rpc_echo_server not built: %s" % path)
    return path


class EchoServer:
    def __init__(self, *args):
        self.proc = subprocess.Popen([echo_binary()] + list(args),
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("READY "), line
        self.port = int(line.split()[1])
        self.addr = "127.0.0.1:%d" % self.port
        self.channel = grpc.insecure_channel(self.addr)
        self.kv = rpc_pb2_grpc.KVStub(self.channel)

    def stop(self):
        """Closes stdin (the server's stop signal); returns its stderr."""
        self.channel.close()
        self.proc.stdin.close()
        err = self.proc.stderr.read()
        self.proc.wait(timeout=30)
        return self.proc.returncode, err.decode(errors="replace")


def assert_clean(rc, err):
    assert rc == 0, err
    assert "clean exit" in err, err
    assert "AddressSanitizer" not in err, err
    assert "runtime error" not in err, err


@pytest.fixture(scope="module")
def server():
    s = EchoServer()
    yield s
    assert_clean(*s.stop())


def rng(key):
    return rpc_pb2.RangeRequest(key=key)


def test_unary_echo(server):
    r = server.kv.Range(rng(b"foo"), timeout=5)
    assert r.header.cluster_id == 1 and r.header.member_id == 2
    assert r.header.revision == 3 and r.header.raft_term == 4
    assert r.count == 1
    assert r.kvs[0].key == b"foo" and r.kvs[0].value == b"echo:foo"


def test_error_status(server):
    with pytest.raises(grpc.RpcError) as e:
        server.kv.Range(rng(b"error"), timeout=5)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert e.value.details() == "etcdserver: echo error"


def test_error_message_escaped(server):
    # grpc-message travels percent-encoded: '%', controls and non-ASCII.
    text = "100% sure\nnext line: \u00fcml\u00e4ut"
    with pytest.raises(grpc.RpcError) as e:
        server.kv.Range(rng(("error:" + text).encode()), timeout=5)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert e.value.details() == text


def test_compressed_request_refused_as_etcd(server):
    # etcd 3.4.23 answers a gzip-compressed request exactly so.
    with pytest.raises(grpc.RpcError) as e:
        server.kv.Range(rng(b"foo"), compression=grpc.Compression.Gzip,
                        timeout=5)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert e.value.details() == \
        'grpc: Decompressor is not installed for grpc-encoding "gzip"'


def test_async_reply_from_other_thread(server):
    t0 = time.monotonic()
    r = server.kv.Range(rng(b"async/200"), timeout=5)
    assert r.kvs[0].value == b"echo:async/200"
    assert time.monotonic() - t0 >= 0.19


def test_metadata_and_deadline(server):
    r = server.kv.Range(rng(b"token"), metadata=[("token", "tok123")],
                        timeout=5)
    assert r.kvs[0].value == b"tok123"
    r = server.kv.Range(rng(b"deadline"), timeout=3)
    assert 2000 <= int(r.kvs[0].value) <= 3100
    r = server.kv.Range(rng(b"deadline"))
    assert r.kvs[0].value == b"none"


def raw_call(server, path, body=b""):
    f = server.channel.unary_unary(path)
    return f(body, timeout=5)


@pytest.mark.parametrize("path,msg", [
    ("/etcdserverpb.KV/Put", "method Put not implemented"),
    ("/v3electionpb.Election/Campaign", "method Campaign not implemented"),
    ("/etcdserverpb.KV/Nope", "unknown method Nope for service "
                              "etcdserverpb.KV"),
    ("/no.Such/Thing", "unknown service no.Such"),
])
def test_unimplemented(server, path, msg):
    with pytest.raises(grpc.RpcError) as e:
        raw_call(server, path)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert e.value.details() == msg


def test_health_check(server):
    assert raw_call(server, "/grpc.health.v1.Health/Check") == b"\x08\x01"


def test_200_concurrent_calls(server):
    keys = [b"k%d" % i if i % 4 else b"async/%d" % (i % 50)
            for i in range(200)]
    futs = [server.kv.Range.future(rng(k), timeout=20) for k in keys]
    for k, f in zip(keys, futs):
        assert f.result().kvs[0].value == b"echo:" + k


def test_client_cancel(server):
    futs = [server.kv.Range.future(rng(b"async/500"), timeout=10)
            for _ in range(20)]
    time.sleep(0.1)
    for f in futs:
        f.cancel()
    for f in futs:
        assert f.cancelled()
    # A deadline that expires while the handler still holds the call.
    with pytest.raises(grpc.RpcError) as e:
        server.kv.Range(rng(b"async/600"), timeout=0.2)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    time.sleep(0.8)  # the late answers arrive and are dropped
    assert server.kv.Range(rng(b"after"), timeout=5).kvs[0].value == \
        b"echo:after"


def test_watch_stream(server):
    w = rpc_pb2_grpc.WatchStub(server.channel)

    def reqs():
        yield rpc_pb2.WatchRequest(
            create_request=rpc_pb2.WatchCreateRequest(key=b"wk"))
        yield rpc_pb2.WatchRequest(
            create_request=rpc_pb2.WatchCreateRequest(key=b"wk2"))
        time.sleep(0.1)
        yield rpc_pb2.WatchRequest(
            cancel_request=rpc_pb2.WatchCancelRequest(watch_id=1))

    got = list(w.Watch(reqs(), timeout=5))
    assert [(r.watch_id, r.created, r.canceled, len(r.events))
            for r in got] == [(0, True, False, 0), (0, False, False, 1),
                              (1, True, False, 0), (1, False, False, 1),
                              (1, False, True, 0)]
    assert got[3].events[0].kv.key == b"wk2"


def test_watch_stream_client_cancel(server):
    w = rpc_pb2_grpc.WatchStub(server.channel)

    def reqs():
        yield rpc_pb2.WatchRequest(
            create_request=rpc_pb2.WatchCreateRequest(key=b"x"))
        time.sleep(10)

    it = w.Watch(reqs(), timeout=20)
    assert next(it).created
    it.cancel()
    assert server.kv.Range(rng(b"alive"), timeout=5).count == 1


def test_etcdctl_get(server):
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        pytest.skip("etcdctl not installed")
    out = subprocess.run(
        [etcdctl, "--endpoints", server.addr, "get", "foo"],
        env=dict(os.environ, ETCDCTL_API="3"), check=True, timeout=20,
        stdout=subprocess.PIPE).stdout.decode()
    assert out.split("\n")[:2] == ["foo", "echo:foo"]


def test_message_size_limit():
    # Limit = max_request_bytes + 512 KiB, as in etcd.
    s = EchoServer("--max-request-bytes", "1024")
    try:
        ok = s.kv.Range(rng(b"a" * (512 * 1024)), timeout=5)
        assert len(ok.kvs[0].key) == 512 * 1024
        with pytest.raises(grpc.RpcError) as e:
            s.kv.Range(rng(b"a" * (512 * 1024 + 2048)), timeout=5)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert s.kv.Range(rng(b"b"), timeout=5).count == 1
    finally:
        assert_clean(*s.stop())


def test_stop_with_calls_in_flight():
    s = EchoServer("--threads", "3")
    futs = [s.kv.Range.future(rng(b"async/300"), timeout=10)
            for _ in range(30)]
    time.sleep(0.1)
    # Stop while the delayer still holds the calls.
    assert_clean(*s.stop())
    for f in futs:
        try:
            f.result()
        except grpc.RpcError:
            pass


def test_unix_socket_and_two_urls(tmp_path):
    sock = str(tmp_path / "echo.sock")
    s = EchoServer("--listen", "http://127.0.0.1:0",
                   "--listen", "unix://" + sock)
    try:
        ch = grpc.insecure_channel("unix:" + sock)
        r = rpc_pb2_grpc.KVStub(ch).Range(rng(b"u"), timeout=5)
        assert r.kvs[0].value == b"echo:u"
        ch.close()
    finally:
        assert_clean(*s.stop())
