#!/usr/bin/env python3
"""fsync_lat.py - the disk's fdatasync latency, the floor under every write.

Appends COUNT (default 1000) blocks of 4 KiB to a fresh file in DIR and
fdatasyncs after each (the time of append + fdatasync is measured), like a WAL committing one small batch at a time.
Prints one line: FSYNC count=N p50_ms=.. p99_ms=.. avg_ms=.. max_ms=..
usage: fsync_lat.py DIR [COUNT]
"""
import os
import sys
import time


def main():
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    path = os.path.join(d, "fsync_lat.tmp")
    buf = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                 0o600)
    lats = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, buf)
            os.fdatasync(fd)
            lats.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    lats.sort()
    pct = lambda p: lats[min(n - 1, int(n * p / 100.0))] * 1e3
    print("FSYNC count=%d p50_ms=%.3f p99_ms=%.3f avg_ms=%.3f max_ms=%.3f"
          % (n, pct(50), pct(99), sum(lats) / n * 1e3, lats[-1] * 1e3))


if __name__ == "__main__":
    main()
