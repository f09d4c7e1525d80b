"""JWT auth tokens (issue 19): --auth-token jwt,pub-key=,priv-key=,
sign-method=,ttl= as etcd 3.4.23 takes it.

Goal: a cetcd member issues tokens that a JWT library and a real etcd
with the same key accept, accepts theirs, refuses expired, tampered and
stale (older auth revision) tokens with etcd's errors, and refuses bad
option strings at start with etcd's messages.

Method: keys made with the openssl command in each test's tmp dir; real
etcdctl --user against the member; tokens read and made with python3-jwt
(PyJWT); the same steps run against /usr/bin/etcd (3.4.23) where its
answer is the specification (cross-verification, expiry, staleness,
verify-only members, option refusals).
"""

import os
import subprocess
import time

import grpc
import pytest

from common.servers import ETCD_BIN, against_etcd, server_bin
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

jwt = pytest.importorskip("jwt")  # Debian python3-jwt (scripts/setup.sh)

ROOT_PW = "Jwt-r00t-pw"
FAST = ["--bcrypt-cost", "4"]

# method -> (openssl key kind, PyJWT algorithm)
METHODS = {
    "RS256": "rsa", "RS384": "rsa", "RS512": "rsa",
    "PS256": "rsa", "PS384": "rsa", "PS512": "rsa",
    "ES256": "P-256", "ES384": "P-384", "ES512": "P-521",
    "EdDSA": "ed25519",
    "HS256": "hmac", "HS384": "hmac", "HS512": "hmac",
}


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_keys(d, kind, tag="k"):
    """(private key path, public key path or None) of a new key."""
    priv = str(d / ("%s-%s.pem" % (tag, kind)))
    pub = str(d / ("%s-%s.pub" % (tag, kind)))
    if kind == "hmac":
        with open(priv, "wb") as f:
            f.write(os.urandom(48).hex().encode())
        return priv, None
    if kind == "rsa":
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt",
                "rsa_keygen_bits:2048", "-out", priv)
    elif kind == "ed25519":
        openssl("genpkey", "-algorithm", "ed25519", "-out", priv)
    else:
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt",
                "ec_paramgen_curve:" + kind, "-out", priv)
    openssl("pkey", "-in", priv, "-pubout", "-out", pub)
    return priv, pub


def token_opt(method, priv, pub, ttl=None):
    parts = ["jwt", "sign-method=" + method]
    if pub:
        parts.append("pub-key=" + pub)
    if priv:
        parts.append("priv-key=" + priv)
    if ttl:
        parts.append("ttl=" + ttl)
    return ",".join(parts)


def enable_auth(srv):
    srv.ctl("user", "add", "root:" + ROOT_PW)
    srv.ctl("user", "grant-role", "root", "root")
    srv.ctl("auth", "enable")


def authenticate(srv, name="root", password=ROOT_PW):
    stub = rpc_pb2_grpc.AuthStub(srv.channel())
    return stub.Authenticate(rpc_pb2.AuthenticateRequest(
        name=name, password=password), timeout=10).token


def range_err(srv, token, key=b"k"):
    """None if a Range with token passes, else (code, details)."""
    try:
        srv.kv().Range(rpc_pb2.RangeRequest(key=key),
                       metadata=[("token", token)], timeout=10)
        return None
    except grpc.RpcError as e:
        return (e.code(), e.details())


def verify_key(kind, priv, pub):
    """What PyJWT verifies a token with."""
    with open(pub or priv, "rb") as f:
        return f.read()


def sign_key(priv):
    with open(priv, "rb") as f:
        return f.read()


