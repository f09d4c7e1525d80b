"""JWT tokens in a 3-member cluster (issue 19): a token one member signs is
accepted by the others, which hold the same keys.

Method: one ES256 key made with openssl; every member started with
--auth-token jwt,...; auth enabled through m1 with etcdctl; an
Authenticate at m1, then a Put at m3 and Ranges at m2 and m3 carrying m1's
token; and m3's token at m1.  Also run against etcd 3.4.23 with
CETCD_TEST_AGAINST_ETCD=1.
"""

import os
import subprocess

import grpc
import pytest

from etcd3.etcdrpc import rpc_pb2 as pb
from etcd3.etcdrpc import rpc_pb2_grpc as pbg

ETCDCTL = "/usr/bin/etcdctl"
ROOT_PW = "Jwt-cluster-pw"


def ctl(m, *args):
    env = dict(os.environ, ETCDCTL_API="3")
    subprocess.run([ETCDCTL, "--endpoints", m.endpoint] + list(args),
                   check=True, capture_output=True, env=env, timeout=60)


def authenticate(m):
    return pbg.AuthStub(m.channel()).Authenticate(pb.AuthenticateRequest(
        name="root", password=ROOT_PW), timeout=15).token


@pytest.mark.cluster
def test_token_of_one_member_accepted_by_others(make_cluster, tmp_path):
    priv, pub = str(tmp_path / "ec.pem"), str(tmp_path / "ec.pub")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-out", priv], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", priv, "-pubout", "-out", pub],
                   check=True, capture_output=True)
    opt = "jwt,pub-key=%s,priv-key=%s,sign-method=ES256,ttl=10m" % (pub, priv)
    c = make_cluster(3, extra_args=["--auth-token", opt,
                                    "--bcrypt-cost", "4"])
    m1, m2, m3 = c.members
    ctl(m1, "user", "add", "root:" + ROOT_PW)
    ctl(m1, "user", "grant-role", "root", "root")
    ctl(m1, "auth", "enable")
    tok = authenticate(m1)
    md = [("token", tok)]
    pbg.KVStub(m3.channel()).Put(pb.PutRequest(key=b"jk", value=b"jv"),
                                 metadata=md, timeout=15)
    for m in (m2, m3):
        r = pbg.KVStub(m.channel()).Range(pb.RangeRequest(key=b"jk"),
                                          metadata=md, timeout=15)
        assert [kv.value for kv in r.kvs] == [b"jv"]
    r = pbg.KVStub(m1.channel()).Range(pb.RangeRequest(key=b"jk"),
                                       metadata=[("token", authenticate(m3))],
                                       timeout=15)
    assert [kv.value for kv in r.kvs] == [b"jv"]
    # no token: etcd's "user name is empty" on every member
    with pytest.raises(grpc.RpcError) as e:
        pbg.KVStub(m2.channel()).Range(pb.RangeRequest(key=b"jk"), timeout=15)
    assert e.value.details() == "etcdserver: user name is empty"
