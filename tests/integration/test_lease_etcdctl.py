"""Leases through the real etcdctl (ETCDCTL_API=3), outputs checked.

Goal: `etcdctl lease grant/revoke/keep-alive/timetolive [--keys]/list` and
`put --lease`/`put --ignore-lease` print what etcd 3.4.23 prints (lines,
exit codes, the `Error: ...` text), keys go with their lease (revoke and
expiry, one revision for all of a lease's keys), and leases survive a
restart.

Method: a fresh single-member server per test (conftest `server`).  Lease
ids are the server's choice, so outputs are matched with the id captured
from `lease grant`.  The expiry test waits out a 2 s lease (the minimum
TTL with the default 1 s election timeout is 2 s).  Every expectation was
checked against /usr/bin/etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import json
import re
import time

GRANT_RE = re.compile(r"^lease ([0-9a-f]{16}) granted with TTL\((\d+)s\)\n$")


def grant(server, ttl):
    out = server.ctl("lease", "grant", str(ttl)).out
    m = GRANT_RE.match(out)
    assert m, out
    return m.group(1), int(m.group(2))


def err(server, *args, rc=1):
    r = server.ctl(*args, check=False)
    assert r.rc == rc, r
    return r.error_line


def rev(server):
    return json.loads(server.ctl("get", "x", "-w", "json").out)[
        "header"]["revision"]


def test_grant_ttls(server):
    _, ttl = grant(server, 10)
    assert ttl == 10
    _, ttl = grant(server, 1)  # raised to the minimum TTL
    assert ttl == 2
    assert err(server, "lease", "grant", "9000000001") == \
        "failed to grant lease (etcdserver: too large lease TTL)"


def test_put_lease_and_timetolive_keys(server):
    lid, _ = grant(server, 30)
    assert server.ctl("put", "--lease=" + lid, "foo", "bar").out == "OK\n"
    assert server.ctl("put", "--lease=" + lid, "zoo", "z").out == "OK\n"
    # remaining: whole seconds since the grant, each etcdctl run may take
    # a second or more on a loaded machine (29|30 failed once here)
    out = server.ctl("lease", "timetolive", lid).out
    assert re.match(r"^lease %s granted with TTL\(30s\), "
                    r"remaining\((2[0-9]|30)s\)\n$" % lid, out), out
    out = server.ctl("lease", "timetolive", "--keys", lid).out
    assert re.match(r"^lease %s granted with TTL\(30s\), "
                    r"remaining\((2[0-9]|30)s\)"
                    r", attached keys\(\[(foo zoo|zoo foo)\]\)\n$" % lid,
                    out), out
    kv = json.loads(server.ctl("get", "foo", "-w", "json").out)["kvs"][0]
    assert kv["lease"] == int(lid, 16)


def test_timetolive_unknown(server):
    assert server.ctl("lease", "timetolive", "1234").out == \
        "lease 0000000000001234 already expired\n"


def test_put_unknown_lease(server):
    assert err(server, "put", "--lease", "1234", "k", "v") == \
        "etcdserver: requested lease not found"


def test_put_ignore_lease_keeps_it(server):
    lid, _ = grant(server, 30)
    server.ctl("put", "--lease=" + lid, "k", "v1")
    assert server.ctl("put", "--ignore-lease", "k", "v2").out == "OK\n"
    kv = json.loads(server.ctl("get", "k", "-w", "json").out)["kvs"][0]
    assert kv["lease"] == int(lid, 16)
    out = server.ctl("lease", "timetolive", "--keys", lid).out
    assert out.endswith("attached keys([k])\n"), out
    # A put without a lease detaches the key.
    server.ctl("put", "k", "v3")
    out = server.ctl("lease", "timetolive", "--keys", lid).out
    assert out.endswith("attached keys([])\n"), out


def test_revoke_deletes_keys_in_one_revision(server):
    lid, _ = grant(server, 60)
    for k in ("a", "b", "c"):
        server.ctl("put", "--lease=" + lid, k, "v")
    server.ctl("put", "other", "v")
    before = rev(server)
    assert server.ctl("lease", "revoke", lid).out == \
        "lease %s revoked\n" % lid
    assert rev(server) == before + 1
    assert server.ctl("get", "", "--prefix", "--keys-only").out == \
        "other\n\n"
    assert err(server, "lease", "revoke", lid) == \
        "failed to revoke lease (etcdserver: requested lease not found)"
    assert server.ctl("lease", "timetolive", lid).out == \
        "lease %s already expired\n" % lid


def test_revoke_without_keys_keeps_revision(server):
    lid, _ = grant(server, 60)
    before = rev(server)
    server.ctl("lease", "revoke", lid)
    assert rev(server) == before


def test_list(server):
    assert server.ctl("lease", "list").out == "found 0 leases\n"
    long_id, _ = grant(server, 100)
    short_id, _ = grant(server, 50)
    out = server.ctl("lease", "list").out
    # etcd lists by expiry: the shorter lease first.
    assert out == "found 2 leases\n%s\n%s\n" % (short_id, long_id), out


def test_keep_alive(server):
    lid, _ = grant(server, 10)
    assert server.ctl("lease", "keep-alive", "--once", lid).out == \
        "lease %s keepalived with TTL(10)\n" % lid
    r = server.ctl("lease", "keep-alive", "--once", "1234", check=False)
    assert r.rc == 2, r
    assert r.error_line == "etcdserver: requested lease not found", r


def test_keep_alive_stream_then_revoke(server):
    lid, _ = grant(server, 3)
    # etcdctl renews every TTL/3 s and prints each answer; the lease is
    # revoked under it after a few, and it says so and exits.
    import subprocess
    p = subprocess.Popen(
        ["etcdctl", "--endpoints", server.endpoint, "lease", "keep-alive",
         lid], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    server.ctl("lease", "revoke", lid)
    out, _ = p.communicate(timeout=20)
    lines = out.splitlines()
    assert len(lines) >= 3, out
    assert all(ln == "lease %s keepalived with TTL(3)" % lid
               for ln in lines[:-1]), out
    assert lines[-1] == "lease %s expired or revoked." % lid, out


def test_expiry_deletes_keys(server):
    lid, _ = grant(server, 2)
    server.ctl("put", "--lease=" + lid, "e", "v")
    assert server.ctl("get", "e", "--print-value-only").out == "v\n"
    deadline = time.time() + 10
    while time.time() < deadline and \
            server.ctl("get", "e", "--print-value-only").out != "":
        time.sleep(0.2)
    assert server.ctl("get", "e", "--print-value-only").out == ""
    assert server.ctl("lease", "timetolive", lid).out == \
        "lease %s already expired\n" % lid
    assert server.ctl("lease", "list").out == "found 0 leases\n"


def test_leases_survive_restart(server):
    lid, _ = grant(server, 300)
    server.ctl("put", "--lease=" + lid, "p", "v")
    server.stop()
    server.start()
    out = server.ctl("lease", "timetolive", "--keys", lid).out
    assert re.match(r"^lease %s granted with TTL\(300s\), remaining\(\d+s\), "
                    r"attached keys\(\[p\]\)\n$" % lid, out), out
    assert server.ctl("lease", "list").out == "found 1 leases\n%s\n" % lid
