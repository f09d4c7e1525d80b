#!/bin/bash
# put_c1_ab.sh - 1-client put latency (ebench, etcd's Go client), servers
# alternating, each run on a fresh single member (2 x N puts); prints the
# medians of qps, p50, p99, p99.9 and max per server, and the longest
# request of all its runs.
# usage: bench/put_c1_ab.sh ROUNDS label=BIN [label=BIN ...]
#   N (4000 puts per run), EBENCH (default /tmp/eb/ebench), ETCDCTL
R=$1; shift
EBENCH=${EBENCH:-/tmp/eb/ebench}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
. "$(dirname "$0")/single_common.sh"
one() {
  W=$(mktemp -d /tmp/cetcd-c1.XXXXXX)
  start m "$1" "$W"
  for i in 1 2; do
    "$EBENCH" --endpoints $ep --op put --conns 1 --clients 1 --total ${N:-4000} --key-space-size 100000 --val-size 256 --json | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("qps=%.0f p50=%.2f p99=%.2f p999=%.2f max=%.2f" % (d["qps"], d["p50_ms"], d["p99_ms"], d["p999_ms"], d["max_ms"]))'
  done
  kill $pid; wait $pid 2>/dev/null; rm -rf $W
}
OUT=$(mktemp)
for r in $(seq 1 "$R"); do
  for lb in "$@"; do one "${lb#*=}" | sed "s/^/${lb%%=*} /"; done
done > "$OUT"
python3 - "$OUT" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[1]):
    f = l.split()
    for kv in f[1:]:
        k, v = kv.split('='); d[f[0]][k].append(float(v))
for lab in d:
    print(lab, ' '.join('%s=%.2f' % (k, statistics.median(v)) for k, v in d[lab].items()), 'runs=%d' % len(d[lab]['qps']),
          'longest=%.2f' % max(d[lab]['max']))
PY
rm -f "$OUT"
