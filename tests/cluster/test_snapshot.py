"""Raft snapshots of the store: a follower too far behind catches up by
receiving the leader's database, and snapshots bound the WAL.

Goal (issue 4, "a follower restarted after the leader has truncated its
log catches up by snapshot"): (a) with --snapshot-count 100, a follower is
stopped while several thousand keys are written, so the leader's log is
truncated far past the follower's last index (raft keeps 5000 entries
behind a snapshot, as etcd's snapshot-catchup-entries); restarted, the
follower catches up through a snapshot (its log says so), every member
converges to the same revision and content, and replication continues
afterwards; (b) the same, but the follower is killed with -9 while it is
catching up and restarted: it still converges; (c) with --snapshot-count
1000 and 20k writes, WAL segments are released behind snapshots: the WAL
directory stays bounded and its first segments are gone (cetcd only: it
uses the test knob CETCD_TEST_WAL_SEGMENT_BYTES for 1 MB segments);
(d) a member (learner or voter) added after the leader's newest copy and
before a lagging follower receives it: the follower installs the
membership as of the copy (cetcd logs it), every member then agrees on the
member list and content, the new member joins, and the follower restarts
cleanly; (e) a voter added before the copies a lagging follower installs:
the follower connects to it (led by the follower, the new member gets
entries and heartbeats: content converges and the term does not move).

Method: clusters from cluster.py (peer links through the test's proxy),
writes over gRPC from a few threads, convergence checked with full
serializable ranges on every member.  Runs against real etcd 3.4.23 with
CETCD_TEST_AGAINST_ETCD=1 (except (c)).
"""

import os
import re
import threading
import time

import pytest

from etcd3.etcdrpc import rpc_pb2

from cluster import against_etcd
from common.servers import LONG, LONG_REASON

pytestmark = pytest.mark.cluster

# Raft keeps this many entries behind a snapshot (cetcd and etcd alike).
LOG_KEEP = 5000

# What the member that installed a snapshot logs: cetcd, etcd 3.4.
INSTALLED = re.compile(r"installed snapshot of the store|"
                       r"finished applying incoming snapshot|"
                       r"received and saved database snapshot")


def write_keys(m, prefix, n, threads=6, value_bytes=20, distinct=None):
    """Puts n keys prefix/<i % distinct> through member m from a few
    threads."""
    errors = []
    value = b"v" * value_bytes

    def worker(k):
        kv = m.kv()
        for i in range(k, n, threads):
            key = ("%s/%06d" % (prefix, i % (distinct or n))).encode()
            for attempt in range(5):
                try:
                    kv.Put(rpc_pb2.PutRequest(key=key, value=value),
                           timeout=10.0)
                    break
                except Exception as e:  # grpc.RpcError
                    if attempt == 4:
                        errors.append(e)
                    time.sleep(0.2)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]


def leader_and_follower(c):
    lead, _ = c.wait_leader()
    return lead, next(m for m in c.members if m is not lead)


