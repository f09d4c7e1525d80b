#!/usr/bin/env bash
# latency.sh - single-client put latency of cetcd vs etcd 3.4.23, robust to
# a noisy machine: runs bench/compare.sh's put-c1 workload ROUNDS times
# (each round starts fresh etcd then fresh cetcd servers, so the two
# alternate), then prints every round and the median p50, p99 and qps of
# each server with their ratios.
#
# usage: bench/latency.sh [WORKDIR]     (default: a fresh dir in /tmp)
# environment: ROUNDS (default 7), MEMBERS (1 or 3, default 1), SCALE
#   (default 3 = 3000 puts per round), CLIENT (go: ebench, etcd's Go
#   client, the default; c: cetcd-bench), plus compare.sh's CETCD_BIN,
#   ETCD_BIN, BENCH_BIN, EBENCH_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-$(mktemp -d /tmp/cetcd-latency.XXXXXX)}
ROUNDS=${ROUNDS:-7}
export SCALE=${SCALE:-3} MEMBERS=${MEMBERS:-1} ONLY='^put-c1$'
export CLIENTS=${CLIENT:-go}
if [ "$CLIENTS" = go ] && [ -z "${EBENCH_BIN:-}" ]; then
    bash ../shared/tools/ebench/build.sh "$WORK/eb" >&2
    export EBENCH_BIN=$WORK/eb/ebench
fi
for r in $(seq "$ROUNDS"); do
    echo "== round $r/$ROUNDS" >&2
    ROUNDS=1 bash bench/compare.sh "$WORK/r$r" >/dev/null
done
python3 - "$WORK" "$ROUNDS" "$MEMBERS" "$CLIENTS" <<'PY'
import os, statistics, sys
work, rounds, members = sys.argv[1], int(sys.argv[2]), sys.argv[3]
client = sys.argv[4]
rows = {"etcd": [], "cetcd": []}
fs = []
for r in range(1, rounds + 1):
    d = os.path.join(work, "r%d" % r)
    for name in rows:
        for line in open(os.path.join(d, name + ".r1.results")):
            f = line.split()
            if f[0] == "put-c1_(%s)" % client:
                rows[name].append((float(f[1]), float(f[2]), float(f[3])))
    t = open(os.path.join(d, "fsync.txt")).read().split()
    fs.append(float(dict(kv.split("=") for kv in t[1:])["p50_ms"]))
print("### single-client put, %s member(s), %d alternating rounds, %s "
      "client" % (members, rounds, "Go (ebench)" if client == "go"
                  else "C (cetcd-bench)"))
print()
print("| round | etcd p50 ms | cetcd p50 ms | p50 ratio | etcd p99 ms | "
      "cetcd p99 ms | etcd qps | cetcd qps | fdatasync p50 ms |")
print("|---|---|---|---|---|---|---|---|---|")
for i, (e, c) in enumerate(zip(rows["etcd"], rows["cetcd"])):
    print("| %d | %.3f | %.3f | %.2f | %.3f | %.3f | %.0f | %.0f | %.3f |" % (
        i + 1, e[1], c[1], c[1] / e[1], e[2], c[2], e[0], c[0], fs[i]))
med = lambda name, k: statistics.median(x[k] for x in rows[name])
print()
print("Medians: p50 etcd %.3f ms, cetcd %.3f ms (ratio %.2f); p99 etcd %.3f, "
      "cetcd %.3f (ratio %.2f); qps etcd %.0f, cetcd %.0f (ratio %.2f); "
      "fdatasync p50 %.3f ms." % (
          med("etcd", 1), med("cetcd", 1), med("cetcd", 1) / med("etcd", 1),
          med("etcd", 2), med("cetcd", 2), med("cetcd", 2) / med("etcd", 2),
          med("etcd", 0), med("cetcd", 0), med("cetcd", 0) / med("etcd", 0),
          statistics.median(fs)))
PY
