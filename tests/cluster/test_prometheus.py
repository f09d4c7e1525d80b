"""A real Prometheus scrapes a 3-member cluster; the etcd-mixin's alerts
find every series they read.

Goal: Debian's Prometheus (the server people run) scrapes each member's
/metrics without an error, and a rule file holding one alert per alert of
etcd's monitoring mixin (etcdMembersDown, etcdInsufficientMembers,
etcdNoLeader, etcdHighNumberOfLeaderChanges,
etcdHighNumberOfFailedGRPCRequests, etcdGRPCRequestsSlow,
etcdMemberCommunicationSlow, etcdHighNumberOfFailedProposals,
etcdHighFsyncDurations, etcdHighCommitDurations, etcdBackendQuotaLowSpace,
etcdExcessiveDatabaseGrowth, etcdDatabaseHighFragmentationRatio), written
here over the series those alerts read, evaluates with every rule healthy
and every series it reads present on every member: no alert is silently
blind.  The members run with --metrics extensive, which the mixin's
gRPC-latency alert needs (etcd registers that histogram only then too).
Against a healthy cluster none of the alerts fires.

Also passes against etcd 3.4.23 (CETCD_TEST_AGAINST_ETCD=1), but for the
peer send-failure counter, which etcd writes only after a first failure.
Fails when the members run with --metrics basic (no gRPC histogram).

Method: 3 members (tests/cluster/cluster.py), some writes, Prometheus on a
free port with a 1 s scrape and evaluation interval; the test reads
Prometheus' HTTP API (targets, rules, instant queries).  About 15 s.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from common.servers import against_etcd, free_port
from etcd3.etcdrpc import rpc_pb2

PROMETHEUS = "/usr/bin/prometheus"
SEL = '{job="etcd"}'

# The series each alert reads, and its expression over them.
ALERTS = [
    ("etcdMembersDown",
     'max without (endpoint) (sum without (instance) (up%s == bool 0) or '
     'count without (To) (sum without (instance) (rate('
     'etcd_network_peer_sent_failures_total%s[2m])) > 0.01)) > 0'
     % (SEL, SEL)),
    ("etcdInsufficientMembers",
     'sum without (instance) (up%s == bool 1) < ((count without (instance) '
     '(up%s) + 1) / 2)' % (SEL, SEL)),
    ("etcdNoLeader", 'etcd_server_has_leader%s == 0' % SEL),
    ("etcdHighNumberOfLeaderChanges",
     'increase((max without (instance) (etcd_server_leader_changes_seen_total'
     '%s))[15m:1m]) >= 4' % SEL),
    ("etcdHighNumberOfFailedGRPCRequests",
     '100 * sum without (grpc_type, grpc_code) (rate(grpc_server_handled_total'
     '{job="etcd",grpc_code!="OK"}[5m])) / sum without (grpc_type, grpc_code) '
     '(rate(grpc_server_handled_total%s[5m])) > 1' % SEL),
    ("etcdGRPCRequestsSlow",
     'histogram_quantile(0.99, sum without (grpc_type) (rate('
     'grpc_server_handling_seconds_bucket{job="etcd",grpc_type="unary"}[5m]'
     '))) > 0.15'),
    ("etcdMemberCommunicationSlow",
     'histogram_quantile(0.99, rate('
     'etcd_network_peer_round_trip_time_seconds_bucket%s[5m])) > 0.15' % SEL),
    ("etcdHighNumberOfFailedProposals",
     'rate(etcd_server_proposals_failed_total%s[15m]) > 5' % SEL),
    ("etcdHighFsyncDurations",
     'histogram_quantile(0.99, rate('
     'etcd_disk_wal_fsync_duration_seconds_bucket%s[5m])) > 0.5' % SEL),
    ("etcdHighCommitDurations",
     'histogram_quantile(0.99, rate('
     'etcd_disk_backend_commit_duration_seconds_bucket%s[5m])) > 0.25' % SEL),
    ("etcdBackendQuotaLowSpace",
     '(etcd_mvcc_db_total_size_in_bytes%s / etcd_server_quota_backend_bytes'
     '%s) * 100 > 95' % (SEL, SEL)),
    ("etcdExcessiveDatabaseGrowth",
     'predict_linear(etcd_mvcc_db_total_size_in_bytes%s[4h], 4 * 60 * 60) > '
     'etcd_server_quota_backend_bytes%s' % (SEL, SEL)),
    ("etcdDatabaseHighFragmentationRatio",
     '(last_over_time(etcd_mvcc_db_total_size_in_use_in_bytes%s[5m]) / '
     'last_over_time(etcd_mvcc_db_total_size_in_bytes%s[5m])) < 0.5 and '
     'etcd_mvcc_db_total_size_in_use_in_bytes%s > 104857600'
     % (SEL, SEL, SEL)),
]

# Every series the alerts read (histograms by their _bucket series).
SERIES = [
    "etcd_network_peer_sent_failures_total", "etcd_server_has_leader",
    "etcd_server_leader_changes_seen_total", "grpc_server_handled_total",
    "grpc_server_handling_seconds_bucket",
    "etcd_network_peer_round_trip_time_seconds_bucket",
    "etcd_server_proposals_failed_total",
    "etcd_disk_wal_fsync_duration_seconds_bucket",
    "etcd_disk_backend_commit_duration_seconds_bucket",
    "etcd_mvcc_db_total_size_in_bytes", "etcd_server_quota_backend_bytes",
    "etcd_mvcc_db_total_size_in_use_in_bytes",
]


def rules_yaml():
    lines = ["groups:", "- name: etcd", "  rules:"]
    for name, expr in ALERTS:
        lines += ["  - alert: %s" % name, "    expr: %s" % json.dumps(expr),
                  "    for: 0s"]
    return "\n".join(lines) + "\n"


def api(port, path, **params):
    url = "http://127.0.0.1:%d/api/v1/%s" % (port, path)
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]


@pytest.fixture
def prometheus():
    if not os.path.exists(PROMETHEUS):
        pytest.fail("%s missing: scripts/setup.sh installs Debian's "
                    "prometheus" % PROMETHEUS)
    root = tempfile.mkdtemp(prefix="cetcd-prom-")
    procs = []

    def start(targets):
        port = free_port()
        with open(os.path.join(root, "rules.yml"), "w") as f:
            f.write(rules_yaml())
        with open(os.path.join(root, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n"
                    "  evaluation_interval: 1s\n"
                    "rule_files: [rules.yml]\n"
                    "scrape_configs:\n- job_name: etcd\n"
                    "  static_configs:\n  - targets: %s\n"
                    % json.dumps(targets))
        check = subprocess.run(["/usr/bin/promtool", "check", "config",
                                os.path.join(root, "prometheus.yml")],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        log = open(os.path.join(root, "prometheus.log"), "w")
        procs.append(subprocess.Popen(
            [PROMETHEUS, "--config.file", os.path.join(root, "prometheus.yml"),
             "--storage.tsdb.path", os.path.join(root, "tsdb"),
             "--web.listen-address", "127.0.0.1:%d" % port],
            stdout=log, stderr=subprocess.STDOUT, cwd=root))
        deadline = time.time() + 30
        while True:
            try:
                api(port, "status/buildinfo")
                return port
            except OSError:
                assert time.time() < deadline, open(
                    os.path.join(root, "prometheus.log")).read()[-2000:]
                time.sleep(0.2)

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=20)
    shutil.rmtree(root, ignore_errors=True)


def test_mixin_alerts_find_their_series(make_cluster, prometheus):
    c = make_cluster(3, extra_args=["--metrics", "extensive"])
    c.wait_leader()
    for m in c.members:
        for i in range(10):
            m.kv().Put(rpc_pb2.PutRequest(key=b"prom/%d" % i, value=b"v"))
    targets = ["127.0.0.1:%d" % m.client_port for m in c.members]
    port = prometheus(targets)

    # Every target scraped, healthy.
    deadline = time.time() + 30
    while True:
        active = api(port, "targets")["activeTargets"]
        healthy = [t for t in active if t["health"] == "up"]
        if len(healthy) == 3:
            break
        assert time.time() < deadline, active
        time.sleep(0.5)

    # Every series the alerts read is there for every member.  (etcd 3.4
    # writes its peer send-failure counter only after a first failure, so
    # against etcd that alert leans on `up` alone until then; cetcd writes
    # it from the start.)
    wanted = [n for n in SERIES if not (
        against_etcd() and n == "etcd_network_peer_sent_failures_total")]
    deadline = time.time() + 30
    while True:
        missing = []
        for name in wanted:
            res = api(port, "query",
                      query="count by (instance) (%s%s)" % (name, SEL))
            have = {r["metric"]["instance"] for r in res["result"]}
            if have != set(targets):
                missing.append((name, sorted(set(targets) - have)))
        if not missing:
            break
        assert time.time() < deadline, "series missing: %s" % missing
        time.sleep(1)

    # The leader measured round trips to its followers.
    lead = c.leader()
    res = api(port, "query", query=(
        'sum(etcd_network_peer_round_trip_time_seconds_count'
        '{instance="127.0.0.1:%d"})' % lead.client_port))
    assert res["result"] and float(res["result"][0]["value"][1]) > 0

    # Every rule evaluated without error; none fires on a healthy cluster.
    deadline = time.time() + 30
    while True:
        groups = api(port, "rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        evaluated = [r for r in rules if r.get("lastEvaluation", "")
                     .startswith("0001") is False and r["health"] != "unknown"]
        if len(evaluated) == len(ALERTS):
            break
        assert time.time() < deadline, rules
        time.sleep(0.5)
    bad = [(r["name"], r["health"], r.get("lastError")) for r in rules
           if r["health"] != "ok"]
    assert not bad, bad
    firing = [r["name"] for r in rules if r["state"] != "inactive"]
    assert not firing, firing
