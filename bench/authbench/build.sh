#!/bin/sh
# Builds authbench (bench/authbench/main.go, etcd's Go client logged in with
# a user) into OUT_DIR (default build/authbench) with scripts/go_build.sh.
# usage: bench/authbench/build.sh [OUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/../../scripts/go_build.sh" authbench "$here" "${1:-$here/../../build/authbench}"
