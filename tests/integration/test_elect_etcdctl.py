"""`etcdctl elect` (clientv3/concurrency's Election on KV, leases and
watch), outputs checked.

Goal: `elect NAME VALUE` prints the leader key (NAME/<lease hex>) and its
value once elected; a second candidate prints nothing while the first
leads and takes over when it exits (SIGTERM: it resigns); `elect -l NAME`
prints each leader's key and value, in order, starting with the current
one.

Method: a fresh single-member server per test; etcdctl runs as children
read line by line (tests/common/ctlproc.py).  Every expectation holds
against /usr/bin/etcd too (CETCD_TEST_AGAINST_ETCD=1).
"""

import re

from common.ctlproc import CtlProc

KEY_RE = re.compile(r"^myelection/[0-9a-f]{1,16}$")


def test_campaign_and_takeover(server):
    a = CtlProc(server.endpoint, "elect", "myelection", "alice")
    ka = a.line()
    assert KEY_RE.match(ka), ka
    assert a.line() == "alice"
    b = CtlProc(server.endpoint, "elect", "myelection", "bob")
    assert b.no_line(1.5)  # a leads
    rc, err = a.stop()
    assert rc == 0, err
    kb = b.line()
    assert KEY_RE.match(kb) and kb != ka
    assert b.line() == "bob"
    rc, err = b.stop()
    assert rc == 0, err
    assert server.ctl("get", "--prefix", "myelection/").out == ""


def test_observe_prints_each_leader(server):
    obs = CtlProc(server.endpoint, "elect", "-l", "myelection")
    assert obs.no_line(0.5)  # no leader yet
    a = CtlProc(server.endpoint, "elect", "myelection", "alice")
    ka = a.line()
    assert obs.line() == ka and obs.line() == "alice"
    b = CtlProc(server.endpoint, "elect", "myelection", "bob")
    assert b.no_line(1.0)
    a.stop()
    kb = b.line()
    assert obs.line() == kb and obs.line() == "bob"
    # a later observer starts with the current leader
    obs2 = CtlProc(server.endpoint, "elect", "-l", "myelection")
    assert obs2.line() == kb and obs2.line() == "bob"
    b.stop()
    for o in (obs, obs2):
        rc, err = o.stop()
        assert rc == 0, err
