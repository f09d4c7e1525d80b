"""cetcdctl's KV commands (get, put, del, txn, compaction) against etcdctl.

Goal: for every command line below, cetcdctl prints what etcdctl 3.4.23
prints (stdout, stderr, exit code): success paths in every output format
(simple with and without --hex, json, protobuf, fields, and table's
"not supported" error), argument errors, and the server's errors.

Method: differential (tests/common/ctldiff.py).  A Pair gives each tool a
fresh server; every command line runs once on each side, so both servers
go through the same history and print the same revisions.  What cannot be
equal is removed visibly: the cluster and member ids (Pair), lease ids
(drawn at random: given to Pair.both as substitutions), etcdctl's clientv3
JSON warning line on stderr for every failed call (time stamp, random
client id: _no_zap; cetcdctl does not print it), and in `-w protobuf`
output the header's two id varints (_pb_no_ids).  Where etcdctl has a plain
bug (a panic or a hang), cetcdctl does better: those lines are checked on
cetcdctl alone (test_txn_better_than_etcdctl), next to what etcdctl does.
"""

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common.ctldiff import pb_enc_varint as _enc_varint  # noqa: E402
from common.ctldiff import pb_varint as _varint  # noqa: E402
from common.ctldiff import (  # noqa: E402
    mask_zap,
    ETCDCTL, Pair, both_plain, cetcdctl_as_etcdctl, cetcdctl_bin, run)

pytestmark = pytest.mark.skipif(not os.path.exists(cetcdctl_bin()),
                                reason="cetcdctl not built")

FORMATS = ["simple", "json", "protobuf", "fields", "table"]
DEAD = ["--endpoints", "127.0.0.1:1", "--command-timeout", "1s"]


# ---------------------------------------------------------------------------
# Normalising what differs by nature
# ---------------------------------------------------------------------------

def _no_zap(data):
    """clientv3's JSON log lines with their time stamp and random client id
    masked (both tools print them; the rest of each line is compared)."""
    return mask_zap(data)



def _pb_field(b, i):
    """One field at b[i:]: (number, key bytes, raw value, end)."""
    key, j = _varint(b, i)
    wt = key & 7
    if wt == 0:
        k = _varint(b, j)[1]
    elif wt == 2:
        n, j2 = _varint(b, j)
        k = j2 + n
    elif wt in (1, 5):
        k = j + (8 if wt == 1 else 4)
    else:
        raise ValueError("not protobuf")
    if k > len(b):
        raise ValueError("not protobuf")
    return key >> 3, b[i:j], b[j:k], k


PROMPTS = (b"compares:\nsuccess requests (get, put, del):\n"
           b"failure requests (get, put, del):\n")


def _pb_no_ids(b):
    """A KV response's bytes with its header's cluster_id and member_id
    (fields 1 and 2 of field 1) dropped and the header re-encoded; every
    other byte is kept as it is (txn -i's prompts too)."""
    out, i = b"", 0
    if b.startswith(PROMPTS):
        out, i = PROMPTS, len(PROMPTS)
    while i < len(b):
        num, key, raw, i = _pb_field(b, i)
        if num == 1:
            n, j = _varint(raw, 0)
            payload, hdr, k = raw[j:j + n], b"", 0
            while k < len(payload):
                hn, hk, hraw, k = _pb_field(payload, k)
                hdr += b"" if hn in (1, 2) else hk + hraw
            raw = _enc_varint(len(hdr)) + hdr
        out += key + raw
    return out


def _bytes(s):
    """Input as bytes; a lone surrogate U+DCxx is the byte xx (as argv)."""
    return s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s


def _same(pair, args, input=None, subst=()):
    """args on both sides; asserts equal results; returns etcdctl's."""
    input = _bytes(input)
    a, b = pair.both(args, input=input, subst=subst)
    a.err, b.err = _no_zap(a.err), _no_zap(b.err)
    if "protobuf" in args and a.rc == 0:
        a.out, b.out = _pb_no_ids(a.out), _pb_no_ids(b.out)
    assert b.triple() == a.triple(), (
        "cetcdctl differs from etcdctl for %r:\n etcdctl:  %r\n "
        "cetcdctl: %r" % (args, a, b))
    return a


