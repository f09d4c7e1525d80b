#!/usr/bin/env bash
# floor.sh - what a unary call costs on the gRPC C core before any cetcd
# code runs, beside what cetcd and etcd 3.4.23 spend, in one run.
#
# usage: bench/floor.sh [WORKDIR]          (default: a fresh dir in /tmp)
# environment: ROUNDS (default 3), SCALE (default 2), ETCD_BIN, CETCD_BIN,
#              BENCH_BIN, FLOOR_BIN (default build/src/bench/...)
#
# Three servers per round, one after the other, fresh data dirs:
#   floor  cetcd-grpc-floor: answers Range with an empty message and does
#          nothing else (src/bench/grpc_floor.c), 2 completion-queue threads
#   cetcd  build/cetcd, single member, fsync on
#   etcd   etcd 3.4.23, single member, fsync on
# and per load (100 clients over 10 connections, 1000 over 100) a
# serializable range of one key (all three) and puts (cetcd and etcd).
# Each line: qps, the server's CPU per call (/proc/PID/stat) and the load
# generator's (cetcd-bench, user+sys from time(1)), both in microseconds.
#
# Why: with the load generator on the same cores, qps is about
# cores / (server CPU per call + generator CPU per call).  A server can be
# no cheaper per call than the floor, so the best put-qps ratio cetcd could
# reach against etcd on this machine is about
#     (etcd's CPU per put + generator's) / (floor + generator's)
# which the table prints beside the measured ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${1:-$(mktemp -d /tmp/cetcd-floor.XXXXXX)}
mkdir -p "$WORK"
ROUNDS=${ROUNDS:-3}
SCALE=${SCALE:-2}
ETCD_BIN=${ETCD_BIN:-etcd}
CETCD_BIN=${CETCD_BIN:-$ROOT/build/cetcd}
BENCH_BIN=${BENCH_BIN:-$ROOT/build/src/bench/cetcd-bench}
FLOOR_BIN=${FLOOR_BIN:-$ROOT/build/src/bench/cetcd-grpc-floor}
for b in "$CETCD_BIN" "$BENCH_BIN" "$FLOOR_BIN"; do
    [ -x "$b" ] || { echo "floor.sh: $b not found (make build)" >&2; exit 1; }
done
CLK_TCK=$(getconf CLK_TCK)
EP=127.0.0.1:23790
PEER=http://127.0.0.1:23800
PID=

LOADS=("c100|--conns 10 --clients 100|$((10000 * SCALE))"
       "c1000|--conns 100 --clients 1000|$((20000 * SCALE))")
PUT_FLAGS="--key-size 8 --val-size 256 --key-space-size 100000"

start() {
    local name=$1 dir=$WORK/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    case $name in
    floor) "$FLOOR_BIN" "$EP" 2 >"$dir/server.log" 2>&1 & ;;
    cetcd | etcd)
        local bin=$CETCD_BIN
        [ "$name" = etcd ] && bin=$ETCD_BIN
        "$bin" --name m0 --data-dir "$dir/data" \
            --listen-client-urls "http://$EP" --advertise-client-urls "http://$EP" \
            --listen-peer-urls "$PEER" --initial-advertise-peer-urls "$PEER" \
            --initial-cluster "m0=$PEER" >"$dir/server.log" 2>&1 & ;;
    esac
    PID=$!
    for _ in $(seq 100); do
        if "$BENCH_BIN" --endpoints "$EP" --dial-timeout 1 --conns 1 \
            --clients 1 range foo --consistency s --total 1 >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.2
    done
    echo "floor.sh: $name did not come up, see $dir/server.log" >&2
    return 1
}

stop() {
    [ -n "$PID" ] || return 0
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=
}
trap stop EXIT

# measure NAME ROUND LOAD OP ARGS...: one line in $WORK/lines:
#   server load op round qps server_us gen_us
measure() {
    local name=$1 round=$2 load=$3 op=$4 total=$5
    shift 5
    local c0 c1 line
    c0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    line=$(/usr/bin/time -f "TIME %U %S" -o "$WORK/time" \
           "$BENCH_BIN" --endpoints "$EP" "$@" --total "$total" | grep '^RESULT')
    c1=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    python3 - "$name" "$load" "$op" "$round" "$c0" "$c1" "$CLK_TCK" "$line" \
        "$(grep '^TIME' "$WORK/time")" >>"$WORK/lines" <<'PY'
import sys
name, load, op, rnd, c0, c1, tck, line, tm = sys.argv[1:]
r = dict(kv.split("=", 1) for kv in line.split()[1:])
ok = max(1, int(r["ok"]))
srv = (int(c1) - int(c0)) * 1e6 / int(tck) / ok
gen = (float(tm.split()[1]) + float(tm.split()[2])) * 1e6 / ok
print(name, load, op, rnd, r["qps"], "%.1f" % srv, "%.1f" % gen)
PY
    echo "  $(tail -1 "$WORK/lines")" >&2
}

: >"$WORK/lines"
for r in $(seq "$ROUNDS"); do
    for name in floor cetcd etcd; do
        echo "== round $r/$ROUNDS: $name" >&2
        start "$name"
        if [ "$name" != floor ]; then
            ETCDCTL_API=3 etcdctl --endpoints "$EP" put foo bar >/dev/null
        fi
        # The same warm-up for every server (first calls fault in memory).
        "$BENCH_BIN" --endpoints "$EP" --conns 10 --clients 100 range foo \
            --consistency s --total 5000 >/dev/null
        for l in "${LOADS[@]}"; do
            IFS='|' read -r load args total <<<"$l"
            # shellcheck disable=SC2086
            measure "$name" "$r" "$load" range-s "$total" $args \
                range foo --consistency s
            [ "$name" = floor ] && continue
            # shellcheck disable=SC2086
            measure "$name" "$r" "$load" put "$total" $args put $PUT_FLAGS
        done
        stop
    done
done

python3 - "$WORK/lines" "$ROUNDS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for name, load, op, rnd, qps, srv, gen in rows:
    med.setdefault((name, load, op), []).append((float(qps), float(srv), float(gen)))
def m(k, i):
    v = med.get(k)
    return statistics.median(x[i] for x in v) if v else float("nan")
print("### gRPC C core floor vs cetcd vs etcd 3.4.23 (medians of %s rounds)" % sys.argv[2])
print()
print("| load | server, op | qps | server CPU µs/call | load generator µs/call |")
print("|---|---|---|---|---|")
for load in ("c100", "c1000"):
    for k in (("floor", "range-s"), ("cetcd", "range-s"), ("etcd", "range-s"),
              ("cetcd", "put"), ("etcd", "put")):
        key = (k[0], load, k[1])
        if key in med:
            print("| %s | %s %s | %.0f | %.1f | %.1f |" % (
                load, k[0], k[1], m(key, 0), m(key, 1), m(key, 2)))
print()
print("| load | cetcd put µs above the floor | measured put qps ratio | best ratio a floor-cost server could reach |")
print("|---|---|---|---|")
for load in ("c100", "c1000"):
    fl = m(("floor", load, "range-s"), 1)
    cp, ep = ("cetcd", load, "put"), ("etcd", load, "put")
    best = (m(ep, 1) + m(ep, 2)) / (fl + m(cp, 2))
    print("| %s | %.1f | %.2f | %.2f |" % (load, m(cp, 1) - fl,
          m(cp, 0) / m(ep, 0), best))
PY
