"""Fixtures for the tests of `grpc-proxy start` (etcd 3.4's L7 gRPC proxy).

Goal: run the same client actions through two PAIRS, each a server with a
grpc-proxy in front of it, and compare what the clients see:
  - the "etcd" pair: /usr/bin/etcd (3.4.23) as the server and
    `/usr/bin/etcd grpc-proxy start` as the proxy: the reference;
  - the "cetcd" pair: $CETCD_BIN (default <repo>/build/cetcd) as the server
    and `$CETCD_BIN grpc-proxy start` as the proxy: the thing under test.

GRPC_PROXY_CETCD_AS_ETCD=1 (or the suites' CETCD_TEST_AGAINST_ETCD=1) makes
the "cetcd" pair an etcd pair too.  That switch exists only to check the
tests themselves (every comparison must then pass, etcd against etcd);
tests of what cetcd's proxy does on purpose differently from etcd's are
marked @cetcd_only and skip under it.  Without the switch, a cetcd that
does not take `grpc-proxy start` fails the tests (require_cetcd_proxy).

Method: GrpcProxy starts `<bin> grpc-proxy start --endpoints=...
--listen-addr=127.0.0.1:<free port>` with its log in a file and is ready
when a Range through it gets an answer from the server.  ProxyPair holds a
started server (any object with .endpoint, e.g. tests/integration's
conftest.Server or a cluster.Member) and its proxies, runs etcdctl through
the proxy or on the server directly, and normalises the output: what
differs by nature between two servers is replaced visibly by a
placeholder (cluster and member ids, <SERVER>/<PROXY> addresses, clientv3's
log time stamps and random client ids, lease ids the test names).
sync_revisions() gives both servers the same revision before a test, so
revisions are compared as they are.
"""

import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from common.servers import ETCD_BIN, REPO, against_etcd, free_port, log_tail

ETCDCTL = os.environ.get("ETCDCTL_BIN", "/usr/bin/etcdctl")
KINDS = ("etcd", "cetcd")
SWITCH = "GRPC_PROXY_CETCD_AS_ETCD"


def cetcd_as_etcd():
    """True when the "cetcd" pair runs etcd too (see the module's text)."""
    return os.environ.get(SWITCH) == "1" or against_etcd()


def cetcd_bin():
    """The cetcd binary: $CETCD_BIN, else <repo>/build/cetcd."""
    return os.environ.get("CETCD_BIN", os.path.join(REPO, "build", "cetcd"))


def kind_binary(kind):
    """The binary of a pair kind, for its server and its proxy alike."""
    assert kind in KINDS, kind
    if kind == "etcd" or cetcd_as_etcd():
        return ETCD_BIN
    return cetcd_bin()


_support = {}


def proxy_support(binary):
    """(True, "") when `binary grpc-proxy start --help` succeeds, else
    (False, what the binary said); asked once per binary."""
    if binary not in _support:
        if not os.path.exists(binary):
            _support[binary] = (False, "%s does not exist" % binary)
        else:
            cp = subprocess.run([binary, "grpc-proxy", "start", "--help"],
                                capture_output=True, text=True, timeout=10)
            said = (cp.stdout + cp.stderr).strip()
            ok = cp.returncode == 0 and "--listen-addr" in said
            _support[binary] = (ok, said[-400:])
    return _support[binary]


def require_cetcd_proxy():
    """Fails the calling test when the cetcd binary does not take
    `grpc-proxy start` (it did not before session 35: never skipped)."""
    ok, said = proxy_support(kind_binary("cetcd"))
    if not ok:
        pytest.fail("grpc-proxy start --help failed: %s" % said)


CETCD_ONLY_REASON = (
    "checks a deliberate difference of cetcd's proxy, and the \"cetcd\" "
    "pair is etcd's here (%s=1 only checks the tests themselves)" % SWITCH)

# The mark of a test of a deliberate difference of cetcd's proxy: it runs
# on the cetcd pair only, and is skipped under the switch.
cetcd_only = pytest.mark.skipif(cetcd_as_etcd(), reason=CETCD_ONLY_REASON)