def _same_plain(args, input=None):
    input = _bytes(input)
    a, b = both_plain(args, input=input)
    a.err, b.err = _no_zap(a.err), _no_zap(b.err)
    assert b.triple() == a.triple(), (args, a, b)
    return a


def _all_formats(pair, args, input=None, hex_too=True):
    """args in every output format (and simple with --hex)."""
    res = [_same(pair, ["-w", f] + args, input=input) for f in FORMATS]
    if hex_too:
        res.append(_same(pair, ["--hex"] + args, input=input))
    return res


@pytest.fixture(scope="module")
def pair():
    """One Pair for the module: the tests keep to their own keys, and each
    runs every command on both sides, so the histories stay equal."""
    from conftest import Server
    made = []

    def factory(extra_args=(), name="m1"):
        s = Server(extra_args=extra_args, name=name)
        made.append(s)
        s.start()
        return s

    p = Pair(factory)
    yield p
    for s in made:
        s.cleanup()


# Values that exercise the printers: binary, UTF-8, quotes, newlines.
SEED = [("k1", "v1"), ("k2", "two words"), ("k3", "line\nbreak"),
        ("k4", "caf\u00e9 \u65e5\u672c"), ("k5", "q\"uote\\"),
        ("k6", "\udcff\udcfe"), ("k7", "")]


def _seed(pair, prefix):
    for k, v in SEED:
        if v == "":
            _same(pair, ["put", prefix + k], input="")  # no stdin: refused
            continue
        _same(pair, ["put", prefix + k, v])


# ---------------------------------------------------------------------------
# Help and flag errors (no server needed)
# ---------------------------------------------------------------------------

def test_help_and_flag_errors():
    for c in ("get", "put", "del", "txn", "compaction"):
        assert _same_plain([c, "-h"]).rc == 0
        assert _same_plain(["help", c]).rc == 0
        assert _same_plain([c, "--bogus"]).rc == 1
    for args in (["put", "k", "v", "--lease"], ["get", "k", "--limit=x"],
                 ["get", "k", "--rev", "1.5"], ["txn", "-i=maybe"],
                 ["del", "k", "--prefix=2"], ["compaction", "--physical=no"],
                 # --count-only is etcd 3.5's: etcdctl 3.4 does not know it
                 ["get", "k", "--count-only"]):
        assert _same_plain(DEAD + args).rc == 1


ARG_ERRORS = [
    ["get"], ["get", "a", "--prefix", "--from-key"],
    ["get", "a", "b", "--prefix"], ["get", "a", "b", "--from-key"],
    ["get", "a", "--consistency", "x"], ["get", "a", "--order", "up"],
    ["get", "a", "--sort-by", "name"], ["get", "--consistency", "L", "a"],
    ["put"], ["put", "k", "v", "--ignore-value"],
    ["put", "k", "v", "--lease", "xyz"], ["put", "k", "v", "--lease", "0x1"],
    ["put", "k", "v", "--lease", ""], ["put", "k", "v", "--lease", "+"],
    ["put", "k", "v", "--lease", "ffffffffffffffff"],
    ["put", "k", "v", "--lease", "8000000000000000"],
    ["put", "k", "v", "--lease", "1ffffffffffffffffz"],
    ["del"], ["del", "a", "b", "c"], ["del", "a", "--prefix", "--from-key"],
    ["del", "a", "b", "--prefix"], ["del", "a", "b", "--from-key"],
    ["txn", "x"], ["compaction"], ["compaction", "1", "2"],
    ["compaction", "x"], ["compaction", "99999999999999999999"],
    ["compaction", "1e3"], ["compaction", ""], ["compaction", "0x10"],
    # a bad format is found when the client is made, after the arguments
    ["-w", "yaml", "get", "a"], ["-w", "yaml", "get"],
    ["-w", "yaml", "put", "k", "v"], ["-w", "yaml", "del", "k"],
    ["-w", "yaml", "txn"], ["-w", "yaml", "compaction", "1"],
    ["-w", "yaml", "compaction", "x"],
]


