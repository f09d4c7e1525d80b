#!/usr/bin/env bash
# setup.sh - install every Debian package cetcd builds, runs and tests with.
# Idempotent; needs root (or sudo).  Skips apt when everything is present.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev
      libgrpc-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler liblmdb-dev libyaml-dev
      libcrypt-dev libssl-dev libcmocka-dev libjson-c-dev
      python3 python3-pytest python3-etcd3 python3-grpcio python3-h2
      python3-prometheus-client python3-jwt python3-etcd3gw python3-tooz
      etcd-server etcd-client golang-go golang-etcd-server-dev
      iproute2 procps)
# Installed without their recommended packages (Prometheus would bring its
# exporters and their services): the Prometheus server that
# tests/cluster/test_prometheus.py starts itself, and Patroni with
# PostgreSQL for tests/cluster/test_patroni.py.  python3-etcd is named:
# patroni depends on it OR on another store's client, and apt takes
# whichever is there already (a machine with python3-kazoo got no
# etcd store in Patroni at all).
bare=(prometheus patroni postgresql python3-etcd)
missing=()
missing_bare=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing+=("$p")
done
for p in "${bare[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing_bare+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_bare[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    [ ${#missing[@]} -eq 0 ] ||
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
    [ ${#missing_bare[@]} -eq 0 ] ||
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
            --no-install-recommends "${missing_bare[@]}"
fi
# Node.js and npm for tests/nodeclient (the npm etcd3 client, installed
# from the npm registry by tests/nodeclient/install.sh): machines of this
# kind come with them; one without gets Debian's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm
fi
