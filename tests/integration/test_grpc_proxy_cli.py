"""`cetcd grpc-proxy` as a command line, compared with etcd 3.4.23's.

Goal: what a user of `etcd grpc-proxy` sees before the proxy serves is the
same with cetcd (src/cmd/grpc_proxy.c):
  - the help of `grpc-proxy` (alone, -h, an unknown subcommand) and of
    `grpc-proxy start -h`, byte for byte, exit 0;
  - cobra's and pflag's errors: an unknown flag or shorthand, a flag
    without its value, a bad bool, int, uint32 or csv list value (Go's
    strconv and encoding/csv texts), exit 1;
  - etcd's checkArgs messages (--resolver-prefix, --resolver-ttl,
    --advertise-client-url), an unknown --listen-cipher-suites name (Go's
    log.Fatal), Go's net.Listen errors for a listen address that cannot be
    listened on, the TLS listener's fatal zap line for bad --cert-file,
    --key-file, --trusted-ca-file, and the upstream client's errors for bad
    --cert, --key, --cacert and no endpoints;
  - once started: READY=1 to $NOTIFY_SOCKET, the "gRPC proxy server TLS",
    "gRPC proxy client TLS" and --insecure-skip-tls-verify log lines, an
    --auto-tls certificate in <data-dir>/fixtures/proxy, a TLS listener
    that asks for client certificates when --trusted-ca-file is given, and
    death by SIGTERM or SIGINT.
cetcd alone (deliberate differences, skipped with CETCD_TEST_AGAINST_ETCD=1):
the flags whose feature is not built (--enable-pprof, --experimental-
serializable-ordering, --experimental-leasing-prefix) and arguments after
`start` (etcd ignores them) are refused naming them, exit 1; so is
--listen-cipher-suites without TLS files (etcd 3.4.23 crashes then).

Method: each argument list runs through /usr/bin/etcd and $CETCD_BIN (see
common.servers.server_bin) in a fresh directory, and stdout, stderr and the
exit status are compared.  What must differ is masked visibly before the
comparison: Go's log time stamps ("<TIME>"), zap's "ts" and "caller" (the
Go and C source positions) and Go's "stacktrace" field; gRPC-go's own
connection warnings ("grpclog/" caller) are dropped.  One difference of
order is masked in the client error cases only: etcd logs "listening for
gRPC proxy client requests" before it checks the client's TLS files,
cetcd's proxy module when it starts serving, after them.  Certificates come
from openssl in a module fixture.  Every start binds a free 127.0.0.1 port
(a busy one where the case is a busy port).  About 10 s.
"""

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile

import pytest

from common.servers import ETCD_BIN, against_etcd, free_port, server_bin

TIMEOUT = 20
cetcd_only = pytest.mark.skipif(
    against_etcd(), reason="a deliberate difference of cetcd; the binary "
    "under test is etcd here")


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="cetcd-gpcli-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(binary, args, cwd, env=None):
    """`binary grpc-proxy args...` to its end: (status, stdout, stderr)."""
    cp = subprocess.run([binary, "grpc-proxy"] + list(args), cwd=cwd,
                        env=env, capture_output=True, text=True,
                        timeout=TIMEOUT)
    return cp.returncode, cp.stdout, cp.stderr


GO_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} ", re.M)
LISTENING = "listening for gRPC proxy client requests"


def mask(text, drop=()):
    """text with the parts that must differ masked (see the module's
    text): zap lines keep level, msg and their fields."""
    out = []
    for line in GO_TIME.sub("<TIME> ", text).split("\n"):
        if not line.startswith("{"):
            out.append(line)
            continue
        j = json.loads(line)
        if j.get("caller", "").startswith("grpclog/") or j["msg"] in drop:
            continue
        j.update(ts="<TS>", caller="<CALLER>")
        j.pop("stacktrace", None)
        out.append(json.dumps(j, sort_keys=True))
    return "\n".join(out)


def compare(args, cwd, drop=()):
    """Runs args through both binaries; asserts the same outcome."""
    want = run(ETCD_BIN, args, cwd)
    got = run(server_bin(), args, cwd)
    want = (want[0], want[1], mask(want[2], drop))
    got = (got[0], got[1], mask(got[2], drop))
    assert got == want, "args %r\netcd:  %r\ncetcd: %r" % (args, want, got)
    return got


# -- help, cobra and pflag ---------------------------------------------------

