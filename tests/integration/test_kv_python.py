"""KV semantics through python3-etcd3 and raw gRPC stubs.

Goal: the KV service answers exactly as etcd 3.4.23 does, including what
etcdctl cannot express: limit/more/count, count_only, keys_only, the
min/max mod/create revision filters, every sort target and order, reads at a
revision, range_end "\\0" and key "\\0", nested Txn, range compares, the
txn checks (duplicate keys, too many ops, empty RequestOp), request size
limits, compaction errors and the response header.  Errors are asserted by
gRPC status code AND message, because clients match on both.

Method: python3-etcd3's client for the everyday API, and the raw stubs from
etcd3.etcdrpc for the rest, against a fresh single-member server per test
(conftest), so revisions are deterministic: the n-th write is revision n+1.
Servers with --max-txn-ops 3 and a small --max-request-bytes are started
where the limits are under test.  Every expectation was checked against
/usr/bin/etcd.
"""

import etcd3
import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2
from conftest import grpc_error

R = rpc_pb2.RangeRequest
INVALID = grpc.StatusCode.INVALID_ARGUMENT
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE
COMPACTED = "etcdserver: mvcc: required revision has been compacted"
FUTURE = "etcdserver: mvcc: required revision is a future revision"
DUP = "etcdserver: duplicate key given in txn request"
TOO_MANY = "etcdserver: too many operations in txn request"


def put(kv, key, value, **kw):
    return kv.Put(rpc_pb2.PutRequest(key=key, value=value, **kw), timeout=10)


def rng(kv, key, **kw):
    return kv.Range(R(key=key, **kw), timeout=10)


def keys(resp):
    return [kv.key for kv in resp.kvs]


def op_put(key, value, **kw):
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
        key=key, value=value, **kw))


def op_range(key, **kw):
    return rpc_pb2.RequestOp(request_range=R(key=key, **kw))


def op_del(key, **kw):
    return rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(
        key=key, **kw))


def op_txn(**kw):
    return rpc_pb2.RequestOp(request_txn=rpc_pb2.TxnRequest(**kw))


def cmp(key, target, result, **kw):
    """Compare on target 'version'|'create'|'mod'|'value'|'lease'."""
    t = {"version": rpc_pb2.Compare.VERSION,
         "create": rpc_pb2.Compare.CREATE,
         "mod": rpc_pb2.Compare.MOD,
         "value": rpc_pb2.Compare.VALUE,
         "lease": rpc_pb2.Compare.LEASE}[target]
    r = {"=": rpc_pb2.Compare.EQUAL, ">": rpc_pb2.Compare.GREATER,
         "<": rpc_pb2.Compare.LESS, "!=": rpc_pb2.Compare.NOT_EQUAL}[result]
    return rpc_pb2.Compare(key=key, target=t, result=r, **kw)


def txn(kv, compare=(), success=(), failure=()):
    return kv.Txn(rpc_pb2.TxnRequest(compare=list(compare),
                                     success=list(success),
                                     failure=list(failure)), timeout=10)


@pytest.fixture
def kv(server):
    return server.kv()


# -- python3-etcd3 client API ---------------------------------------------

def test_client_api_roundtrip(server):
    c = server.client()
    assert c.get("missing") == (None, None)
    c.put("/a/1", "one")
    c.put("/a/2", "two")
    c.put("/b", "bee")
    value, meta = c.get("/a/1")
    assert value == b"one"
    assert (meta.key, meta.version, meta.create_revision,
            meta.mod_revision, meta.lease_id) == (b"/a/1", 1, 2, 2, 0)
    assert [(v, m.key) for v, m in c.get_prefix("/a/")] == \
        [(b"one", b"/a/1"), (b"two", b"/a/2")]
    assert [m.key for _, m in c.get_range("/a/2", "/c")] == [b"/a/2", b"/b"]
    assert [m.key for _, m in c.get_all()] == [b"/a/1", b"/a/2", b"/b"]
    assert [m.key for _, m in c.get_prefix(
        "/", sort_order="descend", sort_target="value")] == \
        [b"/a/2", b"/a/1", b"/b"]
    resp = c.put("/b", "bee2", prev_kv=True)
    assert resp.prev_kv.value == b"bee" and resp.header.revision == 5
    assert c.delete("/a/1") is True
    assert c.delete("/a/1") is False
    resp = c.delete("/b", prev_kv=True, return_response=True)
    assert resp.deleted == 1 and resp.prev_kvs[0].value == b"bee2"
    c.put("/p/x", "1")
    c.put("/p/y", "1")
    assert c.delete_prefix("/p/").deleted == 2
    assert server.rev() == 10
    c.close()


