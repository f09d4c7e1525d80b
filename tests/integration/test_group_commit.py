"""Group commit per turn (util/thread.h "Turns", server__raft_poke_turn).

A lone voter used to run a raft pass, with its WAL write and fdatasync,
inside the handler of each Put: an rpc thread that read twenty calls at
once synced twenty times, one after the other, each call waiting for the
syncs of the calls before it.  The pass now runs once at the end of the
loop's turn, after every call read in that turn, so they share one
fdatasync.  Twenty Puts written to the socket in one send are answered
after at most a few fsyncs (one per turn that read some of them), every
one of them applied."""
import re
import urllib.request

from common import h2raw

CALLS = 20


def fsyncs(server):
    with urllib.request.urlopen(server.client_url + "/metrics",
                                timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^etcd_disk_wal_fsync_duration_seconds_count (\S+)$",
                  text, re.M)
    assert m, "no wal fsync count in /metrics"
    return int(float(m.group(1)))


def put(c, key, value):
    """One Put call's frames on c: (stream id, bytes)."""
    return c.request("/etcdserverpb.KV/Put", h2raw.pb_bytes_field(1, key) +
                     h2raw.pb_bytes_field(2, value))


def wait_ok(c, sids):
    """Reads frames until every stream of sids has ended with grpc-status
    0."""
    left = set(sids)
    while left:
        f = c.read_frame(timeout=10)
        assert f is not None, "connection closed"
        if f[0] == h2raw.HEADERS and f[1] & h2raw.END_STREAM and \
                f[2] in left:
            assert c.decode_headers(f[3])[b"grpc-status"] == b"0"
            left.discard(f[2])


def test_puts_read_in_one_turn_share_one_fsync(server):
    c = h2raw.Conn(server.client_port)
    # settle the connection (SETTINGS both ways) with one Put of its own
    sid, out = put(c, b"warm", b"up")
    c.send(out)
    wait_ok(c, [sid])
    before = fsyncs(server)
    calls = [put(c, b"gc%02d" % i, b"v%02d" % i) for i in range(CALLS)]
    # one write: the server reads them in one or two turns
    c.send(b"".join(out for _, out in calls))
    wait_ok(c, [sid for sid, _ in calls])
    c.close()
    synced = fsyncs(server) - before
    # before the change: one fsync per call (20); now one per turn
    assert 1 <= synced <= 3, "%d fsyncs for %d puts" % (synced, CALLS)
    kv = server.client()
    for i in range(CALLS):
        v, _ = kv.get(b"gc%02d" % i)
        assert v == b"v%02d" % i