def test_argument_errors():
    for args in ARG_ERRORS:
        a = _same_plain(DEAD + args)
        assert a.rc in (1, 3, 4, 128), args
    # put reads a missing value from stdin; empty stdin is refused
    assert _same_plain(DEAD + ["put", "k"], input="").rc == 128
    assert _same_plain(DEAD + ["put", "k", "--lease", "zz"],
                       input="").rc == 128


def test_unreachable_endpoint():
    a = _same_plain(DEAD + ["get", "a"])
    assert a.rc == 1 and b"context deadline exceeded" in a.err
    _same_plain(DEAD + ["compaction", "5"])
    # txn: etcdctl commits with no deadline (context.Background) and waits
    # for the endpoint forever; cetcdctl keeps --command-timeout
    b = run(cetcdctl_as_etcdctl(), DEAD + ["txn"], input="\n\n\n")
    assert (b.rc, b.out, _no_zap(b.err)) == (
        1, b"", _no_zap(b'{"level":"warn","ts":"x","caller":"clientv3/retry_'
                        b'interceptor.go:62","msg":"retrying of unary invoker '
                        b'failed","target":"endpoint://client-0/127.0.0.1:1",'
                        b'"attempt":0,"error":"rpc error: code = '
                        b'DeadlineExceeded desc = latest balancer error: all '
                        b'SubConns are in TransientFailure"}\n'
                        b"Error: context deadline exceeded\n"))


# ---------------------------------------------------------------------------
# get
# ---------------------------------------------------------------------------

def test_get(pair):
    _seed(pair, "g/")
    _same(pair, ["put", "g0", "before"])
    _same(pair, ["put", "h0", "after"])
    for args in (["get", "g/k1"], ["get", "g/nosuch"],
                 ["get", "g/", "--prefix"], ["get", "g/k2", "g/k5"],
                 ["get", "g/k5", "--from-key"],
                 ["get", "", "--prefix", "--keys-only"],
                 ["get", "", "--from-key", "--limit", "3"],
                 ["get", "g/", "--prefix", "--limit", "2"],
                 ["get", "g/", "--prefix", "--order", "descend"],
                 ["get", "g/", "--prefix", "--sort-by", "value"],
                 ["get", "g/", "--prefix", "--sort-by", "MODIFY",
                  "--order", "Descend"],
                 ["get", "g/", "--prefix", "--sort-by", "create",
                  "--order", "ascend", "--limit", "3"],
                 ["get", "g/", "--prefix", "--sort-by", "version",
                  "--consistency", "s"],
                 ["get", "g/", "--prefix", "--sort-by", "key",
                  "--order", "ASCEND", "--limit", "1"],
                 ["get", "g/k1", "--rev", "3"], ["get", "g/k1", "--rev", "-4"],
                 ["get", "g/k1", "ignored", "extra"],
                 ["get", "g\udcff", "--prefix"]):
        _all_formats(pair, args)


def test_get_print_value_only(pair):
    _seed(pair, "pv/")
    _same(pair, ["get", "pv/", "--prefix", "--print-value-only"])
    _same(pair, ["--hex", "get", "pv/", "--prefix", "--print-value-only"])
    for f in ("json", "protobuf", "fields", "table"):
        a = _same(pair, ["-w", f, "get", "pv/k1", "--print-value-only"])
        assert a.rc == 128
    # the call's error comes first: etcdctl checks the flag afterwards
    _same(pair, ["-w", "json", "get", "", "--print-value-only"])


def test_get_server_errors(pair):
    _same(pair, ["put", "ge/a", "1"])
    for f in FORMATS:
        _same(pair, ["-w", f, "get", ""])                   # no key
        _same(pair, ["-w", f, "get", "ge/a", "--rev", "100000"])  # future


# ---------------------------------------------------------------------------
# put
# ---------------------------------------------------------------------------

