"""Multi-member clusters on 127.0.0.1 for the fault tests.

Goal: start a 3- or 5-member cluster of the server under test (cetcd, or
the real etcd 3.4.23 that is the specification) on free ports with every
peer link going through a PeerProxy (proxy.py) the test controls, and give
tests the operations a nemesis needs: kill -9 and restart a member on its
data dir, SIGSTOP/SIGCONT, partition/heal/delay links, find the leader, and
wait until all members hold the same revision and the same content.

Method: the binary is $CETCD_BIN (default <repo>/build/cetcd), or
/usr/bin/etcd with CETCD_TEST_AGAINST_ETCD=1, as in
tests/integration/conftest.py.  It gets etcd's own flags only.  Member M
listens for peers on a private port and advertises the proxy's port, so
every member's --initial-cluster names the proxies.  Readiness and
everything else is judged over gRPC (Maintenance.Status, KV.Range), never
from log lines.  Each member logs to <root>/<name>.log.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import grpc

from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc

from common.servers import (  # tests/ is on sys.path: see conftest.py
    ETCD_BIN, ClientAddress, against_etcd, free_port, log_tail,
    range_answers, server_bin)
from proxy import PeerProxy


def multi_member_support(binary=None, wait_s=3.0):
    """(True, "") when the binary stays up with a 3-member --initial-cluster
    (waiting for its peers, as etcd does), else (False, why): it is missing,
    or it exited and said why (as cetcd does before clusters exist)."""
    binary = binary or server_bin()
    if not os.path.exists(binary):
        return False, "server binary %s does not exist" % binary
    root = tempfile.mkdtemp(prefix="cetcd-probe-")
    ports = [free_port() for _ in range(4)]
    peers = ",".join("p%d=http://127.0.0.1:%d" % (i, ports[i])
                     for i in range(3))
    args = [binary, "--name", "p0", "--data-dir", os.path.join(root, "d"),
            "--listen-client-urls", "http://127.0.0.1:%d" % ports[3],
            "--advertise-client-urls", "http://127.0.0.1:%d" % ports[3],
            "--listen-peer-urls", "http://127.0.0.1:%d" % ports[0],
            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % ports[0],
            "--initial-cluster", peers, "--initial-cluster-token", "probe",
            "--initial-cluster-state", "new"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=root)
    try:
        out, _ = proc.communicate(timeout=wait_s)
        return False, "%s exited (%s) with a 3-member --initial-cluster: %s" \
            % (binary, proc.returncode, out.decode("utf-8", "replace")[-300:])
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return True, ""
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Member(ClientAddress):
    """One member: fixed name, ports and data dir across restarts."""

    def __init__(self, name, root):
        self.name = name
        self.data_dir = os.path.join(root, name + ".data")
        self.log_path = os.path.join(root, name + ".log")
        self.client_port = free_port()
        self.peer_port = free_port()     # where the member really listens
        self.proxy_port = free_port()    # what it advertises (the proxy)
        self.proc = None
        self.paused = False
        self.id = None                   # raft member id, once known
        self.starts = 0
        self._channel = None

    @property
    def advertised_peer_url(self):
        return "http://127.0.0.1:%d" % self.proxy_port

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def channel(self):
        if self._channel is None:
            self._channel = grpc.insecure_channel(self.endpoint)
        return self._channel

    def reset_channel(self):
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def kv(self):
        return rpc_pb2_grpc.KVStub(self.channel())

    def maintenance(self):
        return rpc_pb2_grpc.MaintenanceStub(self.channel())

    def log_tail(self, n=30):
        return log_tail(self.log_path, n)

    def __repr__(self):
        return "<%s %s%s>" % (self.name, self.endpoint,
                              " paused" if self.paused else
                              "" if self.running else " down")


class Cluster:
    """A cluster of `size` members behind a PeerProxy.

    Timing flags default to heartbeat 100 ms / election 1000 ms: short
    enough for fast failover, long enough that 2 shared cores running five
    members, a python proxy and clients do not cause spurious elections.
    """

    def __init__(self, size=3, binary=None, heartbeat_ms=100,
                 election_ms=1000, extra_args=(), token=None):
        assert size in (1, 3, 5, 7)
        self.binary = binary or server_bin()
        self.root = tempfile.mkdtemp(prefix="cetcd-cluster-")
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.extra_args = list(extra_args)
        self.token = token or "cetcd-cluster-%d" % os.getpid()
        self.members = [Member("m%d" % (i + 1), self.root)
                        for i in range(size)]
        self.proxy = PeerProxy(self._pids)
        for m in self.members:
            self.proxy.add_member(m.name, m.proxy_port, m.peer_port)

    # -- addresses ------------------------------------------------------------
    def _pids(self):
        return {m.name: m.proc.pid for m in self.members if m.running}

    def member(self, name):
        return next(m for m in self.members if m.name == name)

    @property
    def quorum(self):
        return len(self.members) // 2 + 1

    def initial_cluster(self):
        return ",".join("%s=%s" % (m.name, m.advertised_peer_url)
                        for m in self.members)

    def args(self, m):
        return [
            self.binary,
            "--name", m.name,
            "--data-dir", m.data_dir,
            "--listen-client-urls", m.client_url,
            "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", "http://127.0.0.1:%d" % m.peer_port,
            "--initial-advertise-peer-urls", m.advertised_peer_url,
            "--initial-cluster", self.initial_cluster(),
            "--initial-cluster-token", self.token,
            "--initial-cluster-state", "new",
            "--heartbeat-interval", str(self.heartbeat_ms),
            "--election-timeout", str(self.election_ms),
        ] + self.extra_args

    # -- lifecycle ------------------------------------------------------------
    def start(self, timeout=30.0):
        for m in self.members:
            self.spawn(m)
        for m in self.members:
            self.wait_ready(m, timeout)
        self.learn_ids()
        return self

    def spawn(self, m):
        """Start m's process (on its existing data dir if any); no wait."""
        assert not m.running, "%s already running" % m.name
        m.starts += 1
        with open(m.log_path, "ab") as log:
            log.write(("\n===== start #%d: %s\n" % (
                m.starts, " ".join(self.args(m)))).encode())
            log.flush()
            m.proc = subprocess.Popen(self.args(m), stdout=log,
                                      stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, cwd=self.root)
        m.paused = False

    def wait_ready(self, m, timeout=30.0):
        """Until m answers a linearizable Range (so it has caught up with a
        leader's commit index)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if not m.running:
                raise RuntimeError("%s exited (%s); log tail:\n%s" % (
                    m.name, m.proc.returncode if m.proc else None,
                    m.log_tail()))
            last = range_answers(grpc.insecure_channel(m.endpoint))
            if last is None:
                m.reset_channel()
                return
            time.sleep(0.05)
        raise RuntimeError("%s not ready after %.0fs (last %r); log tail:\n%s"
                           % (m.name, timeout, last, m.log_tail()))

    def kill(self, m):
        """kill -9 (resuming first is not needed: SIGKILL works on a stopped
        process)."""
        if m.proc is None:
            return
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait()
        m.proc = None
        m.paused = False
        m.reset_channel()

    def restart(self, m, timeout=30.0, wait=True):
        if m.running:
            self.kill(m)
        self.spawn(m)
        if wait:
            self.wait_ready(m, timeout)

    def pause(self, m):
        m.proc.send_signal(signal.SIGSTOP)
        m.paused = True

    def resume(self, m):
        m.proc.send_signal(signal.SIGCONT)
        m.paused = False

    def close(self, keep=None):
        for m in self.members:
            if m.running:
                if m.paused:
                    self.resume(m)
                m.proc.kill()
                m.proc.wait()
            m.reset_channel()
        self.proxy.close()
        if keep is None:
            keep = os.environ.get("CETCD_KEEP_CLUSTER") == "1"
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- network --------------------------------------------------------------
    def partition(self, *groups):
        """partition([m1], [m2, m3]) with Members or names."""
        self.proxy.partition([[getattr(m, "name", m) for m in g]
                              for g in groups])

    def isolate(self, m):
        self.proxy.isolate(m.name)

    def cut(self, a, b):
        self.proxy.cut(a.name, b.name)

    def heal(self):
        self.proxy.heal()

    def delay(self, a, b, seconds):
        self.proxy.set_delay(a.name, b.name, seconds)

    # -- observation ----------------------------------------------------------
    def status(self, m, timeout=1.0):
        """Maintenance.Status of m, or None if it does not answer."""
        if not m.running or m.paused:
            return None
        try:
            return m.maintenance().Status(rpc_pb2.StatusRequest(),
                                          timeout=timeout)
        except grpc.RpcError:
            return None

    def learn_ids(self):
        for m in self.members:
            st = self.status(m, timeout=5)
            assert st is not None, "%s gives no status" % m.name
            m.id = st.header.member_id
        assert len({m.id for m in self.members}) == len(self.members)

    def by_id(self, member_id):
        return next((m for m in self.members if m.id == member_id), None)

    def leader(self, among=None):
        """The member a quorum of the cluster agrees is the leader (and that
        says so itself), asked now; None if there is no such member."""
        among = among if among is not None else self.members
        votes = {}
        for m in among:
            st = self.status(m)
            if st is not None and st.leader:
                votes.setdefault(st.leader, []).append(st)
        for lid, sts in votes.items():
            lm = self.by_id(lid)
            if lm is None or len(sts) < self.quorum:
                continue
            if any(s.header.member_id == lid for s in sts):
                return lm
        return None

    def wait_leader(self, timeout=15.0, among=None, exclude=()):
        """Wait for a quorum-backed leader not in exclude; returns it and
        how long it took."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            lm = self.leader(among)
            if lm is not None and lm not in exclude:
                return lm, time.monotonic() - t0
            time.sleep(0.05)
        raise AssertionError("no leader (excluding %s) after %.0fs: %s" % (
            [m.name for m in exclude], timeout,
            {m.name: self._status_line(m) for m in self.members}))

    def _status_line(self, m):
        st = self.status(m)
        if st is None:
            return "down" if not m.running else "paused" if m.paused \
                else "no answer"
        return "leader=%x term=%d index=%d" % (st.leader, st.raftTerm,
                                               st.raftIndex)

    def contents(self, m, timeout=5.0):
        """(revision, [(key, value, create, mod, version)]) from a
        serializable full Range served by m alone."""
        resp = m.kv().Range(rpc_pb2.RangeRequest(
            key=b"\0", range_end=b"\0", serializable=True), timeout=timeout)
        return resp.header.revision, [
            (kv.key, kv.value, kv.create_revision, kv.mod_revision,
             kv.version) for kv in resp.kvs]

    def wait_converged(self, timeout=20.0, members=None):
        """Until every member (all by default; they must be up) reports the
        same revision and the same content; returns (revision, content)."""
        members = members or self.members
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                seen = [self.contents(m) for m in members]
            except grpc.RpcError as e:
                last = e
                time.sleep(0.1)
                continue
            if all(s == seen[0] for s in seen):
                return seen[0]
            last = {m.name: s[0] for m, s in zip(members, seen)}
            time.sleep(0.1)
        raise AssertionError("members did not converge in %.0fs: %r" % (
            timeout, last))
