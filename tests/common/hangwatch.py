"""A watchdog for a test that hangs: every thread's stack, then exit.

Goal: a test that never ends fails the run at once, with every thread's
Python stack in its output, instead of holding CI until its limit with
nothing to show.  Session 37's CI hung once in the cluster stage: the
pytest process sat in futex waits (a known grpcio deadlock closing a
channel, grpc/grpc 20026 and 42247, takes the whole process with the
GIL held), and the harness's own threads (the peer proxies) froze with it.

Method: faulthandler's timer, armed for each test (an autouse fixture in
the suites' conftest.py): its thread dumps the stacks without the GIL and
_exit()s the process after HANG_S seconds.  The dump goes to a copy of
the terminal's stderr taken at pytest_configure (configure()): during a
test, pytest's capture holds fd 2, and its file is lost at that exit.  $CETCD_TEST_HANG_S sets it
(0: off).  pytest's own faulthandler_timeout only dumps, and shares the
same timer: it is not used beside this.
"""
import faulthandler
import os
import sys

HANG_S = float(os.environ.get("CETCD_TEST_HANG_S", "600"))
_out = None


def configure():
    """From the conftest's pytest_configure: keep a copy of stderr."""
    global _out
    if _out is None:
        _out = os.fdopen(os.dup(sys.stderr.fileno()), "w")


def watch():
    """Generator body of the autouse fixture: armed around one test."""
    if HANG_S <= 0 or _out is None:
        yield
        return
    faulthandler.dump_traceback_later(HANG_S, exit=True, file=_out)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