def test_client_api_transactions(server):
    c = server.client()
    assert c.put_if_not_exists("k", "v1") is True
    assert c.put_if_not_exists("k", "v2") is False
    assert c.replace("k", "v1", "v3") is True
    assert c.replace("k", "v1", "v4") is False
    assert c.get("k")[0] == b"v3"
    ok, resps = c.transaction(
        compare=[c.transactions.version("k") == 2,
                 c.transactions.create("k") < 3,
                 c.transactions.mod("k") > 2,
                 c.transactions.value("k") != "v1"],
        success=[c.transactions.put("k2", "x"), c.transactions.get("k"),
                 c.transactions.delete("nothing")],
        failure=[])
    assert ok is True
    assert resps[1][0][0] == b"v3"
    assert resps[2].response_delete_range.deleted == 0
    ok, resps = c.transaction(compare=[c.transactions.value("k") == "no"],
                              success=[], failure=[c.transactions.get("k2")])
    assert ok is False and resps[0][0][0] == b"x"
    c.close()


def test_client_api_compact(server):
    c = server.client()
    for i in range(5):
        c.put("k", str(i))
    c.compact(4)
    with pytest.raises(grpc.RpcError) as ei:
        c.compact(3)
    assert ei.value.code() == OUT_OF_RANGE
    assert ei.value.details() == COMPACTED
    c.compact(6, physical=True)
    assert c.get("k")[0] == b"4"
    c.close()


# -- header ----------------------------------------------------------------

def test_response_header(server, kv):
    h1 = rng(kv, b"x").header
    assert h1.cluster_id != 0 and h1.member_id != 0
    assert h1.raft_term >= 1 and h1.revision == 1
    h2 = put(kv, b"x", b"1").header
    assert (h2.cluster_id, h2.member_id, h2.raft_term) == \
        (h1.cluster_id, h1.member_id, h1.raft_term)
    assert h2.revision == 2
    assert kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"nope"),
                          timeout=10).header.revision == 2
    assert kv.Compact(rpc_pb2.CompactionRequest(revision=2),
                      timeout=10).header.revision == 2
    t = txn(kv, success=[op_put(b"y", b"1"), op_range(b"y")])
    assert t.header.revision == 3 and t.header.member_id == h1.member_id
    # inner responses carry only the revision
    assert t.responses[0].response_put.header == \
        rpc_pb2.ResponseHeader(revision=3)
    assert t.responses[1].response_range.header == \
        rpc_pb2.ResponseHeader(revision=3)
    st = server.maintenance().Status(rpc_pb2.StatusRequest(), timeout=10)
    assert st.header.member_id == h1.member_id and st.leader == h1.member_id


# -- Range ------------------------------------------------------------------

@pytest.fixture
def data(kv):
    """a..f with distinct create/mod/version/value orders.

    rev 2 a=5, 3 b=3, 4 c=1, 5 d=4, 6 e=2, 7 f=0, 8 b=9, 9 d=7, 10 d=8,
    11 a=6.  Store revision 11.
    """
    for k, v in [(b"a", b"5"), (b"b", b"3"), (b"c", b"1"), (b"d", b"4"),
                 (b"e", b"2"), (b"f", b"0"), (b"b", b"9"), (b"d", b"7"),
                 (b"d", b"8"), (b"a", b"6")]:
        put(kv, k, v)
    return kv


def test_range_limit_more_count(data):
    r = rng(data, b"a", range_end=b"z", limit=2)
    assert keys(r) == [b"a", b"b"] and r.more and r.count == 6
    r = rng(data, b"a", range_end=b"z", limit=6)
    assert len(r.kvs) == 6 and not r.more and r.count == 6
    r = rng(data, b"a", range_end=b"z", limit=100)
    assert len(r.kvs) == 6 and not r.more
    r = rng(data, b"c", range_end=b"e")
    assert keys(r) == [b"c", b"d"] and r.count == 2 and not r.more
    r = rng(data, b"zz")
    assert (len(r.kvs), r.count, r.more, r.header.revision) == \
        (0, 0, False, 11)


def test_range_count_only_keys_only(data):
    r = rng(data, b"a", range_end=b"z", count_only=True)
    assert (len(r.kvs), r.count, r.more) == (0, 6, False)
    r = rng(data, b"a", range_end=b"z", count_only=True, limit=2)
    assert (len(r.kvs), r.count) == (0, 6)
    r = rng(data, b"a", range_end=b"z", keys_only=True)
    assert keys(r) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert all(kv.value == b"" for kv in r.kvs)
    d = r.kvs[3]
    assert (d.create_revision, d.mod_revision, d.version) == (5, 10, 3)


