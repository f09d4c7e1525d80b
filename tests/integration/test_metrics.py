"""/metrics: the series etcd 3.4 exposes, counted as etcd counts them.

Goal: the mvcc counters (etcd_mvcc_{put,delete,range,txn}_total and their
etcd_debugging_mvcc_* twins), go-grpc-prometheus' server series
(grpc_server_started_total, grpc_server_handled_total by code,
grpc_server_msg_received_total, grpc_server_msg_sent_total) and the client
byte counters move by exactly what etcd 3.4.23's move by for the same
requests; the WAL fsync and backend commit histograms are well formed and
count; grpc_server_handling_seconds appears with --metrics extensive only,
as etcd registers it.

Method: one cetcd and one real etcd 3.4.23 started by the test get the same
requests over raw gRPC (puts, a delete, ranges, a txn whose compare and
prev_kv read, a compacted range refused, a watch stream read then
cancelled by the client); each /metrics is scraped before and after and
the differences of the compared series must be equal.  The exposition is
parsed with python3-prometheus-client.
"""

import time
import urllib.request

import grpc
from prometheus_client.parser import text_string_to_metric_families

from common.servers import ETCD_BIN, against_etcd
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc

MVCC = ["etcd_mvcc_put_total", "etcd_mvcc_delete_total",
        "etcd_mvcc_range_total", "etcd_mvcc_txn_total",
        "etcd_debugging_mvcc_put_total", "etcd_debugging_mvcc_delete_total",
        "etcd_debugging_mvcc_range_total", "etcd_debugging_mvcc_txn_total"]
GRPC = ["grpc_server_started_total", "grpc_server_handled_total",
        "grpc_server_msg_received_total", "grpc_server_msg_sent_total"]
COMPARED_METHODS = {"Range", "Put", "DeleteRange", "Txn", "Compact",
                    "Watch"}


def scrape(server):
    with urllib.request.urlopen(server.client_url + "/metrics",
                                timeout=10) as r:
        text = r.read().decode()
    return text, list(text_string_to_metric_families(text))


def samples(families):
    """{(sample name, frozenset(labels)): value} of every sample."""
    out = {}
    for fam in families:
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def compared(smp):
    """The samples this test compares between the two servers."""
    keep = {}
    for (name, labels), v in smp.items():
        lab = dict(labels)
        if name in MVCC:
            keep[(name, labels)] = v
        elif name in GRPC and lab.get("grpc_method") in COMPARED_METHODS:
            keep[(name, labels)] = v
    return keep


def delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after
            if after[k] - before.get(k, 0) != 0}


def workload(server):
    """The same requests, in order, for either server."""
    ch = grpc.insecure_channel(server.endpoint)
    kv = rpc_pb2_grpc.KVStub(ch)
    for i in range(3):
        kv.Put(pb.PutRequest(key=b"m/%d" % i, value=b"v"))
    kv.Put(pb.PutRequest(key=b"m/0", value=b"w", prev_kv=True))
    kv.DeleteRange(pb.DeleteRangeRequest(key=b"m/1"))
    kv.Range(pb.RangeRequest(key=b"m/", range_end=b"m0"))
    kv.Range(pb.RangeRequest(key=b"m/0", serializable=True))
    kv.Txn(pb.TxnRequest(
        compare=[pb.Compare(key=b"m/0", target=pb.Compare.VALUE,
                            result=pb.Compare.EQUAL, value=b"w")],
        success=[pb.RequestOp(request_put=pb.PutRequest(key=b"m/3",
                                                        value=b"x")),
                 pb.RequestOp(request_range=pb.RangeRequest(key=b"m/3"))]))
    rev = kv.Range(pb.RangeRequest(key=b"m/0")).header.revision
    kv.Compact(pb.CompactionRequest(revision=rev - 1))
    try:
        kv.Range(pb.RangeRequest(key=b"m/0", revision=1))
        raise AssertionError("a compacted revision was served")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE
    # A watch stream: created, one event, then cancelled by the client.
    watch = rpc_pb2_grpc.WatchStub(ch)
    reqs = [pb.WatchRequest(create_request=pb.WatchCreateRequest(
        key=b"m/9"))]
    call = watch.Watch(_until_cancelled(reqs))
    first = next(call)
    assert first.created
    kv.Put(pb.PutRequest(key=b"m/9", value=b"e"))
    ev = next(call)
    assert [e.kv.key for e in ev.events] == [b"m/9"]
    call.cancel()
    ch.close()