def _grant(pair, ttl="600"):
    """A lease on each side; returns the substitution for its id."""
    a, b = pair.both(["lease", "grant", ttl])
    assert a.rc == 0 and b.rc == 0, (a, b)
    ida = a.out.split()[1]
    idb = b.out.split()[1]
    return (ida, idb, b"<LEASE>"), (b"%d" % int(ida, 16),
                                     b"%d" % int(idb, 16), b"<LEASE10>")


def test_put(pair):
    for f in FORMATS:   # table: the key is written, then the error
        _same(pair, ["-w", f, "put", "p/" + f, "v"])
        _same(pair, ["-w", f, "put", "p/" + f, "v2", "--prev-kv"])
        _same(pair, ["-w", f, "put", "p/new-" + f, "v", "--prev-kv"])
    _same(pair, ["--hex", "put", "p/simple", "\udcff\n", "--prev-kv"])
    _same(pair, ["--hex", "put", "p/simple", "x", "--prev-kv"])
    _same(pair, ["put", "p/dash", "--", "-v"])
    _same(pair, ["put", "--", "p/dash2", "-v"])
    _same(pair, ["put", "p/extra", "v", "ignored"])
    _all_formats(pair, ["get", "p/", "--prefix"])


def test_put_stdin(pair):
    _same(pair, ["put", "ps/a"], input=b"from\nstdin\n")
    _same(pair, ["put", "ps/b", "--prev-kv"], input=b"\x00\xff bytes")
    _same(pair, ["put", "ps/b", "--ignore-value", "--prev-kv"],
          input=b"not read")
    _all_formats(pair, ["get", "ps/", "--prefix"])


def _same_split(pair, args_a, args_b, subst=()):
    """Like _same, with each side's own command line (their lease ids)."""
    from common.ctldiff import _replace_ids
    a = run(ETCDCTL, args_a, endpoint=pair.a.endpoint)
    b = run(cetcdctl_as_etcdctl(), args_b, endpoint=pair.b.endpoint)
    for r, ids, side in ((a, pair.ids_a, 0), (b, pair.ids_b, 1)):
        r.out = _replace_ids(r.out, ids, side)
        r.err = _replace_ids(r.err, ids, side)
        for t in subst:
            r.out, r.err = (r.out.replace(t[side], t[2]),
                            r.err.replace(t[side], t[2]))
    a.err, b.err = _no_zap(a.err), _no_zap(b.err)
    if "protobuf" in args_a and a.rc == 0:
        a.out, b.out = _pb_no_ids(a.out), _pb_no_ids(b.out)
    assert b.triple() == a.triple(), (args_a, a, b)
    return a


def test_put_lease(pair):
    hexid, decid = _grant(pair)
    s = (hexid, decid)
    for f in FORMATS:   # the answer holds no lease id: protobuf too
        _same_split(pair, ["-w", f, "put", "pl/" + f, "v", "--lease",
                           hexid[0].decode()],
                    ["-w", f, "put", "pl/" + f, "v", "--lease",
                     hexid[1].decode()], subst=s)
    # the stored pairs hold the lease id (protobuf left out: a varint)
    for f in ("simple", "json", "fields"):
        _same(pair, ["-w", f, "get", "pl/", "--prefix"], subst=s)
    _same(pair, ["put", "pl/simple", "w", "--ignore-lease", "--prev-kv",
                 "-w", "json"], subst=s)
    _same(pair, ["put", "pl/json", "--ignore-value", "--ignore-lease"],
          subst=s)
    _same(pair, ["put", "pl/fields", "--ignore-value", "--prev-kv", "-w",
                 "fields"], subst=s)
    _same(pair, ["get", "pl/", "--prefix", "-w", "fields"], subst=s)


def test_put_server_errors(pair):
    for f in FORMATS:
        _same(pair, ["-w", f, "put", "", "v"])                 # no key
        _same(pair, ["-w", f, "put", "pe/k", "v", "--lease", "1234"])
        _same(pair, ["-w", f, "put", "pe/k", "--ignore-value"])
        _same(pair, ["-w", f, "put", "pe/k", "v", "--ignore-lease"])
        _same(pair, ["-w", f, "put", "pe/k", "v", "--lease", "-1"])


