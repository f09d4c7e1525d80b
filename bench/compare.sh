#!/usr/bin/env bash
# compare.sh - the same workloads against the real etcd 3.4.23 and against
# cetcd, one server after the other, in one run, each workload driven by two
# load generators: ebench (etcd's official Go client, clientv3 + grpc-go, as
# etcdctl and Kubernetes use it: what users see, and what the goals are
# judged on) and cetcd-bench (the gRPC C core client); prints a markdown
# table for docs/BENCHMARKS.md, rows "(go)" and "(c)".
#
# usage: bench/compare.sh [WORKDIR]        (default: a fresh dir in /tmp)
# environment:
#   CETCD_BIN   cetcd binary (default build/cetcd; if missing, etcd only)
#   ETCD_BIN    etcd binary (default: etcd on PATH)
#   BENCH_BIN   cetcd-bench (default build/src/bench/cetcd-bench, then
#               build-client/src/bench/cetcd-bench)
#   EBENCH_BIN  ebench (default: built into WORKDIR from
#               ../shared/tools/ebench with its build.sh)
#   CLIENTS     load generators, "go c" (default), "go" or "c"
#   SCALE       multiplies every --total (default 1; SCALE=10 for a longer,
#               steadier run of some minutes per server)
#   VAL_SIZE    put value size in bytes (default 256, as etcd's docs)
#   KEY_SPACE   put key space (default 100000)
#   MEMBERS     cluster size (default 1).  With 3 or 5, each server is a
#               cluster of that many members on 127.0.0.1; puts go to the
#               leader, ranges to all members; CPU is summed over members.
#   ONLY        run only the workloads whose name matches this extended
#               regex (e.g. ONLY='^put-c1$' for the single-client put)
#   ROUNDS      rounds (default 1): each round runs etcd then cetcd on fresh
#               data dirs; the table gives each figure's median over the
#               rounds and the range of the per-round qps ratios.  On a
#               shared VM the machine's speed drifts by 10-20% within
#               minutes, so one round's ratio can be off by as much;
#               alternating rounds give both servers the same drift.
#
# Each server gets a fresh data dir in WORKDIR, fsync on (etcd's default;
# cetcd the same), single member on 127.0.0.1.  Per workload we record
# qps, p50/p99 latency from cetcd-bench's RESULT line, the server's CPU time
# (utime+stime from /proc/PID/stat) per request and its RSS.  The disk's
# fdatasync latency (4 KiB append + fdatasync, x1000) is measured first in
# WORKDIR.  The load generator shares the machine's cores with the server;
# on a 2-core box both compete, so compare ratios, not absolute numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${1:-$(mktemp -d /tmp/cetcd-compare.XXXXXX)}
mkdir -p "$WORK"
SCALE=${SCALE:-1}
VAL_SIZE=${VAL_SIZE:-256}
KEY_SPACE=${KEY_SPACE:-100000}
ETCD_BIN=${ETCD_BIN:-etcd}
CETCD_BIN=${CETCD_BIN:-$ROOT/build/cetcd}
BENCH_BIN=${BENCH_BIN:-}
for b in "$ROOT/build/src/bench/cetcd-bench" \
         "$ROOT/build-client/src/bench/cetcd-bench"; do
    [ -n "$BENCH_BIN" ] || { [ -x "$b" ] && BENCH_BIN=$b; } || true
done
[ -n "$BENCH_BIN" ] && [ -x "$BENCH_BIN" ] ||
    { echo "compare.sh: cetcd-bench not found (make build)" >&2; exit 1; }
CLIENTS=${CLIENTS:-go c}
EBENCH_BIN=${EBENCH_BIN:-}
if [[ " $CLIENTS " == *" go "* ]] && [ -z "$EBENCH_BIN" ]; then
    src="$ROOT/../shared/tools/ebench"
    [ -x "$src/build.sh" ] ||
        { echo "compare.sh: no ebench (set EBENCH_BIN or CLIENTS=c)" >&2; exit 1; }
    bash "$src/build.sh" "$WORK/eb" >&2
    EBENCH_BIN=$WORK/eb/ebench
