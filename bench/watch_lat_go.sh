#!/bin/bash
# watch_lat_go.sh - watch_lat.sh's measurement with etcd's Go client
# (ebench, clientv3 + grpc-go: what the goals are judged on): event
# delivery latency (put sent -> event received) of WATCHERS watchers over
# STREAMS streams on one key while 10 clients put TOTAL values at RATE
# puts/s; etcd 3.4.23 and cetcd in the same run, a fresh member each,
# ROUNDS rounds alternating.
# usage: bench/watch_lat_go.sh [WORKDIR]; environment: see watch_common.sh,
#   EBENCH (/tmp/eb/ebench), TOTAL (10000), RATE (1000), WATCHERS (100),
#   STREAMS (10), ROUNDS (2).
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-watchgo.XXXXXX)}
EBENCH=${EBENCH:-/tmp/eb/ebench}
TOTAL=${TOTAL:-10000}; RATE=${RATE:-1000}; WATCHERS=${WATCHERS:-100}
STREAMS=${STREAMS:-10}; ROUNDS=${ROUNDS:-2}

for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        server_start "$name" "go$round" || exit 1
        "$EBENCH" --endpoints "$EP" --op watch --watchers "$WATCHERS" \
            --watch-streams "$STREAMS" --conns 10 --clients 10 \
            --rate "$RATE" --total "$TOTAL" --val-size 256 \
            > "$WORK/$name.$round.out" 2>&1
        server_stop
        echo "round $round $name:"
        grep -E "^ *(puts|events) " "$WORK/$name.$round.out"
    done
done
