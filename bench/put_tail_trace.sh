#!/bin/bash
# put_tail_trace.sh - where the slow puts of one serial client go: a fresh
# member, 2000 warm-up puts, then N puts (ebench, 1 client, value 256 B,
# random keys of 100 000) while `perf record` traces the member's syscalls,
# scheduler switches and page faults; put_tail_trace.py then splits the
# server's time per put (the read of a request to the write of its reply
# on the client's connection) and, for each put over THRESHOLD_MS, lists
# the member's system calls longer than 0.15 ms that overlap it, and
# compares the WAL's fdatasync with and without the pins' writeback
# (cetcd-snap) in flight.  docs/BENCHMARKS.md session 24.
# usage: bench/put_tail_trace.sh [BIN] [N] [THRESHOLD_MS]
#   environment: EBENCH (default /tmp/eb/ebench), ETCDCTL, WORK (a dir)
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-build/cetcd}; N=${2:-8000}; THR=${3:-1.2}
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. bench/single_common.sh
WORK=${WORK:-$(mktemp -d /tmp/cetcd-puttail.XXXXXX)}
start m "$BIN" "$WORK"
"$EBENCH" --endpoints "$ep" --op put --total 2000 --val-size 256 \
    --key-space-size 100000 >/dev/null
perf record -q -e sched:sched_switch -e sched:sched_wakeup \
    -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit \
    -e exceptions:page_fault_user -p "$pid" -o "$WORK/perf.data" \
    2>/dev/null &
rec=$!
sleep 1
"$EBENCH" --endpoints "$ep" --op put --total "$N" --val-size 256 \
    --key-space-size 100000 --md-row
sleep 0.5
kill -INT "$rec"; wait "$rec" || true
kill "$pid"; wait "$pid" 2>/dev/null || true
perf script -i "$WORK/perf.data" -F tid,comm,time,event,trace 2>/dev/null \
    >"$WORK/script.txt"
/usr/bin/python3 bench/put_tail_trace.py "$WORK/script.txt" "$THR"
echo "trace: $WORK"
