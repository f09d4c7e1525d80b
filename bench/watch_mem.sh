#!/bin/bash
# watch_mem.sh - the server memory a watcher and a watch stream cost, cetcd
# and etcd 3.4.23 in the same run.  Method: per server and case a fresh
# member; RSS after start, then cetcd-bench watch opens 1000 streams (over 10
# connections) with 100 watchers each (100k watchers) or 1 each (1000), holds
# them (--watch-hold) and the server's RSS is read 3 s after the last
# created response.  Per stream = (RSS(1000x1) - RSS0) / 1000; per watcher
# = (RSS(1000x100) - RSS(1000x1)) / 99000.
# usage: bench/watch_mem.sh [WORKDIR]; environment: see watch_common.sh,
#   STREAMS (1000), WPS (100).
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-watchmem.XXXXXX)}
STREAMS=${STREAMS:-1000}; WPS=${WPS:-100}

# probe NAME WPS prints "RSS0 RSS_WITH_WATCHERS" in KB.
probe() {
    local out=$WORK/$1-w$2.out rss0 rss1 bp
    server_start "$1" "w$2" || return 1
    sleep 1; rss0=$(rss_kb "$SPID")
    "$B" --endpoints "$EP" --conns 10 --clients 10 --threads 2 watch \
        --streams "$STREAMS" --watch-per-stream "$2" --put-total 1 \
        --watch-hold 8 > "$out" 2>&1 &
    bp=$!
    for _ in $(seq 1200); do grep -qs "WATCHERS CREATED" "$out" && break; sleep 0.1; done
    sleep 3; rss1=$(rss_kb "$SPID")
    wait "$bp"
    server_stop
    echo "$rss0 $rss1"
}

for name in $SERVERS; do
    read -r a0 a1 < <(probe "$name" 1)
    read -r b0 b1 < <(probe "$name" "$WPS")
    per_stream=$(( (a1 - a0) * 1024 / STREAMS ))
    per_watcher=$(( (b1 - a1) * 1024 / (STREAMS * (WPS - 1)) ))
    echo "$name rss0_kb=$a0 rss_${STREAMS}x1_kb=$a1 rss0b_kb=$b0" \
         "rss_${STREAMS}x${WPS}_kb=$b1 per_stream_B=$per_stream" \
         "per_watcher_B=$per_watcher"
done
