"""A raw gRPC Watch stream for tests: requests from a queue, responses
collected on a thread, and record() turning a response into the history
format of tests/common/watchcheck.py.

python-etcd3's rpc_pb2 (the stubs the tests use) predates
WatchCreateRequest.watch_id (7) and fragment (8) and
WatchRequest.progress_request (3): requests are built as bytes, those fields
appended by hand.
"""

import queue
import threading

from etcd3.etcdrpc import rpc_pb2 as pb


def varint(n):
    """A protobuf varint; a negative n is its 64-bit two's complement (as
    int64 fields are encoded: 10 bytes)."""
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):
    """A length-delimited protobuf field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def top_fields(raw):
    """The top-level fields of a protobuf message: {number: [value, ...]}
    (varints as ints, length-delimited as bytes), for fields the stubs
    lack (WatchResponse.fragment = 7)."""
    out, i = {}, 0
    while i < len(raw):
        key, i = _read_varint(raw, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(raw, i)
        elif wt == 2:
            n, i = _read_varint(raw, i)
            v, i = raw[i:i + n], i + n
        elif wt == 1:
            v, i = raw[i:i + 8], i + 8
        elif wt == 5:
            v, i = raw[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def _read_varint(raw, i):
    v = shift = 0
    while True:
        b = raw[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


class WatchStream:
    """One Watch call: send() requests, next() responses.

    python-etcd3's rpc_pb2 predates WatchCreateRequest.watch_id (7) and
    fragment (8) and WatchRequest.progress_request (3): requests are built
    as bytes, those fields appended by hand."""

    def __init__(self, channel, read=True, metadata=None, raw=False):
        """raw: responses are (WatchResponse, its bytes) pairs."""
        self.reqs = queue.Queue()
        self.resps = queue.Queue()

        def parse(b):
            r = pb.WatchResponse.FromString(b)
            return (r, b) if raw else r
        method = channel.stream_stream(
            "/etcdserverpb.Watch/Watch",
            request_serializer=lambda b: b,
            response_deserializer=parse)
        self.call = method(iter(self.reqs.get, None), metadata=metadata)
        self.reader = None
        if read:
            self.start_reading()

    def start_reading(self):
        def run():
            try:
                for r in self.call:
                    self.resps.put(r)
            except Exception as e:  # cancelled at the end of the test
                self.resps.put(e)
        self.reader = threading.Thread(target=run, daemon=True)
        self.reader.start()

    def send(self, **kw):
        self.reqs.put(pb.WatchRequest(**kw).SerializeToString())

    def create(self, key, watch_id=None, fragment=False, **kw):
        c = pb.WatchCreateRequest(key=key, **kw).SerializeToString()
        if watch_id is not None:
            c += varint(7 << 3) + varint(watch_id)
        if fragment:
            c += varint(8 << 3) + varint(1)
        self.reqs.put(field(1, c))

    def progress(self):
        self.reqs.put(field(3, b""))

    def ended(self, timeout=10):
        """The error the stream ended with (waits up to timeout)."""
        r = self.resps.get(timeout=timeout)
        assert isinstance(r, Exception), "a response, not the end: %r" % r
        return r

    def next(self, timeout=10):
        r = self.resps.get(timeout=timeout)
        assert not isinstance(r, Exception), r
        return r

    def none_within(self, secs):
        try:
            r = self.resps.get(timeout=secs)
        except queue.Empty:
            return True
        raise AssertionError("unexpected response %r" % r)

    def close(self):
        self.reqs.put(None)
        self.call.cancel()


def record(r):
    out = {"header_rev": r.header.revision, "created": r.created,
           "canceled": r.canceled, "compact_revision": r.compact_revision,
           "fragment": False,  # not asked for (and not in this rpc_pb2)
           "progress": (not r.created and not r.canceled and
                        len(r.events) == 0),
           "events": []}
    for e in r.events:
        out["events"].append({
            "type": "PUT" if e.type == 0 else "DELETE",
            "key": e.kv.key, "value": e.kv.value if e.type == 0 else None,
            "mod_revision": e.kv.mod_revision,
            "create_revision": e.kv.create_revision,
            "version": e.kv.version,
            "prev_kv": ({"value": e.prev_kv.value,
                         "mod_revision": e.prev_kv.mod_revision}
                        if e.HasField("prev_kv") else None)})
    return out


def replay(channel, start, last, metadata=None):
    """Every event of a watch on all keys from revision start (with
    prev_kv) up to revision last, as tuples (type, key, mod revision,
    version, value, lease, prev mod revision, prev value): what a server's
    history replays, to compare two servers."""
    ws = WatchStream(channel, metadata=metadata)
    try:
        ws.create(b"\0", range_end=b"\0", start_revision=start, prev_kv=True)
        created = ws.next()
        assert created.created and not created.canceled, created
        evs = []
        while not evs or evs[-1][2] < last:
            r = ws.next()
            assert not r.canceled, r
            evs += [(e.type, e.kv.key, e.kv.mod_revision, e.kv.version,
                     e.kv.value, e.kv.lease, e.prev_kv.mod_revision,
                     e.prev_kv.value) for e in r.events]
        return evs
    finally:
        ws.close()
