#!/usr/bin/python3
"""quota_sizes.py - what the backend quota would measure, on etcd and on
cetcd, for the same writes (docs/ARCHITECTURE.md "Quota and alarms").

One fresh single member on free ports; writes through gRPC, one at a
time; after each phase, Status (etcdctl endpoint status -w json: the
Python stubs predate dbSizeInUse) as dbSize and dbSizeInUse in 4 KiB
pages.  etcd's quota compares dbSize, cetcd's dbSizeInUse.  Phases: fresh
store; one 64 B put; 1000 puts of ~10 B to distinct keys; 1000 puts of
1000 B over 100 keys; delete all; compact at the head (--physical); 2 s
later; defrag.

usage: bench/quota_sizes.py [BINARY [LABEL]]   (build/cetcd; /usr/bin/etcd
works the same).  Page counts do not depend on the machine's load; cetcd's
extent (dbSize) does (the pins' timing).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import grpc  # noqa: E402
from etcd3.etcdrpc import rpc_pb2 as pb, rpc_pb2_grpc  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(HERE, "..", "build", "cetcd")
    label = sys.argv[2] if len(sys.argv) > 2 else os.path.basename(binary)
    d = tempfile.mkdtemp(prefix="quota-sizes-")
    cp, pp = free_port(), free_port()
    cu, pu = "http://127.0.0.1:%d" % cp, "http://127.0.0.1:%d" % pp
    log = open(os.path.join(d, "log"), "w")
    proc = subprocess.Popen(
        [binary, "--name", "m", "--data-dir", os.path.join(d, "m"),
         "--listen-client-urls", cu, "--advertise-client-urls", cu,
         "--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
         "--initial-cluster", "m=" + pu], stdout=log, stderr=log)
    try:
        run(label, grpc.insecure_channel("127.0.0.1:%d" % cp), cu)
    finally:
        proc.terminate()
        proc.wait()
        log.close()
        shutil.rmtree(d)


def run(label, ch, endpoint):
    kv = rpc_pb2_grpc.KVStub(ch)
    mt = rpc_pb2_grpc.MaintenanceStub(ch)
    for _ in range(100):
        try:
            mt.Status(pb.StatusRequest(), timeout=1)
            break
        except grpc.RpcError:
            time.sleep(0.2)

    def status(phase):
        out = subprocess.run(["etcdctl", "--endpoints", endpoint, "endpoint",
                              "status", "-w", "json"], capture_output=True,
                             text=True, check=True).stdout
        st = json.loads(out)[0]["Status"]
        print("%-6s %-34s dbSize %5d pages, dbSizeInUse %5d pages, rev %d"
              % (label, phase, st["dbSize"] // 4096,
                 st.get("dbSizeInUse", 0) // 4096, st["header"]["revision"]),
              flush=True)
        return st["header"]["revision"]

    status("fresh store")
    kv.Put(pb.PutRequest(key=b"small", value=b"a" * 64), timeout=10)
    status("one 64 B put")
    for i in range(1000):
        kv.Put(pb.PutRequest(key=b"k%04d" % i, value=b"value-%d" % i),
               timeout=10)
    status("1000 puts of ~10 B, distinct keys")
    for i in range(1000):
        kv.Put(pb.PutRequest(key=b"big%04d" % (i % 100), value=b"x" * 1000),
               timeout=10)
    status("1000 puts of 1000 B over 100 keys")
    kv.DeleteRange(pb.DeleteRangeRequest(key=b"\0", range_end=b"\0"),
                   timeout=10)
    rev = status("delete all")
    kv.Compact(pb.CompactionRequest(revision=rev, physical=True), timeout=60)
    status("compact at head (physical)")
    time.sleep(2)
    status("2 s later")
    mt.Defragment(pb.DefragmentRequest(), timeout=120)
    status("defrag")


if __name__ == "__main__":
    main()