def server(make_server, opt, binary=None, name="m1", extra=()):
    return make_server(extra_args=FAST + ["--auth-token", opt] + list(extra),
                       binary=binary, name=name)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_sign_method(make_server, tmp_path, method):
    """etcdctl --user works on a member with this method; its token carries
    etcd's claims and verifies with PyJWT; PyJWT's token verifies here."""
    if against_etcd() and method == "EdDSA":
        pytest.skip("etcd 3.4.23 refuses EdDSA (3.5 takes it)")
    kind = METHODS[method]
    priv, pub = make_keys(tmp_path, kind)
    srv = server(make_server, token_opt(method, priv, pub, ttl="10m"))
    enable_auth(srv)
    srv.ctl("--user", "root:" + ROOT_PW, "put", "k", "v")
    out = srv.ctl("--user", "root:" + ROOT_PW, "get", "k").out
    assert out == "k\nv\n"
    assert srv.ctl("get", "k", check=False).error_line == \
        "etcdserver: user name is empty"

    tok = authenticate(srv)
    header = jwt.get_unverified_header(tok)
    assert header == {"alg": method, "typ": "JWT"}
    claims = jwt.decode(tok, verify_key(kind, priv, pub), algorithms=[method])
    assert sorted(claims) == ["exp", "revision", "username"]
    assert claims["username"] == "root"
    assert isinstance(claims["revision"], int) and claims["revision"] >= 1
    assert abs(claims["exp"] - (time.time() + 600)) < 120
    assert range_err(srv, tok) is None

    # a token PyJWT signs with the same key is as good as ours
    mine = jwt.encode({"username": "root", "revision": claims["revision"],
                       "exp": int(time.time()) + 60}, sign_key(priv),
                      algorithm=method)
    assert range_err(srv, mine) is None
    # one changed byte of the signature, of the claims: refused
    h, c, s = tok.split(".")
    bad_sig = ".".join([h, c, s[:-4] + ("AAAA" if s[-4:] != "AAAA" else "BBBB")])
    other = jwt.encode({"username": "root", "revision": claims["revision"],
                        "exp": int(time.time()) + 60}, "x" * 32,
                       algorithm="HS256")
    forged = ".".join([h, other.split(".")[1], s])
    for t in (bad_sig, forged, tok + "x", "a.b.c", "", h + "." + c):
        assert range_err(srv, t) == (grpc.StatusCode.UNAUTHENTICATED,
                                     "etcdserver: invalid auth token"), t


def test_claims_refused(make_server, tmp_path):
    """Signed with the right key, but: another alg (the RS256 public key as
    an HMAC secret), alg none, expired, not yet valid, and (cetcd only)
    no username, a string revision: each is an invalid token."""
    priv, pub = make_keys(tmp_path, "rsa")
    srv = server(make_server, token_opt("RS256", priv, pub))
    enable_auth(srv)
    rev = jwt.decode(authenticate(srv), options={"verify_signature": False})[
        "revision"]
    now = int(time.time())
    key = sign_key(priv)
    good = {"username": "root", "revision": rev, "exp": now + 60}
    assert range_err(srv, jwt.encode(good, key, algorithm="RS256")) is None
    bad = [
        jwt.encode(good, key, algorithm="RS512"),
        jwt.encode(good, key, algorithm="PS256"),
        jwt.encode(good, None, algorithm="none"),
        jwt.encode(dict(good, exp=now - 5), key, algorithm="RS256"),
        jwt.encode(dict(good, nbf=now + 600), key, algorithm="RS256"),
    ]
    # etcd 3.4.23 reads these two claims with unchecked type assertions and
    # panics (the member dies); cetcd answers invalid auth token
    if not against_etcd():
        bad += [
            jwt.encode({"revision": rev, "exp": now + 60}, key,
                       algorithm="RS256"),
            jwt.encode(dict(good, revision=str(rev)), key, algorithm="RS256"),
            jwt.encode(dict(good, username=7), key, algorithm="RS256"),
        ]
    # the alg-confusion attack: HS256 keyed with the public key's PEM
    import hmac, hashlib, base64
    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    head = b64(b'{"alg":"HS256","typ":"JWT"}')
    body = b64(('{"exp":%d,"revision":%d,"username":"root"}'
                % (now + 60, rev)).encode())
    mac = hmac.new(open(pub, "rb").read(), (head + "." + body).encode(),
                   hashlib.sha256).digest()
    bad.append(head + "." + body + "." + b64(mac))
    for t in bad:
        assert range_err(srv, t) == (grpc.StatusCode.UNAUTHENTICATED,
                                     "etcdserver: invalid auth token"), t


def run_steps_expiry(make_server, tmp_path, binary, name):
    priv, pub = make_keys(tmp_path, "P-256", tag=name)
    srv = server(make_server, token_opt("ES256", priv, pub, ttl="1s"),
                 binary=binary, name=name)
    enable_auth(srv)
    tok = authenticate(srv)
    first = range_err(srv, tok)
    time.sleep(3.0)  # exp is in whole seconds: 1 s ttl is gone after 2
    return first, range_err(srv, tok)


def test_expired_token(make_server, tmp_path):
    """ttl=1s: the token works, then is etcd's invalid auth token."""
    mine = run_steps_expiry(make_server, tmp_path, None, "m1")
    assert mine == (None, (grpc.StatusCode.UNAUTHENTICATED,
                           "etcdserver: invalid auth token"))
    if not against_etcd():
        assert run_steps_expiry(make_server, tmp_path, ETCD_BIN,
                                "ref") == mine


