#!/bin/bash
# snapdisk.sh NAME BIN - the data dir's size against the store's, with many
# raft snapshots, and the puts around them.  A single member with a small
# --snapshot-count (SNAP_COUNT, default 10000) gets KEYS keys (default 65536)
# of VAL bytes (default 1000), then the same keys again (two revisions of
# each: a ~170 MB store).  Printed: cetcd-bench's RESULT line of each pass (throughput, p50/p99/p99.9/max latency), then du of the
# store (member/db), the snapshot dir (member/snap), the WAL and the whole
# data dir, and the store's size in use (Status.dbSizeInUse).
# Compare a build before and after a change on the same machine:
#   bash bench/snapdisk.sh new build/cetcd
#   bash bench/snapdisk.sh old /tmp/old/build/cetcd
set -u
NAME=$1; BIN=$2; D=/tmp/snapdisk-$NAME; rm -rf $D; mkdir -p $D
B=${BENCH_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/src/bench/cetcd-bench}
KEYS=${KEYS:-65536}; VAL=${VAL:-1000}; SNAP_COUNT=${SNAP_COUNT:-10000}
EP=127.0.0.1:46379; PEER=http://127.0.0.1:46380
$BIN --name m --data-dir $D/data --snapshot-count $SNAP_COUNT \
    --listen-client-urls http://$EP --advertise-client-urls http://$EP \
    --listen-peer-urls $PEER --initial-advertise-peer-urls $PEER \
    --initial-cluster m=$PEER >> $D/log 2>&1 &
P=$!; sleep 2
for pass in 1 2; do
    echo -n "$NAME pass$pass "
    $B --endpoints $EP --conns 4 --clients 32 put --total $KEYS \
        --key-size 16 --val-size $VAL --key-space-size $KEYS \
        --sequential-keys 2>&1 | grep RESULT | cut -c1-200
done
sleep 3
M=$D/data/member
status=$(ETCDCTL_API=3 etcdctl --endpoints $EP endpoint status -w json)
in_use=$(echo "$status" | /usr/bin/python3 -c 'import json,sys; h=json.load(sys.stdin)[0]["Status"]; print(h.get("dbSizeInUse", h.get("dbSize")))')
echo "$NAME store_in_use_bytes=$in_use snapshots_logged=$(grep -c 'saved snapshot' $D/log)"
for d in $M/db $M/snap $M/wal $D/data; do
    echo "$NAME du_kb $(du -sk $d | cut -f1) $d"
done
echo "$NAME ratio_data_dir_to_in_use=$(echo "$(du -sk $D/data | cut -f1) $in_use" | awk '{printf "%.2f", $1*1024/$2}') (du's blocks: preallocated ones count)"
ls -la $M/snap
kill $P
while kill -0 $P 2>/dev/null; do sleep 0.1; done
