"""The nodeclient checks (tests/nodeclient/recipes.js: the npm etcd3 client,
gRPC over @grpc/grpc-js, checked against a server), installed on first use.

nodeclient_dir() installs the pinned etcd3 package with
tests/nodeclient/install.sh into $CETCD_BUILD_DIR/nodeclient (else
<repo>/build/nodeclient) unless the package-lock.json there equals the
source one and node_modules/etcd3 is there, and returns that directory;
run_nodeclient() runs some of the checks with NODE_PATH pointing into it
and returns (exit code, output lines).
"""

import os
import subprocess

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.path.join(REPO, "tests", "nodeclient")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def nodeclient_dir():
    out = os.path.join(os.environ.get("CETCD_BUILD_DIR") or
                       os.path.join(REPO, "build"), "nodeclient")
    lock = _read(os.path.join(SRC, "package-lock.json"))
    if not (_read(os.path.join(out, "package-lock.json")) == lock and
            os.path.isfile(os.path.join(out, "node_modules", "etcd3",
                                        "package.json"))):
        p = subprocess.run(["sh", os.path.join(SRC, "install.sh"), out],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError("tests/nodeclient/install.sh %s failed (%d):\n%s"
                               % (out, p.returncode, p.stdout + p.stderr))
    return out


def run_nodeclient(endpoints, checks, timeout=180):
    env = dict(os.environ,
               NODE_PATH=os.path.join(nodeclient_dir(), "node_modules"))
    p = subprocess.run(["node", os.path.join(SRC, "recipes.js"),
                        "--endpoints", ",".join(endpoints)] + list(checks),
                       capture_output=True, text=True, timeout=timeout,
                       env=env)
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln]
    return p.returncode, lines
