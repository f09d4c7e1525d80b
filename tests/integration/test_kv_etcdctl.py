"""KV features through the real etcdctl (ETCDCTL_API=3), outputs checked.

Goal: every KV command a user types (put, get, del, txn, compaction) gives
byte-for-byte the output etcd 3.4.23 gives: the simple format, `-w json`
(header ids non-zero, revision arithmetic: +1 per write that changes
something, nothing for no-op deletes and reads), `-w fields`, exit codes and
the exact `Error: ...` lines on stderr.

Method: each test gets a fresh single-member server (conftest `server`), so
revisions are deterministic: an empty store is at revision 1 and the n-th
write is revision n+1.  etcdctl is the Debian etcd-client 3.4.23 binary.
Every expectation here was checked against /usr/bin/etcd.

Not here: lease compares.  etcdctl 3.4.23 panics on `lease("k") = "0"` in
txn (it hands a string to clientv3.Compare for LEASE, and drops the key), so
lease compares are tested over gRPC in test_kv_python.py.
"""

import base64
import json

import pytest


def b64(s):
    return base64.b64encode(s.encode()).decode()


def j(server, *args, input=None):
    """Run etcdctl -w json and parse its output."""
    r = server.ctl(*args, "-w", "json", input=input)
    return json.loads(r.out)


def err(server, *args, input=None, rc=1):
    """Run etcdctl expecting failure; return the Error: line."""
    r = server.ctl(*args, input=input, check=False)
    assert r.rc == rc, r
    assert r.out == "", r
    return r.error_line


def check_header(h, rev):
    assert h["cluster_id"] != 0 and h["member_id"] != 0, h
    assert h["raft_term"] >= 1, h
    assert h["revision"] == rev, h


def put_many(server, pairs):
    for k, v in pairs:
        assert server.ctl("put", k, v).out == "OK\n"


# -- put ------------------------------------------------------------------

def test_put_simple_and_revisions(server):
    assert j(server, "get", "nothing")["header"]["revision"] == 1
    r = server.ctl("put", "foo", "bar")
    assert (r.rc, r.out) == (0, "OK\n")
    check_header(j(server, "put", "foo", "baz")["header"], 3)
    out = j(server, "get", "foo")
    check_header(out["header"], 3)
    assert out["count"] == 1
    assert out["kvs"] == [{"key": b64("foo"), "create_revision": 2,
                           "mod_revision": 3, "version": 2,
                           "value": b64("baz")}]
    # same bytes again still makes a new revision and version
    server.ctl("put", "foo", "baz")
    kv = j(server, "get", "foo")["kvs"][0]
    assert (kv["mod_revision"], kv["version"]) == (4, 3)


def test_put_value_from_stdin_and_dash_dash(server):
    assert server.ctl("put", "k", input="from stdin").out == "OK\n"
    assert server.ctl("get", "k").out == "k\nfrom stdin\n"
    assert server.ctl("put", "--", "-dash", "-v").out == "OK\n"
    assert server.ctl("get", "--", "-dash").out == "-dash\n-v\n"
    assert server.ctl("get", "--print-value-only", "k").out == "from stdin\n"


def test_put_binary_and_spaces(server):
    server.ctl("put", "key with space", "value\twith\ttabs")
    assert server.ctl("get", "key with space").out == \
        "key with space\nvalue\twith\ttabs\n"
    out = j(server, "get", "key with space")
    assert out["kvs"][0]["value"] == b64("value\twith\ttabs")
    # --hex prints keys and values as \x escapes
    assert server.ctl("--hex", "get", "key with space").out.startswith(
        "\\x6b\\x65\\x79\\x20")


def test_put_prev_kv(server):
    r = server.ctl("put", "a", "1", "--prev-kv")
    assert r.out == "OK\n"  # no previous kv to print
    r = server.ctl("put", "a", "2", "--prev-kv")
    assert r.out == "OK\na\n1\n"
    out = j(server, "put", "a", "3", "--prev-kv")
    check_header(out["header"], 4)
    assert out["prev_kv"] == {"key": b64("a"), "create_revision": 2,
                              "mod_revision": 3, "version": 2,
                              "value": b64("2")}


