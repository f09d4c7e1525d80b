#!/bin/bash
# watch_longlink.sh - a Watch beside Puts on one connection over a long
# link: bench/delay_proxy.py adds DELAY ms one way (default 10: a 20 ms
# round trip) between etcd's Go client (ebench) and the server; 10 watchers
# on one stream and 50 put clients share the one connection, 2000 puts of
# 8 KiB, so 20 000 events (160 MB) cross the link.  Shows whether the
# member's background budget (rpc/stream.c) caps a Watch at a budget per
# round trip.  cetcd and etcd 3.4.23 in the same run, fresh members.
# usage: bench/watch_longlink.sh [WORKDIR]; environment: see
#   watch_common.sh, EBENCH (default /tmp/eb/ebench), DELAY (ms), ROUNDS.
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-longlink.XXXXXX)}
EBENCH=${EBENCH:-/tmp/eb/ebench}
DELAY=${DELAY:-10}; ROUNDS=${ROUNDS:-1}
LPORT=$((PORT + 2))
mkdir -p "$WORK"

for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        server_start "$name" "ll$round" > /dev/null || exit 1
        /usr/bin/python3 "$ROOT/bench/delay_proxy.py" "$LPORT" "$PORT" "$DELAY" &
        pp=$!
        sleep 0.5
        "$EBENCH" --endpoints "127.0.0.1:$LPORT" --op watch --watchers 10 \
            --watch-streams 1 --conns 1 --clients 50 --total 2000 \
            --val-size 8192 --watch-wait 60s > "$WORK/$name.$round.out" 2>&1
        kill "$pp"; wait "$pp" 2>/dev/null
        server_stop
        awk -v r="$round" -v n="$name" \
            '$1 == "events" {printf "round %s %-6s events %s in %s s (%s/s) p50 %s ms; ", r, n, $3, $5, $6, $8}
             $1 == "puts" {printf "puts %s/s p50 %s p99 %s ms\n", $6, $8, $10}' \
            "$WORK/$name.$round.out"
    done
done