class GrpcProxy:
    """One `<binary> grpc-proxy start` process on a free 127.0.0.1 port."""

    def __init__(self, binary, endpoints, extra=(), port=None):
        self.binary = binary
        self.endpoints = list(endpoints)
        self.extra = [str(a) for a in extra]
        self.port = port or free_port()
        self.root = tempfile.mkdtemp(prefix="cetcd-gp-")
        self.log_path = os.path.join(self.root, "proxy.log")
        self.proc = None

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def args(self):
        return [self.binary, "grpc-proxy", "start",
                "--endpoints=" + ",".join(self.endpoints),
                "--listen-addr=" + self.endpoint,
                # etcd's default data dir "default.proxy" is relative: keep
                # it (auto TLS only) out of the working directory
                "--data-dir=" + os.path.join(self.root, "data")] + self.extra

    def start(self, timeout=15.0, wait=True):
        """Starts the process; with wait, until a Range through it gets the
        server's answer (any status but UNAVAILABLE/DEADLINE_EXCEEDED)."""
        assert self.proc is None
        with open(self.log_path, "ab") as log:
            log.write(("===== %s\n" % " ".join(self.args())).encode())
            log.flush()
            self.proc = subprocess.Popen(self.args(), stdout=log,
                                         stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         cwd=self.root)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("proxy exited (%s):\n%s" % (
                    self.proc.returncode, self.log_tail()))
            with grpc.insecure_channel(self.endpoint) as ch:
                try:
                    rpc_pb2_grpc.KVStub(ch).Range(
                        rpc_pb2.RangeRequest(key=b"\0proxy-ready"),
                        timeout=1.0)
                    return
                except grpc.RpcError as e:
                    last = e
                    if e.code() not in (grpc.StatusCode.UNAVAILABLE,
                                        grpc.StatusCode.DEADLINE_EXCEEDED):
                        return
            time.sleep(0.05)
        raise AssertionError("proxy not ready after %.0fs (%r):\n%s" % (
            timeout, last, self.log_tail()))

    def kill(self, sig=signal.SIGKILL):
        """Ends the process with sig; returns its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        return rc

    def close(self):
        """Stops the process with SIGTERM (its orderly close: every call
        and stream ended, then death by the signal), checks that it did so
        in time and that its log has no sanitizer report, and removes its
        directory (log included)."""
        if not os.path.isdir(self.root):
            return  # closed before
        running = self.proc is not None and self.proc.poll() is None
        rc = self.kill(signal.SIGTERM)
        log = ""
        if os.path.exists(self.log_path):
            with open(self.log_path, "rb") as f:
                log = f.read().decode(errors="replace")
        bad = [w for w in ("ERROR: AddressSanitizer", "runtime error:",
                           "ERROR: LeakSanitizer") if w in log]
        try:
            assert not bad, "proxy log: %s\n%s" % (bad, self.log_tail(60))
            # cetcd's proxy dies of the signal after its close (etcd's:
            # Go's default handler, the same status)
            assert not running or rc == -signal.SIGTERM, (
                "proxy stopped with %r after SIGTERM:\n%s" % (
                    rc, self.log_tail()))
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, n=30):
        return log_tail(self.log_path, n)


class Result:
    """One etcdctl run, as text: rc, out, err."""

    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def triple(self):
        return (self.rc, self.out, self.err)

    def __eq__(self, other):
        return isinstance(other, Result) and self.triple() == other.triple()

    def __repr__(self):
        return "Result(rc=%d, out=%r, err=%r)" % self.triple()


def ctl_env(extra=None):
    """etcdctl's environment: ETCDCTL_API=3 and no other ETCDCTL_*."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ETCDCTL_")}
    env["ETCDCTL_API"] = "3"
    env.update(extra or {})
    return env


def run_ctl(endpoint, args, input=None, timeout=30):
    """Runs etcdctl --endpoints endpoint args; a raw text Result."""
    cp = subprocess.run([ETCDCTL, "--endpoints", endpoint] +
                        [str(a) for a in args], input=input,
                        capture_output=True, text=True, env=ctl_env(),
                        timeout=timeout)
    return Result(cp.returncode, cp.stdout, cp.stderr)


def mask_zap(text):
    """clientv3's JSON log lines with their time stamp and random client
    id masked (they differ on every run)."""
    text = re.sub(r'("level":"[a-z]+","ts":)("[^"]*"|[0-9.e+]+)', r'\1"<TS>"',
                  text)
    return re.sub(r'endpoint://client-[0-9a-f-]+/', "endpoint://client-"
                  "<UUID>/", text)


