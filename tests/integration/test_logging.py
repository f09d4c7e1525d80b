"""--logger=zap: etcd 3.4's JSON log lines, outputs, levels and refusals.

Goal: with --logger=zap cetcd writes one JSON object per line with etcd's
keys (level, ts in zap's ISO8601 form, caller, msg, fields), and the events
that log-based alerts watch (start, local member start, added member,
became/elected leader, published, serving peer/client traffic, signal)
carry etcd 3.4.23's exact msg strings and main field names, on a 1-member
and a 3-member cluster; --log-outputs writes to files, stdout, stderr and
the systemd journal; --log-level filters; bad values are refused as etcd
refuses them; the config file's logger/log-outputs/log-level work; no
password or token reaches the log in either format.

Method: cetcd and the real etcd 3.4.23 (/usr/bin/etcd) are started on the
same machine with the same flags (conftest's Server, tests/cluster's
Cluster), their logs parsed as JSON, and the sets of messages compared
after replacing member ids and numbers.  Refusals run both binaries in the
foreground and compare their messages and exit codes.  The journal is a
datagram socket the test binds, named by $CETCD_JOURNAL_SOCKET (cetcd
only; etcd's socket path is fixed).

Messages that differ, and why (checked by test_events_that_differ):
  - etcd logs "opened backend db", "started to purge file", "setting up
    initial cluster version", "set initial cluster version", "cluster
    version is updated", "simple token is not cryptographically signed",
    "started as single-node; fast-forwarding election ticks" for machinery
    cetcd has not (no cluster-version negotiation, no file purger, a lone
    voter campaigns at once) or does not log.
  - etcd's first raft lines differ in detail: etcd bootstraps through
    conf-change entries ("switched to configuration voters=()"), cetcd
    seeds the members; both log "<id> became leader at term N" and
    "raft.node: <id> elected leader <id> at term N".
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ETCD_BIN, Server, against_etcd, run_etcdctl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "cluster"))
import cluster as clusterlib  # noqa: E402

HAVE_ETCD = os.path.exists(ETCD_BIN)
ZAP = ["--logger", "zap"]
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d{4})$")

# The events both servers log at info on a start, with the fields an alert
# or a log pipeline keys on.
EVENTS = {
    "starting an etcd server": ["etcd-version", "name", "data-dir",
                                "initial-cluster", "listen-client-urls"],
    "starting local member": ["local-member-id", "cluster-id"],
    "added member": ["cluster-id", "local-member-id", "added-peer-id",
                     "added-peer-peer-urls"],
    "ID became leader at term N": [],
    "raft.node: ID elected leader ID at term N": [],
    "now serving peer/client/metrics": ["local-member-id",
                                        "listen-peer-urls",
                                        "listen-client-urls"],
    "serving peer traffic": ["address"],
    "published local member to cluster through raft": [
        "local-member-id", "local-member-attributes", "request-path",
        "cluster-id", "publish-timeout"],
    "serving client traffic insecurely; this is strongly discouraged!": [
        "address"],
    "enabled capabilities for version": ["cluster-version"],
}


def norm(msg):
    """Member ids and numbers out of a message."""
    msg = re.sub(r"\b[0-9a-f]{12,16}\b", "ID", msg)
    return re.sub(r"\b\d+\b", "N", msg)


def zap_lines(text, strict=True):
    """Every JSON line of a log (the harness's ===== lines skipped), each
    checked for zap's keys in zap's order.  strict: nothing else is in the
    log (etcd itself lets grpc-go print a plain "WARNING: ..." line when a
    dial is refused, so its logs are read with strict=False)."""
    out = []
    for line in text.splitlines():
        if not line.startswith("{"):
            assert not strict or not line.strip() or \
                line.startswith("====="), line
            continue
        obj = json.loads(line)
        assert list(obj)[:4] == ["level", "ts", "caller", "msg"], line
        assert obj["level"] in ("debug", "info", "warn", "error",
                                "dpanic", "panic", "fatal"), line
        assert TS.match(obj["ts"]), obj["ts"]
        assert re.match(r"^[\w./-]+:\d+$", obj["caller"]), obj["caller"]
        out.append(obj)
    return out


def by_msg(lines):
    got = {}
    for o in lines:
        got.setdefault(norm(o["msg"]), []).append(o)
    return got


def wait_for(path, needle, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path, errors="replace") as f:
            if needle in f.read():
                return
        time.sleep(0.1)
    raise AssertionError("%r not in %s" % (needle, path))


def start_pair(make_server, extra=()):
    """cetcd (and etcd, if installed) with --logger=zap, serving."""
    pair = {"cetcd": make_server(ZAP + list(extra))}
    if HAVE_ETCD and not against_etcd():
        pair["etcd"] = make_server(ZAP + list(extra), binary=ETCD_BIN)
    for s in pair.values():
        wait_for(s.log_path, "serving client traffic")
    return pair


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def check_events(lines, name):
    got = by_msg(lines)
    for msg, fields in EVENTS.items():
        assert msg in got, "%s did not log %r: %s" % (
            name, msg, sorted(got))
        for f in fields:
            assert f in got[msg][0], (name, msg, f, got[msg][0])
    return got


def test_single_member_events_as_etcd(make_server):
    pair = start_pair(make_server)
    logs = {k: zap_lines(read(s.log_path), k == "cetcd")
            for k, s in pair.items()}
    got = {k: check_events(v, k) for k, v in logs.items()}
    c = got["cetcd"]
    s = pair["cetcd"]
    assert c["serving client traffic insecurely; this is strongly "
             "discouraged!"][0]["address"] == "127.0.0.1:%d" % s.client_port
    pub = c["published local member to cluster through raft"][0]
    assert pub["local-member-attributes"] == "{Name:m1 ClientURLs:[%s]}" % (
        s.client_url)
    assert pub["request-path"] == "/0/members/%s/attributes" % (
        pub["local-member-id"])
    assert pub["publish-timeout"] == "7s"  # etcd: 5s + 2 * election 1s
    if "etcd" in got:
        e = got["etcd"]
        assert e["published local member to cluster through raft"][0][
            "publish-timeout"] == "7s"
        for msg in EVENTS:
            assert set(EVENTS[msg]) <= set(e[msg][0]), msg
    # No capnslog text in between: every line was JSON (zap_lines).
    # A graceful stop says so as etcd does, and a restart is a restart.
    for k, srv in pair.items():
        srv.stop()
        stop = by_msg(zap_lines(read(srv.log_path), k == "cetcd"))
        assert stop["received signal; shutting down"][0]["signal"] == \
            "terminated", k
        for m in ("closing etcd server", "closed etcd server"):
            assert {"name", "data-dir", "advertise-peer-urls",
                    "advertise-client-urls"} <= set(stop[m][0]), (k, m)
        srv.start()
        wait_for(srv.log_path, '"restarting local member"')
        again = by_msg(zap_lines(read(srv.log_path), k == "cetcd"))
        assert "server has been already initialized" in again, k
        r = again["restarting local member"][0]
        assert {"cluster-id", "local-member-id", "commit-index"} <= set(r)


def test_compaction_lines_as_etcd(make_server):
    """etcd's mvcc lines: "finished scheduled compaction" when a compaction
    is done (compact-revision, took), "restored last compact revision" when
    a store with one opens (in both log formats)."""
    pair = start_pair(make_server)
    for k, srv in pair.items():
        for i in range(4):
            run_etcdctl(srv.endpoint, "put", "k", "v%d" % i)
        run_etcdctl(srv.endpoint, "compact", "3")
        wait_for(srv.log_path, '"finished scheduled compaction"')
        got = by_msg(zap_lines(read(srv.log_path), k == "cetcd"))
        done = got["finished scheduled compaction"]
        assert len(done) == 1 and done[0]["compact-revision"] == 3, (k, done)
        assert re.match(r"^[\d.]+(ns|µs|ms|s)$", done[0]["took"]), done
        srv.stop()
        srv.start()
        wait_for(srv.log_path, '"restored last compact revision"')
        r = by_msg(zap_lines(read(srv.log_path), k == "cetcd"))[
            "restored last compact revision"]
        assert len(r) == 1, (k, r)
        assert r[0]["meta-bucket-name"] == "meta", (k, r)
        assert r[0]["meta-bucket-name-key"] == "finishedCompactRev", (k, r)
        assert r[0]["restored-compact-revision"] == 3, (k, r)
    # The default (capnslog) format, cetcd alone (etcd's text is the same:
    # mvcc/kvstore_compaction.go, mvcc/kvstore.go).
    srv = make_server([])
    for i in range(4):
        run_etcdctl(srv.endpoint, "put", "k", "v%d" % i)
    run_etcdctl(srv.endpoint, "compact", "3")
    wait_for(srv.log_path, "mvcc: finished scheduled compaction at 3 (took ")
    srv.stop()
    srv.start()
    wait_for(srv.log_path, "mvcc: restore compact to 3")


@pytest.mark.skipif(not clusterlib.multi_member_support()[0],
                    reason="no multi-member support")
def test_three_member_events_as_etcd():
    binaries = {"cetcd": None}
    if HAVE_ETCD and not against_etcd():
        binaries["etcd"] = ETCD_BIN
    msgs = {}
    for name, binary in binaries.items():
        c = clusterlib.Cluster(size=3, binary=binary, extra_args=ZAP)
        try:
            c.start()
            lead, _ = c.wait_leader()
            for m in c.members:
                wait_for(m.log_path, "serving client traffic")
            per = {m.name: by_msg(zap_lines(read(m.log_path),
                                            name == "cetcd"))
                   for m in c.members}
        finally:
            c.close()
        for mname, got in per.items():
            assert len(got["added member"]) == 3, (name, mname)
            ids = {o["added-peer-id"] for o in got["added member"]}
            assert len(ids) == 3
            for msg in EVENTS:
                if msg != "ID became leader at term N":
                    assert msg in got, (name, mname, msg)
        assert "ID became leader at term N" in per[lead.name], name
        msgs[name] = set().union(*[set(g) for g in per.values()])
    if "etcd" in msgs:
        both = set(EVENTS) | {"ID became follower at term N",
                              "ID became candidate at term N",
                              "ID is starting a new election at term N"}
        for m in both:
            assert m in msgs["etcd"], m
            assert m in msgs["cetcd"], m


def run_fg(binary, args, timeout=30, env=None):
    d = tempfile.mkdtemp(prefix="cetcd-log-")
    try:
        return subprocess.run([binary, "--data-dir", os.path.join(d, "x")] +
                              args, capture_output=True, text=True,
                              timeout=timeout, cwd=d, env=env)
    finally:
        subprocess.run(["rm", "-rf", d])


NO_JOURNAL = not os.path.exists("/run/systemd/journal/socket")

BAD = [
    (["--logger", "bogus"], 1,
     "etcdmain: error verifying flags, unknown logger option \"bogus\". "
     "See 'etcd --help'."),
    (["--logger", "zap", "--log-level", "bogus"], 2,
     'panic: unknown level "bogus"'),
    (["--log-level", "loud"], 2, 'panic: unknown level "loud"'),
    (["--logger", "zap", "--log-outputs", "default,stdout"], 1,
     "etcdmain: error verifying flags, multi logoutput for \"default\" is "
     "not supported yet. See 'etcd --help'."),
    (["--logger", "zap", "--log-outputs", "systemd/journal,stderr"], 1,
     "etcdmain: error verifying flags, running with systemd/journal but "
     "other '--log-outputs' values ([\"stderr\" \"systemd/journal\"]) are "
     "configured with 'default'; override 'default' value with something "
     "else. See 'etcd --help'."),
    (["--logger", "zap", "--log-outputs", "/nonexistent-cetcd/x.log"], 1,
     "etcdmain: error verifying flags, open sink \"/nonexistent-cetcd/x.log"
     "\": open /nonexistent-cetcd/x.log: no such file or directory. See "
     "'etcd --help'."),
]
if NO_JOURNAL:
    BAD.append((["--logger", "zap", "--log-outputs", "systemd/journal"], 1,
                "etcdmain: error verifying flags, can't find journal (dial "
                "unixgram /run/systemd/journal/socket: connect: no such file "
                "or directory). See 'etcd --help'."))


@pytest.mark.parametrize("args, rc, msg", BAD)
def test_bad_values_refused_as_etcd(args, rc, msg):
    binaries = [Server().binary]
    if HAVE_ETCD and not against_etcd():
        binaries.append(ETCD_BIN)
    env = dict(os.environ)
    env.pop("CETCD_JOURNAL_SOCKET", None)
    for b in binaries:
        cp = run_fg(b, args, env=env)
        assert cp.returncode == rc, (b, cp)
        assert msg in cp.stderr, (b, cp.stderr)


def start_fg(make_server, args, env=None):
    """A server whose stdout and stderr are kept apart (files)."""
    s = make_server(start=False)
    s.extra_args = list(args)
    out = open(os.path.join(s.root, "out"), "wb")
    err = open(os.path.join(s.root, "err"), "wb")
    s.proc = subprocess.Popen(s.args(), stdout=out, stderr=err,
                              cwd=s.root, env=env)
    out.close()
    err.close()
    s.wait_ready()
    return s


def test_outputs_files_and_stdout(make_server, tmp_path):
    a, b = str(tmp_path / "a.log"), str(tmp_path / "b.log")
    s = start_fg(make_server, ZAP + ["--log-outputs", "%s,%s,stdout" % (
        a, b)])
    wait_for(a, "serving client traffic")
    wait_for(b, "serving client traffic")
    wait_for(os.path.join(s.root, "out"), "serving client traffic")
    s.stop()
    la, lb = zap_lines(read(a)), zap_lines(read(b))
    lo = zap_lines(read(os.path.join(s.root, "out")))
    assert [o["msg"] for o in la] == [o["msg"] for o in lb] == \
        [o["msg"] for o in lo]
    assert "received signal; shutting down" in [o["msg"] for o in la]
    assert read(os.path.join(s.root, "err")) == ""
    assert oct(os.stat(a).st_mode & 0o777) in ("0o644", "0o664", "0o666")


@pytest.mark.parametrize("out", ["stderr", "default"])
def test_outputs_stderr(make_server, out):
    s = start_fg(make_server, ZAP + ["--log-outputs", out])
    wait_for(os.path.join(s.root, "err"), "serving client traffic")
    s.stop()
    assert read(os.path.join(s.root, "out")) == ""
    check_events(zap_lines(read(os.path.join(s.root, "err"))), out)


@pytest.mark.skipif(against_etcd(), reason="etcd's journal socket path is "
                    "fixed")
def test_journal_output(make_server, tmp_path):
    path = str(tmp_path / "journal.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    env = dict(os.environ, CETCD_JOURNAL_SOCKET=path)
    s = start_fg(make_server, ZAP + ["--log-outputs", "systemd/journal"],
                 env=env)
    got = []
    try:
        while not any(b"serving client traffic" in d for d in got):
            got.append(sock.recv(65536))
    finally:
        s.stop()
        sock.close()
    for d in got:
        fields = dict(x.split("=", 1) for x in d.decode().splitlines())
        obj = json.loads(fields["MESSAGE"])
        assert fields["SYSLOG_IDENTIFIER"] == "cetcd"
        assert fields["PRIORITY"] == {"info": "6", "warn": "4",
                                      "error": "3", "debug": "7"}[
                                          obj["level"]]
        assert fields["PACKAGE"] == obj["caller"].split("/")[0]
    assert read(os.path.join(s.root, "err")) == ""


def levels_of(make_server, level, binary=None):
    args = ZAP + ["--log-level", level]
    s = make_server(args, binary=binary)
    s.ctl("put", "k", "v")
    s.stop()
    return zap_lines(read(s.log_path), binary is None)


def test_log_level_filters(make_server, monkeypatch):
    # gRPC core's own debug lines (cetcd logs them at debug) are the
    # debug lines every start has.
    monkeypatch.setenv("GRPC_VERBOSITY", "DEBUG")
    warn = levels_of(make_server, "warn")
    assert all(o["level"] in ("warn", "error") for o in warn), warn
    info = levels_of(make_server, "info")
    assert {o["level"] for o in info} <= {"info", "warn", "error"}
    assert "starting an etcd server" in [o["msg"] for o in info]
    debug = levels_of(make_server, "debug")
    assert "starting an etcd server" in [o["msg"] for o in debug]
    assert "debug" in {o["level"] for o in debug}
    if HAVE_ETCD and not against_etcd():
        ewarn = levels_of(make_server, "warn", binary=ETCD_BIN)
        assert all(o["level"] in ("warn", "error") for o in ewarn)


def test_config_file_logging_keys(make_server, tmp_path):
    logf = str(tmp_path / "cfg.log")
    s = make_server(start=False)
    cfg = os.path.join(s.root, "c.yml")
    with open(cfg, "w") as f:
        f.write("name: cfgm\ndata-dir: %s\nlisten-client-urls: %s\n"
                "advertise-client-urls: %s\nlisten-peer-urls: %s\n"
                "initial-advertise-peer-urls: %s\n"
                "initial-cluster: cfgm=%s\nlogger: zap\n"
                "log-outputs: [%s]\nlog-level: warn\n" % (
                    s.data_dir, s.client_url, s.client_url, s.peer_url,
                    s.peer_url, s.peer_url, logf))
    s.args = lambda: [s.binary, "--config-file", cfg]
    s.start()
    s.ctl("put", "k", "v")
    s.stop()
    # warn level: the info lines are filtered, and what there is is zap
    text = read(logf) if os.path.exists(logf) else ""
    assert all(o["level"] != "info" for o in zap_lines(text))
    # the same file with log-level info gets the start events
    with open(cfg, "a") as f:
        f.write("")
    with open(cfg) as f:
        body = f.read().replace("log-level: warn", "log-level: info")
    with open(cfg, "w") as f:
        f.write(body)
    s.start()
    s.stop()
    got = by_msg(zap_lines(read(logf)))
    assert "restarting local member" in got
    assert "received signal; shutting down" in got


@pytest.mark.parametrize("logger", ["capnslog", "zap"])
def test_no_secret_in_log(make_server, logger):
    pw = "pw-Secret-7f3a9c"
    s = make_server(["--logger", logger, "--log-level", "debug"])
    s.ctl("user", "add", "root:" + pw)
    s.ctl("user", "add", "alice:" + pw + "2")
    s.ctl("user", "grant-role", "alice", "root")
    s.ctl("auth", "enable")
    run_etcdctl(s.endpoint, "--user", "root:" + pw, "put", "k", "v")
    run_etcdctl(s.endpoint, "--user", "alice:" + pw + "2", "get", "k")
    run_etcdctl(s.endpoint, "--user", "root:wrong-" + pw, "get", "k",
                check=False)
    run_etcdctl(s.endpoint, "--user", "root:" + pw, "user", "passwd",
                "alice", "--interactive=false", input=pw + "3\n")
    import grpc
    from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
    tok = rpc_pb2_grpc.AuthStub(s.channel()).Authenticate(
        rpc_pb2.AuthenticateRequest(name="root", password=pw)).token
    assert tok
    md = [("token", tok)]
    rpc_pb2_grpc.KVStub(s.channel()).Range(rpc_pb2.RangeRequest(key=b"k"),
                                           metadata=md)
    try:
        rpc_pb2_grpc.KVStub(s.channel()).Range(
            rpc_pb2.RangeRequest(key=b"k"), metadata=[("token", tok + "x")])
    except grpc.RpcError:
        pass
    s.stop()
    text = read(s.log_path)
    assert pw not in text
    assert tok not in text
    assert tok.split(".")[0] not in text


def test_events_that_differ(make_server):
    """The documented differences (module docstring) are still the only
    ones among etcd's start-up info lines that cetcd lacks."""
    if not HAVE_ETCD or against_etcd():
        pytest.skip("needs /usr/bin/etcd")
    pair = start_pair(make_server)
    got = {k: set(by_msg(zap_lines(read(s.log_path), k == "cetcd")))
           for k, s in pair.items()}
    missing = got["etcd"] - got["cetcd"]
    allowed = {
        "opened backend db", "started to purge file",
        "setting up initial cluster version",
        "set initial cluster version", "cluster version is updated",
        "simple token is not cryptographically signed",
        "started as single-node; fast-forwarding election ticks",
        "ID switched to configuration voters=()",
        "ID switched to configuration voters=(N)",
        "newRaft ID [peers: [], term: N, commit: N, applied: N, "
        "lastindex: N, lastterm: N]",
        "ID received MsgVoteResp from ID at term N",
    }
    assert missing <= allowed, sorted(missing - allowed)


def test_flag_error_after_zap_is_a_zap_line():
    """A bad flag checked after the logger is built is etcd's zap warning
    "failed to verify flags" with the reason in "error"."""
    binaries = [Server().binary]
    if HAVE_ETCD and not against_etcd():
        binaries.append(ETCD_BIN)
    for b in binaries:
        cp = run_fg(b, ZAP + ["--auto-compaction-mode", "bogus"])
        assert cp.returncode == 1, (b, cp)
        last = zap_lines(cp.stderr, strict=False)[-1]
        assert last["level"] == "warn", b
        assert last["msg"] == "failed to verify flags", b
        assert last["error"] == 'unknown auto-compaction-mode "bogus"', b


def test_journal_word_is_a_file_path(make_server):
    """etcd's journal output is spelled "systemd/journal"; a plain
    "journal" is a file of that name in the working directory, in both."""
    binaries = [None]
    if HAVE_ETCD and not against_etcd():
        binaries.append(ETCD_BIN)
    for b in binaries:
        s = make_server(ZAP + ["--log-outputs", "journal"], binary=b)
        path = os.path.join(s.root, "journal")
        wait_for(path, "serving client traffic")
        s.stop()
        msgs = [o["msg"] for o in zap_lines(read(path), b is None)]
        assert "starting an etcd server" in msgs, b
