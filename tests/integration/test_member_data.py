"""A member's data decides who it is, and its files are private.

Goal: (1) once a member has data (a WAL), the --initial-* flags are ignored,
as in etcd: its id, its cluster and its membership come from what it stored,
also when its store is rebuilt from the WAL (after a reboot left it dirty,
or when data.mdb is gone), so a restart with another --initial-cluster-token,
--initial-cluster and --initial-advertise-peer-urls still gets a leader and
keeps every key; (2) every file the member creates in its data dir is 0600
and every directory 0700, and a data dir more open than 0700 gets etcd's
warning at start (etcd warns and carries on; it neither chmods nor
refuses); (3) MemberAdd and MemberUpdate refuse a peer URL holding a NUL
byte with etcd's InvalidArgument "etcdserver: given member URLs are invalid"
(etcd 3.4's MemberUpdate stores any URL; cetcd already refuses invalid ones
there, and a URL cut at the NUL must not be stored either).

Method: single members on free 127.0.0.1 ports (conftest.py), restarted on
the same data dir with other flags; a reboot is simulated by writing the
boot guard's state file as a dirty stop of another boot (the format of
src/server/boot_guard.c: "<boot id> dirty").  Readiness is a linearizable
Range, which needs a leader.  Log lines are read from the member's log.
"""
import os
import re
import stat

import grpc
import pytest

from conftest import Server, against_etcd, free_port, grpc_error
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

ALREADY = ("the server is already initialized as member before, starting "
           "as etcd member...")
BAD_URLS = "etcdserver: given member URLs are invalid"


class FlagServer(Server):
    """A Server whose --initial-* flags the test can change between starts
    (the listen URLs stay)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.token = "cetcd-it"
        self.advertise = None  # None: the real peer URL
        self.cluster = None    # None: name=advertised peer URL

    def args(self):
        adv = self.advertise or self.peer_url
        cluster = self.cluster or "%s=%s" % (self.name, adv)
        return [
            self.binary,
            "--name", self.name,
            "--data-dir", self.data_dir,
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", adv,
            "--initial-cluster", cluster,
            "--initial-cluster-token", self.token,
            "--initial-cluster-state", "new",
        ] + self.extra_args


@pytest.fixture
def flag_server():
    s = FlagServer()
    yield s
    s.cleanup()


def put_keys(s, n):
    kv = s.kv()
    for i in range(n):
        kv.Put(rpc_pb2.PutRequest(key=b"md/%03d" % i, value=b"v%d" % i),
               timeout=10)


def keys(s):
    r = s.kv().Range(rpc_pb2.RangeRequest(key=b"md/", range_end=b"md0"),
                     timeout=10)
    return [(kv.key, kv.value) for kv in r.kvs]


def members(s):
    cl = rpc_pb2_grpc.ClusterStub(s.channel())
    return [(m.ID, list(m.peerURLs), m.name)
            for m in cl.MemberList(rpc_pb2.MemberListRequest(),
                                   timeout=10).members]


def mark_dirty_reboot(data_dir):
    """The boot guard's state file as a member that died without a clean
    stop leaves it, written in an earlier boot."""
    with open(os.path.join(data_dir, "member", "db.state"), "w") as f:
        f.write("an-earlier-boot dirty\n")


def drop_store(data_dir):
    os.unlink(os.path.join(data_dir, "member", "db", "data.mdb"))


def log_text(s):
    with open(s.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


@pytest.mark.skipif(against_etcd(), reason="cetcd's store rebuild")
@pytest.mark.parametrize("damage, rebuilt", [
    # a dirty reboot: the store set aside is restored to its pinned state
    # (src/server/snap_pin.c), which holds the members, then the WAL
    (mark_dirty_reboot, "rebuilding the store from its state pinned at"),
    # no store at all: an empty one starts from member/seed, then the WAL
    (drop_store, "the store is empty: it starts from the members in"),
], ids=["dirty-reboot", "data-mdb-deleted"])
def test_rebuilt_store_ignores_initial_flags(flag_server, damage, rebuilt):
    s = flag_server
    s.start()
    put_keys(s, 20)
    before_keys, before_members = keys(s), members(s)
    assert len(before_keys) == 20 and len(before_members) == 1
    s.stop()
    damage(s.data_dir)
    s.token = "another-token"
    s.advertise = "http://127.0.0.1:%d" % free_port()
    s.cluster = "%s=%s,other=http://127.0.0.1:%d" % (
        s.name, s.advertise, free_port())
    s.start(timeout=20)  # a linearizable Range answers: it has a leader
    assert keys(s) == before_keys
    assert members(s) == before_members  # id and peer URL as stored
    s.kv().Put(rpc_pb2.PutRequest(key=b"md/after", value=b"x"), timeout=10)
    second = log_text(s).split("===== start #2")[1]
    assert ALREADY in second
    assert rebuilt in second
    # and it stays so at the next start, whatever the flags say
    s.stop()
    s.token = "a-third-token"
    s.start(timeout=20)
    assert len(keys(s)) == 21 and members(s) == before_members


def test_restart_ignores_initial_flags(flag_server):
    """Without a rebuild too (the store is trusted): the same, as etcd."""
    s = flag_server
    s.start()
    put_keys(s, 5)
    before = members(s)
    s.stop()
    s.token = "another-token"
    s.advertise = "http://127.0.0.1:%d" % free_port()
    s.cluster = "x=http://127.0.0.1:%d" % free_port()  # not even our name
    s.start(timeout=20)
    assert len(keys(s)) == 5 and members(s) == before
    assert ALREADY in log_text(s).split("===== start #2")[1]
    assert ALREADY not in log_text(s).split("===== start #2")[0]


def modes(root):
    """{relative path: (is_dir, permission bits)} of everything under
    root."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (stat.S_ISDIR(st.st_mode),
                                              st.st_mode & 0o777)
    return out