def test_range_end_zero_and_all_keys(data):
    put(data, b"\x00", b"nul")
    put(data, b"\xff\xff", b"ff")
    assert keys(rng(data, b"d", range_end=b"\x00")) == \
        [b"d", b"e", b"f", b"\xff\xff"]
    assert keys(rng(data, b"\x00", range_end=b"\x00")) == \
        [b"\x00", b"a", b"b", b"c", b"d", b"e", b"f", b"\xff\xff"]
    assert keys(rng(data, b"\x00")) == [b"\x00"]
    # range_end <= key: empty range
    r = rng(data, b"d", range_end=b"c")
    assert (len(r.kvs), r.count) == (0, 0)
    r = rng(data, b"d", range_end=b"d")
    assert (len(r.kvs), r.count) == (0, 0)


def test_range_sort_every_target_and_order(data):
    S = rpc_pb2.RangeRequest
    cases = {
        S.KEY: [b"a", b"b", b"c", b"d", b"e", b"f"],
        S.CREATE: [b"a", b"b", b"c", b"d", b"e", b"f"],
        S.MOD: [b"c", b"e", b"f", b"b", b"d", b"a"],
        S.VERSION: None,  # ties: checked separately below
        S.VALUE: [b"f", b"c", b"e", b"a", b"d", b"b"],
    }
    for target, want in cases.items():
        if want is None:
            continue
        for order in (S.ASCEND, S.DESCEND):
            r = rng(data, b"a", range_end=b"z", sort_target=target,
                    sort_order=order)
            exp = want if order == S.ASCEND else want[::-1]
            assert keys(r) == exp, (target, order)
            assert r.count == 6
        # order NONE with a target other than KEY means ASCEND
        r = rng(data, b"a", range_end=b"z", sort_target=target,
                sort_order=S.NONE)
        assert keys(r) == want, target
    r = rng(data, b"a", range_end=b"z", sort_target=S.VERSION,
            sort_order=S.ASCEND)
    assert [kv.version for kv in r.kvs] == [1, 1, 1, 2, 2, 3]
    assert set(keys(r)[:3]) == {b"c", b"e", b"f"}
    assert set(keys(r)[3:5]) == {b"a", b"b"} and keys(r)[5] == b"d"
    r = rng(data, b"a", range_end=b"z", sort_target=S.VERSION,
            sort_order=S.DESCEND)
    assert [kv.version for kv in r.kvs] == [3, 2, 2, 1, 1, 1]
    # sort, then limit
    r = rng(data, b"a", range_end=b"z", sort_target=S.VALUE,
            sort_order=S.DESCEND, limit=2)
    assert keys(r) == [b"b", b"d"] and r.more and r.count == 6
    r = rng(data, b"a", range_end=b"z", sort_order=S.DESCEND, limit=1)
    assert keys(r) == [b"f"] and r.more


def test_range_revision_filters(data):
    E = b"z"
    r = rng(data, b"a", range_end=E, min_mod_revision=8)
    assert keys(r) == [b"a", b"b", b"d"]
    assert r.count == 6  # count is before the filters (3.4 quirk)
    r = rng(data, b"a", range_end=E, max_mod_revision=6)
    assert keys(r) == [b"c", b"e"]
    r = rng(data, b"a", range_end=E, min_create_revision=4,
            max_create_revision=6)
    assert keys(r) == [b"c", b"d", b"e"]
    r = rng(data, b"a", range_end=E, min_mod_revision=7, max_mod_revision=10)
    assert keys(r) == [b"b", b"d", b"f"]
    r = rng(data, b"a", range_end=E, min_mod_revision=7, limit=1)
    assert keys(r) == [b"a"] and r.count == 6
    r = rng(data, b"a", range_end=E, min_create_revision=100)
    assert keys(r) == [] and r.count == 6
    r = rng(data, b"a", range_end=E, min_mod_revision=8, count_only=True)
    assert (len(r.kvs), r.count) == (0, 6)


def test_range_at_revision(data):
    r = rng(data, b"a", range_end=b"z", revision=4)
    assert keys(r) == [b"a", b"b", b"c"] and r.header.revision == 11
    assert [kv.value for kv in r.kvs] == [b"5", b"3", b"1"]
    r = rng(data, b"d", revision=9)
    assert (r.kvs[0].value, r.kvs[0].version, r.kvs[0].mod_revision) == \
        (b"7", 2, 9)
    r = rng(data, b"a", revision=1)
    assert (len(r.kvs), r.count) == (0, 0)
    assert rng(data, b"a", revision=11).kvs[0].value == b"6"
    assert rng(data, b"a", revision=0).kvs[0].value == b"6"
    assert rng(data, b"a", revision=-5).kvs[0].value == b"6"
    assert grpc_error(rng, data, b"a", revision=12) == (OUT_OF_RANGE, FUTURE)
    data.Compact(rpc_pb2.CompactionRequest(revision=8), timeout=10)
    assert grpc_error(rng, data, b"a", revision=7) == \
        (OUT_OF_RANGE, COMPACTED)
    r = rng(data, b"a", range_end=b"z", revision=8)
    assert [kv.value for kv in r.kvs] == [b"5", b"9", b"1", b"4", b"2",
                                          b"0"]
    # the compaction applies to the whole keyspace, serializable too
    assert grpc_error(rng, data, b"zzz", revision=2, serializable=True) == \
        (OUT_OF_RANGE, COMPACTED)


