#!/bin/bash
# put_ab_go.sh - 100-client put (ebench, etcd's Go client) A/B between two cetcd
# binaries, alternating: qps, p99 and the server's CPU per put.
# usage: bench/put_ab_go.sh OLD_BIN NEW_BIN (EBENCH: ebench, default /tmp/eb/ebench)
W=$(mktemp -d /tmp/cetcd-putab.XXXXXX)
run() {
  rm -rf $W/d
  P=$(python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"); PP=$(python3 -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
  $2 --data-dir $W/d --listen-client-urls http://127.0.0.1:$P --advertise-client-urls http://127.0.0.1:$P --listen-peer-urls http://127.0.0.1:$PP --initial-advertise-peer-urls http://127.0.0.1:$PP --initial-cluster default=http://127.0.0.1:$PP > $W/log 2>&1 & SP=$!
  sleep 1
  t0=$(awk '{print $14+$15}' /proc/$SP/stat)
  r=$(${EBENCH:-/tmp/eb/ebench} --endpoints 127.0.0.1:$P --op put --conns 10 --clients 100 --total 40000 --key-space-size 100000 --val-size 256 --json)
  t1=$(awk '{print $14+$15}' /proc/$SP/stat)
  kill $SP; wait $SP 2>/dev/null
  echo "$1 cpu_us_per_put=$(( (t1-t0)*10000/40000 )) $(echo "$r" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("qps=%.0f p99=%.1f" % (d["qps"], d["p99_ms"]))')"
}
for i in 1 2; do
  run old "$1"
  run new "$2"
done
