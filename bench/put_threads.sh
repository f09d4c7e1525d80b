#!/bin/bash
# put_threads.sh - where a put load's CPU goes, thread by thread: a fresh
# single member under ebench (etcd's Go client), each thread's user and
# system time (/proc/PID/task/*/stat, summed by thread name) per put.
# usage: bench/put_threads.sh BIN CLIENTS CONNS   (N puts, default 60000;
#   EBENCH, default /tmp/eb/ebench; ETCDCTL)
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. "$(dirname "$0")/single_common.sh"
W=$(mktemp -d /tmp/cetcd-thr.XXXXXX)
start m "$1" "$W"
N=${N:-60000}
# per thread name: utime stime (clock ticks)
ticks() {
    for t in /proc/$pid/task/*; do
        echo "$(tr ' ' _ < "$t/comm") $(awk '{print $14, $15}' "$t/stat")"
    done | awk '{u[$1] += $2; s[$1] += $3} END {for (k in u) print k, u[k], s[k]}' | sort
}
ticks > "$W/a"
r=$("$EBENCH" --endpoints "$ep" --op put --conns "$3" --clients "$2" --total "$N" \
    --key-space-size 100000 --val-size 256 --json)
ticks > "$W/b"
hz=$(getconf CLK_TCK)
echo "$r" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("qps=%.0f p99=%.1f ms" % (d["qps"], d["p99_ms"]))'
join "$W/a" "$W/b" | awk -v n="$N" -v hz="$hz" '
    {u = ($4 - $2) * 1e6 / hz / n; s = ($5 - $3) * 1e6 / hz / n; tu += u; ts += s
     if (u + s > 0.05) printf "%-16s user %6.2f sys %6.2f us/put\n", $1, u, s}
    END {printf "%-16s user %6.2f sys %6.2f us/put\n", "all", tu, ts}'
kill "$pid"; wait "$pid" 2>/dev/null; rm -rf "$W"