def test_range_serializable(data):
    r = rng(data, b"a", range_end=b"z", serializable=True)
    assert len(r.kvs) == 6 and r.header.revision == 11


def test_empty_key_errors(kv):
    msg = "etcdserver: key is not provided"
    assert grpc_error(rng, kv, b"") == (INVALID, msg)
    assert grpc_error(rng, kv, b"", range_end=b"z") == (INVALID, msg)
    assert grpc_error(put, kv, b"", b"v") == (INVALID, msg)
    assert grpc_error(kv.DeleteRange,
                      rpc_pb2.DeleteRangeRequest(key=b"")) == (INVALID, msg)
    assert grpc_error(txn, kv, compare=[cmp(b"", "version", "=")]) == \
        (INVALID, msg)
    assert grpc_error(txn, kv, success=[op_put(b"", b"v")]) == (INVALID, msg)
    assert grpc_error(txn, kv, failure=[op_range(b"")]) == (INVALID, msg)


# -- Put / DeleteRange -------------------------------------------------------

def test_put_ignore_value_lease(kv):
    assert grpc_error(put, kv, b"k", b"", ignore_value=True) == \
        (INVALID, "etcdserver: key not found")
    assert grpc_error(put, kv, b"k", b"", ignore_lease=True) == \
        (INVALID, "etcdserver: key not found")
    assert grpc_error(put, kv, b"k", b"v", ignore_value=True) == \
        (INVALID, "etcdserver: value is provided")
    assert grpc_error(put, kv, b"k", b"", lease=5, ignore_lease=True) == \
        (INVALID, "etcdserver: lease is provided")
    assert grpc_error(put, kv, b"k", b"v", lease=0x1234) == \
        (grpc.StatusCode.NOT_FOUND, "etcdserver: requested lease not found")
    put(kv, b"k", b"orig")
    r = put(kv, b"k", b"", ignore_value=True, prev_kv=True)
    assert r.prev_kv.value == b"orig" and r.header.revision == 3
    r = put(kv, b"k", b"new", ignore_lease=True)
    got = rng(kv, b"k").kvs[0]
    assert (got.value, got.version, got.mod_revision, got.lease) == \
        (b"new", 3, 4, 0)
    # both at once keeps value and lease
    put(kv, b"k", b"", ignore_value=True, ignore_lease=True)
    assert rng(kv, b"k").kvs[0].value == b"new"


def test_delete_range_variants(data):
    D = rpc_pb2.DeleteRangeRequest
    r = data.DeleteRange(D(key=b"zz"), timeout=10)
    assert (r.deleted, r.header.revision) == (0, 11)
    r = data.DeleteRange(D(key=b"b", range_end=b"d", prev_kv=True),
                         timeout=10)
    assert r.deleted == 2 and r.header.revision == 12
    assert [(kv.key, kv.value, kv.version) for kv in r.prev_kvs] == \
        [(b"b", b"9", 2), (b"c", b"1", 1)]
    r = data.DeleteRange(D(key=b"e", range_end=b"\x00"), timeout=10)
    assert r.deleted == 2 and not r.prev_kvs and r.header.revision == 13
    r = data.DeleteRange(D(key=b"\x00", range_end=b"\x00", prev_kv=True),
                         timeout=10)
    assert [kv.key for kv in r.prev_kvs] == [b"a", b"d"]
    assert rng(data, b"\x00", range_end=b"\x00").count == 0
    # history stays readable until compacted
    assert keys(rng(data, b"a", range_end=b"z", revision=11)) == \
        [b"a", b"b", b"c", b"d", b"e", b"f"]


# -- Txn ----------------------------------------------------------------------

def test_txn_compares(data):
    # a: create 2 mod 11 ver 2 val 6; missing key: all zero, value compare
    # on a missing key always fails
    true = [cmp(b"a", "version", "=", version=2),
            cmp(b"a", "create", "<", create_revision=3),
            cmp(b"a", "mod", ">", mod_revision=10),
            cmp(b"a", "value", "!=", value=b"5"),
            cmp(b"a", "value", ">", value=b"59"),
            cmp(b"a", "lease", "=", lease=0),
            cmp(b"zz", "version", "=", version=0),
            cmp(b"zz", "create", "=", create_revision=0),
            cmp(b"zz", "lease", "=", lease=0),
            cmp(b"zz", "mod", "<", mod_revision=1)]
    false = [cmp(b"a", "version", "!=", version=2),
             cmp(b"a", "mod", "<", mod_revision=11),
             cmp(b"a", "lease", ">", lease=0),
             cmp(b"zz", "value", "=", value=b""),
             cmp(b"zz", "value", "!=", value=b"x"),
             cmp(b"zz", "value", "<", value=b"x")]
    for c in true:
        assert txn(data, [c]).succeeded, c
    for c in false:
        assert not txn(data, [c]).succeeded, c
    assert not txn(data, true + false[:1]).succeeded
    assert txn(data, true).succeeded


