"""`etcdctl watch -i` (interactive), outputs checked against etcd 3.4.23.

Goal: etcdctl's interactive watch works on cetcd as on etcd: each `watch
<key> [<range_end>]` line opens a watcher (WithRequireLeader, so the
"hasleader" metadata is sent) on the one stream etcdctl shares, whose
events print as `etcdctl watch` prints them; `progress` sends a
RequestProgress and every open watcher prints "progress notify: <rev>"
at the current revision; an unknown command (`cancel`: etcdctl 3.4 has
none) and an empty line are refused on stderr with etcdctl's texts and the
session goes on; end of input ends etcdctl with its message and exit
code 3 (ExitInvalidInput).

Method: one etcdctl process per test, fed line by line on stdin; stdout
and stderr are read on threads; each step waits for the text it expects
(or times out) before the next.  Watches start at --rev=<current+1> so
what they print does not depend on when the stream was set up.  Every
expectation was checked against /usr/bin/etcd (CETCD_TEST_AGAINST_ETCD=1).
"""

import os
import subprocess
import threading
import time

from conftest import ETCDCTL_BIN


class Interactive:
    def __init__(self, server, *args):
        env = dict(os.environ, ETCDCTL_API="3")
        cmd = [ETCDCTL_BIN, "--endpoints", server.endpoint, "watch", "-i"]
        self.p = subprocess.Popen(cmd + [str(a) for a in args],
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        self.out, self.err = [b""], [b""]
        for pipe, buf in ((self.p.stdout, self.out), (self.p.stderr,
                                                      self.err)):
            threading.Thread(target=self._read, args=(pipe, buf),
                             daemon=True).start()

    @staticmethod
    def _read(pipe, buf):
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            buf[0] += chunk

    def send(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def wait(self, buf, text, timeout=10.0):
        end = time.time() + timeout
        while time.time() < end:
            if text in buf[0].decode():
                return buf[0].decode()
            time.sleep(0.05)
        raise AssertionError("no %r in %r" % (text, buf[0].decode()))

    def stdout(self, text, **kw):
        return self.wait(self.out, text, **kw)

    def stderr(self, text, **kw):
        return self.wait(self.err, text, **kw)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def test_watch_interactive_session(server):
    rev = server.rev()
    w = Interactive(server, "--rev", rev + 1)
    try:
        w.send("watch foo")
        w.send("watch a c")
        time.sleep(0.5)  # both watchers are registered before the writes
        server.ctl("put", "foo", "1")
        server.ctl("put", "b", "2")
        server.ctl("put", "zzz", "3")
        out = w.stdout("PUT\nb\n2\n")
        assert out == "PUT\nfoo\n1\nPUT\nb\n2\n", out
        server.ctl("put", "x", "y")
        rev = server.rev()
        w.send("progress")
        want = "progress notify: %d\n" % rev
        out = w.stdout(want * 2)
        assert out == "PUT\nfoo\n1\nPUT\nb\n2\n" + want * 2, out
        w.send("cancel")
        w.stderr("Invalid command cancel (only support watch)\n")
        w.send("")
        err = w.stderr("Invalid command:  (watch and progress supported)\n")
        assert err == ("Invalid command cancel (only support watch)\n"
                       "Invalid command:  (watch and progress supported)\n")
        w.send("watch")
        w.stderr("Invalid command watch (command type or key is not "
                 "provided)\n")
        server.ctl("put", "foo", "4")  # the session goes on
        w.stdout("progress notify: %d\n" % rev * 2 + "PUT\nfoo\n4\n")
        w.p.stdin.close()
        assert w.p.wait(timeout=10) == 3  # ExitInvalidInput
        w.stderr("Error: Error reading watch request line: EOF\n")
    finally:
        w.close()
