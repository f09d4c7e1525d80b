"""cetcdctl's command line frame against the real etcdctl 3.4.23.

Goal: what cetcdctl prints for help, unknown commands, flag errors, global
flags and ETCDCTL_* variables is etcdctl's, byte for byte, with the same exit
code.  Method: each argument list runs through both tools
(tests/common/ctldiff.py, cetcdctl under the name "etcdctl") and stdout,
stderr and the exit code are compared.  Where etcdctl prints something that
cannot be equal (timestamps of its log lines, grpc-go's own debug logging,
the "completion" commands Debian's cobra adds), the difference is removed
visibly in the test.
"""

import re
import sys
import os

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctldiff import both_plain, cetcdctl_bin  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                reason="cetcdctl not built")

# An endpoint nobody listens on, for the flag and variable cases that try to
# connect; a short command timeout keeps them quick.
DEAD = ["--endpoints", "127.0.0.1:1", "--command-timeout", "300ms"]


def _no_completion(out):
    """Debian's cobra adds `completion` commands to etcdctl's help; cetcdctl
    has none (a shell-completion generator, not an etcdctl command)."""
    return b"".join(line for line in out.splitlines(keepends=True)
                    if b"\tcompletion " not in line)


def _same(args, env=None, fix=lambda s: s):
    a, b = both_plain(args, env=env)
    assert (b.rc, fix(b.out), fix(b.err)) == \
        (a.rc, fix(_no_completion(a.out)), fix(a.err)), args
    return a


def _commands():
    """Every command path etcdctl's root help lists ("member list", ...)."""
    a, _ = both_plain(["--help"])
    paths = []
    on = False
    for line in a.out.decode().splitlines():
        if line == "COMMANDS:":
            on = True
            continue
        if on and not line.startswith("\t"):
            break
        if on:
            paths.append(line.strip().split("\t")[0])
    return [p for p in paths if not p.startswith("completion")]


def test_root_help_and_no_arguments():
    _same(["--help"])
    _same([])
    _same(["-h"])
    _same(["help"])


def test_help_of_every_command():
    paths = _commands()
    assert "member list" in paths and "get" in paths
    for p in paths:
        _same(p.split() + ["--help"])
        _same(["help"] + p.split())


def test_groups_print_their_help():
    for group in ("member", "lease", "user", "role", "snapshot", "endpoint",
                  "alarm", "auth", "check"):
        _same([group])
        _same([group, "nosuch"])


def test_unknown_commands_and_suggestions():
    _same(["nosuch"])
    _same(["gte"])         # "Did you mean this? get"
    _same(["membr", "list"])
    _same(["help", "nosuch"])
    _same(["help", "nosuch", "other"])


def test_prefix_matching():
    _same(["vers"])
    _same(["ver", "--help"])
    _same(["m"])           # ambiguous: member, make-mirror, move-leader...


def test_flag_errors():
    _same(["version", "--foo"])
    _same(["--foo", "version"])
    _same(["version", "-x"])
    _same(["version", "-wjson", "-x"])
    _same(["version", "--dial-timeout=xx"])
    _same(["version", "--dial-timeout"])
    _same(["version", "-w"])
    _same(["version", "---x"])
    _same(["version", "--=x"])
    _same(["version", "--hex=maybe"])
    _same(["version", "--endpoints", '"a,b'])


def test_flags_anywhere_and_double_dash():
    _same(["-w", "json", "version"])
    _same(["version", "-w", "json"])
    _same(["--hex", "version"])
    _same(["version", "--", "--help"])


def test_unsupported_output_format():
    _same(DEAD + ["-w", "yaml", "get", "a"])


def test_unreachable_endpoint():
    a = _same(DEAD + ["get", "a"],
              fix=lambda s: re.sub(rb'\{"level":"warn".*\n', b"", s))
    assert a.rc == 1 and b"context deadline exceeded" in a.err


def _capnslog(s):
    return re.sub(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} ", b"<T> ", s,
                  flags=re.M)


def _no_grpc_log(s):
    s = re.sub(rb'\{"level":"warn".*\n', b"", s)
    return b"".join(line for line in s.splitlines(keepends=True)
                    if line.startswith((b"ETCDCTL_", b"Error:", b"<T>")))


def test_environment_variables():
    fix = lambda s: _no_grpc_log(_capnslog(s))  # noqa: E731
    env = {"ETCDCTL_COMMAND_TIMEOUT": "300ms", "ETCDCTL_FOO": "1",
           "ETCDCTL_ENDPOINTS": "127.0.0.1:1", "ETCDCTL_DEBUG": ""}
    _same(["get", "a", "--command-timeout", "300ms"], env=env, fix=fix)
    # a flag given on the command line shadows its variable
    env = {"ETCDCTL_ENDPOINTS": "127.0.0.1:2", "ETCDCTL_HEX": "true"}
    _same(DEAD + ["get", "a"], env=env, fix=fix)
    # a bad value is ignored, as etcdctl ignores it
    env = {"ETCDCTL_DIAL_TIMEOUT": "xx"}
    _same(DEAD + ["get", "a"], env=env, fix=fix)


def test_debug_prints_the_settings():
    fix = lambda s: _no_grpc_log(_capnslog(s))  # noqa: E731
    a = _same(DEAD + ["--debug", "--dial-timeout", "1m30s", "-w", "json",
                      "--hex", "get", "a"], fix=fix)
    assert b"ETCDCTL_DIAL_TIMEOUT=1m30s" in a.err


def test_api_version_variable():
    _same(["version"], env={"ETCDCTL_API": "3"})
    _same(["version"], env={"ETCDCTL_API": "4"})