# ---------------------------------------------------------------------------
# del
# ---------------------------------------------------------------------------

def test_del(pair):
    for f in FORMATS:
        d = "d%s/" % f
        _seed(pair, d)
        _same(pair, ["-w", f, "del", d + "k1"])
        _same(pair, ["-w", f, "del", d + "nosuch", "--prev-kv"])
        _same(pair, ["-w", f, "del", d + "k2", "--prev-kv"])
        _same(pair, ["-w", f, "del", d + "k3", d + "k5", "--prev-kv"])
        _same(pair, ["-w", f, "del", d + "k5", "--from-key", "--prev-kv"])
    _seed(pair, "dh/")
    _same(pair, ["--hex", "del", "dh/", "--prefix", "--prev-kv"])
    _seed(pair, "dh/")
    _same(pair, ["del", "dh/", "--prefix"])
    _same(pair, ["del", ""])                   # no key: the server says so
    _same(pair, ["-w", "json", "del", "", "--prefix", "--prev-kv"])
    _same(pair, ["get", "", "--prefix"])


# ---------------------------------------------------------------------------
# txn
# ---------------------------------------------------------------------------

TXN_OK = (
    'val("t/a") = "1"\nver("t/a") > "0"\nc("t/a") != "0"\n'
    'm("t/a") < "100000"\nvalue("t/b") = ""\nversion("t/b") = "0"\n'
    'create("t/b") = "0"\nmod("t/b") = "0"\n\n'
    'put t/b "two words"\nget t/a\nget t/ --prefix --keys-only\n'
    'del t/c --prev-kv\nput t/d x --prev-kv\n\n'
    'put t/failed yes\n\n')
TXN_FAIL = ('val("t/a") = "2"\n\nput t/never x\n\n'
            'get t/ --prefix\nput t/b "three" --prev-kv\ndel t/d\n\n')


def test_txn_formats(pair):
    for f in FORMATS:
        _same(pair, ["put", "t/a", "1"])
        _same(pair, ["put", "t/c", "gone"])
        _same(pair, ["del", "t/b"])
        _same(pair, ["-w", f, "txn"], input=TXN_OK)
        _same(pair, ["-w", f, "txn", "--interactive"], input=TXN_FAIL)
    _same(pair, ["--hex", "txn", "-i"], input=TXN_FAIL)
    _same(pair, ["txn"], input="\n\n\n")           # empty: SUCCESS
    _same(pair, ["txn", "-i"], input="\n\n\n")
    _same(pair, ["get", "t/", "--prefix"])


TXN_LINES = [
    # compares: what Sscanf("%q) %s %q") reads, and how far
    'val("t/a")= "1"', 'val("t/a") ="1"', 'val("t/a")  =   "1"  trailing',
    'val("t/a")', 'val("t/a") ', 'val("t/a") =', 'val("t/a") = ',
    'val("t/a") = 1', 'val("t/\\qa") = "1"', 'val("t/a") = "\\q"',
    'val("t/a\\") = "1"', 'val(`t/a`) = `1`', 'val(`t/a) = "1"',
    'val("t/a") = `1', 'val( "t/a" ) = "1"', '(("t/a") = "1"',
    'val("t/\\x00a") = "1"', 'val("\\xff") = "\\u00e9"',
    'val("t/a") = "\\ud800"', 'val("\\101\\400") = "1"',
    'ver("t/a") = "+1"', 'ver("t/a") = "99999999999999999999"',
    'c("t/a") = "0x1"', 'm("t/a") = ""', 'ver("t/a") >= "x"',
    'val("t/a")\x0b=\x0b"1"', 'val("t/a")\u00a0=\u3000"1"',
    'val("t/a\udcffb") = "1"', 'val("t/a") = "1\udcff"\udcff',
    'val\udcff("t/a") x "1"', 'vax("t/a") = "1"', 'val ("t/a") = "1"',
    'no paren', '\u00a0val("t/a") = "1"\u2028',
]

