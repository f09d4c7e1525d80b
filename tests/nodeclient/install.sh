#!/bin/sh
# Installs the etcd3 npm client pinned in package.json/package-lock.json
# (what tests/nodeclient/recipes.js uses) into OUT_DIR/node_modules, so
# that node_modules never lands in the source tree.  Idempotent: a second
# run reinstalls from the same lock file.
# usage: sh tests/nodeclient/install.sh OUT_DIR
set -eu
if [ $# -ne 1 ]; then
    echo "usage: sh install.sh OUT_DIR" >&2
    exit 2
fi
for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "install.sh: '$tool' not found on PATH; install Node.js (>= 18) and npm" >&2
        exit 1
    fi
done
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ "$out" = "$here" ]; then
    echo "install.sh: OUT_DIR must not be the source directory" >&2
    exit 2
fi
cp "$here/package.json" "$here/package-lock.json" "$out/"
cd "$out"
npm ci --no-audit --no-fund --ignore-scripts