def test_txn_range_compare(data):
    # versions: a2 b2 c1 d3 e1 f1
    assert txn(data, [cmp(b"a", "version", ">", version=0,
                          range_end=b"z")]).succeeded
    assert not txn(data, [cmp(b"a", "version", ">", version=1,
                              range_end=b"z")]).succeeded
    assert txn(data, [cmp(b"a", "version", ">", version=1,
                          range_end=b"c")]).succeeded
    assert txn(data, [cmp(b"c", "mod", "<", mod_revision=8,
                          range_end=b"\x00")]).succeeded is False
    assert txn(data, [cmp(b"e", "mod", "<", mod_revision=8,
                          range_end=b"\x00")]).succeeded
    assert txn(data, [cmp(b"\x00", "create", "<", create_revision=8,
                          range_end=b"\x00")]).succeeded
    # a range compare on an empty range: VALUE fails, others use zero values
    assert txn(data, [cmp(b"x", "version", "=", version=0,
                          range_end=b"y")]).succeeded
    assert not txn(data, [cmp(b"x", "value", "=", value=b"",
                              range_end=b"y")]).succeeded


def test_txn_branches_and_revision(kv):
    put(kv, b"x", b"1")
    t = txn(kv, [cmp(b"x", "value", "=", value=b"1")],
            success=[op_put(b"x", b"2", prev_kv=True), op_range(b"x"),
                     op_del(b"nothing"), op_put(b"y", b"1")],
            failure=[op_put(b"z", b"1")])
    assert t.succeeded and t.header.revision == 3
    r = t.responses
    assert [x.WhichOneof("response") for x in r] == [
        "response_put", "response_range", "response_delete_range",
        "response_put"]
    assert r[0].response_put.prev_kv.value == b"1"
    assert r[1].response_range.kvs[0].value == b"2"
    assert r[1].response_range.kvs[0].mod_revision == 3
    assert r[2].response_delete_range.deleted == 0
    y = rng(kv, b"y").kvs[0]
    x = rng(kv, b"x").kvs[0]
    assert (x.mod_revision, y.mod_revision, y.create_revision) == (3, 3, 3)
    # failure branch
    t = txn(kv, [cmp(b"x", "value", "=", value=b"1")],
            success=[op_put(b"z", b"s")],
            failure=[op_del(b"x", prev_kv=True), op_range(b"x")])
    assert not t.succeeded and t.header.revision == 4
    assert t.responses[0].response_delete_range.prev_kvs[0].value == b"2"
    assert t.responses[1].response_range.count == 0
    # read-only txn: no new revision
    t = txn(kv, success=[op_range(b"y")])
    assert t.header.revision == 4
    # empty txn
    t = txn(kv)
    assert t.succeeded and len(t.responses) == 0 and t.header.revision == 4


def test_txn_nested(kv):
    put(kv, b"a", b"1")
    inner_ok = op_txn(compare=[cmp(b"a", "value", "=", value=b"1")],
                      success=[op_put(b"b", b"from-inner"), op_range(b"a")],
                      failure=[op_put(b"c", b"x")])
    inner_fail = op_txn(compare=[cmp(b"a", "version", "=", version=9)],
                        success=[op_put(b"d", b"x")],
                        failure=[op_range(b"b"),
                                 op_txn(success=[op_put(b"e", b"deep")])])
    t = txn(kv, [cmp(b"a", "version", "=", version=1)],
            success=[inner_ok, op_put(b"f", b"top"), inner_fail])
    assert t.succeeded and t.header.revision == 3
    r0 = t.responses[0].response_txn
    # a nested txn's response has an empty header (not even the revision)
    assert r0.succeeded and r0.header == rpc_pb2.ResponseHeader()
    assert r0.responses[0].response_put.header.revision == 3
    assert r0.responses[1].response_range.kvs[0].value == b"1"
    r2 = t.responses[2].response_txn
    assert not r2.succeeded
    # the inner txn sees the writes made before it in the same txn
    assert r2.responses[0].response_range.kvs[0].value == b"from-inner"
    deep = r2.responses[1].response_txn
    assert deep.succeeded
    assert deep.responses[0].response_put.header.revision == 3
    got = rng(kv, b"\x00", range_end=b"\x00")
    assert keys(got) == [b"a", b"b", b"e", b"f"]
    assert {kv_.mod_revision for kv_ in got.kvs if kv_.key != b"a"} == {3}


