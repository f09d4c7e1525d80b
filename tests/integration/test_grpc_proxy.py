"""`grpc-proxy start` under etcdctl: cetcd's gRPC proxy against etcd 3.4.23's.

Goal: etcdctl (ETCDCTL_API=3) run through cetcd's proxy prints what it
prints through etcd's proxy (stdout, stderr, exit code) for: put/get
(prefix, limit, sort, -w json), del, txn, compaction, the errors etcd's
proxy passes on (with the gRPC code it loses: see below), the KV cache of
serializable reads, watch (a background `etcdctl watch`: puts and deletes,
--rev replay, --prev-kv, a range, a compacted start), the lease commands,
lock and elect (two holders exclude each other), member list (the proxy
answers itself: its --advertise-client-url, the host name, id 0),
endpoint status/health and snapshot save (the file restores and a server
starts on it).  --namespace, --max-send-bytes, the resolver, python-etcd3
and the deliberate differences are in test_grpc_proxy_modes.py; /health,
/metrics and auth in test_grpc_proxy_http_auth.py; a 3-member cluster in
tests/cluster/test_grpc_proxy_cluster.py.

Method: tests/common/grpcproxy.py.  One module-wide pair per kind: the
"etcd" pair (/usr/bin/etcd as server and as proxy, the reference) and the
"cetcd" pair ($CETCD_BIN as both).  Every test runs the same commands
through both proxies and compares the outputs after masking, visibly,
only what differs by nature (cluster and member ids, addresses, clientv3's
log time stamps and client ids, raft terms, lease ids); before each test
the two servers are brought to the same revision, so revisions are
compared as they are.  Each test also checks etcd's own output against
the literal expected here, so a test fails when the reference does
something else, not only when the two differ.
GRPC_PROXY_CETCD_AS_ETCD=1 makes the "cetcd" pair an etcd pair: that
switch exists only to check these tests themselves.

What etcd's proxy does that one might not expect, and that these tests
pin: an error that comes back through its KV, Lease or Cluster client
(clientv3) reaches the caller with gRPC code Unknown and the server's
message (etcdctl's log line says "code = Unknown desc = etcdserver: ...");
only the cache's own "compacted" answer and the Maintenance, Auth, Lock
and Election calls keep the server's code.  MemberPromote answers "not
implemented".  Its cache keeps an answer while nothing through the proxy
touches its keys (a write made on the server directly is not seen), and
after the first compaction through the proxy it caches no latest-revision
read any more (what it held stays until invalidated).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctlproc import CtlProc  # noqa: E402
from common.grpcproxy import (  # noqa: E402
    ETCDCTL, Result, both, close_pairs, ctl_env, ok, parse_json,
    require_cetcd_proxy, run_ctl, same, start_pairs, sync_revisions,
    zap_error)
from conftest import Server  # noqa: E402

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def pairs():
    """{kind: ProxyPair}: a fresh server of each kind, a proxy in front."""
    require_cetcd_proxy()
    made = start_pairs(lambda binary: Server(binary=binary).start())
    yield made
    close_pairs(made)


@pytest.fixture(autouse=True)
def same_revision(pairs):
    sync_revisions(list(pairs.values()))


def grant(pairs, ttl, name):
    """`lease grant ttl` through each proxy; the ids become name."""
    outs = {}
    for k, p in pairs.items():
        r = run_ctl(p.proxy.endpoint, ["lease", "grant", ttl])
        assert r.rc == 0, r
        p.alias_lease(re.match(r"lease ([0-9a-f]+) granted", r.out).group(1),
                      name)
        outs[k] = Result(r.rc, p.norm(r.out), p.norm(r.err))
    return same(outs)


# -- KV ------------------------------------------------------------------

def test_put_get_prefix_limit_sort(pairs):
    r0 = pairs["etcd"].rev()
    for k in ("k1", "k2", "k3", "k4"):
        assert both(pairs, "put", "/kv/" + k, "v" + k) == ok("OK\n")
    assert both(pairs, "get", "/kv/k2") == ok("/kv/k2\nvk2\n")
    assert both(pairs, "get", "/kv/", "--prefix", "--limit", "2",
                "--sort-by", "KEY", "--order", "DESCEND") == ok(
        "/kv/k4\nvk4\n/kv/k3\nvk3\n")
    assert both(pairs, "get", "/kv/", "--prefix", "--sort-by", "MODIFY",
                "--order", "ASCEND", "--keys-only") == ok(
        "/kv/k1\n\n/kv/k2\n\n/kv/k3\n\n/kv/k4\n\n")
    assert both(pairs, "get", "/kv/k1", "/kv/k3", "--print-value-only") \
        == ok("vk1\nvk2\n")
    r = both(pairs, "get", "/kv/", "--prefix", "--limit", "1", "-w",
             "fields")
    assert '"Count" : 4\n' in r.out and '"More" : true\n' in r.out
    r = both(pairs, "get", "/kv/", "--prefix", "--limit", "2", "-w", "json")
    doc = parse_json(r.out)
    assert doc["header"]["revision"] == r0 + 4 and doc["more"] is True
    assert doc["count"] == 4 and [kv["mod_revision"] for kv in doc["kvs"]] \
        == [r0 + 1, r0 + 2]
    assert '"cluster_id":<CLUSTER_ID>,"member_id":<MEMBER_ID>' in r.out
    assert both(pairs, "get", "/kv/k1", "--rev", r0 + 1, "-w", "json",
                "--consistency", "s").rc == 0
    assert both(pairs, "del", "/kv/k1", "--prev-kv") == ok(
        "1\n/kv/k1\nvk1\n")
    assert both(pairs, "del", "/kv/k1") == ok("0\n")
    assert both(pairs, "del", "/kv/", "--prefix") == ok("3\n")
    assert both(pairs, "get", "/kv/", "--prefix") == ok("")


def test_txn(pairs):
    both(pairs, "put", "/txn/a", "1")
    r = both(pairs, "txn", input='value("/txn/a") = "1"\n\nput /txn/b yes\n'
             '\nput /txn/b no\n\n')
    assert r == ok("SUCCESS\n\nOK\n")
    r = both(pairs, "txn", input='mod("/txn/a") > "0"\nversion("/txn/b") ='
             ' "5"\n\nput /txn/c yes\n\nget /txn/b\ndel /txn/a\n\n')
    assert r == ok("FAILURE\n\n/txn/b\nyes\n\n1\n")
    r = both(pairs, "txn", "-w", "json", input='create("/txn/a") = "0"\n\n'
             'get /txn/b\n\n\n')
    doc = parse_json(r.out)
    assert doc["succeeded"] is True
    assert doc["responses"][0]["Response"]["ResponseRange"]["kvs"][0][
        "value"] == "eWVz"  # "yes"


def test_compaction(pairs):
    both(pairs, "put", "/cp/a", "1")
    both(pairs, "put", "/cp/a", "2")
    rev = pairs["etcd"].rev()
    assert both(pairs, "compact", rev - 1) == ok(
        "compacted revision %d\n" % (rev - 1))
    # the server's OutOfRange comes back through the proxy as Unknown
    msg = "etcdserver: mvcc: required revision has been compacted"
    assert both(pairs, "compact", rev - 1) == Result(
        1, "", zap_error("Unknown", msg))
    assert both(pairs, "get", "/cp/a", "--rev", rev - 2) == Result(
        1, "", zap_error("Unknown", msg))
    assert both(pairs, "get", "/cp/a", "--rev", rev - 1) == ok("/cp/a\n1\n")
    assert both(pairs, "get", "/cp/a", "--rev", rev) == ok("/cp/a\n2\n")
    # the proxy's cache answers a serializable read below the compaction
    # itself, with the right code
    assert both(pairs, "get", "/cp/a", "--rev", rev - 2, "--consistency",
                "s") == Result(1, "", zap_error("OutOfRange", msg))
    msg = "etcdserver: mvcc: required revision is a future revision"
    assert both(pairs, "get", "/cp/a", "--rev", rev + 100) == Result(
        1, "", zap_error("Unknown", msg))


def test_errors_through_the_proxy(pairs):
    assert both(pairs, "get", "") == Result(1, "", zap_error(
        "Unknown", "etcdserver: key is not provided"))
    lease_nf = "etcdserver: requested lease not found"
    assert both(pairs, "put", "/err/x", "y", "--lease", "1234") == Result(
        1, "", zap_error("Unknown", lease_nf))
    assert both(pairs, "lease", "revoke", "1234") == Result(
        1, "", zap_error("Unknown", lease_nf, "failed to revoke lease (%s)"
                         % lease_nf))
    assert both(pairs, "lease", "keep-alive", "--once", "1234") == Result(
        2, "", "Error: %s\n" % lease_nf)
    assert both(pairs, "lease", "timetolive", "1234") == ok(
        "lease 0000000000001234 already expired\n")
    assert both(pairs, "member", "remove", "1234") == Result(
        1, "", zap_error("Unknown", "etcdserver: member not found"))
    # etcd's proxy does not implement MemberPromote
    assert both(pairs, "member", "promote", "1234") == Result(
        1, "", zap_error("Unknown", "not implemented",
                         "rpc error: code = Unknown desc = not implemented"))


# -- the KV cache ----------------------------------------------------------

@pytest.fixture
def cache_via(pairs):
    """A fresh proxy per pair for the cache tests (its cache empty, no
    compaction seen yet); returns via(pair) -> its endpoint."""
    made = {k: p.add_proxy(name="<CPROXY>") for k, p in pairs.items()}
    yield lambda p: made[p.kind].endpoint
    for px in made.values():
        px.close()


def server_of(p):
    return p.server.endpoint


def test_cache_serializable_reads(pairs, cache_via):
    s = "--consistency=s"
    via = cache_via
    both(pairs, "put", "/cache/a", "v1", via=via)
    r1 = pairs["etcd"].rev()
    assert both(pairs, "get", "/cache/a", s, via=via) == ok("/cache/a\nv1\n")
    # a put on the server itself, behind the proxy's back: the cached
    # answer stays, header and all
    both(pairs, "put", "/cache/a", "v2", via=server_of)
    assert both(pairs, "get", "/cache/a", s, via=via) == ok("/cache/a\nv1\n")
    r = both(pairs, "get", "/cache/a", s, "-w", "json", via=via)
    assert parse_json(r.out)["header"]["revision"] == r1
    # a linearizable read goes to the server and refills the cache
    assert both(pairs, "get", "/cache/a", via=via) == ok("/cache/a\nv2\n")
    both(pairs, "put", "/cache/a", "v3", via=server_of)
    assert both(pairs, "get", "/cache/a", s, via=via) == ok("/cache/a\nv2\n")
    # a put through the proxy invalidates
    both(pairs, "put", "/cache/a", "v4", via=via)
    assert both(pairs, "get", "/cache/a", s, via=via) == ok("/cache/a\nv4\n")
    # a cached range is invalidated by a put of one of its keys, by a
    # delete and by a txn through the proxy
    pre = ("get", "/cache/", "--prefix", s)
    assert both(pairs, *pre, via=via) == ok("/cache/a\nv4\n")
    both(pairs, "put", "/cache/b", "w1", via=via)
    assert both(pairs, *pre, via=via) == ok("/cache/a\nv4\n/cache/b\nw1\n")
    both(pairs, "put", "/cache/b", "w2", via=server_of)
    assert both(pairs, *pre, via=via) == ok("/cache/a\nv4\n/cache/b\nw1\n")
    both(pairs, "del", "/cache/b", via=via)
    assert both(pairs, *pre, via=via) == ok("/cache/a\nv4\n")
    both(pairs, "put", "/cache/a", "v5", via=server_of)
    both(pairs, "txn", input="\nput /cache/c x\n\n\n", via=via)
    assert both(pairs, *pre, via=via) == ok(
        "/cache/a\nv5\n/cache/c\nx\n")
    # what does not touch a cached range leaves it
    both(pairs, "put", "/cache/c", "y", via=server_of)
    both(pairs, "txn", input="\nput /cachf v\n\n\n", via=via)
    both(pairs, "put", "/cachd", "v", via=via)
    both(pairs, "del", "/cache0", "/cache1", via=via)
    assert both(pairs, *pre, via=via) == ok(
        "/cache/a\nv5\n/cache/c\nx\n")
    # a txn's compares invalidate too, whatever branch ran
    both(pairs, "txn", input='value("/cache/c") = "no"\n\n\n\n', via=via)
    assert both(pairs, *pre, via=via) == ok(
        "/cache/a\nv5\n/cache/c\ny\n")
    both(pairs, "txn", input="\nput /cache/a v6\n\n\n", via=via)
    assert both(pairs, "get", "/cache/a", s, via=via) == ok("/cache/a\nv6\n")
    # a read at a revision is cached too; a compaction through the proxy
    # makes the cache itself refuse older revisions (with OutOfRange)
    rev = pairs["etcd"].rev()
    assert both(pairs, "get", "/cache/a", "--rev", rev - 1, s, via=via) == \
        ok("/cache/a\nv5\n")
    assert both(pairs, "compact", rev, via=via) == ok(
        "compacted revision %d\n" % rev)
    msg = "etcdserver: mvcc: required revision has been compacted"
    assert both(pairs, "get", "/cache/a", "--rev", rev - 1, s, via=via) == \
        Result(1, "", zap_error("OutOfRange", msg, proxy="<CPROXY>"))
    assert both(pairs, "get", "/nothing", "--rev", rev - 1, s, via=via) == \
        Result(1, "", zap_error("OutOfRange", msg, proxy="<CPROXY>"))
    assert both(pairs, "get", "/cache/a", "--rev", rev, s, via=via) == ok(
        "/cache/a\nv6\n")


def test_cache_stops_after_compaction(pairs, cache_via):
    # etcd 3.4.23's cache only adds an answer whose request revision is
    # above the last compaction it saw: once a compaction went through the
    # proxy, latest-revision reads (revision 0) are never cached again
    s = "--consistency=s"
    via = cache_via
    both(pairs, "put", "/cc/a", "v1", via=via)
    assert both(pairs, "get", "/cc/a", s, via=via) == ok("/cc/a\nv1\n")
    both(pairs, "put", "/cc/a", "v2", via=server_of)
    assert both(pairs, "get", "/cc/a", s, via=via) == ok("/cc/a\nv1\n")
    both(pairs, "compact", pairs["etcd"].rev(), via=via)
    # what was cached stays until something invalidates it...
    both(pairs, "put", "/cc/a", "v3", via=server_of)
    assert both(pairs, "get", "/cc/a", s, via=via) == ok("/cc/a\nv1\n")
    both(pairs, "put", "/cc/a", "v4", via=via)
    # ... but is not cached again
    assert both(pairs, "get", "/cc/a", s, via=via) == ok("/cc/a\nv4\n")
    both(pairs, "put", "/cc/a", "v5", via=server_of)
    assert both(pairs, "get", "/cc/a", s, via=via) == ok("/cc/a\nv5\n")
    both(pairs, "put", "/cc/b", "w1", via=via)
    assert both(pairs, "get", "/cc/b", s, via=via) == ok("/cc/b\nw1\n")
    both(pairs, "put", "/cc/b", "w2", via=server_of)
    assert both(pairs, "get", "/cc/b", s, via=via) == ok("/cc/b\nw2\n")


# -- watch -----------------------------------------------------------------

def start_watches(pairs, *args):
    procs = {k: CtlProc(p.proxy.endpoint, "watch", *args)
             for k, p in pairs.items()}
    time.sleep(0.4)  # the watch is created before the first put
    return procs


def read_lines(pairs, procs, n):
    """n stdout lines of each watch, normalised and equal; etcd's."""
    got = {k: [pairs[k].norm(proc.line(timeout=10)) for _ in range(n)]
           for k, proc in procs.items()}
    return same(got)


