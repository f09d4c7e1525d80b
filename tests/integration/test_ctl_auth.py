"""cetcdctl's auth, user and role commands against the real etcdctl 3.4.23.

Goal: `auth enable/disable`, every `user` and `role` sub-command and the
global --user/--password handling answer as etcdctl does: the same stdout,
stderr and exit code, in every output format (simple, json, protobuf,
fields, table), for argument errors, server errors and password prompts.
Method: differential (tests/common/ctldiff.py).  A Pair gives each tool a
fresh server; each command line runs once on each side, so both servers go
through the same history and print the same revisions.  What cannot be
equal is removed visibly: etcdctl's clientv3 logs a JSON warning line on
stderr for every failed call ({"level":"warn","ts":<now>,...,"target":
"endpoint://client-<random uuid>/..."}), as cetcdctl does: _no_zap drops
them on both sides, and test_zap_lines compares them with the time and
the uuid masked.  Prompts read from a pipe, so both tools run /bin/stty, which
complains on stderr exactly alike.
"""

import os
import re
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctldiff import pb_enc_varint as _enc_varint  # noqa: E402
from common.ctldiff import pb_varint as _varint  # noqa: E402
from common.ctldiff import Pair, both_plain, cetcdctl_bin, run  # noqa: E402
from common.ctldiff import ETCDCTL, Result, cetcdctl_as_etcdctl  # noqa: E402
from common.ctldiff import clean_env  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                reason="cetcdctl not built")

FORMATS = ["simple", "json", "protobuf", "fields", "table"]
ROOT = ["--user", "root:rootpw"]
DEAD = ["--endpoints", "127.0.0.1:1", "--command-timeout", "1s"]


def _no_zap(data):
    """Drops clientv3's JSON log lines (time stamp, random client id)."""
    return re.sub(rb'\{"level":"warn","ts":.*\n', b"", data)



def _pb_field(b, i):
    """One field at b[i:]: (number, key bytes, payload, raw value, end)."""
    key, j = _varint(b, i)
    wt = key & 7
    if wt == 0:
        k = _varint(b, j)[1]
        payload = b[j:k]
    elif wt == 2:
        n, j2 = _varint(b, j)
        k = j2 + n
        payload = b[j2:k]
    else:
        k = j + (8 if wt == 1 else 4)
        payload = b[j:k]
    if k > len(b) or wt not in (0, 1, 2, 5):
        raise ValueError("not protobuf")
    return key >> 3, b[i:j], payload, b[j:k], k


def _pb_no_ids(b):
    """-w protobuf output with the header's cluster_id and member_id (the
    only bytes that differ between two servers: varints of different
    lengths, so the header's length differs too) dropped and the header
    re-encoded.  "user get --detail" writes "User: <name>\n" and, per
    role, "\n" and a message: a field 1 (the header) after other fields
    starts the next one."""
    text = b""
    if b.startswith(b"User: "):
        text, b = b[:b.index(b"\n") + 1], b[b.index(b"\n") + 1:]
    out, i, fields = text, 0, 0
    while i < len(b):
        if text and (i == 0 or fields) and b[i] == 0x0a:
            out, i, fields = out + b"\n", i + 1, 0   # the separator
            continue
        num, key, payload, raw, i = _pb_field(b, i)
        if num == 1 and fields == 0:
            hdr, j = b"", 0
            while j < len(payload):
                hn, hk, _, hraw, j = _pb_field(payload, j)
                hdr += b"" if hn in (1, 2) else hk + hraw
            raw = _enc_varint(len(hdr)) + hdr
        out += key + raw
        fields += 1
    return out


def _same(pair, args, input=None):
    a, b = pair.both(args, input=input)
    a.err, b.err = _no_zap(a.err), _no_zap(b.err)
    if "protobuf" in args and a.rc == 0:
        a.out, b.out = _pb_no_ids(a.out), _pb_no_ids(b.out)
    assert b.triple() == a.triple(), (
        "cetcdctl differs from etcdctl for %r:\n etcdctl:  %r\n "
        "cetcdctl: %r" % (args, a, b))
    return a


