/*
 * h2_scan.c - the client's HTTP/2 frames, looked at before nghttp2 sees
 * them.
 *
 * One job: drop the frames that grpc-go (etcd's server) ignores and that
 * nghttp2 answers with a connection error, so that a client which sends
 * them loses nothing more than with etcd.  These are RST_STREAM and
 * WINDOW_UPDATE frames for a stream the client never opened (an idle
 * stream, RFC 9113 5.1).  gRPC's C core client sends such a RST_STREAM
 * when a call is cancelled right after it started: the stream has its id
 * but its HEADERS were never written (grpc/grpc issues 19655 and 38758).
 * nghttp2 then sends GOAWAY PROTOCOL_ERROR "RST_STREAM: stream in idle"
 * and every call on the connection fails with UNAVAILABLE; grpc-go looks
 * the stream up, finds nothing and goes on.
 *
 * A stream is idle here when its id is even (the server opens none) or
 * higher than every id a HEADERS frame of the client carried so far:
 * nghttp2's own rule for a server (its last received stream id).  A frame
 * of another length than 4 is left to nghttp2 (a FRAME_SIZE_ERROR in
 * both), and so is stream 0.  DATA on an idle stream is left to nghttp2
 * too (a connection error; grpc-go counts it against the connection's
 * window and ignores it): dropping it here would take it out of the
 * window's count, and no client is known to send it.
 *
 * The scan follows frame boundaries across reads: the client magic (24
 * bytes), then each frame's 9-byte header, then its payload.  A header
 * that a read cuts is held in the scanner until it is whole (the frame
 * may be one to drop); everything else is passed on in place, one call
 * per contiguous run of kept bytes (one per read when nothing is dropped).
 */

#include <string.h>

#include "rpc/rpc_int.h"

#define H2_MAGIC_LEN 24
#define H2_RST_STREAM 3
#define H2_HEADERS 1
#define H2_WINDOW_UPDATE 8

/* frame_start: s's state for the frame whose header is h; true when the
 * whole frame is to be dropped. */
static bool frame_start(struct rpc__h2_scan *s, const uint8_t *h)
{
    uint32_t len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
    uint8_t type = h[3];
    uint32_t id = ((uint32_t)h[5] & 0x7f) << 24 | (uint32_t)h[6] << 16 |
                  (uint32_t)h[7] << 8 | h[8];
    s->left = len;
    s->dropping = false;
    if (type == H2_HEADERS && (id & 1) != 0 && id > s->max_id)
        s->max_id = id;
    if ((type != H2_RST_STREAM && type != H2_WINDOW_UPDATE) || len != 4 ||
        id == 0)
        return false;
    if ((id & 1) != 0 && id <= s->max_id)
        return false;
    s->dropping = true;
    s->dropped++;
    return true;
}

bool rpc__h2_scan(struct rpc__h2_scan *s, const uint8_t *p, size_t n,
                  rpc__h2_pass_fn pass, void *ud)
{
    const uint8_t *run = p; /* kept bytes from here to p: not passed yet */
    while (n > 0) {
        size_t k;
        if (s->magic_n < H2_MAGIC_LEN) {
            k = H2_MAGIC_LEN - s->magic_n;
            k = k < n ? k : n;
            s->magic_n = (uint8_t)(s->magic_n + k);
        } else if (s->left > 0) {
            k = s->left < n ? s->left : n;
            s->left -= (uint32_t)k;
            if (s->dropping) {
                if (p > run && !pass(ud, run, (size_t)(p - run)))
                    return false;
                run = p + k;
            }
        } else if (s->hdr_n == 0 && n >= RPC__H2_FRAME_HDLEN) {
            k = RPC__H2_FRAME_HDLEN;
            if (frame_start(s, p)) {
                if (p > run && !pass(ud, run, (size_t)(p - run)))
                    return false;
                run = p + k;
            }
        } else {
            /* A header cut by the read: held until whole. */
            if (p > run && !pass(ud, run, (size_t)(p - run)))
                return false;
            k = RPC__H2_FRAME_HDLEN - s->hdr_n;
            k = k < n ? k : n;
            memcpy(s->hdr + s->hdr_n, p, k);
            s->hdr_n = (uint8_t)(s->hdr_n + k);
            run = p + k;
            if (s->hdr_n == RPC__H2_FRAME_HDLEN) {
                s->hdr_n = 0;
                if (!frame_start(s, s->hdr) &&
                    !pass(ud, s->hdr, RPC__H2_FRAME_HDLEN))
                    return false;
            }
        }
        p += k;
        n -= k;
    }
    return p == run || pass(ud, run, (size_t)(p - run));
}
