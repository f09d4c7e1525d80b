#!/bin/sh
# Builds goclient (tests/goclient/main.go: the recipes of etcd's Go client
# checked against a server) into OUT_DIR (default build/goclient) in GOPATH
# mode against Debian's etcd 3.4 client sources (golang-go,
# golang-etcd-server-dev), as bench/authbench/build.sh does.  No network.
# usage: tests/goclient/build.sh [OUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../build/goclient}
gocode=${GOCODE:-/usr/share/gocode}
[ -d "$gocode/src/go.etcd.io/etcd/clientv3" ] || { echo "build.sh: install golang-etcd-server-dev" >&2; exit 1; }
work=$(mktemp -d /tmp/goclient-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/goclient" "$out"
cp "$here/main.go" "$work/src/goclient/"
(cd "$work/src/goclient" && GO111MODULE=off GOPATH="$work:$gocode" GOPROXY=off GOFLAGS= GOCACHE="${GOCACHE_DIR:-$work/cache}" go build -o "$out/goclient" .)
echo "built $out/goclient"
