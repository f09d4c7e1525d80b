# single_common.sh - sourced by bench scripts that run one fresh single
# member at a time (defrag.sh, snapshot_bench.sh): free ports, start, and
# the ebench put load.  Needs ETCDCTL (etcdctl v3) and, for load_put,
# EBENCH set by the caller.

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start NAME BIN DIR [TRIES] -> sets ep and pid; waits up to TRIES x 0.2 s
# (default 100) for the member to answer, else exits 1.
start() {
    local name=$1 bin=$2 dir=$3 tries=${4:-100}
    local cp pp
    cp=$(free_port); pp=$(free_port)
    ep=127.0.0.1:$cp
    "$bin" --name "$name" --data-dir "$dir/data" \
        --listen-client-urls "http://$ep" --advertise-client-urls "http://$ep" \
        --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "$name=http://127.0.0.1:$pp" \
        --quota-backend-bytes $((8 << 30)) >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq "$tries"); do
        "$ETCDCTL" --endpoints "$ep" get x >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "$name did not start" >&2
    exit 1
}

# load_put EP SECONDS -> one ebench JSON line (errors are in it: ebench's
# exit 1 is kept): 100 clients over 10 connections, 256-byte puts.
load_put() {
    "$EBENCH" --endpoints "$1" --op put --conns 10 --clients 100 \
        --duration "${2}s" --key-size 16 --val-size 256 \
        --key-prefix "l/" --key-space-size 100000 --json || true
}
