"""--auto-compaction-mode / --auto-compaction-retention, as etcd 3.4.

Goal: with `periodic` and a retention P the member compacts every P (P
under an hour) at the revision it had P earlier; with `revision` and N
it compacts at current - N (every 5 minutes in etcd; tests shorten that
with CETCD_TEST_COMPACTOR_INTERVAL_MS, cetcd only); each logs etcd's
"Starting/Finished auto-compaction at revision R" lines; a bad value or
mode stops the member with etcd's message.  Before, the retention flag
was refused as not built.

Method: a member with periodic 2s (also run against etcd 3.4.23) or
revision 10 gets a put every 100 ms for about 7 s; each acknowledged put's
(time, revision) is recorded.  Each "Finished" revision R from the log
must be compacted for real (a Range at R - 1 answers "required revision
has been compacted", one at R answers) and, for periodic, be a revision
the store had between 1 and 4.5 s before the log line (P = 2 s, with room
for the sampling and a loaded machine); for revision mode, at most N + a
few puts behind the newest revision acknowledged before the line.
"""

import os
import re
import subprocess
import time
from datetime import datetime

import grpc
import pytest

from conftest import against_etcd, server_bin
from etcd3.etcdrpc import rpc_pb2

FINISHED = re.compile(r"^(\S+ \S+) N \| compactor: Finished auto-compaction "
                      r"at revision (\d+)$", re.M)
COMPACTED = "etcdserver: mvcc: required revision has been compacted"


def write_for(kv, seconds):
    """Puts every 100 ms; returns [(wall time, revision)]."""
    seen = []
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        r = kv.Put(rpc_pb2.PutRequest(key=b"ac/%d" % (i % 7), value=b"v"),
                   timeout=10)
        seen.append((time.time(), r.header.revision))
        i += 1
        time.sleep(0.1)
    return seen


def finished(log_path):
    with open(log_path, errors="replace") as f:
        text = f.read()
    return [(datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f").timestamp(),
             int(r)) for t, r in FINISHED.findall(text)]


def rev_at(seen, t):
    """The newest revision acknowledged at or before wall time t (1 if
    none)."""
    revs = [r for (w, r) in seen if w <= t]
    return revs[-1] if revs else 1


def really_compacted(kv, rev):
    if rev > 1:
        with pytest.raises(grpc.RpcError) as e:
            kv.Range(rpc_pb2.RangeRequest(key=b"ac/", revision=rev - 1),
                     timeout=10)
        assert (e.value.code(), e.value.details()) == (
            grpc.StatusCode.OUT_OF_RANGE, COMPACTED)
    kv.Range(rpc_pb2.RangeRequest(key=b"ac/", revision=rev), timeout=10)


def test_periodic(make_server):
    s = make_server(extra_args=["--auto-compaction-retention", "2s"])
    kv = s.kv()
    seen = write_for(kv, 7)
    time.sleep(0.3)
    done = [(t, r) for (t, r) in finished(s.log_path) if r > 1]
    assert len(done) >= 2, open(s.log_path).read()[-3000:]
    for t, r in done:
        assert rev_at(seen, t - 4.5) <= r <= rev_at(seen, t - 1.0), (
            t, r, seen)
    really_compacted(kv, done[-1][1])


@pytest.mark.skipif(against_etcd(), reason="etcd's revision compactor "
                    "looks every 5 minutes, a constant")
def test_revision(make_server, monkeypatch):
    monkeypatch.setenv("CETCD_TEST_COMPACTOR_INTERVAL_MS", "500")
    s = make_server(extra_args=["--auto-compaction-mode", "revision",
                                "--auto-compaction-retention", "10"])
    kv = s.kv()
    seen = write_for(kv, 4)
    time.sleep(1.0)
    done = finished(s.log_path)
    assert len(done) >= 3, open(s.log_path).read()[-3000:]
    for t, r in done:
        newest = rev_at(seen, t)
        assert newest - 10 - 8 <= r <= newest - 10, (t, r, newest)
    assert len({r for _, r in done}) == len(done)  # never the same twice
    really_compacted(kv, done[-1][1])


@pytest.mark.parametrize("args, line", [
    (["--auto-compaction-retention", "abc"],
     'C | etcdmain: error parsing CompactionRetention: time: invalid '
     'duration "abc"'),
    (["--auto-compaction-retention", "1x"],
     'C | etcdmain: error parsing CompactionRetention: time: unknown unit '
     '"x" in duration "1x"'),
    (["--auto-compaction-retention", "1.5"],
     'C | etcdmain: error parsing CompactionRetention: time: missing unit '
     'in duration "1.5"'),
    (["--auto-compaction-mode", "foo"],
     'E | etcdmain: error verifying flags, unknown auto-compaction-mode '
     '"foo". See \'etcd --help\'.'),
])
def test_bad_values(tmp_path, args, line):
    p = subprocess.run([server_bin(), "--data-dir", str(tmp_path / "d"),
                        "--listen-client-urls", "http://127.0.0.1:0",
                        "--advertise-client-urls", "http://127.0.0.1:0",
                        "--listen-peer-urls", "http://127.0.0.1:0",
                        "--initial-advertise-peer-urls",
                        "http://127.0.0.1:1"] + args,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert line in p.stderr, p.stderr
