# watch_common.sh - sourced by bench/watch_*.sh: start one fresh single
# member of cetcd or etcd 3.4.23 on fixed ports, read its RSS and CPU time,
# stop it.  Every server gets a fresh data dir under $WORK.
# environment: CETCD_BIN (default build/cetcd), ETCD_BIN (default
#   /usr/bin/etcd), BENCH_BIN (default build/src/bench/cetcd-bench),
#   PORT (client port, default 46379; the peer port is PORT+1),
#   SERVERS (the servers to measure, in order, default "etcd cetcd"; the
#   name "base" is a second cetcd binary, BASE_BIN, for before/after runs).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CETCD_BIN=${CETCD_BIN:-$ROOT/build/cetcd}
ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}
B=${BENCH_BIN:-$ROOT/build/src/bench/cetcd-bench}
PORT=${PORT:-46379}
EP=127.0.0.1:$PORT
PEER=http://127.0.0.1:$((PORT + 1))

# server_bin NAME prints the binary of cetcd or etcd.
SERVERS=${SERVERS:-etcd cetcd}
server_bin() {
    case "$1" in
    cetcd) echo "$CETCD_BIN" ;;
    base) echo "${BASE_BIN:?BASE_BIN names the base cetcd binary}" ;;
    *) echo "$ETCD_BIN" ;;
    esac
}

# server_start NAME TAG starts a fresh member, waits until it answers and
# sets SPID.
server_start() {
    local d=$WORK/$1-$2
    rm -rf "$d"; mkdir -p "$d"
    "$(server_bin "$1")" --name m --data-dir "$d/data" \
        --listen-client-urls "http://$EP" --advertise-client-urls "http://$EP" \
        --listen-peer-urls "$PEER" --initial-advertise-peer-urls "$PEER" \
        --initial-cluster "m=$PEER" > "$d/log" 2>&1 &
    SPID=$!
    for _ in $(seq 100); do
        ETCDCTL_API=3 etcdctl --endpoints "$EP" --dial-timeout 1s get x \
            > /dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "server $1 did not start, see $d/log" >&2
    return 1
}

server_stop() { kill "$SPID"; while kill -0 "$SPID" 2>/dev/null; do sleep 0.1; done; }

# rss_kb PID, cpu_ticks PID (utime + stime, in clock ticks).
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# result FIELD OP reads FIELD of the "RESULT op=OP" line on stdin.
result() { grep "^RESULT op=$2 " | tr ' ' '\n' | awk -F= -v f="$1" '$1 == f {print $2}'; }
