#!/usr/bin/python3
"""bigdel.py - a big DeleteRange on cetcd and etcd 3.4.23, same run.

Goal: the issue 14 defect of a 10k-key DeleteRange of 1 KB values taking
seconds on cetcd (etcd: ~0.14 s), which made `etcdctl check datascale`
time out.  Method: for each round and each server (alternating, fresh data
dir each, free ports), put N keys of VAL bytes under a prefix in Txns of
TXN puts (over gRPC, one client), wait SETTLE seconds (the house thread's
map trim, if any, happens meanwhile), then time one DeleteRange of the
prefix; repeat the load+delete LOOPS times on the same member (each loop
adds its keys' dead versions under the prefix).  Prints one line per
delete with the server's CPU time (utime + stime) and page faults
(/proc/PID/stat) during it, the server's RSS after the load, and the
medians.  --cetcd can name another build (before/after comparisons).

    python3 bench/bigdel.py [--cetcd build/cetcd] [--etcd /usr/bin/etcd]
        [--keys 10000] [--val 1024] [--key-len 16] [--rounds 3] [--loops 3]
        [--settle 0.5] [--only cetcd|etcd]

--key-len 537 draws keys as `etcdctl check datascale` does (a 25-byte
prefix plus 512 bytes: past LMDB's key limit, cetcd's long-key path).
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import grpc

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PREFIX = b"/bigdel/"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Member:
    """One single member on free ports and a fresh data dir."""

    def __init__(self, binary, extra=()):
        self.root = tempfile.mkdtemp(prefix="bigdel-")
        cp, pp = free_port(), free_port()
        while pp == cp:
            pp = free_port()
        self.ep = "127.0.0.1:%d" % cp
        peer = "http://127.0.0.1:%d" % pp
        args = [binary, "--name", "m", "--data-dir", self.root + "/data",
                "--listen-client-urls", "http://" + self.ep,
                "--advertise-client-urls", "http://" + self.ep,
                "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "m=" + peer] + list(extra)
        self.log = open(self.root + "/log", "ab")
        self.proc = subprocess.Popen(args, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.ch = grpc.insecure_channel(
            self.ep, options=[("grpc.max_receive_message_length", 1 << 30)])
        self.kv = rpc_pb2_grpc.KVStub(self.ch)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.kv.Range(rpc_pb2.RangeRequest(key=b"x"), timeout=1)
                return
            except grpc.RpcError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("member did not start: " + self.root)
                time.sleep(0.05)

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cpu_faults(self):
        """(CPU seconds, page faults) of the server process so far."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            st = f.read().rsplit(")", 1)[1].split()
        hz = os.sysconf("SC_CLK_TCK")
        return (int(st[11]) + int(st[12])) / hz, int(st[7]) + int(st[9])

    def close(self):
        self.ch.close()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


def key_of(i, key_len, loop):
    body = b"%08d-%d-" % (i, loop)
    return PREFIX + body + b"k" * max(0, key_len - len(PREFIX) - len(body))


def load(m, keys, val, key_len, txn, loop):
    """Puts keys in Txns of txn puts; returns the seconds it took."""
    v = b"v" * val
    t0 = time.monotonic()
    for base in range(0, keys, txn):
        ops = [rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
            key=key_of(i, key_len, loop), value=v))
            for i in range(base, min(keys, base + txn))]
        m.kv.Txn(rpc_pb2.TxnRequest(success=ops), timeout=60)
    return time.monotonic() - t0


def delete(m, keys):
    """One DeleteRange of the prefix; returns (seconds, deleted)."""
    end = PREFIX[:-1] + bytes([PREFIX[-1] + 1])
    t0 = time.monotonic()
    r = m.kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=PREFIX,
                                                    range_end=end),
                         timeout=120)
    dt = time.monotonic() - t0
    if r.deleted != keys:
        raise RuntimeError("deleted %d of %d" % (r.deleted, keys))
    return dt


def one(name, binary, a, out):
    m = Member(binary)
    try:
        for loop in range(a.loops):
            c0, _ = m.cpu_faults()
            lt = load(m, a.keys, a.val, a.key_len, a.txn, loop)
            time.sleep(a.settle)
            rss = m.rss_kb()
            c1, f1 = m.cpu_faults()
            dt = delete(m, a.keys)
            c2, f2 = m.cpu_faults()
            print("%s loop %d: load %.3f s (server CPU %.2f s), rss %d KiB, "
                  "delete %.3f s (server CPU %.2f s, %d faults)" %
                  (name, loop, lt, c1 - c0, rss, dt, c2 - c1, f2 - f1),
                  flush=True)
            out.setdefault(name, []).append((lt, dt, c2 - c1))
    finally:
        m.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cetcd", default=os.path.join(REPO, "build", "cetcd"))
    p.add_argument("--etcd", default="/usr/bin/etcd")
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--val", type=int, default=1024)
    p.add_argument("--key-len", type=int, default=16)
    p.add_argument("--txn", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--loops", type=int, default=3)
    p.add_argument("--settle", type=float, default=0.5)
    p.add_argument("--only", choices=["cetcd", "etcd"])
    a = p.parse_args()
    out = {}
    for _ in range(a.rounds):
        for name, binary in (("etcd", a.etcd), ("cetcd", a.cetcd)):
            if a.only in (None, name):
                one(name, binary, a, out)
    for name, rows in out.items():
        print("%s: load median %.3f s, delete median %.3f s (min %.3f, "
              "max %.3f), delete/load %.3f, delete server CPU median %.3f s"
              % (name, statistics.median(r[0] for r in rows),
                 statistics.median(r[1] for r in rows),
                 min(r[1] for r in rows), max(r[1] for r in rows),
                 statistics.median(r[1] / r[0] for r in rows),
                 statistics.median(r[2] for r in rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
