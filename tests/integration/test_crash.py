"""Crash durability: kill -9 under concurrent write load, restart, verify.

Goal: a write that was acknowledged survives a kill -9 of the server, and
recovery invents nothing: after restart on the same data dir every
acknowledged put is present with its value, every acknowledged counter
increment is reflected, keys that were never acknowledged are either absent
or hold exactly the value that was sent, no other key exists, and the
revision bookkeeping is consistent with the writes that were applied.

Method: one single-member server; each round starts several writer threads
(each on its own gRPC channel) putting unique keys /crash/w<i>/<n> and
recording which puts were acknowledged, plus counter threads incrementing
/crash/counter with compare-and-swap Txns (compare mod_revision, put
value+1; the failure branch reads the current value) and recording the
acknowledged values.  After a random 0.4-1.2 s the server gets SIGKILL,
threads stop at their first error, the server restarts on the same data dir
and the whole keyspace is checked:

- acknowledged puts present with the right value; unacknowledged ones
  absent or with the value sent; nothing outside those keys;
- counter >= every acknowledged value, and at most (max acknowledged +
  number of increments in flight at the kill);
- every key has version 1 and create == mod (each unique key is written
  once); all mod_revisions are distinct; the store revision equals the
  highest mod_revision; and, as there are no deletes, store revision ==
  1 + number of unique keys + 1 (counter creation) + counter value, i.e.
  exactly one revision per applied write.

Three kill rounds by default (CETCD_CRASH_ROUNDS to change).
"""

import os
import random
import threading
import time

import grpc

from etcd3.etcdrpc import kv_pb2, rpc_pb2, rpc_pb2_grpc

ROUNDS = int(os.environ.get("CETCD_CRASH_ROUNDS", "3"))
WRITERS = 4
COUNTERS = 2
COUNTER = b"/crash/counter"


class Ledger:
    """What the clients know: acknowledged and attempted writes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}       # key -> value
        self.attempted = {}   # key -> value (acked or not)
        self.counter_acked = []
        self.counter_inflight_at_kill = 0


def writer(endpoint, wid, round_no, ledger, stop):
    ch = grpc.insecure_channel(endpoint)
    kv = rpc_pb2_grpc.KVStub(ch)
    n = 0
    try:
        while not stop.is_set():
            key = b"/crash/w%d/r%d/%06d" % (wid, round_no, n)
            value = b"value-%d-%d-%d" % (wid, round_no, n)
            n += 1
            with ledger.lock:
                ledger.attempted[key] = value
            try:
                kv.Put(rpc_pb2.PutRequest(key=key, value=value), timeout=5)
            except grpc.RpcError:
                return
            with ledger.lock:
                ledger.acked[key] = value
    finally:
        ch.close()


def counter(endpoint, ledger, stop):
    ch = grpc.insecure_channel(endpoint)
    kv = rpc_pb2_grpc.KVStub(ch)
    C = rpc_pb2.Compare
    try:
        r = kv.Range(rpc_pb2.RangeRequest(key=COUNTER), timeout=5)
        cur = r.kvs[0]
        while not stop.is_set():
            nxt = int(cur.value) + 1
            req = rpc_pb2.TxnRequest(
                compare=[C(key=COUNTER, target=C.MOD, result=C.EQUAL,
                           mod_revision=cur.mod_revision)],
                success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                    key=COUNTER, value=b"%d" % nxt))],
                failure=[rpc_pb2.RequestOp(
                    request_range=rpc_pb2.RangeRequest(key=COUNTER))])
            try:
                t = kv.Txn(req, timeout=5)
            except grpc.RpcError:
                with ledger.lock:
                    ledger.counter_inflight_at_kill += 1
                return
            if t.succeeded:
                with ledger.lock:
                    ledger.counter_acked.append(nxt)
                cur = kv_pb2.KeyValue(key=COUNTER, value=b"%d" % nxt,
                                      mod_revision=t.header.revision)
            else:
                cur = t.responses[0].response_range.kvs[0]
    except grpc.RpcError:
        return
    finally:
        ch.close()


def verify(server, ledger):
    kv = server.kv()
    r = kv.Range(rpc_pb2.RangeRequest(key=b"\x00", range_end=b"\x00"),
                 timeout=30)
    got = {x.key: x for x in r.kvs}
    assert COUNTER in got, "counter key lost"
    value = int(got[COUNTER].value)
    with ledger.lock:
        acked = dict(ledger.acked)
        attempted = dict(ledger.attempted)
        counter_acked = list(ledger.counter_acked)
        inflight = ledger.counter_inflight_at_kill
    for k, v in acked.items():
        assert k in got, "acknowledged put of %r lost" % k
        assert got[k].value == v, (k, got[k].value, v)
    for k, x in got.items():
        if k == COUNTER:
            continue
        assert k in attempted, "key %r was never written" % k
        assert x.value == attempted[k], (k, x.value, attempted[k])
        assert x.version == 1 and x.create_revision == x.mod_revision, x
    max_acked = max(counter_acked, default=0)
    assert value >= max_acked, (value, max_acked)
    assert value <= max_acked + inflight, (value, max_acked, inflight)
    mods = [x.mod_revision for x in r.kvs]
    assert len(set(mods)) == len(mods), "two keys share a mod_revision"
    assert r.header.revision == max(mods), (r.header.revision, max(mods))
    n_keys = len(got) - 1
    assert r.header.revision == 1 + n_keys + 1 + value, \
        (r.header.revision, n_keys, value)
    assert r.count == len(got)
    return n_keys, value


def test_kill9_under_load(server):
    ledger = Ledger()
    server.kv().Put(rpc_pb2.PutRequest(key=COUNTER, value=b"0"), timeout=10)
    rnd = random.Random(42)
    total_keys = 0
    for round_no in range(ROUNDS):
        stop = threading.Event()
        threads = [threading.Thread(target=writer, args=(
            server.endpoint, w, round_no, ledger, stop))
            for w in range(WRITERS)]
        threads += [threading.Thread(target=counter, args=(
            server.endpoint, ledger, stop)) for _ in range(COUNTERS)]
        for t in threads:
            t.start()
        time.sleep(rnd.uniform(0.4, 1.2))
        acked_before = len(ledger.acked)
        server.kill()
        stop.set()
        for t in threads:
            t.join(30)
            assert not t.is_alive()
        assert len(ledger.acked) >= acked_before
        server.start()
        n_keys, value = verify(server, ledger)
        assert n_keys >= total_keys
        total_keys = n_keys
        # the load must have made progress, or this test proves nothing
        assert len(ledger.acked) > 20 * (round_no + 1), len(ledger.acked)
        assert len(ledger.counter_acked) > 0
        # unacknowledged writes are allowed; count them for the log
        print("round %d: %d keys, counter %d, %d acked puts, %d attempted" %
              (round_no, n_keys, value, len(ledger.acked),
               len(ledger.attempted)))
        with ledger.lock:
            ledger.counter_inflight_at_kill = 0
            # the counter value is now durable; acked values below it stay
            # valid lower bounds
            ledger.counter_acked = [value]
    # a graceful restart changes nothing either
    server.restart()
    assert verify(server, ledger) == (total_keys, value)
