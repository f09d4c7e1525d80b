#!/bin/bash
# put_ab_go.sh - 100-client put (ebench, etcd's Go client) A/B between two cetcd
# binaries, alternating: qps, p99 and the server's CPU per put.
# usage: bench/put_ab_go.sh OLD_BIN NEW_BIN (EBENCH: ebench, default /tmp/eb/ebench; ETCDCTL)
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. "$(dirname "$0")/single_common.sh"
W=$(mktemp -d /tmp/cetcd-putab.XXXXXX)
run() {
  rm -rf $W/data
  start m "$2" "$W"
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  r=$("$EBENCH" --endpoints $ep --op put --conns 10 --clients 100 --total 40000 --key-space-size 100000 --val-size 256 --json)
  t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null
  echo "$1 cpu_us_per_put=$(( (t1-t0)*10000/40000 )) $(echo "$r" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("qps=%.0f p99=%.1f" % (d["qps"], d["p99_ms"]))')"
}
for i in 1 2; do
  run old "$1"
  run new "$2"
done
rm -rf "$W"
