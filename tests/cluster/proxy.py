"""A TCP proxy in front of every member's peer port, owned by the test.

Goal: let a test cut, heal or slow the link between any two members of a
cluster running on 127.0.0.1, without root, network namespaces or any help
from the server under test (etcd's rafthttp and cetcd's gRPC peer transport
look the same to it: bytes on TCP connections).

Method: member M listens for peers on a private port and advertises the
proxy's port for M instead (in --initial-advertise-peer-urls and in every
member's --initial-cluster), so every peer connection to M is accepted here
and forwarded.  A link is unordered: either member may have dialled the
connection and bytes flow both ways on it (etcd's stream connections carry
messages from the dialled member to the dialler), so a cut between A and B
stops every connection whose two ends are A and B.  The dialling member is
identified without parsing any protocol: the accepted socket's peer port is
looked up in /proc/net/tcp to get the socket inode, and the inode is found
among the file descriptors of the member processes (all ours).

While A and B are cut, existing A-B connections are aborted (RST) and new
ones are accepted and then black-holed (read and discarded, nothing sent
on) until the link heals, when they are aborted so the members redial.
A delay sleeps before forwarding each chunk, in both directions.

All of it runs on one asyncio loop in a daemon thread; the public methods
are thread-safe and return once the change has taken effect.
"""

import asyncio
import os
import threading


def _hex_port(addr):
    return int(addr.rsplit(":", 1)[1], 16)


def socket_inode(src_port, dst_port):
    """Inode of the TCP socket 127.0.0.1:src_port -> 127.0.0.1:dst_port
    (the dialler's end of a connection we accepted), or None.  Both tables
    are searched: gRPC's C core dials 127.0.0.1 from an IPv6 socket
    (v4-mapped ::ffff:127.0.0.1), which /proc lists in tcp6."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            f = open(table)
        except OSError:
            continue
        with f:
            next(f)
            for line in f:
                fields = line.split()
                if _hex_port(fields[1]) == src_port and \
                        _hex_port(fields[2]) == dst_port:
                    return fields[9]
    return None


def pid_owning(inode, pids):
    """Which of pids has socket:[inode] open, or None."""
    want = "socket:[%s]" % inode
    for pid in pids:
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) == want:
                    return pid
            except OSError:
                continue
    return None


class _Conn:
    """One accepted connection (and its upstream, once dialled)."""

    def __init__(self, pair, down_writer):
        self.pair = pair
        self.writers = [down_writer]

    def abort(self):
        for w in self.writers:
            try:
                w.transport.abort()
            except Exception:
                pass


class PeerProxy:
    """Proxies for the peer ports of one cluster.

    pids_by_name: a callable returning {member name: pid} for the members
    running now; it is called on each accepted connection to find out who
    dialled.
    """

    def __init__(self, pids_by_name):
        self._pids_by_name = pids_by_name
        self._targets = {}       # name -> (listen port, real peer port)
        self._servers = {}
        self._blocked = set()    # frozenset({a, b})
        self._delay_s = {}       # frozenset({a, b}) -> seconds
        self._conns = set()      # forwarding _Conn
        self._held = set()       # black-holed _Conn
        self.stats = {}          # frozenset pair -> counters
        self.unknown_senders = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="peer-proxy", daemon=True)
        self._thread.start()

    # -- thread-safe control ------------------------------------------------
    def _call(self, fn, *args, timeout=10):
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(
            timeout)

    def add_member(self, name, listen_port, peer_port):
        """Listen on listen_port and forward to peer_port for member name."""
        async def start():
            srv = await asyncio.start_server(
                lambda r, w: self._accept(name, r, w), "127.0.0.1",
                listen_port, reuse_address=True)
            self._servers[name] = srv
        self._targets[name] = (listen_port, peer_port)
        asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)

    def cut(self, a, b):
        self._call(self._cut, frozenset((a, b)))

    def isolate(self, name):
        for other in self._targets:
            if other != name:
                self.cut(name, other)

    def partition(self, groups):
        """Cut every link between members of different groups (a list of
        lists of names); links inside a group are left as they are."""
        where = {}
        for i, g in enumerate(groups):
            for n in g:
                where[n] = i
        assert set(where) == set(self._targets), "groups must cover all"
        names = sorted(where)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if where[a] != where[b]:
                    self.cut(a, b)

    def heal(self):
        """Restore every link (delays stay)."""
        self._call(self._heal)

    def set_delay(self, a, b, seconds):
        self._call(self._delay_s.__setitem__, frozenset((a, b)), seconds)

    def clear_delays(self):
        self._call(self._delay_s.clear)

    def blocked(self):
        return set(self._blocked)

    def close(self):
        async def stop():
            for srv in self._servers.values():
                srv.close()
            for c in list(self._conns) + list(self._held):
                c.abort()
            me = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not me]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    # -- loop side ----------------------------------------------------------
    def _stat(self, pair):
        return self.stats.setdefault(pair, {"accepted": 0, "held": 0,
                                            "bytes": 0, "aborted": 0})

    def _cut(self, pair):
        self._blocked.add(pair)
        for c in [c for c in self._conns if c.pair == pair]:
            self._stat(pair)["aborted"] += 1
            c.abort()
            self._conns.discard(c)

    def _heal(self):
        self._blocked.clear()
        for c in list(self._held):
            c.abort()
        self._held.clear()

    def _who(self, sport, listen_port):
        inode = socket_inode(sport, listen_port)
        if inode is None:
            return None
        names = self._pids_by_name()
        pid = pid_owning(inode, names.values())
        for n, p in names.items():
            if p == pid:
                return n
        return None

    async def _accept(self, target, reader, writer):
        listen_port, peer_port = self._targets[target]
        sport = writer.get_extra_info("peername")[1]
        sender = None
        for _ in range(5):
            sender = self._who(sport, listen_port)
            if sender is not None:
                break
            await asyncio.sleep(0.01)
        if sender is None or sender == target:
            self.unknown_senders += 1
            writer.transport.abort()
            return
        pair = frozenset((sender, target))
        conn = _Conn(pair, writer)
        st = self._stat(pair)
        st["accepted"] += 1
        if pair in self._blocked:
            st["held"] += 1
            self._held.add(conn)
            try:
                while await reader.read(65536):
                    pass
            except (ConnectionError, OSError):
                pass
            self._held.discard(conn)
            conn.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(
                "127.0.0.1", peer_port)
        except OSError:
            writer.transport.abort()
            return
        conn.writers.append(up_writer)
        self._conns.add(conn)
        try:
            await asyncio.gather(self._pump(reader, up_writer, pair),
                                 self._pump(up_reader, writer, pair))
        finally:
            self._conns.discard(conn)
            conn.abort()

    async def _pump(self, reader, writer, pair):
        st = self._stat(pair)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                delay = self._delay_s.get(pair)
                if delay:
                    await asyncio.sleep(delay)
                if pair in self._blocked:
                    break
                writer.write(data)
                st["bytes"] += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # Either direction ending ends the connection.
            try:
                writer.transport.abort()
            except Exception:
                pass
