"""A raw HTTP/1.1 client for the /v3 gateway's streams (tests only).

curl is the real client the comparisons use; this one is for what curl
cannot do on purpose: keep a stream open without reading it (a slow
reader, with a small receive buffer), read it line by line with a
deadline, and drop the connection at a chosen moment (a client that goes
away).  It sends one POST with a Content-Length body and decodes the
chunked answer into the gateway's newline-delimited JSON lines.
"""

import json
import socket
import time


class GwStream:
    def __init__(self, port, path, body, rcvbuf=None, host="127.0.0.1",
                 chunked=False):
        """chunked: the body is sent with Transfer-Encoding: chunked and
        stays open: body (if any) is its first chunk, send() adds more,
        end_body() ends it."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect((host, port))
        if isinstance(body, str):
            body = body.encode()
        if chunked:
            self.sock.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\n"
                              b"Content-Type: application/json\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n"
                              % (path.encode(), host.encode()))
            if body:
                self.send(body)
        else:
            self.sock.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\n"
                              b"Content-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n%s"
                              % (path.encode(), host.encode(), len(body),
                                 body))
        self.raw = bytearray()  # bytes read, not yet decoded
        self.status = None    # the answer's status, once its head is in
        self.headers = {}     # its headers (lower-case names)
        self.body = bytearray()  # the decoded body, not yet split into lines
        self.ended = False    # the last chunk (or the whole body) is in
        self.closed = False   # the server closed the connection
        self._left = None     # bytes left of a Content-Length body
        self._chunk = None    # size of the chunk being read, once known

    def close(self):
        self.sock.close()

    def send(self, data):
        """One more chunk of an open (chunked) request body."""
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    def send_raw(self, data):
        """Bytes as they are (framing of the test's own)."""
        self.sock.sendall(data)

    def end_body(self):
        self.sock.sendall(b"0\r\n\r\n")

    def _read(self, deadline):
        left = deadline - time.time()
        if left <= 0:
            return False
        self.sock.settimeout(left)
        try:
            b = self.sock.recv(65536)
        except socket.timeout:
            return False
        if not b:
            self.closed = True
            return False
        self.raw += b
        return True

    def _head(self):
        if self.status is not None or b"\r\n\r\n" not in self.raw:
            return
        end = self.raw.index(b"\r\n\r\n")
        head = bytes(self.raw[:end])
        del self.raw[:end + 4]
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        for line in lines[1:]:
            k, v = line.split(":", 1)
            self.headers[k.strip().lower()] = v.strip()
        if "content-length" in self.headers:
            self._left = int(self.headers["content-length"])

    def _dechunk(self):
        # A large chunk arrives in many reads: its size is parsed once and
        # its bytes taken once all are in (no copying per read).
        if self._left is not None:
            take = self.raw[:self._left]
            self.body += take
            del self.raw[:len(take)]
            self._left -= len(take)
            self.ended = self._left == 0
            return
        while not self.ended:
            if self._chunk is None:
                eol = self.raw.find(b"\r\n")
                if eol < 0:
                    return
                self._chunk = int(bytes(self.raw[:eol]), 16)
                del self.raw[:eol + 2]
            n = self._chunk
            if n == 0:
                self.ended = True
                return
            if len(self.raw) < n + 2:
                return
            assert self.raw[n:n + 2] == b"\r\n", "bad chunk framing"
            self.body += self.raw[:n]
            del self.raw[:n + 2]
            self._chunk = None

    def pump(self, deadline):
        """Reads what arrives before deadline (or until the answer
        ends); False when nothing more came."""
        got = self._read(deadline)
        self._head()
        if self.status is not None:
            self._dechunk()
        return got

    def next_json(self, timeout=10.0):
        """The next line as JSON, or None when none came in time or the
        answer ended without one."""
        deadline = time.time() + timeout
        while b"\n" not in self.body:
            if self.ended or self.closed:
                break
            if not self.pump(deadline) and time.time() >= deadline:
                break
        if b"\n" not in self.body:
            return None
        end = self.body.index(b"\n")
        line = bytes(self.body[:end])
        del self.body[:end + 1]
        return json.loads(line)

    def rest(self, timeout):
        """Reads until the answer ends, the server closes or timeout;
        returns the body bytes not yet taken."""
        deadline = time.time() + timeout
        while not self.ended and not self.closed and time.time() < deadline:
            self.pump(deadline)
        out, self.body = bytes(self.body), bytearray()
        return out
