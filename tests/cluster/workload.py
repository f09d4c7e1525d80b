"""Client workloads and a nemesis for the fault tests.

Goal: generate load against a Cluster while faults run, and record exactly
what each client saw: which writes were acknowledged (for the durability
checks) and a full operation history with invoke/complete times
(for lincheck.py).

Method: each client is a thread with its own gRPC channels, bound to one
member and moving to the next member after an error (as a real client with
several endpoints would).  Every RPC has a deadline.  A write that ends in
any error (deadline, unavailable, "etcdserver: request timed out", "leader
changed", ...) is recorded as indeterminate: it may or may not have taken
effect.  A read that fails had no effect and is recorded as indeterminate
too (the checker drops it).  Times come from time.monotonic(), which all
threads share.
"""

import random
import threading
import time

import grpc

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 500)]


class Client:
    """A KV client over the cluster's members with per-member channels."""

    def __init__(self, cluster, first, timeout_s):
        self.cluster = cluster
        self.idx = first % len(cluster.members)
        self.timeout_s = timeout_s
        self._stubs = {}

    @property
    def member(self):
        return self.cluster.members[self.idx]

    def stub(self):
        m = self.member
        if m.name not in self._stubs:
            ch = grpc.insecure_channel(m.endpoint, options=CHANNEL_OPTIONS)
            self._stubs[m.name] = (ch, rpc_pb2_grpc.KVStub(ch))
        return self._stubs[m.name][1]

    def next_member(self):
        self.idx = (self.idx + 1) % len(self.cluster.members)

    def close(self):
        for ch, _ in self._stubs.values():
            ch.close()

    # -- the three operations of the lincheck model ---------------------------
    def get(self, key, serializable=False):
        resp = self.stub().Range(rpc_pb2.RangeRequest(
            key=key.encode(), serializable=serializable),
            timeout=self.timeout_s)
        return resp.kvs[0].value.decode() if resp.kvs else None

    def put(self, key, value):
        self.stub().Put(rpc_pb2.PutRequest(key=key.encode(),
                                           value=value.encode()),
                        timeout=self.timeout_s)
        return "ok"

    def cas(self, key, expected, new):
        """etcd Txn: if value(key) == expected (version(key) == 0 when
        expected is None) then put(key, new) else range(key)."""
        k = key.encode()
        if expected is None:
            cmp = rpc_pb2.Compare(key=k, target=rpc_pb2.Compare.VERSION,
                                  result=rpc_pb2.Compare.EQUAL, version=0)
        else:
            cmp = rpc_pb2.Compare(key=k, target=rpc_pb2.Compare.VALUE,
                                  result=rpc_pb2.Compare.EQUAL,
                                  value=expected.encode())
        resp = self.stub().Txn(rpc_pb2.TxnRequest(
            compare=[cmp],
            success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                key=k, value=new.encode()))],
            failure=[rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(
                key=k))]), timeout=self.timeout_s)
        if resp.succeeded:
            return (True, None)
        kvs = resp.responses[0].response_range.kvs
        return (False, kvs[0].value.decode() if kvs else None)