@pytest.mark.skipif(against_etcd(), reason="etcd 3.4 makes its .snap files "
                    "0644")
@pytest.mark.parametrize("wal_dir", [False, True], ids=["wal-in-data",
                                                         "wal-dir"])
def test_data_files_private(make_server, tmp_path, wal_dir):
    wal = str(tmp_path / "wal")
    extra = ["--wal-dir", wal, "--snapshot-count", "50"] if wal_dir \
        else ["--snapshot-count", "50"]
    s = make_server(extra_args=extra)
    put_keys(s, 120)  # two snapshots
    s.restart()
    got = modes(s.data_dir)
    if wal_dir:
        got.update({"wal:" + k: v for k, v in modes(wal).items()})
        assert os.stat(wal).st_mode & 0o777 == 0o700
    assert os.stat(s.data_dir).st_mode & 0o777 == 0o700
    assert "member/ids" in got
    wrong = {p: oct(m) for p, (is_dir, m) in got.items()
             if m != (0o700 if is_dir else 0o600)}
    assert wrong == {}


WARN = ('check file permission: directory "%s" exist, but the permission '
        'is "drwxr-xr-x". The recommended permission is "-rwx------" to '
        'prevent possible unprivileged access to the data.')


def test_open_data_dir_warned_not_changed(make_server):
    s = make_server()
    assert WARN % s.data_dir not in log_text(s)
    s.stop()
    os.chmod(s.data_dir, 0o755)
    s.start()
    assert WARN % s.data_dir in log_text(s).split("===== start #2")[1]
    assert os.stat(s.data_dir).st_mode & 0o777 == 0o755  # as etcd: kept
    # a data dir that does not exist yet is made 0700 (checked above)


NUL_URLS = ["http://127.0.0.1:2390\x00evil", "http://127.0.0.1:2391\x00",
            "\x00http://127.0.0.1:2392"]


@pytest.mark.parametrize("url", NUL_URLS, ids=["middle", "end", "start"])
def test_member_add_nul_url_refused(server, url):
    cl = rpc_pb2_grpc.ClusterStub(server.channel())
    code, details = grpc_error(cl.MemberAdd, rpc_pb2.MemberAddRequest(
        peerURLs=["http://127.0.0.1:2399", url]), timeout=10)
    assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, BAD_URLS)
    assert len(members(server)) == 1  # nothing was added


@pytest.mark.skipif(against_etcd(), reason="etcd 3.4 stores any URL here")
def test_member_update_nul_url_refused(server):
    cl = rpc_pb2_grpc.ClusterStub(server.channel())
    before = members(server)
    code, details = grpc_error(cl.MemberUpdate, rpc_pb2.MemberUpdateRequest(
        ID=before[0][0], peerURLs=["http://127.0.0.1:2393\x00x"]),
        timeout=10)
    assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, BAD_URLS)
    assert members(server) == before


@pytest.mark.skipif(against_etcd(), reason="cetcd's pins (member/snap/*.pin)")
def test_pin_files_spare_and_crash_leftovers(make_server):
    """member/snap holds the durable pin (<index>.pin) and one released pin
    file kept as pin.spare, whose blocks the next pin file is written into
    (so a pin needs no new space on a full disk: test_full_disk.py).  A
    pin file's temp (<index>.pin.tmp) that a crash left behind is reused
    as the spare or removed, not kept forever."""
    s = make_server()
    snap = os.path.join(s.data_dir, "member", "snap")
    s.stop()
    s.start()  # the start-up pin: the previous one is released
    names = sorted(os.listdir(snap))
    pins = [n for n in names if re.fullmatch(r"[0-9a-f]{16}\.pin", n)]
    assert len(pins) == 1 and "pin.spare" in names, names
    s.stop()
    os.unlink(os.path.join(snap, "pin.spare"))
    for i in (1, 2):
        with open(os.path.join(snap, "%016x.pin.tmp" % i), "wb") as f:
            f.write(b"x" * 100)
    s.start()
    names = sorted(os.listdir(snap))
    assert not [n for n in names if n.endswith(".tmp")], names
    assert "pin.spare" in names, names
    assert len([n for n in names if n.endswith(".pin")]) == 1, names
    kv = s.kv()
    kv.Put(rpc_pb2.PutRequest(key=b"a", value=b"b"), timeout=10)
    s.restart()
    assert s.kv().Range(rpc_pb2.RangeRequest(key=b"a"), timeout=10).kvs[0].value \
        == b"b"
