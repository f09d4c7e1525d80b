#!/bin/bash
# put_floor.sh - is 2x etcd's 1-client put rate within reach on this
# machine?  A serial put, one client, cannot finish sooner than the
# client's round trip to the server plus one WAL fdatasync of the disk.
# Each round, fresh dirs, in this order, with etcd's Go client (ebench):
#   fsync  - fsync_lat.py --wal: 320-byte records into a fallocated file,
#            fdatasync after each (what cetcd's WAL does per serial put)
#   rtt    - a serializable Range on a fresh cetcd, 1 client: the round
#            trip with no disk in it (client, loopback, server)
#   cetcd  - puts on a fresh cetcd, 1 client
#   etcd   - puts on a fresh etcd 3.4.23, 1 client
# and prints the means (ms), the floor (fsync + rtt), half of etcd's mean
# put (what 2x needs) and the best ratio any server could reach here
# (etcd's mean / the floor).
# usage: bench/put_floor.sh [ROUNDS] (N puts per run, default 5000;
#   CETCD (build/cetcd), ETCD (/usr/bin/etcd), EBENCH (/tmp/eb/ebench))
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
R=${1:-3}; N=${N:-5000}
CETCD=${CETCD:-$ROOT/build/cetcd}; ETCD=${ETCD:-/usr/bin/etcd}
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. "$ROOT/bench/single_common.sh"

# mean_of OP BIN [ebench flags] -> the avg_ms and qps of one ebench run on
# a fresh member of BIN
mean_of() {
    local bin=$1 W out
    shift
    W=$(mktemp -d /tmp/cetcd-floor.XXXXXX)
    start m "$bin" "$W"
    out=$("$EBENCH" --endpoints "$ep" --conns 1 --clients 1 --total "$N" \
        --val-size 256 --json "$@")
    kill "$pid"; wait "$pid" 2>/dev/null
    rm -rf "$W"
    echo "$out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); assert d["errors"] == 0, d; print("%.4f %.0f" % (d["avg_ms"], d["qps"]))'
}

printf "%-5s %-8s %-8s %-8s %-14s %-14s %-8s %-10s %s\n" round fsync rtt floor \
    "cetcd(qps)" "etcd(qps)" etcd/2 "best/etcd" "cetcd/etcd"
for r in $(seq "$R"); do
    W=$(mktemp -d /tmp/cetcd-floor.XXXXXX)
    fs=$(python3 "$ROOT/bench/fsync_lat.py" --wal "$W" "$N" |
         sed 's/.*avg_ms=\([0-9.]*\).*/\1/')
    rm -rf "$W"
    read -r rtt _ < <(mean_of "$CETCD" --op range --consistency s \
        --key-space-size 1000)
    read -r cp cq < <(mean_of "$CETCD" --op put --key-space-size 100000)
    read -r ep_ eq < <(mean_of "$ETCD" --op put --key-space-size 100000)
    python3 - "$r" "$fs" "$rtt" "$cp" "$cq" "$ep_" "$eq" <<'PY'
import sys
r, fs, rtt, cp, cq, em, eq = sys.argv[1:]
fs, rtt, cp, cq, em, eq = map(float, (fs, rtt, cp, cq, em, eq))
floor = fs + rtt
print("%-5s %-8.3f %-8.3f %-8.3f %-14s %-14s %-8.3f %-10.2f %.2f" % (
    r, fs, rtt, floor, "%.3f(%d)" % (cp, cq), "%.3f(%d)" % (em, eq),
    em / 2, em / floor, cq / eq))
PY
done
