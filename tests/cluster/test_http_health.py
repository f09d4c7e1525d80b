"""/health, /readyz, /livez and /metrics of a member that has lost its
leader.

Goal: as etcd 3.4, /health of a member without a leader is 503
{"health":"false"}, and etcd_server_has_leader says 0; it is 200 again once
the member is back in the cluster.  etcd 3.5's /health?serializable=true
skips the leader check: 200 {"health":"true"} meanwhile (cetcd only: 3.4
ignores the option).  etcd 3.6's /readyz fails its
linearizable_read check meanwhile while /livez (a serializable read) stays
ok (cetcd only: 3.4 has neither).

Method: a 3-member cluster behind the peer proxy (cluster.py); one
follower is isolated, so it loses its leader after an election timeout;
HTTP with curl on its client URL.  Also with the two other members
killed (-9): the one left answers the same.  Checked against etcd 3.4.23 too
(CETCD_TEST_AGAINST_ETCD=1), but for the 3.6 endpoints.
"""

import subprocess
import time

import pytest

from common.servers import against_etcd

pytestmark = pytest.mark.cluster


def get(url):
    cp = subprocess.run(["curl", "-s", "-m", "10", "-w", "\n%{http_code}",
                         url], capture_output=True, text=True, timeout=20)
    body, _, code = cp.stdout.rpartition("\n")
    return int(code), body


def wait_status(url, code, timeout=15):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = get(url)
        if got[0] == code:
            return got
        time.sleep(0.2)
    raise AssertionError("%s: no %d within %ds (last %r)" % (url, code,
                                                             timeout, got))


def wait_no_leader(url, timeout=15):
    """Until the member's /metrics says etcd_server_has_leader 0."""
    t0 = time.monotonic()
    while "\netcd_server_has_leader 0\n" not in get(url + "/metrics")[1]:
        assert time.monotonic() - t0 < timeout, "has_leader stays 1"
        time.sleep(0.2)


def test_health_without_leader(make_cluster):
    c = make_cluster(3)
    c.learn_ids()
    lead, _ = c.wait_leader()
    f = next(m for m in c.members if m is not lead)
    url = f.client_url
    assert get(url + "/health") == (200, '{"health":"true"}')
    c.isolate(f)
    assert wait_status(url + "/health", 503) == (503,
                                                 '{"health":"false"}\n')
    # /health fails as soon as its read does (etcd: 1 s); the member
    # forgets its leader an election timeout later.
    wait_no_leader(url)
    assert get(url + "/health") == (503, '{"health":"false"}\n')
    # etcd 3.5's ?serializable=true checks the member alone: no leader
    # check, a local read (3.5's checkHealth); etcd 3.4 ignores it.
    if against_etcd():
        assert get(url + "/health?serializable=true") == (
            503, '{"health":"false"}\n')
    else:
        assert get(url + "/health?serializable=true") == (
            200, '{"health":"true"}')
    assert get(url + "/health?serializable=false") == (
        503, '{"health":"false"}\n')
    if not against_etcd():
        code, body = get(url + "/readyz?verbose")
        assert code == 503
        assert "[-]linearizable_read failed: " in body
        assert body.endswith("\n\n")  # http.Error's newline
        assert get(url + "/livez") == (200, "ok\n")
    c.heal()
    assert wait_status(url + "/health", 200, timeout=30) == (
        200, '{"health":"true"}')


def test_health_with_two_members_stopped(make_cluster):
    """The issue's case: two of three members stopped, the one left has no
    leader: /health 503 false, /readyz 503 (cetcd), /livez still ok."""
    c = make_cluster(3)
    lead, _ = c.wait_leader()
    left = next(m for m in c.members if m is not lead)
    url = left.client_url
    assert get(url + "/health") == (200, '{"health":"true"}')
    for m in c.members:
        if m is not left:
            c.kill(m)
    assert wait_status(url + "/health", 503) == (503,
                                                 '{"health":"false"}\n')
    wait_no_leader(url)
    if not against_etcd():
        assert wait_status(url + "/readyz", 503)[0] == 503
        assert get(url + "/livez") == (200, "ok\n")