PARSE_CASES = [
    [], ["-h"], ["--help"], ["-h=false"], ["foo"], ["help"], ["foo", "bar"],
    ["-h", "start"], ["--help", "start"], ["--debug", "start"], ["--foo"],
    ["-x"], ["--help=x"], ["--foo", "start"], ["foo", "--bad"],
    ["start", "-h"], ["start", "--help"], ["--help=1", "start"],
    ["start", "-h", "--foo"], ["start", "--help", "--resolver-ttl=x"],
    ["start", "--foo"], ["start", "--foo=1"], ["start", "-x"],
    ["start", "-hx"], ["start", "-h=x"], ["start", "-\u00e9"],
    ["start", "---x"], ["start", "--=x"], ["start", "--endpoints"],
    ["start", "--resolver-ttl"], ["start", "--max-send-bytes=x"],
    ["start", "--max-send-bytes="], ["start", "--max-recv-bytes", "1.5"],
    ["start", "--max-recv-bytes=99999999999999999999"],
    ["start", "--resolver-ttl=-9223372036854775809"],
    ["start", "--max-concurrent-streams=-1"],
    ["start", "--max-concurrent-streams=4294967296"],
    ["start", "--max-concurrent-streams=0x1_0000_0000"],
    ["start", "--resolver-ttl=1__0"], ["start", "--resolver-ttl=0b"],
    ["start", "--resolver-ttl=09"], ["start", "--debug=x"],
    ["start", "--auto-tls=yes"], ["start", "--insecure-skip-tls-verify=2"],
    ["start", "--max-send-bytes=\u00e9\n\t\"x"],
    ["start", "--endpoints=a\"b"], ["start", "--endpoints=\"ab"],
    ["start", "--endpoints=\"a\"b"], ["start", "--endpoints=x,\"y\"z"],
    ["start", "--listen-cipher-suites=a,\"b"],
    ["--max-send-bytes=1", "start", "--foo"],
    ["start", "--debug", "--max-send-bytes", "--foo"],
]


@pytest.mark.parametrize("args", PARSE_CASES, ids=repr)
def test_help_and_flag_errors(args, workdir):
    compare(args, workdir)


def test_help_texts_exact(workdir):
    """The help texts themselves, with etcd's name in them, on stdout."""
    status, out, err = compare(["start", "--help"], workdir)
    assert status == 0 and err == ""
    assert out.startswith("start the grpc proxy\n\nUsage:\n  etcd grpc-proxy "
                          "start [flags]\n")
    assert ("      --max-concurrent-streams uint32        Maximum concurrent "
            "streams that each client can open at a time. (default "
            "4294967295)\n") in out
    status, out, err = compare([], workdir)
    assert status == 0 and out.startswith("grpc-proxy related command\n")


# -- etcd's checks before it listens ------------------------------------------

CHECK_CASES = [
    ["--resolver-prefix=/p"],
    ["--resolver-ttl=3"],
    ["--resolver-prefix=/p", "--resolver-ttl=-1"],
    ["--resolver-ttl=0x10", "--resolver-prefix="],
    ["--resolver-prefix=/p", "--resolver-ttl=3", "--advertise-client-url="],
    ["--listen-cipher-suites=foo"],
    ["--listen-cipher-suites=TLS_AES_128_GCM_SHA256,,x"],
    ["--listen-cipher-suites=TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
     "--listen-cipher-suites=bad", "--cert-file=x"],
]


@pytest.mark.parametrize("args", CHECK_CASES, ids=repr)
def test_start_checks(args, workdir):
    status, _, _ = compare(["start", "--listen-addr=127.0.0.1:%d"
                            % free_port()] + args, workdir)
    assert status == 1


LISTEN_CASES = [
    "127.0.0.1:{busy}", "localhost:{busy}", ":{busy}", "foo",
    "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:abc", "a:b:c", "[::1",
    "[::1]", "[::1]:x:1", "a]:1", "[a]b:1", "192.0.2.1:{free}",
]