class _Threads:
    """n daemon threads, each running self._run(i) for its i in 0..n-1
    until stop(), with a lock for what they record."""

    def __init__(self, n, timeout_s):
        self.timeout_s = timeout_s     # one request's deadline
        self._n = n
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []

    def start(self):
        for i in range(self._n):
            t = threading.Thread(target=self._run, args=(i,), daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self):
        """Tell the threads to stop and wait for them (a request in flight
        ends within timeout_s)."""
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout_s + 10)

    # `with` runs the threads for the block.
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class LinWorkload(_Threads):
    """Clients doing get / put / cas on a few keys, recording a history.

    Values are unique ("c<client>-<seq>"), so a read names the write it saw.
    serializable_reads=True makes the gets serializable (served from the
    member's local state, which etcd documents as possibly stale): a
    negative control that must produce non-linearizable histories.
    The first `readers` clients only read (one per member when readers is
    the cluster size), so some client keeps reading from whichever member
    is cut off.
    """

    def __init__(self, cluster, clients=5, keys=("k0", "k1", "k2"),
                 timeout_s=1.5, think_s=0.01, seed=0,
                 serializable_reads=False, readers=0):
        super().__init__(clients, timeout_s)
        self.cluster = cluster
        self.keys = list(keys)
        self.think_s = think_s
        self.seed = seed
        self.serializable_reads = serializable_reads
        self.readers = readers
        self.history = []
        self.errors = {}

    def _record(self, op):
        with self._lock:
            self.history.append(op)

    def _run(self, c):
        rng = random.Random(self.seed * 1000 + c)
        client = Client(self.cluster, c, self.timeout_s)
        known = {k: None for k in self.keys}
        seq = 0
        try:
            while not self._stop.is_set():
                seq += 1
                key = rng.choice(self.keys)
                r = 0.0 if c < self.readers else rng.random()
                if r < 0.5:
                    kind, args = "get", None
                elif r < 0.75:
                    kind, args = "put", "c%d-%d" % (c, seq)
                else:
                    exp = known[key] if rng.random() < 0.8 else None
                    kind, args = "cas", (exp, "c%d-%d" % (c, seq))
                op = dict(client=c, op=kind, key=key, args=args,
                          member=client.member.name, invoke=time.monotonic(),
                          complete=None, result=None, error=None)
                try:
                    if kind == "get":
                        res = client.get(key, self.serializable_reads)
                        known[key] = res
                    elif kind == "put":
                        res = client.put(key, args)
                        known[key] = args
                    else:
                        res = client.cas(key, *args)
                        known[key] = args[1] if res[0] else res[1]
                    op["complete"] = time.monotonic()
                    op["result"] = res
                except grpc.RpcError as e:
                    op["error"] = "%s: %s" % (e.code().name, e.details())
                    with self._lock:
                        name = e.code().name
                        self.errors[name] = self.errors.get(name, 0) + 1
                    client.next_member()
                    self._stop.wait(0.1)
                self._record(op)
                self._stop.wait(rng.random() * 2 * self.think_s)
        finally:
            client.close()

    def final_reads(self):
        """One linearizable read per key after the faults, appended to the
        history: the final state must be explainable too."""
        client = Client(self.cluster, 0, 5.0)
        try:
            for key in self.keys:
                for _ in range(len(self.cluster.members)):
                    op = dict(client="final", op="get", key=key, args=None,
                              member=client.member.name,
                              invoke=time.monotonic(), complete=None,
                              result=None, error=None)
                    try:
                        op["result"] = client.get(key)
                        op["complete"] = time.monotonic()
                        self._record(op)
                        break
                    except grpc.RpcError:
                        client.next_member()
        finally:
            client.close()

    def summary(self):
        h = self.history
        det = [o for o in h if o["complete"] is not None]
        return {"ops": len(h), "determinate": len(det),
                "indeterminate": len(h) - len(det),
                "gets": sum(o["op"] == "get" for o in det),
                "puts": sum(o["op"] == "put" for o in det),
                "cas_ok": sum(o["op"] == "cas" and o["result"][0]
                              for o in det),
                "cas_failed": sum(o["op"] == "cas" and not o["result"][0]
                                  for o in det),
                "errors": dict(self.errors)}