TXN_REQUESTS = [
    'put', 'put t/x', 'foo t/x', 'put --bad t/x v', 'get --bad t/x',
    'del --bad t/x', 'put t/x --lease', 'get --limit x t/x',
    'pu t/x y', 'ge t/x', 'd t/x', 'put "t/x y" "c\\td"', 'put "t/\\q" x',
    'put "t/\\x41\\u00e9\\101" x', 'put "t/abc x', 'put t/a"b c"d',
    'get --prefix --from-key t/x', 'get --consistency x t/x',
    'get t/x --order up', 'del t/x t/y t/z', 'put --lease=zz t/x v',
    'put t/x v --lease 1234', 'put t/x v extra', 'put -- t/x -v',
    'put t/x -- -v', '--prev-kv=true put t/x v2', 'del --prev-kv t/x',
    'put --prev-kv put t/y', 'get t/ --prefix --rev 1', 'get "" --prefix',
    'put t/x v --prev-kv=false', 'put\tt/tab\t"v"', 'put "t/\\"q" "\\\\"',
]


def test_txn_grammar(pair):
    _same(pair, ["put", "t/a", "1"])
    for line in TXN_LINES:
        _same(pair, ["txn"], input=line + "\n\nput t/ok y\n\n\n")
    for line in TXN_REQUESTS:
        _same(pair, ["txn"], input="\n" + line + "\n\n\n")
        _same(pair, ["txn", "-i"], input="\n\n" + line + "\n\n")
    _same(pair, ["get", "t/", "--prefix"])


def test_txn_input_ends(pair):
    """etcdctl's reader needs every block ended by an empty line: input
    that stops early (even inside a line) is "Error: EOF", exit 3."""
    for data in ("", "val(\"a\") = \"b\"\n", "\n", "\n\n", "\nput t/e x\n\n",
                 "\n\nput t/e x", "\n\n\n", "\r\n \t\n\n", b"\n\x00\n\n"):
        _same(pair, ["txn"], input=data)
        _same(pair, ["txn", "--interactive"], input=data)


def test_txn_put_value_from_stdin(pair, tmp_path):
    """A put without a value in a txn reads standard input itself, past
    the reader's buffer (4096 bytes): what lies beyond becomes the value;
    with less input there is nothing left, and put refuses.  The input is
    a file, so that what a read gets does not depend on timing."""
    import subprocess
    from common.ctldiff import clean_env
    for name, pad in (("t/big", 5000), ("t/small", 100)):
        path = tmp_path / "in"
        path.write_bytes(b"\nput " + name.encode() + b"\n\n\n" + b"x" * pad)
        res = []
        for binary, ep in ((ETCDCTL, pair.a.endpoint),
                           (cetcdctl_as_etcdctl(), pair.b.endpoint)):
            with open(path, "rb") as f:
                cp = subprocess.run([binary, "--endpoints", ep, "txn"],
                                    stdin=f, capture_output=True,
                                    env=clean_env(), timeout=30)
            res.append((cp.returncode, cp.stdout, _no_zap(cp.stderr)))
        assert res[0] == res[1], res
        _same(pair, ["get", name, "-w", "fields"])


def test_txn_server_errors(pair):
    for f in FORMATS:
        _same(pair, ["-w", f, "txn"],
              input="\nput t/dup 1\nput t/dup 2\n\n\n")   # duplicate key
        _same(pair, ["-w", f, "txn"],
              input="\nget t/ --rev 100000\n\n\n")        # future revision
        _same(pair, ["-w", f, "txn"], input="\nput t/l 1 --lease 99\n\n\n")


