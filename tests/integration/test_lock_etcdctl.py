"""`etcdctl lock` (clientv3/concurrency's Mutex on KV, leases and watch)
and python3-etcd3's client.lock(), outputs checked.

Goal: a lock holder prints its key (name/<lease hex>, then the empty
value); a second contender prints nothing until the first exits (SIGTERM:
it unlocks), then prints its own key; `lock NAME CMD` runs CMD with
ETCD_LOCK_KEY and ETCD_LOCK_REV set (the key's revision) and removes the
key afterwards; a holder killed with -9 loses the lock when its session
lease (--ttl) expires; python3-etcd3's lock (a lease + txn on
/locks/NAME) holds the key with its lease, excludes a second txn and is
released.

Method: a fresh single-member server per test; etcdctl runs as a child
read line by line (tests/common/ctlproc.py).  Every expectation holds
against /usr/bin/etcd too (CETCD_TEST_AGAINST_ETCD=1).
"""

import re
import signal
import time

from common.ctlproc import CtlProc

KEY_RE = re.compile(r"^mylock/[0-9a-f]{1,16}$")


def test_two_contenders(server):
    a = CtlProc(server.endpoint, "lock", "mylock")
    ka = a.line()
    assert KEY_RE.match(ka), ka
    assert a.line() == ""  # the lock key's (empty) value
    b = CtlProc(server.endpoint, "lock", "mylock")
    assert b.no_line(1.5)  # waits while a holds it
    keys = server.ctl("get", "--prefix", "mylock/", "--keys-only",
                      "--sort-by=CREATE").out.split()
    assert len(keys) == 2 and keys[0] == ka  # b waits with its own key
    rc, err = a.stop()
    assert rc == 0, err
    kb = b.line()
    assert KEY_RE.match(kb) and kb != ka
    assert b.line() == ""
    rc, err = b.stop()
    assert rc == 0, err
    assert server.ctl("get", "--prefix", "mylock/").out == ""


def test_lock_runs_command_with_env(server):
    r = server.ctl("lock", "mylock", "--", "sh", "-c",
                   'echo "$ETCD_LOCK_KEY $ETCD_LOCK_REV"')
    key, rev = r.out.split()
    assert KEY_RE.match(key), r.out
    # the lock key was the only write: created at revision 2
    assert int(rev) == 2
    assert server.ctl("get", "--prefix", "mylock/").out == ""  # unlocked
    r = server.ctl("lock", "mylock", "--", "sh", "-c", "exit 3", check=False)
    assert r.rc == 1 and r.error_line == "exit status 3"


def test_killed_holder_loses_lock_at_ttl(server):
    a = CtlProc(server.endpoint, "lock", "--ttl=2", "mylock")
    ka = a.line()
    a.stop(sig=signal.SIGKILL)
    t0 = time.time()
    b = CtlProc(server.endpoint, "lock", "mylock")
    kb = b.line(timeout=15)
    assert KEY_RE.match(kb) and kb != ka
    assert time.time() - t0 < 10
    b.stop()


def test_python_etcd3_lock(server):
    # python3-etcd3 0.12's contended acquire() breaks inside the library
    # with this tenacity (its wait() signature), whatever the server: the
    # contention is checked through the lock key instead.
    c = server.client()
    l1 = c.lock("plock", ttl=10)
    assert l1.acquire(timeout=5)
    assert l1.is_acquired()
    value, meta = c.get("/locks/plock")
    assert value == l1.uuid and meta.lease_id == l1.lease.id
    l2 = c.lock("plock", ttl=10)
    ok, _ = c.transaction(compare=[c.transactions.create("/locks/plock") == 0],
                          success=[c.transactions.put("/locks/plock", "x")],
                          failure=[])
    assert not ok  # l1 holds it
    l1.release()
    assert not l1.is_acquired()
    assert c.get("/locks/plock") == (None, None)
    assert l2.acquire(timeout=5)
    l2.release()
