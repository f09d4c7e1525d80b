#!/bin/bash
# idle_lat.sh - requests on an otherwise idle single member: one client at
# RATE requests/s (default 20), TOTAL each (400) of put, then range, on a
# fresh etcd 3.4.23 and a fresh cetcd, ROUNDS times (2), alternating;
# prints p50, p99 and the longest request per server and op (issue 14:
# no request over 10 ms on an idle member).  A Python client that lists
# every slow request with its time (to match against strace): idle_trace.py.
# usage: bench/idle_lat.sh; environment: EBENCH (/tmp/eb/ebench), ETCDCTL,
#   CETCD_BIN (build/cetcd), ETCD_BIN (/usr/bin/etcd), RATE, TOTAL, ROUNDS
set -u
cd "$(dirname "$0")/.."
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. bench/single_common.sh
for r in $(seq 1 "${ROUNDS:-2}"); do
    for lb in "etcd=${ETCD_BIN:-/usr/bin/etcd}" "cetcd=${CETCD_BIN:-$PWD/build/cetcd}"; do
        W=$(mktemp -d /tmp/cetcd-idle.XXXXXX)
        start m "${lb#*=}" "$W"
        for op in put range; do
            "$EBENCH" --endpoints "$ep" --op $op --conns 1 --clients 1 \
                --rate "${RATE:-20}" --total "${TOTAL:-400}" \
                --key-space-size 1000 --val-size 256 --json |
                python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("'"${lb%%=*} $op"' qps=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f" % (d["qps"], d["p50_ms"], d["p99_ms"], d["max_ms"]))'
        done
        kill "$pid"; wait "$pid" 2>/dev/null; rm -rf "$W"
    done
done