def test_txn_duplicate_keys(kv):
    put(kv, b"k", b"v")
    cases = [
        [op_put(b"k", b"1"), op_put(b"k", b"2")],
        [op_put(b"k", b"1"), op_del(b"k")],
        [op_del(b"k"), op_put(b"k", b"1")],
        [op_put(b"kb", b"1"), op_del(b"ka", range_end=b"kc")],
        [op_put(b"k", b"1"), op_txn(success=[op_put(b"k", b"2")])],
        [op_txn(failure=[op_del(b"k")]),
         op_txn(success=[op_put(b"k", b"2")])],
        [op_txn(failure=[op_del(b"a", range_end=b"z")]), op_put(b"k", b"2")],
        [op_del(b"k"), op_txn(success=[op_txn(success=[op_put(b"k", b"")])])],
    ]
    for ops in cases:
        assert grpc_error(txn, kv, success=ops) == (INVALID, DUP), ops
        assert grpc_error(txn, kv, failure=ops) == (INVALID, DUP), ops
    # not duplicates: the same key in success and failure, two deletes,
    # reads, puts in the two branches of one nested txn
    ok = [
        ([op_put(b"k", b"1")], [op_put(b"k", b"2")]),
        ([op_del(b"k"), op_del(b"k")], []),
        ([op_put(b"k", b"1"), op_range(b"k"), op_range(b"k")], []),
        ([op_txn(success=[op_put(b"k", b"1")],
                 failure=[op_put(b"k", b"2")])], []),
        # 3.4 quirk: a delete with range_end "\0" escapes the overlap check
        ([op_put(b"k", b"1"), op_del(b"a", range_end=b"\x00")], []),
        # 3.4 quirk: a nested put before a nested delete of the same key is
        # not caught (children's deletes are merged after their puts)
        ([op_txn(success=[op_put(b"k", b"2")]),
          op_txn(compare=[cmp(b"k", "version", "=", version=99)],
                 failure=[op_del(b"k")])], []),
    ]
    for s, f in ok:
        txn(kv, success=s, failure=f)
    assert rng(kv, b"k").count == 0


def test_txn_too_many_ops_default(kv):
    ops = [op_range(b"k%d" % i) for i in range(129)]
    assert grpc_error(txn, kv, success=ops) == (INVALID, TOO_MANY)
    assert grpc_error(txn, kv, failure=ops) == (INVALID, TOO_MANY)
    cmps = [cmp(b"k", "version", "=", version=0)] * 129
    assert grpc_error(txn, kv, compare=cmps) == (INVALID, TOO_MANY)
    # the limit is per list: 128 + 128 + 128 is fine
    t = txn(kv, cmps[:128], [op_put(b"k%d" % i, b"v") for i in range(128)],
            ops[:128])
    assert t.succeeded and len(t.responses) == 128
    assert rng(kv, b"k", range_end=b"l").count == 128


def test_txn_too_many_ops_flag(make_server):
    s = make_server(extra_args=["--max-txn-ops", "3"])
    kv = s.kv()
    ops = [op_put(b"k%d" % i, b"v") for i in range(4)]
    assert grpc_error(txn, kv, success=ops) == (INVALID, TOO_MANY)
    assert txn(kv, success=ops[:3]).succeeded
    # a nested txn gets what the outer level leaves: max - (longest outer
    # list), so with one outer op the inner lists may hold 2
    t = txn(kv, success=[op_txn(success=[op_range(b"a")] * 2,
                                failure=[op_range(b"a")] * 2)])
    assert len(t.responses[0].response_txn.responses) == 2
    assert grpc_error(txn, kv, success=[op_txn(
        success=[op_range(b"a")] * 3)]) == (INVALID, TOO_MANY)
    nested = op_txn(success=[op_range(b"a")])
    assert len(txn(kv, success=[nested, nested]).responses) == 2
    assert grpc_error(txn, kv, success=[nested] * 3) == (INVALID, TOO_MANY)


def test_txn_empty_request_op(kv):
    assert grpc_error(txn, kv, success=[rpc_pb2.RequestOp()]) == \
        (INVALID, "etcdserver: key not found")
    assert grpc_error(txn, kv, failure=[op_range(b"a"),
                                        rpc_pb2.RequestOp()]) == \
        (INVALID, "etcdserver: key not found")


# -- sizes ----------------------------------------------------------------------

TOO_LARGE = "etcdserver: request is too large"