def test_put_ignore_value(server):
    assert err(server, "put", "--ignore-value", "nokey") == \
        "etcdserver: key not found"
    assert server.rev() == 1
    server.ctl("put", "a", "orig")
    assert server.ctl("put", "--ignore-value", "a").out == "OK\n"
    out = j(server, "get", "a")
    check_header(out["header"], 3)
    kv = out["kvs"][0]
    assert (kv["value"], kv["version"], kv["mod_revision"]) == \
        (b64("orig"), 2, 3)
    # etcdctl itself refuses a value together with --ignore-value
    assert err(server, "put", "--ignore-value", "a", "x", rc=128) == \
        "put command needs only 1 argument when 'ignore-value' is set"


def test_put_ignore_lease(server):
    assert err(server, "put", "--ignore-lease", "nokey", "v") == \
        "etcdserver: key not found"
    server.ctl("put", "a", "1")
    assert server.ctl("put", "--ignore-lease", "a", "2").out == "OK\n"
    kv = j(server, "get", "a")["kvs"][0]
    assert (kv["value"], kv["version"], kv.get("lease", 0)) == (b64("2"), 2, 0)


def test_put_lease_not_found(server):
    assert err(server, "put", "--lease", "1234", "k", "v") == \
        "etcdserver: requested lease not found"
    assert server.rev() == 1
    assert server.ctl("get", "k").out == ""
    assert err(server, "put", "--lease", "zz", "k", "v", rc=128) == \
        'bad lease ID (strconv.ParseInt: parsing "zz": invalid syntax), ' \
        'expecting ID in Hex'


def test_put_errors(server):
    assert err(server, "put", "", "x") == "etcdserver: key is not provided"
    assert err(server, "put", rc=128) == \
        "put command needs 1 argument and input from stdin or 2 arguments"
    assert server.rev() == 1


# -- get ------------------------------------------------------------------

@pytest.fixture
def abcde(server):
    """Keys a..e (a is written twice), so revisions are: a=2,3 b=4 c=5 d=6
    e=7; store revision 7."""
    put_many(server, [("a", "1"), ("a", "v"), ("b", "bbb"), ("c", "cc"),
                      ("d", "d"), ("e", "eeeee")])
    return server


def keys_of(out):
    return [base64.b64decode(kv["key"]).decode() for kv in out.get("kvs", [])]


def test_get_single_range_prefix_fromkey(abcde):
    s = abcde
    assert s.ctl("get", "a").out == "a\nv\n"
    assert s.ctl("get", "zz").out == ""
    assert s.ctl("get", "a", "d").out == "a\nv\nb\nbbb\nc\ncc\n"
    assert s.ctl("get", "--prefix", "a").out == "a\nv\n"
    assert s.ctl("get", "--prefix", "").out.split("\n")[::2][:5] == \
        ["a", "b", "c", "d", "e"]
    assert s.ctl("get", "--from-key", "c").out == "c\ncc\nd\nd\ne\neeeee\n"
    assert s.ctl("get", "--from-key", "").out.count("\n") == 10
    out = j(s, "get", "b", "e")
    check_header(out["header"], 7)
    assert keys_of(out) == ["b", "c", "d"] and out["count"] == 3
    assert "more" not in out


def test_get_prefix_end_computation(server):
    put_many(server, [("p", "0"), ("p/", "1"), ("p/a", "2"), ("p/\xff", "3"),
                      ("p0", "4"), ("q", "5")])
    assert keys_of(j(server, "get", "--prefix", "p/")) == ["p/", "p/a",
                                                          "p/\xff"]
    assert keys_of(j(server, "get", "--prefix", "p")) == [
        "p", "p/", "p/a", "p/\xff", "p0"]


def test_get_limit_more_count(abcde):
    out = j(abcde, "get", "--from-key", "b", "--limit", "2")
    check_header(out["header"], 7)
    assert keys_of(out) == ["b", "c"]
    assert out["more"] is True and out["count"] == 4
    out = j(abcde, "get", "--from-key", "b", "--limit", "4")
    assert keys_of(out) == ["b", "c", "d", "e"]
    assert "more" not in out and out["count"] == 4
    assert abcde.ctl("get", "--prefix", "", "--limit", "1").out == "a\nv\n"


