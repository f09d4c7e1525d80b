"""A compaction deletes the history it covers without a later write.

Goal: after Compact(physical=true) returns, the compacted history is gone
from the store (etcd's documented meaning of physical: "the RPC will wait
until the compaction is physically applied to the local database"), and a
non-physical compaction finishes on its own on an idle member.  Seen
through Status.dbSizeInUse (the store's pages in use; etcd: bbolt's size
minus its free pages), which falls to a small part of what the history
took.  cetcd once answered a physical compaction on a lone member before
deleting anything (the compaction was applied speculatively, during its
WAL fsync, where nothing may be deleted), and a compaction left pending
went on only with the next write: a defragmentation straight after copied
the whole history.  Also run against etcd 3.4.23 with
CETCD_TEST_AGAINST_ETCD=1 (passes).
"""

import json
import time

from etcd3.etcdrpc import rpc_pb2 as pb

VALUE = b"v" * 1000


def fill(srv, prefix, versions=1500, keys=10):
    kv = srv.kv()
    rev = 0
    for i in range(versions):
        rev = kv.Put(pb.PutRequest(key=b"%s%d" % (prefix, i % keys),
                                   value=VALUE), timeout=10).header.revision
    return rev


def in_use(srv):
    """Status.dbSizeInUse, from etcdctl's JSON (the Python stubs predate
    the field)."""
    st = json.loads(srv.ctl("endpoint", "status", "-w", "json").out)[0]
    return st["Status"]["dbSizeInUse"]


def test_physical_compaction_done_when_answered(server):
    rev = fill(server, b"/p/")
    before = in_use(server)
    assert before > 1_000_000, before  # 1500 versions of 1 KB
    server.kv().Compact(pb.CompactionRequest(revision=rev, physical=True),
                        timeout=30)
    after = in_use(server)
    assert after < before / 2, (
        "a physical compaction returned with the history still in the "
        "store: %d bytes in use before, %d after" % (before, after))


def test_compaction_finishes_without_writes(server):
    rev = fill(server, b"/n/")
    before = in_use(server)
    server.kv().Compact(pb.CompactionRequest(revision=rev), timeout=30)
    deadline = time.time() + 20
    after = in_use(server)
    while after >= before / 2 and time.time() < deadline:
        time.sleep(0.1)
        after = in_use(server)
    assert after < before / 2, (
        "a compaction on an idle member did not finish: %d bytes in use "
        "before, %d 20 s after" % (before, after))