def stop_watches(procs):
    res = {k: proc.stop(sig=signal.SIGINT) for k, proc in procs.items()}
    return same(res)


def test_watch_prefix_puts_and_deletes(pairs):
    # from the next revision: no event lost if etcdctl starts late
    procs = start_watches(pairs, "/wp/", "--prefix", "--rev",
                          pairs["etcd"].rev() + 1)
    try:
        both(pairs, "put", "/wp/a", "1")
        both(pairs, "put", "/wx", "not seen")
        both(pairs, "put", "/wp/b", "2")
        both(pairs, "del", "/wp/a")
        assert read_lines(pairs, procs, 9) == [
            "PUT", "/wp/a", "1", "PUT", "/wp/b", "2", "DELETE", "/wp/a", ""]
        for proc in procs.values():
            assert proc.no_line(0.3)
    finally:
        stop_watches(procs)


def test_watch_rev_replay_prev_kv_range(pairs):
    r0 = pairs["etcd"].rev()
    for v in ("1", "2"):
        both(pairs, "put", "/wr/a", v)
    both(pairs, "put", "/wr/b", "3")
    procs = start_watches(pairs, "/wr/a", "--rev", r0 + 1, "--prev-kv")
    try:
        # the first event has no previous value; the others print it first
        assert read_lines(pairs, procs, 8) == [
            "PUT", "/wr/a", "1", "PUT", "/wr/a", "1", "/wr/a", "2"]
        both(pairs, "put", "/wr/a", "4")
        assert read_lines(pairs, procs, 5) == [
            "PUT", "/wr/a", "2", "/wr/a", "4"]
    finally:
        stop_watches(procs)
    # a range [/wr/a, /wr/b) replayed from the start
    procs = start_watches(pairs, "/wr/a", "/wr/b", "--rev", r0 + 1)
    try:
        assert read_lines(pairs, procs, 9) == [
            "PUT", "/wr/a", "1", "PUT", "/wr/a", "2", "PUT", "/wr/a", "4"]
        assert all(p.no_line(0.3) for p in procs.values())
    finally:
        stop_watches(procs)


