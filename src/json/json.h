/*
 * json.h - the proto3 JSON mapping of any protobuf-c message, as etcd 3.4's
 * grpc-gateway writes and reads it (golang/protobuf jsonpb with
 * OrigName=true, EmitDefaults=false, EnumsAsInts=false, unknown fields
 * ignored).  One codec for the project: the /v3 gateway (api/gateway.c)
 * uses it, the logs and a JSON output of cetcdctl may share it.  Driven by
 * the protobuf-c descriptors (ProtobufCMessageDescriptor and its field
 * descriptors), so one encoder and one decoder serve every message.
 *
 * Writing (json_pb_encode), byte for byte as jsonpb writes:
 *   - fields in the descriptor's order (by number; every etcd message
 *     declares its fields in number order, which is jsonpb's struct order),
 *     under their proto names ("cluster_id", "peerURLs");
 *   - a field at its default (0, false, "", empty bytes, no message, no
 *     elements) is left out, but a set oneof member is always written;
 *   - 64-bit integers as decimal strings ("revision":"5"), 32-bit ones as
 *     numbers, bytes as standard base64 with padding, enums by value name
 *     (a value with no name: its number), nested messages as objects,
 *     repeated fields as arrays;
 *   - strings escaped as Go's encoding/json does (", \, control
 *     characters, <, >, &, U+2028, U+2029; invalid UTF-8 becomes U+FFFD).
 *   The writer is ours because no library writes Go's escaping; the
 *   parsing is json-c's (Debian libjson-c).
 *
 * Reading (json_pb_decode), what jsonpb accepts:
 *   - one JSON value; what follows it is ignored (Go's json.Decoder reads
 *     one value); an empty body, blanks only, or null is the empty message;
 *   - field names as proto names or lowerCamelCase JSON names; unknown
 *     names are ignored; a repeated name: the last one wins; null: default;
 *   - integers as JSON integers or as decimal strings, in the field's
 *     range; bools as true/false; bytes as standard base64 (padding
 *     required, \r and \n skipped); enums by name or number.
 *   A refusal gets a message as close to jsonpb's as we can make it
 *   ("illegal base64 data at input byte 0", "unknown value \"X\" for enum
 *   etcdserverpb.RangeRequest_SortOrder", "json: cannot unmarshal string
 *   into Go value of type int64"); syntax errors get json-c's description
 *   (Go's texts, "invalid character 'b' looking for beginning of object
 *   key string", are not reproduced).
 *
 * Limits: input of at most JSON_PB_INPUT_MAX bytes (the caller bounds its
 * bodies before, this is a last guard) and JSON_PB_DEPTH_MAX levels of
 * nesting (a deeper document is refused; etcd's deepest request, nested
 * txns, is far inside it for any request --max-request-bytes lets in...
 * but txns may nest without bound in etcd, which Go's 10000-deep decoder
 * bounds instead).
 *
 * Threads: none kept; every function is reentrant.
 */
#ifndef CETCD_JSON_JSON_H
#define CETCD_JSON_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#define JSON_PB_DEPTH_MAX 64
#define JSON_PB_INPUT_MAX (64u << 20)
#define JSON_PB_ERR_MAX 256 /* a refusal's message, with its NUL */

/* A growing output buffer (mem_ allocations).  Zero-initialise it; free
 * p with mem_free when done. */
struct json_buf {
    char *p;    /* the bytes written (not NUL-terminated) */
    size_t n;   /* used */
    size_t cap; /* allocated */
    bool nomem; /* an allocation failed: p holds a truncated text */
};

/* json_buf_put appends n bytes.  json_buf_str appends a C string. */
void json_buf_put(struct json_buf *b, const void *p, size_t n);
void json_buf_str(struct json_buf *b, const char *s);

/* json_pb_string appends s (n bytes) as a JSON string escaped as Go's
 * encoding/json does (quotes included). */
void json_pb_string(struct json_buf *b, const char *s, size_t n);

/* json_pb_encode appends m as jsonpb writes it.  Errors: ERR_NOMEM (b is
 * then unusable but still to be freed). */
int json_pb_encode(const ProtobufCMessage *m, struct json_buf *b);

/* The outcome of a decode beyond the message. */
struct json_pb_info {
    /* a string field held a NUL byte ("\u0000"): its C string ends there
     * (svc_cluster_member_add wants such URLs refused by the decoder's
     * caller) */
    bool nul_in_string;
};

/* json_pb_decode reads text (n bytes) as a message of type d into *m_out,
 * allocated as protobuf-c's default allocator would (free it with
 * protobuf_c_message_free_unpacked(m, NULL)).  info_out may be NULL.
 * Errors: ERR_INVAL with the reason in err (cap bytes, NUL-terminated;
 * JSON_PB_ERR_MAX is enough), ERR_NOMEM. */
int json_pb_decode(const ProtobufCMessageDescriptor *d, const char *text,
                   size_t n, ProtobufCMessage **m_out,
                   struct json_pb_info *info_out, char *err, size_t cap);

/* json_pb_decode_next reads the next value of a sequence of JSON values
 * (concatenated or separated by blanks and newlines, as Go's json.Decoder
 * reads a gateway stream's body) as json_pb_decode reads one, and sets
 * *used_out to the bytes it took, through the end of that value: the
 * caller goes on at text + *used_out.  Errors: ERR_NOTFOUND (only blanks
 * left: the end of the sequence), ERR_INVAL with the reason in err,
 * ERR_NOMEM.  After an error the sequence is not to be read further. */
int json_pb_decode_next(const ProtobufCMessageDescriptor *d,
                        const char *text, size_t n, size_t *used_out,
                        ProtobufCMessage **m_out, char *err, size_t cap);

/* A reader of a sequence of JSON values that arrives in pieces (a
 * gateway stream's request body that stays open).  One json-c tokener
 * kept between the pieces finds where each value ends, whatever the
 * pieces' sizes; the value's bytes (kept, at most max) are then read in
 * one shot as json_pb_decode reads them (json-c's incremental parse takes
 * some malformed numbers its one-shot parse refuses), so each byte is
 * parsed twice at most.  Owned by one thread at a time. */
struct json_pb_reader;

/* json_pb_reader_new makes a reader; json_pb_reader_free frees it (NULL
 * is fine).  Errors: ERR_NOMEM. */
int json_pb_reader_new(struct json_pb_reader **r_out);
void json_pb_reader_free(struct json_pb_reader *r);

/* json_pb_reader_next feeds text[0..n) (more of the sequence) and reads
 * the next value as a message of type d, as json_pb_decode_next does.
 * end: no bytes follow text (the body ended; n may be 0).  Returns 0 with
 * *m_out and *used_out (the bytes of text taken, through the value's
 * end: call again with the rest), ERR_MORE (all n taken, the value is not
 * complete: call again with the next piece), ERR_NOTFOUND (end, and only
 * blanks since the last value), ERR_INVAL (why in err; the sequence is
 * not to be read further; also a value longer than max bytes), ERR_NOMEM. */
int json_pb_reader_next(struct json_pb_reader *r,
                        const ProtobufCMessageDescriptor *d,
                        const char *text, size_t n, bool end, size_t max,
                        size_t *used_out, ProtobufCMessage **m_out,
                        char *err, size_t cap);

#endif
