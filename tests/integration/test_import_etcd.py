"""cetcd started on an etcd 3.4.23 data dir imports it (issue 21).

Goal: whatever a real etcd holds survives the move into cetcd: every key
with its create/mod revision, version, value and lease, the compaction
(Range below it refused, at and above it answered as etcd answers),
HashKV equal to etcd's, leases with their TTLs and keys, users, roles,
permissions and the auth-enabled state, the member and cluster ids, and
etcd's raft state (cetcd goes on from etcd's term).  Both ways in:
(a) `etcdctl snapshot save` from etcd, `etcdctl snapshot restore`, cetcd
on the result; (b) cetcd on a stopped etcd member's data dir.  etcd's
files stay untouched in <data-dir>/member.etcd.  Bad input (truncated or
bit-flipped db, WAL and snap files) is refused with a message naming the
file, never a crash, and leaves the dir exactly as it was; a crash
between the import's two renames is finished by the next start.  The way
back: a snapshot of the imported cetcd, auth included, restored into a
real etcd keeps the users and roles.

Method: /usr/bin/etcd is started by the test (free ports) and filled over
gRPC (puts over many revisions, a multi-put txn, deletes, leases with
keys, a physical compaction, more writes), then users and roles with
etcdctl and auth enabled.  Reads go through a root token.  Everything
read from etcd is compared with what cetcd answers after the import.
"""

import hashlib
import os
import random
import shutil
import subprocess

import grpc
import pytest

from conftest import ETCDCTL_BIN, Server
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
from common import etcdfill
from common.watchstream import replay
from common.servers import ETCD_BIN, REPO, against_etcd

pytestmark = pytest.mark.skipif(
    against_etcd(), reason="cetcd's import of etcd's data (etcd starts on "
    "its own dir)")

PW = "rootpw"


def ctl(srv, *args, user=True, check=True):
    cmd = [ETCDCTL_BIN, "--endpoints", srv.endpoint]
    if user:
        cmd += ["--user", "root:" + PW]
    cp = subprocess.run(cmd + list(args), capture_output=True, text=True,
                        timeout=60, env=dict(os.environ, ETCDCTL_API="3"))
    if check:
        assert cp.returncode == 0, "etcdctl %s: %s" % (" ".join(args),
                                                        cp.stderr)
    return cp


def offline(*args):
    cp = subprocess.run([ETCDCTL_BIN] + list(args), capture_output=True,
                        text=True, timeout=60,
                        env=dict(os.environ, ETCDCTL_API="3"))
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def token(srv, name="root", pw=PW):
    auth = rpc_pb2_grpc.AuthStub(srv.channel())
    r = auth.Authenticate(rpc_pb2.AuthenticateRequest(name=name,
                                                      password=pw),
                          timeout=10)
    return (("token", r.token),)


def alice_writes(srv, key):
    """alice's permission to write key, checked without writing: a txn
    whose compare fails (etcd checks every op of both branches)."""
    md = token(srv, "alice", "alicepw")
    cmp = rpc_pb2.Compare(key=key, target=rpc_pb2.Compare.VERSION,
                          result=rpc_pb2.Compare.EQUAL, version=999999)
    try:
        r = srv.kv().Txn(rpc_pb2.TxnRequest(compare=[cmp], success=[
            rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                key=key, value=b"w"))]), timeout=10, metadata=md)
        return "allowed", r.succeeded
    except grpc.RpcError as e:
        return e.code(), e.details()


def fill(srv):
    """The shared history (common/etcdfill.py, with a second key on the
    first lease), then users, roles and auth; returns the revision
    compacted at."""
    compact_at = etcdfill.fill(srv, leased_more=True)
    # users, roles, permissions, then auth on
    ctl(srv, "user", "add", "root:" + PW, user=False)
    ctl(srv, "user", "grant-role", "root", "root", user=False)
    ctl(srv, "role", "add", "reader", user=False)
    ctl(srv, "role", "grant-permission", "reader", "read", "k", "l",
        user=False)
    ctl(srv, "role", "add", "writer", user=False)
    ctl(srv, "role", "grant-permission", "writer", "--prefix", "readwrite",
        "t", user=False)
    ctl(srv, "user", "add", "alice:alicepw", user=False)
    ctl(srv, "user", "grant-role", "alice", "reader", user=False)
    ctl(srv, "user", "grant-role", "alice", "writer", user=False)
    ctl(srv, "auth", "enable", user=False)
    return compact_at


