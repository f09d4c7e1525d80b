"""etcd's peer byte counters (issue 18): etcd_network_peer_sent_bytes_total
{To="<id>"} and etcd_network_peer_received_bytes_total{From="<id>"}, one
series per other member, counting the raft traffic between members.

Method: a 3-member cluster (cluster.py); /metrics of every member read
before and after 200 puts of 1 KiB through the leader.  The leader must
have sent each follower at least those 200 KiB, and each follower must
have received them from the leader; every label names another member (hex
id, as etcd's types.ID).  Runs against etcd 3.4.23 too (CETCD_AGAINST_ETCD).
Bound: ~10 s.
"""
import re
import urllib.request

from etcd3.etcdrpc import rpc_pb2

SERIES = re.compile(r'^etcd_network_peer_(sent|received)_bytes_total'
                    r'\{(To|From)="([0-9a-f]+)"\} (\S+)$')


def peer_bytes(m):
    """{("sent"|"received", id): bytes} from m's /metrics."""
    url = "http://127.0.0.1:%d/metrics" % m.client_port
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        g = SERIES.match(line)
        if g:
            way, label, pid, v = g.groups()
            assert (way, label) in (("sent", "To"), ("received", "From")), line
            out[(way, int(pid, 16))] = float(v)
    return out


def test_peer_byte_counters(make_cluster):
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    ids = {m.id for m in c.members}
    before = {m.id: peer_bytes(m) for m in c.members}
    value = b"x" * 1024
    for i in range(200):
        lead.kv().Put(rpc_pb2.PutRequest(key=b"pb/%d" % i, value=value),
                      timeout=10)
    c.wait_converged()  # every follower has every entry
    after = {m.id: peer_bytes(m) for m in c.members}
    for m in c.members:
        others = ids - {m.id}
        for (way, pid) in after[m.id]:
            assert pid in others, (m.name, way, hex(pid))
    floor = 200 * 1024
    for f in ids - {lead.id}:
        sent = after[lead.id][("sent", f)] - before[lead.id].get(
            ("sent", f), 0)
        got = after[f][("received", lead.id)] - before[f].get(
            ("received", lead.id), 0)
        assert sent >= floor, (hex(f), sent)
        assert got >= floor, (hex(f), got)
        # and not wildly more than the entries (heartbeats, appends' headers)
        assert sent < 4 * floor and got < 4 * floor, (sent, got)