def _until_cancelled(reqs):
    """Request iterator that sends reqs and then blocks (the stream stays
    open until the client cancels it)."""
    for r in reqs:
        yield r
    while True:
        time.sleep(3600)
        yield pb.WatchRequest()


def settle(server, want_canceled):
    """Scrape until the server counted want_canceled cancelled Watch
    streams (a cancel reaches the server after the client returns)."""
    deadline = time.time() + 10
    while True:
        _, fams = scrape(server)
        smp = samples(fams)
        key = ("grpc_server_handled_total", frozenset({
            "grpc_code": "Canceled", "grpc_method": "Watch",
            "grpc_service": "etcdserverpb.Watch",
            "grpc_type": "bidi_stream"}.items()))
        if smp.get(key, 0) >= want_canceled or time.time() > deadline:
            return smp
        time.sleep(0.1)


def run_on(server):
    before = compared(samples(scrape(server)[1]))
    workload(server)
    after = compared(settle(server, 1))
    return delta(before, after)


def test_counters_move_as_etcds(make_server):
    cetcd = make_server()
    etcd = make_server(binary=ETCD_BIN, name="e1")
    got = run_on(cetcd)
    want = run_on(etcd)
    assert got == want, "\n".join(
        "%s %s: cetcd %s, etcd %s" % (k[0], dict(k[1]), got.get(k),
                                      want.get(k))
        for k in sorted(set(got) | set(want), key=str)
        if got.get(k) != want.get(k))
    # The sequence did move them (the comparison is not of two empties).
    put = ("etcd_mvcc_put_total", frozenset())
    assert got[put] == 6


def hist(fams, name):
    for fam in fams:
        if fam.name == name and fam.type == "histogram":
            return fam
    return None


def check_hist(fam):
    """Buckets cumulative and ending at +Inf == count; returns count."""
    buckets = [s for s in fam.samples if s.name.endswith("_bucket")]
    count = [s for s in fam.samples if s.name.endswith("_count")]
    assert buckets and len(count) >= 1
    by_series = {}
    for s in buckets:
        lab = dict(s.labels)
        le = lab.pop("le")
        by_series.setdefault(frozenset(lab.items()), []).append(
            (float(le), s.value))
    for series in by_series.values():
        vals = [v for _, v in sorted(series)]
        assert vals == sorted(vals), series
        assert sorted(series)[-1][0] == float("inf")
    return sum(s.value for s in count)


def test_disk_histograms_count(server):
    kv = server.kv()
    _, fams = scrape(server)
    fsync0 = check_hist(hist(fams, "etcd_disk_wal_fsync_duration_seconds"))
    commit0 = check_hist(hist(fams,
                              "etcd_disk_backend_commit_duration_seconds"))
    rx0 = samples(fams)[("etcd_network_client_grpc_received_bytes_total",
                         frozenset())]
    sent = 0
    for i in range(20):
        req = pb.PutRequest(key=b"h/%d" % i, value=b"v" * i)
        sent += req.ByteSize()
        kv.Put(req)
    text, fams = scrape(server)
    assert check_hist(hist(fams, "etcd_disk_wal_fsync_duration_seconds")) \
        >= fsync0 + 1
    assert check_hist(hist(
        fams, "etcd_disk_backend_commit_duration_seconds")) >= commit0 + 1
    smp = samples(fams)
    # etcd counts the marshalled messages (its codec), no gRPC framing.
    assert smp[("etcd_network_client_grpc_received_bytes_total",
                frozenset())] - rx0 == sent
    assert smp[("etcd_network_client_grpc_sent_bytes_total",
                frozenset())] > 0
    # Basic level: no gRPC latency histogram, as etcd without
    # --metrics extensive.
    assert "grpc_server_handling_seconds" not in text


