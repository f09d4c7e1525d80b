"""Run the real etcdctl 3.4.23 and cetcdctl on the same command lines and
compare what they print.

Goal: cetcdctl answers every command line as etcdctl does: the same
stdout, stderr and exit code.  Method: `Pair` starts two fresh single-member
servers of the same binary (cetcd by default, the real etcd with
CETCD_TEST_AGAINST_ETCD=1), one per tool, so a command that changes state
runs once on each side and both sides keep the same history (the same
revisions, lease and member counts); `Pair.both(args)` runs etcdctl on
server A and cetcdctl on server B and returns both results with each
server's cluster and member ids (decimal and hex) replaced by
placeholders, which is all that differs between the two servers.  Lease
ids differ between servers too (they are drawn at random): `Pair.norm`
takes extra (value, placeholder) pairs for them.

cetcdctl is run through a symlink named "etcdctl", so that its messages
name the program as etcdctl's do.  Its binary: $CETCDCTL_BIN, else
$CETCD_BUILD_DIR/src/ctl/cetcdctl, else <repo>/build/src/ctl/cetcdctl.
"""

import os
import re
import subprocess
import tempfile

ETCDCTL = "/usr/bin/etcdctl"

# Tests too slow for CI's quick tier (a minute of load, a 30 s timer, a
# member added and removed on two clusters) run with CETCD_TEST_LONG=1
# (docs/TESTING.md "Longer runs"); etcd's e2e tests with cetcdctl cover the
# same commands in CI.
LONG = bool(os.environ.get("CETCD_TEST_LONG"))
LONG_REASON = "long run: set CETCD_TEST_LONG=1 (docs/TESTING.md)"
_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def cetcdctl_bin():
    """The cetcdctl binary under test (see the module's text)."""
    if os.environ.get("CETCDCTL_BIN"):
        return os.environ["CETCDCTL_BIN"]
    build = os.environ.get("CETCD_BUILD_DIR", os.path.join(_REPO, "build"))
    return os.path.join(build, "src", "ctl", "cetcdctl")


_LINK_DIR = None


def cetcdctl_as_etcdctl():
    """A path named .../etcdctl that runs cetcdctl."""
    global _LINK_DIR
    if _LINK_DIR is None:
        _LINK_DIR = tempfile.mkdtemp(prefix="cetcdctl-")
        os.symlink(os.path.abspath(cetcdctl_bin()),
                   os.path.join(_LINK_DIR, "etcdctl"))
    return os.path.join(_LINK_DIR, "etcdctl")


def clean_env(extra=None):
    """The environment both tools run in: no ETCDCTL_* but what is given."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ETCDCTL_")}
    env.update(extra or {})
    return env


class Result:
    """One run: exit code, stdout and stderr (bytes)."""

    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def triple(self):
        return (self.rc, self.out, self.err)

    def __repr__(self):
        return "Result(rc=%d, out=%r, err=%r)" % (self.rc, self.out,
                                                   self.err)


def run(binary, args, endpoint=None, input=None, env=None, timeout=30):
    """Runs binary with args (and --endpoints endpoint first if given)."""
    argv = [binary]
    if endpoint:
        argv += ["--endpoints", endpoint]
    argv += [str(a) for a in args]
    if isinstance(input, str):
        input = input.encode()
    cp = subprocess.run(argv, input=input, capture_output=True,
                        env=clean_env(env), timeout=timeout)
    return Result(cp.returncode, cp.stdout, cp.stderr)


def both_plain(args, input=None, env=None, timeout=30):
    """Runs both tools on args with no server given (flag errors, help,
    unreachable endpoints); returns (etcdctl, cetcdctl) results."""
    a = run(ETCDCTL, args, input=input, env=env, timeout=timeout)
    b = run(cetcdctl_as_etcdctl(), args, input=input, env=env,
            timeout=timeout)
    return a, b


def mask_zap(data):
    """clientv3's JSON log lines ("retrying of unary invoker failed"), which
    both tools print, with what differs by nature masked: the time stamp and
    the random client id in the target."""
    data = re.sub(rb'(\{"level":"[a-z]+","ts":")[^"]*"', rb'\1<TS>"', data)
    return re.sub(rb'endpoint://client-[0-9a-f-]+/', b"endpoint://client-"
                  b"<UUID>/", data)


def pb_varint(b, i):
    """The protobuf varint at b[i:]: (value, index after it)."""
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if c < 0x80:
            return v, i


def pb_enc_varint(v):
    """v as a protobuf varint."""
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7f | 0x80])
        v >>= 7
    return out + bytes([v])


def server_ids(endpoint):
    """(cluster_id, member_id) of the member at endpoint, from etcdctl's
    json output."""
    import json
    r = run(ETCDCTL, ["endpoint", "status", "-w", "json"], endpoint=endpoint)
    st = json.loads(r.out)[0]["Status"]["header"]
    return st["cluster_id"], st["member_id"]


def _replace_ids(data, ids, tag):
    cid, mid = ids
    for value, name in ((cid, b"<CLUSTER_ID>"), (mid, b"<MEMBER_ID>")):
        data = data.replace(str(value).encode(), name)
        data = data.replace(b"%x" % value, name)
    return data


class Pair:
    """Two servers, one for etcdctl (a) and one for cetcdctl (b).

    make_server is the integration suites' fixture factory (conftest);
    extra_args go to both servers.
    """

    def __init__(self, make_server, extra_args=()):
        self.a = make_server(extra_args=extra_args, name="m1")
        self.b = make_server(extra_args=extra_args, name="m1")
        self.ids_a = server_ids(self.a.endpoint)
        self.ids_b = server_ids(self.b.endpoint)

    def both(self, args, input=None, env=None, timeout=30, subst=()):
        """Runs etcdctl on server a and cetcdctl on server b; returns the
        two Results with ids replaced.  subst: (bytes_a, bytes_b, name)
        triples replaced on each side (e.g. lease ids)."""
        a = run(ETCDCTL, args, endpoint=self.a.endpoint, input=input,
                env=env, timeout=timeout)
        b = run(cetcdctl_as_etcdctl(), args, endpoint=self.b.endpoint,
                input=input, env=env, timeout=timeout)
        for r, ids, side in ((a, self.ids_a, 0), (b, self.ids_b, 1)):
            r.out = _replace_ids(r.out, ids, side)
            r.err = _replace_ids(r.err, ids, side)
            for t in subst:
                r.out = r.out.replace(t[side], t[2])
                r.err = r.err.replace(t[side], t[2])
            r.out = r.out.replace(self.a.endpoint.encode() if side == 0
                                  else self.b.endpoint.encode(), b"<EP>")
            r.err = r.err.replace(self.a.endpoint.encode() if side == 0
                                  else self.b.endpoint.encode(), b"<EP>")
        return a, b

    def assert_same(self, args, **kw):
        """both(), then asserts the two results are equal; returns
        etcdctl's result."""
        a, b = self.both(args, **kw)
        assert b.triple() == a.triple(), (
            "cetcdctl differs from etcdctl for %r:\n etcdctl:  %r\n "
            "cetcdctl: %r" % (args, a, b))
        return a