def test_watch_compacted_start(pairs):
    both(pairs, "put", "/wc/a", "1")
    both(pairs, "put", "/wc/a", "2")
    rev = pairs["etcd"].rev()
    both(pairs, "compact", rev)
    res = {}
    for kind, p in pairs.items():
        cp = subprocess.run([ETCDCTL, "--endpoints", p.proxy.endpoint,
                             "watch", "/wc/a", "--rev", str(rev - 1)],
                            capture_output=True, text=True, timeout=20,
                            env=ctl_env())
        res[kind] = Result(cp.returncode, cp.stdout, cp.stderr)
    assert same(res) == Result(
        5, "", "watch was canceled (etcdserver: mvcc: required revision has "
        "been compacted)\nError: watch is canceled by the server\n")


# -- lease -------------------------------------------------------------------

def no_remaining(r):
    """The seconds a lease has left depend on when the command ran, and
    the order of its keys on a Go map's (etcd's server): sorted here."""
    out = re.sub(r"remaining\(\d+s\)", "remaining(<N>s)", r.out)
    out = re.sub(r'"ttl":\d+', '"ttl":<N>', out)
    out = re.sub(r"attached keys\(\[([^]]*)\]\)", lambda m: "attached "
                 "keys([%s])" % " ".join(sorted(m.group(1).split())), out)
    out = re.sub(r'"keys":\[([^]]*)\]', lambda m: '"keys":[%s]' % ",".join(
        sorted(m.group(1).split(","))), out)
    return Result(r.rc, out, r.err)


