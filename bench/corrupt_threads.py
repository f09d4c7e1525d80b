#!/usr/bin/python3
"""corrupt_threads.py - what the corruption checks cost at cetcd's DEFAULT
settings, measured by where the CPU goes rather than by A/B throughput
(issue 20: on by default unless they cost more than 2 %; A/B runs on this
shared VM cannot resolve 2 %, docs/BENCHMARKS.md "Corruption checks").

Every hash the checks compute runs on two threads that do nothing else
under a put load: cetcd-corrupt (the member's own checks: the periodic
pass and the compaction-time check, the leader's local hashes) and
cetcd-slow (the hashes peers ask for on the peer listener; also
Hash/HashKV and Authenticate RPCs, which this load does not send).  So
their CPU time over the members' whole CPU time is the checks' share of
the work, at the defaults, over a window long enough to hold their passes.

One 3-member cluster with no corruption-check flag (the defaults: initial
check, periodic every 5 m, compaction-time every 1 m), auto-compaction
periodic every COMPACT (1m), PRELOAD keys of 256 B, then a Go-client put
load (ebench) at RATE put/s for DURATION s (default 400: a periodic pass
at 5 m and several compaction checks fall inside).  Printed: per member
and in all, each thread's CPU seconds, the checks' threads' share of the
process CPU, and the passes the logs show.

environment: CETCD_BIN (build/cetcd), EBENCH_BIN (/tmp/eb/ebench), PRELOAD
(100000), RATE (2000), DURATION (400), COMPACT (1m).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import cluster as clusterlib  # noqa: E402
from corrupt_cost import cpu_s, ebench  # noqa: E402

PRELOAD = int(os.environ.get("PRELOAD", "100000"))
RATE = int(os.environ.get("RATE", "2000"))
DURATION = int(os.environ.get("DURATION", "400"))
COMPACT = os.environ.get("COMPACT", "1m")
CHECK_THREADS = ("cetcd-corrupt", "cetcd-slow")
PASS_LINES = ("finished compaction hash check",
              "finished peer corruption check")


def threads_cpu(pid):
    """{thread name: CPU seconds} of process pid (threads of one name
    summed)."""
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue  # ended meanwhile
        name = st[st.index("(") + 1:st.rindex(")")]
        fields = st.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0) + (int(fields[11]) +
                                        int(fields[12])) / hz
    return out


def main():
    c = clusterlib.Cluster(3, extra_args=[
        "--auto-compaction-mode", "periodic",
        "--auto-compaction-retention", COMPACT])
    try:
        c.start()
        lm, _ = c.wait_leader()
        ebench(lm.endpoint, "--op", "put", "--total", str(PRELOAD),
               "--clients", "16", "--sequential-keys", "--key-size", "16",
               "--key-space-size", str(PRELOAD), "--val-size", "256",
               "--prefill", "no", timeout=DURATION + 600)
        pids = [m.proc.pid for m in c.members]
        passes0 = [sum(open(m.log_path).read().count(t) for t in PASS_LINES)
                   for m in c.members]
        th0 = [threads_cpu(p) for p in pids]
        pr0 = [cpu_s([p]) for p in pids]
        eps = ",".join(m.endpoint for m in c.members)
        j = ebench(eps, "--op", "put", "--total", "0", "--duration",
                   "%ds" % DURATION, "--rate", str(RATE), "--conns", "6",
                   "--clients", "32", "--key-size", "16",
                   "--key-space-size", str(PRELOAD), "--val-size", "256",
                   "--prefill", "no", timeout=DURATION + 600)
        th1 = [threads_cpu(p) for p in pids]
        pr1 = [cpu_s([p]) for p in pids]
        passes = [sum(open(m.log_path).read().count(t) for t in PASS_LINES)
                  - p0 for m, p0 in zip(c.members, passes0)]
        print("load: %.0f put/s for %d s, %d errors, p99 %.1f ms" % (
            j["qps"], DURATION, j.get("errors", 0), j["p99_ms"]))
        tot_chk = tot_all = 0.0
        for i, m in enumerate(c.members):
            d = {k: th1[i].get(k, 0) - th0[i].get(k, 0) for k in th1[i]}
            chk = sum(d.get(k, 0) for k in CHECK_THREADS)
            allp = pr1[i] - pr0[i]
            tot_chk += chk
            tot_all += allp
            top = sorted(d.items(), key=lambda kv: -kv[1])[:6]
            print("member %s: process %.2f s CPU, check threads %.3f s "
                  "(%.2f %%), check passes logged %d; top threads: %s" % (
                      m.name, allp, chk, 100 * chk / allp if allp else 0,
                      passes[i],
                      ", ".join("%s %.2f" % kv for kv in top)))
        print("all members: check threads %.3f s of %.2f s CPU = %.2f %%"
              % (tot_chk, tot_all, 100 * tot_chk / tot_all))
    finally:
        c.close()


if __name__ == "__main__":
    main()
