#!/usr/bin/env bash
# setup.sh - install every Debian package cetcd builds, runs and tests with.
# Idempotent; needs root (or sudo).  Skips apt when everything is present.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev
      libgrpc-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler liblmdb-dev libcrypt-dev
      libssl-dev libcmocka-dev
      python3 python3-pytest python3-etcd3 python3-grpcio python3-h2
      python3-prometheus-client
      etcd-server etcd-client golang-go golang-etcd-server-dev
      iproute2 procps)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