def test_get_fields_format(abcde):
    r = abcde.ctl("get", "--from-key", "a", "--limit", "2", "-w", "fields")
    lines = r.out.splitlines()
    assert lines[0].startswith('"ClusterID" : ')
    assert int(lines[0].split(" : ")[1]) != 0
    assert lines[1].startswith('"MemberID" : ')
    assert lines[2] == '"Revision" : 7'
    assert lines[3].startswith('"RaftTerm" : ')
    assert lines[4:] == [
        '"Key" : "a"', '"CreateRevision" : 2', '"ModRevision" : 3',
        '"Version" : 2', '"Value" : "v"', '"Lease" : 0',
        '"Key" : "b"', '"CreateRevision" : 4', '"ModRevision" : 4',
        '"Version" : 1', '"Value" : "bbb"', '"Lease" : 0',
        '"More" : true', '"Count" : 5']


def test_get_rev(abcde):
    s = abcde
    assert s.ctl("get", "a", "--rev", "1").out == ""
    assert s.ctl("get", "a", "--rev", "2").out == "a\n1\n"
    assert s.ctl("get", "a", "--rev", "3").out == "a\nv\n"
    out = j(s, "get", "--prefix", "", "--rev", "5")
    check_header(out["header"], 7)  # header = current rev, not the read rev
    assert keys_of(out) == ["a", "b", "c"] and out["count"] == 3
    assert s.ctl("get", "a", "--rev", "7").out == "a\nv\n"
    assert err(s, "get", "a", "--rev", "8") == \
        "etcdserver: mvcc: required revision is a future revision"
    s.ctl("compaction", "5")
    assert err(s, "get", "a", "--rev", "4") == \
        "etcdserver: mvcc: required revision has been compacted"
    assert s.ctl("get", "a", "--rev", "5").out == "a\nv\n"
    assert keys_of(j(s, "get", "--prefix", "", "--rev", "5")) == \
        ["a", "b", "c"]


def test_get_order_and_sort(server):
    # values and versions chosen so that every sort target gives a
    # different order: key a<b<c; create b<c<a... see below.
    put_many(server, [("b", "2"), ("c", "1"), ("a", "3"), ("c", "1'"),
                      ("b", "0"), ("b", "9")])
    # create: b=2 c=3 a=4; mod: c=5 a=4 b=7; version: a=1 c=2 b=3
    # value: b="9", c="1'", a="3"

    def order(*flags):
        return [x for x in server.ctl("get", "--prefix", "", "--keys-only",
                                      *flags).out.split("\n") if x]

    assert order() == ["a", "b", "c"]
    assert order("--order", "ASCEND") == ["a", "b", "c"]
    assert order("--order", "DESCEND") == ["c", "b", "a"]
    assert order("--sort-by", "KEY") == ["a", "b", "c"]
    assert order("--sort-by", "KEY", "--order", "DESCEND") == ["c", "b", "a"]
    assert order("--sort-by", "CREATE") == ["b", "c", "a"]
    assert order("--sort-by", "CREATE", "--order", "DESCEND") == \
        ["a", "c", "b"]
    assert order("--sort-by", "MODIFY") == ["a", "c", "b"]
    assert order("--sort-by", "MODIFY", "--order", "DESCEND") == \
        ["b", "c", "a"]
    assert order("--sort-by", "VERSION") == ["a", "c", "b"]
    assert order("--sort-by", "VERSION", "--order", "DESCEND") == \
        ["b", "c", "a"]
    assert order("--sort-by", "VALUE") == ["c", "a", "b"]
    assert order("--sort-by", "VALUE", "--order", "DESCEND") == \
        ["b", "a", "c"]
    # sort then limit: the limit applies to the sorted result
    out = j(server, "get", "--prefix", "", "--sort-by", "MODIFY", "--order",
            "DESCEND", "--limit", "2")
    assert keys_of(out) == ["b", "c"] and out["more"] and out["count"] == 3
    assert err(server, "get", "--order", "BAD", "a", rc=4) == \
        "bad sort order BAD"
    assert err(server, "get", "--sort-by", "BAD", "a", rc=4) == \
        "bad sort target BAD"


def test_get_keys_only_and_value_only(abcde):
    assert abcde.ctl("get", "a", "c", "--keys-only").out == "a\n\nb\n\n"
    out = j(abcde, "get", "a", "c", "--keys-only")
    assert [kv.get("value") for kv in out["kvs"]] == [None, None]
    assert out["kvs"][0]["version"] == 2
    assert abcde.ctl("get", "a", "c", "--print-value-only").out == "v\nbbb\n"


