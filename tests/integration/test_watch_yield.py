"""Watch streams yield their connection, and never stall a client.

Goal: a Watch stream keeps only a budget of bytes unacknowledged by the
client's connection-level flow control (rpc/stream.c "background
streams"); no client may be stalled by that, whatever it does with its
window: grpc-go (etcdctl) gives window back only after a quarter of it
was read, grpc's C core (python-etcd3) sooner.  And a client that reads
its events slowly on the connection it writes on still gets every put
answered and every event, in order, once.

Method: 8-10 MiB of events (32 KiB values) go through one watch of
etcdctl (its own connection, puts from python-etcd3), then through a
python-etcd3 watch that shares its channel with the puts and reads slowly
at first; the stdout / the events are checked whole.  A stall (a deferred
stream nobody resumes) fails by timeout.
"""

import os
import selectors
import subprocess
import threading
import time

from conftest import ETCDCTL_BIN

VALUE = 32 * 1024


def test_etcdctl_watch_gets_every_big_event(server):
    n = 300
    env = dict(os.environ, ETCDCTL_API="3")
    rev = server.rev()
    proc = subprocess.Popen(
        [ETCDCTL_BIN, "--endpoints", server.endpoint, "watch", "--prefix",
         "yield/", "--rev", str(rev + 1)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    c = server.client()
    try:
        for i in range(n):
            c.put("yield/%04d" % i, chr(ord("a") + i % 26) * VALUE)
        want = n * (len("PUT\nyield/0000\n") + VALUE + 1)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        out = bytearray()
        end = time.time() + 120
        while len(out) < want and time.time() < end:
            if sel.select(timeout=0.5):
                chunk = os.read(proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    break
                out += chunk
    finally:
        proc.kill()
        proc.wait()
        c.close()
    lines = bytes(out).split(b"\n")
    keys = [l for l in lines if l.startswith(b"yield/")]
    assert len(out) == want, "got %d of %d bytes" % (len(out), want)
    assert keys == [b"yield/%04d" % i for i in range(n)]


def test_slow_reader_on_the_writers_connection(server):
    n = 250
    c = server.client()
    rev = server.rev()
    events, cancel = c.watch_prefix("slow/", start_revision=rev + 1)
    got = []
    done = threading.Event()

    def reader():
        for ev in events:
            if len(got) < 20:
                time.sleep(0.05)  # slow at first: the stream backs up
            got.append((ev.key, ev.mod_revision, len(ev.value)))
            if len(got) == n:
                break
        done.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        for i in range(n):
            c.put("slow/%04d" % i, "v" * VALUE)  # same channel as the watch
        assert done.wait(120), "got %d of %d events" % (len(got), n)
    finally:
        cancel()
        t.join(10)
        c.close()
    assert [k for k, _, _ in got] == [b"slow/%04d" % i for i in range(n)]
    assert [r for _, r, _ in got] == list(range(rev + 1, rev + 1 + n))
    assert all(size == VALUE for _, _, size in got)
