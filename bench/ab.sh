#!/usr/bin/env bash
# ab.sh - alternating A/B runs of cetcd builds or settings under the Go
# client (ebench), one fresh single member per run:
#
#   bash bench/ab.sh ROUNDS "label:ENV=v ENV2=w:/path/to/cetcd" ...
#
# Each round runs every spec once, in the order given (ENV "-" for none).
# Per run it prints the server's CPU per request (utime+stime of the
# process from /proc, over the timed part only), its minor page faults and
# the KiB it caused to be written to storage (/proc/<pid>/io write_bytes)
# per request, the size of member/db afterwards, and ebench's qps, p50 and p99.
# The load: EBENCH_ARGS (default: put, 10 connections, 100 clients, 40000
# puts over 100000 keys, 256-byte values).  Ports AB_CLIENT_PORT /
# AB_PEER_PORT (default 23790/23800, as bench/compare.sh: run nothing else
# there).  EBENCH_BIN: ebench binary
# (default /tmp/eb/ebench; build it with ../shared/tools/ebench/build.sh).
set -uo pipefail
R=${1:?rounds}
shift
EB=${EBENCH_BIN:-/tmp/eb/ebench}
ARGS=${EBENCH_ARGS:---op put --conns 10 --clients 100 --total 40000 --key-space-size 100000 --val-size 256}
total=$(echo "$ARGS" | sed -n 's/.*--total \([0-9]*\).*/\1/p')
HZ=$(getconf CLK_TCK)
CP=${AB_CLIENT_PORT:-23790}
PP=${AB_PEER_PORT:-23800}
for r in $(seq 1 "$R"); do
    for spec in "$@"; do
        label=${spec%%:*}
        rest=${spec#*:}
        envs=${rest%%:*}
        bin=${rest#*:}
        [ "$envs" = "-" ] && envs=""
        d=$(mktemp -d /tmp/ab.XXXXXX)
        # shellcheck disable=SC2086
        env $envs "$bin" --data-dir "$d/data" \
            --listen-client-urls http://127.0.0.1:$CP \
            --advertise-client-urls http://127.0.0.1:$CP \
            --listen-peer-urls http://127.0.0.1:$PP \
            --initial-advertise-peer-urls http://127.0.0.1:$PP \
            --initial-cluster default=http://127.0.0.1:$PP >"$d/log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            "$EB" --op put --total 1 --endpoints 127.0.0.1:$CP >/dev/null 2>&1 && break
            sleep 0.1
        done
        read -r c0 f0 < <(awk '{print $14+$15, $10}' "/proc/$pid/stat")
        w0=$(awk '/^write_bytes/{print $2}' "/proc/$pid/io")
        # shellcheck disable=SC2086
        out=$("$EB" $ARGS --endpoints 127.0.0.1:$CP --json 2>&1 | tail -1)
        read -r c1 f1 < <(awk '{print $14+$15, $10}' "/proc/$pid/stat")
        w1=$(awk '/^write_bytes/{print $2}' "/proc/$pid/io")
        db=$(du -sm "$d/data/member/db" 2>/dev/null | cut -f1)
        kill "$pid"
        wait "$pid" 2>/dev/null
        echo "$out" | /usr/bin/python3 -c '
import json, sys
label, r, c0, c1, f0, f1, hz, total, db, w0, w1 = sys.argv[1:]
try:
    j = json.loads(sys.stdin.read())
except ValueError:
    print(label, "r" + r, "ebench failed"); sys.exit()
n = int(total)
print("%s r%s cpu_us=%.1f minflt=%.2f write_kb=%.1f db_mb=%s qps=%d p50=%.2f p99=%.2f" % (
    label, r, (int(c1) - int(c0)) * 1e6 / int(hz) / n,
    (int(f1) - int(f0)) / n, (int(w1) - int(w0)) / 1024 / n, db, j["qps"],
    j["p50_ms"], j["p99_ms"]))
' "$label" "$r" "$c0" "$c1" "$f0" "$f1" "$HZ" "$total" "$db" "$w0" "$w1"
        rm -rf "$d"
    done
done