def test_get_consistency(abcde):
    assert abcde.ctl("get", "--consistency", "s", "e").out == "e\neeeee\n"
    assert abcde.ctl("get", "--consistency", "l", "e").out == "e\neeeee\n"
    assert err(abcde, "get", "--consistency", "x", "a", rc=4) == \
        'unknown consistency flag "x"'


def test_get_errors(server):
    assert err(server, "get", "") == "etcdserver: key is not provided"
    assert err(server, "get", rc=128) == \
        "get command needs one argument as key and an optional argument " \
        "as range_end"
    out = j(server, "get", "missing")
    check_header(out["header"], 1)
    assert "kvs" not in out and "count" not in out


# -- del ------------------------------------------------------------------

def test_del_single_and_noop(abcde):
    s = abcde
    assert s.ctl("del", "nokey").out == "0\n"
    assert s.rev() == 7  # a no-op delete does not bump the revision
    out = j(s, "del", "a")
    check_header(out["header"], 8)
    assert out["deleted"] == 1 and "prev_kvs" not in out
    assert s.ctl("get", "a").out == ""
    # recreate: version restarts at 1, create_revision is new
    s.ctl("put", "a", "new")
    kv = j(s, "get", "a")["kvs"][0]
    assert (kv["create_revision"], kv["mod_revision"], kv["version"]) == \
        (9, 9, 1)


def test_del_range_prefix_fromkey_prevkv(abcde):
    s = abcde
    assert s.ctl("del", "b", "d", "--prev-kv").out == \
        "2\nb\nbbb\nc\ncc\n"
    assert s.rev() == 8  # one revision for the whole range delete
    out = j(s, "del", "--prefix", "", "--prev-kv")
    check_header(out["header"], 9)
    assert out["deleted"] == 3
    assert [(base64.b64decode(kv["key"]).decode(), kv["mod_revision"])
            for kv in out["prev_kvs"]] == [("a", 3), ("d", 6), ("e", 7)]
    assert s.ctl("del", "--from-key", "").out == "0\n"
    put_many(s, [("x1", "1"), ("x2", "2"), ("y", "3")])
    assert s.ctl("del", "--from-key", "x2").out == "2\n"
    assert s.ctl("get", "--from-key", "").out == "x1\n1\n"
    assert s.ctl("del", "--prefix", "x").out == "1\n"
    assert s.rev() == 14


def test_del_errors(server):
    assert err(server, "del", "") == "etcdserver: key is not provided"
    assert err(server, "del", rc=128) == \
        "del command needs one argument as key and an optional argument " \
        "as range_end"


# -- txn ------------------------------------------------------------------

def txn_input(compares, success, failure):
    """etcdctl txn's stdin: three blocks, each ended by an empty line."""
    return "".join("".join(line + "\n" for line in block) + "\n"
                   for block in (compares, success, failure))


def txn(server, compares, success, failure, json_out=False):
    text = txn_input(compares, success, failure)
    if json_out:
        return j(server, "txn", input=text)
    return server.ctl("txn", input=text).out


def test_txn_compare_targets_and_ops(server):
    put_many(server, [("k", "v1"), ("k", "v2"), ("other", "o")])
    # k: create 2, mod 3, version 2, value v2; store rev 4
    true_cmps = ['ver("k") = "2"', 'version("k") > "1"', 'ver("k") < "3"',
                 'ver("k") != "1"', 'create("k") = "2"', 'c("k") < "3"',
                 'c("k") > "1"', 'c("k") != "3"', 'mod("k") = "3"',
                 'm("k") > "2"', 'mod("k") < "4"', 'mod("k") != "2"',
                 'val("k") = "v2"', 'value("k") > "v1"', 'val("k") < "v3"',
                 'val("k") != "v1"', 'ver("missing") = "0"',
                 'create("missing") = "0"', 'mod("missing") < "1"']
    false_cmps = ['ver("k") = "1"', 'ver("k") > "2"', 'ver("k") < "2"',
                  'ver("k") != "2"', 'create("k") = "3"', 'mod("k") > "3"',
                  'val("k") = "v1"', 'val("k") < "v2"', 'val("k") != "v2"',
                  'ver("missing") > "0"', 'val("missing") = "v2"',
                  # a value compare on a missing key always fails, even
                  # against "" (etcd applyCompare)
                  'val("missing") = ""', 'val("missing") != "x"']
    for c in true_cmps:
        assert txn(server, [c], ["get other"], ["get k"]) == \
            "SUCCESS\n\nother\no\n", c
    for c in false_cmps:
        assert txn(server, [c], ["get other"], ["get k"]) == \
            "FAILURE\n\nk\nv2\n", c
    # all compares must hold
    assert txn(server, true_cmps[:3] + false_cmps[:1], [], []) == \
        "FAILURE\n"
    assert server.rev() == 4  # read-only txns do not bump the revision


