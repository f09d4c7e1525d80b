#!/usr/bin/python3
"""lease_checkpoint_cost.py - what the per-lease checkpoint cadence (issue
17, docs/ARCHITECTURE.md "Leases") costs: N leases of TTL seconds, each
with one key, granted on a fresh single member and then left alone (the
worst case: a lease kept alive costs no checkpoint), while a put load
runs; prints the raft entries committed per second over the leases' life
beyond the grants, puts and revokes (i.e. the checkpoint entries), and
the put throughput.  A/B: run it with the binary before and after.

  usage: bench/lease_checkpoint_cost.py BIN N [TTL]
  environment: CETCD_BENCH (build/src/bench/cetcd-bench)
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from common.servers import free_port  # noqa: E402
BENCH = os.environ.get("CETCD_BENCH", os.path.join(ROOT, "build", "src",
                                                   "bench", "cetcd-bench"))


def metric(ep, name):
    body = urllib.request.urlopen("http://%s/metrics" % ep,
                                  timeout=5).read().decode()
    m = re.search(r"^%s (\S+)$" % name, body, re.M)
    return float(m.group(1))


def bench(ep, *args):
    out = subprocess.run([BENCH, "--endpoints", ep] + list(args),
                         capture_output=True, text=True, check=True)
    return out.stdout + out.stderr


def main():
    binary, n = sys.argv[1], int(sys.argv[2])
    ttl = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    d = tempfile.mkdtemp(prefix="cetcd-lcc-")
    cp, pp = free_port(), free_port()
    ep, peer = "127.0.0.1:%d" % cp, "http://127.0.0.1:%d" % pp
    proc = subprocess.Popen(
        [binary, "--name", "m", "--data-dir", d + "/data",
         "--listen-client-urls", "http://" + ep,
         "--advertise-client-urls", "http://" + ep,
         "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", "m=" + peer],
        stdout=open(d + "/log", "w"), stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            try:
                metric(ep, "etcd_server_proposals_committed_total")
                break
            except OSError:
                time.sleep(0.05)
        t0 = time.monotonic()
        c0 = metric(ep, "etcd_server_proposals_committed_total")
        bench(ep, "lease-put", "--lease-ttl", str(ttl), "--total", str(n),
              "--clients", "32", "--conns", "4", "--key-size", "16")
        loaded = time.monotonic()
        # Puts for the leases' remaining life (about TTL - load time).
        out = bench(ep, "put", "--clients", "32", "--conns", "4",
                    "--total", "30000", "--key-space-size", "100000",
                    "--key-size", "16", "--val-size", "256")
        put_s = time.monotonic() - loaded
        # Until every lease is revoked: past the TTL, no entry for 2 s.
        c1, still = metric(ep, "etcd_server_proposals_committed_total"), 0
        while (time.monotonic() - t0 < ttl + 2 or still < 10) and \
                time.monotonic() - t0 < ttl * 4 + 120:
            time.sleep(0.2)
            c = metric(ep, "etcd_server_proposals_committed_total")
            still, c1 = (still + 1 if c == c1 else 0), c
        done = time.monotonic() - 2.0
        # Grants, leased puts, puts and revokes are one entry each.
        extra = c1 - c0 - 30000 - 3 * n
        qps = re.search(r"Requests/sec:\s*([\d.]+)", out)
        print("N=%d TTL=%d load %.1fs; %.0f entries beyond the grants, "
              "puts and revokes in %.1fs (%.2f/s); then puts %.0f/s "
              "(%.1fs)" % (n, ttl, loaded - t0, extra, done - t0,
                           extra / (done - t0), 30000 / put_s, put_s))
        if qps is None:
            print(out)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
