"""cetcdctl watch on a member that loses its leader, beside etcdctl's.

Goal: etcdctl's watch asks for a leader (clientv3.WithRequireLeader:
"hasleader" metadata), so when its member has no leader the server ends
the stream with "etcdserver: no leader" and etcdctl prints "watch was
canceled (etcdserver: no leader)" and exits; cetcdctl must do the same
(before this test, cetcdctl's client could not send the metadata and kept
waiting).  Method: a 3-member cluster; etcdctl watch and cetcdctl watch
on m3, each having printed a first event; m1 and m2 killed; both must end
within 20 s with the same stdout, stderr and exit code.
"""

import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctldiff import (  # noqa: E402
    ETCDCTL, cetcdctl_as_etcdctl, cetcdctl_bin, clean_env)

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                 reason="cetcdctl not built")]


def _watch(binary, endpoint):
    return subprocess.Popen([binary, "--endpoints", endpoint, "watch", "k"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=clean_env())


def test_watch_ends_when_the_member_loses_its_leader(make_cluster):
    c = make_cluster(3)
    c.wait_leader()
    m1, m2, m3 = c.members
    procs = [_watch(ETCDCTL, m3.endpoint),
             _watch(cetcdctl_as_etcdctl(), m3.endpoint)]
    time.sleep(1.0)  # both watchers created
    subprocess.run([ETCDCTL, "--endpoints", m3.endpoint, "put", "k", "v"],
                   check=True, capture_output=True, env=clean_env())
    for p in procs:
        assert p.stdout.readline() == b"PUT\n"
        assert p.stdout.readline() == b"k\n"
        assert p.stdout.readline() == b"v\n"
    c.kill(m1)
    c.kill(m2)
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=20)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert results[1] == results[0], results
    assert b"watch was canceled (etcdserver: no leader)" in results[0][2]
