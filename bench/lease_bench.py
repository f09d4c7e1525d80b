#!/usr/bin/python3
"""lease_bench.py - lease benchmarks, cetcd against etcd 3.4.23 in the same
run (docs/BENCHMARKS.md "Leases"); a fresh single member on free ports per
measurement, ROUNDS rounds with the servers' order alternating (the
machine is shared: read the spread, not one number).

  revoke [KEYS]   one lease holding KEYS keys (10000) is revoked while
                  PUTTERS threads (4) put unleased keys in a loop: the
                  revoke's duration (the RPC) and the longest put of those
                  that overlapped it (the stall), with the longest put of
                  the same load over the second before (the baseline).
  many [N]        N leases (100000; 1M with N=1000000), each holding one
                  key: the time to load them, the server's RSS after, the
                  data dir's size, the restart time (SIGTERM, start, until
                  a linearizable Range and a LeaseTimeToLive answer) and
                  the RSS after the restart.

environment: CETCD_BIN (build/cetcd), ETCD_BIN (/usr/bin/etcd), ROUNDS (3),
LOADER (many: "bench" = cetcd-bench lease-put, server-chosen lease ids,
keys of 16 bytes; "python" = the gRPC Python loader, ids 1..N, keys
lk/%08d), CETCD_BENCH (build/src/bench/cetcd-bench).
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINS = {"cetcd": os.environ.get("CETCD_BIN", os.path.join(ROOT, "build",
                                                          "cetcd")),
        "etcd": os.environ.get("ETCD_BIN", "/usr/bin/etcd")}
ROUNDS = int(os.environ.get("ROUNDS", "3"))
BENCH = os.environ.get("CETCD_BENCH", os.path.join(ROOT, "build", "src",
                                                   "bench", "cetcd-bench"))
LOADER = os.environ.get("LOADER", "bench")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Member:
    def __init__(self, name):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="cetcd-leasebench-")
        self.port, self.peer = free_port(), free_port()
        self.ep = "127.0.0.1:%d" % self.port
        self.proc = None
        self.ch = None

    def start(self, timeout=600):
        peer = "http://127.0.0.1:%d" % self.peer
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [BINS[self.name], "--name", "m", "--data-dir",
             os.path.join(self.dir, "data"), "--listen-client-urls",
             "http://" + self.ep, "--advertise-client-urls", "http://" +
             self.ep, "--listen-peer-urls", peer,
             "--initial-advertise-peer-urls", peer, "--initial-cluster",
             "m=" + peer, "--quota-backend-bytes", str(8 << 30)],
            stdout=open(os.path.join(self.dir, "log"), "ab"),
            stderr=subprocess.STDOUT)
        # A fresh channel per attempt: one that found the port closed
        # backs off for seconds (gRPC's reconnect back-off), which would
        # be measured as start-up time.
        while time.monotonic() - t0 < timeout:
            self.ch = grpc.insecure_channel(self.ep, options=[
                ("grpc.max_receive_message_length", 256 << 20)])
            try:
                rpc_pb2_grpc.KVStub(self.ch).Range(
                    rpc_pb2.RangeRequest(key=b"x"), timeout=1,
                    wait_for_ready=False)
                return time.monotonic() - t0
            except grpc.RpcError:
                self.ch.close()
                time.sleep(0.02)
        raise RuntimeError("%s did not start" % self.name)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()
        self.ch.close()

    def rss_mib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    def du_mib(self):
        n = 0
        for d, _, fs in os.walk(os.path.join(self.dir, "data")):
            for f in fs:
                try:
                    n += os.stat(os.path.join(d, f)).st_blocks * 512
                except OSError:
                    pass
        return n / 1048576.0

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def kv(self):
        return rpc_pb2_grpc.KVStub(self.ch)

    def lease(self):
        return rpc_pb2_grpc.LeaseStub(self.ch)


def put_txns(m, items, batch=100, workers=8):
    """Puts (key, lease) pairs, batch puts per Txn, workers in flight."""
    kv = m.kv()

    def one(chunk):
        kv.Txn(rpc_pb2.TxnRequest(success=[rpc_pb2.RequestOp(
            request_put=rpc_pb2.PutRequest(key=k, value=b"v", lease=lid))
            for k, lid in chunk]), timeout=120)
    chunks = [items[i:i + batch] for i in range(0, len(items), batch)]
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, chunks))


def revoke_once(name, keys):
    m = Member(name)
    try:
        m.start()
        lid = m.lease().LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=3600),
                                   timeout=10).ID
        put_txns(m, [(b"rk/%08d" % i, lid) for i in range(keys)])
        stop = threading.Event()
        lats = []  # (start, end) of every put

        def putter(t):
            kv = rpc_pb2_grpc.KVStub(m.ch)
            i = 0
            while not stop.is_set():
                t0 = time.monotonic()
                kv.Put(rpc_pb2.PutRequest(key=b"p/%d/%d" % (t, i % 1000),
                                          value=b"x"), timeout=60)
                lats.append((t0, time.monotonic()))
                i += 1
        ths = [threading.Thread(target=putter, args=(t,))
               for t in range(int(os.environ.get("PUTTERS", "4")))]
        for t in ths:
            t.start()
        time.sleep(1.5)
        r0 = time.monotonic()
        m.lease().LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=lid), timeout=120)
        r1 = time.monotonic()
        time.sleep(0.5)
        stop.set()
        for t in ths:
            t.join()
        assert m.kv().Range(rpc_pb2.RangeRequest(
            key=b"rk/", range_end=b"rk0", count_only=True),
            timeout=10).count == 0
        stall = max((e - s for s, e in lats if e >= r0 and s <= r1),
                    default=0.0)
        base = max((e - s for s, e in lats if r0 - 1.0 <= s and e < r0),
                   default=0.0)
        return (r1 - r0) * 1000, stall * 1000, base * 1000
    finally:
        m.cleanup()


def many_once(name, n):
    m = Member(name)
    try:
        m.start()
        t0 = time.monotonic()
        if LOADER == "bench":
            # cetcd-bench lease-put (C, gRPC core): a LeaseGrant then a Put
            # with that lease per request, 100 in flight; the same loader
            # for both servers.
            subprocess.run([BENCH, "--endpoints", m.ep, "--conns", "10",
                            "--clients", "100", "--total", str(n),
                            "--key-size", "16", "--val-size", "32",
                            "--lease-ttl", "86400", "lease-put"],
                           check=True, stdout=subprocess.DEVNULL)
        else:
            ls = m.lease()
            ids = list(range(1, n + 1))

            def grant(chunk):
                fs = [ls.LeaseGrant.future(rpc_pb2.LeaseGrantRequest(
                    TTL=86400, ID=i), timeout=120) for i in chunk]
                for f in fs:
                    f.result()
            with ThreadPoolExecutor(4) as ex:
                list(ex.map(grant, [ids[i:i + 200]
                                    for i in range(0, n, 200)]))
            put_txns(m, [(b"lk/%08d" % i, i) for i in ids])
        load_s = time.monotonic() - t0
        last = m.kv().Range(rpc_pb2.RangeRequest(
            key=b"\0", range_end=b"\0", limit=1,
            sort_order=rpc_pb2.RangeRequest.DESCEND,
            sort_target=rpc_pb2.RangeRequest.KEY), timeout=120)
        assert last.count == n, last.count
        probe_key, probe_lease = last.kvs[0].key, last.kvs[0].lease
        time.sleep(2)
        rss = m.rss_mib()
        m.stop()
        du = m.du_mib()
        t1 = time.monotonic()
        m.start()
        ttl = m.lease().LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(
            ID=probe_lease, keys=True), timeout=120)
        restart_s = time.monotonic() - t1
        assert ttl.TTL > 0 and list(ttl.keys) == [probe_key], ttl
        time.sleep(2)
        rss2 = m.rss_mib()
        return load_s, rss, du, restart_s, rss2
    finally:
        m.cleanup()


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "revoke"
    arg = int(sys.argv[2]) if len(sys.argv) > 2 else (
        10000 if what == "revoke" else 100000)
    for r in range(1, ROUNDS + 1):
        order = ("etcd", "cetcd") if r % 2 else ("cetcd", "etcd")
        for name in order:
            if what == "revoke":
                rv, stall, base = revoke_once(name, arg)
                print("round=%d server=%s keys=%d revoke_ms=%.1f "
                      "longest_put_during_ms=%.1f longest_put_before_ms=%.1f"
                      % (r, name, arg, rv, stall, base), flush=True)
            else:
                load, rss, du, rs, rss2 = many_once(name, arg)
                print("round=%d server=%s leases=%d load_s=%.1f rss_mib=%.1f "
                      "data_mib=%.1f restart_s=%.2f rss_after_restart_mib=%.1f"
                      % (r, name, arg, load, rss, du, rs, rss2), flush=True)


if __name__ == "__main__":
    main()