def test_lease_commands(pairs):
    assert grant(pairs, 60, "<L1>") == ok(
        "lease <L1> granted with TTL(60s)\n")
    for kind, p in pairs.items():
        lid = p.leases["<L1>"]
        r = p.ctl("put", "/ls/a", "1", "--lease", lid)
        assert r == ok("OK\n"), (kind, r)
        r = p.ctl("put", "/ls/b", "2", "--lease", lid)
        assert r == ok("OK\n"), (kind, r)
    res = {k: no_remaining(p.ctl("lease", "timetolive", p.leases["<L1>"],
                                 "--keys"))
           for k, p in pairs.items()}
    assert same(res) == ok("lease <L1> granted with TTL(60s), remaining("
                              "<N>s), attached keys([/ls/a /ls/b])\n")
    res = {k: no_remaining(p.ctl("lease", "timetolive", p.leases["<L1>"],
                                 "--keys", "-w", "json"))
           for k, p in pairs.items()}
    doc = parse_json(same(res).out)
    assert doc["granted-ttl"] == 60 and len(doc["keys"]) == 2
    res = {k: p.ctl("lease", "keep-alive", "--once", p.leases["<L1>"])
           for k, p in pairs.items()}
    assert same(res) == ok("lease <L1> keepalived with TTL(60)\n")
    assert both(pairs, "lease", "list") == ok("found 1 leases\n<L1>\n")
    res = {k: p.ctl("lease", "revoke", p.leases["<L1>"])
           for k, p in pairs.items()}
    assert same(res) == ok("lease <L1> revoked\n")
    assert both(pairs, "get", "/ls/", "--prefix") == ok("")
    assert both(pairs, "lease", "list") == ok("found 0 leases\n")



