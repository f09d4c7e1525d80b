#!/bin/sh
# Builds authbench (bench/authbench/main.go, etcd's Go client logged in with
# a user) into OUT_DIR (default build/authbench) in GOPATH mode against
# Debian's etcd 3.4 client sources (golang-go, golang-etcd-server-dev), as
# /work/shared/tools/ebench/build.sh builds ebench.  No network needed.
# usage: bench/authbench/build.sh [OUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../build/authbench}
gocode=${GOCODE:-/usr/share/gocode}
[ -d "$gocode/src/go.etcd.io/etcd/clientv3" ] || { echo "build.sh: install golang-etcd-server-dev" >&2; exit 1; }
work=$(mktemp -d /tmp/authbench-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/authbench" "$out"
cp "$here/main.go" "$work/src/authbench/"
(cd "$work/src/authbench" && GO111MODULE=off GOPATH="$work:$gocode" GOPROXY=off GOFLAGS= GOCACHE="$work/cache" go build -o "$out/authbench" .)
echo "built $out/authbench"