class ProxyPair:
    """A server and the grpc-proxies in front of it, of one kind.

    server: a started server object with .endpoint (its client address);
    proxy_args: the extra flags of the first proxy (self.proxy)."""

    def __init__(self, kind, server, proxy_args=()):
        self.kind = kind
        self.binary = kind_binary(kind)
        self.server = server
        self.proxies = []
        self.names = {}          # text replaced by a placeholder
        self.leases = {}         # placeholder -> this pair's lease id (hex)
        self.ids = self._server_ids()
        self.proxy = self.add_proxy(proxy_args, name="<PROXY>")
        self.names[server.endpoint] = "<SERVER>"

    def _server_ids(self):
        st = rpc_pb2_grpc.MaintenanceStub(self.channel(self.server.endpoint))
        h = st.Status(rpc_pb2.StatusRequest(), timeout=10).header
        return h.cluster_id, h.member_id

    def add_proxy(self, extra=(), name=None, start=True, endpoints=None):
        """Starts another proxy of this kind in front of the server (or of
        endpoints); name: its address's placeholder in outputs."""
        p = GrpcProxy(self.binary, endpoints or [self.server.endpoint],
                      extra)
        self.proxies.append(p)
        self.names[p.endpoint] = name or "<PROXY%d>" % len(self.proxies)
        if start:
            p.start()
        return p

    def alias_lease(self, lease_hex, name):
        """Shows this pair's lease lease_hex (hex and decimal) as name."""
        self.leases[name] = lease_hex
        self.names[lease_hex] = name
        self.names[str(int(lease_hex, 16))] = name

    def close(self):
        for p in self.proxies:
            p.close()

    # -- clients ------------------------------------------------------------
    _channels = {}

    @classmethod
    def channel(cls, endpoint):
        """A shared gRPC channel to endpoint."""
        if endpoint not in cls._channels:
            cls._channels[endpoint] = grpc.insecure_channel(
                endpoint, options=[
                    ("grpc.max_send_message_length", 64 << 20),
                    ("grpc.max_receive_message_length", 64 << 20)])
        return cls._channels[endpoint]

    def kv(self, via=None):
        """A KV stub through via (an endpoint; default: the proxy)."""
        return rpc_pb2_grpc.KVStub(self.channel(via or self.proxy.endpoint))

    def rev(self):
        """The server's current revision (asked directly)."""
        return self.kv(self.server.endpoint).Range(
            rpc_pb2.RangeRequest(key=b"\0"), timeout=10).header.revision

    def norm(self, text, subst=()):
        """text with what differs by nature replaced: ids, addresses,
        clientv3 log noise; subst: (text, placeholder) pairs."""
        text = mask_zap(text)
        for old, new in list(subst) + sorted(self.names.items(),
                                             key=lambda kv: -len(kv[0])):
            text = text.replace(str(old), new)
        cid, mid = self.ids
        for value, name in ((cid, "<CLUSTER_ID>"), (mid, "<MEMBER_ID>")):
            text = text.replace(str(value), name).replace("%x" % value, name)
        # the term depends on how each server elected itself
        text = re.sub(r'"raft_term":\d+', '"raft_term":<TERM>', text)
        if self.kind == "etcd":
            text = _etcd_lost_codes(text)
        return re.sub(r'"RaftTerm" : \d+', '"RaftTerm" : <TERM>', text)

    def ctl(self, *args, via=None, input=None, timeout=30, subst=()):
        """etcdctl through via (default: the proxy), normalised."""
        r = run_ctl(via or self.proxy.endpoint, args, input=input,
                    timeout=timeout)
        return Result(r.rc, self.norm(r.out, subst), self.norm(r.err, subst))

    def sctl(self, *args, **kw):
        """etcdctl on the server itself (bypassing the proxy)."""
        return self.ctl(*args, via=self.server.endpoint, **kw)


# etcd 3.4's proxy answers the KV, Lease and Cluster errors of its
# clientv3 client as plain Go errors, which grpc-go sends as UNKNOWN with the
# server's message; cetcd's proxy passes the server's code on (grpcproxy.h:
# better on purpose, clients that look at codes keep working).  On etcd's
# side the code the server itself sends for that message is put back, so
# everything else is still compared byte for byte.
_SERVER_CODES = {
    "etcdserver: mvcc: required revision has been compacted": "OutOfRange",
    "etcdserver: mvcc: required revision is a future revision": "OutOfRange",
    "etcdserver: key is not provided": "InvalidArgument",
    "etcdserver: requested lease not found": "NotFound",
    "etcdserver: member not found": "NotFound",
    "etcdserver: permission denied": "PermissionDenied",
    "etcdserver: user name is empty": "InvalidArgument",
    "etcdserver: invalid auth token": "Unauthenticated",
}


