#!/bin/sh
# Builds goclient (tests/goclient/main.go: the recipes of etcd's Go client
# checked against a server) into OUT_DIR (default build/goclient) with
# scripts/go_build.sh.
# usage: tests/goclient/build.sh [OUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/../../scripts/go_build.sh" goclient "$here" "${1:-$here/../../build/goclient}"
