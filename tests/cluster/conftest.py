"""Fixtures for the cluster fault suite.

Goal: hand tests fresh multi-member clusters (cluster.py) and make sure
none outlives its test; skip the cluster tests, with the server's own
reason, while the server under test cannot form clusters yet; attach the
members' log tails to a failing test's report.

Method: a session-wide probe (cluster.multi_member_support) starts the
binary once with a 3-member --initial-cluster: a server that exits with a
message is not cluster-capable and every test using make_cluster is
skipped.  Against etcd (CETCD_TEST_AGAINST_ETCD=1) nothing is skipped.
CETCD_SKIP_CLUSTER_TESTS=1 skips them explicitly (for CI while a server
that accepts clusters still lacks pieces the faults need).
"""

import os
import signal
import sys

import pytest

# tests/ on the path, for the code shared with tests/integration (common/).
_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
import cluster as clusterlib  # noqa: E402
from common import hangwatch  # noqa: E402
from common.hangwatch import hang_watch  # noqa: E402,F401 (autouse)

# A shell that starts pytest in the background without job control makes
# it ignore SIGINT, and every process a test starts inherits that: etcdctl
# and cetcdctl would then outlive the SIGINT a test sends them (Ctrl-C
# tests).  Python's own handler instead: children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_LIVE = []


def pytest_configure(config):
    hangwatch.configure()
    config.addinivalue_line(
        "markers", "cluster: needs a multi-member cluster of the server "
        "under test (skipped while it cannot form one)")


@pytest.fixture(scope="session")
def cluster_capable():
    if os.environ.get("CETCD_SKIP_CLUSTER_TESTS") == "1":
        pytest.skip("CETCD_SKIP_CLUSTER_TESTS=1")
    ok, why = clusterlib.multi_member_support()
    if not ok:
        if clusterlib.against_etcd():
            pytest.fail("etcd cannot form a cluster here: " + why)
        pytest.skip("server under test cannot form clusters yet: " + why)
    return True


@pytest.fixture
def make_cluster(cluster_capable):
    """Factory: make_cluster(size=3, **kw) -> started Cluster."""
    made = []

    def factory(size=3, start=True, **kw):
        c = clusterlib.Cluster(size, **kw)
        made.append(c)
        _LIVE.append(c)
        if start:
            c.start()
        return c

    yield factory
    for c in made:
        _LIVE.remove(c)
        c.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for c in _LIVE:
            for m in c.members:
                rep.sections.append(("member %s log tail (%s)" % (
                    m.name, m.log_path), m.log_tail()))
