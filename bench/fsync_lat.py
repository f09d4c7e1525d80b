#!/usr/bin/env python3
"""fsync_lat.py - the disk's fdatasync latency, the floor under every write.

Default: appends COUNT (default 1000) blocks of 4 KiB to a fresh file in
DIR and fdatasyncs after each (the time of append + fdatasync is
measured), like a WAL committing one small batch at a time.
--wal: writes COUNT records of 320 bytes one after the other into a
64 MiB file preallocated with fallocate, fdatasync after each: what
cetcd's WAL does for one serial put (a segment is fallocated ahead).
--walz: the same into a file whose 64 MiB were written with zeros and
synced first (no unwritten extent left: an fdatasync of an overwrite
needs no journal commit).
--waldirect: the --wal records written with O_DIRECT | O_DSYNC instead,
each write the whole 4 KiB block(s) holding the new record (kept in an
aligned buffer), no fdatasync: the page cache and writeback skipped.
Prints one line: FSYNC count=N p50_ms=.. p99_ms=.. avg_ms=.. max_ms=..
usage: fsync_lat.py [--wal|--walz|--waldirect] DIR [COUNT]
"""
import mmap
import os
import sys
import time


def direct_records(path, n, rec=320, blk=4096):
    """Latencies of n O_DIRECT|O_DSYNC writes of the block(s) that hold
    each new rec-byte record, into a fallocated 64 MiB file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT |
                 os.O_DSYNC, 0o600)
    lats = []
    try:
        os.posix_fallocate(fd, 0, 64 << 20)
        os.fsync(fd)
        buf = mmap.mmap(-1, 2 * blk)  # page-aligned, as O_DIRECT needs
        data = os.urandom(rec)
        base = 0  # the file offset of buf[0]
        for i in range(n):
            off = i * rec
            buf[off - base:off - base + rec] = data
            size = -(-(off + rec - base) // blk) * blk
            t0 = time.perf_counter()
            os.pwrite(fd, memoryview(buf)[:size], base)
            lats.append(time.perf_counter() - t0)
            if (off + rec) // blk * blk > base:  # a block filled: slide
                nb = (off + rec) // blk * blk
                buf[0:blk] = buf[nb - base:nb - base + blk]
                base = nb
    finally:
        os.close(fd)
        os.unlink(path)
    return lats


def main():
    args = sys.argv[1:]
    direct = bool(args) and args[0] == "--waldirect"
    wal = bool(args) and args[0] in ("--wal", "--walz", "--waldirect")
    zeros = bool(args) and args[0] == "--walz"
    if wal:
        args = args[1:]
    d = args[0]
    n = int(args[1]) if len(args) > 1 else 1000
    path = os.path.join(d, "fsync_lat.tmp")
    if direct:
        report(direct_records(path, n), n)
        return
    if wal:
        buf = os.urandom(320)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.posix_fallocate(fd, 0, 64 << 20)
        if zeros:
            z = bytes(1 << 20)
            for off in range(0, 64 << 20, 1 << 20):
                os.pwrite(fd, z, off)
        os.fsync(fd)
    else:
        buf = os.urandom(4096)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                     0o600)
    lats = []
    try:
        for i in range(n):
            t0 = time.perf_counter()
            if wal:
                os.pwrite(fd, buf, i * len(buf))
            else:
                os.write(fd, buf)
            os.fdatasync(fd)
            lats.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    report(lats, n)


def report(lats, n):
    lats.sort()
    pct = lambda p: lats[min(n - 1, int(n * p / 100.0))] * 1e3
    print("FSYNC count=%d p50_ms=%.3f p99_ms=%.3f avg_ms=%.3f max_ms=%.3f"
          % (n, pct(50), pct(99), sum(lats) / n * 1e3, lats[-1] * 1e3))


if __name__ == "__main__":
    main()
