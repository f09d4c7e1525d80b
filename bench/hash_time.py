"""hash_time.py N - how long one member takes to answer HashKV over a store
of N keys of 256 B (the work of one corruption-check hash), at the current
revision and at the compaction revision (the compaction-time check's
question, asked as a peer asks it: /cetcdpb.Maintenance/HashKV on the peer
listener, PeerHashRequest with compacted set); 5 calls each, medians.
docs/BENCHMARKS.md "Corruption checks".  CETCD_BIN (build/cetcd), BENCH
(build/src/bench/cetcd-bench)."""
import os, subprocess, sys, time, socket, grpc, shutil, tempfile, statistics
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
CETCD = os.environ.get("CETCD_BIN", os.path.join(ROOT, "build", "cetcd"))
BENCH = os.environ.get("BENCH", os.path.join(ROOT, "build", "src", "bench", "cetcd-bench"))
from etcd3.etcdrpc import rpc_pb2 as pb, rpc_pb2_grpc as g
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
d = tempfile.mkdtemp(prefix="fnc-hash-")
cp, pp = port(), port()
proc = subprocess.Popen([CETCD, "--data-dir", d + "/d",
    "--listen-client-urls", "http://127.0.0.1:%d" % cp, "--advertise-client-urls", "http://127.0.0.1:%d" % cp,
    "--listen-peer-urls", "http://127.0.0.1:%d" % pp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    ch = grpc.insecure_channel("127.0.0.1:%d" % cp)
    for _ in range(100):
        try:
            g.KVStub(ch).Range(pb.RangeRequest(key=b"x"), timeout=1); break
        except grpc.RpcError: time.sleep(0.1)
    subprocess.run([BENCH, "--endpoints", "127.0.0.1:%d" % cp, "--clients", "32",
        "--conns", "4", "--total", str(N), "put", "--key-size", "16", "--val-size", "256", "--key-space-size", str(N),
        "--sequential-keys"], check=True, capture_output=True)
    kv = g.KVStub(ch); m = g.MaintenanceStub(ch)
    hdr = kv.Range(pb.RangeRequest(key=b"x"), timeout=10).header
    rev = hdr.revision
    def varint(n):
        out = b""
        while True:
            b = n & 0x7F; n >>= 7
            out += bytes([b | (0x80 if n else 0)])
            if not n: return out
    peer = grpc.insecure_channel("127.0.0.1:%d" % pp).unary_unary(
        "/cetcdpb.Maintenance/HashKV", request_serializer=lambda x: x,
        response_deserializer=lambda x: x)
    def peer_hash(r):  # PeerHashRequest{cluster_id, from, revision, compacted}
        req = (b"\x08" + varint(hdr.cluster_id) + b"\x10" + varint(1) +
               b"\x18" + varint(r) + b"\x20\x01")
        assert peer(req, timeout=120)[:1] != b"\x08"  # no error field

    kv.Compact(pb.CompactionRequest(revision=rev, physical=True), timeout=60)
    t_plain, t_comp = [], []
    for _ in range(5):
        t0 = time.monotonic(); m.HashKV(pb.HashKVRequest(revision=0), timeout=120); t_plain.append(time.monotonic() - t0)
        t0 = time.monotonic(); peer_hash(rev); t_comp.append(time.monotonic() - t0)
    print("keys=%d values=256B HashKV(current) median %.0f ms %s; hash at compaction revision median %.0f ms %s" % (
        N, statistics.median(t_plain) * 1e3, [round(x * 1e3) for x in t_plain],
        statistics.median(t_comp) * 1e3, [round(x * 1e3) for x in t_comp]))
finally:
    proc.kill(); proc.wait(); shutil.rmtree(d, ignore_errors=True)