def kvs(srv, md, rev=0):
    r = srv.kv().Range(rpc_pb2.RangeRequest(key=b"\0", range_end=b"\0",
                                            revision=rev),
                       timeout=10, metadata=md)
    return [(k.key, k.create_revision, k.mod_revision, k.version, k.value,
             k.lease) for k in r.kvs], r.header.revision


def state(srv, c_at):
    """Everything compared between etcd and the imported cetcd (a watch
    from the compacted revision replays the same history too)."""
    md = token(srv)
    out = {}
    out["kvs"], out["rev"] = kvs(srv, md)
    for rev in (c_at, c_at + 1, c_at + 7, out["rev"] - 3):
        out["kvs@%d" % rev] = kvs(srv, md, rev)[0]
    try:
        kvs(srv, md, c_at - 1)
        out["below"] = "served"
    except grpc.RpcError as e:
        out["below"] = (e.code(), e.details())
    h = srv.maintenance().HashKV(rpc_pb2.HashKVRequest(revision=0),
                                 timeout=10, metadata=md)
    out["hashkv"] = (h.hash, h.compact_revision)
    out["watch@%d" % c_at] = replay(srv.channel(), c_at, out["rev"], md)
    lease = rpc_pb2_grpc.LeaseStub(srv.channel())
    ids = sorted(x.ID for x in lease.LeaseLeases(
        rpc_pb2.LeaseLeasesRequest(), timeout=10, metadata=md).leases)
    out["leases"] = ids
    for lid in ids:
        t = lease.LeaseTimeToLive(rpc_pb2.LeaseTimeToLiveRequest(
            ID=lid, keys=True), timeout=10, metadata=md)
        assert 0 < t.TTL <= t.grantedTTL
        out["lease %x" % lid] = (t.grantedTTL, sorted(t.keys))
    auth = rpc_pb2_grpc.AuthStub(srv.channel())
    users = list(auth.UserList(rpc_pb2.AuthUserListRequest(), timeout=10,
                               metadata=md).users)
    out["users"] = users
    for u in users:
        out["user " + u] = sorted(auth.UserGet(rpc_pb2.AuthUserGetRequest(
            name=u), timeout=10, metadata=md).roles)
    roles = list(auth.RoleList(rpc_pb2.AuthRoleListRequest(), timeout=10,
                               metadata=md).roles)
    out["roles"] = roles
    for r in roles:
        out["role " + r] = [(p.permType, p.key, p.range_end) for p in
                            auth.RoleGet(rpc_pb2.AuthRoleGetRequest(role=r),
                                         timeout=10, metadata=md).perm]
    # the permissions enforced: alice reads k*, writes t*, nothing else
    out["alice"] = [
        ctl(srv, "--user", "alice:alicepw", "get", "k002", user=False,
            check=False).stdout,
        alice_writes(srv, b"t9"),
        alice_writes(srv, b"k002"),
        ctl(srv, "get", "k002", user=False, check=False
            ).stderr.strip().splitlines()[-1],
    ]
    return out


def tree(root):
    """{relative path: sha256} of every file under root."""
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(
                    fh.read()).hexdigest()
    return out