fi
CLK_TCK=$(getconf CLK_TCK)
CPORT=23790
PPORT=23800
EP=127.0.0.1:$CPORT
MEMBERS=${MEMBERS:-1}
EPS=$EP

# name | conns | clients | op | total.  Totals are modest so a whole
# comparison takes a few minutes on 2 cores; SCALE raises them.  The range
# workloads read one small key (cetcd-bench: "foo"; ebench: one of 1000
# prefilled 8-byte keys), as etcd's docs do.
t() { echo $(($1 * SCALE)); }
WORKLOADS=(
"put-c1|1|1|put|$(t 1000)"
"put-c100|10|100|put|$(t 10000)"
"put-c1000|100|1000|put|$(t 20000)"
"range-l-c100|10|100|range-l|$(t 10000)"
"range-l-c1000|100|1000|range-l|$(t 20000)"
"range-s-c100|10|100|range-s|$(t 10000)"
"range-s-c1000|100|1000|range-s|$(t 20000)"
"txn-put-c100|10|100|txn-put|$(t 10000)"
)
if [ -n "${ONLY:-}" ]; then
    keep=()
    for w in "${WORKLOADS[@]}"; do
        [[ ${w%%|*} =~ $ONLY ]] && keep+=("$w")
    done
    WORKLOADS=("${keep[@]}")
fi
PUT_FLAGS="--key-size 8 --val-size $VAL_SIZE --key-space-size $KEY_SPACE"

# bench_cmd CLIENT OP CONNS CLIENTS TOTAL EPS: the command line of one run.
bench_cmd() {
    local cl=$1 op=$2 conns=$3 clients=$4 total=$5 eps=$6
    if [ "$cl" = c ]; then
        case $op in
        put) echo "$BENCH_BIN --endpoints $eps --conns $conns --clients $clients put --total $total $PUT_FLAGS" ;;
        range-?) echo "$BENCH_BIN --endpoints $eps --conns $conns --clients $clients range foo --consistency ${op#range-} --total $total" ;;
        txn-put) echo "$BENCH_BIN --endpoints $eps --conns $conns --clients $clients txn-put --txn-ops 1 --total $total $PUT_FLAGS" ;;
        esac
    else
        local e="$EBENCH_BIN --endpoints $eps --conns $conns --clients $clients --total $total --json"
        case $op in
        put) echo "$e --op put $PUT_FLAGS" ;;
        range-?) echo "$e --op range --consistency ${op#range-} --key-size 8 --key-space-size 1000" ;;
        txn-put) echo "$e --op txn-put --txn-ops 1 $PUT_FLAGS" ;;
        esac
    fi
}

