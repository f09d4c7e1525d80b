#!/bin/bash
# mem1m.sh NAME BIN - the memory and crash-restart goals: load 1M keys
# (16 B keys, 64 B values) into a single member with cetcd-bench, report the
# server's RSS, kill -9 it, restart it on the same data dir and time until a
# linearizable Range answers.  Run it for cetcd and for etcd 3.4.23:
#   bash bench/mem1m.sh cetcd build/cetcd; bash bench/mem1m.sh etcd /usr/bin/etcd
set -u
NAME=$1; BIN=$2; D=/tmp/m1m-$NAME; rm -rf $D; mkdir -p $D
B=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/src/bench/cetcd-bench}
# PORT and PEER_PORT pick the ports (defaults 45379 and 45380).
PORT=${PORT:-45379}; PEER_PORT=${PEER_PORT:-45380}
EP=127.0.0.1:$PORT
start() { $BIN --name m --data-dir $D/data --listen-client-urls http://$EP --advertise-client-urls http://$EP --listen-peer-urls http://127.0.0.1:$PEER_PORT --initial-advertise-peer-urls http://127.0.0.1:$PEER_PORT --initial-cluster m=http://127.0.0.1:$PEER_PORT >> $D/log 2>&1 & echo $!; }
P=$(start); sleep 2
$B --endpoints $EP --conns 10 --clients 200 put --total 1000000 --key-size 16 --val-size 64 --key-space-size 1000000 --sequential-keys 2>&1 | grep RESULT | cut -c1-120
sleep 3
echo "$NAME rss_kb=$(awk '/VmRSS/{print $2}' /proc/$P/status) hwm_kb=$(awk '/VmHWM/{print $2}' /proc/$P/status)"
echo "$NAME rss_anon_kb=$(awk '/RssAnon/{print $2}' /proc/$P/status) rss_file_kb=$(awk '/RssFile/{print $2}' /proc/$P/status)"
ETCDCTL_API=3 etcdctl --endpoints $EP get "\x00" --from-key --count-only -w fields 2>/dev/null | grep Count
kill -9 $P; sleep 1
# The probe imports its modules first (a quarter second of Python start-up
# that is not the server's), then starts the server and times it.
P=$(/usr/bin/python3 - $EP "$D/log" "$D/restart" $BIN --name m --data-dir $D/data \
    --listen-client-urls http://$EP --advertise-client-urls http://$EP \
    --listen-peer-urls http://127.0.0.1:$PEER_PORT \
    --initial-advertise-peer-urls http://127.0.0.1:$PEER_PORT \
    --initial-cluster m=http://127.0.0.1:$PEER_PORT <<'PY'
import grpc, subprocess, sys, time
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
ep, log, out, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
t0 = time.monotonic()
p = subprocess.Popen(argv, stdout=open(log, "a"), stderr=subprocess.STDOUT,
                     start_new_session=True)
while True:
    ch = grpc.insecure_channel(ep)
    try:
        rpc_pb2_grpc.KVStub(ch).Range(rpc_pb2.RangeRequest(key=b"foo"), timeout=0.2)
        break
    except grpc.RpcError:
        time.sleep(0.005)
    finally:
        ch.close()
open(out, "w").write("%.3f" % (time.monotonic() - t0))
print(p.pid)
PY
)
echo "$NAME restart_to_serving_s=$(cat $D/restart)"
sleep 1; echo "$NAME rss_after_restart_kb=$(awk '/VmRSS/{print $2}' /proc/$P/status)"
du -sh $D/data
kill $P
while kill -0 $P 2>/dev/null; do sleep 0.1; done
