"""The etcd version a cetcd member reports (--experimental-reported-version).

Goal: by default a member reports 3.4.31 (Status.version, as `etcdctl
endpoint status` prints it, and the startup log "etcd Version: 3.4.31"),
the 3.4 release whose watch progress behaviour cetcd has: Kubernetes sends
RequestProgress only to etcd >= 3.4.31 (docs/ARCHITECTURE.md "Reported
version").  The flag reports another major.minor.patch; a malformed value
is refused with exit status 2 and a message that names the flag.

Method: servers from conftest with and without the flag; Status over gRPC,
the log read from outside; the refusals through `--version` (parsed, then
exit).  cetcd only: etcd 3.4.23 has no such flag and reports 3.4.23.
"""
import subprocess

import pytest

from conftest import against_etcd
from etcd3.etcdrpc import rpc_pb2 as pb

pytestmark = pytest.mark.skipif(against_etcd(), reason="a cetcd-only flag")


def status_version(s):
    return s.maintenance().Status(pb.StatusRequest(), timeout=10).version


def log_of(s):
    with open(s.log_path) as f:
        return f.read()


def test_default_reports_3_4_31(make_server):
    s = make_server()
    assert status_version(s) == "3.4.31"
    assert "etcdmain: etcd Version: 3.4.31 (cetcd " in log_of(s)
    out = subprocess.run([s.binary, "--version"], capture_output=True,
                         text=True, timeout=10).stdout
    assert out.splitlines()[0] == "etcd Version: 3.4.31"


def test_flag_reports_another_version(make_server):
    s = make_server(extra_args=["--experimental-reported-version=3.4.23"])
    assert status_version(s) == "3.4.23"
    assert "etcdmain: etcd Version: 3.4.23 (cetcd " in log_of(s)


@pytest.mark.parametrize("value", ["", "3.4", "3.4.x", "v3.4.31", "3.4.31 ",
                                   "3..4", "3.4.31.1", "1234567890.0.0"])
def test_bad_value_refused(make_server, value):
    s = make_server(start=False)
    cp = subprocess.run(s.args() + ["--experimental-reported-version=" +
                                    value, "--version"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2, cp
    assert ('invalid value "%s" for flag -experimental-reported-version'
            % value) in cp.stderr, cp.stderr
