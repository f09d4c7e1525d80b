#!/usr/bin/python3
"""corrupt_cost.py - what the corruption checks cost in put throughput on a
3-member cetcd cluster (issue 20: on by default unless they cost more than
2 %); docs/BENCHMARKS.md "Corruption checks".

Each round starts one fresh 3-member cluster per configuration (the order
rotates from round to round: the machine is shared, read the spread, not
one number), loads PRELOAD keys of 256 bytes (so a hash has a store to
walk), then runs cetcd-bench put (CLIENTS clients, TOTAL puts over
KEYSPACE keys) with auto-compaction every COMPACT_S seconds (periodic
mode) in every configuration:

  off       no check
  compact   --experimental-compact-hash-check-enabled, every CHECK_S s
  periodic  --experimental-corrupt-check-time CHECK_S s (a full HashKV on
            every member per pass)

CHECK_S (1 s) and COMPACT_S (2 s) are far more frequent than anyone runs
them (etcd 3.5's check default is 1 minute, Kubernetes compacts every
5 minutes): the cost measured is an upper bound.  Prints one line per run
and the median put/s per configuration and its difference from "off".

environment: CETCD_BIN (build/cetcd), BENCH (build/src/bench/cetcd-bench),
ROUNDS (3), PRELOAD (20000), TOTAL (20000), CLIENTS (32), KEYSPACE (10000),
CHECK_S (1), COMPACT_S (2), CONFIGS (off,compact,periodic).
"""
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import cluster as clusterlib  # noqa: E402

BENCH = os.environ.get("BENCH", os.path.join(ROOT, "build", "src", "bench",
                                             "cetcd-bench"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
PRELOAD = int(os.environ.get("PRELOAD", "20000"))
TOTAL = int(os.environ.get("TOTAL", "20000"))
CLIENTS = int(os.environ.get("CLIENTS", "32"))
KEYSPACE = int(os.environ.get("KEYSPACE", "10000"))
CHECK_S = os.environ.get("CHECK_S", "1")
COMPACT_S = os.environ.get("COMPACT_S", "2")
CONFIGS = os.environ.get("CONFIGS", "off,compact,periodic").split(",")

EXTRA = {
    "off": [],
    "compact": ["--experimental-compact-hash-check-enabled",
                "--experimental-compact-hash-check-time", CHECK_S + "s"],
    "periodic": ["--experimental-corrupt-check-time", CHECK_S + "s"],
}


def bench(endpoints, total, keyspace, val_size, sequential=False):
    args = [BENCH, "--endpoints", endpoints, "--conns", "4", "--clients",
            str(CLIENTS), "--total", str(total), "put", "--key-size", "16",
            "--val-size", str(val_size), "--key-space-size", str(keyspace)]
    if sequential:
        args.append("--sequential-keys")
    out = subprocess.run(args, capture_output=True, text=True, check=True,
                         timeout=600).stdout
    m = re.search(r"^RESULT .* errors=(\d+) .* qps=([\d.]+)", out, re.M)
    assert m, out[-2000:]
    if m.group(1) != "0":  # timeouts on an overloaded machine: say so
        print("  (%s requests failed)" % m.group(1), flush=True)
    return float(m.group(2))


def one(config):
    c = clusterlib.Cluster(3, extra_args=[
        "--auto-compaction-mode", "periodic",
        "--auto-compaction-retention", COMPACT_S + "s"] + EXTRA[config])
    try:
        c.start()
        lm, _ = c.wait_leader()
        bench(lm.endpoint, PRELOAD, PRELOAD, 256, sequential=True)
        eps = ",".join(m.endpoint for m in c.members)
        qps = bench(eps, TOTAL, KEYSPACE, 256)
        passes = sum(open(m.log_path).read().count(t) for m in c.members
                     for t in ("finished compaction hash check",
                               "finished peer corruption check"))
        return qps, passes
    finally:
        c.close()


def main():
    res = {k: [] for k in CONFIGS}
    for r in range(ROUNDS):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        for config in order:
            qps, passes = one(config)
            res[config].append(qps)
            print("round %d %-8s %8.1f put/s  (%d check passes)" % (
                r + 1, config, qps, passes), flush=True)
    base = statistics.median(res["off"]) if "off" in res else None
    for k, v in res.items():
        med = statistics.median(v)
        diff = "" if base is None else " (%+.1f %% vs off)" % (
            (med - base) / base * 100)
        print("MEDIAN %-8s %8.1f put/s of %s%s" % (
            k, med, " ".join("%.0f" % x for x in v), diff))


if __name__ == "__main__":
    main()
