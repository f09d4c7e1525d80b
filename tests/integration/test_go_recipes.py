"""The recipes of etcd's official Go client (clientv3 3.4, what etcdctl,
Kubernetes and most Go programs link) keep their promises on the server.

Goal: each recipe a Go program builds coordination on works unchanged:
  - concurrency.Mutex: 6 sessions x 25 critical sections, each appending
    its id to one key with a txn guarded by IsOwner; never two holders in
    the process at once, every id there exactly once, no fenced write
    refused, no lock key left;
  - concurrency.Election: 5 candidates campaign, proclaim, read Leader(),
    resign; one leader at a time, every one leads, an observer sees every
    proclamation;
  - concurrency.NewSTM bank transfers (SerializableSnapshot and
    Serializable): every concurrent audit sums to the total, no account
    negative, the final sum kept;
  - leasing.NewKV on two clients: each reads the other's latest write and
    delete at once through its cache (a write revokes the other's lease);
  - mirror.Syncer: SyncBase, then SyncUpdates during puts and deletes: the
    copy equals the source;
  - namespace.NewKV/NewWatcher: the prefix is on the server's keys, not in
    answers or events.
A server that let two holders into the lock loses an id; one whose txn
compares or watch replays were wrong fails the STM sum, the leasing reads
or the mirror.  Also against etcd 3.4.23 (CETCD_TEST_AGAINST_ETCD=1).

Method: tests/goclient/main.go, built once against Debian's clientv3
sources (tests/common/goclient.py), run against a fresh member; its
"ok"/"FAIL" lines are the result.  A few seconds once built.
"""

from common.goclient import run_goclient

CHECKS = ["mutex", "election", "stm", "leasing", "mirror", "namespace"]


def test_go_client_recipes(server):
    rc, lines = run_goclient([server.endpoint], CHECKS)
    assert rc == 0, "\n".join(lines)
    done = {ln.split()[1] for ln in lines if ln.startswith("ok ")}
    assert done == set(CHECKS), lines