# -- lock and elect ----------------------------------------------------------

def ctlprocs(pairs, *args):
    return {k: CtlProc(p.proxy.endpoint, *args) for k, p in pairs.items()}


def lines_as(pairs, procs, n, lease_name):
    """n stdout lines of each process; the lease id that ends the first
    (a lock or election key) is registered as lease_name.  Equal after
    normalising; returns etcd's."""
    got = {}
    for k, proc in procs.items():
        lines = [proc.line(timeout=10) for _ in range(n)]
        pairs[k].alias_lease(lines[0].rsplit("/", 1)[1], lease_name)
        got[k] = [pairs[k].norm(ln) for ln in lines]
    return same(got)


def server_keys(pairs, prefix):
    """The keys under prefix on each server (read directly), normalised
    and equal; etcd's."""
    return same({k: p.sctl("get", prefix, "--prefix", "--keys-only")
                    for k, p in pairs.items()}).out.split()


def test_lock_two_holders_exclude(pairs):
    a = ctlprocs(pairs, "lock", "/lk")
    b = {}
    try:
        assert lines_as(pairs, a, 1, "<LA>") == ["/lk/<LA>"]
        b = ctlprocs(pairs, "lock", "/lk")
        time.sleep(1.0)
        assert all(proc.no_line(0.01) for proc in b.values())
        # the waiter's key is there, behind the holder's
        assert same({k: len(p.sctl("get", "/lk/", "--prefix",
                                      "--keys-only").out.split())
                        for k, p in pairs.items()}) == 2
        assert same({k: proc.stop() for k, proc in a.items()}) == (0, "")
        assert lines_as(pairs, b, 1, "<LB>") == ["/lk/<LB>"]
        assert server_keys(pairs, "/lk/") == ["/lk/<LB>"]
        assert same({k: proc.stop() for k, proc in b.items()}) == (0, "")
        assert server_keys(pairs, "/lk/") == []
    finally:
        for proc in list(a.values()) + list(b.values()):
            proc.stop()


