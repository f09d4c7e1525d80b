"""`etcdctl check datascale` against the member.

Goal: the real etcdctl's data-scale check passes against cetcd as it does
against etcd 3.4.23: 10 000 puts from 50 clients of 537-byte keys (past
LMDB's key limit: cetcd's long-key path) and 512-byte values, the
process's RSS read from /metrics before and after, then one DeleteRange of
the whole prefix (issue 14: that delete once took longer than etcdctl
waited).  Method: run the command with a generous timeout, check its PASS
line and exit code, then that the prefix is empty and that the store took
exactly the 10 000 puts and the one delete (revision + 10 001).  Also runs
against etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import re

PREFIX = "/etcdctl-check-datascale/"


def test_check_datascale_small(server):
    rev0 = server.rev()
    r = server.ctl("check", "datascale", "--load=s", check=False, timeout=300)
    assert r.rc == 0, r
    assert re.search(r"^PASS: Approximate system memory used : [0-9.]+ MB\.$",
                     r.out, re.M), r.out
    left = server.ctl("get", PREFIX, "--prefix", "--keys-only")
    assert left.out == "", left.out
    assert server.rev() == rev0 + 10000 + 1
