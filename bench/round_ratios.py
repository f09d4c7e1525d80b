#!/usr/bin/env python3
"""round_ratios.py - the per-round cetcd/etcd qps ratios of one or more
bench/compare.sh outputs (its stdout, with the "== round i/n: server"
lines and the per-workload lines under them), pooled per workload: their
median, how many rounds reached 2x, and every ratio sorted.  compare.sh's
own "qps ratio" column is the ratio of the two medians; this is the median
of the ratios, over as many runs as are given.
usage: bench/round_ratios.py COMPARE_OUTPUT...
"""
import collections
import re
import statistics
import sys


def main():
    pooled = collections.defaultdict(list)
    for path in sys.argv[1:]:
        qps, rnd = {}, 0
        for line in open(path):
            m = re.match(r"== round (\d+)/\d+: ", line)
            if m:
                rnd = int(m.group(1))
                continue
            m = re.match(r"\s+(\w+) (\S+) \((go|c)\): \S+ ([\d.]+)", line)
            if m:
                key = (m.group(2), m.group(3))
                qps[(rnd, m.group(1), key)] = float(m.group(4))
        for (r, server, key), q in qps.items():
            ref = qps.get((r, "etcd", key))
            if server == "cetcd" and ref:
                pooled[key].append(q / ref)
    for (work, client), v in sorted(pooled.items()):
        v.sort()
        print("%s (%s): rounds %d, median %.2f, >= 2x in %d: %s" % (
            work, client, len(v), statistics.median(v),
            sum(x >= 2 for x in v), " ".join("%.2f" % x for x in v)))


if __name__ == "__main__":
    main()
