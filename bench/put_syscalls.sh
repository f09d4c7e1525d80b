#!/bin/bash
# put_syscalls.sh - system calls and context switches per put of a fresh
# single member under ebench (etcd's Go client), counted by perf's
# syscall tracepoints on the member's process.
# usage: bench/put_syscalls.sh BIN CLIENTS CONNS   (N puts, default 20000;
#   EBENCH, default /tmp/eb/ebench; ETCDCTL).  Needs perf and tracefs.
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. "$(dirname "$0")/single_common.sh"
W=$(mktemp -d /tmp/cetcd-sysc.XXXXXX)
start m "$1" "$W"
N=${N:-20000}
ev=context-switches
for s in read write readv writev pread64 pwrite64 pwritev recvfrom sendto \
         recvmsg sendmsg epoll_wait futex fdatasync fsync mmap munmap \
         mprotect madvise brk; do
    ev="$ev,syscalls:sys_enter_$s"
done
perf stat -x, -e "$ev" -p "$pid" -o "$W/stat" &
pp=$!
sleep 0.3
r=$("$EBENCH" --endpoints "$ep" --op put --conns "$3" --clients "$2" --total "$N" \
    --key-space-size 100000 --val-size 256 --json)
kill -INT "$pp"; wait "$pp"
echo "$r" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("qps=%.0f p99=%.1f ms" % (d["qps"], d["p99_ms"]))'
awk -F, -v n="$N" '$1 ~ /^[0-9]+$/ && $1 > 0 {sub("syscalls:sys_enter_", "", $3); printf "%-18s %7.3f per put\n", $3, $1 / n}' "$W/stat"
kill "$pid"; wait "$pid" 2>/dev/null; rm -rf "$W"
