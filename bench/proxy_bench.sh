#!/usr/bin/env bash
# proxy_bench.sh - the grpc-proxy mode under load: cetcd's
# `cetcd grpc-proxy start` against etcd 3.4.23's `etcd grpc-proxy start`,
# each in front of a fresh single member of its own kind, driven by ebench
# (etcd's official Go client, ../shared/tools/ebench) through the proxy.
# Prints a markdown table for docs/BENCHMARKS.md.
#
# usage: bench/proxy_bench.sh [WORKDIR]     (default: a fresh dir in /tmp)
# environment:
#   CETCD_BIN   cetcd binary (default build/cetcd; if missing, etcd only)
#   ETCD_BIN    etcd binary (default /usr/bin/etcd)
#   ETCDCTL     etcdctl (default /usr/bin/etcdctl), to wait for readiness
#   EBENCH_BIN  ebench (default: built into WORKDIR/eb with
#               ../shared/tools/ebench/build.sh)
#   TOTAL       requests of a 100-client workload (default 10000); the
#               1-client workloads do TOTAL/10; the watch workloads do
#               TOTAL/10 puts (see below)
#   SCALE       multiplies every total (default 1)
#   VAL_SIZE    put value size in bytes (default 256, as etcd's docs)
#   KEY_SPACE   put key space (default 100000)
#   MAX_SECONDS caps each ebench run's timed phase (default 30; ebench's
#               --duration; requests in flight still finish, within
#               ebench's 10 s request timeout).  Needed for etcd's lease
#               rows (see below), which would otherwise take minutes.  The
#               qps of a run that stopped on the cap is marked "*".
#   WATCH_RATE  caps the watch rows' puts per second (ebench --rate;
#               default 0, no cap).  Uncapped, puts can outrun delivery
#               and the watch p99 then includes the backlog; a cap (say
#               1000) measures latency at a load both proxies keep up with.
#   ONLY        run only the workloads whose name matches this extended
#               regex (e.g. ONLY='^(range-s|watch)')
#   ROUNDS      rounds (default 1).  Each round runs etcd's pair, then
#               cetcd's, on fresh data dirs; the table gives each figure's
#               median over the rounds and the range of the per-round qps
#               ratios, as bench/compare.sh does.
#
# Workloads, in this order (c1 = 1 client on 1 connection, c100 = 100
# clients on 10 connections; "T" = TOTAL x SCALE):
#   range-s-c1, range-s-c100   serializable Get of one of 1000 prefilled
#                              8-byte keys: all 1000 fit in the proxy's
#                              cache (etcd's LRU of 2048), so after the
#                              first miss per key the proxy answers alone
#   range-l-c1, range-l-c100   the same, linearizable: forwarded upstream
#   put-c1, put-c100           8-byte keys, VAL_SIZE values, KEY_SPACE keys
#   txn-put-c100               a txn of one put
#   lease-keepalive-c1, -c100  KeepAliveOnce (one LeaseKeepAlive stream
#                              each) on a lease per client.  etcd's proxy
#                              answers one only when its own clientv3
#                              lessor next sends a keep-alive for that
#                              lease: up to 500 ms (the lessor's tick), or
#                              TTL/3 = 10 s when the proxy still keeps
#                              the lease alive for an earlier stream
#                              (ebench: "context deadline exceeded").  That is
#                              etcd's behaviour, not a bench artefact.
#   watch-c1                   10 watchers on one stream, 1 client puts
#                              T/10 values under "w/": T events
#   watch-c100                 100 watchers over 10 streams, 100 clients
#                              put T/10 values: 10 x T events.  For watch
#                              rows, qps is events/s, p50/p99 the put-to-
#                              event latency, CPU is per event.
#   direct-range-l-c1, -c100,  baselines: ebench straight at the member,
#   direct-put-c1, -c100,      no proxy, so the proxy's own cost shows.
#   direct-watch-c100
# The 1-client workloads do T/10 requests.
#
# Per workload we record qps, p50 and p99 (ebench --json), the proxy's and
# the member's CPU time (utime+stime from /proc/PID/stat) over the run per
# successful request, and the proxy's RSS after the run; at the end of each
# kind, the proxy's peak RSS (VmHWM).  The disk's fdatasync latency (4 KiB
# append + fdatasync, x1000) is measured first in WORKDIR.  CPU covers the
# whole ebench run (dial, warm-up reads, lease grants), not only the timed
# phase, at the clock tick's resolution (10 ms: meaningless for tiny
# totals); the range keys are prefilled before the first measured run.
# Everything listens on free 127.0.0.1 ports; every process started here
# is stopped at exit.  ebench, the proxy and the member share the
# machine's cores: compare ratios, not absolute numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${1:-$(mktemp -d /tmp/cetcd-proxybench.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
TOTAL=${TOTAL:-10000}
SCALE=${SCALE:-1}
VAL_SIZE=${VAL_SIZE:-256}
KEY_SPACE=${KEY_SPACE:-100000}
ROUNDS=${ROUNDS:-1}
MAX_SECONDS=${MAX_SECONDS:-30}
ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}
CETCD_BIN=${CETCD_BIN:-$ROOT/build/cetcd}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
export ETCDCTL_API=3
EBENCH_BIN=${EBENCH_BIN:-}
if [ -z "$EBENCH_BIN" ]; then
    src="$ROOT/../shared/tools/ebench"
    [ -x "$src/build.sh" ] ||
        { echo "proxy_bench.sh: no ebench (set EBENCH_BIN)" >&2; exit 1; }
    bash "$src/build.sh" "$WORK/eb" >&2
    EBENCH_BIN=$WORK/eb/ebench
