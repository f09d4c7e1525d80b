"""The most used Node.js etcd client, the npm package etcd3 (1.1.2), works
unchanged on the server.

Goal: etcd3 speaks gRPC through @grpc/grpc-js, Node's own HTTP/2 stack (not
the Go, C-core or Python implementations the other suites drive); each of
its features keeps its promises:
  - kv: put/get/getAll with prefix, range, sort, limit and count, reads at
    an older revision, prev_kv on put and delete, touch, txns on value,
    version, create and mod revision (create-if-absent wins once, loses
    once), a 1 MiB value and binary keys/values byte-exact, the revision
    one higher per write and unchanged by reads and failed txns;
  - lease: a 2 s lease kept alive holds its keys 5 s; one not kept alive
    loses them after its TTL and is then reported `lost`; revoke deletes
    the keys; a lease revoked under a running keepalive is reported `lost`;
  - watch: three watchers multiplexed on one stream each get exactly their
    events (values, prev_kv, revisions, 100 concurrent puts in revision
    order); history replays from an older revision; cancel stops delivery;
    a watch from a compacted revision ends with the client's "Watcher
    canceled" error, as etcd 3.4.23 answers it (canceled, compact_revision);
  - lock: 6 lockers x 5 read-modify-write sections on one counter: never
    two holders, the counter exact, no lock key left;
  - election: 4 candidates, one leader at a time, proclaim and resign seen
    in order by an observer (started once a leader exists: etcd3's
    observer, started with none, takes the last of several campaign puts
    in one watch answer as the leader, a client bug seen on etcd too);
  - stm: concurrent transfers among 5 accounts while audits in STM always
    sum to the total; the final sum exact; under the default isolation
    every transfer rewrites all accounts (etcd3's SerializableSnapshot
    conflicts forever on written keys with different mod revisions, a
    client bug seen on etcd too), then under Serializable just two;
  - namespace: the prefix is on the server's keys, not in answers or
    events.
A server with a wrong compare, revision read, watch replay, lease expiry or
keepalive answer shows as a value, event or count different from the one
the check computed, or as a timeout.  Also against etcd 3.4.23
(CETCD_TEST_AGAINST_ETCD=1), with every check.

Method: tests/nodeclient/recipes.js run by node with the package-lock.json
pinned etcd3 installed once by npm ci (tests/common/nodeclient.py) against
a fresh member; its "ok"/"FAIL" lines are the result.  About 10 s once
installed (npm ci: about 3 s).
"""

from common.nodeclient import run_nodeclient

CHECKS = ["kv", "lease", "watch", "lock", "election", "stm", "namespace"]


def test_node_client(server):
    rc, lines = run_nodeclient([server.endpoint], CHECKS)
    assert rc == 0, "\n".join(lines)
    done = {ln.split()[1] for ln in lines if ln.startswith("ok ")}
    assert done == set(CHECKS), lines
