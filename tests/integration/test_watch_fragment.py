"""Watch fragments (WatchCreateRequest.fragment).

Goal: as etcd 3.4.23's sendFragments (v3rpc/watch.go): a response of a
watcher created with fragment=true whose encoded size is at least
--max-request-bytes + 512 KiB (etcd's grpcOverheadBytes) and that holds 2
events or more is split into several
WatchResponses, fragment=true on all but the last; each fragment takes the
next events while its encoded size stays below the limit (at least one);
together they hold every event once, in order.  A smaller response, and
every response of a watcher without fragment, goes whole.

Method: a server with --max-request-bytes 4096 (fragments below 528 KiB);
200 keys put twice with 3000-byte values (400 revisions); then, on one raw
stream, a fragment watcher with prev_kv and a plain one, both from the
first revision: the catch-up is one response of 400 events (~1.2 MB) in
both etcd and cetcd.
The fragment field (7) is read from the response bytes (python-etcd3's
stubs lack it).  The split is checked against etcd's rule on the encoded
sizes, not against hard-coded counts.  Runs against real etcd 3.4.23 with
CETCD_TEST_AGAINST_ETCD=1.
"""

from etcd3.etcdrpc import rpc_pb2 as pb

from common.watchstream import WatchStream, top_fields, varint

MAX_REQUEST_BYTES = 4096
MAX = MAX_REQUEST_BYTES + 512 * 1024  # etcd adds grpcOverheadBytes


def field_size(ev):
    """An event's bytes as field 11 of a WatchResponse."""
    n = len(ev.SerializeToString())
    return 1 + len(varint(n)) + n


def is_fragment(raw):
    return top_fields(raw).get(7, [0])[0] == 1


def test_watch_fragments_split_as_etcd(make_server):
    server = make_server(extra_args=["--max-request-bytes",
                                     str(MAX_REQUEST_BYTES)])
    kv = server.kv()
    first = None
    for rnd in range(2):
        for i in range(200):
            rev = kv.Put(pb.PutRequest(key=b"f/%03d" % i,
                                       value=b"%d" % rnd * 3000),
                         timeout=10).header.revision
            first = first or rev
    last = rev
    w = WatchStream(server.channel(), raw=True)
    w.create(b"f/", range_end=b"f0", start_revision=first, prev_kv=True,
             fragment=True, watch_id=1)
    w.create(b"f/", range_end=b"f0", start_revision=first, watch_id=2)
    frags, whole = [], []
    while not (whole and whole[-1][0].events and
               whole[-1][0].events[-1].kv.mod_revision == last and
               frags and not is_fragment(frags[-1][1]) and
               frags[-1][0].events[-1].kv.mod_revision == last):
        r, raw = w.next()
        if r.created:
            continue
        (frags if r.watch_id == 1 else whole).append((r, raw))
    w.close()

    # The plain watcher: every event, no fragment flag.
    assert not any(is_fragment(raw) for _, raw in whole)
    assert [e.kv.mod_revision for r, _ in whole for e in r.events] == \
        list(range(first, last + 1))
    # The fragment watcher: one catch-up response, split.
    assert len(frags) >= 3, [len(r.events) for r, _ in frags]
    assert [e.kv.mod_revision for r, _ in frags for e in r.events] == \
        list(range(first, last + 1))
    assert [is_fragment(raw) for _, raw in frags] == \
        [True] * (len(frags) - 1) + [False]
    assert all(e.HasField("prev_kv") for e in frags[-1][0].events)
    for k, (r, raw) in enumerate(frags):
        assert len(r.events) >= 1
        assert len(raw) < MAX or len(r.events) == 1, (k, len(raw))
        assert r.header.revision == frags[0][0].header.revision
        if k + 1 < len(frags):  # the next event did not fit
            nxt = frags[k + 1][0].events[0]
            assert len(raw) + field_size(nxt) >= MAX, (k, len(raw))

    # A response below the limit goes whole, unflagged, even with fragment.
    w = WatchStream(server.channel(), raw=True)
    w.create(b"f/", range_end=b"f0", start_revision=last - 1, fragment=True)
    assert w.next()[0].created
    r, raw = w.next()
    assert [e.kv.mod_revision for e in r.events] == [last - 1, last]
    assert not is_fragment(raw)
    w.close()
