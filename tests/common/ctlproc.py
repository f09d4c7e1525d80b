"""A long-running etcdctl (lock, elect, elect -l) whose output is read
line by line with timeouts, for the lock and election suites."""

import os
import queue
import signal
import subprocess
import threading

ETCDCTL_BIN = os.environ.get("ETCDCTL_BIN", "/usr/bin/etcdctl")


class CtlProc:
    """etcdctl --endpoints endpoint *args, stdout read by a thread."""

    def __init__(self, endpoint, *args, env_extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("ETCDCTL_")}
        env["ETCDCTL_API"] = "3"
        env.update(env_extra or {})
        self.p = subprocess.Popen(
            [ETCDCTL_BIN, "--endpoints", endpoint] + [str(a) for a in args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)
        self.lines = queue.Queue()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout=10):
        """The next stdout line; raises queue.Empty after timeout."""
        return self.lines.get(timeout=timeout)

    def no_line(self, timeout):
        """True when no line comes within timeout seconds."""
        try:
            self.lines.get(timeout=timeout)
        except queue.Empty:
            return True
        return False

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Signal it and wait; returns (rc, stderr)."""
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.returncode, self.p.stderr.read()