def log_text(m):
    with open(m.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def start_log_offset(m):
    return os.path.getsize(m.log_path) if os.path.exists(m.log_path) else 0


def converge_and_check(c, min_keys):
    rev, content = c.wait_converged(timeout=60.0)
    assert len(content) >= min_keys
    return rev, content


def restart_and_converge(c, f, min_keys):
    """Restarts the killed member f and waits for the cluster to converge
    on at least min_keys keys; returns the revision, the content and what
    f logged since the restart."""
    mark = start_log_offset(f)
    c.restart(f, timeout=60.0)
    rev, content = converge_and_check(c, min_keys)
    return rev, content, log_text(f)[mark:]


def snap_dir_copies(m):
    """The store copies in m's snap dir: received (<index>.snap.db) and
    exported (export-<index>.db) ones; and the dir's listing."""
    names = os.listdir(os.path.join(m.data_dir, "member", "snap"))
    return [s for s in names if s.endswith(".db")], names


def wait_snap_dir_settled(m, timeout=40.0):
    """m's snap dir once it holds no store copy (an export is removed 30 s
    after its last use, a received one once the store is pinned)."""
    deadline = time.monotonic() + timeout
    while True:
        copies, names = snap_dir_copies(m)
        if not copies:
            return names
        assert time.monotonic() < deadline, (m.name, names)
        time.sleep(0.5)


def test_lagging_follower_catches_up_by_snapshot(make_cluster):
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, f = leader_and_follower(c)
    write_keys(lead, "before", 200)
    converge_and_check(c, 200)
    c.kill(f)
    n = LOG_KEEP + 1500
    write_keys(lead, "while-down", n)
    rev, content, text = restart_and_converge(c, f, 200 + n)
    assert INSTALLED.search(text), \
        "the follower did not log a snapshot install"
    # It keeps replicating after the install, through any member.
    write_keys(f, "after", 300)
    rev2, content2 = converge_and_check(c, 200 + n + 300)
    assert rev2 > rev
    assert any(k.startswith(b"after/") for k, *_ in content2)
    if not against_etcd():
        # The received copy became the store, which is pinned: no copy of
        # the store is left beside it (cetcd kept --max-snapshots).
        snaps = wait_snap_dir_settled(f)
        assert any(s.endswith(".pin") for s in snaps), snaps


def test_follower_killed_during_catch_up_still_converges(make_cluster):
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, f = leader_and_follower(c)
    write_keys(lead, "a", 100)
    c.kill(f)
    write_keys(lead, "b", LOG_KEEP + 1500, value_bytes=200)
    # Kill it at a few points of its catch-up: right away, and a little
    # later (while the snapshot is sent, staged or installed).
    for delay in (0.3, 1.0, 2.0):
        c.spawn(f)
        time.sleep(delay)
        c.kill(f)
    c.restart(f, timeout=60.0)
    converge_and_check(c, 100 + LOG_KEEP + 1500)
    write_keys(lead, "c", 100)
    converge_and_check(c, 100 + LOG_KEEP + 1500 + 100)
    # And the restarted follower restarts again cleanly from its snapshot.
    c.restart(f, timeout=60.0)
    converge_and_check(c, 100 + LOG_KEEP + 1500 + 100)


@pytest.mark.skipif(against_etcd(), reason="uses cetcd's WAL segment knob")
def test_wal_released_behind_snapshots(make_cluster, monkeypatch):
    monkeypatch.setenv("CETCD_TEST_WAL_SEGMENT_BYTES", str(1 << 20))
    c = make_cluster(3, extra_args=["--snapshot-count", "1000"])
    lead, _ = c.wait_leader()
    # 20k writes (each a raft entry) over 2000 keys: a full range of the
    # content stays under the client's 4 MB message limit.
    write_keys(lead, "k", 20000, threads=8, value_bytes=500, distinct=2000)
    converge_and_check(c, 2000)
    time.sleep(1.0)  # the last copies and releases
    for m in c.members:
        wal = os.path.join(m.data_dir, "member", "wal")
        segs = sorted(s for s in os.listdir(wal) if s.endswith(".wal"))
        first_seq = int(segs[0].split("-")[0], 16)
        last_seq = int(segs[-1].split("-")[0], 16)
        # ~12 MB of entries went through 1 MB segments; what is kept is
        # 5000 entries behind the newest snapshot, up to 1000 more per
        # snapshot period and the segment being written: about 4-6 MB.
        assert last_seq >= 9, (m.name, segs)
        assert len(segs) <= 8, (m.name, segs)
        assert first_seq >= 3, (m.name, segs)
        # Snapshots are pins of the live store (a few KB), not copies: the
        # leader may still hold the one export it sent, nobody more.
        snaps = wait_snap_dir_settled(m)
        assert len([s for s in snaps if s.endswith(".pin")]) == 1, \
            (m.name, snaps)
    # Restart one member: it replays from its snapshot marker.
    c.restart(c.members[0], timeout=60.0)
    converge_and_check(c, 2000)


@pytest.mark.skipif(against_etcd(), reason="cetcd's boot guard")
def test_store_rebuilt_from_snapshot_after_reboot_crash(make_cluster,
                                                        monkeypatch):
    """A member killed, then started as if after a machine reboot (its
    store's state file names another boot and says dirty): the store is
    set aside and rebuilt from the newest snap file plus the WAL after it,
    although the WAL no longer starts at index 1."""
    monkeypatch.setenv("CETCD_TEST_WAL_SEGMENT_BYTES", str(256 << 10))
    c = make_cluster(3, extra_args=["--snapshot-count", "100"])
    lead, f = leader_and_follower(c)
    write_keys(lead, "r", LOG_KEEP + 2000, value_bytes=200)
    rev, content = converge_and_check(c, LOG_KEEP + 2000)
    c.kill(f)
    wal = os.path.join(f.data_dir, "member", "wal")
    assert not sorted(os.listdir(wal))[0].startswith("0000000000000000-"), \
        "the WAL still starts at index 1: nothing tests the snapshot path"
    with open(os.path.join(f.data_dir, "member", "db.state"), "w") as st:
        st.write("another-boot-id dirty\n")
    mark = start_log_offset(f)
    c.restart(f, timeout=60.0)
    assert "rebuilding the store from" in log_text(f)[mark:]
    write_keys(lead, "after", 50)
    converge_and_check(c, LOG_KEEP + 2000 + 50)


# --- a member added between a snapshot copy and its sending -----------------

# cetcd's install line names the membership the follower installed.
INSTALLED_CONF = re.compile(
    r"installed snapshot of the store at index (\d+) \(term \d+, "
    r"voters=\(([0-9a-f,]*)\) learners=\(([0-9a-f,]*)\)\)")

COPY_EVERY = 1000


def newest_copy(m):
    """Index of m's newest snapshot: cetcd pins the store at it and names
    the pin <index hex>.pin; or 0."""
    d = os.path.join(m.data_dir, "member", "snap")
    names = [s for s in os.listdir(d) if re.fullmatch(r"[0-9a-f]{16}\.pin",
                                                     s)]
    return max((int(s[:16], 16) for s in names), default=0)


def far_from_next_copy(c, lead):
    """cetcd: writes until the leader's next periodic copy is at least
    COPY_EVERY / 2 entries away, so that the member change that follows is
    after the leader's newest copy and no newer copy is made before the
    lagging follower asks for one."""
    for _ in range(5):
        since = c.status(lead, timeout=5).raftIndex - newest_copy(lead)
        if since <= COPY_EVERY // 2:
            return
        old = newest_copy(lead)
        write_keys(lead, "pad-%d" % old, COPY_EVERY - since + 50)
        deadline = time.monotonic() + 20
        while newest_copy(lead) <= old and time.monotonic() < deadline:
            time.sleep(0.1)
    raise AssertionError("the leader's copies do not follow its index")


def member_set(m):
    from test_membership import member_list
    return sorted((x["ID"], bool(x.get("isLearner"))) for x in
                  member_list(m)["members"])


def wait_member_lists_agree(c, among=None, timeout=30.0):
    """The members every member of among (default: all) lists, once they
    agree.  A learner is not asked: it serves no MemberList."""
    deadline = time.monotonic() + timeout
    while True:
        sets = {m.name: member_set(m) for m in among or c.members}
        if len({tuple(s) for s in sets.values()}) == 1:
            return next(iter(sets.values()))
        if time.monotonic() > deadline:
            raise AssertionError("member lists differ: %r" % sets)
        time.sleep(0.3)


def follower_down(make_cluster):
    """A 3-member cluster copying its store every COPY_EVERY entries, 100
    keys written and converged, then a follower killed; returns the
    cluster, its leader and the follower."""
    c = make_cluster(3, extra_args=["--snapshot-count", str(COPY_EVERY),
                                    "--strict-reconfig-check=false"])
    lead, f = leader_and_follower(c)
    write_keys(lead, "a", 100)
    converge_and_check(c, 100)
    c.kill(f)
    return c, lead, f


@pytest.mark.parametrize("learner", [
    # the learner's path is the voter's but for its promotion (CI: voter)
    pytest.param(True, marks=pytest.mark.skipif(not LONG, reason=LONG_REASON)),
    False], ids=["learner", "voter"])
def test_member_added_after_copy_reaches_lagging_follower(make_cluster,
                                                          learner):
    """A member is added after the leader's newest snapshot copy (at index
    C) and before a lagging follower gets that copy.  The follower must
    install the membership as of C (the new member comes with the log
    entry after C); then every member agrees on the members and the
    content, the new member joins (by snapshot as well), and the follower
    restarts cleanly."""
    from test_membership import new_member, reconfig, spawn_joining, \
        wait_serving
    c, lead, f = follower_down(make_cluster)
    write_keys(lead, "b", LOG_KEEP + 1500)
    if not against_etcd():
        far_from_next_copy(c, lead)

    m4 = new_member(c, "m4")
    args = ["member", "add", "m4", "--peer-urls", m4.advertised_peer_url]
    if learner:
        args.append("--learner")
    out = reconfig([lead], *args).stdout
    m4.id = int(re.search(r"Member\s+([0-9a-f]+) added", out).group(1), 16)
    env = dict(re.findall(r'^(ETCD_\w+)="(.*)"$', out, re.M))
    added_at = c.status(lead, timeout=5).raftIndex
    copy = 0
    if not against_etcd():
        copy = newest_copy(lead)
        assert 0 < copy < added_at, (copy, added_at)

    _, _, text = restart_and_converge(c, f, 100 + LOG_KEEP + 1500)
    assert INSTALLED.search(text), "the follower did not log an install"
    if not against_etcd():
        got = INSTALLED_CONF.search(text)
        assert got, text[-2000:]
        index = int(got.group(1))
        voters = {int(x, 16) for x in got.group(2).split(",") if x}
        learners = {int(x, 16) for x in got.group(3).split(",") if x}
        # The copy a leader sends is made when the follower needs it
        # (after the add, mostly); whatever its index, it carries the
        # membership as of that index, never the one at send time.
        assert index > 0, (index, copy, added_at)
        first = {m.id for m in c.members}
        before = (first, set())
        after = (first, {m4.id}) if learner else (first | {m4.id}, set())
        # added_at was read just after the add committed: a copy below it
        # may be from either side of the add entry, one above is after.
        assert (voters, learners) in ([before, after] if index < added_at
                                      else [after]), (index, voters, learners)
    members = wait_member_lists_agree(c)
    assert (m4.id, learner) in members, members
    assert len(members) == 4, members

    # The new member joins; the leader's log is truncated, so it too
    # starts from a snapshot (one that predates its own addition).
    voters = list(c.members) + ([] if learner else [m4])
    c.members.append(m4)
    spawn_joining(c, m4, env["ETCD_INITIAL_CLUSTER"])
    wait_serving(m4, timeout=60.0)
    converge_and_check(c, 100 + LOG_KEEP + 1500)
    assert wait_member_lists_agree(c, voters) == members

    # The follower restarts cleanly from what it installed, and all keep
    # replicating.
    c.restart(f, timeout=60.0)
    write_keys(f, "c", 100)
    converge_and_check(c, 100 + LOG_KEEP + 1500 + 100)
    assert wait_member_lists_agree(c, voters) == members


def restart_led_by_known(c, f, unknown, min_keys):
    """restart_and_converge for a follower f whose store predates the
    member `unknown`.  While f is behind it cannot follow a leader it does
    not know (etcd's cannot either: it refuses the streams of a sender
    outside its membership and has no address to answer it), so when a
    load spike elects `unknown`, the leadership is moved back to a member
    f knows, as an operator would, until f has caught up."""
    from test_membership import ctl
    mark = start_log_offset(f)
    c.restart(f, wait=False)
    deadline = time.monotonic() + 60
    while True:
        lead, _ = c.wait_leader()
        if lead is unknown:
            known = next(m for m in c.members
                         if m not in (f, unknown) and m.running)
            ctl(lead.endpoint, "move-leader", "%x" % known.id, check=False)
        try:
            c.wait_ready(f, timeout=2.0)
            break
        except RuntimeError:
            if not f.running or time.monotonic() > deadline:
                raise
    rev, content = converge_and_check(c, min_keys)
    return rev, content, log_text(f)[mark:]


def test_member_added_before_copy_is_reached_after_install(make_cluster):
    """The converse: a voter is added (and started) while a follower is
    down, before the copies that follower then installs.  The follower
    learns the new member only from the snapshot (it never applies the
    change), so installing it must also connect it to that member: led by
    the follower, the new member gets its entries and heartbeats (else it
    would time out and campaign, and the term would move)."""
    from test_membership import add_and_start, ctl
    c, lead, f = follower_down(make_cluster)
    m4 = add_and_start(c, "m4")
    write_keys(lead, "b", LOG_KEEP + 1500)
    _, _, text = restart_led_by_known(c, f, m4, 100 + LOG_KEEP + 1500)
    assert INSTALLED.search(text), "the follower did not log an install"
    if not against_etcd():
        got = INSTALLED_CONF.search(text)
        assert got and ("%016x" % m4.id) in got.group(2), got
        # Its restart only knew the first three (its store predates m4).
        assert re.search(r"added peer %016x" % m4.id, text), text[-3000:]

    # Led by the follower (a transfer right after its restart may time
    # out while the others' streams to it come back: try again).
    deadline = time.monotonic() + 60
    while True:
        lead, _ = c.wait_leader()
        if lead is f:
            break
        assert time.monotonic() < deadline, "cannot move the leadership"
        ctl(lead.endpoint, "move-leader", "%x" % f.id, check=False)
    term = c.status(f, timeout=5).raftTerm
    write_keys(f, "c", 200)
    time.sleep(3 * c.election_ms / 1000.0)
    converge_and_check(c, 100 + LOG_KEEP + 1500 + 200)
    st = c.status(f, timeout=5)
    assert (st.leader, st.raftTerm) == (f.id, term), (st.leader, term)