# result_line CLIENT FILE: "qps p50 p99 ok errors" from a run's output.
result_line() {
    python3 - "$1" "$2" <<'PY'
import json, sys
cl, path = sys.argv[1:]
text = open(path).read()
if cl == "c":
    line = [l for l in text.splitlines() if l.startswith("RESULT")][-1]
    r = dict(kv.split("=", 1) for kv in line.split()[1:])
    print(r["qps"], r["p50_ms"], r["p99_ms"], r["ok"], r["errors"])
else:
    r = json.loads([l for l in text.splitlines() if l.startswith("{")][-1])
    print(r["qps"], r["p50_ms"], r["p99_ms"], r["ok"], r["errors"])
PY
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

# start_server NAME BIN: fresh data dirs, MEMBERS members; waits until a
# put succeeds; sets SERVER_PIDS, EP (the leader) and EPS (all members).
start_server() {
    local name=$1 bin=$2 dir=$WORK/$1 ic="" i
    rm -rf "$dir"
    mkdir -p "$dir"
    SERVER_PIDS=""
    EPS=""
    for i in $(seq 0 $((MEMBERS - 1))); do
        ic="${ic:+$ic,}m$i=http://127.0.0.1:$((PPORT + i))"
        EPS="${EPS:+$EPS,}127.0.0.1:$((CPORT + i))"
    done
    [ "$MEMBERS" -gt 1 ] || ic="m0=http://127.0.0.1:$PPORT"
    for i in $(seq 0 $((MEMBERS - 1))); do
        local c=127.0.0.1:$((CPORT + i)) p=http://127.0.0.1:$((PPORT + i))
        "$bin" --name "m$i" --data-dir "$dir/data$i" \
            --listen-client-urls "http://$c" --advertise-client-urls "http://$c" \
            --listen-peer-urls "$p" --initial-advertise-peer-urls "$p" \
            --initial-cluster "$ic" >"$dir/server$i.log" 2>&1 &
        SERVER_PIDS="$SERVER_PIDS $!"
    done
    for _ in $(seq 100); do
        if "$BENCH_BIN" --endpoints "$EPS" --dial-timeout 1 put --total 1 \
            >/dev/null 2>&1; then
            EP=$(ETCDCTL_API=3 etcdctl --endpoints "$EPS" endpoint status \
                 -w json | python3 -c 'import json,sys
for s in json.load(sys.stdin):
    if s["Status"]["leader"] == s["Status"]["header"]["member_id"]:
        print(s["Endpoint"])')
            [ -n "$EP" ] && return 0
        fi
        sleep 0.2
    done
    echo "compare.sh: $name did not come up, see $dir/server*.log" >&2
    stop_server
    return 1
}

stop_server() {
    [ -n "${SERVER_PIDS:-}" ] || return 0
    # shellcheck disable=SC2086
    kill $SERVER_PIDS 2>/dev/null || true
    for p in $SERVER_PIDS; do wait "$p" 2>/dev/null || true; done
    SERVER_PIDS=
}
trap stop_server EXIT

cpu_all() {
    local t=0 p
    for p in $SERVER_PIDS; do t=$((t + $(cpu_ticks "$p"))); done
    echo $t
}
leader_pid() {
    local i=$(( ${EP##*:} - CPORT + 1 ))
    echo "$SERVER_PIDS" | awk -v i="$i" '{print $i}'
}

# run_all NAME BIN ROUND: every workload against one server; one line each
# in $WORK/NAME.rROUND.results:
#   workload qps p50_ms p99_ms cpu_us_per_req rss_kb errors
run_all() {
    local name=$1 bin=$2 round=$3 out=$WORK/$1.r$3.results
    : >"$out"
    start_server "$name" "$bin" || return 1
    # The range workloads read one small key, as etcd's docs do.
    "$BENCH_BIN" --endpoints "$EP" put --total 1 --key-size 8 >/dev/null
    ETCDCTL_API=3 etcdctl --endpoints "$EP" put foo bar >/dev/null 2>&1 ||
        echo "compare.sh: etcdctl put foo failed (range reads a missing key)" >&2
    for w in "${WORKLOADS[@]}"; do
        local wname conns clients op total cl c0 c1 res eps cmd
        IFS='|' read -r wname conns clients op total <<<"$w"
        eps=$EPS
        case $op in put | txn-put) eps=$EP ;; esac
        for cl in $CLIENTS; do
            local row="$wname ($cl)" txt="$WORK/$name.r$round.$wname.$cl.txt"
            cmd=$(bench_cmd "$cl" "$op" "$conns" "$clients" "$total" "$eps")
            c0=$(cpu_all)
            # ebench prefills range keys before timing: that CPU would be
            # counted too, so its ranges prefill in a run of their own.
            if [ "$cl" = go ] && [ "${op%-?}" = range ]; then
                $cmd --total 1 >/dev/null 2>&1 || true
                cmd="$cmd --prefill no"
                c0=$(cpu_all)
            fi
            # The load generator's own CPU (user + system, bash's `time`):
            # it shares the cores, so it bounds what a faster server shows.
            # shellcheck disable=SC2086
            { TIMEFORMAT='%3U %3S'; time $cmd >"$txt" 2>&1; } 2>"$txt.cpu" &&
                res=$(result_line "$cl" "$txt") || {
                echo "compare.sh: $name $row failed (see $txt)" >&2; continue; }
            c1=$(cpu_all)
            python3 - "${row// /_}" "$c0" "$c1" "$CLK_TCK" \
                "$(rss_kb "$(leader_pid)")" "$(tail -1 "$txt.cpu")" $res >>"$out" <<'PY'
import sys
w, c0, c1, tck, rss, gen, qps, p50, p99, ok, errors = sys.argv[1:]
cpu_us = (int(c1) - int(c0)) * 1e6 / int(tck) / max(1, int(ok))
gen_us = sum(float(x) for x in gen.split()) * 1e6 / max(1, int(ok))
print(w, qps, p50, p99, "%.1f" % cpu_us, rss, errors, "%.1f" % gen_us)
PY
            echo "  $name $row: $(tail -1 "$out")" >&2
        done
    done
    echo "peak_rss_kb $(hwm_kb "$(leader_pid)")" >"$WORK/$name.r$round.peak"
    stop_server
}

echo "== fdatasync latency in $WORK" >&2
python3 "$ROOT/bench/fsync_lat.py" "$WORK" 1000 | tee "$WORK/fsync.txt" >&2

ROUNDS=${ROUNDS:-1}
HAVE_CETCD=0
[ -x "$CETCD_BIN" ] || echo "== cetcd: $CETCD_BIN not found, measuring etcd only" >&2
for r in $(seq "$ROUNDS"); do
    echo "== round $r/$ROUNDS: etcd ($("$ETCD_BIN" --version | head -1))" >&2
    run_all etcd "$ETCD_BIN" "$r"
    if [ -x "$CETCD_BIN" ]; then
        echo "== round $r/$ROUNDS: cetcd ($CETCD_BIN)" >&2
        run_all cetcd "$CETCD_BIN" "$r" && HAVE_CETCD=1
    fi
done

python3 - "$WORK" "$HAVE_CETCD" "$SCALE" "$VAL_SIZE" "$MEMBERS" "$ROUNDS" <<'PY'
import os, platform, statistics, sys, time
work, have, scale, val = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]
members, rounds = int(sys.argv[5]), int(sys.argv[6])

def load_round(name, r):
    res = {}
    p = os.path.join(work, "%s.r%d.results" % (name, r))
    if os.path.exists(p):
        for line in open(p):
            f = line.split()
            res[f[0]] = f[1:]
    return res

def load(name):
    """Per workload, each field's median over the rounds that ran it
    (errors: the sum)."""
    runs = [load_round(name, r) for r in range(1, rounds + 1)]
    res = {}
    for run in runs:
        for w in run:
            res.setdefault(w, None)
    for w in res:
        rows = [run[w] for run in runs if w in run]
        med = ["%g" % statistics.median(float(x[i]) for x in rows) for i in range(5)]
        med[4] = "%d" % float(med[4])
        gen = [float(x[6]) for x in rows if len(x) > 6]
        res[w] = med + [str(sum(int(x[5]) for x in rows)),
                        "%.1f" % statistics.median(gen) if gen else "-"]
    return res

def qps_ratios(w):
    out = []
    for r in range(1, rounds + 1):
        a, b = load_round("etcd", r).get(w), load_round("cetcd", r).get(w)
        if a and b and float(a[0]) > 0:
            out.append(float(b[0]) / float(a[0]))
    return out

def peak(name):
    vals = []
    for r in range(1, rounds + 1):
        p = os.path.join(work, "%s.r%d.peak" % (name, r))
        if os.path.exists(p):
            vals.append(int(open(p).read().split()[1]))
    return str(max(vals)) if vals else "-"

e, c = load("etcd"), load("cetcd") if have else {}
fs = dict(kv.split("=") for kv in open(os.path.join(work, "fsync.txt")).read().split()[1:])
ratio = lambda a, b: "%.2f" % (float(b) / float(a)) if a and b and float(a) > 0 else "-"
print("### cetcd vs etcd 3.4.23, %s (%s, %d cores, %s)" % (
    "single member" if members == 1 else "%d-member clusters" % members,
    time.strftime("%Y-%m-%d"), os.cpu_count(), platform.machine()))
if members > 1:
    print()
    print("Puts go to the leader, ranges to every member; CPU is summed over "
          "the members, RSS is the leader's.")
print()
print("fdatasync (4 KiB append + fdatasync, x1000): p50 %s ms, p99 %s ms. "
      "Values %s B, keys 8 B, SCALE=%s. Server peak RSS: etcd %s KiB, cetcd %s KiB."
      % (fs["p50_ms"], fs["p99_ms"], val, scale, peak("etcd"), peak("cetcd") if have else "-"))
if not have:
    print()
    print("cetcd binary not found: etcd only.")
print()
if rounds > 1:
    print("Medians over %d rounds (each round: etcd, then cetcd, fresh data "
          "dirs); \"rounds\" gives the lowest and highest per-round qps ratio."
          % rounds)
    print()
print("| workload | etcd qps | cetcd qps | qps ratio | etcd p50 ms | cetcd p50 ms "
      "| etcd p99 ms | cetcd p99 ms | etcd CPU µs/req | cetcd CPU µs/req | CPU ratio "
      "| etcd RSS MiB | cetcd RSS MiB | load gen CPU µs/req etcd / cetcd "
      "| busy cores etcd / cetcd |" + (" rounds |" if rounds > 1 else ""))
print("|" + "---|" * (15 + (rounds > 1)))
for w in sorted(set(e) | set(c), key=lambda k: list(e).index(k) if k in e else 99):
    a, b = e.get(w), c.get(w)
    g = lambda r, i: r[i] if r else "-"
    mib = lambda r: "%.0f" % (int(r[4]) / 1024) if r else "-"
    err = " (errors: etcd %s, cetcd %s)" % (g(a, 5), g(b, 5)) if (a and a[5] != "0") or (b and b[5] != "0") else ""
    qr = qps_ratios(w)
    span = (" %.2f-%.2f |" % (min(qr), max(qr)) if qr else " - |") if rounds > 1 else ""
    gen = "%s / %s" % (g(a, 6), g(b, 6))

    def busy(r):  # cores the server and the generator kept busy
        try:
            return "%.2f" % (float(r[0]) * (float(r[3]) + float(r[6])) / 1e6)
        except (TypeError, ValueError, IndexError):
            return "-"
    cores = "%s / %s" % (busy(a), busy(b))
    print("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |%s" % (
        w.replace("_", " "), err, g(a, 0), g(b, 0), ratio(g(a, 0) if a else None, g(b, 0) if b else None),
        g(a, 1), g(b, 1), g(a, 2), g(b, 2), g(a, 3), g(b, 3),
        ratio(g(a, 3) if a else None, g(b, 3) if b else None), mib(a), mib(b), gen, cores, span))
print()
print("Busy cores: qps x (server + load generator CPU per request), the "
      "cores the two kept busy.  Near the machine's core count (%d) the row "
      "is CPU-bound: the qps ratio is then the ratio of (generator + server) "
      "CPU per request, and the generator's share caps it (with a server "
      "using no CPU at all, qps could not pass cores / generator CPU)."
      % os.cpu_count())
print()
print("Ratios are cetcd/etcd (qps: higher is better; CPU: lower is better). "
      "Raw output: %s" % work)
PY
