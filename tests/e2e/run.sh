#!/usr/bin/env bash
# Run etcd 3.4's own end-to-end tests (Debian golang-etcd-server-dev,
# tests/e2e) against a server binary, as a black box.
#
# Goal: the tests listed in tests/e2e/passing.txt (one test name per line,
# '#' comments and blank lines ignored) pass with cetcd as `etcd`; the run
# fails if any listed test fails or does not run at all.
#
# Method: build the e2e test binary once in GOPATH mode with Debian's Go
# (offline), cache it under build/e2e/, put a bin dir holding `etcd` (the
# server under test) and `etcdctl` (the real etcdctl) next to it, and run the
# binary from the e2e source folder (tests read fixtures by relative path).
#
# Usage: tests/e2e/run.sh                 # the tests in passing.txt
#        tests/e2e/run.sh TestCtlV3Put ... # these tests instead
# Env:   E2E_ETCD_BIN     server used as `etcd` (default $CETCD_BIN, else
#                         build/cetcd); /usr/bin/etcd validates the runner
#        E2E_ETCDCTL_BIN  etcdctl (default /usr/bin/etcdctl; CI runs
#                         build/src/ctl/cetcdctl, cetcd's etcdctl)
#        E2E_TEST_BIN     cached test binary (default build/e2e/e2e.test)
#        E2E_TIMEOUT      go test timeout (default 30m)
#        E2E_LIST         the list file read when no test is named (default
#                         tests/e2e/passing.txt)
# The tests bind fixed ports from 20000 up on localhost: run one at a time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
src=/usr/share/gocode/src/go.etcd.io/etcd/tests/e2e
server="${E2E_ETCD_BIN:-${CETCD_BIN:-$repo/build/cetcd}}"
ctl="${E2E_ETCDCTL_BIN:-/usr/bin/etcdctl}"
cache="$repo/build/e2e"
testbin="${E2E_TEST_BIN:-$cache/e2e.test}"

if [ "$#" -gt 0 ]; then
    tests=("$@")
else
    mapfile -t tests < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' \
        "${E2E_LIST:-$here/passing.txt}" | grep -v '^$' || true)
fi
if [ "${#tests[@]}" -eq 0 ]; then
    echo "e2e: no tests listed in tests/e2e/passing.txt; nothing to run"
    exit 0
fi

[ -d "$src" ] || { echo "e2e: $src missing (apt-get install golang-etcd-server-dev)" >&2; exit 2; }
[ -x "$server" ] || { echo "e2e: server binary $server not found" >&2; exit 2; }
[ -x "$ctl" ] || { echo "e2e: etcdctl $ctl not found" >&2; exit 2; }

mkdir -p "$cache"
if [ ! -x "$testbin" ]; then
    echo "e2e: building $testbin (GOPATH mode, offline)"
    (cd "$src" && GO111MODULE=off GOPATH=/usr/share/gocode GOPROXY=off \
        GOFLAGS= GOCACHE="$cache/gocache" go test -c -o "$testbin.tmp" .)
    mv "$testbin.tmp" "$testbin"
fi

bindir="$(mktemp -d "${TMPDIR:-/tmp}/cetcd-e2e-bin.XXXXXX")"
log="$(mktemp "${TMPDIR:-/tmp}/cetcd-e2e-log.XXXXXX")"
trap 'rm -rf "$bindir" "$log"' EXIT
ln -s "$(readlink -f "$server")" "$bindir/etcd"
ln -s "$(readlink -f "$ctl")" "$bindir/etcdctl"

# The suite checks the version the server reports against the etcd it was
# built from (TestCtlV3Version, TestV3Metrics*: server_version in
# /metrics).  cetcd reports 3.4.31 by default (Kubernetes' RequestProgress
# check, issue 16); an operator replacing a given etcd sets
# --experimental-reported-version (env ETCD_EXPERIMENTAL_REPORTED_VERSION)
# to that etcd's version, as here.  Only for cetcd: etcd has no such flag.
if "$server" --version 2>/dev/null | grep -q 'cetcd'; then
    want_version=$(sed -n 's/^[[:space:]]*Version[[:space:]]*=[[:space:]]*"\([0-9.]*\)".*/\1/p' \
        "$src/../../version/version.go" | head -n 1)
    [ -n "$want_version" ] || { echo "e2e: no Version in etcd's version.go" >&2; exit 2; }
    export ETCD_EXPERIMENTAL_REPORTED_VERSION="$want_version"
    echo "e2e: cetcd reports etcd $want_version (ETCD_EXPERIMENTAL_REPORTED_VERSION)"
fi

regex="^($(IFS='|'; echo "${tests[*]}"))\$"
echo "e2e: server=$server etcdctl=$ctl tests=${#tests[@]}"
set +e
(cd "$src" && "$testbin" -bin-dir "$bindir" -test.run "$regex" -test.v \
    -test.timeout "${E2E_TIMEOUT:-30m}") 2>&1 | tee "$log" |
    grep -E '^(=== RUN|--- (PASS|FAIL|SKIP)|PASS|FAIL|ok|panic)' 
rc=${PIPESTATUS[0]}
set -e

failed=0
for t in "${tests[@]}"; do
    if grep -q -- "^--- PASS: $t " "$log"; then
        :
    elif grep -q -- "^--- FAIL: $t " "$log"; then
        echo "e2e: FAIL $t"; failed=1
    else
        echo "e2e: $t did not run (typo, or the binary lacks it)"; failed=1
    fi
done
if [ "$failed" -ne 0 ] || [ "$rc" -ne 0 ]; then
    echo "e2e: FAILED (test binary exit $rc); full log follows"
    tail -n 200 "$log"
    exit 1
fi
echo "e2e: all ${#tests[@]} listed tests passed"
echo "e2e: ${#tests[@]} passed, 0 failed"