def _same_plain(args, input=None):
    a, b = both_plain(args, input=input)
    a.err, b.err = _no_zap(a.err), _no_zap(b.err)
    assert b.triple() == a.triple(), (args, a, b)
    return a


def _all_formats(pair, args):
    """args in every output format; returns etcdctl's results."""
    return [_same(pair, ["-w", f] + args) for f in FORMATS]


# ---------------------------------------------------------------------------
# Argument errors (no server needed: they fail before any connection)
# ---------------------------------------------------------------------------

ARG_ERRORS = [
    ["auth", "enable", "x"], ["auth", "disable", "x"],
    ["user", "add"], ["user", "add", "a", "b"], ["user", "add", ":pw"],
    ["user", "delete"], ["user", "delete", "a", "b"],
    ["user", "get"], ["user", "get", "a", "b"],
    ["user", "list", "x"], ["user", "passwd"], ["user", "passwd", "a", "b"],
    ["user", "grant-role", "u"], ["user", "grant-role", "u", "r", "x"],
    ["user", "revoke-role", "u"], ["user", "revoke-role", "u", "r", "x"],
    ["role", "add"], ["role", "add", "a", "b"], ["role", "delete"],
    ["role", "get"], ["role", "get", "a", "b"], ["role", "list", "x"],
    ["role", "grant-permission", "r", "read"],
    ["role", "grant-permission", "r", "rw", "k"],
    ["role", "grant-permission", "r", "", "k"],
    ["role", "grant-permission", "r", "read", "k", "z", "--prefix"],
    ["role", "grant-permission", "r", "read", "k", "z", "--from-key"],
    ["role", "grant-permission", "r", "read", "k", "--prefix",
     "--from-key"],
    ["role", "grant-permission", "r", "read", "", "--prefix", "--from-key"],
    ["role", "revoke-permission", "r"],
    ["role", "revoke-permission", "r", "k", "z", "--prefix"],
    ["role", "revoke-permission", "r", "k", "z", "--from-key"],
    ["role", "revoke-permission", "r", "", "--prefix", "--from-key"],
    ["role", "grant-permission", "r", "read", "k", "--prefix=maybe"],
    ["user", "add", "u", "--interactive=x"],
    ["user", "get", "u", "--nosuch"],
    # a bad format is found when the client is made, before any call
    ["-w", "yaml", "user", "list"], ["-w", "yaml", "role", "get", "r"],
    ["-w", "yaml", "auth", "enable"],
]


def test_argument_errors():
    for args in ARG_ERRORS:
        a = _same_plain(DEAD + args)
        assert a.rc in (1, 4, 128), args


def test_password_prompt_errors():
    """Interactive prompts read from a pipe: stty complains, the line is
    read all the same; empty and unconfirmed passwords are refused."""
    for args, data in ((["user", "add", "u"], ""),
                       (["user", "add", "u"], "a\nb\n"),
                       (["user", "add", "u"], "  \r\n"),
                       (["user", "passwd", "u"], "\n"),
                       (["user", "passwd", "u"], "x\ny\n")):
        a = _same_plain(DEAD + args, input=data)
        assert a.rc == 128 and b"Password of u: " in a.out


# ---------------------------------------------------------------------------
# role
# ---------------------------------------------------------------------------

