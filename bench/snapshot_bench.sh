#!/usr/bin/env bash
# snapshot_bench.sh - `etcdctl snapshot save` of a large store, cetcd against
# etcd 3.4.23 in the same run (docs/BENCHMARKS.md "Snapshot save of a large
# store"; issue 21's benchmark).
#
# For each server (etcd first, then cetcd), on its own temporary dir:
#   1. fill SIZE_MB of 4 KiB values (ebench, sequential keys);
#   2. baseline: 100 clients put (ebench, 10 connections, 256 B values)
#      for LOAD_S seconds without a save: put p99;
#   3. a save alone: its time, the member's RSS before and its peak during
#      the save (/proc/PID/status VmRSS sampled every 50 ms), the file size;
#   4. a save under load: the same 100 clients put for a window as long as
#      the unloaded save took (at least LOAD_S s); the save starts 1 s into
#      it.  Reported: the save's time, the RSS peak, put p99/max over the
#      window, and how much of the save the window covered.
# The saved files are checked with `etcdctl snapshot status` (revision and
# key count printed).
#
# Usage: bench/snapshot_bench.sh [SIZE_MB] [LOAD_S]
#   defaults 1024 10.  Env: EBENCH (ebench binary; build it with
#   /work/shared/tools/ebench/build.sh /tmp/eb), CETCD_BIN, ETCD_BIN,
#   ETCDCTL, BENCH_TMP (where the stores and snapshot files go; needs about
#   4 x SIZE_MB free).
# Long run, not CI: ~10 min at 1 GiB on the shared 2-core machine.  The
# machine is shared and loaded: the numbers are noisy, say so with them.
set -euo pipefail

SIZE_MB=${1:-1024}
LOAD_S=${2:-10}
repo=$(cd "$(dirname "$0")/.." && pwd)
EBENCH=${EBENCH:-/tmp/eb/ebench}
CETCD_BIN=${CETCD_BIN:-$repo/build/cetcd}
ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
BENCH_TMP=${BENCH_TMP:-/tmp}
VAL=4096
KEYS=$((SIZE_MB * 1024 * 1024 / VAL))
export ETCDCTL_API=3

[ -x "$EBENCH" ] || { echo "no ebench at $EBENCH: /work/shared/tools/ebench/build.sh /tmp/eb" >&2; exit 2; }

. "$(dirname "$0")/single_common.sh"

rss_mb() { awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$1/status"; }

# save EP PID FILE -> prints "took S s, VmRSS .. peak .., RssAnon .. peak ..
# [start end]" (VmRSS counts the store's mapped file pages both servers
# read through mmap; RssAnon is the memory the member allocates)
save() {
    local ep=$1 p=$2 file=$3
    rm -f "$file"
    python3 - "$p" "$ETCDCTL" "$ep" "$file" <<'EOF'
import subprocess, sys, threading, time
pid, ctl, ep, path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def rss():
    out = {}
    for line in open("/proc/%d/status" % pid):
        if line.startswith(("VmRSS", "RssAnon")):
            out[line.split(":")[0]] = int(line.split()[1]) // 1024
    return out
before = rss()
peak = dict(before)
done = threading.Event()
def sample():
    while not done.is_set():
        now = rss()
        for k in peak:
            peak[k] = max(peak[k], now[k])
        time.sleep(0.05)
t = threading.Thread(target=sample)
t.start()
t0 = time.time()
cp = subprocess.run([ctl, "--endpoints", ep, "--command-timeout", "1800s",
                     "snapshot", "save", path], capture_output=True, text=True)
t1 = time.time()
done.set()
t.join()
if cp.returncode != 0:
    sys.exit("snapshot save failed: " + cp.stderr)
print("took %.2f s, VmRSS %d -> peak %d MiB (+%d), RssAnon %d -> peak %d "
      "MiB (+%d) [%.3f %.3f]"
      % (t1 - t0, before["VmRSS"], peak["VmRSS"],
         peak["VmRSS"] - before["VmRSS"], before["RssAnon"],
         peak["RssAnon"], peak["RssAnon"] - before["RssAnon"], t0, t1))
EOF
}

load() { # EP SECONDS -> one ebench JSON line
    load_put "$1" "$2"
}

brief() { # ebench JSON -> "qps Q, p99 X ms, max Y ms, errors E"
    python3 -c 'import json,sys
r=json.loads(sys.stdin.read())
print("qps %.0f, p50 %.1f ms, p99 %.1f ms, max %.1f ms, errors %d" % (r["qps"], r["p50_ms"], r["p99_ms"], r["max_ms"], r["errors"]))'
}

one() { # NAME BIN
    local name=$1 bin=$2 dir
    dir=$(mktemp -d "$BENCH_TMP/snapshot-bench-$name-XXXXXX")
    start "$name" "$bin" "$dir" 150
    echo "== $name: filling $SIZE_MB MiB ($KEYS x $VAL B)" >&2
    local t0 t1
    t0=$(date +%s)
    "$EBENCH" --endpoints "$ep" --op put --conns 10 --clients 100 \
        --total "$KEYS" --sequential-keys --key-space-size "$KEYS" \
        --key-size 16 --val-size $VAL --key-prefix "f/" --json >/dev/null
    t1=$(date +%s)
    echo "$name filled in $((t1 - t0)) s; RSS $(rss_mb "$pid") MiB"
    echo "$name baseline puts (no save, ${LOAD_S} s): $(load "$ep" "$LOAD_S" | brief)"
    local alone took win
    alone=$(save "$ep" "$pid" "$dir/alone.db")
    echo "$name save alone: ${alone% \[*}, file $(( $(stat -c %s "$dir/alone.db") >> 20 )) MiB"
    "$ETCDCTL" snapshot status "$dir/alone.db" -w table | sed "s/^/$name   /"
    rm -f "$dir/alone.db"
    took=$(echo "$alone" | awk '{print $2}')
    # the save is slower under load: a window of twice the unloaded time
    win=$(python3 -c "print(max($LOAD_S, int(2 * $took + 0.999) + 2))")
    local l0 under cover
    l0=$(date +%s.%N)
    load "$ep" "$win" >"$dir/during.json" &
    local lpid=$!
    sleep 1
    under=$(save "$ep" "$pid" "$dir/loaded.db")
    wait $lpid || true
    cover=$(echo "$under" | tr -d '[]' | awk -v l0="$l0" -v w="$win" \
        '{s=$(NF-1)-l0; e=$NF-l0; printf "the save ran %.1f-%.1f s into the %d s load window%s", s, e, w, (e > w ? " (it outlasted the window)" : "")}')
    echo "$name save under load: ${under% \[*}; $cover"
    echo "$name puts during the save: $(brief <"$dir/during.json")"
    rm -f "$dir/loaded.db"
    kill "$pid"; wait "$pid" || true
    rm -rf "$dir"
}

echo "snapshot_bench: $SIZE_MB MiB, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared machine: noisy)"
one etcd "$ETCD_BIN"
one cetcd "$CETCD_BIN"
