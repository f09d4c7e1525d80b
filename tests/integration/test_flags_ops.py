"""Server flags and behaviours of issue 20 that operators rely on.

Goal:
  sd_notify   a member run under systemd with Type=notify (NOTIFY_SOCKET
              set) sends one "READY=1" datagram once it serves clients,
              to a path or an abstract ('@') socket, as etcd 3.4 does;
              without NOTIFY_SOCKET it starts as before.
Method: the test binds the AF_UNIX datagram socket systemd would, starts
the member with NOTIFY_SOCKET naming it, and reads the datagram; the member
must already answer a Range when it arrives.  Runs against etcd 3.4.23 as
well (CETCD_TEST_AGAINST_ETCD=1).
"""
import os
import socket

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
