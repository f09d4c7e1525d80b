#!/bin/sh
# go_build.sh - builds one Go program of this repository (a main.go in its own
# directory) against Debian's etcd 3.4 client sources, in GOPATH mode, as
# /work/shared/tools/ebench/build.sh builds ebench (golang-go,
# golang-etcd-server-dev).  No network needed.  The Go build cache is
# $GOCACHE_DIR if set, else a temporary one.
# usage: scripts/go_build.sh NAME SRC_DIR OUT_DIR   (makes OUT_DIR/NAME)
set -eu
name=$1; src=$(cd "$2" && pwd); out=$3
gocode=${GOCODE:-/usr/share/gocode}
[ -d "$gocode/src/go.etcd.io/etcd/clientv3" ] || { echo "go_build.sh: install golang-etcd-server-dev" >&2; exit 1; }
work=$(mktemp -d "/tmp/$name-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/$name" "$out"
cp "$src/main.go" "$work/src/$name/"
(cd "$work/src/$name" && GO111MODULE=off GOPATH="$work:$gocode" GOPROXY=off GOFLAGS= GOCACHE="${GOCACHE_DIR:-$work/cache}" go build -o "$out/$name" .)
echo "built $out/$name"