def test_role_commands(make_server):
    p = Pair(make_server)
    _same(p, ["role", "list"])
    for f in FORMATS:                 # table: created, then the error
        _same(p, ["-w", f, "role", "add", "r-" + f])
    _same(p, ["role", "add", "r"])
    _same(p, ["role", "add", "r"])    # etcdserver: role name already exists
    _same(p, ["role", "get", "nosuch"])
    _same(p, ["role", "delete", "nosuch"])
    _same(p, ["role", "grant-permission", "nosuch", "read", "k"])
    grants = [
        ["r", "read", "k1"], ["r", "WRITE", "k2"], ["r", "ReadWrite", "k3"],
        ["r", "read", "a", "c"], ["r", "write", "pre", "--prefix"],
        ["r", "readwrite", "from", "--from-key"],
        ["r", "read", "", "--prefix"], ["r", "write", "", "--from-key"],
        ["r", "read", ""], ["r", "read", "", "ignored"],
        # "\udcff" is the byte 0xff on the command line (surrogateescape)
        ["r", "read", "\udcff", "--prefix"],
        ["r", "read", "x\udcff", "--prefix"],
        ["r", "read", "k5", "k9", "extra"], ["r", "wr\u0131te", "k6"],
    ]
    for g in grants:
        _same(p, ["role", "grant-permission"] + g)
    for f in FORMATS:
        _same(p, ["-w", f, "role", "grant-permission", "r-" + f, "read",
                  "k"])
    _all_formats(p, ["role", "get", "r"])
    _all_formats(p, ["role", "list"])
    _same(p, ["--hex", "role", "get", "r"])
    revokes = [
        ["r", "k1"], ["r", "a", "c"], ["r", "pre", "--prefix"],
        ["r", "from", "--from-key"], ["r", "", "--prefix"],
        ["r", "", "--from-key"], ["r", ""], ["r", "\udcff", "--prefix"],
        ["r", "k1"],                  # permission is not granted
        ["nosuch", "k2"],
    ]
    for r in revokes:
        _same(p, ["role", "revoke-permission"] + r)
    for f in FORMATS:
        _same(p, ["-w", f, "role", "revoke-permission", "r-" + f, "k"])
    _same(p, ["role", "get", "r"])
    for f in FORMATS:
        _same(p, ["-w", f, "role", "delete", "r-" + f])
    _all_formats(p, ["role", "list"])


# ---------------------------------------------------------------------------
# user
# ---------------------------------------------------------------------------

def test_user_add_passwords(make_server):
    p = Pair(make_server)
    _same(p, ["user", "add", "a:pw:with:colons"])
    _same(p, ["user", "add", "b", "--new-user-password", "x:y"])
    _same(p, ["user", "add", "c:1", "--new-user-password", "pw"])
    _same(p, ["user", "add", "d:ignored", "--no-password"])
    _same(p, ["user", "add", "e"], input="pw\npw\n")
    # --interactive=false reads a word as fmt.Scanf("%s")
    # (j: invalid UTF-8 becomes U+FFFD; the word ends at a no-break space)
    for name, data in (("f", b"pw\n"), ("g", b"  \tpw rest\n"),
                       ("h", b"\npw"), ("i", b""), ("j", b"p\xe9w\xc2\xa0x"),
                       ("k", b"\r\nx")):
        _same(p, ["user", "add", name, "--interactive=false"], input=data)
    _same(p, ["user", "add", "a:other"])   # user name already exists
    _same(p, ["user", "add", ""], input="x\nx\n")  # user name is empty
    for f in FORMATS:
        _same(p, ["-w", f, "user", "add", "u-" + f + ":pw"])
    _all_formats(p, ["user", "list"])
    # the passwords took: auth on, each user authenticates (or is refused)
    _same(p, ["user", "add", "root:rootpw"])
    _same(p, ["auth", "enable"])
    for user in ("a:pw:with:colons", "b:x:y", "c:1:pw", "e:pw", "f:pw",
                 "g:pw", "h:", "h:pw", "j:p\ufffdw", "k:x", "d:x"):
        _same(p, ["--user", user, "user", "get", user.split(":")[0]])