def test_extensive_adds_grpc_histogram(make_server):
    s = make_server(extra_args=["--metrics", "extensive"])
    s.kv().Put(pb.PutRequest(key=b"x", value=b"v"))
    _, fams = scrape(s)
    fam = hist(fams, "grpc_server_handling_seconds")
    assert fam is not None
    check_hist(fam)
    put = [x for x in fam.samples if x.name.endswith("_count") and
           x.labels.get("grpc_method") == "Put"]
    assert put and put[0].value >= 1
    assert put[0].labels["grpc_type"] == "unary"


def test_watchers_gauge(server):
    if against_etcd():
        return  # etcd's gauge is the same series; this checks cetcd's
    ch = grpc.insecure_channel(server.endpoint)
    watch = rpc_pb2_grpc.WatchStub(ch)
    reqs = [pb.WatchRequest(create_request=pb.WatchCreateRequest(
        key=b"g/%d" % i)) for i in range(5)]
    call = watch.Watch(_until_cancelled(reqs))
    for _ in range(5):
        assert next(call).created
    smp = samples(scrape(server)[1])
    assert smp[("etcd_debugging_mvcc_watcher_total", frozenset())] == 5
    call.cancel()
    ch.close()


def test_server_id_as_etcd_writes_it(server):
    """types.ID's hex: no leading zeros (a %016x id would differ from
    etcd's whenever the top nibble is 0)."""
    member_id = server.kv().Range(pb.RangeRequest(key=b"x")).header.member_id
    smp = samples(scrape(server)[1])
    ids = [dict(k[1])["server_id"] for k in smp if k[0] == "etcd_server_id"]
    assert ids == [format(member_id, "x")]


def keys_total(server):
    smp = samples(scrape(server)[1])
    return smp[("etcd_debugging_mvcc_keys_total", frozenset())]


def keys_steps(server):
    """etcd_debugging_mvcc_keys_total after each step: puts of new and
    existing keys, a txn, deletes, a lease revoke deleting its keys, a
    compaction, and a restart (the count read back from the store)."""
    kv = server.kv()
    out = [keys_total(server)]
    for i in range(5):
        kv.Put(pb.PutRequest(key=b"k/%d" % i, value=b"v"))
    kv.Put(pb.PutRequest(key=b"k/0", value=b"again"))  # a version, no key
    out.append(keys_total(server))
    kv.Txn(pb.TxnRequest(success=[
        pb.RequestOp(request_put=pb.PutRequest(key=b"t", value=b"v")),
        pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(
            key=b"k/4"))]))
    out.append(keys_total(server))
    kv.DeleteRange(pb.DeleteRangeRequest(key=b"k/", range_end=b"k0"))
    out.append(keys_total(server))
    kv.DeleteRange(pb.DeleteRangeRequest(key=b"nothing"))
    kv.Put(pb.PutRequest(key=b"k/1", value=b"back"))  # deleted, then new
    out.append(keys_total(server))
    lease = rpc_pb2_grpc.LeaseStub(grpc.insecure_channel(server.endpoint))
    lid = lease.LeaseGrant(pb.LeaseGrantRequest(TTL=60)).ID
    for i in range(3):
        kv.Put(pb.PutRequest(key=b"l/%d" % i, value=b"v", lease=lid))
    out.append(keys_total(server))
    lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=lid))
    rev = kv.Range(pb.RangeRequest(key=b"t")).header.revision
    kv.Compact(pb.CompactionRequest(revision=rev, physical=True))
    out.append(keys_total(server))
    return out


def test_keys_total_as_etcd(make_server):
    """etcd_debugging_mvcc_keys_total counts keys, not versions, as etcd
    3.4.23's keyIndex does (a put of a new or deleted key adds one, a
    deletion removes one), kept as writes commit (mvcc_keys) and counted
    from the store at start."""
    etcd = make_server(binary=ETCD_BIN, name="k")
    ours = make_server(name="k")
    want = keys_steps(etcd)
    got = keys_steps(ours)
    assert got == want
    assert want == [0, 5, 5, 1, 2, 5, 2]
    ours.stop()
    ours.start()
    assert keys_total(ours) == 2
