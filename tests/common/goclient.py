"""The goclient program (tests/goclient/main.go: etcd's Go client recipes
checked against a server), built on first use.

goclient_bin() builds it with tests/goclient/build.sh into
$CETCD_BUILD_DIR/goclient (else <repo>/build/goclient) unless a binary
newer than main.go is there, and returns its path; run_goclient() runs
some of its checks and returns (exit code, output lines without the Go
client's own JSON log lines).
"""

import os
import subprocess

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.path.join(REPO, "tests", "goclient")


def goclient_bin():
    out = os.path.join(os.environ.get("CETCD_BUILD_DIR") or
                       os.path.join(REPO, "build"), "goclient")
    path = os.path.join(out, "goclient")
    src = os.path.join(SRC, "main.go")
    if not (os.access(path, os.X_OK) and
            os.path.getmtime(path) >= os.path.getmtime(src)):
        env = dict(os.environ, GOCACHE_DIR=os.path.join(out, "gocache"))
        subprocess.run(["sh", os.path.join(SRC, "build.sh"), out], env=env,
                       check=True, capture_output=True, timeout=600)
    return path


def run_goclient(endpoints, checks, faults=False, timeout=300):
    args = [goclient_bin(), "-endpoints", ",".join(endpoints)]
    if faults:
        args.append("-faults")
    p = subprocess.run(args + list(checks), capture_output=True, text=True,
                       timeout=timeout)
    lines = [ln for ln in (p.stdout + p.stderr).splitlines()
             if ln and not ln.startswith("{")]
    return p.returncode, lines
