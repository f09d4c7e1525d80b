#!/bin/bash
# watch_put_go.sh - watch_put.sh with etcd's Go client (ebench,
# ../shared/tools/ebench): put throughput at 100 clients over 10
# connections with 0 watchers and with 10k watchers on the written prefix
# (100 streams x 100 watchers, every put reaching all of them), cetcd and
# etcd 3.4.23 in the same run, a fresh member each time.  CPU per put is
# the server's utime+stime over the ebench run divided by the puts (with
# watchers: the delivery of every event included).
# usage: bench/watch_put_go.sh [WORKDIR]; environment: see watch_common.sh,
#   EBENCH (default /tmp/eb/ebench), PUTS0 (puts without watchers, 20000),
#   PUTSW (with watchers, 1000), ROUNDS (default 1).
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-watchputgo.XXXXXX)}
EBENCH=${EBENCH:-/tmp/eb/ebench}
PUTS0=${PUTS0:-20000}; PUTSW=${PUTSW:-1000}; ROUNDS=${ROUNDS:-1}
HZ=$(getconf CLK_TCK)
mkdir -p "$WORK"

# run NAME TAG ARGS...: one ebench run on a fresh member; prints
# "put_qps cpu_us_per_put".
run() {
    local name=$1 tag=$2 total
    shift 2
    server_start "$name" "$tag" > /dev/null || exit 1
    local c0; c0=$(cpu_ticks "$SPID")
    "$EBENCH" --endpoints "$EP" --conns 10 --clients 100 --val-size 32 "$@" \
        > "$WORK/$name-$tag.out" 2>&1
    local c1; c1=$(cpu_ticks "$SPID")
    server_stop
    total=$(awk '$1 == "puts" || $1 == "put" {print $2; exit}' "$WORK/$name-$tag.out")
    awk -v t="${total:-0}" -v c=$((c1 - c0)) -v hz="$HZ" \
        '$1 == "puts" || $1 == "put" {q = $6} END {printf "%s %d", q, t ? c * 1000000 / hz / t : 0}' \
        "$WORK/$name-$tag.out"
}

for round in $(seq "$ROUNDS"); do
    for name in $SERVERS; do
        read -r q0 cpu0 <<< "$(run "$name" "g0-$round" --op put --total "$PUTS0")"
        read -r qw cpuw <<< "$(run "$name" "g10k-$round" --op watch \
            --watchers 10000 --watch-streams 100 --total "$PUTSW")"
        ev=$(awk '$1 == "events" {print $3 "/" $2, "in", $5 "s"}' "$WORK/$name-g10k-$round.out")
        echo "round $round $name put_qps_0w=$q0 cpu_us_per_put_0w=$cpu0" \
             "put_qps_10kw=$qw cpu_us_per_put_10kw=$cpuw change_pct=$(awk -v a="$q0" -v b="$qw" \
             'BEGIN{printf "%.1f", (b - a) * 100 / a}') events=$ev"
    done
done
