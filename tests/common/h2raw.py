"""A raw HTTP/2 client for tests that must misbehave on purpose.

Goal: speak HTTP/2 to a server the way no polite client would (streams past
the server's limit, requests whose bodies never end, a flow-control window
of 0, garbage after the preface) and read back every frame the server sends.
Method: frames are written by hand (RFC 9113 layout), header blocks are
encoded with hpack (shipped with python3-h2), and responses are parsed frame
by frame; nothing checks the server's SETTINGS on our side.
"""
import socket
import struct
import threading
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = (
    0, 1, 3, 4, 6, 7, 8)
END_STREAM, END_HEADERS, ACK = 1, 4, 1
SETTINGS_INITIAL_WINDOW_SIZE = 4
SETTINGS_MAX_CONCURRENT_STREAMS = 3


def frame(ftype, flags, stream_id, payload=b""):
    return (struct.pack(">I", len(payload))[1:] +
            bytes([ftype, flags]) + struct.pack(">I", stream_id) + payload)


def grpc_message(body):
    return b"\0" + struct.pack(">I", len(body)) + body


def pb_bytes_field(num, data):
    """A protobuf length-delimited field (enough for RangeRequest.key)."""
    n, out = len(data), b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            break
    return bytes([num << 3 | 2]) + out + data


class Conn:
    """One TCP connection speaking raw HTTP/2 as a client."""

    def __init__(self, port, settings=(), host="127.0.0.1", timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.next_id = 1
        self.lock = threading.Lock()  # one frame writer at a time
        payload = b"".join(struct.pack(">HI", k, v) for k, v in settings)
        self.send(PREFACE + frame(SETTINGS, 0, 0, payload))

    def send(self, data):
        with self.lock:
            self.sock.sendall(data)

    def headers(self, stream_id, path, end_stream=False, extra=()):
        block = self.enc.encode([
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", "test"), ("content-type", "application/grpc"),
            ("te", "trailers")] + list(extra))
        flags = END_HEADERS | (END_STREAM if end_stream else 0)
        return frame(HEADERS, flags, stream_id, block)

    def request(self, path, body, extra=()):
        """Frames of one whole unary call; returns (stream id, bytes)."""
        sid = self.next_id
        self.next_id += 2
        msg = grpc_message(body)
        out = self.headers(sid, path, extra=extra)
        for i in range(0, len(msg), 16384):
            last = i + 16384 >= len(msg)
            out += frame(DATA, END_STREAM if last else 0, sid,
                         msg[i:i + 16384])
        return sid, out

    def read_frame(self, timeout=10):
        """(type, flags, stream id, payload), or None when the server closed
        the connection; the server's SETTINGS are acknowledged as they come.
        Raises socket.timeout."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buf) >= 9:
                n = struct.unpack(">I", b"\0" + self.buf[:3])[0]
                if len(self.buf) >= 9 + n:
                    h, p = self.buf[:9], self.buf[9:9 + n]
                    self.buf = self.buf[9 + n:]
                    sid = struct.unpack(">I", h[5:9])[0] & 0x7FFFFFFF
                    if h[3] == SETTINGS and not h[4] & ACK:
                        # Acknowledged at once: the server's settings
                        # (its stream window among them) apply from then.
                        self.send(frame(SETTINGS, ACK, 0))
                    return h[3], h[4], sid, p
            try:
                d = self.sock.recv(1 << 16)
            except ConnectionResetError:
                return None
            if not d:
                return None
            self.buf += d

    def read_stream(self, sid, timeout=10, goaway_fails=False):
        """Reads frames until stream sid ends (PINGs answered); returns its
        headers (trailers included) as one dict, and its DATA bytes.  Fails
        when the server closes the connection (or sends GOAWAY, with
        goaway_fails) first."""
        hdrs, data = {}, b""
        deadline = time.time() + timeout
        while time.time() < deadline:
            f = self.read_frame(timeout=deadline - time.time())
            assert f is not None, "server closed the connection"
            ftype, flags, fsid, payload = f
            assert not (goaway_fails and ftype == GOAWAY), \
                "GOAWAY: %r" % payload[8:]
            if ftype == HEADERS:
                h = self.decode_headers(payload)
                if fsid == sid:
                    hdrs.update(h)
            elif ftype == DATA and fsid == sid:
                data += payload
            elif ftype == PING and not flags & ACK:
                self.send(frame(PING, ACK, 0, payload))
            if fsid == sid and flags & END_STREAM and ftype in (HEADERS,
                                                               DATA):
                return hdrs, data
        raise AssertionError("stream %d did not end" % sid)

    def decode_headers(self, payload):
        return {k: v for k, v in self.dec.decode(payload, raw=True)}

    def closed_within(self, seconds):
        """True when the server closes the connection within seconds
        (frames it sends meanwhile are read and dropped)."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                if self.read_frame(timeout=max(0.01,
                                               deadline - time.time())) is None:
                    return True
            except socket.timeout:
                return False
        return False

    def close(self):
        self.sock.close()
