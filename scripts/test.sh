#!/usr/bin/env bash
# test.sh - the whole suite, as CI runs it (about 35 minutes on 2 cores; CI
# allows 45, so a slow suite goes to the long runs of docs/TESTING.md):
#   0. the layer check (scripts/check_layers.sh, docs/ARCHITECTURE.md)
#   1. build: release (build/) and ASan+UBSan (build-asan/), -Werror
#   2. unit tests (cmocka) and raft interaction/simulation, in both builds
#   3. pytest integration against the release cetcd: etcdctl + python etcd3
#      KV suites, the differential test against a real etcd 3.4.23, kill -9
#      durability, the gRPC runtime, the client library and cetcd-bench
#   4. 3- and 5-member clusters under kill -9, SIGSTOP and partitions, with a
#      linearizability check of the recorded histories (tests/cluster);
#      beside them, etcd's own e2e tests listed in tests/e2e/passing.txt,
#      with cetcdctl as etcdctl (all of passing.txt passes with the real
#      etcdctl too: docs/TESTING.md "Longer runs")
#   5. the KV suites again against the ASan+UBSan cetcd
#   6. every libFuzzer target, built with clang, for a short run each (two
#      at a time)
# Longer runs: see docs/TESTING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
FUZZ_SECONDS=${FUZZ_SECONDS:-4}

# in_group CMD...: runs CMD as a process group of its own and then kills
# what is left of that group: the servers of a test that the pytest hang
# watchdog (tests/common/hangwatch.py) ended with the process.
in_group() {
    local pidf rc=0
    pidf=$(mktemp)
    setsid -w bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidf" "$@" || rc=$?
    kill -9 -- "-$(cat "$pidf")" 2>/dev/null || true
    rm -f "$pidf"
    return "$rc"
}

echo "== layers (no include of an upper layer, no link circle)"
bash scripts/check_layers.sh

make build asan

echo "== unit + raft (release)"
(cd build && ctest --output-on-failure -j2)
echo "== unit + raft (asan+ubsan)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2)

# (CI runs 3 of the differential test's 6 default seeds; the long runs
# take them all: docs/TESTING.md.)
echo "== integration (release cetcd)"
CETCD_BIN="$ROOT/build/cetcd" CETCD_BUILD_DIR="$ROOT/build" \
    CETCD_DIFF_SEEDS=${CETCD_DIFF_SEEDS:-3} \
    in_group $PY -m pytest -q -p no:cacheprovider --durations=12 tests/integration

# The cluster tests mostly wait (elections, kills, timeouts): etcd's e2e
# tests (fixed ports from 20000 up; the cluster tests take free ephemeral
# ports) run beside them, each with its output in a file printed after.
echo "== clusters: faults and linearizability (release cetcd), with etcd's e2e beside"
e2e_log=$(mktemp)
( E2E_ETCDCTL_BIN="$ROOT/build/src/ctl/cetcdctl" CETCD_BIN="$ROOT/build/cetcd" \
      bash tests/e2e/run.sh >"$e2e_log" 2>&1 ) &
e2e_pid=$!
cluster_rc=0
CETCD_BIN="$ROOT/build/cetcd" in_group $PY -m pytest -q -p no:cacheprovider --durations=12 tests/cluster ||
    cluster_rc=$?
e2e_rc=0
wait "$e2e_pid" || e2e_rc=$?
echo "== etcd e2e (tests/e2e/passing.txt), cetcdctl as etcdctl (ran beside the clusters)"
cat "$e2e_log"
rm -f "$e2e_log"
[ "$cluster_rc" -eq 0 ] && [ "$e2e_rc" -eq 0 ] || {
    echo "clusters rc=$cluster_rc, e2e rc=$e2e_rc" >&2
    exit 1
}

# (test_full_disk.py, test_gateway.py and test_gateway_body.py run against
# the release build above and under ASan in the long runs: CI's 45 minutes.)
echo "== integration KV suites (asan+ubsan cetcd)"
CETCD_BIN="$ROOT/build-asan/cetcd" CETCD_BUILD_DIR="$ROOT/build-asan" \
    in_group $PY -m pytest -q -p no:cacheprovider tests/integration/test_kv_etcdctl.py \
    tests/integration/test_kv_python.py tests/integration/test_crash.py \
    tests/integration/test_lease_etcdctl.py tests/integration/test_lease_grpc.py \
    tests/integration/test_rpc_runtime.py tests/integration/test_quota.py \
    tests/integration/test_conn_limits.py tests/integration/test_h2_idle_frames.py \
    tests/integration/test_http.py tests/integration/test_http_split.py \
    tests/integration/test_config_file.py tests/integration/test_flags_ops.py \
    tests/integration/test_snapshot_etcd.py tests/integration/test_import_etcd.py \
    tests/integration/test_auth_cn.py tests/integration/test_differential_auth.py \
    tests/integration/test_auth_observe.py

echo "== fuzz targets (clang, ${FUZZ_SECONDS}s each)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCETCD_FUZZ=ON \
    -DCETCD_SANITIZE=ON >/dev/null
fuzzers=$(cd fuzz && ls fuzz_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build build-fuzz -j2 --target $fuzzers >/dev/null
# fuzz_one NAME runs one target on a copy of its seed corpus (libFuzzer
# adds what it finds to its dir) and prints its result in one block; two
# run at once (one per core).
fuzz_one() {
    local name=$1 f work corpus
    f=build-fuzz/fuzz/$name
    work=$(mktemp -d)
    mkdir "$work/corpus"
    corpus="fuzz/corpus/${name#fuzz_}"
    [ -d "$corpus" ] && cp -r "$corpus/." "$work/corpus/"
    if ! "$f" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=60 \
        -artifact_prefix="$work/" "$work/corpus" >"$work/log" 2>&1; then
        printf -- '-- %s FAILED (artifacts in %s)\n%s\n' "$name" "$work" \
            "$(tail -40 "$work/log")"
        return 1
    fi
    printf -- '-- %s\n%s\n' "$name" \
        "$(grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$work/log" | tail -1)"
    rm -rf "$work"
}
export -f fuzz_one
export FUZZ_SECONDS
# shellcheck disable=SC2086
printf '%s\n' $fuzzers | xargs -P2 -I{} bash -c 'fuzz_one "$1"' _ {}

