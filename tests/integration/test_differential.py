"""Differential test: the server under test against the real etcd 3.4.23.

Goal: for one seeded random sequence of KV operations, every response of the
server under test equals etcd's, field by field, or both fail with the same
gRPC status code and message.

Method: each seed starts two fresh single-member servers, the one under test
(conftest.server_bin()) and /usr/bin/etcd, and sends both the same ops in
the same order over raw gRPC: Put (prev_kv, ignore_value, ignore_lease, a
lease that does not exist), Range (range_end "" / "\\0" / a real end,
revision in the past, compacted or future, limit, sort on every target and
order, min/max mod/create filters, count_only, keys_only, serializable),
DeleteRange (prev_kv), Txn (random compares on every target and result,
nested txns, and deliberate duplicate-key / too-many-ops / empty-op
errors), Compact (random past, compacted or future revisions, physical),
and plain error cases (empty key); and, from a random stream of their own
(the KV sequence of a seed is unchanged), Watch requests on one stream per
server (WatchGen: creates with every option, cancels, progress), each
watcher's history (control answers, then its events one by one) compared
at the end; and, from a third random stream, lease ops (LeaseGen: grants
with client- and server-chosen ids, revokes, TimeToLive with keys, Leases,
puts and txns with leases, ignore_lease), server-chosen ids mapped to
names and remaining TTLs compared as "held" (0 < TTL <= granted).  Keys come from a small alphabet so ops
collide; some are longer than LMDB's key limit (494 bytes) and share a
long prefix.  Responses are compared after normalising:

- header.cluster_id, header.member_id and header.raft_term: they are
  derived from the peer URLs and the election history, which differ
  between the two processes;
- sort ties: etcd sorts with Go's unstable sort.Sort, so kvs whose sort
  target is equal (e.g. two keys with version 1) come out in an order that
  is deterministic for one implementation but not part of the contract.
  For a sort target other than KEY we compare the sequence of target
  values, and the set of keys within each tie group; when the limit cut a
  tie group (more=true), only that group's size is compared.  (Key order is
  a total order, so KEY sorts and unsorted ranges are compared as-is.)

On a mismatch the seed, the op index, the request and a line diff of the two
responses are printed.  Defaults: 6 seeds x 1500 ops (about 15 s against
etcd); raise them with CETCD_DIFF_SEEDS (a count, or a comma-separated list
of seeds) and CETCD_DIFF_OPS.  Against etcd itself (CETCD_TEST_AGAINST_ETCD=1) both sides
are etcd, which is how this file was validated.
"""

import difflib
import os
import queue
import random
import time

import grpc
import pytest
from google.protobuf import text_format

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
from conftest import ETCD_BIN, Server
from common.watchstream import WatchStream

OPS = int(os.environ.get("CETCD_DIFF_OPS", "1500"))


def _seeds():
    v = os.environ.get("CETCD_DIFF_SEEDS", "6")
    if "," in v:
        return [int(x) for x in v.split(",") if x]
    return list(range(1, int(v) + 1))


KEYS = [b"a", b"aa", b"ab", b"b", b"b\x00", b"ba", b"c", b"d", b"k1", b"k2",
        b"k3", b"kz", b"z", b"\xff", b"\xfe\xff", b"\x01"]
ENDS = [b"b", b"c", b"k", b"kz", b"l", b"z", b"\xff", b"\xff\xff", b"a"]
# Long keys: beyond LMDB's key limit (494 bytes) cetcd files a key under
# its first 486 bytes plus a hash (src/mvcc/mvcc_long.c); these straddle
# the limit, share those 486 bytes, interleave with short keys of the same
# prefix, and some range bounds are long keys too.
LP = b"k" * 486
LONG_KEYS = [LP + b"1", LP + b"k" * 8, LP + b"k" * 9, LP + b"k" * 8 + b"\x00",
             LP + b"\xff" * 30, LP + b"a" * 600, b"z" * 700]
KEYS += LONG_KEYS
ENDS += [LP + b"b", LP + b"k" * 9, b"z" * 600]
S = rpc_pb2.RangeRequest
C = rpc_pb2.Compare


