#!/bin/bash
# watch_lat.sh - event delivery latency (put sent -> event received by each
# watcher) under a steady 1000 puts/s: cetcd-bench watch-latency, 10 streams
# x 10 watchers on one key, TOTAL puts at --put-rate 1000 from 10 clients,
# cetcd and etcd 3.4.23 in the same run, a fresh member each.
# usage: bench/watch_lat.sh [WORKDIR]; environment: see watch_common.sh,
#   TOTAL (10000 puts), RATE (1000), STREAMS (10), WPS (10).
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-watchlat.XXXXXX)}
TOTAL=${TOTAL:-10000}; RATE=${RATE:-1000}; STREAMS=${STREAMS:-10}; WPS=${WPS:-10}

for name in $SERVERS; do
    server_start "$name" lat || exit 1
    "$B" --endpoints "$EP" --conns 10 --clients 10 watch-latency \
        --streams "$STREAMS" --watchers-per-stream "$WPS" --total "$TOTAL" \
        --put-rate "$RATE" > "$WORK/$name.out" 2>&1
    server_stop
    out=$WORK/$name.out
    echo "$name events=$(result ok watch-latency < "$out")" \
         "missing=$(result errors watch-latency < "$out")" \
         "put_qps=$(result qps watch-put < "$out")" \
         "p50_ms=$(result p50_ms watch-latency < "$out")" \
         "p99_ms=$(result p99_ms watch-latency < "$out")" \
         "p999_ms=$(result p999_ms watch-latency < "$out")" \
         "max_ms=$(result max_ms watch-latency < "$out")"
done