def test_txn_success_and_failure_ops(server):
    server.ctl("put", "a", "1")
    out = txn(server, ['val("a") = "1"'],
              ["put b 2", "get a", "del a", "get a"], ["put c 3"])
    # each op result is preceded by an empty line
    assert out == "SUCCESS\n\nOK\n\na\n1\n\n1\n\n"
    # one revision for all changes of a txn
    out = j(server, "get", "b")
    check_header(out["header"], 3)
    assert out["kvs"][0]["mod_revision"] == 3
    out = txn(server, ['val("a") = "1"'], ["put b 2"],
              ["put c 3 --prev-kv", "del b --prev-kv", "get --prefix \"\""])
    assert out == "FAILURE\n\nOK\n\n1\nb\n2\n\nc\n3\n"
    assert server.rev() == 4
    # a txn with no compares takes the success branch
    assert txn(server, [], ["put q 1"], ["put r 1"]) == "SUCCESS\n\nOK\n"
    assert server.ctl("get", "--prefix", "", "--keys-only").out == \
        "c\n\nq\n\n"


def test_txn_json(server):
    server.ctl("put", "x", "1")
    out = txn(server, ['ver("x") = "1"'],
              ["put x 2 --prev-kv", "get x", "del nokey"], [], json_out=True)
    check_header(out["header"], 3)
    assert out["succeeded"] is True
    r = out["responses"]
    assert len(r) == 3
    # responses inside a txn carry a header with only the revision
    assert r[0]["Response"]["ResponsePut"]["header"] == {"revision": 3}
    assert r[1]["Response"]["ResponseRange"]["header"] == {"revision": 3}
    assert r[0]["Response"]["ResponsePut"]["prev_kv"]["value"] == b64("1")
    rng = r[1]["Response"]["ResponseRange"]
    assert rng["kvs"][0]["value"] == b64("2") and rng["count"] == 1
    assert rng["kvs"][0]["mod_revision"] == 3
    assert r[2]["Response"]["ResponseDeleteRange"].get("deleted", 0) == 0
    out = txn(server, ['ver("x") = "1"'], [], ["get x"], json_out=True)
    check_header(out["header"], 3)
    assert "succeeded" not in out
    assert keys_of(out["responses"][0]["Response"]["ResponseRange"]) == ["x"]


def test_txn_quoting(server):
    out = txn(server, [], [r'put "key \"with\" space" "value \x23"'], [])
    assert out == "SUCCESS\n\nOK\n"
    assert server.ctl("get", 'key "with" space').out == \
        'key "with" space\nvalue #\n'
    assert txn(server, [r'version("key \"with\" space") = "1"'],
               [r'get "key \"with\" space"'], []) == \
        'SUCCESS\n\nkey "with" space\nvalue #\n'


def test_txn_errors(server):
    server.ctl("put", "x", "1")
    text = txn_input(['ver("x") = "1"'], ["put x 2", "put x 3"], [])
    assert err(server, "txn", input=text) == \
        "etcdserver: duplicate key given in txn request"
    text = txn_input([], ["put x 2 --prev-kv", "del x"], [])
    assert err(server, "txn", input=text) == \
        "etcdserver: duplicate key given in txn request"
    text = txn_input([], ["put ab 2", 'del --prefix a'], [])
    assert err(server, "txn", input=text) == \
        "etcdserver: duplicate key given in txn request"
    text = txn_input([], ["put ab 2", 'del a b'], [])
    assert err(server, "txn", input=text) == \
        "etcdserver: duplicate key given in txn request"
    text = txn_input(['bogus("x") = "0"'], ["get x"], [])
    assert err(server, "txn", input=text, rc=3) == \
        'malformed comparison: bogus("x") = "0" (unknown target bogus)'
    # puts in the branch that is not taken are still checked
    text = txn_input(['ver("x") = "9"'], ["put y 1", "put y 2"], ["get x"])
    assert err(server, "txn", input=text) == \
        "etcdserver: duplicate key given in txn request"
    assert server.rev() == 2
    # etcd 3.4 quirk: a delete whose range_end is "\0" (from-key, or the
    # empty prefix) is not seen by the overlap check, so this is accepted
    # and the delete removes the key the put just wrote.
    text = txn_input([], ["put ab 2", 'del --from-key a'], [])
    assert server.ctl("txn", input=text).out == "SUCCESS\n\nOK\n\n2\n"
    text = txn_input([], ["put ab 2", 'del --prefix ""'], [])
    assert server.ctl("txn", input=text).out == "SUCCESS\n\nOK\n\n1\n"
    assert server.ctl("get", "--from-key", "").out == ""
    assert server.rev() == 4