def fresh(pristine, dst, own):
    """dst := pristine, hard links (the import must not write etcd's
    files: the hashes taken of pristine before show it) but for the file
    own (relative), a copy a test may change."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(pristine, dst, copy_function=os.link)
    os.unlink(os.path.join(dst, own))
    shutil.copy2(os.path.join(pristine, own), os.path.join(dst, own))


def rehash(want, root, rel):
    out = dict(want)
    with open(os.path.join(root, rel), "rb") as fh:
        out[rel] = hashlib.sha256(fh.read()).hexdigest()
    return out


def members(srv):
    md = token(srv)
    r = rpc_pb2_grpc.ClusterStub(srv.channel()).MemberList(
        rpc_pb2.MemberListRequest(), timeout=10, metadata=md)
    return r.header.cluster_id, [(m.ID, m.name, list(m.peerURLs))
                                 for m in r.members]


@pytest.fixture(scope="module")
def source():
    """A filled etcd, its state, its stopped data dir and a snapshot."""
    etcd = Server(binary=ETCD_BIN, name="e1")
    etcd.start()
    try:
        c_at = fill(etcd)
        # writes after auth went on (so the db's consistent index is past
        # the auth entries, whatever etcd stored with them)
        ctl(etcd, "put", "after-auth", "yes")
        want = state(etcd, c_at)
        # the history after the compaction has puts, deletes and prev_kvs
        evs = want["watch@%d" % c_at]
        assert {e[0] for e in evs} == {0, 1} and any(e[6] for e in evs)
        ids = members(etcd)
        snap = os.path.join(etcd.root, "snap.db")
        ctl(etcd, "snapshot", "save", snap)
        etcd.stop()
        yield etcd, c_at, want, ids, snap
    finally:
        etcd.cleanup()


def on_dir(make_server, data_dir, name="m1"):
    """A cetcd Server object whose data dir is a copy of data_dir."""
    srv = make_server(start=False, name=name)
    shutil.copytree(data_dir, srv.data_dir)
    return srv


def test_stopped_member_dir(source, make_server):
    etcd, c_at, want, ids, _ = source
    srv = on_dir(make_server, etcd.data_dir, name="e1")
    before = tree(os.path.join(srv.data_dir, "member"))
    srv.start()
    assert state(srv, c_at) == want
    # the same member of the same cluster: ids, name, peer URLs
    assert members(srv) == ids
    log = open(srv.log_path).read()
    assert "imported the etcd data dir" in log
    assert "this member %016x" % ids[1][0][0] in log
    # etcd's files untouched, beside the new store
    assert tree(os.path.join(srv.data_dir, "member.etcd")) == before
    # writes go on from etcd's revision; a restart imports nothing again
    ctl(srv, "put", "new", "1")
    srv.restart()
    assert open(srv.log_path).read().count("imported the etcd") == 1
    got = kvs(srv, token(srv))
    assert got[1] == want["rev"] + 1
    assert state(srv, c_at)["users"] == want["users"]


def test_snapshot_restore_dir(source, make_server):
    _, c_at, want, _, snap = source
    srv = make_server(start=False, name="r1")
    offline("snapshot", "restore", snap, "--data-dir", srv.data_dir,
            "--name", "r1", "--initial-cluster", "r1=%s" % srv.peer_url,
            "--initial-advertise-peer-urls", srv.peer_url)
    srv.start()
    got = state(srv, c_at)
    assert got == want
    cid, ms = members(srv)
    assert [(m[1], m[2]) for m in ms] == [("r1", [srv.peer_url])]
    # the way back: cetcd's snapshot (auth included) into a real etcd
    back = os.path.join(srv.root, "back.db")
    ctl(srv, "snapshot", "save", back)
    etcd2 = make_server(binary=ETCD_BIN, start=False, name="b1")
    offline("snapshot", "restore", back, "--data-dir", etcd2.data_dir,
            "--name", "b1", "--initial-cluster", "b1=%s" % etcd2.peer_url,
            "--initial-advertise-peer-urls", etcd2.peer_url)
    etcd2.start()
    again = state(etcd2, c_at)
    assert again == want


def test_killed_member_dir_applies_the_log(make_server):
    """etcd killed with its last writes only in its WAL (a 60 s backend
    batch interval keeps them out of the db): cetcd applies etcd's entries
    after the db's consistent index, translated, in order, and ends where
    etcd was: same keys, revisions, versions, leases."""
    etcd = make_server(binary=ETCD_BIN, name="k1", extra_args=[
        "--backend-batch-interval", "60s", "--backend-batch-limit",
        "1000000"])
    kv = etcd.kv()
    lease = rpc_pb2_grpc.LeaseStub(etcd.channel())
    lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=600, ID=77), timeout=10)
    for i in range(300):
        kv.Put(rpc_pb2.PutRequest(key=b"x%d" % (i % 50), value=b"v%d" % i,
                                  lease=77 if i % 3 == 0 else 0),
               timeout=10)
        if i == 150:  # a compaction commits etcd's backend: before the rest
            kv.Compact(rpc_pb2.CompactionRequest(revision=100), timeout=10)
    kv.DeleteRange(rpc_pb2.DeleteRangeRequest(key=b"x7"), timeout=10)
    kv.Txn(rpc_pb2.TxnRequest(success=[rpc_pb2.RequestOp(
        request_put=rpc_pb2.PutRequest(key=b"t", value=b"1"))]), timeout=10)
    want = kvs(etcd, ())
    want_old = kvs(etcd, (), 250)[0]
    etcd.kill()
    srv = on_dir(make_server, etcd.data_dir, name="k1")
    srv.start()
    assert kvs(srv, ()) == want
    assert kvs(srv, (), 250)[0] == want_old
    t = rpc_pb2_grpc.LeaseStub(srv.channel()).LeaseTimeToLive(
        rpc_pb2.LeaseTimeToLiveRequest(ID=77, keys=True), timeout=10)
    assert t.grantedTTL == 600
    assert sorted(t.keys) == sorted(k[0] for k in want[0] if k[5] == 77)
    line = [ln for ln in open(srv.log_path)
            if "imported the etcd data dir" in ln][0]
    n = int(line.split(" requests after the index")[0].rsplit(" ", 1)[1])
    assert n > 100, line  # the last puts came from etcd's log, not its db


# --- etcd 3.5's log records, appended to a real etcd 3.4.23 WAL -----------
# No etcd 3.5 binary here: the entries etcd 3.5 writes differently (a user
# added or a password changed with the bcrypt hash, not the password, in
# hashedPassword; AuthStatus and ClusterVersionSet through raft) are
# encoded by the test from 3.5's message definitions and appended to the
# stopped member's WAL, framed and CRC-chained as etcd writes.

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_T = _crc32c_table()


def crc32c(crc, data):
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = _CRC_T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def pb_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_v(num, v):
    return pb_varint(num << 3) + pb_varint(v)


def pb_b(num, b):
    return pb_varint(num << 3 | 2) + pb_varint(len(b)) + b


def pb_read_varint(b, i):
    """(value, next index) of the varint at b[i]."""
    v, n = 0, 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << n
        n += 7
        if x < 0x80:
            return v, i


def pb_fields(b):
    """[(num, value)] of a message: ints for varints, bytes for bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = pb_read_varint(b, i)
        v, i = pb_read_varint(b, i)
        if key & 7 == 2:
            out.append((key >> 3, bytes(b[i:i + v])))
            i += v
        else:
            out.append((key >> 3, v))
    return out