@pytest.mark.parametrize("addr", LISTEN_CASES)
def test_listen_errors(addr, workdir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        a = addr.format(busy=busy.getsockname()[1], free=free_port())
        status, _, err = compare(["start", "--listen-addr=" + a,
                                  "--endpoints=127.0.0.1:1"], workdir)
    assert status == 1 and err.startswith("listen tcp"), err


def test_unbuilt_flags_at_defaults_pass(workdir):
    """Their defaults given explicitly are accepted (the listen error
    that follows is reached, on both)."""
    compare(["start", "--enable-pprof=false",
             "--experimental-serializable-ordering=false",
             "--experimental-leasing-prefix=", "--listen-addr=foo"], workdir)


# -- TLS files ----------------------------------------------------------------

def _openssl(d, *args):
    subprocess.run(["openssl"] + list(args), cwd=d, check=True,
                   capture_output=True)


def _leaf(d, name, subj):
    """A P-256 key and a certificate signed by ca, for 127.0.0.1."""
    _openssl(d, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
             "-subj", subj)
    _openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt",
             "-CAkey", "ca.key", "-CAcreateserial", "-out", name + ".crt",
             "-days", "30", "-extfile", "ext")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """ca, srv (CN=localhost), client (no CN), cn (CN=someone), other.key
    (a key of nothing), garbage.pem (no PEM at all)."""
    d = str(tmp_path_factory.mktemp("gpcerts"))
    _openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
             "-out", "ca.crt", "-days", "30", "-subj", "/CN=ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth,clientAuth\n")
    _leaf(d, "srv", "/CN=localhost")
    _leaf(d, "client", "/O=proxy")
    _leaf(d, "cn", "/CN=someone")
    _openssl(d, "genpkey", "-algorithm", "EC", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-out", "other.key")
    with open(os.path.join(d, "garbage.pem"), "w") as f:
        f.write("not a PEM file\n")
    return d


LISTENER_TLS_CASES = [
    ["--trusted-ca-file=ca.crt"],
    ["--cert-file=srv.crt"],
    ["--key-file=srv.key"],
    ["--cert-file=nope.crt", "--key-file=srv.key"],
    ["--cert-file=srv.crt", "--key-file=nope.key"],
    ["--cert-file=garbage.pem", "--key-file=srv.key"],
    ["--cert-file=srv.crt", "--key-file=garbage.pem"],
    ["--cert-file=srv.key", "--key-file=srv.key"],
    ["--cert-file=srv.crt", "--key-file=srv.crt"],
    ["--cert-file=srv.crt", "--key-file=other.key"],
    ["--cert-file=srv.crt", "--key-file=srv.key", "--trusted-ca-file=nope"],
    ["--cert-file=srv.crt", "--key-file=srv.key",
     "--trusted-ca-file=srv.key"],
]


@pytest.mark.parametrize("args", LISTENER_TLS_CASES, ids=repr)
def test_listener_tls_errors(args, certs):
    status, _, err = compare(["start", "--listen-addr=127.0.0.1:%d"
                              % free_port(), "--endpoints=127.0.0.1:1"]
                             + args, certs)
    assert status == 1 and "failed to create TLS listener" in err, err


CLIENT_TLS_CASES = [
    ["--cert=client.crt"],
    ["--key=client.key"],
    ["--cert=nope.crt", "--key=client.key"],
    ["--cert=client.crt", "--key=nope.key"],
    ["--cert=cn.crt", "--key=cn.key"],
    ["--cert=garbage.pem", "--key=client.key"],
    ["--cert=client.crt", "--key=garbage.pem"],
    ["--cert=client.crt", "--key=other.key"],
    ["--cacert=nope.crt"],
    ["--cacert=client.key"],
    ["--cacert=nope.crt", "--endpoints="],
    ["--endpoints="],
    ["--endpoints=", "--cacert=ca.crt", "--insecure-skip-tls-verify"],
    ["--endpoints=", "--cert=client.crt", "--key=client.key",
     "--cacert=ca.crt"],
]


@pytest.mark.parametrize("args", CLIENT_TLS_CASES, ids=repr)
def test_client_errors(args, certs):
    eps = [] if any(a.startswith("--endpoints") for a in args) else [
        "--endpoints=127.0.0.1:1"]
    status, _, _ = compare(["start", "--listen-addr=127.0.0.1:%d"
                            % free_port()] + eps + args, certs,
                           drop=(LISTENING,))
    assert status == 1


# -- started ------------------------------------------------------------------

OWN_LINES = ("gRPC proxy server TLS", "gRPC proxy client TLS",
             "--insecure-skip-tls-verify was given, this grpc proxy process "
             "skips authentication of etcd server TLS certificates. This "
             "option should be enabled only for testing purposes.")


class Started:
    """`binary grpc-proxy start ...` until READY=1 came to its
    NOTIFY_SOCKET."""

    def __init__(self, binary, args, cwd):
        self.port = free_port()
        self.sock_path = os.path.join(cwd, "notify-%d.sock" % self.port)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.sock_path)
        self.notify.settimeout(TIMEOUT)
        env = dict(os.environ, NOTIFY_SOCKET=self.sock_path)
        self.proc = subprocess.Popen(
            [binary, "grpc-proxy", "start", "--listen-addr=127.0.0.1:%d"
             % self.port] + list(args), cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.ready = self.notify.recv(64)
        except socket.timeout:
            self.stop(signal.SIGKILL)
            pytest.fail("no READY=1 from %s: %r" % (binary, self.err))

    def stop(self, sig):
        self.proc.send_signal(sig)
        self.out, self.err = self.proc.communicate(timeout=TIMEOUT)
        self.notify.close()
        return self.proc.returncode


def handshake(port, certs, client_cert):
    """A TLS 1.2 handshake with the listener (TLS 1.2: a missing client
    certificate fails the handshake itself); True when it completes."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if client_cert:
        ctx.load_cert_chain(os.path.join(certs, "client.crt"),
                            os.path.join(certs, "client.key"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw) as tls:
                tls.do_handshake()
        return True
    except (ssl.SSLError, OSError):
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_started_auto_tls(sig, certs, workdir):
    """READY=1, the TLS log lines, the --auto-tls files and a TLS
    listener, then death by the signal: the same on both."""
    seen = {}
    for name, binary in (("etcd", ETCD_BIN), ("cetcd", server_bin())):
        data = os.path.join(workdir, name)
        p = Started(binary, ["--endpoints=127.0.0.1:%d" % free_port(),
                             "--auto-tls", "--data-dir=" + data,
                             "--insecure-skip-tls-verify",
                             "--cacert=" + os.path.join(certs, "ca.crt")],
                    workdir)
        tls_ok = handshake(p.port, certs, False)
        status = p.stop(sig)
        lines = [json.loads(ln) for ln in p.err.splitlines()
                 if ln.startswith("{")]
        own = [(j["level"], j["msg"], j.get("tls-info", "").replace(
            data, "<DATA>").replace(certs, "<CERTS>"))
            for j in lines if j["msg"] in OWN_LINES]
        files = sorted(os.listdir(os.path.join(data, "fixtures", "proxy")))
        seen[name] = (p.ready, status, tls_ok, own, files)
    assert seen["cetcd"] == seen["etcd"]
    assert seen["etcd"][:3] == (b"READY=1", -sig, True)


def test_started_client_certs_required(certs, workdir):
    """--trusted-ca-file: the listener wants a client certificate."""
    seen = {}
    for name, binary in (("etcd", ETCD_BIN), ("cetcd", server_bin())):
        p = Started(binary, ["--endpoints=127.0.0.1:%d" % free_port(),
                             "--cert-file=srv.crt", "--key-file=srv.key",
                             "--trusted-ca-file=ca.crt"], certs)
        seen[name] = (handshake(p.port, certs, False),
                      handshake(p.port, certs, True), p.stop(signal.SIGTERM))
    assert seen["cetcd"] == seen["etcd"] == (False, True, -signal.SIGTERM)


# -- cetcd alone --------------------------------------------------------------

@cetcd_only
@pytest.mark.parametrize("args, name", [
    (["--enable-pprof"], "enable-pprof=true"),
    (["--enable-pprof=true"], "enable-pprof=true"),
    (["--experimental-serializable-ordering"],
     "experimental-serializable-ordering=true"),
    (["--experimental-leasing-prefix=lp/"], "experimental-leasing-prefix"),
])
def test_unbuilt_flags_refused(args, name, workdir):
    status, out, err = run(server_bin(), ["start", "--listen-addr=127.0.0.1:%d"
                                          % free_port()] + args, workdir)
    assert (status, out) == (1, "")
    assert err == ("cetcd: --%s is not supported yet: the feature behind it "
                   "is not built in this version of cetcd\n" % name)


@cetcd_only
@pytest.mark.parametrize("args, word", [
    (["start", "foo"], "foo"),
    (["start", "--debug", "false"], "false"),
    (["start", "--", "--listen-addr=x"], "--listen-addr=x"),
])
def test_arguments_after_start_refused(args, word, workdir):
    """etcd ignores them (`start --debug false` runs with debug on)."""
    status, out, err = run(server_bin(), args, workdir)
    msg = 'unknown command "%s" for "etcd grpc-proxy start"' % word
    assert (status, out) == (1, "")
    assert err.startswith("Error: %s\nUsage:\n" % msg) and err.endswith(
        "\n\n" + msg), err


@cetcd_only
@pytest.mark.parametrize("more", [[], ["--auto-tls"]])
def test_cipher_suites_without_tls_files_refused(more, workdir):
    """etcd 3.4.23 dies of a nil pointer dereference here."""
    status, out, err = run(server_bin(), [
        "start", "--listen-addr=127.0.0.1:%d" % free_port(),
        "--listen-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
        + more, workdir)
    assert (status, out) == (1, "")
    assert ("cetcd: --listen-cipher-suites needs --cert-file, --key-file or "
            "--trusted-ca-file" in err), err
