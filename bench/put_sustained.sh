#!/bin/bash
# put_sustained.sh - puts for a while, not a moment: each server in turn
# (fresh single member, 500 warm-up puts, then ebench for DUR seconds),
# with what the run cost: the server's CPU per put (/proc/PID/stat), its
# RSS at the end (anon and file-backed), and the disk's writes per put
# (/proc/diskstats of DISK: write IOs and 512-byte sectors; other writers
# on the disk count too).  The table of record's runs (compare.sh) last
# under a second on an empty store; this is where the store's growth and
# the map's working set show (docs/BENCHMARKS.md session 20).
# usage: bench/put_sustained.sh BIN... (e.g. build/cetcd /usr/bin/etcd)
# environment: DUR (30), CLIENTS (100), CONNS (10), ROUNDS (1), DISK (vda),
#   EBENCH (/tmp/eb/ebench), ETCDCTL (/usr/bin/etcdctl)
set -u
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
export ETCDCTL_API=3
DUR=${DUR:-30}; CLIENTS=${CLIENTS:-100}; CONNS=${CONNS:-10}
ROUNDS=${ROUNDS:-1}; DISK=${DISK:-vda}
. "$(dirname "$0")/single_common.sh"

disk() { awk -v d="$DISK" '$3 == d {print $8, $10}' /proc/diskstats; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

for round in $(seq "$ROUNDS"); do
    for bin in "$@"; do
        W=$(mktemp -d /tmp/cetcd-sustained.XXXXXX)
        start m "$bin" "$W"
        "$EBENCH" --endpoints "$ep" --op put --conns 1 --clients 1 \
            --total 500 --key-size 8 --val-size 256 \
            --key-space-size 100000 --json > /dev/null
        read -r w0 s0 < <(disk)
        c0=$(ticks "$pid")
        "$EBENCH" --endpoints "$ep" --op put --conns "$CONNS" \
            --clients "$CLIENTS" --duration "${DUR}s" --key-size 8 \
            --val-size 256 --key-space-size 100000 --json > "$W/r.json"
        c1=$(ticks "$pid")
        read -r w1 s1 < <(disk)
        anon=$(kb "$pid" RssAnon); file=$(kb "$pid" RssFile)
        kill "$pid"; wait "$pid" 2>/dev/null
        python3 - "$W/r.json" "$bin" "$round" "$((c1 - c0))" \
            "$((w1 - w0))" "$((s1 - s0))" "$anon" "$file" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
name, rnd, tck, ios, sect, anon, file = sys.argv[2:]
n = max(r["ok"], 1)
print("%s round=%s clients=%d qps=%.0f p99_ms=%.2f cpu_us_per_put=%.1f "
      "disk_ios_per_put=%.2f disk_kb_per_put=%.1f rss_anon_mb=%.0f "
      "rss_file_mb=%.0f errors=%d" % (
          name, rnd, r["params"]["clients"], r["qps"], r["p99_ms"],
          int(tck) * 1e4 / n, int(ios) / n, int(sect) / 2 / n,
          int(anon) / 1024, int(file) / 1024, r["errors"]))
PY
        rm -rf "$W"
    done
done