def wal_append(member, entries):
    """Appends raft entries (data bytes each) after the log's last entry at
    its last term, then a HardState committing them; returns the index of
    the first."""
    wal = os.path.join(member, "wal")
    names = sorted(f for f in os.listdir(wal) if f.endswith(".wal"))
    crc = last = term = vote = 0
    for name in names:
        buf = open(os.path.join(wal, name), "rb").read()
        off = 0
        while off + 8 <= len(buf):
            lf = int.from_bytes(buf[off:off + 8], "little")
            if lf == 0:
                break
            n = lf & ((1 << 56) - 1)
            pad = (lf >> 56) & 7 if lf >> 63 else 0
            rec = dict(pb_fields(buf[off + 8:off + 8 + n]))
            crc = rec[2]
            data = rec.get(3, b"")
            if rec[1] == 2:
                e = dict(pb_fields(data))
                last, term = e[3], e[2]
            elif rec[1] == 3:
                hs = dict(pb_fields(data))
                term, vote = hs.get(1, term), hs.get(2, vote)
            off += 8 + n + pad
        end = off
    out = bytearray()

    def frame(rtype, data):
        nonlocal crc
        crc = crc32c(crc, data)
        rec = pb_v(1, rtype) + pb_v(2, crc) + pb_b(3, data)
        pad = (8 - len(rec) % 8) % 8
        lf = len(rec) | ((0x80 | pad) << 56 if pad else 0)
        out.extend(lf.to_bytes(8, "little") + rec + bytes(pad))

    first = last + 1
    for i, data in enumerate(entries):
        frame(2, pb_v(1, 0) + pb_v(2, term) + pb_v(3, first + i) +
              pb_b(4, data))
    frame(3, pb_v(1, term) + pb_v(2, vote) + pb_v(3, first + len(entries) - 1))
    path = os.path.join(wal, names[-1])
    with open(path, "r+b") as fh:
        fh.seek(end)
        fh.write(out)
    return first


