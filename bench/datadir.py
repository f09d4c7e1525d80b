#!/usr/bin/python3
"""datadir.py - what each part of a member's data dir takes, after a load,
after a clean stop and after a restart (docs/BENCHMARKS.md "The data dir's
size").  One fresh single member on free ports per run.

  kv [MB]        MB (256) of live data: MB*1024 keys of 16 bytes with
                 1000-byte values (VAL), put PASSES times (1; a second pass
                 overwrites every key, so the store holds two revisions of
                 each until a compaction)
  leases [N]     N leases (100000), each holding one key of 16 bytes with
                 a 32-byte value (cetcd-bench lease-put, TTL 1 day)

Printed per phase (loaded, stopped, restarted): every file of the data dir
with its apparent size and its allocated blocks (du), grouped by part
(db, wal, snap, other); for LMDB's data.mdb also the extent (last page + 1,
etcd's dbSize), the pages in use (extent minus the free list; Status
dbSizeInUse, read while the member runs, is the trees' pages) and the pages the trees hold (mdb_stat -a, if lmdb-utils is
installed); the live data (keys + values as loaded); and the ratios of the
whole dir's allocated bytes to the store's size in use and to the live data.
A last line "RESULT ..." has the numbers in one row.

environment: CETCD_BIN (build/cetcd; etcd's binary works too, with
NAME=etcd: its layout is member/snap/db and member/wal), CETCD_BENCH
(build/src/bench/cetcd-bench), FLAGS (extra server flags, e.g.
"--snapshot-count 10000"), VAL (1000), PASSES (1), KEEP (1: keep the dir),
CLIENTS (the load's clients: 32 for kv, 100 for leases), CONNS (their
connections: min(CLIENTS, 4) for kv, min(CLIENTS, 10) for leases).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CETCD_BIN", os.path.join(ROOT, "build", "cetcd"))
BENCH = os.environ.get("CETCD_BENCH", os.path.join(ROOT, "build", "src",
                                                   "bench", "cetcd-bench"))
NAME = os.environ.get("NAME", "cetcd")
FLAGS = os.environ.get("FLAGS", "").split()
VAL = int(os.environ.get("VAL", "1000"))
PASSES = int(os.environ.get("PASSES", "1"))
CLIENTS = os.environ.get("CLIENTS")
CONNS = os.environ.get("CONNS")
MIB = 1048576.0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Member:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="cetcd-datadir-")
        self.data = os.path.join(self.dir, "data")
        self.port, self.peer = free_port(), free_port()
        self.ep = "127.0.0.1:%d" % self.port
        self.proc = None

    def start(self, timeout=600):
        peer = "http://127.0.0.1:%d" % self.peer
        self.proc = subprocess.Popen(
            [BIN, "--name", "m", "--data-dir", self.data,
             "--listen-client-urls", "http://" + self.ep,
             "--advertise-client-urls", "http://" + self.ep,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls",
             peer, "--initial-cluster", "m=" + peer,
             "--quota-backend-bytes", str(8 << 30)] + FLAGS,
            stdout=open(os.path.join(self.dir, "log"), "ab"),
            stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.status() is not None:
                return time.monotonic() - t0
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("the member did not start (log in %s)" % self.dir)

    def status(self):
        r = subprocess.run(["etcdctl", "--endpoints", self.ep,
                            "--command-timeout", "30s", "endpoint", "status",
                            "-w", "json"], env=dict(os.environ,
                                                   ETCDCTL_API="3"),
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)[0]["Status"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()


def mdb_numbers(dbdir):
    """Page size, extent pages, free pages and tree pages of data.mdb."""
    out = {}
    try:
        r = subprocess.run(["mdb_stat", "-efa", dbdir], capture_output=True,
                           text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return out
    if r.returncode != 0:
        return out
    tree = 0
    for line in r.stdout.splitlines():
        line = line.strip()
        m = re.match(r"Page size: (\d+)", line)
        if m:
            out["psize"] = int(m.group(1))
        m = re.match(r"Number of pages used: (\d+)", line)
        if m:
            out["extent_pages"] = int(m.group(1))
        m = re.match(r"Free pages: (\d+)", line)
        if m:
            out["free_pages"] = int(m.group(1))
        m = re.match(r"(Branch|Leaf|Overflow) pages: (\d+)", line)
        if m:
            tree += int(m.group(2))
    out["tree_pages"] = tree
    return out


def part_of(rel):
    """The data dir part a file belongs to (cetcd's and etcd's layouts)."""
    if "/wal/" in "/" + rel or rel.startswith("wal"):
        return "wal"
    if rel.endswith(".mdb") or "/db/" in "/" + rel or rel.endswith("snap/db"):
        return "db"
    if "/snap/" in "/" + rel:
        return "snap"
    return "other"


def breakdown(m, phase, live_bytes, status):
    files = []
    for d, _, fs in os.walk(m.data):
        for f in fs:
            p = os.path.join(d, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            files.append((os.path.relpath(p, m.data), st.st_size,
                          st.st_blocks * 512))
    files.sort()
    parts = {}
    print("== %s: %s" % (NAME, phase))
    for rel, size, alloc in files:
        part = part_of(rel)
        a = parts.setdefault(part, [0, 0, 0])
        a[0] += 1
        a[1] += size
        a[2] += alloc
        if alloc >= MIB or size >= MIB:
            print("  %-5s %-44s apparent %9.1f MiB  allocated %9.1f MiB"
                  % (part, rel, size / MIB, alloc / MIB))
    total = sum(a[2] for a in parts.values())
    for part in ("db", "wal", "snap", "other"):
        a = parts.get(part, [0, 0, 0])
        print("  part %-5s files %3d  apparent %9.1f MiB  allocated %9.1f MiB"
              % (part, a[0], a[1] / MIB, a[2] / MIB))
    row = {"phase": phase, "total_mib": total / MIB}
    for part in ("db", "wal", "snap", "other"):
        row[part + "_mib"] = parts.get(part, [0, 0, 0])[2] / MIB
    dbdir = None
    for rel, _, _ in files:
        if rel.endswith("data.mdb") and "untrusted" not in rel \
                and "defrag" not in rel:
            dbdir = os.path.dirname(os.path.join(m.data, rel))
    if dbdir is not None and m.proc.poll() is not None:
        n = mdb_numbers(dbdir)
        if "psize" in n:
            ps = n["psize"]
            ext = n.get("extent_pages", 0) * ps
            used = ext - n.get("free_pages", 0) * ps
            print("  lmdb: extent %.1f MiB, in use %.1f MiB (free list %.1f"
                  " MiB), trees %.1f MiB" % (ext / MIB, used / MIB,
                                             n.get("free_pages", 0) * ps / MIB,
                                             n["tree_pages"] * ps / MIB))
            row["extent_mib"], row["in_use_mib"] = ext / MIB, used / MIB
    if status is not None:
        size, in_use = int(status["dbSize"]), int(status.get(
            "dbSizeInUse", status["dbSize"]))
        print("  Status: dbSize %.1f MiB, dbSizeInUse %.1f MiB"
              % (size / MIB, in_use / MIB))
        row["extent_mib"], row["in_use_mib"] = size / MIB, in_use / MIB
    print("  live data (keys + values) %.1f MiB" % (live_bytes / MIB))
    if row.get("in_use_mib"):
        print("  data dir / store in use = %.2f, data dir / live data = %.2f"
              % (row["total_mib"] / row["in_use_mib"],
                 total / max(live_bytes, 1)))
    sys.stdout.flush()
    return row


def clients(default, conns_max):
    c = int(CLIENTS) if CLIENTS else default
    return str(c), CONNS if CONNS else str(min(c, conns_max))


def load(m, mode, arg):
    if mode == "kv":
        keys = arg * 1024
        cl, co = clients(32, 4)
        for _ in range(PASSES):
            subprocess.run([BENCH, "--endpoints", m.ep, "--conns", co,
                            "--clients", cl, "--total", str(keys),
                            "--key-size", "16", "--val-size", str(VAL),
                            "--key-space-size", str(keys),
                            "--sequential-keys", "put"],
                           check=True, stdout=subprocess.DEVNULL)
        return keys * (16 + VAL)
    cl, co = clients(100, 10)
    subprocess.run([BENCH, "--endpoints", m.ep, "--conns", co,
                    "--clients", cl, "--total", str(arg), "--key-size",
                    "16", "--val-size", "32", "--lease-ttl", "86400",
                    "lease-put"], check=True, stdout=subprocess.DEVNULL)
    return arg * (16 + 32)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "kv"
    if mode not in ("kv", "leases"):
        sys.exit(__doc__)
    arg = int(sys.argv[2]) if len(sys.argv) > 2 else (
        256 if mode == "kv" else 100000)
    m = Member()
    rows = []
    try:
        m.start()
        t0 = time.monotonic()
        samples, done = [], threading.Event()

        def sample():
            # dbSize and dbSizeInUse during the load, every 5 s
            while not done.wait(5):
                st = m.status()
                if st is not None:
                    samples.append((time.monotonic() - t0,
                                    int(st["dbSize"]) / MIB,
                                    int(st.get("dbSizeInUse",
                                               st["dbSize"])) / MIB))
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        live = load(m, mode, arg)
        load_s = time.monotonic() - t0
        done.set()
        th.join()
        step = max(1, len(samples) // 12)
        print("during the load (s: dbSize/dbSizeInUse MiB): " + ", ".join(
            "%.0f: %.0f/%.0f" % x for x in samples[::step]))
        time.sleep(3)
        rows.append(breakdown(m, "loaded (%.0f s)" % load_s, live,
                              m.status()))
        m.stop()
        rows.append(breakdown(m, "stopped", live, None))
        rs = m.start()
        time.sleep(3)
        rows.append(breakdown(m, "restarted (%.1f s)" % rs, live,
                              m.status()))
        m.stop()
        print("RESULT %s %s %d (clients %s): " % (
            NAME, mode, arg, CLIENTS or "default") + "; ".join(
            "%s total %.0f db %.0f wal %.0f snap %.0f in_use %.0f MiB" % (
                r["phase"].split()[0], r["total_mib"], r["db_mib"],
                r["wal_mib"], r["snap_mib"], r.get("in_use_mib", 0))
            for r in rows) + "; live %.0f MiB" % (live / MIB))
    finally:
        if m.proc and m.proc.poll() is None:
            m.proc.kill()
            m.proc.wait()
        if os.environ.get("KEEP") == "1":
            print("kept", m.dir)
        else:
            shutil.rmtree(m.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
