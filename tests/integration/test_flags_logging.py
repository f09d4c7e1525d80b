"""The logging flags, as etcd 3.4 checks them.

Goal: --logger and --log-outputs are built or refused, never accepted and
ignored: capnslog (the default, as in etcd 3.4) with one output of
"default", "stderr" or "stdout" (lines then go to stdout); an unknown
logger or output, or several outputs, is refused with etcd's
"error verifying flags" line and exit status 1.  --logger=zap is
tests/integration/test_logging.py's.  Method: the member's command line from conftest's Server, run
in the foreground; stdout and stderr read apart.  The etcd-valid cases also
run against etcd 3.4.23 (CETCD_TEST_AGAINST_ETCD=1).
"""
import subprocess

import pytest



def run(make_server, *flags):
    s = make_server(start=False)
    s.extra_args = list(flags)
    try:
        return subprocess.run(s.args(), capture_output=True, text=True,
                              timeout=30, cwd=s.root)
    finally:
        s.cleanup()


@pytest.mark.parametrize("flags, msg", [
    (("--logger", "foo"), 'unknown logger option "foo"'),
    (("--log-outputs", "stderr,stdout"),
     "--logger=capnslog supports only 1 value in '--log-outputs', got "
     '["stderr" "stdout"]'),
    (("--log-outputs", "/tmp/cetcd-log-file"),
     'unknown log-output "/tmp/cetcd-log-file" (only supports "default", '
     '"stderr", "stdout")'),
])
def test_bad_logging_flags_refused(make_server, flags, msg):
    cp = run(make_server, *flags)
    assert cp.returncode == 1, cp
    assert ("error verifying flags, %s. See 'etcd --help'." % msg
            in cp.stderr), cp.stderr


def test_log_outputs_stdout(make_server):
    s = make_server(start=False)
    s.extra_args = ["--log-outputs", "stdout"]
    p = subprocess.Popen(s.args(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=s.root)
    try:
        line = p.stdout.readline()
        assert " | " in line and "etcd" in line, line
    finally:
        p.terminate()
        out, err = p.communicate(timeout=30)
        s.cleanup()
    assert " I | " not in err, err