def _etcd_lost_codes(text):
    def put_back(m):
        code = _SERVER_CODES.get(m.group(1))
        return ("code = %s desc = %s" % (code, m.group(1)) if code
                else m.group(0))
    return re.sub(r"code = Unknown desc = (etcdserver: [a-z :]+)", put_back,
                  text)


def sync_revisions(pairs):
    """Brings every pair's server to the same revision by putting a
    scratch key directly on the servers that are behind."""
    revs = [p.rev() for p in pairs]
    top = max(revs)
    for p, r in zip(pairs, revs):
        for _ in range(top - r):
            p.kv(p.server.endpoint).Put(rpc_pb2.PutRequest(
                key=b"\0sync", value=b""), timeout=10)
    assert len({p.rev() for p in pairs}) == 1


def start_pairs(make_server, proxy_args=()):
    """{kind: ProxyPair} for every kind: make_server(binary) returns a
    started server (with .endpoint and .cleanup()); proxy_args go to
    each pair's first proxy.  Close them with close_pairs."""
    made = {}
    try:
        for kind in KINDS:
            made[kind] = None
            made[kind] = ProxyPair(kind, make_server(kind_binary(kind)),
                                   proxy_args)
    except BaseException:
        close_pairs(made)
        raise
    return made


def close_pairs(pairs):
    """Stops every proxy and server of pairs."""
    for p in pairs.values():
        if p is not None:
            p.close()
            p.server.cleanup()


def same(results):
    """Asserts every kind got the same (normalised) result; returns
    etcd's.  results: {kind: value}."""
    ref = results["etcd"]
    for kind, got in results.items():
        assert got == ref, "%s's pair differs from etcd's:\n etcd:  %r\n " \
            "%s: %r" % (kind, ref, kind, got)
    return ref


def both(pairs, *args, via=None, **kw):
    """Runs etcdctl args through each pair's proxy (or through via(pair),
    an endpoint), asserts the normalised results are equal; returns
    etcd's."""
    res = {}
    for kind, p in pairs.items():
        res[kind] = p.ctl(*args, via=via(p) if via else None, **kw)
    ref = res["etcd"]
    for kind, r in res.items():
        assert r == ref, "etcdctl %s: %s's pair differs from etcd's:\n " \
            "etcd:  %r\n %s: %r\n%s proxy log tail:\n%s" % (
                " ".join(map(str, args)), kind, ref, kind, r, kind,
                pairs[kind].proxy.log_tail())
    return ref


def each(pairs, fn):
    """{kind: fn(pair)}, the calls made in parallel threads (for what
    waits: timeouts, expiries)."""
    with concurrent.futures.ThreadPoolExecutor(len(pairs)) as ex:
        futs = {k: ex.submit(fn, p) for k, p in pairs.items()}
        return {k: f.result() for k, f in futs.items()}


def ok(out):
    """A successful etcdctl run that printed out and nothing on stderr."""
    return Result(0, out, "")


ZAP_ERROR = ('{"level":"warn","ts":"<TS>","caller":"clientv3/retry_'
             'interceptor.go:62","msg":"retrying of unary invoker failed",'
             '"target":"endpoint://client-<UUID>/%s","attempt":0,"error":'
             '"rpc error: code = %s desc = %s"}\nError: %s\n')


def zap_error(code, desc, shown=None, proxy="<PROXY>"):
    """etcdctl's stderr for a unary call that failed with gRPC code (its
    Go name) and message desc through proxy (a placeholder): clientv3's
    log line, then "Error: " and shown (default: desc).  "Unknown" for a
    server message etcd's proxy sends as UNKNOWN stands for the server's
    own code (_etcd_lost_codes puts it back on etcd's side)."""
    if code == "Unknown":
        code = _SERVER_CODES.get(desc, code)
    return ZAP_ERROR % (proxy, code, desc, desc if shown is None else shown)


def parse_json(text):
    """Normalised JSON text parsed, each bare placeholder (a number that
    was masked, e.g. <MEMBER_ID>) read as 0."""
    return json.loads(re.sub(r'(?<!")<[A-Z0-9_]+>(?!")', "0", text))
