"""`grpc-proxy start` modes: --namespace, --max-send-bytes, the resolver,
the flag checks, python-etcd3, and the two deliberate differences of
cetcd's proxy.

Goal: what a client sees through cetcd's proxy started with these flags
is what it sees through etcd 3.4.23's:
  - --namespace=/ns/: keys go to the server as "/ns/<key>" and come back
    without it; get --prefix "" and --from-key stay inside the namespace;
    a watch through the proxy sees its keys unprefixed, whoever wrote
    them; lease timetolive --keys lists them unprefixed; etcdctl lock
    and elect (which work on keys) land under /ns/;
  - --max-send-bytes=1024: a larger request fails with grpc-go's
    RESOURCE_EXHAUSTED "trying to send message larger than max (<n> vs.
    1024)"; the default proxy passes a 1.4 MiB value and refuses 1.5 MiB
    the same way (where the server itself says "request is too large");
  - --resolver-prefix/--resolver-ttl/--advertise-client-url: the proxy
    registers "<prefix>/<addr>" on the server under a lease of the TTL,
    with the value {"Op":0,"Addr":"<addr>","Metadata":"{\"name\":\"<host
    name>\"}"}; member list through it lists every registered proxy; the
    key goes when the proxy is killed, one TTL later; etcd's three
    messages for inconsistent resolver flags;
  - python-etcd3 (Debian's python3-etcd3): get, put, prefix, watch, txn,
    lease, lock, members, status.
The deliberate differences (tests marked @cetcd_only: they run on the
cetcd pair only and skip under GRPC_PROXY_CETCD_AS_ETCD=1), each with its
etcd counterpart checked on etcd's pair:
  - no watch or keep-alive coalescing: through cetcd's proxy a watch
    stream behaves as on the server (the client's watch_id, progress
    requests, cancels); etcd's proxy numbers watches itself from 0 and
    ignores the other two.  A keep-alive stream the client half-closes
    after one request (python-etcd3's Lease.refresh) gets its answer
    through cetcd's proxy; etcd's ends it first with UNKNOWN "context
    canceled";
  - lock and election names are namespaced too: with --namespace=/ns/,
    the Lock and Election services' names land under /ns/ on the server
    (etcd's proxy sends them raw) and come back unprefixed.

Method: tests/common/grpcproxy.py; one module-wide pair per kind (a
server of the kind and its default proxy), more proxies with the flags
under test started in front of the same servers; outputs compared after
masking what differs by nature.  GRPC_PROXY_CETCD_AS_ETCD=1 makes the
"cetcd" pair an etcd pair: that switch exists only to check these tests.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import etcd3
import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctlproc import CtlProc  # noqa: E402
from common.grpcproxy import (  # noqa: E402
    KINDS, ProxyPair, Result, both, close_pairs, kind_binary, ok,
    cetcd_only, require_cetcd_proxy, same, start_pairs,
    sync_revisions, zap_error)
from common.lockpb import (  # noqa: E402
    CampaignRequest, ElectionStub, LockRequest, LockStub, UnlockRequest)
from common.servers import free_port  # noqa: E402
from common.watchstream import WatchStream  # noqa: E402
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


@pytest.fixture
def extra_proxy(pairs):
    """extra_proxy(flags, name) starts one more proxy per pair with flags
    (killed after the test); returns via(pair) -> its endpoint."""
    made = []

    def start(flags, name):
        px = {k: p.add_proxy(flags, name=name) for k, p in pairs.items()}
        made.append(px)
        return lambda p: px[p.kind].endpoint
    yield start
    for px in made:
        for proxy in px.values():
            proxy.close()


def server_of(p):
    return p.server.endpoint


# -- --namespace -------------------------------------------------------------

def test_namespace_kv(pairs, extra_proxy):
    ns = extra_proxy(["--namespace=/ns/"], "<NSPROXY>")
    for key in ("/nt", "/ns", "0", "/ns0"):  # around the namespace
        both(pairs, "put", key, "out", via=server_of)
    assert both(pairs, "put", "key", "v1", via=ns) == ok("OK\n")
    assert both(pairs, "put", "a/b", "v2", via=ns) == ok("OK\n")
    assert both(pairs, "get", "/ns/", "--prefix", via=server_of) == ok(
        "/ns/a/b\nv2\n/ns/key\nv1\n")
    inside = ok("a/b\nv2\nkey\nv1\n")
    assert both(pairs, "get", "", "--prefix", via=ns) == inside
    assert both(pairs, "get", "", "--from-key", via=ns) == inside
    assert both(pairs, "get", "a", "--from-key", via=ns) == inside
    assert both(pairs, "get", "b", "--from-key", via=ns) == ok("key\nv1\n")
    assert both(pairs, "get", "a", "z", "--keys-only", via=ns) == ok(
        "a/b\n\nkey\n\n")
    assert both(pairs, "get", "/ns/key", via=ns) == ok("")
    assert both(pairs, "txn", via=ns, input='value("key") = "v1"\n\nget key'
                '\n\n\n') == ok("SUCCESS\n\nkey\nv1\n")
    r = both(pairs, "get", "key", "-w", "json", via=ns)
    assert '"kvs":[{"key":"a2V5",' in r.out  # "key"
    assert both(pairs, "del", "", "--prefix", via=ns) == ok("2\n")
    assert both(pairs, "get", "/n", "/o", "--keys-only",
                via=server_of).out.split() == ["/ns", "/ns0", "/nt"]


def test_namespace_watch_lease_lock(pairs, extra_proxy):
    ns = extra_proxy(["--namespace=/ns/"], "<NSPROXY>")
    rev = pairs["etcd"].rev() + 1  # no event lost if etcdctl starts late
    procs = {k: CtlProc(ns(p), "watch", "", "--prefix", "--rev", rev)
             for k, p in pairs.items()}
    try:
        time.sleep(0.4)
        both(pairs, "put", "w1", "x", via=ns)
        both(pairs, "put", "/ns/w2", "y", via=server_of)
        both(pairs, "put", "/other", "z", via=server_of)
        both(pairs, "del", "w1", via=ns)
        assert same({k: [proc.line() for _ in range(9)]
                     for k, proc in procs.items()}) == [
            "PUT", "w1", "x", "PUT", "w2", "y", "DELETE", "w1", ""]
    finally:
        for proc in procs.values():
            proc.stop(sig=signal.SIGINT)
    # a lease's keys, unprefixed through the namespace, whole on the server
    for k, p in pairs.items():
        r = p.ctl("lease", "grant", "60", via=ns(p))
        p.alias_lease(r.out.split()[1], "<L1>")
        assert p.ctl("put", "lk", "v", "--lease", p.leases["<L1>"],
                     via=ns(p)) == ok("OK\n")
    res = {k: p.ctl("lease", "timetolive", p.leases["<L1>"], "--keys",
                    via=ns(p)) for k, p in pairs.items()}
    assert same(res).out.endswith("attached keys([lk])\n")
    res = {k: p.ctl("lease", "timetolive", p.leases["<L1>"], "--keys")
           for k, p in pairs.items()}
    assert same(res).out.endswith("attached keys([/ns/lk])\n")
    for p in pairs.values():
        p.ctl("lease", "revoke", p.leases["<L1>"])
    # etcdctl lock works on keys: under /ns/ on both kinds of proxy
    procs = {k: CtlProc(ns(p), "lock", "L") for k, p in pairs.items()}
    try:
        for k, proc in procs.items():
            line = proc.line()
            pairs[k].alias_lease(line.rsplit("/", 1)[1], "<LK>")
            assert pairs[k].norm(line) == "L/<LK>"
        assert both(pairs, "get", "", "--prefix", "--keys-only",
                    via=server_of).out.split().count("/ns/L/<LK>") == 1
    finally:
        for proc in procs.values():
            proc.stop()


def lock_and_campaign(p, via):
    """Through via: a lease, the Lock service's Lock("RL") and the
    Election service's Campaign("RE"); returns (the lock's key, the
    leader key, the server's keys), with the lease's id shown as <L>."""
    ch = p.channel(via)
    lease = rpc_pb2_grpc.LeaseStub(ch).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=30), timeout=10).ID
    p.alias_lease("%x" % lease, "<L>")
    lk = LockStub(ch).Lock(LockRequest(name=b"RL", lease=lease), timeout=10)
    ld = ElectionStub(ch).Campaign(CampaignRequest(
        name=b"RE", lease=lease, value=b"v"), timeout=10).leader
    assert ld.name == b"RE" and ld.lease == lease
    keys = p.ctl("get", "", "--prefix", "--keys-only",
                 via=p.server.endpoint).out.split()
    LockStub(ch).Unlock(UnlockRequest(key=lk.key), timeout=10)
    rpc_pb2_grpc.LeaseStub(ch).LeaseRevoke(
        rpc_pb2.LeaseRevokeRequest(ID=lease), timeout=10)
    return (p.norm(lk.key.decode()), p.norm(ld.key.decode()),
            [k for k in keys if "<L>" in k])


def test_namespace_lock_service_etcd_raw(pairs, extra_proxy):
    # etcd's proxy sends the Lock and Election services' names as they
    # are: outside the namespace
    ns = extra_proxy(["--namespace=/ns/"], "<NSPROXY>")
    p = pairs["etcd"]
    assert lock_and_campaign(p, ns(p)) == ("RL/<L>", "RE/<L>",
                                           ["RE/<L>", "RL/<L>"])


@cetcd_only
def test_namespace_lock_service_cetcd_namespaced(pairs, extra_proxy):
    # cetcd's proxy namespaces them like any key (a deliberate difference)
    ns = extra_proxy(["--namespace=/ns/"], "<NSPROXY>")
    p = pairs["cetcd"]
    assert lock_and_campaign(p, ns(p)) == ("RL/<L>", "RE/<L>",
                                           ["/ns/RE/<L>", "/ns/RL/<L>"])


# -- --max-send-bytes ---------------------------------------------------------

def too_large(n, limit, proxy):
    msg = "trying to send message larger than max (%d vs. %d)" % (n, limit)
    return Result(1, "", zap_error("ResourceExhausted", msg,
                                   "rpc error: code = ResourceExhausted desc"
                                   " = " + msg, proxy=proxy))


def test_max_send_bytes(pairs, extra_proxy):
    small = extra_proxy(["--max-send-bytes=1024"], "<SMALL>")
    # the size of the PutRequest the proxy sends: the value and 8 bytes
    assert both(pairs, "put", "big", "x" * 2000, via=small) == too_large(
        2008, 1024, "<SMALL>")
    assert both(pairs, "put", "big", "x" * 1016, via=small) == ok("OK\n")
    assert both(pairs, "put", "big", "x" * 1017, via=small) == too_large(
        1025, 1024, "<SMALL>")
    # replies are not limited by it
    both(pairs, "put", "big", "y" * 3000)
    assert both(pairs, "get", "big", "--print-value-only",
                via=small) == ok("y" * 3000 + "\n")
    for k, p in pairs.items():
        with pytest.raises(grpc.RpcError) as e:
            p.kv(small(p)).Put(rpc_pb2.PutRequest(key=b"big",
                                                  value=b"z" * 2000))
        assert (e.value.code(), e.value.details()) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED, "trying to send message "
            "larger than max (2008 vs. 1024)"), k
    # the default: 1.5 MiB
    assert both(pairs, "put", "big", input="b" * (1400 << 10)) == ok("OK\n")
    r = both(pairs, "get", "big", "--print-value-only")
    assert r.out == "b" * (1400 << 10) + "\n"
    assert both(pairs, "put", "big", input="b" * (3 << 19)) == too_large(
        (3 << 19) + 9, 3 << 19, "<PROXY>")
    assert both(pairs, "put", "big", input="b" * (3 << 19),
                via=server_of) == Result(1, "", zap_error(
                    "InvalidArgument", "etcdserver: request is too large",
                    proxy="<SERVER>"))


# -- the resolver -------------------------------------------------------------

def wait_keys(pairs, prefix, want, timeout):
    """Polls the servers until the keys under prefix are want on both;
    returns how long it took."""
    t0 = time.monotonic()
    while True:
        got = {k: p.ctl("get", prefix, "--prefix", "--keys-only",
                        via=p.server.endpoint).out.split()
               for k, p in pairs.items()}
        if all(g == want for g in got.values()):
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout, (want, got)
        time.sleep(0.1)


def members(p, via):
    """member list through via: its lines, sorted (etcd's proxy lists the
    registered proxies in a Go map's order)."""
    r = p.ctl("member", "list", via=via)
    assert r.rc == 0 and r.err == "", r
    return sorted(r.out.splitlines())


def test_resolver_registration(pairs):
    rp = {}
    for k, p in pairs.items():
        # both 5 digits: <ADV1> sorts first as text too
        adv = sorted([free_port(), free_port()])
        p.names["127.0.0.1:%d" % adv[0]] = "<ADV1>"
        p.names["127.0.0.1:%d" % adv[1]] = "<ADV2>"
        rp[k] = [p.add_proxy(["--resolver-prefix=/pfx", "--resolver-ttl=3",
                              "--advertise-client-url=127.0.0.1:%d" % a],
                             name="<RPROXY%d>" % (i + 1))
                 for i, a in enumerate(adv)]
    wait_keys(pairs, "/pfx", ["/pfx/<ADV1>", "/pfx/<ADV2>"], 5)
    r = both(pairs, "get", "/pfx/", "--prefix", via=server_of)
    assert r == ok('/pfx/<ADV1>\n{"Op":0,"Addr":"<ADV1>","Metadata":"{\\"'
                   'name\\":\\"%s\\"}"}\n/pfx/<ADV2>\n{"Op":0,"Addr":"<ADV2>'
                   '","Metadata":"{\\"name\\":\\"%s\\"}"}\n' % (HOST, HOST))
    # each under a lease of --resolver-ttl seconds
    for k, p in pairs.items():
        kv = p.kv(p.server.endpoint).Range(rpc_pb2.RangeRequest(
            key=b"/pfx/", range_end=b"/pfx0"), timeout=10).kvs
        for lease in {x.lease for x in kv}:
            r = p.ctl("lease", "timetolive", "%016x" % lease, "--keys",
                      via=p.server.endpoint)
            assert re.match(r"lease <L\w+> granted with TTL\(3s\), "
                            r"remaining\([0-3]s\), attached keys\(\[/pfx/"
                            r"<ADV[12]>\]\)\n$", p.norm(r.out, subst=[(
                                "%016x" % lease, "<L%d>" % lease)])), r
    # member list through either proxy: both registered proxies (once its
    # watch of the prefix has seen them)
    want = ["0, started, %s, , <ADV1>, false" % HOST,
            "0, started, %s, , <ADV2>, false" % HOST]
    for i in range(2):
        for k, p in pairs.items():
            deadline = time.monotonic() + 3
            while len(members(p, rp[k][i].endpoint)) < 2 and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
        assert same({k: members(p, rp[k][i].endpoint)
                     for k, p in pairs.items()}) == want
    # killed, its key goes with its lease
    for k in pairs:
        rp[k][0].kill()
    took = wait_keys(pairs, "/pfx/", ["/pfx/<ADV2>"], 8)
    assert 1.0 < took < 6.0, took
    # etcd 3.4.23's proxy never drops a member it saw (its watch handler
    # deletes by an empty address): the dead one stays listed
    assert members(pairs["etcd"], rp["etcd"][1].endpoint) == want
    for k in pairs:
        rp[k][1].kill()


def test_resolver_flag_checks():
    res = {}
    for kind in KINDS:
        out = []
        for flags in (["--resolver-prefix=/p"], ["--resolver-ttl=3"],
                      ["--resolver-prefix=/p", "--resolver-ttl=3",
                       "--advertise-client-url="]):
            cp = subprocess.run(
                [kind_binary(kind), "grpc-proxy", "start",
                 "--endpoints=127.0.0.1:%d" % free_port(),
                 "--listen-addr=127.0.0.1:%d" % free_port()] + flags,
                capture_output=True, text=True, timeout=10)
            out.append((cp.returncode, cp.stdout, cp.stderr))
        res[kind] = out
    assert same(res) == [(1, "", "invalid resolver-ttl 0\n"),
                         (1, "", 'invalid resolver-prefix ""\n'),
                         (1, "", 'invalid advertise-client-url ""\n')]


# -- watch streams: not coalesced on cetcd's proxy ----------------------------

def watch_script(p, via):
    """On one watch stream through via: a watch with the client's id 7, a
    second one, a put, a progress request, the cancel of 7.  Returns what
    came back: (watch ids of the two creates, of the event, the progress
    answer's id and revision or None, the cancel's id or None)."""
    ws = WatchStream(p.channel(via))
    try:
        ws.create(b"/ws/a", watch_id=7)
        c1 = ws.next()
        ws.create(b"/ws/b")
        c2 = ws.next()
        assert c1.created and c2.created, (c1, c2)
        rev = p.kv().Put(rpc_pb2.PutRequest(key=b"/ws/a", value=b"1"),
                         timeout=10).header.revision
        ev = ws.next()
        assert [e.kv.key for e in ev.events] == [b"/ws/a"], ev
        ws.progress()
        prog = None
        try:
            r = ws.next(timeout=1.0)
            prog = (r.watch_id, r.header.revision == rev, len(r.events))
        except Exception:  # queue.Empty: no answer
            pass
        ws.send(cancel_request=rpc_pb2.WatchCancelRequest(watch_id=7))
        cancel = None
        try:
            r = ws.next(timeout=1.0)
            cancel = (r.watch_id, r.canceled)
        except Exception:
            pass
        return (c1.watch_id, c2.watch_id), ev.watch_id, prog, cancel
    finally:
        ws.close()


def test_watch_stream_etcd_coalesces(pairs):
    # etcd's proxy numbers a stream's watches itself and does not answer
    # progress requests nor cancels of ids it did not give
    p = pairs["etcd"]
    assert watch_script(p, p.proxy.endpoint) == ((0, 1), 0, None, None)
    # what the server does, which cetcd's proxy keeps
    assert watch_script(p, p.server.endpoint) == ((7, 0), 7, (-1, True, 0),
                                                  (7, True))


@cetcd_only
def test_watch_stream_cetcd_as_server(pairs):
    # through cetcd's proxy a stream behaves as on the server itself
    p = pairs["cetcd"]
    assert watch_script(p, p.proxy.endpoint) == ((7, 0), 7, (-1, True, 0),
                                                  (7, True))


# -- python-etcd3 -------------------------------------------------------------

def python_script(p):
    """python-etcd3 (Debian's python3-etcd3) through p's proxy: get, put,
    a prefix, a watch, a txn, a lease and its keys, a lock two clients
    want, the members; returns what it saw, with p's ids normalised."""
    cl = etcd3.client(host="127.0.0.1", port=p.proxy.port, timeout=10)
    out = []
    cl.put("/py/a", "1")
    v, meta = cl.get("/py/a")
    out.append(("get", v, meta.key, meta.version))
    out.append(("prefix", [(v, m.key) for v, m in cl.get_prefix("/py/")]))
    events, cancel = cl.watch_prefix("/py/")

    def writes():
        time.sleep(0.3)
        cl.put("/py/b", "2")
        cl.delete("/py/a")
    th = threading.Thread(target=writes)
    th.start()
    seen = []
    for ev in events:
        seen.append((type(ev).__name__, ev.key, ev.value))
        if len(seen) == 2:
            break
    cancel()
    th.join()
    out.append(("watch", seen))
    ok_, resps = cl.transaction(
        compare=[cl.transactions.value("/py/b") == "2"],
        success=[cl.transactions.put("/py/t", "y")],
        failure=[cl.transactions.get("/py/b")])
    out.append(("txn", ok_, len(resps), cl.get("/py/t")[0]))
    lease = cl.lease(30)
    cl.put("/py/l", "x", lease=lease)
    out.append(("lease", lease.granted_ttl, lease.keys,
                0 < lease.remaining_ttl <= 30))
    lease.revoke()
    out.append(("revoked", cl.get("/py/l")[0]))
    lk, lk2 = cl.lock("pylock", ttl=10), cl.lock("pylock", ttl=10)
    # timeout=0: python3-etcd3 0.12's waiting acquire() breaks inside the
    # library (tenacity's API changed), see test_lock_etcdctl.py
    out.append(("lock", lk.acquire(timeout=2), lk2.acquire(timeout=0)))
    lk.release()
    out.append(("lock2", lk2.acquire(timeout=2), lk2.is_acquired()))
    lk2.release()
    out.append(("members", [(m.id, m.name, m.client_urls)
                            for m in cl.members]))
    out.append(("status", cl.status().version > "", cl.status().leader))
    return out  # not closed: its watch thread would complain


def test_python_etcd3(pairs):
    got = same({k: python_script(p) for k, p in pairs.items()})
    assert got == [
        ("get", b"1", b"/py/a", 1),
        ("prefix", [(b"1", b"/py/a")]),
        ("watch", [("PutEvent", b"/py/b", b"2"),
                   ("DeleteEvent", b"/py/a", b"")]),
        ("txn", True, 1, b"y"),
        ("lease", 30, [b"/py/l"], True),
        ("revoked", None),
        ("lock", True, False),
        ("lock2", True, True),
        ("members", [(0, HOST, ["127.0.0.1:23790"])]),
        # the leader is looked up among the members: the proxy is none
        ("status", True, None)]


def refresh(p):
    """python-etcd3's Lease.refresh through p's proxy: one keep-alive
    request on a stream the client then half-closes."""
    cl = etcd3.client(host="127.0.0.1", port=p.proxy.port, timeout=10)
    lease = cl.lease(30)
    try:
        return [r.TTL for r in lease.refresh()]
    except grpc.RpcError as e:
        return e.code(), e.details()
    finally:
        lease.revoke()
        cl.close()


def test_python_lease_refresh_etcd_fails(pairs):
    # etcd's proxy ends a keep-alive stream as soon as the client
    # half-closes it, before the answer: python-etcd3's refresh fails
    assert refresh(pairs["etcd"]) == (grpc.StatusCode.UNKNOWN,
                                      "context canceled")


@cetcd_only
def test_python_lease_refresh_cetcd(pairs):
    # cetcd's proxy passes the stream on: the server answers, as it does
    # to python-etcd3 directly
    assert refresh(pairs["cetcd"]) == [30]


def test_pairs_kinds(pairs):
    # the pairs are what the module's text says they are
    for k, p in pairs.items():
        assert isinstance(p, ProxyPair) and p.binary == kind_binary(k)
        assert p.proxy.proc.poll() is None
