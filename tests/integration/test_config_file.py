"""--config-file: etcd 3.4's YAML configuration file.

Goal: a file with every key etcd 3.4.23 reads (embed.configYAML's and
etcdmain.configProxy's, with the nested client-/peer-transport-security
blocks) starts a member whose options are the file's, and every other flag
and ETCD_* variable is ignored (as etcd does: it logs so); ETCD_CONFIG_FILE
names the file too; a key whose feature cetcd has not built is refused,
naming the key; a bad file (YAML syntax, a value of the wrong type, a file
that is not a mapping, a missing file) is refused with etcd's own message
and exit code.  Method: the file is written with the test's free ports and
data dir; the effects of a sample of keys are read from outside (the
member's name and URLs in MemberList, the client and metrics listeners,
--max-txn-ops and --max-request-bytes limits, the auto-compaction log
line); bad files are given to /usr/bin/etcd and to cetcd and the
"error verifying flags" lines compared.  The every-key file also starts
etcd 3.4.23 (CETCD_TEST_AGAINST_ETCD=1).
"""
import os
import re
import subprocess
import tempfile
import time
import urllib.request

import grpc
import pytest

from conftest import Server, against_etcd, free_port, grpc_error
from common.servers import server_bin
from common.servers import ETCD_BIN
from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc as pb_grpc

# Every key of etcd 3.4.23's configuration file, each with a value cetcd
# supports.  {..} fields are filled per test.
EVERY_KEY = """\
name: 'cfg-member'
data-dir: {data}
wal-dir:
snapshot-count: 5000
heartbeat-interval: 50
election-timeout: 500
initial-election-tick-advance: true
backend-batch-interval: 0
backend-batch-limit: 0
quota-backend-bytes: 0
max-txn-ops: 3
max-request-bytes: 4096
max-concurrent-streams: 100
listen-peer-urls: {peer}
listen-client-urls: {client}
max-snapshots: 3
max-wals: 3
cors:
initial-advertise-peer-urls: {peer}
advertise-client-urls: {client}
discovery:
discovery-fallback: 'proxy'
discovery-proxy:
discovery-srv:
discovery-srv-name:
initial-cluster: cfg-member={peer}
initial-cluster-token: 'cfg-token'
initial-cluster-state: 'new'
strict-reconfig-check: true
enable-v2: false
enable-pprof: false
proxy: 'off'
proxy-failure-wait: 5000
proxy-refresh-interval: 30000
proxy-dial-timeout: 1000
proxy-write-timeout: 5000
proxy-read-timeout: 0
client-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
peer-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
debug: false
log-package-levels:
logger: capnslog
log-level: info
log-outputs: [stderr]
force-new-cluster: false
auto-compaction-mode: revision
auto-compaction-retention: "3"
cipher-suites: []
grpc-keepalive-min-time: 5000000000
grpc-keepalive-interval: 7200000000000
grpc-keepalive-timeout: 20000000000
pre-vote: true
auth-token: simple
bcrypt-cost: 10
auth-token-ttl: 300
experimental-initial-corrupt-check: true
experimental-corrupt-check-time: 0
experimental-enable-v2v3:
experimental-backend-bbolt-freelist-type: map
experimental-enable-lease-checkpoint: true
experimental-enable-lease-checkpoint-persist: true
experimental-compaction-batch-limit: 500
experimental-watch-progress-notify-interval: 600000000000
experimental-warning-apply-duration: 100000000
metrics: basic
listen-metrics-urls: {metrics}
enable-grpc-gateway: false
unsafe-no-fsync: false
host-whitelist:
"""


class FileServer(Server):
    """A member started from a config file, with decoy flags and ETCD_*
    variables that etcd (and so cetcd) must ignore."""

    def __init__(self, text, **kw):
        super().__init__(name="cfg-member", **kw)
        self.metrics_port = free_port()
        self.cfg = os.path.join(self.root, "etcd.conf.yml")
        with open(self.cfg, "w") as f:
            f.write(text.format(data=self.data_dir, peer=self.peer_url,
                                client=self.client_url,
                                metrics="http://127.0.0.1:%d" %
                                self.metrics_port))

    def args(self):
        return [self.binary, "--config-file", self.cfg,
                "--name", "decoy", "--max-txn-ops", "1000"]