def test_elect_two_candidates_and_observer(pairs):
    e1 = ctlprocs(pairs, "elect", "/el", "p1")
    e2 = obs = {}
    try:
        assert lines_as(pairs, e1, 2, "<E1>") == ["/el/<E1>", "p1"]
        e2 = ctlprocs(pairs, "elect", "/el", "p2")
        obs = ctlprocs(pairs, "elect", "-l", "/el")
        time.sleep(1.0)
        assert all(proc.no_line(0.01) for proc in e2.values())
        assert same({k: [pairs[k].norm(proc.line()) for _ in range(2)]
                        for k, proc in obs.items()}) == ["/el/<E1>", "p1"]
        assert same({k: proc.stop() for k, proc in e1.items()}) == (0, "")
        assert lines_as(pairs, e2, 2, "<E2>") == ["/el/<E2>", "p2"]
        assert same({k: [pairs[k].norm(proc.line()) for _ in range(2)]
                        for k, proc in obs.items()}) == ["/el/<E2>", "p2"]
    finally:
        for proc in list(e1.values()) + list(e2.values()) + \
                list(obs.values()):
            proc.stop()
    assert server_keys(pairs, "/el/") == []


# -- cluster and maintenance -------------------------------------------------

def test_member_list_is_the_proxy(pairs):
    # without --resolver-prefix the proxy lists itself: its
    # --advertise-client-url (default 127.0.0.1:23790), the host name, no
    # ids, no peer URLs, no header
    assert both(pairs, "member", "list") == ok(
        "0, started, %s, , 127.0.0.1:23790, false\n" % HOST)
    assert both(pairs, "member", "list", "-w", "json") == ok(
        '{"members":[{"name":"%s","clientURLs":["127.0.0.1:23790"]}]}\n'
        % HOST)
    assert "|  0 | started |" in both(pairs, "member", "list", "-w",
                                      "table").out


