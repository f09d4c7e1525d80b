#!/usr/bin/env bash
# metrics_cost.sh - what counting for /metrics costs per request (issue 18:
# "metrics cost under 2 % of the CPU per put").
#
#   bash bench/metrics_cost.sh [ROUNDS]
#
# Builds cetcd a second time with -DCETCD_METRICS_OFF=ON (util/metrics.h:
# every counter add, histogram observation and clock read of a metric
# becomes nothing) into build-metrics-off/, then runs bench/ab.sh: the
# normal build ("on") and that build ("off") alternating, ROUNDS rounds
# (default 5), one fresh single member per run, under the Go client
# (ebench, EBENCH_ARGS as ab.sh: put, 100 clients, 10 connections).  It
# prints each run and, last, the median CPU per request of each, the
# share of "on" that metrics take, (on - off) / on, and the mean of the
# per-round differences with its standard error.
# The counters kept before /metrics existed (raft and proposal counts the
# server needs anyway) are in both builds; the off build removes what
# /metrics added.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-5}
ON=${ON_BIN:-build/cetcd}
OFF_DIR=${OFF_BUILD:-build-metrics-off}
[ -x "$ON" ] || { echo "build $ON first (make build)" >&2; exit 1; }
cmake -S . -B "$OFF_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCETCD_METRICS_OFF=ON >/dev/null
cmake --build "$OFF_DIR" -j"${JOBS:-2}" --target cetcd >/dev/null
out=$(mktemp)
bash bench/ab.sh "$R" "on:-:$PWD/$ON" "off:-:$PWD/$OFF_DIR/cetcd" | tee "$out"
/usr/bin/python3 - "$out" <<'PY'
import re, statistics, sys
runs = {"on": [], "off": []}
for line in open(sys.argv[1]):
    m = re.match(r"(on|off) r\d+ cpu_us=([0-9.]+)", line)
    if m:
        runs[m.group(1)].append(float(m.group(2)))
if not runs["on"] or not runs["off"]:
    sys.exit("metrics_cost: no complete runs")
on, off = statistics.median(runs["on"]), statistics.median(runs["off"])
print("median cpu_us per request: on=%.2f off=%.2f  metrics share=%.1f %%"
      % (on, off, (on - off) / on * 100))
# Rounds are pairs run back to back: the mean of the paired differences
# and its standard error say what the noise allows to conclude.
d = [a - b for a, b in zip(runs["on"], runs["off"])]
if len(d) > 1:
    m, se = statistics.mean(d), statistics.stdev(d) / len(d) ** 0.5
    base = statistics.mean(runs["on"])
    print("paired: on - off = %.2f +- %.2f us (%.1f %% +- %.1f %% of on)"
          % (m, se, m / base * 100, se / base * 100))
PY
rm -f "$out"