def test_request_too_large_default(kv):
    limit = 1572864
    put(kv, b"big", b"x" * (limit - 1024))
    assert rng(kv, b"big").kvs[0].value == b"x" * (limit - 1024)
    assert grpc_error(put, kv, b"big2", b"x" * (limit + 10)) == \
        (INVALID, TOO_LARGE)
    assert rng(kv, b"big2").count == 0
    # beyond max-request-bytes + 512 KiB gRPC itself refuses the message
    code, msg = grpc_error(put, kv, b"big3", b"x" * (limit + 600 * 1024))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert msg.startswith("grpc: received message larger than max (")
    assert msg.endswith(" vs. %d)" % (limit + 512 * 1024))


def test_request_too_large_flag(make_server):
    s = make_server(extra_args=["--max-request-bytes", "1024"])
    kv = s.kv()
    put(kv, b"ok", b"x" * 900)
    assert grpc_error(put, kv, b"k", b"x" * 1100) == (INVALID, TOO_LARGE)
    assert grpc_error(txn, kv, success=[op_put(b"k%d" % i, b"x" * 300)
                                        for i in range(4)]) == \
        (INVALID, TOO_LARGE)
    code, msg = grpc_error(put, kv, b"k", b"x" * (600 * 1024))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert msg.endswith(" vs. %d)" % (1024 + 512 * 1024))
    assert s.rev() == 2


# -- Compact ----------------------------------------------------------------------

def test_compact_errors_and_effect(data):
    C = rpc_pb2.CompactionRequest
    assert grpc_error(data.Compact, C(revision=12), timeout=10) == \
        (OUT_OF_RANGE, FUTURE)
    assert grpc_error(data.Compact, C(revision=100), timeout=10) == \
        (OUT_OF_RANGE, FUTURE)
    r = data.Compact(C(revision=5), timeout=10)
    assert r.header.revision == 11
    for rev in (0, 1, 4, 5):
        assert grpc_error(data.Compact, C(revision=rev), timeout=10) == \
            (OUT_OF_RANGE, COMPACTED), rev
    for rev in (1, 4):
        assert grpc_error(rng, data, b"a", revision=rev) == \
            (OUT_OF_RANGE, COMPACTED)
    assert keys(rng(data, b"a", range_end=b"z", revision=5)) == \
        [b"a", b"b", b"c", b"d"]
    data.Compact(C(revision=11, physical=True), timeout=10)
    assert grpc_error(rng, data, b"a", revision=10) == \
        (OUT_OF_RANGE, COMPACTED)
    r = rng(data, b"a", range_end=b"z", revision=11)
    assert len(r.kvs) == 6
    # compaction keeps versions and create revisions of live keys
    d = rng(data, b"d").kvs[0]
    assert (d.create_revision, d.mod_revision, d.version) == (5, 10, 3)
    # Txn ranges at a compacted revision fail the whole txn
    assert grpc_error(txn, data, success=[op_range(b"a", revision=3)]) == \
        (OUT_OF_RANGE, COMPACTED)
    assert grpc_error(txn, data, success=[op_range(b"a", revision=99)]) == \
        (OUT_OF_RANGE, FUTURE)


def test_txn_negative_range_revision(server):
    """A txn's range checks its revision against etcd's compactMainRev:
    -1 before any compaction, then the compacted revision, so a negative
    revision passes (reading the current state) until the first compaction,
    even one at revision 0 (seed 81 of the differential test found this);
    a plain Range reads the current state either way."""
    kv = server.kv()
    put(kv, b"a", b"1")
    r = txn(kv, success=[op_range(b"a", revision=-1)])
    assert r.responses[0].response_range.kvs[0].value == b"1"
    assert grpc_error(txn, kv, success=[op_range(b"a", revision=-2)]) == \
        (OUT_OF_RANGE, COMPACTED)
    kv.Compact(rpc_pb2.CompactionRequest(revision=0), timeout=10)
    assert grpc_error(txn, kv, success=[op_range(b"a", revision=-1)]) == \
        (OUT_OF_RANGE, COMPACTED)
    assert rng(kv, b"a", revision=-1).kvs[0].value == b"1"


# -- long keys --------------------------------------------------------------
# Keys longer than LMDB's key limit (494 bytes): etcd takes any key that
# fits the request (--max-request-bytes).  They share a 486-byte prefix
# (cetcd's index prefix, src/mvcc/mvcc_long.c), hold 0x00/0xff bytes and
# interleave with short keys.

LP = b"\x00k" * 243
LKEYS = [LP + b"\x00" * 8, LP + b"\x00" * 9, LP + b"\x00" * 9 + b"\xff",
         LP + b"\xff" * 700, LP + b"a", LP + b"a" * 40, LP[:-1],
         b"\x00k" * 20000]


@pytest.fixture
def longs(kv):
    for i, k in enumerate(LKEYS):
        put(kv, k, b"%d" % i)
    return kv