fi
CLK_TCK=$(getconf CLK_TCK)

# Totals: T for the 100-client runs, T/10 (at least 1) for the others.
T=$((TOTAL * SCALE))
T10=$((T / 10 > 0 ? T / 10 : 1))
PUT_FLAGS="--key-size 8 --val-size $VAL_SIZE --key-space-size $KEY_SPACE"
RANGE_FLAGS="--key-size 8 --key-space-size 1000 --prefill no"
WATCH_FLAGS="--rate ${WATCH_RATE:-0} --key-prefix w/ --key-size 16"
WATCH_FLAGS="$WATCH_FLAGS --val-size $VAL_SIZE --key-space-size $KEY_SPACE"

# name | target (proxy or member) | conns | clients | total | ebench flags
WORKLOADS=(
"range-s-c1|proxy|1|1|$T10|--op range --consistency s $RANGE_FLAGS"
"range-s-c100|proxy|10|100|$T|--op range --consistency s $RANGE_FLAGS"
"range-l-c1|proxy|1|1|$T10|--op range --consistency l $RANGE_FLAGS"
"range-l-c100|proxy|10|100|$T|--op range --consistency l $RANGE_FLAGS"
"put-c1|proxy|1|1|$T10|--op put $PUT_FLAGS"
"put-c100|proxy|10|100|$T|--op put $PUT_FLAGS"
"txn-put-c100|proxy|10|100|$T|--op txn-put --txn-ops 1 $PUT_FLAGS"
"lease-keepalive-c1|proxy|1|1|$T10|--op lease-keepalive"
"lease-keepalive-c100|proxy|10|100|$T|--op lease-keepalive"
"watch-c1|proxy|1|1|$T10|--op watch --watchers 10 $WATCH_FLAGS"
"watch-c100|proxy|10|100|$T10|--op watch --watchers 100 $WATCH_FLAGS"
"direct-range-l-c1|member|1|1|$T10|--op range --consistency l $RANGE_FLAGS"
"direct-range-l-c100|member|10|100|$T|--op range --consistency l $RANGE_FLAGS"
"direct-put-c1|member|1|1|$T10|--op put $PUT_FLAGS"
"direct-put-c100|member|10|100|$T|--op put $PUT_FLAGS"
"direct-watch-c100|member|10|100|$T10|--op watch --watchers 100 $WATCH_FLAGS"
)
if [ -n "${ONLY:-}" ]; then
    keep=()
    for w in "${WORKLOADS[@]}"; do
        [[ ${w%%|*} =~ $ONLY ]] && keep+=("$w")
    done
    WORKLOADS=("${keep[@]}")
fi
[ "${#WORKLOADS[@]}" -gt 0 ] ||
    { echo "proxy_bench.sh: ONLY='$ONLY' matches no workload" >&2; exit 1; }

