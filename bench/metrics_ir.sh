#!/usr/bin/env bash
# metrics_ir.sh - what counting for /metrics costs per put, in instructions
# (issue 18: "metrics cost under 2 % of the CPU per put").
#
#   bash bench/metrics_ir.sh [PUTS] [CLIENTS]
#
# bench/metrics_cost.sh compares CPU time per put of the normal build and
# a -DCETCD_METRICS_OFF=ON build; on this VM a member's CPU per put moves
# +-10 % between runs, so bounding 2 % takes hundreds of rounds.  This
# script counts instructions instead, which do not depend on the
# machine's load: each build runs under valgrind's callgrind, collection
# switched on only for the timed puts (callgrind_control -i on/off), and
# the instructions the member executed (every thread, Ir) are divided by
# the puts.  The difference on - off is what recording costs in
# instructions.  What instructions do not show: the cycles an atomic add
# waits for a cache line another core wrote (callgrind runs one thread at
# a time): the last step times that apart (bench/metrics_contend.c).
# With KEEP=1 the profiles stay, for callgrind_annotate's attribution of
# every instruction of util/metrics.[ch] (docs/BENCHMARKS.md, session 23).
#
# PUTS (default 3000) puts of 256 B values on 1000 keys from CLIENTS
# (default 10) clients of cetcd-bench over one connection; ROUNDS (2)
# runs of each build, alternating.  Needs build/ (release) and builds
# build-metrics-off/ as metrics_cost.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
PUTS=${1:-3000}
CLIENTS=${2:-10}
ROUNDS=${ROUNDS:-2}
ON=${ON_BIN:-build/cetcd}
OFF_DIR=${OFF_BUILD:-build-metrics-off}
BENCH=${BENCH_BIN:-build/src/bench/cetcd-bench}
[ -x "$ON" ] && [ -x "$BENCH" ] || { echo "make build first" >&2; exit 1; }
cmake -S . -B "$OFF_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCETCD_METRICS_OFF=ON >/dev/null
cmake --build "$OFF_DIR" -j"${JOBS:-2}" --target cetcd >/dev/null
. bench/single_common.sh
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
work=$(mktemp -d /tmp/metrics-ir-XXXXXX)

one() { # NAME BIN -> prints "NAME ir_per_put=N"
    local name=$1 bin=$2 cp pp dir out
    dir=$(mktemp -d "$work/$name-XXXX")
    cp=$(free_port); pp=$(free_port)
    out="$dir/callgrind.out"
    CETCD_MAP_BYTES=$((1 << 30)) valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$out" "$bin" --name m --data-dir "$dir/data" \
        --listen-client-urls "http://127.0.0.1:$cp" \
        --advertise-client-urls "http://127.0.0.1:$cp" \
        --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "m=http://127.0.0.1:$pp" >"$dir/log" 2>&1 &
    local vpid=$!
    for _ in $(seq 300); do
        "$ETCDCTL" --endpoints "127.0.0.1:$cp" put warm 1 >/dev/null 2>&1 && break
        sleep 0.5
    done
    # warm-up: the connection, the keys' first versions, the allocators
    "$BENCH" --endpoints "127.0.0.1:$cp" --clients "$CLIENTS" --total 1000 \
        put --key-size 8 --val-size 256 --key-space-size 1000 >/dev/null
    callgrind_control -i on "$vpid" >/dev/null
    "$BENCH" --endpoints "127.0.0.1:$cp" --clients "$CLIENTS" --total "$PUTS" \
        put --key-size 8 --val-size 256 --key-space-size 1000 >/dev/null
    callgrind_control -i off "$vpid" >/dev/null
    kill -TERM "$vpid"; wait "$vpid" || true
    local ir
    ir=$(cat "$out"* | awk '/^summary:/ {s += $2} /^totals:/ {t += $2}
                            END {print (s > 0 ? s : t)}')
    echo "$name ir_per_put=$(( ir / PUTS ))"
}

res=$(mktemp)
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then order="on off"; else order="off on"; fi
    for n in $order; do
        if [ "$n" = on ]; then one on "$PWD/$ON"; else one off "$PWD/$OFF_DIR/cetcd"; fi
    done
done | tee "$res"
/usr/bin/python3 - "$res" <<'PY'
import re, statistics, sys
v = {"on": [], "off": []}
for line in open(sys.argv[1]):
    m = re.match(r"(on|off) ir_per_put=(\d+)", line)
    if m:
        v[m.group(1)].append(int(m.group(2)))
on, off = statistics.mean(v["on"]), statistics.mean(v["off"])
print("instructions per put: on %.0f, off %.0f: recording %.0f = %.2f %% "
      "of on" % (on, off, on - off, 100 * (on - off) / on))
PY
[ -n "${KEEP:-}" ] && echo "callgrind outputs kept in $work" || rm -rf "$work"
rm -f "$res"
gcc -O2 -pthread -o "${TMPDIR:-/tmp}/metrics_contend" bench/metrics_contend.c
"${TMPDIR:-/tmp}/metrics_contend"