def stale_steps(srv):
    """A token, then a role change (the auth revision moves on): the old
    token's Range is refused as stale, a new one passes."""
    enable_auth(srv)
    tok = authenticate(srv)
    out = [range_err(srv, tok)]
    stub = rpc_pb2_grpc.AuthStub(srv.channel())
    stub.RoleAdd(rpc_pb2.AuthRoleAddRequest(name="r2"),
                 metadata=[("token", tok)], timeout=10)
    out.append(range_err(srv, tok))
    out.append(range_err(srv, authenticate(srv)))
    return out


def test_stale_token(make_server, tmp_path):
    priv, pub = make_keys(tmp_path, "rsa")
    opt = token_opt("PS256", priv, pub)
    mine = stale_steps(server(make_server, opt))
    assert mine == [None, (grpc.StatusCode.INVALID_ARGUMENT,
                           "etcdserver: revision of auth store is old"), None]
    if not against_etcd():
        assert stale_steps(server(make_server, opt, binary=ETCD_BIN,
                                  name="ref")) == mine


@pytest.mark.parametrize("method", ["RS256", "PS384", "ES256", "ES512",
                                    "HS256"])
def test_cross_etcd(make_server, tmp_path, method):
    """cetcd and etcd 3.4.23 with the same key and the same auth steps (so
    the same auth revision): each accepts the other's token, and a member
    with the same key (another cetcd) accepts cetcd's."""
    if against_etcd():
        pytest.skip("compares cetcd with etcd")
    priv, pub = make_keys(tmp_path, METHODS[method])
    opt = token_opt(method, priv, pub)
    mine = server(make_server, opt)
    other = server(make_server, opt, name="m2")
    ref = server(make_server, opt, binary=ETCD_BIN, name="ref")
    for s in (mine, other, ref):
        enable_auth(s)
    t_mine, t_ref = authenticate(mine), authenticate(ref)
    assert jwt.decode(t_mine, options={"verify_signature": False})[
        "revision"] == jwt.decode(t_ref, options={
            "verify_signature": False})["revision"]
    assert range_err(ref, t_mine) is None
    assert range_err(mine, t_ref) is None
    assert range_err(other, t_mine) is None


def test_verify_only_member(make_server, tmp_path):
    """pub-key only: the member refuses to sign with etcd's ErrVerifyOnly
    (gRPC Unknown, as etcd's unmapped errors) and accepts tokens made with
    the private key.  etcd 3.4.23 itself stops on that Authenticate ("apply
    failed: auth: token signing attempted with verify-only key; stopping
    the member"), so its answer is not the specification here: cetcd
    answers the error and lives."""
    if against_etcd():
        pytest.skip("etcd 3.4.23 stops the member here")
    priv, pub = make_keys(tmp_path, "rsa")
    srv = server(make_server, token_opt("RS256", None, pub))
    enable_auth(srv)
    with pytest.raises(grpc.RpcError) as e:
        authenticate(srv)
    assert (e.value.code(), e.value.details()) == (
        grpc.StatusCode.UNKNOWN,
        "auth: token signing attempted with verify-only key")
    rev = 1000  # not older than the store: a write checks only that
    tok = jwt.encode({"username": "root", "revision": rev,
                      "exp": int(time.time()) + 60}, sign_key(priv),
                     algorithm="RS256")
    srv.kv().Put(rpc_pb2.PutRequest(key=b"k", value=b"v"),
                 metadata=[("token", tok)], timeout=10)
    # a read also compares the token's revision with the store's after it
    # reads (etcd's doSerialize; etcd 3.4.23 with both keys answers the
    # same to such a token: test_future_revision_token)
    assert range_err(srv, tok) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "etcdserver: revision of auth store is old")
    assert srv.proc.poll() is None


def test_future_revision_token(make_server, tmp_path):
    """A JWT signed with an auth revision ahead of the store's: a Put
    passes (the applier refuses only older revisions) and a Range answers
    "revision of auth store is old" (the read's second look wants the
    store's revision itself), on cetcd and on etcd 3.4.23 alike."""
    priv, pub = make_keys(tmp_path, "rsa")
    got = []
    for binary, name in ((None, "m1"), (ETCD_BIN, "ref")):
        if binary is None and against_etcd():
            continue
        srv = server(make_server, token_opt("RS256", priv, pub),
                     binary=binary, name=name)
        enable_auth(srv)
        tok = jwt.encode({"username": "root", "revision": 1000,
                          "exp": int(time.time()) + 60}, sign_key(priv),
                         algorithm="RS256")
        srv.kv().Put(rpc_pb2.PutRequest(key=b"k", value=b"v"),
                     metadata=[("token", tok)], timeout=10)
        got.append(range_err(srv, tok))
    assert set(got) == {(grpc.StatusCode.INVALID_ARGUMENT,
                         "etcdserver: revision of auth store is old")}, got


