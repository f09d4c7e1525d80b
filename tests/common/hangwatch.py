"""A watchdog for a test that hangs: every thread's stack, then exit.

Goal: a test that never ends fails the run at once, with every thread's
Python stack in its output, instead of holding CI until its limit with
nothing to show.  Session 37's CI hung once in the cluster stage: the
pytest process sat in futex waits (a known grpcio deadlock closing a
channel, grpc/grpc 20026 and 42247, takes the whole process with the
GIL held), and the harness's own threads (the peer proxies) froze with it.

Method: faulthandler's timer, armed for each test by the autouse fixture
hang_watch (the suites' conftest.py import it): its thread dumps the
stacks without the GIL and _exit()s the process after HANG_S seconds
($CETCD_TEST_HANG_S, 0: off).  The dump goes to a copy of the terminal's
stderr taken at pytest_configure (configure(), called from the
conftests' hook): during a test, pytest's capture holds fd 2, and its
file is lost at that exit.  pytest's own faulthandler_timeout only dumps,
and shares the same timer: it is not used beside this.
"""
import faulthandler
import os
import sys

import pytest

HANG_S = float(os.environ.get("CETCD_TEST_HANG_S", "600"))
_out = None


def configure():
    """From the conftest's pytest_configure: keep a copy of stderr."""
    global _out
    if _out is None:
        _out = os.fdopen(os.dup(sys.stderr.fileno()), "w")


@pytest.fixture(autouse=True)
def hang_watch():
    """Armed around each test of a suite whose conftest imports it."""
    if HANG_S <= 0 or _out is None:
        yield
        return
    faulthandler.dump_traceback_later(HANG_S, exit=True, file=_out)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
