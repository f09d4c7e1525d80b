#!/usr/bin/env bash
# auth.sh - the cost of auth per request (issue 19): put and range
# throughput on etcd 3.4.23 and cetcd in the same run, each with auth off,
# with auth on and a simple token, and with auth on and a JWT (RS256, a
# 2048-bit key made here with openssl).  Prints a markdown table for
# docs/BENCHMARKS.md.
#
# Load: cetcd-bench (gRPC C core client) with --token, the token got once
# by an Authenticate as root (a python3 gRPC call), so the timed requests
# carry a token and are checked (simple: a table lookup; JWT: an RS256
# signature check on each request) but none re-authenticates.
#
# usage: bench/auth.sh [WORKDIR]       (default: a fresh dir in /tmp)
# environment:
#   CETCD_BIN  (default build/cetcd)  ETCD_BIN (default /usr/bin/etcd)
#   BENCH_BIN  (default build/src/bench/cetcd-bench)
#   TOTAL      requests per workload (default 20000)
#   CLIENTS    clients in flight (default 16), CONNS (default 4)
#   BENCH_CLIENT=go  load with etcd's own Go client instead (clientv3 3.4
#              logged in with --user root:PW: it authenticates at dial and
#              sends its token with each request): bench/authbench, built
#              by bench/authbench/build.sh into build/authbench/ (GO_BENCH
#              overrides the binary)
# A shared 2-core machine makes the numbers noisy: compare the ratios of
# one run, not absolute numbers across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${1:-$(mktemp -d /tmp/cetcd-authbench.XXXXXX)}
mkdir -p "$WORK"
CETCD_BIN=${CETCD_BIN:-$ROOT/build/cetcd}
ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}
BENCH_BIN=${BENCH_BIN:-$ROOT/build/src/bench/cetcd-bench}
TOTAL=${TOTAL:-20000}
CLIENTS=${CLIENTS:-16}
CONNS=${CONNS:-4}
PW=bench-root-pw

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
    -out "$WORK/jwt.pem" 2>/dev/null
openssl pkey -in "$WORK/jwt.pem" -pubout -out "$WORK/jwt.pub"
JWT="jwt,sign-method=RS256,pub-key=$WORK/jwt.pub,priv-key=$WORK/jwt.pem,ttl=1h"

port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# token EP: Authenticate as root over gRPC; prints the token.
token() {
    /usr/bin/python3 - "$1" "$PW" <<'EOF'
import sys, grpc
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
ch = grpc.insecure_channel(sys.argv[1])
print(rpc_pb2_grpc.AuthStub(ch).Authenticate(rpc_pb2.AuthenticateRequest(
    name="root", password=sys.argv[2]), timeout=30).token)
EOF
}

# one BIN NAME MODE: start, (enable auth), put then range; prints rows.
one() {
    local bin=$1 name=$2 mode=$3 opt=simple
    [ "$mode" = jwt ] && opt=$JWT
    local cp pp dir=$WORK/$name-$mode
    cp=$(port); pp=$(port)
    rm -rf "$dir"
    "$bin" --name m --data-dir "$dir" --auth-token "$opt" \
        --bcrypt-cost 4 \
        --listen-client-urls "http://127.0.0.1:$cp" \
        --advertise-client-urls "http://127.0.0.1:$cp" \
        --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "m=http://127.0.0.1:$pp" >"$dir.log" 2>&1 &
    local pid=$!
    local ep=127.0.0.1:$cp
    local ctl="etcdctl --endpoints $ep"
    for _ in $(seq 100); do
        ETCDCTL_API=3 $ctl endpoint health >/dev/null 2>&1 && break
        sleep 0.2
    done
    ETCDCTL_API=3 $ctl put bench-k v >/dev/null # what range reads
    local tokarg=()
    if [ "$mode" != off ]; then
        ETCDCTL_API=3 $ctl user add "root:$PW" >/dev/null
        ETCDCTL_API=3 $ctl user grant-role root root >/dev/null
        ETCDCTL_API=3 $ctl auth enable >/dev/null
        tokarg=(--token "$(token "$ep")")
    fi
    for op in put range; do
        local r
        if [ "${BENCH_CLIENT:-}" = go ]; then
            local user=()
            [ "$mode" != off ] && user=(--user "root:$PW")
            r=$("${GO_BENCH:-$ROOT/build/authbench/authbench}" \
                --endpoints "$ep" --conns "$CONNS" --clients "$CLIENTS" \
                --total "$TOTAL" "${user[@]}" $op | grep '^RESULT')
        else
            local args=(put --key-size 8 --val-size 256 --key-space-size 100000)
            [ $op = range ] && args=(range bench-k --consistency s)
            r=$("$BENCH_BIN" --endpoints "$ep" --conns "$CONNS" \
                --clients "$CLIENTS" --total "$TOTAL" "${tokarg[@]}" \
                "${args[@]}" | grep '^RESULT')
        fi
        local qps p99 err
        qps=$(sed -n 's/.* qps=\([0-9.]*\).*/\1/p' <<<"$r")
        p99=$(sed -n 's/.* p99_ms=\([0-9.]*\).*/\1/p' <<<"$r")
        err=$(sed -n 's/.* errors=\([0-9]*\).*/\1/p' <<<"$r")
        echo "| $op | $name | $mode | $qps | $p99 | $err |"
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

echo "| op | server | auth | qps | p99 ms | errors |"
echo "|---|---|---|---|---|---|"
for mode in off simple jwt; do
    one "$ETCD_BIN" etcd "$mode"
    one "$CETCD_BIN" cetcd "$mode"
done
