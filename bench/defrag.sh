#!/usr/bin/env bash
# defrag.sh - requests during an online defragmentation, cetcd against etcd
# 3.4.23 in the same run (docs/BENCHMARKS.md "Defragmentation under load").
#
# For each server: fill a store with SIZE_MB of 4 KiB values, delete the
# first half of the keys and compact (physical), so that half the file is
# free pages; then 100 clients put (ebench, 10 connections) for DURATION
# seconds, and `etcdctl defrag` runs DEFRAG_AT seconds into it.  Reported:
# how long the defrag took, the put latencies of the whole loaded window
# (p99, max: the longest request, which is the one the defrag held up),
# the same window without a defrag as a baseline, and dbSize before and
# after.  etcd blocks every request for its whole defrag (etcd #9222);
# cetcd pauses them for its switch-over only.
#
# Usage: bench/defrag.sh [SIZE_MB] [DURATION] [DEFRAG_AT]
#   defaults 1024 30 5.  Env: EBENCH (ebench binary, built by
#   /work/shared/tools/ebench/build.sh), CETCD_BIN, ETCD_BIN, ETCDCTL,
#   SERVERS (default "etcd cetcd": which to measure, in that order),
#   BASELINE (seconds of the window without a defrag, default DURATION).
# DURATION must cover DEFRAG_AT plus the whole defrag (the log line says
# how long it took): else its switch-over falls outside the window.
# The machine is shared and loaded: numbers are noisy, say so with them.
set -euo pipefail

SIZE_MB=${1:-1024}
DURATION=${2:-30}
DEFRAG_AT=${3:-5}
BASELINE=${BASELINE:-$DURATION} # seconds of the window without a defrag
repo=$(cd "$(dirname "$0")/.." && pwd)
EBENCH=${EBENCH:-/tmp/eb/ebench}
CETCD_BIN=${CETCD_BIN:-$repo/build/cetcd}
ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
VAL=4096
KEYS=$((SIZE_MB * 1024 * 1024 / VAL))
HALF=$((KEYS / 2))
DEL_SLICE=8192

. "$(dirname "$0")/single_common.sh"

sizes() {
    "$ETCDCTL" --endpoints "$1" endpoint status -w json |
        python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["Status"]; print("dbSize=%d dbSizeInUse=%d" % (s["dbSize"], s.get("dbSizeInUse", 0)))'
}

load() { # EP -> one ebench JSON line
    load_put "$1" "$DURATION"
}

one() { # NAME BIN
    local name=$1 bin=$2 dir
    dir=$(mktemp -d "/tmp/defrag-bench-$name-XXXXXX")
    start "$name" "$bin" "$dir"
    trap 'kill "$pid" 2>/dev/null || true' EXIT # a failed step stops it
    echo "== $name: filling $SIZE_MB MiB ($KEYS x $VAL B)" >&2
    "$EBENCH" --endpoints "$ep" --op put --conns 10 --clients 100 \
        --total "$KEYS" --sequential-keys --key-space-size "$KEYS" \
        --key-size 16 --val-size $VAL --key-prefix "f/" --json >/dev/null
    local rev i
    # In slices: one delete of 128k keys exceeds etcd's request timeout.
    for ((i = 0; i < HALF; i += DEL_SLICE)); do
        "$ETCDCTL" --endpoints "$ep" --command-timeout 300s del \
            "$(printf 'f/%014d' "$i")" \
            "$(printf 'f/%014d' $((i + DEL_SLICE < HALF ? i + DEL_SLICE : HALF)))" >/dev/null
    done
    rev=$("$ETCDCTL" --endpoints "$ep" get x -w json |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
    "$ETCDCTL" --endpoints "$ep" --command-timeout 300s compact --physical "$rev" >/dev/null
    # cetcd steps a compaction in the apply batches after it: puts until
    # the pages are free (dbSizeInUse < 60% of dbSize), at most 10 min.
    local k
    for k in $(seq 600); do
        "$ETCDCTL" --endpoints "$ep" put tick 1 >/dev/null
        [ "$k" -ge 20 ] && sizes "$ep" | python3 -c 'import sys; d=dict(x.split("=") for x in sys.stdin.read().split()); sys.exit(0 if int(d["dbSizeInUse"]) < 0.6*int(d["dbSize"]) else 1)' && break
        sleep 1
    done
    echo "$name before: $(sizes "$ep")"
    echo "$name baseline (no defrag): $(DURATION=$BASELINE load "$ep")"
    load "$ep" >"$dir/during.json" &
    local lpid=$! t0 t1
    sleep "$DEFRAG_AT"
    t0=$(date +%s.%N)
    "$ETCDCTL" --endpoints "$ep" --command-timeout 600s defrag
    t1=$(date +%s.%N)
    wait $lpid || true # ebench exits 1 when > 1% of requests failed
    echo "$name defrag took $(python3 -c "print(round($t1 - $t0, 3))") s"
    echo "$name during defrag: $(cat "$dir/during.json")"
    echo "$name after: $(sizes "$ep")"
    grep -i "defragment" "$dir/log" | tail -2 || true
    kill "$pid"; wait "$pid" || true
    rm -rf "$dir"
}

for name in ${SERVERS:-etcd cetcd}; do
    case $name in
    etcd) one etcd "$ETCD_BIN" ;;
    cetcd) one cetcd "$CETCD_BIN" ;;
    *) echo "SERVERS: unknown server $name" >&2; exit 2 ;;
    esac
done
