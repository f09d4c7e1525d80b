#!/usr/bin/python3
"""corrupt_cost.py - what the corruption checks cost in put throughput on a
3-member cetcd cluster (issue 20: on by default unless they cost more than
2 %); docs/BENCHMARKS.md "Corruption checks".

Paired, alternating runs (the machine is shared: one run alone says
little, the difference within a pair of neighbouring runs says more).
Each round runs the two configurations back to back, in alternating order
(off/on, then on/off), each on a fresh 3-member cluster:

  off  every check explicitly off (--experimental-initial-corrupt-check=
       false, --experimental-corrupt-check-time 0s,
       --experimental-compact-hash-check-enabled=false)
  on   every check on, at intervals far shorter than the defaults: the
       periodic check every CHECK_S s (a full HashKV on every member per
       pass), the compaction-time check every CHECK_S s

Both have auto-compaction every COMPACT_S s (periodic mode), so the
compaction check has compactions to check.  Per run: PRELOAD keys of 256
bytes put once (sequential keys, so a hash has a store to walk), then
ebench (the Go client) puts for DURATION s from CLIENTS clients over CONNS
connections spread over the 3 members, keys uniform over PRELOAD.
Measured over the timed part: put/s (ebench) and the CPU time of the three
member processes per put (utime+stime from /proc: less sensitive to the
other sessions' load than put/s).  Printed: one line per run, the per-pair
differences (on - off) / off, and their mean, standard deviation and 95 %
confidence interval (Student t); a pair with failed requests in either run
is left out (and said so).

environment: CETCD_BIN (build/cetcd), EBENCH_BIN (/tmp/eb/ebench), ROUNDS
(6), PRELOAD (20000), DURATION (20), CLIENTS (32), CONNS (6), CHECK_S (5),
COMPACT_S (5).
"""
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import cluster as clusterlib  # noqa: E402

EB = os.environ.get("EBENCH_BIN", "/tmp/eb/ebench")
ROUNDS = int(os.environ.get("ROUNDS", "6"))
PRELOAD = int(os.environ.get("PRELOAD", "20000"))
DURATION = int(os.environ.get("DURATION", "20"))
CLIENTS = int(os.environ.get("CLIENTS", "32"))
CONNS = int(os.environ.get("CONNS", "6"))
CHECK_S = os.environ.get("CHECK_S", "5")
COMPACT_S = os.environ.get("COMPACT_S", "5")

CONFIGS = {
    "off": ["--experimental-initial-corrupt-check=false",
            "--experimental-corrupt-check-time", "0s",
            "--experimental-compact-hash-check-enabled=false"],
    "on": ["--experimental-initial-corrupt-check=true",
           "--experimental-corrupt-check-time", CHECK_S + "s",
           "--experimental-compact-hash-check-enabled=true",
           "--experimental-compact-hash-check-time", CHECK_S + "s"],
}
# t(0.975, df) for the confidence interval, df 1..10 (then ~2).
T975 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23]


def ebench(endpoints, *args, timeout=600):
    out = subprocess.run([EB, "--endpoints", endpoints, "--json"] +
                         list(args), capture_output=True, text=True,
                         timeout=timeout)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    try:
        return json.loads(line)
    except ValueError:
        raise RuntimeError("ebench: %s %s" % (out.stdout[-500:],
                                              out.stderr[-500:]))


def cpu_s(pids):
    hz = os.sysconf("SC_CLK_TCK")
    t = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        t += int(fields[11]) + int(fields[12])  # utime, stime
    return t / hz


def one(config):
    c = clusterlib.Cluster(3, extra_args=[
        "--auto-compaction-mode", "periodic",
        "--auto-compaction-retention", COMPACT_S + "s"] + CONFIGS[config])
    try:
        c.start()
        lm, _ = c.wait_leader()
        ebench(lm.endpoint, "--op", "put", "--total", str(PRELOAD),
               "--clients", "16", "--sequential-keys", "--key-size", "16",
               "--key-space-size", str(PRELOAD), "--val-size", "256",
               "--prefill", "no")
        eps = ",".join(m.endpoint for m in c.members)
        pids = [m.proc.pid for m in c.members]
        c0, t0 = cpu_s(pids), time.monotonic()
        j = ebench(eps, "--op", "put", "--total", "0", "--duration",
                   "%ds" % DURATION, "--conns", str(CONNS), "--clients",
                   str(CLIENTS), "--key-size", "16", "--key-space-size",
                   str(PRELOAD), "--val-size", "256", "--prefill", "no",
                   "--seed", str(int(t0)))
        c1 = cpu_s(pids)
        n = j.get("total") or j.get("count") or j["qps"] * DURATION
        passes = sum(open(m.log_path).read().count(t) for m in c.members
                     for t in ("finished compaction hash check",
                               "finished peer corruption check"))
        return j["qps"], (c1 - c0) * 1e6 / n, j.get("errors", 0), passes
    finally:
        c.close()


def summary(name, diffs):
    m = statistics.mean(diffs)
    sd = statistics.stdev(diffs) if len(diffs) > 1 else float("nan")
    t = T975[min(len(diffs) - 2, len(T975) - 1)] if len(diffs) > 1 else 0
    half = t * sd / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    print("%s (on - off) / off: mean %+.1f %%, sd %.1f %%, 95 %% CI "
          "[%+.1f %%, %+.1f %%] over %d pairs: %s" % (
              name, m, sd, m - half, m + half, len(diffs),
              " ".join("%+.1f" % d for d in diffs)))


def main():
    dq, dc = [], []
    for r in range(ROUNDS):
        order = ["off", "on"] if r % 2 == 0 else ["on", "off"]
        res = {}
        for config in order:
            res[config] = one(config)
            qps, cpu, errs, passes = res[config]
            print("round %d %-4s %8.1f put/s %7.1f cpu-us/put errors=%s "
                  "check passes=%d" % (r + 1, config, qps, cpu, errs,
                                       passes), flush=True)
        if res["on"][2] or res["off"][2]:
            # Failed requests (timeouts of an overloaded machine): the
            # pair does not measure the checks; said, not counted.
            print("round %d: pair left out (failed requests)" % (r + 1))
            continue
        dq.append((res["on"][0] - res["off"][0]) / res["off"][0] * 100)
        dc.append((res["on"][1] - res["off"][1]) / res["off"][1] * 100)
    summary("put/s", dq)
    summary("cpu per put", dc)


if __name__ == "__main__":
    main()