# Every process this script starts, stopped at exit (by pid, each): the
# servers in PIDS, the running ebench in EB_PID.
PIDS=()
EB_PID=
stop_all() {
    local p
    for p in $EB_PID "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in $EB_PID "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
    EB_PID=
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# free_ports N: N distinct free 127.0.0.1 ports (all held open while they
# are picked, so they differ), one per line.
free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PY
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
alive() { [ -e "/proc/$1/stat" ] && kill -0 "$1" 2>/dev/null; }

# wait_ready EP PID LOG: waits up to 20 s for a Get through EP to succeed
# while PID lives; 1 if it does not.
wait_ready() {
    local ep=$1 pid=$2 log=$3
    for _ in $(seq 100); do
        alive "$pid" || break
        "$ETCDCTL" --endpoints "$ep" --dial-timeout 1s get x >/dev/null 2>&1 &&
            return 0
        sleep 0.2
    done
    echo "proxy_bench.sh: $ep did not come up, see $log" >&2
    return 1
}

# start_pair NAME BIN ROUND: a fresh member and a grpc-proxy of the same
# binary in front of it; sets MEMBER_EP, MEMBER_PID, PROXY_EP, PROXY_PID.
start_pair() {
    local name=$1 bin=$2 dir=$WORK/$1.r$3 ports cp pp xp
    rm -rf "$dir"
    mkdir -p "$dir"
    ports=$(free_ports 3)
    cp=$(sed -n 1p <<<"$ports"); pp=$(sed -n 2p <<<"$ports")
    xp=$(sed -n 3p <<<"$ports")
    MEMBER_EP=127.0.0.1:$cp
    PROXY_EP=127.0.0.1:$xp
    "$bin" --name m --data-dir "$dir/data" \
        --listen-client-urls "http://$MEMBER_EP" \
        --advertise-client-urls "http://$MEMBER_EP" \
        --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "m=http://127.0.0.1:$pp" >"$dir/member.log" 2>&1 &
    MEMBER_PID=$!
    PIDS+=("$MEMBER_PID")
    wait_ready "$MEMBER_EP" "$MEMBER_PID" "$dir/member.log" || return 1
    "$bin" grpc-proxy start --endpoints="$MEMBER_EP" \
        --listen-addr="$PROXY_EP" --data-dir="$dir/proxy" \
        >"$dir/proxy.log" 2>&1 &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    wait_ready "$PROXY_EP" "$PROXY_PID" "$dir/proxy.log"
}

# result_line FILE TOTAL: "qps p50 p99 ok errors capped" from ebench's
# JSON line (for watch: events/s, put-to-event latency, events received);
# capped is 1 if fewer than TOTAL requests (watch: puts) were sent, i.e.
# MAX_SECONDS ended the run.  Nothing if the run printed no JSON.
result_line() {
    python3 - "$1" "$2" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
if lines:
    r = json.loads(lines[-1])
    sent = r["total"]
    if r["op"] == "watch":
        puts = r["by_op"]["puts"]
        sent = puts["ok"] + puts["errors"]
    print(r["qps"], r["p50_ms"], r["p99_ms"], r["ok"], r["errors"],
          int(sent < int(sys.argv[2])))
PY
}

# run_one NAME ROUND WORKLOAD: one ebench run, appends a line to
# $WORK/NAME.rROUND.results:
#   workload qps p50_ms p99_ms proxy_cpu_us member_cpu_us proxy_rss_kb
#   errors capped(0/1)
run_one() {
    local name=$1 round=$2 w=$3 wname target conns clients total flags
    IFS='|' read -r wname target conns clients total flags <<<"$w"
    local ep=$PROXY_EP txt=$WORK/$name.r$round.$wname.txt p0 m0 p1 m1 res
    [ "$target" = proxy ] || ep=$MEMBER_EP
    p0=$(cpu_ticks "$PROXY_PID"); m0=$(cpu_ticks "$MEMBER_PID")
    # In the background, so that a signal stops the script at once.
    # shellcheck disable=SC2086
    "$EBENCH_BIN" --endpoints "$ep" --conns "$conns" --clients "$clients" \
        --total "$total" --duration "${MAX_SECONDS}s" --json $flags \
        >"$txt" 2>&1 &
    EB_PID=$!
    wait "$EB_PID" || true
    EB_PID=
    if ! alive "$PROXY_PID" || ! alive "$MEMBER_PID"; then
        echo "proxy_bench.sh: $name died during $wname" >&2
        return 1
    fi
    p1=$(cpu_ticks "$PROXY_PID"); m1=$(cpu_ticks "$MEMBER_PID")
    res=$(result_line "$txt" "$total")
    [ -n "$res" ] ||
        { echo "  $name $wname: failed (see $txt)" >&2; return 0; }
    # shellcheck disable=SC2086
    python3 - "$wname" "$p0" "$p1" "$m0" "$m1" "$CLK_TCK" \
        "$(rss_kb "$PROXY_PID")" $res \
        >>"$WORK/$name.r$round.results" <<'PY'
import sys
w, p0, p1, m0, m1, tck, rss, qps, p50, p99, ok, errors, capped = sys.argv[1:]
per = lambda a, b: (int(b) - int(a)) * 1e6 / int(tck) / max(1, int(ok))
print(w, qps, p50, p99, "%.1f" % per(p0, p1), "%.1f" % per(m0, m1), rss,
      errors, capped)
PY
    echo "  $name $wname: $(tail -1 "$WORK/$name.r$round.results")" >&2
}

# run_kind NAME BIN ROUND: every workload against one kind's pair.
run_kind() {
    local name=$1 bin=$2 round=$3 w
    : >"$WORK/$name.r$round.results"
    start_pair "$name" "$bin" "$round" || { stop_all; return 1; }
    # The 1000 range keys, written once straight to the member, before any
    # CPU is counted (the range runs say --prefill no).
    "$EBENCH_BIN" --endpoints "$MEMBER_EP" --op range --total 1 \
        --key-size 8 --key-space-size 1000 \
        >"$WORK/$name.r$round.prefill" 2>&1 ||
        { echo "proxy_bench.sh: $name prefill failed" >&2; stop_all; return 1; }
    for w in "${WORKLOADS[@]}"; do
        run_one "$name" "$round" "$w" || { stop_all; return 1; }
    done
    echo "proxy_peak_rss_kb $(hwm_kb "$PROXY_PID")" >"$WORK/$name.r$round.peak"
    stop_all
}

echo "== fdatasync latency in $WORK" >&2
python3 "$ROOT/bench/fsync_lat.py" "$WORK" 1000 | tee "$WORK/fsync.txt" >&2

HAVE_CETCD=0
[ -x "$CETCD_BIN" ] ||
    echo "== cetcd: $CETCD_BIN not found, measuring etcd only" >&2
for r in $(seq "$ROUNDS"); do
    echo "== round $r/$ROUNDS: etcd ($("$ETCD_BIN" --version | head -1))" >&2
    run_kind etcd "$ETCD_BIN" "$r" || true
    if [ -x "$CETCD_BIN" ]; then
        echo "== round $r/$ROUNDS: cetcd ($CETCD_BIN)" >&2
        run_kind cetcd "$CETCD_BIN" "$r" && HAVE_CETCD=1
    fi
done

python3 - "$WORK" "$HAVE_CETCD" "$ROUNDS" "$TOTAL" "$SCALE" "$VAL_SIZE" \
    "$MAX_SECONDS" "${WATCH_RATE:-0}" <<'PY'
import os, platform, statistics, sys, time
work, have, rounds = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
total, scale, val, max_s, watch_rate = sys.argv[4:9]
# Fields of a results line after the workload name.
QPS, P50, P99, PCPU, MCPU, RSS, ERR, CAPPED = range(8)

def load_round(name, r):
    res = {}
    p = os.path.join(work, "%s.r%d.results" % (name, r))
    if os.path.exists(p):
        for line in open(p):
            f = line.split()
            res[f[0]] = [float(x) for x in f[1:]]
    return res

runs = {k: [load_round(k, r) for r in range(1, rounds + 1)]
        for k in ("etcd", "cetcd")}
order = []
for k in runs:
    for run in runs[k]:
        order += [w for w in run if w not in order]

def med(kind, w, i):
    """Field i's median over the rounds that ran w (errors: the sum;
    capped: whether any round was)."""
    xs = [run[w][i] for run in runs[kind] if w in run]
    if not xs:
        return None
    if i == CAPPED:
        return max(xs)
    return sum(xs) if i == ERR else statistics.median(xs)

def ratios(w):
    out = []
    for a, b in zip(runs["etcd"], runs["cetcd"]):
        if w in a and w in b and a[w][QPS] > 0:
            out.append(b[w][QPS] / a[w][QPS])
    return out

def peak(kind):
    vals = []
    for r in range(1, rounds + 1):
        p = os.path.join(work, "%s.r%d.peak" % (kind, r))
        if os.path.exists(p):
            vals.append(int(open(p).read().split()[1]))
    return "%.1f MiB" % (max(vals) / 1024) if vals else "-"

def f(x, fmt):
    return "-" if x is None else fmt % x

def ratio(a, b):
    return "%.2f" % (b / a) if a and b is not None else "-"

print("### grpc-proxy: cetcd vs etcd 3.4.23 (%s, %d cores, %s)" % (
    time.strftime("%Y-%m-%d"), os.cpu_count(), platform.machine()))
fs = dict(kv.split("=") for kv in
          open(os.path.join(work, "fsync.txt")).read().split()[1:])
print()
print("Each proxy in front of a fresh single member of its own kind, load "
      "by ebench (clientv3) through the proxy; `direct-` rows go straight "
      "to the member. TOTAL=%s, SCALE=%s, values %s B. c1 = 1 client on 1 "
      "connection, c100 = 100 clients on 10 connections. Watch rows: "
      "events/s, put-to-event p99, CPU per event. fdatasync (4 KiB append "
      "+ fdatasync, x1000): p50 %s ms, p99 %s ms. Proxy peak RSS: etcd %s, "
      "cetcd %s. A qps marked * is of a run that MAX_SECONDS (%s s) "
      "stopped before its total. Watch puts per second: %s."
      % (total, scale, val, fs["p50_ms"], fs["p99_ms"], peak("etcd"),
         peak("cetcd") if have else "-", max_s,
         watch_rate if watch_rate != "0" else "uncapped"))
if not have:
    print()
    print("cetcd did not run: etcd only.")
if rounds > 1:
    print()
    print("Medians over %d rounds (each round: etcd, then cetcd, fresh data "
          "dirs); \"rounds\" gives the lowest and highest per-round qps "
          "ratio." % rounds)
print()
print("| workload | etcd qps | etcd p99 ms | etcd proxy CPU µs/req "
      "| etcd proxy RSS MiB | cetcd qps | cetcd p99 ms "
      "| cetcd proxy CPU µs/req | cetcd proxy RSS MiB | qps ratio |"
      + (" rounds |" if rounds > 1 else ""))
print("|" + "---|" * (10 + (rounds > 1)))
for w in order:
    direct = w.startswith("direct-")
    cells = [w]
    for k in ("etcd", "cetcd"):
        rss = med(k, w, RSS)
        star = "*" if med(k, w, CAPPED) else ""
        cells += [f(med(k, w, QPS), "%.0f") + star,
                  f(med(k, w, P99), "%.2f"),
                  "-" if direct else f(med(k, w, PCPU), "%.1f"),
                  "-" if direct else f(rss and rss / 1024, "%.1f")]
    cells.append(ratio(med("etcd", w, QPS), med("cetcd", w, QPS)))
    if rounds > 1:
        q = ratios(w)
        cells.append("%.2f-%.2f" % (min(q), max(q)) if q else "-")
    print("| " + " | ".join(cells) + " |")
print()
print("p50, the member's CPU, errors, and each kind's qps through the proxy "
      "over its qps straight at the member (where a `direct-` row exists):")
print()
print("| workload | etcd p50 ms | cetcd p50 ms | etcd member CPU µs/req "
      "| cetcd member CPU µs/req | etcd via proxy/direct qps "
      "| cetcd via proxy/direct qps | errors etcd | errors cetcd |")
print("|" + "---|" * 9)
for w in order:
    d = "direct-" + w
    cells = [w]
    cells += [f(med(k, w, P50), "%.3f") for k in ("etcd", "cetcd")]
    cells += [f(med(k, w, MCPU), "%.1f") for k in ("etcd", "cetcd")]
    cells += [ratio(med(k, d, QPS), med(k, w, QPS)) if d in order else ""
              for k in ("etcd", "cetcd")]
    cells += [f(med(k, w, ERR), "%d") for k in ("etcd", "cetcd")]
    print("| " + " | ".join(cells) + " |")
print()
print("qps ratio is cetcd/etcd (higher is better for cetcd). Raw output: %s"
      % work)
PY