def test_txn_better_than_etcdctl(server):
    """etcdctl 3.4.23's plain bugs, and what cetcdctl does instead (on a
    server of its own: these lines run on one side only)."""
    def ctl(args, input):
        return run(cetcdctl_as_etcdctl(), args, endpoint=server.endpoint,
                   input=input, timeout=10)

    # an unknown operator: etcdctl panics ("Unknown result op", exit 2)
    line = 'val("t/a") >= "1"'
    a = run(ETCDCTL, ["txn"], endpoint=server.endpoint,
            input=line + "\n\n\n\n")
    assert a.rc == 2 and b"panic: Unknown result op" in a.err
    b = ctl(["txn"], line + "\n\n\n\n")
    assert (b.rc, b.out, b.err) == (
        3, b"", b"Error: invalid txn compare request: " + line.encode() +
        b"\n")
    # lease compares: etcdctl panics on every one ("bad value"); cetcdctl
    # compares the key's lease, given in hex as put --lease takes it
    g = ctl(["lease", "grant", "600"], None)
    lid = g.out.split()[1]
    assert ctl(["put", "t/a", "1"], None).rc == 0
    b = ctl(["put", "t/leased", "v", "--lease", lid.decode()], None)
    assert b.rc == 0
    a = run(ETCDCTL, ["txn"], endpoint=server.endpoint,
            input='lease("t/leased") = "%s"\n\n\n\n' % lid.decode())
    assert a.rc == 2 and b"panic: bad value" in a.err
    for cmp, want in (('lease("t/leased") = "%s"' % lid.decode(),
                       b"SUCCESS"),
                      ('lease("t/leased") = "0"', b"FAILURE"),
                      ('lease("t/a") = "0"', b"SUCCESS")):
        b = ctl(["txn"], cmp + "\n\n\n\n")
        assert (b.rc, b.out) == (0, want + b"\n"), (cmp, b)
    b = ctl(["txn"], 'lease("t/a") = "xyz"\n\n\n\n')
    assert (b.rc, b.err) == (3, b'Error: invalid txn compare request: '
                                b'lease("t/a") = "xyz"\n')
    # 'single quotes': etcdctl slices the word by the number of words
    a = run(ETCDCTL, ["txn"], endpoint=server.endpoint,
            input="\nput 't/s q' 'v w'\n\n\n")
    assert a.rc == 0
    a = run(ETCDCTL, ["get", "t", "--print-value-only"],
            endpoint=server.endpoint)
    assert a.out == b"v\n"           # key "t", value "v"
    b = ctl(["txn"], "\nput 't/s q' 'v w'\n\n\n")
    assert (b.rc, b.out) == (0, b"SUCCESS\n\nOK\n"), b
    b = ctl(["get", "t/s q"], None)
    assert b.out == b"t/s q\nv w\n"
    # -h in a request: etcdctl prints the help, then waits forever
    b = ctl(["txn"], "\nget -h t/a\n\n\n")
    assert b.rc == 3 and b.out.startswith(b"Gets the key or a range of keys"
                                          b"\n\nUsage:\n   get [options]")
    assert b.err == b"Error: invalid txn request: get -h t/a\n"
    for line in ("help put", "completion bash"):
        b = ctl(["txn"], "\n" + line + "\n\n\n")
        assert (b.rc, b.out, b.err) == (
            3, b"", b"Error: invalid txn request: " + line.encode() + b"\n")


# ---------------------------------------------------------------------------
# compaction
# ---------------------------------------------------------------------------

def test_compaction(pair):
    for i in range(4):
        _same(pair, ["put", "c/k", str(i)])
    rev = int(re.search(rb'"revision":(\d+)', _same(
        pair, ["-w", "json", "get", "c/k"]).out).group(1))
    _same(pair, ["compaction", str(rev - 3)])
    _same(pair, ["compaction", str(rev - 3)])      # already compacted
    _same(pair, ["compaction", str(rev - 4)])
    _same(pair, ["compaction", "100000"])          # future revision
    _same(pair, ["compaction", "--", "-1"])
    _same(pair, ["compaction", "+" + str(rev - 2), "--physical"])
    _same(pair, ["-w", "json", "compaction", str(rev - 1)])
    _same(pair, ["-w", "table", "compaction", str(rev)])
    for f in FORMATS:                              # compacted revision
        _same(pair, ["-w", f, "get", "c/k", "--rev", str(rev - 2)])
        _same(pair, ["-w", f, "txn"],
              input="\nget c/k --rev %d\n\n\n" % (rev - 2))
    _all_formats(pair, ["get", "c/k", "--rev", str(rev)])
