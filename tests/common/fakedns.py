"""A DNS server for the discovery tests, and a way to run a program that
uses it as its only resolver.

FakeDNS(records) answers UDP queries on <some 127.x address>:53 from
records: {("name.", "SRV"): [(priority, weight, port, "target.")],
("name.", "A"): ["127.0.0.1"]}; a name it has no record of any type for
is NXDOMAIN, a name with records of other types an empty NOERROR answer.
Names are matched case-insensitively, with their trailing dot.

resolved_by(dns, argv) wraps argv so that it runs in a mount namespace of
its own where /etc/resolv.conf names only that server (needs root: CI
runs as root).  The program under test resolves as it always does
(libresolv or Go's resolver reading /etc/resolv.conf); nothing in it
knows about the test.
"""

import os
import socket
import struct
import tempfile
import threading

TYPES = {"A": 1, "SRV": 33, "AAAA": 28}


def _name(labels):
    out = b""
    for part in labels.rstrip(".").split("."):
        if part:
            out += bytes([len(part)]) + part.encode()
    return out + b"\0"


def _read_qname(msg, pos):
    labels = []
    while msg[pos]:
        n = msg[pos]
        labels.append(msg[pos + 1:pos + 1 + n].decode())
        pos += 1 + n
    return ".".join(labels).lower() + ".", pos + 1


class FakeDNS:
    def __init__(self, records):
        self.records = {(k[0].lower(), k[1]): v for k, v in records.items()}
        self.queries = []
        self.sock = None
        for last in range(2, 250):
            addr = "127.0.53.%d" % last
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.bind((addr, 53))
            except OSError:
                s.close()
                continue
            self.sock, self.addr = s, addr
            break
        assert self.sock is not None, "no free 127.0.53.x:53"
        fd, self.resolv_conf = tempfile.mkstemp(prefix="resolv-")
        with os.fdopen(fd, "w") as f:
            f.write("nameserver %s\noptions timeout:1 attempts:1\n"
                    % self.addr)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _answer(self, query):
        qid, _flags, qd = struct.unpack(">HHH", query[:6])
        name, pos = _read_qname(query, 12)
        qtype, _qclass = struct.unpack(">HH", query[pos:pos + 4])
        question = query[12:pos + 4]
        kind = next((k for k, v in TYPES.items() if v == qtype), None)
        self.queries.append((name, kind))
        known = any(n == name for n, _ in self.records)
        answers = []
        for rdata in self.records.get((name, kind), []):
            if kind == "A":
                rd = socket.inet_aton(rdata)
            elif kind == "SRV":
                prio, weight, port, target = rdata
                rd = struct.pack(">HHH", prio, weight, port) + _name(target)
            else:
                continue
            answers.append(b"\xc0\x0c" + struct.pack(">HHIH", qtype, 1, 5,
                                                     len(rd)) + rd)
        rcode = 0 if known else 3
        head = struct.pack(">HHHHHH", qid, 0x8180 | rcode, 1, len(answers),
                           0, 0)
        return head + question + b"".join(answers)

    def _serve(self):
        while True:
            try:
                query, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            try:
                self.sock.sendto(self._answer(query), peer)
            except (IndexError, struct.error, UnicodeDecodeError):
                continue

    def close(self):
        self.sock.close()
        os.unlink(self.resolv_conf)


def resolved_by(dns, argv):
    return ["unshare", "-m", "--", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"',
            dns.resolv_conf] + list(argv)
