#!/bin/bash
# watch_put.sh - what 10k watchers on the written prefix cost the writers:
# put throughput and server CPU per put at 100 clients (10 connections),
# with 0 watchers (cetcd-bench put) and with 10k watchers (cetcd-bench watch
# --prefix: 100 streams x 100 watchers on "wb/", every put reaching all of
# them), cetcd and etcd 3.4.23 in the same run, a fresh member each time.
# The same C client loads both servers (same gRPC wire).  CPU per put is the
# server's utime+stime over the put phase (watch: creation included, which
# is small) divided by the puts.
# usage: bench/watch_put.sh [WORKDIR]; environment: see watch_common.sh,
#   PUTS0 (puts without watchers, 20000), PUTSW (with watchers, 1000).
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-watchput.XXXXXX)}
PUTS0=${PUTS0:-20000}; PUTSW=${PUTSW:-1000}
HZ=$(getconf CLK_TCK)

for name in $SERVERS; do
    server_start "$name" w0 || exit 1
    c0=$(cpu_ticks "$SPID")
    "$B" --endpoints "$EP" --conns 10 --clients 100 put --total "$PUTS0" \
        --key-size 32 --val-size 32 --key-space-size 100000 > "$WORK/$name-w0.out" 2>&1
    c1=$(cpu_ticks "$SPID"); server_stop
    q0=$(result qps put < "$WORK/$name-w0.out")
    cpu0=$(( (c1 - c0) * 1000000 / HZ / PUTS0 ))

    server_start "$name" w10k || exit 1
    c0=$(cpu_ticks "$SPID")
    "$B" --endpoints "$EP" --conns 10 --clients 100 --threads 2 watch --prefix \
        --streams 100 --watch-per-stream 100 --put-total "$PUTSW" \
        --key-space-size 100000 --watch-wait 60 > "$WORK/$name-w10k.out" 2>&1
    c1=$(cpu_ticks "$SPID"); hwm=$(awk '/VmHWM/{print $2}' "/proc/$SPID/status")
    server_stop
    qw=$(result qps watch-put < "$WORK/$name-w10k.out")
    cpuw=$(( (c1 - c0) * 1000000 / HZ / PUTSW ))
    ev=$(grep '^watchers=' "$WORK/$name-w10k.out")
    echo "$name put_qps_0w=$q0 cpu_us_per_put_0w=$cpu0 put_qps_10kw=$qw" \
         "cpu_us_per_put_10kw=$cpuw peak_rss_kb_10kw=$hwm change_pct=$(awk -v a="$q0" -v b="$qw" \
         'BEGIN{printf "%.1f", (b - a) * 100 / a}') ($ev)"
done