def metrics_ok(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                timeout=10) as r:
        return r.status == 200 and b"etcd_server_has_leader" in r.read()


def test_every_key(monkeypatch):
    # Decoy variables: a file makes etcd ignore them all.
    monkeypatch.setenv("ETCD_NAME", "decoy-env")
    monkeypatch.setenv("ETCD_MAX_REQUEST_BYTES", "10000000")
    monkeypatch.setenv("CETCD_TEST_COMPACTOR_INTERVAL_MS", "300")
    s = FileServer(EVERY_KEY)
    try:
        s.start()
        cl = pb_grpc.ClusterStub(s.channel())
        ms = cl.MemberList(pb.MemberListRequest()).members
        assert [(m.name, list(m.peerURLs), list(m.clientURLs))
                for m in ms] == [("cfg-member", [s.peer_url],
                                  [s.client_url])]
        assert os.path.isdir(os.path.join(s.data_dir, "member"))
        # max-txn-ops: 3 (the decoy flag said 1000).
        kv = s.kv()
        ops = [pb.RequestOp(request_put=pb.PutRequest(key=b"k%d" % i,
                                                      value=b"v"))
               for i in range(4)]
        assert grpc_error(kv.Txn, pb.TxnRequest(success=ops)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "etcdserver: too many operations in txn request")
        kv.Txn(pb.TxnRequest(success=ops[:3]))
        # max-request-bytes: 4096 (ETCD_MAX_REQUEST_BYTES is ignored).
        code, _ = grpc_error(kv.Put, pb.PutRequest(key=b"big",
                                                   value=b"x" * 8192))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        kv.Put(pb.PutRequest(key=b"small", value=b"x" * 1000))
        # listen-metrics-urls
        assert metrics_ok(s.metrics_port)
        log = open(s.log_path).read()
        assert "Loading server configuration from" in log
        if not against_etcd():
            # auto-compaction-mode: revision, retention "3" reached the
            # compactor (which looks every 300 ms here, a test knob).
            for i in range(10):
                kv.Put(pb.PutRequest(key=b"ac", value=b"%d" % i))
            deadline = time.time() + 20
            while time.time() < deadline and not re.search(
                    r"Finished auto-compaction at revision \d+",
                    open(s.log_path).read()):
                time.sleep(0.1)
            assert "Finished auto-compaction" in open(s.log_path).read()
        s.restart()
        assert s.kv().Range(pb.RangeRequest(key=b"small")).count == 1
    finally:
        s.cleanup()


def test_env_names_the_file(monkeypatch):
    s = FileServer(EVERY_KEY)
    try:
        monkeypatch.setenv("ETCD_CONFIG_FILE", s.cfg)
        s.args = lambda: [s.binary, "--name", "decoy"]
        s.start()
        ms = pb_grpc.ClusterStub(s.channel()).MemberList(
            pb.MemberListRequest()).members
        assert [m.name for m in ms] == ["cfg-member"]
    finally:
        s.cleanup()


def run_with(binary, text):
    d = tempfile.mkdtemp(prefix="cetcd-cfg-")
    path = os.path.join(d, "c.yml")
    with open(path, "w") as f:
        f.write(text)
    cp = subprocess.run([binary, "--config-file", path], cwd=d,
                        capture_output=True, text=True, timeout=30)
    subprocess.run(["rm", "-rf", d])
    return cp


def error_line(cp):
    for line in (cp.stderr + cp.stdout).splitlines():
        if "error verifying flags" in line:
            return line[line.index("etcdmain:"):]
    return None


BAD = [
    "name: [x\n",
    "a: b: c\n",
    "\tname: x\n",
    "- a\n- b\n",
    "hello\n",
    "snapshot-count: abc\n",
    "snapshot-count: -1\n",
    "snapshot-count: 1.5\n",
    "snapshot-count: 18446744073709551616\n",
    "max-concurrent-streams: 4294967296\n",
    "name: 15\n",
    "name: yes\n",
    "name: {a: 1}\n",
    "strict-reconfig-check: 1\n",
    "grpc-keepalive-min-time: 5s\n",
    "log-outputs: stderr\n",
    "log-outputs: [1]\n",
    "client-transport-security: x\n",
    "client-transport-security:\n  cert-file: [1]\n",
    "proxy-dial-timeout: x\n",
    "zzz: 1\npre-vote: 3\nelection-timeout: x\n",
    "key: \"unterminated\n",
    "a:\n  - b\n c: d\n",
    "heartbeat-interval: 1e-7\n",
]


