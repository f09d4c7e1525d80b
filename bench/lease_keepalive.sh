#!/bin/bash
# lease_keepalive.sh - renewals per second, cetcd against etcd 3.4.23 in the
# same run: cetcd-bench lease-keepalive (as etcd's benchmark: each client
# grants one lease, then KeepAliveOnce per request) at 100 clients (10
# connections) and 1000 clients (100 connections), a fresh single member
# per measurement, ROUNDS rounds with the servers' order alternating (the
# machine is shared: read the spread, not one number).
# usage: bench/lease_keepalive.sh [WORKDIR]; environment: see
#   watch_common.sh, ROUNDS (3), TOTAL (renewals per run, 20000),
#   BENCH_CLIENT=go: load with etcd's own Go client instead (ebench
#   --op lease-keepalive, clientv3 + grpc-go: KeepAliveOnce per request on
#   a lease each client granted; EBENCH = its binary, default
#   /tmp/eb/ebench, built by ../shared/tools/ebench/build.sh).
set -u
. "$(dirname "$0")/watch_common.sh"
WORK=${1:-$(mktemp -d /tmp/cetcd-leaseka.XXXXXX)}
ROUNDS=${ROUNDS:-3}; TOTAL=${TOTAL:-20000}
# a field of ebench's --json line
jfield() { /usr/bin/python3 -c 'import json,sys
for l in sys.stdin:
    if l.startswith("{"): print(json.loads(l).get(sys.argv[1]))' "$1"; }

for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="etcd cetcd"; else order="cetcd etcd"; fi
    for name in $order; do
        for clients in 100 1000; do
            server_start "$name" "r$r-c$clients" || exit 1
            out=$WORK/$name-r$r-c$clients.out
            if [ "${BENCH_CLIENT:-}" = go ]; then
                t0=$(cpu_ticks "$SPID")
                "${EBENCH:-/tmp/eb/ebench}" --endpoints "$EP" \
                    --op lease-keepalive --lease-ttl 100 \
                    --conns $((clients / 10)) --clients "$clients" \
                    --total "$TOTAL" --json > "$out" 2>&1
                t1=$(cpu_ticks "$SPID")
                server_stop
                # the server's CPU per renewal (the grants and revokes of
                # the clients' leases included), microseconds
                cpu_us=$(( (t1 - t0) * 1000000 / $(getconf CLK_TCK) / TOTAL ))
                echo "round=$r server=$name clients=$clients client=go" \
                     "qps=$(jfield qps < "$out")" \
                     "p99_ms=$(jfield p99_ms < "$out")" \
                     "errors=$(jfield errors < "$out")" \
                     "server_cpu_us_per_renewal=$cpu_us"
                continue
            fi
            "$B" --endpoints "$EP" --conns $((clients / 10)) \
                --clients "$clients" --total "$TOTAL" lease-keepalive \
                > "$out" 2>&1
            server_stop
            echo "round=$r server=$name clients=$clients" \
                 "qps=$(result qps lease-keepalive < "$out")" \
                 "p99_ms=$(result p99_ms lease-keepalive < "$out")" \
                 "errors=$(result errors lease-keepalive < "$out")"
        done
    done
done