def test_user_commands(make_server):
    p = Pair(make_server)
    for args in (["role", "add", "r1"], ["role", "add", "r2"],
                 ["role", "grant-permission", "r1", "read", "a", "--prefix"],
                 ["role", "grant-permission", "r2", "write", "b", "c"],
                 ["user", "add", "u:pw"], ["user", "add", "v:pw"]):
        _same(p, args)
    _same(p, ["user", "grant-role", "u", "r1"])
    _same(p, ["user", "grant-role", "u", "nosuch"])
    _same(p, ["user", "grant-role", "nosuch", "r1"])
    _same(p, ["user", "grant-role", "u", "r1"])  # already granted: no error
    for f in FORMATS:
        _same(p, ["-w", f, "user", "grant-role", "u", "r2"])
        _same(p, ["-w", f, "user", "revoke-role", "u", "r2"])
        _same(p, ["-w", f, "user", "grant-role", "u", "r2"])
    _all_formats(p, ["user", "get", "u"])
    _all_formats(p, ["user", "get", "u", "--detail"])
    _all_formats(p, ["user", "get", "v", "--detail"])
    _same(p, ["user", "get", "nosuch"])
    _same(p, ["user", "get", "nosuch", "--detail"])
    _same(p, ["user", "revoke-role", "v", "r1"])   # not granted
    _same(p, ["user", "revoke-role", "u", "r1"])
    _same(p, ["user", "get", "u"])
    for f in FORMATS:
        _same(p, ["-w", f, "user", "passwd", "v", "--interactive=false"],
              input="pw-" + f)
    _same(p, ["user", "passwd", "v"], input="new\nnew\n")
    _same(p, ["user", "passwd", "nosuch", "--interactive=false"], input="x")
    for f in FORMATS:
        _same(p, ["user", "add", "d-" + f + ":x"])
        _same(p, ["-w", f, "user", "delete", "d-" + f])
    _same(p, ["user", "delete", "nosuch"])
    _same(p, ["user", "list"])


# ---------------------------------------------------------------------------
# auth enable/disable and --user/--password
# ---------------------------------------------------------------------------

def test_auth_enable_disable_and_login(make_server):
    p = Pair(make_server)
    _same(p, ["auth", "disable"])     # already disabled: no error
    _same(p, ["auth", "enable"])      # root user does not exist
    _same(p, ["user", "add", "root:rootpw"])
    _same(p, ["user", "add", "alice:apw"])
    _same(p, ["-w", "table", "auth", "enable"])  # makes role root, grants it
    _same(p, ["auth", "enable"])      # again: no error
    _all_formats(p, ROOT + ["role", "list"])
    _same(p, ["user", "list"])        # no token: user name is empty
    _same(p, ["--user", "root:bad", "user", "list"])   # exit 2
    _same(p, ["--user", "nosuch:x", "user", "list"])
    _same(p, ["--user", "root:", "user", "list"])      # empty: no token
    _same(p, ["--user", ":rootpw", "user", "list"])
    _same(p, ["--user", "root", "--password", "rootpw", "user", "list"])
    _same(p, ["--user", "root:rootpw", "--password", "rootpw", "user",
              "list"])                # the name is "root:rootpw"
    _same(p, ["--user", "root", "user", "list"], input="rootpw\n")
    _same(p, ["--user", "root", "user", "list"], input=" rootpw \r\n")
    _same(p, ["--user", "root", "user", "list"], input="")
    _same(p, ["--user", "alice:apw", "user", "list"])  # permission denied
    _same(p, ["--user", "alice:apw", "user", "get", "alice"])
    # Scanf takes one line of stdin; the --user prompt reads the next
    _same(p, ["--user", "root", "user", "add", "bob", "--interactive=false"],
          input="bobpw\nrootpw\n")
    _same(p, ["--user", "root", "user", "passwd", "bob"],
          input="b2\nb2\nrootpw\n")
    _same(p, ["--user", "bob:b2", "user", "get", "bob"])
    _same(p, ["--user", "bob:bobpw", "user", "get", "bob"])
    _same(p, ["-w", "json", "--user", "alice:apw", "auth", "disable"])
    _same(p, ROOT + ["-w", "json", "auth", "disable"])
    _same(p, ["--user", "root:bad", "user", "list"])   # auth off: no check


