#!/usr/bin/python3
"""rpc_seeds.py - writes the seed corpus of fuzz_rpc (fuzz/corpus/rpc):
HTTP/2 frames a gRPC client sends after the connection preface (which the
target adds itself).  Headers are HPACK literals without indexing, no
Huffman, so that the fuzzer can change them byte by byte.

    /usr/bin/python3 fuzz/rpc_seeds.py fuzz/corpus/rpc
"""
import os
import struct
import sys

DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def hpack(pairs):
    out = b""
    for k, v in pairs:
        out += b"\x00" + bytes([len(k)]) + k + bytes([len(v)]) + v
    return out


def req_headers(path, extra=()):
    return hpack([(b":method", b"POST"), (b":scheme", b"http"),
                  (b":path", path), (b":authority", b"127.0.0.1:2379"),
                  (b"content-type", b"application/grpc"),
                  (b"te", b"trailers")] + list(extra))


def msg(b, compressed=0, length=None):
    n = len(b) if length is None else length
    return bytes([compressed]) + struct.pack(">I", n) + b


def unary(sid, path, body, extra=()):
    return frame(HEADERS, END_HEADERS, sid, req_headers(path, extra)) + \
        frame(DATA, END_STREAM, sid, body)


SEEDS = {
    "range": frame(SETTINGS, 0, 0) +
    unary(1, b"/etcdserverpb.KV/Range", msg(b"\x0a\x03foo")),
    "put_md": unary(1, b"/etcdserverpb.KV/Put", msg(b"\x0a\x01k\x12\x01v"),
                    [(b"token", b"abc.def"), (b"grpc-timeout", b"5S")]),
    "two_calls": unary(1, b"/etcdserverpb.KV/Range", msg(b"\x0a\x01a")) +
    unary(3, b"/etcdserverpb.KV/Range", msg(b"")),
    "split_msg": frame(HEADERS, END_HEADERS, 1,
                       req_headers(b"/etcdserverpb.KV/Range")) +
    frame(DATA, 0, 1, msg(b"\x0a\x05hello")[:3]) +
    frame(DATA, END_STREAM, 1, msg(b"\x0a\x05hello")[3:]),
    "too_large": frame(HEADERS, END_HEADERS, 1,
                       req_headers(b"/etcdserverpb.KV/Range")) +
    frame(DATA, 0, 1, msg(b"xx", length=1 << 30)),
    "unknown": unary(1, b"/etcdserverpb.Nope/X", msg(b"")) +
    unary(3, b"/etcdserverpb.KV/Nope", msg(b"")) +
    unary(5, b"nopath", msg(b"")),
    "gzip": unary(1, b"/etcdserverpb.KV/Range", msg(b"\x1f\x8b", 1),
                  [(b"grpc-encoding", b"gzip")]),
    "watch": frame(HEADERS, END_HEADERS, 1,
                   req_headers(b"/etcdserverpb.Watch/Watch")) +
    frame(DATA, 0, 1, msg(b"\x0a\x03\x0a\x01k") + msg(b"")) +
    frame(DATA, END_STREAM, 1, msg(b"\x12\x02\x08\x01")),
    "watch_reset": frame(HEADERS, END_HEADERS, 1,
                         req_headers(b"/etcdserverpb.Watch/Watch")) +
    frame(DATA, 0, 1, msg(b"\x0a\x03\x0a\x01k")) +
    frame(RST, 0, 1, struct.pack(">I", 8)),
    "reset_call": frame(HEADERS, END_HEADERS, 1,
                        req_headers(b"/etcdserverpb.KV/Range")) +
    frame(RST, 0, 1, struct.pack(">I", 8)) +
    unary(3, b"/etcdserverpb.KV/Range", msg(b"")),
    "ping_window_goaway": frame(PING, 0, 0, b"12345678") +
    frame(WINDOW, 0, 0, struct.pack(">I", 1 << 20)) +
    unary(1, b"/etcdserverpb.KV/Range", msg(b"")) +
    frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)),
}


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/rpc"
    os.makedirs(d, exist_ok=True)
    for name, b in SEEDS.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(b)


if __name__ == "__main__":
    main()