def start_refused(binary, opt, d):
    cp = subprocess.run([binary, "--data-dir", str(d), "--auth-token", opt,
                         "--listen-client-urls", "http://127.0.0.1:0",
                         "--advertise-client-urls", "http://127.0.0.1:2379",
                         "--listen-peer-urls", "http://127.0.0.1:0"],
                        capture_output=True, text=True, timeout=60,
                        cwd=str(d.parent))
    return cp.returncode, cp.stdout + cp.stderr


def test_bad_options(tmp_path):
    """Each option string etcd refuses at start, cetcd refuses with the
    same error (etcd 3.4.23's text, checked on both)."""
    rsa_priv, rsa_pub = make_keys(tmp_path, "rsa")
    ec_priv, ec_pub = make_keys(tmp_path, "P-256")
    cases = [
        ("jwt,sign-method=XX256,priv-key=%s" % rsa_priv,
         "auth: invalid auth options"),
        ("jwt,priv-key=%s" % rsa_priv, "auth: invalid auth options"),
        ("jwt,sign-method=RS256", "auth: missing key data"),
        ("jwt,sign-method=HS256,pub-key=%s" % rsa_pub,
         "auth: missing key data"),
        ("jwt,sign-method=RS256,priv-key=%s" % (tmp_path / "nofile"),
         "auth: invalid auth options"),
        ("jwt,sign-method=RS256,priv-key=%s,ttl=5x" % rsa_priv,
         "auth: invalid auth options"),
        ("jwt,sign-method=RS256,priv-key=%s,bogus" % rsa_priv,
         "auth: invalid auth options"),
        ("jwt,sign-method=RS256,priv-key=%s,sign-method=RS256" % rsa_priv,
         "auth: invalid auth options"),
        ("jwt,sign-method=RS256,priv-key=a=b", "auth: invalid auth options"),
        ("bogus", "auth: invalid auth options"),
        # the key is not of the method's kind: both refuse (etcd's text is
        # Go's x509 parser's, ours golang-jwt's)
        ("jwt,sign-method=RS256,priv-key=%s" % ec_priv, None),
        ("jwt,sign-method=ES256,priv-key=%s" % rsa_priv, None),
        ("jwt,sign-method=ES256,pub-key=%s" % rsa_pub, None),
    ]
    for i, (opt, msg) in enumerate(cases):
        d = tmp_path / ("d%d" % i)
        rc, out = start_refused(server_bin(), opt, d)
        assert rc != 0, (opt, out)
        if msg:
            assert msg in out, (opt, out)
        if not against_etcd():
            rc, ref = start_refused(ETCD_BIN, opt, tmp_path / ("e%d" % i))
            assert rc != 0, (opt, ref)
            if msg:
                assert msg in ref, (opt, ref)
    # a public key that is not the private key's: etcd keeps the private
    # one silently; cetcd refuses the configuration
    if not against_etcd():
        other_priv, other_pub = make_keys(tmp_path, "rsa", tag="o")
        rc, out = start_refused(server_bin(), token_opt(
            "RS256", rsa_priv, other_pub), tmp_path / "mm")
        assert rc != 0 and "auth: public and private keys don't match" in out


def test_gateway_jwt(make_server, tmp_path):
    """The /v3 gateway: /v3/auth/authenticate answers a JWT, which the
    Authorization header carries for a range; a tampered one is etcd's
    invalid auth token (HTTP 401, gRPC code 16)."""
    import json
    import urllib.error
    import urllib.request
    priv, pub = make_keys(tmp_path, "P-384")
    srv = server(make_server, token_opt("ES384", priv, pub))
    enable_auth(srv)

    def post(path, body, tok=None):
        req = urllib.request.Request(srv.client_url + path,
                                     data=json.dumps(body).encode(),
                                     method="POST")
        if tok:
            req.add_header("Authorization", tok)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    st, body = post("/v3/auth/authenticate",
                    {"name": "root", "password": ROOT_PW})
    assert st == 200
    tok = body["token"]
    assert jwt.decode(tok, open(pub, "rb").read(),
                      algorithms=["ES384"])["username"] == "root"
    st, body = post("/v3/kv/range", {"key": "aw=="}, tok)
    assert st == 200 and "header" in body
    st, body = post("/v3/kv/range", {"key": "aw=="}, tok[:-2])
    assert (st, body.get("code"), body.get("error")) == (
        401, 16, "etcdserver: invalid auth token")
