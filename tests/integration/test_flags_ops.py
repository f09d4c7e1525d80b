"""Server flags and behaviours of issue 20 that operators rely on.

Goal:
  sd_notify   a member run under systemd with Type=notify (NOTIFY_SOCKET
              set) sends one "READY=1" datagram once it serves clients,
              to a path or an abstract ('@') socket, as etcd 3.4 does;
              without NOTIFY_SOCKET it starts as before.
  --grpc-keepalive-min-time/-interval/-timeout
              grpc-go's server keepalive: a client PINGing more often than
              the min time (every 2 h while it has no stream open) is sent
              GOAWAY ENHANCE_YOUR_CALM "too_many_pings" after 2 strikes; a
              connection idle for the interval gets a PING and is closed
              when nothing comes back within the timeout.
Method: sd_notify: the test binds the AF_UNIX datagram socket systemd
would, starts the member with NOTIFY_SOCKET naming it, and reads the
datagram; the member must already answer a Range when it arrives.
Keepalive: raw HTTP/2 connections (python3-h2) that PING at chosen
intervals, hold a stream open, or stay silent.  All run against etcd
3.4.23 as well (CETCD_TEST_AGAINST_ETCD=1).
"""
import os
import socket
import time

import h2.config
import h2.connection
import h2.events

import pytest

from etcd3.etcdrpc import rpc_pb2 as pb


@pytest.mark.parametrize("abstract", [False, True])
def test_sd_notify_ready(make_server, monkeypatch, abstract):
    s = make_server(start=False)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = "@cetcd-notify-%d-%d" % (os.getpid(), s.client_port)
        sock.bind("\0" + name[1:])
    else:
        name = os.path.join(s.root, "notify.sock")
        sock.bind(name)
    sock.settimeout(60)
    monkeypatch.setenv("NOTIFY_SOCKET", name)
    try:
        s.start()
        msg = sock.recv(4096)
        assert msg == b"READY=1"
        # READY=1 is sent once the member serves.
        s.kv().Range(pb.RangeRequest(key=b"a"), timeout=10)
        sock.settimeout(0.5)
        with pytest.raises(socket.timeout):
            sock.recv(4096)  # only one datagram
    finally:
        sock.close()


# -- --grpc-keepalive-* ----------------------------------------------------

def h2_open(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def pump(sock, conn, seconds, send=True):
    """Read for up to `seconds`; returns (events, eof).  With send, what h2
    queues in answer (SETTINGS and PING acks) is sent."""
    evs = []
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return evs, False
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return evs, False
        except ConnectionResetError:
            return evs, True
        if not data:
            return evs, True
        evs += conn.receive_data(data)
        out = conn.data_to_send()
        if send and out:
            sock.sendall(out)
        if any(isinstance(e, h2.events.ConnectionTerminated) for e in evs):
            return evs, False


def goaway(evs):
    t = [e for e in evs if isinstance(e, h2.events.ConnectionTerminated)]
    return (t[0].error_code, t[0].additional_data) if t else None


def pings(sock, conn, n, gap):
    evs = []
    for i in range(n):
        conn.ping(b"%08d" % i)
        sock.sendall(conn.data_to_send())
        e, eof = pump(sock, conn, gap)
        evs += e
        if goaway(evs) or eof:
            break
    return evs


def open_watch(sock, conn):
    conn.send_headers(1, [(":method", "POST"), (":scheme", "http"),
                          (":path", "/etcdserverpb.Watch/Watch"),
                          (":authority", "localhost"),
                          ("content-type", "application/grpc"),
                          ("te", "trailers")])
    sock.sendall(conn.data_to_send())


def test_keepalive_idle_pings_get_goaway(make_server):
    """No stream open: a second PING within 2 h is a strike; the 4th PING
    gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (grpc-go)."""
    s = make_server()
    sock, conn = h2_open(s.client_port)
    try:
        pump(sock, conn, 0.3)
        evs = pings(sock, conn, 6, 0.2)
        assert goaway(evs) == (11, b"too_many_pings")
    finally:
        sock.close()


@pytest.mark.parametrize("min_time, refused", [(None, True),
                                               ("100ms", False)])
def test_keepalive_min_time(make_server, min_time, refused):
    """A stream open: PINGs 300 ms apart break the default 5 s min time
    (GOAWAY), not --grpc-keepalive-min-time=100ms."""
    args = ["--grpc-keepalive-min-time", min_time] if min_time else []
    s = make_server(extra_args=args)
    sock, conn = h2_open(s.client_port)
    try:
        pump(sock, conn, 0.3)
        open_watch(sock, conn)
        pump(sock, conn, 0.3)
        evs = pings(sock, conn, 8, 0.3)
        if refused:
            assert goaway(evs) == (11, b"too_many_pings")
        else:
            assert goaway(evs) is None
            assert sum(isinstance(e, h2.events.PingAckReceived)
                       for e in evs) == 8
    finally:
        sock.close()


@pytest.mark.parametrize("answer", [False, True])
def test_keepalive_interval_timeout(make_server, answer):
    """--grpc-keepalive-interval=1s --grpc-keepalive-timeout=1s: an idle
    connection gets a PING after about 1 s; one that never answers is
    closed about 1 s later, one that answers stays."""
    s = make_server(extra_args=["--grpc-keepalive-interval", "1s",
                                "--grpc-keepalive-timeout", "1s"])
    sock, conn = h2_open(s.client_port)
    try:
        evs, eof = pump(sock, conn, 0.3)  # SETTINGS, acked
        t0 = time.monotonic()
        evs, eof = pump(sock, conn, 15 if not answer else 5, send=answer)
        got_ping = any(isinstance(e, h2.events.PingReceived) for e in evs)
        assert got_ping
        if answer:
            assert not eof and goaway(evs) is None
        else:
            assert eof or goaway(evs) is not None
            assert 1.5 <= time.monotonic() - t0 <= 12
    finally:
        sock.close()