def db_records(path):
    """{(bucket, key): value} of a bbolt file, read by the project's reader
    (test_bbolt dump)."""
    tool = os.path.join(os.environ.get("CETCD_BUILD_DIR", os.path.join(
        REPO, "build")), "tests", "test_bbolt")
    if not os.path.exists(tool):
        pytest.skip("%s not built" % tool)
    cp = subprocess.run([tool, "dump", path], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, cp.stderr
    out = {}
    for line in cp.stdout.splitlines():
        parts = line.split(" ")
        if parts[0] == "bucket" or len(parts) < 2:
            continue
        out[(parts[0].split("/")[0], bytes.fromhex(parts[1]))] = \
            bytes.fromhex(parts[2]) if len(parts) > 2 else b""
    return out


def test_etcd35_log_records(source, make_server):
    """An etcd 3.4.23 member dir whose log ends with records as etcd 3.5
    writes them: UserAdd of bob with alice's bcrypt hash (hashedPassword),
    ChangePassword of alice to root's hash, AuthStatus, ClusterVersionSet,
    a Put: cetcd applies them, so bob logs in with alice's password and
    alice with root's."""
    etcd, c_at, want, _, _ = source
    srv = on_dir(make_server, etcd.data_dir, name="e1")
    member = os.path.join(srv.data_dir, "member")
    db = db_records(os.path.join(member, "snap", "db"))
    rev = int.from_bytes(db[("auth", b"authRevision")], "big")
    hashes = {u: dict(pb_fields(db[("authUsers", u)]))[2]
              for u in (b"alice", b"root")}

    def req(rid, auth_rev, num, inner):
        hdr = pb_v(1, rid) + pb_b(2, b"root") + pb_v(3, auth_rev)
        return pb_v(1, rid) + pb_b(100, hdr) + pb_b(num, inner)

    wal_append(member, [
        req(9001, rev, 1013, b""),                               # AuthStatus
        req(9002, 0, 1300, pb_b(1, b"3.5.0")),            # ClusterVersionSet
        req(9003, rev, 1100, pb_b(1, b"bob") +
            pb_b(4, hashes[b"alice"])),                         # UserAdd
        req(9004, rev + 1, 4, pb_b(1, b"from35") + pb_b(2, b"x")),   # Put
        req(9005, rev + 1, 1103, pb_b(1, b"alice") +
            pb_b(3, hashes[b"root"])),                   # ChangePassword
    ])
    srv.start()
    line = [ln for ln in open(srv.log_path)
            if "imported the etcd data dir" in ln][0]
    n = int(line.split(" requests after the index")[0].rsplit(" ", 1)[1])
    assert n >= 3, line  # UserAdd, Put, ChangePassword (the rest: empty)
    token(srv, "bob", "alicepw")
    token(srv, "alice", PW)
    with pytest.raises(grpc.RpcError) as e:
        token(srv, "alice", "alicepw")
    assert e.value.details() == \
        "etcdserver: authentication failed, invalid user ID or password"
    got = kvs(srv, token(srv))
    assert got[1] == want["rev"] + 1
    assert (b"from35", want["rev"] + 1, want["rev"] + 1, 1, b"x", 0) \
        in got[0]


def corrupt_cases(member):
    """(label, file, mutate) for a stopped member dir."""
    wal = os.path.join(member, "wal")
    wals = sorted(f for f in os.listdir(wal) if f.endswith(".wal"))
    db = os.path.join(member, "snap", "db")

    def trunc(n):
        return lambda p: os.truncate(p, n)

    def flip(off, bit=1):
        def f(p):
            with open(p, "r+b") as fh:
                fh.seek(off)
                b = fh.read(1)
                fh.seek(off)
                fh.write(bytes([b[0] ^ bit]))
        return f

    size = os.path.getsize(db)

    def flip_record(p):
        """A data byte of the record nearest offset 4000 (never a padding
        byte, which etcd does not check either)."""
        with open(p, "rb") as fh:
            w = fh.read(1 << 20)
        off = 0
        while True:
            ln = int.from_bytes(w[off:off + 8], "little")
            n = ln & ((1 << 56) - 1)
            pad = (ln >> 56) & 7 if ln >> 63 else 0
            if off + 8 + n + pad > 4000 or ln == 0:
                break
            off += 8 + n + pad
        assert ln != 0
        flip(off + 8 + n // 2)(p)

    def flip_roots(p):
        """The flags of the root bucket's page named by each meta page
        (u64 at byte 32 of pages 0 and 1): made an unknown page type."""
        with open(p, "rb") as fh:
            head = fh.read(8192)
        roots = {int.from_bytes(head[m + 32:m + 40], "little")
                 for m in (0, 4096)}
        for r in roots:
            flip(r * 4096 + 8, 0x20)(p)

    return [
        ("db truncated to 0", db, trunc(0)),
        ("db truncated mid meta", db, trunc(100)),
        ("db truncated to one page", db, trunc(4096)),
        ("db truncated by half", db, trunc(size // 2 // 4096 * 4096)),
        ("db meta 0 and 1 checksums", db,
         lambda p: (flip(16 + 60)(p), flip(4096 + 16 + 60)(p))),
        ("db root pages' flags", db, flip_roots),
        ("wal first record length", os.path.join(wal, wals[0]), flip(0)),
        ("wal record data in the middle", os.path.join(wal, wals[0]),
         flip_record),
        ("wal first file cut after the metadata",
         os.path.join(wal, wals[0]), trunc(64)),
    ]


def test_corrupt_inputs_refused_untouched(source, make_server):
    etcd = source[0]
    srv = make_server(start=False, name="e1")
    pristine = os.path.join(srv.root, "pristine")
    shutil.copytree(etcd.data_dir, pristine)
    clean = tree(pristine)
    member = os.path.join(srv.data_dir, "member")
    os.makedirs(member)  # for corrupt_cases' listing
    shutil.rmtree(srv.data_dir)
    shutil.copytree(pristine, srv.data_dir, copy_function=os.link)
    cases = corrupt_cases(member)
    wal_dir = os.path.join(member, "wal")
    for label, path, mutate in cases:
        rel = os.path.relpath(path, srv.data_dir)
        fresh(pristine, srv.data_dir, rel)
        mutate(path)
        before = rehash(clean, srv.data_dir, rel)
        p = subprocess.Popen(srv.args(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            pytest.fail("%s: not refused:\n%s" % (label, out[-3000:]))
        assert p.returncode == 1, (label, p.returncode, out[-2000:])
        # the file, or for the WAL read as one stream its dir, and where
        named = path if "db" in label else wal_dir
        assert named in out and "offset" in out, (label, out[-2000:])
        assert "etcd's files are unchanged" in out, label
        assert tree(srv.data_dir) == before, label
    assert tree(pristine) == clean


def test_random_db_flips_never_crash(source, make_server):
    """Flips anywhere in the db: refused naming the file, or imported (a
    flipped value byte is data bbolt does not checksum); never a crash,
    and a refusal leaves the dir as it was."""
    etcd = source[0]
    srv = make_server(start=False, name="e1")
    pristine = os.path.join(srv.root, "pristine")
    shutil.copytree(etcd.data_dir, pristine)
    clean = tree(pristine)
    rel = os.path.join("member", "snap", "db")
    db = os.path.join(srv.data_dir, rel)
    rnd = random.Random(int(os.environ.get("CETCD_IMPORT_FLIP_SEED", "7")))
    n = int(os.environ.get("CETCD_IMPORT_FLIPS", "20"))
    refused = 0
    for i in range(n):
        fresh(pristine, srv.data_dir, rel)
        size = os.path.getsize(db)
        with open(db, "r+b") as fh:
            for _ in range(4):
                off = rnd.randrange(size)
                fh.seek(off)
                b = fh.read(1)
                fh.seek(off)
                fh.write(bytes([b[0] ^ (1 << rnd.randrange(8))]))
        before = rehash(clean, srv.data_dir, rel)
        # an import that succeeds stops between its renames (exit 3):
        # no need to serve, only to see it never crashes
        env = dict(os.environ, CETCD_TEST_IMPORT_CRASH="1")
        cp = subprocess.run(srv.args(), capture_output=True, text=True,
                            timeout=60, env=env)
        out = cp.stdout + cp.stderr
        assert cp.returncode in (1, 3), (i, cp.returncode, out[-2000:])
        if cp.returncode == 3:
            continue
        assert db in out and "etcd's files are unchanged" in out, out[-2000:]
        assert tree(srv.data_dir) == before
        refused += 1
    assert tree(pristine) == clean
    print("%d of %d flipped dbs refused, the others imported" % (refused, n))


def test_snap_file_flip_and_crash_between_renames(source, make_server):
    _, c_at, want, _, snap = source
    srv = make_server(start=False, name="r1")
    offline("snapshot", "restore", snap, "--data-dir", srv.data_dir,
            "--name", "r1", "--initial-cluster", "r1=%s" % srv.peer_url,
            "--initial-advertise-peer-urls", srv.peer_url)
    sdir = os.path.join(srv.data_dir, "member", "snap")
    sfile = os.path.join(sdir, [f for f in os.listdir(sdir)
                                if f.endswith(".snap")][0])
    orig = open(sfile, "rb").read()
    with open(sfile, "r+b") as fh:
        fh.seek(len(orig) // 2)
        fh.write(bytes([orig[len(orig) // 2] ^ 0x10]))
    before = tree(srv.data_dir)
    cp = subprocess.run(srv.args(), capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 1
    assert sfile in cp.stdout + cp.stderr
    assert tree(srv.data_dir) == before
    with open(sfile, "wb") as fh:
        fh.write(orig)
    # a left-over of an import that died half-way is removed
    os.makedirs(os.path.join(srv.data_dir, "member.import", "db"))
    open(os.path.join(srv.data_dir, "member.import", "db", "junk"),
         "w").write("x")
    # a crash between the two renames: member.etcd, no member
    env = dict(os.environ, CETCD_TEST_IMPORT_CRASH="1")
    cp = subprocess.run(srv.args(), capture_output=True, text=True,
                        timeout=60, env=env)
    assert cp.returncode == 3, cp.stdout + cp.stderr
    assert sorted(os.listdir(srv.data_dir)) == ["member.etcd",
                                                "member.import"]
    srv.start()
    assert sorted(os.listdir(srv.data_dir)) == ["member", "member.etcd"]
    assert state(srv, c_at) == want


def test_layouts_refused_untouched(source, make_server):
    """--wal-dir with an etcd data dir (etcd's WAL must be member/wal), and
    a member.etcd left by an earlier import beside a new etcd member dir:
    refused naming why, nothing changed."""
    etcd = source[0]
    srv = make_server(start=False, name="e1")
    shutil.copytree(etcd.data_dir, srv.data_dir, copy_function=os.link)
    before = tree(srv.data_dir)
    wal_dir = os.path.join(srv.root, "walx")
    cp = subprocess.run(srv.args() + ["--wal-dir", wal_dir],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1
    assert "--wal-dir is not supported" in cp.stdout + cp.stderr
    assert tree(srv.data_dir) == before and not os.path.exists(wal_dir)
    os.makedirs(os.path.join(srv.data_dir, "member.etcd"))
    cp = subprocess.run(srv.args(), capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 1
    assert "member.etcd (where its files are kept) exists already" in (
        cp.stdout + cp.stderr)
    assert tree(srv.data_dir) == before
