"""put_tail_trace.py SCRIPT [THRESHOLD_MS [SHOW]]: reads `perf script -F
tid,comm,time,event,trace` of a member under one serial client
(put_tail_trace.sh) and prints the server's time per put, the slow puts
with the system calls that overlap them, and the WAL's fdatasync with and
without the pins' writeback (cetcd-snap) in flight."""

import re
import sys

NAMES = {0: "read", 1: "write", 17: "pread", 18: "pwrite", 20: "writev",
         46: "sendmsg", 45: "recvfrom", 74: "fsync", 75: "fdatasync",
         202: "futex", 232: "epoll_wait", 281: "epoll_pwait",
         277: "sync_file_range", 328: "pwritev2", 9: "mmap", 11: "munmap",
         28: "madvise", 285: "fallocate", 230: "clock_nanosleep"}
READS = (0, 45, 17, 19)
WRITES = (1, 20, 46, 44)
SNAP_IO = (277, 328, 75, 74, 18, 1, 20)
LINE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+(\d+\.\d+):\s+(\S+):\s*(.*)$")


def load(path):
    """Completed system calls: (t0, t1, tid, comm, nr, args, ret)."""
    open_calls, calls, faults = {}, [], []
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        comm, tid, t, name, rest = m.groups()
        t, tid = float(t), int(tid)
        if name == "raw_syscalls:sys_enter":
            e = re.match(r"NR (\d+) \(([^)]*)\)", rest)
            if e:
                open_calls[tid] = (t, int(e.group(1)), e.group(2).split(", "))
        elif name == "raw_syscalls:sys_exit":
            e = re.match(r"NR (\d+) = (-?\d+)", rest)
            if e and tid in open_calls:
                t0, nr, args = open_calls.pop(tid)
                calls.append((t0, t, tid, comm, nr, args, int(e.group(2))))
        elif name == "exceptions:page_fault_user":
            faults.append((t, comm))
    calls.sort(key=lambda c: c[0])
    return calls, faults


def puts_of(calls):
    """(start, end) per put: a read on the busiest connection fd of an rpc
    thread, to the next write on it."""
    count = {}
    for c in calls:
        if c[4] in READS and c[6] > 0 and "rpc" in c[3]:
            count[c[5][0]] = count.get(c[5][0], 0) + 1
    fd = max(count, key=count.get)
    puts, start = [], None
    for t0, t1, _, _, nr, args, ret in calls:
        if nr in READS and args[0] == fd and ret > 0 and start is None:
            start = t1
        elif nr in WRITES and args[0] == fd and start is not None:
            puts.append((start, t0))
            start = None
    return puts


def q(v, p):
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


def overlaps(a, b, spans):
    return any(x0 < b and x1 > a for x0, x1 in spans)


def main():
    calls, faults = load(sys.argv[1])
    thr = float(sys.argv[2]) if len(sys.argv) > 2 else 1.2
    show = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    puts = puts_of(calls)
    lat = sorted((b - a) * 1000 for a, b in puts)
    print("server time per put (ms): n %d p50 %.3f p90 %.3f p99 %.3f "
          "p99.9 %.3f max %.3f" % (len(lat), q(lat, .5), q(lat, .9),
                                   q(lat, .99), q(lat, .999), lat[-1]))
    snap = [(c[0], c[1]) for c in calls
            if c[3] == "cetcd-snap" and c[4] in SNAP_IO]
    slow = [(a, b) for a, b in puts if (b - a) * 1000 > thr]
    print("puts with the pins' IO in flight: %d of %d; over %.1f ms: %d, "
          "%d of them with it" % (
              sum(overlaps(a, b, snap) for a, b in puts), len(puts), thr,
              len(slow), sum(overlaps(a, b, snap) for a, b in slow)))
    wal = [(c[0], c[1]) for c in calls
           if c[4] == 75 and c[3] != "cetcd-snap"]
    for label, keep in (("all", lambda x, y: True),
                        ("pins' IO in flight",
                         lambda x, y: overlaps(x, y, snap)),
                        ("no pins' IO", lambda x, y: not overlaps(x, y, snap))):
        d = sorted((y - x) * 1000 for x, y in wal if keep(x, y))
        print("WAL fdatasync (ms), %s: n %d p50 %.3f p90 %.3f p99 %.3f" % (
            label, len(d), q(d, .5), q(d, .9), q(d, .99)))
    for a, b in slow[:show]:
        print("-- put at %.6f took %.3f ms" % (a, (b - a) * 1000))
        for t0, t1, tid, comm, nr, _, ret in calls:
            if t1 >= a and t0 <= b and (t1 - t0) * 1000 >= 0.15:
                print("   %-16s %6d %-16s at %+8.3f for %7.3f ms = %d" % (
                    comm, tid, NAMES.get(nr, nr), (t0 - a) * 1000,
                    (t1 - t0) * 1000, ret))
        for t, comm in faults:
            if a <= t <= b:
                print("   page fault in %s at %+.3f" % (comm, (t - a) * 1000))


if __name__ == "__main__":
    main()