def test_endpoint_status_and_health(pairs):
    res = {}
    for k, p in pairs.items():
        r = p.ctl("endpoint", "status", "-w", "json")
        assert r.rc == 0 and r.err == "", r
        st = parse_json(r.out)
        for f in ("version", "dbSize", "dbSizeInUse", "raftIndex",
                  "raftTerm", "raftAppliedIndex"):
            assert st[0]["Status"].pop(f), (f, st)  # the server's own
        res[k] = st
    st = same(res)
    assert st[0]["Endpoint"] == "<PROXY>"
    assert st[0]["Status"]["header"]["revision"] == pairs["etcd"].rev()
    assert "errors" not in st[0]["Status"]
    took = re.compile(r"took = [0-9.]+[mµn]?s")
    res = {k: p.ctl("endpoint", "health") for k, p in pairs.items()}
    res = {k: Result(r.rc, r.out, took.sub("took = <T>", r.err))
           for k, r in res.items()}
    assert same(res) == Result(0, "", "<PROXY> is healthy: successfully "
                                  "committed proposal: took = <T>\n")
    res = {k: re.sub(r'"took":"[^"]*"', '"took":"<T>"',
                     p.ctl("endpoint", "health", "-w", "json").out)
           for k, p in pairs.items()}
    assert same(res) == '[{"endpoint":"<PROXY>","health":true,' \
        '"took":"<T>"}]\n'


def test_snapshot_save_restores(pairs, tmp_path):
    both(pairs, "put", "/snap/k", "kept")
    rev = pairs["etcd"].rev()
    for kind, p in pairs.items():
        path = str(tmp_path / ("%s.db" % kind))
        r = p.ctl("snapshot", "save", path)
        assert (r.rc, r.out) == (0, "Snapshot saved at %s\n" % path), r
        assert '"msg":"fetching snapshot","endpoint":"<PROXY>"' in r.err
        # etcdctl restores the file and the pair's server runs on it
        s = Server(binary=p.binary, root=str(tmp_path / kind))
        try:
            cp = subprocess.run(
                [ETCDCTL, "snapshot", "restore", path, "--data-dir",
                 s.data_dir, "--name", s.name, "--initial-cluster",
                 "%s=%s" % (s.name, s.peer_url),
                 "--initial-advertise-peer-urls", s.peer_url,
                 "--initial-cluster-token", "cetcd-it"],
                capture_output=True, text=True, env=ctl_env(), timeout=30)
            assert cp.returncode == 0, cp.stderr
            s.start()
            r = run_ctl(s.endpoint, ["get", "/snap/k", "-w", "json"])
            doc = json.loads(r.out)
            assert doc["header"]["revision"] == rev, (kind, r)
            assert doc["kvs"][0]["value"] == "a2VwdA==", (kind, r)  # kept
        finally:
            s.stop()
            shutil.rmtree(s.root, ignore_errors=True)