def test_txn_too_many_ops(server):
    ops = ["put k%d v" % i for i in range(129)]
    assert err(server, "txn", input=txn_input([], ops, [])) == \
        "etcdserver: too many operations in txn request"
    ops = ["put k%d v" % i for i in range(128)]
    assert txn(server, [], ops, []) == "SUCCESS\n" + "\nOK\n" * 128
    assert server.rev() == 2


# -- compaction -----------------------------------------------------------

def test_compaction(abcde):
    s = abcde
    assert s.ctl("compaction", "3").out == "compacted revision 3\n"
    assert s.rev() == 7  # compaction does not bump the revision
    assert err(s, "compaction", "3") == \
        "etcdserver: mvcc: required revision has been compacted"
    assert err(s, "compaction", "2") == \
        "etcdserver: mvcc: required revision has been compacted"
    assert err(s, "compaction", "8") == \
        "etcdserver: mvcc: required revision is a future revision"
    assert s.ctl("compaction", "--physical", "7").out == \
        "compacted revision 7\n"
    assert err(s, "get", "a", "--rev", "6") == \
        "etcdserver: mvcc: required revision has been compacted"
    assert s.ctl("get", "--prefix", "", "--rev", "7",
                 "--keys-only").out == "a\n\nb\n\nc\n\nd\n\ne\n\n"
    # the latest data is untouched
    kv = j(s, "get", "a")["kvs"][0]
    assert (kv["create_revision"], kv["mod_revision"], kv["version"]) == \
        (2, 3, 2)
    assert err(s, "compaction", "x") == \
        'strconv.ParseInt: parsing "x": invalid syntax'


def test_compaction_keeps_deleted_history_until_compacted(server):
    put_many(server, [("a", "1"), ("b", "1")])
    server.ctl("del", "a")  # rev 4
    server.ctl("put", "c", "1")  # rev 5
    assert server.ctl("get", "a", "--rev", "3").out == "a\n1\n"
    server.ctl("compaction", "3")
    assert server.ctl("get", "a", "--rev", "3").out == "a\n1\n"
    server.ctl("compaction", "4")
    assert server.ctl("get", "--prefix", "", "--rev", "4",
                      "--keys-only").out == "b\n\n"
    assert server.ctl("get", "--prefix", "", "--keys-only").out == \
        "b\n\nc\n\n"


# -- long keys --------------------------------------------------------------
# etcd limits keys by the request size only; cetcd's store keeps keys longer
# than LMDB's key limit (494 bytes) in another bucket under a prefix-plus-
# hash index (src/mvcc/mvcc_long.c).  The keys below straddle that limit,
# share their first 486 bytes (the index prefix) and interleave with short
# keys in byte order.

P = "k" * 486
LONG_KEYS = [P + "a" * 8,            # 494: the longest short key
             P + "a" * 9,            # 495: the shortest long key
             P + "a" * 40,
             P + "b",                # short, between long keys
             P + "k" * 8 + "\x01",   # long, 495 bytes
             P + "k" * 600,
             "k" * 100000]           # far beyond (one etcdctl argument)


def put_long(server):
    for i, k in enumerate(LONG_KEYS):
        assert server.ctl("put", "--", k, "v%d" % i).out == "OK\n"
    return sorted(LONG_KEYS)


def jl(server, *args):
    """j() with the output flag first: the long keys follow a "--"."""
    return json.loads(server.ctl("-w", "json", *args).out)


def keys_of(out):
    return [base64.b64decode(kv["key"]).decode() for kv in out.get("kvs", [])]