class AckedWriters(_Threads):
    """Writers of unique keys that remember which writes were acknowledged.

    Each writer puts "<prefix><writer>/<seq>" = "v<seq>" through one member
    at a time (moving on after an error).  acked: key -> value for every
    Put that returned OK; unsure: keys whose Put failed (they may or may not
    exist afterwards, but nothing else may).
    """

    def __init__(self, cluster, writers=3, prefix="ack/", timeout_s=2.0):
        super().__init__(writers, timeout_s)
        self.cluster = cluster
        self.prefix = prefix
        self.acked = {}
        self.unsure = set()

    def count(self):
        with self._lock:
            return len(self.acked)

    def wait_more(self, n, timeout_s):
        """Wait until n more writes than now are acknowledged; returns the
        seconds it took (raises on timeout)."""
        base = self.count()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.count() >= base + n:
                return time.monotonic() - t0
            time.sleep(0.02)
        raise AssertionError("fewer than %d writes acknowledged in %.0fs" % (
            n, timeout_s))

    def _run(self, w):
        client = Client(self.cluster, w, self.timeout_s)
        seq = 0
        try:
            while not self._stop.is_set():
                seq += 1
                key = "%s%d/%06d" % (self.prefix, w, seq)
                val = "v%d" % seq
                try:
                    client.put(key, val)
                    with self._lock:
                        self.acked[key] = val
                except grpc.RpcError:
                    with self._lock:
                        self.unsure.add(key)
                    client.next_member()
                    self._stop.wait(0.05)
                self._stop.wait(0.005)
        finally:
            client.close()

    def check_content(self, content):
        """Assert content (from Cluster.contents) holds every acknowledged
        write and nothing that was never attempted."""
        present = {k.decode(): v.decode() for (k, v, _c, _m, _v) in content
                   if k.decode().startswith(self.prefix)}
        lost = {k: v for k, v in self.acked.items() if present.get(k) != v}
        assert not lost, "%d acknowledged writes lost, e.g. %r" % (
            len(lost), sorted(lost.items())[:5])
        extra = set(present) - set(self.acked) - self.unsure
        assert not extra, "keys nobody wrote: %r" % sorted(extra)[:5]
        return len(present)


class Nemesis:
    """Runs faults in a thread: kill -9 + restart, SIGSTOP/SIGCONT,
    partitions (leader isolated or a random minority), link delays.

    Every fault is undone before the next one starts, and stop() undoes the
    current one, so the cluster is whole again afterwards.  log holds
    (time, description) of each step.
    """

    def __init__(self, cluster, seed=0, fault_s=2.0, calm_s=1.0,
                 kinds=("kill", "pause", "partition", "kill-leader",
                        "pause-leader", "isolate-leader", "delay")):
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.fault_s = fault_s
        self.calm_s = calm_s
        self.kinds = list(kinds)
        self.log = []
        self.error = None
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise self.error

    def _note(self, what):
        self.log.append((time.monotonic(), what))

    def _target(self, leader_wanted):
        c = self.cluster
        if leader_wanted:
            lm = c.leader()
            if lm is not None:
                return lm
        return self.rng.choice(c.members)

    def _run(self):
        try:
            i = 0
            while not self._stop.is_set():
                kind = self.kinds[i % len(self.kinds)]
                i += 1
                self._one(kind)
                self._stop.wait(self.calm_s)
        except Exception as e:  # reported by stop()
            self.error = e

    def _one(self, kind):
        c = self.cluster
        m = self._target(kind.endswith("leader"))
        if kind in ("kill", "kill-leader"):
            self._note("kill -9 %s" % m.name)
            c.kill(m)
            self._stop.wait(self.fault_s)
            self._note("restart %s" % m.name)
            c.restart(m, wait=False)
        elif kind in ("pause", "pause-leader"):
            self._note("SIGSTOP %s" % m.name)
            c.pause(m)
            self._stop.wait(self.fault_s)
            self._note("SIGCONT %s" % m.name)
            c.resume(m)
        elif kind in ("partition", "isolate-leader"):
            if kind == "isolate-leader":
                minority = [m]
            else:
                minority = self.rng.sample(
                    c.members, len(c.members) - c.quorum)
            rest = [x for x in c.members if x not in minority]
            self._note("partition %s | %s" % ([x.name for x in minority],
                                               [x.name for x in rest]))
            c.partition(minority, rest)
            self._stop.wait(self.fault_s)
            self._note("heal")
            c.heal()
        elif kind == "delay":
            self._note("delay 50ms on every link of %s" % m.name)
            for x in c.members:
                if x is not m:
                    c.delay(m, x, 0.05)
            self._stop.wait(self.fault_s)
            self._note("delays cleared")
            c.proxy.clear_delays()
        else:
            raise ValueError(kind)
