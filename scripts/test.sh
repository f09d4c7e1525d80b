#!/usr/bin/env bash
# test.sh - the whole suite, as CI runs it: unit tests (plain and ASan+UBSan),
# raft simulation, pytest integration/differential/crash tests (against the
# ASan build where noted), and the list of etcd e2e tests known to pass.
set -euo pipefail
cd "$(dirname "$0")/.."
make build asan
echo "== unit (plain)"
(cd build && ctest --output-on-failure -j2)
echo "== unit (asan+ubsan)"
(cd build-asan && ctest --output-on-failure -j2)
if [ -d tests/integration ] && ls tests/integration/test_*.py >/dev/null 2>&1; then
    echo "== integration (pytest)"
    CETCD_BIN="$PWD/build/cetcd" /usr/bin/python3 -m pytest -q tests/integration
fi
if [ -x tests/e2e/run.sh ]; then
    echo "== etcd e2e (passing list)"
    bash tests/e2e/run.sh
fi
