#!/bin/bash
# put_cpu_split.sh - who uses the cores during a put load: the server's CPU
# per put (/proc/PID/stat) and the load generator's (ebench, etcd's Go
# client, under /usr/bin/time), on a fresh single member.
# usage: bench/put_cpu_split.sh BIN CLIENTS CONNS   (N: 40000 puts; EBENCH,
#   ETCDCTL)
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. "$(dirname "$0")/single_common.sh"
W=$(mktemp -d /tmp/cetcd-cpu.XXXXXX)
start m "$1" "$W"
N=${N:-40000}
t0=$(awk '{print $14+$15}' /proc/$pid/stat)
/usr/bin/time -o $W/time -f "%U %S %e" "$EBENCH" --endpoints $ep --op put --conns $3 --clients $2 --total $N --key-space-size 100000 --val-size 256 --json > $W/r.json
t1=$(awk '{print $14+$15}' /proc/$pid/stat)
read u s e < $W/time
python3 -c "
import json; d=json.load(open('$W/r.json'))
print('$(basename $1) c=$2 qps=%.0f p99=%.1f server_us/put=%.1f client_us/put=%.1f server_cores=%.2f client_cores=%.2f' % (d['qps'], d['p99_ms'], ($t1-$t0)*1e4/$N, ($u+$s)*1e6/$N, ($t1-$t0)/100/$e, ($u+$s)/$e))"
kill $pid; wait $pid 2>/dev/null; rm -rf $W