def test_auth_enable_with_root_role_not_granted(make_server):
    """etcdctl only creates the root role: when it exists but root lacks
    it, its RoleAdd fails and that is the error."""
    p = Pair(make_server)
    _same(p, ["user", "add", "root:rootpw"])
    _same(p, ["role", "add", "root"])
    _same(p, ["auth", "enable"])
    _same(p, ["user", "grant-role", "root", "root"])
    _same(p, ["auth", "enable"])


def test_unreachable_endpoint():
    _same_plain(DEAD + ["auth", "enable"])
    _same_plain(DEAD + ["auth", "disable"])


def test_no_deadline_bug_fixed():
    """etcdctl makes user and role calls with no deadline and waits forever
    for an endpoint that does not answer; cetcdctl gives them
    --command-timeout (an improvement, so not compared)."""
    for args in (["user", "list"], ["role", "add", "r"],
                 ["user", "get", "u", "--detail"]):
        r = run(cetcdctl_bin(), DEAD + args, timeout=20)
        assert (r.rc, r.out, _no_zap(r.err)) == (
            1, b"", b"Error: context deadline exceeded\n"), args


def _zap_masked(data):
    """clientv3's log lines with their time and client uuid masked."""
    return re.sub(rb'"ts":"[^"]*","(.*)client-[0-9a-f-]{36}/',
                  rb'"ts":"<T>","\1client-<UUID>/', data)


def test_zap_lines(make_server):
    """clientv3's log line for each failed call: --user on a server
    without auth (the Authenticate fails, the command goes on without a
    token: etcd's e2e TestCtlV3AuthLeaseRevoke looks for this line), auth
    enable's first try, a wrong password, a server error."""
    p = Pair(make_server)
    for args in (["--user", "u:pw", "user", "list"],
                 ["user", "add", "root:rootpw"], ["auth", "enable"],
                 ["--user", "root:bad", "user", "list"],
                 ROOT + ["role", "get", "nosuch"]):
        a, b = p.both(args)
        a.err, b.err = _zap_masked(a.err), _zap_masked(b.err)
        assert b.triple() == a.triple(), (args, a, b)


def _txn_after(binary, endpoint, delay, script):
    """`--user root:rootpw txn` started now, its stdin written after delay
    seconds (etcdctl authenticates before it reads the txn)."""
    proc = subprocess.Popen([binary, "--endpoints", endpoint] + ROOT +
                            ["txn"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=clean_env())
    time.sleep(delay)
    out, err = proc.communicate(script, timeout=30)
    return Result(proc.returncode, out, err)


def test_expired_token_refreshed(make_server, tmp_path):
    """A JWT (ttl=1s) that expired between the command's Authenticate and
    its call: the call fails with "invalid auth token", the tool clears
    its token, authenticates again and sends the call again (clientv3's
    refreshToken).  cetcdctl kept the old token on the second Authenticate,
    which etcd refuses as an invalid token too: the command failed (etcd's
    e2e TestCtlV3AuthJWTExpire, when a second boundary fell between)."""
    key = tmp_path / "hmac.key"
    key.write_text(os.urandom(32).hex())
    p = Pair(make_server, extra_args=[
        "--bcrypt-cost", "4",
        "--auth-token", "jwt,sign-method=HS256,priv-key=%s,ttl=1s" % key])
    _same(p, ["user", "add", "root:rootpw"])
    _same(p, ["auth", "enable"])
    res = []
    for binary, srv in ((ETCDCTL, p.a), (cetcdctl_as_etcdctl(), p.b)):
        # a token lives less than ttl + 1 s: gone after 3 s even if the
        # tool's Authenticate came a second late on a loaded machine
        r = _txn_after(binary, srv.endpoint, 3.0, b"\nput k v\n\n\n")
        r.err = _zap_masked(r.err).replace(srv.endpoint.encode(), b"<EP>")
        res.append(r)
    a, b = res
    assert a.rc == 0 and a.out == b"SUCCESS\n\nOK\n", a
    assert b"invalid auth token" in a.err, a   # the first try did fail
    assert b.triple() == a.triple(), (a, b)