def test_long_keys_ranges(longs):
    kv, want = longs, sorted(LKEYS)
    assert keys(rng(kv, b"\0", range_end=b"\0")) == want
    assert keys(rng(kv, LKEYS[1], range_end=b"\0")) == \
        [k for k in want if k >= LKEYS[1]]
    assert keys(rng(kv, LKEYS[0], range_end=LKEYS[3])) == \
        [k for k in want if LKEYS[0] <= k < LKEYS[3]]
    r = rng(kv, LP, range_end=LP[:-1] + b"l", limit=2)
    assert (keys(r), r.count, r.more) == (want[1:3], 7, True)
    r = rng(kv, LP, range_end=LP[:-1] + b"l", count_only=True)
    assert (r.count, list(r.kvs)) == (7, [])
    r = rng(kv, b"\0", range_end=b"\0", keys_only=True,
            sort_order=R.DESCEND, sort_target=R.KEY)
    assert keys(r) == want[::-1] and all(x.value == b"" for x in r.kvs)
    r = rng(kv, b"\0", range_end=b"\0", sort_order=R.ASCEND,
            sort_target=R.MOD)
    assert keys(r) == LKEYS
    for i, k in enumerate(LKEYS):
        r = rng(kv, k)
        assert (keys(r), r.kvs[0].value, r.kvs[0].mod_revision) == \
            ([k], b"%d" % i, i + 2)
        assert rng(kv, k, revision=i + 1).count == 0
    assert rng(kv, LKEYS[3] + b"\x00").count == 0


def test_long_keys_txn_compares(longs):
    kv, k, fresh = longs, LKEYS[3], LKEYS[3][:-1] + b"\x01"
    c = cmp(fresh, "version", "=", version=0)
    assert txn(kv, [c], [op_put(fresh, b"new")]).succeeded
    assert not txn(kv, [c], [op_put(fresh, b"again")]).succeeded
    assert rng(kv, fresh).kvs[0].value == b"new"
    true = [cmp(k, "version", "!=", version=0),
            cmp(k, "version", "=", version=1),
            cmp(k, "create", "=", create_revision=5),
            cmp(k, "mod", "<", mod_revision=6),
            cmp(k, "value", "=", value=b"3"),
            cmp(k, "lease", "=", lease=0),
            cmp(k + b"x", "version", "=", version=0)]
    for t in true:
        assert txn(kv, [t]).succeeded, t
    for t in [cmp(k, "version", "=", version=0),
              cmp(k, "value", "=", value=b"4")]:
        assert not txn(kv, [t]).succeeded, t
    # a txn range and delete over long keys, prev_kv included
    r = txn(kv, [], [op_range(LKEYS[1], range_end=LKEYS[3]),
                     op_del(LKEYS[1], range_end=LKEYS[3], prev_kv=True)])
    inside = [x for x in sorted(LKEYS + [fresh]) if LKEYS[1] <= x < LKEYS[3]]
    assert len(inside) == 6
    assert keys(r.responses[0].response_range) == inside
    d = r.responses[1].response_delete_range
    assert (d.deleted, [p.key for p in d.prev_kvs]) == (6, inside)
    assert keys(rng(kv, b"\0", range_end=b"\0")) == \
        sorted(set(LKEYS) - set(inside))
    # (leases on long keys: test_mvcc.c; the server has no Lease API yet)
    assert rng(kv, LKEYS[6]).count == 1


def test_long_keys_near_request_limit(kv):
    limit = 1572864
    k = b"\xffL" * ((limit - 4096) // 2)
    put(kv, k, b"v")
    assert rng(kv, k).kvs[0].key == k
    assert rng(kv, b"\xff", range_end=b"\0", keys_only=True).count == 1
    assert grpc_error(put, kv, k + b"x" * 8192, b"v") == (INVALID, TOO_LARGE)


def test_long_keys_restart_and_compaction(make_server):
    s = make_server()
    kv = s.kv()
    for i, k in enumerate(LKEYS):
        put(kv, k, b"old%d" % i)
    for i, k in enumerate(LKEYS):
        put(kv, k, b"new%d" % i)
    rev = s.rev()
    s.kill()  # kill -9
    s.start()
    kv = s.kv()
    assert keys(rng(kv, b"\0", range_end=b"\0")) == sorted(LKEYS)
    assert rng(kv, LKEYS[3], revision=5).kvs[0].value == b"old3"
    kv.Compact(rpc_pb2.CompactionRequest(revision=rev, physical=True),
               timeout=10)
    assert grpc_error(rng, kv, LKEYS[3], revision=rev - 1)[1] == COMPACTED
    s.kill()
    s.start()
    kv = s.kv()
    r = rng(kv, b"\0", range_end=b"\0")
    assert [x.value for x in r.kvs] == \
        [b"new%d" % LKEYS.index(x.key) for x in r.kvs]
    assert all(x.version == 2 for x in r.kvs)
