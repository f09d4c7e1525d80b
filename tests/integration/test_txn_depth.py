"""Txns nested deep, as raw bytes: the server answers etcd's error and
stays up.

protobuf-c's decoder recurses once per nested message without a limit of
its own; a TxnRequest nested 8000 deep (58 KiB) crashed the member before
api/kv.c looked at the nesting first (util/pbwalk.h).  etcd 3.4.23 takes
one op of --max-txn-ops's budget per level: 128 levels pass at the default
128, 129 are "too many operations".  Runs against etcd too
(CETCD_TEST_AGAINST_ETCD=1); the refusal beyond ~1000 levels with a raised
--max-txn-ops is cetcd's own limit (said in api/kv.c), tested on cetcd
only.
"""

import grpc
import pytest

from common.servers import against_etcd

TOO_MANY = "etcdserver: too many operations in txn request"


def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def nested(levels):
    """TxnRequest{success: [RequestOp{request_txn: ...}]}, levels deep,
    the innermost txn empty.  Built from the inside out by lengths alone
    (concatenating 100000 levels would copy gigabytes)."""
    heads, size = [], 0
    for _ in range(levels - 1):
        h = b"\x22" + varint(size)  # RequestOp.request_txn (4)
        size += len(h)
        heads.append(h)
        h = b"\x12" + varint(size)  # TxnRequest.success (2)
        size += len(h)
        heads.append(h)
    return b"".join(reversed(heads))


def txn(server, req):
    ch = grpc.insecure_channel(server.endpoint,
                               options=[("grpc.max_send_message_length",
                                         16 << 20)])
    try:
        return ch.unary_unary("/etcdserverpb.KV/Txn")(req, timeout=10)
    finally:
        ch.close()


def refused(server, req):
    with pytest.raises(grpc.RpcError) as e:
        txn(server, req)
    return e.value.code(), e.value.details()


@pytest.mark.parametrize("levels", [8000, 100000])
def test_deep_txn_refused_server_lives(make_server, levels):
    s = make_server()
    assert refused(s, nested(levels)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                          TOO_MANY)
    # Still serving, same process.
    assert s.proc.poll() is None
    assert txn(s, nested(2)) is not None


def test_budget_edge(make_server):
    s = make_server()
    assert txn(s, nested(129)) is not None  # the innermost is empty
    assert refused(s, nested(130)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                       TOO_MANY)


def test_raised_max_txn_ops_applies_deep_txn(make_server):
    s = make_server(extra_args=["--max-txn-ops", "5000"])
    assert txn(s, nested(1000)) is not None
    assert s.proc.poll() is None


@pytest.mark.skipif(against_etcd(), reason="cetcd's own nesting limit")
def test_nesting_limit_beyond_1000(make_server):
    s = make_server(extra_args=["--max-txn-ops", "5000"])
    assert refused(s, nested(1100)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                        TOO_MANY)
    assert s.proc.poll() is None
