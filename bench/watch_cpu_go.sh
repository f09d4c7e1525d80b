#!/bin/bash
# watch_cpu_go.sh - watch_lat_go.sh's run (etcd's Go client, ebench: 10
# clients put TOTAL values at RATE puts/s while WATCHERS watchers over
# STREAMS streams watch the prefix) with what each run cost: one line per
# server and round with the event delivery latency (p50, p99, max ms), the
# put p99, the server's CPU seconds (/proc/PID/stat) and the client's user
# and system CPU seconds.  Servers alternate in each round (SERVERS, e.g.
# "etcd base cetcd" with BASE_BIN for a before/after), fresh data dirs.
# usage: bench/watch_cpu_go.sh [WORKDIR]; environment: see watch_common.sh,
#   EBENCH (/tmp/eb/ebench), TOTAL (10000), RATE (1000), WATCHERS (100),
#   STREAMS (10), ROUNDS (3).
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-watchcpu.XXXXXX)}
EBENCH=${EBENCH:-/tmp/eb/ebench}
TOTAL=${TOTAL:-10000}; RATE=${RATE:-1000}; WATCHERS=${WATCHERS:-100}
STREAMS=${STREAMS:-10}; ROUNDS=${ROUNDS:-3}
mkdir -p "$WORK"

for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        server_start "$name" "cpu$round" > /dev/null || exit 1
        c0=$(cpu_ticks "$SPID")
        /usr/bin/time -f "%U %S" -o "$WORK/$name.$round.time" "$EBENCH" \
            --endpoints "$EP" --op watch --watchers "$WATCHERS" \
            --watch-streams "$STREAMS" --conns 10 --clients 10 \
            --rate "$RATE" --total "$TOTAL" --val-size 256 \
            > "$WORK/$name.$round.out" 2>&1
        c1=$(cpu_ticks "$SPID")
        server_stop
        ev=$(awk '$1 == "events" {print $8, $10, $12}' "$WORK/$name.$round.out")
        pu=$(awk '$1 == "puts" {print $10}' "$WORK/$name.$round.out")
        printf "round %d %-6s events p50/p99/max ms %-22s put p99 %-7s server cpu %5.2f s client cpu (user sys) %s\n" \
            "$round" "$name" "$ev" "$pu" \
            "$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" \
            "$(cat "$WORK/$name.$round.time")"
    done
done
