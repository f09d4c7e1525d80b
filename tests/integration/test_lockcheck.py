"""The lock checker (tests/common/lockcheck.py), then the Lock service
under contention.

Goal: the checker rejects hand-made bad histories (two overlapping
critical sections, a later holder with a smaller fencing token, a
duplicate token, a hold never given back, a hold or a waiter whose key
is still there after the leases had time to expire) and accepts a good
one (also with holds revoked or left to expire); then 8 clients taking and
releasing one lock 5 times each through v3lockpb.Lock (each with its own
lease) give a history the checker accepts, with every hold's token = its
key's create revision.

Method: hand-built Hold lists; then threads on one single-member server
(conftest `server`), each recording the monotonic time when Lock answered
and before it called Unlock, and holding the lock a few milliseconds.
"""

import threading
import time

from common import lockpb
from common.lockcheck import Hold, check
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc


def test_checker_rejects_bad_histories():
    good = [Hold("a", 5, 1.0, 2.0), Hold("b", 7, 2.5, 3.0),
            Hold("a", 9, 3.0, 3.5)]
    assert check(good) == []
    overlap = [Hold("a", 5, 1.0, 2.0), Hold("b", 7, 1.5, 3.0)]
    v = check(overlap)
    assert len(v) == 1 and v[0].startswith("overlap")
    order = [Hold("a", 9, 1.0, 2.0), Hold("b", 7, 2.5, 3.0)]
    v = check(order)
    assert len(v) == 1 and v[0].startswith("token order")
    dup = [Hold("a", 5, 1.0, 2.0), Hold("b", 5, 2.5, 3.0)]
    assert any(x.startswith("duplicate token") for x in check(dup))
    ended = [Hold("a", 5, 1.0, 2.0, "revoke"), Hold("b", 7, 2.5, 3.0,
                                                     "expire")]
    assert check(ended) == []
    kept = [Hold("a", 5, 1.0, 2.0), Hold("b", 7, 2.5, 3.0, None)]
    v = check(kept)
    assert len(v) == 1 and v[0].startswith("not released"), v
    v = check(ended, remaining=[7])
    assert len(v) == 1 and v[0].startswith("still held"), v
    v = check(good, remaining=[8])
    assert len(v) == 1 and v[0].startswith("leftover key"), v


def test_contended_lock_history(server):
    ls = rpc_pb2_grpc.LeaseStub(server.channel())
    stub = lockpb.LockStub(server.channel())
    history, errors = [], []
    mu = threading.Lock()

    def client(name):
        lid = ls.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=60),
                            timeout=10).ID
        try:
            for _ in range(5):
                r = stub.Lock(lockpb.LockRequest(name=b"fence", lease=lid),
                              timeout=60)
                t0 = time.monotonic()
                kv = server.kv().Range(rpc_pb2.RangeRequest(key=r.key),
                                       timeout=10).kvs[0]
                time.sleep(0.005)
                t1 = time.monotonic()
                stub.Unlock(lockpb.UnlockRequest(key=r.key), timeout=10)
                with mu:
                    history.append(Hold(name, kv.create_revision, t0, t1))
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    ts = [threading.Thread(target=client, args=("c%d" % i,))
          for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert errors == []
    assert len(history) == 40
    assert check(history) == []
