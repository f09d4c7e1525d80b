"""`grpc-proxy start` in front of a 3-member cluster, a member killed.

Goal: a client that writes through the proxy keeps writing when a member
dies: with --endpoints naming all three members, kill -9 of the member
the proxy was using (the one that answers Status through it) while a
writer loop runs through the proxy; some writes may fail around the
kill, every write from 3 s after it on succeeds, and every acknowledged
write is then readable, with its value, through the proxy and on each
surviving member.  On both pair kinds: etcd 3.4.23 (cluster and proxy)
and cetcd ($CETCD_BIN, cluster and proxy).

Method: cluster.Cluster of the kind's binary (not conftest's
make_cluster: its probe is of $CETCD_BIN alone, and etcd's kind runs
whatever cetcd can do; CETCD_SKIP_CLUSTER_TESTS=1 is honoured), a
common.grpcproxy.GrpcProxy of the same binary in front of it; one writer
thread puts unique keys through the proxy over gRPC (2 s per call) and
records which calls were acknowledged, failed, and when.
GRPC_PROXY_CETCD_AS_ETCD=1 makes the "cetcd" kind run etcd too: that
switch exists only to check this test itself.  About 10 s per kind.
"""

import os
import threading
import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

import cluster as clusterlib
from common.grpcproxy import (GrpcProxy, KINDS, cetcd_as_etcd, kind_binary,
                              require_cetcd_proxy)

GRACE_S = 3.0      # after the kill, every write must succeed from here on
AFTER_S = 5.0      # how long the writer goes on after the kill


class Writer:
    """Puts /gp/<n> = <n> through endpoint one after another."""

    def __init__(self, endpoint):
        self.ch = grpc.insecure_channel(endpoint)
        self.kv = rpc_pb2_grpc.KVStub(self.ch)
        self.acked = []    # (n, time acknowledged)
        self.failed = []   # (n, time failed, code, details)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        n = 0
        while not self.stopping.is_set():
            key = b"/gp/%06d" % n
            try:
                self.kv.Put(rpc_pb2.PutRequest(key=key, value=b"%d" % n),
                            timeout=2.0)
                self.acked.append((n, time.monotonic()))
            except grpc.RpcError as e:
                self.failed.append((n, time.monotonic(), e.code(),
                                    e.details()))
                time.sleep(0.05)
            n += 1

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join(10)
        self.ch.close()


def read_all(endpoint):
    """{key: value} under /gp/ by a linearizable Range at endpoint."""
    with grpc.insecure_channel(
            endpoint, options=[("grpc.max_receive_message_length",
                                64 << 20)]) as ch:
        r = rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(
            key=b"/gp/", range_end=b"/gp0"), timeout=10)
    return {kv.key: kv.value for kv in r.kvs}


@pytest.mark.parametrize("kind", KINDS)
def test_member_killed_under_writes(kind):
    if os.environ.get("CETCD_SKIP_CLUSTER_TESTS") == "1":
        pytest.skip("CETCD_SKIP_CLUSTER_TESTS=1")
    binary = kind_binary(kind)
    if kind == "cetcd" and not cetcd_as_etcd():
        require_cetcd_proxy()
        ok, why = clusterlib.multi_member_support(binary)
        if not ok:
            pytest.skip("cetcd cannot form clusters yet: " + why)
    c = clusterlib.Cluster(3, binary=binary)
    proxy = None
    try:
        c.start()
        c.wait_leader()
        proxy = GrpcProxy(binary, [m.endpoint for m in c.members]).start()
        with grpc.insecure_channel(proxy.endpoint) as ch:
            st = rpc_pb2_grpc.MaintenanceStub(ch).Status(
                rpc_pb2.StatusRequest(), timeout=10)
        victim = c.by_id(st.header.member_id)
        assert victim is not None, st
        w = Writer(proxy.endpoint)
        w.start()
        time.sleep(1.0)
        before = len(w.acked)
        assert before > 0, (w.failed, proxy.log_tail())
        c.kill(victim)
        t_kill = time.monotonic()
        time.sleep(AFTER_S)
        w.stop()
        late_fail = [f for f in w.failed if f[1] > t_kill + GRACE_S]
        assert late_fail == [], (victim, late_fail[:5], proxy.log_tail())
        late_ok = [a for a in w.acked if a[1] > t_kill + GRACE_S]
        assert len(late_ok) >= 10, (len(late_ok), w.failed[:5],
                                    proxy.log_tail())
        assert len(w.failed) < len(w.acked)
        # every acknowledged write is there, through the proxy and on
        # each member still up
        want = {b"/gp/%06d" % n: b"%d" % n for n, _ in w.acked}
        for where in [proxy.endpoint] + [m.endpoint for m in c.members
                                         if m is not victim]:
            got = read_all(where)
            missing = [k for k in want if got.get(k) != want[k]]
            assert missing == [], (where, missing[:5], len(missing))
    finally:
        if proxy is not None:
            proxy.close()
        c.close()