class Gen:
    """Random KV requests; tracks the store revision and compaction point
    from the reference server's responses so revisions stay interesting."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.rev = 1
        self.compacted = 0

    def key(self):
        return self.r.choice(KEYS)

    def value(self):
        r = self.r
        if r.random() < 0.1:
            return b""
        return bytes(r.choice(b"abcxyz019") for _ in range(r.randint(1, 6)))

    def range_end(self, key):
        x = self.r.random()
        if x < 0.45:
            return b""
        if x < 0.6:
            return b"\x00"
        if x < 0.7:
            return key + b"\x00"
        if x < 0.8:  # prefix end
            k = key.rstrip(b"\xff")
            return k[:-1] + bytes([k[-1] + 1]) if k else b"\x00"
        return self.r.choice(ENDS)

    def past_rev(self):
        """A revision that is usually readable, sometimes compacted or in
        the future."""
        r = self.r
        x = r.random()
        if x < 0.75:
            return r.randint(max(self.compacted, 1), self.rev)
        if x < 0.85 and self.compacted > 1:
            return r.randint(1, self.compacted - 1)
        if x < 0.95:
            return self.rev + r.randint(1, 3)
        return r.choice([0, -1])

    def put(self):
        r = self.r
        kw = dict(key=self.key(), value=self.value())
        if r.random() < 0.3:
            kw["prev_kv"] = True
        x = r.random()
        if x < 0.07:
            kw["ignore_value"] = True
            if r.random() < 0.7:
                kw["value"] = b""
        elif x < 0.14:
            kw["ignore_lease"] = True
            if r.random() < 0.2:
                kw["lease"] = r.randint(1, 1000)
        elif x < 0.17:
            kw["lease"] = r.randint(1, 1 << 40)  # no leases exist: NotFound
        return rpc_pb2.PutRequest(**kw)

    def range(self, in_txn=False):
        r = self.r
        key = self.key() if r.random() < 0.9 else b"\x00"
        kw = dict(key=key, range_end=self.range_end(key))
        if key == b"\x00" and r.random() < 0.5:
            kw["range_end"] = b"\x00"
        if r.random() < 0.3:
            kw["limit"] = r.choice([0, 1, 1, 2, 3, 5, 100, -1])
        if r.random() < 0.3:
            kw["revision"] = self.past_rev()
        if r.random() < 0.35:
            kw["sort_order"] = r.choice([S.NONE, S.ASCEND, S.DESCEND])
            kw["sort_target"] = r.choice([S.KEY, S.VERSION, S.CREATE, S.MOD,
                                          S.VALUE])
        if not in_txn and r.random() < 0.2:
            kw["serializable"] = True
        if r.random() < 0.1:
            kw["keys_only"] = True
        if r.random() < 0.08:
            kw["count_only"] = True
        for f in ("min_mod_revision", "max_mod_revision",
                  "min_create_revision", "max_create_revision"):
            if r.random() < 0.06:
                kw[f] = r.randint(0, self.rev + 1)
        return rpc_pb2.RangeRequest(**kw)

    def delete(self):
        key = self.key()
        kw = dict(key=key, range_end=self.range_end(key))
        if self.r.random() < 0.2:  # keep deletes mostly narrow
            kw["range_end"] = b""
        if self.r.random() < 0.4:
            kw["prev_kv"] = True
        return rpc_pb2.DeleteRangeRequest(**kw)

    def compare(self):
        r = self.r
        key = self.key()
        kw = dict(key=key, result=r.choice([C.EQUAL, C.GREATER, C.LESS,
                                            C.NOT_EQUAL]))
        if r.random() < 0.15:
            kw["range_end"] = self.range_end(key)
        t = r.choice(["version", "create", "mod", "value", "lease"])
        if t == "version":
            kw.update(target=C.VERSION, version=r.randint(0, 4))
        elif t == "create":
            kw.update(target=C.CREATE,
                      create_revision=r.randint(0, self.rev + 1))
        elif t == "mod":
            kw.update(target=C.MOD, mod_revision=r.randint(0, self.rev + 1))
        elif t == "value":
            kw.update(target=C.VALUE, value=self.value())
        else:
            kw.update(target=C.LEASE, lease=r.choice([0, 0, 1]))
        return rpc_pb2.Compare(**kw)

    def request_op(self, depth):
        r = self.r
        x = r.random()
        if x < 0.35:
            return rpc_pb2.RequestOp(request_range=self.range(in_txn=True))
        if x < 0.7:
            p = self.put()
            p.ClearField("lease")  # keep most txns valid
            return rpc_pb2.RequestOp(request_put=p)
        if x < 0.9 or depth >= 2:
            return rpc_pb2.RequestOp(request_delete_range=self.delete())
        return rpc_pb2.RequestOp(request_txn=self.txn(depth + 1))

    @staticmethod
    def _walk(t):
        for op in list(t.success) + list(t.failure):
            yield op
            if op.HasField("request_txn"):
                yield from Gen._walk(op.request_txn)

    def _avoid_etcd_panic(self, t):
        """etcd 3.4 panics ("unexpected error during txn") when a ">= key"
        delete (range_end "\\0", which its duplicate check ignores) removes
        a key that a later ignore_value/ignore_lease put of the same txn
        needs; cetcd refuses such a txn (tests/integration/
        test_cetcd_limits.py).  Drop the ignore flags there so the reference
        survives; no randomness is drawn, so other seeds are unchanged."""
        ops = list(self._walk(t))
        if not any(o.HasField("request_delete_range") and
                   o.request_delete_range.range_end == b"\x00" for o in ops):
            return
        for o in ops:
            if o.HasField("request_put"):
                o.request_put.ignore_value = False
                o.request_put.ignore_lease = False

    def txn(self, depth=0):
        r = self.r
        n = lambda: r.choice([0, 1, 1, 2, 2, 3, 4])  # noqa: E731
        t = rpc_pb2.TxnRequest(
            compare=[self.compare() for _ in range(n())],
            success=[self.request_op(depth) for _ in range(n())],
            failure=[self.request_op(depth) for _ in range(n())])
        if depth == 0:
            x = r.random()
            if x < 0.02:
                t.success.append(rpc_pb2.RequestOp())  # empty op
            elif x < 0.03:
                t.failure.extend(rpc_pb2.RequestOp(
                    request_range=rpc_pb2.RangeRequest(key=b"a"))
                    for _ in range(129))
            elif x < 0.05:
                k = self.key()
                t.success.extend([
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                        key=k, value=b"1")),
                    rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
                        key=k, value=b"2"))])
            self._avoid_etcd_panic(t)
        return t

    def compact(self):
        r = self.r
        x = r.random()
        if x < 0.7:
            rev = r.randint(max(self.compacted, 1), self.rev)
        elif x < 0.85:
            rev = r.randint(0, max(self.compacted, 1))
        else:
            rev = self.rev + r.randint(1, 5)
        return rpc_pb2.CompactionRequest(revision=rev,
                                         physical=r.random() < 0.3)

    def next(self):
        """(method name, request)"""
        r = self.r
        x = r.random()
        if x < 0.33:
            return "Put", self.put()
        if x < 0.63:
            return "Range", self.range()
        if x < 0.73:
            return "DeleteRange", self.delete()
        if x < 0.95:
            return "Txn", self.txn()
        if x < 0.98:
            return "Compact", self.compact()
        # plain error cases
        return r.choice([
            ("Put", rpc_pb2.PutRequest(key=b"", value=b"v")),
            ("Range", rpc_pb2.RangeRequest(key=b"", range_end=b"z")),
            ("DeleteRange", rpc_pb2.DeleteRangeRequest(key=b"")),
            ("Txn", rpc_pb2.TxnRequest(compare=[rpc_pb2.Compare(key=b"")])),
        ])


# -- normalisation -------------------------------------------------------

def _clear_header(h):
    h.cluster_id = 0
    h.member_id = 0
    h.raft_term = 0


def _sort_value(kv, target):
    return {S.VERSION: kv.version, S.CREATE: kv.create_revision,
            S.MOD: kv.mod_revision, S.VALUE: kv.value}[target]


def _norm_range(req, resp):
    """Returns a comparable form of a RangeResponse (see module doc)."""
    _clear_header(resp.header)
    if req.sort_target == S.KEY or not resp.kvs:
        return text_format.MessageToString(resp, as_utf8=False)
    groups = []
    for kv in resp.kvs:
        v = _sort_value(kv, req.sort_target)
        if groups and groups[-1][0] == v:
            groups[-1][1].append(kv)
        else:
            groups.append((v, [kv]))
    lines = []
    for i, (v, kvs) in enumerate(groups):
        if i == len(groups) - 1 and resp.more:
            lines.append("group %r: %d kvs (cut by limit)" % (v, len(kvs)))
            continue
        for kv in sorted(kvs, key=lambda k: k.key):
            lines.append("group %r: %s" % (v, text_format.MessageToString(
                kv, as_one_line=True)))
    rest = rpc_pb2.RangeResponse()
    rest.CopyFrom(resp)
    del rest.kvs[:]
    return text_format.MessageToString(rest) + "\n".join(lines) + "\n"


def _norm_txn(req, resp):
    _clear_header(resp.header)
    ops = req.success if resp.succeeded else req.failure
    out = ["succeeded: %s" % resp.succeeded,
           "header: %s" % text_format.MessageToString(resp.header,
                                                      as_one_line=True)]
    for i, (op, r) in enumerate(zip(ops, resp.responses)):
        kind = r.WhichOneof("response")
        out.append("-- response %d: %s" % (i, kind))
        if kind == "response_range":
            out.append(_norm_range(op.request_range, r.response_range))
        elif kind == "response_txn":
            out.append(_norm_txn(op.request_txn, r.response_txn))
        else:
            msg = getattr(r, kind)
            _clear_header(msg.header)
            out.append(text_format.MessageToString(msg))
    if len(ops) != len(resp.responses):
        out.append("!! %d ops but %d responses" % (len(ops),
                                                   len(resp.responses)))
    return "\n".join(out) + "\n"


def normalise(method, req, resp):
    if method == "Range":
        return _norm_range(req, resp)
    if method == "Txn":
        return _norm_txn(req, resp)
    _clear_header(resp.header)
    return text_format.MessageToString(resp)


def call(stub, method, req):
    try:
        resp = getattr(stub, method)(req, timeout=15)
    except grpc.RpcError as e:
        return None, "ERROR code=%s message=%r\n" % (e.code(), e.details())
    return resp, normalise(method, req, resp)


def step(gen, method, req, r_kv, u_kv, what):
    """Sends req to the reference (r_kv) and then to the server under test
    (u_kv); fails the test, naming `what` (the seed and op), when their
    normalised answers differ.  Moves gen on to the reference's revision
    (or compact revision); returns the reference's response (None for an
    error)."""
    r_resp, r_norm = call(r_kv, method, req)
    u_resp, u_norm = call(u_kv, method, req)
    if r_norm != u_norm:
        diff = "\n".join(difflib.unified_diff(
            r_norm.splitlines(), u_norm.splitlines(),
            "etcd 3.4.23 (reference)", "server under test", lineterm=""))
        pytest.fail("%s mismatch\nrequest:\n%s\ndiff:\n%s"
                    % (what, text_format.MessageToString(req), diff),
                    pytrace=False)
    if r_resp is not None:
        if method != "Compact":
            gen.rev = r_resp.header.revision
        else:
            gen.compacted = max(gen.compacted, req.revision)
    return r_resp


# -- watch ops ------------------------------------------------------------

class WatchGen:
    """Random Watch requests on one stream per server: creates with every
    option (key and range_end as the KV ops pick them, start_revision 0 /
    past / compacted / future, NOPUT and NODELETE, prev_kv,
    progress_notify, fragment, automatic, chosen, negative and duplicate
    watch ids), cancels of open, closed and unknown ids, and progress
    requests.  Its own random stream: the KV op sequence of a seed is the
    same as without watches."""

    def __init__(self, seed, gen):
        self.r = random.Random(seed * 7919 + 1)
        self.gen = gen
        self.ids = []  # ids the reference confirmed, in creation order

    def create(self):
        r, g = self.r, self.gen
        key = g.key() if r.random() < 0.9 else b""
        x = r.random()
        start = (0 if x < 0.4 else g.past_rev() if x < 0.9
                 else g.rev + r.randint(1, 3))
        kw = dict(range_end=g.range_end(key or b"\x00"),
                  start_revision=max(start, 0),
                  filters=[f for f in (NOPUT, NODELETE)
                           if r.random() < 0.15],
                  prev_kv=r.random() < 0.4,
                  progress_notify=r.random() < 0.3)
        y = r.random()
        wid = (None if y < 0.55 else r.choice(self.ids) if y < 0.65
               and self.ids else r.randint(-3, 12))
        return key, wid, r.random() < 0.3, kw

    def cancel(self):
        r = self.r
        if self.ids and r.random() < 0.8:
            return r.choice(self.ids)
        return r.randint(-3, 40)


NOPUT = rpc_pb2.WatchCreateRequest.NOPUT
NODELETE = rpc_pb2.WatchCreateRequest.NODELETE


def _watch_record(r):
    """One watch response as the per-watcher history item(s) it adds:
    events one by one (batching into responses and their header revisions
    are not part of the contract), control answers whole."""
    if r.events:
        return [("event", e.type, e.kv.key, e.kv.value, e.kv.create_revision,
                 e.kv.mod_revision, e.kv.version, e.kv.lease,
                 (e.prev_kv.key, e.prev_kv.value, e.prev_kv.mod_revision)
                 if e.HasField("prev_kv") else None) for e in r.events]
    return [("ctrl", r.created, r.canceled, r.compact_revision,
             r.cancel_reason, r.header.revision)]


class WatchPair:
    """The same Watch stream on both servers; each response is recorded
    under its watch id."""

    def __init__(self, ref, under):
        self.ws = [WatchStream(ref.channel()), WatchStream(under.channel())]
        self.hist = [{}, {}]
        self.n_created = [0, 0]
        self.start = {}  # open watch id -> its start revision

    def _drain(self, i, until=None, timeout=5.0, what=""):
        """Records stream i's responses until until(response) (then
        returns it) or, with until None, until none came for 0.2 s."""
        while True:
            try:
                r = self.ws[i].next(timeout=timeout if until else 0.2)
            except queue.Empty:
                if until is None:
                    return None
                raise AssertionError("%s: no expected watch answer from %s;"
                                     " so far: %r" % (
                                         what, ("etcd", "under test")[i],
                                         self.hist[i]))
            self.hist[i].setdefault(r.watch_id, []).extend(_watch_record(r))
            if until is not None and until(r):
                return r

    def create(self, wg, what):
        key, wid, fragment, kw = wg.create()
        answers = []
        for i in (0, 1):
            self.ws[i].create(key, watch_id=wid, fragment=fragment, **kw)
            answers.append(self._drain(i, lambda r: r.created,
                                       what="%s create %r %r %s %r" % (
                                           what, key, wid, fragment, kw)))
        a, b = answers
        assert (a.watch_id, a.canceled, a.cancel_reason) == \
            (b.watch_id, b.canceled, b.cancel_reason), (what, key, wid, kw)
        if not a.canceled and a.watch_id not in wg.ids:
            wg.ids.append(a.watch_id)
        if not a.canceled:
            self.start[a.watch_id] = kw["start_revision"]
        if kw["start_revision"] > 0:
            # etcd catches a watcher up within 100 ms (syncWatchersLoop),
            # cetcd within 10: whether a compaction meanwhile cancels it
            # is a race, not a contract; let the catch-up end first.
            time.sleep(0.25)

    def cancel(self, wg, what):
        wid = wg.cancel()
        for i in (0, 1):
            self.ws[i].send(cancel_request=rpc_pb2.WatchCancelRequest(
                watch_id=wid))
        if wid in wg.ids:  # etcd answers canceled; an unknown id: nothing
            for i in (0, 1):
                self._drain(i, lambda r, w=wid: r.canceled and
                            r.watch_id == w and not r.created and
                            r.compact_revision == 0,
                            what="%s cancel %d" % (what, wid))
            wg.ids.remove(wid)
            self.start.pop(wid, None)

    def progress(self, what, rev):
        """RequestProgress on both streams, rev the store's revision.
        Returns False (nothing sent) when a watcher of the stream starts
        past rev + 1: etcd 3.4.23 answers at rev, below that watcher's
        start - 1 (etcd #20221); cetcd defers the answer until the store
        gets there, as etcd's fix #20229 does (tests/unit/test_watch.c
        test_progress_future_watcher), and here no write comes while the
        test waits."""
        if any(s > rev + 1 for s in self.start.values()):
            return False
        # etcd 3.4.23 answers at once even while a watcher catches up;
        # cetcd waits for it (etcd 3.4.31's fix): let catch-ups finish.
        time.sleep(0.25)
        for i in (0, 1):
            self.ws[i].progress()
            self._drain(i, lambda r: (r.watch_id == -1 and not r.created
                                      and not r.events),
                        what=what + " progress")
        return True

    @staticmethod
    def _intra_txn(a, b):
        """A known difference, normalised away (docs/ARCHITECTURE.md
        "Watch"): etcd fills an event's prev_kv with the key as of the
        revision before (a Range at mod_revision - 1), cetcd with the key
        as it was before this op, which differs when the same txn wrote
        the key before (cetcd's prev_kv then has the event's own
        mod_revision)."""
        for h in (a, b):
            for k, x in enumerate(h):
                if x[0] == "event" and x[8] is not None and x[8][2] == x[5]:
                    for hh in (a, b):
                        if k < len(hh) and hh[k][0] == "event":
                            hh[k] = hh[k][:8] + ("intra-txn prev",)

    @staticmethod
    def _compacted_prev(a, b, compacted):
        """A known difference, normalised away (docs/ARCHITECTURE.md
        "Watch"): etcd reads an event's prev_kv when it sends the event,
        at mod_revision - 1, and sends none when a compaction got there
        first (a race in etcd); cetcd's event carries the previous value
        from the write itself.  a is etcd's history, b cetcd's."""
        for k, x in enumerate(a):
            if x[0] == "event" and x[8] is None and k < len(b) and \
                    b[k][0] == "event" and b[k][:8] == x[:8] and \
                    b[k][8] is not None and x[5] - 1 <= compacted:
                a[k] = b[k] = x[:8] + ("prev compacted in etcd",)

    def compare(self, what, compacted):
        for i in (0, 1):
            self._drain(i)
        for w in set(self.hist[0]) & set(self.hist[1]):
            self._intra_txn(self.hist[0][w], self.hist[1][w])
            self._compacted_prev(self.hist[0][w], self.hist[1][w], compacted)
        if self.hist[0] != self.hist[1]:
            ids = sorted(set(self.hist[0]) | set(self.hist[1]))
            bad = [w for w in ids
                   if self.hist[0].get(w) != self.hist[1].get(w)]
            w = bad[0]
            diff = "\n".join(difflib.unified_diff(
                [repr(x) for x in self.hist[0].get(w, [])],
                [repr(x) for x in self.hist[1].get(w, [])],
                "etcd 3.4.23 (reference)", "server under test",
                lineterm="", n=1000))
            pytest.fail("%s: watch %d history differs\n%s" % (what, w, diff),
                        pytrace=False)

    def close(self):
        for w in self.ws:
            w.close()


# -- lease ops ------------------------------------------------------------

# Client-chosen lease ids (negative ones too: etcd 3.4 takes any id but 0).
LEASE_IDS = [1, 2, 3, 5, 8, 1 << 40, -7]


class LeaseGen:
    """Random lease ops from a random stream of their own (the KV and watch
    sequences of a seed are unchanged): LeaseGrant with client-chosen ids
    (taken ones: "lease already exists") and server-chosen ones (0), TTLs
    of a minute or more (none expires during a seed: expiry timing is not
    comparable) and too large; LeaseRevoke of held, revoked and unknown
    ids; LeaseTimeToLive with and without keys; LeaseLeases; Put with a
    lease (held or not, prev_kv), Put with ignore_lease (with and without
    a lease on the key), and Txns that compare leases and put with them.
    Server-chosen ids differ between the servers: each side's id is used
    in its own requests and mapped to a name in the answers; keys attach
    to client-chosen leases only (so KV answers need no mapping)."""

    def __init__(self, seed):
        self.r = random.Random(seed * 104729 + 3)
        self.chosen = []   # (ref id, under id) of server-chosen grants

    def ttl(self):
        r = self.r
        x = r.random()
        if x < 0.05:
            return 9000000001  # too large
        return r.choice([60, 90, 3600, 86400, 9000000000])

    def lid(self):
        """A lease id for both sides: (ref id, under id)."""
        r = self.r
        if self.chosen and r.random() < 0.3:
            return r.choice(self.chosen)
        i = r.choice(LEASE_IDS + [0, 424242])
        return i, i

    def client_lid(self):
        return self.r.choice(LEASE_IDS)

    def next(self):
        """(method, ref request, under request)"""
        r = self.r
        x = r.random()
        if x < 0.22:
            if r.random() < 0.3:
                q = rpc_pb2.LeaseGrantRequest(TTL=self.ttl())
                return "LeaseGrant", q, q
            q = rpc_pb2.LeaseGrantRequest(TTL=self.ttl(),
                                          ID=self.client_lid())
            return "LeaseGrant", q, q
        if x < 0.32:
            a, b = self.lid()
            return ("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=a),
                    rpc_pb2.LeaseRevokeRequest(ID=b))
        if x < 0.5:
            a, b = self.lid()
            keys = r.random() < 0.6
            return ("LeaseTimeToLive",
                    rpc_pb2.LeaseTimeToLiveRequest(ID=a, keys=keys),
                    rpc_pb2.LeaseTimeToLiveRequest(ID=b, keys=keys))
        if x < 0.56:
            q = rpc_pb2.LeaseLeasesRequest()
            return "LeaseLeases", q, q
        key = r.choice(KEYS[:14])
        if x < 0.8:
            q = rpc_pb2.PutRequest(key=key, value=b"l%d" % r.randint(0, 9),
                                   lease=self.client_lid(),
                                   prev_kv=r.random() < 0.4)
            return "Put", q, q
        if x < 0.88:
            q = rpc_pb2.PutRequest(key=key, value=b"i%d" % r.randint(0, 9),
                                   ignore_lease=True,
                                   prev_kv=r.random() < 0.4)
            return "Put", q, q
        lid = self.client_lid()
        other = self.client_lid()
        put = lambda k, l: rpc_pb2.RequestOp(  # noqa: E731
            request_put=rpc_pb2.PutRequest(key=k, value=b"t", lease=l))
        q = rpc_pb2.TxnRequest(
            compare=[rpc_pb2.Compare(key=key, target=C.LEASE,
                                     result=r.choice([C.EQUAL, C.NOT_EQUAL,
                                                      C.GREATER, C.LESS]),
                                     lease=lid)],
            success=[put(key, lid)],
            failure=[put(r.choice(KEYS[:14]), other), rpc_pb2.RequestOp(
                request_range=rpc_pb2.RangeRequest(key=key))])
        return "Txn", q, q


def _lease_name(lg, side, lid):
    """A server-chosen id as the name both sides share ("S<n>")."""
    for n, pair in enumerate(lg.chosen):
        if pair[side] == lid:
            return "S%d" % n
    return str(lid)


def _norm_lease(lg, side, method, req, resp):
    _clear_header(resp.header)
    if method == "LeaseGrant":
        rid = "S?" if req.ID == 0 else str(resp.ID)
        return "ID: %s TTL: %d error: %r rev: %d\n" % (
            rid, resp.TTL, resp.error, resp.header.revision)
    if method == "LeaseTimeToLive":
        # The remaining TTL is time: in (0, granted] for a held lease,
        # -1 for an unknown one.  etcd lists the keys from a Go map: sorted.
        held = resp.TTL > 0 and resp.TTL <= resp.grantedTTL
        return "ID: %s held: %s unknown: %s granted: %d keys: %r rev: %d\n" % (
            _lease_name(lg, side, resp.ID), held, resp.TTL == -1,
            resp.grantedTTL, sorted(resp.keys), resp.header.revision)
    if method == "LeaseLeases":
        return "leases: %r rev: %d\n" % (
            sorted(_lease_name(lg, side, x.ID) for x in resp.leases),
            resp.header.revision)
    return text_format.MessageToString(resp)


def lease_step(lg, gen, ref, under, what):
    method, r_req, u_req = lg.next()
    out = []
    for side, (srv, q) in enumerate(((ref, r_req), (under, u_req))):
        stub = (rpc_pb2_grpc.LeaseStub(srv.channel())
                if method.startswith("Lease") else srv.kv())
        try:
            resp = getattr(stub, method)(q, timeout=15)
        except grpc.RpcError as e:
            out.append((None, "ERROR code=%s message=%r\n" % (
                e.code(), e.details())))
            continue
        if method.startswith("Lease"):
            norm = None  # after a grant's id is recorded
        else:
            norm = normalise(method, q, resp)
        out.append((resp, norm))
    (r_resp, r_norm), (u_resp, u_norm) = out
    if method == "LeaseGrant" and r_req.ID == 0 and r_resp is not None \
            and u_resp is not None:
        lg.chosen.append((r_resp.ID, u_resp.ID))
    if method.startswith("Lease"):
        if r_resp is not None:
            r_norm = _norm_lease(lg, 0, method, r_req, r_resp)
        if u_resp is not None:
            u_norm = _norm_lease(lg, 1, method, u_req, u_resp)
    if r_norm != u_norm:
        diff = "\n".join(difflib.unified_diff(
            r_norm.splitlines(), u_norm.splitlines(),
            "etcd 3.4.23 (reference)", "server under test", lineterm=""))
        pytest.fail("%s mismatch\nrequest:\n%s\ndiff:\n%s"
                    % (what, text_format.MessageToString(r_req), diff),
                    pytrace=False)
    if r_resp is not None:
        gen.rev = r_resp.header.revision
    return method, r_resp


# -- the test --------------------------------------------------------------

@pytest.fixture
def pair():
    made = []

    def start():
        under = Server(name="under")
        ref = Server(binary=ETCD_BIN, name="ref")
        made.extend([under, ref])
        under.start()
        ref.start()
        return under, ref

    yield start
    for s in made:
        s.cleanup()


@pytest.mark.parametrize("seed", _seeds())
def test_differential(pair, seed):
    under, ref = pair()
    u_kv, r_kv = under.kv(), ref.kv()
    gen = Gen(seed)
    wg = WatchGen(seed, gen)
    watch = WatchPair(ref, under)
    lg = LeaseGen(seed)
    counts = {}
    for i in range(OPS):
        if lg.r.random() < 0.08:
            method, r_resp = lease_step(lg, gen, ref, under,
                                        "seed %d op #%d lease" % (seed, i))
            k = ("lease " + method, "err" if r_resp is None else "ok")
            counts[k] = counts.get(k, 0) + 1
            continue
        x = wg.r.random()
        if x < 0.045:
            what = "seed %d op #%d" % (seed, i)
            op = ("WatchCreate" if x < 0.025 else "WatchCancel" if x < 0.037
                  else "WatchProgress")
            sent = {"WatchCreate": lambda: watch.create(wg, what),
                    "WatchCancel": lambda: watch.cancel(wg, what),
                    "WatchProgress": lambda: watch.progress(what, gen.rev)
                    }[op]()
            k = (op, "skipped" if sent is False else "ok")
            counts[k] = counts.get(k, 0) + 1
            continue
        method, req = gen.next()
        r_resp = step(gen, method, req, r_kv, u_kv,
                      "seed %d op #%d %s" % (seed, i, method))
        outcome = "err" if r_resp is None else "ok"
        counts[(method, outcome)] = counts.get((method, outcome), 0) + 1
    print("seed %d: %d ops, final revision %d, compacted %d; %s" % (
        seed, OPS, gen.rev, gen.compacted, sorted(counts.items())))
    # the sequence must have exercised both success and error paths
    for m in ("Put", "Range", "DeleteRange", "Txn", "Compact"):
        assert counts.get((m, "ok"), 0) > 0, (m, counts)
    assert counts.get(("Range", "err"), 0) > 0
    assert counts.get(("Txn", "err"), 0) > 0
    for m in ("WatchCreate", "WatchCancel", "WatchProgress"):
        assert counts.get((m, "ok"), 0) > 0, (m, counts)
    for m in ("LeaseGrant", "LeaseRevoke", "LeaseTimeToLive", "LeaseLeases",
              "Put", "Txn"):
        assert counts.get(("lease " + m, "ok"), 0) > 0, (m, counts)
    assert counts.get(("lease LeaseGrant", "err"), 0) > 0, counts
    # every watcher's history (created, events, cancels) agrees
    watch.compare("seed %d" % seed, gen.compacted)
    watch.close()
    # final state: a full read at the current revision agrees too
    full = rpc_pb2.RangeRequest(key=b"\x00", range_end=b"\x00")
    assert call(u_kv, "Range", full)[1] == call(r_kv, "Range", full)[1]
