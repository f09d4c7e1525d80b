"""Election Observe with auth on (issue 19): the stream runs its Range and
its watches as the caller, as etcd 3.4's electionServer.Observe (its
in-process client carries the stream's token).

Goal: with a valid token and read permission on the election's prefix
("name/"), Observe gives the leader and its changes; without that
permission, without a token, or with a bad token, the outcome equals etcd
3.4.23's: the stream ends at once with status OK and no message (etcd's
concurrency.Election.observe closes its channel on the failed Get and
Observe returns nil).  Before this, cetcd refused every Observe with auth
on ("user name is empty"), whoever asked.

Method: cetcd and /usr/bin/etcd get the same users (root; "reader" with
read on el/ as a prefix; "other" with read on other/), a leader is elected
on "el" through Campaign as root, then each caller observes "el" and the
test records what the stream gives (the first message's key and value,
then how the stream ends) and compares the two servers; a Proclaim by root
must reach the reader's open Observe on both.
"""

import queue
import threading

import grpc
import pytest

from common import lockpb
from common.servers import ETCD_BIN, against_etcd
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

ROOT_PW = "R00t-obs-pw"
FAST = ["--bcrypt-cost", "4"]


def setup_auth(srv):
    for args in [("user", "add", "root:" + ROOT_PW),
                 ("user", "grant-role", "root", "root"),
                 ("user", "add", "reader:readerpw"), ("role", "add", "rr"),
                 ("role", "grant-permission", "rr", "read", "el/",
                  "--prefix"),
                 ("user", "grant-role", "reader", "rr"),
                 ("user", "add", "other:otherpw"), ("role", "add", "ro"),
                 ("role", "grant-permission", "ro", "read", "other/",
                  "--prefix"),
                 ("user", "grant-role", "other", "ro"),
                 ("auth", "enable")]:
        srv.ctl(*args)
    auth = rpc_pb2_grpc.AuthStub(srv.channel())
    return {u: auth.Authenticate(rpc_pb2.AuthenticateRequest(
        name=u, password=pw), timeout=10).token
        for u, pw in (("root", ROOT_PW), ("reader", "readerpw"),
                      ("other", "otherpw"))}


def observe_outcome(srv, token, wait_s=3.0):
    """What an Observe of "el" gives: ("msg", key, value) for a first
    message, or ("end", code name, details) when the stream ends first, or
    ("open",) when it neither answers nor ends within wait_s."""
    md = [("token", token)] if token else []
    it = lockpb.ElectionStub(srv.channel()).Observe(
        lockpb.LeaderRequest(name=b"el"), metadata=md, timeout=30)
    got = queue.Queue()

    def pump():
        try:
            for m in it:
                got.put(("msg", m.kv.key.split(b"/")[0], m.kv.value))
                return
            got.put(("end", it.code().name, it.details()))
        except grpc.RpcError as e:
            got.put(("end", e.code().name, e.details()))

    threading.Thread(target=pump, daemon=True).start()
    try:
        return got.get(timeout=wait_s)
    except queue.Empty:
        return ("open",)
    finally:
        it.cancel()


def campaign_as_root(srv, tok):
    md = [("token", tok)]
    lease = rpc_pb2_grpc.LeaseStub(srv.channel()).LeaseGrant(
        rpc_pb2.LeaseGrantRequest(TTL=60), metadata=md, timeout=10).ID
    E = lockpb.ElectionStub(srv.channel())
    return E.Campaign(lockpb.CampaignRequest(name=b"el", lease=lease,
                                             value=b"v1"),
                      metadata=md, timeout=10).leader


def proclaim_reaches_reader(srv, toks, leader):
    """An open Observe of the reader sees root's Proclaim."""
    E = lockpb.ElectionStub(srv.channel())
    it = E.Observe(lockpb.LeaderRequest(name=b"el"),
                   metadata=[("token", toks["reader"])], timeout=20)
    try:
        first = next(it)
        E.Proclaim(lockpb.ProclaimRequest(leader=leader, value=b"v2"),
                   metadata=[("token", toks["root"])], timeout=10)
        second = next(it)
        return [first.kv.value, second.kv.value]
    finally:
        it.cancel()


def test_observe_with_auth(make_server):
    if against_etcd():
        pytest.skip("compares cetcd with etcd itself")
    results = []
    for binary, name in ((None, "m1"), (ETCD_BIN, "ref")):
        srv = make_server(extra_args=FAST, binary=binary, name=name)
        toks = setup_auth(srv)
        before = [observe_outcome(srv, toks["reader"], wait_s=1.5)]
        leader = campaign_as_root(srv, toks["root"])
        res = before + [observe_outcome(srv, toks["root"]),
                        observe_outcome(srv, toks["reader"]),
                        observe_outcome(srv, toks["other"]),
                        observe_outcome(srv, None),
                        observe_outcome(srv, "abcdefghijklmnop.9")]
        res.append(proclaim_reaches_reader(srv, toks, leader))
        results.append(res)
    mine, theirs = results
    assert mine == theirs, "cetcd %r\netcd  %r" % (mine, theirs)
    ended_ok = ("end", "OK", "")
    assert mine[0] == ("open",)  # no leader yet: waits for the first
    assert mine[1] == mine[2] == ("msg", b"el", b"v1")
    assert mine[3] == mine[4] == mine[5] == ended_ok
    assert mine[6] == [b"v1", b"v2"]
