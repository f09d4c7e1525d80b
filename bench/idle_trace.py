#!/usr/bin/env python3
"""idle_trace.py - one client (python-etcd3) sending a request every 50 ms
to ENDPOINT, COUNT of them (default 1200: a minute): prints p50, p99 and
the longest, then every request over 8 ms with its start time (epoch
seconds), to match against `strace -f -tt -T` of the member.
usage: /usr/bin/python3 bench/idle_trace.py HOST:PORT [COUNT] [range]
"""
import sys
import time

import etcd3


def main():
    host, port = sys.argv[1].split(":")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1200
    ranges = sys.argv[3:] == ["range"]
    c = etcd3.client(host=host, port=int(port))
    c.put("warm", "x")
    lat = []
    nxt = time.time()
    for i in range(n):
        nxt += 0.05
        d = nxt - time.time()
        if d > 0:
            time.sleep(d)
        t0 = time.time()
        if ranges:
            c.get("k%04d" % (i % 1000))
        else:
            c.put("k%04d" % (i % 1000), "v" * 256)
        lat.append((t0, (time.time() - t0) * 1000))
    ls = sorted(l for _, l in lat)
    print("n=%d p50=%.2f p99=%.2f max=%.2f"
          % (len(ls), ls[len(ls) // 2], ls[int(len(ls) * .99)], ls[-1]))
    for t, l in lat:
        if l > 8:
            print("slow %.6f %.2f ms" % (t, l))


if __name__ == "__main__":
    main()