@pytest.mark.parametrize("text", BAD)
def test_bad_file_as_etcd(make_server, text):
    s = make_server(start=False)
    cp = run_with(s.binary, text)
    assert cp.returncode == 1, cp
    line = error_line(cp)
    assert line is not None and line.endswith("See 'etcd --help'."), cp
    if os.path.exists(ETCD_BIN) and not against_etcd():
        want = error_line(run_with(ETCD_BIN, text))
        assert line == want


def test_missing_file(make_server):
    s = make_server(start=False)
    cp = subprocess.run([s.binary, "--config-file", "/nonexistent/x.yml"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 1
    assert error_line(cp) == ("etcdmain: error verifying flags, open "
                              "/nonexistent/x.yml: no such file or "
                              "directory. See 'etcd --help'.")


@pytest.mark.skipif(against_etcd(), reason="etcd 3.4 has v2 and pprof")
@pytest.mark.parametrize("key", ["enable-v2: true", "enable-pprof: true",
                                 "proxy: 'on'"])
def test_unbuilt_key_refused(make_server, key):
    """A key whose feature is not built is refused as its flag is."""
    s = make_server(start=False)
    cp = run_with(s.binary, key + "\n")
    name = key.split(":")[0]
    assert cp.returncode == 1, cp
    assert ("%s in the configuration file is not supported yet" % name
            in cp.stderr), cp.stderr


MINIMAL = """name: cfg-member
data-dir: {data}
listen-peer-urls: {peer}
initial-advertise-peer-urls: {peer}
listen-client-urls: {client}
advertise-client-urls: {client}
initial-cluster: cfg-member={peer}
"""


def started_log(text, wanted):
    """The log of a member started from MINIMAL + text, once every line of
    wanted is in it (the checks log their start on their own threads,
    after the member serves), or after 3 s with wanted empty."""
    s = FileServer(MINIMAL + text)
    try:
        s.start()
        deadline = time.time() + (20 if wanted else 3)
        while time.time() < deadline:
            log = open(s.log_path).read()
            if wanted and all(w in log for w in wanted):
                break
            time.sleep(0.1)
        return open(s.log_path).read()
    finally:
        s.cleanup()


@pytest.mark.skipif(against_etcd(), reason="etcd 3.5's keys (3.4.23 ignores "
                    "them) and cetcd's defaults")
def test_corrupt_check_keys():
    """The compaction-time check's keys under etcd 3.5's names, and the
    3.4 periodic check's: each reaches its check (the check logs its
    interval when it starts); false / 0 turns a check off, and the
    defaults (cetcd: on) apply when the file says nothing."""
    want = ["enabled compact hash check with 60000ms interval",
            "enabled corruption checking with 300000ms interval"]
    log = started_log("", want)
    assert all(w in log for w in want), log
    want = ["enabled compact hash check with 2500ms interval",
            "enabled corruption checking with 7000ms interval"]
    log = started_log("experimental-compact-hash-check-enabled: true\n"
                      "experimental-compact-hash-check-time: 2500000000\n"
                      "experimental-corrupt-check-time: 7000000000\n", want)
    assert all(w in log for w in want), log
    log = started_log("experimental-compact-hash-check-enabled: false\n"
                      "experimental-corrupt-check-time: 0\n", [])
    assert "enabled compact hash check" not in log
    assert "enabled corruption checking" not in log
    # etcd 3.5's check of the time, with the file's value.
    cp = run_with(server_bin(), "experimental-compact-hash-"
                  "check-time: 0\n")
    assert cp.returncode == 1
    assert error_line(cp) == (
        "etcdmain: error verifying flags, --experimental-compact-hash-check-"
        "time must be >0 (set to: 0s). See 'etcd --help'."), cp.stderr
    cp = run_with(server_bin(), "experimental-compact-hash-"
                  "check-enabled: 3\n")
    assert cp.returncode == 1
    assert "experimental-compact-hash-check-enabled" in error_line(cp), cp
