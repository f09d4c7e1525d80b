"""Watch through the real etcdctl (ETCDCTL_API=3 etcdctl watch), outputs checked.

Goal: `etcdctl watch` prints what it prints against etcd 3.4.23: one key,
--prefix, a range, --rev=N replay, --prev-kv, a txn's events in one response
(-w json prints one object per response), and a watch at a compacted
revision ends with etcd's compaction message (stderr) and exit code 5.

Method: each test gets a fresh server.  A watch starts at --rev=<current+1>
so what it prints does not depend on when its stream was set up; the test
writes, then reads the watch's stdout until the expected text is there (or
a timeout), then stops the process.  Every expectation here was checked
against /usr/bin/etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import json
import os
import selectors
import subprocess
import time

from conftest import ETCDCTL_BIN


def start_watch(server, *args):
    env = dict(os.environ)
    env["ETCDCTL_API"] = "3"
    cmd = [ETCDCTL_BIN, "--endpoints", server.endpoint, "watch"] + [
        str(a) for a in args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def read_until(proc, want_len, timeout=10.0):
    """Stdout of proc until it holds want_len bytes (or timeout); stops it."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    out = b""
    end = time.time() + timeout
    while len(out) < want_len and time.time() < end:
        if sel.select(timeout=0.2):
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    proc.kill()
    proc.wait()
    return out.decode()


def wait_exit(proc, timeout=10.0):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


def test_watch_one_key(server):
    rev = server.rev()
    p = start_watch(server, "foo", "--rev", rev + 1)
    server.ctl("put", "foo", "a")
    server.ctl("put", "bar", "x")
    server.ctl("put", "foo", "b")
    server.ctl("del", "foo")
    want = "PUT\nfoo\na\nPUT\nfoo\nb\nDELETE\nfoo\n\n"
    assert read_until(p, len(want)) == want


def test_watch_prefix_and_range(server):
    rev = server.rev()
    p = start_watch(server, "--prefix", "fo", "--rev", rev + 1)
    q = start_watch(server, "a", "c", "--rev", rev + 1)
    for k in ("foo", "bar", "fox", "abc", "f", "c"):
        server.ctl("put", k, "v-" + k)
    want_p = "PUT\nfoo\nv-foo\nPUT\nfox\nv-fox\n"
    want_q = "PUT\nbar\nv-bar\nPUT\nabc\nv-abc\n"
    assert read_until(p, len(want_p)) == want_p
    assert read_until(q, len(want_q)) == want_q


def test_watch_rev_replays_history(server):
    server.ctl("put", "k", "1")  # rev 2
    server.ctl("put", "k", "2")  # rev 3
    server.ctl("put", "k", "3")  # rev 4
    p = start_watch(server, "k", "--rev", 3)
    want = "PUT\nk\n2\nPUT\nk\n3\n"
    assert read_until(p, len(want)) == want


def test_watch_prev_kv(server):
    server.ctl("put", "k", "old")
    rev = server.rev()
    p = start_watch(server, "k", "--prev-kv", "--rev", rev + 1)
    server.ctl("put", "k", "new")
    server.ctl("del", "k")
    server.ctl("put", "k", "again")
    want = ("PUT\nk\nold\nk\nnew\n"
            "DELETE\nk\nnew\nk\n\n"
            "PUT\nk\nagain\n")
    assert read_until(p, len(want)) == want


def test_watch_txn_events_in_one_response(server):
    rev = server.rev()
    p = start_watch(server, "--prefix", "t", "-w", "json", "--rev", rev + 1)
    server.ctl("txn", input="\nput t1 a\nput t2 b\ndel t3\n\n\n")
    server.ctl("put", "t4", "c")
    out = read_until(p, 10 ** 9, timeout=3.0)
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    assert len(lines) == 2, out
    first, second = lines
    assert [e["kv"]["key"] for e in first["Events"]] == ["dDE=", "dDI="]
    assert all(e["kv"]["mod_revision"] == rev + 1 for e in first["Events"])
    assert [e["kv"]["key"] for e in second["Events"]] == ["dDQ="]
    assert first["Header"]["revision"] == rev + 1
    assert first["Header"]["cluster_id"] != 0


def test_watch_compacted_revision(server):
    for i in range(4):
        server.ctl("put", "c", str(i))  # revs 2..5
    server.ctl("compaction", "4")
    p = start_watch(server, "c", "--rev", 2)
    rc, out, err = wait_exit(p)
    assert (rc, out) == (5, ""), (rc, out, err)
    assert err == ("watch was canceled (etcdserver: mvcc: required revision "
                   "has been compacted)\n"
                   "Error: watch is canceled by the server\n"), err
    # At the compact revision itself everything still there is sent.
    p = start_watch(server, "c", "--rev", 4)
    want = "PUT\nc\n2\nPUT\nc\n3\n"
    assert read_until(p, len(want)) == want