def test_long_keys_put_get_range(server):
    keys = put_long(server)
    for i, k in enumerate(LONG_KEYS):
        assert server.ctl("get", "--", k).out == "%s\nv%d\n" % (k, i)
        kv = jl(server, "get", "--", k)["kvs"][0]
        assert (kv["create_revision"], kv["version"]) == (i + 2, 1)
    out = jl(server, "get", "--prefix", "k")
    assert (keys_of(out), out["count"]) == (keys, len(keys))
    out = jl(server, "get", "--prefix", "k", "--limit", "3")
    assert (keys_of(out), out["count"], out["more"]) == (keys[:3], 7, True)
    out = jl(server, "get", "--from-key", "--", LONG_KEYS[2])
    assert keys_of(out) == [k for k in keys if k >= LONG_KEYS[2]]
    out = jl(server, "get", "--", LONG_KEYS[1], LONG_KEYS[5])
    assert keys_of(out) == [k for k in keys
                            if LONG_KEYS[1] <= k < LONG_KEYS[5]]
    out = jl(server, "get", "--prefix", P + "a", "--sort-by", "KEY",
            "--order", "DESCEND")
    assert keys_of(out) == sorted([k for k in keys if k.startswith(P + "a")],
                                  reverse=True)
    out = jl(server, "get", "--prefix", P, "--limit", "1")
    assert (keys_of(out), out["count"]) == ([keys[0]], 7)
    assert server.ctl("get", "--prefix", "k", "--keys-only").out == \
        "".join(k + "\n\n" for k in keys)
    # a long key never written, sharing a written one's first 600 bytes
    assert server.ctl("get", "--", P + "k" * 601).out == ""
    assert jl(server, "get", "--", P + "k" * 601)["header"]["revision"] == 8


def test_long_keys_history_delete_compaction(server):
    put_long(server)  # revs 2..8
    k = LONG_KEYS[5]
    assert server.ctl("put", "--prev-kv", "--", k, "new").out == \
        "OK\n%s\nv5\n" % k  # rev 9
    assert server.ctl("get", "--rev", "8", "--", k).out == "%s\nv5\n" % k
    assert server.ctl("get", "--rev", "6", "--", k).out == ""
    kv = jl(server, "get", "--", k)["kvs"][0]
    assert (kv["create_revision"], kv["mod_revision"], kv["version"]) == \
        (7, 9, 2)
    assert server.ctl("del", "--prev-kv", "--", k).out == \
        "1\n%s\nnew\n" % k  # rev 10
    assert server.ctl("get", "--", k).out == ""
    assert server.ctl("del", "--", k).out == "0\n"
    assert server.rev() == 10
    # a range delete from a long key to a long key
    assert server.ctl("del", "--", LONG_KEYS[1], LONG_KEYS[4]).out == "3\n"
    assert jl(server, "get", "--prefix", "k")["count"] == 3
    assert server.ctl("compaction", "--physical", "11").out == \
        "compacted revision 11\n"
    assert err(server, "get", "--rev", "10", "--", LONG_KEYS[0]) == \
        "etcdserver: mvcc: required revision has been compacted"
    assert keys_of(jl(server, "get", "--prefix", "k", "--rev", "11")) == \
        sorted([LONG_KEYS[0], LONG_KEYS[4], LONG_KEYS[6]])
    assert server.ctl("del", "--prefix", "k").out == "3\n"
    assert server.ctl("put", "--", k, "again").out == "OK\n"
    kv = jl(server, "get", "--", k)["kvs"][0]
    assert (kv["create_revision"], kv["version"]) == (13, 1)


def test_long_keys_txn_compares(server):
    k = LONG_KEYS[2]
    create = txn_input(['version("%s") = "0"' % k], ["put %s v1" % k],
                       ["get %s" % k])
    assert server.ctl("txn", input=create).out == "SUCCESS\n\nOK\n"
    assert server.ctl("txn", input=create).out == \
        "FAILURE\n\n%s\nv1\n" % k
    for c, want in [('version("%s") != "0"' % k, "SUCCESS"),
                    ('version("%s") = "1"' % k, "SUCCESS"),
                    ('create("%s") = "2"' % k, "SUCCESS"),
                    ('mod("%s") > "2"' % k, "FAILURE"),
                    ('value("%s") = "v1"' % k, "SUCCESS"),
                    ('value("%s") = "v2"' % k, "FAILURE"),
                    ('version("%s") = "0"' % (k + "x"), "SUCCESS")]:
        assert server.ctl("txn", input=txn_input([c], [], [])).out == \
            want + "\n", c
    assert server.rev() == 2
